//! Connections: Plex, Jellyfin, Emby, Sonarr and Radarr, told after a replace (and after a
//! container change, by the new name) so they show the new file; each with its URL, API key
//! and path mappings, its last delivery and error, and a test. What they are told goes
//! through the notification outbox (`actors::notifier`), retried until it is taken.

use super::body::Body;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::AuthUser;
use super::notifications::TestResult;
use crate::actors::notifier;
use crate::domain::arr::PathMapping;
use crate::domain::connect::{self, ConnectionKind};
use crate::domain::net::same_origin;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;
use crate::repo::connections::NewConnection;
use crate::repo::notifications::MAX_NAME_CHARS;

fn enabled_by_default() -> bool {
    true
}

/// A connection as a user sets it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConnectionBody {
    /// 1 to 100 characters once trimmed.
    #[schema(schema_with = name_schema)]
    pub name: String,
    pub kind: ConnectionKind,
    #[schema(schema_with = url_schema)]
    pub url: String,
    /// Plex's token (X-Plex-Token); Jellyfin's or Emby's API key (Dashboard > API Keys);
    /// the *arr's API key (Settings > General). On an update, leaving it out keeps the
    /// stored one, unless the URL now names another scheme, host or port: a key goes only
    /// to the host it was given for, so it is then cleared (`apiKeyCleared`).
    #[serde(default)]
    pub api_key: Option<String>,
    /// Folders as condense sees them (`from`) and as the product does (`to`).
    #[serde(default)]
    pub path_mappings: Vec<PathMapping>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn name_schema() -> utoipa::openapi::schema::Object {
    super::schema::described(super::schema::trimmed_name(MAX_NAME_CHARS, true), "1 to 100 characters once trimmed.")
}

fn url_schema() -> utoipa::openapi::schema::Object {
    super::schema::described(
        super::schema::url_of(&["https?"]),
        "The product's base URL: `http://plex:32400`, `http://jellyfin:8096`, \
         `http://emby:8096/emby`, `http://sonarr:8989`, `http://radarr:7878` (with its URL \
         base, if one is set there).",
    )
}

/// A connection as listed (never its key).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionView {
    pub id: i32,
    pub name: String,
    pub kind: ConnectionKind,
    pub url: String,
    pub has_api_key: bool,
    /// True in the answer to an update that cleared the stored key because the URL moved
    /// to another scheme, host or port without a key given with it.
    pub api_key_cleared: bool,
    pub path_mappings: Vec<PathMapping>,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    /// The last refresh (or test) it took.
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// Why the last one it did not take failed, and when.
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// Replaced files waiting to be told to it (retried with backoff until it takes them).
    pub waiting: u64,
}

fn view(model: &entities::notification_target::Model, waiting: u64) -> Result<ConnectionView, AppError> {
    let kind = model.kind.parse().map_err(|e: crate::domain::UnknownName| AppError::Internal(e.to_string()))?;
    Ok(ConnectionView {
        id: model.id,
        name: model.name.clone(),
        kind,
        url: model.url.clone(),
        has_api_key: model.secret.is_some(),
        api_key_cleared: false,
        path_mappings: repo::connections::mappings_of(model),
        enabled: model.enabled,
        created_at: model.created_at,
        last_delivered_at: model.last_delivered_at,
        last_error: model.last_error.clone(),
        last_error_at: model.last_error_at,
        waiting,
    })
}

/// What an update does with the stored key when the body has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoredKey<'a> {
    /// None is stored (a creation): one is needed.
    Absent,
    /// The URL's origin is unchanged: the stored key stays.
    Keep(&'a str),
    /// The URL moved to another origin: the stored key is cleared, not sent there.
    Clear,
}

/// Checks a body against what is stored.
fn checked(body: ConnectionBody, stored_key: StoredKey<'_>) -> Result<NewConnection, AppError> {
    let name = body.name.trim().to_string();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(AppError::invalid(format!("name must be 1 to {MAX_NAME_CHARS} characters")));
    }
    let url = body.url.trim().to_string();
    let given = body.api_key.map(|k| k.trim().to_string()).filter(|k| !k.is_empty());
    let (key, api_key) = match (&given, stored_key) {
        (Some(key), _) => (Some(key.as_str()), given.clone()),
        (None, StoredKey::Keep(stored)) => (Some(stored), None),
        (None, StoredKey::Absent) => (None, None),
        // Validated as if the key were there: the connection is kept, without its key,
        // until one is given again.
        (None, StoredKey::Clear) => (Some("cleared"), Some(String::new())),
    };
    connect::validate(&url, key, &body.path_mappings).map_err(|e| AppError::invalid(e.to_string()))?;
    Ok(NewConnection { name, kind: body.kind, url, api_key, path_mappings: body.path_mappings, enabled: body.enabled })
}

async fn view_of(state: &AppState, id: i32) -> Result<ConnectionView, AppError> {
    let listed = repo::connections::list(&state.db).await?;
    let (connection, waiting) =
        listed.iter().find(|(c, _)| c.id == id).ok_or_else(|| AppError::NotFound(format!("no connection {id}")))?;
    view(connection, *waiting)
}

/// Connections
#[utoipa::path(
    get,
    operation_id = "list_connections",
    path = "/connections",
    tag = "connections",
    responses((status = 200, description = "Every connection, oldest first (never its key)", body = Vec<ConnectionView>)),
)]
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<ConnectionView>>, AppError> {
    let listed = repo::connections::list(&state.db).await?;
    Ok(web::Json(listed.iter().map(|(c, waiting)| view(c, *waiting)).collect::<Result<_, _>>()?))
}

/// Add a connection
#[utoipa::path(
    post,
    operation_id = "create_connection",
    path = "/connections",
    tag = "connections",
    request_body = ConnectionBody,
    responses(
        (status = 201, description = "Created", body = ConnectionView),
        (status = 422, description = "A URL that is not http(s), no API key, a relative path mapping (validation_failed), or unknown fields (invalid_body)", body = ErrorBody),
    ),
)]
pub async fn create(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<ConnectionBody>,
) -> Result<HttpResponse, AppError> {
    let new = checked(body.into_inner(), StoredKey::Absent)?;
    let stored = repo::connections::create(&state.db, new).await?;
    tracing::info!(user = %user.username, connection = %stored.name, kind = %stored.kind, "connection added");
    Ok(HttpResponse::Created().json(view(&stored, 0)?))
}

/// One connection
#[utoipa::path(
    get,
    operation_id = "get_connection",
    path = "/connections/{id}",
    tag = "connections",
    params(("id" = i32, Path, description = "The connection's id")),
    responses(
        (status = 200, description = "The connection", body = ConnectionView),
    ),
)]
pub async fn get(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<ConnectionView>, AppError> {
    Ok(web::Json(view_of(&state, id.into_inner()).await?))
}

/// Change a connection
#[utoipa::path(
    put,
    operation_id = "update_connection",
    path = "/connections/{id}",
    tag = "connections",
    params(("id" = i32, Path, description = "The connection's id")),
    request_body = ConnectionBody,
    responses(
        (status = 200, description = "Changed", body = ConnectionView),
        (status = 422, description = "As for creation", body = ErrorBody),
    ),
)]
pub async fn update(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
    body: Body<ConnectionBody>,
) -> Result<web::Json<ConnectionView>, AppError> {
    let id = id.into_inner();
    let stored = repo::connections::get(&state.db, id).await?;
    let body = body.into_inner();
    let stored_key = match stored.secret.as_deref() {
        None => StoredKey::Absent,
        Some(_) if !same_origin(&stored.url, body.url.trim()) => StoredKey::Clear,
        Some(key) => StoredKey::Keep(key),
    };
    let new = checked(body, stored_key)?;
    let cleared = new.api_key.as_deref() == Some("");
    let changed = repo::connections::update(&state.db, id, new).await?;
    if cleared {
        tracing::warn!(user = %user.username, connection = %changed.name,
            "connection moved to another host without a key: its stored key was cleared");
    }
    tracing::info!(user = %user.username, connection = %changed.name, "connection changed");
    Ok(web::Json(ConnectionView { api_key_cleared: cleared, ..view_of(&state, id).await? }))
}

/// Remove a connection
#[utoipa::path(
    delete,
    operation_id = "delete_connection",
    path = "/connections/{id}",
    tag = "connections",
    params(("id" = i32, Path, description = "The connection's id")),
    responses(
        (status = 204, description = "Removed, with what waited for it"),
    ),
)]
pub async fn delete(user: AuthUser, state: web::Data<AppState>, id: web::Path<i32>) -> Result<HttpResponse, AppError> {
    let id = id.into_inner();
    if !repo::connections::delete(&state.db, id).await? {
        return Err(AppError::NotFound(format!("no connection {id}")));
    }
    tracing::info!(user = %user.username, connection_id = id, "connection removed");
    Ok(HttpResponse::NoContent().finish())
}

/// Test a connection
///
/// Asks the product something that changes nothing (Plex's library sections, the *arr's
/// system status, Jellyfin's or Emby's system information) with the stored URL and key; the
/// answer says whether it worked, and the connection shows it as its last delivery or error.
#[utoipa::path(
    post,
    operation_id = "test_connection",
    path = "/connections/{id}/test",
    tag = "connections",
    params(("id" = i32, Path, description = "The connection's id")),
    responses(
        (status = 200, description = "Whether the product answered, and if not why", body = TestResult),
    ),
)]
pub async fn test(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<TestResult>, AppError> {
    let connection = repo::connections::get(&state.db, id.into_inner()).await?;
    let tried = notifier::test_connection(&state.db, &connection).await;
    Ok(web::Json(TestResult { delivered: tried.is_ok(), error: tried.err() }))
}
