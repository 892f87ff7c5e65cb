//! Media fidelity: HDR10+ dynamic metadata carried frame by frame through HEVC encodes
//! (segments, pause and resume, parallel sessions), checked by FFmpeg's decoder.

use std::path::Path;

use condense::domain::segments::Sessions;
use condense::media::child::{ChildEnd, Transcoder};
use condense::media::encode::Event;
use condense::media::plan::EncodePlan;
use condense::media::probe::{probe, HdrKind};
use condense::media::verify::verify;

use crate::common::media as clips;
use crate::common::server::binary;

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

fn plan_for(source: &Path) -> EncodePlan {
    let info = probe(source).unwrap();
    let mut plan = EncodePlan::new(source, &info, &clips::profile("libx265", 30, "ultrafast")).unwrap();
    plan.segment_seconds = 2.0;
    plan
}

async fn run(plan: &EncodePlan) -> (ChildEnd, Vec<Event>) {
    let mut child = Transcoder::spawn(Path::new(binary()), plan).await.unwrap();
    let mut events = Vec::new();
    while let Some(e) = child.events.recv().await {
        events.push(e);
    }
    (child.wait().await, events)
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
    let mut child = Transcoder::spawn(Path::new(binary()), &plan).await.unwrap();
    while let Some(e) = child.events.recv().await {
        if matches!(e, Event::Progress { percent, .. } if percent >= 40.0) {
            child.pause();
            break;
        }
    }
    while child.events.recv().await.is_some() {}
    assert_eq!(child.wait().await, ChildEnd::Paused);
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
async fn verification_refuses_an_hevc_output_that_lost_or_moved_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::hdr10plus(dir.path(), "src.mkv", 2, 0);
    let info = probe(&src).unwrap();
    let plan = plan_for(&src);
    let (end, events) = run(&plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
    let out = plan.output_path();
    verify(&out, &src, &info, "hevc").unwrap();
    // The same encode with its SEI units taken out (FFmpeg's filter_units bitstream filter).
    let stripped = dir.path().join("stripped.mkv");
    clips::ffmpeg(&[
        "-i",
        out.to_str().unwrap(),
        "-c",
        "copy",
        "-bsf:v",
        "filter_units=remove_types=39",
        stripped.to_str().unwrap(),
    ]);
    assert!(dynamic_metadata(&stripped).iter().all(Option::is_none));
    let err = verify(&stripped, &src, &info, "hevc").unwrap_err();
    assert!(err.message.contains("lost its HDR10+ metadata"), "{}", err.message);
    // A source whose frames carry other values (each frame its neighbour's): the output
    // of the first one does not match it, from its first frame.
    let shifted = clips::hdr10plus(dir.path(), "shifted.mkv", 2, 1);
    let err = verify(&out, &shifted, &probe(&shifted).unwrap(), "hevc").unwrap_err();
    assert!(err.message.contains("frame 0 carries HDR10+ metadata other than"), "{}", err.message);
}
