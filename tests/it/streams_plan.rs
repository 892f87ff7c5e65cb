//! Issue 37's acceptance: a library's stream rules made into a plan (`plan_streams`, as
//! analysis makes it) and carried out in the one pass: the video scaled to `maxHeight`, audio
//! dropped, converted (DTS 5.1 to AAC 5.1) and added (a stereo downmix), subtitles dropped or
//! converted to `mov_text`, the rest in the planned order with the planned tags. The clips
//! are made with the ffmpeg program (DTS by its experimental `dca` encoder), encoded through
//! the real transcoder child, read with ffprobe and verified against the plan.

use std::path::{Path, PathBuf};

use condense::domain::segments::Sessions;
use condense::domain::stream_rules::{AudioCodec, ContainerRule, StreamRules};
use condense::media::info::MediaInfo;
use condense::media::plan::{EncodePlan, QualitySearch};
use condense::media::quality::{SearchResult, VmafScore, Window};
use condense::media::stream_plan::{plan_streams, StreamPlan, VideoSize};
use condense::media::transcoder::ChildEnd;
use condense_media::probe::probe;
use condense_media::verify::verify_planned;
use serde_json::Value;

use crate::common::media as clips;
use crate::common::streams::{ffprobe_streams, path_arg, streams_clip, with_image_subtitle};

/// Video 1920x1080 (a keyframe every second, so two sessions share it), English DTS 5.1,
/// German, French and English commentary AAC, English and French SRT, and a VobSub image
/// subtitle in `image_language`, 2 s in MKV. The image subtitle is written by hand
/// (`with_image_subtitle`): FFmpeg encodes bitmap subtitles only from bitmap subtitles
/// (`-c:s dvdsub` from SubRip is refused: "Subtitle encoding currently only possible from
/// text to text or bitmap to bitmap").
fn acceptance_clip(dir: &Path, image_language: &str) -> PathBuf {
    let plain = streams_clip(dir, "plain.mkv", "1920x1080", &["-g", "25"]);
    let src = dir.join("film.mkv");
    with_image_subtitle(&plain, &src, image_language);
    std::fs::remove_file(&plain).unwrap();
    src
}

/// The acceptance's library: English and German audio, commentary dropped, DTS (and the
/// other bulky codecs) to AAC, a stereo track added, English subtitles, at most 720 lines.
fn acceptance_rules(container: ContainerRule) -> StreamRules {
    StreamRules {
        audio_languages: vec!["eng".into(), "deu".into()],
        drop_commentary: true,
        audio_codec: AudioCodec::Aac,
        add_stereo: true,
        subtitle_languages: vec!["eng".into()],
        max_height: Some(720),
        container,
        ..StreamRules::default()
    }
}

/// The plan `rules` make for `src` (as analysis makes it), encoded by the real transcoder
/// child with libx265 on `sessions` sessions of 1 s segments.
async fn encode_by_rules(src: &Path, rules: &StreamRules, sessions: u32) -> (EncodePlan, MediaInfo) {
    let info = probe(src).unwrap();
    let mut plan = EncodePlan::new(src, &info, &clips::profile("libx265", 30, "ultrafast")).unwrap();
    let streams = plan_streams(&info, rules, &plan.output_extension);
    assert_eq!(streams.refused, None, "{streams:#?}");
    plan.output_extension = streams.container.clone();
    plan.streams = Some(streams);
    plan.sessions = Sessions { sessions, threads: 1 };
    plan.segment_seconds = 1.0;
    let (end, events) = crate::common::transcoder::run(&plan).await;
    assert!(matches!(end, ChildEnd::Completed), "{end:?} {events:?}");
    (plan, info)
}

/// Each output stream as ffprobe reads it: kind, codec, channels, language,
/// title, default and comment flags, and the video's size and aspect ratios.
fn summary(streams: &[Value]) -> Vec<String> {
    streams
        .iter()
        .map(|s| {
            let text = |v: &Value| v.as_str().map(str::to_string).unwrap_or_default();
            let mut row = format!(
                "{} {} lang={} title={} default={} comment={}",
                text(&s["codec_type"]),
                text(&s["codec_name"]),
                text(&s["tags"]["language"]),
                text(&s["tags"]["title"]),
                s["disposition"]["default"],
                s["disposition"]["comment"],
            );
            if let Some(channels) = s["channels"].as_u64() {
                row.push_str(&format!(" channels={channels}"));
            }
            if s["codec_type"] == "video" {
                row.push_str(&format!(
                    " {}x{} sar={} dar={}",
                    s["width"],
                    s["height"],
                    text(&s["sample_aspect_ratio"]),
                    text(&s["display_aspect_ratio"])
                ));
            }
            row
        })
        .collect()
}

#[actix_web::test]
async fn the_acceptance_library_makes_720p_hevc_with_english_and_german_aac_and_english_srt() {
    let dir = tempfile::tempdir().unwrap();
    // The image subtitle is German: `subtitleLanguages eng` drops it.
    let src = acceptance_clip(dir.path(), "deu");
    let codecs: Vec<Value> = ffprobe_streams(&src).iter().map(|s| s["codec_name"].clone()).collect();
    assert_eq!(codecs[1], "dts");
    assert_eq!(codecs[7], "dvd_subtitle", "{codecs:?}");
    // Two sessions: the spans are scaled by each one's own encoder session.
    let (plan, info) = encode_by_rules(&src, &acceptance_rules(ContainerRule::Keep), 2).await;
    let stream_plan = plan.streams.as_ref().unwrap();
    assert_eq!(stream_plan.video_size, Some(VideoSize { width: 1280, height: 720 }));
    let got = ffprobe_streams(&plan.output_path());
    assert_eq!(
        summary(&got),
        [
            "video hevc lang= title= default=0 comment=0 1280x720 sar=1:1 dar=16:9",
            "audio aac lang=eng title= default=1 comment=0 channels=6",
            "audio aac lang=eng title=Stereo default=0 comment=0 channels=2",
            "audio aac lang=deu title= default=0 comment=0 channels=1",
            "subtitle subrip lang=eng title= default=0 comment=0",
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
    // Every source frame is there, scaled.
    let frames = |p: &Path| {
        let out = std::process::Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries"])
            .args(["stream=nb_read_frames", "-of", "csv=p=0"])
            .arg(p)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(frames(&plan.output_path()), frames(&src));
    assert_eq!(frames(&src), "50");

    // Verification checks the output against the plan, not the source's streams.
    verify_planned(&plan.output_path(), &src, &info, "hevc", Some(stream_plan)).unwrap();
    let err = condense_media::verify::verify(&plan.output_path(), &src, &info, "hevc").unwrap_err();
    assert!(err.message.contains("1280x720") && err.message.contains("1920x1080"), "{err}");
    // A size other than the plan's is refused, naming both.
    let other = StreamPlan { video_size: Some(VideoSize { width: 960, height: 540 }), ..stream_plan.clone() };
    let err = verify_planned(&plan.output_path(), &src, &info, "hevc", Some(&other)).unwrap_err();
    assert!(err.message.contains("1280x720, the plan's size is 960x540"), "{err}");
    let unscaled = StreamPlan { video_size: None, ..stream_plan.clone() };
    let err = verify_planned(&plan.output_path(), &src, &info, "hevc", Some(&unscaled)).unwrap_err();
    assert!(err.message.contains("1280x720, the source's size is 1920x1080"), "{err}");

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

/// The same library with `container: mp4`: SubRip, which MP4 cannot hold, converted to
/// `mov_text`; the SubRip stream is not refused, since it is not stored as it is.
#[actix_web::test]
async fn the_acceptance_library_to_mp4_converts_text_subtitles_to_mov_text() {
    let dir = tempfile::tempdir().unwrap();
    let src = acceptance_clip(dir.path(), "deu");
    let (plan, info) = encode_by_rules(&src, &acceptance_rules(ContainerRule::Mp4), 1).await;
    let out = plan.output_path();
    assert_eq!(out.extension().unwrap(), "mp4");
    let got = ffprobe_streams(&out);
    // MP4 marks the first track of each kind enabled, which reads back as default.
    assert_eq!(
        summary(&got),
        [
            "video hevc lang=und title= default=1 comment=0 1280x720 sar=1:1 dar=16:9",
            "audio aac lang=eng title= default=1 comment=0 channels=6",
            "audio aac lang=eng title= default=0 comment=0 channels=2",
            "audio aac lang=deu title= default=0 comment=0 channels=1",
            "subtitle mov_text lang=eng title= default=1 comment=0",
        ],
        "{got:#?}"
    );
    verify_planned(&out, &src, &info, "hevc", plan.streams.as_ref()).unwrap();

    // An English image subtitle is kept by the same rules, and MP4 cannot hold it: the plan
    // is refused, naming the stream and the way out.
    let english = tempfile::tempdir().unwrap();
    let src = acceptance_clip(english.path(), "eng");
    let info = probe(&src).unwrap();
    let refused = plan_streams(&info, &acceptance_rules(ContainerRule::Mp4), "mkv").refused.unwrap_or_default();
    assert!(refused.contains("dvd_subtitle") && refused.contains("dropImageSubtitles"), "{refused}");
}

/// A file whose only audio is French, under a library keeping English and German: the
/// track stays (a file never loses all its audio), and the plan says why.
#[actix_web::test]
async fn a_file_with_only_french_audio_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("french.mkv");
    #[rustfmt::skip]
    clips::ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "2",
        "-map", "0", "-map", "1", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
        "-metadata:s:a:0", "language=fra", path_arg(&src),
    ]);
    let (plan, info) = encode_by_rules(&src, &acceptance_rules(ContainerRule::Keep), 1).await;
    let stream_plan = plan.streams.as_ref().unwrap();
    assert!(!stream_plan.notes.is_empty(), "{stream_plan:#?}");
    // Shorter than 720 lines: not scaled.
    assert_eq!(stream_plan.video_size, None);
    let got = ffprobe_streams(&plan.output_path());
    assert_eq!(
        summary(&got),
        [
            "video hevc lang= title= default=0 comment=0 320x240 sar=1:1 dar=4:3",
            "audio aac lang=fra title= default=0 comment=0 channels=1",
        ],
        "{got:#?}"
    );
    verify_planned(&plan.output_path(), &src, &info, "hevc", Some(stream_plan)).unwrap();
}

/// A scaled encode is scored at its own size, against the source's frames scaled as the
/// encoder's were (`search::measure`, as the search's samples are): a lossless encode of the
/// source scaled by FFmpeg's Lanczos scaler scores about 100. Scored at the source's size
/// (the output brought back up to 1080 lines), what the scaling took would count against
/// every CRF the search tries.
#[test]
fn a_scaled_encode_is_scored_at_the_output_size_against_a_reference_scaled_alike() {
    let dir = tempfile::tempdir().unwrap();
    let src = clips::h264(dir.path(), "source.mkv", "1920x1080", 1);
    let scaled = dir.path().join("scaled.mkv");
    #[rustfmt::skip]
    clips::ffmpeg(&[
        "-i", path_arg(&src), "-vf", "scale=1280:720:flags=lanczos+accurate_rnd+full_chroma_int",
        "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0", path_arg(&scaled),
    ]);
    let info = probe(&src).unwrap();
    let mut plan = EncodePlan::new(&src, &info, &clips::profile("libx265", 30, "ultrafast")).unwrap();
    let rules = StreamRules { max_height: Some(720), ..StreamRules::default() };
    plan.streams = Some(plan_streams(&info, &rules, "mkv"));
    let result = SearchResult {
        plan_digest: String::new(),
        asked: QualitySearch { target_vmaf: 95.0, max_size_percent: 100 },
        quality: 30,
        met: true,
        vmaf: VmafScore { mean: 0.0, p5: 0.0, frames: 0 },
        percent: 0.0,
        predicted_size: 0,
        predicted_seconds: 0.0,
        probes: Vec::new(),
        // One sample from the start: every frame.
        samples: vec![Window { start: 0.0, length: 1.0 }],
    };
    let score = condense_media::search::measure(&plan, &result, &scaled).unwrap();
    assert_eq!(score.frames, 25);
    assert!(score.mean > 97.0, "{score:?}");
}
