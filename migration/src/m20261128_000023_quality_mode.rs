//! VMAF-targeted quality (see `domain::quality`): a library's quality mode, its target VMAF
//! and the largest output worth keeping; on each job, the quality (CRF/CQ) its search chose,
//! the size it predicted, and the VMAF its output measured on the search's samples (mean
//! and 5th percentile).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Libraries {
    Table,
    QualityMode,
    TargetVmaf,
    MaxSizePercent,
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    ChosenQuality,
    PredictedSize,
    Vmaf,
    VmafP5,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters a table one column at a time.
        let library_columns = [
            ColumnDef::new(Libraries::QualityMode).string_len(8).not_null().default("crf").to_owned(),
            ColumnDef::new(Libraries::TargetVmaf).double().not_null().default(95.0).to_owned(),
            ColumnDef::new(Libraries::MaxSizePercent).integer().not_null().default(80).to_owned(),
        ];
        for mut column in library_columns {
            manager.alter_table(Table::alter().table(Libraries::Table).add_column(&mut column).to_owned()).await?;
        }
        let job_columns = [
            ColumnDef::new(Jobs::ChosenQuality).integer().null().to_owned(),
            ColumnDef::new(Jobs::PredictedSize).big_integer().null().to_owned(),
            ColumnDef::new(Jobs::Vmaf).double().null().to_owned(),
            ColumnDef::new(Jobs::VmafP5).double().null().to_owned(),
        ];
        for mut column in job_columns {
            manager.alter_table(Table::alter().table(Jobs::Table).add_column(&mut column).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Jobs::ChosenQuality, Jobs::PredictedSize, Jobs::Vmaf, Jobs::VmafP5] {
            manager.alter_table(Table::alter().table(Jobs::Table).drop_column(column).to_owned()).await?;
        }
        for column in [Libraries::QualityMode, Libraries::TargetVmaf, Libraries::MaxSizePercent] {
            manager.alter_table(Table::alter().table(Libraries::Table).drop_column(column).to_owned()).await?;
        }
        Ok(())
    }
}
