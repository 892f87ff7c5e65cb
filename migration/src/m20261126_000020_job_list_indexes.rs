//! Indexes for every order and filter `GET /jobs` offers, so that a page is read from an index
//! instead of sorting or filtering the whole table (issue 16: p99 under 20 ms at 100,000
//! jobs; BENCHMARKS.md, API).
//!
//! - One index per sort column, each followed by `id`: the listing orders by `(column, id)`,
//!   and a keyset page (`after`) starts right after the last row's `(column, id)`.
//! - One per filter, followed by the default order `(created_at, id)`: a page of one status,
//!   one library or one node reads only that filter's rows, already in order. They replace the
//!   single-column indexes of the first migration, which each is a prefix of.
//! - `completed_at` is the one sort column that can be NULL. The listing treats NULL as the
//!   smallest value on both backends (SQLite's own rule): the index on PostgreSQL says
//!   `NULLS FIRST` so that both directions of that order are a scan of it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// (name, columns), the same SQL on both backends.
const INDEXES: &[(&str, &str)] = &[
    ("idx_jobs_updated_at", "updated_at, id"),
    ("idx_jobs_file_name", "file_name, id"),
    ("idx_jobs_progress", "progress, id"),
    ("idx_jobs_source_size", "source_size, id"),
    ("idx_jobs_status_id", "status, id"),
    ("idx_jobs_status_created", "status, created_at, id"),
    ("idx_jobs_library_created", "library_id, created_at, id"),
    ("idx_jobs_node_created", "node_name, created_at, id"),
];

const COMPLETED_AT: &str = "idx_jobs_completed_at_id";

/// The first migration's single-column indexes, each a prefix of one above.
const REPLACED: &[(&str, &str)] = &[
    ("idx_jobs_status", "status"),
    ("idx_jobs_library", "library_id"),
    ("idx_jobs_node", "node_name"),
    ("idx_jobs_completed_at", "completed_at"),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, columns) in INDEXES {
            db.execute_unprepared(&format!("CREATE INDEX IF NOT EXISTS {name} ON jobs ({columns})")).await?;
        }
        let nulls_first = if db.get_database_backend() == DbBackend::Postgres { " NULLS FIRST" } else { "" };
        db.execute_unprepared(&format!(
            "CREATE INDEX IF NOT EXISTS {COMPLETED_AT} ON jobs (completed_at{nulls_first}, id)"
        ))
        .await?;
        for (name, _) in REPLACED {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, column) in REPLACED {
            db.execute_unprepared(&format!("CREATE INDEX IF NOT EXISTS {name} ON jobs ({column})")).await?;
        }
        for name in INDEXES.iter().map(|(name, _)| *name).chain([COMPLETED_AT]) {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
        }
        Ok(())
    }
}
