//! Notifications (`repo::notifications`): targets (a webhook, Discord, ntfy, Gotify, Apprise,
//! an SMTP server) with the events each wants, and the outbox of deliveries: one row per
//! target and event, written in the same transaction as what it reports, kept until it is
//! delivered, retried with backoff.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum NotificationTargets {
    Table,
    Id,
    Name,
    Kind,
    Url,
    Secret,
    Headers,
    Events,
    Enabled,
    CreatedAt,
    LastDeliveredAt,
    LastError,
    LastErrorAt,
}

#[derive(DeriveIden)]
enum NotificationOutbox {
    Table,
    Id,
    TargetId,
    Event,
    Body,
    CreatedAt,
    Attempts,
    NextAttemptAt,
    LastError,
}

const DUE_INDEX: &str = "idx_notification_outbox_due";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(NotificationTargets::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(NotificationTargets::Id).integer().not_null().auto_increment().primary_key())
                    .col(ColumnDef::new(NotificationTargets::Name).string().not_null())
                    .col(ColumnDef::new(NotificationTargets::Kind).string().not_null())
                    .col(ColumnDef::new(NotificationTargets::Url).text().not_null())
                    .col(ColumnDef::new(NotificationTargets::Secret).text().null())
                    .col(ColumnDef::new(NotificationTargets::Headers).json().not_null())
                    .col(ColumnDef::new(NotificationTargets::Events).json().not_null())
                    .col(ColumnDef::new(NotificationTargets::Enabled).boolean().not_null().default(true))
                    .col(ColumnDef::new(NotificationTargets::CreatedAt).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(NotificationTargets::LastDeliveredAt).timestamp_with_time_zone().null())
                    .col(ColumnDef::new(NotificationTargets::LastError).text().null())
                    .col(ColumnDef::new(NotificationTargets::LastErrorAt).timestamp_with_time_zone().null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(NotificationOutbox::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(NotificationOutbox::Id).big_integer().not_null().auto_increment().primary_key())
                    .col(ColumnDef::new(NotificationOutbox::TargetId).integer().not_null())
                    .col(ColumnDef::new(NotificationOutbox::Event).string().not_null())
                    .col(ColumnDef::new(NotificationOutbox::Body).json().not_null())
                    .col(ColumnDef::new(NotificationOutbox::CreatedAt).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(NotificationOutbox::Attempts).integer().not_null().default(0))
                    .col(ColumnDef::new(NotificationOutbox::NextAttemptAt).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(NotificationOutbox::LastError).text().null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_notification_outbox_target")
                            .from(NotificationOutbox::Table, NotificationOutbox::TargetId)
                            .to(NotificationTargets::Table, NotificationTargets::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(DUE_INDEX)
                    .table(NotificationOutbox::Table)
                    .col(NotificationOutbox::NextAttemptAt)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(NotificationOutbox::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(NotificationTargets::Table).to_owned()).await
    }
}
