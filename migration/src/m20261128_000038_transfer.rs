//! Transfers to nodes that do not see the library (issue 39): the SHA-256 of a job's source
//! as the main node read it, with the size and modification time the file had then
//! (`transfer_sources`, one row per job). A file whose size or time changed since gets a new
//! hash, and an upload encoded from the old one is refused.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum TransferSources {
    Table,
    JobId,
    Size,
    MtimeNs,
    Sha256,
    HashedAt,
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(TransferSources::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(TransferSources::JobId).integer().not_null().primary_key())
                    .col(ColumnDef::new(TransferSources::Size).big_integer().not_null())
                    .col(ColumnDef::new(TransferSources::MtimeNs).big_integer().not_null())
                    .col(ColumnDef::new(TransferSources::Sha256).string().not_null())
                    .col(ColumnDef::new(TransferSources::HashedAt).timestamp_with_time_zone().not_null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_transfer_sources_job")
                            .from(TransferSources::Table, TransferSources::JobId)
                            .to(Jobs::Table, Jobs::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(TransferSources::Table).to_owned()).await
    }
}
