//! Jobs as they are read: one by id or by path, those in given statuses, the queue's order,
//! the counts per status, expired leases; and what the domain's rules need to know of a
//! row (`snapshot`, `RunningJob`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use entities::job::{self, Column, Entity};
use entities::sea_orm_active_enums as stored;
use sea_orm::sea_query::{Expr, LikeExpr};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::domain::job::{JobSnapshot, JobStatus, Stage};
use crate::domain::path_bytes;
use crate::domain::stats::RunningJob;
use crate::repo::{RepoError, RepoResult};

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

/// What the state machine needs to know of a job's row (`JobSnapshot::of_row`).
pub fn snapshot(job: &job::Model) -> JobSnapshot {
    JobSnapshot::of_row(job.status.into(), job.retry_count, job.forced, job.crash_count, job.stage.map(Stage::from))
}

/// What the stuck check needs to know of a job's row (`domain::stats::stuck_count`).
impl From<&job::Model> for RunningJob {
    fn from(job: &job::Model) -> Self {
        RunningJob {
            status: job.status.into(),
            stalled: job.stalled,
            last_progress_at: job.last_progress_at,
            started_at: job.started_at,
        }
    }
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
