//! Probing: many small files probed in-process (`condense_media::probe::probe`) against one
//! ffprobe process per file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::report::Report;
use crate::util::{ffmpeg, thousands, Ctx, Res, TempDir};
use crate::{command, Config};

const FFPROBE: &[&str] = &["-v", "error", "-show_streams", "-show_format", "-of", "json"];

/// A few short clips of different containers and codecs (320x240, 2 s, with audio).
pub fn make_clips(dir: &Path) -> Res<Vec<PathBuf>> {
    let specs: [(&str, &[&str]); 4] = [
        ("clip.mkv", &["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"]),
        ("clip.mp4", &["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"]),
        ("clip.mov", &["-c:v", "mpeg4", "-c:a", "aac"]),
        ("clip.webm", &["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-c:a", "libopus"]),
    ];
    let mut out = Vec::new();
    for (name, codec) in specs {
        let path = dir.join(name);
        let mut args = vec![
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x240:rate=25",
            "-f",
            "lavfi",
            "-i",
            "sine=frequency=440:sample_rate=48000",
            "-t",
            "2",
        ];
        args.extend_from_slice(codec);
        args.push(path.to_str().ctx("temp path is not UTF-8")?);
        ffmpeg(&args)?;
        out.push(path);
    }
    Ok(out)
}

fn ffprobe(path: &Path) -> Res<()> {
    let out = Command::new("ffprobe").args(FFPROBE).arg(path).output().ctx("running ffprobe")?;
    if !out.status.success() {
        return Err(format!("ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr)));
    }
    // A caller of ffprobe reads its JSON: parse it, as the in-process probe's caller gets a
    // parsed structure.
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ctx("ffprobe's JSON")?;
    if json["streams"].as_array().is_none_or(std::vec::Vec::is_empty) {
        return Err(format!("ffprobe found no streams in {}", path.display()));
    }
    Ok(())
}

pub fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "probe")?;
    let clips = make_clips(tmp.path())?;
    let files_dir = tmp.path().join("files");
    std::fs::create_dir_all(&files_dir).ctx("files folder")?;
    let mut files = Vec::with_capacity(cfg.probe_files);
    for i in 0..cfg.probe_files {
        let clip = &clips[i % clips.len()];
        let ext = clip.extension().and_then(|e| e.to_str()).unwrap_or("mkv");
        let path = files_dir.join(format!("file-{i:05}.{ext}"));
        std::fs::hard_link(clip, &path).ctx("linking a clip")?;
        files.push(path);
    }
    // One of each first, so neither side pays a first-use cost inside the timing.
    condense_media::probe::probe(&files[0]).map_err(|e| e.message)?;
    ffprobe(&files[0])?;

    let started = Instant::now();
    for f in &files {
        condense_media::probe::probe(f).map_err(|e| format!("{}: {}", f.display(), e.message))?;
    }
    let in_process = started.elapsed().as_secs_f64();
    let started = Instant::now();
    for f in &files {
        ffprobe(f)?;
    }
    let external = started.elapsed().as_secs_f64();

    let n = files.len() as f64;
    let (rate_in, rate_ext) = (n / in_process, n / external);
    let cmd = command("probe");
    report.row(
        format!("probe, in-process, {} files", thousands(files.len() as u64)),
        format!("{rate_in:.0} files/s"),
        "",
        &cmd,
    );
    report.row(
        format!("probe, one ffprobe process per file, {} files", thousands(files.len() as u64)),
        format!("{rate_ext:.1} files/s"),
        "",
        &cmd,
    );
    report.row("probe speed ratio, in-process / ffprobe", format!("{:.1}x", rate_in / rate_ext), ">= 20x", &cmd);
    report.section(
        "Probing",
        format!(
            "{n} files: hard links to four 2 s 320x240 clips with audio (H.264 + AAC in MKV and MP4, MPEG-4 + AAC \
             in MOV, VP9 + Opus in WebM), so after the first read every file is in the page cache for both \
             sides. Probed one after another on one thread:\n\n\
             - **in-process**: `condense_media::probe::probe(path)` (FFmpeg's demuxer through rsmpeg, the \
             `file` protocol only; what the service runs in ANALYZING): {in_process:.2} s, {rate_in:.0} files/s, \
             {per_in:.2} ms per file.\n\
             - **ffprobe**: `ffprobe {args} FILE`, one process per file, its JSON parsed: {external:.2} s, \
             {rate_ext:.1} files/s, {per_ext:.1} ms per file (mostly process start-up and loading FFmpeg's \
             shared libraries).\n\n\
             Ratio: {ratio:.1} times faster in-process.",
            n = thousands(files.len() as u64),
            per_in = in_process * 1000.0 / n,
            per_ext = external * 1000.0 / n,
            args = FFPROBE.join(" "),
            ratio = rate_in / rate_ext,
        ),
    );
    Ok(())
}
