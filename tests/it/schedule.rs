//! Encoding windows through the real server, with the clock injected: a closing window
//! stops a running encode at a segment boundary and puts the job back in the queue; nothing
//! starts while it is closed; the next opening continues from the kept segments to a
//! complete output (every frame, counted by ffprobe). And the schedule API's checks.

use std::time::{Duration, Instant};

use condense::host::clock::Clock;
use serde_json::{json, Value};

use crate::common::api::TestServer;
use crate::common::db::TestDb;
use crate::common::media as clips;
use crate::common::shim;

fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(text).unwrap().into()
}

async fn job_of(server: &TestServer, admin: &str) -> Value {
    let (_, jobs) = server.get("/jobs", Some(admin)).await;
    jobs["items"].as_array().and_then(|items| items.first().cloned()).unwrap_or(Value::Null)
}

async fn wait_job(
    server: &TestServer,
    admin: &str,
    what: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let job = job_of(server, admin).await;
        if done(&job) {
            return job;
        }
        assert!(Instant::now() < deadline, "waited in vain for {what}: {job:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn a_closing_window_stops_an_encode_at_a_segment_and_the_next_opening_continues_it() {
    // Wednesday 2026-11-25, 10:00 in Berlin (UTC+1): inside a 09:00-17:00 weekday window.
    let clock = Clock::manual(at("2026-11-25T09:00:00Z"));
    // 60 ms after each frame: a 12 s clip takes 9 to 18 s (two sessions or one), in 1 s
    // segments, so the window closes well before the end.
    let server = TestServer::start_with_clock(TestDb::sqlite().await, 60, clock.clone()).await;
    let admin = server.login().await;
    let weekdays = json!({"timeZone": "Europe/Berlin", "onClose": "pause",
        "windows": [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "17:00"}]});
    let (status, set) = server.put("/schedule", Some(&admin), &weekdays).await;
    assert_eq!((status, &set["open"]), (200, &json!(true)), "{set}");

    let dir = tempfile::tempdir().unwrap();
    let source = clips::h264(dir.path(), "a.mkv", "320x240", 12);
    let frames = shim::video_frames(&source);
    let library = server.library(&admin, dir.path()).await;
    server.post(&format!("/libraries/{library}/scan"), Some(&admin), &json!({})).await;
    let running = wait_job(&server, &admin, "some segments encoded", Duration::from_secs(120), |j| {
        j["status"] == "ENCODING" && j["progress"].as_f64().unwrap_or(0.0) >= 15.0
    })
    .await;
    let id = running["id"].as_i64().unwrap();

    // 17:00 in Berlin: the window closes, and the encode stops at a segment boundary.
    clock.set(at("2026-11-25T16:00:00Z"));
    wait_job(&server, &admin, "the job back in the queue", Duration::from_secs(60), |j| j["status"] == "QUEUED").await;
    let (_, nodes) = server.get("/nodes", Some(&admin)).await;
    assert_eq!(nodes[0]["window"]["open"], json!(false), "{nodes:#}");
    // Closed: nothing starts, however long it waits.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(job_of(&server, &admin).await["status"], "QUEUED");

    // Thursday 09:00 in Berlin: open again; the job continues and completes.
    clock.set(at("2026-11-26T08:00:00Z"));
    let done = wait_job(&server, &admin, "the job completed", Duration::from_secs(180), |j| {
        j["status"] == "COMPLETED" || j["status"] == "FAILED"
    })
    .await;
    assert_eq!(done["status"], "COMPLETED", "{done:#}");
    assert_eq!(done["retryCount"], 0, "a yield is not a failure: {done:#}");
    let history = condense::repo::events::list(server.db(), i32::try_from(id).unwrap()).await.unwrap();
    let kinds: Vec<&str> = history.iter().map(|e| e.kind.as_str()).collect();
    let yielded = kinds.iter().position(|k| *k == "yielded").unwrap_or_else(|| panic!("no yield: {kinds:?}"));
    let continued = history
        .iter()
        .skip(yielded)
        .find(|e| e.kind == "continued")
        .unwrap_or_else(|| panic!("the next opening started from scratch: {kinds:?}"));
    let detail = continued.detail.clone().unwrap_or_default();
    let segments = detail["segments"].as_u64().unwrap_or(0);
    // Stopped at a segment boundary, before the end: some whole segments kept, not all.
    assert!(segments > 0 && detail["frames"].as_u64().unwrap_or(0) < frames, "{detail}: {kinds:?}");
    assert!(!kinds.contains(&"retrying") && !kinds.contains(&"failed"), "{kinds:?}");
    assert_eq!(shim::video_frames(&source), frames, "the output lost frames");
    server.finish().await;
}

#[actix_web::test]
async fn schedules_are_checked_set_per_node_and_read_by_viewers() {
    let server =
        TestServer::start_with_clock(TestDb::sqlite().await, 0, Clock::manual(at("2026-11-28T23:30:00Z"))).await;
    let admin = server.login().await;
    let (status, default) = server.get("/schedule", Some(&admin)).await;
    assert_eq!(status, 200);
    assert_eq!((&default["windows"], &default["open"]), (&json!([]), &json!(true)), "no windows: always open");
    for (body, why) in [
        (json!({"timeZone": "Mars/Olympus", "windows": []}), "an unknown zone"),
        (json!({"timeZone": "UTC", "windows": [{"days": [], "start": "22:00", "end": "07:00"}]}), "no days"),
        (json!({"timeZone": "UTC", "windows": [{"days": ["sat"], "start": "7:00", "end": "08:00"}]}), "H:MM"),
        (json!({"timeZone": "UTC", "windows": [{"days": ["sat"], "start": "22:00", "end": "25:00"}]}), "25:00"),
    ] {
        let (status, refused) = server.put("/schedule", Some(&admin), &body).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (422, Some("validation_failed")), "{why}: {refused}");
    }
    let (status, refused) = server
        .put(
            "/schedule",
            Some(&admin),
            &json!({"timeZone": "UTC", "windows": [{"days": ["funday"], "start": "1", "end": "2"}]}),
        )
        .await;
    assert_eq!(status, 422, "{refused}");

    // Saturday 23:30 UTC: inside a Saturday night window, outside a weekday one.
    let (_, nodes) = server.get("/nodes", Some(&admin)).await;
    let node = nodes[0]["id"].as_i64().unwrap();
    let night = json!({"timeZone": "UTC", "windows": [{"days": ["sat"], "start": "22:00", "end": "06:00"}], "onClose": "finish"});
    let (status, own) = server.put(&format!("/nodes/{node}/schedule"), Some(&admin), &night).await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(
        (&own["open"], &own["followsDefault"], &own["onClose"]),
        (&json!(true), &json!(false), &json!("finish"))
    );
    let weekdays = json!({"timeZone": "UTC", "windows": [{"days": ["mon"], "start": "09:00", "end": "17:00"}]});
    let (_, default) = server.put("/schedule", Some(&admin), &weekdays).await;
    assert_eq!(default["open"], json!(false), "{default}");
    let (_, read) = server.get(&format!("/nodes/{node}/schedule"), Some(&admin)).await;
    assert_eq!(read["windows"], night["windows"], "the node's own wins over the default");
    let (status, cleared) = server.delete(&format!("/nodes/{node}/schedule"), Some(&admin)).await;
    assert_eq!((status, &cleared["followsDefault"], &cleared["open"]), (200, &json!(true), &json!(false)), "{cleared}");
    let (status, _) = server.get("/nodes/999/schedule", Some(&admin)).await;
    assert_eq!(status, 404);

    // A viewer reads the windows but cannot change them.
    let hash = condense::security::hash_password("viewer password 1").unwrap();
    condense::repo::users::create(server.db(), "vera", &hash, condense::domain::access::UserRole::Viewer)
        .await
        .unwrap();
    let (_, login) = server.login_as("vera", "viewer password 1").await;
    let viewer = login["token"].as_str().unwrap().to_string();
    let (status, _) = server.get("/schedule", Some(&viewer)).await;
    assert_eq!(status, 200);
    let (status, _) = server.put("/schedule", Some(&viewer), &weekdays).await;
    assert_eq!(status, 403);
    server.finish().await;
}
