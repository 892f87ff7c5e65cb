use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sea_orm_active_enums::Tier;

/// An installed licence key and what its signature vouched for when installed.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "licenses")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub key: String,
    pub tier: Tier,
    pub licensee: String,
    pub expires_at: Option<ChronoDateTimeUtc>,
    pub installed_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
