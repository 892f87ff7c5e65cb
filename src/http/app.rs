//! The actix-web `App` of each listener, built by one function over the shared `AppState`
//! (`http::state`). Production, the integration tests and the benchmarks build them through
//! the same functions, over a node started by `actors::start_node`.

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::{web, App};

use crate::http;
use crate::http::state::AppState;
use crate::http::ui::Dashboard;

/// What an app is to `HttpServer::new`: every answer passes through `http::headers`, which
/// boxes its body.
pub trait AppService:
    ServiceFactory<
    ServiceRequest,
    Config = (),
    Response = ServiceResponse<BoxBody>,
    Error = actix_web::Error,
    InitError = (),
>
{
}

impl<T> AppService for T where
    T: ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<BoxBody>,
        Error = actix_web::Error,
        InitError = (),
    >
{
}

/// The API app (listener on PORT): every endpoint, unprefixed and under /api (one route table:
/// `http::prefix` puts unprefixed paths under /api before routing).
pub fn create_app(state: web::Data<AppState>) -> App<impl AppService> {
    app(state, Listener::Api)
}

/// The web interface app (listener on UI_PORT): the dashboard's files, and the API under
/// /api so the browser talks to one origin.
pub fn create_ui_app(state: web::Data<AppState>, dashboard: Dashboard) -> App<impl AppService> {
    app(state, Listener::Dashboard(dashboard))
}

/// The listener an app serves, and what it serves besides the API under /api.
enum Listener {
    /// PORT.
    Api,
    /// UI_PORT.
    Dashboard(Dashboard),
}

impl Listener {
    /// The Content-Security-Policy of its answers (see `http::headers`).
    fn policy(&self) -> &'static str {
        match self {
            Listener::Api => http::headers::API_POLICY,
            Listener::Dashboard(_) => http::headers::DASHBOARD_POLICY,
        }
    }

    /// Its routes outside /api, registered after the /api scope.
    fn configure(&self, cfg: &mut web::ServiceConfig) {
        match self {
            Listener::Api => {
                // The API's own paths unprefixed are the /api scope's (`http::prefix`).
                // The WebSocket is served at the API listener's root too (ws://host:3100).
                cfg.route("/", web::get().to(http::ws::connect))
                    .route("/cluster/link", web::get().to(http::cluster::link))
                    .route("/cluster/jobs/{id}/source", web::get().to(http::transfer::source))
                    .route("/cluster/jobs/{id}/source/range", web::get().to(http::transfer::source_range))
                    .route("/cluster/jobs/{id}/output", web::get().to(http::transfer::output_length))
                    .route("/cluster/jobs/{id}/output", web::put().to(http::transfer::put_output))
                    .route("/cluster/jobs/{id}/output/finish", web::post().to(http::transfer::finish_output))
                    .route("/cluster/jobs/{id}/parts", web::get().to(http::transfer::parts))
                    // A manifest lists every segment: a long film cut small outgrows 1 MiB.
                    .service(
                        web::resource("/cluster/jobs/{id}/parts/finish")
                            .app_data(http::json_config_up_to(64 << 20))
                            .route(web::post().to(http::transfer::finish_parts)),
                    )
                    .route("/cluster/jobs/{id}/parts/{name}", web::put().to(http::transfer::put_part))
                    .route("/cluster/jobs/{id}/parts/{name}/done", web::post().to(http::transfer::take_part))
                    .route("/cluster/jobs/{id}/spans/{span}", web::get().to(http::transfer::span_task))
                    .route("/cluster/jobs/{id}/spans/{span}/files/{name}", web::put().to(http::transfer::put_span_file))
                    .route("/cluster/jobs/{id}/spans/{span}/finish", web::post().to(http::transfer::finish_span))
                    .default_service(web::to(http::not_found));
            }
            Listener::Dashboard(dashboard) => {
                cfg.route("/healthz", web::get().to(http::health::healthz))
                    // The dashboard's live feed, on its own origin.
                    .route("/ws", web::get().to(http::ws::connect));
                http::ui::configure(cfg, dashboard);
            }
        }
    }
}

/// The one builder of both apps: the security headers around everything, the state and the
/// extractors' error handlers, the API under /api, then the listener's own routes.
fn app(state: web::Data<AppState>, listener: Listener) -> App<impl AppService> {
    let policy = listener.policy();
    let api_listener = matches!(listener, Listener::Api);
    App::new()
        .wrap(from_fn(move |req, next| http::prefix::under_api(api_listener, req, next)))
        .wrap(from_fn(move |req, next| http::headers::with_policy(policy, req, next)))
        .app_data(state)
        .app_data(http::json_config())
        .app_data(http::query_config())
        .app_data(http::path_config())
        // Unknown /api paths answer 404 JSON (on UI_PORT too, not the dashboard's index.html).
        .service(web::scope("/api").configure(http::routes).default_service(web::to(http::not_found)))
        .configure(|cfg| listener.configure(cfg))
}
