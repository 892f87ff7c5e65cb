//! Media fidelity: HDR10+ dynamic metadata and Dolby Vision RPUs carried frame by frame
//! through HEVC encodes (segments, pause and resume, parallel sessions), checked by FFmpeg's
//! decoder; Dolby Vision kept as profile 8.1 or converted to HDR10.

use std::path::Path;

use condense::domain::segments::Sessions;
use condense::media::event::Event;
use condense::media::info::HdrKind;
use condense::media::plan::EncodePlan;
use condense::media::transcoder::ChildEnd;
use condense_media::probe::probe;
use condense_media::verify::verify;

use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use serde_json::json;

use crate::common::api::TestServer;
use crate::common::db::TestDb;
use crate::common::media as clips;
use crate::common::transcoder::{drain, run, run_until_paused, spawn_helper, start_run};

/// Each frame's HDR10+ metadata as FFmpeg's decoder gives it (ffprobe's `-show_frames`,
/// which prints every field of the side data), in presentation order.
fn dynamic_metadata(path: &Path) -> Vec<Option<String>> {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_frames", "-show_entries"])
        .args(["frame=pts:frame_side_data", "-of", "json"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut frames: Vec<(i64, Option<String>)> = json["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let meta = f["side_data_list"].as_array().and_then(|list| {
                list.iter()
                    .find(|s| s["side_data_type"].as_str().is_some_and(|t| t.contains("HDR10+")))
                    .map(ToString::to_string)
            });
            (f["pts"].as_i64().unwrap_or(0), meta)
        })
        .collect();
    frames.sort_by_key(|(pts, _)| *pts);
    frames.into_iter().map(|(_, m)| m).collect()
}

/// A copy of `path` (beside it) with its NAL units of `nal_type` taken out by FFmpeg's
/// `filter_units` bitstream filter, the container's stream facts kept.
fn without_units(path: &Path, nal_type: u8) -> std::path::PathBuf {
    let out = path.with_file_name(format!("without-{nal_type}.mkv"));
    let filter = format!("filter_units=remove_types={nal_type}");
    clips::ffmpeg(&["-i", path.to_str().unwrap(), "-c", "copy", "-bsf:v", &filter, out.to_str().unwrap()]);
    out
}

fn plan_for(source: &Path) -> EncodePlan {
    let info = probe(source).unwrap();
    let mut plan = EncodePlan::new(source, &info, &clips::profile("libx265", 30, "ultrafast")).unwrap();
    plan.segment_seconds = 2.0;
    plan
}

/// The source's frames all carry metadata, not all the same.
fn assert_source(src: &Path, frames: usize) -> Vec<Option<String>> {
    let info = probe(src).unwrap();
    assert_eq!(info.hdr.kind, HdrKind::Hdr10Plus, "{:?}", info.hdr);
    let meta = dynamic_metadata(src);
    assert_eq!(meta.len(), frames);
    assert!(meta.iter().all(Option::is_some), "a source frame without HDR10+");
    let distinct: std::collections::HashSet<&Option<String>> = meta.iter().collect();
    assert_eq!(distinct.len(), frames, "frames of the source share values");
    meta
}

#[actix_web::test]
async fn hdr10plus_is_carried_on_every_frame_in_two_second_segments_and_with_two_sessions() {
    let dir = tempfile::tempdir().unwrap();
    for sessions in [Sessions::ONE, Sessions { sessions: 2, threads: 1 }] {
        let src = clips::hdr10plus(dir.path(), &format!("plus-{}.mkv", sessions.sessions), 6, 0);
        let want = assert_source(&src, 150);
        let mut plan = plan_for(&src);
        assert_eq!(plan.hdr, HdrKind::Hdr10Plus);
        plan.sessions = sessions;
        // Slowed so that progress is reported while both sessions work.
        plan.throttle_ms_per_frame = 10;
        let (end, events) = run(&plan).await;
        assert_eq!(end, ChildEnd::Completed, "{events:?}");
        let most = events
            .iter()
            .filter_map(|e| if let Event::Progress { sessions, .. } = e { Some(*sessions) } else { None })
            .max();
        assert_eq!(most, Some(sessions.sessions), "{events:?}");
        let out = plan.output_path();
        let info = verify(&out, &src, &probe(&src).unwrap(), "hevc").unwrap();
        assert_eq!(info.hdr.kind, HdrKind::Hdr10Plus);
        assert_eq!(dynamic_metadata(&out), want, "{} session(s): the output's metadata differs", sessions.sessions);
    }
}

#[actix_web::test]
async fn hdr10plus_survives_a_pause_and_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::hdr10plus(dir.path(), "paused.mkv", 6, 0);
    let want = assert_source(&src, 150);
    let mut plan = plan_for(&src);
    plan.throttle_ms_per_frame = 15;
    run_until_paused(&plan, |e| matches!(e, Event::Progress { percent, .. } if *percent >= 40.0)).await;
    plan.throttle_ms_per_frame = 0;
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    let resumed =
        events.iter().any(|e| matches!(e, Event::Started { resume_after_frames, .. } if *resume_after_frames > 0));
    assert!(resumed, "the second run did not resume: {events:?}");
    verify(&plan.output_path(), &src, &probe(&src).unwrap(), "hevc").unwrap();
    assert_eq!(dynamic_metadata(&plan.output_path()), want);
}

#[actix_web::test]
async fn hdr10plus_is_carried_by_a_helper_encoding_a_span_beside_the_run() {
    // 8 s in 4 spans of 2 s; a helper process (as another node's idle slot runs one) takes
    // the last span while the run encodes the others.
    let dir = tempfile::tempdir().unwrap();
    let src = clips::hdr10plus(dir.path(), "helped.mkv", 8, 0);
    let want = assert_source(&src, 200);
    let mut plan = plan_for(&src);
    plan.sessions = Sessions { sessions: 2, threads: 1 };
    plan.throttle_ms_per_frame = 25;
    let (mut owner, mut owner_events) = start_run(&plan).await;
    let mut helper = spawn_helper(&plan, 3).await;
    let mut helper_events = Vec::new();
    assert_eq!(drain(&mut helper, &mut helper_events).await, ChildEnd::Completed, "{helper_events:?}");
    assert!(helper_events.contains(&Event::SpanStarted { span: 3 }), "{helper_events:?}");
    assert_eq!(drain(&mut owner, &mut owner_events).await, ChildEnd::Completed, "{owner_events:?}");
    assert!(!owner_events.contains(&Event::SpanStarted { span: 3 }), "the run encoded the helper's span too");
    verify(&plan.output_path(), &src, &probe(&src).unwrap(), "hevc").unwrap();
    assert_eq!(dynamic_metadata(&plan.output_path()), want);
}

#[actix_web::test]
async fn verification_refuses_an_hevc_output_that_lost_or_moved_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::hdr10plus(dir.path(), "src.mkv", 2, 0);
    let info = probe(&src).unwrap();
    let plan = plan_for(&src);
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    let out = plan.output_path();
    verify(&out, &src, &info, "hevc").unwrap();
    // The same encode with its SEI units taken out.
    let stripped = without_units(&out, 39);
    assert!(dynamic_metadata(&stripped).iter().all(Option::is_none));
    let err = verify(&stripped, &src, &info, "hevc").unwrap_err();
    assert!(err.message.contains("lost its HDR10+ metadata"), "{}", err.message);
    // A source whose frames carry other values (each frame its neighbour's): the output
    // of the first one does not match it, from its first frame.
    let shifted = clips::hdr10plus(dir.path(), "shifted.mkv", 2, 1);
    let err = verify(&out, &shifted, &probe(&shifted).unwrap(), "hevc").unwrap_err();
    assert!(err.message.contains("frame 0 carries HDR10+ metadata other than"), "{}", err.message);
}

/// Each frame's Dolby Vision RPU as FFmpeg's HEVC decoder attaches it to the frame it
/// belongs to (`AV_FRAME_DATA_DOVI_RPU_BUFFER`), in presentation order.
fn rpus_by_frame(path: &Path) -> Vec<Option<Vec<u8>>> {
    let mut input = condense_media::probe::open_input(path).unwrap();
    let vi = condense_media::decode::main_video_index(&input).unwrap();
    let mut decoder = condense_media::decode::open_decoder(&input, vi).unwrap();
    let mut frames = Vec::new();
    let mut take = |decoder: &mut rsmpeg::avcodec::AVCodecContext| loop {
        match decoder.receive_frame() {
            Ok(frame) => frames.push(unsafe {
                let sd =
                    ffi::av_frame_get_side_data(frame.as_ptr(), ffi::AVFrameSideDataType_AV_FRAME_DATA_DOVI_RPU_BUFFER);
                sd.as_ref().map(|sd| std::slice::from_raw_parts(sd.data, sd.size).to_vec())
            }),
            Err(RsmpegError::DecoderDrainError | RsmpegError::DecoderFlushedError) => break,
            Err(e) => panic!("decoding {}: {e}", path.display()),
        }
    };
    while let Some(packet) = input.read_packet().unwrap() {
        if packet.stream_index as usize == vi {
            decoder.send_packet(Some(&packet)).unwrap();
            take(&mut decoder);
        }
    }
    decoder.send_packet(None).unwrap();
    take(&mut decoder);
    frames
}

/// A profile 8.1 source's frames each carry an RPU, every one its own.
fn assert_dolby_vision_source(src: &Path, frames: usize) -> Vec<Option<Vec<u8>>> {
    let info = probe(src).unwrap();
    assert_eq!(info.hdr.kind, HdrKind::DolbyVision, "{:?}", info.hdr);
    let dv = info.hdr.dolby_vision.unwrap();
    assert_eq!((dv.profile, dv.bl_compatibility_id), (8, 1));
    let rpus = rpus_by_frame(src);
    assert_eq!(rpus.len(), frames);
    assert!(rpus.iter().all(Option::is_some), "a source frame without an RPU");
    let distinct: std::collections::HashSet<&Option<Vec<u8>>> = rpus.iter().collect();
    assert_eq!(distinct.len(), frames, "frames of the source share an RPU");
    rpus
}

#[actix_web::test]
async fn dolby_vision_kept_carries_every_rpu_as_profile_8_1_and_without_keep_becomes_hdr10() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::dolby_vision(dir.path(), "dv.mkv", 4);
    let want = assert_dolby_vision_source(&src, 100);
    let info = probe(&src).unwrap();

    // Kept, with two sessions on 2 s spans.
    let mut plan = plan_for(&src);
    assert_eq!(plan.hdr, HdrKind::Hdr10, "converted unless the library keeps it");
    assert!(plan.keep_dolby_vision(&info));
    assert_eq!(plan.hdr, HdrKind::DolbyVision);
    plan.sessions = Sessions { sessions: 2, threads: 1 };
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    let out = plan.output_path();
    let kept = verify(&out, &src, &info, "hevc").unwrap();
    assert_eq!(kept.hdr.kind, HdrKind::DolbyVision);
    let dv = kept.hdr.dolby_vision.unwrap();
    assert_eq!((dv.profile, dv.bl_compatibility_id, dv.rpu_present, dv.el_present), (8, 1, true, false), "{dv:?}");
    assert!(kept.hdr.mastering_display.is_some() && kept.hdr.content_light.is_some(), "{:?}", kept.hdr);
    assert_eq!(rpus_by_frame(&out), want, "the output's RPUs differ from the source's");

    // The same output with its RPUs taken out (FFmpeg's filter_units) still says Dolby
    // Vision: verification refuses it.
    let stripped = without_units(&out, 62);
    assert_eq!(probe(&stripped).unwrap().hdr.kind, HdrKind::DolbyVision);
    let err = verify(&stripped, &src, &info, "hevc").unwrap_err();
    assert!(err.message.contains("lost its Dolby Vision RPU"), "{}", err.message);
    std::fs::remove_dir_all(&plan.partial_dir).unwrap();

    // Not kept: HDR10 of the base layer, static metadata kept, no RPU.
    let plan = plan_for(&src);
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    let out = plan.output_path();
    let hdr10 = verify(&out, &src, &info, "hevc").unwrap();
    assert_eq!((hdr10.hdr.kind, hdr10.hdr.dolby_vision), (HdrKind::Hdr10, None), "{:?}", hdr10.hdr);
    assert!(hdr10.hdr.mastering_display.is_some() && hdr10.hdr.content_light.is_some(), "{:?}", hdr10.hdr);
    assert!(rpus_by_frame(&out).iter().all(Option::is_none), "an RPU in an HDR10 output");

    // AV1 cannot keep it.
    let mut av1 = EncodePlan::new(&src, &info, &clips::profile("libsvtav1", 40, "12")).unwrap();
    assert!(!av1.keep_dolby_vision(&info));
    assert_eq!(av1.hdr, HdrKind::Hdr10);
}

#[actix_web::test]
async fn a_library_keeping_dolby_vision_replaces_the_original_with_profile_8_1_and_av1_libraries_cannot_ask() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let (status, refused) = server
        .post(
            "/libraries",
            Some(&token),
            &json!({"name": "av1", "paths": [dir.path()], "targetCodec": "av1", "keepDolbyVision": true}),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("keepDolbyVision needs targetCodec hevc"),
        "{refused}"
    );

    let src = clips::dolby_vision(dir.path(), "dv.mkv", 2);
    let want = rpus_by_frame(&src);
    let body = json!({"name": "dv", "paths": [dir.path()], "encoder": "libx265", "quality": 30, "preset": "ultrafast",
        "watch": false, "keepDolbyVision": true});
    let (status, library) = server.post("/libraries", Some(&token), &body).await;
    assert_eq!((status, &library["keepDolbyVision"]), (201, &json!(true)), "{library}");
    let id = library["id"].as_i64().unwrap();
    let (status, changed) = server
        .put(
            &format!("/libraries/{id}"),
            Some(&token),
            &json!({"targetCodec": "av1", "encoder": "libsvtav1", "quality": 35}),
        )
        .await;
    assert_eq!(status, 422, "a library keeping Dolby Vision cannot move to AV1: {changed}");
    server.post(&format!("/libraries/{id}/scan"), Some(&token), &json!({})).await;
    // An HEVC source is skipped until forced.
    let job = server.the_job_once(&token, &["SKIPPED", "COMPLETED", "FAILED"]).await;
    assert_eq!(job["status"], "SKIPPED", "{job:#}");
    let (status, forced) = server.post(&format!("/jobs/{}/force", job["id"]), Some(&token), &json!({})).await;
    assert_eq!(status, 200, "{forced}");
    let job = server.the_job_once(&token, &["COMPLETED", "FAILED"]).await;
    assert_eq!(job["status"], "COMPLETED", "{job:#}");
    let output = std::path::PathBuf::from(job["filePath"].as_str().unwrap());
    let info = probe(&output).unwrap();
    assert_eq!(info.video().unwrap().codec, "hevc");
    let dv = info.hdr.dolby_vision.expect("the replaced file says Dolby Vision");
    assert_eq!((dv.profile, dv.bl_compatibility_id), (8, 1));
    assert_eq!(rpus_by_frame(&output), want);
    server.finish().await;
}
