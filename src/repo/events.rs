//! Job events: the ordered history of each job.

use entities::job_event::{self, ActiveModel, Column, Entity};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};

use super::{now, RepoResult};
use crate::domain::job::JobStatus;

/// What to record about one step of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: String,
    pub from_status: Option<JobStatus>,
    pub to_status: Option<JobStatus>,
    pub node_name: Option<String>,
    pub detail: Option<serde_json::Value>,
}

impl NewEvent {
    pub fn new(kind: impl Into<String>) -> Self {
        NewEvent { kind: kind.into(), from_status: None, to_status: None, node_name: None, detail: None }
    }

    pub fn transition(kind: impl Into<String>, from: JobStatus, to: JobStatus) -> Self {
        NewEvent { from_status: Some(from), to_status: Some(to), ..NewEvent::new(kind) }
    }

    pub fn on_node(mut self, node: Option<String>) -> Self {
        self.node_name = node;
        self
    }

    pub fn with_detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = Some(detail);
        self
    }
}

pub async fn append(db: &impl ConnectionTrait, job_id: i32, event: NewEvent) -> RepoResult<job_event::Model> {
    Ok(ActiveModel {
        job_id: Set(job_id),
        at: Set(now()),
        kind: Set(event.kind),
        from_status: Set(event.from_status.map(Into::into)),
        to_status: Set(event.to_status.map(Into::into)),
        node_name: Set(event.node_name),
        detail: Set(event.detail),
        ..Default::default()
    }
    .insert(db)
    .await?)
}

/// A job's events, oldest first.
pub async fn list(db: &impl ConnectionTrait, job_id: i32) -> RepoResult<Vec<job_event::Model>> {
    Ok(Entity::find().filter(Column::JobId.eq(job_id)).order_by_asc(Column::Id).all(db).await?)
}

/// The job's latest run of busy requeues: how many `busy` events follow each other at the
/// end of its history (each after the `started` that led to it), and when the last one was
/// recorded. `None` when its latest event is not a busy requeue. The kinds are the names
/// `actors::lifecycle::event_kind` gives those events.
pub async fn busy_streak(
    db: &impl ConnectionTrait,
    job_id: i32,
) -> RepoResult<Option<(u32, chrono::DateTime<chrono::Utc>)>> {
    // Enough for the longest wait (`domain::job::busy_hold` stops growing after 7).
    const LOOK_BACK: u64 = 32;
    let recent =
        Entity::find().filter(Column::JobId.eq(job_id)).order_by_desc(Column::Id).limit(LOOK_BACK).all(db).await?;
    let mut streak = 0u32;
    let mut last = None;
    for event in recent {
        match event.kind.as_str() {
            "busy" => {
                streak += 1;
                last.get_or_insert(event.at);
            }
            "started" if last.is_some() => {}
            _ => break,
        }
    }
    Ok(last.map(|at| (streak, at)))
}
