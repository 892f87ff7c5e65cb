//! Jobs: insert, read, list with filters, and status changes that are checked against the
//! status the caller expects (compare-and-set) and recorded as events in one transaction.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use entities::job::{self, ActiveModel, Column, Entity};
use entities::sea_orm_active_enums as stored;
use sea_orm::sea_query::{Expr, Func, LikeExpr};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, Order, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Select, Set, TransactionTrait,
};
use serde::{Deserialize, Serialize};

use super::events::{self, NewEvent};
use super::{now, Page, RepoError, RepoResult};
use crate::domain::job::{Effect, JobSnapshot, JobStatus, Outcome, Stage};
use crate::domain::link::JobField;
use crate::domain::path_bytes;

pub const MAX_PAGE_SIZE: u64 = 500;
pub const DEFAULT_PAGE_SIZE: u64 = 50;

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

pub async fn get(db: &impl ConnectionTrait, id: i32) -> RepoResult<job::Model> {
    Entity::find_by_id(id).one(db).await?.ok_or_else(|| RepoError::NotFound(format!("job {id}")))
}

/// The file a job works on, byte for byte: the one way from a job's row to the filesystem
/// (`file_path` alone is its readable form, see `domain::path_bytes`).
pub fn source_path(job: &job::Model) -> PathBuf {
    path_bytes::from_stored(&job.file_path, job.file_path_raw.as_deref())
}

/// The job of exactly this path (a path that is not UTF-8 is matched on its bytes, never on
/// the readable form another path may share).
pub async fn find_by_path(db: &impl ConnectionTrait, path: impl AsRef<Path>) -> RepoResult<Option<job::Model>> {
    let path = path.as_ref().as_os_str();
    let raw = match path_bytes::raw_if_not_utf8(path) {
        Some(bytes) => Column::FilePathRaw.eq(bytes),
        None => Column::FilePathRaw.is_null(),
    };
    Ok(Entity::find().filter(Column::FilePath.eq(path_bytes::readable(path).as_ref())).filter(raw).one(db).await?)
}

/// The jobs not ended whose files are in `folder` (or below it): where the orphan sweep
/// looks for the owner of a partial folder whose name was shortened.
pub async fn live_under(db: &impl ConnectionTrait, folder: &Path) -> RepoResult<Vec<job::Model>> {
    let prefix = path_bytes::readable(folder.as_os_str()).replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    let ended: Vec<stored::JobStatus> =
        JobStatus::ALL.iter().copied().filter(|s| s.is_terminal()).map(stored::JobStatus::from).collect();
    Ok(Entity::find()
        .filter(Expr::col(Column::FilePath).like(LikeExpr::new(format!("{prefix}/%")).escape('\\')))
        .filter(Column::Status.is_not_in(ended))
        .all(db)
        .await?)
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
        ]
        .into_iter()
        .filter_map(|(set, field)| set.then_some(field))
        .collect()
    }

    fn into_active(self) -> ActiveModel {
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
            vmaf_p5
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
    fn into_active(self, at: DateTime<Utc>) -> ActiveModel {
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
                    // The record of an earlier swap (see `swapped_on_record` in
                    // `actors::job::commit`) belongs to the attempt that made it.
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
    super::notifications::job_ended(&txn, &model, to).await?;
    if let Some(previous_path) = previous_path {
        super::notifications::file_replaced(&txn, &model, &previous_path).await?;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum JobSort {
    #[default]
    CreatedAt,
    UpdatedAt,
    CompletedAt,
    FileName,
    Status,
    Progress,
    SourceSize,
}

impl JobSort {
    pub const NAMES: &'static [(&'static str, JobSort)] = &[
        ("createdAt", JobSort::CreatedAt),
        ("updatedAt", JobSort::UpdatedAt),
        ("completedAt", JobSort::CompletedAt),
        ("fileName", JobSort::FileName),
        ("status", JobSort::Status),
        ("progress", JobSort::Progress),
        ("sourceSize", JobSort::SourceSize),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, sort)| *sort == self).map_or("createdAt", |(name, _)| *name)
    }

    /// The sort of that name, in any case.
    pub fn named(name: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(known, _)| known.eq_ignore_ascii_case(name)).map(|(_, sort)| *sort)
    }

    fn column(self) -> Column {
        match self {
            JobSort::CreatedAt => Column::CreatedAt,
            JobSort::UpdatedAt => Column::UpdatedAt,
            JobSort::CompletedAt => Column::CompletedAt,
            JobSort::FileName => Column::FileName,
            JobSort::Status => Column::Status,
            JobSort::Progress => Column::Progress,
            JobSort::SourceSize => Column::SourceSize,
        }
    }
}

/// Filters, order and page of a job listing.
#[derive(Debug, Clone, PartialEq)]
pub struct JobQuery {
    pub statuses: Vec<JobStatus>,
    pub library_id: Option<i32>,
    pub node: Option<String>,
    /// Case-insensitive substring of the file name.
    pub q: Option<String>,
    pub sort: JobSort,
    pub descending: bool,
    /// 1-based. Not used with `after`.
    pub page: u64,
    pub page_size: u64,
    /// A keyset page: the rows right after this one, in the query's order.
    pub after: Option<Cursor>,
}

impl Default for JobQuery {
    fn default() -> Self {
        JobQuery {
            statuses: Vec::new(),
            library_id: None,
            node: None,
            q: None,
            sort: JobSort::CreatedAt,
            descending: true,
            page: 1,
            page_size: DEFAULT_PAGE_SIZE,
            after: None,
        }
    }
}

/// Where a keyset page starts: right after the row with this sort value and id. `list` makes
/// one from the last row of every full page (`nextCursor`), and a client hands it back as
/// `after`. A page so found is read from the sort's index, however deep (an `OFFSET` walks
/// every row before it), and rows added or moved meanwhile shift nothing after the cursor.
/// Made only by `list` and `decode`, so its value always fits its sort.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    sort: JobSort,
    descending: bool,
    /// The row's sort value as JSON: a string (times as RFC 3339, status, file name), a number
    /// (progress, size), or null (no completion time).
    value: serde_json::Value,
    id: i32,
}

impl Cursor {
    /// The sort and direction (descending) of the listing that made it.
    pub fn order(&self) -> (JobSort, bool) {
        (self.sort, self.descending)
    }

    fn of(sort: JobSort, descending: bool, job: &job::Model) -> Self {
        use chrono::SecondsFormat::AutoSi;
        use sea_orm::ActiveEnum;
        let time = |at: &DateTime<Utc>| serde_json::Value::from(at.to_rfc3339_opts(AutoSi, true));
        let value = match sort {
            JobSort::CreatedAt => time(&job.created_at),
            JobSort::UpdatedAt => time(&job.updated_at),
            JobSort::CompletedAt => job.completed_at.as_ref().map_or(serde_json::Value::Null, time),
            JobSort::FileName => job.file_name.clone().into(),
            JobSort::Status => job.status.to_value().into(),
            JobSort::Progress => job.progress.into(),
            JobSort::SourceSize => job.source_size.into(),
        };
        Cursor { sort, descending, value, id: job.id }
    }

    /// `asc` or `desc`, as the API and the cursor's text spell it.
    fn direction(&self) -> &'static str {
        if self.descending {
            "desc"
        } else {
            "asc"
        }
    }

    /// The listing's order in the API's words, e.g. `fileName asc`.
    pub fn order_name(&self) -> String {
        format!("{} {}", self.sort.name(), self.direction())
    }

    /// The opaque text a client sees: base64url of `[sort, "asc"|"desc", value, id]`.
    pub fn encode(&self) -> String {
        use base64::Engine;
        let text = serde_json::json!([self.sort.name(), self.direction(), self.value, self.id]).to_string();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
    }

    /// Reads a cursor that `encode` made; None for anything else.
    pub fn decode(text: &str) -> Option<Self> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
        let (sort, order, value, id): (String, String, serde_json::Value, i32) = serde_json::from_slice(&bytes).ok()?;
        let sort = JobSort::named(&sort)?;
        let descending = match order.as_str() {
            "desc" => true,
            "asc" => false,
            _ => return None,
        };
        let cursor = Cursor { sort, descending, value, id };
        cursor.bound().ok()?;
        Some(cursor)
    }

    /// The sort value as the database compares it; Ok(None) for a NULL completion time.
    fn bound(&self) -> Result<Option<sea_orm::Value>, ()> {
        let time = |value: &serde_json::Value| {
            value
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|at| Some(sea_orm::Value::from(at.with_timezone(&Utc))))
                .ok_or(())
        };
        match self.sort {
            JobSort::CreatedAt | JobSort::UpdatedAt => time(&self.value),
            JobSort::CompletedAt if self.value.is_null() => Ok(None),
            JobSort::CompletedAt => time(&self.value),
            JobSort::FileName | JobSort::Status => {
                self.value.as_str().map(|t| Some(sea_orm::Value::from(t.to_owned()))).ok_or(())
            }
            JobSort::Progress => self.value.as_f64().map(|n| Some(sea_orm::Value::from(n))).ok_or(()),
            JobSort::SourceSize => self.value.as_i64().map(|n| Some(sea_orm::Value::from(n))).ok_or(()),
        }
    }

    /// The rows after the cursor's, in `(sort column, id)` order (NULL, no completion time,
    /// the smallest value), as consecutive ranges, each a seek into the sort's index: first the
    /// rest of the cursor's own value by id, then the values beyond it (and, descending by
    /// completion, the jobs without one). One row comparison `(column, id) < (value, id)`
    /// would say the same, but SQLite seeks on its first column only and then walks every
    /// row of a tied value: a batch of jobs registered at one instant made such a page walk
    /// 50,000 rows (BENCHMARKS.md, API).
    fn ranges(&self) -> Vec<sea_orm::sea_query::SimpleExpr> {
        let column = self.sort.column();
        let beyond_id = if self.descending { Column::Id.lt(self.id) } else { Column::Id.gt(self.id) };
        let nullable = self.sort == JobSort::CompletedAt;
        match (self.bound(), self.descending) {
            (Ok(Some(value)), descending) => {
                let ties = Expr::col(column).eq(value.clone()).and(beyond_id);
                let beyond = if descending { Expr::col(column).lt(value) } else { Expr::col(column).gt(value) };
                let mut ranges = vec![ties, beyond];
                if nullable && descending {
                    ranges.push(Expr::col(column).is_null());
                }
                ranges
            }
            // `decode` refuses a value that does not fit the sort: Err cannot happen here.
            (Ok(None) | Err(()), true) => vec![Expr::col(column).is_null().and(beyond_id)],
            (Ok(None) | Err(()), false) => {
                vec![Expr::col(column).is_null().and(beyond_id), Expr::col(column).is_not_null()]
            }
        }
    }
}

/// Above this many matching rows, a filtered page in another order than the default walks the
/// sort's index on SQLite (see `filtered`): finding a page there reads about
/// `page size × all rows / matching rows` entries, while the filter's index needs every
/// matching row read and sorted.
const SQLITE_WALK_SORT_INDEX_ABOVE: u64 = 2_000;

/// The listing's filters. `walk_sort_index`: on SQLite, keep the status, library and node
/// conditions from choosing an index (a unary `+` on the column, SQLite's documented way), so
/// that the sort's index is walked instead. Without statistics for a skewed column SQLite
/// takes the filter's index whenever there is one: 100,000 QUEUED jobs sorted by name were
/// all read and sorted for each page of 50, 150 ms a page (BENCHMARKS.md, API). PostgreSQL
/// decides from its statistics.
fn filtered(query: &JobQuery, walk_sort_index: bool) -> Select<Entity> {
    let column = |column: Column| {
        use sea_orm::{EntityName, IdenStatic};
        if walk_sort_index {
            Expr::expr(Expr::cust(format!("+\"{}\".\"{}\"", Entity.table_name(), column.as_str())))
        } else {
            Expr::col(column)
        }
    };
    let mut select = Entity::find();
    if !query.statuses.is_empty() {
        let statuses = query.statuses.iter().map(|s| sea_orm::ActiveEnum::into_value(stored::JobStatus::from(*s)));
        select = select.filter(column(Column::Status).is_in(statuses));
    }
    if let Some(library_id) = query.library_id {
        select = select.filter(column(Column::LibraryId).eq(library_id));
    }
    if let Some(node) = &query.node {
        select = select.filter(column(Column::NodeName).eq(node.as_str()));
    }
    if let Some(q) = query.q.as_deref().filter(|q| !q.is_empty()) {
        let escaped = q.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        select = select.filter(
            Expr::expr(Func::lower(Expr::col(Column::FileName)))
                .like(LikeExpr::new(format!("%{escaped}%")).escape('\\')),
        );
    }
    select
}

/// Whether a page of `query`, whose filters match `matching` rows, walks the sort's index
/// (see `filtered`).
pub fn walks_sort_index(backend: sea_orm::DbBackend, query: &JobQuery, matching: u64) -> bool {
    let filters = !query.statuses.is_empty() || query.library_id.is_some() || query.node.is_some();
    backend == sea_orm::DbBackend::Sqlite
        && filters
        && query.sort != JobSort::CreatedAt
        && matching > SQLITE_WALK_SORT_INDEX_ABOVE
}

/// The statements of one page of jobs, to be read in turn until the page is full: filters,
/// the order, then the page by number (`OFFSET`, one statement) or after a cursor (one per
/// range of `Cursor::ranges`), each limited to one row more than the page (whether another
/// follows). Ordered by the sort column then the id, both in the query's direction; a NULL
/// completion time counts as the smallest value on both backends. Every order and filter is
/// served by an index (migration `m20261126_000020_job_list_indexes`; checked with `EXPLAIN`
/// in tests/it/repo.rs).
pub fn page_selects(query: &JobQuery, walk_sort_index: bool) -> Vec<Select<Entity>> {
    let page_size = query.page_size.clamp(1, MAX_PAGE_SIZE);
    let (order, nulls) = if query.descending {
        (Order::Desc, sea_orm::sea_query::NullOrdering::Last)
    } else {
        (Order::Asc, sea_orm::sea_query::NullOrdering::First)
    };
    let ordered = |select: Select<Entity>| {
        let select = if query.sort == JobSort::CompletedAt {
            select.order_by_with_nulls(Column::CompletedAt, order.clone(), nulls)
        } else {
            select.order_by(query.sort.column(), order.clone())
        };
        select.order_by(Column::Id, order.clone()).limit(page_size + 1)
    };
    match &query.after {
        Some(cursor) => {
            cursor.ranges().into_iter().map(|range| ordered(filtered(query, walk_sort_index).filter(range))).collect()
        }
        None => vec![ordered(filtered(query, walk_sort_index)).offset((query.page.max(1) - 1) * page_size)],
    }
}

/// The columns of a listed job: all but the probe, which no list shows and which, once every
/// file is probed after its scan, is most of a row (about 2 KB of JSON each, read, copied and
/// parsed for every row of every page). The listed rows' `probe` is `None`; `get` reads it.
fn without_probe(select: Select<Entity>) -> Select<Entity> {
    use sea_orm::{IdenStatic, Iterable};
    select
        .select_only()
        .columns(Column::iter().filter(|c| !matches!(c, Column::Probe)))
        .expr_as(Expr::cust("NULL"), Column::Probe.as_str())
}

/// One page of jobs (see `page_selects`) without their probes (`without_probe`), its
/// total, and `next_cursor` when more rows follow.
pub async fn list(db: &impl ConnectionTrait, query: &JobQuery) -> RepoResult<Page<job::Model>> {
    let page = if query.after.is_some() { 1 } else { query.page.max(1) };
    let page_size = query.page_size.clamp(1, MAX_PAGE_SIZE);
    let wanted = usize::try_from(page_size).unwrap_or(usize::MAX);
    // Filtered by status alone (or not at all), the total is the kept counts' sum.
    let by_status_only =
        query.library_id.is_none() && query.node.is_none() && query.q.as_deref().is_none_or(str::is_empty);
    let total = if by_status_only {
        let counts = count_by_status(db).await?;
        let statuses: std::collections::HashSet<JobStatus> = query.statuses.iter().copied().collect();
        counts.iter().filter(|(s, _)| statuses.is_empty() || statuses.contains(s)).map(|(_, n)| n).sum()
    } else {
        filtered(query, false).count(db).await?
    };
    let walk = walks_sort_index(db.get_database_backend(), query, total);
    let mut items = Vec::new();
    for select in page_selects(query, walk) {
        // One row past the page tells whether another follows; a later range reads only the
        // rows still missing.
        let missing = (wanted + 1).saturating_sub(items.len());
        if missing == 0 {
            break;
        }
        items.extend(without_probe(select).limit(u64::try_from(missing).unwrap_or(u64::MAX)).all(db).await?);
    }
    let more = items.len() > wanted;
    items.truncate(wanted);
    let next_cursor = items.last().filter(|_| more).map(|last| Cursor::of(query.sort, query.descending, last).encode());
    Ok(Page { items, total, page, page_size, next_cursor })
}

/// Number of jobs in each status (statuses without jobs are absent), from `job_counts`: the
/// database's triggers keep it with every insert, delete and status change, in the same
/// transaction (see migration `m20261126_000019_job_counts`), so nine rows are read instead
/// of every job counted.
pub async fn count_by_status(db: &impl ConnectionTrait) -> RepoResult<HashMap<JobStatus, u64>> {
    let select = sea_orm::sea_query::Query::select()
        .columns([sea_orm::sea_query::Alias::new("status"), sea_orm::sea_query::Alias::new("n")])
        .from(sea_orm::sea_query::Alias::new("job_counts"))
        .to_owned();
    let rows = db.query_all(db.get_database_backend().build(&select)).await?;
    let mut counts = HashMap::new();
    for row in rows {
        let (status, n): (stored::JobStatus, i64) = (row.try_get("", "status")?, row.try_get("", "n")?);
        if n > 0 {
            counts.insert(status.into(), u64::try_from(n).unwrap_or(0));
        }
    }
    Ok(counts)
}

/// Jobs in the given statuses, oldest first (start-up recovery, the scheduler).
/// Of running jobs, those without progress for too long (flagged by their supervisor, or
/// silent): the health panel's queue check.
pub fn stuck_count(running: &[job::Model], now: DateTime<Utc>) -> u64 {
    running
        .iter()
        .filter(|job| {
            // A job that never reported progress counts from its start.
            let since = job.last_progress_at.or(job.started_at);
            let seconds = since.map(|at| u64::try_from((now - at).num_seconds()).unwrap_or(0));
            crate::domain::stats::is_stuck(job.status.into(), job.stalled, seconds)
        })
        .count() as u64
}

pub async fn in_statuses(db: &impl ConnectionTrait, statuses: &[JobStatus]) -> RepoResult<Vec<job::Model>> {
    Ok(Entity::find().filter(Column::Status.is_in(statuses.iter().copied())).order_by_asc(Column::Id).all(db).await?)
}

/// Every job of library `library_id` in one of `statuses`, oldest first (all of them, not
/// a page: a forecast goes over the whole library).
pub async fn of_library_in_statuses(
    db: &impl ConnectionTrait,
    library_id: i32,
    statuses: &[JobStatus],
) -> RepoResult<Vec<job::Model>> {
    Ok(Entity::find()
        .filter(Column::LibraryId.eq(library_id))
        .filter(Column::Status.is_in(statuses.iter().copied()))
        .order_by_asc(Column::Id)
        .all(db)
        .await?)
}

/// Appends an event to a job's history without a status change (replace steps, notes).
pub async fn record_event(db: &impl ConnectionTrait, id: i32, event: NewEvent) -> RepoResult<()> {
    events::append(db, id, event).await?;
    Ok(())
}

/// The oldest QUEUED jobs, at most `limit`.
pub async fn queued_next(db: &impl ConnectionTrait, limit: u64) -> RepoResult<Vec<job::Model>> {
    Ok(Entity::find()
        .filter(Column::Status.eq(JobStatus::Queued))
        .order_by_desc(Column::Priority)
        .order_by_asc(Column::QueuedAt)
        .order_by_asc(Column::Id)
        .limit(limit)
        .all(db)
        .await?)
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

/// What a rescan compares a file with: the job, and the file it left at its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownFile {
    pub id: i32,
    pub status: JobStatus,
    /// The size of the file at the job's path as the job last saw it: once COMPLETED, the
    /// output's (which replaced the source, or is the kept source's own size), else the
    /// source's (`source_size` stays the original's, for the savings).
    pub size: i64,
    /// Its modification time as the job last saw it (after a replace, the output's).
    pub mtime_ns: Option<i64>,
    /// The job's target codec: where its output goes (`media::plan::final_path`).
    pub target_codec: String,
    /// The output a replace recorded on the row at its swap (inode and size), before the
    /// job completed: see `actors::library::swapped_outputs`.
    pub recorded_output: Option<(i64, i64)>,
}

impl KnownFile {
    /// The file at the job's path is not the one the job last saw there.
    pub fn changed(&self, found: &FoundFile) -> bool {
        self.size != found.size || self.mtime_ns != Some(found.mtime_ns)
    }
}

impl From<&job::Model> for KnownFile {
    fn from(job: &job::Model) -> Self {
        let status: JobStatus = job.status.into();
        let size = match job.output_size {
            Some(output) if status == JobStatus::Completed => output,
            _ => job.source_size,
        };
        KnownFile {
            id: job.id,
            status,
            size,
            mtime_ns: job.source_mtime_ns,
            target_codec: job.target_codec.clone(),
            recorded_output: job.source_inode.zip(job.output_size),
        }
    }
}

/// Every job path of a library (its exact bytes) with the file the job last saw there.
pub async fn known_files(db: &impl ConnectionTrait, library_id: i32) -> RepoResult<HashMap<PathBuf, KnownFile>> {
    // id, path, its bytes, status, source size, output size, mtime, target codec, inode
    type Row = (i32, String, Option<Vec<u8>>, stored::JobStatus, i64, Option<i64>, Option<i64>, String, Option<i64>);
    let rows: Vec<Row> = Entity::find()
        .select_only()
        .columns([
            Column::Id,
            Column::FilePath,
            Column::FilePathRaw,
            Column::Status,
            Column::SourceSize,
            Column::OutputSize,
            Column::SourceMtimeNs,
            Column::TargetCodec,
            Column::SourceInode,
        ])
        .filter(Column::LibraryId.eq(library_id))
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(id, path, raw, status, source_size, output_size, mtime_ns, target_codec, inode)| {
            let path = path_bytes::from_stored(&path, raw.as_deref());
            let status: JobStatus = status.into();
            let size = match output_size {
                Some(output) if status == JobStatus::Completed => output,
                _ => source_size,
            };
            (path, KnownFile { id, status, size, mtime_ns, target_codec, recorded_output: inode.zip(output_size) })
        })
        .collect())
}

/// What the state machine needs to know of a job's row.
pub fn snapshot(job: &job::Model) -> JobSnapshot {
    JobSnapshot {
        status: job.status.into(),
        retry_count: u32::try_from(job.retry_count).unwrap_or(0),
        forced: job.forced,
        crash_count: u32::try_from(job.crash_count).unwrap_or(0),
        replacing: job.stage.map(Stage::from) == Some(Stage::Transferring),
    }
}

/// Jobs whose file changed since they ended go back to the queue, each with the new file's
/// identity and a `source changed` event (the state machine's `SourceChanged`). A job that
/// moved meanwhile (a user retried it) is left alone. Answers how many were requeued.
pub async fn requeue_changed<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    changed: &[(KnownFile, FoundFile)],
) -> RepoResult<u64> {
    use crate::domain::job::{transition, JobEvent};
    let mut requeued = 0;
    for (known, file) in changed {
        let job = get(db, known.id).await?;
        let from = JobStatus::from(job.status);
        let Ok(outcome) = transition(&snapshot(&job), &JobEvent::SourceChanged) else { continue };
        // The new file's identity; its analysis is still to come.
        let change = JobChange {
            source_size: Some(file.size),
            source_mtime_ns: Some(file.mtime_ns),
            source_inode: Some(file.inode),
            ..Default::default()
        };
        let detail = serde_json::json!({
            "reason": "the file changed since the job ended",
            "previousSize": known.size,
            "size": file.size,
        });
        let event = NewEvent::new("source changed").with_detail(detail);
        match change_status(db, known.id, from, StatusChange { outcome, change, failure_detail: None, event }).await {
            Ok(_) => requeued += 1,
            Err(RepoError::Conflict(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(requeued)
}

/// Queued jobs that never started and have no facts yet, after `after` by id: the work of
/// the probe that follows a scan (`actors::analyst`). Walks the primary key.
pub async fn never_probed(db: &impl ConnectionTrait, after: i32, limit: u64) -> RepoResult<Vec<job::Model>> {
    Ok(Entity::find()
        .filter(Column::Id.gt(after))
        .filter(Column::Status.eq(JobStatus::Queued))
        .filter(Column::StartedAt.is_null())
        .filter(Column::Probe.is_null())
        .order_by_asc(Column::Id)
        .limit(limit)
        .all(db)
        .await?)
}

/// What the probe after a scan learnt of one queued job.
#[derive(Debug, Clone)]
pub struct Probed {
    pub id: i32,
    /// The facts: codecs, duration, HDR kind, the whole probe.
    pub change: JobChange,
    /// The skip transition and its event, when the job needs no encode.
    pub skip: Option<(Outcome, NewEvent)>,
}

/// Writes a probed batch in one transaction: each job still queued, never started and
/// without facts gets its facts, and those that need no encode move to their skip outcome
/// with their event. A job the scheduler gave a node meanwhile is left to its attempt's
/// own analysis. Answers the jobs that moved.
pub async fn record_probes<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    probed: Vec<Probed>,
) -> RepoResult<Vec<job::Model>> {
    let txn = db.begin().await?;
    let at = now();
    let mut moved = Vec::new();
    for Probed { id, change, skip } in probed {
        let (set, event) = match skip {
            Some((outcome, event)) => {
                let to = outcome.to;
                let status = StatusChange { outcome, change, failure_detail: None, event: event.clone() };
                (
                    status.into_active(at),
                    Some(NewEvent { from_status: Some(JobStatus::Queued), to_status: Some(to), ..event }),
                )
            }
            None => {
                let mut set = change.into_active();
                set.updated_at = Set(at);
                (set, None)
            }
        };
        let result = Entity::update_many()
            .set(set)
            .filter(Column::Id.eq(id))
            .filter(Column::Status.eq(JobStatus::Queued))
            .filter(Column::StartedAt.is_null())
            .filter(Column::Probe.is_null())
            .exec(&txn)
            .await?;
        if let (1, Some(event)) = (result.rows_affected, event) {
            events::append(&txn, id, event).await?;
            moved.push(get(&txn, id).await?);
        }
    }
    // Notifications owed (the queue drained) are written with the batch, as a single
    // transition writes its own.
    if let Some(last) = moved.last() {
        super::notifications::job_ended(&txn, last, JobStatus::from(last.status)).await?;
    }
    txn.commit().await?;
    Ok(moved)
}

/// A file found by a scan or the watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// The exact path.
    pub path: PathBuf,
    /// The readable form of its name (`domain::path_bytes::readable`).
    pub file_name: String,
    pub size: i64,
    pub mtime_ns: i64,
    pub inode: i64,
}

/// Registers new files of a library in one transaction: inserted PENDING with a `created`
/// event, then queued (the state machine's Queue transition, applied set-wise) with a
/// `queued` event each. Cheap enough for a first scan of 100,000 files.
pub async fn register_batch<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    library_id: i32,
    target_codec: &str,
    files: &[FoundFile],
) -> RepoResult<u64> {
    use crate::domain::job::{transition, JobEvent};
    use entities::job_event;
    use sea_orm::sea_query::Query;
    if files.is_empty() {
        return Ok(0);
    }
    let queued = transition(
        &JobSnapshot { status: JobStatus::Pending, retry_count: 0, forced: false, crash_count: 0, replacing: false },
        &JobEvent::Queue,
    )
    .map_err(|e| RepoError::Conflict(e.to_string()))?
    .to;
    let txn = db.begin().await?;
    let at = now();
    for chunk in files.chunks(500) {
        let models = chunk.iter().map(|f| ActiveModel {
            library_id: Set(Some(library_id)),
            file_path: Set(path_bytes::readable(f.path.as_os_str()).into_owned()),
            file_path_raw: Set(path_bytes::raw_if_not_utf8(f.path.as_os_str())),
            file_name: Set(f.file_name.clone()),
            status: Set(JobStatus::Pending.into()),
            progress: Set(0.0),
            fps: Set(0.0),
            retry_count: Set(0),
            crash_count: Set(0),
            stalled: Set(false),
            forced: Set(false),
            target_codec: Set(target_codec.to_string()),
            source_size: Set(f.size),
            source_mtime_ns: Set(Some(f.mtime_ns)),
            source_inode: Set(Some(f.inode)),
            created_at: Set(at),
            updated_at: Set(at),
            ..Default::default()
        });
        // A file registered meanwhile (by the watcher) keeps its job.
        Entity::insert_many(models)
            .on_conflict(sea_orm::sea_query::OnConflict::column(Column::FilePath).do_nothing().to_owned())
            .do_nothing()
            .exec(&txn)
            .await?;
    }
    let backend = txn.get_database_backend();
    for (kind, from, to, only_new) in
        [("created", None, JobStatus::Pending, true), ("queued", Some(JobStatus::Pending), queued, false)]
    {
        let mut select = Query::select();
        select
            .column(Column::Id)
            .expr(Expr::val(at))
            .expr(Expr::val(kind))
            .expr(Expr::val(from.map(stored::JobStatus::from)))
            .expr(Expr::val(to))
            .from(Entity)
            .and_where(Expr::col(Column::LibraryId).eq(library_id))
            .and_where(Expr::col(Column::Status).eq(JobStatus::Pending));
        if only_new {
            select.and_where(Expr::col(Column::CreatedAt).eq(at));
        }
        let insert = Query::insert()
            .into_table(job_event::Entity)
            .columns([
                job_event::Column::JobId,
                job_event::Column::At,
                job_event::Column::Kind,
                job_event::Column::FromStatus,
                job_event::Column::ToStatus,
            ])
            .select_from(select)
            .map_err(|e| RepoError::Conflict(e.to_string()))?
            .to_owned();
        txn.execute(backend.build(&insert)).await?;
    }
    let result = Entity::update_many()
        .set(ActiveModel {
            status: Set(queued.into()),
            queued_at: Set(Some(at)),
            updated_at: Set(at),
            ..Default::default()
        })
        .filter(Column::LibraryId.eq(library_id))
        .filter(Column::Status.eq(JobStatus::Pending))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(result.rows_affected)
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

/// Jobs running on `node_id` whose lease expired before `now` (the sweeper's candidates).
pub async fn expired_leases(
    db: &impl ConnectionTrait,
    node_id: i32,
    now: chrono::DateTime<chrono::Utc>,
) -> RepoResult<Vec<job::Model>> {
    Ok(Entity::find()
        .filter(Column::Status.is_in([JobStatus::Analyzing, JobStatus::Encoding]))
        .filter(Column::NodeId.eq(node_id))
        .filter(Column::LeaseExpiresAt.lt(now))
        .order_by_asc(Column::Id)
        .all(db)
        .await?)
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

    /// A cursor reads back as it was made, for every sort; one whose value does not fit its
    /// sort, of an unknown sort or order, or not made by `encode` at all reads as nothing.
    #[test]
    fn cursors_read_back_and_forged_ones_are_refused() {
        use base64::Engine;
        let forged = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        let values = [
            (JobSort::CreatedAt, serde_json::json!("2026-11-26T12:00:00.123456789Z")),
            (JobSort::UpdatedAt, serde_json::json!("2026-11-26T12:00:00Z")),
            (JobSort::CompletedAt, serde_json::json!(null)),
            (JobSort::CompletedAt, serde_json::json!("2026-11-26T12:00:00.5+00:00")),
            (JobSort::FileName, serde_json::json!("Film 01 (2020) \"x\".mkv")),
            (JobSort::Status, serde_json::json!("QUEUED")),
            (JobSort::Progress, serde_json::json!(37.5)),
            (JobSort::SourceSize, serde_json::json!(9_000_000_000_i64)),
        ];
        assert_eq!(values.iter().map(|(sort, _)| *sort).collect::<std::collections::HashSet<_>>().len(), 7);
        for (sort, value) in values {
            for descending in [false, true] {
                let cursor = Cursor { sort, descending, value: value.clone(), id: 42 };
                assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor.clone()));
                assert_eq!(cursor.order(), (sort, descending));
            }
        }
        for text in [
            r#"["createdAt","desc","yesterday",1]"#,
            r#"["createdAt","desc",null,1]"#,
            r#"["progress","asc","12",1]"#,
            r#"["sourceSize","asc",1.5,1]"#,
            r#"["fileName","asc",7,1]"#,
            r#"["size","asc",7,1]"#,
            r#"["fileName","up","a",1]"#,
            r#"["fileName","asc","a","1"]"#,
            r#"["fileName","asc","a"]"#,
        ] {
            assert_eq!(Cursor::decode(&forged(text)), None, "{text}");
        }
        assert_eq!(Cursor::decode("not base64 at all!"), None);
        assert_eq!(Cursor::decode(""), None);
    }
}
