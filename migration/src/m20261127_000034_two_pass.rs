//! Two-pass encoding: a library's `rateControl` (`crf`, the default, or `twoPass`) and
//! `targetBitrateKbps`; a job's `encodePass`, the pass a two-pass encode is in (1 or 2).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Libraries {
    Table,
    RateControl,
    TargetBitrateKbps,
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    EncodePass,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one thing at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(Libraries::Table)
                    .add_column(ColumnDef::new(Libraries::RateControl).string().not_null().default("crf"))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Libraries::Table)
                    .add_column(ColumnDef::new(Libraries::TargetBitrateKbps).integer().null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .add_column(ColumnDef::new(Jobs::EncodePass).integer().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(Jobs::Table).drop_column(Jobs::EncodePass).to_owned()).await?;
        manager
            .alter_table(Table::alter().table(Libraries::Table).drop_column(Libraries::TargetBitrateKbps).to_owned())
            .await?;
        manager.alter_table(Table::alter().table(Libraries::Table).drop_column(Libraries::RateControl).to_owned()).await
    }
}
