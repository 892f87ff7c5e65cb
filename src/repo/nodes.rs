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
}

/// Creates the node or refreshes its facts; either way it is ONLINE and seen now.
pub async fn upsert(db: &impl ConnectionTrait, facts: NodeFacts) -> RepoResult<node::Model> {
    let at = now();
    let existing = find(db, &facts.name).await?;
    let mut model = match existing {
        Some(found) => found.into(),
        None => ActiveModel {
            name: Set(facts.name.clone()),
            created_at: Set(at),
            revoked: Set(false),
            load1: Set(0.0),
            memory_used: Set(0),
            active_jobs: Set(0),
            ..Default::default()
        },
    };
    model.role = Set(facts.role.as_str().to_string());
    model.address = Set(facts.address);
    model.status = Set(NodeStatus::Online.as_str().to_string());
    model.status_reason = Set(None);
    model.gpu = Set(facts.gpu);
    model.cores = Set(facts.cores);
    model.memory_total = Set(facts.memory_total);
    model.max_jobs = Set(facts.max_jobs);
    model.encoders = Set(serde_json::json!(facts.encoders));
    model.last_seen_at = Set(Some(at));
    model.updated_at = Set(at);
    Ok(model.save(db).await?.try_into_model()?)
}

pub async fn find(db: &impl ConnectionTrait, name: &str) -> RepoResult<Option<node::Model>> {
    Ok(Entity::find().filter(Column::Name.eq(name)).one(db).await?)
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
    let mut model: ActiveModel = get(db, id).await?.into();
    model.status = Set(status.as_str().to_string());
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
