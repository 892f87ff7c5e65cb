//! HTTP handlers: extract, call, map. No SQL and no FFmpeg here.
//!
//! Every endpoint is declared once, in `table()`: its method, path, who may call it and its
//! handler. `routes()` registers that table, and the integration tests read it through
//! `endpoints()` to check that each endpoint is documented in /openapi.json and refuses
//! requests without a token unless it is public.

pub mod actions;
pub mod api_keys;
pub mod app;
pub mod audit;
pub mod auth;
pub mod body;
pub mod cluster;
pub mod coalesce;
pub mod connections;
pub mod encoders;
pub mod endpoint;
pub mod forecast;
pub mod forward;
pub mod guard;
pub mod headers;
pub mod health;
pub mod insights;
pub mod integrations;
pub mod job_plan;
pub mod jobs;
pub mod libraries;
pub mod library_health;
pub mod library_places;
pub mod license;
pub mod login_limit;
pub mod metrics;
pub mod nodes;
pub mod notifications;
pub mod openapi;
pub mod password;
pub mod prefix;
pub mod schedule;
pub mod schema;
pub mod settings;
pub mod state;
pub mod stats;
pub mod transfer;
pub mod ui;
pub mod users;
pub mod views;
pub mod ws;

use actix_web::http::Method;
use actix_web::middleware::from_fn;
use actix_web::{web, FromRequest, Handler, HttpRequest, HttpResponse, Responder, Route};

pub use self::endpoint::{Access, Endpoint, RouteTable};
use crate::domain::access::{Reach, UserRole};
use crate::error::AppError;

fn endpoint<F, Args>(
    method: Method,
    path: &'static str,
    access: Access,
    role: UserRole,
    reach: Reach,
    handler: F,
) -> (Endpoint, Route)
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    (
        Endpoint { method: method.clone(), path, access, role, reach, websocket: false, integration: false },
        web::method(method).to(handler),
    )
}

/// An integration endpoint (see `Endpoint::integration`).
fn integration<F, Args>(method: Method, path: &'static str, role: UserRole, handler: F) -> (Endpoint, Route)
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    let (endpoint, route) = endpoint(method, path, Access::Token, role, Reach::Webhook, handler);
    (Endpoint { integration: true, ..endpoint }, route)
}

/// A WebSocket endpoint (see `Endpoint::websocket`).
fn websocket<F, Args>(path: &'static str, handler: F) -> (Endpoint, Route)
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    let (endpoint, route) = endpoint(Method::GET, path, Access::Token, UserRole::Viewer, Reach::Reads, handler);
    (Endpoint { websocket: true, ..endpoint }, route)
}

fn table() -> Vec<(Endpoint, Route)> {
    use Access::{Public, Token};
    use Reach::{Actions, Administration, JobReads, Reads};
    use UserRole::{Admin, Operator, Viewer};
    vec![
        endpoint(Method::GET, "/healthz", Public, Viewer, Reads, health::healthz),
        endpoint(Method::POST, "/auth/login", Public, Viewer, Reads, auth::login),
        endpoint(Method::POST, "/auth/refresh", Token, Viewer, Administration, auth::refresh),
        endpoint(Method::POST, "/auth/logout", Token, Viewer, Administration, auth::logout),
        endpoint(Method::GET, "/auth/me", Token, Viewer, Reads, auth::me),
        endpoint(Method::PUT, "/auth/password", Token, Viewer, Administration, auth::change_password),
        endpoint(Method::GET, "/openapi.json", Token, Viewer, Reads, openapi::document),
        endpoint(Method::GET, "/libraries", Token, Viewer, Reads, libraries::list),
        endpoint(Method::POST, "/libraries", Token, Admin, Administration, libraries::create),
        endpoint(Method::GET, "/libraries/{id}", Token, Viewer, Reads, libraries::get),
        endpoint(Method::PUT, "/libraries/{id}", Token, Admin, Administration, libraries::update),
        endpoint(Method::DELETE, "/libraries/{id}", Token, Admin, Administration, libraries::delete),
        endpoint(Method::GET, "/encoders", Token, Viewer, Reads, encoders::list),
        endpoint(Method::GET, "/settings", Token, Admin, Administration, settings::get),
        endpoint(Method::PUT, "/settings", Token, Admin, Administration, settings::update),
        endpoint(Method::GET, "/license", Token, Viewer, Administration, license::get),
        endpoint(Method::PUT, "/license", Token, Admin, Administration, license::install),
        endpoint(Method::DELETE, "/license", Token, Admin, Administration, license::remove),
        endpoint(Method::POST, "/license/trial", Token, Admin, Administration, license::start_trial),
        endpoint(Method::GET, "/audit", Token, Admin, Administration, audit::list),
        endpoint(Method::GET, "/api-keys", Token, Admin, Administration, api_keys::list),
        endpoint(Method::POST, "/api-keys", Token, Admin, Administration, api_keys::create),
        endpoint(Method::DELETE, "/api-keys/{id}", Token, Admin, Administration, api_keys::delete),
        endpoint(Method::GET, "/notifications", Token, Admin, Administration, notifications::list),
        endpoint(Method::POST, "/notifications", Token, Admin, Administration, notifications::create),
        endpoint(Method::GET, "/notifications/{id}", Token, Admin, Administration, notifications::get),
        endpoint(Method::PUT, "/notifications/{id}", Token, Admin, Administration, notifications::update),
        endpoint(Method::DELETE, "/notifications/{id}", Token, Admin, Administration, notifications::delete),
        endpoint(Method::POST, "/notifications/{id}/test", Token, Admin, Administration, notifications::test),
        endpoint(Method::GET, "/connections", Token, Admin, Administration, connections::list),
        endpoint(Method::POST, "/connections", Token, Admin, Administration, connections::create),
        endpoint(Method::GET, "/connections/{id}", Token, Admin, Administration, connections::get),
        endpoint(Method::PUT, "/connections/{id}", Token, Admin, Administration, connections::update),
        endpoint(Method::DELETE, "/connections/{id}", Token, Admin, Administration, connections::delete),
        endpoint(Method::POST, "/connections/{id}/test", Token, Admin, Administration, connections::test),
        endpoint(Method::GET, "/users", Token, Admin, Administration, users::list),
        endpoint(Method::POST, "/users", Token, Admin, Administration, users::create),
        endpoint(Method::PUT, "/users/{username}/password", Token, Admin, Administration, users::set_password),
        endpoint(Method::PUT, "/users/{username}/role", Token, Admin, Administration, users::set_role),
        endpoint(Method::DELETE, "/users/{username}", Token, Admin, Administration, users::delete),
        endpoint(Method::GET, "/nodes", Token, Viewer, Administration, nodes::list),
        endpoint(Method::POST, "/nodes/{id}/revoke", Token, Admin, Administration, nodes::revoke),
        endpoint(Method::DELETE, "/nodes/{id}", Token, Admin, Administration, nodes::remove),
        endpoint(Method::GET, "/nodes/{id}/schedule", Token, Viewer, Administration, schedule::get_node),
        endpoint(Method::PUT, "/nodes/{id}/schedule", Token, Admin, Administration, schedule::set_node),
        endpoint(Method::DELETE, "/nodes/{id}/schedule", Token, Admin, Administration, schedule::clear_node),
        endpoint(Method::GET, "/schedule", Token, Viewer, Reads, schedule::get_default),
        endpoint(Method::PUT, "/schedule", Token, Admin, Administration, schedule::set_default),
        endpoint(Method::GET, "/jobs", Token, Viewer, JobReads, jobs::list),
        endpoint(Method::GET, "/jobs/{id}", Token, Viewer, JobReads, jobs::get),
        endpoint(Method::GET, "/jobs/{id}/plan", Token, Viewer, Reads, job_plan::get),
        endpoint(Method::POST, "/jobs/{id}/pause", Token, Operator, Actions, actions::pause),
        endpoint(Method::POST, "/jobs/{id}/resume", Token, Operator, Actions, actions::resume),
        endpoint(Method::POST, "/jobs/{id}/retry", Token, Operator, Actions, actions::retry),
        endpoint(Method::POST, "/jobs/{id}/cancel", Token, Operator, Actions, actions::cancel),
        endpoint(Method::POST, "/jobs/{id}/force", Token, Operator, Actions, actions::force),
        endpoint(Method::POST, "/jobs/{id}/priority", Token, Operator, Actions, actions::priority),
        integration(Method::POST, "/integrations/arr", Operator, integrations::arr),
        endpoint(Method::GET, "/settings/arr", Token, Admin, Administration, integrations::get_arr_settings),
        endpoint(Method::PUT, "/settings/arr", Token, Admin, Administration, integrations::set_arr_settings),
        endpoint(Method::POST, "/queue/pause-all", Token, Operator, Actions, actions::pause_all),
        endpoint(Method::POST, "/queue/resume-all", Token, Operator, Actions, actions::resume_all),
        endpoint(Method::POST, "/libraries/{id}/scan", Token, Operator, Actions, actions::scan),
        endpoint(Method::POST, "/libraries/{id}/forecast", Token, Operator, Actions, forecast::start),
        endpoint(Method::GET, "/libraries/{id}/forecast", Token, Viewer, Reads, forecast::get),
        endpoint(Method::DELETE, "/libraries/{id}/forecast", Token, Operator, Actions, forecast::cancel),
        endpoint(Method::POST, "/libraries/{id}/health", Token, Operator, Actions, library_health::start),
        endpoint(Method::GET, "/libraries/{id}/health", Token, Viewer, Reads, library_health::get),
        endpoint(Method::DELETE, "/libraries/{id}/health", Token, Operator, Actions, library_health::cancel),
        endpoint(
            Method::POST,
            "/libraries/{id}/health/files/{fileId}/recheck",
            Token,
            Operator,
            Actions,
            library_health::recheck,
        ),
        endpoint(
            Method::POST,
            "/libraries/{id}/health/files/{fileId}/ignore",
            Token,
            Operator,
            Actions,
            library_health::ignore,
        ),
        endpoint(
            Method::POST,
            "/libraries/{id}/health/files/{fileId}/regrab",
            Token,
            Operator,
            Actions,
            library_health::regrab,
        ),
        websocket("/ws", ws::connect),
        endpoint(Method::GET, "/queue/stats", Token, Viewer, Reads, stats::queue),
        endpoint(Method::GET, "/system/dashboard", Token, Viewer, Reads, stats::dashboard),
        endpoint(Method::GET, "/system/dashboard/health", Token, Viewer, Reads, stats::health),
        endpoint(Method::GET, "/health/recheck", Token, Viewer, Reads, health::last_recheck),
        endpoint(Method::POST, "/health/recheck", Token, Operator, Actions, health::recheck),
        endpoint(Method::GET, "/insights/stats", Token, Viewer, Reads, insights::overview),
        endpoint(Method::GET, "/insights/savings", Token, Viewer, Reads, insights::savings),
        endpoint(Method::GET, "/insights/nodes", Token, Viewer, Reads, insights::nodes),
        endpoint(Method::GET, "/insights/codecs", Token, Viewer, Reads, insights::codecs),
        endpoint(Method::GET, "/insights/failures", Token, Viewer, Reads, insights::failures),
        endpoint(Method::GET, "/statistics", Token, Viewer, Reads, insights::statistics),
        endpoint(Method::GET, "/metrics", Token, Viewer, Reads, metrics::metrics),
    ]
}

/// Every endpoint `routes()` registers (under each prefix).
pub fn endpoints() -> Vec<Endpoint> {
    table().into_iter().map(|(endpoint, _)| endpoint).collect()
}

/// The route table, built once (what `routes` registers as app data).
pub fn route_table() -> &'static RouteTable {
    static TABLE: std::sync::LazyLock<RouteTable> = std::sync::LazyLock::new(|| RouteTable::new(endpoints()));
    &TABLE
}

/// The least role that may call `method` on `pattern` (the route's pattern as registered,
/// with or without the /api prefix); `None` for no such endpoint.
pub fn required_role(method: &Method, pattern: &str) -> Option<UserRole> {
    route_table().find(method, pattern).map(|e| e.role)
}

/// The OpenAPI document of the route table, built the first time it is asked for
/// (`condense openapi` prints it, `GET /openapi.json` serves it), not at start-up: built, it
/// holds about 3 MiB that a node nobody asks for it never needs (BENCHMARKS.md, Memory).
static API: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| openapi::build(&endpoints()));

/// The OpenAPI document (see `API`).
pub fn api() -> &'static serde_json::Value {
    &API
}

/// Every API route; mounted at the root and under /api.
pub fn routes(cfg: &mut web::ServiceConfig) {
    // What the token middleware, the audit log and GET /openapi.json read of the table.
    cfg.app_data(web::Data::new(route_table().clone()));
    cfg.app_data(web::Data::new(openapi::ApiDocument(&API)));
    // One resource per path, so that a known path with another method is a 405.
    let mut resources: Vec<(&'static str, Access, bool, bool, Vec<Route>)> = Vec::new();
    for (endpoint, route) in table() {
        match resources.iter_mut().find(|(path, ..)| *path == endpoint.path) {
            Some((_, access, websocket, integration, routes)) => {
                // A path shared by public and protected methods is protected as a whole, and
                // takes query tokens or keys only if every method on it does.
                if endpoint.access == Access::Token {
                    *access = Access::Token;
                }
                *websocket &= endpoint.websocket;
                *integration &= endpoint.integration;
                routes.push(route);
            }
            None => {
                resources.push((endpoint.path, endpoint.access, endpoint.websocket, endpoint.integration, vec![route]))
            }
        }
    }
    for (path, access, websocket, integration, routes) in resources {
        let allow = allowed_methods(path);
        let refuse = web::to(move |req: HttpRequest| method_not_allowed(req, allow.clone()));
        let resource = routes.into_iter().fold(web::resource(path).default_service(refuse), actix_web::Resource::route);
        // The token is checked before anything else about the request (path, query, body),
        // so a caller without one learns nothing but 401. Handlers also take `AuthUser`,
        // which reads what this middleware found.
        match (access, websocket, integration) {
            (Access::Public, ..) => cfg.service(resource),
            (Access::Token, true, _) => cfg.service(resource.wrap(from_fn(guard::require_token_or_query))),
            (Access::Token, false, true) => cfg.service(resource.wrap(from_fn(guard::require_token_or_key_query))),
            (Access::Token, false, false) => cfg.service(resource.wrap(from_fn(guard::require_token))),
        };
    }
}

pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, AppError> {
    Err(AppError::NotFound(format!("no route for {} {}", req.method(), prefix::asked_path(&req))))
}

/// The methods the route table serves on `path`, as an `Allow` header's value.
fn allowed_methods(path: &str) -> String {
    endpoints().iter().filter(|e| e.path == path).map(|e| e.method.as_str()).collect::<Vec<_>>().join(", ")
}

/// A known path with a method it does not serve: 405 with the error body and `Allow`, which
/// a 405 must carry.
pub async fn method_not_allowed(req: HttpRequest, allow: String) -> HttpResponse {
    let refused = AppError::MethodNotAllowed(format!(
        "{} is not allowed on {}; allowed: {allow}",
        req.method(),
        prefix::asked_path(&req)
    ));
    let mut response = actix_web::ResponseError::error_response(&refused);
    if let Ok(value) = actix_web::http::header::HeaderValue::from_str(&allow) {
        response.headers_mut().insert(actix_web::http::header::ALLOW, value);
    }
    response
}

/// JSON bodies: 1 MiB at most; every decoding failure is a client error with the error body.
pub fn json_config() -> web::JsonConfig {
    json_config_up_to(1 << 20)
}

/// JSON bodies of up to `limit` bytes, as `json_config` (a route whose body grows with a
/// file, such as a node's manifest of every segment).
pub fn json_config_up_to(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default().limit(limit).error_handler(|err, _| AppError::from(err).into())
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default()
        .error_handler(|err, _| AppError::BadRequest { code: "invalid_query", message: err.to_string() }.into())
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|err, _| AppError::NotFound(format!("no such resource: {err}")).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::access::KeyScope;

    #[test]
    fn only_health_and_login_are_public() {
        let public: Vec<_> = endpoints()
            .into_iter()
            .filter(|e| e.access == Access::Public)
            .map(|e| format!("{} {}", e.method, e.path))
            .collect();
        assert_eq!(public, ["GET /healthz", "POST /auth/login"]);
    }

    #[test]
    fn viewers_read_operators_act_on_jobs_and_administrators_change_the_rest() {
        for e in endpoints().into_iter().filter(|e| e.access == Access::Token) {
            let what = format!("{} {}", e.method, e.path);
            let expected = if e.method == Method::GET {
                // The settings carry the cluster token; users and the audit log are
                // administration.
                // Notification targets hold their receivers' URLs (a Discord webhook's
                // token among them); connections the URLs of the media stack.
                if [
                    "/settings",
                    "/settings/arr",
                    "/users",
                    "/audit",
                    "/api-keys",
                    "/notifications",
                    "/notifications/{id}",
                    "/connections",
                    "/connections/{id}",
                ]
                .contains(&e.path)
                {
                    UserRole::Admin
                } else {
                    UserRole::Viewer
                }
            } else if e.path.starts_with("/auth/") {
                UserRole::Viewer
            } else if e.path.starts_with("/jobs/{id}/")
                || e.path.starts_with("/queue/")
                || e.path.ends_with("/scan")
                || e.path.ends_with("/forecast")
                || e.path.starts_with("/libraries/{id}/health")
                || e.path.starts_with("/integrations/")
                || e.path == "/health/recheck"
            {
                UserRole::Operator
            } else {
                UserRole::Admin
            };
            assert_eq!(e.role, expected, "{what}");
        }
    }

    /// Every route against every scope, from a rule written apart from the table: keys
    /// never reach administration unless `admin`; `integration` reaches the webhook and job
    /// reads only; `read` every other read; `operate` the actions a user of that role may take.
    #[test]
    fn every_route_answers_every_key_scope_as_the_rule_says() {
        let administration = |e: &Endpoint| {
            e.role == UserRole::Admin
                || (e.path.starts_with("/auth/") && e.path != "/auth/me")
                || e.path.starts_with("/nodes")
                || e.path == "/license"
        };
        for e in endpoints().into_iter().filter(|e| e.access == Access::Token) {
            let is_job_read = e.method == Method::GET && (e.path == "/jobs" || e.path == "/jobs/{id}");
            let is_webhook = e.path == "/integrations/arr";
            let is_read = e.method == Method::GET && !administration(&e);
            for scope in KeyScope::ALL {
                let expected = match scope {
                    KeyScope::Admin => true,
                    KeyScope::Integration => is_job_read || is_webhook,
                    KeyScope::Read => is_read,
                    KeyScope::Operate => !administration(&e),
                };
                let reached = scope.reaches(e.reach);
                assert_eq!(reached, expected, "{} {} with a {scope} key", e.method, e.path);
                // And never past the role of whoever made the key.
                for role in UserRole::ALL {
                    assert_eq!(e.allows_key(*scope, *role), expected && role.allows(e.role), "{} {}", e.method, e.path);
                }
            }
        }
    }

    #[test]
    fn every_change_is_audited_and_nothing_that_only_reads() {
        let audited: Vec<String> =
            endpoints().into_iter().filter(Endpoint::audited).map(|e| format!("{} {}", e.method, e.path)).collect();
        // The actions the audit must cover, by name: job actions, the queue, settings, users,
        // licence keys, libraries and their scans, logout.
        for change in [
            "POST /jobs/{id}/pause",
            "POST /jobs/{id}/resume",
            "POST /jobs/{id}/retry",
            "POST /jobs/{id}/cancel",
            "POST /jobs/{id}/force",
            "POST /queue/pause-all",
            "POST /queue/resume-all",
            "PUT /settings",
            "POST /users",
            "PUT /users/{username}/password",
            "PUT /users/{username}/role",
            "DELETE /users/{username}",
            "PUT /license",
            "DELETE /license",
            "POST /libraries",
            "PUT /libraries/{id}",
            "DELETE /libraries/{id}",
            "POST /libraries/{id}/scan",
            "POST /libraries/{id}/forecast",
            "DELETE /libraries/{id}/forecast",
            "POST /libraries/{id}/health",
            "DELETE /libraries/{id}/health",
            "POST /libraries/{id}/health/files/{fileId}/ignore",
            "POST /libraries/{id}/health/files/{fileId}/regrab",
            "POST /auth/logout",
            "PUT /auth/password",
            "POST /nodes/{id}/revoke",
            "DELETE /nodes/{id}",
            "POST /api-keys",
            "DELETE /api-keys/{id}",
            "POST /jobs/{id}/priority",
            "POST /integrations/arr",
            "PUT /settings/arr",
            "POST /notifications",
            "PUT /notifications/{id}",
            "DELETE /notifications/{id}",
            "POST /notifications/{id}/test",
            "POST /connections",
            "PUT /connections/{id}",
            "DELETE /connections/{id}",
            "POST /connections/{id}/test",
        ] {
            assert!(audited.contains(&change.to_string()), "{change} is not audited");
        }
        for e in endpoints() {
            if e.method == Method::GET || e.access == Access::Public || e.path == "/auth/refresh" {
                assert!(!e.audited(), "{} {} is audited", e.method, e.path);
            } else {
                assert!(e.audited(), "{} {} is not audited", e.method, e.path);
            }
        }
    }

    #[test]
    fn only_the_websocket_feed_takes_a_token_in_the_query() {
        let websocket: Vec<_> = endpoints().into_iter().filter(|e| e.websocket).map(|e| e.path).collect();
        assert_eq!(websocket, ["/ws"]);
    }

    #[test]
    fn only_the_integration_webhooks_take_an_api_key_in_the_query() {
        let integrations: Vec<_> = endpoints().into_iter().filter(|e| e.integration).map(|e| e.path).collect();
        assert_eq!(integrations, ["/integrations/arr"]);
    }

    #[test]
    fn each_method_and_path_is_declared_once_and_no_path_mixes_access() {
        let all = endpoints();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert!(a.method != b.method || a.path != b.path, "{} {} twice", a.method, a.path);
                assert!(a.path != b.path || a.access == b.access, "{} mixes public and token methods", a.path);
            }
        }
    }
}
