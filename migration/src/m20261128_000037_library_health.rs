//! Library health (issue 38): per library file the last check's result
//! (`library_health_files`, keyed by the library, the root it was found under and its path
//! relative to that root, with the size and modification time it had, so an unchanged file
//! is not read again), per library the current run (`library_health_runs`, one row, the
//! latest), and two library fields: `health_schedule` (`off`, `weekly`, `monthly`) and
//! `health_action` (`notify`, `regrab`).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LibraryHealthFiles {
    Table,
    Id,
    LibraryId,
    Root,
    Path,
    PathRaw,
    Size,
    MtimeNs,
    Depth,
    Verdict,
    FirstErrorSeconds,
    Message,
    ErrorCount,
    CheckedAt,
    Ignored,
}

#[derive(DeriveIden)]
enum LibraryHealthRuns {
    Table,
    LibraryId,
    Depth,
    All,
    Scheduled,
    Status,
    FilesTotal,
    FilesDone,
    StartedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum Libraries {
    Table,
    Id,
    HealthSchedule,
    HealthAction,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(LibraryHealthFiles::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(LibraryHealthFiles::Id).integer().not_null().auto_increment().primary_key())
                    .col(ColumnDef::new(LibraryHealthFiles::LibraryId).integer().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::Root).text().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::Path).text().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::PathRaw).binary().null())
                    .col(ColumnDef::new(LibraryHealthFiles::Size).big_integer().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::MtimeNs).big_integer().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::Depth).string().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::Verdict).string().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::FirstErrorSeconds).double().null())
                    .col(ColumnDef::new(LibraryHealthFiles::Message).text().null())
                    .col(ColumnDef::new(LibraryHealthFiles::ErrorCount).big_integer().not_null().default(0))
                    .col(ColumnDef::new(LibraryHealthFiles::CheckedAt).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(LibraryHealthFiles::Ignored).boolean().not_null().default(false))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_library_health_files_library")
                            .from(LibraryHealthFiles::Table, LibraryHealthFiles::LibraryId)
                            .to(Libraries::Table, Libraries::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_library_health_files_path")
                    .table(LibraryHealthFiles::Table)
                    .col(LibraryHealthFiles::LibraryId)
                    .col(LibraryHealthFiles::Root)
                    .col(LibraryHealthFiles::Path)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // The result list filters by verdict within a library.
        manager
            .create_index(
                Index::create()
                    .name("ix_library_health_files_verdict")
                    .table(LibraryHealthFiles::Table)
                    .col(LibraryHealthFiles::LibraryId)
                    .col(LibraryHealthFiles::Verdict)
                    .col(LibraryHealthFiles::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(LibraryHealthRuns::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(LibraryHealthRuns::LibraryId).integer().not_null().primary_key())
                    .col(ColumnDef::new(LibraryHealthRuns::Depth).string().not_null())
                    .col(ColumnDef::new(LibraryHealthRuns::All).boolean().not_null())
                    .col(ColumnDef::new(LibraryHealthRuns::Scheduled).boolean().not_null())
                    .col(ColumnDef::new(LibraryHealthRuns::Status).string().not_null())
                    .col(ColumnDef::new(LibraryHealthRuns::FilesTotal).integer().not_null())
                    .col(ColumnDef::new(LibraryHealthRuns::FilesDone).integer().not_null())
                    .col(ColumnDef::new(LibraryHealthRuns::StartedAt).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(LibraryHealthRuns::FinishedAt).timestamp_with_time_zone().null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_library_health_runs_library")
                            .from(LibraryHealthRuns::Table, LibraryHealthRuns::LibraryId)
                            .to(Libraries::Table, Libraries::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // One column per statement: SQLite alters one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(Libraries::Table)
                    .add_column(ColumnDef::new(Libraries::HealthSchedule).string().not_null().default("off"))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Libraries::Table)
                    .add_column(ColumnDef::new(Libraries::HealthAction).string().not_null().default("notify"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Libraries::Table).drop_column(Libraries::HealthAction).to_owned())
            .await?;
        manager
            .alter_table(Table::alter().table(Libraries::Table).drop_column(Libraries::HealthSchedule).to_owned())
            .await?;
        manager.drop_table(Table::drop().table(LibraryHealthRuns::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(LibraryHealthFiles::Table).to_owned()).await
    }
}
