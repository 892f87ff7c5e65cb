//! Jobs from scans: registering the files a scan or the watcher found, what a rescan
//! compares a file with (`KnownFile`) and the requeue of ended jobs whose file changed, and
//! the facts the probe after a scan learnt (`record_probes`).

use std::collections::HashMap;
use std::path::PathBuf;

use entities::job::{self, ActiveModel, Column, Entity};
use entities::sea_orm_active_enums as stored;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set, TransactionTrait};

use super::read::{get, snapshot};
use super::write::{change_status, JobChange, StatusChange};
use crate::domain::job::{transition, JobEvent, JobSnapshot, JobStatus, Outcome};
use crate::domain::path_bytes;
use crate::repo::events::{self, NewEvent};
use crate::repo::{now, RepoError, RepoResult};

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

/// Jobs whose file changed since they ended go back to the queue, each with the new file's
/// identity and a `source changed` event (the state machine's `SourceChanged`). A job that
/// moved meanwhile (a user retried it) is left alone. Answers how many were requeued.
pub async fn requeue_changed<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    changed: &[(KnownFile, FoundFile)],
) -> RepoResult<u64> {
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

/// Found files not yet analysed (PENDING), after `after` by id: the work of the probe that
/// follows a scan (`actors::prober`). Walks the primary key.
pub async fn never_probed(db: &impl ConnectionTrait, after: i32, limit: u64) -> RepoResult<Vec<job::Model>> {
    Ok(Entity::find()
        .filter(Column::Id.gt(after))
        .filter(Column::Status.eq(JobStatus::Pending))
        .order_by_asc(Column::Id)
        .limit(limit)
        .all(db)
        .await?)
}

/// The status the domain gives a job of `status` on `event`, for a set-wise write.
fn to_status(status: JobStatus, event: JobEvent) -> RepoResult<JobStatus> {
    let job = JobSnapshot { status, retry_count: 0, forced: false, crash_count: 0, replacing: false };
    Ok(transition(&job, &event).map_err(|e| RepoError::Conflict(e.to_string()))?.to)
}

/// The batch probe takes these found files up (the state machine's `Probe`): those still
/// PENDING become ANALYZING, held by no node, in one statement for the whole batch (a write
/// per file would slow a first scan's probe). No event: the outcome's event
/// (`record_probes`) names ANALYZING as where the job came from. Answers how many moved.
pub async fn begin_probes(db: &impl ConnectionTrait, ids: &[i32]) -> RepoResult<u64> {
    let to = to_status(JobStatus::Pending, JobEvent::Probe)?;
    let result = Entity::update_many()
        .set(ActiveModel { status: Set(to.into()), updated_at: Set(now()), ..Default::default() })
        .filter(Column::Id.is_in(ids.iter().copied()))
        .filter(Column::Status.eq(JobStatus::Pending))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}

/// Jobs left ANALYZING by a batch probe that will not finish (the node stopped under it, or
/// its batch could not be recorded) are found files again (`ProbeInterrupted`: PENDING), for
/// the next probe; `ids` limits this to one batch. A job an attempt analyses holds a lease
/// and is left alone. Answers how many moved.
pub async fn interrupt_probes(db: &impl ConnectionTrait, ids: Option<&[i32]>) -> RepoResult<u64> {
    let to = to_status(JobStatus::Analyzing, JobEvent::ProbeInterrupted)?;
    let mut update = Entity::update_many()
        .set(ActiveModel { status: Set(to.into()), updated_at: Set(now()), ..Default::default() })
        .filter(Column::Status.eq(JobStatus::Analyzing))
        .filter(Column::LeaseId.is_null());
    if let Some(ids) = ids {
        update = update.filter(Column::Id.is_in(ids.iter().copied()));
    }
    Ok(update.exec(db).await?.rows_affected)
}

/// How many ANALYZING jobs are in a batch probe (held by no node): they take no encode
/// slot and are no worker's.
pub async fn count_probing(db: &impl ConnectionTrait) -> RepoResult<u64> {
    use sea_orm::PaginatorTrait;
    Ok(Entity::find()
        .filter(Column::Status.eq(JobStatus::Analyzing))
        .filter(Column::LeaseId.is_null())
        .count(db)
        .await?)
}

/// What the probe after a scan learnt of one job in its batch.
#[derive(Debug, Clone)]
pub struct Probed {
    pub id: i32,
    /// The facts: codecs, duration, HDR kind, the whole probe (none when the probe could
    /// not read the file: the attempt's own analysis says why).
    pub change: JobChange,
    /// The skip transition and its event, when the job needs no encode.
    pub skip: Option<(Outcome, NewEvent)>,
}

/// Writes a probed batch in one transaction: each job still in the batch probe (ANALYZING,
/// held by no node) gets its facts and moves on, to its skip outcome with its event when it
/// needs no encode, else to the queue (`Probed`), whose `queued` events are written in one
/// statement. A job a user moved meanwhile (cancelled, paused) is left as it is. Answers
/// the jobs that moved.
pub async fn record_probes<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    probed: Vec<Probed>,
) -> RepoResult<Vec<job::Model>> {
    use entities::job_event;
    let queued = to_status(JobStatus::Analyzing, JobEvent::Probed)?;
    let txn = db.begin().await?;
    let at = now();
    let (mut skipped, mut to_queue) = (Vec::new(), Vec::new());
    for Probed { id, change, skip } in probed {
        let (set, event) = match skip {
            Some((outcome, event)) => {
                let to = outcome.to;
                let status = StatusChange { outcome, change, failure_detail: None, event: event.clone() };
                (
                    status.into_active(at),
                    Some(NewEvent { from_status: Some(JobStatus::Analyzing), to_status: Some(to), ..event }),
                )
            }
            None => {
                let mut set = change.into_active();
                set.status = Set(queued.into());
                set.queued_at = Set(Some(at));
                set.updated_at = Set(at);
                (set, None)
            }
        };
        let result = Entity::update_many()
            .set(set)
            .filter(Column::Id.eq(id))
            .filter(Column::Status.eq(JobStatus::Analyzing))
            .filter(Column::LeaseId.is_null())
            .exec(&txn)
            .await?;
        match (result.rows_affected, event) {
            (1, Some(event)) => {
                events::append(&txn, id, event).await?;
                skipped.push(get(&txn, id).await?);
            }
            (1, None) => to_queue.push(id),
            _ => {}
        }
    }
    let mut moved = Vec::with_capacity(skipped.len() + to_queue.len());
    if !to_queue.is_empty() {
        let records = to_queue.iter().map(|&id| job_event::ActiveModel {
            job_id: Set(id),
            at: Set(at),
            kind: Set("queued".to_string()),
            from_status: Set(Some(JobStatus::Analyzing.into())),
            to_status: Set(Some(queued.into())),
            ..Default::default()
        });
        job_event::Entity::insert_many(records).exec_without_returning(&txn).await?;
        moved = Entity::find().filter(Column::Id.is_in(to_queue)).order_by_asc(Column::Id).all(&txn).await?;
    }
    // Notifications owed (the queue drained) are written with the batch, as a single
    // transition writes its own.
    if let Some(last) = skipped.last() {
        crate::repo::notifications::job_ended(&txn, last, JobStatus::from(last.status)).await?;
    }
    txn.commit().await?;
    moved.extend(skipped);
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
/// event each. They stay PENDING until the probe after the scan takes them up
/// (`actors::prober`), which queues or skips them. Cheap enough for a first scan of
/// 100,000 files. Answers how many were new.
pub async fn register_batch<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    library_id: i32,
    target_codec: &str,
    files: &[FoundFile],
) -> RepoResult<u64> {
    use entities::job_event;
    use sea_orm::sea_query::Query;
    if files.is_empty() {
        return Ok(0);
    }
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
    let mut select = Query::select();
    select
        .column(Column::Id)
        .expr(Expr::val(at))
        .expr(Expr::val("created"))
        .expr(Expr::val(Option::<stored::JobStatus>::None))
        .expr(Expr::val(stored::JobStatus::from(JobStatus::Pending)))
        .from(Entity)
        .and_where(Expr::col(Column::LibraryId).eq(library_id))
        .and_where(Expr::col(Column::Status).eq(JobStatus::Pending))
        .and_where(Expr::col(Column::CreatedAt).eq(at));
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
    let created = txn.execute(backend.build(&insert)).await?;
    txn.commit().await?;
    Ok(created.rows_affected())
}
