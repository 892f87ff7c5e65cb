//! The API listener's unprefixed paths, served by the one `/api` scope: `/jobs` is answered
//! as `/api/jobs`, and the path as asked is kept for what the caller reads back.
//!
//! Each HTTP worker builds its own router, and every route costs memory in each (about
//! 1.5 MB for the whole table, measured with `scripts/idle-memory.sh`): the API listener
//! registered the table twice, at its root and under `/api`. It now registers it once and
//! rewrites the path before routing (`App::wrap` runs before the router), as actix-web's own
//! `NormalizePath` does.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::uri::{PathAndQuery, Uri};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest};

/// The path a rewritten request asked for (request extension).
#[derive(Debug, Clone)]
struct AskedPath(String);

/// The path as the caller asked it, before `under_api` put it under `/api`: what error
/// messages and the audit log show.
pub fn asked_path(req: &HttpRequest) -> String {
    req.extensions().get::<AskedPath>().map_or_else(|| req.path().to_owned(), |asked| asked.0.clone())
}

/// Middleware of both listeners; on the API listener (`api_listener`), a path outside `/api`
/// and the listener's own root routes (`/`, the WebSocket; `/cluster/`, the nodes' link and
/// transfers) goes under `/api`. The web interface listener serves the dashboard at its root.
pub async fn under_api<B: MessageBody>(
    api_listener: bool,
    mut req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<B>, actix_web::Error> {
    if !api_listener {
        return next.call(req).await;
    }
    // Decided on the path the router matches (`match_info`, percent-decoded as it decodes
    // it), so `/%61pi/jobs` stays the /api route it was before the rewrite existed.
    if let Some(uri) = prefixed(req.uri(), req.match_info().as_str()) {
        let asked = req.path().to_owned();
        req.extensions_mut().insert(AskedPath(asked));
        req.match_info_mut().get_mut().update(&uri);
        req.head_mut().uri = uri;
    }
    next.call(req).await
}

/// `uri` under `/api`, or `None` when it stays as it is; `routed` is its path as the router
/// reads it.
fn prefixed(uri: &Uri, routed: &str) -> Option<Uri> {
    let kept = routed.is_empty()
        || routed == "/"
        || routed == "/api"
        || routed.starts_with("/api/")
        || routed.starts_with("/cluster/");
    if kept {
        return None;
    }
    let path = uri.path();
    let rewritten = match uri.query() {
        Some(query) => format!("/api{path}?{query}"),
        None => format!("/api{path}"),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(PathAndQuery::try_from(rewritten).ok()?);
    Uri::from_parts(parts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(uri: &str) -> Option<String> {
        let uri = uri.parse::<Uri>().unwrap();
        // The router's path: percent-decoded as actix-router decodes it.
        let routed = actix_web::dev::Url::new(uri.clone()).path().to_owned();
        prefixed(&uri, &routed).map(|uri| uri.to_string())
    }

    #[test]
    fn api_paths_go_under_api_with_their_query() {
        assert_eq!(rewritten("/jobs").as_deref(), Some("/api/jobs"));
        assert_eq!(rewritten("/jobs?status=QUEUED&page=2").as_deref(), Some("/api/jobs?status=QUEUED&page=2"));
        assert_eq!(rewritten("/libraries/3/scan").as_deref(), Some("/api/libraries/3/scan"));
        assert_eq!(rewritten("/apis").as_deref(), Some("/api/apis"));
        assert_eq!(rewritten("/no%20such").as_deref(), Some("/api/no%20such"));
    }

    #[test]
    fn the_root_api_and_cluster_paths_stay() {
        for uri in
            ["/", "/?token=x", "/api", "/api/jobs", "/api/", "/cluster/link", "/cluster/jobs/1/source", "/%61pi/jobs"]
        {
            assert_eq!(rewritten(uri), None, "{uri}");
        }
    }
}
