//! Encoding windows: the default schedule (`/schedule`) and a node's own
//! (`/nodes/{id}/schedule`), with whether each is open now (`domain::schedule`; the
//! scheduler enforces them, `actors::scheduler`).

use super::body::Body;
use actix_web::web;

use super::auth::AuthUser;
use super::views::{NodeView, ScheduleView};
use crate::domain::schedule::Schedule;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;

fn view(state: &AppState, schedule: Schedule, follows_default: bool) -> ScheduleView {
    let open = schedule.is_open(state.clock.now());
    ScheduleView {
        time_zone: schedule.time_zone,
        windows: schedule.windows,
        on_close: schedule.on_close,
        open,
        follows_default,
    }
}

fn checked(body: Schedule) -> Result<Schedule, AppError> {
    body.validate().map_err(AppError::invalid)?;
    Ok(body)
}

/// Fills in each node's window (for the Nodes page and the dashboard).
pub async fn fill_windows(state: &AppState, nodes: &mut [NodeView]) -> Result<(), AppError> {
    let ids: Vec<i32> = nodes.iter().map(|n| n.id).collect();
    let mut in_force = repo::schedules::in_force(&state.db, &ids).await?;
    for node in nodes.iter_mut() {
        node.window = in_force.remove(&node.id).map(|f| view(state, f.schedule, f.follows_default));
    }
    Ok(())
}

/// The default schedule
///
/// What every node without a schedule of its own follows.
#[utoipa::path(
    get,
    operation_id = "get_default_schedule",
    path = "/schedule",
    tag = "nodes",
    responses((status = 200, description = "The default schedule (no windows: always open)", body = ScheduleView)),
)]
pub async fn get_default(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<ScheduleView>, AppError> {
    let schedule = repo::schedules::default(&state.db).await?;
    Ok(web::Json(view(&state, schedule, false)))
}

/// Set the default schedule
#[utoipa::path(
    put,
    operation_id = "set_default_schedule",
    path = "/schedule",
    tag = "nodes",
    request_body = Schedule,
    responses(
        (status = 200, description = "Set; it applies from the scheduler's next round (at most 2 s)", body = ScheduleView),
        (status = 422, description = "An unknown time zone, a window without days, a time that is not HH:MM (validation_failed)", body = ErrorBody),
    ),
)]
pub async fn set_default(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<Schedule>,
) -> Result<web::Json<ScheduleView>, AppError> {
    let schedule = checked(body.into_inner())?;
    repo::schedules::set_default(&state.db, &schedule).await?;
    tracing::info!(user = %user.username, windows = schedule.windows.len(), "default schedule set");
    Ok(web::Json(view(&state, schedule, false)))
}

/// A node's schedule
#[utoipa::path(
    get,
    operation_id = "get_node_schedule",
    path = "/nodes/{id}/schedule",
    tag = "nodes",
    params(("id" = i32, Path, description = "The node's id")),
    responses(
        (status = 200, description = "The schedule the node follows (its own, or the default)", body = ScheduleView),
    ),
)]
pub async fn get_node(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<ScheduleView>, AppError> {
    let id = id.into_inner();
    repo::nodes::get(&state.db, id).await?;
    // `in_force` answers every node it is asked about.
    let in_force = repo::schedules::in_force(&state.db, &[id])
        .await?
        .remove(&id)
        .ok_or_else(|| AppError::Internal(format!("no schedule in force for node {id}")))?;
    Ok(web::Json(view(&state, in_force.schedule, in_force.follows_default)))
}

/// Give a node a schedule of its own
#[utoipa::path(
    put,
    operation_id = "set_node_schedule",
    path = "/nodes/{id}/schedule",
    tag = "nodes",
    params(("id" = i32, Path, description = "The node's id")),
    request_body = Schedule,
    responses(
        (status = 200, description = "Set; it applies from the scheduler's next round (at most 2 s)", body = ScheduleView),
        (status = 422, description = "As for the default", body = ErrorBody),
    ),
)]
pub async fn set_node(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
    body: Body<Schedule>,
) -> Result<web::Json<ScheduleView>, AppError> {
    let id = id.into_inner();
    repo::nodes::get(&state.db, id).await?;
    let schedule = checked(body.into_inner())?;
    repo::schedules::set_own(&state.db, id, Some(&schedule)).await?;
    tracing::info!(user = %user.username, node_id = id, windows = schedule.windows.len(), "node schedule set");
    Ok(web::Json(view(&state, schedule, false)))
}

/// Make a node follow the default schedule again
#[utoipa::path(
    delete,
    operation_id = "clear_node_schedule",
    path = "/nodes/{id}/schedule",
    tag = "nodes",
    params(("id" = i32, Path, description = "The node's id")),
    responses(
        (status = 200, description = "The node follows the default now", body = ScheduleView),
    ),
)]
pub async fn clear_node(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<ScheduleView>, AppError> {
    let id = id.into_inner();
    repo::nodes::get(&state.db, id).await?;
    repo::schedules::set_own(&state.db, id, None).await?;
    tracing::info!(user = %user.username, node_id = id, "node schedule cleared: it follows the default");
    Ok(web::Json(view(&state, repo::schedules::default(&state.db).await?, true)))
}
