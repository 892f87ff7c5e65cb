//! Liveness: answers without a token, with the status alone; details to a token's holder.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;

use crate::http::auth::{authenticate, TokenPlace};
use crate::http::state::AppState;
use crate::repo;

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok`, or `degraded` when the database does not answer.
    status: &'static str,
    /// The rest is told only with a valid token (`Authorization: Bearer`): to anyone else,
    /// the version, node name and database would map the deployment.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    details: Option<HealthDetails>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthDetails {
    version: &'static str,
    /// `main` or `linked`.
    role: &'static str,
    node: String,
    /// `sqlite`, `postgres`, or `unreachable`.
    database: &'static str,
    started_at: chrono::DateTime<chrono::Utc>,
}

/// GET /healthz: 200 while the node serves and reaches its database, else 503. Without a
/// token, the status alone; with one, the details too.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "system",
    responses(
        (status = 200, description = "The node serves and reaches its database", body = Health),
        (status = 503, description = "The database does not answer (status degraded)", body = Health),
    ),
)]
pub async fn healthz(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let db_ok = repo::ping(&state.db).await;
    let with_token =
        req.headers().contains_key(header::AUTHORIZATION) && authenticate(&req, TokenPlace::Header).await.is_ok();
    let details = with_token.then(|| HealthDetails {
        version: env!("CARGO_PKG_VERSION"),
        role: state.role.as_str(),
        node: state.node_name.clone(),
        database: if db_ok { repo::backend_name(&state.db) } else { "unreachable" },
        started_at: state.started_at,
    });
    let body = Health { status: if db_ok { "ok" } else { "degraded" }, details };
    if db_ok {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}
