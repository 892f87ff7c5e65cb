//! What every handler can reach: `AppState`, built once per node from the node's actors and
//! the API's own settings (`ApiConfig`), and shared by both listeners (`http::app`).

use sea_orm::DatabaseConnection;

use crate::actors::MainNode;
use crate::domain::node::NodeRole;
use crate::host::memory_trend::SharedMemoryTrend;
use crate::http::coalesce::SharedReads;
use crate::http::library_places::LibraryPlaces;
use crate::http::login_limit::{IpNet, LoginLimiter};

/// What every handler can reach.
pub struct AppState {
    pub db: DatabaseConnection,
    pub node_name: String,
    pub role: NodeRole,
    pub jwt_secret: String,
    pub token_ttl_hours: u32,
    /// SESSION_MAX_HOURS: no refresh carries a session past this many hours after its login.
    pub session_max_hours: u32,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub runtime: crate::actors::Runtime,
    /// Heartbeat and timeout told to linked nodes.
    pub cluster: crate::actors::cluster::ClusterConfig,
    /// CLUSTER_TOKEN: what linked nodes present to register; `None` when unset.
    pub cluster_token: Option<String>,
    /// LICENSE_PUBLIC_KEY: licence keys are checked against it (base64url Ed25519).
    pub license_public_key: String,
    /// Failed logins per client address and username, and per address (in memory, bounded).
    pub login_limiter: LoginLimiter,
    /// TRUSTED_PROXIES: peers whose X-Forwarded-For names the client.
    pub trusted_proxies: Vec<IpNet>,
    /// Bounds the password checks (argon2, 19 MiB and tens of milliseconds each) running at
    /// once: the rest wait in line, and past `PASSWORD_CHECK_WAIT` are answered 503.
    pub password_checks: std::sync::Arc<tokio::sync::Semaphore>,
    /// This node's memory use over the last 2 hours, for the dashboard.
    pub memory_trend: SharedMemoryTrend,
    /// Where libraries may be (DATA_DIR, LIBRARY_ROOTS).
    pub library_places: LibraryPlaces,
    /// The clock the encoding windows are read with (whether each is open now).
    pub clock: crate::host::clock::Clock,
    /// Reads shared by identical requests that wait at the same time.
    pub reads: SharedReads,
}

/// The API's own settings (the rest comes from the node).
pub struct ApiConfig {
    pub jwt_secret: String,
    pub token_ttl_hours: u32,
    pub session_max_hours: u32,
    pub trusted_proxies: Vec<IpNet>,
    pub cluster_token: Option<String>,
    pub library_places: LibraryPlaces,
}

impl AppState {
    /// The state of a main node's listeners.
    pub fn new(node: &MainNode, api: ApiConfig) -> AppState {
        AppState {
            db: node.db.clone(),
            node_name: node.name.clone(),
            role: NodeRole::Main,
            jwt_secret: api.jwt_secret,
            token_ttl_hours: api.token_ttl_hours,
            session_max_hours: api.session_max_hours,
            started_at: chrono::Utc::now(),
            runtime: node.runtime.clone(),
            cluster: node.cluster.clone(),
            cluster_token: api.cluster_token,
            license_public_key: node.cluster.license_public_key.clone(),
            login_limiter: LoginLimiter::default(),
            trusted_proxies: api.trusted_proxies,
            password_checks: std::sync::Arc::new(tokio::sync::Semaphore::new(password_check_slots())),
            memory_trend: node.memory_trend.clone(),
            library_places: api.library_places,
            clock: node.clock.clone(),
            reads: SharedReads::default(),
        }
    }
}

/// Password checks at once: one per core (they are CPU-bound), at least 2, at most 8, so
/// their memory stays under 8 x 19 MiB however many logins arrive.
fn password_check_slots() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get).clamp(2, 8)
}
