//! Command line and environment. Every flag also reads the environment variable of the
//! same name, so a container is configured with env alone. Values are checked here, once,
//! and a bad one stops the process with a message that names the variable.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::domain::node::NodeRole;
use crate::domain::placement::SharedStorage;
use crate::domain::segments::Parallelism;

#[derive(Debug, Parser)]
#[command(name = "condense", version, about = "Self-hosted media re-encoding service")]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Folder for the SQLite database, the JWT secret and the logs.
    #[arg(long, env = "DATA_DIR", value_name = "DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,
    /// Database connection string: sqlite://… or postgres://…
    /// [default: sqlite file condense.db under DATA_DIR]
    #[arg(long, env = "DATABASE_URL", value_name = "DATABASE_URL", global = true, value_parser = parse_database_url)]
    pub database_url: Option<String>,
    /// Log filter (tracing's EnvFilter syntax), e.g. "info" or "condense=debug".
    #[arg(long, env = "LOG_LEVEL", value_name = "LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,
}

impl CommonArgs {
    /// The database to use: DATABASE_URL, or the embedded SQLite file under DATA_DIR.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}?mode=rwc", self.data_dir.join("condense.db").display()),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node: the main node (API, queue, scheduler, encoder) or a linked worker.
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit.
    Migrate,
    /// Manage dashboard and API users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Print condense's version and the FFmpeg libraries condense-media is linked against.
    Version,
    /// Print what condense sees in a media file, as JSON.
    Probe { file: std::path::PathBuf },
    /// Print the VMAF (model vmaf_v0.6.1) of DISTORTED against REFERENCE, as JSON: the mean
    /// and 5th percentile of the frames' scores. Both must have the same frames.
    Vmaf { reference: std::path::PathBuf, distorted: std::path::PathBuf },
    /// Find the highest CRF/CQ whose VMAF reaches a target, on samples of FILE, as a
    /// VMAF-mode library does before each encode; prints the result as JSON. Nothing is
    /// written beside FILE (the samples go under the system's temporary folder).
    CrfSearch {
        file: std::path::PathBuf,
        /// The encoder (as `GET /encoders` names them).
        #[arg(long, default_value = "libx265")]
        encoder: String,
        /// The encoder's preset (default: its own).
        #[arg(long)]
        preset: Option<String>,
        /// The VMAF to reach (80 to 99).
        #[arg(long, default_value_t = 95.0)]
        target: f64,
        /// Where the search starts (default: the encoder's default quality).
        #[arg(long)]
        start: Option<u32>,
        /// Report an output predicted larger than this percent of FILE as too large.
        #[arg(long, default_value_t = 80)]
        max_size_percent: u32,
        /// Try only `--start` (what a crf-mode library gives the file): its VMAF and size.
        #[arg(long)]
        fixed: bool,
        /// Score one block of 32 sample frames in N (1: every frame; 1 to 8). The default
        /// is what a vmaf-mode library's search uses.
        #[arg(long, default_value_t = crate::domain::quality::SEARCH_SCORE_EVERY)]
        score_every: u32,
    },
    /// Run one encode (internal: the node starts it as a child process, plan on stdin).
    #[command(hide = true)]
    Transcode,
    /// Encode one span of a running job's video beside its transcoder (internal: a node
    /// starts it as a child process, request on stdin; see `media::helper`).
    // `assist` was its name before: a node built then still starts its helpers by it.
    #[command(hide = true, alias = "assist")]
    Helper,
    /// Validate a source or verify an output (internal: the node starts it as a child
    /// process, request on stdin, so FFmpeg never runs inside the node).
    #[command(hide = true)]
    Media,
    /// Print the API's OpenAPI document (the build generates the dashboard's types from it).
    #[command(hide = true)]
    Openapi,
    /// Licence keys: make a key pair, or sign a key (for the vendor, and for tests).
    License {
        #[command(subcommand)]
        command: LicenseCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum LicenseCommand {
    /// Print a new Ed25519 key pair (private, then public; base64url).
    Keygen,
    /// Sign a licence key with a private key and print it.
    Issue {
        /// The signing key (base64url), or read it from CONDENSE_LICENSE_PRIVATE_KEY.
        // base64url: a key may start with '-' (1 in 64), which is its value, not an option.
        #[arg(long, env = "CONDENSE_LICENSE_PRIVATE_KEY", hide_env_values = true, allow_hyphen_values = true)]
        private_key: String,
        /// FREE, SUPPORTER or PRO.
        #[arg(long)]
        tier: String,
        #[arg(long)]
        licensee: String,
        /// Expiry, RFC 3339 (e.g. 2027-01-31T00:00:00Z); none for a key that does not expire.
        #[arg(long)]
        expires: Option<chrono::DateTime<chrono::Utc>>,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user. Without --password, a password is generated and printed.
    Create {
        username: String,
        #[arg(long, env = "CONDENSE_PASSWORD")]
        password: Option<String>,
    },
    /// Set a new password for a user. Without --password, one is generated and printed.
    ResetPassword {
        username: String,
        #[arg(long, env = "CONDENSE_PASSWORD")]
        password: Option<String>,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Node role: "main" owns the database, API and queue; "linked" is a worker.
    #[arg(long, env = "ROLE", value_name = "ROLE", default_value = "main", value_parser = parse_role)]
    pub role: NodeRole,
    /// Address of the main node, for ROLE=linked (e.g. http://main:3100).
    #[arg(long, env = "MAIN_NODE_URL", value_name = "MAIN_NODE_URL", value_parser = parse_http_url)]
    pub main_node_url: Option<String>,
    /// Address the listeners bind to.
    #[arg(long, env = "BIND", value_name = "BIND", default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// API and WebSocket listener port.
    #[arg(long, env = "PORT", value_name = "PORT", default_value_t = 3100)]
    pub port: u16,
    /// Web interface port (0 disables the web interface listener).
    #[arg(long, env = "UI_PORT", value_name = "UI_PORT", default_value_t = 4210)]
    pub ui_port: u16,
    /// Folder of a built dashboard to serve on UI_PORT instead of the one built into the
    /// binary.
    #[arg(long, env = "FRONTEND_DIR", value_name = "FRONTEND_DIR")]
    pub frontend_dir: Option<PathBuf>,
    /// Secret that signs API tokens [default: generated once, kept in DATA_DIR/jwt-secret].
    #[arg(long, env = "JWT_SECRET", value_name = "JWT_SECRET", hide_env_values = true, value_parser = parse_secret)]
    pub jwt_secret: Option<String>,
    /// Lifetime of an API token, in hours.
    #[arg(long, env = "TOKEN_TTL_HOURS", value_name = "TOKEN_TTL_HOURS", default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=8760))]
    pub token_ttl_hours: u32,
    /// Longest a login lasts, in hours: `POST /auth/refresh` never extends a session past it.
    #[arg(long, env = "SESSION_MAX_HOURS", value_name = "SESSION_MAX_HOURS", default_value_t = 720, value_parser = clap::value_parser!(u32).range(1..=87600))]
    pub session_max_hours: u32,
    /// Reverse proxies (comma-separated addresses or CIDR networks) whose `X-Forwarded-For`
    /// names the client, for login throttling; from any other peer the header is ignored.
    #[arg(long, env = "TRUSTED_PROXIES", value_name = "TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<crate::http::login_limit::IpNet>,
    /// Addresses notifications and connections are never sent to, checked before any
    /// connection: comma-separated CIDR networks or `link-local`, `metadata`, `private`
    /// (RFC 1918, CGNAT, IPv6 ULA), `loopback`; `none` for nothing.
    #[arg(long, env = "OUTBOUND_DENY", value_name = "OUTBOUND_DENY", default_value = crate::domain::net::DEFAULT_OUTBOUND_DENY)]
    pub outbound_deny: crate::domain::net::OutboundDeny,
    /// Name of the first user, created on the first start.
    #[arg(long, env = "ADMIN_USERNAME", value_name = "ADMIN_USERNAME", default_value = "admin")]
    pub admin_username: String,
    /// Password of the first user [default: generated and printed once].
    #[arg(long, env = "ADMIN_PASSWORD", value_name = "ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
    /// Shared secret linked nodes present to register with the main node.
    #[arg(long, env = "CLUSTER_TOKEN", value_name = "CLUSTER_TOKEN", hide_env_values = true, value_parser = parse_secret)]
    pub cluster_token: Option<String>,
    /// This node's name [default: the host name].
    #[arg(long, env = "NODE_NAME", value_name = "NODE_NAME")]
    pub node_name: Option<String>,
    /// Licence key, installed at start-up (FREE when unset; a key that does not verify is
    /// reported and ignored).
    #[arg(long, env = "LICENSE_KEY", value_name = "LICENSE_KEY", hide_env_values = true)]
    pub license_key: Option<String>,
    /// Jobs this node encodes at once (the licence may allow fewer); 0 on a main node that
    /// only coordinates linked nodes.
    #[arg(long, env = "MAX_JOBS", value_name = "MAX_JOBS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(0..=64))]
    pub max_jobs: u16,
    /// Length of a resumable segment of encoded video, in seconds.
    #[arg(long, env = "SEGMENT_SECONDS", value_name = "SEGMENT_SECONDS", default_value_t = 20.0, value_parser = parse_segment_seconds)]
    pub segment_seconds: f64,
    /// Encoder sessions one job runs at once on this node, each on its own span of the
    /// video: `auto` (enough to keep the cores busy), `off` (one), or a maximum.
    #[arg(long, env = "PARALLEL_SEGMENTS", value_name = "PARALLEL_SEGMENTS", default_value = "auto")]
    pub parallel_segments: Parallelism,
    /// Seconds between a linked node's heartbeats (told to linked nodes by the main node).
    #[arg(long, env = "HEARTBEAT_SECONDS", value_name = "HEARTBEAT_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub heartbeat_seconds: u64,
    /// Seconds without a heartbeat after which a linked node is OFFLINE and its jobs go
    /// back to the queue.
    #[arg(long, env = "NODE_TIMEOUT_SECONDS", value_name = "NODE_TIMEOUT_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub node_timeout_seconds: u64,
    /// Minutes between runs of the main node's own health checks (each library path
    /// readable, its disk not at risk, the libraries' encoders opening on a node that is up):
    /// a check that failed is retried this often on its own, and `POST /health/recheck` runs
    /// them at once.
    #[arg(long, env = "HEALTH_RECHECK_MINUTES", value_name = "HEALTH_RECHECK_MINUTES", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub health_recheck_minutes: u64,
    /// How long a new file in a watched folder must stop growing before it becomes a job.
    #[arg(long, env = "WATCH_SETTLE_SECONDS", value_name = "WATCH_SETTLE_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub watch_settle_seconds: u64,
    /// Seconds a source's validation or an output's verification may take (a child process
    /// that runs longer is killed and the attempt fails), plus one second per 50 MB of file.
    #[arg(long, env = "ANALYSIS_TIMEOUT_SECONDS", value_name = "ANALYSIS_TIMEOUT_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub analysis_timeout_seconds: u64,
    /// Largest video frame, in pixels, that condense decodes; a larger stream is refused at
    /// analysis, before any decoder allocates a frame.
    #[arg(long, env = "MAX_PIXELS", value_name = "MAX_PIXELS", default_value_t = crate::domain::limits::DEFAULT_MAX_PIXELS, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_pixels: u64,
    /// Address space of each `condense-media` child, in MiB [default: sized per child from
    /// the source's frame, its encoder sessions and the cores; see `domain::limits`].
    #[arg(long, env = "TRANSCODER_MEMORY_LIMIT_MB", value_name = "TRANSCODER_MEMORY_LIMIT_MB", value_parser = clap::value_parser!(u64).range(64..))]
    pub transcoder_memory_limit_mb: Option<u64>,
    /// Megabits per second a linked node's transfers of sources and outputs may use (a node
    /// that does not see a library fetches its files over the link); 0 for no cap.
    #[arg(long, env = "TRANSFER_MBPS", value_name = "TRANSFER_MBPS", default_value_t = 0)]
    pub transfer_mbps: u32,
    /// Benchmark aid: `false` makes a linked node download a source whole before it reads
    /// it, as before the download ahead (issue 39), to measure what the overlap gives.
    #[arg(long, env = "CONDENSE_DOWNLOAD_AHEAD", hide = true, default_value_t = true, action = clap::ArgAction::Set)]
    pub download_ahead: bool,
    /// Benchmark aid: `false` makes a linked node mux the output of a file it takes by
    /// transfer and upload it whole once encoded, as before the upload while encoding (issue
    /// 39), to measure what the overlap gives.
    #[arg(long, env = "CONDENSE_UPLOAD_PARTS", hide = true, default_value_t = true, action = clap::ArgAction::Set)]
    pub upload_parts: bool,
    /// Benchmark aid: `false` makes a linked node download the whole source for the spans
    /// it encodes without the share, as before it fetched only the ranges a span reads
    /// (issue 39, item 4), to measure what that gives.
    #[arg(long, env = "CONDENSE_SPAN_RANGES", hide = true, default_value_t = true, action = clap::ArgAction::Set)]
    pub span_ranges: bool,
    /// Test aid: pause after each encoded frame, in milliseconds.
    #[arg(long, env = "CONDENSE_THROTTLE_MS_PER_FRAME", hide = true, default_value_t = 0)]
    pub throttle_ms_per_frame: u64,
    /// Ed25519 public key (base64url) licence keys are checked against.
    /// (base64url: a key may start with '-', 1 in 64, which is its value, not an option).
    #[arg(long, env = "LICENSE_PUBLIC_KEY", value_name = "LICENSE_PUBLIC_KEY", default_value = crate::license::BUILTIN_PUBLIC_KEY, value_parser = parse_license_public_key, allow_hyphen_values = true)]
    pub license_public_key: String,
    /// Folders libraries may be in, comma-separated (e.g. /media,/srv/video); a library path
    /// must be one of them or inside one [default: any folder but the system's own and
    /// DATA_DIR].
    #[arg(long, env = "LIBRARY_ROOTS", value_name = "LIBRARY_ROOTS", value_delimiter = ',', value_parser = parse_library_root)]
    pub library_roots: Vec<PathBuf>,
    /// Whether a node that does not see a library may take its jobs by transfer: `auto`
    /// (it may, fetching the file into WORK_DIR over its link) or `required` (never: it
    /// takes only files it sees at the main node's paths).
    #[arg(long, env = "SHARED_STORAGE", value_name = "SHARED_STORAGE", default_value = "auto", value_parser = parse_shared_storage)]
    pub shared_storage: SharedStorage,
    /// Folder a node keeps files taken by transfer in while it encodes them [default:
    /// DATA_DIR/work]. Made 0700 at start; a link, or a folder of another user, is refused.
    #[arg(long, env = "WORK_DIR", value_name = "WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// HTTP worker threads per listener.
    #[arg(long, env = "HTTP_WORKERS", value_name = "HTTP_WORKERS", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub http_workers: u16,
}

/// A settings error: which variable, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub message: String,
}

impl ServeArgs {
    /// Checks that need more than one value at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // CLUSTER_TOKEN is not required here: it only enrolls, and a node with its credential
        // in DATA_DIR links without it (`enrollment_token` checks, once DATA_DIR is read).
        if self.role == NodeRole::Linked && self.main_node_url.is_none() {
            return Err(ConfigError {
                variable: "MAIN_NODE_URL",
                message: "is required when ROLE=linked (e.g. http://main-node:3100)".into(),
            });
        }
        if self.ui_port != 0 && self.ui_port == self.port {
            return Err(ConfigError { variable: "UI_PORT", message: format!("must differ from PORT ({})", self.port) });
        }
        if self.admin_username.trim().is_empty() {
            return Err(ConfigError { variable: "ADMIN_USERNAME", message: "must not be empty".into() });
        }
        if let Some(name) = &self.node_name {
            if name.trim().is_empty() || name.len() > 64 {
                return Err(ConfigError { variable: "NODE_NAME", message: "must be 1 to 64 characters".into() });
            }
        }
        Ok(())
    }

    /// WORK_DIR: as set, else `work` under DATA_DIR.
    pub fn work_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.work_dir.clone().unwrap_or_else(|| data_dir.join("work"))
    }

    /// This node's name: NODE_NAME, else the host name.
    pub fn node_name(&self) -> String {
        self.node_name.clone().unwrap_or_else(crate::host::hostname)
    }
}

fn parse_role(value: &str) -> Result<NodeRole, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "main" => Ok(NodeRole::Main),
        "linked" => Ok(NodeRole::Linked),
        _ => Err(format!("ROLE must be \"main\" or \"linked\", not {value:?}")),
    }
}

fn parse_shared_storage(value: &str) -> Result<SharedStorage, String> {
    value
        .trim()
        .to_ascii_lowercase()
        .parse()
        .map_err(|_| format!("SHARED_STORAGE must be \"auto\" or \"required\", not {value:?}"))
}

fn parse_http_url(value: &str) -> Result<String, String> {
    let trimmed = value.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(|| format!("MAIN_NODE_URL must start with http:// or https://, not {value:?}"))?;
    if rest.is_empty() {
        return Err("MAIN_NODE_URL has no host".into());
    }
    Ok(trimmed.to_string())
}

fn parse_database_url(value: &str) -> Result<String, String> {
    let known = ["sqlite:", "postgres://", "postgresql://"];
    if known.iter().any(|p| value.starts_with(p)) {
        Ok(value.to_string())
    } else {
        Err("DATABASE_URL must start with sqlite: or postgres://".into())
    }
}

fn parse_segment_seconds(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if (0.5..=600.0).contains(&v) => Ok(v),
        _ => Err("SEGMENT_SECONDS must be a number of seconds from 0.5 to 600".into()),
    }
}

fn parse_license_public_key(value: &str) -> Result<String, String> {
    crate::license::check_public_key(value).map(|()| value.trim().to_string()).map_err(|e| e.to_string())
}

fn parse_library_root(value: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(value.trim());
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(format!("LIBRARY_ROOTS lists absolute folders separated by commas; {value:?} is not absolute"))
    }
}

fn parse_secret(value: &str) -> Result<String, String> {
    if value.len() < 16 {
        Err("must be at least 16 characters".into())
    } else {
        Ok(value.to_string())
    }
}

/// Creates WORK_DIR (and the folders above it) 0700, or checks the one there: it must be a
/// folder (not a link to one: files of other people's libraries land in it) that this
/// user owns, and it is closed to others if it was open. Everything in it is this node's.
pub fn prepare_work_dir(path: &std::path::Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let refuse = |message: String| ConfigError { variable: "WORK_DIR", message };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| refuse(format!("cannot create {}: {e}", path.display())))?;
            std::fs::symlink_metadata(path).map_err(|e| refuse(format!("{}: {e}", path.display())))?
        }
        Err(e) => return Err(refuse(format!("{}: {e}", path.display()))),
    };
    if meta.file_type().is_symlink() {
        return Err(refuse(format!("{} is a link; give the folder itself", path.display())));
    }
    if !meta.is_dir() {
        return Err(refuse(format!("{} is not a folder", path.display())));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!(
            "{} belongs to user {}, not to this node's user ({me}); give a folder of its own",
            path.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| refuse(format!("cannot make {} 0700: {e}", path.display())))?;
    }
    Ok(())
}

/// The file under DATA_DIR that keeps a linked node's identity, given by the main node at
/// its first registration. The node presents it on every link: it is how the main node
/// tells this node from another with the same NODE_NAME.
pub fn node_identity_file(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("node-id")
}

/// This node's identity; `None` before its first registration. A file that is there but
/// unreadable or garbled stops the start: registering as a new node would hide the fault.
pub fn load_node_identity(data_dir: &std::path::Path) -> Result<Option<String>, ConfigError> {
    let path = node_identity_file(data_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ConfigError { variable: "DATA_DIR", message: format!("{}: {e}", path.display()) }),
    };
    let identity = text.trim();
    if identity.is_empty() || identity.len() > 128 || !identity.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(ConfigError {
            variable: "DATA_DIR",
            message: format!("{} does not hold a node identity; remove it to register as a new node", path.display()),
        });
    }
    Ok(Some(identity.to_string()))
}

/// Keeps the node's identity: written whole to a temporary file, synced, then renamed over
/// the old one, so a crash leaves the old identity or the new one, never a torn file.
pub fn store_node_identity(data_dir: &std::path::Path, identity: &str) -> std::io::Result<()> {
    store_whole(data_dir, "node-id", identity)
}

/// What a linked node presents to enroll: CLUSTER_TOKEN, which only a node without its own
/// credential (`credential`) needs.
pub fn enrollment_token(
    cluster_token: Option<String>,
    credential: Option<&str>,
) -> Result<Option<String>, ConfigError> {
    match (cluster_token, credential) {
        (None, None) => Err(ConfigError {
            variable: "CLUSTER_TOKEN",
            message: "is required when ROLE=linked until the node has enrolled (the main node's CLUSTER_TOKEN; \
                      afterwards the node links with its own credential, DATA_DIR/node-credential)"
                .into(),
        }),
        (token, _) => Ok(token),
    }
}

/// The file under DATA_DIR that keeps a linked node's credential: the secret the main node
/// gave it at enrollment, presented on every later link instead of CLUSTER_TOKEN. Readable
/// by the node's user only.
pub fn node_credential_file(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("node-credential")
}

/// This node's credential; `None` before its enrollment (or on a node enrolled before
/// credentials existed). A garbled file stops the start, as for the identity.
pub fn load_node_credential(data_dir: &std::path::Path) -> Result<Option<String>, ConfigError> {
    let path = node_credential_file(data_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ConfigError { variable: "DATA_DIR", message: format!("{}: {e}", path.display()) }),
    };
    let credential = text.trim();
    if credential.len() < 32 || credential.len() > 128 || !credential.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ConfigError {
            variable: "DATA_DIR",
            message: format!(
                "{} does not hold a node credential; remove it and node-id beside it to enroll as a new node",
                path.display()
            ),
        });
    }
    Ok(Some(credential.to_string()))
}

/// Keeps the node's credential (mode 0600), whole or not at all, like the identity.
pub fn store_node_credential(data_dir: &std::path::Path, credential: &str) -> std::io::Result<()> {
    store_whole(data_dir, "node-credential", credential)
}

/// Writes `text` to DATA_DIR/`name` through a synced temporary file renamed over it; mode
/// 0600, since these files are the node's secrets.
fn store_whole(data_dir: &std::path::Path, name: &str, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = data_dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
    file.write_all(format!("{text}\n").as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, data_dir.join(name))?;
    std::fs::File::open(data_dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let mut argv = vec!["condense", "serve"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv)?;
        match cli.command {
            Command::Serve(s) => Ok(*s),
            other => panic!("parsed {other:?}"),
        }
    }

    #[test]
    fn defaults_follow_design() {
        let s = serve(&[]).unwrap();
        assert_eq!(s.role, NodeRole::Main);
        assert_eq!(s.port, 3100);
        assert_eq!(s.ui_port, 4210);
        assert_eq!(s.admin_username, "admin");
        s.validate().unwrap();
    }

    #[test]
    fn bad_role_names_the_variable() {
        let err = serve(&["--role", "bogus"]).unwrap_err().to_string();
        assert!(err.contains("ROLE"), "{err}");
        assert!(err.contains("bogus"), "{err}");
    }

    #[test]
    fn bad_port_names_the_variable() {
        let err = serve(&["--port", "99999"]).unwrap_err().to_string();
        assert!(err.contains("PORT"), "{err}");
    }

    #[test]
    fn linked_needs_main_url_and_a_token_until_it_has_a_credential() {
        let s = serve(&["--role", "linked"]).unwrap();
        assert_eq!(s.validate().unwrap_err().variable, "MAIN_NODE_URL");
        let s = serve(&["--role", "linked", "--main-node-url", "http://main:3100/"]).unwrap();
        assert_eq!(s.main_node_url.as_deref(), Some("http://main:3100"));
        // The token is needed only to enroll: with a credential in DATA_DIR it may go.
        s.validate().unwrap();
        assert_eq!(enrollment_token(None, None).unwrap_err().variable, "CLUSTER_TOKEN");
        assert_eq!(enrollment_token(None, Some("credential")).unwrap(), None);
        assert_eq!(enrollment_token(Some("token".into()), None).unwrap().as_deref(), Some("token"));
        let s =
            serve(&["--role", "linked", "--main-node-url", "http://main:3100", "--cluster-token", "0123456789abcdef"])
                .unwrap();
        s.validate().unwrap();
    }

    #[test]
    fn main_node_url_must_be_http() {
        let err = serve(&["--main-node-url", "ftp://x"]).unwrap_err().to_string();
        assert!(err.contains("MAIN_NODE_URL"), "{err}");
    }

    #[test]
    fn same_ports_are_refused() {
        let s = serve(&["--port", "4000", "--ui-port", "4000"]).unwrap();
        assert_eq!(s.validate().unwrap_err().variable, "UI_PORT");
    }

    #[test]
    fn license_public_key_defaults_to_the_builtin_one_and_is_checked() {
        assert_eq!(serve(&[]).unwrap().license_public_key, crate::license::BUILTIN_PUBLIC_KEY);
        let (_, public_key) = crate::license::generate_keypair();
        assert_eq!(serve(&["--license-public-key", &public_key]).unwrap().license_public_key, public_key);
        // A key is base64url: 1 in 64 starts with '-', and is still the option's value (a
        // random key above made this test fail that often).
        let dashed =
            std::iter::repeat_with(|| crate::license::generate_keypair().1).find(|key| key.starts_with('-')).unwrap();
        assert_eq!(serve(&["--license-public-key", &dashed]).unwrap().license_public_key, dashed);
        let err = serve(&["--license-public-key", "AAAA"]).unwrap_err().to_string();
        assert!(err.contains("LICENSE_PUBLIC_KEY"), "{err}");
    }

    #[test]
    fn library_roots_are_a_comma_separated_list_of_absolute_folders() {
        assert!(serve(&[]).unwrap().library_roots.is_empty());
        let s = serve(&["--library-roots", "/media, /srv/video"]).unwrap();
        assert_eq!(s.library_roots, [PathBuf::from("/media"), PathBuf::from("/srv/video")]);
        let err = serve(&["--library-roots", "/media,films"]).unwrap_err().to_string();
        assert!(err.contains("LIBRARY_ROOTS") && err.contains("films"), "{err}");
    }

    #[test]
    fn the_health_recheck_is_hourly_unless_set_within_a_minute_and_a_day() {
        assert_eq!(serve(&[]).unwrap().health_recheck_minutes, 60);
        assert_eq!(serve(&["--health-recheck-minutes", "1"]).unwrap().health_recheck_minutes, 1);
        assert_eq!(serve(&["--health-recheck-minutes", "1440"]).unwrap().health_recheck_minutes, 1440);
        for refused in ["0", "1441", "hourly"] {
            let err = serve(&["--health-recheck-minutes", refused]).unwrap_err().to_string();
            assert!(err.contains("HEALTH_RECHECK_MINUTES"), "{refused}: {err}");
        }
    }

    #[test]
    fn shared_storage_is_auto_unless_required() {
        assert_eq!(serve(&[]).unwrap().shared_storage, SharedStorage::Auto);
        assert_eq!(serve(&["--shared-storage", "required"]).unwrap().shared_storage, SharedStorage::Required);
        assert_eq!(serve(&["--shared-storage", " Required "]).unwrap().shared_storage, SharedStorage::Required);
        assert_eq!(serve(&["--shared-storage", "auto"]).unwrap().shared_storage, SharedStorage::Auto);
        let err = serve(&["--shared-storage", "never"]).unwrap_err().to_string();
        assert!(err.contains("SHARED_STORAGE") && err.contains("never"), "{err}");
    }

    #[test]
    fn work_dir_defaults_to_data_dir_work() {
        let data = std::path::Path::new("/srv/condense");
        assert_eq!(serve(&[]).unwrap().work_dir(data), data.join("work"));
        assert_eq!(serve(&["--work-dir", "/scratch/w"]).unwrap().work_dir(data), PathBuf::from("/scratch/w"));
    }

    #[test]
    fn work_dir_is_made_private_and_only_a_folder_of_ours_is_taken() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // Made, with the folders above it, 0700.
        let work = dir.path().join("data/work");
        prepare_work_dir(&work).unwrap();
        assert_eq!(mode(&work), 0o700);
        // One there already, open to others, is closed to them; its files stay.
        std::fs::write(work.join("kept"), b"x").unwrap();
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare_work_dir(&work).unwrap();
        assert_eq!(mode(&work), 0o700);
        assert!(work.join("kept").exists());
        // A link to a folder, a file: refused, naming WORK_DIR.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&work, &link).unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        for (refused, says) in [(link, "is a link"), (file, "is not a folder")] {
            let err = prepare_work_dir(&refused).unwrap_err();
            assert_eq!(err.variable, "WORK_DIR");
            assert!(err.message.contains(says), "{refused:?}: {err}");
        }
        // Another user's folder (the root folder, unless the tests run as root).
        if rustix::process::geteuid().as_raw() != 0 {
            let err = prepare_work_dir(std::path::Path::new("/")).unwrap_err();
            assert!(err.message.contains("belongs to user 0"), "{err}");
        }
    }

    #[test]
    fn a_private_key_starting_with_a_dash_is_the_options_value() {
        let dashed =
            std::iter::repeat_with(|| crate::license::generate_keypair().0).find(|key| key.starts_with('-')).unwrap();
        let argv = ["condense", "license", "issue", "--private-key", &dashed, "--tier", "PRO", "--licensee", "Ada"];
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::License { command: LicenseCommand::Issue { private_key, .. } } = cli.command else {
            panic!("not license issue: {cli:?}")
        };
        assert_eq!(private_key, dashed);
    }

    #[test]
    fn short_secrets_are_refused() {
        let err = serve(&["--jwt-secret", "short"]).unwrap_err().to_string();
        assert!(err.contains("JWT_SECRET"), "{err}");
    }

    #[test]
    fn database_url_defaults_to_sqlite_under_data_dir() {
        let cli = Cli::try_parse_from(["condense", "--data-dir", "/srv/x", "migrate"]).unwrap();
        assert_eq!(cli.common.database_url(), "sqlite:///srv/x/condense.db?mode=rwc");
        let err = Cli::try_parse_from(["condense", "--database-url", "mysql://x", "migrate"]).unwrap_err().to_string();
        assert!(err.contains("DATABASE_URL"), "{err}");
    }

    #[test]
    fn a_node_identity_is_kept_and_a_garbled_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_node_identity(dir.path()).unwrap(), None);
        store_node_identity(dir.path(), "abc123").unwrap();
        assert_eq!(load_node_identity(dir.path()).unwrap().as_deref(), Some("abc123"));
        store_node_identity(dir.path(), "def456").unwrap();
        assert_eq!(load_node_identity(dir.path()).unwrap().as_deref(), Some("def456"));
        std::fs::write(node_identity_file(dir.path()), "not an id!\n").unwrap();
        assert_eq!(load_node_identity(dir.path()).unwrap_err().variable, "DATA_DIR");
    }
}
