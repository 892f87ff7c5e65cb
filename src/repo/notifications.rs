//! Notification targets and their outbox. A notification is written as one outbox row per
//! target that wants the event, in the transaction of whatever it reports (a job's
//! transition among them), so a restart never loses one; `actors::notifier` delivers the
//! rows that are due and removes each once its receiver took it.

use chrono::{DateTime, Utc};
use entities::notification_delivery::{self as delivery, Entity as Deliveries};
use entities::notification_target::{self as target, ActiveModel, Column, Entity as Targets};
use entities::{job, sea_orm_active_enums as stored};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
    Set,
};

use super::{now, RepoError, RepoResult};
use crate::domain::connect::Replaced;
use crate::domain::job::JobStatus;
use crate::domain::notify::{envelope, JobFacts, NotifyEvent, TargetKind};

/// Longest target name.
pub const MAX_NAME_CHARS: usize = 100;

/// A target as a user sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTarget {
    pub name: String,
    pub kind: TargetKind,
    pub url: String,
    /// `None` on an update: the stored secret stays.
    pub secret: Option<String>,
    pub headers: Vec<(String, String)>,
    pub events: Vec<NotifyEvent>,
    pub enabled: bool,
}

/// The events a stored target wants.
pub fn events_of(target: &target::Model) -> Vec<NotifyEvent> {
    let names: Vec<String> = serde_json::from_value(target.events.clone()).unwrap_or_default();
    names.iter().filter_map(|n| n.parse().ok()).collect()
}

/// The extra headers of a stored target.
pub fn headers_of(target: &target::Model) -> Vec<(String, String)> {
    serde_json::from_value(target.headers.clone()).unwrap_or_default()
}

fn events_json(events: &[NotifyEvent]) -> serde_json::Value {
    serde_json::json!(events.iter().map(|e| e.as_str()).collect::<Vec<_>>())
}

pub async fn create(db: &impl ConnectionTrait, new: NewTarget) -> RepoResult<target::Model> {
    Ok(ActiveModel {
        name: Set(new.name),
        kind: Set(new.kind.as_str().to_string()),
        url: Set(new.url),
        secret: Set(new.secret.filter(|s| !s.is_empty())),
        headers: Set(serde_json::json!(new.headers)),
        events: Set(events_json(&new.events)),
        enabled: Set(new.enabled),
        created_at: Set(now()),
        ..Default::default()
    }
    .insert(db)
    .await?)
}

/// Replaces a target's settings; its secret only when a new one is given (an empty one
/// removes it).
pub async fn update(db: &impl ConnectionTrait, id: i32, new: NewTarget) -> RepoResult<target::Model> {
    let mut model: ActiveModel = get(db, id).await?.into();
    model.name = Set(new.name);
    model.kind = Set(new.kind.as_str().to_string());
    model.url = Set(new.url);
    if let Some(secret) = new.secret {
        model.secret = Set(Some(secret).filter(|s| !s.is_empty()));
    }
    model.headers = Set(serde_json::json!(new.headers));
    model.events = Set(events_json(&new.events));
    model.enabled = Set(new.enabled);
    Ok(model.update(db).await?)
}

pub async fn get(db: &impl ConnectionTrait, id: i32) -> RepoResult<target::Model> {
    Targets::find_by_id(id)
        .filter(Column::Kind.is_in(notification_kinds()))
        .one(db)
        .await?
        .ok_or_else(|| RepoError::NotFound(format!("notification target {id}")))
}

/// The stored kinds of the notification targets (the rest of the table is connections,
/// `repo::connections`).
fn notification_kinds() -> Vec<&'static str> {
    TargetKind::ALL.iter().map(|k| k.as_str()).collect()
}

/// Every notification target, oldest first, with the number of notifications waiting for it.
pub async fn list(db: &impl ConnectionTrait) -> RepoResult<Vec<(target::Model, u64)>> {
    list_of(db, &notification_kinds()).await
}

/// The rows of these kinds, oldest first, with what waits for each.
pub(super) async fn list_of(db: &impl ConnectionTrait, kinds: &[&str]) -> RepoResult<Vec<(target::Model, u64)>> {
    let targets =
        Targets::find().filter(Column::Kind.is_in(kinds.iter().copied())).order_by_asc(Column::Id).all(db).await?;
    let mut listed = Vec::with_capacity(targets.len());
    for t in targets {
        let waiting = Deliveries::find().filter(delivery::Column::TargetId.eq(t.id)).count(db).await?;
        listed.push((t, waiting));
    }
    Ok(listed)
}

/// Removes a notification target and what it still had waiting. False when there is none.
pub async fn delete(db: &impl ConnectionTrait, id: i32) -> RepoResult<bool> {
    delete_of(db, id, &notification_kinds()).await
}

/// Removes a row of one of these kinds and what waits for it.
pub(super) async fn delete_of(db: &impl ConnectionTrait, id: i32, kinds: &[&str]) -> RepoResult<bool> {
    let Some(found) = Targets::find_by_id(id).one(db).await? else { return Ok(false) };
    if !kinds.contains(&found.kind.as_str()) {
        return Ok(false);
    }
    Deliveries::delete_many().filter(delivery::Column::TargetId.eq(id)).exec(db).await?;
    Ok(Targets::delete_by_id(id).exec(db).await?.rows_affected == 1)
}

/// The enabled targets.
async fn enabled(db: &impl ConnectionTrait) -> RepoResult<Vec<target::Model>> {
    Ok(Targets::find().filter(Column::Enabled.eq(true)).all(db).await?)
}

/// Owes `event` to every enabled target that wants it; answers how many rows were written.
/// Call it inside the transaction that records what it reports.
pub async fn enqueue(db: &impl ConnectionTrait, event: NotifyEvent, fields: serde_json::Value) -> RepoResult<u64> {
    enqueue_to(db, &enabled(db).await?, event, fields).await
}

async fn enqueue_to(
    db: &impl ConnectionTrait,
    targets: &[target::Model],
    event: NotifyEvent,
    fields: serde_json::Value,
) -> RepoResult<u64> {
    let wanting: Vec<i32> = targets.iter().filter(|t| events_of(t).contains(&event)).map(|t| t.id).collect();
    if wanting.is_empty() {
        return Ok(0);
    }
    let at = now();
    let body = envelope(event, at, fields);
    let rows = wanting.iter().map(|&target_id| delivery::ActiveModel {
        target_id: Set(target_id),
        event: Set(event.as_str().to_string()),
        body: Set(body.clone()),
        created_at: Set(at),
        attempts: Set(0),
        next_attempt_at: Set(at),
        last_error: Set(None),
        ..Default::default()
    });
    Deliveries::insert_many(rows).exec(db).await?;
    Ok(wanting.len() as u64)
}

/// The facts of a job a notification carries.
pub fn job_facts(job: &job::Model) -> JobFacts {
    let saved = match job.output_size {
        Some(out) if job.status == stored::JobStatus::Completed => (job.source_size - out).max(0),
        _ => 0,
    };
    JobFacts {
        id: job.id,
        file_name: job.file_name.clone(),
        file_path: job.file_path.clone(),
        library_id: job.library_id,
        status: JobStatus::from(job.status).as_str().to_string(),
        original_size: job.source_size,
        output_size: job.output_size,
        bytes_saved: saved,
        failure_reason: job.failure_reason.clone(),
        failure_detail: job.failure_detail.clone(),
        node: job.node_name.clone(),
    }
}

/// What a job's transition to `to` owes the targets: `job.completed`, `job.failed`, and
/// `queue.drained` when nothing is left to run. Inside the transition's transaction; reads
/// nothing for a transition that does not end a job.
pub async fn job_ended(db: &impl ConnectionTrait, job: &job::Model, to: JobStatus) -> RepoResult<()> {
    if !to.is_terminal() {
        return Ok(());
    }
    let targets = enabled(db).await?;
    if targets.is_empty() {
        return Ok(());
    }
    let event = match to {
        JobStatus::Completed => Some(NotifyEvent::JobCompleted),
        JobStatus::Failed => Some(NotifyEvent::JobFailed),
        _ => None,
    };
    if let Some(event) = event {
        enqueue_to(db, &targets, event, serde_json::json!({ "job": job_facts(job) })).await?;
    }
    if targets.iter().any(|t| events_of(t).contains(&NotifyEvent::QueueDrained)) {
        let waiting = [JobStatus::Pending, JobStatus::Queued, JobStatus::Analyzing, JobStatus::Encoding];
        let left = job::Entity::find().filter(job::Column::Status.is_in(waiting)).count(db).await?;
        if left == 0 {
            enqueue_to(db, &targets, NotifyEvent::QueueDrained, serde_json::json!({})).await?;
        }
    }
    Ok(())
}

/// What a replace owes the connections (`domain::connect`): `file.replaced`, with the
/// file's path now and, when the replace renamed it, before. Inside the completion's
/// transaction, as `job_ended`.
pub async fn file_replaced(db: &impl ConnectionTrait, job: &job::Model, previous_path: &str) -> RepoResult<()> {
    let file = Replaced {
        path: job.file_path.clone(),
        previous_path: Some(previous_path.to_string()).filter(|p| *p != job.file_path),
    };
    enqueue(db, NotifyEvent::FileReplaced, serde_json::json!({ "file": file, "job": job_facts(job) })).await?;
    Ok(())
}

/// Owes `node.offline` or `node.online`.
pub async fn node_changed(db: &impl ConnectionTrait, online: bool, name: &str, reason: Option<&str>) -> RepoResult<()> {
    let event = if online { NotifyEvent::NodeOnline } else { NotifyEvent::NodeOffline };
    enqueue(db, event, serde_json::json!({ "node": { "name": name, "reason": reason } })).await?;
    Ok(())
}

/// Up to `limit` deliveries due at `at`, oldest first, with their targets.
pub async fn due(
    db: &impl ConnectionTrait,
    at: DateTime<Utc>,
    limit: u64,
) -> RepoResult<Vec<(delivery::Model, target::Model)>> {
    let rows = Deliveries::find()
        .filter(delivery::Column::NextAttemptAt.lte(at))
        .order_by_asc(delivery::Column::Id)
        .limit(limit)
        .find_also_related(Targets)
        .all(db)
        .await?;
    Ok(rows.into_iter().filter_map(|(d, t)| t.map(|t| (d, t))).collect())
}

/// The receiver took it: the row goes, and the target shows the delivery.
pub async fn delivered(db: &impl ConnectionTrait, delivery_id: i64, target_id: i32) -> RepoResult<()> {
    Deliveries::delete_by_id(delivery_id).exec(db).await?;
    record_success(db, target_id).await
}

/// The receiver did not take it: tried again at `next`; the target shows the error.
pub async fn failed(
    db: &impl ConnectionTrait,
    delivery: &delivery::Model,
    error: &str,
    next: DateTime<Utc>,
) -> RepoResult<()> {
    Deliveries::update_many()
        .col_expr(delivery::Column::Attempts, Expr::value(delivery.attempts.saturating_add(1)))
        .col_expr(delivery::Column::NextAttemptAt, Expr::value(next))
        .col_expr(delivery::Column::LastError, Expr::value(error.to_string()))
        .filter(delivery::Column::Id.eq(delivery.id))
        .exec(db)
        .await?;
    record_failure(db, delivery.target_id, error).await
}

/// A delivery (or a test) reached the target.
pub async fn record_success(db: &impl ConnectionTrait, target_id: i32) -> RepoResult<()> {
    Targets::update_many()
        .col_expr(Column::LastDeliveredAt, Expr::value(now()))
        .filter(Column::Id.eq(target_id))
        .exec(db)
        .await?;
    Ok(())
}

/// A delivery (or a test) did not reach the target.
pub async fn record_failure(db: &impl ConnectionTrait, target_id: i32, error: &str) -> RepoResult<()> {
    Targets::update_many()
        .col_expr(Column::LastError, Expr::value(error.to_string()))
        .col_expr(Column::LastErrorAt, Expr::value(now()))
        .filter(Column::Id.eq(target_id))
        .exec(db)
        .await?;
    Ok(())
}
