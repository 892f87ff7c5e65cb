use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// The last health check of one file of a library (see migration
/// `m20261128_000037_library_health`).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "library_health_files")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub library_id: i32,
    /// The library's folder the file was found under, as the library stores it.
    #[sea_orm(column_type = "Text")]
    pub root: String,
    /// The file's path relative to `root`, readable (`condense::domain::path_bytes`).
    #[sea_orm(column_type = "Text")]
    pub path: String,
    /// The exact bytes of `path` where they are not UTF-8.
    pub path_raw: Option<Vec<u8>>,
    pub size: i64,
    pub mtime_ns: i64,
    /// "quick" or "thorough".
    pub depth: String,
    /// "ok", "damaged" or "unreadable".
    pub verdict: String,
    pub first_error_seconds: Option<f64>,
    #[sea_orm(column_type = "Text", nullable)]
    pub message: Option<String>,
    pub error_count: i64,
    pub checked_at: ChronoDateTimeUtc,
    /// A user said to leave this finding alone: it no longer keeps the file from encoding.
    pub ignored: bool,
    /// The name of the node whose check this is (migration `m20261129_000039_health_node`);
    /// `None` for results kept from before.
    #[sea_orm(column_type = "Text", nullable)]
    pub node: Option<String>,
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
