//! The audit log: one row per change made through the API (`http::audit` decides which).

use entities::audit_entry::{self, ActiveModel, Column, Entity};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
    Set,
};

use super::{now, Page, RepoResult};
use crate::domain::access::UserRole;

/// Most entries one page of the log holds.
pub const MAX_PAGE_SIZE: u64 = 500;

/// What the API records about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    pub username: String,
    pub role: UserRole,
    pub method: String,
    pub route: String,
    pub path: String,
    pub status: u16,
    /// The API key (id, name) the request came with; `None` for a session's token.
    pub key: Option<(i32, String)>,
    /// The client's address, when known.
    pub client: Option<String>,
}

pub async fn append(db: &impl ConnectionTrait, entry: NewEntry) -> RepoResult<audit_entry::Model> {
    Ok(ActiveModel {
        at: Set(now()),
        username: Set(entry.username),
        role: Set(entry.role.into()),
        method: Set(entry.method),
        route: Set(entry.route),
        path: Set(entry.path),
        status: Set(i32::from(entry.status)),
        key_id: Set(entry.key.as_ref().map(|(id, _)| *id)),
        key_name: Set(entry.key.map(|(_, name)| name)),
        client: Set(entry.client),
        ..Default::default()
    }
    .insert(db)
    .await?)
}

/// One page of the log, newest first; only `username`'s entries when given.
pub async fn list(
    db: &impl ConnectionTrait,
    username: Option<&str>,
    page: u64,
    page_size: u64,
) -> RepoResult<Page<audit_entry::Model>> {
    let page = page.max(1);
    let page_size = page_size.clamp(1, MAX_PAGE_SIZE);
    let filtered = || match username {
        Some(name) => Entity::find().filter(Column::Username.eq(name)),
        None => Entity::find(),
    };
    let total = filtered().count(db).await?;
    let items = filtered()
        // Rows are appended in time order: the id breaks ties between equal times.
        .order_by_desc(Column::At)
        .order_by_desc(Column::Id)
        // The API refuses pages past the bound; a caller that did not gets an empty page.
        .offset(crate::domain::paging::offset(page, page_size).unwrap_or(i64::MAX as u64))
        .limit(page_size)
        .all(db)
        .await?;
    Ok(Page { items, total, page, page_size, next_cursor: None })
}
