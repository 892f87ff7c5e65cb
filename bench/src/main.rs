//! condense-bench: the benchmark suite behind `make bench`. It makes its media with the
//! ffmpeg program, starts the real `condense` binary as child processes (and, for the
//! WebSocket fan-out and the scan's peak memory, runs parts of condense in child processes
//! of its own), prints a table and writes BENCHMARKS.md.
//!
//! `condense-bench [MEASURE...]` runs the named measures (encode, encode-memory, rules, cluster, transfer, library, quality,
//! probe, health, analyse, scan, api, ws, memory, logins) or, without names, all of them; only
//! a full run writes BENCHMARKS.md (or any run with BENCH_OUTPUT set). BENCH_QUICK=1 scales
//! every size down for a quick check.
//! Timings are figures, never assertions: nothing here fails on a timing.
// The benchmark reads the API's JSON answers as `value["key"]`, which gives Null for a
// missing key and never panics, but which `indexing_slicing` cannot tell from a slice
// index; its byte-level parsing checks lengths before it slices. A panic here would end a
// benchmark run, never the service.
#![allow(clippy::indexing_slicing)]

mod analyse;
mod api;
mod cluster;
mod encode;
mod encode_memory;
mod health;
mod http;
mod library;
mod logins;
mod memory;
mod probe;
mod quality;
mod report;
mod rules;
mod scan;
mod transfer;
mod util;
mod ws;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use report::Report;
use util::{Ctx, Res};

/// What a run measures, and how big.
pub struct Config {
    pub quick: bool,
    /// The condense binary (CONDENSE_BIN, else target/release/condense).
    pub bin: PathBuf,
    /// Where media, databases and file trees go (BENCH_TMPDIR, else the system's).
    pub tmp: PathBuf,
    pub postgres_url: String,
    pub clip_seconds: u32,
    pub encode_rounds: usize,
    pub probe_files: usize,
    /// Files of the end-to-end analysis (BENCH_ANALYSE_FILES, else 2,000).
    pub analyse_files: usize,
    pub scan_files: usize,
    pub api_jobs: usize,
    pub api_connections: usize,
    pub api_duration: Duration,
    pub ws_subscribers: usize,
    pub ws_rate: u32,
    pub ws_seconds: u32,
}

impl Config {
    fn from_env() -> Config {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let bin = std::env::var_os("CONDENSE_BIN").map(PathBuf::from).unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
            target.join("release").join("condense")
        });
        let tmp = std::env::var_os("BENCH_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let postgres_url = std::env::var("BENCH_POSTGRES_URL")
            .or_else(|_| std::env::var("TEST_POSTGRES_URL"))
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        Config {
            quick,
            bin,
            tmp,
            postgres_url,
            clip_seconds: if quick { 6 } else { 60 },
            // BENCH_ROUNDS: fewer interleaved rounds of the encode and cluster measures.
            encode_rounds: std::env::var("BENCH_ROUNDS")
                .ok()
                .and_then(|r| r.parse().ok())
                .filter(|r| *r > 0)
                .unwrap_or(if quick { 1 } else { 2 }),
            probe_files: if quick { 100 } else { 1_000 },
            analyse_files: std::env::var("BENCH_ANALYSE_FILES")
                .ok()
                .and_then(|n| n.parse().ok())
                .filter(|n| *n > 0)
                .unwrap_or(if quick { 200 } else { 2_000 }),
            scan_files: if quick { 5_000 } else { 100_000 },
            api_jobs: if quick { 5_000 } else { 100_000 },
            api_connections: 64,
            api_duration: Duration::from_secs(if quick { 1 } else { 5 }),
            ws_subscribers: if quick { 200 } else { 1_000 },
            ws_rate: 100,
            ws_seconds: if quick { 1 } else { 3 },
        }
    }
}

pub const MEASURES: &[&str] = &[
    "encode",
    "encode-memory",
    "rules",
    "cluster",
    "transfer",
    "library",
    "quality",
    "probe",
    "health",
    "analyse",
    "scan",
    "api",
    "ws",
    "memory",
    "logins",
];

/// The command that gives the figures of one measure.
pub fn command(measure: &str) -> String {
    format!("cargo run --release -p condense-bench -- {measure}")
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(std::num::NonZero::get).unwrap_or(1);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    format!("{cores} cores ({model}), {:.0} GiB", mem_kb as f64 / 1024.0 / 1024.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn run_all(cfg: &Config, wanted: &[String]) -> Report {
    let mut report = Report::default();
    let runs = |m: &str| wanted.is_empty() || wanted.iter().any(|w| w == m);
    println!("{:<58} {:>30}   goal", "measure", "figure");
    if runs("encode") {
        if let Err(e) = encode::run(cfg, &mut report).await {
            report.failed("encode overhead", &e);
        }
    }
    if runs("encode-memory") {
        if let Err(e) = encode_memory::run(cfg, &mut report).await {
            report.failed("memory while encoding", &e);
        }
    }
    if runs("rules") {
        if let Err(e) = rules::run(cfg, &mut report).await {
            report.failed("stream rules in the one pass", &e);
        }
    }
    if runs("cluster") {
        if let Err(e) = cluster::run(cfg, &mut report).await {
            report.failed("two nodes, one job", &e);
        }
    }
    if runs("transfer") {
        if let Err(e) = transfer::run(cfg, &mut report).await {
            report.failed("a node without the share", &e);
        }
    }
    if runs("library") {
        if let Err(e) = library::run(cfg, &mut report).await {
            report.failed("a whole library", &e);
        }
    }
    if runs("quality") {
        if let Err(e) = quality::run(cfg, &mut report).await {
            report.failed("quality targeting", &e);
        }
    }
    if runs("probe") {
        if let Err(e) = probe::run(cfg, &mut report) {
            report.failed("probing", &e);
        }
    }
    if runs("health") {
        if let Err(e) = health::run(cfg, &mut report).await {
            report.failed("library health checks", &e);
        }
    }
    if runs("analyse") {
        if let Err(e) = analyse::run(cfg, &mut report).await {
            report.failed("analysis at scan speed", &e);
        }
    }
    if runs("scan") {
        if let Err(e) = scan::run(cfg, &mut report).await {
            report.failed("library scan", &e);
        }
    }
    if runs("api") {
        if let Err(e) = api::run(cfg, &mut report).await {
            report.failed("API", &e);
        }
    }
    if runs("ws") {
        if let Err(e) = ws::run(cfg, &mut report).await {
            report.failed("WebSocket fan-out", &e);
        }
    }
    if runs("memory") {
        if let Err(e) = memory::run(cfg, &mut report).await {
            report.failed("memory", &e);
        }
    }
    if runs("logins") {
        if let Err(e) = logins::run(cfg, &mut report).await {
            report.failed("logins at once", &e);
        }
    }
    report
}

/// 1,000 WebSocket subscribers need more descriptors than the usual soft limit of 1,024 (in
/// this process and in the server it starts, which inherits the limit).
fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < 65_536 {
            limit.rlim_cur = limit.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn main_run(args: &[String]) -> Res<bool> {
    let cfg = Config::from_env();
    if let Some(unknown) = args.iter().find(|a| !MEASURES.contains(&a.as_str())) {
        return Err(format!("unknown measure {unknown:?}; known: {}", MEASURES.join(", ")));
    }
    if !cfg.bin.is_file() {
        return Err(format!(
            "{} not found: build it first (cargo build --release --bin condense --bin condense-media) or set CONDENSE_BIN",
            cfg.bin.display()
        ));
    }
    raise_open_files_limit();
    let started = Instant::now();
    let date = chrono::Utc::now();
    let load_before = load_average();
    println!(
        "condense-bench on {}{}; load average {load_before}",
        machine(),
        if cfg.quick { ", BENCH_QUICK=1 (sizes scaled down)" } else { "" }
    );
    let report = actix_web::rt::System::new().block_on(run_all(&cfg, args));
    let took = started.elapsed().as_secs();
    println!("took {} min {} s; load average {}", took / 60, took % 60, load_average());
    let output = std::env::var_os("BENCH_OUTPUT").map(PathBuf::from);
    let output = match output {
        Some(path) => Some(path),
        None if args.is_empty() => Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("BENCHMARKS.md")),
        None => None,
    };
    if let Some(path) = output {
        let header = format!(
            "Written by `make bench` on {}, {}; the measurements took {} min {} s{} (builds not counted). Load average (1, 5, 15 min) \
             {load_before} at the start and {} at the end: other work shared the machine, so timings \
             are indicative; ratios compare runs made side by side. Goals are goals, not assertions.",
            date.format("%Y-%m-%d"),
            machine(),
            took / 60,
            took % 60,
            if cfg.quick { " with BENCH_QUICK=1 (sizes scaled down)" } else { "" },
            load_average(),
        );
        report.write(&path, &header)?;
        println!("wrote {}", path.display());
    }
    Ok(report.failures.is_empty())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        // Child processes of the benchmark itself.
        Some("scan-worker") => scan::worker(&args[1..]).map(|()| true),
        Some("ws-server") => ws::server_main(&args[1..]).map(|()| true),
        _ => main_run(&args),
    };
    match result.ctx("condense-bench") {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("condense-bench: some measures failed (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
