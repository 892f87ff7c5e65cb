//! The real `condense` binary as a child process, with its output captured line by line.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The binary under test: `CONDENSE_TEST_BINARY` when set (a copy taken right after the
/// build, so that a rebuild in a shared target folder during a long run cannot swap it),
/// else the one cargo built.
pub fn binary() -> &'static str {
    static BINARY: OnceLock<String> = OnceLock::new();
    BINARY.get_or_init(|| {
        std::env::var("CONDENSE_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_condense").to_string())
    })
}

/// `condense-media` beside the binary under test: the program the server starts for its
/// media work.
pub fn media_binary() -> &'static Path {
    static MEDIA: OnceLock<std::path::PathBuf> = OnceLock::new();
    MEDIA.get_or_init(|| Path::new(binary()).with_file_name(condense::media::worker::MEDIA_BINARY))
}

/// Live children of this test process running `condense-media <subcommand>`.
pub fn own_children(subcommand: &[u8]) -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // "pid (comm) state ppid ...": the fields after the last ')'.
        let mut fields = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let (state, parent) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if parent == me && state != "Z" && cmdline.split(|b| *b == 0).any(|a| a == subcommand) {
            found.push(pid);
        }
    }
    found
}

/// Which nodes' children `media_children` counts.
#[derive(Clone, Copy)]
pub enum Nodes {
    /// The node whose DATA_DIR is the path given.
    At,
    /// Every node whose DATA_DIR lies below the path given.
    Below,
}

/// Pids of the `condense-media <subcommand>` processes of the nodes `nodes` names by their
/// DATA_DIR, `data` (other tests run at the same time).
pub fn media_children(data: &Path, nodes: Nodes, subcommand: &[u8]) -> Vec<i32> {
    let marker = match nodes {
        Nodes::At => format!("DATA_DIR={}", data.display()),
        Nodes::Below => format!("DATA_DIR={}/", data.display()),
    };
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let mut args = cmd.split(|b| *b == 0);
        let exe = args.next().unwrap_or_default();
        if !exe.ends_with(condense::media::worker::MEDIA_BINARY.as_bytes()) || !args.any(|a| a == subcommand) {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let ours = environ.split(|b| *b == 0).any(|v| match nodes {
            Nodes::At => v == marker.as_bytes(),
            Nodes::Below => v.starts_with(marker.as_bytes()),
        });
        if ours {
            found.push(pid);
        }
    }
    found
}

/// A connection to the database of the node whose DATA_DIR is `data` (SQLite, as the node
/// opens it).
pub async fn database_of(data: &Path) -> sea_orm::DatabaseConnection {
    let url = format!("sqlite://{}?mode=rw", data.join("condense.db").display());
    condense::repo::connect(&url).await.unwrap()
}

/// Migrates the database of the node whose DATA_DIR is `data` with `condense migrate`, as
/// before its first start, and answers a connection to it.
pub async fn migrated(data: &Path) -> sea_orm::DatabaseConnection {
    let out = command(data).arg("migrate").output().unwrap();
    assert!(out.status.success(), "migrate: {}", String::from_utf8_lossy(&out.stderr));
    database_of(data).await
}

/// A node's DATA_DIR `dir/data`, migrated, with a library over `dir/media` that holds one
/// H.264 clip of `seconds`, `movie.mkv`: a connection to the database and the clip's
/// resolved path.
pub async fn library_with_clip(dir: &Path, seconds: u32) -> (sea_orm::DatabaseConnection, std::path::PathBuf) {
    let media = dir.join("media");
    std::fs::create_dir_all(&media).unwrap();
    let source = super::media::h264(&media, "movie.mkv", "320x240", seconds);
    let db = migrated(&dir.join("data")).await;
    condense::repo::libraries::create(&db, super::runtime::library(&media, false)).await.unwrap();
    (db, std::fs::canonicalize(source).unwrap())
}

/// A command for the binary with a clean, test-owned environment.
pub fn command(data_dir: &Path) -> Command {
    let mut cmd = Command::new(binary());
    for var in [
        "ROLE",
        "DATABASE_URL",
        "MAIN_NODE_URL",
        "PORT",
        "UI_PORT",
        "JWT_SECRET",
        "ADMIN_USERNAME",
        "ADMIN_PASSWORD",
        "CLUSTER_TOKEN",
        "NODE_NAME",
        "LICENSE_KEY",
        "LICENSE_PUBLIC_KEY",
        "LOG_LEVEL",
        "FRONTEND_DIR",
        "PARALLEL_SEGMENTS",
        "MAX_PIXELS",
        "TRANSCODER_MEMORY_LIMIT_MB",
        "TRANSFER_MBPS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("DATA_DIR", data_dir).env("BIND", "127.0.0.1").env("PORT", "0").env("UI_PORT", "0");
    cmd
}

/// A port free on loopback now, for a node that must listen on the same one across a
/// restart (`PORT`): bound and given back at once; the kernel hands out ephemeral ports in
/// turn, so another test takes it again only after going round them all.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct ServerProcess {
    pub child: Child,
    pub api: String,
    pub ui: String,
    lines: Arc<Mutex<Vec<String>>>,
}

fn collect(stream: impl std::io::Read + Send + 'static, lines: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            lines.lock().unwrap().push(line);
        }
    });
}

fn field(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!("{name}="))? + name.len() + 1;
    Some(line[start..].split_whitespace().next()?.to_string())
}

impl ServerProcess {
    /// Starts `condense serve` and waits until it listens (or fails the test).
    pub fn start(mut cmd: Command) -> ServerProcess {
        cmd.arg("serve").stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        collect(child.stdout.take().unwrap(), lines.clone());
        collect(child.stderr.take().unwrap(), lines.clone());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let listening = lines.lock().unwrap().iter().find(|l| l.contains("listening")).cloned();
            if let Some(line) = listening {
                let line = line.as_str();
                let api = field(line, "api_addr").unwrap();
                let ui = field(line, "ui_addr").unwrap();
                return ServerProcess { child, api: format!("http://{api}"), ui: format!("http://{ui}"), lines };
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("server exited with {status} before listening:\n{}", lines.lock().unwrap().join("\n"));
            }
            assert!(Instant::now() < deadline, "server did not listen in time:\n{}", lines.lock().unwrap().join("\n"));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn output(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Sends a signal and waits for the process to exit.
    pub fn signal_and_wait(&mut self, signal: i32) -> ExitStatus {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, signal) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader threads drain what was written last.
                std::thread::sleep(Duration::from_millis(100));
                return status;
            }
            assert!(Instant::now() < deadline, "server did not stop after signal {signal}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
