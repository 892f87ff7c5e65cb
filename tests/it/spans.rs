//! Spans cut anywhere (issue 40): sources with x264's default keyframe interval (one
//! keyframe in 10 s) split into even spans between keyframes, B-frames and open GOPs
//! included, and the joined output has every frame of the source, in order, at its times,
//! through the real transcoder child; a pause across such a cut, and two passes.

use std::path::{Path, PathBuf};

use condense::domain::encoding::RateControl;
use condense::domain::segments::Sessions;
use condense::media::event::Event;
use condense::media::manifest::{inspect, PartialState};
use condense::media::plan::EncodePlan;
use condense::media::transcoder::ChildEnd;
use condense_media::probe::probe;
use condense_media::verify::verify;

use crate::common::media::{ffmpeg, profile};
use crate::common::shim::video_frames;
use crate::common::transcoder::{done_counts, most_sessions, run, run_until_paused};

/// `seconds` of 320x240 at 25 fps in H.264 with `-g {gop}` and `x264` (more encoder
/// arguments): with a GOP of 250, x264's default, the only keyframe of a 10 s clip is its
/// first frame.
fn clip(dir: &Path, name: &str, seconds: u32, gop: u32, x264: &str) -> PathBuf {
    let out = dir.join(name);
    let (t, g) = (seconds.to_string(), gop.to_string());
    let mut args = vec!["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", &t, "-c:v", "libx264", "-g", &g];
    args.extend(x264.split_whitespace());
    args.push(out.to_str().unwrap());
    ffmpeg(&args);
    out
}

/// Two single-thread sessions on `src`, slowed a little so both are seen at work.
fn two_sessions(src: &Path) -> EncodePlan {
    let info = probe(src).unwrap();
    let mut plan = EncodePlan::new(src, &info, &profile("libx265", 30, "ultrafast")).unwrap();
    plan.sessions = Sessions { sessions: 2, threads: 1 };
    plan.throttle_ms_per_frame = 8;
    plan
}

/// Frames each planned span decoded and dropped before its start (`Event::SpanDecoded`),
/// by span, over the run.
fn dropped_by_span(events: &[Event]) -> std::collections::BTreeMap<u32, u64> {
    let mut by = std::collections::BTreeMap::new();
    for e in events {
        if let Event::SpanDecoded { span, dropped } = e {
            *by.entry(*span).or_insert(0) += dropped;
        }
    }
    by
}

/// The presentation times of the first video stream's frames, in the order they decode to.
fn frame_times(path: &Path) -> Vec<String> {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time", "-of", "csv=p=0"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().trim_end_matches(',').to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The PSNR of the worst frame of `encoded` against `source` (FFmpeg's `psnr` filter): a
/// frame decoded from missing references (an open GOP's leading pictures without the GOP
/// before them) would be far below the others.
fn worst_frame_psnr(encoded: &Path, source: &Path, dir: &Path) -> f64 {
    let stats = dir.join("psnr.log");
    let filter = format!("[0:v][1:v]psnr=stats_file={}", stats.display());
    ffmpeg(&["-i", encoded.to_str().unwrap(), "-i", source.to_str().unwrap(), "-lavfi", &filter, "-f", "null", "-"]);
    let text = std::fs::read_to_string(&stats).unwrap();
    let values: Vec<f64> =
        text.lines().filter_map(|l| l.split("psnr_avg:").nth(1)?.split_whitespace().next()?.parse().ok()).collect();
    assert!(!values.is_empty(), "no PSNR per frame in {text}");
    values.into_iter().fold(f64::INFINITY, f64::min)
}

/// The first video stream's start time and time base's denominator, by ffprobe.
fn start_and_ticks(path: &Path) -> (i64, i64) {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=start_pts,time_base"])
        .args(["-of", "default=noprint_wrappers=1"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)).map(str::to_string);
    let start = field("start_pts=").and_then(|v| v.parse().ok()).unwrap_or(0);
    let den = field("time_base=1/").and_then(|v| v.parse().ok()).unwrap_or(1000);
    (start, den)
}

/// The decode times of the first video stream's keyframes, by ffprobe.
fn keyframe_decode_times(path: &Path) -> Vec<i64> {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=dts,flags", "-of", "csv=p=0"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .filter_map(|l| l.split_once(','))
        .filter(|(_, flags)| flags.starts_with('K'))
        .filter_map(|(dts, _)| dts.parse().ok())
        .collect()
}

/// The planned cuts, as offsets from the first frame, in the stream's time base.
fn cuts_of(plan: &EncodePlan, src: &Path) -> Vec<i64> {
    let PartialState::Valid(manifest) = inspect(plan) else { panic!("no manifest") };
    let (start, _) = start_and_ticks(src);
    manifest.boundaries.clone().unwrap_or_default().iter().map(|c| c - start).collect()
}

/// Runs `plan` to its end; checks the output against `src`: verification's frame-exact
/// comparison, every frame at its source time in order, and no frame decoded badly.
async fn encode_and_compare(plan: &EncodePlan, src: &Path, dir: &Path) -> Vec<Event> {
    let (end, events) = run(plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    check_output(plan, src, dir);
    events
}

fn check_output(plan: &EncodePlan, src: &Path, dir: &Path) {
    let output = plan.output_path();
    verify(&output, src, &probe(src).unwrap(), "hevc").unwrap();
    assert_eq!(video_frames(&output), video_frames(src));
    assert_eq!(frame_times(&output), frame_times(src));
    let worst = worst_frame_psnr(&output, src, dir);
    assert!(worst > 30.0, "a frame came out at {worst:.1} dB");
}

#[actix_web::test]
async fn one_keyframe_in_ten_seconds_still_gives_two_sessions_even_spans_and_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), "default-gop.mkv", 10, 250, "-preset ultrafast -qp 12");
    let plan = two_sessions(&src);
    let events = encode_and_compare(&plan, &src, dir.path()).await;
    // Cut only at keyframes this was one span, one session at work while the other idled:
    // now 4 spans of 2.5 s, 63 and 62 frames (a whole number each for 2 sessions, none
    // under 2 s).
    assert_eq!(cuts_of(&plan, &src), vec![2520, 5000, 7520]);
    assert_eq!(most_sessions(&events), 2, "{events:?}");
    let (encoded, skipped) = done_counts(&events);
    assert_eq!(encoded, 250);
    // The spans after the first decode from the keyframe at 0 and drop what comes before
    // them: 63, 125 and 188 frames, span by span.
    assert!((370..=380).contains(&skipped), "{skipped} frames decoded and dropped");
    let by_span: Vec<(u32, u64)> = dropped_by_span(&events).into_iter().collect();
    assert_eq!(by_span, vec![(0, 0), (1, 63), (2, 125), (3, 188)], "{events:?}");
}

/// Sessions starting at a clean keyframe decode nothing they drop: every span of an 8 s
/// clip with an IDR every 2 s (x264's closed GOPs, B-frames), cut on them in 4 spans of
/// 2 s, in Matroska (its index gives presentation times) and MP4 (decode times, two frames
/// ahead: the cut is the keyframe's presentation time read from its packet).
#[actix_web::test]
async fn spans_cut_on_idr_frames_start_decoding_at_their_cut_and_drop_nothing() {
    for name in ["idr.mkv", "idr.mp4"] {
        let dir = tempfile::tempdir().unwrap();
        let src = clip(dir.path(), name, 8, 50, "-preset veryfast -bf 3 -qp 14 -sc_threshold 0");
        let plan = two_sessions(&src);
        let events = encode_and_compare(&plan, &src, dir.path()).await;
        let (_, ticks) = start_and_ticks(&src);
        assert_eq!(cuts_of(&plan, &src), vec![2 * ticks, 4 * ticks, 6 * ticks], "{name}");
        let (encoded, skipped) = done_counts(&events);
        assert_eq!((encoded, skipped), (200, 0), "{name}: {events:?}");
        let by_span: Vec<(u32, u64)> = dropped_by_span(&events).into_iter().collect();
        assert_eq!(by_span, vec![(0, 0), (1, 0), (2, 0), (3, 0)], "{name}: {events:?}");
    }
}

/// With an IDR at 0 and 5 s of a 10 s clip, the cut at 5 s starts decoding there; the cuts
/// at 2.5 and 7.5 s, mid-GOP, decode from the IDR before them and drop what comes before.
#[actix_web::test]
async fn only_spans_cut_mid_gop_drop_frames() {
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), "half.mkv", 10, 125, "-preset veryfast -bf 3 -qp 14 -sc_threshold 0");
    let plan = two_sessions(&src);
    let events = encode_and_compare(&plan, &src, dir.path()).await;
    assert_eq!(cuts_of(&plan, &src), vec![2520, 5000, 7520]);
    let by_span: Vec<(u32, u64)> = dropped_by_span(&events).into_iter().collect();
    assert_eq!(by_span, vec![(0, 0), (1, 63), (2, 0), (3, 63)], "{events:?}");
    assert_eq!(done_counts(&events), (250, 126));
}

/// HEVC's CRA keyframes (x265's open GOPs, leading pictures that reference the GOP before)
/// are clean starts too: a span cut on one decodes from it, the span before it keeps the
/// leading pictures, and every frame comes out whole.
#[actix_web::test]
async fn spans_cut_on_hevc_cra_frames_drop_nothing_and_keep_the_leading_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("cra.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=25",
        "-t",
        "8",
        "-c:v",
        "libx265",
        "-preset",
        "ultrafast",
        "-x265-params",
        "keyint=50:min-keyint=50:scenecut=0:open-gop=1:bframes=3:qp=14:log-level=error",
        src.to_str().unwrap(),
    ]);
    let plan = two_sessions(&src);
    let events = encode_and_compare(&plan, &src, dir.path()).await;
    assert_eq!(cuts_of(&plan, &src), vec![2000, 4000, 6000]);
    assert_eq!(done_counts(&events), (200, 0), "{events:?}");
}

#[actix_web::test]
async fn b_frames_and_an_open_gop_between_keyframes_keep_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), "open.mkv", 10, 250, "-preset veryfast -bf 3 -qp 14 -x264-params open-gop=1");
    let plan = two_sessions(&src);
    encode_and_compare(&plan, &src, dir.path()).await;
    assert_eq!(cuts_of(&plan, &src), vec![2520, 5000, 7520]);
}

#[actix_web::test]
async fn an_mp4_with_open_gops_cut_just_after_its_keyframes_keeps_every_frame() {
    // A keyframe every 2.4 s: each even cut (2.5, 5, 7.5 s) lies a few frames after one,
    // where MP4's index (decode times) would land the seek on a keyframe shown after the
    // cut, or whose leading pictures reference a GOP not decoded: the cuts move onto the
    // keyframes.
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), "open.mp4", 10, 64, "-preset veryfast -bf 3 -qp 14 -x264-params open-gop=1");
    let plan = two_sessions(&src);
    encode_and_compare(&plan, &src, dir.path()).await;
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("no manifest") };
    let cuts = manifest.boundaries.clone().unwrap_or_default();
    assert_eq!(cuts.len(), 3, "{cuts:?}");
    // Each is a keyframe's decode time, as MP4's index gives it.
    let keys = keyframe_decode_times(&src);
    assert!(cuts.iter().all(|c| keys.contains(c)), "cuts {cuts:?}, keyframes {keys:?}");
}

#[actix_web::test]
async fn a_pause_across_cuts_between_keyframes_resumes_without_encoding_a_frame_twice() {
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), "paused.mkv", 10, 250, "-preset veryfast -bf 3 -qp 14 -x264-params open-gop=1");
    let mut plan = two_sessions(&src);
    plan.throttle_ms_per_frame = 20;
    let events = run_until_paused(&plan, |e| matches!(e, Event::Progress { percent, .. } if *percent >= 35.0)).await;
    assert_eq!(most_sessions(&events), 2, "{events:?}");
    assert_eq!(cuts_of(&plan, &src), vec![2520, 5000, 7520]);
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("not valid after a pause") };
    let before = manifest.frames_done();
    assert!(before > 0 && before < 250, "{before}");
    // Both sessions stopped mid-span: what is left starts between keyframes.
    assert!(manifest.remaining().len() >= 2, "{:?}", manifest.remaining());

    plan.throttle_ms_per_frame = 0;
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    let (encoded, _) = done_counts(&events);
    assert_eq!(encoded, 250 - before, "the resume encoded frames twice or left some out");
    check_output(&plan, &src, dir.path());
}

#[actix_web::test]
async fn two_passes_over_spans_cut_between_keyframes_keep_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), "two-pass.mkv", 10, 250, "-preset veryfast -bf 3 -qp 14");
    let info = probe(&src).unwrap();
    let mut asked = profile("libx265", 30, "ultrafast");
    asked.rate = RateControl::TwoPass { bitrate_kbps: 400 };
    let mut plan = EncodePlan::new(&src, &info, &asked).unwrap();
    assert!(plan.two_pass);
    plan.sessions = Sessions { sessions: 2, threads: 1 };
    encode_and_compare(&plan, &src, dir.path()).await;
    assert_eq!(cuts_of(&plan, &src), vec![2520, 5000, 7520]);
}
