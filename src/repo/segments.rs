//! The planned spans of running jobs (`job_segments`): what the job's own run reports of
//! them (`sync_spans`), and the leases of spans given to helpers (`lease_span`, `renew`,
//! `release`, `sweep`). A helper's lease is fenced like a job's: every write it makes is a
//! compare-and-set on its lease id. Which process writes a span's files is settled on disk
//! (`media::partial::claim_span`); these rows say whom to ask, and show the work.

use chrono::{DateTime, Utc};
use entities::job;
use entities::job_segment::{ActiveModel, Column, Entity, Model};
use entities::sea_orm_active_enums::{self as stored, SegmentStatus};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, TransactionTrait,
};

use serde::{Deserialize, Serialize};

use super::{now, RepoError, RepoResult};
use crate::domain::segments::SpanView;

/// Where a planned span stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SegmentState {
    Queued,
    Encoding,
    Done,
}

/// One planned span of a job's video: a unit of work that the job's run or a helper slot on
/// any node encodes.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentView {
    pub index: i32,
    /// Source presentation timestamps it holds (`from <= pts < to`, the source video
    /// stream's time base); absent: unbounded on that side.
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub status: SegmentState,
    /// The node encoding it, or that encoded it.
    pub node_id: Option<i32>,
    pub node_name: Option<String>,
    /// Whether a helper (under the span's own lease) encodes it, rather than the job's run.
    pub helper: bool,
    /// Frames and bytes encoded so far (all of them once DONE).
    pub frames: i64,
    pub bytes: i64,
    pub fps: f64,
}

impl From<&Model> for SegmentView {
    fn from(m: &Model) -> Self {
        SegmentView {
            index: m.span,
            from: m.span_from,
            to: m.span_to,
            status: match m.status {
                SegmentStatus::Queued => SegmentState::Queued,
                SegmentStatus::Encoding => SegmentState::Encoding,
                SegmentStatus::Done => SegmentState::Done,
            },
            node_id: m.node_id,
            node_name: m.node_name.clone(),
            helper: m.lease_id.is_some(),
            frames: m.frames,
            bytes: m.bytes,
            fps: m.fps,
        }
    }
}

/// A node, as the rows name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef<'a> {
    pub id: i32,
    pub name: &'a str,
}

fn lease_lost(id: i32) -> RepoError {
    RepoError::Conflict(format!("job {id} is no longer held under this lease (it was taken over or released)"))
}

/// What a row should say, before it is written.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    status: SegmentStatus,
    node: Option<(i32, String)>,
    lease: Option<(String, DateTime<Utc>)>,
    frames: i64,
    bytes: i64,
    fps: f64,
}

impl Row {
    fn of(m: &Model) -> Row {
        Row {
            status: m.status,
            node: m.node_id.zip(m.node_name.clone()),
            lease: m.lease_id.clone().zip(m.lease_expires_at),
            frames: m.frames,
            bytes: m.bytes,
            fps: m.fps,
        }
    }
}

/// What helpers add to a job's own progress: frames of spans they hold or finished (not
/// yet taken in by the run), and their encoding speed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct HelperTotals {
    pub frames: u64,
    pub fps: f64,
}

/// What the job's run reports of its spans becomes the rows: done spans DONE (with the node
/// that did them, or the run's), spans its sessions encode ENCODING on its node, a span a
/// helper holds under a live lease left to it, the rest QUEUED. Written only while the job
/// is held under `lease`; rows past the plan (an earlier plan's) go. Answers what helpers
/// add to the run's progress.
pub async fn sync_spans<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    job_id: i32,
    lease: &str,
    owner: NodeRef<'_>,
    views: &[SpanView],
) -> RepoResult<HelperTotals> {
    let at = now();
    let txn = db.begin().await?;
    // Written first: SQLite refuses a transaction that read before it wrote once another
    // writer committed (see docs/ARCHITECTURE.md, "Layers").
    let held = job::Entity::update_many()
        .col_expr(job::Column::UpdatedAt, Expr::value(at))
        .filter(job::Column::Id.eq(job_id))
        .filter(job::Column::LeaseId.eq(lease))
        .filter(job::Column::Status.is_in([stored::JobStatus::Analyzing, stored::JobStatus::Encoding]))
        .exec(&txn)
        .await?;
    if held.rows_affected == 0 {
        return Err(lease_lost(job_id));
    }
    let existing = Entity::find().filter(Column::JobId.eq(job_id)).all(&txn).await?;
    let count = i32::try_from(views.len()).unwrap_or(i32::MAX);
    Entity::delete_many().filter(Column::JobId.eq(job_id)).filter(Column::Span.gte(count)).exec(&txn).await?;
    let mine = Some((owner.id, owner.name.to_string()));
    let mut totals = HelperTotals::default();
    for view in views {
        let span = i32::try_from(view.index).unwrap_or(i32::MAX);
        let old = existing.iter().find(|m| m.span == span);
        let helper = old.filter(|m| {
            m.status == SegmentStatus::Encoding && m.lease_id.is_some() && m.lease_expires_at.is_some_and(|e| e > at)
        });
        let (frames, bytes) =
            (i64::try_from(view.frames).unwrap_or(i64::MAX), i64::try_from(view.bytes).unwrap_or(i64::MAX));
        let row = if view.done {
            let node = old.and_then(|m| m.node_id.zip(m.node_name.clone())).or_else(|| mine.clone());
            Row { status: SegmentStatus::Done, node, lease: None, frames, bytes, fps: 0.0 }
        } else if view.here {
            let fps = old.filter(|m| m.node_id == Some(owner.id)).map_or(0.0, |m| m.fps);
            Row { status: SegmentStatus::Encoding, node: mine.clone(), lease: None, frames, bytes, fps }
        } else if let Some(h) = helper {
            Row::of(h)
        } else if let Some(d) = old.filter(|m| m.status == SegmentStatus::Done && m.node_id.is_some()) {
            // A helper finished it; the run takes its record in at its next look.
            Row::of(d)
        } else {
            Row { status: SegmentStatus::Queued, node: None, lease: None, frames, bytes, fps: 0.0 }
        };
        if row.lease.is_some() || (row.status == SegmentStatus::Done && !view.done) {
            totals.frames = totals.frames.saturating_add(u64::try_from(row.frames).unwrap_or(0));
            totals.fps += if row.lease.is_some() { row.fps } else { 0.0 };
        }
        if old.map(Row::of).as_ref() == Some(&row) {
            continue;
        }
        let model = ActiveModel {
            job_id: Set(job_id),
            span: Set(span),
            span_from: Set(view.from),
            span_to: Set(view.to),
            status: Set(row.status),
            node_id: Set(row.node.as_ref().map(|n| n.0)),
            node_name: Set(row.node.map(|n| n.1)),
            lease_id: Set(row.lease.as_ref().map(|l| l.0.clone())),
            lease_expires_at: Set(row.lease.map(|l| l.1)),
            frames: Set(row.frames),
            bytes: Set(row.bytes),
            fps: Set(row.fps),
            updated_at: Set(at),
        };
        Entity::insert(model)
            .on_conflict(
                OnConflict::columns([Column::JobId, Column::Span])
                    .update_columns([
                        Column::SpanFrom,
                        Column::SpanTo,
                        Column::Status,
                        Column::NodeId,
                        Column::NodeName,
                        Column::LeaseId,
                        Column::LeaseExpiresAt,
                        Column::Frames,
                        Column::Bytes,
                        Column::Fps,
                        Column::UpdatedAt,
                    ])
                    .to_owned(),
            )
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(totals)
}

/// Removes a job's spans (its partial output is gone: a new run plans them afresh).
pub async fn clear(db: &impl ConnectionTrait, job_id: i32) -> RepoResult<()> {
    Entity::delete_many().filter(Column::JobId.eq(job_id)).exec(db).await?;
    Ok(())
}

/// Running jobs with a span waiting for a helper, oldest job first.
pub async fn jobs_waiting(db: &impl ConnectionTrait) -> RepoResult<Vec<job::Model>> {
    let ids: Vec<i32> = Entity::find()
        .select_only()
        .column(Column::JobId)
        .distinct()
        .filter(Column::Status.eq(SegmentStatus::Queued))
        .into_tuple()
        .all(db)
        .await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(job::Entity::find()
        .filter(job::Column::Id.is_in(ids))
        .filter(job::Column::Status.eq(stored::JobStatus::Encoding))
        .order_by_asc(job::Column::Id)
        .all(db)
        .await?)
}

/// Gives the job's last waiting span (its run works from the first) to `node` under
/// `lease`; `None` when no span waits.
pub async fn lease_span(
    db: &impl ConnectionTrait,
    job_id: i32,
    node: NodeRef<'_>,
    lease: &str,
    expires: DateTime<Utc>,
) -> RepoResult<Option<Model>> {
    let Some(last) = Entity::find()
        .filter(Column::JobId.eq(job_id))
        .filter(Column::Status.eq(SegmentStatus::Queued))
        .order_by_desc(Column::Span)
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let taken = Entity::update_many()
        .col_expr(Column::Status, Expr::value(SegmentStatus::Encoding))
        .col_expr(Column::NodeId, Expr::value(node.id))
        .col_expr(Column::NodeName, Expr::value(node.name))
        .col_expr(Column::LeaseId, Expr::value(lease))
        .col_expr(Column::LeaseExpiresAt, Expr::value(expires))
        .col_expr(Column::Fps, Expr::value(0.0))
        .col_expr(Column::UpdatedAt, Expr::value(now()))
        .filter(Column::JobId.eq(job_id))
        .filter(Column::Span.eq(last.span))
        .filter(Column::Status.eq(SegmentStatus::Queued))
        .exec(db)
        .await?;
    if taken.rows_affected == 0 {
        return Ok(None);
    }
    Ok(Entity::find_by_id((job_id, last.span)).one(db).await?)
}

/// A helper's progress, which renews its lease; `false` when the lease is no longer its.
pub async fn renew(
    db: &impl ConnectionTrait,
    job_id: i32,
    span: u32,
    lease: &str,
    progress: (u64, f64, u64),
    expires: DateTime<Utc>,
) -> RepoResult<bool> {
    let (frames, fps, bytes) = progress;
    let done = Entity::update_many()
        .col_expr(Column::Frames, Expr::value(i64::try_from(frames).unwrap_or(i64::MAX)))
        .col_expr(Column::Fps, Expr::value(fps))
        .col_expr(Column::Bytes, Expr::value(i64::try_from(bytes).unwrap_or(i64::MAX)))
        .col_expr(Column::LeaseExpiresAt, Expr::value(expires))
        .col_expr(Column::UpdatedAt, Expr::value(now()))
        .filter(Column::JobId.eq(job_id))
        .filter(Column::Span.eq(i32::try_from(span).unwrap_or(i32::MAX)))
        .filter(Column::LeaseId.eq(lease))
        .filter(Column::Status.eq(SegmentStatus::Encoding))
        .exec(db)
        .await?;
    Ok(done.rows_affected == 1)
}

/// What a helper encoded of a span it finished.
///
/// On the link (`Call::SpanEnd`) it travels as the pair `[frames, bytes]`, which is what
/// nodes from before this struct send and read; an object `{"frames", "bytes"}` is read
/// too, so a later change to send it is understood by nodes from this one on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SpanDoneWire", into = "(u64, u64)")]
pub struct SpanDone {
    pub frames: u64,
    pub bytes: u64,
}

/// Either shape of `SpanDone` on the wire.
#[derive(Deserialize)]
#[serde(untagged)]
enum SpanDoneWire {
    Pair(u64, u64),
    Named { frames: u64, bytes: u64 },
}

impl From<SpanDoneWire> for SpanDone {
    fn from(wire: SpanDoneWire) -> Self {
        match wire {
            SpanDoneWire::Pair(frames, bytes) | SpanDoneWire::Named { frames, bytes } => SpanDone { frames, bytes },
        }
    }
}

impl From<SpanDone> for (u64, u64) {
    fn from(done: SpanDone) -> Self {
        (done.frames, done.bytes)
    }
}

/// A helper ended: its span DONE with what it encoded, or back to QUEUED for the next
/// taker (stopped, failed, or found nothing to do). Only under its own lease.
pub async fn release(
    db: &impl ConnectionTrait,
    job_id: i32,
    span: u32,
    lease: &str,
    done: Option<SpanDone>,
) -> RepoResult<bool> {
    let mut update = Entity::update_many()
        .col_expr(Column::LeaseId, Expr::value(Option::<String>::None))
        .col_expr(Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None))
        .col_expr(Column::Fps, Expr::value(0.0))
        .col_expr(Column::UpdatedAt, Expr::value(now()));
    update = match done {
        Some(SpanDone { frames, bytes }) => update
            .col_expr(Column::Status, Expr::value(SegmentStatus::Done))
            .col_expr(Column::Frames, Expr::value(i64::try_from(frames).unwrap_or(i64::MAX)))
            .col_expr(Column::Bytes, Expr::value(i64::try_from(bytes).unwrap_or(i64::MAX))),
        None => update
            .col_expr(Column::Status, Expr::value(SegmentStatus::Queued))
            .col_expr(Column::NodeId, Expr::value(Option::<i32>::None))
            .col_expr(Column::NodeName, Expr::value(Option::<String>::None)),
    };
    let result = update
        .filter(Column::JobId.eq(job_id))
        .filter(Column::Span.eq(i32::try_from(span).unwrap_or(i32::MAX)))
        .filter(Column::LeaseId.eq(lease))
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

/// Helper leases that ran out (their node died or was cut off) go back to QUEUED.
pub async fn sweep(db: &impl ConnectionTrait, at: DateTime<Utc>) -> RepoResult<u64> {
    let result = Entity::update_many()
        .col_expr(Column::Status, Expr::value(SegmentStatus::Queued))
        .col_expr(Column::NodeId, Expr::value(Option::<i32>::None))
        .col_expr(Column::NodeName, Expr::value(Option::<String>::None))
        .col_expr(Column::LeaseId, Expr::value(Option::<String>::None))
        .col_expr(Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None))
        .col_expr(Column::Fps, Expr::value(0.0))
        .col_expr(Column::UpdatedAt, Expr::value(at))
        .filter(Column::Status.eq(SegmentStatus::Encoding))
        .filter(Column::LeaseId.is_not_null())
        .filter(Column::LeaseExpiresAt.lt(at))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}

/// Whether `node_id` holds planned span `span` of the job under `lease`, and the lease has
/// not run out.
pub async fn held_by(db: &impl ConnectionTrait, job_id: i32, span: u32, node_id: i32, lease: &str) -> RepoResult<bool> {
    let Ok(span) = i32::try_from(span) else { return Ok(false) };
    let row = Entity::find_by_id((job_id, span)).one(db).await?;
    Ok(row.is_some_and(|r| {
        r.status == SegmentStatus::Encoding
            && r.node_id == Some(node_id)
            && r.lease_id.as_deref() == Some(lease)
            && r.lease_expires_at.is_some_and(|at| at >= now())
    }))
}

/// A job's spans, in order.
pub async fn of_job(db: &impl ConnectionTrait, job_id: i32) -> RepoResult<Vec<Model>> {
    Ok(Entity::find().filter(Column::JobId.eq(job_id)).order_by_asc(Column::Span).all(db).await?)
}

/// The nodes whose helpers hold spans of the job now.
pub async fn helper_nodes(db: &impl ConnectionTrait, job_id: i32) -> RepoResult<Vec<i32>> {
    let mut ids: Vec<i32> = of_job(db, job_id)
        .await?
        .into_iter()
        .filter(|m| m.status == SegmentStatus::Encoding && m.lease_id.is_some())
        .filter_map(|m| m.node_id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}
