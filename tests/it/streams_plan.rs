//! A stream plan carried out in the mux's one pass (issue 37): audio dropped, converted
//! (DTS 5.1 to AAC 5.1) and added (a stereo downmix), the other streams in the planned order
//! with the planned tags. The clip is made with the ffmpeg program (DTS by its experimental
//! `dca` encoder), encoded through the real transcoder child, and read with ffprobe.

use condense::media::plan::EncodePlan;
use condense::media::stream_plan::{Fate, PlannedStream, StreamPlan};
use condense::media::transcoder::ChildEnd;
use condense_media::probe::probe;
use condense_media::verify::verify_planned;
use serde_json::Value;

use crate::common::media as clips;
use crate::common::streams::{acceptance_clip, ffprobe_streams, path_arg};

fn planned(source_index: usize, fate: Fate, kind: &str, codec: &str, language: &str) -> PlannedStream {
    PlannedStream {
        source_index,
        fate,
        kind: kind.to_string(),
        codec: codec.to_string(),
        language: Some(language.to_string()),
        title: None,
        dispositions: Vec::new(),
        channels: None,
        bit_rate: None,
        rule: String::new(),
    }
}

#[actix_web::test]
async fn the_plan_drops_converts_and_adds_audio_in_the_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let src = acceptance_clip(dir.path(), "film.mkv");
    let info = probe(&src).unwrap();
    let mut plan = EncodePlan::new(&src, &info, &clips::profile("libx265", 30, "ultrafast")).unwrap();
    let mut eng = planned(1, Fate::Convert, "audio", "aac", "eng");
    eng.dispositions = vec!["default".into()];
    eng.bit_rate = Some(6 * 128_000);
    let mut stereo = planned(1, Fate::Add, "audio", "aac", "eng");
    stereo.dispositions = vec!["default".into()];
    stereo.bit_rate = Some(2 * 128_000);
    plan.streams = Some(StreamPlan {
        streams: vec![
            PlannedStream { language: None, ..planned(0, Fate::Encode, "video", "hevc", "") },
            eng,
            stereo,
            planned(2, Fate::Copy, "audio", "aac", "deu"),
            planned(3, Fate::Drop, "audio", "aac", "fra"),
            planned(4, Fate::Drop, "audio", "aac", "eng"),
            planned(5, Fate::Copy, "subtitle", "subrip", "eng"),
            planned(6, Fate::Drop, "subtitle", "subrip", "fra"),
        ],
        container: "mkv".into(),
        video_size: None,
        refused: None,
        notes: Vec::new(),
    });
    let (end, events) = crate::common::transcoder::run(&plan).await;
    assert!(matches!(end, ChildEnd::Completed), "{end:?} {events:?}");
    let got = ffprobe_streams(&plan.output_path());
    let summary: Vec<(String, String, Option<u64>, String, i64)> = got
        .iter()
        .map(|s| {
            (
                s["codec_type"].as_str().unwrap().to_string(),
                s["codec_name"].as_str().unwrap().to_string(),
                s["channels"].as_u64(),
                s["tags"]["language"].as_str().unwrap_or("").to_string(),
                s["disposition"]["default"].as_i64().unwrap(),
            )
        })
        .collect();
    let row = |t: &str, c: &str, ch: Option<u64>, l: &str, d: i64| (t.to_string(), c.to_string(), ch, l.to_string(), d);
    assert_eq!(
        summary,
        [
            row("video", "hevc", None, "", 0),
            row("audio", "aac", Some(6), "eng", 1),
            row("audio", "aac", Some(2), "eng", 0),
            row("audio", "aac", Some(1), "deu", 0),
            row("subtitle", "subrip", None, "eng", 0),
        ],
        "{got:#?}"
    );
    // The converted track lasts as long as the source's, within one AAC frame.
    let seconds = |s: &Value| {
        s["tags"]["DURATION"].as_str().map(|d| {
            let parts: Vec<f64> = d.split(':').map(|p| p.parse().unwrap()).collect();
            parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
        })
    };
    let source = ffprobe_streams(&src);
    let (want, have) = (seconds(&source[1]).unwrap(), seconds(&got[1]).unwrap());
    assert!((want - have).abs() <= 1024.0 / 48000.0 + 0.001, "{want} vs {have}");

    // Verification checks the output against the plan, not the source's streams.
    let stream_plan = plan.streams.as_ref().unwrap();
    verify_planned(&plan.output_path(), &src, &info, "hevc", Some(stream_plan)).unwrap();
    let err = condense_media::verify::verify(&plan.output_path(), &src, &info, "hevc").unwrap_err();
    assert!(err.message.contains("streams"), "{err}");

    // An output without the German track is refused, naming what the plan has.
    let short = dir.path().join("short.mkv");
    #[rustfmt::skip]
    clips::ffmpeg(&[
        "-i", path_arg(&plan.output_path()), "-map", "0", "-map", "-0:3", "-c", "copy", path_arg(&short),
    ]);
    let err = verify_planned(&short, &src, &info, "hevc", Some(stream_plan)).unwrap_err();
    assert!(err.message.contains("4 streams") && err.message.contains("the plan has 5"), "{err}");
    // And one whose stereo track is marked default, against the plan.
    let defaulted = dir.path().join("defaulted.mkv");
    #[rustfmt::skip]
    clips::ffmpeg(&[
        "-i", path_arg(&plan.output_path()), "-map", "0", "-c", "copy", "-disposition:a:1", "default",
        path_arg(&defaulted),
    ]);
    let err = verify_planned(&defaulted, &src, &info, "hevc", Some(stream_plan)).unwrap_err();
    assert!(err.message.contains("dispositions"), "{err}");
}

/// The same plan to MP4: SubRip, which MP4 cannot hold, converted to `mov_text`; the SubRip
/// stream is not refused, since it is not stored as it is.
#[actix_web::test]
async fn the_plan_to_mp4_converts_text_subtitles_to_mov_text() {
    let dir = tempfile::tempdir().unwrap();
    let src = acceptance_clip(dir.path(), "film.mkv");
    let info = probe(&src).unwrap();
    let mut plan = EncodePlan::new(&src, &info, &clips::profile("libx265", 30, "ultrafast")).unwrap();
    plan.output_extension = "mp4".into();
    let mut eng = planned(1, Fate::Convert, "audio", "aac", "eng");
    eng.dispositions = vec!["default".into()];
    let mut video = PlannedStream { language: None, ..planned(0, Fate::Encode, "video", "hevc", "") };
    // MP4 marks the first track of each kind enabled, which reads back as default.
    video.dispositions = vec!["default".into()];
    let mut subs = planned(5, Fate::Convert, "subtitle", "mov_text", "eng");
    subs.dispositions = vec!["default".into()];
    plan.streams = Some(StreamPlan {
        streams: vec![
            video,
            eng,
            planned(1, Fate::Add, "audio", "aac", "eng"),
            planned(2, Fate::Copy, "audio", "aac", "deu"),
            planned(3, Fate::Drop, "audio", "aac", "fra"),
            planned(4, Fate::Drop, "audio", "aac", "eng"),
            subs,
            planned(6, Fate::Drop, "subtitle", "subrip", "fra"),
        ],
        container: "mp4".into(),
        video_size: None,
        refused: None,
        notes: Vec::new(),
    });
    let (end, events) = crate::common::transcoder::run(&plan).await;
    assert!(matches!(end, ChildEnd::Completed), "{end:?} {events:?}");
    let out = plan.output_path();
    assert_eq!(out.extension().unwrap(), "mp4");
    let got = ffprobe_streams(&out);
    let codecs: Vec<(&str, Option<u64>, &str)> = got
        .iter()
        .map(|s| {
            (s["codec_name"].as_str().unwrap(), s["channels"].as_u64(), s["tags"]["language"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(
        codecs,
        [
            ("hevc", None, "und"),
            ("aac", Some(6), "eng"),
            ("aac", Some(2), "eng"),
            ("aac", Some(1), "deu"),
            ("mov_text", None, "eng")
        ],
        "{got:#?}"
    );
    verify_planned(&out, &src, &info, "hevc", plan.streams.as_ref()).unwrap();
}
