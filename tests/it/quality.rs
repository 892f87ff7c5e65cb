//! VMAF as condense measures it (libvmaf in-process, frames from FFmpeg's decoders), checked
//! against the clip itself, against a ruined encode of it, and against the independent
//! ffmpeg with libvmaf that PyPI's imageio-ffmpeg ships (`make bootstrap-test` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use condense::media::quality::VmafScore;
use condense_media::vmaf::{compare, score_frames, score_pairs, Frames};
use serde_json::{json, Value};

use crate::common::api::TestServer;
use crate::common::db::TestDb;
use crate::common::media::{ffmpeg, h264, sha};
use crate::common::server::binary;

/// imageio-ffmpeg's static ffmpeg (FFmpeg 7 with libvmaf), as the bootstrap installs it.
fn independent_ffmpeg() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/imageio-ffmpeg/imageio_ffmpeg/binaries");
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("ffmpeg-linux")))
        })
        .unwrap_or_else(|| panic!("no ffmpeg with libvmaf in {}: run `make bootstrap-test`", dir.display()))
}

/// The VMAF (vmaf_v0.6.1, its default) that the independent ffmpeg's libvmaf filter prints,
/// the distorted video scaled (bicubic) to the reference's `size` first.
fn independent_vmaf(reference: &Path, distorted: &Path, size: &str) -> f64 {
    // Both from 0: the filter pairs frames by timestamp; condense pairs them in order.
    let graph = format!(
        "[0:v]setpts=PTS-STARTPTS,scale={size}:flags=bicubic[d];[1:v]setpts=PTS-STARTPTS[r];\
         [d][r]libvmaf=model=version=vmaf_v0.6.1"
    );
    let out = Command::new(independent_ffmpeg())
        .args(["-hide_banner", "-nostdin", "-i"])
        .arg(distorted)
        .arg("-i")
        .arg(reference)
        .args(["-lavfi", &graph, "-f", "null", "-"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let line = text.lines().find_map(|l| l.split("VMAF score: ").nth(1)).unwrap_or_else(|| panic!("{text}"));
    line.trim().parse().unwrap()
}

/// `condense vmaf REFERENCE DISTORTED`, the real binary, as a user runs it.
fn condense_vmaf(reference: &Path, distorted: &Path) -> VmafScore {
    let out = Command::new(binary()).arg("vmaf").arg(reference).arg(distorted).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn x265(source: &Path, out: &Path, crf: &str) {
    ffmpeg(&[
        "-i",
        source.to_str().unwrap(),
        "-c:v",
        "libx265",
        "-preset",
        "ultrafast",
        "-crf",
        crf,
        "-x265-params",
        "log-level=error",
        out.to_str().unwrap(),
    ]);
}

#[test]
fn a_clip_scores_above_99_against_itself_and_far_lower_against_its_crf_51_encode() {
    let dir = tempfile::tempdir().unwrap();
    let clip = h264(dir.path(), "clip.mkv", "640x360", 2);
    let itself = compare(&clip, &clip, 2).unwrap();
    assert_eq!(itself.frames, 50);
    assert!(itself.mean > 99.0 && itself.p5 > 99.0, "{itself:?}");

    let ruined = dir.path().join("crf51.mkv");
    x265(&clip, &ruined, "51");
    let score = compare(&clip, &ruined, 2).unwrap();
    assert_eq!(score.frames, 50);
    assert!(score.mean < 80.0 && score.mean < itself.mean - 20.0, "{score:?} against itself {itself:?}");
    assert!(score.p5 <= score.mean, "{score:?}");
}

#[test]
fn scoring_a_block_in_two_scores_those_frames_exactly_as_a_whole_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let clip = h264(dir.path(), "clip.mkv", "640x360", 4);
    let encoded = dir.path().join("crf35.mkv");
    x265(&clip, &encoded, "35");
    let scored = |every: u32| {
        let reference = Frames::open(&clip, None).unwrap();
        let canvas = reference.canvas();
        score_frames(reference, Frames::open(&encoded, Some(canvas)).unwrap(), 2, every).unwrap()
    };
    let (all, pairs) = scored(1);
    assert_eq!((pairs, all.len()), (100, 100));
    let indices = |scores: &[(u32, f64)]| scores.iter().map(|(i, _)| *i).collect::<Vec<_>>();
    assert_eq!(indices(&all), (0..100).collect::<Vec<_>>());
    // Blocks of 32: one in two scores 0-31 and 64-95, one in three 0-31 and 96-99; each
    // block's libvmaf context is fed the pairs on either side, so each scores as in the
    // whole run (motion compares a frame with the one before, and the model takes the lower
    // of a frame's motion and the next one's).
    for (every, expected) in [(2, (0..32).chain(64..96).collect::<Vec<u32>>()), (3, (0..32).chain(96..100).collect())] {
        let (blocks, pairs) = scored(every);
        assert_eq!((pairs, indices(&blocks)), (100, expected), "one block in {every}");
        for (index, score) in &blocks {
            let whole = all[*index as usize].1;
            assert!((score - whole).abs() < 1e-9, "one block in {every}, frame {index}: {score}, whole run {whole}");
        }
    }
    // The score of one block in two is the mean of those frames, over all the pairs.
    let reference = Frames::open(&clip, None).unwrap();
    let canvas = reference.canvas();
    let score = score_pairs(reference, Frames::open(&encoded, Some(canvas)).unwrap(), 2, 2).unwrap();
    let blocks: Vec<f64> = all.iter().filter(|(i, _)| (i / 32).is_multiple_of(2)).map(|(_, s)| *s).collect();
    let mean = blocks.iter().sum::<f64>() / blocks.len() as f64;
    assert_eq!(score.frames, 100);
    assert!((score.mean - mean).abs() < 1e-9, "{score:?} against the whole run's frames {mean}");
    assert!(score.mean < 99.0, "{score:?}");
}

#[test]
fn condense_scores_within_one_point_of_the_independent_libvmaf_also_at_another_size() {
    let dir = tempfile::tempdir().unwrap();
    let clip = h264(dir.path(), "clip.mkv", "640x360", 2);
    for crf in ["30", "40"] {
        let encoded = dir.path().join(format!("crf{crf}.mkv"));
        x265(&clip, &encoded, crf);
        let ours = condense_vmaf(&clip, &encoded);
        let theirs = independent_vmaf(&clip, &encoded, "640:360");
        assert!((ours.mean - theirs).abs() <= 1.0, "crf {crf}: condense {ours:?}, ffmpeg/libvmaf {theirs}");
        assert!(ours.mean < 99.0, "crf {crf}: {ours:?}");
    }
    // A distorted video at another size is scaled to the reference's before scoring.
    let small = dir.path().join("small.mkv");
    ffmpeg(&[
        "-i",
        clip.to_str().unwrap(),
        "-vf",
        "scale=320:180",
        "-c:v",
        "libx264",
        "-qp",
        "10",
        small.to_str().unwrap(),
    ]);
    let ours = condense_vmaf(&clip, &small);
    let theirs = independent_vmaf(&clip, &small, "640:360");
    assert_eq!(ours.frames, 50);
    assert!((ours.mean - theirs).abs() <= 1.0, "scaled: condense {ours:?}, ffmpeg/libvmaf {theirs}");
    assert!(ours.mean < 99.0, "{ours:?}");

    // Videos of different lengths are refused, never scored on the wrong pairs.
    let short = dir.path().join("short.mkv");
    ffmpeg(&["-i", clip.to_str().unwrap(), "-t", "1", "-c:v", "libx264", "-qp", "10", short.to_str().unwrap()]);
    let refused = compare(&clip, &short, 1).unwrap_err();
    assert!(refused.message.contains("more frames"), "{refused:?}");
}

#[actix_web::test]
async fn an_encode_that_would_not_be_smaller_stops_early_and_is_skipped_with_the_original_untouched() {
    // 10 ms a frame: the encode of 300 frames takes seconds, so the abort (judged every
    // 500 ms, from 50 frames on) has its chance long before the end.
    let server = TestServer::start_throttled(TestDb::sqlite().await, 10).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    // An already efficient H.264 source, encoded at CRF 0: many times its size.
    let source = dir.path().join("efficient.mkv");
    crate::common::media::efficient(&source, "320x240", 12);
    let before = sha(&source);
    let library = server.library_with(&token, dir.path(), json!({"quality": 0})).await;
    server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;

    let job = server.the_job_once(&token, &["SKIPPED", "COMPLETED", "FAILED"]).await;
    assert_eq!(job["status"], "SKIPPED", "{job:#}");
    let reason = job["skipReason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("output would not be smaller (projected at "), "{job:#}");
    let skipped = job["events"].as_array().unwrap().iter().find(|e| e["kind"] == "skipped").expect("a skipped event");
    let frames_done = skipped["detail"]["framesDone"].as_u64().unwrap();
    assert!(frames_done < 300, "stopped only at the end: {skipped}");
    assert!(skipped["detail"]["projectedSize"].as_u64().unwrap() > skipped["detail"]["limit"].as_u64().unwrap());
    assert_eq!(job["outputSize"], Value::Null, "{job:#}");

    // The original is as it was, and nothing else is left beside it: no partial output.
    assert_eq!(sha(&source), before);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("efficient.mkv")], "left behind: {left:?}");

    // Forced, the same file is tried again (and stopped again): the reason is the new attempt's.
    let id = job["id"].as_i64().unwrap();
    let (status, forced) = server.post(&format!("/jobs/{id}/force"), Some(&token), &json!({})).await;
    assert_eq!((status, &forced["skipReason"]), (200, &Value::Null), "{forced}");
    let again = server.the_job_once(&token, &["SKIPPED", "COMPLETED", "FAILED"]).await;
    assert_eq!(again["status"], "SKIPPED", "{again:#}");
    assert_eq!(sha(&source), before);
    server.finish().await;
}

/// A VMAF-mode library over `dir` (libx265 ultrafast, the search starting at CRF 28).
async fn vmaf_library(server: &TestServer, token: &str, dir: &Path, max_size_percent: u32) {
    let body = json!({
        "name": "vmaf", "paths": [dir], "encoder": "libx265", "quality": 28, "preset": "ultrafast", "watch": false,
        "qualityMode": "vmaf", "targetVmaf": 95, "maxSizePercent": max_size_percent,
    });
    let (status, library) = server.post("/libraries", Some(token), &body).await;
    assert_eq!(status, 201, "{library}");
    assert_eq!((&library["qualityMode"], &library["targetVmaf"]), (&json!("vmaf"), &json!(95.0)), "{library}");
    server.post(&format!("/libraries/{}/scan", library["id"]), Some(token), &json!({})).await;
}

#[actix_web::test]
async fn a_vmaf_library_encodes_at_the_searched_crf_and_its_output_meets_the_target() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let media = dir.path().join("media");
    std::fs::create_dir(&media).unwrap();
    let clip = h264(&media, "clip.mkv", "640x360", 4);
    let original = dir.path().join("original.mkv");
    std::fs::copy(&clip, &original).unwrap();
    vmaf_library(&server, &token, &media, 80).await;

    let job = server.the_job_once(&token, &["COMPLETED", "SKIPPED", "FAILED"]).await;
    assert_eq!(job["status"], "COMPLETED", "{job:#}");
    // The search chose a CRF other than the library's starting 28 (this clip scores about
    // 90 there), and predicted the size.
    let crf = job["chosenQuality"].as_i64().unwrap();
    assert!((10..28).contains(&crf), "{job:#}");
    assert!(job["predictedSize"].as_i64().unwrap() > 0, "{job:#}");
    // The output measured on the samples (here the whole clip) meets the target, and an
    // independent libvmaf agrees with condense within a point.
    let vmaf = job["vmaf"].as_f64().unwrap();
    assert!(vmaf >= 94.5, "{job:#}");
    assert!(job["vmafP5"].as_f64().unwrap() <= vmaf, "{job:#}");
    let output = PathBuf::from(job["filePath"].as_str().unwrap());
    let theirs = independent_vmaf(&original, &output, "640:360");
    assert!((vmaf - theirs).abs() <= 1.0, "condense {vmaf}, ffmpeg/libvmaf {theirs}");
    // The output is the chosen CRF's: its size is the one predicted from the samples (here
    // the whole clip; at the starting CRF 28 it would be about half).
    let (predicted, actual) = (job["predictedSize"].as_f64().unwrap(), job["outputSize"].as_f64().unwrap());
    assert!((actual / predicted - 1.0).abs() < 0.2, "predicted {predicted}, output {actual}: {job:#}");
    eprintln!(
        "chosen CRF {crf}, VMAF {vmaf:.2} (ffmpeg/libvmaf {theirs:.2}), predicted {predicted} B, output {actual} B"
    );
    server.finish().await;
}

#[actix_web::test]
async fn a_file_that_cannot_save_20_percent_at_the_target_is_skipped_before_any_encode() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    // Already efficient: VMAF 95 of it takes x265 ultrafast about twice its size.
    let source = dir.path().join("efficient.mkv");
    crate::common::media::efficient(&source, "640x360", 4);
    let before = sha(&source);
    vmaf_library(&server, &token, dir.path(), 80).await;

    let job = server.the_job_once(&token, &["SKIPPED", "COMPLETED", "FAILED"]).await;
    assert_eq!(job["status"], "SKIPPED", "{job:#}");
    let reason = job["skipReason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("would"), "{job:#}");
    assert!(reason.contains("at the target quality"), "{job:#}");
    let predicted = job["predictedSize"].as_i64().unwrap();
    assert!(predicted > job["sourceSize"].as_i64().unwrap() * 80 / 100, "{job:#}");
    assert_eq!(job["vmaf"], Value::Null, "nothing was encoded to measure: {job:#}");
    // Nothing was encoded: the original as it was, and nothing beside it.
    assert_eq!(sha(&source), before);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("efficient.mkv")], "left behind: {left:?}");
    server.finish().await;
}

#[actix_web::test]
async fn quality_mode_fields_are_validated() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    for (field, value, says) in [
        ("qualityMode", json!("best"), "qualityMode must be crf or vmaf"),
        ("targetVmaf", json!(79.9), "targetVmaf must be 80 to 99"),
        ("targetVmaf", json!(99.5), "targetVmaf must be 80 to 99"),
        ("maxSizePercent", json!(9), "maxSizePercent must be 10 to 100"),
        ("maxSizePercent", json!(101), "maxSizePercent must be 10 to 100"),
    ] {
        let body = json!({"name": "q", "paths": [dir.path()], field: value});
        let (status, refused) = server.post("/libraries", Some(&token), &body).await;
        assert_eq!(status, 422, "{field}={value}: {refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains(says), "{refused}");
    }
    let (status, library) = server.post("/libraries", Some(&token), &json!({"name": "q", "paths": [dir.path()]})).await;
    assert_eq!(status, 201);
    let defaults = (&library["qualityMode"], &library["targetVmaf"], &library["maxSizePercent"]);
    assert_eq!(defaults, (&json!("crf"), &json!(95.0), &json!(80)), "{library}");
    let id = library["id"].as_i64().unwrap();
    let (status, changed) = server
        .put(&format!("/libraries/{id}"), Some(&token), &json!({"qualityMode": "vmaf", "targetVmaf": 93.5}))
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!((&changed["qualityMode"], &changed["targetVmaf"]), (&json!("vmaf"), &json!(93.5)), "{changed}");
    server.finish().await;
}

#[test]
fn crf_search_on_its_own_finds_the_crf_that_reaches_the_target_and_writes_nothing_beside_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let clip = h264(dir.path(), "clip.mkv", "640x360", 4);
    let search = |args: &[&str]| Command::new(binary()).arg("crf-search").arg(&clip).args(args).output().unwrap();
    let out = search(&["--preset", "ultrafast", "--target", "95"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = &json["result"];
    let crf = result["quality"].as_u64().unwrap();
    assert!((10..28).contains(&crf), "{json:#}");
    assert_eq!((&result["met"], &json["tooLarge"]), (&json!(true), &json!(false)), "{json:#}");
    assert!(result["vmaf"]["mean"].as_f64().unwrap() >= 95.0, "{json:#}");
    // The settled CRF was tried; the next one up (when tried) missed the target.
    let probes = result["probes"].as_array().unwrap();
    assert!(probes.len() <= 8 && probes.iter().any(|p| p["quality"] == crf), "{json:#}");
    if let Some(above) = probes.iter().find(|p| p["quality"] == crf + 1) {
        assert!(above["vmaf"].as_f64().unwrap() < 95.0, "{json:#}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("clip.mkv")], "left behind: {left:?}");

    let refused = search(&["--target", "100"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--target must be 80 to 99"));
    let refused = search(&["--encoder", "x266"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("unknown encoder \"x266\""));
    for every in ["0", "9"] {
        let refused = search(&["--score-every", every]);
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && said.contains("--score-every must be 1 to 8"), "{said}");
    }
    // One block of frames in two (the default) and every frame score the same try alike.
    let fixed = |every: &str| {
        let out = search(&["--preset", "ultrafast", "--fixed", "--start", "30", "--score-every", every]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        json["result"]["vmaf"]["mean"].as_f64().unwrap()
    };
    let (all, halves) = (fixed("1"), fixed("2"));
    assert!((all - halves).abs() < 1.0 && all != halves, "every frame {all}, a block in two {halves}");
}

/// The library's forecast once it is no longer RUNNING.
async fn forecast_once_ended(server: &TestServer, token: &str, library: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (status, forecast) = server.get(&format!("/libraries/{library}/forecast"), Some(token)).await;
        assert_eq!(status, 200, "{forecast}");
        if forecast["status"] != "RUNNING" {
            return forecast;
        }
        assert!(Instant::now() < deadline, "still running: {forecast:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[actix_web::test]
async fn a_forecast_predicts_each_file_without_encoding_or_touching_anything_and_can_be_cancelled() {
    // No encoding slot: the H.264 job stays QUEUED (the HEVC one is skipped by the probe
    // after the scan), so only the forecast works on the files.
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let big = h264(dir.path(), "big.mkv", "640x360", 4);
    let hevc = crate::common::media::hevc(dir.path(), "already.mkv");
    let before = (sha(&big), sha(&hevc));
    let id = server.library_with(&token, dir.path(), json!({"quality": 28})).await;
    let (status, missing) = server.get(&format!("/libraries/{id}/forecast"), Some(&token)).await;
    assert_eq!(status, 404, "{missing}");
    server.post(&format!("/libraries/{id}/scan"), Some(&token), &json!({})).await;

    let (status, started) = server.post(&format!("/libraries/{id}/forecast"), Some(&token), &json!({})).await;
    assert_eq!((status, &started["status"], &started["filesTotal"]), (202, &json!("RUNNING"), &json!(2)), "{started}");
    let (status, again) = server.post(&format!("/libraries/{id}/forecast"), Some(&token), &json!({})).await;
    assert_eq!(status, 409, "a second forecast while one runs: {again}");
    let forecast = forecast_once_ended(&server, &token, id).await;
    assert_eq!((&forecast["status"], &forecast["filesDone"]), (&json!("DONE"), &json!(2)), "{forecast:#}");
    let file =
        |name: &str| forecast["files"].as_array().unwrap().iter().find(|f| f["fileName"] == name).unwrap().clone();
    // crf mode: the library's CRF, its size and time predicted from samples (here the whole clip).
    let encoded = file("big.mkv");
    assert_eq!(encoded["quality"], 28, "{forecast:#}");
    let (now, predicted) = (encoded["currentSize"].as_i64().unwrap(), encoded["predictedSize"].as_i64().unwrap());
    assert!(predicted > 0 && predicted < now / 2, "{forecast:#}");
    assert!(
        encoded["predictedSeconds"].as_f64().unwrap() > 0.0 && encoded["vmaf"].as_f64().unwrap() > 50.0,
        "{forecast:#}"
    );
    assert_eq!(file("already.mkv")["skipReason"], "video is already hevc", "{forecast:#}");
    let totals = &forecast["totals"];
    assert_eq!(
        (&totals["encoded"], &totals["skipped"], &totals["savedBytes"]),
        (&json!(1), &json!(1), &json!(now - predicted))
    );
    // Nothing was encoded for real, and nothing changed.
    assert_eq!((sha(&big), sha(&hevc)), before);
    let mut left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    left.sort();
    assert_eq!(left, [std::ffi::OsString::from("already.mkv"), std::ffi::OsString::from("big.mkv")]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, jobs) = server.get("/jobs?sort=fileName&order=asc", Some(&token)).await;
        let statuses: Vec<&str> =
            jobs["items"].as_array().unwrap().iter().map(|j| j["status"].as_str().unwrap()).collect();
        if statuses == ["SKIPPED", "QUEUED"] {
            break;
        }
        assert_eq!(statuses[1], "QUEUED", "{jobs:#}");
        assert!(Instant::now() < deadline, "{jobs:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // vmaf mode: the search's CRF instead of the library's.
    let (status, _) = server.put(&format!("/libraries/{id}"), Some(&token), &json!({"qualityMode": "vmaf"})).await;
    assert_eq!(status, 200);
    let (status, started) = server.post(&format!("/libraries/{id}/forecast"), Some(&token), &json!({})).await;
    assert_eq!(status, 202, "{started}");
    let forecast = forecast_once_ended(&server, &token, id).await;
    let encoded = forecast["files"].as_array().unwrap().iter().find(|f| f["fileName"] == "big.mkv").unwrap().clone();
    let crf = encoded["quality"].as_i64().unwrap();
    assert!((10..28).contains(&crf) && encoded["vmaf"].as_f64().unwrap() >= 95.0, "{forecast:#}");

    // A cancel ends a forecast at once; none running, it is refused.
    let (status, started) = server.post(&format!("/libraries/{id}/forecast"), Some(&token), &json!({})).await;
    assert_eq!(status, 202, "{started}");
    let (status, _) = server.delete(&format!("/libraries/{id}/forecast"), Some(&token)).await;
    assert_eq!(status, 202);
    let cancelled = forecast_once_ended(&server, &token, id).await;
    assert_eq!(cancelled["status"], "CANCELLED", "{cancelled:#}");
    let (status, refused) = server.delete(&format!("/libraries/{id}/forecast"), Some(&token)).await;
    assert_eq!(status, 409, "{refused}");
    server.finish().await;
}

#[actix_web::test]
async fn a_forecast_covers_every_file_of_a_library_past_one_page_of_jobs() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    // Disabled: no scan of the (empty) folder drops the jobs made below.
    let body = json!({"name": "big", "paths": [dir.path()], "watch": false, "enabled": false});
    let (_, library) = server.post("/libraries", Some(&token), &body).await;
    let id = library["id"].as_i64().unwrap();
    // More jobs than one page of the job list holds (500).
    for n in 0..501 {
        let path = dir.path().join(format!("f{n:03}.mkv")).display().to_string();
        let job = crate::common::rows::new_job(
            Some(i32::try_from(id).unwrap()),
            &path,
            condense::domain::job::JobStatus::Queued,
        );
        condense::repo::jobs::insert(server.db(), job).await.unwrap();
    }
    let (status, started) = server.post(&format!("/libraries/{id}/forecast"), Some(&token), &json!({})).await;
    assert_eq!((status, &started["filesTotal"]), (202, &json!(501)), "{started}");
    let (status, _) = server.delete(&format!("/libraries/{id}/forecast"), Some(&token)).await;
    assert_eq!(status, 202);
    assert_eq!(forecast_once_ended(&server, &token, id).await["status"], "CANCELLED");
    server.finish().await;
}
