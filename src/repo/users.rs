//! Users of the dashboard and API.

use entities::user::{self, ActiveModel, Column, Entity};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Set};

use super::{now, RepoError, RepoResult};

pub async fn create(db: &impl ConnectionTrait, username: &str, password_hash: &str) -> RepoResult<user::Model> {
    let at = now();
    ActiveModel {
        username: Set(username.to_string()),
        password_hash: Set(password_hash.to_string()),
        created_at: Set(at),
        updated_at: Set(at),
        ..Default::default()
    }
    .insert(db)
    .await
    .map_err(|e| RepoError::unique(e, || format!("user {username:?} exists")))
}

pub async fn find(db: &impl ConnectionTrait, username: &str) -> RepoResult<Option<user::Model>> {
    Ok(Entity::find().filter(Column::Username.eq(username)).one(db).await?)
}

pub async fn set_password_hash(db: &impl ConnectionTrait, username: &str, password_hash: &str) -> RepoResult<()> {
    let user = find(db, username).await?.ok_or_else(|| RepoError::NotFound(format!("user {username:?}")))?;
    let mut model: ActiveModel = user.into();
    model.password_hash = Set(password_hash.to_string());
    model.updated_at = Set(now());
    model.update(db).await?;
    Ok(())
}

pub async fn count(db: &impl ConnectionTrait) -> RepoResult<u64> {
    Ok(Entity::find().count(db).await?)
}
