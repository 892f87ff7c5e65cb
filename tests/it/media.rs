//! The media engine on clips made at test time: probe, validation, decisions, the
//! transcoder child (real process), pause/resume, kill -9, HDR, verification, replace.

use std::path::{Path, PathBuf};

use condense::domain::job::FailureCode;
use condense::domain::segments::Sessions;
use condense::media::event::Event;
use condense::media::info::{HdrKind, StreamKind};
use condense::media::manifest::{inspect, PartialState};
use condense::media::plan::{decide, final_path, Decision, EncodePlan, GrowingSource};
use condense::media::replace::{replace, Replace};
use condense::media::transcoder::{ChildEnd, Transcoder};
use condense_media::probe::probe;
use condense_media::verify::{validate_source, verify};

use crate::common::media as clips;
use crate::common::server::{binary, media_binary};
use crate::common::transcoder::{done_counts, drain, most_sessions, run, run_until_paused, spawn_helper, start_run};

fn plan_for(source: &Path, codec: &str, encoder: &str, quality: u32, preset: &str) -> EncodePlan {
    let info = probe(source).unwrap();
    let plan = EncodePlan::new(source, &info, &crate::common::media::profile(encoder, quality, preset)).unwrap();
    assert_eq!(plan.target_codec, codec);
    plan
}

/// Runs `plan` again without its throttle, as a resume does, to its completion; answers its events.
async fn resume_unthrottled(plan: &EncodePlan) -> Vec<Event> {
    let mut fast = plan.clone();
    fast.throttle_ms_per_frame = 0;
    let (end, events) = run(&fast).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    events
}

/// The frames a run took as done at its start (its partial output's), from its Started event.
fn resumed_from(events: &[Event]) -> Option<u64> {
    events.iter().find_map(|e| match e {
        Event::Started { resume_after_frames, .. } => Some(*resume_after_frames),
        _ => None,
    })
}

#[test]
fn probe_describes_every_stream_and_the_cli_prints_json() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264_with_audio_and_subs(dir.path(), "a.mkv", "320x240", 2);
    let info = probe(&src).unwrap();
    assert_eq!(info.container, "matroska,webm");
    assert!((info.duration_seconds.unwrap() - 2.0).abs() < 0.1, "{:?}", info.duration_seconds);
    let v = info.video().unwrap();
    assert_eq!((v.codec.as_str(), v.width, v.height, v.bit_depth), ("h264", Some(320), Some(240), Some(8)));
    assert_eq!(v.frame_rate, Some(25.0));
    assert_eq!(v.pix_fmt.as_deref(), Some("yuv420p"));
    assert_eq!(info.count(StreamKind::Audio), 1);
    assert_eq!(info.count(StreamKind::Subtitle), 1);
    let audio = info.streams.iter().find(|s| s.kind == StreamKind::Audio).unwrap();
    assert_eq!((audio.codec.as_str(), audio.language.as_deref(), audio.sample_rate), ("aac", Some("eng"), Some(48000)));
    assert_eq!(info.hdr.kind, HdrKind::Sdr);

    let out = std::process::Command::new(binary()).arg("probe").arg(&src).output().unwrap();
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["streams"][2]["language"], "fra");
    assert_eq!(json["hdr"]["kind"], "SDR");
    let out = std::process::Command::new(binary()).arg("probe").arg(dir.path().join("missing.mkv")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("file_validation_failed"));
}

async fn encode_and_check(src: &Path, codec: &str, encoder: &str, quality: u32, preset: &str) -> PathBuf {
    let source_info = probe(src).unwrap();
    let plan = plan_for(src, codec, encoder, quality, preset);
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    let output = plan.output_path();
    let info = verify(&output, src, &source_info, codec).unwrap();
    assert_eq!(info.video().unwrap().codec, codec);
    assert_eq!(info.count(StreamKind::Audio), source_info.count(StreamKind::Audio));
    assert_eq!(info.count(StreamKind::Subtitle), source_info.count(StreamKind::Subtitle));
    let d = (info.duration_seconds.unwrap() - source_info.duration_seconds.unwrap()).abs();
    assert!(d <= 0.5, "duration off by {d}");
    assert!(info.size_bytes < source_info.size_bytes, "{} >= {}", info.size_bytes, source_info.size_bytes);
    output
}

#[actix_web::test]
async fn h264_1080p_with_audio_and_subtitles_to_hevc_and_av1() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264_with_audio_and_subs(dir.path(), "film.mkv", "1920x1080", 2);
    let hevc = encode_and_check(&src, "hevc", "libx265", 30, "ultrafast").await;
    let kept = probe(&hevc).unwrap();
    let subs = kept.streams.iter().find(|s| s.kind == StreamKind::Subtitle).unwrap();
    assert_eq!((subs.codec.as_str(), subs.language.as_deref()), ("subrip", Some("fra")));
    std::fs::remove_dir_all(hevc.parent().unwrap()).unwrap();
    encode_and_check(&src, "av1", "libsvtav1", 45, "12").await;
}

#[actix_web::test]
async fn mp4_stays_mp4_with_hevc_tagged_hvc1_and_replaces_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264_with_audio_and_subs(dir.path(), "clip.mp4", "640x360", 2);
    let original_size = std::fs::metadata(&src).unwrap().len();
    let output = encode_and_check(&src, "hevc", "libx265", 30, "ultrafast").await;
    let info = probe(&output).unwrap();
    assert_eq!(info.video().unwrap().codec_tag.as_deref(), Some("hvc1"));

    let plan = plan_for(&src, "hevc", "libx265", 30, "ultrafast");
    let target = final_path(&src, "hevc");
    assert_eq!(target, src, "mp4 keeps its name");
    let mut steps = Vec::new();
    let r = Replace {
        source: &src,
        identity: plan.source,
        output: &output,
        final_path: &target,
        keep_original: false,
        keep_modified_time: false,
    };
    replace(&r, &|| true, &mut |s| steps.push(s.name())).unwrap();
    assert_eq!(steps.len(), 4, "{steps:?}");
    let replaced = probe(&src).unwrap();
    assert_eq!(replaced.video().unwrap().codec, "hevc");
    assert!(replaced.size_bytes < original_size);
    let leftovers: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!leftovers.iter().any(|n| n.contains("condense-original")), "{leftovers:?}");
}

#[actix_web::test]
async fn an_hevc_source_is_skipped_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::hevc(dir.path(), "already.mkv");
    let info = probe(&src).unwrap();
    assert!(matches!(decide(&info, "hevc", false).unwrap(), Decision::Skip { .. }));
    assert_eq!(decide(&info, "av1", false).unwrap(), Decision::Encode);
    assert_eq!(decide(&info, "hevc", true).unwrap(), Decision::Encode);
    let plan = plan_for(&src, "hevc", "libx265", 28, "ultrafast");
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    verify(&plan.output_path(), &src, &info, "hevc").unwrap();
}

fn assert_hdr10(path: &Path) {
    assert_hdr10_allowing(path, condense_media::probe::CONTAINER_DEMUXERS);
}

/// `assert_hdr10` with the given demuxers allowed: a raw elementary stream is no container.
fn assert_hdr10_allowing(path: &Path, demuxers: &[&str]) {
    let info = condense_media::probe::probe_allowing(path, demuxers).unwrap();
    let v = info.video().unwrap();
    assert_eq!(v.bit_depth, Some(10), "{path:?}");
    assert_eq!(v.color_primaries.as_deref(), Some("bt2020"));
    assert_eq!(v.color_transfer.as_deref(), Some("smpte2084"));
    assert_eq!(v.color_space.as_deref(), Some("bt2020nc"));
    assert_eq!(info.hdr.kind, HdrKind::Hdr10);
    let m = info.hdr.mastering_display.expect("mastering display kept");
    assert!((m.green[0] - 0.265).abs() < 0.001 && (m.green[1] - 0.69).abs() < 0.001, "{m:?}");
    assert!((m.red[0] - 0.68).abs() < 0.001 && (m.blue[1] - 0.06).abs() < 0.001, "{m:?}");
    assert!((m.white_point[0] - 0.3127).abs() < 0.001, "{m:?}");
    assert!((m.max_luminance - 1000.0).abs() < 0.5 && (m.min_luminance - 0.005).abs() < 0.001, "{m:?}");
    let l = info.hdr.content_light.expect("content light level kept");
    assert_eq!((l.max_cll, l.max_fall), (1000, 400));
}

#[actix_web::test]
async fn hdr10_is_kept_in_hevc_and_av1_and_hlg_keeps_its_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::hdr10(dir.path(), "hdr.mkv");
    assert_hdr10(&src);
    for (codec, encoder, preset) in [("hevc", "libx265", "ultrafast"), ("av1", "libsvtav1", "12")] {
        let plan = plan_for(&src, codec, encoder, 30, preset);
        assert_eq!(plan.hdr, HdrKind::Hdr10);
        let (end, events) = run(&plan).await;
        assert_eq!(end, ChildEnd::Completed, "{codec}: {events:?}");
        assert_hdr10(&plan.output_path());
        // The same facts must be in the bitstream itself, not only in the container.
        let raw = dir.path().join(if codec == "hevc" { "raw.hevc" } else { "raw.obu" });
        clips::ffmpeg(&[
            "-i",
            plan.output_path().to_str().unwrap(),
            "-map",
            "0:v",
            "-c",
            "copy",
            raw.to_str().unwrap(),
        ]);
        assert_hdr10_allowing(&raw, &["hevc", "obu"]);
        std::fs::remove_dir_all(&plan.partial_dir).unwrap();
    }
    let hlg = clips::hlg(dir.path(), "hlg.mkv");
    let plan = plan_for(&hlg, "hevc", "libx265", 30, "ultrafast");
    let (end, _) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed);
    let out = probe(&plan.output_path()).unwrap();
    assert_eq!(out.hdr.kind, HdrKind::Hlg);
    assert_eq!(out.video().unwrap().color_transfer.as_deref(), Some("arib-std-b67"));
    assert_eq!(out.video().unwrap().bit_depth, Some(10));
}

#[actix_web::test]
async fn each_rung_of_the_retry_ladder_runs_what_its_plan_says() {
    use condense::domain::encoding::{profile_for_attempt, EncodeSettings, Encoder, TargetCodec};
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264_ten_bit(dir.path(), "ten.mkv");
    let info = probe(&src).unwrap();
    assert_eq!(info.video().unwrap().bit_depth, Some(10));
    let settings =
        EncodeSettings::for_library(TargetCodec::Hevc, Some(Encoder::HevcNvenc), Some("p7"), Some(30), false);
    let plans: Vec<EncodePlan> =
        (0..4).map(|n| EncodePlan::new(&src, &info, &profile_for_attempt(&settings, n)).unwrap()).collect();

    // The first two rungs run NVENC, decoding on the GPU and then on the CPU; without an
    // NVIDIA encoder here they fail as an unsupported codec, which is what the ladder climbs.
    for plan in &plans[..2] {
        assert_eq!(plan.encoder, Encoder::HevcNvenc);
        let (end, events) = run(plan).await;
        if condense_media::encoders::opens(Encoder::HevcNvenc) {
            assert_eq!(end, ChildEnd::Completed, "{events:?}");
        } else {
            match end {
                ChildEnd::Failed(e) => assert_eq!(e.code, FailureCode::UnsupportedCodec, "{e}"),
                other => panic!("{other:?}: {events:?}"),
            }
        }
        let _ = std::fs::remove_dir_all(&plan.partial_dir);
    }
    // The CPU rung encodes with x265 and keeps 10 bits; the conservative rung writes 8.
    for (plan, depth) in [(&plans[2], 10), (&plans[3], 8)] {
        assert_eq!((plan.encoder, plan.bit_depth), (Encoder::Libx265, depth));
        let (end, events) = run(plan).await;
        assert_eq!(end, ChildEnd::Completed, "{events:?}");
        let out = verify(&plan.output_path(), &src, &info, "hevc").unwrap();
        assert_eq!(out.video().unwrap().bit_depth, Some(u32::from(depth)), "rung {:?}", plan.retry_profile);
        std::fs::remove_dir_all(&plan.partial_dir).unwrap();
    }
}

/// Decoding on each encoder's hardware gives every frame, in system memory; where the
/// hardware is missing (as on the test machines without a GPU) it decodes on the CPU.
#[test]
fn hardware_decoding_gives_every_frame_in_system_memory_or_falls_back_to_the_cpu() {
    use condense::domain::encoding::Hardware;
    use condense_media::decode::{main_video_index, open_decoder_on, to_system_memory};
    use rsmpeg::error::RsmpegError;
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264(dir.path(), "clip.mkv", "320x240", 2);
    for hardware in Hardware::ALL.iter().copied() {
        let mut input = condense_media::probe::open_input(&src).unwrap();
        let vi = main_video_index(&input).unwrap();
        let (mut decoder, hardware_format) = open_decoder_on(&input, vi, hardware).unwrap();
        if hardware == Hardware::Cpu {
            assert_eq!(hardware_format, None);
        }
        let (mut frames, mut eof) = (0, false);
        while !eof {
            match condense_media::probe::read_packet(&mut input, "clip").unwrap() {
                Some(packet) if packet.stream_index as usize == vi => decoder.send_packet(Some(&packet)).unwrap(),
                Some(_) => continue,
                None => {
                    decoder.send_packet(None).unwrap();
                    eof = true;
                }
            }
            loop {
                match decoder.receive_frame() {
                    Ok(frame) => {
                        let frame = to_system_memory(frame, hardware_format).unwrap();
                        assert_eq!((frame.width, frame.height), (320, 240), "{hardware}");
                        assert!(
                            Some(frame.format) != hardware_format
                                && condense_media::probe::pix_fmt_depth(frame.format).unwrap_or(0) >= 8,
                            "{hardware}: format {} is not in system memory",
                            frame.format
                        );
                        frames += 1;
                    }
                    Err(RsmpegError::DecoderDrainError | RsmpegError::DecoderFlushedError) => break,
                    Err(e) => panic!("{hardware}: {e}"),
                }
            }
        }
        assert_eq!(frames, 50, "{hardware} (hardware format {hardware_format:?})");
    }
}

/// 12 s at 25 fps in 1-second (25-frame) segments, slowed so a stop lands mid-encode.
fn slow_plan(dir: &Path) -> (PathBuf, EncodePlan, u64) {
    let src = clips::h264(dir, "long.mkv", "320x240", 12);
    let mut plan = plan_for(&src, "hevc", "libx265", 30, "ultrafast");
    plan.segment_seconds = 1.0;
    plan.throttle_ms_per_frame = 15;
    (src, plan, 300)
}

#[actix_web::test]
async fn pause_at_half_then_resume_re_encodes_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan, total) = slow_plan(dir.path());
    let source_info = probe(&src).unwrap();
    run_until_paused(&plan, |e| matches!(e, Event::Progress { percent, .. } if *percent >= 45.0)).await;
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("partial output not valid after a pause") };
    let done_before = manifest.frames_done();
    assert!(done_before > 0 && done_before < total, "{done_before}");
    assert!(!manifest.video_complete);

    let events = resume_unthrottled(&plan).await;
    assert_eq!(resumed_from(&events), Some(done_before));
    let (encoded, _skipped) = done_counts(&events);
    // A pause finishes its segment, so the resumed run encodes exactly the rest.
    assert_eq!(encoded, total - done_before);
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!() };
    assert_eq!(manifest.frames_done(), total);
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
}

/// 8 s at 25 fps with a keyframe every second, audio and subtitles, cut into 2 s spans that
/// two single-thread sessions encode at once.
fn parallel_plan(dir: &Path) -> (PathBuf, EncodePlan) {
    let src = clips::h264_with_audio_and_subs(dir, "keyed.mkv", "320x240", 8);
    let mut plan = plan_for(&src, "hevc", "libx265", 30, "ultrafast");
    plan.segment_seconds = 2.0;
    plan.sessions = Sessions { sessions: 2, threads: 1 };
    plan.throttle_ms_per_frame = 15;
    (src, plan)
}

/// PSNR of `encoded` against `source`, by FFmpeg's `psnr` filter.
fn psnr(encoded: &Path, source: &Path) -> f64 {
    let out = std::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-nostats", "-i"])
        .arg(encoded)
        .arg("-i")
        .arg(source)
        .args(["-lavfi", "[0:v][1:v]psnr", "-f", "null", "-"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    let average = text.split("average:").nth(1).and_then(|rest| rest.split_whitespace().next());
    average.and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no PSNR in {text}"))
}

#[actix_web::test]
async fn two_sessions_encode_spans_at_once_and_the_joined_file_matches_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan) = parallel_plan(dir.path());
    let source_info = probe(&src).unwrap();
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    assert_eq!(most_sessions(&events), 2, "two sessions never worked at once: {events:?}");
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("no manifest") };
    // Keyframes every second, spans of 2 s: cut at 2, 4 and 6 s after the first frame
    // (Matroska counts in ms; the video starts after the audio's priming).
    let cuts = manifest.boundaries.clone().unwrap_or_default();
    let first = cuts.first().copied().unwrap_or(0) - 2000;
    assert_eq!(cuts, vec![first + 2000, first + 4000, first + 6000]);
    let frames: Vec<u64> = manifest.segments.iter().map(|s| s.frames).filter(|f| *f > 0).collect();
    assert_eq!(frames, vec![50, 50, 50, 50]);
    let parallel = plan.output_path();
    verify(&parallel, &src, &source_info, "hevc").unwrap();
    assert_eq!(crate::common::shim::video_frames(&parallel), 200);

    // The same source through one session, cut at the same frames by count: the joined
    // file is the same size and quality (only the encoder's threading differs).
    let other = tempfile::tempdir().unwrap();
    let copy = other.path().join("keyed.mkv");
    std::fs::copy(&src, &copy).unwrap();
    let mut one = plan_for(&copy, "hevc", "libx265", 30, "ultrafast");
    one.segment_seconds = 2.0;
    assert_eq!(one.sessions.sessions, 1);
    let (end, events) = run(&one).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    // Progress is reported every 500 ms: an encode this short may end before the first
    // report (it did, once in CI), so no report is fine; none may show two sessions.
    assert!(most_sessions(&events) <= 1, "{events:?}");
    let single = one.output_path();
    let (a, b) = (std::fs::metadata(&parallel).unwrap().len() as f64, std::fs::metadata(&single).unwrap().len() as f64);
    assert!((a / b - 1.0).abs() <= 0.02, "two sessions {a} bytes, one session {b} bytes");
    let (pa, pb) = (psnr(&parallel, &src), psnr(&single, &src));
    assert!((pa - pb).abs() <= 0.1, "PSNR two sessions {pa}, one session {pb}");
}

#[actix_web::test]
async fn a_video_shorter_than_its_sessions_need_is_cut_finer_than_the_segment_setting() {
    // 8 s at the default 20 s spans would be one span, encoded by one session while the
    // other waits: it is cut into 4 equal spans instead (3 a session wanted, none under 2 s).
    let dir = tempfile::tempdir().unwrap();
    let (src, mut plan) = parallel_plan(dir.path());
    plan.segment_seconds = 20.0;
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    assert_eq!(most_sessions(&events), 2, "{events:?}");
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("no manifest") };
    let cuts = manifest.boundaries.clone().unwrap_or_default();
    assert_eq!(cuts.len(), 3, "{cuts:?}");
    assert!(cuts.windows(2).all(|w| w[1] - w[0] == 2000), "{cuts:?}");
    verify(&plan.output_path(), &src, &probe(&src).unwrap(), "hevc").unwrap();
}

#[actix_web::test]
async fn a_pause_with_two_sessions_keeps_what_both_encoded_and_the_resume_encodes_only_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan) = parallel_plan(dir.path());
    let source_info = probe(&src).unwrap();
    let events = run_until_paused(&plan, |e| matches!(e, Event::Progress { percent, .. } if *percent >= 40.0)).await;
    assert_eq!(most_sessions(&events), 2, "{events:?}");
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("partial output not valid after a pause") };
    let done_before = manifest.frames_done();
    assert!(done_before > 0 && done_before < 200, "{done_before}");
    assert!(!manifest.video_complete && !manifest.remaining().is_empty());

    let events = resume_unthrottled(&plan).await;
    let (encoded, _) = done_counts(&events);
    assert_eq!(encoded, 200 - done_before, "the resume encoded frames twice or left some out");
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
    assert_eq!(crate::common::shim::video_frames(&plan.output_path()), 200);
}

#[actix_web::test]
async fn kill_9_with_two_sessions_loses_only_their_open_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan) = parallel_plan(dir.path());
    let before = clips::sha(&src);
    let source_info = probe(&src).unwrap();
    let mut child = Transcoder::spawn(media_binary(), &plan).await.unwrap();
    let mut segments_done = 0;
    while let Some(e) = child.events.recv().await {
        if matches!(e, Event::SegmentDone { .. }) {
            segments_done += 1;
        }
        if segments_done >= 1 && matches!(e, Event::Progress { sessions: 2, .. }) {
            child.kill().await;
            break;
        }
    }
    assert!(matches!(child.wait().await, ChildEnd::Failed(e) if e.code == FailureCode::TranscoderCrashed));
    assert_eq!(clips::sha(&src), before, "the original changed");
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("manifest must survive kill -9") };
    let kept = manifest.frames_done();
    assert!((50..200).contains(&kept), "kept {kept}");

    let events = resume_unthrottled(&plan).await;
    let (encoded, _) = done_counts(&events);
    assert_eq!(encoded, 200 - kept);
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
    assert_eq!(crate::common::shim::video_frames(&plan.output_path()), 200);
    assert_eq!(clips::sha(&src), before);
}

#[actix_web::test]
async fn kill_9_mid_encode_keeps_the_original_and_resuming_loses_at_most_one_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan, total) = slow_plan(dir.path());
    let before = clips::sha(&src);
    let source_info = probe(&src).unwrap();
    let mut child = Transcoder::spawn(media_binary(), &plan).await.unwrap();
    let mut last_frame = 0;
    while let Some(e) = child.events.recv().await {
        if let Event::Progress { frame, percent, .. } = e {
            last_frame = frame;
            if percent >= 30.0 {
                child.kill().await;
                break;
            }
        }
    }
    match child.wait().await {
        ChildEnd::Failed(e) => assert_eq!(e.code, FailureCode::TranscoderCrashed),
        other => panic!("{other:?}"),
    }
    assert_eq!(clips::sha(&src), before, "the original changed");
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("manifest must survive kill -9") };
    let kept = manifest.frames_done();
    // Work lost to the kill: frames past the last recorded segment, at most the segment in
    // progress (which may have all its frames and be flushing its encoder).
    assert!(last_frame >= kept && last_frame - kept <= 25, "kept {kept}, reached {last_frame}");

    let events = resume_unthrottled(&plan).await;
    let (encoded, _) = done_counts(&events);
    assert_eq!(encoded, total - kept);
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
    assert_eq!(clips::sha(&src), before);
}

#[test]
fn broken_inputs_fail_validation_and_stay_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let good = clips::h264_with_audio_and_subs(dir.path(), "good.mp4", "320x240", 4);
    let good_mkv = clips::h264_with_audio_and_subs(dir.path(), "good.mkv", "320x240", 4);
    let bytes = std::fs::read(&good).unwrap();
    let mkv_bytes = std::fs::read(&good_mkv).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty.mp4", Vec::new()),
        ("garbage.mkv", (0..200_000u32).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect()),
        ("truncated.mp4", bytes[..bytes.len() / 2].to_vec()),
        ("truncated.mkv", mkv_bytes[..mkv_bytes.len() / 3].to_vec()),
    ];
    for (name, content) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &content).unwrap();
        let err = validate_source(&path, true).expect_err(name);
        assert_eq!(err.code, FailureCode::FileValidationFailed, "{name}: {err}");
        assert_eq!(std::fs::read(&path).unwrap(), content, "{name} was modified");
    }
    // A raw H.263 stream under a video's name: no container, refused by its format.
    let raw = dir.path().join("raw.mkv");
    clips::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=176x144",
        "-t",
        "1",
        "-c:v",
        "h263",
        "-f",
        "h263",
        raw.to_str().unwrap(),
    ]);
    let err = validate_source(&raw, true).unwrap_err();
    assert_eq!(err.code, FailureCode::UnsupportedContainer, "{err}");
    assert!(err.message.contains("the format is h263"), "{err}");
    // A container that does not say how long its video is.
    let unknown = clips::without_length(dir.path(), "unknown.wmv", "libx264");
    let err = validate_source(&unknown, true).unwrap_err();
    assert_eq!(err.code, FailureCode::FileValidationFailed, "{err}");
    assert!(err.message.contains("length"), "{err}");
    let audio_only = dir.path().join("audio.mkv");
    clips::ffmpeg(&["-f", "lavfi", "-i", "sine", "-t", "1", audio_only.to_str().unwrap()]);
    assert_eq!(validate_source(&audio_only, true).unwrap_err().code, FailureCode::FileValidationFailed);
    assert_eq!(
        validate_source(&dir.path().join("nope.mkv"), true).unwrap_err().code,
        FailureCode::FileValidationFailed
    );
    validate_source(&good, true).unwrap();
}

#[actix_web::test]
async fn no_room_for_the_partial_output_fails_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs", small.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED media::no_room_for_the_partial_output_fails_before_writing: cannot mount a tmpfs here");
        return;
    }
    let src = clips::h264(&small, "clip.mkv", "320x240", 2);
    let before = clips::sha(&src);
    let plan = plan_for(&src, "hevc", "libx265", 28, "ultrafast");
    let (end, _) = run(&plan).await;
    let names: Vec<_> = std::fs::read_dir(&small).unwrap().map(|e| e.unwrap().file_name()).collect();
    let after = clips::sha(&src);
    let _ = std::process::Command::new("umount").arg(&small).status();
    match end {
        ChildEnd::Failed(e) => assert_eq!(e.code, FailureCode::InsufficientDiskSpace, "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(names.len(), 1, "something was written: {names:?}");
    assert_eq!(after, before, "the source changed");
}

/// Runs `condense-media transcode` on `plan` as the node would, with `env` added; answers its exit
/// status and events.
fn transcode_with_env(plan: &EncodePlan, env: &[(&str, std::ffi::OsString)]) -> (std::process::ExitStatus, Vec<Event>) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(binary());
    cmd.arg("transcode").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(&serde_json::to_vec(plan).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    let events = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    (out.status, events)
}

/// A share that answers one read with EIO at 40 % of the file: the attempt fails (it used to
/// end the video there, and the mux added the full audio), and the retry, resuming from the
/// last finished segment, has every frame.
#[test]
fn a_read_error_mid_source_fails_the_attempt_and_the_retry_has_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264_with_audio_and_subs(dir.path(), "film.mkv", "320x240", 8);
    let before = clips::sha(&src);
    let source_info = probe(&src).unwrap();
    let mut plan = plan_for(&src, "hevc", "libx265", 30, "ultrafast");
    plan.segment_seconds = 2.0;
    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let env = crate::common::shim::eio_env(&src, None, &markers);
    let (status, events) = transcode_with_env(&plan, &env);
    assert_eq!(std::fs::read_dir(&markers).unwrap().count(), 1, "the shim failed no read: {events:?}");
    assert!(!status.success(), "the attempt whose read failed completed: {events:?}");
    assert!(events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    assert_eq!(clips::sha(&src), before, "the source changed");

    // The retry: the shim has spent its one failure.
    let (status, events) = transcode_with_env(&plan, &env);
    assert!(status.success(), "{events:?}");
    let output = plan.output_path();
    let frames = crate::common::shim::video_frames(&src);
    assert_eq!(crate::common::shim::video_frames(&output), frames, "frames lost");
    verify(&output, &src, &source_info, "hevc").unwrap();
}

/// A source whose header promises more than it holds (the first third of an MKV), which a
/// first attempt validates by probing alone: its encode fails as the validation's points
/// would, leaving the source as it was and nothing in its place (without the check, the
/// spans past the end are empty and the third is muxed as if it were the whole).
#[test]
fn a_source_shorter_than_its_header_fails_its_encode_as_validation_would() {
    let dir = tempfile::tempdir().unwrap();
    let whole = clips::h264_with_audio_and_subs(dir.path(), "whole.mkv", "320x240", 8);
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.path().join("cut.mkv");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    validate_source(&cut, false).expect("probing alone passes");
    let points = validate_source(&cut, true).expect_err("the points passed");
    assert!(points.message.contains("no frame decodes at"), "{points}");

    let mut plan = plan_for(&cut, "hevc", "libx265", 30, "ultrafast");
    plan.segment_seconds = 2.0;
    plan.sessions = Sessions { sessions: 2, threads: 1 };
    let (status, events) = transcode_with_env(&plan, &[]);
    assert!(!status.success(), "the cut source was encoded: {events:?}");
    let (code, message) = events
        .iter()
        .find_map(|e| match e {
            Event::Error { code, message } => Some((*code, message.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no error: {events:?}"));
    assert_eq!(code, FailureCode::FileValidationFailed, "{message}");
    assert!(message.contains("no frame decodes at 95 % (7."), "{message}");
    assert!(message.contains("the last frame decoded is at "), "{message}");
    assert_eq!(std::fs::read(&cut).unwrap(), &bytes[..bytes.len() / 3], "the source changed");
    assert!(!plan.output_path().exists(), "an output was left");
}

/// What a read error used to leave: 40 % of the picture and the full audio. The container's
/// duration is the audio's, and a seek past the video's end lands on its last frame.
#[test]
fn a_video_shorter_than_its_audio_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264_with_audio_and_subs(dir.path(), "source.mkv", "320x240", 5);
    let info = probe(&src).unwrap();
    let short = dir.path().join("short.mkv");
    clips::ffmpeg(&[
        "-i",
        src.to_str().unwrap(),
        "-map",
        "0",
        "-c",
        "copy",
        "-c:v",
        "libx265",
        "-preset",
        "ultrafast",
        "-x265-params",
        "log-level=error",
        "-vf",
        "trim=end=2",
        short.to_str().unwrap(),
    ]);
    assert_eq!(crate::common::shim::video_frames(&short), 50);
    let err = verify(&short, &src, &info, "hevc").expect_err("a short video passed verification");
    assert!(err.message.contains("frames"), "{err}");
    // The decode check alone: a point past the video's end does not land on its last frame.
    let err = condense_media::verify::decode_at_points(&short, 5.0).expect_err("decoded past the end");
    assert!(err.message.contains("no frame decodes at 50 %"), "{err}");
}

/// Points within one group of pictures are reached by decoding on forward, not by decoding
/// the group again from its keyframe for each point: a 10 s clip with one keyframe (x264's
/// default interval, 250 frames) decodes up to its 95 % point once (about 238 frames, where
/// a seek per point decoded 0 + 63 + 125 + 188 + 238). With a keyframe every second, each
/// point seeks to its own keyframe and decodes a few frames from it.
#[test]
fn the_points_of_one_group_of_pictures_are_decoded_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut decoded = Vec::new();
    for gop in ["250", "25"] {
        let clip = dir.path().join(format!("gop{gop}.mkv"));
        clips::ffmpeg(&[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=192x108:rate=25",
            "-t",
            "10",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-g",
            gop,
            "-keyint_min",
            gop,
            "-sc_threshold",
            "0",
            clip.to_str().unwrap(),
        ]);
        assert_eq!(crate::common::shim::video_frames(&clip), 250);
        decoded.push(condense_media::verify::decode_at_points_counted(&clip, 10.0).unwrap());
    }
    let (one_group, every_second) = (decoded[0], decoded[1]);
    assert!((230..=250).contains(&one_group), "{decoded:?}");
    // 0 % and 95 % land on their keyframes' own frames give or take the decoder's delay; the
    // others lie 6 to 19 frames after theirs.
    assert!(every_second < 80, "{decoded:?}");
}

/// The mux reads the source again for its other streams: a read error there fails the
/// attempt too (it used to end the audio and subtitles there), and the next run muxes again.
#[test]
fn a_read_error_while_muxing_fails_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264_with_audio_and_subs(dir.path(), "film.mkv", "320x240", 6);
    let source_info = probe(&src).unwrap();
    let plan = plan_for(&src, "hevc", "libx265", 30, "ultrafast");
    // The video is encoded whole first: the next runs only mux.
    let (status, events) = transcode_with_env(&plan, &[]);
    assert!(status.success(), "{events:?}");
    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let env = crate::common::shim::eio_env(&src, None, &markers);
    let (status, events) = transcode_with_env(&plan, &env);
    assert_eq!(std::fs::read_dir(&markers).unwrap().count(), 1, "the shim failed no read: {events:?}");
    assert!(events.iter().any(|e| matches!(e, Event::Muxing)), "{events:?}");
    assert!(!status.success(), "a mux whose source read failed completed: {events:?}");
    let (status, events) = transcode_with_env(&plan, &env);
    assert!(status.success(), "{events:?}");
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
}

/// Frame counting on older sources: MPEG-4 Part 2 with B-frames in AVI (no presentation
/// timestamps in the container, frames reordered by the decoder) and MPEG-2 in a program
/// stream. Every frame is encoded and counted once.
#[actix_web::test]
async fn avi_with_b_frames_and_mpeg_program_streams_keep_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    for (name, codec) in [("xvid.avi", "mpeg4"), ("dvd.mpg", "mpeg2video")] {
        let src = dir.path().join(name);
        #[rustfmt::skip]
        clips::ffmpeg(&[
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "3", "-c:v", codec, "-bf", "2", "-q:v", "2", "-c:a", "mp2",
            src.to_str().unwrap(),
        ]);
        let source_info = probe(&src).unwrap();
        let plan = plan_for(&src, "hevc", "libx265", 30, "ultrafast");
        let (end, events) = run(&plan).await;
        assert_eq!(end, ChildEnd::Completed, "{name}: {events:?}");
        verify(&plan.output_path(), &src, &source_info, "hevc").unwrap_or_else(|e| panic!("{name}: {e}"));
        let frames = crate::common::shim::video_frames(&src);
        assert_eq!(crate::common::shim::video_frames(&plan.output_path()), frames, "{name}");
    }
}

/// One writer per partial output: a second transcoder on the plan of a running one finds
/// the folder locked, exits with the busy status at once, and touches nothing.
#[actix_web::test]
async fn a_second_transcoder_on_a_running_plan_exits_busy_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source = clips::h264(dir.path(), "a.mkv", "160x120", 4);
    let mut plan = plan_for(&source, "hevc", "libx265", 30, "ultrafast");
    plan.segment_seconds = 1.0;
    plan.throttle_ms_per_frame = 40;
    plan.epoch = "lease-one".into();
    let mut first = Transcoder::spawn(media_binary(), &plan).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let listed = loop {
        if let PartialState::Valid(m) = inspect(&plan) {
            if !m.segments.is_empty() {
                break m;
            }
        }
        assert!(std::time::Instant::now() < deadline, "the first transcoder wrote no segment");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let files_before: Vec<_> = listed.segments.iter().map(|s| (s.file.clone(), s.bytes)).collect();

    let mut second_plan = plan.clone();
    second_plan.epoch = "lease-two".into();
    let (end, events) = run(&second_plan).await;
    assert_eq!(end, ChildEnd::Busy, "{events:?}");
    assert!(events.is_empty(), "a busy transcoder reports nothing: {events:?}");
    for (file, bytes) in &files_before {
        let now = std::fs::metadata(plan.partial_dir.join(file)).map(|m| m.len()).ok();
        assert_eq!(now, Some(*bytes), "{file} was touched by the busy transcoder");
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(plan.partial_dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["epoch"], "lease-one", "the busy transcoder claimed the partial output");

    first.pause();
    let mut first_events = Vec::new();
    while let Some(e) = first.events.recv().await {
        first_events.push(e);
    }
    assert_eq!(first.wait().await, ChildEnd::Paused, "{first_events:?}");
    // Once the first has exited the folder is free: the second continues it.
    let (end, events) = run(&second_plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
}

/// 8 s at 25 fps, keyframes every second, cut into four 2 s spans; the run has one session,
/// slowed, so a helper started beside it works at the same time.
fn helped_plan(dir: &Path) -> (PathBuf, EncodePlan) {
    let (src, mut plan) = parallel_plan(dir);
    plan.sessions = Sessions { sessions: 2, threads: 1 };
    plan.throttle_ms_per_frame = 25;
    (src, plan)
}

#[actix_web::test]
async fn a_helper_encodes_the_last_span_beside_the_run_and_the_joined_file_has_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan) = helped_plan(dir.path());
    let source_info = probe(&src).unwrap();
    let (mut owner, mut owner_events) = start_run(&plan).await;
    let mut helper = spawn_helper(&plan, 3).await;
    // While the helper works, its span is claimed on disk, and the run never encodes it.
    let mut helper_events = Vec::new();
    let mut seen_held = false;
    while let Some(e) = helper.events.recv().await {
        if matches!(e, Event::Progress { frame, .. } if frame > 0) {
            seen_held |= condense::media::partial::span_held(&plan.partial_dir, 3);
        }
        helper_events.push(e);
    }
    assert_eq!(helper.wait().await, ChildEnd::Completed, "{helper_events:?}");
    assert!(seen_held, "the helper's span was never seen claimed: {helper_events:?}");
    assert!(helper_events.contains(&Event::SpanStarted { span: 3 }), "{helper_events:?}");
    let helped = helper_events.iter().find_map(|e| match e {
        Event::Done { frames_encoded_this_run, .. } => Some(*frames_encoded_this_run),
        _ => None,
    });
    assert_eq!(helped, Some(50), "{helper_events:?}");
    assert_eq!(drain(&mut owner, &mut owner_events).await, ChildEnd::Completed, "{owner_events:?}");
    assert!(!owner_events.contains(&Event::SpanStarted { span: 3 }), "the run encoded the helper's span too");
    let (encoded, _) = done_counts(&owner_events);
    assert_eq!(encoded, 150, "the run encodes what the helper did not, once");
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("no manifest") };
    let files: Vec<&str> = manifest.segments.iter().map(|s| s.file.as_str()).collect();
    assert!(files.iter().any(|f| f.starts_with("span-00003-")), "{files:?}");
    assert!(!plan.partial_dir.join("span-00003.json").exists(), "the helper's record was taken in and removed");
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
    assert_eq!(crate::common::shim::video_frames(&plan.output_path()), 200);
    let (parallel, single) = (psnr(&plan.output_path(), &src), {
        let other = tempfile::tempdir().unwrap();
        let copy = other.path().join("keyed.mkv");
        std::fs::copy(&src, &copy).unwrap();
        let mut one = plan_for(&copy, "hevc", "libx265", 30, "ultrafast");
        one.segment_seconds = 2.0;
        let (end, events) = run(&one).await;
        assert_eq!(end, ChildEnd::Completed, "{events:?}");
        psnr(&one.output_path(), &copy)
    });
    assert!((parallel - single).abs() <= 0.1, "PSNR with a helper {parallel}, one session {single}");
}

#[actix_web::test]
async fn a_helper_killed_mid_span_loses_only_its_span_and_the_run_encodes_it_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan) = helped_plan(dir.path());
    let before = clips::sha(&src);
    let source_info = probe(&src).unwrap();
    let (mut owner, mut owner_events) = start_run(&plan).await;
    let mut helper = spawn_helper(&plan, 3).await;
    while let Some(e) = helper.events.recv().await {
        if matches!(e, Event::Progress { frame, .. } if frame >= 10) {
            helper.kill().await;
            break;
        }
    }
    assert!(matches!(helper.wait().await, ChildEnd::Failed(e) if e.code == FailureCode::TranscoderCrashed));
    assert_eq!(drain(&mut owner, &mut owner_events).await, ChildEnd::Completed, "{owner_events:?}");
    assert!(owner_events.contains(&Event::SpanStarted { span: 3 }), "the run never took the dead helper's span back");
    let (encoded, _) = done_counts(&owner_events);
    assert_eq!(encoded, 200, "the dead helper's frames are encoded once, by the run");
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
    assert_eq!(crate::common::shim::video_frames(&plan.output_path()), 200);
    assert_eq!(clips::sha(&src), before);
}

#[actix_web::test]
async fn a_record_left_while_the_run_was_paused_is_taken_in_at_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan) = helped_plan(dir.path());
    let source_info = probe(&src).unwrap();
    let (mut owner, mut owner_events) = start_run(&plan).await;
    let mut helper = spawn_helper(&plan, 3).await;
    // The run is paused while the helper works; the helper finishes after the run has gone.
    owner.pause();
    assert_eq!(drain(&mut owner, &mut owner_events).await, ChildEnd::Paused, "{owner_events:?}");
    let mut helper_events = Vec::new();
    assert_eq!(drain(&mut helper, &mut helper_events).await, ChildEnd::Completed, "{helper_events:?}");
    assert!(plan.partial_dir.join("span-00003.json").exists(), "the helper left no record");
    let PartialState::Valid(paused) = inspect(&plan) else { panic!("no manifest after the pause") };
    let done_before = paused.frames_done();

    let events = resume_unthrottled(&plan).await;
    assert_eq!(resumed_from(&events), Some(done_before + 50), "the helper's 50 frames were not taken in at the start");
    let (encoded, _) = done_counts(&events);
    assert_eq!(encoded, 150 - done_before);
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
    assert_eq!(crate::common::shim::video_frames(&plan.output_path()), 200);
}

#[actix_web::test]
async fn a_helper_on_a_span_the_run_holds_or_finished_does_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_src, plan) = helped_plan(dir.path());
    // No partial output yet: nothing to help with.
    let mut helper = spawn_helper(&plan, 1).await;
    let mut events = Vec::new();
    assert_eq!(drain(&mut helper, &mut events).await, ChildEnd::Nothing, "{events:?}");
    let (mut owner, mut owner_events) = start_run(&plan).await;
    // Span 0 is the run's own (its first session took it at once).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !condense::media::partial::span_held(&plan.partial_dir, 0) {
        assert!(std::time::Instant::now() < deadline, "the run never claimed span 0");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut helper = spawn_helper(&plan, 0).await;
    let mut events = Vec::new();
    assert_eq!(drain(&mut helper, &mut events).await, ChildEnd::Nothing, "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, Event::SpanStarted { .. })), "{events:?}");
    assert_eq!(drain(&mut owner, &mut owner_events).await, ChildEnd::Completed, "{owner_events:?}");
}

#[actix_web::test]
async fn a_second_helper_on_a_span_the_first_left_part_of_writes_new_files_never_over_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let (src, plan) = helped_plan(dir.path());
    let source_info = probe(&src).unwrap();
    // A first helper on span 3 is paused after a few frames: its part is recorded.
    let (mut owner, mut owner_events) = start_run(&plan).await;
    let mut first = spawn_helper(&plan, 3).await;
    let mut first_events = Vec::new();
    while let Some(e) = first.events.recv().await {
        let going = matches!(e, Event::Progress { frame, .. } if frame >= 5);
        first_events.push(e);
        if going {
            first.pause();
        }
    }
    assert_eq!(first.wait().await, ChildEnd::Paused, "{first_events:?}");
    owner.pause();
    assert_eq!(drain(&mut owner, &mut owner_events).await, ChildEnd::Paused, "{owner_events:?}");

    // The resumed run takes that part in; a second helper then takes the rest of span 3.
    let (mut owner, mut owner_events) = start_run(&plan).await;
    let PartialState::Valid(taken) = inspect(&plan) else { panic!("no manifest") };
    let first_files: Vec<String> =
        taken.segments.iter().filter(|s| s.file.starts_with("span-00003-")).map(|s| s.file.clone()).collect();
    assert!(!first_files.is_empty(), "the first helper's part was not taken in: {:?}", taken.segments);
    let sizes: Vec<u64> =
        first_files.iter().map(|f| std::fs::metadata(plan.partial_dir.join(f)).unwrap().len()).collect();
    let mut second = spawn_helper(&plan, 3).await;
    let mut second_events = Vec::new();
    assert_eq!(drain(&mut second, &mut second_events).await, ChildEnd::Completed, "{second_events:?}");
    assert!(second_events.contains(&Event::SpanStarted { span: 3 }), "{second_events:?}");
    // The first helper's files are as they were taken in.
    let now: Vec<u64> =
        first_files.iter().map(|f| std::fs::metadata(plan.partial_dir.join(f)).unwrap().len()).collect();
    assert_eq!(now, sizes, "a taken-in segment of {first_files:?} was written over");

    assert_eq!(drain(&mut owner, &mut owner_events).await, ChildEnd::Completed, "{owner_events:?}");
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("no manifest") };
    let mut files: Vec<&str> = manifest.segments.iter().map(|s| s.file.as_str()).filter(|f| !f.is_empty()).collect();
    let all = files.len();
    files.sort_unstable();
    files.dedup();
    assert_eq!(files.len(), all, "two segments share a file: {:?}", manifest.segments);
    verify(&plan.output_path(), &src, &source_info, "hevc").unwrap();
    assert_eq!(crate::common::shim::video_frames(&plan.output_path()), 200);
}

/// A batch probe answers for every file, in order. A child that stops answering (stopped
/// with SIGSTOP: a hang) is killed after the time allowed per file, one that dies (SIGKILL:
/// a crash) is noticed at once; either way the file it was on is left unknown (its job's
/// own analysis tells) and the rest of the batch goes to a new child. Without a program to
/// run, every file is left unknown.
#[tokio::test]
async fn a_batch_probe_survives_a_child_that_hangs_or_dies() {
    use condense::media::worker::probe_batch;
    let dir = tempfile::tempdir().unwrap();
    let first = clips::hevc(dir.path(), "clip_000.mkv");
    let mut paths = vec![first.clone()];
    for i in 1..400 {
        let copy = dir.path().join(format!("clip_{i:03}.mkv"));
        std::fs::copy(&first, &copy).unwrap();
        paths.push(copy);
    }
    paths.push(dir.path().join("missing.mkv"));
    let per_file = std::time::Duration::from_secs(2);
    for signal in [libc::SIGSTOP, libc::SIGKILL] {
        // Signals the first child of the batch once it runs, and no other.
        let stopper = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while std::time::Instant::now() < deadline {
                if let Some(&pid) = crate::common::server::own_children(b"media").first() {
                    unsafe { libc::kill(pid, signal) };
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        let results = probe_batch(media_binary(), &paths, per_file).await;
        stopper.join().unwrap();
        assert_eq!(results.len(), paths.len());
        let unknown: Vec<usize> = (0..results.len()).filter(|&i| results[i].is_none()).collect();
        assert_eq!(unknown.len(), 1, "signal {signal}: unknown {unknown:?}");
        for (i, result) in results.iter().enumerate().take(400) {
            if let Some(result) = result {
                assert_eq!(result.as_ref().unwrap().video().unwrap().codec, "hevc", "file {i}");
            }
        }
        assert!(matches!(results.last(), Some(Some(Err(_)))), "{:?}", results.last());
    }

    let nowhere = probe_batch(Path::new("/nonexistent/condense-media"), &paths, per_file).await;
    assert_eq!(nowhere.len(), paths.len());
    assert!(nowhere.iter().all(Option::is_none));
}

/// Issue 39, "download ahead": an MP4 written without faststart (its sample tables after the
/// media) is opened and probed through the growing reader while the copy holds only the
/// first half of the file, its end fetched first; once the rest arrives every packet reads
/// as from the whole file, in order. Another thread writes the copy (as the node's
/// download does).
#[test]
fn an_mp4_with_its_index_at_the_end_opens_from_its_end_and_reads_as_the_copy_arrives() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let whole_path = clips::h264(dir.path(), "clip.mp4", "320x240", 4);
    let whole = std::fs::read(&whole_path).unwrap();
    let size = whole.len() as u64;
    let from = size - condense::domain::transfer::tail_bytes(size).min(size / 4);
    std::fs::write(dir.path().join("source.tail"), &whole[from as usize..]).unwrap();
    let copy = dir.path().join("input.mp4");
    std::fs::write(&copy, b"").unwrap();
    let growing = GrowingSource { path: copy.clone(), size, tail: dir.path().join("source.tail"), tail_from: from };
    condense_media::growing::expect(&growing);

    // The first half now, the rest once the open is done (or after 60 s, so that a reader
    // that waits for it fails the assertion below instead of hanging).
    let half = whole.len() / 2;
    let mut writer = std::fs::OpenOptions::new().append(true).open(&copy).unwrap();
    writer.write_all(&whole[..half]).unwrap();
    let opened = Arc::new(AtomicBool::new(false));
    let (flag, rest) = (opened.clone(), whole[half..].to_vec());
    let feeder = std::thread::spawn(move || {
        let since = std::time::Instant::now();
        while !flag.load(Ordering::SeqCst) && since.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let early = flag.load(Ordering::SeqCst);
        for part in rest.chunks(64 * 1024) {
            writer.write_all(part).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        early
    });
    let info = probe(&copy).unwrap();
    let mut input = condense_media::probe::open_input(&copy).unwrap();
    opened.store(true, Ordering::SeqCst);
    assert_eq!(info.size_bytes, size);
    let expected = probe(&whole_path).unwrap();
    assert_eq!(info.duration_seconds, expected.duration_seconds);
    assert_eq!(info.video().unwrap().width, Some(320));

    let packets = |input: &mut condense_media::growing::Input| {
        let mut all = Vec::new();
        while let Some(p) = condense_media::probe::read_packet(input, "clip").unwrap() {
            all.push((p.stream_index, p.pts, p.size));
        }
        all
    };
    let read = packets(&mut input);
    assert!(feeder.join().unwrap(), "the copy was opened only once it was whole");
    let mut original = condense_media::probe::open_input(&whole_path).unwrap();
    assert_eq!(read, packets(&mut original));
    assert!(!read.is_empty());
}
