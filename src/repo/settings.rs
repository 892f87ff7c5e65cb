//! Service-wide settings, as JSON values under string keys.

use entities::setting::{ActiveModel, Column, Entity};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ConnectionTrait, EntityTrait, Set, TransactionTrait};
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

/// The setting as `T`; a stored value of another shape is an error, for settings whose
/// wrong guess costs data (a "keep originals" read as false deletes kept originals).
pub async fn get_checked<T: DeserializeOwned>(db: &impl ConnectionTrait, key: &str) -> RepoResult<Option<T>> {
    match get_json(db, key).await? {
        None => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| RepoError::Conflict(format!("setting {key} holds {value}, which does not read: {e}"))),
    }
}

pub async fn set<T: Serialize>(db: &impl ConnectionTrait, key: &str, value: &T) -> RepoResult<()> {
    let value = serde_json::to_value(value).map_err(|e| RepoError::Conflict(format!("setting {key}: {e}")))?;
    Entity::insert(ActiveModel { key: Set(key.to_string()), value: Set(value), updated_at: Set(now()) })
        .on_conflict(OnConflict::column(Column::Key).update_columns([Column::Value, Column::UpdatedAt]).to_owned())
        .exec(db)
        .await?;
    Ok(())
}

/// Removes a setting (it reads as absent again).
pub async fn remove(db: &impl ConnectionTrait, key: &str) -> RepoResult<()> {
    Entity::delete_by_id(key.to_string()).exec(db).await?;
    Ok(())
}

pub async fn all(db: &impl ConnectionTrait) -> RepoResult<Vec<(String, serde_json::Value)>> {
    Ok(Entity::find().all(db).await?.into_iter().map(|m| (m.key, m.value)).collect())
}

/// Key of the longest a job may run before it fails with "timeout", in hours.
pub const JOB_TIMEOUT_HOURS: &str = "job_timeout_hours";
/// Key of whether the original is kept (as a backup next to the new file) after a replace.
pub const KEEP_ORIGINALS: &str = "keep_originals";

pub const DEFAULT_JOB_TIMEOUT_HOURS: u32 = 24;
/// 30 days: a longer "timeout" would be none.
pub const MAX_JOB_TIMEOUT_HOURS: u32 = 720;

/// The settings users change from the dashboard, with their defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceSettings {
    pub job_timeout_hours: u32,
    pub keep_originals: bool,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        ServiceSettings { job_timeout_hours: DEFAULT_JOB_TIMEOUT_HOURS, keep_originals: false }
    }
}

pub async fn service_settings(db: &impl ConnectionTrait) -> RepoResult<ServiceSettings> {
    let defaults = ServiceSettings::default();
    Ok(ServiceSettings {
        job_timeout_hours: get_checked(db, JOB_TIMEOUT_HOURS).await?.unwrap_or(defaults.job_timeout_hours),
        keep_originals: get_checked(db, KEEP_ORIGINALS).await?.unwrap_or(defaults.keep_originals),
    })
}

/// Writes the given values, all or none; `None` leaves a setting as it is.
pub async fn update_service_settings<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    job_timeout_hours: Option<u32>,
    keep_originals: Option<bool>,
) -> RepoResult<ServiceSettings> {
    let txn = db.begin().await?;
    if let Some(hours) = job_timeout_hours {
        set(&txn, JOB_TIMEOUT_HOURS, &hours).await?;
    }
    if let Some(keep) = keep_originals {
        set(&txn, KEEP_ORIGINALS, &keep).await?;
    }
    let settings = service_settings(&txn).await?;
    txn.commit().await?;
    Ok(settings)
}
