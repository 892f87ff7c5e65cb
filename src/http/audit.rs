//! The audit log: every change a user makes through the API (pause, cancel, force, delete,
//! settings, users, licence keys, libraries, scans…) is written down with who, when, which
//! route and how it was answered, refusals included. Which requests count is decided once,
//! from the route table (`Endpoint::audited`), and recorded in one place, the token
//! middleware (`guard::require_token`), so a new route cannot be left out by forgetting a call.

use actix_web::dev::ServiceRequest;
use actix_web::web;
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::AuthUser;
use super::endpoint::Endpoint;
use super::users::MAX_USERNAME_CHARS;
use super::views::AuditEntryView;
use crate::domain::paging::MAX_PAGE;
use crate::error::AppError;
use crate::http::state::AppState;
use crate::repo;
use crate::repo::audit::{AuditFilter, KeyFilter, NewEntry, MAX_PAGE_SIZE};
use crate::repo::Page;

const DEFAULT_PAGE_SIZE: u64 = 100;

/// What is known of an audited request before it is answered.
pub struct Pending {
    entry: NewEntry,
}

impl Pending {
    /// The entry for this request by `user`, when the route table audits its route.
    pub fn of(req: &ServiceRequest, user: &AuthUser, endpoint: Option<&Endpoint>) -> Option<Pending> {
        let endpoint = endpoint?;
        endpoint.audited().then(|| Pending {
            entry: NewEntry {
                username: user.username.clone(),
                role: user.role,
                method: req.method().to_string(),
                route: endpoint.path.to_string(),
                path: super::prefix::asked_path(req.request()),
                status: 0,
                key: user.key.as_ref().map(|key| (key.id, key.name.clone())),
                client: super::auth::client_of(req.request()).map(|ip| ip.to_string()),
            },
        })
    }

    /// Writes the entry with the answer's status. The action has already happened (or been
    /// refused), so a failed write is logged rather than turned into an error the user
    /// would read as "nothing was done".
    pub async fn record(self, state: Option<&web::Data<AppState>>, status: u16) {
        let Some(state) = state else {
            tracing::error!(route = %self.entry.route, "audit entry lost: AppState is not registered");
            return;
        };
        let entry = NewEntry { status, ..self.entry };
        if let Err(error) = repo::audit::append(&state.db, entry.clone()).await {
            tracing::error!(%error, username = %entry.username, method = %entry.method, path = %entry.path, status,
                "audit entry could not be written");
        }
    }
}

/// GET /audit query parameters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// 1 to 1,000,000.
    #[param(minimum = 1, maximum = 1000000)]
    pub page: Option<u64>,
    /// Larger values are served as the largest page size (500).
    #[param(schema_with = page_size)]
    pub page_size: Option<u64>,
    /// Only this user's entries (empty: any user's).
    #[param(schema_with = user_name)]
    pub user: Option<String>,
    /// Only the entries made with this API key (its id), or `none`: those made signed in.
    #[param(schema_with = key_filter)]
    pub key: Option<String>,
    /// Only this action: the method and the route as declared, e.g. `POST /jobs/{id}/pause`.
    #[param(schema_with = action_filter)]
    pub action: Option<String>,
}

fn page_size() -> utoipa::openapi::schema::Object {
    super::schema::page_size(DEFAULT_PAGE_SIZE)
}

/// Longest `action` the filter takes: a method and a route.
const MAX_ACTION_CHARS: usize = 200;

fn user_name() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let object = ObjectBuilder::new().schema_type(Type::String).max_length(Some(MAX_USERNAME_CHARS)).build();
    super::schema::described(object, "Only this user's entries (empty: any user's).")
}

fn key_filter() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let object = ObjectBuilder::new().schema_type(Type::String).pattern(Some(KEY_PATTERN)).build();
    super::schema::described(
        object,
        "Only the entries made with this API key (its id), or `none`: those made signed in \
         (empty: any).",
    )
}

fn action_filter() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    // Empty, as a form sends an unset filter, is no filter.
    let pattern = format!("^(?:[A-Z]{{1,10}} /[!-~]{{0,{}}})?$", MAX_ACTION_CHARS - 12);
    let object = ObjectBuilder::new().schema_type(Type::String).pattern(Some(pattern)).build();
    super::schema::described(
        object,
        "Only this action: the method and the route as declared, e.g. `POST /jobs/{id}/pause` \
         (empty: any).",
    )
}

/// `none`, or an id: ten digits at most (an id past the largest is nobody's key); empty, as
/// a form sends an unset filter, is no filter.
const KEY_PATTERN: &str = "^(?:none|[0-9]{1,10})?$";

/// The key filter as the query states it, checked as `key_filter` documents it.
fn key_of(key: Option<&str>) -> Result<Option<KeyFilter>, String> {
    let Some(key) = key.filter(|k| !k.is_empty()) else { return Ok(None) };
    if key == "none" {
        return Ok(Some(KeyFilter::None));
    }
    if key.len() > 10 || !key.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("key must be none or an API key's id, not {key:?}"));
    }
    // Ten digits may pass the largest id: such a key matches no entry.
    Ok(Some(key.parse::<i32>().map_or(KeyFilter::Nothing, KeyFilter::Id)))
}

/// The action filter as the query states it (method, route), checked as `action_filter`
/// documents it.
fn action_of(action: Option<&str>) -> Result<Option<(&str, &str)>, String> {
    let Some(action) = action.filter(|a| !a.is_empty()) else { return Ok(None) };
    let refused = || format!("action must be a method and a route, e.g. POST /jobs/{{id}}/pause, not {action:?}");
    let (method, route) = action.split_once(' ').ok_or_else(refused)?;
    let method_ok = (1..=10).contains(&method.len()) && method.bytes().all(|b| b.is_ascii_uppercase());
    let route_ok =
        route.starts_with('/') && route.len() <= MAX_ACTION_CHARS - 11 && route.bytes().all(|b| b.is_ascii_graphic());
    if !(method_ok && route_ok) {
        return Err(refused());
    }
    Ok(Some((method, route)))
}

/// The audit log, newest first
#[utoipa::path(
    get,
    operation_id = "list_audit",
    path = "/audit",
    tag = "users",
    params(AuditQuery),
    responses(
        (status = 200, description = "One page of the audit log, newest first", body = Page<AuditEntryView>),
    ),
)]
pub async fn list(
    _user: AuthUser,
    state: web::Data<AppState>,
    query: web::Query<AuditQuery>,
) -> Result<web::Json<Page<AuditEntryView>>, AppError> {
    let AuditQuery { page, page_size, user, key, action } = query.into_inner();
    let invalid = |message: String| AppError::BadRequest { code: "invalid_query", message };
    if page.is_some_and(|page| page == 0 || page > MAX_PAGE) {
        return Err(invalid(format!("page must be 1 to {MAX_PAGE}")));
    }
    if page_size == Some(0) {
        return Err(invalid(format!("pageSize must be 1 to {MAX_PAGE_SIZE}")));
    }
    let user = user.filter(|name| !name.is_empty());
    if user.as_ref().is_some_and(|name| name.chars().count() > MAX_USERNAME_CHARS) {
        return Err(invalid(format!("user must be at most {MAX_USERNAME_CHARS} characters")));
    }
    let filter = AuditFilter {
        username: user.as_deref(),
        key: key_of(key.as_deref()).map_err(invalid)?,
        action: action_of(action.as_deref()).map_err(invalid)?,
    };
    let found = repo::audit::list(
        &state.db,
        &filter,
        page.unwrap_or(1),
        page_size.unwrap_or(DEFAULT_PAGE_SIZE).min(MAX_PAGE_SIZE),
    )
    .await?;
    Ok(web::Json(found.map(AuditEntryView::from)))
}
