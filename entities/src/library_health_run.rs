use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// A library's latest health check run: depth, progress and how it ended (see migration
/// `m20261128_000037_library_health`).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "library_health_runs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub library_id: i32,
    /// "quick" or "thorough".
    pub depth: String,
    /// Every file, also those unchanged since their last `ok`.
    pub all: bool,
    /// Started by the library's `healthSchedule`, not by a user.
    pub scheduled: bool,
    /// RUNNING, DONE, CANCELLED or INTERRUPTED (the node stopped during it).
    pub status: String,
    pub files_total: i32,
    pub files_done: i32,
    pub started_at: ChronoDateTimeUtc,
    pub finished_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::library::Entity",
        from = "Column::LibraryId",
        to = "super::library::Column::Id",
        on_delete = "Cascade"
    )]
    Library,
}

impl Related<super::library::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Library.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
