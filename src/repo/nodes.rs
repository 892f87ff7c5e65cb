//! Nodes of the cluster.

use entities::node::{self, ActiveModel, Column, Entity};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set, TryIntoModel,
};

use super::{now, RepoError, RepoResult};
use crate::domain::node::{NodeRole, NodeStatus};

/// What a node reports about itself when it starts or registers.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    pub role: NodeRole,
    pub address: String,
    pub gpu: Option<String>,
    pub cores: i32,
    pub memory_total: i64,
    pub max_jobs: i32,
    pub encoders: Vec<String>,
    /// The hardware it can decode on (see `media::device::decoders`).
    pub decoders: Vec<String>,
}

/// Creates the node or refreshes its facts; either way it is ONLINE and seen now.
pub async fn upsert(db: &impl ConnectionTrait, facts: NodeFacts) -> RepoResult<node::Model> {
    let existing = find(db, &facts.name).await?;
    save_facts(db, existing, facts, None).await
}

/// Writes a linked node's registration: onto the row `row` (which takes the node's name and
/// identity), or a new row. Either way it is ONLINE and seen now. `credential_hash`: the
/// hash of the credential an enrollment gave it (replacing any earlier one).
pub async fn register_linked(
    db: &impl ConnectionTrait,
    row: Option<i32>,
    facts: NodeFacts,
    identity: &str,
    credential_hash: Option<&str>,
) -> RepoResult<node::Model> {
    let existing = match row {
        Some(id) => Some(get(db, id).await?),
        None => None,
    };
    save_facts(db, existing, facts, Some((identity, credential_hash))).await
}

/// Revokes a linked node: its credential is refused from now on, and it is OFFLINE. False
/// when there is no such linked node.
pub async fn revoke(db: &impl ConnectionTrait, id: i32) -> RepoResult<bool> {
    let result = Entity::update_many()
        .set(ActiveModel {
            revoked: Set(true),
            status: Set(NodeStatus::Offline.into()),
            status_reason: Set(Some("revoked by an administrator".into())),
            updated_at: Set(now()),
            ..Default::default()
        })
        .filter(Column::Id.eq(id))
        .filter(Column::Role.eq(entities::sea_orm_active_enums::NodeRole::from(NodeRole::Linked)))
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

/// Removes a linked node's row (its jobs keep the node's name in their history). False when
/// there is no such linked node.
pub async fn remove(db: &impl ConnectionTrait, id: i32) -> RepoResult<bool> {
    let result = Entity::delete_many()
        .filter(Column::Id.eq(id))
        .filter(Column::Role.eq(entities::sea_orm_active_enums::NodeRole::from(NodeRole::Linked)))
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

async fn save_facts(
    db: &impl ConnectionTrait,
    existing: Option<node::Model>,
    facts: NodeFacts,
    identity: Option<(&str, Option<&str>)>,
) -> RepoResult<node::Model> {
    let at = now();
    let mut model = match existing {
        Some(found) => found.into(),
        None => ActiveModel {
            created_at: Set(at),
            revoked: Set(false),
            load1: Set(0.0),
            memory_used: Set(0),
            active_jobs: Set(0),
            ..Default::default()
        },
    };
    model.name = Set(facts.name.clone());
    if let Some((identity, credential_hash)) = identity {
        model.identity = Set(Some(identity.to_string()));
        if let Some(hash) = credential_hash {
            model.credential_hash = Set(Some(hash.to_string()));
        }
    }
    model.role = Set(facts.role.into());
    model.address = Set(facts.address);
    model.status = Set(NodeStatus::Online.into());
    model.status_reason = Set(None);
    model.gpu = Set(facts.gpu);
    model.cores = Set(facts.cores);
    model.memory_total = Set(facts.memory_total);
    model.max_jobs = Set(facts.max_jobs);
    model.encoders = Set(serde_json::json!(facts.encoders));
    model.decoders = Set(serde_json::json!(facts.decoders));
    model.last_seen_at = Set(Some(at));
    model.updated_at = Set(at);
    Ok(model.save(db).await?.try_into_model()?)
}

pub async fn find(db: &impl ConnectionTrait, name: &str) -> RepoResult<Option<node::Model>> {
    Ok(Entity::find().filter(Column::Name.eq(name)).one(db).await?)
}

pub async fn find_by_identity(db: &impl ConnectionTrait, identity: &str) -> RepoResult<Option<node::Model>> {
    Ok(Entity::find().filter(Column::Identity.eq(identity)).one(db).await?)
}

pub async fn get(db: &impl ConnectionTrait, id: i32) -> RepoResult<node::Model> {
    Entity::find_by_id(id).one(db).await?.ok_or_else(|| RepoError::NotFound(format!("node {id}")))
}

pub async fn list(db: &impl ConnectionTrait) -> RepoResult<Vec<node::Model>> {
    Ok(Entity::find().order_by_asc(Column::Id).all(db).await?)
}

pub async fn set_status(
    db: &impl ConnectionTrait,
    id: i32,
    status: NodeStatus,
    reason: Option<String>,
) -> RepoResult<node::Model> {
    let found = get(db, id).await?;
    if found.revoked {
        // A heartbeat that was on its way when the node was revoked does not bring it back.
        return Ok(found);
    }
    let mut model: ActiveModel = found.into();
    model.status = Set(status.into());
    model.status_reason = Set(reason);
    model.updated_at = Set(now());
    Ok(model.update(db).await?)
}

/// Live metrics from a heartbeat.
pub async fn record_heartbeat(
    db: &impl ConnectionTrait,
    id: i32,
    load1: f64,
    memory_used: i64,
    active_jobs: i32,
) -> RepoResult<()> {
    let mut model: ActiveModel = get(db, id).await?.into();
    let at = now();
    model.load1 = Set(load1);
    model.memory_used = Set(memory_used);
    model.active_jobs = Set(active_jobs);
    model.last_seen_at = Set(Some(at));
    model.updated_at = Set(at);
    model.update(db).await?;
    Ok(())
}

/// Marks the node OFFLINE if it is up and was last seen exactly at `seen` (nothing refreshed
/// it since the caller judged it stale). True when this call took it offline.
pub async fn set_offline_if_unseen_since(
    db: &impl ConnectionTrait,
    id: i32,
    seen: Option<chrono::DateTime<chrono::Utc>>,
    reason: String,
) -> RepoResult<bool> {
    let unchanged = match seen {
        Some(at) => Column::LastSeenAt.eq(at),
        None => Column::LastSeenAt.is_null(),
    };
    let result = Entity::update_many()
        .set(ActiveModel {
            status: Set(NodeStatus::Offline.into()),
            status_reason: Set(Some(reason)),
            updated_at: Set(now()),
            ..Default::default()
        })
        .filter(Column::Id.eq(id))
        .filter(Column::Status.ne(NodeStatus::Offline))
        .filter(unchanged)
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}
