//! Statuses, stages, failure codes, node roles and licence tiers are read through typed
//! columns from now on, which refuse a value they do not name. Older rows may hold one
//! spelt in another case or with spaces around it (the string parsing used before ignored
//! case): those are rewritten to the canonical spelling. A value that names nothing is
//! replaced where the column only describes the moment (a running job's stage, a node's
//! status, both set again as soon as the job or node moves); anywhere else the migration
//! stops and says which values in which column, since guessing a job's status or a
//! licence's tier could lose work or grant what was not bought.
//!
//! The spellings are copied here, not taken from the code, so that this migration keeps
//! meaning what it meant when written.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbErr};

#[derive(DeriveMigrationName)]
pub struct Migration;

const JOB_STATUSES: &[&str] =
    &["PENDING", "QUEUED", "ANALYZING", "ENCODING", "PAUSED", "COMPLETED", "SKIPPED", "FAILED", "CANCELLED"];
const STAGES: &[&str] = &["ANALYZING", "ENCODING", "TRANSFERRING"];
const FAILURE_CODES: &[&str] = &[
    "file_validation_failed",
    "insufficient_disk_space",
    "unsupported_codec",
    "transcoder_crashed",
    "permission_denied",
    "timeout",
    "miscellaneous",
    "unsupported_stream",
];
const NODE_STATUSES: &[&str] = &["ONLINE", "OFFLINE", "DEGRADED"];
const NODE_ROLES: &[&str] = &["main", "linked"];
const TIERS: &[&str] = &["FREE", "SUPPORTER", "PRO"];

/// What becomes of a value that names no variant.
#[derive(Clone, Copy)]
enum Unknown {
    /// Stop the migration with a message naming the column and the values.
    Refuse,
    /// Write this instead (`None`: NULL).
    Replace(Option<&'static str>),
}

struct TypedColumn {
    table: &'static str,
    column: &'static str,
    values: &'static [&'static str],
    unknown: Unknown,
}

const COLUMNS: &[TypedColumn] = &[
    TypedColumn { table: "jobs", column: "status", values: JOB_STATUSES, unknown: Unknown::Refuse },
    TypedColumn { table: "jobs", column: "stage", values: STAGES, unknown: Unknown::Replace(None) },
    TypedColumn { table: "jobs", column: "failure_code", values: FAILURE_CODES, unknown: Unknown::Refuse },
    TypedColumn { table: "job_events", column: "from_status", values: JOB_STATUSES, unknown: Unknown::Refuse },
    TypedColumn { table: "job_events", column: "to_status", values: JOB_STATUSES, unknown: Unknown::Refuse },
    TypedColumn { table: "nodes", column: "role", values: NODE_ROLES, unknown: Unknown::Refuse },
    TypedColumn { table: "nodes", column: "status", values: NODE_STATUSES, unknown: Unknown::Replace(Some("OFFLINE")) },
    TypedColumn { table: "licenses", column: "tier", values: TIERS, unknown: Unknown::Refuse },
];

impl TypedColumn {
    fn col(&self) -> Alias {
        Alias::new(self.column)
    }

    /// The column's value without case or surrounding spaces.
    fn folded(&self) -> Expr {
        Expr::expr(Func::lower(Func::cust(Alias::new("TRIM")).arg(Expr::col(self.col()))))
    }

    /// Rows holding `value` in another case or with spaces around it.
    fn spelt_otherwise(&self, value: &str) -> SimpleExpr {
        self.folded().eq(value.to_lowercase()).and(Expr::col(self.col()).ne(value))
    }

    /// Rows holding a value that is none of `values`, in any spelling.
    fn unknown(&self) -> SimpleExpr {
        let lowered: Vec<String> = self.values.iter().map(|v| v.to_lowercase()).collect();
        Expr::col(self.col()).is_not_null().and(self.folded().is_not_in(lowered))
    }

    /// The values of this column that name nothing, where it refuses them.
    async fn refused(&self, db: &SchemaManagerConnection<'_>) -> Result<Option<String>, DbErr> {
        let Unknown::Refuse = self.unknown else { return Ok(None) };
        let select = Query::select()
            .distinct()
            .column(self.col())
            .from(Alias::new(self.table))
            .and_where(self.unknown())
            .to_owned();
        let rows = db.query_all(db.get_database_backend().build(&select)).await?;
        let found = rows.iter().map(|row| row.try_get_by_index::<String>(0)).collect::<Result<Vec<_>, _>>()?;
        Ok((!found.is_empty())
            .then(|| format!("{}.{} holds {found:?} (known: {:?})", self.table, self.column, self.values)))
    }

    /// Replaces the unknown values where that is safe, then writes every known one in its
    /// canonical spelling.
    async fn convert(&self, db: &SchemaManagerConnection<'_>) -> Result<(), DbErr> {
        let backend = db.get_database_backend();
        if let Unknown::Replace(with) = self.unknown {
            let update = Query::update()
                .table(Alias::new(self.table))
                .value(self.col(), with)
                .and_where(self.unknown())
                .to_owned();
            db.execute(backend.build(&update)).await?;
        }
        for value in self.values {
            let update = Query::update()
                .table(Alias::new(self.table))
                .value(self.col(), *value)
                .and_where(self.spelt_otherwise(value))
                .to_owned();
            db.execute(backend.build(&update)).await?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        // Every column is checked before any is written, so a refusal changes nothing (on
        // SQLite too, where migrations run outside a transaction) and names every problem.
        let mut refused = Vec::new();
        for column in COLUMNS {
            refused.extend(column.refused(db).await?);
        }
        if !refused.is_empty() {
            return Err(DbErr::Migration(format!(
                "values condense cannot read: {}; correct or delete those rows, then start condense again",
                refused.join("; ")
            )));
        }
        for column in COLUMNS {
            column.convert(db).await?;
        }
        Ok(())
    }

    /// The spellings written are the ones the previous version wrote too: nothing to undo.
    async fn down(&self, _manager: &SchemaManager) -> Result<(), DbErr> {
        Ok(())
    }
}
