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
use super::views::AuditEntryView;
use crate::domain::paging::MAX_PAGE;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;
use crate::repo::audit::{NewEntry, MAX_PAGE_SIZE};
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
                path: req.path().to_string(),
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
    /// Only this user's entries.
    pub user: Option<String>,
}

fn page_size() -> utoipa::openapi::schema::Object {
    super::schema::described(
        super::schema::unsigned_from(1),
        "Larger values are served as the largest page size (500).",
    )
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
        (status = 400, description = "A query parameter has a bad value (code invalid_query)", body = ErrorBody),
    ),
)]
pub async fn list(
    _user: AuthUser,
    state: web::Data<AppState>,
    query: web::Query<AuditQuery>,
) -> Result<web::Json<Page<AuditEntryView>>, AppError> {
    let AuditQuery { page, page_size, user } = query.into_inner();
    let invalid = |message: String| AppError::BadRequest { code: "invalid_query", message };
    if page.is_some_and(|page| page == 0 || page > MAX_PAGE) {
        return Err(invalid(format!("page must be 1 to {MAX_PAGE}")));
    }
    if page_size == Some(0) {
        return Err(invalid(format!("pageSize must be 1 to {MAX_PAGE_SIZE}")));
    }
    let user = user.filter(|name| !name.is_empty());
    let found = repo::audit::list(
        &state.db,
        user.as_deref(),
        page.unwrap_or(1),
        page_size.unwrap_or(DEFAULT_PAGE_SIZE).min(MAX_PAGE_SIZE),
    )
    .await?;
    Ok(web::Json(found.map(AuditEntryView::from)))
}
