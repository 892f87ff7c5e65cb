//! API keys for scripts and the *arr applications: created with a name and a scope, shown
//! once, stored as their SHA-256, listed with their creator and when each was last used,
//! revoked at once. A key is its own principal: it acts within its scope and never past its
//! creator's role (`auth`, `domain::access::KeyScope`); only `admin` keys reach
//! administration, and only an administrator makes them.

use super::body::Body;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{AuthUser, API_KEY_PREFIX};
use crate::domain::access::KeyScope;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;
use crate::repo::api_keys::MAX_NAME_CHARS;
use crate::security;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateApiKey {
    /// 1 to 100 characters once trimmed.
    #[schema(schema_with = name_schema)]
    pub name: String,
    /// What the key may do: `integration` (the *arr webhook and reading jobs), `read`
    /// (every read and the feed), `operate` (also job and queue actions and scans) or
    /// `admin` (everything its creator may do; administrators only). Required, unless
    /// `readOnly` is true.
    pub scope: Option<KeyScope>,
    /// Older clients' way of asking for a `read` key.
    pub read_only: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyView {
    pub id: i32,
    pub name: String,
    pub scope: KeyScope,
    /// `scope` is `read`: for older clients.
    pub read_only: bool,
    /// The key's first characters, to tell keys apart.
    pub prefix: String,
    /// Who made it: the key never acts past their role.
    pub username: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Updated at most once a minute.
    pub last_used_at: Option<DateTime<Utc>>,
}

fn name_schema() -> utoipa::openapi::schema::Object {
    super::schema::described(super::schema::trimmed_name(MAX_NAME_CHARS, true), "1 to 100 characters once trimmed.")
}

/// A new key: the only answer that holds the key itself.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedApiKey {
    pub id: i32,
    pub name: String,
    pub scope: KeyScope,
    pub read_only: bool,
    pub prefix: String,
    /// Send it as `X-Api-Key: <key>` or `Authorization: Bearer <key>`. Shown this once.
    pub key: String,
    pub created_at: DateTime<Utc>,
}

fn view(key: &entities::api_key::Model, user: Option<&entities::user::Model>) -> Result<ApiKeyView, AppError> {
    let scope = repo::api_keys::scope_of(key)?;
    Ok(ApiKeyView {
        id: key.id,
        name: key.name.clone(),
        scope,
        read_only: scope == KeyScope::Read,
        prefix: key.prefix.clone(),
        username: user.map(|u| u.username.clone()),
        created_at: key.created_at,
        last_used_at: key.last_used_at,
    })
}

/// API keys
#[utoipa::path(
    get,
    operation_id = "list_api_keys",
    path = "/api-keys",
    tag = "users",
    responses(
        (status = 200, description = "Every key, oldest first (never the keys themselves)", body = Vec<ApiKeyView>),
    ),
)]
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<ApiKeyView>>, AppError> {
    let keys = repo::api_keys::list(&state.db).await?;
    Ok(web::Json(keys.iter().map(|(key, user)| view(key, user.as_ref())).collect::<Result<_, _>>()?))
}

/// Create an API key
#[utoipa::path(
    post,
    operation_id = "create_api_key",
    path = "/api-keys",
    tag = "users",
    request_body = CreateApiKey,
    responses(
        (status = 201, description = "Created; the key is in this answer only", body = CreatedApiKey),
        (status = 403, description = "The scope is past the caller's role (only administrators make admin keys), or the request came with an API key (code forbidden)", body = ErrorBody),
        (status = 422, description = "A name that is empty or too long, no scope, or a scope contradicting readOnly (validation_failed); unknown fields or an unknown scope (invalid_body)", body = ErrorBody),
    ),
)]
pub async fn create(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<CreateApiKey>,
) -> Result<HttpResponse, AppError> {
    if user.key.is_some() {
        // A key that makes keys would outlive its own revocation.
        return Err(AppError::Forbidden("an API key cannot create API keys; log in to make one".into()));
    }
    let CreateApiKey { name, scope, read_only } = body.into_inner();
    let name = name.trim().to_string();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(AppError::invalid(format!("name must be 1 to {MAX_NAME_CHARS} characters")));
    }
    let scope = match (scope, read_only) {
        (Some(scope), None) => scope,
        (Some(KeyScope::Read), Some(true)) | (None, Some(true)) => KeyScope::Read,
        (Some(scope), Some(read_only)) if (scope == KeyScope::Read) == read_only => scope,
        (Some(_), Some(_)) => return Err(AppError::invalid("scope and readOnly disagree; give scope alone")),
        // No default: a key made without saying what it is for would get more than it needs.
        (None, _) => {
            let names: Vec<&str> = KeyScope::ALL.iter().map(|s| s.as_str()).collect();
            return Err(AppError::invalid(format!("scope is required: one of {}", names.join(", "))));
        }
    };
    if !user.role.allows(scope.least_role()) {
        return Err(AppError::Forbidden(format!(
            "a {scope} key needs the role {} or higher; {} is {}",
            scope.least_role(),
            user.username,
            user.role
        )));
    }
    let key = format!("{API_KEY_PREFIX}{}", security::generate_secret(40));
    let prefix: String = key.chars().take(API_KEY_PREFIX.len() + 6).collect();
    let stored =
        repo::api_keys::create(&state.db, &name, user.id, scope, &security::hash_secret(&key), &prefix).await?;
    tracing::info!(user = %user.username, key = %stored.name, %scope, "API key created");
    Ok(HttpResponse::Created().json(CreatedApiKey {
        id: stored.id,
        name: stored.name,
        scope,
        read_only: scope == KeyScope::Read,
        prefix,
        key,
        created_at: stored.created_at,
    }))
}

/// Revoke an API key
#[utoipa::path(
    delete,
    operation_id = "delete_api_key",
    path = "/api-keys/{id}",
    tag = "users",
    params(("id" = i32, Path, description = "The key's id")),
    responses(
        (status = 204, description = "Revoked: refused from the next request on"),
    ),
)]
pub async fn delete(user: AuthUser, state: web::Data<AppState>, id: web::Path<i32>) -> Result<HttpResponse, AppError> {
    let id = id.into_inner();
    if !repo::api_keys::delete(&state.db, id).await? {
        return Err(AppError::NotFound(format!("no API key {id}")));
    }
    tracing::info!(user = %user.username, key_id = id, "API key revoked");
    Ok(HttpResponse::NoContent().finish())
}
