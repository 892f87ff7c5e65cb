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
use crate::domain::job::{JobSnapshot, JobStatus, Outcome};
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
/// the probe that follows a scan (`actors::prober`). Walks the primary key.
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
        crate::repo::notifications::job_ended(&txn, last, JobStatus::from(last.status)).await?;
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
