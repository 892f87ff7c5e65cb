//! A linked node's listeners: every request goes to the main node and its answer comes
//! back; only /healthz is local. The live feed's WebSocket (`/ws`, `/api/ws`, `/`) is relayed
//! frame by frame to the main node's, so a dashboard pointed at any node sees the cluster.

use actix::io::{SinkWrite, WriteHandler};
use actix::prelude::*;
use actix_codec::Framed;
use actix_web::http::header::{self, HeaderName};
use actix_web::{guard, web, App, HttpRequest, HttpResponse};
use actix_web_actors::ws;
use awc::error::WsProtocolError;
use awc::ws::{Codec, Frame, Message};
use awc::BoxedSocket;
use futures_util::stream::{SplitSink, StreamExt};
use serde::Serialize;

use crate::error::AppError;

pub struct Forward {
    pub main_url: String,
    pub node_name: String,
    /// This is the node's API listener: its requests go to the main node under `/api`.
    pub api_listener: bool,
}

/// The path asked of the main node. The main node serves every endpoint both unprefixed and
/// under `/api`, but `MAIN_NODE_URL` may be a reverse proxy that sends only `/api/`, `/ws` and
/// `/cluster/link` to the API and everything else to the dashboard (docker/nginx.conf): an
/// unprefixed `/jobs` sent through it came back as the dashboard's page. So what reaches the
/// API listener goes under `/api`; the web interface listener's paths (the dashboard's files,
/// and its `/api` calls) go as they are.
fn upstream_path(api_listener: bool, path: &str) -> std::borrow::Cow<'_, str> {
    let kept =
        path == "/api" || path.starts_with("/api/") || path.starts_with("/api?") || path.starts_with("/cluster/");
    if api_listener && !kept {
        std::borrow::Cow::Owned(format!("/api{path}"))
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// The longest answer of the main node passed back (a page of jobs, the OpenAPI document).
const MAX_ANSWER: usize = 64 << 20;

/// Passes a request to the main node. The body is streamed, never read here first: the
/// main node checks the token before it reads a byte of it, and then holds it to its own
/// limit (1 MiB of JSON), so an unauthenticated client cannot make this node buffer
/// anything.
async fn forward(
    req: HttpRequest,
    body: web::Payload,
    fwd: web::Data<Forward>,
    client: web::Data<awc::Client>,
) -> Result<HttpResponse, AppError> {
    let path = req.uri().path_and_query().map(awc::http::uri::PathAndQuery::as_str).unwrap_or("/");
    let path = upstream_path(fwd.api_listener, path);
    let mut outgoing = client.request(req.method().clone(), format!("{}{path}", fwd.main_url));
    for (name, value) in req.headers() {
        if !hop_by_hop(name) {
            outgoing = outgoing.insert_header((name.clone(), value.clone()));
        }
    }
    if let Some(peer) = req.peer_addr() {
        outgoing = outgoing.insert_header(("X-Forwarded-For", peer.ip().to_string()));
    }
    let mut answer = outgoing
        .send_stream(body)
        .await
        .map_err(|e| AppError::Unavailable(format!("the main node did not answer: {e}")))?;
    let mut response = HttpResponse::build(answer.status());
    for (name, value) in answer.headers() {
        if !hop_by_hop(name) {
            response.insert_header((name.clone(), value.clone()));
        }
    }
    let bytes = answer
        .body()
        .limit(MAX_ANSWER)
        .await
        .map_err(|e| AppError::Unavailable(format!("the main node's answer broke off: {e}")))?;
    Ok(response.body(bytes))
}

type UpstreamSink = SplitSink<Framed<BoxedSocket, Codec>, Message>;

/// One client's WebSocket, relayed to the main node's feed: what the main node sends is
/// passed on as it is, and the client's frames go the other way. The main node checks the
/// token, as for every forwarded request; either side closing closes both.
struct Relay {
    /// The main node's socket until the relay starts, then its two halves.
    connected: Option<Framed<BoxedSocket, Codec>>,
    upstream: Option<SinkWrite<Message, UpstreamSink>>,
}

impl Relay {
    fn up(&mut self, message: Message) {
        if let Some(sink) = self.upstream.as_mut() {
            let _ = sink.write(message);
        }
    }
}

impl Actor for Relay {
    type Context = ws::WebsocketContext<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let Some(framed) = self.connected.take() else { return ctx.stop() };
        let (sink, stream) = framed.split();
        ctx.add_stream(stream);
        self.upstream = Some(SinkWrite::new(sink, ctx));
    }
}

impl WriteHandler<WsProtocolError> for Relay {}

/// The client's frames, to the main node.
impl StreamHandler<Result<ws::Message, ws::ProtocolError>> for Relay {
    fn handle(&mut self, message: Result<ws::Message, ws::ProtocolError>, ctx: &mut Self::Context) {
        match message {
            Ok(ws::Message::Text(text)) => self.up(Message::Text(text)),
            Ok(ws::Message::Binary(bytes)) => self.up(Message::Binary(bytes)),
            Ok(ws::Message::Ping(bytes)) => ctx.pong(&bytes),
            Ok(ws::Message::Close(reason)) => {
                self.up(Message::Close(reason.clone()));
                ctx.close(reason);
                ctx.stop();
            }
            Ok(_) => {}
            Err(_) => ctx.stop(),
        }
    }
}

/// The main node's frames, to the client.
impl StreamHandler<Result<Frame, WsProtocolError>> for Relay {
    fn handle(&mut self, frame: Result<Frame, WsProtocolError>, ctx: &mut Self::Context) {
        match frame {
            Ok(Frame::Text(bytes)) => match String::from_utf8(bytes.to_vec()) {
                Ok(text) => ctx.text(text),
                Err(_) => ctx.stop(),
            },
            Ok(Frame::Binary(bytes)) => ctx.binary(bytes),
            Ok(Frame::Ping(bytes)) => self.up(Message::Pong(bytes)),
            Ok(Frame::Close(reason)) => {
                // The main node's close code (4008: fell behind) tells the client to resync.
                ctx.close(reason);
                ctx.stop();
            }
            Ok(_) => {}
            Err(_) => ctx.stop(),
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

/// The feed's WebSocket on a linked node: connects to the main node's with the client's
/// token (header or `token` query, as it came), then relays. A refusal there (401, 403) is
/// answered here as it was given.
async fn relay(
    req: HttpRequest,
    stream: web::Payload,
    fwd: web::Data<Forward>,
) -> Result<HttpResponse, actix_web::Error> {
    let path = req.uri().path_and_query().map(awc::http::uri::PathAndQuery::as_str).unwrap_or("/ws");
    let mut upstream = awc::Client::new().ws(format!("{}{path}", fwd.main_url)).max_frame_size(64 << 20);
    if let Some(value) = req.headers().get(header::AUTHORIZATION) {
        upstream = upstream.header(header::AUTHORIZATION, value.clone());
    }
    let connected = match upstream.connect().await {
        Ok((_, framed)) => framed,
        Err(awc::error::WsClientError::InvalidResponseStatus(status)) => {
            return Ok(HttpResponse::build(status).json(serde_json::json!({
                "error": {"code": "refused", "message": format!("the main node refused the feed: {status}")}
            })));
        }
        Err(e) => return Err(AppError::Unavailable(format!("the main node's feed did not answer: {e}")).into()),
    };
    ws::WsResponseBuilder::new(Relay { connected: Some(connected), upstream: None }, &req, stream)
        .frame_size(64 << 20)
        .start()
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
}

/// Liveness, to anyone: the status alone. The node's name, version and its main node's
/// address are not told to whoever asks (the main node's /healthz tells details to a
/// token's holder).
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().insert_header((header::CACHE_CONTROL, "no-store")).json(Health { status: "ok" })
}

pub fn create_forward_app(
    fwd: web::Data<Forward>,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    // awc's client is per thread: one for each worker.
    App::new()
        .app_data(fwd)
        .app_data(web::Data::new(awc::Client::default()))
        .route("/healthz", web::get().to(healthz))
        .configure(|cfg| {
            for path in ["/ws", "/api/ws", "/"] {
                cfg.route(path, web::get().guard(guard::Header("upgrade", "websocket")).to(relay));
            }
        })
        .default_service(web::to(forward))
}

#[cfg(test)]
mod tests {
    use super::upstream_path;

    #[test]
    fn the_api_listener_asks_under_api_and_the_web_interface_as_asked() {
        for (path, api) in [
            ("/jobs?page=2", "/api/jobs?page=2"),
            ("/jobs/7/pause", "/api/jobs/7/pause"),
            ("/", "/api/"),
            ("/api/nodes", "/api/nodes"),
            ("/api", "/api"),
            ("/api?x=1", "/api?x=1"),
            ("/apis", "/api/apis"),
            ("/cluster/link", "/cluster/link"),
        ] {
            assert_eq!(upstream_path(true, path), api, "{path}");
        }
        for path in ["/", "/assets/index-1a2b.js", "/jobs", "/api/jobs?q=x"] {
            assert_eq!(upstream_path(false, path), path);
        }
    }
}
