//! Nodes of the cluster, as the dashboard shows them.

use actix_web::web;

use super::auth::AuthUser;
use super::views::{self, NodeView};
use crate::error::AppError;
use crate::http::app::AppState;
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
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<NodeView>>, AppError> {
    let nodes = repo::nodes::list(&state.db).await?;
    Ok(web::Json(views::nodes(&nodes)))
}
