//! Job priorities: the scheduler takes QUEUED jobs highest priority first, then oldest. The
//! index serves exactly that order among QUEUED jobs.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Status,
    Priority,
    QueuedAt,
}

const INDEX: &str = "idx_jobs_queue_order";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .add_column(ColumnDef::new(Jobs::Priority).integer().not_null().default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(Jobs::Table)
                    .col(Jobs::Status)
                    .col((Jobs::Priority, IndexOrder::Desc))
                    .col(Jobs::QueuedAt)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_index(Index::drop().name(INDEX).table(Jobs::Table).to_owned()).await?;
        manager.alter_table(Table::alter().table(Jobs::Table).drop_column(Jobs::Priority).to_owned()).await
    }
}
