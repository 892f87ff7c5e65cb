use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sea_orm_active_enums::JobStatus;

/// One entry of a job's history: a transition, or a step of the replace protocol.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "job_events")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub job_id: i32,
    pub at: ChronoDateTimeUtc,
    /// What happened, e.g. "queued", "paused", "replace_renamed_original".
    pub kind: String,
    pub from_status: Option<JobStatus>,
    pub to_status: Option<JobStatus>,
    pub node_name: Option<String>,
    pub detail: Option<Json>,
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
