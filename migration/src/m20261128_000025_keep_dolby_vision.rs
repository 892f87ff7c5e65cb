//! A library's `keepDolbyVision`: HEVC outputs of Dolby Vision sources keep it as profile
//! 8.1 (RPUs carried frame by frame) instead of becoming their base layer's HDR10.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Libraries {
    Table,
    KeepDolbyVision,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Libraries::Table)
                    .add_column(ColumnDef::new(Libraries::KeepDolbyVision).boolean().not_null().default(false))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Libraries::Table).drop_column(Libraries::KeepDolbyVision).to_owned())
            .await
    }
}
