//! The library health check (issue 38) through `worker::check_health` and the built
//! `condense-media` child: good H.264, HEVC and AV1 clips, one cut short mid-GOP, one with
//! bytes zeroed inside a video frame, one with a damaged audio packet, one that is not
//! media; each file's bytes and its folder's listing unchanged by the checks. Quick checks
//! of many files in one child (`worker::health_batch`), and the batch surviving a child that
//! hangs or dies on one file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use condense::media::health::{Depth, FileHealth, Verdict};
use condense::media::worker::{check_health, health_batch};
use sha2::{Digest, Sha256};

use crate::common::media::ffmpeg;
use crate::common::server::media_binary;

/// A 4 s 320x240 clip with a 440 Hz tone: video `video` (ffmpeg arguments), audio `audio`,
/// a keyframe every 2 s.
fn clip(dir: &Path, name: &str, video: &str, audio: &str) -> PathBuf {
    let out = dir.join(name);
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
        "4",
        "-g",
        "50",
    ];
    args.extend(video.split_whitespace());
    args.extend(audio.split_whitespace());
    args.push(out.to_str().unwrap());
    ffmpeg(&args);
    out
}

/// One packet of a stream as ffprobe lists it: presentation time, byte offset, size, key.
struct Packet {
    seconds: f64,
    pos: u64,
    size: u64,
    key: bool,
}

fn packets(path: &Path, stream: &str) -> Vec<Packet> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time,pos,size,flags"])
        .args(["-of", "json"])
        .arg(path)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["packets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Packet {
            seconds: p["pts_time"].as_str().unwrap().parse().unwrap(),
            pos: p["pos"].as_str().unwrap().parse().unwrap(),
            size: p["size"].as_str().unwrap().parse().unwrap(),
            key: p["flags"].as_str().unwrap().starts_with('K'),
        })
        .collect()
}

/// Zeroes 64 bytes (at most a quarter of it) in the middle of the packet of `stream`
/// nearest 2.5 s (a non-key one where `non_key`); answers that packet's time.
fn zero_inside_packet(path: &Path, stream: &str, non_key: bool) -> f64 {
    let all = packets(path, stream);
    let p = all
        .iter()
        .filter(|p| !(non_key && p.key) && p.size >= 64)
        .min_by(|a, b| (a.seconds - 2.5).abs().total_cmp(&(b.seconds - 2.5).abs()))
        .unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let n = (p.size / 4).min(64) as usize;
    let at = (p.pos + p.size / 2) as usize;
    bytes[at..at + n].fill(0);
    std::fs::write(path, bytes).unwrap();
    p.seconds
}

/// Every file of a folder with its SHA-256, and its listing (names, sizes, times).
fn snapshot(dir: &Path) -> Vec<(String, u64, std::time::SystemTime, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            let digest = Sha256::digest(std::fs::read(e.path()).unwrap()).to_vec();
            (e.file_name().to_string_lossy().into_owned(), meta.len(), meta.modified().unwrap(), digest)
        })
        .collect();
    all.sort();
    all
}

async fn check(path: &Path, depth: Depth) -> FileHealth {
    check_health(media_binary(), path, depth, Duration::from_secs(120)).await.unwrap()
}

fn has_encoder(name: &str) -> bool {
    let out = Command::new("ffmpeg").args(["-hide_banner", "-encoders"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().any(|w| w == name)
}

#[actix_web::test]
async fn good_clips_are_ok_at_both_depths_and_nothing_beside_them_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut good = vec![
        clip(dir, "h264.mkv", "-c:v libx264 -preset ultrafast", "-c:a aac"),
        clip(dir, "h264.mp4", "-c:v libx264", "-c:a aac"),
        clip(dir, "hevc.mkv", "-c:v libx265 -preset ultrafast -x265-params log-level=error", "-c:a flac"),
    ];
    let av1 = ["libsvtav1", "libaom-av1"].into_iter().find(|e| has_encoder(e));
    match av1 {
        Some("libsvtav1") => good.push(clip(dir, "av1.mkv", "-c:v libsvtav1 -preset 12", "-c:a libopus")),
        Some(_) => good.push(clip(dir, "av1.mkv", "-c:v libaom-av1 -cpu-used 8 -row-mt 1", "-c:a libopus")),
        None => eprintln!("no AV1 encoder in this ffmpeg: the AV1 clip is left out"),
    }
    let before = snapshot(dir);
    for path in &good {
        for depth in [Depth::Quick, Depth::Thorough] {
            let h = check(path, depth).await;
            assert_eq!(h.verdict, Verdict::Ok, "{} at {depth:?}: {h:?}", path.display());
            assert_eq!(h.error_count, 0, "{h:?}");
            assert_eq!(h.depth, depth);
        }
    }
    assert_eq!(snapshot(dir), before, "a check changed a file or its folder");
}

#[actix_web::test]
async fn a_file_cut_short_mid_gop_and_a_file_that_is_not_media_are_found_at_quick() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let whole = clip(dir, "whole.mkv", "-c:v libx264 -preset ultrafast -qp 20", "-c:a aac");
    // Cut inside the second GOP (keyframes at 0 s and 2 s), at 2.5 s.
    let video = packets(&whole, "v");
    let cut = video.iter().find(|p| p.seconds >= 2.5).unwrap().pos + 100;
    let bytes = std::fs::read(&whole).unwrap();
    let short = dir.join("short.mkv");
    std::fs::write(&short, &bytes[..cut as usize]).unwrap();
    let not_media = dir.join("notes.mkv");
    std::fs::write(&not_media, "these are the show's notes, not a video\n".repeat(100)).unwrap();
    let before = snapshot(dir);

    let h = check(&short, Depth::Quick).await;
    assert!(matches!(h.verdict, Verdict::Damaged | Verdict::Unreadable), "{h:?}");
    if h.verdict == Verdict::Damaged {
        assert!(h.error_count >= 1, "{h:?}");
        let at = h.first_error_seconds.unwrap();
        assert!((2.0..=4.0).contains(&at), "the first error is where the file ends: {h:?}");
        assert!(h.message.as_deref().unwrap().contains("cut short"), "{h:?}");
    }
    let h = check(&not_media, Depth::Quick).await;
    assert_eq!(h.verdict, Verdict::Unreadable, "{h:?}");
    assert!(h.message.as_deref().unwrap().contains("notes.mkv"), "the reason names the file: {h:?}");
    // The whole file is fine: the cut is what was found.
    assert_eq!(check(&whole, Depth::Quick).await.verdict, Verdict::Ok);
    assert_eq!(snapshot(dir), before, "a check changed a file or its folder");
}

#[actix_web::test]
async fn thorough_finds_bytes_zeroed_inside_a_video_frame_and_when() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = clip(dir, "zeroed.mkv", "-c:v libx264", "-c:a aac");
    let at = zero_inside_packet(&path, "v", true);
    let before = snapshot(dir);

    let quick = check(&path, Depth::Quick).await;
    assert!(matches!(quick.verdict, Verdict::Ok | Verdict::Damaged), "{quick:?}");
    let h = check(&path, Depth::Thorough).await;
    assert_eq!(h.verdict, Verdict::Damaged, "{h:?}");
    let first = h.first_error_seconds.unwrap();
    assert!((first - at).abs() <= 1.0, "first error at {first} s, the zeroed packet at {at} s: {h:?}");
    assert!(h.message.as_deref().unwrap().contains("stream 0 (video h264)"), "{h:?}");
    assert_eq!(h.streams.len(), 1, "only the video has errors: {h:?}");
    assert_eq!((h.streams[0].index, h.streams[0].kind.as_str()), (0, "video"));
    assert!(h.streams[0].errors >= 1 && h.error_count >= h.streams[0].errors, "{h:?}");
    assert_eq!(snapshot(dir), before, "a check changed a file or its folder");
}

#[actix_web::test]
async fn thorough_finds_a_damaged_audio_packet_and_counts_it_on_the_audio_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = clip(dir, "audio.mkv", "-c:v libx264 -preset ultrafast", "-c:a flac");
    let at = zero_inside_packet(&path, "a", false);
    let before = snapshot(dir);

    let h = check(&path, Depth::Thorough).await;
    assert_eq!(h.verdict, Verdict::Damaged, "{h:?}");
    let first = h.first_error_seconds.unwrap();
    assert!((first - at).abs() <= 1.0, "first error at {first} s, the zeroed packet at {at} s: {h:?}");
    assert_eq!(h.streams.len(), 1, "only the audio has errors: {h:?}");
    assert_eq!((h.streams[0].index, h.streams[0].kind.as_str()), (1, "audio"), "{h:?}");
    assert!(h.message.as_deref().unwrap().contains("stream 1 (audio flac)"), "{h:?}");
    assert_eq!(snapshot(dir), before, "a check changed a file or its folder");
}

/// Quick checks of `paths` in batch: each result, by index, in the order they came.
async fn batch(paths: &[PathBuf], base_limit: Duration) -> Vec<(usize, FileHealth)> {
    let mut got = Vec::new();
    let mut each = |i: usize, r: Result<FileHealth, condense::media::MediaError>| {
        let h = r.unwrap_or_else(|e| FileHealth {
            depth: Depth::Quick,
            verdict: Verdict::Unreadable,
            first_error_seconds: None,
            message: Some(format!("ERR {e}")),
            error_count: 1,
            streams: Vec::new(),
        });
        got.push((i, h));
    };
    health_batch(media_binary(), paths, Depth::Quick, base_limit, &mut each).await;
    got
}

/// One child checks a batch of files at quick depth, each given its own verdict, every one
/// answered once and in order: good, cut short, not media. A child that stops answering
/// (SIGSTOP: a hang, killed after the file's time limit) or dies (SIGKILL: a crash) costs
/// the batch only the file it was on, recorded unreadable with the reason; the rest goes to
/// a new child and gets its verdicts. Without a program to run, every file is answered
/// with why.
#[actix_web::test]
async fn a_quick_batch_gives_each_file_its_verdict_and_survives_a_child_that_hangs_or_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let whole = clip(dir, "whole.mkv", "-c:v libx264 -preset ultrafast -qp 20", "-c:a aac");
    let video = packets(&whole, "v");
    let cut = video.iter().find(|p| p.seconds >= 2.5).unwrap().pos + 100;
    let short = dir.join("short.mkv");
    std::fs::write(&short, &std::fs::read(&whole).unwrap()[..cut as usize]).unwrap();
    let not_media = dir.join("notes.mkv");
    std::fs::write(&not_media, "these are the show's notes, not a video\n".repeat(100)).unwrap();
    let mut paths = vec![whole.clone(), short.clone(), not_media.clone()];
    for i in 0..150 {
        let copy = dir.join(format!("copy_{i:03}.mkv"));
        std::fs::hard_link(&whole, &copy).unwrap();
        paths.push(copy);
    }
    paths.push(dir.join("missing.mkv"));
    let before = snapshot(dir);
    let judge = |got: &[(usize, FileHealth)], stopped: Option<usize>| {
        let order: Vec<usize> = got.iter().map(|(i, _)| *i).collect();
        assert_eq!(order, (0..paths.len()).collect::<Vec<_>>(), "each file answered once, in order");
        for (i, h) in got {
            if Some(*i) == stopped {
                continue;
            }
            let path = &paths[*i];
            match *i {
                1 => assert!(matches!(h.verdict, Verdict::Damaged | Verdict::Unreadable), "{h:?}"),
                2 => {
                    assert_eq!(h.verdict, Verdict::Unreadable, "{h:?}");
                    assert!(h.message.as_deref().unwrap().contains("notes.mkv"), "{h:?}");
                }
                i if i == paths.len() - 1 => assert_eq!(h.verdict, Verdict::Unreadable, "{h:?}"),
                _ => assert_eq!(h.verdict, Verdict::Ok, "{}: {h:?}", path.display()),
            }
        }
    };

    let got = batch(&paths, Duration::from_secs(120)).await;
    judge(&got, None);
    // The cut file's finding is the same as when checked alone.
    assert_eq!(got[1].1, check(&short, Depth::Quick).await);

    for signal in [libc::SIGSTOP, libc::SIGKILL] {
        // Signals the first child of the batch once it runs, and no other.
        let stopper = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while std::time::Instant::now() < deadline {
                if let Some(&pid) = crate::common::server::own_children(b"media").first() {
                    unsafe { libc::kill(pid, signal) };
                    return;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let got = batch(&paths, Duration::from_secs(5)).await;
        stopper.join().unwrap();
        let stopped: Vec<&(usize, FileHealth)> = got
            .iter()
            .filter(|(_, h)| h.message.as_deref().is_some_and(|m| m.contains("stopped on this file")))
            .collect();
        assert_eq!(stopped.len(), 1, "signal {signal}: {stopped:?}");
        let (at, h) = stopped[0];
        assert_eq!(h.verdict, Verdict::Unreadable, "{h:?}");
        let why = if signal == libc::SIGSTOP { "no answer within 5 s" } else { "killed by signal 9" };
        assert!(h.message.as_deref().unwrap().contains(why), "signal {signal}: {h:?}");
        judge(&got, Some(*at));
    }
    assert_eq!(snapshot(dir), before, "a check changed a file or its folder");

    let mut nowhere = Vec::new();
    let mut each = |i: usize, r: Result<FileHealth, condense::media::MediaError>| nowhere.push((i, r.is_err()));
    health_batch(Path::new("/nonexistent/condense-media"), &paths, Depth::Quick, Duration::from_secs(5), &mut each)
        .await;
    assert_eq!(nowhere, (0..paths.len()).map(|i| (i, true)).collect::<Vec<_>>());
}
