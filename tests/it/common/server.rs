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
    ] {
        cmd.env_remove(var);
    }
    cmd.env("DATA_DIR", data_dir).env("BIND", "127.0.0.1").env("PORT", "0").env("UI_PORT", "0");
    cmd
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
