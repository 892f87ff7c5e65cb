//! PostgreSQL's job counter trigger decides whether a statement moved any status by the net
//! change per status (two hash aggregates) instead of joining the statement's old and new
//! rows by id: transition tables have no statistics, so that join ran as a nested loop, and
//! one statement updating 100,000 jobs without changing a status compared every old row with
//! every new one (the API benchmark's bulk update of the jobs' facts did not finish in
//! minutes). The counts are the same: they only ever take the net change. SQLite's row
//! triggers are untouched.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::m20261126_000019_job_counts::POSTGRES_FUNCTION;

#[derive(DeriveMigrationName)]
pub struct Migration;

const ROW_CHECK: &str =
    "SELECT 1 FROM old_rows o JOIN new_rows w ON o.id = w.id WHERE o.status IS DISTINCT FROM w.status";
const NET_CHECK: &str = "SELECT 1 FROM (
                SELECT status, SUM(k) AS k FROM (
                    SELECT status, -1 AS k FROM old_rows UNION ALL SELECT status, 1 AS k FROM new_rows
                ) moves GROUP BY status
            ) d WHERE d.k <> 0";

/// The first migration's function with its status check replaced by `check`.
fn function_with(check: &str) -> Result<String, DbErr> {
    if !POSTGRES_FUNCTION.contains(ROW_CHECK) {
        return Err(DbErr::Migration("job_counts_change: the status check to replace is not there".into()));
    }
    Ok(POSTGRES_FUNCTION.replacen("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1).replacen(ROW_CHECK, check, 1))
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared(&function_with(NET_CHECK)?).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared(&function_with(ROW_CHECK)?).await?;
        }
        Ok(())
    }
}
