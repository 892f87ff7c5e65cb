//! Connections (`repo::connections`): Plex, Jellyfin, Emby, Sonarr and Radarr, told after a
//! replace so they see the new file. They are kept beside the notification targets, in the
//! same table, and share its outbox (retries, backoff, the last error shown); what they add is
//! their path mappings, condense's folders as the other product sees them.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum NotificationTargets {
    Table,
    PathMappings,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(NotificationTargets::Table)
                    .add_column(ColumnDef::new(NotificationTargets::PathMappings).json().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(NotificationTargets::Table)
                    .drop_column(NotificationTargets::PathMappings)
                    .to_owned(),
            )
            .await
    }
}
