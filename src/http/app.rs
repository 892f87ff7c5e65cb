//! The application: the actix-web `App`s built over the shared state (`http::state`).
//! Production, the integration tests and the benchmarks build them through the same
//! functions, over a node started by `actors::start_node`.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::{web, App};

use crate::http;
use crate::http::state::AppState;

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
        .wrap(from_fn(http::headers::api))
        .app_data(state)
        .app_data(http::json_config())
        .app_data(http::query_config())
        .app_data(http::path_config())
        .service(web::scope("/api").configure(http::routes).default_service(web::to(http::not_found)))
        .configure(http::routes)
        // The WebSocket is served at the API listener's root too (ws://host:3100).
        .route("/", web::get().to(http::ws::connect))
        .route("/cluster/link", web::get().to(http::cluster::link))
        .default_service(web::to(http::not_found))
}

/// The web interface app (listener on UI_PORT): the dashboard's files, and the API under
/// /api so the browser talks to one origin.
pub fn create_ui_app(
    state: web::Data<AppState>,
    dashboard: http::ui::Dashboard,
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
        .wrap(from_fn(http::headers::dashboard))
        .app_data(state)
        .app_data(http::json_config())
        .app_data(http::query_config())
        .app_data(http::path_config())
        // Unknown /api paths answer 404 JSON, not the dashboard's index.html.
        .service(web::scope("/api").configure(http::routes).default_service(web::to(http::not_found)))
        .route("/healthz", web::get().to(http::health::healthz))
        // The dashboard's live feed, on its own origin.
        .route("/ws", web::get().to(http::ws::connect))
        .configure(|cfg| http::ui::configure(cfg, &dashboard))
}
