//! A linked node's listeners: every request goes to the main node and its answer comes
//! back; only /healthz is local.

use actix_web::http::header::{self, HeaderName};
use actix_web::{web, App, HttpRequest, HttpResponse};
use serde::Serialize;

use crate::error::AppError;

pub struct Forward {
    pub main_url: String,
    pub node_name: String,
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

const MAX_BODY: usize = 64 << 20;

async fn forward(
    req: HttpRequest,
    body: web::Bytes,
    fwd: web::Data<Forward>,
    client: web::Data<awc::Client>,
) -> Result<HttpResponse, AppError> {
    let path = req.uri().path_and_query().map(awc::http::uri::PathAndQuery::as_str).unwrap_or("/");
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
        .send_body(body)
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
        .limit(MAX_BODY)
        .await
        .map_err(|e| AppError::Unavailable(format!("the main node's answer broke off: {e}")))?;
    Ok(response.body(bytes))
}

#[derive(Serialize)]
struct Health<'a> {
    status: &'static str,
    role: &'static str,
    node: &'a str,
    main: &'a str,
    version: &'static str,
}

async fn healthz(fwd: web::Data<Forward>) -> HttpResponse {
    HttpResponse::Ok().insert_header((header::CACHE_CONTROL, "no-store")).json(Health {
        status: "ok",
        role: "linked",
        node: &fwd.node_name,
        main: &fwd.main_url,
        version: env!("CARGO_PKG_VERSION"),
    })
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
        .app_data(web::PayloadConfig::new(MAX_BODY))
        .route("/healthz", web::get().to(healthz))
        .default_service(web::to(forward))
}
