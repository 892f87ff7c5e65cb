//! The WebSocket feed: live job updates as JSON text messages (`type`, `jobId`, `progress`,
//! `status` and the other live fields). The token is checked before the upgrade. On connect
//! the client gets a `snapshot` message per active job; progress is coalesced to at most
//! four messages a second per job; status changes go out at once. A client that stops
//! answering pings is dropped, so it cannot make the server buffer without bound.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_web_actors::ws;

use super::auth::{authenticate, TokenPlace};
use crate::actors::bus::{EventBus, JobUpdate, Subscribe, Subscriber, Unsubscribe};
use crate::domain::job::JobStatus;
use crate::error::{AppError, ErrorBody};
use crate::http::app::AppState;
use crate::repo;

const HEARTBEAT: Duration = Duration::from_secs(10);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const FLUSH: Duration = Duration::from_millis(250);

pub struct WsSession {
    bus: Addr<EventBus>,
    subscription: Option<u64>,
    last_seen: Instant,
    snapshot: Vec<JobUpdate>,
    /// Latest progress per job, sent at the next flush.
    pending: HashMap<i32, JobUpdate>,
}

impl WsSession {
    fn send(ctx: &mut ws::WebsocketContext<Self>, update: &JobUpdate) {
        if let Ok(text) = serde_json::to_string(update) {
            ctx.text(text);
        }
    }
}

impl Actor for WsSession {
    type Context = ws::WebsocketContext<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        for update in std::mem::take(&mut self.snapshot) {
            Self::send(ctx, &update);
        }
        let me = ctx.address().recipient();
        self.bus
            .send(Subscribe(Subscriber::Actor(me)))
            .into_actor(self)
            .then(|id, this, _| {
                this.subscription = id.ok();
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
            for (_, update) in this.pending.drain() {
                Self::send(ctx, &update);
            }
        });
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if let Some(id) = self.subscription {
            self.bus.do_send(Unsubscribe(id));
        }
    }
}

impl Handler<JobUpdate> for WsSession {
    type Result = ();

    fn handle(&mut self, update: JobUpdate, ctx: &mut Self::Context) {
        if update.kind == "status" {
            // Order matters for status: older progress goes first, then the change.
            if let Some(older) = self.pending.remove(&update.job_id) {
                Self::send(ctx, &older);
            }
            Self::send(ctx, &update);
        } else {
            self.pending.insert(update.job_id, update);
        }
    }
}

impl StreamHandler<Result<ws::Message, ws::ProtocolError>> for WsSession {
    fn handle(&mut self, msg: Result<ws::Message, ws::ProtocolError>, ctx: &mut Self::Context) {
        self.last_seen = Instant::now();
        match msg {
            Ok(ws::Message::Ping(bytes)) => ctx.pong(&bytes),
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
/// before the upgrade. Messages are JSON text, each a `JobUpdate`.
///
/// GET / (API listener), /ws, /api/ws: upgrades to the feed.
#[utoipa::path(
    get,
    path = "/ws",
    tag = "jobs",
    params(("token" = Option<String>, Query, description = "API token, for clients that cannot set headers on the handshake")),
    responses(
        (status = 101, description = "Switching protocols; then one JSON text message per update, each a JobUpdate"),
        (status = 400, description = "Not a WebSocket handshake", body = ErrorBody),
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
    let active = repo::jobs::in_statuses(&state.db, &[JobStatus::Analyzing, JobStatus::Encoding])
        .await
        .map_err(AppError::from)?;
    let snapshot = active.iter().map(|job| JobUpdate::of("snapshot", job)).collect();
    let session = WsSession {
        bus: state.runtime.bus.clone(),
        subscription: None,
        last_seen: Instant::now(),
        snapshot,
        pending: HashMap::new(),
    };
    ws::start(session, &req, stream)
}
