use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// A named API key. It acts as the user who made it (`user_id`), or as a viewer when
/// `read_only`; deleting the user deletes the key.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub name: String,
    pub user_id: i32,
    pub read_only: bool,
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
