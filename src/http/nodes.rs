//! Nodes of the cluster, as the dashboard shows them, and an administrator's revocation and
//! removal of linked nodes (`actors::cluster::revoke_node`, `remove_node`).

use actix_web::web;

use super::auth::AuthUser;
use super::views::{self, LibrarySight, NodeView};
use crate::actors::cluster::{remove_node, revoke_node, NodeChange};
use crate::domain::node::{sees_library, NodeRole};
use crate::domain::placement::TRANSFER_FLOW;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;

/// Nodes of the cluster
#[utoipa::path(
    get,
    operation_id = "list_nodes",
    path = "/nodes",
    tag = "nodes",
    responses(
        (status = 200, description = "Nodes, oldest first", body = Vec<NodeView>),
    ),
)]
pub async fn list(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<NodeView>>, AppError> {
    let nodes = repo::nodes::list(&state.db).await?;
    let mut listed = views::nodes(&nodes);
    if user.role != crate::domain::access::UserRole::Admin {
        // A node's identity is half of its credential: administrators' business only.
        for node in &mut listed {
            node.identity = None;
        }
    }
    super::schedule::fill_windows(&state, &mut listed).await?;
    fill_sight(&state, &mut listed).await?;
    Ok(web::Json(listed))
}

/// Fills in which libraries each node sees: the main node every one, a linked node as its
/// link last reported (`domain::node::sees_library`), and a node without a link none known;
/// and, for a linked node, whether it takes the others by transfer, with its WORK_DIR's room.
pub async fn fill_sight(state: &AppState, nodes: &mut [NodeView]) -> Result<(), AppError> {
    let libraries = repo::libraries::list(&state.db).await?;
    for node in nodes.iter_mut() {
        let sight = state.cluster.links.sight_of(node.id);
        let main = node.role == NodeRole::Main.as_str();
        if let (Some(sight), false) = (&sight, main) {
            node.shared_storage = sight.shared_storage;
            // As the scheduler weighs it: the main node's own build must carry the flow.
            node.transfer = TRANSFER_FLOW && sight.transfer;
            node.work_dir_free_bytes = sight.work_dir_free_bytes.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
        }
        node.libraries = libraries
            .iter()
            .map(|library| {
                let roots = repo::libraries::paths_of(library);
                let sees = match (&sight, main) {
                    (_, true) => sees_library(&roots, None, &[]),
                    (Some(sight), false) => sees_library(&roots, sight.checked.as_deref(), &sight.missing),
                    (None, false) => None,
                };
                LibrarySight { library_id: library.id, name: library.name.clone(), sees }
            })
            .collect();
    }
    Ok(())
}

/// What a revocation or removal did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeChanged {
    /// Jobs of the node that went back to the queue.
    pub requeued: u64,
}

fn answer(id: i32, change: NodeChange) -> Result<web::Json<NodeChanged>, AppError> {
    match change {
        NodeChange::Done { requeued } => Ok(web::Json(NodeChanged { requeued })),
        NodeChange::NotFound => Err(AppError::NotFound(format!("no linked node {id}"))),
        NodeChange::Refused(reason) => Err(AppError::conflict("conflict", reason)),
    }
}

/// Revoke a linked node
#[utoipa::path(
    post,
    operation_id = "revoke_node",
    path = "/nodes/{id}/revoke",
    tag = "nodes",
    params(("id" = i32, Path, description = "The node's id")),
    responses(
        (status = 200, description = "Revoked: its credential is refused from now on, its link is closed and its running jobs are back in the queue", body = NodeChanged),
    ),
)]
pub async fn revoke(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<NodeChanged>, AppError> {
    let id = id.into_inner();
    let change = revoke_node(&state.runtime.lifecycle, &state.cluster.links, id)
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?;
    tracing::warn!(user = %user.username, node_id = id, ?change, "node revocation");
    answer(id, change)
}

/// Remove a linked node
#[utoipa::path(
    delete,
    operation_id = "remove_node",
    path = "/nodes/{id}",
    tag = "nodes",
    params(("id" = i32, Path, description = "The node's id")),
    responses(
        (status = 200, description = "Removed: its name and identity may enroll again (with CLUSTER_TOKEN)", body = NodeChanged),
        (status = 409, description = "The node is linked now (revoke or stop it first), or it is the main node (code conflict)", body = ErrorBody),
    ),
)]
pub async fn remove(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<NodeChanged>, AppError> {
    let id = id.into_inner();
    let change = remove_node(&state.runtime.lifecycle, &state.cluster.links, id)
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?;
    tracing::warn!(user = %user.username, node_id = id, ?change, "node removal");
    answer(id, change)
}
