//! The audit log: who changed what and when, through the API (`http::audit`). Rows are only
//! ever added; reading them newest first is the one query, hence the index on `at`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Id,
    At,
    Username,
    Role,
    Method,
    Route,
    Path,
    Status,
}

const INDEX: &str = "idx_audit_log_at";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(AuditLog::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(AuditLog::Id).integer().not_null().auto_increment().primary_key())
                    .col(ColumnDef::new(AuditLog::At).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(AuditLog::Username).string().not_null())
                    .col(ColumnDef::new(AuditLog::Role).string().not_null())
                    .col(ColumnDef::new(AuditLog::Method).string().not_null())
                    .col(ColumnDef::new(AuditLog::Route).string().not_null())
                    .col(ColumnDef::new(AuditLog::Path).string().not_null())
                    .col(ColumnDef::new(AuditLog::Status).integer().not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name(INDEX).table(AuditLog::Table).col(AuditLog::At).if_not_exists().to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(AuditLog::Table).to_owned()).await
    }
}
