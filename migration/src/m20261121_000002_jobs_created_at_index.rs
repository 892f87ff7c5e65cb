//! An index for the default job listing (`GET /jobs`: newest first, by `created_at` then
//! `id`). Without it every page sorted the whole table: with 100,000 jobs a page took about
//! 250 ms of SQLite's time (see BENCHMARKS.md, API).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Id,
    CreatedAt,
}

const NAME: &str = "idx_jobs_created_at";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(NAME)
                    .table(Jobs::Table)
                    .col(Jobs::CreatedAt)
                    .col(Jobs::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_index(Index::drop().name(NAME).table(Jobs::Table).to_owned()).await
    }
}
