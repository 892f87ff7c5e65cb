//! Service-wide settings, as JSON values under string keys.

use entities::setting::{ActiveModel, Column, Entity};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ConnectionTrait, EntityTrait, Set};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{now, RepoError, RepoResult};

pub async fn get_json(db: &impl ConnectionTrait, key: &str) -> RepoResult<Option<serde_json::Value>> {
    Ok(Entity::find_by_id(key.to_string()).one(db).await?.map(|m| m.value))
}

/// The setting as `T`; a stored value of another shape reads as absent.
pub async fn get<T: DeserializeOwned>(db: &impl ConnectionTrait, key: &str) -> RepoResult<Option<T>> {
    Ok(get_json(db, key).await?.and_then(|v| serde_json::from_value(v).ok()))
}

pub async fn set<T: Serialize>(db: &impl ConnectionTrait, key: &str, value: &T) -> RepoResult<()> {
    let value = serde_json::to_value(value).map_err(|e| RepoError::Conflict(format!("setting {key}: {e}")))?;
    Entity::insert(ActiveModel { key: Set(key.to_string()), value: Set(value), updated_at: Set(now()) })
        .on_conflict(OnConflict::column(Column::Key).update_columns([Column::Value, Column::UpdatedAt]).to_owned())
        .exec(db)
        .await?;
    Ok(())
}

pub async fn all(db: &impl ConnectionTrait) -> RepoResult<Vec<(String, serde_json::Value)>> {
    Ok(Entity::find().all(db).await?.into_iter().map(|m| (m.key, m.value)).collect())
}
