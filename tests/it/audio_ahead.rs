//! Issue 37's converted audio encoded beside the video (`condense_media::audio_ahead`): the
//! run leaves the planned audio, encoded, in its partial folder, and the mux copies its
//! packets (a file rewritten with packets left out gives an output without them); a file
//! that is truncated or made for another plan is not used (the mux encodes the audio
//! itself, every packet there); a run paused after its first segment and resumed still
//! gives the planned audio. Clips are made at run time, encoded by the real transcoder child.

use std::path::{Path, PathBuf};

use condense::domain::stream_rules::{AudioCodec, StreamRules};
use condense::media::event::Event;
use condense::media::info::MediaInfo;
use condense::media::layout::{AUDIO_FILE, AUDIO_TEMP_FILE};
use condense::media::manifest::{inspect, PartialState};
use condense::media::plan::EncodePlan;
use condense::media::stream_plan::plan_streams;
use condense::media::transcoder::ChildEnd;
use condense_media::audio_ahead::{audio_outputs, key, open_valid, Writer};
use condense_media::probe::probe;
use condense_media::verify::verify_planned;

use crate::common::media as clips;
use crate::common::streams::{ffprobe_streams, path_arg};
use crate::common::transcoder::{run, run_until_paused};

/// 320x240 video (a keyframe every second) with English FLAC 5.1 and German AAC stereo.
fn clip(dir: &Path, seconds: u32) -> PathBuf {
    let src = dir.join("film.mkv");
    let t = seconds.to_string();
    #[rustfmt::skip]
    clips::ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000,aformat=channel_layouts=5.1(side)",
        "-f", "lavfi", "-i", "sine=frequency=550:sample_rate=48000,aformat=channel_layouts=stereo",
        "-t", &t, "-map", "0", "-map", "1", "-map", "2",
        "-c:v", "libx264", "-preset", "ultrafast", "-g", "25",
        "-c:a:0", "flac", "-c:a:1", "aac",
        "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=deu",
        path_arg(&src),
    ]);
    src
}

/// FLAC to AAC (5.1 kept) and a stereo downmix added; the German AAC track is copied.
fn plan_for(src: &Path) -> (EncodePlan, MediaInfo) {
    let info = probe(src).unwrap();
    let mut plan = EncodePlan::new(src, &info, &clips::profile("libx265", 30, "ultrafast")).unwrap();
    let rules = StreamRules { audio_codec: AudioCodec::Aac, add_stereo: true, ..StreamRules::default() };
    let streams = plan_streams(&info, &rules, &plan.output_extension);
    assert_eq!(streams.refused, None, "{streams:#?}");
    plan.output_extension = streams.container.clone();
    plan.streams = Some(streams);
    plan.segment_seconds = 1.0;
    (plan, info)
}

async fn complete(plan: &EncodePlan) {
    let (end, events) = run(plan).await;
    assert_eq!(end, ChildEnd::Completed, "{events:?}");
}

/// The packets of each audio stream of `path`, by ffprobe.
fn audio_packets(path: &Path) -> Vec<usize> {
    (0..3)
        .map(|a| {
            let out = std::process::Command::new("ffprobe")
                .args(["-v", "error", "-select_streams", &format!("a:{a}"), "-show_entries", "packet=pts"])
                .args(["-of", "csv=p=0"])
                .arg(path)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()).count()
        })
        .collect()
}

fn audio_summary(path: &Path) -> Vec<String> {
    ffprobe_streams(path)
        .iter()
        .filter(|s| s["codec_type"] == "audio")
        .map(|s| format!("{} {} {}", s["codec_name"], s["channels"], s["tags"]["language"]))
        .collect()
}

const PLANNED_AUDIO: [&str; 3] = ["\"aac\" 6 \"eng\"", "\"aac\" 2 \"eng\"", "\"aac\" 2 \"deu\""];

#[actix_web::test]
async fn the_run_encodes_the_audio_into_its_partial_folder_and_the_mux_copies_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), 4);
    let (plan, info) = plan_for(&src);
    complete(&plan).await;
    let output = plan.output_path();
    assert_eq!(audio_summary(&output), PLANNED_AUDIO);
    verify_planned(&output, &src, &info, "hevc", plan.streams.as_ref()).unwrap();

    // The run left the converted and the added track, whole, made for this plan.
    let outputs = audio_outputs(&plan);
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    let key = key(&plan, &outputs);
    let mut file = open_valid(&plan.partial_dir, &key).expect("no finished audio file in the partial folder");
    assert!(!plan.partial_dir.join(AUDIO_TEMP_FILE).exists());
    let streams = file.streams.clone();
    let mut packets = Vec::new();
    while let Some(p) = file.next_packet().unwrap() {
        packets.push(p);
    }
    let count = |k: usize, of: &[(usize, rsmpeg::avcodec::AVPacket)]| of.iter().filter(|(s, _)| *s == k).count();
    let (converted, added) = (count(0, &packets), count(1, &packets));
    let inline = audio_packets(&output);
    assert_eq!(&inline[..2], [converted, added], "the output's audio is not the file's");
    assert!(converted > 150, "{converted}");

    // The same file rewritten without the converted track's last 5 packets: the mux copies
    // the file's packets, so the output has 5 fewer (the run only muxes: the video is done).
    let last = packets.iter().rposition(|(s, _)| *s == 0).unwrap();
    let cut: Vec<usize> =
        packets.iter().enumerate().filter(|(_, (s, _))| *s == 0).map(|(i, _)| i).rev().take(5).collect();
    assert!(cut.contains(&last));
    let rewrite = |key: &str| {
        let mut w = Writer::create(&plan.partial_dir, key, &streams).unwrap();
        for (i, (s, p)) in packets.iter().enumerate() {
            if !cut.contains(&i) {
                w.packet(*s, p).unwrap();
            }
        }
        w.finish().unwrap();
    };
    rewrite(&key);
    complete(&plan).await;
    assert_eq!(audio_packets(&output), [inline[0] - 5, inline[1], inline[2]]);

    // Truncated by 3 bytes: not used; the mux encodes the audio itself, every packet there.
    let path = plan.partial_dir.join(AUDIO_FILE);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 3).unwrap();
    assert!(open_valid(&plan.partial_dir, &key).is_none());
    complete(&plan).await;
    assert_eq!(audio_packets(&output), inline);
    verify_planned(&output, &src, &info, "hevc", plan.streams.as_ref()).unwrap();

    // Whole, but made for other audio outputs (rules changed since): not used either.
    rewrite(&format!("{key}|other"));
    assert!(open_valid(&plan.partial_dir, &key).is_none());
    complete(&plan).await;
    assert_eq!(audio_packets(&output), inline);

    // A byte changed inside a packet: the hash refuses the file.
    rewrite(&key);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    assert!(open_valid(&plan.partial_dir, &key).is_none());
}

#[actix_web::test]
async fn a_run_paused_after_its_first_segment_and_resumed_gives_the_planned_audio() {
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), 6);
    let (mut plan, info) = plan_for(&src);
    plan.throttle_ms_per_frame = 20;
    run_until_paused(&plan, |e| matches!(e, Event::SegmentDone { .. })).await;
    let PartialState::Valid(manifest) = inspect(&plan) else { panic!("partial output not valid after a pause") };
    assert!(!manifest.video_complete && manifest.frames_done() > 0);
    // A pause keeps a finished audio file, never a part of one.
    assert!(!plan.partial_dir.join(AUDIO_TEMP_FILE).exists());

    plan.throttle_ms_per_frame = 0;
    complete(&plan).await;
    let output = plan.output_path();
    assert_eq!(audio_summary(&output), PLANNED_AUDIO);
    verify_planned(&output, &src, &info, "hevc", plan.streams.as_ref()).unwrap();
    let key = key(&plan, &audio_outputs(&plan));
    assert!(open_valid(&plan.partial_dir, &key).is_some());
}
