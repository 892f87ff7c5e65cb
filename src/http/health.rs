//! Liveness: answers without a token, with the status alone; details to a token's holder.
//! Beside it, the node's own health checks (`actors::recheck`): their last run, and a run
//! on demand.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;

use crate::domain::health::RecheckReport;
use crate::error::AppError;
use crate::http::auth::{authenticate, AuthUser, TokenPlace};
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

/// The node's own health checks, as last run
///
/// Each enabled library path readable by the main node, the disk under it below 90 % used,
/// and each encoder a library uses opening on a node that is up. They run at start, every
/// `HEALTH_RECHECK_MINUTES` (60 by default) and on `POST /health/recheck`; asked before the
/// first run ended, this waits for it.
#[utoipa::path(
    get,
    operation_id = "health_recheck_last",
    path = "/health/recheck",
    tag = "system",
    responses(
        (status = 200, description = "The last run", body = RecheckReport),
    ),
)]
pub async fn last_recheck(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<RecheckReport>, AppError> {
    let recheck = &state.runtime.recheck;
    match recheck.last() {
        Some(report) => Ok(web::Json(report)),
        None => Ok(web::Json(recheck.run().await?)),
    }
}

/// Run the node's own health checks now
///
/// Runs every check at once (not waiting for `HEALTH_RECHECK_MINUTES`), writes the main
/// node's status (DEGRADED while it cannot read a library path) and, when what fails
/// changed, the `health.changed` notification. The next run on its own is
/// `HEALTH_RECHECK_MINUTES` after this one.
#[utoipa::path(
    post,
    operation_id = "health_recheck",
    path = "/health/recheck",
    tag = "system",
    responses(
        (status = 200, description = "The checks as they are now", body = RecheckReport),
    ),
)]
pub async fn recheck(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<RecheckReport>, AppError> {
    let report = state.runtime.recheck.run().await?;
    tracing::info!(user = %user.username, overall = %report.overall, changed = report.changed, "health re-checked");
    Ok(web::Json(report))
}
