//! Two-pass encoding (a library's `rateControl: "twoPass"`) through the real server: the
//! output's bitrate, a first pass cut short by a pause, and the API's checks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::api::{message, TestServer};
use crate::common::db::TestDb;
use crate::common::media as clips;
use crate::common::server::own_children;

/// The job's `pass` events, as (pass, restarted), in the order they were recorded.
fn passes(job: &Value) -> Vec<(i64, bool)> {
    job["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "pass")
        .map(|e| (e["detail"]["pass"].as_i64().unwrap(), e["detail"]["restarted"].as_bool().unwrap()))
        .collect()
}

fn kinds(job: &Value) -> Vec<String> {
    job["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap().to_string()).collect()
}

/// The video codec of the file at `path` now.
fn codec_of(path: &Path) -> String {
    condense_media::probe::probe(path).unwrap().video().unwrap().codec.clone()
}

#[actix_web::test]
async fn two_passes_reach_the_target_bitrate_and_replace_the_file() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let source = clips::h264(dir.path(), "a.mkv", "320x240", 30);
    let library =
        server.library_with(&token, dir.path(), json!({"rateControl": "twoPass", "targetBitrateKbps": 250})).await;
    let (status, shown) = server.get(&format!("/libraries/{library}"), Some(&token)).await;
    assert_eq!((status, &shown["rateControl"], &shown["targetBitrateKbps"]), (200, &json!("twoPass"), &json!(250)));
    server.scan(&token, library).await;
    let job = server.the_job_once(&token, &["COMPLETED", "FAILED", "SKIPPED"]).await;
    assert_eq!(job["status"], "COMPLETED", "{job}");
    // The first pass over the whole video, then the encode that is kept; neither restarted.
    assert_eq!(passes(&job), [(1, false), (2, false)], "{:?}", kinds(&job));
    assert_eq!(job["encodePass"], Value::Null, "a pass is shown only while the job runs: {job}");
    // Verified and replaced as usual: the source's path holds the HEVC output.
    assert_eq!(codec_of(&source), "hevc");
    let kbps = clips::video_kbps(&source);
    assert!((225.0..=275.0).contains(&kbps), "the output's video is {kbps:.1} kbit/s, the target 250");
    // Nothing of the passes is left beside the file.
    assert!(!condense::media::layout::partial_dir_for(&source).exists());
    server.finish().await;
}

/// A server with a frame pause (so a pass lasts) whose library, two passes to 300 kbit/s,
/// holds one 8 s clip, scanned: the server, a token, the clip's folder and the clip.
async fn two_pass_clip_scanned() -> (TestServer, String, tempfile::TempDir, PathBuf) {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 25).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let source = clips::h264(dir.path(), "a.mkv", "320x240", 8);
    let library =
        server.library_with(&token, dir.path(), json!({"rateControl": "twoPass", "targetBitrateKbps": 300})).await;
    server.scan(&token, library).await;
    (server, token, dir, source)
}

/// The job's id once its first pass has encoded some frames.
async fn in_first_pass(server: &TestServer, token: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = server.the_job_once(token, &["ENCODING", "ANALYZING", "QUEUED"]).await;
        if job["encodePass"] == 1 && job["progress"].as_f64().unwrap_or(0.0) > 0.0 {
            return job["id"].as_i64().unwrap();
        }
        assert!(Instant::now() < deadline, "the first pass never showed: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_web::test]
async fn a_pause_in_the_first_pass_restarts_it_on_resume() {
    let (server, token, _dir, source) = two_pass_clip_scanned().await;

    // Pause once the first pass has encoded some frames: the job says it is in pass 1.
    let id = in_first_pass(&server, &token).await;
    let (status, paused) = server.post(&format!("/jobs/{id}/pause"), Some(&token), &json!({})).await;
    assert_eq!((status, paused["status"].as_str()), (200, Some("PAUSED")), "{paused}");
    let paused = server.wait_for(&token, id, &["PAUSED"]).await;
    assert_eq!(passes(&paused), [(1, false)], "{:?}", kinds(&paused));

    let (status, resumed) = server.post(&format!("/jobs/{id}/resume"), Some(&token), &json!({})).await;
    assert_eq!((status, resumed["status"].as_str()), (200, Some("QUEUED")), "{resumed}");
    let done = server.wait_for(&token, id, &["COMPLETED", "FAILED"]).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    // The resume ran the first pass again from its start, then the second.
    assert_eq!(passes(&done), [(1, false), (1, true), (2, false)], "{:?}", kinds(&done));
    let order = kinds(&done);
    let resumed_at = order.iter().position(|k| k == "resumed").unwrap();
    let second_first_pass = order.iter().enumerate().filter(|(_, k)| *k == "pass").nth(1).unwrap().0;
    assert!(resumed_at < second_first_pass, "{order:?}");
    assert_eq!(codec_of(&source), "hevc");
    server.finish().await;
}

#[actix_web::test]
async fn a_transcoder_killed_in_the_first_pass_runs_it_again() {
    let (server, token, _dir, source) = two_pass_clip_scanned().await;
    let id = in_first_pass(&server, &token).await;
    let children = own_children(b"transcode");
    assert_eq!(children.len(), 1, "{children:?}");
    // SAFETY: a signal to a child of this test (the server's transcoder).
    unsafe { libc::kill(children[0], libc::SIGKILL) };

    // The attempt fails and its retry runs the first pass again from its start.
    let done = server.wait_for(&token, id, &["COMPLETED", "FAILED"]).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    assert_eq!(done["retryCount"], 1, "{done}");
    assert_eq!(passes(&done), [(1, false), (1, true), (2, false)], "{:?}", kinds(&done));
    assert_eq!(codec_of(&source), "hevc");
    server.finish().await;
}

#[actix_web::test]
async fn the_api_refuses_two_passes_it_cannot_run() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let body = |extra: Value| {
        let mut body = json!({"name": "films", "paths": [dir.path()], "encoder": "libx265", "watch": false});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    for (extra, words) in [
        (json!({"rateControl": "twoPass"}), "targetBitrateKbps is required"),
        (json!({"rateControl": "twoPass", "targetBitrateKbps": 49}), "targetBitrateKbps must be 50 to 200000"),
        (json!({"rateControl": "twoPass", "targetBitrateKbps": 200001}), "targetBitrateKbps must be 50 to 200000"),
        (
            json!({"rateControl": "twoPass", "targetBitrateKbps": 900, "encoder": "libsvtav1"}),
            "not offered for libsvtav1",
        ),
        (json!({"rateControl": "twoPass", "targetBitrateKbps": 900, "qualityMode": "vmaf"}), "qualityMode vmaf"),
        (json!({"rateControl": "threePass"}), "rateControl must be crf or twoPass"),
    ] {
        let (status, error) = server.post("/libraries", Some(&token), &body(extra.clone())).await;
        assert_eq!(status, 422, "{extra}: {error}");
        assert!(message(&error).contains(words), "{extra}: {error}");
    }
    let (status, library) = server
        .post("/libraries", Some(&token), &body(json!({"rateControl": "twoPass", "targetBitrateKbps": 900})))
        .await;
    assert_eq!(status, 201, "{library}");
    let id = library["id"].as_i64().unwrap();
    // A change is judged as a whole: AV1 cannot keep the library's two passes.
    let (status, error) = server
        .put(&format!("/libraries/{id}"), Some(&token), &json!({"targetCodec": "av1", "encoder": "libsvtav1"}))
        .await;
    assert_eq!(status, 422, "{error}");
    assert!(message(&error).contains("not offered for libsvtav1"), "{error}");
    // Back to CRF keeps the bitrate for later.
    let (status, crf) = server.put(&format!("/libraries/{id}"), Some(&token), &json!({"rateControl": "crf"})).await;
    assert_eq!((status, &crf["rateControl"], &crf["targetBitrateKbps"]), (200, &json!("crf"), &json!(900)), "{crf}");
    server.finish().await;
}
