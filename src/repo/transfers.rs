//! The SHA-256 of a job's source as the main node read it for a transfer, kept with the
//! size and modification time the file had (one row per job; a changed file's new hash
//! replaces the old one).

use entities::transfer_source::{ActiveModel, Column, Entity};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set, TransactionTrait};

use super::{now, RepoResult};

/// The hash kept for job `job_id`'s source when it was read at this size and time.
pub async fn hash_of(db: &impl ConnectionTrait, job_id: i32, size: i64, mtime_ns: i64) -> RepoResult<Option<String>> {
    Ok(Entity::find_by_id(job_id)
        .filter(Column::Size.eq(size))
        .filter(Column::MtimeNs.eq(mtime_ns))
        .one(db)
        .await?
        .map(|row| row.sha256))
}

/// Keeps the hash of job `job_id`'s source at this size and time, replacing any other.
pub async fn keep<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    job_id: i32,
    size: i64,
    mtime_ns: i64,
    sha256: &str,
) -> RepoResult<()> {
    let txn = db.begin().await?;
    // Written first, no read (see `forecasts::start`).
    Entity::delete_many().filter(Column::JobId.eq(job_id)).exec(&txn).await?;
    let row = ActiveModel {
        job_id: Set(job_id),
        size: Set(size),
        mtime_ns: Set(mtime_ns),
        sha256: Set(sha256.to_string()),
        hashed_at: Set(now()),
    };
    Entity::insert(row).exec(&txn).await?;
    txn.commit().await?;
    Ok(())
}
