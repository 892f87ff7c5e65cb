//! Other products calling in. `POST /integrations/arr` takes the webhook Sonarr and Radarr
//! send after an import or upgrade (`domain::arr`): the file, mapped to where condense sees
//! it (`GET`/`PUT /settings/arr`), becomes a job at once, ahead of the queue.

use super::body::Body;
use std::path::Path;

use actix_web::web;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::AuthUser;
use super::views::JobView;
use crate::actors::library::{import_file, ImportError};
use crate::actors::node::Wake;
use crate::domain::arr::{check_mappings, map_path, ArrEvent, ArrWebhook, PathMapping, IMPORT_PRIORITY};
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;

/// Settings key of the *arr path mappings.
pub const ARR_PATH_MAPPINGS: &str = "arr_path_mappings";

/// What condense did with a webhook.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArrAnswer {
    /// The webhook's `eventType`.
    pub event: String,
    /// `queued` (the file's job waits, ahead of the backlog), `running` (it runs now),
    /// `test` (the connection test), or `ignored` (an event condense does not act on).
    pub outcome: String,
    /// The file, as condense sees it (after the path mappings).
    pub path: Option<String>,
    pub job: Option<JobView>,
}

/// The *arr path mappings.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ArrSettings {
    /// Each a folder as Sonarr or Radarr sees it (`from`) and the same folder as condense
    /// sees it (`to`); the longest matching `from` applies.
    pub path_mappings: Vec<PathMapping>,
}

async fn mappings(state: &AppState) -> Result<Vec<PathMapping>, AppError> {
    Ok(repo::settings::get_checked(&state.db, ARR_PATH_MAPPINGS).await?.unwrap_or_default())
}

/// Sonarr and Radarr webhook
///
/// In Sonarr or Radarr: Settings > Connect > + > Webhook, triggers "On Import" and "On
/// Upgrade", URL `http://<condense>:3100/integrations/arr?apikey=<key>` (or the key in an
/// `X-Api-Key` header), method POST.
#[utoipa::path(
    post,
    operation_id = "arr_webhook",
    path = "/integrations/arr",
    tag = "integrations",
    request_body = ArrWebhook,
    responses(
        (status = 200, description = "Taken in (or a test, or an event condense does not act on)", body = ArrAnswer),
        (status = 422, description = "An import naming no file, a file in no library or not there (code validation_failed)", body = ErrorBody),
    ),
)]
pub async fn arr(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<ArrWebhook>,
) -> Result<web::Json<ArrAnswer>, AppError> {
    let hook = body.into_inner();
    let answer = |outcome: &str, path: Option<String>, job: Option<JobView>| ArrAnswer {
        event: hook.event_type.clone(),
        outcome: outcome.to_string(),
        path,
        job,
    };
    match hook.event().map_err(AppError::invalid)? {
        ArrEvent::Test => Ok(web::Json(answer("test", None, None))),
        ArrEvent::Ignored(_) => Ok(web::Json(answer("ignored", None, None))),
        ArrEvent::Imported(seen) => {
            let path = map_path(&mappings(&state).await?, &seen);
            let job = import_file(&state.db, Path::new(&path), IMPORT_PRIORITY).await.map_err(|error| match error {
                ImportError::Repo(repo) => AppError::from(repo),
                refused => AppError::invalid(refused.to_string()),
            })?;
            // A new file waits (PENDING) for the probe; a changed one is queued at once.
            state.runtime.prober.wake();
            state.runtime.scheduler.do_send(Wake);
            let view = JobView::from(&job);
            tracing::info!(user = %user.username, %seen, %path, job_id = job.id, status = %view.status, "*arr import taken in");
            let queued = matches!(
                crate::domain::job::JobStatus::from(job.status),
                crate::domain::job::JobStatus::Pending | crate::domain::job::JobStatus::Queued
            );
            let outcome = if queued { "queued" } else { "running" };
            Ok(web::Json(answer(outcome, Some(path), Some(view))))
        }
    }
}

/// The *arr path mappings
#[utoipa::path(
    get,
    operation_id = "get_arr_settings",
    path = "/settings/arr",
    tag = "integrations",
    responses((status = 200, description = "The path mappings", body = ArrSettings)),
)]
pub async fn get_arr_settings(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<ArrSettings>, AppError> {
    Ok(web::Json(ArrSettings { path_mappings: mappings(&state).await? }))
}

/// Set the *arr path mappings
#[utoipa::path(
    put,
    operation_id = "set_arr_settings",
    path = "/settings/arr",
    tag = "integrations",
    request_body = ArrSettings,
    responses(
        (status = 200, description = "The path mappings now", body = ArrSettings),
        (status = 422, description = "A folder that is not absolute (validation_failed), or unknown fields (invalid_body)", body = ErrorBody),
    ),
)]
pub async fn set_arr_settings(
    _user: AuthUser,
    state: web::Data<AppState>,
    body: Body<ArrSettings>,
) -> Result<web::Json<ArrSettings>, AppError> {
    let settings = body.into_inner();
    check_mappings(&settings.path_mappings).map_err(AppError::invalid)?;
    repo::settings::set(&state.db, ARR_PATH_MAPPINGS, &settings.path_mappings).await?;
    Ok(web::Json(settings))
}
