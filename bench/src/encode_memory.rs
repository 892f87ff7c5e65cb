//! Memory while encoding (issue 40, item 5): the peak RSS of the transcoder child (every
//! session of the job runs in that one process) against the peak RSS of the plain ffmpeg
//! program encoding the same clip with the same settings, side by side; then the main
//! node's own RSS while two jobs run at once and a dashboard is open (a `/ws` subscriber
//! and the list and counts polled every second, as the Jobs page does).
//!
//! ffmpeg's peak is the kernel's (`ru_maxrss` from `wait4`). The service's children are
//! found under the server's process and sampled every 50 ms (`VmHWM`, the kernel's own
//! high-water mark, so a sample between two peaks loses nothing but the last 50 ms of a
//! child's life).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};

use crate::encode::{ffmpeg_args, make_clip, time_job};
use crate::http::{call, expect, login};
use crate::report::Report;
use crate::util::{kib_to_mib, Ctx, Mem, Res, Server, TempDir};
use crate::{command, Config};

const GOAL_RATIO: f64 = 1.15;

/// Peak RSS (KiB) of ffmpeg encoding `clip` as the encode measure's reference does, with
/// `x265_params` in place of its `-x265-params`.
fn ffmpeg_peak_kb(clip: &Path, dir: &Path, x265_params: &str) -> Res<u64> {
    let out = dir.join("ffmpeg-memory.mkv");
    let (input, output) = (clip.to_str().ctx("path")?, out.to_str().ctx("path")?);
    let mut args = ffmpeg_args(input, output);
    if let Some(at) = args.iter().position(|a| *a == "-x265-params") {
        if let Some(value) = args.get_mut(at + 1) {
            *value = x265_params;
        }
    }
    let child = std::process::Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-y"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ctx("running ffmpeg")?;
    let pid = libc::pid_t::try_from(child.id()).ctx("ffmpeg's pid")?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 reaps our own child and fills the two values we own; `child` is not
    // waited for again (dropping a `Child` neither waits nor kills).
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let _ = std::fs::remove_file(&out);
    if reaped != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("ffmpeg ended with status {status}"));
    }
    u64::try_from(usage.ru_maxrss).ctx("ru_maxrss")
}

/// The processes below `root` (children, their children…), from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            // The parent is the second field after the command name, which may hold spaces.
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while let Some(&p) = found.get(i) {
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// What the sampler saw: each `condense-media` child's high-water mark, and the server's
/// sampled RSS.
#[derive(Default)]
struct Seen {
    children_hwm_kb: HashMap<u32, u64>,
    server_rss_kb: Vec<u64>,
}

/// Samples the server `pid` and its media children every 50 ms until `stop`.
fn sample(pid: u32, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let server = Mem::of_pid(pid).map(|m| m.rss_kb).unwrap_or(0);
            let children: Vec<(u32, u64)> = descendants(pid)
                .into_iter()
                .filter(|c| {
                    std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "condense-media")
                })
                .filter_map(|c| Mem::of_pid(c).ok().map(|m| (c, m.hwm_kb)))
                .collect();
            if let Ok(mut seen) = seen.lock() {
                seen.server_rss_kb.push(server);
                for (c, hwm) in children {
                    let entry = seen.children_hwm_kb.entry(c).or_insert(0);
                    *entry = (*entry).max(hwm);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Peak RSS (KiB) of the largest `condense-media` child while the service encodes `clip`
/// as the encode measure does (`PARALLEL_SEGMENTS=parallel`), and how many such children it
/// started.
async fn service_peak_kb(cfg: &Config, clip: &Path, dir: &Path, parallel: &str) -> Res<(u64, usize)> {
    let root = dir.join(format!("service-memory-{parallel}"));
    let media = root.join("media");
    std::fs::create_dir_all(&media).ctx("media folder")?;
    let env = [("MAX_JOBS", "1".to_string()), ("PARALLEL_SEGMENTS", parallel.to_string())];
    let server = Server::start(&cfg.bin, &root.join("data"), &env)?;
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sampler = sample(server.pid(), stop.clone(), seen.clone());
    let timed = time_job(&server.addr, &media, clip, &[server.pid()], &|| server.tail(20)).await;
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
    timed?;
    let seen = seen.lock().map_err(|_| "the sampler panicked".to_string())?;
    let peak = seen.children_hwm_kb.values().copied().max().ctx("no condense-media child was seen")?;
    Ok((peak, seen.children_hwm_kb.len()))
}

/// The main node's RSS (KiB: median and peak of the samples) while it runs two jobs at
/// once with a dashboard open.
async fn main_node_rss_kb(cfg: &Config, clip: &Path, dir: &Path) -> Res<(u64, u64)> {
    let root = dir.join("main-node-memory");
    let media = root.join("media");
    std::fs::create_dir_all(&media).ctx("media folder")?;
    // The clips are there before the library: its first scan queues both.
    for name in ["one.mkv", "two.mkv"] {
        std::fs::copy(clip, media.join(name)).ctx("copying the clip into the library")?;
    }
    let server = Server::start(&cfg.bin, &root.join("data"), &[("MAX_JOBS", "2".into())])?;
    let addr = server.addr.clone();
    let token = login(&addr).await?;
    let auth = Some(token.as_str());
    let body = json!({
        "name": "bench", "paths": [media], "encoder": "libx265", "quality": 28, "preset": "medium", "watch": false
    });
    // The dashboard: a live feed, and the job list and counts as the Jobs page polls them.
    let client = awc::Client::builder().timeout(Duration::from_secs(30)).finish();
    let (_, mut feed) =
        client.ws(format!("ws://{addr}/ws?token={token}")).connect().await.map_err(|e| format!("/ws: {e}"))?;
    let feed_open = Arc::new(AtomicBool::new(true));
    let reader = {
        let open = feed_open.clone();
        actix_web::rt::spawn(async move {
            while open.load(Ordering::Relaxed) {
                match feed.next().await {
                    Some(Ok(awc::ws::Frame::Ping(bytes))) => {
                        let _ = feed.send(awc::ws::Message::Pong(bytes)).await;
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                }
            }
        })
    };
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sampler = sample(server.pid(), stop.clone(), seen.clone());
    let result = async {
        expect(&addr, "POST", "/libraries", auth, Some(&body), 201).await?;
        let deadline = Instant::now() + Duration::from_secs(3600);
        loop {
            let (_, page) = call(&addr, "GET", "/jobs?pageSize=50", auth, None).await?;
            call(&addr, "GET", "/queue/stats", auth, None).await?;
            let items = page["items"].as_array().cloned().unwrap_or_default();
            let ended: Vec<&Value> = items
                .iter()
                .filter(|j| matches!(j["status"].as_str(), Some("COMPLETED" | "FAILED" | "SKIPPED" | "CANCELLED")))
                .collect();
            if let Some(bad) = ended.iter().find(|j| j["status"] != "COMPLETED") {
                return Err(format!("a job ended {}: {}\n{}", bad["status"], bad["failureReason"], server.tail(20)));
            }
            if ended.len() == 2 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("the two jobs did not complete within an hour".to_string());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    feed_open.store(false, Ordering::Relaxed);
    reader.abort();
    let _ = sampler.join();
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
    result?;
    let seen = seen.lock().map_err(|_| "the sampler panicked".to_string())?;
    let mut samples: Vec<u64> = seen.server_rss_kb.iter().copied().filter(|kb| *kb > 0).collect();
    samples.sort_unstable();
    let median = samples.get(samples.len() / 2).copied().ctx("no RSS sample")?;
    let peak = samples.last().copied().unwrap_or(median);
    Ok((median, peak))
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "encode-memory")?;
    let clip = make_clip(tmp.path(), cfg.clip_seconds)?;
    // Rounds alternate the two, and each keeps its highest peak: a peak is what must fit.
    let (mut ours, mut one_session, mut theirs, mut children) = (0, 0, 0, 0);
    for _ in 0..cfg.encode_rounds {
        let (peak, count) = service_peak_kb(cfg, &clip, tmp.path(), "auto").await?;
        ours = ours.max(peak);
        children = children.max(count);
        theirs = theirs.max(ffmpeg_peak_kb(&clip, tmp.path(), "log-level=error")?);
        one_session = one_session.max(service_peak_kb(cfg, &clip, tmp.path(), "off").await?.0);
    }
    // What one libx265 instance holds with the fewest threads: what each session costs.
    let one_thread = ffmpeg_peak_kb(&clip, tmp.path(), "log-level=error:pools=1:frame-threads=1")?;
    let ratio = ours as f64 / theirs.max(1) as f64;
    let cmd = command("encode-memory");
    report.row(
        format!("transcoder peak RSS / ffmpeg's, {} s 1080p x265", cfg.clip_seconds),
        format!("{:.0} / {:.0} MiB = {ratio:.3}", kib_to_mib(ours), kib_to_mib(theirs)),
        &format!("<= {GOAL_RATIO}"),
        &cmd,
    );
    report.row(
        "the same, one session (PARALLEL_SEGMENTS=off)",
        format!(
            "{:.0} / {:.0} MiB = {:.3}",
            kib_to_mib(one_session),
            kib_to_mib(theirs),
            one_session as f64 / theirs.max(1) as f64
        ),
        "",
        &cmd,
    );
    let (median, peak) = main_node_rss_kb(cfg, &clip, tmp.path()).await?;
    report.row(
        "main node RSS, 2 jobs running, dashboard open (median / peak)",
        format!("{:.1} / {:.1} MiB", kib_to_mib(median), kib_to_mib(peak)),
        "reported",
        &cmd,
    );
    report.section(
        "Memory while encoding",
        format!(
            "Peak RSS of the transcoder child (the largest of the {children} `condense-media` children the job \
             started, all its sessions in one process; the kernel's `VmHWM`, sampled every 50 ms) against \
             ffmpeg's (`ru_maxrss` from `wait4`) encoding the same {} s 1080p clip with the same settings \
             (libx265 medium CRF 28, the service's defaults otherwise), the highest of {} alternating rounds \
             each: {:.1} MiB against {:.1} MiB, ratio {ratio:.3} (goal <= {GOAL_RATIO}). With \
             `PARALLEL_SEGMENTS=off` (one session, one encoder): {:.1} MiB. Each session is an encoder of \
             its own, and one libx265 medium instance holds nearly all of ffmpeg's memory whatever its \
             threads: ffmpeg with `-x265-params pools=1:frame-threads=1` peaked at {:.1} MiB. Two \
             sessions at once cost about twice ffmpeg's memory for their speed. The main node \
             itself (`condense serve`, MAX_JOBS=2) while two such jobs ran at once, with a `/ws` subscriber \
             open and the job list and counts polled every second: median {:.1} MiB, peak {:.1} MiB (`VmRSS` \
             sampled every 50 ms; its children not counted).\n\nCommand: `{cmd}`.\n",
            cfg.clip_seconds,
            cfg.encode_rounds,
            kib_to_mib(ours),
            kib_to_mib(theirs),
            kib_to_mib(one_session),
            kib_to_mib(one_thread),
            kib_to_mib(median),
            kib_to_mib(peak),
        ),
    );
    Ok(())
}
