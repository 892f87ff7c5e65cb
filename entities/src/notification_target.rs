use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// Where notifications go: a kind (`webhook`, `discord`, `ntfy`, `gotify`, `apprise`,
/// `email`), its URL, an optional secret (the webhook's signing key, an access token, an
/// SMTP password), extra headers and the events it wants. A connection (`plex`, `jellyfin`,
/// `emby`, `sonarr`, `radarr`, told of replaced files) is kept here too, its API key as the
/// secret, wanting `file.replaced`, with path mappings.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "notification_targets")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub name: String,
    pub kind: String,
    #[sea_orm(column_type = "Text")]
    pub url: String,
    /// Never served by the API.
    #[serde(skip_serializing)]
    #[sea_orm(column_type = "Text", nullable)]
    pub secret: Option<String>,
    /// `[[name, value], …]`.
    pub headers: Json,
    /// `["job.completed", …]`.
    pub events: Json,
    pub enabled: bool,
    pub created_at: ChronoDateTimeUtc,
    pub last_delivered_at: Option<ChronoDateTimeUtc>,
    #[sea_orm(column_type = "Text", nullable)]
    pub last_error: Option<String>,
    pub last_error_at: Option<ChronoDateTimeUtc>,
    /// A connection's `[{"from","to"}, …]`: condense's folders as the other product sees them.
    pub path_mappings: Option<Json>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(has_many = "super::notification_delivery::Entity")]
    Deliveries,
}

impl Related<super::notification_delivery::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Deliveries.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
