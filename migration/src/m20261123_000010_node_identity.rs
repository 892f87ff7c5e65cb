//! A linked node's identity: given at its first registration, kept in its DATA_DIR and
//! presented on every later link, so two nodes that share a NODE_NAME cannot share a row.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Nodes {
    Table,
    Identity,
}

const INDEX: &str = "idx_nodes_identity";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(Nodes::Table).add_column(ColumnDef::new(Nodes::Identity).text().null()).to_owned(),
            )
            .await?;
        // SQLite cannot add a UNIQUE column; a unique index does the same (NULLs are distinct).
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(Nodes::Table)
                    .col(Nodes::Identity)
                    .unique()
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_index(Index::drop().name(INDEX).table(Nodes::Table).to_owned()).await?;
        manager.alter_table(Table::alter().table(Nodes::Table).drop_column(Nodes::Identity).to_owned()).await
    }
}
