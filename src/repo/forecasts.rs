//! Library forecasts (`domain::forecast`): one row per library, its latest run.

use entities::library_forecast::{ActiveModel, Column, Entity, Model};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set, TransactionTrait};

use super::{now, RepoError, RepoResult};
use crate::domain::forecast::{ForecastFile, ForecastStatus};

/// Starts a new forecast of `library_id` over `files_total` files, replacing the last one;
/// a conflict while one runs.
pub async fn start<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    library_id: i32,
    files_total: u32,
) -> RepoResult<Model> {
    let txn = db.begin().await?;
    // Written first, no read: SQLite refuses a transaction that read before it wrote once
    // another writer committed (see docs/ARCHITECTURE.md, "Layers"). An ended forecast goes;
    // a running one stays, and the insert then meets its key.
    Entity::delete_many()
        .filter(Column::LibraryId.eq(library_id))
        .filter(Column::Status.ne(ForecastStatus::Running.as_str()))
        .exec(&txn)
        .await?;
    let model = ActiveModel {
        library_id: Set(library_id),
        status: Set(ForecastStatus::Running.to_string()),
        files_total: Set(i32::try_from(files_total).unwrap_or(i32::MAX)),
        files_done: Set(0),
        files: Set(serde_json::json!([])),
        started_at: Set(now()),
        finished_at: Set(None),
    }
    .insert(&txn)
    .await
    .map_err(|e| RepoError::unique(e, || format!("a forecast of library {library_id} is running")))?;
    txn.commit().await?;
    Ok(model)
}

/// Adds one file's forecast to the running forecast of `library_id`; false when none runs.
pub async fn record(db: &impl ConnectionTrait, library_id: i32, file: &ForecastFile) -> RepoResult<bool> {
    let Some(current) = running(db, library_id).await? else { return Ok(false) };
    let mut files = files_of(&current);
    files.push(file.clone());
    let done = i32::try_from(files.len()).unwrap_or(i32::MAX);
    let mut model: ActiveModel = current.into();
    model.files = Set(serde_json::to_value(&files).unwrap_or_default());
    model.files_done = Set(done);
    model.update(db).await?;
    Ok(true)
}

/// Ends the running forecast of `library_id` with `status`; false when none runs.
pub async fn finish(db: &impl ConnectionTrait, library_id: i32, status: ForecastStatus) -> RepoResult<bool> {
    let result = Entity::update_many()
        .col_expr(Column::Status, sea_orm::sea_query::Expr::value(status.to_string()))
        .col_expr(Column::FinishedAt, sea_orm::sea_query::Expr::value(now()))
        .filter(Column::LibraryId.eq(library_id))
        .filter(Column::Status.eq(ForecastStatus::Running.as_str()))
        .exec(db)
        .await?;
    Ok(result.rows_affected > 0)
}

/// Forecasts left running by a stop of the node: nothing runs them any more.
pub async fn interrupt_running(db: &impl ConnectionTrait) -> RepoResult<u64> {
    let result = Entity::update_many()
        .col_expr(Column::Status, sea_orm::sea_query::Expr::value(ForecastStatus::Interrupted.to_string()))
        .col_expr(Column::FinishedAt, sea_orm::sea_query::Expr::value(now()))
        .filter(Column::Status.eq(ForecastStatus::Running.as_str()))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}

pub async fn get(db: &impl ConnectionTrait, library_id: i32) -> RepoResult<Option<Model>> {
    Ok(Entity::find_by_id(library_id).one(db).await?)
}

async fn running(db: &impl ConnectionTrait, library_id: i32) -> RepoResult<Option<Model>> {
    Ok(Entity::find_by_id(library_id).filter(Column::Status.eq(ForecastStatus::Running.as_str())).one(db).await?)
}

/// The per-file entries of a forecast row.
pub fn files_of(model: &Model) -> Vec<ForecastFile> {
    serde_json::from_value(model.files.clone()).unwrap_or_default()
}
