//! The planned spans of each running job's video (`repo::segments`): what is done, who
//! encodes the rest, and the lease of each span given to a helper on another node (or an
//! idle slot of the same one). A span's row is leased like a job: a fresh lease id and its
//! expiry, renewed by its helper, swept back to QUEUED when it runs out. Which process may
//! write a span's files is settled on disk (the span's claim, `media::partial`); these rows
//! decide who is asked to, and show the work.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum JobSegments {
    Table,
    JobId,
    Span,
    SpanFrom,
    SpanTo,
    Status,
    NodeId,
    NodeName,
    LeaseId,
    LeaseExpiresAt,
    Frames,
    Bytes,
    Fps,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(JobSegments::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(JobSegments::JobId).integer().not_null())
                    .col(ColumnDef::new(JobSegments::Span).integer().not_null())
                    .col(ColumnDef::new(JobSegments::SpanFrom).big_integer().null())
                    .col(ColumnDef::new(JobSegments::SpanTo).big_integer().null())
                    .col(ColumnDef::new(JobSegments::Status).string().not_null())
                    .col(ColumnDef::new(JobSegments::NodeId).integer().null())
                    .col(ColumnDef::new(JobSegments::NodeName).string().null())
                    .col(ColumnDef::new(JobSegments::LeaseId).string().null())
                    .col(ColumnDef::new(JobSegments::LeaseExpiresAt).timestamp_with_time_zone().null())
                    .col(ColumnDef::new(JobSegments::Frames).big_integer().not_null().default(0))
                    .col(ColumnDef::new(JobSegments::Bytes).big_integer().not_null().default(0))
                    .col(ColumnDef::new(JobSegments::Fps).double().not_null().default(0.0))
                    .col(ColumnDef::new(JobSegments::UpdatedAt).timestamp_with_time_zone().not_null())
                    .primary_key(Index::create().col(JobSegments::JobId).col(JobSegments::Span))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_job_segments_job")
                            .from(JobSegments::Table, JobSegments::JobId)
                            .to(Jobs::Table, Jobs::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // The scheduler looks for spans waiting for a helper, the sweep for leases run out.
        manager
            .create_index(
                Index::create()
                    .name("idx_job_segments_status")
                    .table(JobSegments::Table)
                    .col(JobSegments::Status)
                    .col(JobSegments::JobId)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(JobSegments::Table).to_owned()).await
    }
}
