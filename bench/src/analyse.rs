//! A library of files already in HEVC, end to end: `condense serve` (its defaults, SQLite)
//! scans, probes and decides them all, timed from the library's creation until every job is
//! SKIPPED (read from `GET /queue/stats`). Beside it: the ffprobe loop over the same files
//! (one process per file, the way a script or an older tool learns what a file is), and,
//! when BENCH_BASELINE_BIN names another build, the same run with that build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::http::{expect, login};
use crate::report::Report;
use crate::util::{ffmpeg, thousands, Ctx, Res, Server, TempDir};
use crate::{command, Config};

/// `files` copies (each its own inode, as in a real library) of one 1 s 160x120 HEVC clip
/// with AAC audio, in MKV.
fn make_library(dir: &Path, files: usize) -> Res<Vec<PathBuf>> {
    let clip = dir.join("clip.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=25",
        "-f",
        "lavfi",
        "-i",
        "sine=frequency=440:sample_rate=48000",
        "-t",
        "1",
        "-c:v",
        "libx265",
        "-preset",
        "ultrafast",
        "-x265-params",
        "log-level=error",
        "-c:a",
        "aac",
        clip.to_str().ctx("temp path is not UTF-8")?,
    ])?;
    let library = dir.join("library");
    let mut paths = Vec::with_capacity(files);
    for i in 0..files {
        let folder = library.join(format!("show-{:02}", i / 100));
        std::fs::create_dir_all(&folder).ctx("library folder")?;
        let path = folder.join(format!("episode-{i:05}.mkv"));
        std::fs::copy(&clip, &path).ctx("copying the clip")?;
        paths.push(path);
    }
    Ok(paths)
}

/// Seconds from `POST /libraries` until all `files` jobs are SKIPPED.
async fn end_to_end(bin: &Path, data: &Path, library: &Path, files: usize) -> Res<f64> {
    let _ = std::fs::remove_dir_all(data);
    let server = Server::start(bin, data, &[])?;
    let token = login(&server.addr).await?;
    let body = serde_json::json!({"name": "hevc", "paths": [library], "encoder": "libx265", "watch": false});
    let started = Instant::now();
    expect(&server.addr, "POST", "/libraries", Some(&token), Some(&body), 201).await?;
    loop {
        let stats = expect(&server.addr, "GET", "/queue/stats", Some(&token), None, 200).await?;
        if stats["skipped"].as_u64() == Some(files as u64) {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > Duration::from_secs(1800) {
            return Err(format!("not all skipped after 30 min: {stats}\n{}", server.tail(20)));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ffprobe_loop(paths: &[PathBuf]) -> Res<f64> {
    let started = Instant::now();
    for path in paths {
        let out = Command::new("ffprobe")
            .args(["-v", "error", "-show_streams", "-show_format", "-of", "json"])
            .arg(path)
            .output()
            .ctx("running ffprobe")?;
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).ctx("ffprobe's JSON")?;
        if !out.status.success() || json["streams"][0]["codec_name"] != "hevc" {
            return Err(format!("ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr)));
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "analyse")?;
    let files = cfg.analyse_files;
    let paths = make_library(tmp.path(), files)?;
    let library = tmp.path().join("library");
    let cmd = command("analyse");
    let n = thousands(files as u64);

    let ours = end_to_end(&cfg.bin, &tmp.path().join("data"), &library, files).await?;
    let rate = files as f64 / ours;
    report.row(
        format!("{n} HEVC files scanned, probed, SKIPPED, end to end, SQLite"),
        format!("{ours:.2} s, {rate:.0} files/s"),
        ">= 500 files/s",
        &cmd,
    );
    // The reference's rate from at most 2,000 of the files (each costs it a process; 100,000
    // would take hours).
    let sample = paths.get(..files.min(2_000)).unwrap_or(&paths);
    let ffprobe = ffprobe_loop(sample)?;
    let ffprobe_rate = sample.len() as f64 / ffprobe;
    report.row(
        format!("{} HEVC files, one ffprobe per file", thousands(sample.len() as u64)),
        format!("{ffprobe:.2} s, {ffprobe_rate:.1} files/s"),
        "",
        &cmd,
    );
    report.row("end to end / ffprobe loop", format!("{:.1}x", rate / ffprobe_rate), ">= 40x", &cmd);
    let baseline = match std::env::var_os("BENCH_BASELINE_BIN").map(PathBuf::from) {
        Some(bin) => {
            let seconds = end_to_end(&bin, &tmp.path().join("data-baseline"), &library, files).await?;
            let baseline_rate = files as f64 / seconds;
            report.row(
                format!("{n} HEVC files end to end, the build at BENCH_BASELINE_BIN"),
                format!("{seconds:.2} s, {baseline_rate:.0} files/s"),
                "",
                &cmd,
            );
            format!(
                "\n\nSide by side, the build at `{}` (BENCH_BASELINE_BIN): {seconds:.2} s, {baseline_rate:.1} files/s; \
                 this build is {:.1} times faster.",
                bin.display(),
                rate / baseline_rate
            )
        }
        None => String::new(),
    };
    report.section(
        "Analysis at scan speed",
        format!(
            "{n} copies of one 1 s 160x120 HEVC + AAC clip in MKV, 100 to a folder (a library already in the \
             target codec). `condense serve` with its defaults (SQLite, `MAX_JOBS=1`) is started on a fresh \
             `DATA_DIR`; the clock runs from `POST /libraries` (which starts the first scan) until `GET \
             /queue/stats` (polled every 20 ms) counts {n} SKIPPED: the walk, registration, the probe in \
             `condense-media` children ({batch} files a child and a transaction, `actors::prober`) and the \
             skip decisions with their events. {ours:.2} s, {rate:.0} files/s.\n\n\
             Reference: `ffprobe -v error -show_streams -show_format -of json FILE` for each of {sampled} of the \
             files, one after another, its JSON parsed: {ffprobe:.2} s, {ffprobe_rate:.1} files/s. Ratio \
             {ratio:.1}x.{baseline}",
            sampled = thousands(sample.len() as u64),
            batch = condense::actors::prober::BATCH,
            ratio = rate / ffprobe_rate,
        ),
    );
    Ok(())
}
