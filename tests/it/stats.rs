//! Queue statistics, health, the dashboard, insights and Prometheus metrics over a real
//! socket (`TestServer`), on SQLite and PostgreSQL, under both prefixes. Jobs are inserted
//! with known statuses, sizes, codecs and times, and the answers are checked exactly.
//!
//! The TestServer runs the real scheduler (FREE tier: one job at a time). Tests that insert
//! QUEUED jobs insert a running job first, so the scheduler has no free slot and leaves the
//! queue as the test built it.

use std::collections::HashMap;

use chrono::{DateTime, Duration, NaiveDate, NaiveTime, Utc};
use condense::domain::job::JobStatus;
use condense::domain::node::{NodeRole, NodeStatus};
use condense::repo;
use entities::job;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Set};
use serde_json::{json, Value};

use crate::api_test_on_both_databases;
use crate::common::api::{TestServer, PREFIXES};

const NEW_ENDPOINTS: [&str; 9] = [
    "/queue/stats",
    "/system/dashboard",
    "/system/dashboard/health",
    "/insights/stats",
    "/insights/savings",
    "/insights/nodes",
    "/insights/codecs",
    "/statistics",
    "/metrics",
];

/// Inserts a job in `status`, then writes `set` as it is (`updated_at` included, unlike the
/// repository's live update, so a test can date a failure).
async fn job(server: &TestServer, name: &str, status: JobStatus, source_size: i64, set: job::ActiveModel) -> i32 {
    let id = repo::jobs::insert(
        server.db(),
        repo::jobs::NewJob {
            library_id: None,
            file_path: format!("/media/{name}"),
            file_name: name.into(),
            status,
            target_codec: "hevc".into(),
            source_size,
            source_mtime_ns: None,
            source_inode: None,
            forced: false,
        },
    )
    .await
    .unwrap()
    .id;
    job::Entity::update_many().set(set).filter(job::Column::Id.eq(id)).exec(server.db()).await.unwrap();
    id
}

fn today() -> NaiveDate {
    Utc::now().date_naive()
}

/// The first second of the day `days_ago` days before today (UTC): inside that day, and for
/// today inside the last 24 hours.
fn day_start(days_ago: i64) -> DateTime<Utc> {
    (today() - Duration::days(days_ago)).and_time(NaiveTime::MIN).and_utc() + Duration::seconds(1)
}

fn date(days_ago: i64) -> String {
    (today() - Duration::days(days_ago)).to_string()
}

fn probe(frame_rate: f64) -> Value {
    json!({"container": "matroska", "streams": [
        {"index": 0, "kind": "audio", "codec": "aac", "attachedPicture": false},
        {"index": 1, "kind": "video", "codec": "h264", "attachedPicture": false, "frameRate": frame_rate},
    ]})
}

#[allow(clippy::too_many_arguments)]
fn completed(
    node: Option<&str>,
    source_codec: &str,
    target_codec: &str,
    output: i64,
    at: DateTime<Utc>,
    duration_and_rate: Option<(f64, f64)>,
    cpu_ms: Option<i64>,
    wall_ms: Option<i64>,
) -> job::ActiveModel {
    job::ActiveModel {
        node_name: Set(node.map(String::from)),
        source_codec: Set(Some(source_codec.into())),
        target_codec: Set(target_codec.into()),
        output_size: Set(Some(output)),
        completed_at: Set(Some(at)),
        progress: Set(100.0),
        duration_seconds: Set(duration_and_rate.map(|(duration, _)| duration)),
        probe: Set(duration_and_rate.map(|(_, rate)| probe(rate))),
        cpu_time_ms: Set(cpu_ms),
        wall_time_ms: Set(wall_ms),
        ..Default::default()
    }
}

fn failed(node: &str, source_codec: Option<&str>, reason: &str, at: DateTime<Utc>) -> job::ActiveModel {
    job::ActiveModel {
        node_name: Set(Some(node.into())),
        source_codec: Set(source_codec.map(String::from)),
        failure_reason: Set(Some(reason.into())),
        updated_at: Set(at),
        ..Default::default()
    }
}

/// Finished work on nodes alpha and beta over 40 days, and a few files not converted:
///
/// | job | status    | node  | codec            | source -> output | completed / failed | fps |
/// |-----|-----------|-------|------------------|------------------|--------------------|-----|
/// | A   | COMPLETED | alpha | h264 -> hevc     | 1000 -> 400      | today              | 50  |
/// | B   | COMPLETED | beta  | h264 -> hevc     | 2000 -> 1500     | today              | 30  |
/// | F   | COMPLETED | beta  | h264 (kept)      | 300 -> 300       | today              |     |
/// | C   | COMPLETED | alpha | mpeg2video -> av1| 5000 -> 1000     | 3 days ago         |     |
/// | D   | COMPLETED | beta  | vp9 -> hevc      | 100 -> 90        | 29 days ago        |     |
/// | E   | COMPLETED | alpha | h264 -> hevc     | 10000 -> 0       | 30 days ago        |     |
/// | G   | FAILED    | beta  | vc1              |                  | 1 hour ago         |     |
/// | H   | FAILED    | alpha | (not analysed)   |                  | 2 days ago         |     |
/// | I   | FAILED    | alpha | h264             |                  | 40 days ago        |     |
/// | J   | FAILED    |       | (not analysed)   |                  | 30 days ago        |     |
/// | S   | SKIPPED   |       | hevc             |                  |                    |     |
/// | P   | PAUSED    |       | vp9              |                  |                    |     |
///
/// CPU / wall time: A 60 s / 30 s, B 5 s / 10 s, C 40 s / 20 s.
struct Fixture {
    g: i32,
    h: i32,
}

async fn seed(server: &TestServer) -> Fixture {
    use JobStatus::*;
    let today = day_start(0);
    let a = completed(Some("alpha"), "h264", "hevc", 400, today, Some((60.0, 25.0)), Some(60_000), Some(30_000));
    job(server, "a.mkv", Completed, 1000, a).await;
    let b = completed(Some("beta"), "h264", "hevc", 1500, today, Some((10.0, 30.0)), Some(5_000), Some(10_000));
    job(server, "b.mkv", Completed, 2000, b).await;
    // Not smaller: the original stayed, recorded with its own size.
    job(server, "f.mkv", Completed, 300, completed(Some("beta"), "h264", "hevc", 300, today, None, None, None)).await;
    let c = completed(Some("alpha"), "mpeg2video", "av1", 1000, day_start(3), None, Some(40_000), Some(20_000));
    job(server, "c.mpg", Completed, 5000, c).await;
    job(server, "d.webm", Completed, 100, completed(Some("beta"), "vp9", "hevc", 90, day_start(29), None, None, None))
        .await;
    let e = completed(Some("alpha"), "h264", "hevc", 0, day_start(30), None, None, None);
    job(server, "e.mp4", Completed, 10000, e).await;
    let g = job(
        server,
        "g.wmv",
        Failed,
        700,
        failed("beta", Some("vc1"), "unsupported codec", Utc::now() - Duration::hours(1)),
    )
    .await;
    let h = job(
        server,
        "h.avi",
        Failed,
        800,
        failed("alpha", None, "file validation failed", Utc::now() - Duration::days(2)),
    )
    .await;
    job(server, "i.mp4", Failed, 900, failed("alpha", Some("h264"), "timeout", Utc::now() - Duration::days(40))).await;
    // Just before the first day of the 30-day window.
    let j = job::ActiveModel { updated_at: Set(day_start(30)), ..Default::default() };
    job(server, "j.mp4", Failed, 900, j).await;
    let codec = |name: &str| job::ActiveModel { source_codec: Set(Some(name.into())), ..Default::default() };
    job(server, "s.mkv", Skipped, 400, codec("hevc")).await;
    job(server, "p.webm", Paused, 500, codec("vp9")).await;
    Fixture { g, h }
}

// ---------------------------------------------------------------- authentication

#[actix_web::test]
async fn the_new_endpoints_need_a_token_under_both_prefixes() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    for path in NEW_ENDPOINTS {
        for prefix in PREFIXES {
            let path = format!("{prefix}{path}");
            let (status, body) = server.get(&path, None).await;
            assert_eq!((status, &body["error"]["code"]), (401, &json!("unauthorized")), "{path}: {body}");
            let (status, headers, _) = server.send(actix_web::http::Method::GET, &path, Some(&token), None).await;
            assert_eq!(status, 200, "{path}");
            let content_type = headers.get("content-type").unwrap().to_str().unwrap();
            let expected = if path.ends_with("/metrics") { "text/plain; version=0.0.4" } else { "application/json" };
            assert!(content_type.starts_with(expected), "{path}: {content_type}");
        }
    }
    server.finish().await;
}

// ---------------------------------------------------------------- queue statistics

async fn queue_stats_count_every_status(server: &TestServer) {
    use JobStatus::*;
    let token = server.login().await;
    let (status, empty) = server.get("/queue/stats", Some(&token)).await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!((&empty["throughputPerHour"], &empty["estimatedCompletionHours"]), (&json!(0.0), &Value::Null));

    let now = Utc::now();
    // Running first (see the module comment), each held by a node under its lease: flagged
    // stalled, silent for 11 minutes, fresh.
    let held = || job::ActiveModel { lease_id: Set(Some("lease".into())), ..Default::default() };
    job(server, "enc-flagged.mkv", Encoding, 1, job::ActiveModel { stalled: Set(true), ..held() }).await;
    let silent = job::ActiveModel { last_progress_at: Set(Some(now - Duration::minutes(11))), ..held() };
    job(server, "enc-silent.mkv", Encoding, 1, silent).await;
    let fresh = job::ActiveModel { last_progress_at: Set(Some(now)), ..held() };
    job(server, "enc-fresh.mkv", Encoding, 1, fresh).await;
    // Ten minutes exactly is not yet stalled.
    let ten = job::ActiveModel { last_progress_at: Set(Some(now - Duration::seconds(590))), ..held() };
    job(server, "analyzing.mkv", Analyzing, 1, ten).await;
    // A found file in the probe after a scan: ANALYZING, no node's, no worker.
    job(server, "probing.mkv", Analyzing, 1, job::ActiveModel::default()).await;
    for n in 0..4 {
        job(server, &format!("queued-{n}.mkv"), Queued, 1, job::ActiveModel::default()).await;
    }
    job(server, "pending.mkv", Pending, 1, job::ActiveModel::default()).await;
    job(server, "paused.mkv", Paused, 1, job::ActiveModel::default()).await;
    for (n, hours_ago) in [1, 5, 23, 25, 72].into_iter().enumerate() {
        let set = job::ActiveModel { completed_at: Set(Some(now - Duration::hours(hours_ago))), ..Default::default() };
        job(server, &format!("done-{n}.mkv"), Completed, 1, set).await;
    }
    job(server, "failed-0.mkv", Failed, 1, job::ActiveModel::default()).await;
    job(server, "failed-1.mkv", Failed, 1, job::ActiveModel::default()).await;
    job(server, "skipped.mkv", Skipped, 1, job::ActiveModel::default()).await;
    job(server, "cancelled.mkv", Cancelled, 1, job::ActiveModel::default()).await;

    for prefix in PREFIXES {
        let (status, stats) = server.get(&format!("{prefix}/queue/stats"), Some(&token)).await;
        assert_eq!(status, 200, "{stats}");
        // 3 completed in the last 24 hours: 0.125 per hour; (4 queued + 2 analyzing) / 0.125.
        assert_eq!(
            stats,
            json!({
                "pending": 1, "queued": 4, "analyzing": 2, "encoding": 3, "paused": 1, "completed": 5,
                "failed": 2, "skipped": 1, "cancelled": 1, "stalled": 2, "activeWorkers": 4,
                "throughputPerHour": 0.125, "estimatedCompletionHours": 48.0,
            })
        );
    }
}
api_test_on_both_databases!(queue_stats_count_every_status);

// ---------------------------------------------------------------- health

fn check<'a>(health: &'a Value, name: &str) -> &'a Value {
    health["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("{health}"))
}

async fn health_follows_stuck_jobs_and_nodes(server: &TestServer) {
    let token = server.login().await;
    let health = |prefix: &'static str| {
        let token = token.clone();
        async move {
            let (status, body) = server.get(&format!("{prefix}/system/dashboard/health"), Some(&token)).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let body = health("").await;
    let names: Vec<&str> = body["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu", "memory", "database", "queue", "nodes"]);
    for check in body["checks"].as_array().unwrap() {
        let mut keys: Vec<&str> = check.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["level", "message", "name", "value"], "{check}");
        assert!(["HEALTHY", "WARNING", "CRITICAL"].contains(&check["level"].as_str().unwrap()), "{check}");
    }
    // CPU and memory are this machine's: only their shape is known.
    assert!(check(&body, "cpu")["value"].is_number() && check(&body, "memory")["value"].is_number());
    assert_eq!(
        (&check(&body, "database")["level"], &check(&body, "database")["value"]),
        (&json!("HEALTHY"), &json!(true))
    );
    assert_eq!((&check(&body, "queue")["level"], &check(&body, "queue")["value"]), (&json!("HEALTHY"), &json!(0)));
    assert_eq!(check(&body, "nodes")["level"], "HEALTHY", "{body}");

    let stalled = || job::ActiveModel { stalled: Set(true), ..Default::default() };
    job(server, "stuck-0.mkv", JobStatus::Encoding, 1, stalled()).await;
    // Not running: never stuck, whatever its flag says.
    job(server, "paused.mkv", JobStatus::Paused, 1, stalled()).await;
    for prefix in PREFIXES {
        let body = health(prefix).await;
        let queue = check(&body, "queue");
        assert_eq!(
            (&queue["level"], &queue["value"], &queue["message"]),
            (&json!("WARNING"), &json!(1), &json!("1 stuck job"))
        );
        assert_ne!(body["overall"], "HEALTHY", "{body}");
    }
    for n in 1..6 {
        job(server, &format!("stuck-{n}.mkv"), JobStatus::Analyzing, 1, stalled()).await;
    }
    let body = health("/api").await;
    assert_eq!((&check(&body, "queue")["level"], &check(&body, "queue")["value"]), (&json!("CRITICAL"), &json!(6)));
    assert_eq!(body["overall"], "CRITICAL");

    let facts = |name: &str, role| repo::nodes::NodeFacts {
        address: name.into(),
        cores: 4,
        encoders: vec![],
        ..crate::common::rows::node(name, role)
    };
    let worker = repo::nodes::upsert(server.db(), facts("worker", NodeRole::Linked)).await.unwrap();
    repo::nodes::set_status(server.db(), worker.id, NodeStatus::Offline, None).await.unwrap();
    let nodes = check(&health("").await, "nodes").clone();
    assert_eq!(
        (&nodes["level"], &nodes["value"], &nodes["message"]),
        (&json!("WARNING"), &json!(1), &json!("1 of 2 nodes offline"))
    );
    let main = repo::nodes::find(server.db(), "main").await.unwrap().unwrap();
    assert_eq!(main.role, NodeRole::Main);
    repo::nodes::set_status(server.db(), main.id, NodeStatus::Offline, None).await.unwrap();
    for prefix in PREFIXES {
        let body = health(prefix).await;
        let nodes = check(&body, "nodes");
        assert_eq!((&nodes["level"], &nodes["message"]), (&json!("CRITICAL"), &json!("main node offline")));
        assert_eq!(body["overall"], "CRITICAL");
    }
}
api_test_on_both_databases!(health_follows_stuck_jobs_and_nodes);

// ---------------------------------------------------------------- dashboard

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> =
        value.as_object().unwrap_or_else(|| panic!("not an object: {value}")).keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

async fn dashboard_has_every_panel(server: &TestServer) {
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let media = std::fs::canonicalize(dir.path()).unwrap().to_string_lossy().into_owned();
    let (status, library) = server.post("/libraries", Some(&token), &json!({"name": "films", "paths": [media]})).await;
    assert_eq!(status, 201, "{library}");
    let encoding = job::ActiveModel {
        fps: Set(24.0),
        progress: Set(40.0),
        node_name: Set(Some("main".into())),
        lease_id: Set(Some("lease".into())),
        ..Default::default()
    };
    let encoding = job(server, "running.mkv", JobStatus::Encoding, 10, encoding).await;
    let held = job::ActiveModel { lease_id: Set(Some("lease".into())), ..Default::default() };
    let analyzing = job(server, "probing.mkv", JobStatus::Analyzing, 10, held).await;
    job(server, "waiting.mkv", JobStatus::Queued, 10, job::ActiveModel::default()).await;

    for prefix in PREFIXES {
        let (status, dashboard) = server.get(&format!("{prefix}/system/dashboard"), Some(&token)).await;
        assert_eq!(status, 200, "{dashboard}");
        assert_eq!(keys(&dashboard), ["activeJobs", "health", "nodes", "queue", "system"]);
        assert_eq!(keys(&dashboard["health"]), ["checks", "overall"]);
        assert_eq!(dashboard["health"]["checks"].as_array().unwrap().len(), 5);
        assert_eq!((&dashboard["queue"]["queued"], &dashboard["queue"]["activeWorkers"]), (&json!(1), &json!(2)));

        let system = &dashboard["system"];
        assert_eq!(keys(system), ["cpu", "disks", "gpus", "memory"]);
        assert_eq!(keys(&system["cpu"]), ["cores", "load1", "loadRatio"]);
        assert!(system["cpu"]["cores"].as_u64().unwrap() >= 1);
        assert_eq!(keys(&system["memory"]), ["percent", "total", "trend", "used"]);
        let memory = &system["memory"];
        assert!(memory["used"].as_u64().unwrap() <= memory["total"].as_u64().unwrap(), "{memory}");
        let trend = memory["trend"].as_array().unwrap();
        assert!(!trend.is_empty(), "a request samples memory when the trend has nothing recent");
        assert!(trend.iter().all(|s| keys(s) == ["at", "percent"]), "{memory}");
        // No NVIDIA driver here (CI): an empty list; with one, each GPU's facts.
        for gpu in system["gpus"].as_array().unwrap() {
            assert_eq!(
                keys(gpu),
                [
                    "encoderUtilizationPercent",
                    "memoryTotal",
                    "memoryUsed",
                    "name",
                    "temperatureC",
                    "utilizationPercent"
                ]
            );
        }
        let disks = system["disks"].as_array().unwrap();
        assert_eq!(disks.len(), 1, "{disks:?}");
        let disk = &disks[0];
        assert_eq!(keys(disk), ["atRisk", "free", "path", "total", "used", "usedPercent"]);
        assert_eq!(disk["path"], media.as_str());
        assert!(disk["total"].as_u64().unwrap() > 0);
        let percent = disk["usedPercent"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&percent), "{disk}");
        assert_eq!(disk["atRisk"], percent > 90.0);

        let active: Vec<i64> =
            dashboard["activeJobs"].as_array().unwrap().iter().map(|j| j["id"].as_i64().unwrap()).collect();
        assert_eq!(active, [i64::from(encoding), i64::from(analyzing)]);
        let running = &dashboard["activeJobs"][0];
        assert_eq!(
            (&running["status"], &running["fps"], &running["node"]),
            (&json!("ENCODING"), &json!(24.0), &json!("main"))
        );
        assert!(running["fileName"].is_string() && running["savedBytes"].is_i64());
        let nodes = dashboard["nodes"].as_array().unwrap();
        assert_eq!((nodes.len(), &nodes[0]["name"], &nodes[0]["role"]), (1, &json!("main"), &json!("main")));
        assert!(nodes[0]["loadRatio"].is_number());
    }
}
api_test_on_both_databases!(dashboard_has_every_panel);

// ---------------------------------------------------------------- insights

async fn insights_stats_history_failures_storage_and_time(server: &TestServer) {
    let token = server.login().await;
    let fixture = seed(server).await;
    let (status, stats) = server.get("/insights/stats", Some(&token)).await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(keys(&stats), ["encodingTime", "failedJobs", "history", "storage", "totals", "vmaf"]);
    assert_eq!(stats["vmaf"], json!([]), "no job measured a VMAF");

    let history = stats["history"].as_array().unwrap();
    assert_eq!(history.len(), 30);
    let dates: Vec<&str> = history.iter().map(|d| d["date"].as_str().unwrap()).collect();
    let expected_dates: Vec<String> = (0..30).rev().map(date).collect();
    assert_eq!(dates, expected_dates);
    for (days_ago, day) in (0..30).rev().zip(history) {
        let expected = match days_ago {
            // A (50 fps) and B (30 fps) and F (speed unknown).
            0 => json!({"date": date(0), "completed": 3, "savedBytes": 1100, "averageFps": 40.0}),
            3 => json!({"date": date(3), "completed": 1, "savedBytes": 4000, "averageFps": 0.0}),
            29 => json!({"date": date(29), "completed": 1, "savedBytes": 10, "averageFps": 0.0}),
            _ => json!({"date": date(days_ago), "completed": 0, "savedBytes": 0, "averageFps": 0.0}),
        };
        assert_eq!(day, &expected);
    }
    // E completed 30 days ago: outside the window.
    assert_eq!(stats["totals"], json!({"completed": 5, "savedBytes": 5110, "averageFps": 40.0}));

    let failed = stats["failedJobs"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "I and J failed more than 29 days ago: {failed:?}");
    assert_eq!(keys(&failed[0]), ["date", "fileName", "jobId", "node", "reason"]);
    assert_eq!(
        (&failed[0]["jobId"], &failed[0]["fileName"], &failed[0]["reason"], &failed[0]["node"]),
        (&json!(fixture.g), &json!("g.wmv"), &json!("unsupported codec"), &json!("beta"))
    );
    assert_eq!(
        (&failed[1]["jobId"], &failed[1]["reason"], &failed[1]["node"]),
        (&json!(fixture.h), &json!("file validation failed"), &json!("alpha"))
    );
    let failed_at: DateTime<Utc> = failed[1]["date"].as_str().unwrap().parse().unwrap();
    assert_eq!(failed_at.date_naive().to_string(), date(2));

    // All time: savings 600 + 500 + 0 + 4000 + 10 + 10000; percents 60, 25, 0, 80, 10, 100.
    assert_eq!(stats["storage"]["totalSavedBytes"], 15110);
    assert_eq!(stats["storage"]["filesProcessed"], 6);
    let average = stats["storage"]["averageSavingsPercent"].as_f64().unwrap();
    assert!((average - 275.0 / 6.0).abs() < 1e-9, "{average}");
    // CPU 60 + 5 + 40 s over wall 30 + 10 + 20 s.
    assert_eq!(stats["encodingTime"], json!({"cpuSeconds": 105.0, "wallSeconds": 60.0, "efficiency": 1.75}));

    for prefix in PREFIXES {
        for path in ["/insights/stats", "/statistics"] {
            let (status, again) = server.get(&format!("{prefix}{path}"), Some(&token)).await;
            assert_eq!(status, 200, "{again}");
            assert_eq!(again, stats, "{prefix}{path}");
        }
    }
}
api_test_on_both_databases!(insights_stats_history_failures_storage_and_time);

async fn insights_show_the_vmaf_each_library_measured(server: &TestServer) {
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let body = json!({"name": "films", "paths": [dir.path()], "qualityMode": "vmaf", "watch": false, "enabled": false});
    let (status, library) = server.post("/libraries", Some(&token), &body).await;
    assert_eq!(status, 201, "{library}");
    let library = i32::try_from(library["id"].as_i64().unwrap()).unwrap();
    let measured = |vmaf: Option<f64>, p5: Option<f64>, crf: Option<i32>| job::ActiveModel {
        library_id: Set(Some(library)),
        vmaf: Set(vmaf),
        vmaf_p5: Set(p5),
        chosen_quality: Set(crf),
        ..Default::default()
    };
    job(server, "x.mkv", JobStatus::Completed, 1000, measured(Some(96.0), Some(93.0), Some(24))).await;
    job(server, "y.mkv", JobStatus::Completed, 1000, measured(Some(95.0), Some(91.0), Some(26))).await;
    // Not measured (a crf-mode run before the change), and not completed: left out.
    job(server, "z.mkv", JobStatus::Completed, 1000, measured(None, None, None)).await;
    job(server, "w.mkv", JobStatus::Failed, 1000, measured(Some(80.0), Some(70.0), Some(40))).await;

    let (status, stats) = server.get("/insights/stats", Some(&token)).await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(
        stats["vmaf"],
        json!([{"libraryId": library, "libraryName": "films", "jobs": 2, "meanVmaf": 95.5, "lowestP5": 91.0, "meanQuality": 25.0}])
    );
}
api_test_on_both_databases!(insights_show_the_vmaf_each_library_measured);

#[actix_web::test]
async fn insights_of_an_empty_installation_are_zeros() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let (_, stats) = server.get("/insights/stats", Some(&token)).await;
    assert_eq!(stats["history"].as_array().unwrap().len(), 30);
    assert_eq!(stats["totals"], json!({"completed": 0, "savedBytes": 0, "averageFps": 0.0}));
    assert_eq!(stats["failedJobs"], json!([]));
    assert_eq!(stats["storage"], json!({"totalSavedBytes": 0, "filesProcessed": 0, "averageSavingsPercent": 0.0}));
    assert_eq!(stats["encodingTime"], json!({"cpuSeconds": 0.0, "wallSeconds": 0.0, "efficiency": 0.0}));
    let (_, codecs) = server.get("/insights/codecs", Some(&token)).await;
    assert!(codecs.as_array().unwrap().iter().all(|c| c["count"] == 0 && c["share"] == 0.0), "{codecs}");
    let (_, nodes) = server.get("/insights/nodes", Some(&token)).await;
    assert_eq!(
        nodes,
        json!([{"node": "main", "jobs": 0, "completed": 0, "failed": 0, "successRate": 0.0, "savedBytes": 0,
                "throughputPerHour": 0.0}])
    );
    server.finish().await;
}

fn savings_rows(body: &Value) -> Vec<(String, i64, i64)> {
    body["days"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|d| {
            assert_eq!(keys(d), ["cumulativeBytes", "date", "savedBytes"]);
            (
                d["date"].as_str().unwrap().to_string(),
                d["savedBytes"].as_i64().unwrap(),
                d["cumulativeBytes"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn savings_trend_is_daily_and_cumulative(server: &TestServer) {
    let token = server.login().await;
    seed(server).await;
    let expected = |days: i64| -> Vec<(String, i64, i64)> {
        let per_day: HashMap<i64, i64> = [(0, 1100), (3, 4000), (29, 10), (30, 10000)].into();
        let mut cumulative = 0;
        (0..days)
            .rev()
            .map(|days_ago| {
                let saved = per_day.get(&days_ago).copied().unwrap_or(0);
                cumulative += saved;
                (date(days_ago), saved, cumulative)
            })
            .collect()
    };
    for prefix in PREFIXES {
        let (status, default) = server.get(&format!("{prefix}/insights/savings"), Some(&token)).await;
        assert_eq!(status, 200, "{default}");
        let rows = savings_rows(&default);
        assert_eq!(rows, expected(30));
        assert_eq!(rows.last().unwrap().2, 5110);
        for days in [1, 4, 30, 31, 365] {
            let (status, body) = server.get(&format!("{prefix}/insights/savings?days={days}"), Some(&token)).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(savings_rows(&body), expected(days), "days={days}");
        }
        let (_, year) = server.get(&format!("{prefix}/insights/savings?days=365"), Some(&token)).await;
        assert_eq!(savings_rows(&year).last().unwrap().2, 15110);
        for bad in ["0", "366", "-1", "abc", "1.5", "", "99999999999"] {
            let (status, body) = server.get(&format!("{prefix}/insights/savings?days={bad}"), Some(&token)).await;
            assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_query")), "days={bad}: {body}");
        }
    }
}
api_test_on_both_databases!(savings_trend_is_daily_and_cumulative);

async fn node_performance_per_node(server: &TestServer) {
    let token = server.login().await;
    seed(server).await;
    for prefix in PREFIXES {
        let (status, nodes) = server.get(&format!("{prefix}/insights/nodes"), Some(&token)).await;
        assert_eq!(status, 200, "{nodes}");
        // alpha: A, C, E completed (A today), H and I failed; beta: B, D, F completed (B and
        // F today), G failed; main (the registered node) ran nothing.
        assert_eq!(
            nodes,
            json!([
                {"node": "alpha", "jobs": 5, "completed": 3, "failed": 2, "successRate": 0.6, "savedBytes": 14600,
                 "throughputPerHour": 1.0 / 24.0},
                {"node": "beta", "jobs": 4, "completed": 3, "failed": 1, "successRate": 0.75, "savedBytes": 510,
                 "throughputPerHour": 2.0 / 24.0},
                {"node": "main", "jobs": 0, "completed": 0, "failed": 0, "successRate": 0.0, "savedBytes": 0,
                 "throughputPerHour": 0.0},
            ])
        );
    }
}
api_test_on_both_databases!(node_performance_per_node);

async fn codec_distribution_is_what_the_libraries_hold(server: &TestServer) {
    let token = server.login().await;
    seed(server).await;
    for prefix in PREFIXES {
        let (status, codecs) = server.get(&format!("{prefix}/insights/codecs"), Some(&token)).await;
        assert_eq!(status, 200, "{codecs}");
        // Converted to their target: A, B, D, E (hevc), C (av1). As found: F (kept, h264),
        // I (h264), S (hevc), P (vp9), G (vc1: other). H was never analysed: not counted.
        assert_eq!(
            codecs,
            json!([
                {"codec": "h264", "count": 2, "share": 0.2},
                {"codec": "hevc", "count": 5, "share": 0.5},
                {"codec": "av1", "count": 1, "share": 0.1},
                {"codec": "vp9", "count": 1, "share": 0.1},
                {"codec": "other", "count": 1, "share": 0.1},
            ])
        );
    }
}
api_test_on_both_databases!(codec_distribution_is_what_the_libraries_hold);

// ---------------------------------------------------------------- Prometheus

/// `name{labels} value` lines, comments checked and skipped.
fn samples(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix('#') {
            assert!(comment.starts_with(" HELP condense_") || comment.starts_with(" TYPE condense_"), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(series.starts_with("condense_"), "{line}");
        assert!(samples.insert(series.to_string(), value.parse::<f64>().unwrap()).is_none(), "{line} twice");
    }
    samples
}

async fn prometheus_metrics(server: &TestServer) {
    let token = server.login().await;
    seed(server).await;
    job(server, "enc-1.mkv", JobStatus::Encoding, 1, job::ActiveModel { fps: Set(12.5), ..Default::default() }).await;
    job(server, "enc-2.mkv", JobStatus::Encoding, 1, job::ActiveModel { fps: Set(30.0), ..Default::default() }).await;
    job(server, "ana.mkv", JobStatus::Analyzing, 1, job::ActiveModel { fps: Set(99.0), ..Default::default() }).await;
    job(server, "queued.mkv", JobStatus::Queued, 1, job::ActiveModel::default()).await;
    let odd = repo::nodes::upsert(
        server.db(),
        repo::nodes::NodeFacts {
            address: "edge".into(),
            memory_total: 1,
            encoders: vec![],
            ..crate::common::rows::node("edge \"1\"\\x", NodeRole::Linked)
        },
    )
    .await
    .unwrap();
    repo::nodes::set_status(server.db(), odd.id, NodeStatus::Degraded, None).await.unwrap();

    for prefix in PREFIXES {
        let (status, headers, body) =
            server.send(actix_web::http::Method::GET, &format!("{prefix}/metrics"), Some(&token), None).await;
        assert_eq!(status, 200);
        let content_type = headers.get("content-type").unwrap().to_str().unwrap();
        assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
        let text = String::from_utf8(body).unwrap();
        let samples = samples(&text);
        let jobs = [
            ("PENDING", 0.0),
            ("QUEUED", 1.0),
            ("ANALYZING", 1.0),
            ("ENCODING", 2.0),
            ("PAUSED", 1.0),
            ("COMPLETED", 6.0),
            ("SKIPPED", 1.0),
            ("FAILED", 4.0),
            ("CANCELLED", 0.0),
        ];
        for (status, n) in jobs {
            assert_eq!(samples.get(&format!("condense_jobs{{status=\"{status}\"}}")), Some(&n), "{status}\n{text}");
        }
        assert_eq!(samples["condense_encode_fps"], 42.5);
        assert_eq!(samples["condense_bytes_saved_total"], 15110.0);
        for (node, online, offline, degraded) in [("main", 1.0, 0.0, 0.0), (r#"edge \"1\"\\x"#, 0.0, 0.0, 1.0)] {
            for (status, value) in [("ONLINE", online), ("OFFLINE", offline), ("DEGRADED", degraded)] {
                let series = format!("condense_node_status{{node=\"{node}\",status=\"{status}\"}}");
                assert_eq!(samples.get(&series), Some(&value), "{series}\n{text}");
            }
        }
        let version = format!("condense_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
        assert_eq!(samples.get(&version), Some(&1.0), "{text}");
        assert_eq!(samples.len(), 9 + 1 + 1 + 6 + 1, "{text}");
        assert!(
            text.contains("# TYPE condense_jobs gauge\n")
                && text.contains("# TYPE condense_bytes_saved_total counter\n")
        );
    }
}
api_test_on_both_databases!(prometheus_metrics);
