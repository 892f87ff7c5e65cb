use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Libraries {
    Table,
    Id,
    Name,
    Paths,
    TargetCodec,
    Encoder,
    Quality,
    Preset,
    Watch,
    Enabled,
    CreatedAt,
    UpdatedAt,
    LastScanAt,
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Id,
    LibraryId,
    FilePath,
    FileName,
    Status,
    Stage,
    Progress,
    Fps,
    EtaSeconds,
    NodeId,
    NodeName,
    RetryCount,
    FailureReason,
    FailureCode,
    FailureDetail,
    Stalled,
    Forced,
    SourceCodec,
    TargetCodec,
    Encoder,
    SourceSize,
    SourceMtimeNs,
    SourceInode,
    OutputSize,
    DurationSeconds,
    SourceBitrate,
    Hdr,
    Probe,
    CpuTimeMs,
    WallTimeMs,
    LeaseId,
    LeaseExpiresAt,
    LastProgressAt,
    CreatedAt,
    UpdatedAt,
    QueuedAt,
    StartedAt,
    CompletedAt,
}

#[derive(DeriveIden)]
enum JobEvents {
    Table,
    Id,
    JobId,
    At,
    Kind,
    FromStatus,
    ToStatus,
    NodeName,
    Detail,
}

#[derive(DeriveIden)]
enum Nodes {
    Table,
    Id,
    Name,
    Role,
    Address,
    Status,
    StatusReason,
    Gpu,
    Cores,
    Load1,
    MemoryUsed,
    MemoryTotal,
    ActiveJobs,
    MaxJobs,
    Encoders,
    CredentialHash,
    Revoked,
    LastSeenAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
    Username,
    PasswordHash,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Settings {
    Table,
    Key,
    Value,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Licenses {
    Table,
    Id,
    Key,
    Tier,
    Licensee,
    ExpiresAt,
    InstalledAt,
}

fn id<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).integer().not_null().auto_increment().primary_key().to_owned()
}

fn ts<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).timestamp_with_time_zone().not_null().to_owned()
}

fn ts_null<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).timestamp_with_time_zone().null().to_owned()
}

fn text<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).string().not_null().to_owned()
}

fn text_null<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).string().null().to_owned()
}

fn long_text_null<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).text().null().to_owned()
}

fn int<T: IntoIden>(col: T, default: i32) -> ColumnDef {
    ColumnDef::new(col).integer().not_null().default(default).to_owned()
}

fn big_null<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).big_integer().null().to_owned()
}

fn flag<T: IntoIden>(col: T, default: bool) -> ColumnDef {
    ColumnDef::new(col).boolean().not_null().default(default).to_owned()
}

fn float<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col).double().not_null().default(0.0).to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Libraries::Table)
                    .col(id(Libraries::Id))
                    .col(text(Libraries::Name).unique_key().to_owned())
                    .col(ColumnDef::new(Libraries::Paths).json().not_null())
                    .col(text(Libraries::TargetCodec))
                    .col(text(Libraries::Encoder))
                    .col(int(Libraries::Quality, 28))
                    .col(text(Libraries::Preset))
                    .col(flag(Libraries::Watch, true))
                    .col(flag(Libraries::Enabled, true))
                    .col(ts(Libraries::CreatedAt))
                    .col(ts(Libraries::UpdatedAt))
                    .col(ts_null(Libraries::LastScanAt))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Jobs::Table)
                    .col(id(Jobs::Id))
                    .col(ColumnDef::new(Jobs::LibraryId).integer().null())
                    .col(ColumnDef::new(Jobs::FilePath).text().not_null().unique_key())
                    .col(ColumnDef::new(Jobs::FileName).text().not_null())
                    .col(text(Jobs::Status))
                    .col(text_null(Jobs::Stage))
                    .col(float(Jobs::Progress))
                    .col(float(Jobs::Fps))
                    .col(big_null(Jobs::EtaSeconds))
                    .col(ColumnDef::new(Jobs::NodeId).integer().null())
                    .col(text_null(Jobs::NodeName))
                    .col(int(Jobs::RetryCount, 0))
                    .col(text_null(Jobs::FailureReason))
                    .col(text_null(Jobs::FailureCode))
                    .col(long_text_null(Jobs::FailureDetail))
                    .col(flag(Jobs::Stalled, false))
                    .col(flag(Jobs::Forced, false))
                    .col(text_null(Jobs::SourceCodec))
                    .col(text(Jobs::TargetCodec))
                    .col(text_null(Jobs::Encoder))
                    .col(ColumnDef::new(Jobs::SourceSize).big_integer().not_null().default(0))
                    .col(big_null(Jobs::SourceMtimeNs))
                    .col(big_null(Jobs::SourceInode))
                    .col(big_null(Jobs::OutputSize))
                    .col(ColumnDef::new(Jobs::DurationSeconds).double().null())
                    .col(big_null(Jobs::SourceBitrate))
                    .col(text_null(Jobs::Hdr))
                    .col(ColumnDef::new(Jobs::Probe).json().null())
                    .col(big_null(Jobs::CpuTimeMs))
                    .col(big_null(Jobs::WallTimeMs))
                    .col(text_null(Jobs::LeaseId))
                    .col(ts_null(Jobs::LeaseExpiresAt))
                    .col(ts_null(Jobs::LastProgressAt))
                    .col(ts(Jobs::CreatedAt))
                    .col(ts(Jobs::UpdatedAt))
                    .col(ts_null(Jobs::QueuedAt))
                    .col(ts_null(Jobs::StartedAt))
                    .col(ts_null(Jobs::CompletedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_jobs_library")
                            .from(Jobs::Table, Jobs::LibraryId)
                            .to(Libraries::Table, Libraries::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, col) in [
            ("idx_jobs_status", Jobs::Status),
            ("idx_jobs_library", Jobs::LibraryId),
            ("idx_jobs_completed_at", Jobs::CompletedAt),
            ("idx_jobs_node", Jobs::NodeName),
        ] {
            manager.create_index(Index::create().name(name).table(Jobs::Table).col(col).to_owned()).await?;
        }

        manager
            .create_table(
                Table::create()
                    .table(JobEvents::Table)
                    .col(id(JobEvents::Id))
                    .col(ColumnDef::new(JobEvents::JobId).integer().not_null())
                    .col(ts(JobEvents::At))
                    .col(text(JobEvents::Kind))
                    .col(text_null(JobEvents::FromStatus))
                    .col(text_null(JobEvents::ToStatus))
                    .col(text_null(JobEvents::NodeName))
                    .col(ColumnDef::new(JobEvents::Detail).json().null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_job_events_job")
                            .from(JobEvents::Table, JobEvents::JobId)
                            .to(Jobs::Table, Jobs::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("idx_job_events_job").table(JobEvents::Table).col(JobEvents::JobId).to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Nodes::Table)
                    .col(id(Nodes::Id))
                    .col(text(Nodes::Name).unique_key().to_owned())
                    .col(text(Nodes::Role))
                    .col(text(Nodes::Address))
                    .col(text(Nodes::Status))
                    .col(text_null(Nodes::StatusReason))
                    .col(text_null(Nodes::Gpu))
                    .col(int(Nodes::Cores, 0))
                    .col(float(Nodes::Load1))
                    .col(ColumnDef::new(Nodes::MemoryUsed).big_integer().not_null().default(0))
                    .col(ColumnDef::new(Nodes::MemoryTotal).big_integer().not_null().default(0))
                    .col(int(Nodes::ActiveJobs, 0))
                    .col(int(Nodes::MaxJobs, 1))
                    .col(ColumnDef::new(Nodes::Encoders).json().not_null())
                    .col(text_null(Nodes::CredentialHash))
                    .col(flag(Nodes::Revoked, false))
                    .col(ts_null(Nodes::LastSeenAt))
                    .col(ts(Nodes::CreatedAt))
                    .col(ts(Nodes::UpdatedAt))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Users::Table)
                    .col(id(Users::Id))
                    .col(text(Users::Username).unique_key().to_owned())
                    .col(text(Users::PasswordHash))
                    .col(ts(Users::CreatedAt))
                    .col(ts(Users::UpdatedAt))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Settings::Table)
                    .col(text(Settings::Key).primary_key().to_owned())
                    .col(ColumnDef::new(Settings::Value).json().not_null())
                    .col(ts(Settings::UpdatedAt))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Licenses::Table)
                    .col(id(Licenses::Id))
                    .col(ColumnDef::new(Licenses::Key).text().not_null())
                    .col(text(Licenses::Tier))
                    .col(text(Licenses::Licensee))
                    .col(ts_null(Licenses::ExpiresAt))
                    .col(ts(Licenses::InstalledAt))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            JobEvents::Table.into_iden(),
            Jobs::Table.into_iden(),
            Libraries::Table.into_iden(),
            Nodes::Table.into_iden(),
            Users::Table.into_iden(),
            Settings::Table.into_iden(),
            Licenses::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(table).if_exists().to_owned()).await?;
        }
        Ok(())
    }
}
