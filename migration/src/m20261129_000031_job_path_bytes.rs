//! The exact bytes of a job's path where it is not UTF-8 (`caf\xE9.mkv` from an old NAS
//! share): `file_path` keeps its readable form (`domain::path_bytes::readable`), this column
//! the name itself. NULL for every UTF-8 path, whose text is the path.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Jobs {
    Table,
    FilePathRaw,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .add_column(ColumnDef::new(Jobs::FilePathRaw).binary().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(Jobs::Table).drop_column(Jobs::FilePathRaw).to_owned()).await
    }
}
