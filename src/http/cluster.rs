//! The cluster link endpoint (`GET /cluster/link`, API listener): a linked node presents
//! CLUSTER_TOKEN as a bearer token and upgrades to the link.

use actix_web::{web, HttpRequest, HttpResponse};
use actix_web_actors::ws;

use crate::actors::cluster::RemoteNode;
use crate::error::AppError;
use crate::http::app::AppState;

/// Compares without stopping at the first difference, so timing says nothing of the token.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub async fn link(
    req: HttpRequest,
    stream: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, actix_web::Error> {
    let Some(expected) = state.cluster_token.as_deref() else {
        return Err(AppError::Forbidden("this main node accepts no linked nodes: set CLUSTER_TOKEN".into()).into());
    };
    let presented = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !same(presented.as_bytes(), expected.as_bytes()) {
        return Err(AppError::Unauthorized("a linked node must present the main node's CLUSTER_TOKEN".into()).into());
    }
    let node = RemoteNode::new(
        state.db.clone(),
        state.runtime.lifecycle.clone(),
        state.runtime.scheduler.clone(),
        state.cluster.clone(),
    );
    ws::WsResponseBuilder::new(node, &req, stream).frame_size(64 << 20).start()
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_compare_exactly() {
        assert!(super::same(b"abc", b"abc"));
        assert!(!super::same(b"abc", b"abd"));
        assert!(!super::same(b"abc", b"abcd"));
    }
}
