//! A library's forecast: started, read and cancelled here, run by `actors::forecast`.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::AuthUser;
use crate::domain::forecast::{self, ForecastFile, ForecastStatus, ForecastTotals};
use crate::domain::node::NodeStatus;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;

/// A library's latest forecast: where it stands, every file done so far, and the totals.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForecastView {
    pub library_id: i32,
    #[schema(value_type = ForecastStatus)]
    pub status: String,
    pub files_total: i32,
    pub files_done: i32,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Encoding slots of the nodes online now, over which `totals.predictedWallSeconds`
    /// spreads the time.
    pub slots: u32,
    pub totals: ForecastTotals,
    pub files: Vec<ForecastFile>,
}

async fn view(state: &AppState, row: &entities::library_forecast::Model) -> Result<ForecastView, AppError> {
    let nodes = repo::nodes::list(&state.db).await?;
    let slots: i32 = nodes
        .iter()
        .filter(|n| matches!(NodeStatus::from(n.status), NodeStatus::Online | NodeStatus::Degraded))
        .map(|n| n.max_jobs.max(0))
        .sum();
    let slots = u32::try_from(slots).unwrap_or(0).max(1);
    let files = repo::forecasts::files_of(row);
    Ok(ForecastView {
        library_id: row.library_id,
        status: row.status.clone(),
        files_total: row.files_total,
        files_done: row.files_done,
        started_at: row.started_at,
        finished_at: row.finished_at,
        slots,
        totals: forecast::totals(&files, slots),
        files,
    })
}

/// Forecast a library
///
/// Starts, in the background and at the lowest CPU priority, a forecast of every file of
/// the library not encoded yet: each is probed and, unless it would be skipped, samples of
/// it are encoded and scored (the VMAF search in vmaf mode, the library's CRF in crf mode);
/// nothing is encoded for real or written beside the files. Read it with GET.
#[utoipa::path(
    post,
    operation_id = "start_forecast",
    path = "/libraries/{id}/forecast",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 202, description = "Started", body = ForecastView),
        (status = 409, description = "A forecast of the library is running (code conflict)", body = ErrorBody),
    ),
)]
pub async fn start(user: AuthUser, state: web::Data<AppState>, id: web::Path<i32>) -> Result<HttpResponse, AppError> {
    let library = repo::libraries::get(&state.db, id.into_inner()).await?;
    let row = state.runtime.forecasts.start(&library).await?;
    tracing::info!(user = %user.username, library = library.id, files = row.files_total, "forecast started");
    Ok(HttpResponse::Accepted().json(view(&state, &row).await?))
}

/// A library's forecast
#[utoipa::path(
    get,
    operation_id = "get_forecast",
    path = "/libraries/{id}/forecast",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 200, description = "The latest forecast, running or ended", body = ForecastView),
        (status = 404, description = "No such library, or never forecast (code not_found)", body = ErrorBody),
    ),
)]
pub async fn get(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<ForecastView>, AppError> {
    let id = id.into_inner();
    repo::libraries::get(&state.db, id).await?;
    let row = repo::forecasts::get(&state.db, id)
        .await?
        .ok_or_else(|| AppError::from(repo::RepoError::NotFound(format!("a forecast of library {id}"))))?;
    Ok(web::Json(view(&state, &row).await?))
}

/// Cancel a library's forecast
#[utoipa::path(
    delete,
    operation_id = "cancel_forecast",
    path = "/libraries/{id}/forecast",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 202, description = "Cancelled: the file in progress is dropped; what was done stays readable"),
        (status = 409, description = "No forecast of the library runs (code conflict)", body = ErrorBody),
    ),
)]
pub async fn cancel(user: AuthUser, state: web::Data<AppState>, id: web::Path<i32>) -> Result<HttpResponse, AppError> {
    let id = id.into_inner();
    repo::libraries::get(&state.db, id).await?;
    if !state.runtime.forecasts.cancel(id) {
        return Err(AppError::from(repo::RepoError::Conflict(format!("no forecast of library {id} runs"))));
    }
    tracing::info!(user = %user.username, library = id, "forecast cancelled");
    Ok(HttpResponse::Accepted().finish())
}
