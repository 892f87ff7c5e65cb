//! API under load: GET /jobs (a page of 50) and GET /queue/stats on a real `condense serve`
//! holding many jobs, from 64 keep-alive connections for a fixed time; and the server's
//! memory with those jobs stored.

use std::path::Path;
use std::time::{Duration, Instant};

use condense::repo::jobs::FoundFile;
use condense::repo::libraries::LibraryPatch;
use sea_orm::ConnectionTrait;

use crate::http::{call, expect, load, login, Load};
use crate::report::Report;
use crate::scan::{bench_library, drop_schema, postgres_schema};
use crate::util::{thousands, Ctx, Mem, Res, Server, TempDir};
use crate::{command, Config};

/// What changed on the way, measured when it was made (same machine, same command).
const HISTORY: &str = "Before the index `idx_jobs_created_at` (jobs `created_at, id`; migration \
    `m20261121_000002_jobs_created_at_index`) every page of `GET /jobs` sorted the whole table, about \
    250 ms of SQLite's time per page at 100,000 jobs: measured on 2026-11-21 with the same command, \
    `GET /jobs?pageSize=50` gave 8 requests/s, p50 6.6 s, p99 8.8 s on SQLite and 43 requests/s, p99 1.7 s \
    on PostgreSQL. Before `job_counts` (migration `m20261126_000019_job_counts`) `GET /queue/stats` counted \
    every job at each request: 270 requests/s, p99 336 ms on SQLite, 135 requests/s, p99 772 ms on \
    PostgreSQL (2026-11-21).\n\nOn 2026-11-26 the previous build (df92737: the counts, not yet the list's \
    indexes and cursors) and this one were run alternately, twice each, on the same machine (the previous \
    build's own `condense-bench api`, which has only the first two endpoints). Default page, requests/s: \
    SQLite 965 and 986 before, 959 and 981 after; PostgreSQL 1476 and 1574 before, 1460 and 1496 after \
    (unchanged, as expected). `GET /queue/stats`: SQLite 3076 and 3310 before, 3228 and 3398 after. The \
    eight new indexes make registering dearer: `register_batch` of 100,000 jobs took 1.52 s (twice) before \
    and 1.94 s and 1.87 s after on SQLite, 5.51 s and 5.25 s before and 7.26 s and 6.78 s after on \
    PostgreSQL. On the way: a cursor as one row comparison `(created_at, id) < (?, ?)` gave 260 requests/s \
    on SQLite, less than the `OFFSET` page, because SQLite seeks on the first column only and walked the \
    50,000 jobs of the batch's one creation time; and before SQLite was kept to the sort's index, \
    `status=QUEUED&sort=fileName` gave 6 requests/s, p50 8.2 s (every QUEUED job read and sorted for each \
    page). Where the default page's time goes, on SQLite (`perf record -F 499 -g` on the server during its \
    load, cpu-clock samples): 42 % in the kernel, mostly thread switches (sqlx runs each SQLite connection on \
    a thread of its own and hands every row to the async side through a channel), 25 % in libc (malloc \
    above all), 33 % in condense itself. A filtered total (`libraryId`, `node`, `q`) still counts the \
    matching rows: about 260 requests/s at 100,000 jobs in one library.\n\nOn 2026-11-27 identical requests \
    that wait together began to share one read (`http::coalesce`: the token's user by name, the `/jobs` page by \
    query string, `/queue/stats`); each request still gets a read that began after it arrived. The previous build \
    (3833bb1) and this one were served the same load by the same benchmark binary, one after the other on the \
    same machine (`CONDENSE_BIN=<3833bb1's condense> condense-bench api`, then this build's). Requests/s and \
    p99, before and after: `GET /jobs?pageSize=50` SQLite 793, 99.4 ms -> 17,008, 6.3 ms; PostgreSQL 1,848, \
    46.1 ms -> 17,242, 6.4 ms. `GET /queue/stats` SQLite 3,283, 24.2 ms -> 34,364, 3.1 ms; PostgreSQL 2,366, \
    33.8 ms -> 21,993, 5.3 ms. One page per connection (only the user shared): SQLite 737, 98.0 ms -> 835, \
    108.2 ms; PostgreSQL 1,164, 75.2 ms -> 1,390, 78.4 ms: a read nobody shares costs what it did.";

pub const ENDPOINTS: [(&str, &str); 2] =
    [("GET /jobs?pageSize=50", "/jobs?pageSize=50"), ("GET /queue/stats", "/queue/stats")];

/// A migrated database with `jobs` QUEUED jobs of one (disabled) library, inserted with
/// `repo::jobs::register_batch`. Answers how long the insert took.
pub async fn fill(url: &str, jobs: usize) -> Res<f64> {
    let (db, library) = bench_library(url, "/bench-library").await?;
    // Disabled: the server must not rescan it at start (its files do not exist, and a scan
    // would drop their jobs).
    condense::repo::libraries::update(&db, library.id, LibraryPatch { enabled: Some(false), ..Default::default() })
        .await
        .ctx("disabling the library")?;
    let files: Vec<FoundFile> = (0..jobs)
        .map(|i| FoundFile {
            path: format!("/bench-library/d{:03}/d{:02}/Film {i:06} (2020).mkv", i / 1000, (i / 100) % 10).into(),
            file_name: format!("Film {i:06} (2020).mkv"),
            size: 1_000_000_000 + i as i64,
            mtime_ns: 1_700_000_000_000_000_000 + i as i64,
            inode: i as i64 + 1,
        })
        .collect();
    let started = Instant::now();
    let queued = condense::repo::jobs::register_batch(&db, library.id, "hevc", &files).await.ctx("register_batch")?;
    let seconds = started.elapsed().as_secs_f64();
    if queued != jobs as u64 {
        return Err(format!("register_batch queued {queued} jobs of {jobs}"));
    }
    // Found files are PENDING until the probe after a scan; these stand for probed ones.
    db.execute_unprepared("UPDATE jobs SET status = 'QUEUED', queued_at = created_at").await.ctx("queueing")?;
    // Every job with the facts the probe after a scan records (a real clip's probe, about
    // 2 KB of JSON a row), as a library the service has scanned holds them.
    let clip_dir = TempDir::new(&std::env::temp_dir(), "api-clip")?;
    let clip = crate::probe::make_clips(clip_dir.path())?.into_iter().next().ctx("no clip")?;
    let info = condense_media::probe::probe(&clip).map_err(|e| e.message)?;
    let facts = entities::job::ActiveModel {
        source_codec: sea_orm::Set(info.video().map(|v| v.codec.clone())),
        duration_seconds: sea_orm::Set(info.duration_seconds),
        hdr: sea_orm::Set(Some(info.hdr.kind.as_str().to_string())),
        probe: sea_orm::Set(serde_json::to_value(&info).ok()),
        ..Default::default()
    };
    <entities::job::Entity as sea_orm::EntityTrait>::update_many()
        .set(facts)
        .exec(&db)
        .await
        .ctx("recording the probes")?;
    if db.get_database_backend() == sea_orm::DbBackend::Postgres {
        // The state autovacuum reaches shortly after a bulk insert: visibility map and
        // planner statistics up to date.
        for table in ["jobs", "job_events"] {
            db.execute_unprepared(&format!("VACUUM ANALYZE {table}")).await.ctx("VACUUM ANALYZE")?;
        }
    }
    let _ = db.close().await;
    Ok(seconds)
}

pub struct ApiRun {
    pub fill_seconds: f64,
    /// Memory after start-up and a few requests of each endpoint.
    pub mem_warm: Mem,
    /// Memory after the load runs.
    pub mem_after: Mem,
    pub loads: Vec<(String, Load)>,
}

async fn measure(cfg: &Config, bin: &Path, data_dir: &Path, url: &str, database_url: Option<&str>) -> Res<ApiRun> {
    let fill_seconds = fill(url, cfg.api_jobs).await?;
    let mut env = vec![("MAX_JOBS", "0".to_string())];
    if let Some(db) = database_url {
        env.push(("DATABASE_URL", db.to_string()));
    }
    let server = Server::start(bin, data_dir, &env)?;
    let addr = server.addr.clone();
    let token = login(&addr).await?;
    let page = expect(&addr, "GET", ENDPOINTS[0].1, Some(&token), None, 200).await?;
    if page["total"] != cfg.api_jobs {
        return Err(format!("GET /jobs says {} jobs, not {}", page["total"], cfg.api_jobs));
    }
    for _ in 0..5 {
        for (_, path) in ENDPOINTS {
            let (status, body) = call(&addr, "GET", path, Some(&token), None).await?;
            if status != 200 {
                return Err(format!("GET {path}: {status} {body}"));
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mem_warm = server.mem()?;
    // The same depth (page 1,000 of 50 when there are 100,000 jobs) by number and by cursor.
    let deep_page = (cfg.api_jobs / 50 / 2).max(2);
    let before =
        expect(&addr, "GET", &format!("/jobs?pageSize=50&page={}", deep_page - 1), Some(&token), None, 200).await?;
    let cursor = before["nextCursor"].as_str().ctx("no nextCursor on a page in the middle")?.to_string();
    let by_number =
        expect(&addr, "GET", &format!("/jobs?pageSize=50&page={deep_page}"), Some(&token), None, 200).await?;
    let by_cursor = expect(&addr, "GET", &format!("/jobs?pageSize=50&after={cursor}"), Some(&token), None, 200).await?;
    if by_number["items"] != by_cursor["items"] {
        return Err(format!("page {deep_page} by number and by cursor differ"));
    }
    let one = |name: String, path: String| (name, vec![path]);
    let mut endpoints: Vec<(String, Vec<String>)> =
        ENDPOINTS.iter().map(|(name, path)| one(name.to_string(), path.to_string())).collect();
    endpoints.extend([
        one(format!("GET /jobs?pageSize=50&page={deep_page}"), format!("/jobs?pageSize=50&page={deep_page}")),
        one(format!("GET /jobs?pageSize=50&after=(page {deep_page})"), format!("/jobs?pageSize=50&after={cursor}")),
        one(
            "GET /jobs?pageSize=50&status=QUEUED&sort=fileName".into(),
            "/jobs?pageSize=50&status=QUEUED&sort=fileName".into(),
        ),
        one("GET /jobs?pageSize=50&libraryId=1".into(), "/jobs?pageSize=50&libraryId=1".into()),
        // Every connection a page of its own (pages 1 to 64): no two requests can share a read.
        (
            format!("GET /jobs?pageSize=50&page=1…{}, one page per connection", cfg.api_connections),
            (1..=cfg.api_connections).map(|page| format!("/jobs?pageSize=50&page={page}")).collect(),
        ),
    ]);
    let mut loads = Vec::new();
    for (name, paths) in endpoints {
        // A short warm-up at full concurrency, then the measured run.
        load(&addr, &paths, &token, cfg.api_connections, Duration::from_millis(500)).await?;
        loads.push((name, load(&addr, &paths, &token, cfg.api_connections, cfg.api_duration).await?));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mem_after = server.mem()?;
    Ok(ApiRun { fill_seconds, mem_warm, mem_after, loads })
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let cmd = command("api");
    // With BENCH_BASELINE_BIN, that build serves the same load after this one, in the same run.
    let mut builds = vec![(String::new(), cfg.bin.clone())];
    if let Some(bin) = std::env::var_os("BENCH_BASELINE_BIN").map(std::path::PathBuf::from) {
        builds.push((", baseline build".to_string(), bin));
    }
    let mut runs: Vec<(String, ApiRun)> = Vec::new();
    let mut postgres_note = String::new();
    let mut baseline_note = String::new();
    for (which, bin) in &builds {
        let baseline = !which.is_empty();
        let sqlite = {
            let tmp = TempDir::new(&cfg.tmp, "api-sqlite")?;
            let url = format!("sqlite://{}?mode=rwc", tmp.path().join("condense.db").display());
            measure(cfg, bin, tmp.path(), &url, None).await
        };
        match sqlite {
            Ok(run) => runs.push((format!("SQLite{which}"), run)),
            // The baseline may not open a database this build migrated (a newer migration).
            Err(e) if baseline => baseline_note.push_str(&format!(" On SQLite the baseline failed: {e}.")),
            Err(e) => return Err(e),
        }
        match postgres_schema(&cfg.postgres_url, "api").await {
            Some((admin, schema, url)) => {
                let tmp = TempDir::new(&cfg.tmp, "api-postgres")?;
                let outcome = measure(cfg, bin, tmp.path(), &url, Some(&url)).await;
                drop_schema(&admin, &schema).await;
                match outcome {
                    Ok(run) => runs.push((format!("PostgreSQL{which}"), run)),
                    Err(e) if baseline => baseline_note.push_str(&format!(" On PostgreSQL the baseline failed: {e}.")),
                    Err(e) => return Err(e),
                }
                postgres_note = format!(
                    "PostgreSQL: `{}`, in a schema of its own (`bench_api_PID`, given to the server through \
                     `DATABASE_URL` with `options=-c search_path=…`), dropped afterwards.",
                    cfg.postgres_url
                );
            }
            None if baseline => {}
            None => report.row("API, PostgreSQL", format!("skipped: no PostgreSQL at {}", cfg.postgres_url), "", &cmd),
        }
    }
    if let Some((_, bin)) = builds.get(1) {
        postgres_note.push_str(&format!(
            "\n\nSide by side: the build at `{}` (BENCH_BASELINE_BIN) served the same load after this one, in the \
             same run, on a database filled the same way (rows marked baseline build).{baseline_note}",
            bin.display()
        ));
    }
    let mut table = String::from(
        "| database | endpoint | requests | errors | requests/s | p50 | p99 | max |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (backend, run) in &runs {
        for (name, l) in &run.loads {
            report.row(
                format!("{name}, {backend}, {} jobs, {} conns", thousands(cfg.api_jobs as u64), cfg.api_connections),
                format!("{:.0} req/s, p50 {:.1} ms, p99 {:.1} ms", l.rps(), l.p_ms(50.0), l.p_ms(99.0)),
                "p99 < 20 ms",
                &cmd,
            );
            if l.errors > 0 {
                report.row(format!("{name}, {backend}: failed requests"), l.errors.to_string(), "0", &cmd);
            }
            table.push_str(&format!(
                "| {backend} | `{name}` | {} | {} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms |\n",
                l.requests,
                l.errors,
                l.rps(),
                l.p_ms(50.0),
                l.p_ms(99.0),
                l.p_ms(100.0)
            ));
        }
    }
    let mut fills = String::new();
    for (backend, run) in &runs {
        fills.push_str(&format!(
            "- {backend}: `register_batch` of {} jobs took {:.2} s; the server's RSS after start-up and 5 requests \
             of each endpoint: {}; after the load runs: {} (peak {}).\n",
            thousands(cfg.api_jobs as u64),
            run.fill_seconds,
            run.mem_warm.describe(),
            run.mem_after.describe(),
            crate::util::mib(run.mem_after.hwm_kb),
        ));
    }
    report.section(
        "API",
        format!(
            "`condense serve` (release build, `MAX_JOBS=0` so that nothing encodes, default `HTTP_WORKERS=2`) \
             over a database holding {jobs} QUEUED jobs of one library, inserted beforehand with \
             `condense::repo::jobs::register_batch` (the library is disabled, so the server does not rescan \
             it; on PostgreSQL its tables are then `VACUUM ANALYZE`d, the state autovacuum reaches soon after a bulk \
             insert). Load: {conns} keep-alive HTTP/1.1 connections from the benchmark (a small client over tokio \
             `TcpStream`, one thread), each sending the next request as soon as the previous answer is \
             complete (closed loop), with a bearer token; 0.5 s of warm-up, then {secs:.0} s measured per \
             endpoint. Latency is from writing the request to reading the whole answer. The client shares the \
             machine's 2 cores with the server. In a closed loop the mean latency is the number of \
             connections over the throughput: a p99 under 20 ms with {conns} connections needs well over \
             {needed:.0} requests a second. Every connection of a row asks for the same path, as open \
             dashboards poll the same first page and counts, except the row marked one page per connection. \
             Identical requests that wait together share one read (`http::coalesce`, never a read that began \
             before the request arrived), so the rows of one path measure that sharing, and the row of one \
             page per connection what a read costs when only the token's user is shared.\n\n{table}\n{fills}\n{postgres_note}\n\n{HISTORY}",
            jobs = thousands(cfg.api_jobs as u64),
            conns = cfg.api_connections,
            secs = cfg.api_duration.as_secs_f64(),
            needed = cfg.api_connections as f64 / 0.020,
        ),
    );
    Ok(())
}
