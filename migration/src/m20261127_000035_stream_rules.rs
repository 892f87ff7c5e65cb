//! A library's stream rules (issue 37, `domain::stream_rules`): one JSON text column, so a
//! rule added later needs no migration (absent fields read as their defaults). Existing
//! libraries get `{}`: every default, today's behaviour.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Libraries {
    Table,
    StreamRules,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Libraries::Table)
                    .add_column(ColumnDef::new(Libraries::StreamRules).text().not_null().default("{}"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(Libraries::Table).drop_column(Libraries::StreamRules).to_owned()).await
    }
}
