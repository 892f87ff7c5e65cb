//! Service settings users change at run time (the rest come from env and flags).

use super::body::Body;
use actix_web::web;
use serde::Deserialize;

use super::auth::AuthUser;
use super::views::SettingsView;
use crate::error::AppError;
use crate::http::state::AppState;
use crate::repo;
use crate::repo::settings::{ServiceSettings, MAX_JOB_TIMEOUT_HOURS};

/// Any subset; absent or null keeps the current value.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateSettings {
    /// 1 to 720.
    #[schema(minimum = 1, maximum = 720)]
    #[serde(default, deserialize_with = "super::schema::optional_whole_number")]
    pub job_timeout_hours: Option<i64>,
    pub keep_originals: Option<bool>,
}

/// Service settings
#[utoipa::path(
    get,
    operation_id = "get_settings",
    path = "/settings",
    tag = "settings",
    responses(
        (status = 200, description = "The settings", body = SettingsView),
    ),
)]
pub async fn get(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<SettingsView>, AppError> {
    let settings = repo::settings::service_settings(&state.db).await?;
    Ok(web::Json(view(&state, settings)))
}

/// Change any subset of the settings
#[utoipa::path(
    put,
    operation_id = "update_settings",
    path = "/settings",
    tag = "settings",
    request_body = UpdateSettings,
    responses(
        (status = 200, description = "The settings after the change", body = SettingsView),
    ),
)]
pub async fn update(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<serde_json::Map<String, serde_json::Value>>,
) -> Result<web::Json<SettingsView>, AppError> {
    let body: UpdateSettings = super::schema::from_object(body.into_inner())?;
    let job_timeout_hours = body
        .job_timeout_hours
        .map(|hours| {
            u32::try_from(hours).ok().filter(|h| (1..=MAX_JOB_TIMEOUT_HOURS).contains(h)).ok_or_else(|| {
                AppError::invalid(format!("jobTimeoutHours must be 1 to {MAX_JOB_TIMEOUT_HOURS}, not {hours}"))
            })
        })
        .transpose()?;
    let settings = repo::settings::update_service_settings(&state.db, job_timeout_hours, body.keep_originals).await?;
    tracing::info!(user = %user.username, ?settings, "settings updated");
    Ok(web::Json(view(&state, settings)))
}

fn view(state: &AppState, settings: ServiceSettings) -> SettingsView {
    SettingsView {
        job_timeout_hours: settings.job_timeout_hours,
        keep_originals: settings.keep_originals,
        enrollment_open: state.cluster_token.is_some(),
    }
}
