//! API keys: stored as their SHA-256 only, found by it, each tied to the user who made it
//! and holding its scope.

use entities::api_key::{self, ActiveModel, Column, Entity};
use entities::user;
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set};

use super::{now, RepoError, RepoResult};
use crate::domain::access::KeyScope;

/// Longest key name.
pub const MAX_NAME_CHARS: usize = 100;

pub async fn create(
    db: &impl ConnectionTrait,
    name: &str,
    user_id: i32,
    scope: KeyScope,
    key_hash: &str,
    prefix: &str,
) -> RepoResult<api_key::Model> {
    Ok(ActiveModel {
        name: Set(name.to_string()),
        user_id: Set(user_id),
        read_only: Set(scope == KeyScope::Read),
        scope: Set(scope.as_str().to_string()),
        key_hash: Set(key_hash.to_string()),
        prefix: Set(prefix.to_string()),
        created_at: Set(now()),
        last_used_at: Set(None),
        ..Default::default()
    }
    .insert(db)
    .await?)
}

/// Every key, oldest first, with the name of its user.
pub async fn list(db: &impl ConnectionTrait) -> RepoResult<Vec<(api_key::Model, Option<user::Model>)>> {
    Ok(Entity::find().find_also_related(user::Entity).order_by_asc(Column::Id).all(db).await?)
}

/// The key with this hash and its user; `None` for no such key (revoked, or its user gone).
pub async fn find_by_hash(
    db: &impl ConnectionTrait,
    key_hash: &str,
) -> RepoResult<Option<(api_key::Model, user::Model)>> {
    let found = Entity::find().filter(Column::KeyHash.eq(key_hash)).find_also_related(user::Entity).one(db).await?;
    Ok(found.and_then(|(key, user)| user.map(|user| (key, user))))
}

/// A stored key's scope. A value no version wrote is an error, never a guess: guessing
/// could hand out more than was given.
pub fn scope_of(key: &api_key::Model) -> RepoResult<KeyScope> {
    key.scope
        .parse()
        .map_err(|_| RepoError::Db(sea_orm::DbErr::Type(format!("API key {}: scope {:?}", key.id, key.scope))))
}

/// How stale a key's recorded last use may get: one write a minute at most per key.
pub const TOUCH_EVERY: chrono::Duration = chrono::Duration::minutes(1);

/// Records a use, unless one was recorded less than `TOUCH_EVERY` ago (the filter keeps two
/// requests at once from both writing).
pub async fn touch(db: &impl ConnectionTrait, id: i32) -> RepoResult<()> {
    let at = now();
    Entity::update_many()
        .col_expr(Column::LastUsedAt, Expr::value(at))
        .filter(Column::Id.eq(id))
        .filter(Column::LastUsedAt.is_null().or(Column::LastUsedAt.lt(at - TOUCH_EVERY)))
        .exec(db)
        .await?;
    Ok(())
}

/// Revokes a key: it is refused from the next request on. False when there is no such key.
pub async fn delete(db: &impl ConnectionTrait, id: i32) -> RepoResult<bool> {
    Ok(Entity::delete_by_id(id).exec(db).await?.rows_affected == 1)
}

/// Deletes every key of the user named `username` (also done by the foreign key; explicit,
/// so it does not depend on the database enforcing it), in one statement: the first of a
/// user's deletion, a write before any read (see `docs/ARCHITECTURE.md`, "Layers").
pub async fn delete_of_user(db: &impl ConnectionTrait, username: &str) -> RepoResult<()> {
    let owner = sea_orm::sea_query::Query::select()
        .column(user::Column::Id)
        .from(user::Entity)
        .and_where(user::Column::Username.eq(username))
        .to_owned();
    Entity::delete_many().filter(Column::UserId.in_subquery(owner)).exec(db).await?;
    Ok(())
}
