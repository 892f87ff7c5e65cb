//! HTTP handlers: extract, call, map. No SQL and no FFmpeg here.
//!
//! Every endpoint is declared once, in `table()`: its method, path, who may call it and its
//! handler. `routes()` registers that table, and the integration tests read it through
//! `endpoints()` to check that each endpoint is documented in /openapi.json and refuses
//! requests without a token unless it is public.

pub mod actions;
pub mod app;
pub mod auth;
pub mod cluster;
pub mod encoders;
pub mod forward;
pub mod health;
pub mod insights;
pub mod jobs;
pub mod libraries;
pub mod license;
pub mod login_limit;
pub mod metrics;
pub mod nodes;
pub mod openapi;
pub mod settings;
pub mod stats;
pub mod ui;
pub mod users;
pub mod views;
pub mod ws;

use actix_web::http::Method;
use actix_web::middleware::from_fn;
use actix_web::{web, FromRequest, Handler, HttpRequest, HttpResponse, Responder, Route};

use crate::error::AppError;

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone: only the liveness check and login.
    Public,
    /// A valid API token (`Authorization: Bearer …`).
    Token,
}

/// One endpoint as registered: method, path (actix pattern, e.g. `/jobs/{id}`), access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
    /// A WebSocket route: the token may come in the `token` query parameter, since browsers
    /// cannot set headers on the handshake. Everywhere else only the header counts: query
    /// strings are written to proxies' and servers' logs.
    pub websocket: bool,
}

fn endpoint<F, Args>(method: Method, path: &'static str, access: Access, handler: F) -> (Endpoint, Route)
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    (Endpoint { method: method.clone(), path, access, websocket: false }, web::method(method).to(handler))
}

/// A WebSocket endpoint (see `Endpoint::websocket`).
fn websocket<F, Args>(path: &'static str, handler: F) -> (Endpoint, Route)
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    let (endpoint, route) = endpoint(Method::GET, path, Access::Token, handler);
    (Endpoint { websocket: true, ..endpoint }, route)
}

fn table() -> Vec<(Endpoint, Route)> {
    use Access::{Public, Token};
    vec![
        endpoint(Method::GET, "/healthz", Public, health::healthz),
        endpoint(Method::POST, "/auth/login", Public, auth::login),
        endpoint(Method::POST, "/auth/refresh", Token, auth::refresh),
        endpoint(Method::POST, "/auth/logout", Token, auth::logout),
        endpoint(Method::GET, "/openapi.json", Token, openapi::document),
        endpoint(Method::GET, "/libraries", Token, libraries::list),
        endpoint(Method::POST, "/libraries", Token, libraries::create),
        endpoint(Method::GET, "/libraries/{id}", Token, libraries::get),
        endpoint(Method::PUT, "/libraries/{id}", Token, libraries::update),
        endpoint(Method::DELETE, "/libraries/{id}", Token, libraries::delete),
        endpoint(Method::GET, "/encoders", Token, encoders::list),
        endpoint(Method::GET, "/settings", Token, settings::get),
        endpoint(Method::PUT, "/settings", Token, settings::update),
        endpoint(Method::GET, "/license", Token, license::get),
        endpoint(Method::PUT, "/license", Token, license::install),
        endpoint(Method::DELETE, "/license", Token, license::remove),
        endpoint(Method::GET, "/users", Token, users::list),
        endpoint(Method::POST, "/users", Token, users::create),
        endpoint(Method::PUT, "/users/{username}/password", Token, users::set_password),
        endpoint(Method::DELETE, "/users/{username}", Token, users::delete),
        endpoint(Method::GET, "/nodes", Token, nodes::list),
        endpoint(Method::GET, "/jobs", Token, jobs::list),
        endpoint(Method::GET, "/jobs/{id}", Token, jobs::get),
        endpoint(Method::POST, "/jobs/{id}/pause", Token, actions::pause),
        endpoint(Method::POST, "/jobs/{id}/resume", Token, actions::resume),
        endpoint(Method::POST, "/jobs/{id}/retry", Token, actions::retry),
        endpoint(Method::POST, "/jobs/{id}/cancel", Token, actions::cancel),
        endpoint(Method::POST, "/jobs/{id}/force", Token, actions::force),
        endpoint(Method::POST, "/queue/pause-all", Token, actions::pause_all),
        endpoint(Method::POST, "/queue/resume-all", Token, actions::resume_all),
        endpoint(Method::POST, "/libraries/{id}/scan", Token, actions::scan),
        websocket("/ws", ws::connect),
        endpoint(Method::GET, "/queue/stats", Token, stats::queue),
        endpoint(Method::GET, "/system/dashboard", Token, stats::dashboard),
        endpoint(Method::GET, "/system/dashboard/health", Token, stats::health),
        endpoint(Method::GET, "/insights/stats", Token, insights::overview),
        endpoint(Method::GET, "/insights/savings", Token, insights::savings),
        endpoint(Method::GET, "/insights/nodes", Token, insights::nodes),
        endpoint(Method::GET, "/insights/codecs", Token, insights::codecs),
        endpoint(Method::GET, "/statistics", Token, insights::statistics),
        endpoint(Method::GET, "/metrics", Token, metrics::metrics),
    ]
}

/// Every endpoint `routes()` registers (under each prefix).
pub fn endpoints() -> Vec<Endpoint> {
    table().into_iter().map(|(endpoint, _)| endpoint).collect()
}

/// Every API route; mounted at the root and under /api.
pub fn routes(cfg: &mut web::ServiceConfig) {
    // One resource per path, so that a known path with another method is a 405.
    let mut resources: Vec<(&'static str, Access, bool, Vec<Route>)> = Vec::new();
    for (endpoint, route) in table() {
        match resources.iter_mut().find(|(path, ..)| *path == endpoint.path) {
            Some((_, access, websocket, routes)) => {
                // A path shared by public and protected methods is protected as a whole, and
                // takes query tokens only if every method on it does.
                if endpoint.access == Access::Token {
                    *access = Access::Token;
                }
                *websocket &= endpoint.websocket;
                routes.push(route);
            }
            None => resources.push((endpoint.path, endpoint.access, endpoint.websocket, vec![route])),
        }
    }
    for (path, access, websocket, routes) in resources {
        let resource = routes
            .into_iter()
            .fold(web::resource(path).default_service(web::to(method_not_allowed)), |resource, route| {
                resource.route(route)
            });
        // The token is checked before anything else about the request (path, query, body),
        // so a caller without one learns nothing but 401. Handlers also take `AuthUser`,
        // which reads what this middleware found.
        match (access, websocket) {
            (Access::Public, _) => cfg.service(resource),
            (Access::Token, false) => cfg.service(resource.wrap(from_fn(auth::require_token))),
            (Access::Token, true) => cfg.service(resource.wrap(from_fn(auth::require_token_or_query))),
        };
    }
}

pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, AppError> {
    Err(AppError::NotFound(format!("no route for {} {}", req.method(), req.path())))
}

pub async fn method_not_allowed(req: HttpRequest) -> Result<HttpResponse, AppError> {
    Err(AppError::MethodNotAllowed(format!("{} is not allowed on {}", req.method(), req.path())))
}

/// JSON bodies: 1 MiB at most; every decoding failure is a client error with the error body.
pub fn json_config() -> web::JsonConfig {
    web::JsonConfig::default().limit(1 << 20).error_handler(|err, _| AppError::from(err).into())
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
    fn only_the_websocket_feed_takes_a_token_in_the_query() {
        let websocket: Vec<_> = endpoints().into_iter().filter(|e| e.websocket).map(|e| e.path).collect();
        assert_eq!(websocket, ["/ws"]);
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
