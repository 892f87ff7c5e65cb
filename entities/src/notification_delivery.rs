use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One notification owed to one target (the outbox): kept until it is delivered.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "notification_outbox")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub target_id: i32,
    pub event: String,
    /// The event's envelope: `{"event","at", …}`.
    pub body: Json,
    pub created_at: ChronoDateTimeUtc,
    pub attempts: i32,
    pub next_attempt_at: ChronoDateTimeUtc,
    #[sea_orm(column_type = "Text", nullable)]
    pub last_error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::notification_target::Entity",
        from = "Column::TargetId",
        to = "super::notification_target::Column::Id",
        on_delete = "Cascade"
    )]
    Target,
}

impl Related<super::notification_target::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Target.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
