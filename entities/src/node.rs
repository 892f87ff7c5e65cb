use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sea_orm_active_enums::{NodeRole, NodeStatus};

/// A node of the cluster: the main node or a linked worker.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "nodes")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    #[sea_orm(unique)]
    pub name: String,
    pub role: NodeRole,
    pub address: String,
    pub status: NodeStatus,
    pub status_reason: Option<String>,
    pub gpu: Option<String>,
    pub cores: i32,
    pub load1: f64,
    pub memory_used: i64,
    pub memory_total: i64,
    pub active_jobs: i32,
    pub max_jobs: i32,
    /// JSON array of encoder names that open on this node.
    pub encoders: Json,
    pub decoders: Json,
    /// SHA-256 (hex) of the linked node's own credential, given at its enrollment.
    pub credential_hash: Option<String>,
    /// Revoked by an administrator: its credential is refused and its name and identity
    /// cannot enroll again until the row is removed.
    pub revoked: bool,
    /// A linked node's identity, given at its first registration and kept in its DATA_DIR.
    #[sea_orm(unique)]
    pub identity: Option<String>,
    pub last_seen_at: Option<ChronoDateTimeUtc>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
