//! Job and queue actions, and library scans: handed to the actors, which persist each
//! transition before answering.

use super::body::Body;
use actix_web::web;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::AuthUser;
use super::views::JobView;
use crate::actors::library::{ScanLibrary, ScanReport};
use crate::actors::lifecycle::LifecycleError;
use crate::actors::scheduler::{Action, JobAction, QueueAction};
use crate::domain::job::JobStatus;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo::{self, RepoError};

impl From<LifecycleError> for AppError {
    fn from(err: LifecycleError) -> Self {
        match err {
            LifecycleError::Invalid(e) => AppError::conflict("invalid_transition", e.to_string()),
            LifecycleError::Repo(RepoError::Conflict(m)) => AppError::conflict("invalid_transition", m),
            LifecycleError::Repo(e) => e.into(),
        }
    }
}

fn mailbox(e: actix::MailboxError) -> AppError {
    AppError::Unavailable(format!("the scheduler is not answering: {e}"))
}

async fn act(state: &AppState, user: &AuthUser, id: i32, action: Action) -> Result<web::Json<JobView>, AppError> {
    let job = state.runtime.scheduler.send(JobAction { job_id: id, action }).await.map_err(mailbox)??;
    tracing::info!(user = %user.username, job_id = id, ?action, status = %JobStatus::from(job.status), "job action");
    Ok(web::Json(JobView::from(&job)))
}

/// One job action's handler, `POST /jobs/{id}/<action>`, with its documentation: the five
/// differ only in the action, its path and what it does.
macro_rules! job_action {
    ($(#[doc = $summary:literal])* $name:ident, $path:literal, $action:expr) => {
        $(#[doc = $summary])*
        #[utoipa::path(
            post,
            path = $path,
            tag = "jobs",
            params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
            responses(
                (status = 200, description = "The job after the action", body = JobView),
                (status = 404, description = "No such job (code not_found)", body = ErrorBody),
                (status = 409, description = "The action does not apply to the job's status; the job's `actions` list the ones that do (code invalid_transition)", body = ErrorBody),
            ),
        )]
        pub async fn $name(
            user: AuthUser,
            state: web::Data<AppState>,
            id: web::Path<i32>,
        ) -> Result<web::Json<JobView>, AppError> {
            act(&state, &user, id.into_inner(), $action).await
        }
    };
}

job_action!(
    /// Pause: the transcoder stops at a segment boundary, the partial output is kept
    pause, "/jobs/{id}/pause", Action::Pause
);
job_action!(
    /// Resume a paused job from its partial output (from scratch when it is missing; a corrupt one is deleted)
    resume, "/jobs/{id}/resume", Action::Resume
);
job_action!(
    /// Run a FAILED or CANCELLED job again, retry counter reset
    retry, "/jobs/{id}/retry", Action::Retry
);
job_action!(
    /// Cancel: stops the transcoder and deletes the partial output
    cancel, "/jobs/{id}/cancel", Action::Cancel
);
job_action!(
    /// Re-encode a SKIPPED or COMPLETED file anyway
    force, "/jobs/{id}/force", Action::Force
);

#[derive(Serialize, ToSchema)]
pub struct Affected {
    pub affected: u64,
}

/// Pause every QUEUED, ANALYZING and ENCODING job
#[utoipa::path(
    post,
    path = "/queue/pause-all",
    tag = "queue",
    responses(
        (status = 200, description = "How many jobs were paused", body = Affected),
    ),
)]
pub async fn pause_all(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Affected>, AppError> {
    let affected = state.runtime.scheduler.send(QueueAction { pause: true }).await.map_err(mailbox)??;
    tracing::info!(user = %user.username, affected, "queue paused");
    Ok(web::Json(Affected { affected }))
}

/// Resume every PAUSED job
#[utoipa::path(
    post,
    path = "/queue/resume-all",
    tag = "queue",
    responses(
        (status = 200, description = "How many jobs were resumed", body = Affected),
    ),
)]
pub async fn resume_all(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Affected>, AppError> {
    let affected = state.runtime.scheduler.send(QueueAction { pause: false }).await.map_err(mailbox)??;
    tracing::info!(user = %user.username, affected, "queue resumed");
    Ok(web::Json(Affected { affected }))
}

/// POST /libraries/{id}/scan: scans now and answers what was found.
#[utoipa::path(
    post,
    path = "/libraries/{id}/scan",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 200, description = "What the scan found", body = ScanReport),
        (status = 409, description = "The library is disabled (code library_disabled)", body = ErrorBody),
    ),
)]
pub async fn scan(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<ScanReport>, AppError> {
    let id = id.into_inner();
    let library = repo::libraries::get(&state.db, id).await?;
    if !library.enabled {
        return Err(AppError::conflict("library_disabled", format!("library {id} is disabled; enable it to scan")));
    }
    // A library created a moment ago may not have its supervisor yet.
    let _ = state.runtime.libraries.send(crate::actors::library::Reload).await;
    let report = state.runtime.libraries.send(ScanLibrary(id)).await.map_err(mailbox)?.map_err(AppError::Internal)?;
    tracing::info!(user = %user.username, library = id, ?report, "library scanned");
    Ok(web::Json(report))
}

#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPriority {
    /// -10 to 10; QUEUED jobs run highest first, then oldest.
    #[schema(minimum = -10, maximum = 10)]
    #[serde(deserialize_with = "super::schema::whole_number")]
    pub priority: i64,
}

/// Raise or lower a job: QUEUED jobs run highest priority first, then oldest
#[utoipa::path(
    post,
    path = "/jobs/{id}/priority",
    tag = "jobs",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    request_body = SetPriority,
    responses(
        (status = 200, description = "The job with its new priority", body = JobView),
        (status = 422, description = "A priority outside -10 to 10 (code validation_failed)", body = ErrorBody),
    ),
)]
pub async fn priority(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
    body: Body<SetPriority>,
) -> Result<web::Json<JobView>, AppError> {
    use crate::domain::arr::PRIORITIES;
    let id = id.into_inner();
    let wanted = body.into_inner().priority;
    let priority = i32::try_from(wanted).ok().filter(|p| PRIORITIES.contains(p)).ok_or_else(|| {
        AppError::invalid(format!("priority must be {} to {}, not {wanted}", PRIORITIES.start(), PRIORITIES.end()))
    })?;
    let job = repo::jobs::set_priority(&state.db, id, priority).await?;
    tracing::info!(user = %user.username, job_id = id, priority, "job priority set");
    state.runtime.scheduler.do_send(crate::actors::node::Wake);
    Ok(web::Json(JobView::from(&job)))
}
