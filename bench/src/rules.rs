//! Stream rules in the one pass (issue 37): the transcoder child (`condense-media
//! transcode`) encodes a 1080p clip with a 5.1 FLAC and two AAC tracks under a library's
//! stream rules (FLAC converted to AAC 5.1, a stereo downmix added, the French track
//! dropped) and without rules (every track copied), side by side in interleaved rounds. The
//! goal: the rules cost at most 5 % more wall time, audio encode included.

use std::path::{Path, PathBuf};
use std::time::Instant;

use condense::domain::encoding::{EncodeProfile, Encoder, RateControl, RetryProfile};
use condense::domain::segments::Sessions;
use condense::domain::stream_rules::{AudioCodec, StreamRules};
use condense::media::plan::EncodePlan;
use condense::media::stream_plan::plan_streams;
use condense::media::transcoder::{ChildEnd, Transcoder};

use crate::report::Report;
use crate::util::{children_cpu_seconds, ffmpeg, Ctx, Res, TempDir};
use crate::Config;

const CRF: u32 = 28;
const PRESET: &str = "medium";

/// The measure's command: it runs alone as `condense-bench rules`.
fn command() -> String {
    crate::command("rules")
}

/// 1080p25 H.264 at about 8 Mb/s (as the encode measure's clip), English FLAC 5.1, German
/// and French AAC stereo.
fn make_clip(dir: &Path, seconds: u32) -> Res<PathBuf> {
    let clip = dir.join("clip.mkv");
    let t = seconds.to_string();
    #[rustfmt::skip]
    ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=25",
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000,aformat=channel_layouts=5.1(side)",
        "-f", "lavfi", "-i", "sine=frequency=550:sample_rate=48000,aformat=channel_layouts=stereo",
        "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000,aformat=channel_layouts=stereo",
        "-t", &t, "-map", "0", "-map", "1", "-map", "2", "-map", "3",
        "-c:v", "libx264", "-preset", "veryfast", "-b:v", "8M", "-maxrate", "10M", "-bufsize", "16M",
        "-g", "50", "-pix_fmt", "yuv420p",
        "-c:a:0", "flac", "-c:a:1", "aac", "-b:a:1", "128k", "-c:a:2", "aac", "-b:a:2", "128k",
        "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=deu",
        "-metadata:s:a:2", "language=fra",
        clip.to_str().ctx("temp path is not UTF-8")?,
    ])?;
    Ok(clip)
}

/// The library's rules: English and German audio, FLAC (and the other bulky codecs) to AAC,
/// a stereo track added.
fn rules() -> StreamRules {
    StreamRules {
        audio_languages: vec!["eng".into(), "deu".into()],
        audio_codec: AudioCodec::Aac,
        add_stereo: true,
        ..StreamRules::default()
    }
}

/// What one encode took.
struct ChildRun {
    /// Spawn to exit.
    seconds: f64,
    /// The child's user and system time (`getrusage(RUSAGE_CHILDREN)` around it): what the
    /// rules cost, whatever else shares the machine.
    cpu_seconds: f64,
    size: u64,
}

/// One encode of `clip` by the transcoder child, with or without the rules.
async fn run_child(media: &Path, clip: &Path, with_rules: bool) -> Res<ChildRun> {
    let info = condense_media::probe::probe(clip).map_err(|e| e.message)?;
    let profile = EncodeProfile {
        encoder: Encoder::Libx265,
        hardware_decode: false,
        ten_bit_allowed: true,
        preset: Some(PRESET.into()),
        quality: CRF,
        cautious: false,
        retry_profile: RetryProfile::AsConfigured,
        rate: RateControl::Crf,
    };
    let mut plan = EncodePlan::new(clip, &info, &profile).map_err(|e| e.message)?;
    // One session with x265's own threads, as `PARALLEL_SEGMENTS=off`: the encoder takes
    // every core, so what the rules add competes with it.
    plan.sessions = Sessions::ONE;
    if with_rules {
        let streams = plan_streams(&info, &rules(), &plan.output_extension);
        if let Some(why) = &streams.refused {
            return Err(format!("the rules refuse the clip: {why}"));
        }
        plan.streams = Some(streams);
    }
    let _ = std::fs::remove_dir_all(&plan.partial_dir);
    let cpu_before = children_cpu_seconds();
    let started = Instant::now();
    let mut child = Transcoder::spawn(media, &plan).await.map_err(|e| e.message)?;
    while child.events.recv().await.is_some() {}
    let end = child.wait().await;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = children_cpu_seconds() - cpu_before;
    if !matches!(end, ChildEnd::Completed) {
        return Err(format!("the transcoder ended {end:?}"));
    }
    let size = std::fs::metadata(plan.output_path()).ctx("the output")?.len();
    let _ = std::fs::remove_dir_all(&plan.partial_dir);
    Ok(ChildRun { seconds, cpu_seconds, size })
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let media = cfg.bin.with_file_name("condense-media");
    if !media.is_file() {
        return Err(format!("{} not found beside CONDENSE_BIN", media.display()));
    }
    let tmp = TempDir::new(&cfg.tmp, "rules")?;
    let clip = make_clip(tmp.path(), cfg.clip_seconds)?;
    let (mut plain, mut ruled): (Vec<ChildRun>, Vec<ChildRun>) = (Vec::new(), Vec::new());
    let mut log = String::new();
    // Interleaved rounds, so that load from elsewhere hits both alike.
    for round in 0..cfg.encode_rounds {
        for with_rules in [false, true] {
            let run = run_child(&media, &clip, with_rules).await?;
            let what = if with_rules { "with rules" } else { "without rules" };
            log.push_str(&format!(
                "| {} | {what} | {:.2} s | {:.1} s | {} |\n",
                round + 1,
                run.seconds,
                run.cpu_seconds,
                run.size
            ));
            if with_rules { &mut ruled } else { &mut plain }.push(run);
        }
    }
    let best = |v: &[ChildRun], f: fn(&ChildRun) -> f64| v.iter().map(f).fold(f64::INFINITY, f64::min);
    let (plain_best, ruled_best) = (best(&plain, |r| r.seconds), best(&ruled, |r| r.seconds));
    let (plain_cpu, ruled_cpu) = (best(&plain, |r| r.cpu_seconds), best(&ruled, |r| r.cpu_seconds));
    let cmd = command();
    report.row(
        format!("stream rules: encode wall time with / without, {} s 1080p clip", cfg.clip_seconds),
        format!("{:.3} ({ruled_best:.2} s / {plain_best:.2} s)", ruled_best / plain_best),
        "<= 1.05",
        &cmd,
    );
    report.row(
        "stream rules: transcoder CPU time with / without",
        format!("{:.3} ({ruled_cpu:.1} s / {plain_cpu:.1} s)", ruled_cpu / plain_cpu.max(1e-9)),
        "",
        &cmd,
    );
    let body = format!(
        "The clip: {secs} s of `testsrc2` 1080p25 H.264 (veryfast, 8 Mb/s, a keyframe every 2 s) with an \
         English FLAC 5.1 track and German and French AAC stereo tracks. Each run is the transcoder child \
         (`condense-media transcode`, one session, x265's own threads) on a plan made by `EncodePlan::new` \
         with libx265 CRF {CRF}, preset {PRESET}, timed from spawn to exit (encode, mux; no verification). \
         **Without rules** every audio track is copied; **with rules** (`audioLanguages eng,deu`, \
         `audioCodec aac`, `addStereo`) the FLAC track becomes AAC 5.1, a stereo downmix of it is added \
         and the French track is dropped, all in the mux's one pass. {rounds} round(s), interleaved; the \
         ratios compare each side's fastest round. CPU time is the child's user and system time \
         (`getrusage(RUSAGE_CHILDREN)` around each run): on a shared machine it shows what the rules cost \
         when the wall time mostly shows the others' load.\n\n\
         | round | what | wall time | CPU time | output bytes |\n|---|---|---|---|---|\n{log}",
        secs = cfg.clip_seconds,
        rounds = cfg.encode_rounds,
    );
    report.section("Stream rules in the one pass", body);
    Ok(())
}
