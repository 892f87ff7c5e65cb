//! HTTP handlers: extract, call, map. No SQL and no FFmpeg here.

pub mod health;
pub mod ui;

use actix_web::{web, HttpRequest, HttpResponse};

use crate::error::AppError;

/// Every API route; mounted at the root and under /api.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(health::healthz));
}

pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, AppError> {
    Err(AppError::NotFound(format!("no route for {} {}", req.method(), req.path())))
}

/// JSON bodies: 1 MiB at most; every decoding failure is a client error with the error body.
pub fn json_config() -> web::JsonConfig {
    web::JsonConfig::default().limit(1 << 20).error_handler(|err, _| AppError::from(err).into())
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default()
        .error_handler(|err, _| AppError::BadRequest { code: "invalid_query", message: err.to_string() }.into())
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|err, _| AppError::NotFound(format!("no such resource: {err}")).into())
}
