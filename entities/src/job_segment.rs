use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sea_orm_active_enums::SegmentStatus;

/// One planned span of a running job's video: its progress, who encodes it, and the lease
/// of a helper that does (see migration `m20261127_000021_job_segments`).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "job_segments")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub job_id: i32,
    #[sea_orm(primary_key, auto_increment = false)]
    pub span: i32,
    pub span_from: Option<i64>,
    pub span_to: Option<i64>,
    pub status: SegmentStatus,
    pub node_id: Option<i32>,
    pub node_name: Option<String>,
    /// Set while a helper holds the span: its lease, renewed until `lease_expires_at`.
    pub lease_id: Option<String>,
    pub lease_expires_at: Option<ChronoDateTimeUtc>,
    pub frames: i64,
    pub bytes: i64,
    #[sea_orm(column_type = "Double")]
    pub fps: f64,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::job::Entity",
        from = "Column::JobId",
        to = "super::job::Column::Id",
        on_delete = "Cascade"
    )]
    Job,
}

impl Related<super::job::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Job.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
