//! A whole library, not one file (issue 40, item 4): 20 clips of 30 s, 1080p and 720p
//! alternating, with x264's default keyframe interval, re-encoded by the service from the
//! library's creation (its first scan finds them) to the last COMPLETED, against a
//! sequential loop of the plain ffmpeg program over the same files with the same settings,
//! side by side; then the same library on a main node and linked nodes, each confined to
//! one core, against the loop confined to one core. Between one job and the next the
//! service has its own work (analysis, verification, mux, replace): the measure says how
//! much of it overlaps the next job's encode.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cluster::{pro_key, wait_until_linked, CLUSTER_TOKEN};
use crate::encode::{ffmpeg_args, make_sized_clip};
use crate::http::{call, expect, login};
use crate::report::Report;
use crate::util::{children_cpu_seconds, cpu_seconds_of, ffmpeg_on, Ctx, Res, Server, TempDir};
use crate::{command, Config};

/// Clips of the library and their length: 20 of 30 s, or 4 of 3 s with BENCH_QUICK.
fn shape(cfg: &Config) -> (usize, u32) {
    if cfg.quick {
        (4, 3)
    } else {
        (20, 30)
    }
}

/// Makes one 1080p and one 720p clip and the library's files as copies of them,
/// alternating. Returns the files, in a folder of their own.
fn make_library(cfg: &Config, dir: &Path) -> Res<Vec<PathBuf>> {
    let (count, seconds) = shape(cfg);
    let made = [
        make_sized_clip(dir, "big.mkv", seconds, "1920x1080", "250")?,
        make_sized_clip(dir, "small.mkv", seconds, "1280x720", "250")?,
    ];
    let files = dir.join("files");
    std::fs::create_dir_all(&files).ctx("the library's files")?;
    (0..count)
        .map(|i| {
            let file = files.join(format!("clip-{i:02}.mkv"));
            std::fs::copy(&made[i % 2], &file).ctx("copying a clip")?;
            Ok(file)
        })
        .collect()
}

/// Wall and CPU seconds of ffmpeg run over `files` one after another (confined to `cpu`).
fn ffmpeg_loop(files: &[PathBuf], dir: &Path, cpu: Option<usize>) -> Res<(f64, f64)> {
    let out = dir.join("ffmpeg-out.mkv");
    let cpu_before = children_cpu_seconds();
    let started = Instant::now();
    for file in files {
        let (input, output) = (file.to_str().ctx("path")?, out.to_str().ctx("path")?);
        ffmpeg_on(&ffmpeg_args(input, output), cpu)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&out);
    Ok((seconds, children_cpu_seconds() - cpu_before))
}

/// Creates a library over `media` (which holds `count` files) on the node at `addr` and
/// times it until every job is COMPLETED. Wall and CPU seconds of `pids` and their children.
async fn time_library(
    addr: &str,
    media: &Path,
    count: usize,
    pids: &[u32],
    tail: &dyn Fn() -> String,
) -> Res<(f64, f64)> {
    let cpu_of = |pids: &[u32]| -> Res<f64> { pids.iter().map(|p| cpu_seconds_of(*p)).sum() };
    let token = login(addr).await?;
    let token = Some(token.as_str());
    let body = json!({
        "name": "bench", "paths": [media], "encoder": "libx265", "quality": 28, "preset": "medium", "watch": false
    });
    let cpu_before = cpu_of(pids)?;
    let started = Instant::now();
    expect(addr, "POST", "/libraries", token, Some(&body), 201).await?;
    let deadline = started + Duration::from_secs(6 * 3600);
    loop {
        let (_, page) = call(addr, "GET", "/jobs?pageSize=100", token, None).await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if let Some(bad) =
            items.iter().find(|j| matches!(j["status"].as_str(), Some("FAILED" | "SKIPPED" | "CANCELLED")))
        {
            return Err(format!("{} ended {}: {}\n{}", bad["sourcePath"], bad["status"], bad["failureReason"], tail()));
        }
        if items.iter().filter(|j| j["status"] == "COMPLETED").count() == count {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the library did not complete within six hours\n{}", tail()));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((started.elapsed().as_secs_f64(), cpu_of(pids)? - cpu_before))
}

/// A fresh library folder holding copies of `files`.
fn fill(root: &Path, files: &[PathBuf]) -> Res<PathBuf> {
    let media = root.join("media");
    std::fs::create_dir_all(&media).ctx("media folder")?;
    for file in files {
        std::fs::copy(file, media.join(file.file_name().ctx("a clip's name")?)).ctx("copying a clip")?;
    }
    Ok(media)
}

/// The library on one node with the service's defaults.
async fn one_node(cfg: &Config, files: &[PathBuf], dir: &Path) -> Res<(f64, f64)> {
    let root = dir.join("one-node");
    let media = fill(&root, files)?;
    let server = Server::start(&cfg.bin, &root.join("data"), &[])?;
    let timed = time_library(&server.addr, &media, files.len(), &[server.pid()], &|| server.tail(20)).await;
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
    timed
}

/// The library on a main node and `nodes - 1` linked nodes, node `i` confined to core `i`.
async fn many_nodes(cfg: &Config, files: &[PathBuf], dir: &Path, nodes: usize) -> Res<(f64, f64)> {
    let root = dir.join("many-nodes");
    let media = fill(&root, files)?;
    let (key, public) = pro_key()?;
    let common = |name: String| {
        vec![
            ("NODE_NAME", name),
            ("MAX_JOBS", "1".to_string()),
            ("CLUSTER_TOKEN", CLUSTER_TOKEN.to_string()),
            ("HEARTBEAT_SECONDS", "1".to_string()),
        ]
    };
    let mut main_env = common("main".into());
    main_env.push(("LICENSE_KEY", key));
    main_env.push(("LICENSE_PUBLIC_KEY", public));
    let main = Server::start_on(&cfg.bin, &root.join("main"), &main_env, Some(0))?;
    let mut linked = Vec::new();
    for core in 1..nodes {
        let name = format!("linked-{core}");
        let mut env = common(name.clone());
        env.push(("ROLE", "linked".into()));
        env.push(("MAIN_NODE_URL", format!("http://{}", main.addr)));
        let node = Server::start_on(&cfg.bin, &root.join(&name), &env, Some(core))?;
        wait_until_linked(&main, &node, &name).await?;
        linked.push(node);
    }
    let pids: Vec<u32> = std::iter::once(main.pid()).chain(linked.iter().map(Server::pid)).collect();
    let tail = || {
        let mut text = main.tail(20);
        for node in &linked {
            text.push_str(&format!("\n--- linked ---\n{}", node.tail(20)));
        }
        text
    };
    let timed = time_library(&main.addr, &media, files.len(), &pids, &tail).await;
    drop(linked);
    drop(main);
    let _ = std::fs::remove_dir_all(&root);
    timed
}

fn cores() -> usize {
    std::thread::available_parallelism().map(usize::from).unwrap_or(1)
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "library")?;
    let files = make_library(cfg, tmp.path())?;
    let (count, seconds) = shape(cfg);
    let cmd = command("library");
    let what = format!("{count} clips of {seconds} s, 1080p/720p");
    let mut log = String::new();
    let row = |log: &mut String, what: &str, (wall, cpu): (f64, f64)| {
        log.push_str(&format!("| {what} | {wall:.1} s | {cpu:.1} s |\n"));
    };

    let service = one_node(cfg, &files, tmp.path()).await?;
    row(&mut log, "service, one node (defaults)", service);
    let reference = ffmpeg_loop(&files, tmp.path(), None)?;
    row(&mut log, "ffmpeg loop", reference);
    report.row(
        format!("library of {what}, one node / ffmpeg loop"),
        format!("{:.1} / {:.1} s = {:.3}", service.0, reference.0, service.0 / reference.0),
        "<= 0.95",
        &cmd,
    );

    // One core a node: the main node and as many linked nodes as the machine has cores
    // left, up to two (the main node plus two linked nodes needs three cores).
    let nodes = cores().clamp(1, 3);
    let goal = match nodes {
        3 => "<= 0.36",
        2 => "<= 0.53 (2 nodes)",
        _ => "",
    };
    if nodes >= 2 {
        let spread = many_nodes(cfg, &files, tmp.path(), nodes).await?;
        row(&mut log, &format!("service, main + {} linked node(s), one core each", nodes - 1), spread);
        let one_core = ffmpeg_loop(&files, tmp.path(), Some(0))?;
        row(&mut log, "ffmpeg loop, one core", one_core);
        report.row(
            format!("library of {what}, {nodes} one-core nodes / ffmpeg loop on one core"),
            format!("{:.1} / {:.1} s = {:.3}", spread.0, one_core.0, spread.0 / one_core.0),
            goal,
            &cmd,
        );
    }
    report.section(
        "A whole library",
        format!(
            "{what} (`testsrc2`, H.264 with x264's default keyframe interval of 250 frames, AAC), each \
             clip a copy of one of the two. The service (release build, SQLite, its defaults: one job \
             at a time with parallel segments) times from the library's creation (its first scan finds \
             every file) to the last COMPLETED: analysis, encode, verification and replace of every \
             file. The reference is `ffmpeg` run over the same files one after another with the same \
             settings (libx265 medium CRF 28, audio copied). Then a main node and {} linked node(s), each \
             confined to one core by a cpuset cgroup (`MAX_JOBS=1`, a PRO licence made at run time), \
             against the loop confined to one core. {} core(s) here. CPU time counts the nodes and \
             their children.\n\n| what | wall time | CPU time |\n|---|---|---|\n{log}\nCommand: `{cmd}`.\n",
            nodes.saturating_sub(1),
            cores(),
        ),
    );
    Ok(())
}
