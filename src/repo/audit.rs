//! The audit log: one row per change made through the API (`http::audit` decides which).

use entities::audit_entry::{self, ActiveModel, Column, Entity};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
    Set,
};

use super::{now, Page, RepoResult};
use crate::domain::access::UserRole;

pub use crate::domain::paging::MAX_PAGE_SIZE;

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

/// Which API key the entries were made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFilter {
    /// None: made signed in.
    None,
    /// This key's (by id).
    Id(i32),
    /// No entry's (an id no key can have).
    Nothing,
}

/// Which entries a page of the log holds; each `None` is "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter<'a> {
    pub username: Option<&'a str>,
    pub key: Option<KeyFilter>,
    /// The method and the route as declared.
    pub action: Option<(&'a str, &'a str)>,
}

/// One page of the log, newest first, of the entries `filter` keeps (in SQL: the total
/// counts them all, not only the latest).
pub async fn list(
    db: &impl ConnectionTrait,
    filter: &AuditFilter<'_>,
    page: u64,
    page_size: u64,
) -> RepoResult<Page<audit_entry::Model>> {
    let page = page.max(1);
    let page_size = page_size.clamp(1, MAX_PAGE_SIZE);
    let filtered = || {
        let mut find = Entity::find();
        if let Some(name) = filter.username {
            find = find.filter(Column::Username.eq(name));
        }
        find = match filter.key {
            None => find,
            Some(KeyFilter::None) => find.filter(Column::KeyId.is_null()),
            Some(KeyFilter::Id(id)) => find.filter(Column::KeyId.eq(id)),
            // No row has both no key and a key: a condition nothing meets, in SQL.
            Some(KeyFilter::Nothing) => find.filter(Column::KeyId.is_null()).filter(Column::KeyId.is_not_null()),
        };
        if let Some((method, route)) = filter.action {
            find = find.filter(Column::Method.eq(method)).filter(Column::Route.eq(route));
        }
        find
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
