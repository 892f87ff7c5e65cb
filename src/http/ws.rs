//! The WebSocket feed: live job updates as JSON text messages (`type`, `jobId`, `progress`,
//! `status` and the other live fields). The token is checked before the upgrade. On connect
//! the client gets a `snapshot` message per active job, then every update published since
//! it subscribed (the subscription comes first, so none falls between the two). Status
//! messages go out at once and are never dropped; progress is coalesced to at most four
//! messages a second per job. What a session holds for a client that does not read is
//! bounded (`domain::feed`): past the bound the client gets `{"type":"resync"}` and a fresh
//! snapshot, and one that falls behind again before it read that is closed with code 4008
//! (`CLOSE_TOO_SLOW`), from which the dashboard reconnects. A client that stops answering
//! pings is dropped.

use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_web_actors::ws;
use sea_orm::DatabaseConnection;

use super::auth::{authenticate, TokenPlace};
use crate::actors::bus::{EventBus, JobUpdate, Resync, SharedOutbox, Subscribe, TakeOutbox, Unsubscribe};
use crate::actors::teardown::dropped_in_runtime;
use crate::domain::feed::{Next, CLOSE_TOO_SLOW};
use crate::domain::job::JobStatus;
use crate::error::ErrorBody;
use crate::http::state::AppState;
use crate::repo;

const HEARTBEAT: Duration = Duration::from_secs(10);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const FLUSH: Duration = Duration::from_millis(250);
/// The ping sent after a resync's snapshot: its pong means the client read them.
const RESYNC_PING: &[u8] = b"resync";

pub struct WsSession {
    bus: Addr<EventBus>,
    db: DatabaseConnection,
    subscription: Option<(u64, SharedOutbox)>,
    last_seen: Instant,
}

impl WsSession {
    fn send(ctx: &mut ws::WebsocketContext<Self>, message: &impl serde::Serialize) {
        if let Ok(text) = serde_json::to_string(message) {
            ctx.text(text);
        }
    }

    /// Sends what the outbox holds for the client now, or the resync or close it is owed.
    fn take(&mut self, ctx: &mut ws::WebsocketContext<Self>) {
        let Some((_, outbox)) = &self.subscription else { return };
        let next = outbox.lock().take();
        match next {
            Next::Send(texts) => {
                for text in texts {
                    ctx.text(text);
                }
            }
            Next::Resync => {
                Self::send(ctx, &Resync::MESSAGE);
                self.send_snapshot(ctx, true);
            }
            Next::Close => {
                tracing::info!("closing a live-feed client that fell behind twice");
                ctx.close(Some(ws::CloseReason {
                    code: ws::CloseCode::Other(CLOSE_TOO_SLOW),
                    description: Some("fell behind the live feed; reconnect".into()),
                }));
                ctx.stop();
            }
        }
    }

    /// Reads the active jobs and sends a `snapshot` of each (holding every other message of
    /// the session back until it is sent), then what the outbox gathered meanwhile.
    fn send_snapshot(&mut self, ctx: &mut ws::WebsocketContext<Self>, after_resync: bool) {
        let db = self.db.clone();
        // A feed still open when the server stops is dropped with its HTTP worker's thread,
        // outside the runtime (`actors::teardown`).
        dropped_in_runtime(
            async move { repo::jobs::in_statuses(&db, &[JobStatus::Analyzing, JobStatus::Encoding]).await },
        )
        .into_actor(self)
        .then(move |active, this, ctx| {
            match active {
                Ok(active) => {
                    for job in &active {
                        Self::send(ctx, &JobUpdate::of("snapshot", job));
                    }
                    if after_resync {
                        ctx.ping(RESYNC_PING);
                    }
                    this.take(ctx);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the active jobs for a live-feed snapshot");
                    ctx.close(Some(ws::CloseCode::Error.into()));
                    ctx.stop();
                }
            }
            fut::ready(())
        })
        .wait(ctx);
    }
}

impl Actor for WsSession {
    type Context = ws::WebsocketContext<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let me = ctx.address().recipient();
        self.bus
            .send(Subscribe { session: me })
            .into_actor(self)
            .then(|subscribed, this, ctx| {
                match subscribed {
                    Ok(subscription) => {
                        this.subscription = Some(subscription);
                        this.send_snapshot(ctx, false);
                    }
                    Err(_) => ctx.stop(),
                }
                fut::ready(())
            })
            .wait(ctx);
        ctx.run_interval(HEARTBEAT, |this, ctx| {
            if this.last_seen.elapsed() > CLIENT_TIMEOUT {
                ctx.stop();
            } else {
                ctx.ping(b"");
            }
        });
        ctx.run_interval(FLUSH, |this, ctx| {
            let Some((_, outbox)) = &this.subscription else { return };
            let progress = outbox.lock().take_progress();
            for text in progress {
                ctx.text(text);
            }
        });
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if let Some((id, _)) = self.subscription {
            self.bus.do_send(Unsubscribe(id));
        }
    }
}

impl Handler<TakeOutbox> for WsSession {
    type Result = ();

    fn handle(&mut self, _: TakeOutbox, ctx: &mut Self::Context) {
        self.take(ctx);
    }
}

impl StreamHandler<Result<ws::Message, ws::ProtocolError>> for WsSession {
    fn handle(&mut self, msg: Result<ws::Message, ws::ProtocolError>, ctx: &mut Self::Context) {
        self.last_seen = Instant::now();
        match msg {
            Ok(ws::Message::Ping(bytes)) => ctx.pong(&bytes),
            Ok(ws::Message::Pong(bytes)) if bytes.as_ref() == RESYNC_PING => {
                if let Some((_, outbox)) = &self.subscription {
                    outbox.lock().caught_up();
                }
            }
            Ok(ws::Message::Close(reason)) => {
                ctx.close(reason);
                ctx.stop();
            }
            Ok(_) => {}
            Err(_) => ctx.stop(),
        }
    }
}

/// WebSocket feed of live job updates (also at / on the API port)
///
/// The token goes in the Authorization header or the token query parameter and is checked
/// before the upgrade. Messages are JSON text, each a `JobUpdate`, except `{"type":"resync"}`
/// (a `Resync`): the client fell behind, should drop its live state and apply the `snapshot`
/// messages that follow. A client that falls behind again before it read its resync (it
/// shows it did by answering the ping that follows the snapshot) is closed with code 4008
/// and should reconnect.
///
/// GET / (API listener), /ws, /api/ws: upgrades to the feed.
#[utoipa::path(
    get,
    path = "/ws",
    tag = "jobs",
    params(("token" = Option<String>, Query, description = "API token, for clients that cannot set headers on the handshake")),
    responses(
        (status = 101, description = "Switching protocols; then one JSON text message per update, each a JobUpdate or a Resync; close code 4008: fell behind, reconnect"),
        (status = 400, description = "Not a WebSocket handshake: no `Upgrade: websocket`, `Connection: upgrade` or valid `Sec-WebSocket-Key` (code not_a_websocket)", body = ErrorBody),
        (status = 426, description = "A WebSocket version other than 13 (code unsupported_websocket_version)", body = ErrorBody),
    ),
)]
pub async fn connect(
    req: HttpRequest,
    stream: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, actix_web::Error> {
    // Here rather than an `AuthUser` argument (header only): the feed is also mounted
    // outside the route table (the API listener's root, the UI listener's /ws), and every
    // mount takes the query parameter.
    authenticate(&req, TokenPlace::HeaderOrQuery).await?;
    if let Err(refused) = ws::handshake(&req) {
        return Ok(handshake_refused(refused));
    }
    let session = WsSession {
        bus: state.runtime.bus.clone(),
        db: state.db.clone(),
        subscription: None,
        last_seen: Instant::now(),
    };
    ws::start(session, &req, stream)
}

/// A refused handshake as every other error: the status and headers actix gives it (426
/// carries the version it speaks) with the JSON error body, rather than an empty one.
fn handshake_refused(refused: ws::HandshakeError) -> HttpResponse {
    let plain = HttpResponse::from(actix_web::dev::Response::from(refused));
    let code = match refused {
        ws::HandshakeError::UnsupportedVersion => "unsupported_websocket_version",
        ws::HandshakeError::GetMethodRequired => "method_not_allowed",
        _ => "not_a_websocket",
    };
    let mut response = HttpResponse::build(plain.status());
    for (name, value) in plain.headers() {
        response.insert_header((name.clone(), value.clone()));
    }
    response.json(ErrorBody::new(code, format!("not a WebSocket handshake: {refused}")))
}
