//! The installed licence key.

use entities::license::{self, ActiveModel, Column, Entity};
use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, QueryOrder, Set, TransactionTrait};

use super::{now, RepoResult};
use crate::domain::license::Tier;
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

pub async fn remove(db: &impl ConnectionTrait) -> RepoResult<()> {
    Entity::delete_many().exec(db).await?;
    Ok(())
}
