//! Job and queue actions through the API, and the WebSocket feed, against a real server
//! running real encodes.

use std::time::{Duration, Instant};

use awc::ws::Frame;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::common::api::TestServer;
use crate::common::db::TestDb;
use crate::common::media as clips;

#[actix_web::test]
async fn pause_resume_cancel_retry_and_force_through_the_api() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 25).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    clips::h264(dir.path(), "a.mkv", "320x240", 4);
    clips::h264(dir.path(), "b.mkv", "320x240", 4);
    let library = server.library(&token, dir.path()).await;
    let (status, report) = server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["found"], 2);

    // One slot: one job (a) runs, the other (b) waits. Pausing the waiting one needs no transcoder.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (a, b) = loop {
        let all = server.jobs(&token).await;
        if let Some(running) = all.iter().position(|j| j["status"] == "ENCODING") {
            let other = &all[1 - running];
            assert_eq!(other["status"], "QUEUED", "{all:?}");
            break (all[running]["id"].as_i64().unwrap(), other["id"].as_i64().unwrap());
        }
        assert!(Instant::now() < deadline, "nothing started: {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let a_path = server.job(&token, a).await["filePath"].as_str().unwrap().to_string();
    let (status, paused_b) = server.post(&format!("/api/jobs/{b}/pause"), Some(&token), &json!({})).await;
    assert_eq!((status, paused_b["status"].as_str()), (200, Some("PAUSED")), "{paused_b}");

    // Pause once a segment is done, so there is something to keep.
    let partial = condense::media::layout::partial_dir_for(std::path::Path::new(&a_path));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(partial.join("manifest.json")).is_ok_and(|m| m.contains("seg-00000")) {
        assert!(Instant::now() < deadline, "no segment was written");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, paused) = server.post(&format!("/jobs/{a}/pause"), Some(&token), &json!({})).await;
    assert_eq!((status, paused["status"].as_str()), (200, Some("PAUSED")), "{paused}");
    // The job says what may be done next, as the state machine allows it.
    assert_eq!(paused["actions"], json!(["resume", "cancel"]), "{paused}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(partial.join("manifest.json").exists(), "the partial output must be kept on pause");
    let (status, again) = server.post(&format!("/jobs/{a}/pause"), Some(&token), &json!({})).await;
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("invalid_transition")), "{again}");

    let (status, resumed) = server.post(&format!("/jobs/{a}/resume"), Some(&token), &json!({})).await;
    assert_eq!((status, resumed["status"].as_str()), (200, Some("QUEUED")), "{resumed}");
    let done = server.wait_for(&token, a, &["COMPLETED", "FAILED"]).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    let kinds: Vec<&str> = done["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.windows(2).any(|w| w == ["paused", "resumed"]), "{kinds:?}");

    let (status, cancelled) = server.post(&format!("/jobs/{b}/cancel"), Some(&token), &json!({})).await;
    assert_eq!((status, cancelled["status"].as_str()), (200, Some("CANCELLED")), "{cancelled}");
    assert_eq!(server.job(&token, b).await["actions"], json!(["retry"]));
    let (status, retried) = server.post(&format!("/jobs/{b}/retry"), Some(&token), &json!({})).await;
    assert_eq!((status, retried["status"].as_str()), (200, Some("QUEUED")), "{retried}");
    assert_eq!(server.wait_for(&token, b, &["COMPLETED", "FAILED"]).await["status"], "COMPLETED");

    // A completed file is HEVC now: forcing re-encodes it anyway.
    let (status, forced) = server.post(&format!("/jobs/{a}/force"), Some(&token), &json!({})).await;
    assert_eq!((status, forced["status"].as_str()), (200, Some("QUEUED")), "{forced}");
    assert_eq!(server.wait_for(&token, a, &["COMPLETED", "FAILED"]).await["status"], "COMPLETED");

    let (status, missing) = server.post("/jobs/999999/pause", Some(&token), &json!({})).await;
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("not_found")));
    server.finish().await;
}

#[actix_web::test]
async fn pause_all_and_resume_all_count_what_they_touch() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 25).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    for name in ["a.mkv", "b.mkv", "c.mkv"] {
        clips::h264(dir.path(), name, "320x240", 2);
    }
    let library = server.library(&token, dir.path()).await;
    server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;
    // Pause-all holds what waits in the queue or runs: the found files once probed.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let all = server.jobs(&token).await;
        if all.len() == 3 && all.iter().all(|j| j["status"] != "PENDING") {
            break;
        }
        assert!(Instant::now() < deadline, "the files were not probed: {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = server.post("/api/queue/pause-all", Some(&token), &json!({})).await;
    assert_eq!((status, body["affected"].as_u64()), (200, Some(3)), "{body}");
    assert!(server.jobs(&token).await.iter().all(|j| j["status"] == "PAUSED"));
    let (status, body) = server.post("/queue/resume-all", Some(&token), &json!({})).await;
    assert_eq!((status, body["affected"].as_u64()), (200, Some(3)), "{body}");
    for job in server.jobs(&token).await {
        let id = job["id"].as_i64().unwrap();
        assert_eq!(server.wait_for(&token, id, &["COMPLETED", "FAILED"]).await["status"], "COMPLETED");
    }
    server.finish().await;
}

#[actix_web::test]
async fn the_websocket_requires_a_token_before_the_upgrade() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let now = chrono::Utc::now().timestamp();
    let sign = |secret: &str, claims: Value| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let b64 = |v: Value| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, v.to_string());
    let bad_tokens = [
        (
            "expired",
            sign(crate::common::api::JWT_SECRET, json!({"sub": "admin", "iat": now - 7200, "exp": now - 3600})),
        ),
        (
            "wrong key",
            sign("some-other-secret-some-other-secret", json!({"sub": "admin", "iat": now, "exp": now + 3600})),
        ),
        (
            "alg none",
            format!(
                "{}.{}.",
                b64(json!({"alg": "none", "typ": "JWT"})),
                b64(json!({"sub": "admin", "exp": now + 3600}))
            ),
        ),
        ("garbage", "garbage".to_string()),
    ];
    for path in ["/ws", "/api/ws", "/"] {
        for (name, bad) in &bad_tokens {
            for via_header in [true, false] {
                let request = if via_header {
                    awc::Client::new().ws(server.url(path)).bearer_auth(bad)
                } else {
                    awc::Client::new().ws(format!("{}?token={bad}", server.url(path)))
                };
                let refused = request.connect().await;
                assert!(
                    matches!(refused, Err(awc::error::WsClientError::InvalidResponseStatus(s)) if s.as_u16() == 401),
                    "{path}: {name} token accepted (header: {via_header})"
                );
            }
        }
        let refused = awc::Client::new().ws(server.url(path)).connect().await;
        match refused {
            Err(awc::error::WsClientError::InvalidResponseStatus(status)) => assert_eq!(status.as_u16(), 401, "{path}"),
            other => panic!("{path}: expected 401, got {:?}", other.map(|(r, _)| r.status())),
        }
        let garbage = awc::Client::new().ws(format!("{}?token=garbage", server.url(path))).connect().await;
        assert!(
            matches!(garbage, Err(awc::error::WsClientError::InvalidResponseStatus(s)) if s.as_u16() == 401),
            "{path}: garbage token accepted"
        );
        let (response, _) =
            awc::Client::new().ws(format!("{}?token={token}", server.url(path))).connect().await.unwrap();
        assert_eq!(response.status().as_u16(), 101, "{path}");
        let (response, _) = awc::Client::new().ws(server.url(path)).bearer_auth(&token).connect().await.unwrap();
        assert_eq!(response.status().as_u16(), 101, "{path}");
    }
    server.finish().await;
}

#[actix_web::test]
async fn a_websocket_client_sees_progress_rise_and_the_job_complete() {
    // 200 frames at 25 ms each, in two sessions: several reports (one each 500 ms) while
    // it encodes, so a pause of the machine (a segment's fsync under load) cannot leave the
    // test with one value.
    let server = TestServer::start_throttled(TestDb::sqlite().await, 25).await;
    let token = server.login().await;
    let (_, mut socket) = awc::Client::new().ws(server.url("/ws")).bearer_auth(&token).connect().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    clips::h264(dir.path(), "live.mkv", "320x240", 8);
    let library = server.library(&token, dir.path()).await;
    server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;

    let mut progress = Vec::new();
    let mut statuses = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !statuses.iter().any(|s: &String| s == "COMPLETED") {
        assert!(Instant::now() < deadline, "no COMPLETED message; statuses {statuses:?}");
        let frame =
            tokio::time::timeout(Duration::from_secs(30), socket.next()).await.expect("a message").unwrap().unwrap();
        let Frame::Text(bytes) = frame else { continue };
        let msg: Value = serde_json::from_slice(&bytes).unwrap();
        for field in ["type", "jobId", "progress", "status"] {
            assert!(msg.get(field).is_some(), "{field} missing in {msg}");
        }
        let allowed = match msg["status"].as_str().unwrap() {
            // QUEUED: the probe after the scan is done with the found file.
            "QUEUED" | "ANALYZING" | "ENCODING" => json!(["pause", "cancel"]),
            "COMPLETED" => json!(["force"]),
            other => panic!("unexpected status {other}"),
        };
        assert_eq!(msg["actions"], allowed, "{msg}");
        match msg["type"].as_str().unwrap() {
            "progress" => progress.push(msg["progress"].as_f64().unwrap()),
            "status" => statuses.push(msg["status"].as_str().unwrap().to_string()),
            other => panic!("unexpected type {other}"),
        }
    }
    assert!(progress.len() >= 2, "too few progress messages: {progress:?}");
    assert!(progress.windows(2).all(|w| w[1] >= w[0]), "progress went back: {progress:?}");
    assert!(progress.last().unwrap() > progress.first().unwrap(), "progress did not rise: {progress:?}");
    let at = |s: &str| statuses.iter().position(|x| x == s).unwrap_or_else(|| panic!("no {s} in {statuses:?}"));
    assert!(at("ANALYZING") < at("ENCODING") && at("ENCODING") < at("COMPLETED"), "{statuses:?}");

    // A new client gets a snapshot of what runs: nothing now.
    let (_, mut late) = awc::Client::new().ws(server.url("/ws")).bearer_auth(&token).connect().await.unwrap();
    let nothing = tokio::time::timeout(Duration::from_millis(600), late.next()).await;
    assert!(nothing.is_err(), "unexpected message with no job running: {nothing:?}");
    server.finish().await;
}

#[actix_web::test]
async fn a_library_created_disabled_is_not_scanned() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    clips::h264(dir.path(), "a.mkv", "320x240", 1);
    let body = json!({"name": "off", "paths": [dir.path()], "enabled": false});
    let (status, library) = server.post("/libraries", Some(&token), &body).await;
    assert_eq!((status, &library["enabled"]), (201, &json!(false)), "{library}");
    let (status, refused) = server.post(&format!("/libraries/{}/scan", library["id"]), Some(&token), &json!({})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("library_disabled")), "{refused}");
    assert!(server.jobs(&token).await.is_empty());
    server.finish().await;
}
