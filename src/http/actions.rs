//! Job and queue actions, and library scans: handed to the actors, which persist each
//! transition before answering.

use actix_web::web;
use serde::Serialize;

use super::auth::AuthUser;
use super::views::JobView;
use crate::actors::library::{ScanLibrary, ScanReport};
use crate::actors::lifecycle::LifecycleError;
use crate::actors::scheduler::{Action, JobAction, QueueAction};
use crate::app::AppState;
use crate::domain::job::JobStatus;
use crate::error::AppError;
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

pub async fn pause(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<JobView>, AppError> {
    act(&state, &user, id.into_inner(), Action::Pause).await
}

pub async fn resume(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<JobView>, AppError> {
    act(&state, &user, id.into_inner(), Action::Resume).await
}

pub async fn retry(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<JobView>, AppError> {
    act(&state, &user, id.into_inner(), Action::Retry).await
}

pub async fn cancel(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<JobView>, AppError> {
    act(&state, &user, id.into_inner(), Action::Cancel).await
}

pub async fn force(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<JobView>, AppError> {
    act(&state, &user, id.into_inner(), Action::Force).await
}

#[derive(Serialize)]
pub struct Affected {
    pub affected: u64,
}

pub async fn pause_all(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Affected>, AppError> {
    let affected = state.runtime.scheduler.send(QueueAction { pause: true }).await.map_err(mailbox)??;
    tracing::info!(user = %user.username, affected, "queue paused");
    Ok(web::Json(Affected { affected }))
}

pub async fn resume_all(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Affected>, AppError> {
    let affected = state.runtime.scheduler.send(QueueAction { pause: false }).await.map_err(mailbox)??;
    tracing::info!(user = %user.username, affected, "queue resumed");
    Ok(web::Json(Affected { affected }))
}

/// POST /libraries/{id}/scan: scans now and answers what was found.
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
