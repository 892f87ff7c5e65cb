//! Quality targeting: condense's CRF search (`condense crf-search`, the search a VMAF-mode
//! library runs before each encode) against ab-av1's `crf-search` with the same clip, target,
//! encoder and preset, side by side; then the VMAF condense measures for an encode at the
//! chosen CRF against the one an independent libvmaf (FFmpeg's filter) measures on the same
//! pair. ab-av1 and the ffmpeg with libvmaf it needs are installed by `scripts/bench.sh`
//! under `target/tools/` (crates.io and PyPI's imageio-ffmpeg).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::encode::make_clip;
use crate::report::Report;
use crate::util::{ffmpeg, Ctx, Res, TempDir};
use crate::{command, Config};

const TARGET: &str = "95";
const PRESET: &str = "medium";

fn tools() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"))
        .join("tools")
}

/// imageio-ffmpeg's static ffmpeg (with libvmaf), as the bootstrap installs it.
fn vmaf_ffmpeg() -> Res<PathBuf> {
    let dir = tools().join("imageio-ffmpeg/imageio_ffmpeg/binaries");
    std::fs::read_dir(&dir)
        .ctx("imageio-ffmpeg is not installed (scripts/bench.sh installs it)")?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("ffmpeg-linux")))
        .ctx("no ffmpeg in imageio-ffmpeg")
}

fn output_of(cmd: &mut Command, what: &str) -> Res<String> {
    let out = cmd.output().ctx(what)?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

struct Search {
    seconds: f64,
    crf: f64,
    vmaf: f64,
    probes: usize,
}

/// `condense crf-search`, scoring one block of sample frames in `every`.
fn condense_search(cfg: &Config, clip: &Path, every: u32) -> Res<Search> {
    let started = Instant::now();
    let every = every.to_string();
    let text = output_of(
        Command::new(&cfg.bin).arg("crf-search").arg(clip).args([
            "--encoder",
            "libx265",
            "--preset",
            PRESET,
            "--target",
            TARGET,
            "--score-every",
            &every,
        ]),
        "condense crf-search",
    )?;
    let seconds = started.elapsed().as_secs_f64();
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("condense crf-search: {e}: {text}"))?;
    let result = &json["result"];
    Ok(Search {
        seconds,
        crf: result["quality"].as_f64().ctx("no quality")?,
        vmaf: result["vmaf"]["mean"].as_f64().ctx("no vmaf")?,
        probes: result["probes"].as_array().map_or(0, Vec::len),
    })
}

fn ab_av1_search(clip: &Path, work: &Path) -> Res<Search> {
    let ab_av1 = tools().join("ab-av1/bin/ab-av1");
    if !ab_av1.exists() {
        return Err(format!("{} is missing (scripts/bench.sh installs it)", ab_av1.display()));
    }
    // ab-av1 runs `ffmpeg` from PATH and needs its libvmaf filter: imageio-ffmpeg's, first.
    let bin = work.join("vmaf-bin");
    std::fs::create_dir_all(&bin).ctx("vmaf-bin")?;
    let link = bin.join("ffmpeg");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(vmaf_ffmpeg()?, &link).ctx("linking ffmpeg")?;
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let started = Instant::now();
    let text = output_of(
        Command::new(&ab_av1)
            .args(["crf-search", "-i"])
            .arg(clip)
            .args(["-e", "libx265", "--preset", PRESET, "--min-vmaf", TARGET, "--temp-dir"])
            .arg(work)
            .env("PATH", path)
            .env("NO_COLOR", "1"),
        "ab-av1 crf-search",
    )?;
    let seconds = started.elapsed().as_secs_f64();
    // Its result line: "crf 27.3 VMAF 95.12 predicted video stream size ..." (the sample
    // lines before it say "- crf 28 VMAF 94.31 ...").
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("crf ") && l.contains("VMAF"))
        .ctx("no result line from ab-av1")?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1));
    let probes = text.lines().filter(|l| l.trim_start().starts_with("- crf ")).count();
    Ok(Search {
        seconds,
        crf: after("crf").and_then(|v| v.parse().ok()).ctx("no crf in ab-av1's result")?,
        vmaf: after("VMAF").and_then(|v| v.parse().ok()).ctx("no VMAF in ab-av1's result")?,
        probes,
    })
}

/// The VMAF of `distorted` against `reference` as FFmpeg's libvmaf filter prints it (frames
/// paired in order, as condense pairs them).
fn independent_vmaf(reference: &Path, distorted: &Path) -> Res<f64> {
    let text = output_of(
        Command::new(vmaf_ffmpeg()?)
            .args(["-hide_banner", "-nostdin", "-i"])
            .arg(distorted)
            .arg("-i")
            .arg(reference)
            // Both from 0: the filter pairs frames by timestamp, and the clip's B-frames start
            // its video later than an encode of it starts.
            .args([
                "-lavfi",
                "[0:v]setpts=PTS-STARTPTS[d];[1:v]setpts=PTS-STARTPTS[r];[d][r]libvmaf=model=version=vmaf_v0.6.1:n_threads=2",
                "-f",
                "null",
                "-",
            ]),
        "ffmpeg libvmaf",
    )?;
    text.lines().find_map(|l| l.split("VMAF score: ").nth(1)).and_then(|v| v.trim().parse().ok()).ctx("no VMAF score")
}

fn condense_vmaf(cfg: &Config, reference: &Path, distorted: &Path) -> Res<f64> {
    let text = output_of(Command::new(&cfg.bin).arg("vmaf").arg(reference).arg(distorted), "condense vmaf")?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("condense vmaf: {e}"))?;
    json["mean"].as_f64().ctx("no mean")
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "quality")?;
    let clip = make_clip(tmp.path(), cfg.clip_seconds)?;
    let cmd = command("quality");
    // Interleaved runs would double an already long measure: one each, ab-av1 first (so
    // the clip is as cold or warm for both).
    let theirs = ab_av1_search(&clip, tmp.path())?;
    let ours = condense_search(cfg, &clip, condense::domain::quality::SEARCH_SCORE_EVERY)?;
    // The same search scoring every frame: what scoring a block in two costs in time and
    // accuracy.
    let every_frame = condense_search(cfg, &clip, 1)?;
    let clip_desc = format!("{} s 1080p25 H.264 clip, libx265 {PRESET}, target VMAF {TARGET}", cfg.clip_seconds);
    report.row(format!("CRF search time, condense, {clip_desc}"), format!("{:.1} s", ours.seconds), "", &cmd);
    report.row("CRF search time, ab-av1 crf-search, same", format!("{:.1} s", theirs.seconds), "", &cmd);
    report.row(
        "CRF search time ratio, condense / ab-av1",
        format!("{:.3}", ours.seconds / theirs.seconds.max(1e-9)),
        "<= 0.5",
        &cmd,
    );
    report.row(
        "chosen CRF, condense - ab-av1",
        format!("{} - {} = {:+.1}", ours.crf, theirs.crf, ours.crf - theirs.crf),
        "within 1",
        &cmd,
    );
    report.row(
        "CRF search, condense scoring every frame (`--score-every 1`): time, chosen CRF, sample VMAF",
        format!(
            "{:.1} s ({:.3} of ab-av1's), CRF {}, {:.3} (a block of 32 frames in two: {:.3})",
            every_frame.seconds,
            every_frame.seconds / theirs.seconds.max(1e-9),
            every_frame.crf,
            every_frame.vmaf,
            ours.vmaf
        ),
        "",
        &cmd,
    );

    // An encode at the chosen CRF, scored by condense and by the independent libvmaf.
    let encoded = tmp.path().join("chosen.mkv");
    let crf = format!("{}", ours.crf);
    ffmpeg(&[
        "-i",
        clip.to_str().ctx("temp path is not UTF-8")?,
        "-map",
        "0:v",
        "-c:v",
        "libx265",
        "-preset",
        PRESET,
        "-crf",
        &crf,
        "-x265-params",
        "log-level=error",
        encoded.to_str().ctx("temp path is not UTF-8")?,
    ])?;
    let our_vmaf = condense_vmaf(cfg, &clip, &encoded)?;
    let their_vmaf = independent_vmaf(&clip, &encoded)?;
    report.row(
        "VMAF of the encode at the chosen CRF, condense - independent libvmaf",
        format!("{our_vmaf:.3} - {their_vmaf:.3} = {:+.3}", our_vmaf - their_vmaf),
        "within 0.5",
        &cmd,
    );
    let body = format!(
        "`{cmd}`: a {clip_desc}. condense: `condense crf-search CLIP --encoder libx265 --preset {PRESET} --target {TARGET}` \
         (samples encoded by the transcoder's own sessions, VMAF by libvmaf in-process, one block of 32 sample frames in {}; {} tries, \
         sample VMAF {:.2} at CRF {}). \
         ab-av1: `ab-av1 crf-search -i CLIP -e libx265 --preset {PRESET} --min-vmaf {TARGET}` (installed from crates.io by \
         scripts/bench.sh, with imageio-ffmpeg's static ffmpeg first on PATH for its libvmaf filter; {}, VMAF {:.2} at \
         CRF {}). Both on the same machine, one after the other. The encode at the chosen CRF is made by the ffmpeg program \
         (the whole clip) and scored whole by `condense vmaf` and by FFmpeg 7's libvmaf filter (model vmaf_v0.6.1, both).",
        condense::domain::quality::SEARCH_SCORE_EVERY,
        ours.probes,
        ours.vmaf,
        ours.crf,
        // ab-av1 prints its tries through its progress bar, which is hidden without a terminal.
        if theirs.probes > 0 { format!("{} tries", theirs.probes) } else { "its tries not printed without a terminal".into() },
        theirs.vmaf,
        theirs.crf
    );
    report.section("Quality targeting: CRF search against ab-av1", body);
    Ok(())
}
