//! Memory of the main node: idle after start-up, and holding many jobs after serving a few
//! /jobs and /queue/stats requests.

use std::path::Path;
use std::time::Duration;

use crate::api::{fill, ENDPOINTS};
use crate::http::{expect, login};
use crate::report::Report;
use crate::util::{thousands, Mem, Res, Server, TempDir};
use crate::{command, Config};

const IDLE_SAMPLES: usize = 3;

/// What changed on the way, measured side by side when it was made (BENCH_BASELINE_BIN).
const HISTORY: &str = "\nChanges on 2026-11-21, each measured side by side with the build before it \
    (`BENCH_BASELINE_BIN=… cargo run --release -p condense-bench -- memory`):\n\n\
    - condense no longer links libavfilter, which it did not use (only `condense version` named it): with it \
    went 31 shared libraries (speech synthesis and recognition, Vulkan, LAPACK…). Idle: 63.8 MiB (anon 17.1, file 46.6) \
    before, 53.4 MiB (anon 13.7, file 39.8) after.\n\
    - `condense serve` fixes glibc's mmap threshold (see `serve::fix_allocator_thresholds`): before, each \
    HTTP worker that checked a password (argon2, 19 MiB) kept those 19 MiB. With 100,000 jobs after a login \
    and a few requests: 80.7 MiB (anon 41.7) before, 60.4 MiB (anon 21.2) after; idle 52.6 MiB before, \
    51.8 MiB after.\n\
    - Tried and left: `HTTP_WORKERS=1` and `MALLOC_ARENA_MAX=2` each save about 1 MiB idle; not worth a \
    change of defaults. What remains is mostly file-backed: about 16 MiB of the condense binary's own code \
    and 24 MiB of FFmpeg's libraries and their dependencies (libx265, SVT-AV1, dav1d, GnuTLS…), shared \
    with any other process that maps them and reclaimable by the kernel; anonymous memory is about 13 MiB.\n\n\
    On 2026-11-27, side by side with the build before it (e1952c5): `condense` no longer links FFmpeg; every \
    piece of media work runs in `condense-media` children (see docs/ARCHITECTURE.md, \"Processes\"). Idle: 59.4 MiB \
    (anon 16.2, file 43.1) before, 33.4 MiB (anon 11.6, file 21.8) after; with 100,000 jobs: 61.7 MiB (anon 17.8, \
    file 43.9) before, 37.6 MiB (anon 15.2, file 22.3) after. Of the 21.8 MiB file-backed, 20 MiB are pages of \
    the condense binary's own code (15 of its 19 MiB of text are mapped once start-up has run through it: the \
    kernel maps the pages around each one touched). Then, measured against that build: the log writer's \
    buffer of 128,000 lines, allocated and written through at start (4 MiB), cut to 8,192 lines \
    (`telemetry::LOG_LINES_BUFFERED`); glibc's malloc arenas capped at two (`serve::fix_allocator_thresholds`); \
    the release profile built with fat LTO and one codegen unit (the binary's text 28.3 -> 22.2 MB). Idle: \
    24.6 MiB (anon 7.0, file 17.6); with 100,000 jobs: 28.0 MiB (anon 10.1, file 18.0).\n\n\
    On 2026-11-30, side by side with b900e69 (the build of 2026-11-27): the rearrangement had the OpenAPI \
    document built while each HTTP worker started (3.1 MiB of heap); it is built at its first request again \
    (`http::API`). Idle, fat LTO: 25.0 MiB (anon 7.2, file 17.8) for b900e69, 27.9 MiB (anon 8.8, file 19.0) \
    after the fix (about 31 before it). The rest is the work since: 1.5 MB more live heap (glibc's \
    `malloc_stats`), most of it per HTTP worker (each holds every route twice, at the root and under /api, and \
    there are 15 more), and 1.2 MiB more of the binary's code run at start-up. Then the API listener's route \
    table was registered once per worker instead of twice (`http::prefix` answers unprefixed paths with the \
    /api routes), side by side with the build before it, LTO off (the profile fast to build): idle 33.8 -> \
    31.1 MiB (anon 9.4 -> 7.7), with 100,000 jobs 34.9 -> 32.4 MiB; fat LTO, on another machine than the \
    figures above (2 cores, Intel Xeon): idle 26.8 MiB, twice. Tried and left on 2026-11-30 (AMD EPYC, LTO off, \
    side by side): sqlx's statement cache per SQLite connection cut from 100 to 16, idle 32.9 MiB both, with \
    100,000 jobs 34.1 against 34.5 MiB.\n";

/// RSS of a fresh main node (SQLite in a new DATA_DIR) after start-up, one /healthz and 2 s.
async fn idle(bin: &Path, dir: &Path) -> Res<Mem> {
    let _ = std::fs::remove_dir_all(dir);
    let server = Server::start(bin, dir, &[])?;
    let health = expect(&server.addr, "GET", "/healthz", None, None, 200).await?;
    if health["status"] != "ok" {
        return Err(format!("/healthz: {health}"));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.mem()
}

/// RSS of a main node over a database of `cfg.api_jobs` jobs (MAX_JOBS=0, nothing encodes)
/// after start-up, a login and 5 requests each of GET /jobs and GET /queue/stats.
async fn with_jobs(bin: &Path, cfg: &Config, data: &Path) -> Res<Mem> {
    let _ = std::fs::remove_dir_all(data);
    std::fs::create_dir_all(data).map_err(|e| e.to_string())?;
    let url = format!("sqlite://{}?mode=rwc", data.join("condense.db").display());
    fill(&url, cfg.api_jobs).await?;
    let server = Server::start(bin, data, &[("MAX_JOBS", "0".into())])?;
    let token = login(&server.addr).await?;
    for _ in 0..5 {
        for (_, path) in ENDPOINTS {
            expect(&server.addr, "GET", path, Some(&token), None, 200).await?;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.mem()
}

fn median(mut v: Vec<Mem>) -> Mem {
    v.sort_by_key(|m| m.rss_kb);
    v.get(v.len() / 2).copied().unwrap_or_default()
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let cmd = command("memory");
    let tmp = TempDir::new(&cfg.tmp, "memory")?;
    // BENCH_BASELINE_BIN: another build of condense, measured side by side (before/after).
    let baseline_bin = std::env::var_os("BENCH_BASELINE_BIN").map(std::path::PathBuf::from);
    let (mut current, mut baseline) = (Vec::new(), Vec::new());
    for i in 0..IDLE_SAMPLES {
        if let Some(bin) = &baseline_bin {
            baseline.push(idle(bin, &tmp.path().join(format!("baseline-{i}"))).await?);
        }
        current.push(idle(&cfg.bin, &tmp.path().join(format!("idle-{i}"))).await?);
    }
    let idle_mem = median(current.clone());
    report.row("main node RSS, idle (fresh SQLite)", crate::util::mib(idle_mem.rss_kb), "< 25 MiB", &cmd);

    let jobs_mem = with_jobs(&cfg.bin, cfg, &tmp.path().join("jobs")).await?;
    report.row(
        format!("main node RSS, {} jobs, after a few /jobs + /queue/stats", thousands(cfg.api_jobs as u64)),
        crate::util::mib(jobs_mem.rss_kb),
        "< 60 MiB",
        &cmd,
    );

    let samples = |v: &[Mem]| v.iter().map(|m| crate::util::mib(m.rss_kb)).collect::<Vec<_>>().join(", ");
    let mut body = format!(
        "RSS (`VmRSS` of `/proc/PID/status`) of `condense serve` (release build, the main node with its \
         defaults: SQLite in a fresh `DATA_DIR`, `HTTP_WORKERS=2`, one UI worker, `MAX_JOBS=1`), read 2 s after \
         one `GET /healthz`; the median of {IDLE_SAMPLES} starts ({samples}). Anonymous memory and pages of \
         mapped files (the binary and the shared libraries it needs) are given apart:\n\n\
         - idle: {idle}, peak during start-up {idle_peak}.\n\
         - with {jobs} jobs stored (SQLite, inserted with `register_batch`, `MAX_JOBS=0`), after start-up, a login \
         and 5 requests each of `GET /jobs?pageSize=50` and `GET /queue/stats`: {with}, peak {with_peak}. The API \
         section gives the same figure after its load runs.\n",
        samples = samples(&current),
        idle = idle_mem.describe(),
        idle_peak = crate::util::mib(idle_mem.hwm_kb),
        jobs = thousands(cfg.api_jobs as u64),
        with = jobs_mem.describe(),
        with_peak = crate::util::mib(jobs_mem.hwm_kb),
    );
    body.push_str(HISTORY);
    if let Some(bin) = &baseline_bin {
        let base = median(baseline.clone());
        report.row(
            format!("main node RSS, idle, baseline build {}", bin.display()),
            crate::util::mib(base.rss_kb),
            "",
            &cmd,
        );
        body.push_str(&format!(
            "\nSide by side with the build at `{}` (BENCH_BASELINE_BIN), idle: {} ({}) against {} for this build.\n",
            bin.display(),
            base.describe(),
            samples(&baseline),
            idle_mem.describe()
        ));
        // The baseline may not open a database this build migrated (a newer migration).
        match with_jobs(bin, cfg, &tmp.path().join("baseline-jobs")).await {
            Ok(m) => {
                report.row(
                    format!("main node RSS, {} jobs, baseline build", thousands(cfg.api_jobs as u64)),
                    crate::util::mib(m.rss_kb),
                    "",
                    &cmd,
                );
                body.push_str(&format!(
                    "With {} jobs: {} against {} for this build.\n",
                    thousands(cfg.api_jobs as u64),
                    m.describe(),
                    jobs_mem.describe()
                ));
            }
            Err(e) => {
                body.push_str(&format!("With {} jobs: the baseline failed ({e}).\n", thousands(cfg.api_jobs as u64)))
            }
        }
    }
    report.section("Memory", body);
    Ok(())
}
