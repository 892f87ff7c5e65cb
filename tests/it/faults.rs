//! Fault injection against real processes: the `condense` binary as main and linked nodes,
//! their transcoder children, real clips made with the ffmpeg program, and faults a user's
//! machine meets (a node or an encoder killed at any moment, a full disk, broken, growing and
//! unreadable files). After every run, for every file: the original is byte-identical unless
//! its job COMPLETED and the file at its final path is a verified HEVC; no backup and no
//! partial output is left behind; every job ended within a bound; one transcoder at most
//! ever worked on a job at a time; an original's path was never empty.
//!
//! `CONDENSE_FAULT_RUNS` sets the runs per scenario (default 3), `CONDENSE_SOAK_JOBS` the
//! soak's jobs (default 40), `CONDENSE_FAULT_SEED` replays a printed seed. Each scenario
//! prints `faults: <scenario>: runs N, kills K, files checked F, originals lost L`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use condense::domain::job::{FailureCode, JobStatus};
use condense::media::layout::{backup_path_for, partial_dir_for, PARTIAL_SUFFIX};
use condense::media::plan::{final_path, INPUT_EXTENSIONS};
use condense_media::probe::probe;
use condense_media::verify::{decode_at_points, duration_tolerance};
use entities::job;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sea_orm::DatabaseConnection;

use crate::common::media as clips;
use crate::common::runtime::{all_jobs, library};
use crate::common::server::{command, media_children, migrated, Nodes, ServerProcess};
use crate::common::tmpfs::Tmpfs;
use crate::common::{cluster, license};

/// Bound on every wait for jobs to end once the faults stop: no test can hang.
const FINISH_WITHIN: Duration = Duration::from_secs(240);
/// The main node's timeout for linked nodes: generous enough that a loaded machine does not
/// delay a live node's heartbeats past it (see the known bug at the end).
const NODE_TIMEOUT_SECONDS: &str = "8";
/// A killed node's transcoder must be gone within this (it dies with its parent).
const ORPHAN_GRACE: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// Sizing, seeds, counts

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(default)
}

fn fault_runs() -> usize {
    env_count("CONDENSE_FAULT_RUNS", 3)
}

fn seeded(scenario: &str) -> StdRng {
    let seed = std::env::var("CONDENSE_FAULT_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    println!("faults: {scenario}: seed {seed} (replay with CONDENSE_FAULT_SEED={seed})");
    StdRng::seed_from_u64(seed)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[derive(Debug, Default)]
struct Counts {
    scenario: &'static str,
    runs: usize,
    kills: usize,
    files: usize,
    lost: usize,
    problems: Vec<String>,
    /// Where the work stood at each kill.
    phases: std::collections::BTreeMap<String, usize>,
    /// Transcoder processes the watch saw, and the most it saw at once on one job; helper
    /// processes (`condense-media helper`, spans of a job encoded beside its transcoder).
    transcoders_seen: usize,
    most_per_job: usize,
    helpers_seen: usize,
}

impl Counts {
    fn new(scenario: &'static str) -> Counts {
        Counts { scenario, ..Default::default() }
    }

    fn line(&self) -> String {
        format!(
            "faults: {}: runs {}, kills {}, files checked {}, originals lost {}",
            self.scenario, self.runs, self.kills, self.files, self.lost
        )
    }

    fn problem(&mut self, text: String) {
        println!("faults: {}: PROBLEM: {text}", self.scenario);
        self.problems.push(text);
    }

    /// Ends a run: stops the test at the first run that broke an invariant (the count line
    /// is printed either way).
    fn end_run(&mut self) {
        self.runs += 1;
        if !self.problems.is_empty() || self.lost > 0 {
            println!("{}", self.line());
            panic!("{}: run {} broke the invariants:\n{}", self.scenario, self.runs, self.problems.join("\n"));
        }
    }

    /// For scenarios that encode: the one-transcoder-per-job check must have seen some.
    fn expect_transcoders(&self) {
        assert!(
            self.transcoders_seen > 0,
            "{}: the watch never saw a transcoder; its check saw nothing",
            self.scenario
        );
    }

    fn finish(self) {
        if self.transcoders_seen > 0 {
            println!(
                "faults: {}: transcoders seen {}, at most {} at once on one job; helpers seen {}",
                self.scenario, self.transcoders_seen, self.most_per_job, self.helpers_seen
            );
        }
        if !self.phases.is_empty() {
            let phases: Vec<String> = self.phases.iter().map(|(p, n)| format!("{p} {n}")).collect();
            println!("faults: {}: phases at the kills: {}", self.scenario, phases.join(", "));
        }
        println!("{}", self.line());
        assert_eq!(self.lost, 0, "{:#?}", self.problems);
        assert!(self.problems.is_empty(), "{:#?}", self.problems);
    }
}

// ---------------------------------------------------------------------------------------
// Originals and the invariant

#[derive(Debug, Clone)]
struct Original {
    path: PathBuf,
    bytes: Arc<Vec<u8>>,
    inode: u64,
    /// Duration the probe gives (0 for what is not media).
    duration: f64,
}

impl Original {
    fn target(&self) -> PathBuf {
        final_path(&self.path, "hevc")
    }

    /// The original's place holds something else now (the swap happened).
    fn swapped(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let target = self.target();
        if target != self.path {
            return target.exists();
        }
        std::fs::metadata(&self.path).is_ok_and(|m| m.ino() != self.inode)
    }
}

#[derive(Debug, Clone, Default)]
struct Ledger {
    originals: Vec<Original>,
}

impl Ledger {
    /// Records a file's bytes before any fault touches it.
    fn record(&mut self, path: &Path) {
        use std::os::unix::fs::MetadataExt;
        let bytes = Arc::new(std::fs::read(path).unwrap());
        let inode = std::fs::metadata(path).unwrap().ino();
        let duration = probe(path).ok().and_then(|i| i.duration_seconds).unwrap_or(0.0);
        self.originals.push(Original { path: path.to_path_buf(), bytes, inode, duration });
    }

    fn len(&self) -> usize {
        self.originals.len()
    }
}

/// A verified HEVC: it opens, its video is HEVC, its length is the original's, and it
/// decodes at several points.
fn verified_hevc(path: &Path, duration: f64) -> Result<(), String> {
    let info = probe(path).map_err(|e| format!("probe: {e}"))?;
    let video = info.video().ok_or("no video stream")?;
    if video.codec != "hevc" {
        return Err(format!("video is {}", video.codec));
    }
    let got = info.duration_seconds.unwrap_or(0.0);
    if (got - duration).abs() > duration_tolerance(duration) {
        return Err(format!("duration {got:.2} s, the original has {duration:.2} s"));
    }
    decode_at_points(path, got).map_err(|e| format!("decode: {e}"))
}

fn describe(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) => format!("{} bytes", m.len()),
        Err(e) => format!("unreadable ({e})"),
    }
}

fn job_for<'a>(jobs: &'a [job::Model], original: &Original) -> Option<&'a job::Model> {
    let target = original.target();
    jobs.iter().find(|j| Path::new(&j.file_path) == original.path || Path::new(&j.file_path) == target)
}

/// Checks every original of the ledger against the invariant; counts files and losses.
async fn check(db: &DatabaseConnection, ledger: &Ledger, keep_originals: bool, counts: &mut Counts) {
    let jobs = all_jobs(db).await;
    let mut expected_names: HashMap<PathBuf, Vec<String>> = HashMap::new();
    for o in &ledger.originals {
        counts.files += 1;
        let target = o.target();
        let job = job_for(&jobs, o);
        let status = job.map_or("no job", status_of);
        let identical = std::fs::read(&o.path).is_ok_and(|now| now == *o.bytes);
        let completed = status == "COMPLETED";
        let replaced = !identical && completed && verified_hevc(&target, o.duration).is_ok();
        if !identical && !replaced {
            counts.lost += 1;
            let why = if completed { verified_hevc(&target, o.duration).err() } else { None };
            counts.problem(format!(
                "ORIGINAL LOST: {} (job {status}, now {}, final path {}: {why:?})",
                o.path.display(),
                describe(&o.path),
                describe(&target)
            ));
        }
        if identical && target != o.path && target.exists() {
            counts.problem(format!("{} is there next to its untouched original (job {status})", target.display()));
        }
        let backup = backup_path_for(&o.path);
        let backup_holds_original = std::fs::read(&backup).is_ok_and(|b| b == *o.bytes);
        match (backup.exists(), keep_originals && replaced) {
            (true, false) => counts.problem(format!("backup left behind: {} (job {status})", backup.display())),
            (true, true) if !backup_holds_original => {
                counts.lost += 1;
                counts.problem(format!("ORIGINAL LOST: the kept backup {} differs", backup.display()));
            }
            (false, true) => {
                counts.lost += 1;
                counts.problem(format!("ORIGINAL LOST: keep-originals is set, no backup of {}", o.path.display()));
            }
            _ => {}
        }
        let terminal = matches!(status, "COMPLETED" | "FAILED" | "SKIPPED" | "CANCELLED");
        if terminal && partial_dir_for(&o.path).exists() {
            counts.problem(format!("partial output left behind by a {status} job: {}", o.path.display()));
        }
        let dir = o.path.parent().unwrap().to_path_buf();
        let names = expected_names.entry(dir).or_default();
        for p in [&o.path, &target] {
            names.push(p.file_name().unwrap().to_string_lossy().into_owned());
        }
        if keep_originals {
            names.push(backup.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    // Nothing else in the library folders: no stray partial output, backup or duplicate.
    for (dir, names) in expected_names {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !names.contains(&name) {
                counts.problem(format!("unexpected {} left in the library", entry.path().display()));
            }
        }
    }
}

/// Where a job's work stood when its node died, from the files and the records left.
fn phase(o: &Original, job: Option<&job::Model>) -> &'static str {
    let status = job.map_or("", status_of);
    let partial = partial_dir_for(&o.path);
    let muxed = std::fs::read_dir(&partial)
        .is_ok_and(|mut d| d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("output."))));
    let linked = backup_path_for(&o.path).exists();
    if terminal(status) {
        if partial.exists() {
            "ended, partial output not yet removed"
        } else {
            "ended"
        }
    } else if o.swapped() {
        if linked {
            "replace: swapped, backup still there"
        } else {
            "replace: swapped, job not yet completed"
        }
    } else if linked {
        "replace: backup linked"
    } else if muxed {
        "muxing or verifying"
    } else if status == "ENCODING" {
        "encoding"
    } else {
        "analysis"
    }
}

/// Records where the work of the node that was killed stood (`node`: None for any node).
async fn record_phases(db: &DatabaseConnection, ledger: &Ledger, node: Option<&str>, counts: &mut Counts) -> String {
    let jobs = all_jobs(db).await;
    let mut seen = Vec::new();
    for o in &ledger.originals {
        let Some(j) = job_for(&jobs, o) else { continue };
        let running = matches!(status_of(j), "ANALYZING" | "ENCODING");
        let on_victim = node.is_none_or(|n| j.node_name.as_deref() == Some(n));
        if (running && on_victim) || (terminal(status_of(j)) && partial_dir_for(&o.path).exists()) {
            let p = phase(o, Some(j));
            *counts.phases.entry(p.to_string()).or_default() += 1;
            seen.push(format!("{}: {p}", j.file_name));
        }
    }
    if seen.is_empty() {
        *counts.phases.entry("between jobs".to_string()).or_default() += 1;
        seen.push("between jobs".into());
    }
    seen.join(", ")
}

fn status_of(job: &job::Model) -> &'static str {
    JobStatus::from(job.status).as_str()
}

fn terminal(status: &str) -> bool {
    matches!(status, "COMPLETED" | "FAILED" | "SKIPPED" | "CANCELLED")
}

fn summary(jobs: &[job::Model]) -> Vec<String> {
    jobs.iter()
        .map(|j| {
            format!(
                "{} {} stage={:?} node={:?} retries={} reason={:?} detail={:?}",
                j.file_name,
                status_of(j),
                j.stage,
                j.node_name,
                j.retry_count,
                j.failure_reason,
                j.failure_detail
            )
        })
        .collect()
}

fn tail(servers: &[&ServerProcess]) -> String {
    servers
        .iter()
        .map(|s| s.output().iter().rev().take(25).rev().cloned().collect::<Vec<_>>().join("\n"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Waits until `n` jobs exist and all have ended; a job still running after the bound is
/// stuck and fails the test.
async fn wait_terminal(db: &DatabaseConnection, n: usize, servers: &[&ServerProcess]) -> Vec<job::Model> {
    wait_terminal_within(db, n, FINISH_WITHIN, servers).await
}

async fn wait_terminal_within(
    db: &DatabaseConnection,
    n: usize,
    limit: Duration,
    servers: &[&ServerProcess],
) -> Vec<job::Model> {
    let deadline = Instant::now() + limit;
    loop {
        let jobs = all_jobs(db).await;
        if jobs.len() == n && jobs.iter().all(|j| terminal(status_of(j))) {
            return jobs;
        }
        assert!(
            Instant::now() < deadline,
            "STUCK: jobs did not end within {limit:?}: {:#?}\n{}",
            summary(&jobs),
            tail(servers)
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

fn expect_status(counts: &mut Counts, jobs: &[job::Model], original: &Original, status: &str) {
    let name = original.path.display();
    match job_for(jobs, original) {
        Some(j) if status_of(j) == status => {}
        Some(j) => counts.problem(format!("{name}: expected {status}, got {}", summary(std::slice::from_ref(j))[0])),
        None => counts.problem(format!("{name}: no job")),
    }
}

fn expect_all(counts: &mut Counts, jobs: &[job::Model], ledger: &Ledger, status: &str) {
    for o in &ledger.originals {
        expect_status(counts, jobs, o, status);
    }
}

// ---------------------------------------------------------------------------------------
// Transcoders seen through /proc, and a watch over the run

/// Where an open file of a transcoder points: the source it works on. The partial folder's
/// lock file does not count: a transcoder that finds the lock held exits at once having
/// opened nothing else (a busy start), and one that holds it has the source open too.
fn source_of(open: &Path) -> Option<PathBuf> {
    if open.file_name().is_some_and(|n| n == condense::media::layout::LOCK_FILE) {
        return None;
    }
    for ancestor in open.ancestors() {
        let name = ancestor.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(stem) = name.strip_prefix('.').and_then(|n| n.strip_suffix(PARTIAL_SUFFIX)) {
            return Some(ancestor.with_file_name(stem));
        }
    }
    let name = open.file_name()?.to_str()?;
    let ext = open.extension()?.to_str()?.to_ascii_lowercase();
    (!name.starts_with('.') && INPUT_EXTENSIONS.contains(&ext.as_str())).then(|| open.to_path_buf())
}

#[derive(Debug, Clone)]
struct TranscoderProc {
    pid: i32,
    source: Option<PathBuf>,
}

/// `condense-media transcode` processes of the nodes whose DATA_DIR lies under `root` (other
/// tests run at the same time), each with the source its open files name.
fn transcoders(root: &Path) -> Vec<TranscoderProc> {
    children(root, b"transcode")
}

/// `condense-media SUBCOMMAND` processes of the nodes whose DATA_DIR lies under `root`.
fn children(root: &Path, subcommand: &[u8]) -> Vec<TranscoderProc> {
    let opened = |pid: i32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .find_map(|target| source_of(&target))
    };
    media_children(root, Nodes::Below, subcommand)
        .into_iter()
        .map(|pid| TranscoderProc { pid, source: opened(pid) })
        .collect()
}

/// Waits until no transcoder of the node whose DATA_DIR is `data` is left.
async fn no_orphan_transcoder(data: &Path, counts: &mut Counts) {
    let deadline = Instant::now() + ORPHAN_GRACE;
    let root = data.parent().unwrap();
    let name = data.file_name().unwrap().to_string_lossy().into_owned();
    let marker = format!("DATA_DIR={}", data.display());
    loop {
        // A helper (spans of a job beside its transcoder) must die with its node as well.
        let left: Vec<_> = transcoders(root)
            .into_iter()
            .chain(children(root, b"helper"))
            .filter(|t| {
                let environ = std::fs::read(format!("/proc/{}/environ", t.pid)).unwrap_or_default();
                environ.split(|b| *b == 0).any(|v| v == marker.as_bytes())
            })
            .collect();
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            counts.problem(format!("a transcoder outlived its node {name}: {left:?}"));
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(Debug, Default)]
struct WatchReport {
    /// Most transcoders seen working on one source at one moment.
    most_per_job: usize,
    worst: String,
    transcoders_seen: usize,
    helpers_seen: usize,
    /// Originals whose path (and final path) was empty at some moment.
    missing: Vec<String>,
}

/// Samples, for the whole run, the transcoders of the test's nodes and the originals'
/// paths, in a thread of its own.
struct Watch {
    stop: Arc<AtomicBool>,
    paths: Arc<Mutex<Vec<(PathBuf, PathBuf)>>>,
    thread: Option<JoinHandle<WatchReport>>,
}

impl Watch {
    fn start(root: &Path, ledger: &Ledger) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let paths: Arc<Mutex<Vec<(PathBuf, PathBuf)>>> =
            Arc::new(Mutex::new(ledger.originals.iter().map(|o| (o.path.clone(), o.target())).collect()));
        let (stop_flag, watched_paths) = (stop.clone(), paths.clone());
        let root = root.to_path_buf();
        let thread = std::thread::spawn(move || {
            let (stop, paths) = (stop_flag, watched_paths);
            let mut report = WatchReport::default();
            let mut seen = std::collections::HashSet::new();
            let mut helpers = std::collections::HashSet::new();
            let mut round = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let watched = paths.lock().unwrap().clone();
                for (path, target) in &watched {
                    if !path.exists() && !target.exists() && !report.missing.contains(&path.display().to_string()) {
                        report.missing.push(path.display().to_string());
                    }
                }
                if round.is_multiple_of(8) {
                    helpers.extend(children(&root, b"helper").into_iter().map(|h| h.pid));
                    let running = transcoders(&root);
                    let mut per_source: HashMap<PathBuf, Vec<i32>> = HashMap::new();
                    for t in &running {
                        seen.insert(t.pid);
                        if let Some(s) = &t.source {
                            per_source.entry(s.clone()).or_default().push(t.pid);
                        }
                    }
                    for (source, pids) in per_source {
                        if pids.len() > report.most_per_job {
                            report.most_per_job = pids.len();
                            report.worst = format!("{}: pids {pids:?}", source.display());
                        }
                    }
                }
                round += 1;
                std::thread::sleep(Duration::from_micros(2000 + 40 * watched.len() as u64));
            }
            report.transcoders_seen = seen.len();
            report.helpers_seen = helpers.len();
            report
        });
        Watch { stop, paths, thread: Some(thread) }
    }

    fn add(&self, o: &Original) {
        self.paths.lock().unwrap().push((o.path.clone(), o.target()));
    }

    fn finish(mut self, counts: &mut Counts) -> WatchReport {
        self.stop.store(true, Ordering::SeqCst);
        let report = self.thread.take().unwrap().join().unwrap();
        if report.most_per_job > 1 {
            counts.problem(format!("{} transcoders at once for one job: {}", report.most_per_job, report.worst));
        }
        for path in &report.missing {
            counts.problem(format!("the original's path was empty at some moment: {path}"));
        }
        counts.transcoders_seen += report.transcoders_seen;
        counts.helpers_seen += report.helpers_seen;
        counts.most_per_job = counts.most_per_job.max(report.most_per_job);
        report
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------
// Kill moments

/// When to kill: each kind aims at one phase of a job, with a random offset into it.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// A delay after the node listens: anywhere from the scan to the last replace.
    After(Duration),
    /// Once a job is seen ANALYZING (validation of the source).
    Analyzing,
    /// Once a partial output's manifest lists this many finished segments (encoding).
    Segments(usize, Duration),
    /// Once a partial folder holds the muxed output (muxing, verification).
    Muxing(Duration),
    /// Once an original has its backup link (inside the replace step).
    BackupLinked(Duration),
    /// Once an original's path holds the new file (between the swap and the job's end).
    Swapped(Duration),
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Moment {
    fn pick(rng: &mut StdRng, span: Duration) -> Moment {
        let span = u64::try_from(span.as_millis()).unwrap_or(u64::MAX).max(1);
        match rng.gen_range(0..6) {
            0 => Moment::After(ms(rng.gen_range(0..span))),
            1 => Moment::Analyzing,
            2 => Moment::Segments(rng.gen_range(1..=3), ms(rng.gen_range(0..500))),
            3 => Moment::Muxing(ms(rng.gen_range(0..80))),
            4 => Moment::BackupLinked(Duration::from_micros(rng.gen_range(0..3000))),
            _ => Moment::Swapped(ms(rng.gen_range(0..40))),
        }
    }

    fn offset(&self) -> Duration {
        match *self {
            Moment::After(_) | Moment::Analyzing => Duration::ZERO,
            Moment::Segments(_, d) | Moment::Muxing(d) | Moment::BackupLinked(d) | Moment::Swapped(d) => d,
        }
    }

    /// Whether the moment came, and for which original. `analyzing` names a source the
    /// test saw ANALYZING in the records.
    fn reached(
        &self,
        originals: &[Original],
        since: Instant,
        analyzing: &Mutex<Option<PathBuf>>,
    ) -> Option<Option<PathBuf>> {
        let hit = |f: &dyn Fn(&Original) -> bool| originals.iter().find(|o| f(o)).map(|o| Some(o.path.clone()));
        match *self {
            Moment::After(d) => (since.elapsed() >= d).then_some(None),
            Moment::Analyzing => analyzing.lock().unwrap().clone().map(Some),
            Moment::Segments(n, _) => hit(&|o| segments_done(&o.path) >= n),
            Moment::Muxing(_) => hit(&|o| {
                std::fs::read_dir(partial_dir_for(&o.path)).is_ok_and(|mut d| {
                    d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("output.")))
                })
            }),
            Moment::BackupLinked(_) => hit(&|o| backup_path_for(&o.path).exists()),
            Moment::Swapped(_) => hit(&|o| o.swapped()),
        }
    }
}

fn segments_done(source: &Path) -> usize {
    std::fs::read(partial_dir_for(source).join("manifest.json"))
        .ok()
        .and_then(|m| serde_json::from_slice::<serde_json::Value>(&m).ok())
        .and_then(|m| m["segments"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Picks the process to kill for the original that reached the moment (None: any).
type Victim = Box<dyn Fn(Option<&Path>) -> Option<i32> + Send>;

/// A kill waiting for its moment in a thread of its own.
struct Armed {
    /// Set when every job ended first: the kill is called off.
    stop: Arc<AtomicBool>,
    /// A source the test saw ANALYZING (for `Moment::Analyzing`).
    analyzing: Arc<Mutex<Option<PathBuf>>>,
    /// The pid killed, or None.
    thread: JoinHandle<Option<i32>>,
}

/// Kills the victim with SIGKILL once `moment` comes.
fn arm(moment: Moment, originals: Vec<Original>, victim: Victim) -> Armed {
    let stop = Arc::new(AtomicBool::new(false));
    let analyzing: Arc<Mutex<Option<PathBuf>>> = Arc::default();
    let (stopped, seen) = (stop.clone(), analyzing.clone());
    let thread = std::thread::spawn(move || {
        let since = Instant::now();
        let deadline = since + FINISH_WITHIN;
        while !stopped.load(Ordering::SeqCst) && Instant::now() < deadline {
            if let Some(which) = moment.reached(&originals, since, &seen) {
                std::thread::sleep(moment.offset());
                let pid = victim(which.as_deref())?;
                // SAFETY: kill(2) on a child of this test that has not been reaped yet.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return Some(pid);
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        None
    });
    Armed { stop, analyzing, thread }
}

/// Runs until the armed kill fires or every job has ended (then the kill is called off).
async fn until_killed_or_done(
    db: &DatabaseConnection,
    n: usize,
    armed: Armed,
    servers: &[&ServerProcess],
    mut each_round: impl FnMut(&[job::Model]),
) -> Option<i32> {
    let deadline = Instant::now() + FINISH_WITHIN;
    loop {
        if armed.thread.is_finished() {
            break;
        }
        let jobs = all_jobs(db).await;
        each_round(&jobs);
        if let Some(j) = jobs.iter().find(|j| j.status == JobStatus::Analyzing) {
            *armed.analyzing.lock().unwrap() = Some(PathBuf::from(&j.file_path));
        }
        if jobs.len() == n && jobs.iter().all(|j| terminal(status_of(j))) {
            armed.stop.store(true, Ordering::SeqCst);
            break;
        }
        assert!(Instant::now() < deadline, "STUCK: {:#?}\n{}", summary(&jobs), tail(servers));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    armed.thread.join().unwrap()
}

// ---------------------------------------------------------------------------------------
// Nodes and libraries

fn main_command(data: &Path, throttle_ms: u64) -> Command {
    let mut cmd = command(data);
    cmd.env("ADMIN_PASSWORD", cluster::PASSWORD)
        .env("NODE_NAME", "main")
        .env("SEGMENT_SECONDS", "1")
        .env("WATCH_SETTLE_SECONDS", "1")
        .env("CONDENSE_THROTTLE_MS_PER_FRAME", throttle_ms.to_string());
    cmd
}

/// A main node of a cluster (see `cluster::main_command`) that gives its linked nodes
/// longer to answer and settles watched files in a second.
fn cluster_main_command(data: &Path, max_jobs: u32, license: &(String, String)) -> Command {
    let mut cmd = cluster::main_command(data, max_jobs, Some(license));
    cmd.env("NODE_TIMEOUT_SECONDS", NODE_TIMEOUT_SECONDS).env("WATCH_SETTLE_SECONDS", "1");
    cmd
}

/// A run's folder, removed when dropped: `main` for the main node's data (the node makes
/// it) and `media`, made here, for the library.
fn run_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (data, media) = (dir.path().join("main"), dir.path().join("media"));
    std::fs::create_dir_all(&media).unwrap();
    (dir, data, media)
}

/// Migrates the main node's database and adds a library over `media`; answers a connection
/// the test reads the jobs through.
async fn prepare(data: &Path, media: &Path, watch: bool, keep_originals: bool) -> DatabaseConnection {
    let db = migrated(data).await;
    condense::repo::libraries::create(&db, library(media, watch)).await.unwrap();
    if keep_originals {
        condense::repo::settings::update_service_settings(&db, None, Some(true)).await.unwrap();
    }
    db
}

/// Clips made once per test, copied into each run's library.
struct Templates {
    _dir: tempfile::TempDir,
    files: HashMap<&'static str, PathBuf>,
}

impl Templates {
    fn make(which: &[&'static str]) -> Templates {
        let dir = tempfile::tempdir().unwrap();
        let mut files = HashMap::new();
        for &name in which {
            let path = match name {
                "av.mkv" => clips::h264_with_audio_and_subs(dir.path(), "av.mkv", "320x240", 3),
                "av.mp4" => clips::h264_with_audio_and_subs(dir.path(), "av.mp4", "320x240", 2),
                "plain.avi" => clips::h264(dir.path(), "plain.avi", "320x240", 2),
                "plain.mkv" => clips::h264(dir.path(), "plain.mkv", "320x240", 3),
                "long.mkv" => clips::h264(dir.path(), "long.mkv", "320x240", 4),
                "short.mkv" => clips::h264(dir.path(), "short.mkv", "320x240", 1),
                "short-av.mkv" => clips::h264_with_audio_and_subs(dir.path(), "short-av.mkv", "256x144", 1),
                other => panic!("no template {other}"),
            };
            files.insert(name, path);
        }
        Templates { _dir: dir, files }
    }

    fn copy(&self, template: &str, to: &Path) -> PathBuf {
        std::fs::copy(&self.files[template], to).unwrap();
        to.to_path_buf()
    }
}

// ---------------------------------------------------------------------------------------
// Scenario: kill -9 of the main node

#[actix_web::test]
async fn kill_9_of_the_main_node_at_random_moments() {
    let mut counts = Counts::new("kill-main");
    let mut rng = seeded(counts.scenario);
    let templates = Templates::make(&["av.mkv", "av.mp4", "plain.avi"]);
    for run in 0..fault_runs() {
        let (dir, data, media) = run_dir();
        let mut ledger = Ledger::default();
        for (template, name) in [("av.mkv", "a.mkv"), ("av.mp4", "b.mp4"), ("plain.avi", "c.avi")] {
            ledger.record(&templates.copy(template, &media.join(name)));
        }
        let keep_originals = run % 3 == 2;
        let db = prepare(&data, &media, false, keep_originals).await;
        let watch = Watch::start(dir.path(), &ledger);
        let kills = rng.gen_range(1..=2);
        for k in 0..kills {
            let server = ServerProcess::start(main_command(&data, 12));
            let moment = Moment::pick(&mut rng, Duration::from_secs(4));
            println!(
                "faults: kill-main: run {}: kill {} of {kills} at {moment:?} (keep originals: {keep_originals})",
                run + 1,
                k + 1
            );
            let pid = pid_of(&server);
            let armed = arm(moment, ledger.originals.clone(), Box::new(move |_| Some(pid)));
            let killed = until_killed_or_done(&db, ledger.len(), armed, &[&server], |_| {}).await;
            drop(server);
            if killed.is_none() {
                println!("faults: kill-main: run {}: every job ended before that moment", run + 1);
                break;
            }
            counts.kills += 1;
            let at = record_phases(&db, &ledger, None, &mut counts).await;
            println!("faults: kill-main: run {}: killed during {at}", run + 1);
            no_orphan_transcoder(&data, &mut counts).await;
        }
        let server = ServerProcess::start(main_command(&data, 0));
        let jobs = wait_terminal(&db, ledger.len(), &[&server]).await;
        drop(server);
        watch.finish(&mut counts);
        expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
        check(&db, &ledger, keep_originals, &mut counts).await;
        counts.end_run();
    }
    counts.expect_transcoders();
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Scenario: kill -9 of the transcoder child

fn sigkill(pid: i32) {
    // SAFETY: kill(2) on a transcoder process of this test.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

#[actix_web::test]
async fn kill_9_of_the_transcoder_at_random_moments() {
    let mut counts = Counts::new("kill-transcoder");
    let mut rng = seeded(counts.scenario);
    let templates = Templates::make(&["av.mkv", "plain.mkv"]);
    for run in 0..fault_runs() {
        let (dir, data, media) = run_dir();
        let mut ledger = Ledger::default();
        for (template, name) in [("av.mkv", "a.mkv"), ("plain.mkv", "b.mkv")] {
            ledger.record(&templates.copy(template, &media.join(name)));
        }
        let db = prepare(&data, &media, false, false).await;
        let watch = Watch::start(dir.path(), &ledger);
        let server = ServerProcess::start(main_command(&data, 10));
        // Three automatic retries: a job killed three times still completes on its fourth try.
        let budget = rng.gen_range(1..=4);
        let mut killed: HashMap<PathBuf, usize> = HashMap::new();
        let deadline = Instant::now() + FINISH_WITHIN;
        let jobs = loop {
            let jobs = all_jobs(&db).await;
            if jobs.len() == ledger.len() && jobs.iter().all(|j| terminal(status_of(j))) {
                break jobs;
            }
            assert!(Instant::now() < deadline, "STUCK: {:#?}\n{}", summary(&jobs), tail(&[&server]));
            tokio::time::sleep(ms(rng.gen_range(50..1200))).await;
            if killed.values().sum::<usize>() >= budget {
                continue;
            }
            let candidates: Vec<TranscoderProc> = transcoders(dir.path())
                .into_iter()
                .filter(|t| t.source.as_ref().is_some_and(|s| killed.get(s).copied().unwrap_or(0) < 3))
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let victim = &candidates[rng.gen_range(0..candidates.len())];
            let source = victim.source.clone().unwrap();
            sigkill(victim.pid);
            println!(
                "faults: kill-transcoder: run {}: killed pid {} working on {}",
                run + 1,
                victim.pid,
                source.display()
            );
            *killed.entry(source).or_default() += 1;
            counts.kills += 1;
        };
        drop(server);
        watch.finish(&mut counts);
        expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
        // No failure but the kills: a job retried at most once per kill.
        for o in &ledger.originals {
            let kills = killed.get(&o.path).copied().unwrap_or(0);
            if let Some(j) = job_for(&jobs, o) {
                if usize::try_from(j.retry_count).unwrap_or(0) > kills {
                    let history = condense::repo::events::list(&db, j.id).await.unwrap_or_default();
                    let failures: Vec<String> = history
                        .iter()
                        .filter(|e| e.kind == "failed" || e.kind == "retrying")
                        .map(|e| format!("{} {}", e.kind, e.detail.clone().unwrap_or_default()))
                        .collect();
                    counts.problem(format!(
                        "{}: {} retries for {kills} kills: {failures:?}",
                        o.path.display(),
                        j.retry_count
                    ));
                }
            }
        }
        check(&db, &ledger, false, &mut counts).await;
        counts.end_run();
    }
    counts.expect_transcoders();
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Scenario: kill -9 of a linked node

fn pid_of(server: &ServerProcess) -> i32 {
    i32::try_from(server.child.id()).unwrap()
}

#[actix_web::test]
async fn kill_9_of_a_linked_node_at_random_moments() {
    let mut counts = Counts::new("kill-linked");
    let mut rng = seeded(counts.scenario);
    let templates = Templates::make(&["av.mkv", "plain.mkv", "av.mp4"]);
    let license = license::pro_key();
    let names = ["w1", "w2"];
    for run in 0..fault_runs() {
        let (dir, data, media) = run_dir();
        let mut ledger = Ledger::default();
        for (template, name) in [("av.mkv", "a.mkv"), ("plain.mkv", "b.mkv"), ("av.mp4", "c.mp4")] {
            ledger.record(&templates.copy(template, &media.join(name)));
        }
        let db = prepare(&data, &media, false, false).await;
        let watch = Watch::start(dir.path(), &ledger);
        // The main node only coordinates: every job runs on a linked node.
        let main = ServerProcess::start(cluster_main_command(&data, 0, &license));
        let start_worker =
            |name: &str| ServerProcess::start(cluster::linked_command(&dir.path().join(name), &main.api, name, 12));
        let mut workers: Vec<Option<ServerProcess>> = names.iter().map(|n| Some(start_worker(n))).collect();
        let kills = rng.gen_range(1..=2);
        for k in 0..kills {
            let moment = Moment::pick(&mut rng, Duration::from_secs(5));
            println!("faults: kill-linked: run {}: kill {} of {kills} at {moment:?}", run + 1, k + 1);
            let pids: Vec<i32> = workers.iter().flatten().map(pid_of).collect();
            let by_name: HashMap<String, i32> = names
                .iter()
                .zip(workers.iter())
                .filter_map(|(n, w)| Some((n.to_string(), pid_of(w.as_ref()?))))
                .collect();
            // Which node runs which source, kept up to date from the main node's records.
            let running: Arc<Mutex<HashMap<PathBuf, i32>>> = Arc::default();
            let lookup = running.clone();
            let victim: Victim = Box::new(move |which| {
                let map = lookup.lock().unwrap();
                which
                    .and_then(|p| map.get(p).copied())
                    .or_else(|| map.values().next().copied())
                    .or(pids.first().copied())
            });
            let armed = arm(moment, ledger.originals.clone(), victim);
            let servers: Vec<&ServerProcess> = std::iter::once(&main).chain(workers.iter().flatten()).collect();
            let killed = until_killed_or_done(&db, ledger.len(), armed, &servers, |jobs| {
                let mut map = running.lock().unwrap();
                for j in jobs.iter().filter(|j| matches!(status_of(j), "ANALYZING" | "ENCODING")) {
                    if let Some(pid) = j.node_name.as_ref().and_then(|n| by_name.get(n)) {
                        map.insert(PathBuf::from(&j.file_path), *pid);
                    }
                }
            })
            .await;
            let Some(pid) = killed else {
                println!("faults: kill-linked: run {}: every job ended before that moment", run + 1);
                break;
            };
            let index = workers.iter().position(|w| w.as_ref().is_some_and(|w| pid_of(w) == pid)).unwrap();
            let mut dead = workers[index].take().unwrap();
            dead.child.wait().unwrap();
            drop(dead);
            counts.kills += 1;
            let at = record_phases(&db, &ledger, Some(names[index]), &mut counts).await;
            no_orphan_transcoder(&dir.path().join(names[index]), &mut counts).await;
            // Back after a pause that ends before or after the main node notices (8 s).
            let pause = ms(rng.gen_range(0..10_000));
            println!("faults: kill-linked: run {}: {} killed during {at}, back in {pause:?}", run + 1, names[index]);
            tokio::time::sleep(pause).await;
            workers[index] = Some(start_worker(names[index]));
        }
        let servers: Vec<&ServerProcess> = std::iter::once(&main).chain(workers.iter().flatten()).collect();
        let jobs = wait_terminal(&db, ledger.len(), &servers).await;
        drop(servers);
        drop(workers);
        drop(main);
        watch.finish(&mut counts);
        expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
        check(&db, &ledger, false, &mut counts).await;
        counts.end_run();
    }
    counts.expect_transcoders();
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Scenario: a full disk

/// Writes zeros into `path` until the filesystem has no room left.
fn fill(path: &Path) -> u64 {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 256 * 1024];
    let mut written = 0;
    // Bounded: a tmpfs of this test is never above a few hundred MiB.
    for _ in 0..16 * 1024 {
        match file.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    let _ = file.sync_all();
    written
}

#[actix_web::test]
async fn a_full_disk_fails_the_job_and_keeps_the_original() {
    let mut counts = Counts::new("full-disk");
    let mut rng = seeded(counts.scenario);
    let templates = Templates::make(&["long.mkv"]);
    let clip = std::fs::metadata(&templates.files["long.mkv"]).unwrap().len();
    for run in 0..fault_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (data, media) = (dir.path().join("main"), dir.path().join("media"));
        // Even runs: no room from the start. Odd runs: the disk fills up mid-encode.
        let fill_mid_encode = run % 2 == 1;
        let room = if fill_mid_encode { clip + (80 << 20) } else { clip + (4 << 20) };
        let Some(mount) = Tmpfs::mount(&media, room) else {
            println!("SKIPPED faults::a_full_disk_fails_the_job_and_keeps_the_original: cannot mount a tmpfs here");
            return;
        };
        let mut ledger = Ledger::default();
        ledger.record(&templates.copy("long.mkv", &media.join("movie.mkv")));
        let db = prepare(&data, &media, false, false).await;
        let watch = Watch::start(dir.path(), &ledger);
        let server = ServerProcess::start(main_command(&data, if fill_mid_encode { 40 } else { 0 }));
        let filler = media.join("filler.bin");
        if fill_mid_encode {
            let after = rng.gen_range(1..=2);
            let deadline = Instant::now() + FINISH_WITHIN;
            loop {
                if segments_done(&ledger.originals[0].path) >= after {
                    let bytes = fill(&filler);
                    println!(
                        "faults: full-disk: run {}: filled the disk ({bytes} bytes) after {after} segments",
                        run + 1
                    );
                    break;
                }
                let jobs = all_jobs(&db).await;
                if jobs.iter().any(|j| terminal(status_of(j))) {
                    counts.problem(format!("the job ended before the disk could fill: {:?}", summary(&jobs)));
                    break;
                }
                assert!(Instant::now() < deadline, "the encode never got going: {}", tail(&[&server]));
                tokio::time::sleep(ms(5)).await;
            }
        } else {
            println!("faults: full-disk: run {}: {room} bytes of room for a {clip}-byte file", run + 1);
        }
        let jobs = wait_terminal(&db, 1, &[&server]).await;
        drop(server);
        let _ = std::fs::remove_file(&filler);
        watch.finish(&mut counts);
        let job = &jobs[0];
        if job.status != JobStatus::Failed || job.failure_reason.as_deref() != Some("insufficient disk space") {
            counts.problem(format!("expected FAILED for insufficient disk space: {:?}", summary(&jobs)));
        }
        check(&db, &ledger, false, &mut counts).await;
        drop(mount);
        counts.end_run();
    }
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Scenario: corrupt, truncated, growing and unreadable files

fn touch(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C path; a null `times` sets both times to now.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), std::ptr::null(), 0) };
    assert_eq!(rc, 0, "touch {}", path.display());
}

fn set_mtime_ago(path: &Path, seconds: i64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let then = libc::timespec { tv_sec: now - seconds, tv_nsec: 0 };
    // SAFETY: a valid C path and two timespecs (access, modification).
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [then, then].as_ptr(), 0) };
    assert_eq!(rc, 0, "utimensat {}", path.display());
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn events_mention(db_events: &[entities::job_event::Model], kind: &str, words: &str) -> bool {
    db_events.iter().any(|e| e.kind == kind && e.detail.as_ref().is_some_and(|d| d.to_string().contains(words)))
}

#[actix_web::test]
async fn corrupt_truncated_growing_and_unreadable_files() {
    let mut counts = Counts::new("bad-inputs");
    let mut rng = seeded(counts.scenario);
    let templates = Templates::make(&["av.mp4", "av.mkv", "long.mkv", "plain.mkv"]);
    let root = is_root();
    if root {
        println!("faults: bad-inputs: the unreadable file's failure reason is not checked: running as root, which reads mode-000 files");
    }
    for run in 0..fault_runs() {
        let (dir, data, media) = run_dir();
        let mut ledger = Ledger::default();
        let garbage: Vec<u8> = (0..200_000).map(|_| rng.gen()).collect();
        std::fs::write(media.join("garbage.mkv"), &garbage).unwrap();
        let mp4 = std::fs::read(&templates.files["av.mp4"]).unwrap();
        std::fs::write(media.join("truncated.mp4"), &mp4[..mp4.len() / 2]).unwrap();
        let mkv = std::fs::read(&templates.files["av.mkv"]).unwrap();
        std::fs::write(media.join("truncated.mkv"), &mkv[..mkv.len() / 3]).unwrap();
        std::fs::write(media.join("empty.mkv"), b"").unwrap();
        let mut flipped = std::fs::read(&templates.files["plain.mkv"]).unwrap();
        let at = rng.gen_range(flipped.len() / 4..flipped.len() * 3 / 4);
        let end = (at + 4096).min(flipped.len());
        rng.fill(&mut flipped[at..end]);
        std::fs::write(media.join("flipped.mkv"), &flipped).unwrap();
        templates.copy("plain.mkv", &media.join("unreadable.mkv"));
        templates.copy("long.mkv", &media.join("touched.mkv"));
        for name in [
            "garbage.mkv",
            "truncated.mp4",
            "truncated.mkv",
            "empty.mkv",
            "flipped.mkv",
            "unreadable.mkv",
            "touched.mkv",
        ] {
            ledger.record(&media.join(name));
        }
        chmod(&media.join("unreadable.mkv"), 0o000);
        // An existing library: its files were written long before the service starts.
        for o in &ledger.originals {
            set_mtime_ago(&o.path, 3600);
        }
        println!("faults: bad-inputs: run {}: flipped 4 KiB at byte {at}", run + 1);
        let db = prepare(&data, &media, true, false).await;
        let watch = Watch::start(dir.path(), &ledger);

        // A file being copied in while the node starts (its first scan sees it) and while the
        // library is watched: appended in pieces, each well within the settle time (1 s). It
        // must become a job only once it stops growing.
        let growing = media.join("growing.mkv");
        let content = std::fs::read(&templates.files["plain.mkv"]).unwrap();
        let grown = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let grower = {
            let (growing, grown) = (growing.clone(), grown.clone());
            std::thread::spawn(move || {
                use std::io::Write;
                let append = |piece: &[u8]| {
                    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&growing).unwrap();
                    f.write_all(piece).unwrap();
                };
                // 1 KiB every 200 ms until the node is up, then the rest in 8 pieces, 200 ms apart.
                let mut written = 0;
                while started_rx.try_recv().is_err() && written + 1024 < content.len() / 2 {
                    append(&content[written..written + 1024]);
                    written += 1024;
                    std::thread::sleep(ms(200));
                }
                for piece in content[written..].chunks((content.len() - written) / 8 + 1) {
                    append(piece);
                    std::thread::sleep(ms(200));
                }
                grown.store(true, Ordering::SeqCst);
            })
        };
        while !growing.exists() {
            std::thread::sleep(ms(10));
        }
        let server = ServerProcess::start(main_command(&data, 15));
        let _ = started_tx.send(());

        // A source that changes while it is encoded: the swap must refuse it.
        let touched = media.join("touched.mkv");
        let deadline = Instant::now() + FINISH_WITHIN;
        let mut was_touched = false;
        while !(was_touched && grown.load(Ordering::SeqCst)) {
            let jobs = all_jobs(&db).await;
            // Read after the jobs: a job seen while this is still false was made from a growing file.
            if !grown.load(Ordering::SeqCst) && jobs.iter().any(|j| j.file_name == "growing.mkv") {
                counts.problem("growing.mkv became a job while it was still growing".into());
                grown.store(true, Ordering::SeqCst);
            }
            if !was_touched && segments_done(&touched) >= 1 {
                touch(&touched);
                was_touched = true;
            }
            if !was_touched && jobs.iter().any(|j| j.file_name == "touched.mkv" && terminal(status_of(j))) {
                counts.problem("touched.mkv ended before it could be touched".into());
                was_touched = true;
            }
            assert!(Instant::now() < deadline, "touched.mkv never encoded: {:#?}", summary(&jobs));
            tokio::time::sleep(ms(10)).await;
        }
        grower.join().unwrap();
        ledger.record(&growing);
        watch.add(ledger.originals.last().unwrap());

        let jobs = wait_terminal(&db, ledger.len(), &[&server]).await;
        drop(server);
        chmod(&media.join("unreadable.mkv"), 0o644);
        watch.finish(&mut counts);
        let find = |name: &str| jobs.iter().find(|j| j.file_name == name).cloned();
        for name in ["garbage.mkv", "truncated.mp4", "truncated.mkv", "empty.mkv"] {
            match find(name) {
                Some(j)
                    if j.status == JobStatus::Failed
                        && j.failure_code == Some(FailureCode::FileValidationFailed.into()) =>
                {
                    if j.retry_count != 3 {
                        counts.problem(format!("{name}: {} retries, expected 3", j.retry_count));
                    }
                }
                other => counts.problem(format!("{name}: expected FAILED (file validation failed): {other:?}")),
            }
        }
        if !root {
            match find("unreadable.mkv") {
                Some(j)
                    if j.status == JobStatus::Failed
                        && j.failure_code == Some(FailureCode::PermissionDenied.into()) => {}
                other => counts.problem(format!("unreadable.mkv: expected FAILED (permission denied): {other:?}")),
            }
        }
        match find("touched.mkv") {
            Some(j) if j.status == JobStatus::Completed => {
                let events = condense::repo::events::list(&db, j.id).await.unwrap();
                if !events_mention(&events, "retrying", "source changed") {
                    counts.problem(format!(
                        "touched.mkv: no retry for a source that changed: {:?}",
                        events.iter().map(|e| &e.kind).collect::<Vec<_>>()
                    ));
                }
            }
            other => counts.problem(format!("touched.mkv: expected COMPLETED: {other:?}")),
        }
        match find("growing.mkv") {
            Some(j) if j.status == JobStatus::Completed && j.retry_count == 0 => {}
            other => counts.problem(format!("growing.mkv: expected COMPLETED at the first try: {other:?}")),
        }
        check(&db, &ledger, false, &mut counts).await;
        counts.end_run();
    }
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Scenario: a short soak on three nodes

fn vm_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[actix_web::test]
async fn soak_on_three_nodes() {
    let mut counts = Counts::new("soak");
    let n = env_count("CONDENSE_SOAK_JOBS", 40);
    let templates = Templates::make(&["short.mkv", "short-av.mkv"]);
    let license = license::pro_key();
    let (dir, data, media) = run_dir();
    let mut ledger = Ledger::default();
    for i in 0..n {
        let template = if i % 2 == 0 { "short.mkv" } else { "short-av.mkv" };
        ledger.record(&templates.copy(template, &media.join(format!("clip-{i:04}.mkv"))));
    }
    let db = prepare(&data, &media, false, false).await;
    let watch = Watch::start(dir.path(), &ledger);
    let main = ServerProcess::start(cluster_main_command(&data, 1, &license));
    let workers: Vec<ServerProcess> = ["w1", "w2"]
        .iter()
        .map(|name| ServerProcess::start(cluster::linked_command(&dir.path().join(name), &main.api, name, 0)))
        .collect();
    let servers: Vec<&ServerProcess> = std::iter::once(&main).chain(workers.iter()).collect();
    let limit = FINISH_WITHIN + Duration::from_secs(3 * n as u64);
    let deadline = Instant::now() + limit;
    let first = n.min(10);
    loop {
        let jobs = all_jobs(&db).await;
        if jobs.iter().filter(|j| j.status == JobStatus::Completed).count() >= first {
            break;
        }
        assert!(Instant::now() < deadline, "STUCK before {first} jobs: {:#?}\n{}", summary(&jobs), tail(&servers));
        tokio::time::sleep(ms(100)).await;
    }
    let rss_first = vm_rss_kib(pid_of(&main));
    let jobs = wait_terminal_within(&db, n, limit, &servers).await;
    let rss_end = vm_rss_kib(pid_of(&main));
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for j in &jobs {
        *per_node.entry(j.node_name.clone().unwrap_or_default()).or_default() += 1;
    }
    println!("faults: soak: main node RSS {rss_first} KiB after {first} jobs, {rss_end} KiB after {n}; jobs per node {per_node:?}");
    drop(servers);
    drop(workers);
    drop(main);
    watch.finish(&mut counts);
    expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
    check(&db, &ledger, false, &mut counts).await;
    if rss_end * 2 > rss_first * 3 {
        counts.problem(format!("the main node grew from {rss_first} KiB to {rss_end} KiB (more than 1.5 times)"));
    }
    counts.end_run();
    counts.expect_transcoders();
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Bugs the scenarios found, each pinned by a deterministic test

/// Found by kill-main and kill-linked: a node killed after the swap but before the job was
/// marked complete left a job that, re-run, took its own output for a source already in
/// HEVC: SKIPPED, its saving lost, its partial output left behind.
#[actix_web::test]
async fn a_kill_between_the_swap_and_the_jobs_completion_completes_the_job() {
    swap_then_kill("swap-then-kill", false, 0).await;
}

/// Found by kill-linked (run 8 of a quiet loop): a job at its last allowed crash, its node
/// killed after the swap, was failed for the crash; that removed the intent of its replace
/// and left the output at the original's path, the job FAILED. On the main node (its
/// restart counts the crash) and on a linked node (the main node counts it), the job
/// completes.
#[actix_web::test]
async fn a_job_at_its_crash_limit_killed_between_the_swap_and_its_completion_completes() {
    let limit = i32::try_from(condense::domain::job::MAX_CRASHES).unwrap();
    swap_then_kill("swap-then-kill-at-limit-main", false, limit - 1).await;
    swap_then_kill("swap-then-kill-at-limit-linked", true, limit - 1).await;
}

/// One 2 s clip, run on the main node or on one linked node that is killed right after the
/// replace swapped the files, then started again: the job must complete and every original
/// invariant hold. `crashes`: the crashes the job counted before. A kill that comes only
/// once the job completed proves nothing, so the run is tried again (up to 5 times).
async fn swap_then_kill(scenario: &'static str, linked: bool, crashes: i32) {
    use sea_orm::{ActiveModelTrait, Set};
    let mut counts = Counts::new(scenario);
    let license = license::pro_key();
    for attempt in 1..=5 {
        let (dir, data, media) = run_dir();
        let mut ledger = Ledger::default();
        let source = clips::h264(&media, "a.mkv", "320x240", 2);
        ledger.record(&source);
        set_mtime_ago(&source, 3600);
        let db = prepare(&data, &media, false, false).await;
        if crashes > 0 {
            let library = condense::repo::libraries::list(&db).await.unwrap()[0].clone();
            let new = condense::repo::jobs::NewJob {
                library_id: Some(library.id),
                file_path: source.to_string_lossy().into_owned(),
                file_name: "a.mkv".into(),
                status: JobStatus::Queued,
                target_codec: "hevc".into(),
                source_size: i64::try_from(std::fs::metadata(&source).unwrap().len()).unwrap(),
                source_mtime_ns: None,
                source_inode: None,
                forced: false,
            };
            let job = condense::repo::jobs::insert(&db, new).await.unwrap();
            let set = job::ActiveModel { id: Set(job.id), crash_count: Set(crashes), ..Default::default() };
            set.update(&db).await.unwrap();
        }
        let start_worker = |main: &ServerProcess| {
            ServerProcess::start(cluster::linked_command(&dir.path().join("w1"), &main.api, "w1", 0))
        };
        let mut main = if linked {
            ServerProcess::start(cluster_main_command(&data, 0, &license))
        } else {
            ServerProcess::start(main_command(&data, 0))
        };
        let mut worker = linked.then(|| start_worker(&main));
        let victim = pid_of(worker.as_ref().unwrap_or(&main));
        let armed = arm(Moment::Swapped(Duration::ZERO), ledger.originals.clone(), Box::new(move |_| Some(victim)));
        let servers: Vec<&ServerProcess> = std::iter::once(&main).chain(worker.as_ref()).collect();
        let killed = until_killed_or_done(&db, 1, armed, &servers, |_| {}).await;
        drop(servers);
        counts.kills += usize::from(killed.is_some());
        let in_time = killed.is_some() && all_jobs(&db).await.iter().all(|j| status_of(j) != "COMPLETED");
        if let Some(mut dead) = worker.take() {
            dead.child.wait().unwrap();
            worker = Some(start_worker(&main));
        } else {
            drop(main);
            main = ServerProcess::start(main_command(&data, 0));
        }
        let servers: Vec<&ServerProcess> = std::iter::once(&main).chain(worker.as_ref()).collect();
        let jobs = wait_terminal(&db, 1, &servers).await;
        drop(servers);
        drop(worker);
        drop(main);
        expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
        check(&db, &ledger, false, &mut counts).await;
        counts.end_run();
        if in_time {
            let counted = jobs[0].crash_count;
            assert_eq!(counted, crashes + 1, "{scenario}: one kill, counted as {} crashes", counted - crashes);
            counts.finish();
            return;
        }
        println!("faults: {scenario}: attempt {attempt}: the kill came after the completion; again");
    }
    panic!("{scenario}: in 5 tries the kill never came between the swap and the completion");
}

/// Found by kill-main: a node killed between a job's completion and the removal of its
/// partial output left the folder behind for good. The next scan removes it.
#[actix_web::test]
async fn a_partial_output_left_by_a_completed_job_is_removed_by_the_next_scan() {
    let (_dir, data, media) = run_dir();
    let source = clips::h264(&media, "a.mkv", "320x240", 1);
    set_mtime_ago(&source, 3600);
    let db = prepare(&data, &media, false, false).await;
    let server = ServerProcess::start(main_command(&data, 0));
    let jobs = wait_terminal(&db, 1, &[&server]).await;
    drop(server);
    assert_eq!(jobs[0].status, JobStatus::Completed);
    // What the crash leaves: the finished job's partial folder.
    let partial = partial_dir_for(&source);
    std::fs::create_dir(&partial).unwrap();
    std::fs::write(partial.join("manifest.json"), b"{}").unwrap();
    std::fs::write(partial.join("seg-00000.mkv"), b"segment").unwrap();
    // A paused job's partial output is kept.
    let paused = clips::h264(&media, "b.mkv", "320x240", 1);
    set_mtime_ago(&paused, 3600);
    let library = condense::repo::libraries::list(&db).await.unwrap()[0].clone();
    condense::repo::jobs::insert(
        &db,
        condense::repo::jobs::NewJob {
            library_id: Some(library.id),
            file_path: paused.to_string_lossy().into_owned(),
            file_name: "b.mkv".into(),
            status: condense::domain::job::JobStatus::Paused,
            target_codec: "hevc".into(),
            source_size: i64::try_from(std::fs::metadata(&paused).unwrap().len()).unwrap(),
            source_mtime_ns: None,
            source_inode: None,
            forced: false,
        },
    )
    .await
    .unwrap();
    let kept = partial_dir_for(&paused);
    std::fs::create_dir(&kept).unwrap();
    std::fs::write(kept.join("manifest.json"), b"{}").unwrap();

    let server = ServerProcess::start(main_command(&data, 0));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = condense::repo::libraries::get(&db, library.id).await.unwrap();
        if now.last_scan_at != library.last_scan_at {
            break;
        }
        assert!(Instant::now() < deadline, "no scan after the restart: {}", tail(&[&server]));
        tokio::time::sleep(ms(100)).await;
    }
    drop(server);
    assert!(!partial.exists(), "the completed job's partial output is still there");
    assert!(kept.exists(), "the paused job's partial output was removed");
}

/// Found by bad-inputs (a flipped 4 KiB inside a clip): a damaged source's garbage timestamp
/// left an output without a duration; verification then skipped the length check and
/// decoded only the output's first frame, and a file 2 s long replaced a 3 s original.
#[test]
fn an_output_whose_length_is_unknown_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    let source = clips::h264(dir.path(), "source.mkv", "320x240", 3);
    let info = probe(&source).unwrap();
    // One second of H.264 in a container that does not record its length. (A raw stream,
    // used here before, is now refused by its format before any length is looked at.)
    let output = clips::without_length(dir.path(), "output.wmv", "libx264");
    assert_eq!(probe(&output).unwrap().duration_seconds, None);
    let err = condense_media::verify::verify(&output, &source, &info, "h264").unwrap_err();
    assert!(err.message.contains("no duration"), "{err}");
}

// ---------------------------------------------------------------------------------------
// Scenario: a stopped linked node

/// A linked node that stops answering (hung, or stopped: SIGSTOP here) while its transcoder
/// child keeps running: the main node takes the node OFFLINE after NODE_TIMEOUT_SECONDS and
/// gives the job to another node. That node's transcoder finds the partial output locked by
/// the first one and the job waits in the queue (no retry used) until the lock is free; when
/// the stopped node comes back, the main node tells it to stop the job whose lease it lost.
/// At most one transcoder works on the job at any moment.
#[actix_web::test]
async fn a_stuck_linked_node_leaves_at_most_one_transcoder_on_its_job() {
    let mut counts = Counts::new("stuck-linked");
    let templates = Templates::make(&["long.mkv"]);
    let license = license::pro_key();
    let (dir, data, media) = run_dir();
    let mut ledger = Ledger::default();
    ledger.record(&templates.copy("long.mkv", &media.join("a.mkv")));
    let db = prepare(&data, &media, false, false).await;
    let watch = Watch::start(dir.path(), &ledger);
    let main = ServerProcess::start(cluster_main_command(&data, 0, &license));
    let workers: Vec<ServerProcess> = ["w1", "w2"]
        .iter()
        .map(|name| ServerProcess::start(cluster::linked_command(&dir.path().join(name), &main.api, name, 150)))
        .collect();
    let servers: Vec<&ServerProcess> = std::iter::once(&main).chain(workers.iter()).collect();
    let deadline = Instant::now() + FINISH_WITHIN;
    let victim = loop {
        let jobs = all_jobs(&db).await;
        if segments_done(&ledger.originals[0].path) >= 1 {
            if let Some(name) = jobs.first().and_then(|j| j.node_name.clone()) {
                break name;
            }
        }
        assert!(Instant::now() < deadline, "the encode never got going: {}", tail(&servers));
        tokio::time::sleep(ms(50)).await;
    };
    let stuck = pid_of(&workers[if victim == "w1" { 0 } else { 1 }]);
    // SAFETY: signals to a child of this test; SIGKILL at drop ends it even when stopped.
    unsafe { libc::kill(stuck, libc::SIGSTOP) };
    // Longer than NODE_TIMEOUT_SECONDS: the job moves to the other node meanwhile.
    tokio::time::sleep(Duration::from_secs(12)).await;
    // SAFETY: as above.
    unsafe { libc::kill(stuck, libc::SIGCONT) };
    let jobs = wait_terminal(&db, 1, &servers).await;
    let kinds: Vec<String> =
        condense::repo::events::list(&db, jobs[0].id).await.unwrap().into_iter().map(|e| e.kind).collect();
    println!("faults: stuck-linked: the job's history: {kinds:?}");
    assert!(kinds.iter().any(|k| k == "orphaned"), "the job never left the stopped node: {kinds:?}");
    assert_eq!(jobs[0].retry_count, 0, "a busy start used a retry: {kinds:?}");
    drop(servers);
    drop(workers);
    drop(main);
    watch.finish(&mut counts);
    expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
    check(&db, &ledger, false, &mut counts).await;
    counts.end_run();
}

// ---------------------------------------------------------------------------------------
// Scenario: pause and resume-all in a cluster

/// Pause-all and resume-all, quickly one after the other, on a main node and two linked
/// nodes running slow encodes: a pause keeps the job's lease until its transcoder has
/// exited, so a resume can never start a second transcoder on a partial output that the
/// first still flushes. Never two transcoders on one job (sampled through /proc), every
/// job completes, every original is replaced by a verified file.
#[actix_web::test]
async fn pause_and_resume_all_in_a_three_node_cluster_never_run_two_transcoders_on_a_job() {
    let mut counts = Counts::new("pause-resume-all");
    let mut rng = seeded(counts.scenario);
    let templates = Templates::make(&["long.mkv"]);
    let license = license::pro_key();
    for _ in 0..fault_runs() {
        let (dir, data, media) = run_dir();
        let mut ledger = Ledger::default();
        for name in ["a.mkv", "b.mkv", "c.mkv"] {
            ledger.record(&templates.copy("long.mkv", &media.join(name)));
        }
        let n = ledger.len();
        let db = prepare(&data, &media, false, false).await;
        // A slow preset: x265 holds many frames in its lookahead, so a paused transcoder
        // takes a while to flush its segment. That is the window a resume must not use.
        let library = condense::repo::libraries::list(&db).await.unwrap()[0].id;
        let slow = condense::repo::libraries::LibraryPatch { preset: Some("veryslow".into()), ..Default::default() };
        condense::repo::libraries::update(&db, library, slow).await.unwrap();
        let watch = Watch::start(dir.path(), &ledger);
        let mut main_cmd = cluster_main_command(&data, 1, &license);
        main_cmd.env("CONDENSE_THROTTLE_MS_PER_FRAME", "60");
        let main = ServerProcess::start(main_cmd);
        let workers: Vec<ServerProcess> = ["w1", "w2"]
            .iter()
            .map(|name| ServerProcess::start(cluster::linked_command(&dir.path().join(name), &main.api, name, 60)))
            .collect();
        let servers: Vec<&ServerProcess> = std::iter::once(&main).chain(workers.iter()).collect();
        let token = cluster::login(&main).await;
        // POST /queue/{action}, as the dashboard sends it.
        let queue = |action: &str| {
            let (url, token) = (format!("{}/queue/{action}", main.api), token.clone());
            async move { cluster::call("POST", &url, Some(&token), Some(serde_json::json!({}))).await }
        };
        let deadline = Instant::now() + FINISH_WITHIN;
        for _ in 0..3 {
            // Wait for work in flight: a job with a finished segment.
            loop {
                let jobs = all_jobs(&db).await;
                let busy =
                    jobs.iter().any(|j| j.status == JobStatus::Encoding && segments_done(Path::new(&j.file_path)) >= 1);
                if busy || (jobs.len() == n && jobs.iter().all(|j| terminal(status_of(j)))) {
                    break;
                }
                assert!(Instant::now() < deadline, "STUCK: {:#?}\n{}", summary(&jobs), tail(&servers));
                tokio::time::sleep(ms(50)).await;
            }
            tokio::time::sleep(ms(rng.gen_range(0..600))).await;
            let (status, text) = queue("pause-all").await;
            assert!(status < 300, "pause-all: {status} {text}");
            // Resume while the transcoders may still be finishing their segments.
            tokio::time::sleep(ms(rng.gen_range(0..300))).await;
            let (status, text) = queue("resume-all").await;
            assert!(status < 300, "resume-all: {status} {text}");
        }
        // A job whose transcoder was still stopping at resume-all pauses afterwards: resume it.
        let jobs = loop {
            let jobs = all_jobs(&db).await;
            if jobs.len() == n && jobs.iter().all(|j| terminal(status_of(j))) {
                break jobs;
            }
            if jobs.iter().any(|j| j.status == JobStatus::Paused) {
                queue("resume-all").await;
            }
            assert!(Instant::now() < deadline, "STUCK: {:#?}\n{}", summary(&jobs), tail(&servers));
            tokio::time::sleep(ms(250)).await;
        };
        drop(servers);
        drop(workers);
        drop(main);
        watch.finish(&mut counts);
        expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
        check(&db, &ledger, false, &mut counts).await;
        counts.end_run();
    }
    counts.expect_transcoders();
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Scenario: a transient read error during encodes

/// A share that answers one read() of each source with EIO, at a random point of the file,
/// in the transcoders only (an LD_PRELOAD shim on the whole node, inert outside `condense
/// transcode`). A read error used to end the video there while the mux added the whole
/// audio: a short file replaced the original. Now the attempt fails and the retry reads the
/// file whole: every job completes with every frame, or fails with its original untouched.
#[actix_web::test]
async fn a_transient_read_error_during_encodes() {
    let mut counts = Counts::new("read-error");
    let mut rng = seeded(counts.scenario);
    let templates = Templates::make(&["av.mkv", "av.mp4", "long.mkv"]);
    let frames: HashMap<&str, u64> =
        templates.files.iter().map(|(name, path)| (*name, crate::common::shim::video_frames(path))).collect();
    for run in 0..fault_runs() {
        let (dir, data, media) = run_dir();
        let markers = dir.path().join("markers");
        std::fs::create_dir_all(&markers).unwrap();
        let mut ledger = Ledger::default();
        let files = [("av.mkv", "a.mkv"), ("av.mp4", "b.mp4"), ("long.mkv", "c.mkv")];
        for (template, name) in files {
            ledger.record(&templates.copy(template, &media.join(name)));
        }
        let percent = rng.gen_range(10..90);
        println!("faults: read-error: run {}: one read of each source fails at {percent} % of the file", run + 1);
        let db = prepare(&data, &media, false, false).await;
        let watch = Watch::start(dir.path(), &ledger);
        let mut cmd = main_command(&data, 0);
        cmd.envs(crate::common::shim::eio_env(format!("{}/", media.display()), Some(percent), &markers));
        let server = ServerProcess::start(cmd);
        let jobs = wait_terminal(&db, ledger.len(), &[&server]).await;
        drop(server);
        watch.finish(&mut counts);
        let failed_reads = std::fs::read_dir(&markers).unwrap().count();
        counts.kills += failed_reads;
        println!("faults: read-error: run {}: {failed_reads} reads failed with EIO", run + 1);
        for (o, (template, _)) in ledger.originals.iter().zip(files) {
            let Some(j) = job_for(&jobs, o) else { continue };
            match status_of(j) {
                "COMPLETED" => {
                    let got = crate::common::shim::video_frames(&o.target());
                    if got != frames[template] {
                        counts.lost += 1;
                        counts.problem(format!(
                            "ORIGINAL LOST: {} COMPLETED with {got} frames of {}",
                            o.path.display(),
                            frames[template]
                        ));
                    }
                }
                // Three retries of one failed read each: the file failed for another reason.
                _ => {
                    counts.problem(format!("expected COMPLETED after a retry: {:?}", summary(std::slice::from_ref(j))))
                }
            }
        }
        check(&db, &ledger, false, &mut counts).await;
        counts.end_run();
    }
    counts.finish();
}

// ---------------------------------------------------------------------------------------
// Scenario: sources with extra streams

/// Sources with a second video stream, a timecode track, a display matrix, titled and
/// dispositioned audio and subtitles, through a node whose transcoder is killed once per run
/// at a random moment (the retry resumes and muxes again): every stream, tag, disposition and
/// side data of every original is in its replacement.
#[actix_web::test]
async fn sources_with_extra_streams_lose_nothing() {
    let mut counts = Counts::new("extra-streams");
    let mut rng = seeded(counts.scenario);
    let made = tempfile::tempdir().unwrap();
    let templates = [
        crate::common::streams::angles_clip(made.path(), "angles.mkv"),
        crate::common::streams::timecode_clip(made.path(), "camera.mov"),
        crate::common::streams::rotated_clip(made.path(), "phone.mp4"),
    ];
    let facts: Vec<Vec<serde_json::Value>> =
        templates.iter().map(|t| crate::common::streams::facts(t, Some("hevc"))).collect();
    for run in 0..fault_runs() {
        let (dir, data, media) = run_dir();
        let mut ledger = Ledger::default();
        for t in &templates {
            let to = media.join(t.file_name().unwrap());
            std::fs::copy(t, &to).unwrap();
            ledger.record(&to);
        }
        let db = prepare(&data, &media, false, false).await;
        let watch = Watch::start(dir.path(), &ledger);
        let server = ServerProcess::start(main_command(&data, 10));
        let after = ms(rng.gen_range(100..3000));
        tokio::time::sleep(after).await;
        if let Some(victim) = transcoders(dir.path()).first() {
            sigkill(victim.pid);
            counts.kills += 1;
            println!("faults: extra-streams: run {}: killed a transcoder after {after:?}", run + 1);
        }
        let jobs = wait_terminal(&db, ledger.len(), &[&server]).await;
        drop(server);
        watch.finish(&mut counts);
        expect_all(&mut counts, &jobs, &ledger, "COMPLETED");
        for (o, want) in ledger.originals.iter().zip(&facts) {
            if !o.target().exists() {
                continue;
            }
            let got = crate::common::streams::facts(&o.target(), None);
            if &got != want {
                counts.lost += 1;
                counts.problem(format!("ORIGINAL LOST: {} lost streams or their facts: {got:#?}", o.path.display()));
            }
        }
        check(&db, &ledger, false, &mut counts).await;
        counts.end_run();
    }
    counts.expect_transcoders();
    counts.finish();
}
