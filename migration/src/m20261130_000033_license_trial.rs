//! The installation's trial of a paid tier (`POST /license/trial`): one row, id 1, written
//! once and never deleted. It is its own table, not columns of `licenses`, because
//! installing or removing a key deletes the rows of `licenses`: a trial kept there could be
//! started again after `DELETE /license`. The CHECK keeps the table to that one row, so a
//! second trial is a primary-key conflict even when two requests race.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LicenseTrial {
    Table,
    Id,
    Tier,
    StartedAt,
    EndsAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(LicenseTrial::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(LicenseTrial::Id).integer().not_null().primary_key())
                    .col(ColumnDef::new(LicenseTrial::Tier).string().not_null())
                    .col(ColumnDef::new(LicenseTrial::StartedAt).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(LicenseTrial::EndsAt).timestamp_with_time_zone().not_null())
                    .check(Expr::col(LicenseTrial::Id).eq(1))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(LicenseTrial::Table).to_owned()).await
    }
}
