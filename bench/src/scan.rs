//! Library scan: a tree of many files (hard links to a few small clips, in nested folders)
//! found and registered as PENDING jobs by `condense::actors::library::scan` on a fresh
//! database, in a child process of its own so that its peak memory (VmHWM) is the scan's.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use sea_orm::ConnectionTrait;
use serde_json::{json, Value};

use crate::probe::make_clips;
use crate::report::Report;
use crate::util::{mib, thousands, Ctx, Mem, Res, TempDir};
use crate::{command, Config};

/// `condense-bench scan-worker walk|scan DATABASE_URL ROOT`: prints one JSON line.
pub fn worker(args: &[String]) -> Res<()> {
    let [mode, url, root] = args else { return Err("usage: scan-worker walk|scan DATABASE_URL ROOT".into()) };
    let baseline = Mem::of("self")?;
    let result = match mode.as_str() {
        "walk" => {
            let started = Instant::now();
            let (files, _partials) = condense::actors::library::walk(std::slice::from_ref(root));
            json!({"seconds": started.elapsed().as_secs_f64(), "found": files.len(), "queued": 0})
        }
        "scan" => actix_web::rt::System::new().block_on(async {
            let (db, library) = bench_library(url, root).await?;
            let started = Instant::now();
            // An unwatched library: no settle time applies.
            let (report, _) =
                condense::actors::library::scan(&db, library.id, std::time::Duration::ZERO).await.ctx("scanning")?;
            let seconds = started.elapsed().as_secs_f64();
            let _ = db.close().await;
            Ok::<Value, String>(json!({"seconds": seconds, "found": report.found, "queued": report.queued}))
        })?,
        other => return Err(format!("unknown scan-worker mode {other:?}")),
    };
    let peak = Mem::of("self")?;
    let mut result = result;
    result["hwmKb"] = json!(peak.hwm_kb);
    result["baselineHwmKb"] = json!(baseline.hwm_kb);
    println!("{result}");
    Ok(())
}

struct Outcome {
    seconds: f64,
    found: u64,
    queued: u64,
    hwm_kb: u64,
    baseline_kb: u64,
}

fn run_worker(mode: &str, url: &str, root: &Path) -> Res<Outcome> {
    let exe = std::env::current_exe().ctx("this executable")?;
    let out = Command::new(exe).args(["scan-worker", mode, url]).arg(root).output().ctx("starting the scan worker")?;
    if !out.status.success() {
        return Err(format!("scan worker ({mode}): {}", String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{')).ctx("no result from the scan worker")?;
    let v: Value = serde_json::from_str(line).ctx("scan worker result")?;
    Ok(Outcome {
        seconds: v["seconds"].as_f64().unwrap_or(0.0),
        found: v["found"].as_u64().unwrap_or(0),
        queued: v["queued"].as_u64().unwrap_or(0),
        hwm_kb: v["hwmKb"].as_u64().unwrap_or(0),
        baseline_kb: v["baselineHwmKb"].as_u64().unwrap_or(0),
    })
}

/// `root/dNNN/dNN/file-NNNNNN.EXT`, 100 files per folder, hard links to `clips`.
fn make_tree(root: &Path, clips: &[std::path::PathBuf], files: usize) -> Res<()> {
    for i in 0..files {
        let dir = root.join(format!("d{:03}", i / 1000)).join(format!("d{:02}", (i / 100) % 10));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).ctx("creating folders")?;
        }
        let clip = &clips[i % clips.len()];
        let ext = clip.extension().and_then(|e| e.to_str()).unwrap_or("mkv");
        std::fs::hard_link(clip, dir.join(format!("file-{i:06}.{ext}"))).ctx("linking a clip")?;
    }
    Ok(())
}

/// A schema of its own on the PostgreSQL server, and a URL whose connections use it; None
/// when no server answers.
pub async fn postgres_schema(base: &str, name: &str) -> Option<(sea_orm::DatabaseConnection, String, String)> {
    let admin = condense::repo::connect(base).await.ok()?;
    let schema = format!("bench_{name}_{}", std::process::id());
    admin.execute_unprepared(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await.ok()?;
    admin.execute_unprepared(&format!("CREATE SCHEMA \"{schema}\"")).await.ok()?;
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    Some((admin, schema, url))
}

/// A migrated database at `url` with the one library the benchmarks use: HEVC at libx265's
/// defaults, unwatched (so no settle time applies), on `path`.
pub async fn bench_library(url: &str, path: &str) -> Res<(sea_orm::DatabaseConnection, entities::library::Model)> {
    let db = condense::repo::connect(url).await.ctx("connecting")?;
    condense::repo::migrate(&db).await.ctx("migrating")?;
    let library = condense::repo::libraries::create(
        &db,
        condense::repo::libraries::NewLibrary {
            name: "bench".into(),
            paths: vec![path.into()],
            target_codec: "hevc".into(),
            encoder: "libx265".into(),
            quality: 28,
            preset: "medium".into(),
            watch: false,
            quality_mode: "crf".into(),
            target_vmaf: 95.0,
            max_size_percent: 80,
            keep_dolby_vision: false,
            keep_modified_time: false,
            rate_control: "crf".into(),
            target_bitrate_kbps: None,
            stream_rules: Default::default(),
        },
    )
    .await
    .ctx("creating the library")?;
    Ok((db, library))
}

pub async fn drop_schema(admin: &sea_orm::DatabaseConnection, schema: &str) {
    let _ = admin.execute_unprepared(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await;
    let _ = admin.clone().close().await;
}

fn rows(report: &mut Report, backend: &str, o: &Outcome, files: usize) {
    let cmd = command("scan");
    let files = thousands(files as u64);
    report.row(
        format!("scan {files} files, {backend}: found + registered"),
        format!("{:.2} s, {:.0} files/s", o.seconds, o.found as f64 / o.seconds.max(1e-9)),
        "< 60 s",
        &cmd,
    );
    report.row(format!("scan {files} files, {backend}: peak memory (VmHWM)"), mib(o.hwm_kb), "< 200 MB", &cmd);
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "scan")?;
    let clips = make_clips(tmp.path())?;
    let root = tmp.path().join("library");
    let started = Instant::now();
    make_tree(&root, &clips, cfg.scan_files)?;
    let tree_seconds = started.elapsed().as_secs_f64();

    let walk = run_worker("walk", "", &root)?;
    if walk.found != cfg.scan_files as u64 {
        return Err(format!("the walk found {} files of {}", walk.found, cfg.scan_files));
    }
    let sqlite_url = format!("sqlite://{}?mode=rwc", tmp.path().join("scan.db").display());
    let sqlite = run_worker("scan", &sqlite_url, &root)?;
    if sqlite.queued != cfg.scan_files as u64 {
        return Err(format!("SQLite: the scan queued {} files of {}", sqlite.queued, cfg.scan_files));
    }
    rows(report, "SQLite", &sqlite, cfg.scan_files);
    let postgres = match postgres_schema(&cfg.postgres_url, "scan").await {
        Some((admin, schema, url)) => {
            let outcome = run_worker("scan", &url, &root);
            drop_schema(&admin, &schema).await;
            let outcome = outcome?;
            if outcome.queued != cfg.scan_files as u64 {
                return Err(format!("PostgreSQL: the scan queued {} files of {}", outcome.queued, cfg.scan_files));
            }
            rows(report, "PostgreSQL", &outcome, cfg.scan_files);
            Some(outcome)
        }
        None => {
            report.row("scan, PostgreSQL", "skipped", "", &format!("no PostgreSQL answers at {}", cfg.postgres_url));
            None
        }
    };
    let line = |backend: &str, o: &Outcome| {
        format!(
            "- **{backend}**: {:.2} s for {} files ({:.0} files/s), {} jobs PENDING with their `created` \
             events; peak memory {} (the worker process, of which {} at its start: the binary and \
             its shared libraries).\n",
            o.seconds,
            thousands(o.found),
            o.found as f64 / o.seconds.max(1e-9),
            thousands(o.queued),
            mib(o.hwm_kb),
            mib(o.baseline_kb),
        )
    };
    let mut body = format!(
        "{files} files: hard links to four small clips (MKV, MP4, MOV, WebM) in 1,000-file folders of \
         100-file subfolders (`dNNN/dNN/file-NNNNNN.ext`, made in {tree_seconds:.1} s). Measured: \
         `condense::actors::library::scan` (what `POST /libraries/{{id}}/scan` and a library's start run) \
         on a fresh, migrated database with one library: the walk (no link to a folder followed, hidden and \
         service files skipped, `lstat` of each file) and `repo::jobs::register_batch` (one transaction: \
         the jobs inserted PENDING in chunks of 500, a `created` event each, for the probe to queue). \
         It runs in a child process of the benchmark (`condense-bench scan-worker scan URL ROOT`) whose \
         VmHWM is read at its end.\n\n\
         **Not probed**: the service does not probe at scan time; each file is probed when its job reaches \
         ANALYZING (see Probing for that cost per file).\n\n\
         - **walk only** (`condense::actors::library::walk`, no database): {walk_s:.2} s ({walk_rate:.0} \
         files/s), peak {walk_mem}.\n",
        files = thousands(cfg.scan_files as u64),
        walk_s = walk.seconds,
        walk_rate = walk.found as f64 / walk.seconds.max(1e-9),
        walk_mem = mib(walk.hwm_kb),
    );
    body.push_str(&line("SQLite", &sqlite));
    match &postgres {
        Some(o) => body.push_str(&line("PostgreSQL", o)),
        None => body.push_str(&format!("- **PostgreSQL**: skipped, no server answered at `{}`.\n", cfg.postgres_url)),
    }
    if postgres.is_some() {
        body.push_str(&format!(
            "\nPostgreSQL: `{}`, in a schema of its own (`bench_scan_PID`), dropped afterwards.\n",
            cfg.postgres_url
        ));
    }
    report.section("Library scan", body);
    Ok(())
}
