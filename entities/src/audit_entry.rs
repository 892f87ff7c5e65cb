use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sea_orm_active_enums::UserRole;

/// One change made through the API: who, when, which route, and how it was answered.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "audit_log")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub at: ChronoDateTimeUtc,
    pub username: String,
    /// The user's role when they acted.
    pub role: UserRole,
    /// The HTTP method, e.g. "POST".
    pub method: String,
    /// The route as the route table declares it, e.g. "/jobs/{id}/cancel".
    pub route: String,
    /// The path as requested, e.g. "/api/jobs/12/cancel" (never the query string).
    pub path: String,
    /// The HTTP status of the answer: 2xx done, 403 refused for the role, other 4xx refused.
    pub status: i32,
    /// The API key the request came with (id and name at the time); none for a session.
    pub key_id: Option<i32>,
    pub key_name: Option<String>,
    /// The client's address (after `TRUSTED_PROXIES`), when known.
    pub client: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
