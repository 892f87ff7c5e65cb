use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// A named API key: its own principal, acting within its `scope` and its creator's role
/// (`user_id`); deleting the user deletes the key.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub name: String,
    pub user_id: i32,
    /// Kept equal to `scope == "read"`, for an older binary after a rollback.
    pub read_only: bool,
    /// `integration`, `read`, `operate` or `admin` (`domain::access::KeyScope`).
    pub scope: String,
    /// SHA-256 (hex) of the key; the key itself is shown once, at creation.
    #[serde(skip_serializing)]
    #[sea_orm(unique)]
    pub key_hash: String,
    /// The key's first characters, so a person can tell keys apart.
    pub prefix: String,
    pub created_at: ChronoDateTimeUtc,
    pub last_used_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::user::Entity",
        from = "Column::UserId",
        to = "super::user::Column::Id",
        on_delete = "Cascade"
    )]
    User,
}

impl Related<super::user::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::User.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
