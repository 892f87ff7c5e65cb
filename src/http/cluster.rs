//! The cluster link endpoint (`GET /cluster/link`, API listener). A linked node presents its
//! own credential, `Bearer <identity>.<credential>`, given at its enrollment and kept in its
//! DATA_DIR; CLUSTER_TOKEN only enrolls a node (its first link, or one from before
//! credentials). A revoked node is refused here, before the upgrade.

use actix_web::{web, HttpRequest, HttpResponse};
use actix_web_actors::ws;

use crate::actors::cluster::{LinkAuth, RemoteNode};
use crate::error::AppError;
use crate::http::state::AppState;
use crate::repo;
use crate::security::{hash_secret, same_secret};

const PRESENT: &str =
    "a linked node must present its credential (DATA_DIR/node-credential) or, to enroll, the main node's CLUSTER_TOKEN";

/// Who the bearer token says is linking.
async fn authenticate(state: &AppState, presented: &str) -> Result<LinkAuth, AppError> {
    if let Some(token) = state.cluster_token.as_deref() {
        if same_secret(presented.as_bytes(), token.as_bytes()) {
            return Ok(LinkAuth::Enrolling);
        }
    }
    let Some((identity, credential)) = presented.split_once('.') else {
        return Err(AppError::Unauthorized(PRESENT.into()));
    };
    let node = repo::nodes::find_by_identity(&state.db, identity).await?;
    // The same work whether or not the identity is known, so timing does not tell.
    let stored = node.as_ref().and_then(|n| n.credential_hash.clone()).unwrap_or_default();
    let matches = same_secret(hash_secret(credential).as_bytes(), stored.as_bytes());
    match node {
        Some(node) if matches && node.revoked => Err(AppError::Forbidden(format!(
            "node {} ({:?}) was revoked; an administrator must remove it before it can enroll again",
            node.id, node.name
        ))),
        Some(node) if matches => Ok(LinkAuth::Node { id: node.id, identity: identity.to_string() }),
        _ => Err(AppError::Unauthorized(PRESENT.into())),
    }
}

/// The bearer token a request presents ("" when none).
fn presented(req: &HttpRequest) -> &str {
    req.headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .trim()
}

/// The enrolled node a request comes from, by its own credential (the cluster token only
/// enrolls, it names no node).
pub(crate) async fn enrolled_node(state: &AppState, req: &HttpRequest) -> Result<i32, AppError> {
    match authenticate(state, presented(req)).await? {
        LinkAuth::Node { id, .. } => Ok(id),
        LinkAuth::Enrolling => Err(AppError::Forbidden(
            "the cluster token only enrolls a node; present the node's own credential (DATA_DIR/node-credential)"
                .into(),
        )),
    }
}

pub async fn link(
    req: HttpRequest,
    stream: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, actix_web::Error> {
    let auth = authenticate(&state, presented(&req)).await?;
    let node = RemoteNode::new(
        state.db.clone(),
        state.runtime.lifecycle.clone(),
        state.runtime.scheduler.clone(),
        state.cluster.clone(),
        auth,
    );
    ws::WsResponseBuilder::new(node, &req, stream).frame_size(64 << 20).start()
}
