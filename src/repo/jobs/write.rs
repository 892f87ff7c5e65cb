//! Writes to jobs: insert and delete, and every change of a job's row as a `JobChange`:
//! status changes checked against the status the caller expects (compare-and-set, and the
//! caller's lease where it holds one) and recorded as events in the same transaction, and
//! live fields written only while the job is held under the writer's lease.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use entities::job::{self, ActiveModel, Column, Entity};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set, TransactionTrait};
use serde::{Deserialize, Serialize};

use super::read::get;
use crate::domain::job::{Effect, JobStatus, Outcome, Stage};
use crate::domain::link::JobField;
use crate::domain::path_bytes;
use crate::repo::events::{self, NewEvent};
use crate::repo::{now, RepoError, RepoResult};

#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub library_id: Option<i32>,
    /// A UTF-8 path (jobs of scans and imports come through `register_batch`, which takes
    /// any bytes).
    pub file_path: String,
    pub file_name: String,
    pub status: JobStatus,
    pub target_codec: String,
    pub source_size: i64,
    pub source_mtime_ns: Option<i64>,
    pub source_inode: Option<i64>,
    pub forced: bool,
}

/// Inserts a job and its first event.
pub async fn insert<C: ConnectionTrait + TransactionTrait>(db: &C, new: NewJob) -> RepoResult<job::Model> {
    let txn = db.begin().await?;
    let at = now();
    let path = new.file_path.clone();
    let status = new.status;
    let model = ActiveModel {
        library_id: Set(new.library_id),
        file_path: Set(new.file_path),
        file_name: Set(new.file_name),
        status: Set(status.into()),
        stage: Set(None),
        progress: Set(0.0),
        fps: Set(0.0),
        retry_count: Set(0),
        crash_count: Set(0),
        stalled: Set(false),
        forced: Set(new.forced),
        target_codec: Set(new.target_codec),
        source_size: Set(new.source_size),
        source_mtime_ns: Set(new.source_mtime_ns),
        source_inode: Set(new.source_inode),
        created_at: Set(at),
        updated_at: Set(at),
        queued_at: Set((status == JobStatus::Queued).then_some(at)),
        ..Default::default()
    }
    .insert(&txn)
    .await
    .map_err(|e| RepoError::unique(e, || format!("a job for {path:?} exists")))?;
    let mut event = NewEvent::new("created");
    event.to_status = Some(status);
    events::append(&txn, model.id, event).await?;
    txn.commit().await?;
    Ok(model)
}

/// Columns of a job's row that a change writes; `None` leaves a column as it is. The one
/// change type of a job: a supervisor's progress and results (on a linked node too: it
/// travels the cluster link as JSON), the scheduler's start, the columns of a transition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobChange {
    pub source_codec: Option<String>,
    pub source_size: Option<i64>,
    pub duration_seconds: Option<f64>,
    pub source_bitrate: Option<i64>,
    pub hdr: Option<String>,
    pub probe: Option<serde_json::Value>,
    pub stage: Option<Stage>,
    pub progress: Option<f64>,
    pub fps: Option<f64>,
    pub eta_seconds: Option<i64>,
    pub stalled: Option<bool>,
    pub last_progress_at: Option<DateTime<Utc>>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub encoder: Option<String>,
    pub cpu_time_ms: Option<i64>,
    pub wall_time_ms: Option<i64>,
    pub output_size: Option<i64>,
    pub source_mtime_ns: Option<i64>,
    pub source_inode: Option<i64>,
    /// A new path (a container change): stored as its readable form and its bytes.
    #[serde(default, with = "path_bytes::lossless_opt")]
    pub file_path: Option<PathBuf>,
    /// The readable form of the new path's file name.
    pub file_name: Option<String>,
    /// Why the job is skipped, with the transition that skips it.
    pub skip_reason: Option<String>,
    /// VMAF mode: what the search chose and predicted, and what the output measured.
    pub chosen_quality: Option<i32>,
    pub predicted_size: Option<i64>,
    pub vmaf: Option<f64>,
    pub vmaf_p5: Option<f64>,
    /// A two-pass encode: the pass it is in (1 or 2).
    pub encode_pass: Option<i32>,
    /// Written by the main node's scheduler alone: never read from (nor sent over) the
    /// cluster link, so a linked node cannot hand a job to another node or lease.
    #[serde(skip)]
    pub assignment: Option<Assignment>,
}

/// The node a job was started on, under which lease, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub node_id: i32,
    pub node_name: String,
    pub lease_id: String,
    pub started_at: DateTime<Utc>,
}

impl JobChange {
    /// The fields this change writes (what a linked node's patch is judged by, see
    /// `domain::link`). Destructured whole, so a new field cannot be left out of the judging.
    pub fn fields(&self) -> Vec<JobField> {
        let JobChange {
            source_codec,
            source_size,
            duration_seconds,
            source_bitrate,
            hdr,
            probe,
            stage,
            progress,
            fps,
            eta_seconds,
            stalled,
            last_progress_at,
            lease_expires_at,
            encoder,
            cpu_time_ms,
            wall_time_ms,
            output_size,
            source_mtime_ns,
            source_inode,
            file_path,
            file_name,
            skip_reason,
            chosen_quality,
            predicted_size,
            vmaf,
            vmaf_p5,
            encode_pass,
            assignment: _,
        } = self;
        [
            (source_codec.is_some(), JobField::SourceCodec),
            (source_size.is_some(), JobField::SourceSize),
            (duration_seconds.is_some(), JobField::DurationSeconds),
            (source_bitrate.is_some(), JobField::SourceBitrate),
            (hdr.is_some(), JobField::Hdr),
            (probe.is_some(), JobField::Probe),
            (stage.is_some(), JobField::Stage),
            (progress.is_some(), JobField::Progress),
            (fps.is_some(), JobField::Fps),
            (eta_seconds.is_some(), JobField::EtaSeconds),
            (stalled.is_some(), JobField::Stalled),
            (last_progress_at.is_some(), JobField::LastProgressAt),
            (lease_expires_at.is_some(), JobField::LeaseExpiresAt),
            (encoder.is_some(), JobField::Encoder),
            (cpu_time_ms.is_some(), JobField::CpuTimeMs),
            (wall_time_ms.is_some(), JobField::WallTimeMs),
            (output_size.is_some(), JobField::OutputSize),
            (source_mtime_ns.is_some(), JobField::SourceMtimeNs),
            (source_inode.is_some(), JobField::SourceInode),
            (file_path.is_some(), JobField::FilePath),
            (file_name.is_some(), JobField::FileName),
            (skip_reason.is_some(), JobField::SkipReason),
            (chosen_quality.is_some(), JobField::ChosenQuality),
            (predicted_size.is_some(), JobField::PredictedSize),
            (vmaf.is_some(), JobField::Vmaf),
            (vmaf_p5.is_some(), JobField::VmafP5),
            (encode_pass.is_some(), JobField::EncodePass),
        ]
        .into_iter()
        .filter_map(|(set, field)| set.then_some(field))
        .collect()
    }

    pub(super) fn into_active(self) -> ActiveModel {
        let mut m = <ActiveModel as Default>::default();
        macro_rules! set {
            ($($field:ident),*) => { $(if let Some(v) = self.$field { m.$field = Set(v); })* };
        }
        macro_rules! set_some {
            ($($field:ident),*) => { $(if let Some(v) = self.$field { m.$field = Set(Some(v)); })* };
        }
        set!(source_size, progress, fps, stalled, file_name);
        if let Some(path) = self.file_path {
            m.file_path = Set(path_bytes::readable(path.as_os_str()).into_owned());
            m.file_path_raw = Set(path_bytes::raw_if_not_utf8(path.as_os_str()));
        }
        set_some!(
            source_codec,
            duration_seconds,
            source_bitrate,
            hdr,
            probe,
            eta_seconds,
            last_progress_at,
            lease_expires_at,
            encoder,
            cpu_time_ms,
            wall_time_ms,
            output_size,
            source_mtime_ns,
            source_inode,
            skip_reason,
            chosen_quality,
            predicted_size,
            vmaf,
            vmaf_p5,
            encode_pass
        );
        if let Some(stage) = self.stage {
            m.stage = Set(Some(stage.into()));
        }
        if let Some(assignment) = self.assignment {
            m.node_id = Set(Some(assignment.node_id));
            m.node_name = Set(Some(assignment.node_name));
            m.lease_id = Set(Some(assignment.lease_id));
            m.started_at = Set(Some(assignment.started_at));
        }
        m
    }
}

/// A transition the state machine accepted, as it is written.
#[derive(Debug, Clone)]
pub struct StatusChange {
    /// The new status and counters, and the effects that have columns (failure, lease,
    /// progress); they win over `change`.
    pub outcome: Outcome,
    /// The caller's own columns, written in the same statement.
    pub change: JobChange,
    /// The failure's own words, stored when the outcome records a failure.
    pub failure_detail: Option<String>,
    pub event: NewEvent,
}

impl StatusChange {
    /// The row's columns: the caller's change, then what the outcome says.
    pub(super) fn into_active(self, at: DateTime<Utc>) -> ActiveModel {
        let StatusChange { outcome, change, failure_detail, .. } = self;
        let mut set = change.into_active();
        set.status = Set(outcome.to.into());
        set.updated_at = Set(at);
        set.retry_count = Set(i32::try_from(outcome.retry_count).unwrap_or(i32::MAX));
        set.forced = Set(outcome.forced);
        set.crash_count = Set(i32::try_from(outcome.crash_count).unwrap_or(i32::MAX));
        for effect in &outcome.effects {
            match effect {
                Effect::RecordFailure(code) => {
                    set.failure_code = Set(Some((*code).into()));
                    set.failure_reason = Set(Some(code.reason().to_string()));
                    set.failure_detail = Set(failure_detail.clone());
                }
                Effect::ClearFailure => {
                    set.failure_code = Set(None);
                    set.failure_reason = Set(None);
                    set.failure_detail = Set(None);
                }
                Effect::ReleaseNode => {
                    set.lease_id = Set(None);
                    set.lease_expires_at = Set(None);
                }
                Effect::StartFromScratch => {
                    set.progress = Set(0.0);
                    // Whatever skipped the file, and what a search found and the output
                    // measured, was about an attempt that is over.
                    set.skip_reason = Set(None);
                    set.chosen_quality = Set(None);
                    set.predicted_size = Set(None);
                    set.vmaf = Set(None);
                    set.vmaf_p5 = Set(None);
                    set.encode_pass = Set(None);
                    // The record of an earlier swap (see `media::replace::swapped_on_record`)
                    // belongs to the attempt that made it.
                    set.output_size = Set(None);
                }
                Effect::StopTranscoder { .. }
                | Effect::KeepPartial
                | Effect::DeletePartial
                | Effect::ContinueFromPartial
                | Effect::UseRetryProfile(_) => {}
            }
        }
        if !outcome.to.is_running() {
            set.stage = Set(None);
            // A pass is where a running encode is; the history keeps which were run.
            set.encode_pass = Set(None);
            set.fps = Set(0.0);
            set.eta_seconds = Set(None);
            set.stalled = Set(false);
        }
        match outcome.to {
            JobStatus::Queued => set.queued_at = Set(Some(at)),
            JobStatus::Completed => {
                set.completed_at = Set(Some(at));
                set.progress = Set(100.0);
            }
            JobStatus::Skipped => set.completed_at = Set(Some(at)),
            _ => {}
        }
        set
    }
}

/// Moves a job from `from` to `change.outcome.to`, only if it is still in `from`; writes the other
/// columns and the event in the same transaction. A job in another status is a conflict:
/// the caller's view was stale, and nothing is written.
pub async fn change_status<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    id: i32,
    from: JobStatus,
    change: StatusChange,
) -> RepoResult<job::Model> {
    change_status_as(db, id, from, None, change).await
}

/// `change_status` with the caller's lease in the compare-and-set as well: `Some(lease)`
/// moves the job only while it is still held under that lease (a node that lost the job
/// cannot change it); `None` is for changes no lease holder makes (users' actions on jobs
/// no node runs, the scheduler's start, the main node's requeues).
pub async fn change_status_as<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    id: i32,
    from: JobStatus,
    lease: Option<&str>,
    change: StatusChange,
) -> RepoResult<job::Model> {
    let (to, mut event) = (change.outcome.to, change.event.clone());
    // A completion that records a new inode at the job's path is a replace: the connections
    // are told of it, by the path the row had before (a container change renames the file).
    // Read before the transaction: on SQLite a transaction that reads first and writes after
    // another writer committed is refused at once ("database is locked"), where one that
    // writes first waits its turn. The path of a running job changes only by this
    // completion, and the compare-and-set below fails if the job moved on.
    let replaced = to == JobStatus::Completed && change.change.source_inode.is_some();
    let previous_path = if replaced { Some(get(db, id).await?.file_path) } else { None };
    let txn = db.begin().await?;
    let set = change.into_active(now());
    let mut update = Entity::update_many().set(set).filter(Column::Id.eq(id)).filter(Column::Status.eq(from));
    if let Some(lease) = lease {
        update = update.filter(Column::LeaseId.eq(lease));
    }
    let result = update.exec(&txn).await?;
    if result.rows_affected == 0 {
        let current = get(&txn, id).await?;
        if current.status == from {
            return Err(lease_lost(id));
        }
        return Err(RepoError::Conflict(format!("job {id} is {}, not {from}", JobStatus::from(current.status))));
    }
    event.from_status = Some(from);
    event.to_status = Some(to);
    events::append(&txn, id, event).await?;
    let model = get(&txn, id).await?;
    // Notifications it owes are written with it: a restart loses none.
    crate::repo::notifications::job_ended(&txn, &model, to).await?;
    if let Some(previous_path) = previous_path {
        crate::repo::notifications::file_replaced(&txn, &model, &previous_path).await?;
    }
    txn.commit().await?;
    Ok(model)
}

/// Writes live fields (progress, fps, ETA, stage…) without a status change or an event.
pub async fn update_live(db: &impl ConnectionTrait, id: i32, change: JobChange) -> RepoResult<()> {
    let mut set = change.into_active();
    set.updated_at = Set(now());
    let result = Entity::update_many().set(set).filter(Column::Id.eq(id)).exec(db).await?;
    if result.rows_affected == 0 {
        return Err(RepoError::NotFound(format!("job {id}")));
    }
    Ok(())
}

/// Appends an event to a job's history without a status change (replace steps, notes).
pub async fn record_event(db: &impl ConnectionTrait, id: i32, event: NewEvent) -> RepoResult<()> {
    events::append(db, id, event).await?;
    Ok(())
}

/// Sets a job's priority (within `domain::arr::PRIORITIES`, checked by the caller).
pub async fn set_priority(db: &impl ConnectionTrait, id: i32, priority: i32) -> RepoResult<job::Model> {
    let result = Entity::update_many()
        .col_expr(Column::Priority, Expr::value(priority))
        .col_expr(Column::UpdatedAt, Expr::value(now()))
        .filter(Column::Id.eq(id))
        .exec(db)
        .await?;
    if result.rows_affected == 0 {
        return Err(RepoError::NotFound(format!("job {id}")));
    }
    get(db, id).await
}

/// Deletes jobs (and, by cascade, their events).
pub async fn delete_many(db: &impl ConnectionTrait, ids: &[i32]) -> RepoResult<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut total = 0;
    for chunk in ids.chunks(500) {
        total += Entity::delete_many().filter(Column::Id.is_in(chunk.iter().copied())).exec(db).await?.rows_affected;
    }
    Ok(total)
}

fn lease_lost(id: i32) -> RepoError {
    RepoError::Conflict(format!("job {id} is no longer held under this lease (it was taken over or released)"))
}

/// `update_live` for the job's holder: writes only while the job runs under `lease`.
pub async fn update_live_leased(db: &impl ConnectionTrait, id: i32, lease: &str, change: JobChange) -> RepoResult<()> {
    let mut set = change.into_active();
    set.updated_at = Set(now());
    let result = Entity::update_many()
        .set(set)
        .filter(Column::Id.eq(id))
        .filter(Column::LeaseId.eq(lease))
        .filter(Column::Status.is_in([JobStatus::Analyzing, JobStatus::Encoding]))
        .exec(db)
        .await?;
    if result.rows_affected == 0 {
        get(db, id).await?;
        return Err(lease_lost(id));
    }
    Ok(())
}

/// `record_event` for the job's holder: the event is appended only while the job is held
/// under `lease`, checked by an update of the job's row in the same transaction.
pub async fn record_event_leased<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    id: i32,
    lease: &str,
    event: NewEvent,
) -> RepoResult<()> {
    let txn = db.begin().await?;
    let held = Entity::update_many()
        .set(ActiveModel { updated_at: Set(now()), ..Default::default() })
        .filter(Column::Id.eq(id))
        .filter(Column::LeaseId.eq(lease))
        .exec(&txn)
        .await?;
    if held.rows_affected == 0 {
        get(&txn, id).await?;
        return Err(lease_lost(id));
    }
    events::append(&txn, id, event).await?;
    txn.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change crosses the cluster link as JSON: the field names are those linked nodes of
    /// the previous version send and read, and the assignment never travels either way.
    #[test]
    fn a_change_keeps_its_wire_names_and_never_carries_an_assignment() {
        let assignment =
            Assignment { node_id: 9, node_name: "w".into(), lease_id: "l".into(), started_at: chrono::Utc::now() };
        let change = JobChange {
            stage: Some(Stage::Encoding),
            progress: Some(5.0),
            source_codec: Some("h264".into()),
            assignment: Some(assignment),
            ..Default::default()
        };
        let json = serde_json::to_value(&change).unwrap();
        assert_eq!(
            (&json["stage"], &json["progress"], &json["sourceCodec"]),
            (&"ENCODING".into(), &5.0.into(), &"h264".into())
        );
        assert!(json.get("assignment").is_none() && json.get("nodeId").is_none(), "{json}");

        let sent = serde_json::json!({
            "stage": "TRANSFERRING",
            "progress": 12.5,
            "eta": null,
            "leaseExpiresAt": null,
            "nodeId": 3,
            "assignment": {"nodeId": 3, "nodeName": "x", "leaseId": "stolen", "startedAt": "2026-01-01T00:00:00Z"},
        });
        let read: JobChange = serde_json::from_value(sent).unwrap();
        assert_eq!(read, JobChange { stage: Some(Stage::Transferring), progress: Some(12.5), ..Default::default() });
    }
}
