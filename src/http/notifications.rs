//! Notification targets: where condense tells what happened (a webhook, Discord, ntfy, Gotify,
//! Apprise, e-mail), which events each wants, its last delivery and error, and a test.
//! Deliveries go through the outbox (`actors::notifier`).

use super::body::Body;
use std::collections::BTreeMap;

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::AuthUser;
use crate::actors::notifier;
use crate::domain::net::same_origin;
use crate::domain::notify::{self, NotifyEvent, TargetKind};
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;
use crate::repo::notifications::{NewTarget, MAX_NAME_CHARS};

fn enabled_by_default() -> bool {
    true
}

/// A target as a user sets it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetBody {
    /// 1 to 100 characters once trimmed.
    #[schema(schema_with = name_schema)]
    pub name: String,
    pub kind: TargetKind,
    #[schema(schema_with = url_schema)]
    pub url: String,
    #[schema(schema_with = events_schema)]
    pub events: Vec<NotifyEvent>,
    /// The webhook's signing key, an ntfy access token, a Gotify application token, an SMTP
    /// password. On an update, leaving it out keeps the stored one, unless the URL now
    /// names another scheme, host or port: then it is cleared (`secretCleared`); "" removes it.
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    #[schema(schema_with = super::schema::headers)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn name_schema() -> utoipa::openapi::schema::Object {
    super::schema::described(super::schema::trimmed_name(MAX_NAME_CHARS, true), "1 to 100 characters once trimmed.")
}

fn url_schema() -> utoipa::openapi::schema::Object {
    super::schema::described(
        super::schema::url_of(&["https?", "smtps?"]),
        "The webhook's URL; Discord's webhook URL; the ntfy topic URL; the Gotify server; the \
         Apprise API notify URL (http:// or https://); for e-mail \
         `smtp[s]://[user@]host[:port]?from=…&to=…`.",
    )
}

fn events_schema() -> utoipa::openapi::schema::Array {
    let names: Vec<&str> = notify::SUBSCRIBABLE.iter().map(|e| e.as_str()).collect();
    let mut array = super::schema::non_empty_list_of(&names);
    array.description = Some(format!("The events it wants, at least one: {}.", names.join(", ")));
    array
}

/// A target as listed (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetView {
    pub id: i32,
    pub name: String,
    pub kind: TargetKind,
    pub url: String,
    pub events: Vec<NotifyEvent>,
    pub has_secret: bool,
    /// True in the answer to an update that cleared the stored secret because the URL
    /// moved to another scheme, host or port without a secret given with it.
    pub secret_cleared: bool,
    pub headers: BTreeMap<String, String>,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    /// The last notification (or test) it took.
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// Why the last one it did not take failed, and when.
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// Notifications waiting for it (retried with backoff until it takes them).
    pub waiting: u64,
}

/// What a test delivery did.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestResult {
    pub delivered: bool,
    pub error: Option<String>,
}

fn view(model: &entities::notification_target::Model, waiting: u64) -> Result<TargetView, AppError> {
    let kind = model.kind.parse().map_err(|e: crate::domain::UnknownName| AppError::Internal(e.to_string()))?;
    Ok(TargetView {
        id: model.id,
        name: model.name.clone(),
        kind,
        url: model.url.clone(),
        events: repo::notifications::events_of(model),
        has_secret: model.secret.is_some(),
        secret_cleared: false,
        headers: repo::notifications::headers_of(model).into_iter().collect(),
        enabled: model.enabled,
        created_at: model.created_at,
        last_delivered_at: model.last_delivered_at,
        last_error: model.last_error.clone(),
        last_error_at: model.last_error_at,
        waiting,
    })
}

/// Checks a body; `stored_secret` is the secret an update keeps when the body has none.
fn checked(body: TargetBody, stored_secret: Option<&str>) -> Result<NewTarget, AppError> {
    let name = body.name.trim().to_string();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(AppError::invalid(format!("name must be 1 to {MAX_NAME_CHARS} characters")));
    }
    let url = body.url.trim().to_string();
    let secret = body.secret.as_deref().or(stored_secret);
    let mut events: Vec<NotifyEvent> = Vec::new();
    for event in body.events {
        if !events.contains(&event) {
            events.push(event);
        }
    }
    notify::validate(body.kind, &url, secret, &events).map_err(|e| AppError::invalid(e.to_string()))?;
    if let Some((name, _)) = body.headers.iter().find(|(n, v)| !notify::valid_header(n, v)) {
        return Err(AppError::invalid(format!("header {name:?} is not a valid header")));
    }
    Ok(NewTarget {
        name,
        kind: body.kind,
        url,
        secret: body.secret,
        headers: body.headers.into_iter().collect(),
        events,
        enabled: body.enabled,
    })
}

/// Notification targets
#[utoipa::path(
    get,
    operation_id = "list_notification_targets",
    path = "/notifications",
    tag = "notifications",
    responses((status = 200, description = "Every target, oldest first (never its secret)", body = Vec<TargetView>)),
)]
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<TargetView>>, AppError> {
    let targets = repo::notifications::list(&state.db).await?;
    Ok(web::Json(targets.iter().map(|(t, waiting)| view(t, *waiting)).collect::<Result<_, _>>()?))
}

/// Add a notification target
#[utoipa::path(
    post,
    operation_id = "create_notification_target",
    path = "/notifications",
    tag = "notifications",
    request_body = TargetBody,
    responses(
        (status = 201, description = "Created", body = TargetView),
        (status = 422, description = "A URL that does not fit the kind, a missing token, no events (validation_failed), or unknown fields (invalid_body)", body = ErrorBody),
    ),
)]
pub async fn create(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<TargetBody>,
) -> Result<HttpResponse, AppError> {
    let new = checked(body.into_inner(), None)?;
    let stored = repo::notifications::create(&state.db, new).await?;
    tracing::info!(user = %user.username, notification_target = %stored.name, kind = %stored.kind, "notification target added");
    Ok(HttpResponse::Created().json(view(&stored, 0)?))
}

/// One notification target
#[utoipa::path(
    get,
    operation_id = "get_notification_target",
    path = "/notifications/{id}",
    tag = "notifications",
    params(("id" = i32, Path, description = "The target's id")),
    responses(
        (status = 200, description = "The target", body = TargetView),
    ),
)]
pub async fn get(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<TargetView>, AppError> {
    let id = id.into_inner();
    let listed = repo::notifications::list(&state.db).await?;
    let (target, waiting) = listed
        .iter()
        .find(|(t, _)| t.id == id)
        .ok_or_else(|| AppError::NotFound(format!("no notification target {id}")))?;
    Ok(web::Json(view(target, *waiting)?))
}

/// Change a notification target
#[utoipa::path(
    put,
    operation_id = "update_notification_target",
    path = "/notifications/{id}",
    tag = "notifications",
    params(("id" = i32, Path, description = "The target's id")),
    request_body = TargetBody,
    responses(
        (status = 200, description = "Changed", body = TargetView),
        (status = 422, description = "As for creation", body = ErrorBody),
    ),
)]
pub async fn update(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
    body: Body<TargetBody>,
) -> Result<web::Json<TargetView>, AppError> {
    let id = id.into_inner();
    let stored = repo::notifications::get(&state.db, id).await?;
    let mut body = body.into_inner();
    // A secret goes only to the origin it was given for: a URL moved to another scheme,
    // host or port without the secret given again clears it (a Gotify target, which needs
    // one, is then refused until it is given).
    let moved = !same_origin(&stored.url, body.url.trim());
    let cleared = moved && stored.secret.is_some() && body.secret.as_deref().is_none_or(str::is_empty);
    if cleared {
        body.secret = Some(String::new());
    }
    let new = checked(body, if moved { None } else { stored.secret.as_deref() })?;
    let changed = repo::notifications::update(&state.db, id, new).await?;
    if cleared {
        tracing::warn!(user = %user.username, notification_target = %changed.name,
            "notification target moved to another host without a secret: its stored secret was cleared");
    }
    tracing::info!(user = %user.username, notification_target = %changed.name, "notification target changed");
    let waiting = repo::notifications::list(&state.db).await?.iter().find(|(t, _)| t.id == id).map_or(0, |(_, w)| *w);
    Ok(web::Json(TargetView { secret_cleared: cleared, ..view(&changed, waiting)? }))
}

/// Remove a notification target
#[utoipa::path(
    delete,
    operation_id = "delete_notification_target",
    path = "/notifications/{id}",
    tag = "notifications",
    params(("id" = i32, Path, description = "The target's id")),
    responses(
        (status = 204, description = "Removed, with the notifications that waited for it"),
    ),
)]
pub async fn delete(user: AuthUser, state: web::Data<AppState>, id: web::Path<i32>) -> Result<HttpResponse, AppError> {
    let id = id.into_inner();
    if !repo::notifications::delete(&state.db, id).await? {
        return Err(AppError::NotFound(format!("no notification target {id}")));
    }
    tracing::info!(user = %user.username, target_id = id, "notification target removed");
    Ok(HttpResponse::NoContent().finish())
}

/// Send a test notification
///
/// Sent at once, not through the outbox; the answer says whether it arrived, and the target
/// shows it as its last delivery or error.
#[utoipa::path(
    post,
    operation_id = "test_notification_target",
    path = "/notifications/{id}/test",
    tag = "notifications",
    params(("id" = i32, Path, description = "The target's id")),
    responses(
        (status = 200, description = "Whether the receiver took it, and if not why", body = TestResult),
    ),
)]
pub async fn test(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<TestResult>, AppError> {
    let target = repo::notifications::get(&state.db, id.into_inner()).await?;
    let sent = notifier::send_test(&state.db, &target).await;
    Ok(web::Json(TestResult { delivered: sent.is_ok(), error: sent.err() }))
}
