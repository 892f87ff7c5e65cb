//! API keys become principals with a scope (`domain::access::KeyScope`), and the audit log
//! names the key or the session and the client's address (`http::audit`).
//!
//! Existing keys: a read-only key becomes a `read` key; every other key, which acted with
//! its creator's whole role, becomes an `operate` key (job and queue actions, scans, the
//! *arr webhook), never `admin`: a key copied out of an *arr application's settings must
//! not keep administering the service. A script that administers needs a new `admin` key.
//! `read_only` stays and is still written, so an older binary reading the table after a
//! rollback treats a `read` key as read-only, not as its creator.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Scope,
    ReadOnly,
}

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    KeyId,
    KeyName,
    Client,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(ColumnDef::new(ApiKeys::Scope).string().not_null().default("operate"))
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::update()
                    .table(ApiKeys::Table)
                    .value(ApiKeys::Scope, "read")
                    .and_where(Expr::col(ApiKeys::ReadOnly).eq(true))
                    .to_owned(),
            )
            .await?;
        for column in [
            ColumnDef::new(AuditLog::KeyId).integer().null().to_owned(),
            ColumnDef::new(AuditLog::KeyName).string().null().to_owned(),
            ColumnDef::new(AuditLog::Client).string().null().to_owned(),
        ] {
            manager.alter_table(Table::alter().table(AuditLog::Table).add_column(column).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [AuditLog::KeyId, AuditLog::KeyName, AuditLog::Client] {
            manager.alter_table(Table::alter().table(AuditLog::Table).drop_column(column).to_owned()).await?;
        }
        manager.alter_table(Table::alter().table(ApiKeys::Table).drop_column(ApiKeys::Scope).to_owned()).await
    }
}
