//! The installed licence key, and the installation's trial of a paid tier.

use entities::license::{self, ActiveModel, Column, Entity};
use entities::license_trial;
use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, QueryOrder, Set, TransactionTrait};

use super::{now, RepoError, RepoResult};
use crate::domain::license::{Tier, Trial};
use crate::license::LicensePayload;

#[derive(Debug, Clone, PartialEq)]
pub struct NewLicense {
    pub key: String,
    pub tier: Tier,
    pub licensee: String,
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl NewLicense {
    /// The record of `key`, whose signature vouched for `payload`.
    pub fn verified(key: &str, payload: &LicensePayload) -> NewLicense {
        NewLicense {
            key: key.trim().to_string(),
            tier: payload.tier,
            licensee: payload.licensee.clone(),
            expires_at: payload.expires_at,
        }
    }
}

/// The licence installed last, if any.
pub async fn current(db: &impl ConnectionTrait) -> RepoResult<Option<license::Model>> {
    Ok(Entity::find().order_by_desc(Column::Id).one(db).await?)
}

/// Replaces the installed licence.
pub async fn install<C: ConnectionTrait + TransactionTrait>(db: &C, new: NewLicense) -> RepoResult<license::Model> {
    let txn = db.begin().await?;
    Entity::delete_many().exec(&txn).await?;
    let model = ActiveModel {
        key: Set(new.key),
        tier: Set(new.tier.into()),
        licensee: Set(new.licensee),
        expires_at: Set(new.expires_at),
        installed_at: Set(now()),
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    txn.commit().await?;
    Ok(model)
}

/// Removes the installed key. The trial is another table and stays as it is: removing a
/// key never makes a trial available again.
pub async fn remove(db: &impl ConnectionTrait) -> RepoResult<()> {
    Entity::delete_many().exec(db).await?;
    Ok(())
}

/// The one row the trial table may hold.
const TRIAL_ROW: i32 = 1;

/// The installation's trial, running or ended; `None` while it was never started.
pub async fn trial(db: &impl ConnectionTrait) -> RepoResult<Option<Trial>> {
    let row = license_trial::Entity::find_by_id(TRIAL_ROW).one(db).await?;
    Ok(row.map(|row| Trial { tier: row.tier.into(), started_at: row.started_at, ends_at: row.ends_at }))
}

/// Records `trial` as the installation's trial. A trial recorded before, even by a request
/// racing this one, makes this a `Conflict`: the row is written once and nothing deletes it.
pub async fn start_trial(db: &impl ConnectionTrait, trial: Trial) -> RepoResult<()> {
    license_trial::ActiveModel {
        id: Set(TRIAL_ROW),
        tier: Set(trial.tier.into()),
        started_at: Set(trial.started_at),
        ends_at: Set(trial.ends_at),
    }
    .insert(db)
    .await
    .map_err(|error| RepoError::unique(error, || "this installation's trial was already started".to_string()))?;
    Ok(())
}
