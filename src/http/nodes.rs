//! Nodes of the cluster, as the dashboard shows them.

use actix_web::web;

use super::auth::AuthUser;
use super::views::{self, NodeView};
use crate::app::AppState;
use crate::error::AppError;
use crate::repo;

pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<NodeView>>, AppError> {
    let nodes = repo::nodes::list(&state.db).await?;
    Ok(web::Json(views::nodes(&nodes)))
}
