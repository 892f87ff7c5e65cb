//! `condense serve`: opens the database, prepares the node and runs the listeners until
//! SIGINT or SIGTERM, then stops gracefully.

use std::net::{SocketAddr, TcpListener};

use actix_web::{web, HttpServer};
use sea_orm::DatabaseConnection;

use std::time::Duration;

use crate::actors::{self, HostFacts, LinkedConfig, MainConfig, Node, NodeConfig, RoleConfig};
use crate::config::{CommonArgs, ConfigError, ServeArgs};
use crate::domain::node::NodeRole;
use crate::http::app::{create_app, create_ui_app};
use crate::http::state::{ApiConfig, AppState};
use crate::http::ui::Dashboard;
use crate::license;
use crate::media::worker;
use crate::repo::{self, RepoError};
use crate::security::{self, SecurityError};
use crate::{host, telemetry};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Repo(#[from] RepoError),
    #[error("{0}")]
    Security(#[from] SecurityError),
    #[error("DATA_DIR {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error("{variable}: cannot listen on {addr}: {source}")]
    Listen { variable: &'static str, addr: SocketAddr, source: std::io::Error },
    #[error("server stopped with an error: {0}")]
    Server(std::io::Error),
    #[error("cannot start the node: {0}")]
    Runtime(String),
}

/// Builds a listener's server: our own signal handling, requests in flight get 10 s on stop.
macro_rules! http_server {
    ($factory:expr, $workers:expr, $listener:expr) => {
        HttpServer::new($factory)
            .workers($workers)
            .disable_signals()
            .shutdown_timeout(10)
            .listen($listener.try_clone().map_err(ServeError::Server)?)
            .map_err(ServeError::Server)?
            .run()
    };
}

/// Fixes glibc's mmap threshold at its default (128 KiB). Left dynamic, glibc raises it to
/// the size of the largest block freed so far, and from then on keeps blocks that size in
/// per-thread arenas: after the first password check (argon2 takes 19 MiB), every HTTP
/// worker that checked one held those 19 MiB for good (measured: 20 MB more RSS after one
/// login; see BENCHMARKS.md, Memory). Fixed, such blocks are mapped and returned at once.
/// Only the serving process does this: the transcoder child keeps glibc's defaults.
/// Arenas are capped at two: glibc gives each new thread that allocates its own (up to
/// eight per core), and every arena keeps what it touched; the node's threads (HTTP workers,
/// SQLite's connection threads, the log writer) mostly wait, and two suffice on any
/// machine this serves from (about 1 MiB less idle; see BENCHMARKS.md, Memory).
pub fn fix_allocator_thresholds() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it takes the allocator's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Everything condense creates is its own user's alone: DATA_DIR (the database with Plex
/// tokens and SMTP passwords, the signing secret, the logs) is made 0700 and its files
/// 0600 as they are created, never opened up and fixed afterwards. Beside sources it makes
/// its partial folders 0700 and gives each output the original's mode at the replace
/// (`media::replace`), so this costs the libraries nothing. Children inherit it.
pub fn private_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Creates DATA_DIR (0700 under `private_umask`); one made before that rule, and still
/// open to others, is closed to them, since everything in it is only reachable through it.
pub fn create_data_dir(path: &std::path::Path) -> Result<(), ServeError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let err = |source| ServeError::DataDir { path: path.display().to_string(), source };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path).map_err(err)?;
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.mode() & 0o077 != 0 && meta.uid() == rustix::process::geteuid().as_raw() {
        tracing::warn!(path = %path.display(), mode = format!("{:o}", meta.mode() & 0o777), "DATA_DIR was open to other users; it is now 0700");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    }
    Ok(())
}

/// Creates DATA_DIR, connects and migrates the database.
pub async fn open_database(common: &CommonArgs) -> Result<DatabaseConnection, ServeError> {
    create_data_dir(&common.data_dir)?;
    let url = common.database_url();
    let db = repo::connect(&url).await?;
    repo::migrate(&db).await?;
    tracing::info!(backend = repo::backend_name(&db), "database ready");
    Ok(db)
}

/// On the first start (no users yet), creates the admin user. Returns the password when it
/// was generated, so the caller prints it once.
pub async fn ensure_admin(
    db: &DatabaseConnection,
    username: &str,
    password: Option<&str>,
) -> Result<Option<String>, ServeError> {
    if repo::users::count(db).await? > 0 {
        return Ok(None);
    }
    let (password, generated) = match password {
        Some(p) => {
            security::check_password_strength(p)
                .map_err(|e| ConfigError { variable: "ADMIN_PASSWORD", message: e.to_string() })?;
            (p.to_string(), false)
        }
        None => (security::generate_secret(20), true),
    };
    let hash = security::hash_password(&password)?;
    repo::users::create(db, username, &hash, crate::domain::access::UserRole::Admin).await?;
    tracing::info!(username, "created the first user");
    Ok(generated.then_some(password))
}

/// Installs LICENSE_KEY unless it is installed already. A key that does not verify is
/// reported and ignored: the node still starts, on the licence it had.
pub async fn install_license_key(db: &DatabaseConnection, key: &str, public_key: &str) -> Result<(), ServeError> {
    let payload = match license::verify(key, public_key) {
        Ok(payload) => payload,
        Err(error) => {
            tracing::warn!(code = error.code(), %error, "LICENSE_KEY does not verify; it is ignored");
            return Ok(());
        }
    };
    let new = repo::licenses::NewLicense::verified(key, &payload);
    if repo::licenses::current(db).await?.is_some_and(|installed| installed.key == new.key) {
        return Ok(());
    }
    repo::licenses::install(db, new).await?;
    let effective = payload.effective_tier(chrono::Utc::now());
    tracing::info!(tier = %payload.tier, %effective, licensee = %payload.licensee, "licence installed from LICENSE_KEY");
    Ok(())
}

fn listen(variable: &'static str, addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).map_err(|source| ServeError::Listen { variable, addr, source })
}

pub async fn run(common: CommonArgs, args: ServeArgs) -> Result<(), ServeError> {
    args.validate()?;
    // Made 0700 under `private_umask`; `open_database` closes an old open one.
    std::fs::create_dir_all(common.data_dir.join("logs"))
        .map_err(|source| ServeError::DataDir { path: common.data_dir.display().to_string(), source })?;
    let _log_guard = telemetry::init(&common.log_level, Some(&common.data_dir.join("logs")))?;
    // This process never loads FFmpeg: every piece of media work runs in `condense-media`,
    // which is asked once what it can run here.
    let media = worker::binary().map_err(ServeError::Server)?;
    let capabilities = worker::capabilities(&media)
        .await
        .map_err(|e| ServeError::Runtime(format!("{} cannot run: {}", media.display(), e.message)))?;
    tracing::info!(version = env!("CARGO_PKG_VERSION"), ffmpeg = %capabilities.ffmpeg, role = args.role.as_str(), "starting");
    let host = tokio::task::spawn_blocking(|| host_facts(capabilities)).await.unwrap_or_default();
    tracing::info!(encoders = ?host.encoders, "encoders that open on this node");
    match args.role {
        NodeRole::Main => run_main(common, args, host).await,
        NodeRole::Linked => run_linked(common, args, host).await,
    }
}

/// What this node tells about its machine (reading the GPUs takes a moment: called on a
/// blocking thread).
fn host_facts(media: worker::Capabilities) -> HostFacts {
    let (_, memory_total) = host::memory();
    HostFacts {
        address: host::hostname(),
        gpu: host::gpu::gpus().first().map(|g| g.name.clone()),
        cores: i32::try_from(host::cores()).unwrap_or(i32::MAX),
        memory_total: i64::try_from(memory_total).unwrap_or(i64::MAX),
        encoders: media.encoders,
        decoders: media.decoders,
    }
}

fn node_config(args: &ServeArgs, host: HostFacts, role: RoleConfig) -> Result<NodeConfig, ServeError> {
    // Every media child this node starts runs under them (`media::worker::child_command`).
    worker::set_child_limits(worker::ChildLimits {
        max_pixels: args.max_pixels,
        memory_limit_mb: args.transcoder_memory_limit_mb,
    });
    Ok(NodeConfig {
        name: args.node_name(),
        host,
        max_jobs: usize::from(args.max_jobs),
        transcoder: worker::binary().map_err(ServeError::Server)?,
        segment_seconds: args.segment_seconds,
        parallel_segments: args.parallel_segments,
        throttle_ms_per_frame: args.throttle_ms_per_frame,
        analysis_timeout: Duration::from_secs(args.analysis_timeout_seconds),
        role,
    })
}

async fn run_main(common: CommonArgs, args: ServeArgs, host: HostFacts) -> Result<(), ServeError> {
    let db = open_database(&common).await?;
    if let Some(password) = ensure_admin(&db, &args.admin_username, args.admin_password.as_deref()).await? {
        // Printed once, on stdout only: never written to the log files.
        println!("================================================================");
        println!("condense: created user {:?} with password: {password}", args.admin_username);
        println!("Keep it: it is not shown again (reset: condense user reset-password).");
        println!("================================================================");
    }
    if let Some(key) = &args.license_key {
        install_license_key(&db, key, &args.license_public_key).await?;
    }
    let jwt_secret = match &args.jwt_secret {
        Some(secret) => secret.clone(),
        None => security::load_or_create_jwt_secret(&common.data_dir)?,
    };
    let main = MainConfig {
        db: db.clone(),
        settle: Duration::from_secs(args.watch_settle_seconds),
        previous_run_crashed: !host::clean_stop::take(&common.data_dir),
        own_heartbeat: Some(Duration::from_secs(args.heartbeat_seconds)),
        heartbeat: Duration::from_secs(args.heartbeat_seconds),
        node_timeout: Duration::from_secs(args.node_timeout_seconds),
        license_public_key: args.license_public_key.clone(),
        clock: crate::host::clock::Clock::system(),
        health_recheck: Duration::from_secs(args.health_recheck_minutes.saturating_mul(60)),
    };
    actors::notifier::set_outbound_deny(args.outbound_deny.clone());
    let node = actors::start_node(node_config(&args, host, RoleConfig::Main(main))?)
        .await
        .map_err(|e| ServeError::Runtime(e.to_string()))?;
    let Node::Main(main) = &node else { return Err(ServeError::Runtime("a main node started as linked".into())) };
    let state = web::Data::new(AppState::new(
        main,
        ApiConfig {
            jwt_secret,
            token_ttl_hours: args.token_ttl_hours,
            session_max_hours: args.session_max_hours,
            trusted_proxies: args.trusted_proxies.clone(),
            cluster_token: args.cluster_token.clone(),
            library_places: crate::http::library_places::LibraryPlaces {
                data_dir: Some(common.data_dir.clone()),
                roots: args.library_roots.clone(),
            },
        },
    ));

    let api_listener = listen("PORT", SocketAddr::new(args.bind, args.port))?;
    let ui_listener = listen("UI_PORT", SocketAddr::new(args.bind, args.ui_port))?;
    let api_state = state.clone();
    let api_server = http_server!(move || create_app(api_state.clone()), usize::from(args.http_workers), api_listener);
    let ui_state = state.clone();
    let dashboard = Dashboard::new(args.frontend_dir.clone());
    let ui_server = http_server!(move || create_ui_app(ui_state.clone(), dashboard.clone()), 1, ui_listener);
    let outcome = serve_until_signal(api_server, ui_server, &api_listener, &ui_listener, node.name()).await;
    node.shutdown().await;
    host::clean_stop::mark(&common.data_dir);
    db.close().await.map_err(RepoError::from)?;
    outcome
}

/// Runs both listeners until SIGINT or SIGTERM (or one of them fails), then stops them,
/// letting requests in flight finish.
async fn serve_until_signal(
    api_server: actix_web::dev::Server,
    ui_server: actix_web::dev::Server,
    api_listener: &TcpListener,
    ui_listener: &TcpListener,
    node: &str,
) -> Result<(), ServeError> {
    let api_addr = api_listener.local_addr().map_err(ServeError::Server)?;
    let ui_addr = ui_listener.local_addr().map_err(ServeError::Server)?;
    let (api_handle, ui_handle) = (api_server.handle(), ui_server.handle());
    let mut api_task = actix_web::rt::spawn(api_server);
    let mut ui_task = actix_web::rt::spawn(ui_server);
    tracing::info!(%api_addr, %ui_addr, node, "listening");
    let outcome = tokio::select! {
        signal = shutdown_signal() => {
            tracing::info!(signal, "shutting down");
            Ok(())
        }
        ended = &mut api_task => Err(ended),
        ended = &mut ui_task => Err(ended),
    };
    futures_util::future::join(api_handle.stop(true), ui_handle.stop(true)).await;
    match outcome {
        Ok(()) => {
            tracing::info!("stopped");
            Ok(())
        }
        Err(Ok(Ok(()))) => Ok(()),
        Err(Ok(Err(e))) => Err(ServeError::Server(e)),
        Err(Err(join)) => Err(ServeError::Server(std::io::Error::other(join.to_string()))),
    }
}

/// `ROLE=linked`: no database; jobs come over the link, API calls go to the main node.
async fn run_linked(common: CommonArgs, args: ServeArgs, host: HostFacts) -> Result<(), ServeError> {
    use crate::http::forward::{create_forward_app, Forward};

    let Some(main_url) = args.main_node_url.clone() else {
        return Err(ConfigError { variable: "MAIN_NODE_URL", message: "is required when ROLE=linked".into() }.into());
    };
    tracing::info!(main = %main_url, node = %args.node_name(), "starting as a linked node");
    let identity = crate::config::load_node_identity(&common.data_dir)?;
    // A credential without the identity it belongs to cannot be presented.
    let credential = crate::config::load_node_credential(&common.data_dir)?.filter(|_| identity.is_some());
    let cluster_token = crate::config::enrollment_token(args.cluster_token.clone(), credential.as_deref())?;
    let work_dir = args.work_dir(&common.data_dir);
    crate::config::prepare_work_dir(&work_dir)?;
    let linked = LinkedConfig {
        main_url: main_url.clone(),
        cluster_token,
        credential,
        identity,
        data_dir: common.data_dir.clone(),
        transfer_mbps: args.transfer_mbps,
        download_ahead: args.download_ahead,
        upload_parts: args.upload_parts,
        span_ranges: args.span_ranges,
        work_dir,
        shared_storage: args.shared_storage,
    };
    let node = actors::start_node(node_config(&args, host, RoleConfig::Linked(linked))?)
        .await
        .map_err(|e| ServeError::Runtime(e.to_string()))?;

    let forward = |api_listener| {
        web::Data::new(Forward { main_url: main_url.clone(), node_name: node.name().to_string(), api_listener })
    };
    let api_listener = listen("PORT", SocketAddr::new(args.bind, args.port))?;
    let ui_listener = listen("UI_PORT", SocketAddr::new(args.bind, args.ui_port))?;
    let (api_fwd, ui_fwd) = (forward(true), forward(false));
    let api_server = http_server!(move || create_forward_app(api_fwd.clone()), 1, api_listener);
    let ui_server = http_server!(move || create_forward_app(ui_fwd.clone()), 1, ui_listener);
    let outcome = serve_until_signal(api_server, ui_server, &api_listener, &ui_listener, node.name()).await;
    node.shutdown().await;
    outcome
}

/// Resolves on SIGINT or SIGTERM, naming which.
async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; only SIGINT stops the node");
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT";
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}
