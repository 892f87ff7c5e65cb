//! The application: shared state and the actix-web `App` built from it. Production and the
//! integration tests build the app through the same functions.

use std::path::PathBuf;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{web, App};
use sea_orm::DatabaseConnection;

use crate::domain::node::NodeRole;
use crate::http;

/// What every handler can reach.
pub struct AppState {
    pub db: DatabaseConnection,
    pub node_name: String,
    pub role: NodeRole,
    pub jwt_secret: String,
    pub token_ttl_hours: u32,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub runtime: crate::actors::Runtime,
}

/// The API app (listener on PORT): every endpoint, unprefixed and under /api.
pub fn create_app(
    state: web::Data<AppState>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(state)
        .app_data(http::json_config())
        .app_data(http::query_config())
        .app_data(http::path_config())
        .service(web::scope("/api").configure(http::routes))
        .configure(http::routes)
        .default_service(web::to(http::not_found))
}

/// The web interface app (listener on UI_PORT): the dashboard's files, and the API under
/// /api so the browser talks to one origin.
pub fn create_ui_app(
    state: web::Data<AppState>,
    frontend_dir: PathBuf,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(state)
        .app_data(http::json_config())
        .app_data(http::query_config())
        .app_data(http::path_config())
        .app_data(web::Data::new(http::ui::FrontendDir(frontend_dir.clone())))
        .service(web::scope("/api").configure(http::routes))
        .route("/healthz", web::get().to(http::health::healthz))
        .configure(|cfg| http::ui::configure(cfg, &frontend_dir))
}
