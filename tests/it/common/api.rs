//! The API on a real socket, in the test's process: a main node started by the production
//! `actors::start_node` over a test database (SQLite or PostgreSQL), the production
//! `AppState` and `create_app` on an actix-web `HttpServer` bound to 127.0.0.1:0, a first
//! user, and request helpers over awc.

use actix_web::body::MessageBody;
use actix_web::dev::{ServerHandle, ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::{web, App, HttpServer};
use condense::actors::{HostFacts, MainConfig, MainNode, Node, NodeConfig, RoleConfig};
use condense::host::clock::Clock;
use condense::http::state::ApiConfig;
use condense::{create_app, repo, security, AppState};
use sea_orm::DatabaseConnection;
use serde_json::Value;

use super::db::TestDb;

pub const ADMIN: &str = "admin";
pub const ADMIN_PASSWORD: &str = "correct horse battery staple";
pub const JWT_SECRET: &str = "test-jwt-secret-0123456789abcdef";
pub const CLUSTER_TOKEN: &str = "test-cluster-token-0123456789";

/// A main node named "main" on this database, as `condense serve` starts one: `max_jobs`
/// job slots, each encoded frame followed by a pause of `throttle_ms`, one-second segments,
/// licence keys checked against `public_key`.
pub async fn start_main_node(db: &DatabaseConnection, max_jobs: usize, throttle_ms: u64, public_key: &str) -> MainNode {
    start_main_node_at(db, max_jobs, throttle_ms, public_key, Clock::system()).await
}

/// The node's log (debug for condense, warnings for the crates under it) goes to the test's
/// output, which nextest shows when the test fails: a failure under load is read from it.
fn log_to_the_test() {
    let filter = tracing_subscriber::EnvFilter::new("warn,condense=debug");
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// As `start_main_node`, its encoding windows read with `clock`.
pub async fn start_main_node_at(
    db: &DatabaseConnection,
    max_jobs: usize,
    throttle_ms: u64,
    public_key: &str,
    clock: Clock,
) -> MainNode {
    log_to_the_test();
    let config = NodeConfig {
        name: "main".into(),
        host: HostFacts {
            address: "127.0.0.1".into(),
            gpu: None,
            cores: 2,
            memory_total: 1 << 30,
            encoders: vec!["libx265".into()],
            decoders: vec![],
        },
        max_jobs,
        transcoder: super::server::media_binary().into(),
        segment_seconds: 1.0,
        parallel_segments: condense::domain::segments::Parallelism::Auto,
        throttle_ms_per_frame: throttle_ms,
        analysis_timeout: std::time::Duration::from_secs(300),
        role: RoleConfig::Main(MainConfig {
            db: db.clone(),
            settle: std::time::Duration::from_secs(2),
            previous_run_crashed: false,
            own_heartbeat: None,
            heartbeat: std::time::Duration::from_secs(1),
            node_timeout: std::time::Duration::from_secs(4),
            license_public_key: public_key.into(),
            clock,
            // As `condense serve` by default: tests move a manual clock past it.
            health_recheck: std::time::Duration::from_secs(60 * 60),
        }),
    };
    match condense::actors::start_node(config).await.unwrap() {
        Node::Main(node) => *node,
        Node::Linked(_) => unreachable!("a main node's config starts a main node"),
    }
}

pub struct TestServer {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub base: String,
    pub state: web::Data<AppState>,
    /// Private half of the key pair whose public half is the server's licence public key.
    pub license_private_key: String,
    handle: ServerHandle,
    test_db: TestDb,
    _data_dir: tempfile::TempDir,
}

/// The one peer whose X-Forwarded-For a `TestServer` believes.
pub const TRUSTED_PROXY: &str = "127.0.0.2";

impl TestServer {
    pub async fn sqlite() -> TestServer {
        TestServer::start(TestDb::sqlite().await).await
    }

    /// None (and a SKIPPED line) where no PostgreSQL server answers.
    pub async fn postgres(test: &str) -> Option<TestServer> {
        Some(TestServer::start(TestDb::postgres(test).await?).await)
    }

    /// A server that runs no encodes (its node has no job slots): jobs a test inserts stay
    /// as they are.
    pub async fn start(test_db: TestDb) -> TestServer {
        TestServer::with_runtime(test_db, 0, 0, Clock::system()).await
    }

    /// A server that encodes one job at a time, pausing `throttle_ms` after each frame so a
    /// test can act on a job while it runs.
    pub async fn start_throttled(test_db: TestDb, throttle_ms: u64) -> TestServer {
        TestServer::with_runtime(test_db, 1, throttle_ms, Clock::system()).await
    }

    /// As `start_throttled`, with the encoding windows read from `clock` (a manual one the
    /// test sets).
    pub async fn start_with_clock(test_db: TestDb, throttle_ms: u64, clock: Clock) -> TestServer {
        TestServer::with_runtime(test_db, 1, throttle_ms, clock).await
    }

    async fn with_runtime(test_db: TestDb, slots: usize, throttle_ms: u64, clock: Clock) -> TestServer {
        // DATA_DIR of this server, for the library path rules (nothing is written there).
        let data_dir = tempfile::tempdir().unwrap();
        let hash = security::hash_password(ADMIN_PASSWORD).unwrap();
        repo::users::create(&test_db.db, ADMIN, &hash, condense::domain::access::UserRole::Admin).await.unwrap();
        let (license_private_key, license_public_key) = condense::license::generate_keypair();
        let node = start_main_node_at(&test_db.db, slots, throttle_ms, &license_public_key, clock).await;
        let state = web::Data::new(AppState::new(
            &node,
            ApiConfig {
                jwt_secret: JWT_SECRET.into(),
                token_ttl_hours: 12,
                session_max_hours: 720,
                // The throttling tests connect from 127.0.0.2 as a proxy; other clients
                // connect from 127.0.0.1.
                trusted_proxies: vec![TRUSTED_PROXY.parse().unwrap()],
                cluster_token: Some(CLUSTER_TOKEN.into()),
                library_places: condense::http::library_places::LibraryPlaces {
                    data_dir: Some(data_dir.path().to_path_buf()),
                    roots: Vec::new(),
                },
            },
        ));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app_state = state.clone();
        let handle = serve(listener, move || create_app(app_state.clone()));
        TestServer { base, state, license_private_key, handle, test_db, _data_dir: data_dir }
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.test_db.db
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The job with its history, as `GET /jobs/{id}` answers it.
    pub async fn job(&self, token: &str, id: i64) -> Value {
        self.get(&format!("/jobs/{id}"), Some(token)).await.1
    }

    /// The job once it is in one of `statuses` (fails the test after 180 s, naming every
    /// job's state: the one waited for is often held up by another).
    pub async fn wait_for(&self, token: &str, id: i64, statuses: &[&str]) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
        loop {
            let job = self.job(token, id).await;
            if statuses.iter().any(|s| job["status"] == *s) {
                return job;
            }
            if std::time::Instant::now() >= deadline {
                let others: Vec<String> = self
                    .jobs(token)
                    .await
                    .iter()
                    .map(|j| format!("{} {} {} {} on {}", j["id"], j["fileName"], j["status"], j["stage"], j["node"]))
                    .collect();
                panic!("job {id} never reached {statuses:?}: {job}\nevery job: {others:#?}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Every job, by file name, as `GET /jobs` lists them.
    pub async fn jobs(&self, token: &str) -> Vec<Value> {
        let (status, page) = self.get("/jobs?pageSize=500&sort=fileName&order=asc", Some(token)).await;
        assert_eq!(status, 200, "{page}");
        page["items"].as_array().cloned().unwrap_or_default()
    }

    /// The one job of a fresh server, once it is in one of `statuses` (fails the test after
    /// 120 s).
    pub async fn the_job_once(&self, token: &str, statuses: &[&str]) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let (_, page) = self.get("/jobs", Some(token)).await;
            if let Some(id) = page["items"][0]["id"].as_i64() {
                let job = self.job(token, id).await;
                if statuses.iter().any(|s| job["status"] == *s) {
                    return job;
                }
                assert!(std::time::Instant::now() < deadline, "never {statuses:?}: {job}");
            }
            assert!(std::time::Instant::now() < deadline, "no job");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// A library over `dir` that encodes fast (x265 ultrafast, CRF 30) and does not watch:
    /// its id.
    pub async fn library(&self, token: &str, dir: &std::path::Path) -> i64 {
        self.library_with(token, dir, serde_json::json!({})).await
    }

    /// As `library`, with the fields of `extra` set over those.
    pub async fn library_with(&self, token: &str, dir: &std::path::Path, extra: Value) -> i64 {
        let mut body = serde_json::json!({"name": "films", "paths": [dir], "encoder": "libx265", "quality": 30, "preset": "ultrafast", "watch": false});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (status, library) = self.post("/libraries", Some(token), &body).await;
        assert_eq!(status, 201, "{library}");
        library["id"].as_i64().unwrap()
    }

    /// Scans the library, then answers every job's file name and id, by file name.
    pub async fn scan(&self, token: &str, library: i64) -> Vec<(String, i64)> {
        let (status, report) =
            self.post(&format!("/libraries/{library}/scan"), Some(token), &serde_json::json!({})).await;
        assert_eq!(status, 200, "{report}");
        self.jobs(token)
            .await
            .iter()
            .map(|j| (j["fileName"].as_str().unwrap().to_string(), j["id"].as_i64().unwrap()))
            .collect()
    }

    /// A token for the first user.
    pub async fn login(&self) -> String {
        let (status, body) = self.login_as(ADMIN, ADMIN_PASSWORD).await;
        assert_eq!(status, 200, "{body}");
        body["token"].as_str().unwrap().to_string()
    }

    /// POST /auth/login with these credentials: status and body.
    pub async fn login_as(&self, username: &str, password: &str) -> (u16, Value) {
        self.post("/auth/login", None, &serde_json::json!({ "username": username, "password": password })).await
    }

    /// Any request; `body` is sent as JSON. Answers the status and the body as JSON (Null
    /// when empty or not JSON).
    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
        let (status, _, bytes) = match body {
            Some(json) => {
                self.send(method, path, token, Some(("application/json", serde_json::to_vec(json).unwrap()))).await
            }
            None => self.send(method, path, token, None).await,
        };
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// A request with a raw body of the given content type: status, headers, body bytes.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<(&str, Vec<u8>)>,
    ) -> (u16, awc::http::header::HeaderMap, Vec<u8>) {
        let mut request = awc::Client::default().request(method, self.url(path));
        if let Some(token) = token {
            request = request.insert_header(("Authorization", format!("Bearer {token}")));
        }
        let mut response = match body {
            Some((content_type, bytes)) => {
                request.insert_header(("Content-Type", content_type)).send_body(bytes).await.unwrap()
            }
            None => request.send().await.unwrap(),
        };
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.body().limit(16 << 20).await.unwrap().to_vec();
        (status, headers, bytes)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        self.call(Method::GET, path, token, None).await
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        self.call(Method::POST, path, token, Some(body)).await
    }

    pub async fn put(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        self.call(Method::PUT, path, token, Some(body)).await
    }

    pub async fn delete(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        self.call(Method::DELETE, path, token, None).await
    }

    /// Stops the server and drops the test database.
    pub async fn finish(self) {
        self.handle.stop(false).await;
        self.test_db.finish().await;
    }
}

/// Runs `async fn $name(server: &TestServer)` against a TestServer on SQLite and on
/// PostgreSQL, as the tests `$name::sqlite` and `$name::postgres`.
#[macro_export]
macro_rules! api_test_on_both_databases {
    ($name:ident) => {
        mod $name {
            #[actix_web::test]
            async fn sqlite() {
                let server = $crate::common::api::TestServer::sqlite().await;
                super::$name(&server).await;
                server.finish().await;
            }

            #[actix_web::test]
            async fn postgres() {
                let test = concat!(module_path!(), "::postgres");
                let Some(server) = $crate::common::api::TestServer::postgres(test).await else { return };
                super::$name(&server).await;
                server.finish().await;
            }
        }
    };
    // As above, the node's clock a manual one showing `$at` (RFC 3339), which the test
    // moves with `server.state.clock.set`.
    ($name:ident, clock = $at:literal) => {
        mod $name {
            #[actix_web::test]
            async fn sqlite() {
                let clock = condense::host::clock::Clock::manual($at.parse().unwrap());
                let test_db = $crate::common::db::TestDb::sqlite().await;
                let server = $crate::common::api::TestServer::start_with_clock(test_db, 0, clock).await;
                super::$name(&server).await;
                server.finish().await;
            }

            #[actix_web::test]
            async fn postgres() {
                let test = concat!(module_path!(), "::postgres");
                let Some(test_db) = $crate::common::db::TestDb::postgres(test).await else { return };
                let clock = condense::host::clock::Clock::manual($at.parse().unwrap());
                let server = $crate::common::api::TestServer::start_with_clock(test_db, 0, clock).await;
                super::$name(&server).await;
                server.finish().await;
            }
        }
    };
}

/// The two mounts of the API: bare, and under /api.
pub const PREFIXES: [&str; 2] = ["", "/api"];

/// A concrete path for an endpoint's pattern (`endpoints()`), naming resources that do not
/// exist.
pub fn concrete(path: &str) -> String {
    path.replace("{id}", "999999").replace("{username}", "nobody")
}

/// The code of an error answer, `{"error":{"code"}}` (fails the test when there is none).
pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_else(|| panic!("no error code in {body}"))
}

/// The message of an error answer, `{"error":{"message"}}` (fails the test when there is
/// none).
pub fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_else(|| panic!("no error message in {body}"))
}

/// The message of a job's last failed attempt (its events carry it).
pub fn failure_message(job: &Value) -> String {
    let events = job["events"].as_array().cloned().unwrap_or_default();
    events.iter().rev().find_map(|e| e["detail"]["message"].as_str().map(str::to_string)).unwrap_or_default()
}

/// Serves the app that `factory` makes on `listener`, in this test's runtime, on one worker
/// that stops within a second: the in-process servers of the tests (the API, loopback
/// receivers of outside services).
pub fn serve<F, T, B>(listener: std::net::TcpListener, factory: F) -> ServerHandle
where
    F: Fn() -> App<T> + Send + Clone + 'static,
    T: ServiceFactory<
            ServiceRequest,
            Config = (),
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
    B: MessageBody + 'static,
{
    let server =
        HttpServer::new(factory).workers(1).disable_signals().shutdown_timeout(1).listen(listener).unwrap().run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    handle
}
