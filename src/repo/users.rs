//! Users of the dashboard and API.

use entities::user::{self, ActiveModel, Column, Entity};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set, TransactionTrait,
};

use super::{now, RepoError, RepoResult};
use crate::domain::access::UserRole;

pub async fn create(
    db: &impl ConnectionTrait,
    username: &str,
    password_hash: &str,
    role: UserRole,
) -> RepoResult<user::Model> {
    let at = now();
    ActiveModel {
        username: Set(username.to_string()),
        role: Set(role.into()),
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

/// The user with this id (what tokens are bound to; a name can be deleted and taken again).
pub async fn find_by_id(db: &impl ConnectionTrait, id: i32) -> RepoResult<Option<user::Model>> {
    Ok(Entity::find_by_id(id).one(db).await?)
}

/// Sets the password and revokes every token the user holds, in one statement: a token
/// stolen before the change is refused from the moment the new password is stored.
pub async fn set_password_hash(db: &impl ConnectionTrait, username: &str, password_hash: &str) -> RepoResult<()> {
    let result = Entity::update_many()
        .col_expr(Column::PasswordHash, Expr::value(password_hash.to_string()))
        .col_expr(Column::TokenVersion, Expr::col(Column::TokenVersion).add(1))
        .col_expr(Column::UpdatedAt, Expr::value(now()))
        .filter(Column::Username.eq(username))
        .exec(db)
        .await?;
    found(result.rows_affected, username)
}

/// Sets the user's role and revokes every token the user holds, in one statement, so no
/// token goes on acting with the old role. The last administrator keeps the role: without
/// one, nobody could manage users.
pub async fn set_role<C: ConnectionTrait + TransactionTrait>(db: &C, username: &str, role: UserRole) -> RepoResult<()> {
    let txn = db.begin().await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        // As in `delete`: two demotions at once must not each count the other admin.
        Entity::find().lock_exclusive().all(&txn).await?;
    }
    let result = Entity::update_many()
        .col_expr(Column::Role, Expr::value(entities::sea_orm_active_enums::UserRole::from(role)))
        .col_expr(Column::TokenVersion, Expr::col(Column::TokenVersion).add(1))
        .col_expr(Column::UpdatedAt, Expr::value(now()))
        .filter(Column::Username.eq(username))
        .exec(&txn)
        .await?;
    found(result.rows_affected, username)?;
    an_admin_remains(&txn, username).await?;
    txn.commit().await?;
    Ok(())
}

/// Refuses a change (inside its transaction) that left no administrator.
async fn an_admin_remains(txn: &impl ConnectionTrait, username: &str) -> RepoResult<()> {
    let admins = Entity::find()
        .filter(Column::Role.eq(entities::sea_orm_active_enums::UserRole::from(UserRole::Admin)))
        .count(txn)
        .await?;
    if admins == 0 {
        return Err(RepoError::Conflict(format!(
            "{username:?} is the last administrator; make another user admin first"
        )));
    }
    Ok(())
}

/// Revokes every token the user holds (a logout): the token version moves on.
pub async fn revoke_tokens(db: &impl ConnectionTrait, username: &str) -> RepoResult<()> {
    let result = Entity::update_many()
        .col_expr(Column::TokenVersion, Expr::col(Column::TokenVersion).add(1))
        .filter(Column::Username.eq(username))
        .exec(db)
        .await?;
    found(result.rows_affected, username)
}

pub async fn count(db: &impl ConnectionTrait) -> RepoResult<u64> {
    Ok(Entity::find().count(db).await?)
}

/// Every user, oldest first.
pub async fn list(db: &impl ConnectionTrait) -> RepoResult<Vec<user::Model>> {
    Ok(Entity::find().order_by_asc(Column::Id).all(db).await?)
}

/// Deletes the user unless it is the last one: with no user left, nobody could log in to
/// manage the service.
pub async fn delete<C: ConnectionTrait + TransactionTrait>(db: &C, username: &str) -> RepoResult<()> {
    let txn = db.begin().await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        // Lock every user row first, so two deletes at once cannot each count the other's
        // user as still there. SQLite needs none: its DELETE takes the one write lock, and a
        // second writer waits for the first to commit before it counts.
        Entity::find().lock_exclusive().all(&txn).await?;
    }
    // The user's API keys go with it (in the same transaction: a refused delete keeps them).
    super::api_keys::delete_of_user(&txn, username).await?;
    let result = Entity::delete_many().filter(Column::Username.eq(username)).exec(&txn).await?;
    found(result.rows_affected, username)?;
    if Entity::find().count(&txn).await? == 0 {
        return Err(RepoError::Conflict(format!("{username:?} is the last user; create another one first")));
    }
    an_admin_remains(&txn, username).await?;
    txn.commit().await?;
    Ok(())
}

/// NotFound when a statement on user `username` touched no row: there is no such user.
fn found(rows: u64, username: &str) -> RepoResult<()> {
    if rows == 0 {
        return Err(RepoError::NotFound(format!("user {username:?}")));
    }
    Ok(())
}
