//! Which node checked a file of a library health check (issue 38, item 3: checks run on
//! every node that sees the library): its name, as the node list shows it; empty for
//! results kept from before.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LibraryHealthFiles {
    Table,
    Node,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(LibraryHealthFiles::Table)
                    .add_column(ColumnDef::new(LibraryHealthFiles::Node).text().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(LibraryHealthFiles::Table).drop_column(LibraryHealthFiles::Node).to_owned(),
            )
            .await
    }
}
