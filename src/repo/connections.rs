//! Connections (Plex, Jellyfin, Emby, Sonarr, Radarr): kept in the notification targets'
//! table, their API key as the secret, wanting `file.replaced` only, with path mappings; so
//! they share the outbox, its retries and the last delivery and error shown
//! (`repo::notifications`). This module reads and writes only rows of their kinds.

use entities::notification_target::{self as target, ActiveModel, Column, Entity as Targets};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};

use super::notifications::{delete_of, list_of};
use super::{now, RepoError, RepoResult};
use crate::domain::arr::PathMapping;
use crate::domain::connect::{Connection, ConnectionKind};
use crate::domain::notify::NotifyEvent;

/// A connection as a user sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConnection {
    pub name: String,
    pub kind: ConnectionKind,
    pub url: String,
    /// `None` on an update: the stored key stays; empty: it is cleared.
    pub api_key: Option<String>,
    pub path_mappings: Vec<PathMapping>,
    pub enabled: bool,
}

fn kinds() -> Vec<&'static str> {
    ConnectionKind::ALL.iter().map(|k| k.as_str()).collect()
}

/// A stored connection's path mappings.
pub fn mappings_of(model: &target::Model) -> Vec<PathMapping> {
    model.path_mappings.clone().and_then(|m| serde_json::from_value(m).ok()).unwrap_or_default()
}

/// A stored row as the notifier tells it of a file; `None` when it is not a connection.
pub fn connection_of(model: &target::Model) -> Option<Connection> {
    Some(Connection {
        kind: model.kind.parse().ok()?,
        url: model.url.clone(),
        api_key: model.secret.clone().unwrap_or_default(),
        mappings: mappings_of(model),
    })
}

pub async fn create(db: &impl ConnectionTrait, new: NewConnection) -> RepoResult<target::Model> {
    Ok(ActiveModel {
        name: Set(new.name),
        kind: Set(new.kind.as_str().to_string()),
        url: Set(new.url),
        secret: Set(new.api_key.filter(|k| !k.is_empty())),
        headers: Set(serde_json::json!([])),
        events: Set(serde_json::json!([NotifyEvent::FileReplaced.as_str()])),
        enabled: Set(new.enabled),
        created_at: Set(now()),
        path_mappings: Set(Some(serde_json::json!(new.path_mappings))),
        ..Default::default()
    }
    .insert(db)
    .await?)
}

/// Replaces a connection's settings; its key only when a new one is given (an empty one
/// clears it).
pub async fn update(db: &impl ConnectionTrait, id: i32, new: NewConnection) -> RepoResult<target::Model> {
    let mut model: ActiveModel = get(db, id).await?.into();
    model.name = Set(new.name);
    model.kind = Set(new.kind.as_str().to_string());
    model.url = Set(new.url);
    if let Some(key) = new.api_key {
        model.secret = Set(Some(key).filter(|k| !k.is_empty()));
    }
    model.path_mappings = Set(Some(serde_json::json!(new.path_mappings)));
    model.enabled = Set(new.enabled);
    Ok(model.update(db).await?)
}

pub async fn get(db: &impl ConnectionTrait, id: i32) -> RepoResult<target::Model> {
    Targets::find_by_id(id)
        .filter(Column::Kind.is_in(kinds()))
        .one(db)
        .await?
        .ok_or_else(|| RepoError::NotFound(format!("connection {id}")))
}

/// Every connection, oldest first, with the number of replaced files waiting to be told.
pub async fn list(db: &impl ConnectionTrait) -> RepoResult<Vec<(target::Model, u64)>> {
    list_of(db, &kinds()).await
}

/// Removes a connection and what it still had waiting. False when there is none.
pub async fn delete(db: &impl ConnectionTrait, id: i32) -> RepoResult<bool> {
    delete_of(db, id, &kinds()).await
}
