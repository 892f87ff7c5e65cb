//! Reads behind queue statistics, insights and metrics. Counts and sums are SQL (GROUP BY,
//! SUM cast to BIGINT so PostgreSQL's NUMERIC sums decode like SQLite's integers); anything
//! per day is left to `domain::stats`, over the rows fetched here, so both databases agree.

use chrono::{DateTime, Utc};
use entities::job::{Column, Entity};
use sea_orm::sea_query::{Alias, Condition, Expr, Func, SimpleExpr};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QueryOrder, QuerySelect};

use super::RepoResult;
use crate::domain::job::{FailureCode, JobStatus};

fn completed() -> SimpleExpr {
    Column::Status.eq(JobStatus::Completed)
}

/// A COMPLETED job whose output replaced the original: it saved space, so the library now
/// holds the target codec. (An output that was not smaller is recorded with the source's
/// size and leaves the original in place.)
fn converted() -> Condition {
    Condition::all().add(completed()).add(Expr::col(Column::OutputSize).lt(Expr::col(Column::SourceSize)))
}

/// `CAST(SUM(expr) AS BIGINT)`: NULL (None) when no row matches.
fn sum_bigint(expr: SimpleExpr) -> SimpleExpr {
    SimpleExpr::from(Func::sum(expr)).cast_as(Alias::new("BIGINT"))
}

/// Jobs COMPLETED after `since`.
pub async fn completed_after(db: &impl ConnectionTrait, since: DateTime<Utc>) -> RepoResult<u64> {
    use sea_orm::PaginatorTrait;
    Ok(Entity::find().filter(completed()).filter(Column::CompletedAt.gt(since)).count(db).await?)
}

/// What the insights need of a completed job.
#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct CompletedRow {
    pub node_name: Option<String>,
    pub source_size: i64,
    pub output_size: Option<i64>,
    pub completed_at: Option<DateTime<Utc>>,
    pub duration_seconds: Option<f64>,
    pub wall_time_ms: Option<i64>,
    /// The source's probe (`media::info::MediaInfo` as JSON), for its frame rate.
    pub probe: Option<serde_json::Value>,
}

const COMPLETED_COLUMNS: [Column; 6] = [
    Column::NodeName,
    Column::SourceSize,
    Column::OutputSize,
    Column::CompletedAt,
    Column::DurationSeconds,
    Column::WallTimeMs,
];

/// COMPLETED jobs, oldest completion first: all of them, or those completed at or after
/// `since`. Without the probe, which can be large; `probe` is None.
pub async fn completed_jobs(db: &impl ConnectionTrait, since: Option<DateTime<Utc>>) -> RepoResult<Vec<CompletedRow>> {
    let mut select = Entity::find()
        .select_only()
        .columns(COMPLETED_COLUMNS)
        .column_as(Expr::cust("NULL"), "probe")
        .filter(completed());
    if let Some(since) = since {
        select = select.filter(Column::CompletedAt.gte(since));
    }
    Ok(select.order_by_asc(Column::CompletedAt).order_by_asc(Column::Id).into_model::<CompletedRow>().all(db).await?)
}

/// COMPLETED jobs completed at or after `since`, with their probes.
pub async fn completed_jobs_with_probe(
    db: &impl ConnectionTrait,
    since: DateTime<Utc>,
) -> RepoResult<Vec<CompletedRow>> {
    Ok(Entity::find()
        .select_only()
        .columns(COMPLETED_COLUMNS)
        .column(Column::Probe)
        .filter(completed())
        .filter(Column::CompletedAt.gte(since))
        .order_by_asc(Column::CompletedAt)
        .order_by_asc(Column::Id)
        .into_model::<CompletedRow>()
        .all(db)
        .await?)
}

/// Bytes saved by every COMPLETED job (each never negative).
pub async fn saved_bytes_total(db: &impl ConnectionTrait) -> RepoResult<i64> {
    let saved = Expr::col(Column::SourceSize).sub(Expr::col(Column::OutputSize));
    let total: Option<Option<i64>> = Entity::find()
        .select_only()
        .column_as(sum_bigint(saved), "saved")
        .filter(converted())
        .into_tuple()
        .one(db)
        .await?;
    Ok(total.flatten().unwrap_or(0))
}

/// CPU and wall time (ms) of every job's runs, summed: (cpu, wall).
pub async fn encoding_time_ms(db: &impl ConnectionTrait) -> RepoResult<(i64, i64)> {
    let sums: Option<(Option<i64>, Option<i64>)> = Entity::find()
        .select_only()
        .column_as(sum_bigint(Expr::col(Column::CpuTimeMs).into()), "cpu")
        .column_as(sum_bigint(Expr::col(Column::WallTimeMs).into()), "wall")
        .into_tuple()
        .one(db)
        .await?;
    let (cpu, wall) = sums.unwrap_or_default();
    Ok((cpu.unwrap_or(0), wall.unwrap_or(0)))
}

#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct FailedRow {
    pub id: i32,
    pub file_name: String,
    pub failure_reason: Option<String>,
    pub node_name: Option<String>,
    /// A FAILED job moves no more without a user, so its last update is its failure.
    pub updated_at: DateTime<Utc>,
}

/// FAILED jobs that failed at or after `since`, newest first, at most `limit`.
pub async fn failed_since(db: &impl ConnectionTrait, since: DateTime<Utc>, limit: u64) -> RepoResult<Vec<FailedRow>> {
    Ok(Entity::find()
        .select_only()
        .columns([Column::Id, Column::FileName, Column::FailureReason, Column::NodeName, Column::UpdatedAt])
        .filter(Column::Status.eq(JobStatus::Failed))
        .filter(Column::UpdatedAt.gte(since))
        .order_by_desc(Column::UpdatedAt)
        .order_by_desc(Column::Id)
        .limit(limit)
        .into_model::<FailedRow>()
        .all(db)
        .await?)
}

/// FAILED jobs that failed at or after `since` (the window of `failed_since`), counted per
/// failure code; None counts the rows without one.
pub async fn failed_per_code_since(
    db: &impl ConnectionTrait,
    since: DateTime<Utc>,
) -> RepoResult<Vec<(Option<FailureCode>, u64)>> {
    let rows: Vec<(Option<entities::sea_orm_active_enums::FailureCode>, i64)> = Entity::find()
        .select_only()
        .column(Column::FailureCode)
        .column_as(Column::Id.count(), "n")
        .filter(Column::Status.eq(JobStatus::Failed))
        .filter(Column::UpdatedAt.gte(since))
        .group_by(Column::FailureCode)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|(code, n)| (code.map(FailureCode::from), u64::try_from(n).unwrap_or(0))).collect())
}

/// Jobs per (node, status), for jobs that ran on a node.
pub async fn jobs_per_node_and_status(db: &impl ConnectionTrait) -> RepoResult<Vec<(String, JobStatus, u64)>> {
    let rows: Vec<(String, entities::sea_orm_active_enums::JobStatus, i64)> = Entity::find()
        .select_only()
        .column(Column::NodeName)
        .column(Column::Status)
        .column_as(Column::Id.count(), "n")
        .filter(Column::NodeName.is_not_null())
        .group_by(Column::NodeName)
        .group_by(Column::Status)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|(node, status, n)| (node, status.into(), u64::try_from(n).unwrap_or(0))).collect())
}

/// Files per codec as the libraries hold them now: the target codec of converted jobs, the
/// source codec of every other job whose source was analysed (unanalysed files have no
/// known codec and are left out). Codec names as stored, not grouped.
pub async fn codec_counts(db: &impl ConnectionTrait) -> RepoResult<Vec<(String, u64)>> {
    let converted: Vec<(String, i64)> = Entity::find()
        .select_only()
        .column(Column::TargetCodec)
        .column_as(Column::Id.count(), "n")
        .filter(converted())
        .group_by(Column::TargetCodec)
        .into_tuple()
        .all(db)
        .await?;
    // NOT (converted), spelled out: a NULL output size must count as not converted.
    let not_converted = Condition::any()
        .add(Column::Status.ne(JobStatus::Completed))
        .add(Column::OutputSize.is_null())
        .add(Expr::col(Column::OutputSize).gte(Expr::col(Column::SourceSize)));
    let as_found: Vec<(String, i64)> = Entity::find()
        .select_only()
        .column(Column::SourceCodec)
        .column_as(Column::Id.count(), "n")
        .filter(Column::SourceCodec.is_not_null())
        .filter(not_converted)
        .group_by(Column::SourceCodec)
        .into_tuple()
        .all(db)
        .await?;
    Ok(converted.into_iter().chain(as_found).map(|(codec, n)| (codec, u64::try_from(n).unwrap_or(0))).collect())
}

/// The VMAF that a library's COMPLETED jobs measured (VMAF mode; jobs without a measure are
/// left out): jobs, their mean VMAF, the lowest 5th percentile, and the mean chosen CRF/CQ.
#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct LibraryVmafRow {
    pub library_id: Option<i32>,
    pub jobs: i64,
    pub mean_vmaf: Option<f64>,
    pub lowest_p5: Option<f64>,
    pub mean_quality: Option<f64>,
}

pub async fn vmaf_per_library(db: &impl ConnectionTrait) -> RepoResult<Vec<LibraryVmafRow>> {
    let double = |e: SimpleExpr| e.cast_as(Alias::new("DOUBLE PRECISION"));
    Ok(Entity::find()
        .select_only()
        .column(Column::LibraryId)
        .column_as(Column::Id.count(), "jobs")
        .column_as(double(Func::avg(Expr::col(Column::Vmaf)).into()), "mean_vmaf")
        .column_as(double(Func::min(Expr::col(Column::VmafP5)).into()), "lowest_p5")
        .column_as(double(Func::avg(Expr::col(Column::ChosenQuality)).into()), "mean_quality")
        .filter(completed())
        .filter(Column::Vmaf.is_not_null())
        .group_by(Column::LibraryId)
        .order_by_asc(Column::LibraryId)
        .into_model::<LibraryVmafRow>()
        .all(db)
        .await?)
}
