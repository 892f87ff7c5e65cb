//! Liveness: answers without a token.

use actix_web::{web, HttpResponse};
use serde::Serialize;

use crate::http::app::AppState;
use crate::repo;

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok` or `unavailable`.
    status: &'static str,
    version: &'static str,
    /// `main` or `linked`.
    role: &'static str,
    node: String,
    /// `sqlite`, `postgres`, or `unreachable`.
    database: &'static str,
    started_at: chrono::DateTime<chrono::Utc>,
}

/// GET /healthz: 200 while the node serves and reaches its database, else 503.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "system",
    responses(
        (status = 200, description = "The node serves and reaches its database", body = Health),
        (status = 503, description = "The database does not answer", body = Health),
    ),
)]
pub async fn healthz(state: web::Data<AppState>) -> HttpResponse {
    let db_ok = repo::ping(&state.db).await;
    let body = Health {
        status: if db_ok { "ok" } else { "unavailable" },
        version: env!("CARGO_PKG_VERSION"),
        role: state.role.as_str(),
        node: state.node_name.clone(),
        database: if db_ok { repo::backend_name(&state.db) } else { "unreachable" },
        started_at: state.started_at,
    };
    if db_ok {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}
