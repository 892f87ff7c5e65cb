//! A library's forecast (`POST /libraries/{id}/forecast`): what encoding its files would save
//! and take, computed in the background without encoding anything. One row per library, the
//! latest run: its status and progress, and one entry per file in `files` (JSON, see
//! `domain::forecast::ForecastFile`), written as each file is done.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LibraryForecasts {
    Table,
    LibraryId,
    Status,
    FilesTotal,
    FilesDone,
    Files,
    StartedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum Libraries {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(LibraryForecasts::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(LibraryForecasts::LibraryId).integer().not_null().primary_key())
                    .col(ColumnDef::new(LibraryForecasts::Status).string().not_null())
                    .col(ColumnDef::new(LibraryForecasts::FilesTotal).integer().not_null())
                    .col(ColumnDef::new(LibraryForecasts::FilesDone).integer().not_null())
                    .col(ColumnDef::new(LibraryForecasts::Files).json().not_null())
                    .col(ColumnDef::new(LibraryForecasts::StartedAt).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(LibraryForecasts::FinishedAt).timestamp_with_time_zone().null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_library_forecasts_library")
                            .from(LibraryForecasts::Table, LibraryForecasts::LibraryId)
                            .to(Libraries::Table, Libraries::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(LibraryForecasts::Table).to_owned()).await
    }
}
