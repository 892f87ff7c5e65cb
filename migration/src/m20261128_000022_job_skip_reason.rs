//! Why a job was skipped, in words the dashboard shows ("video is already hevc", "output
//! would not be smaller ..."): SKIPPED is not a failure, so it has its own column rather
//! than the failure reason's.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Jobs {
    Table,
    SkipReason,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(Jobs::Table).add_column(ColumnDef::new(Jobs::SkipReason).text().null()).to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(Jobs::Table).drop_column(Jobs::SkipReason).to_owned()).await
    }
}
