//! What the route table says of one endpoint (method, path, who may call it, what it is to
//! an API key), and the table as the request sees it: `http::routes` registers a
//! `RouteTable` as app data, so the token middleware and the audit log read the route's
//! entry from the request instead of naming the table (which names them).

use actix_web::http::Method;

use crate::domain::access::{KeyScope, Reach, UserRole};

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone: only the liveness check and login.
    Public,
    /// A valid API token (`Authorization: Bearer …`).
    Token,
}

/// One endpoint as registered: method, path (actix pattern, e.g. `/jobs/{id}`), access,
/// the least role that may call it and what it is to an API key (`Token` endpoints; both
/// checked by `guard::require_token`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
    pub role: UserRole,
    /// Which key scopes reach it (`KeyScope::reaches`); a key needs its creator's role too.
    pub reach: Reach,
    /// A WebSocket route: the token may come in the `token` query parameter, since browsers
    /// cannot set headers on the handshake. Everywhere else only the header counts: query
    /// strings are written to proxies' and servers' logs.
    pub websocket: bool,
    /// An integration endpoint (a webhook another product calls): an API key may also come
    /// in the `apikey` query parameter, since some senders cannot set headers.
    pub integration: bool,
}

impl Endpoint {
    /// Whether calls are written to the audit log (`http::audit`): every protected method
    /// that may change something, which is every one but GET, except a token refresh (it
    /// changes nothing, and a dashboard left open makes one every few hours).
    pub fn audited(&self) -> bool {
        self.access == Access::Token && self.method != Method::GET && self.path != "/auth/refresh"
    }

    /// Whether a key of `scope` made by a user of `role` may call this endpoint.
    pub fn allows_key(&self, scope: KeyScope, role: UserRole) -> bool {
        role.allows(self.role) && scope.reaches(self.reach)
    }
}

/// Every endpoint, as `http::routes` registered them (app data of both listeners).
#[derive(Debug, Clone)]
pub struct RouteTable(Vec<Endpoint>);

impl RouteTable {
    pub fn new(endpoints: Vec<Endpoint>) -> RouteTable {
        RouteTable(endpoints)
    }

    /// The endpoint `method` on `pattern` reaches (the route's pattern as registered, with
    /// or without the /api prefix); `None` for no such endpoint.
    pub fn find(&self, method: &Method, pattern: &str) -> Option<&Endpoint> {
        let path = pattern.strip_prefix("/api").filter(|rest| rest.starts_with('/')).unwrap_or(pattern);
        self.0.iter().find(|e| e.method == *method && e.path == path)
    }
}
