//! Shared pieces: errors as strings, temp folders, the ffmpeg program, memory of a process,
//! percentiles, and a `condense serve` child process.

use std::collections::VecDeque;
use std::fmt::Display;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A measuring tool: errors are messages for the person running it.
pub type Res<T> = Result<T, String>;

pub trait Ctx<T> {
    fn ctx(self, what: &str) -> Res<T>;
}

impl<T, E: Display> Ctx<T> for Result<T, E> {
    fn ctx(self, what: &str) -> Res<T> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

impl<T> Ctx<T> for Option<T> {
    fn ctx(self, what: &str) -> Res<T> {
        self.ok_or_else(|| what.to_string())
    }
}

/// Password of the first user of every server the benchmarks start.
pub const PASSWORD: &str = "benchmark-password";

/// A folder removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(base: &Path, name: &str) -> Res<TempDir> {
        let path = base.join(format!("condense-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).ctx(&format!("creating {}", path.display()))?;
        Ok(TempDir(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `ffmpeg -v error -y ARGS` and answers its wall time.
pub fn ffmpeg(args: &[&str]) -> Res<Duration> {
    ffmpeg_on(args, None)
}

/// Runs `cmd` pinned to one CPU: the affinity is set in the child before it execs, so
/// every thread it makes inherits it (what `taskset -c CPU` does).
pub fn pin(cmd: &mut Command, cpu: usize) {
    use std::os::unix::process::CommandExt;
    // SAFETY: sched_setaffinity on the calling (forked) process with a set we own; it is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Confines process `pid`, all its threads and the children it makes from now on, to `cpu`,
/// through a cpuset cgroup (v1 where mounted, else v2). CPU affinity alone is not enough:
/// x265 (built with libnuma, as Debian's is) gives its worker threads the affinity of the
/// whole NUMA node, so under `taskset -c 0` its threads ran on both cores (seen here: 10.6 s
/// of CPU in 9.1 s of wall time); a cpuset bounds that call too.
pub fn confine(pid: u32, cpu: usize) -> Res<()> {
    let v1 = Path::new("/sys/fs/cgroup/cpuset");
    let v2 = Path::new("/sys/fs/cgroup");
    let base = if v1.join("cpuset.cpus").exists() {
        v1.to_path_buf()
    } else {
        let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == "cpuset") {
            return Err("no cpuset cgroup to confine a process to one core (needs cgroup v1's cpuset or v2's cpuset controller, and root)".into());
        }
        std::fs::write(v2.join("cgroup.subtree_control"), "+cpuset").ctx("enabling the cpuset controller")?;
        v2.to_path_buf()
    };
    let dir = base.join(format!("condense-bench-cpu{cpu}"));
    std::fs::create_dir_all(&dir).ctx("creating a cpuset cgroup (needs root)")?;
    let mems = std::fs::read_to_string(base.join("cpuset.mems"))
        .or_else(|_| std::fs::read_to_string(base.join("cpuset.mems.effective")))
        .unwrap_or_else(|_| "0".into());
    std::fs::write(dir.join("cpuset.cpus"), cpu.to_string()).ctx("setting the cgroup's cpus")?;
    std::fs::write(dir.join("cpuset.mems"), mems.trim()).ctx("setting the cgroup's memory nodes")?;
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).ctx("moving a process into the cgroup")?;
    Ok(())
}

/// `ffmpeg`, confined to `cpu` when given.
pub fn ffmpeg_on(args: &[&str], cpu: Option<usize>) -> Res<Duration> {
    let started = Instant::now();
    let mut cmd = Command::new("ffmpeg");
    if let Some(cpu) = cpu {
        pin(&mut cmd, cpu);
    }
    cmd.args(["-nostdin", "-v", "error", "-y"]).args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().ctx("running ffmpeg")?;
    if let Some(cpu) = cpu {
        confine(child.id(), cpu)?;
    }
    let out = child.wait_with_output().ctx("running ffmpeg")?;
    let took = started.elapsed();
    if !out.status.success() {
        return Err(format!("ffmpeg {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(took)
}

/// Memory of a process, from /proc/PID/status, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mem {
    pub rss_kb: u64,
    pub anon_kb: u64,
    pub file_kb: u64,
    pub hwm_kb: u64,
}

impl Mem {
    pub fn of(pid: &str) -> Res<Mem> {
        let text =
            std::fs::read_to_string(format!("/proc/{pid}/status")).ctx(&format!("reading /proc/{pid}/status"))?;
        let field = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(Mem {
            rss_kb: field("VmRSS:"),
            anon_kb: field("RssAnon:"),
            file_kb: field("RssFile:"),
            hwm_kb: field("VmHWM:"),
        })
    }

    pub fn of_pid(pid: u32) -> Res<Mem> {
        Mem::of(&pid.to_string())
    }

    /// "66.1 MiB (anon 17.0, file 49.1)"
    pub fn describe(&self) -> String {
        format!("{} (anon {:.1}, file {:.1})", mib(self.rss_kb), kib_to_mib(self.anon_kb), kib_to_mib(self.file_kb))
    }
}

pub fn kib_to_mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

pub fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kib_to_mib(kb))
}

/// CPU time of a process and of its children it has waited for (user + system), seconds.
pub fn cpu_seconds_of(pid: u32) -> Res<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ctx("reading /proc/PID/stat")?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14,
    // stime 15, cutime 16, cstime 17.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ctx("/proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = (11..15).map(|i| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)).sum();
    Ok(ticks as f64 / clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// CPU time (user + system) of the children this process has waited for, seconds.
pub fn children_cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(usage.ru_utime) + s(usage.ru_stime)
}

/// 100000 -> "100,000"
pub fn thousands(n: impl Into<u64>) -> String {
    let digits = n.into().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The `p`th percentile (0-100) of sorted values, nearest rank.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Microseconds since the Unix epoch: a timestamp two processes on one machine share.
pub fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// `condense serve` as a child process on loopback with a clean environment; killed when
/// dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT` of the API listener.
    pub addr: String,
    lines: Arc<Mutex<VecDeque<String>>>,
}

fn collect(stream: impl std::io::Read + Send + 'static, lines: Arc<Mutex<VecDeque<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut l) = lines.lock() {
                if l.len() == 400 {
                    l.pop_front();
                }
                l.push_back(line);
            }
        }
    });
}

impl Server {
    /// Starts `BIN serve` with DATA_DIR=`data_dir`, ports chosen by the system, the first
    /// user `admin` with [`PASSWORD`], plus `env`; waits until it listens.
    pub fn start(bin: &Path, data_dir: &Path, env: &[(&str, String)]) -> Res<Server> {
        Self::start_on(bin, data_dir, env, None)
    }

    /// `start`, the process (and every thread and child it makes) confined to `cpu` (see
    /// `confine`).
    pub fn start_on(bin: &Path, data_dir: &Path, env: &[(&str, String)], cpu: Option<usize>) -> Res<Server> {
        Self::start_command(Command::new(bin), true, data_dir, env, cpu)
    }

    /// `start_on`, in a mount namespace of its own where an empty tmpfs hides `hidden` (a
    /// machine that does not mount the library). Needs the right to mount (root).
    pub fn start_blind(
        bin: &Path,
        data_dir: &Path,
        env: &[(&str, String)],
        hidden: &Path,
        cpu: Option<usize>,
    ) -> Res<Server> {
        let mut cmd = Command::new("unshare");
        let script = format!("mount -t tmpfs tmpfs '{}' && exec \"$0\" serve", hidden.display());
        cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]).arg(bin);
        Self::start_command(cmd, false, data_dir, env, cpu)
    }

    /// Starts `cmd` (the binary, `add_serve`; or a wrapper that execs it with `serve`) as
    /// `start_on` describes.
    fn start_command(
        mut cmd: Command,
        add_serve: bool,
        data_dir: &Path,
        env: &[(&str, String)],
        cpu: Option<usize>,
    ) -> Res<Server> {
        std::fs::create_dir_all(data_dir).ctx("creating DATA_DIR")?;
        if let Some(cpu) = cpu {
            pin(&mut cmd, cpu);
        }
        for var in [
            "ROLE",
            "DATABASE_URL",
            "MAIN_NODE_URL",
            "JWT_SECRET",
            "ADMIN_USERNAME",
            "CLUSTER_TOKEN",
            "NODE_NAME",
            "LICENSE_KEY",
            "LICENSE_PUBLIC_KEY",
            "LOG_LEVEL",
            "MAX_JOBS",
            "SEGMENT_SECONDS",
            "PARALLEL_SEGMENTS",
            "HTTP_WORKERS",
        ] {
            cmd.env_remove(var);
        }
        if add_serve {
            cmd.arg("serve");
        }
        cmd.current_dir(data_dir)
            .env("DATA_DIR", data_dir)
            .env("BIND", "127.0.0.1")
            .env("PORT", "0")
            .env("UI_PORT", "0")
            .env("NODE_NAME", "bench")
            .env("ADMIN_PASSWORD", PASSWORD)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in env {
            cmd.env(name, value);
        }
        let mut child = cmd.spawn().ctx(&format!("starting {:?}", cmd.get_program()))?;
        if let Some(cpu) = cpu {
            if let Err(e) = confine(child.id(), cpu) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = child.stdout.take() {
            collect(out, lines.clone());
        }
        if let Some(err) = child.stderr.take() {
            collect(err, lines.clone());
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let found = lines.lock().ok().and_then(|l| l.iter().find(|l| l.contains("listening")).cloned());
            if let Some(line) = found {
                let addr = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("api_addr="))
                    .ctx("no api_addr in the listening line")?
                    .to_string();
                return Ok(Server { child, addr, lines });
            }
            if let Ok(Some(status)) = child.try_wait() {
                let tail = lines.lock().map(|l| l.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default();
                return Err(format!("condense serve exited with {status} before listening:\n{tail}"));
            }
            if Instant::now() > deadline {
                return Err("condense serve did not listen within 120 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn mem(&self) -> Res<Mem> {
        Mem::of_pid(self.pid())
    }

    /// The last lines the server wrote.
    pub fn tail(&self, n: usize) -> String {
        self.lines
            .lock()
            .map(|l| l.iter().rev().take(n).rev().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
