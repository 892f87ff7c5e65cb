//! Library health (issue 38) through the real server: a check of a library of clips made
//! here (good ones, a truncated one, a `.mkv` that is not media) started, followed and read
//! through the API; a second run skips the files unchanged since their `ok` unless `all`; a
//! cancel stops a run; a file whose last check found it damaged is SKIPPED "damaged: …"
//! when its job runs, unless the finding is ignored; and a scheduled check tells a loopback
//! webhook `file.damaged` and asks loopback servers answering as Sonarr v3 and Radarr v3 for
//! a new copy, with the exact requests their APIs document.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use crate::common::api::{serve, TestServer};
use crate::common::health::{ended, verdict_of};
use crate::common::media as clips;

/// A clip cut short in the middle of its data.
fn truncated(dir: &Path, name: &str) {
    let whole = clips::h264(dir, &format!("whole-{name}"), "320x240", 2);
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::write(dir.join(name), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::remove_file(whole).unwrap();
}

#[actix_web::test]
async fn a_quick_check_finds_the_truncated_and_the_non_media_file_and_skips_unchanged_ok_files() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    clips::h264(dir.path(), "good-1.mkv", "320x240", 1);
    clips::h264(dir.path(), "good-2.mkv", "320x240", 1);
    std::fs::write(dir.path().join("notes.mkv"), b"these are not the frames you are looking for").unwrap();
    truncated(dir.path(), "cut.mkv");
    let library = server.library(&token, dir.path()).await;

    let (status, never) = server.get(&format!("/libraries/{library}/health"), Some(&token)).await;
    assert_eq!((status, &never["run"], &never["files"]), (200, &Value::Null, &json!([])), "{never}");
    let (status, run) =
        server.post(&format!("/libraries/{library}/health"), Some(&token), &json!({"depth": "quick"})).await;
    assert_eq!((status, run["status"].as_str(), run["depth"].as_str()), (202, Some("RUNNING"), Some("quick")), "{run}");
    let (status, again) =
        server.post(&format!("/libraries/{library}/health"), Some(&token), &json!({"depth": "quick"})).await;
    assert!(status == 409 || status == 202, "{again}");
    let health = ended(&server.url(""), &token, library, 120).await;
    assert_eq!(health["run"]["status"], "DONE", "{health}");
    assert_eq!((health["run"]["filesTotal"].as_i64(), health["run"]["filesDone"].as_i64()), (Some(4), Some(4)));
    assert_eq!(verdict_of(&health, "notes.mkv")["verdict"], "unreadable", "{health}");
    let cut = verdict_of(&health, "cut.mkv")["verdict"].as_str().unwrap().to_string();
    assert!(cut == "damaged" || cut == "unreadable", "{health}");
    assert_eq!(verdict_of(&health, "good-1.mkv")["verdict"], "ok", "{health}");
    assert_eq!(verdict_of(&health, "good-2.mkv")["verdict"], "ok", "{health}");
    assert_eq!(health["counts"]["ok"], 2, "{health}");
    // Findings first, and a filter by verdict.
    assert_ne!(health["files"][0]["verdict"], "ok", "{health}");
    let (_, oks) = server.get(&format!("/libraries/{library}/health?verdict=ok"), Some(&token)).await;
    assert_eq!(oks["total"], 2, "{oks}");

    // Unchanged ok files are not read again; `all` reads every file.
    server.post(&format!("/libraries/{library}/health"), Some(&token), &json!({"depth": "quick"})).await;
    let second = ended(&server.url(""), &token, library, 120).await;
    assert_eq!(second["run"]["filesTotal"], 2, "{second}");
    server.post(&format!("/libraries/{library}/health"), Some(&token), &json!({"depth": "quick", "all": true})).await;
    let every = ended(&server.url(""), &token, library, 120).await;
    assert_eq!(every["run"]["filesTotal"], 4, "{every}");

    // A new copy needs a confirmation, and a Sonarr or Radarr that holds the file: none
    // may, and the dashboard offers none.
    assert_eq!(verdict_of(&every, "notes.mkv")["newCopyFrom"], json!([]), "{every}");
    let notes = verdict_of(&every, "notes.mkv")["id"].as_i64().unwrap();
    let regrab = format!("/libraries/{library}/health/files/{notes}/regrab");
    let (status, refused) = server.post(&regrab, Some(&token), &json!({"confirm": false})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (422, Some("validation_failed")), "{refused}");
    let (status, refused) = server.post(&regrab, Some(&token), &json!({"confirm": true})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("not_held")), "{refused}");
    server.finish().await;
}

#[actix_web::test]
async fn a_cancel_stops_a_running_check() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let clip = clips::h264(dir.path(), "clip-00.mkv", "320x240", 2);
    for i in 1..40 {
        std::fs::copy(&clip, dir.path().join(format!("clip-{i:02}.mkv"))).unwrap();
    }
    let library = server.library(&token, dir.path()).await;
    let health = format!("/libraries/{library}/health");
    let (status, _) = server.delete(&health, Some(&token)).await;
    assert_eq!(status, 409);
    let (status, run) = server.post(&health, Some(&token), &json!({"depth": "thorough"})).await;
    assert_eq!(status, 202, "{run}");
    let (status, body) = server.delete(&health, Some(&token)).await;
    assert_eq!(status, 202, "{body}");
    let stopped = ended(&server.url(""), &token, library, 120).await;
    assert_eq!(stopped["run"]["status"], "CANCELLED", "{stopped}");
    assert!(stopped["run"]["filesDone"].as_i64().unwrap() < 40, "{stopped}");
    // The slot it held is free: a new run starts and ends.
    let (status, _) = server.post(&health, Some(&token), &json!({"depth": "quick"})).await;
    assert_eq!(status, 202);
    assert_eq!(ended(&server.url(""), &token, library, 120).await["run"]["status"], "DONE");
    server.finish().await;
}

#[actix_web::test]
async fn a_damaged_file_is_skipped_unless_its_finding_is_ignored() {
    // One job slot: the jobs run for real.
    let server = TestServer::start_throttled(crate::common::db::TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let damaged = clips::h264(dir.path(), "damaged.mkv", "320x240", 1);
    let ignored = clips::h264(dir.path(), "ignored.mkv", "320x240", 1);
    // Disabled: no scan (no job) until the findings are in.
    let library = server.library_with(&token, dir.path(), json!({"enabled": false})).await;
    let (_, stored) = server.get(&format!("/libraries/{library}"), Some(&token)).await;
    let root = stored["paths"][0].as_str().unwrap().to_string();
    for path in [&damaged, &ignored] {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).unwrap();
        let found = condense::repo::health::FoundFile {
            root: root.clone(),
            path: Path::new(&root).join(path.file_name().unwrap()),
            size: m.len() as i64,
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        };
        let finding = condense::media::health::FileHealth {
            depth: condense::media::health::Depth::Thorough,
            verdict: condense::media::health::Verdict::Damaged,
            first_error_seconds: Some(0.48),
            message: Some("error while decoding MB 7 3".into()),
            error_count: 3,
            streams: Vec::new(),
        };
        condense::repo::health::record(server.db(), library as i32, &found, &finding, "main").await.unwrap();
    }
    let (_, health) = server.get(&format!("/libraries/{library}/health?verdict=damaged"), Some(&token)).await;
    assert_eq!(health["total"], 2, "{health}");
    let id = verdict_of(&health, "ignored.mkv")["id"].as_i64().unwrap();
    let (status, changed) = server
        .post(&format!("/libraries/{library}/health/files/{id}/ignore"), Some(&token), &json!({"ignored": true}))
        .await;
    assert_eq!((status, &changed["ignored"]), (200, &json!(true)), "{changed}");

    let (status, _) = server.put(&format!("/libraries/{library}"), Some(&token), &json!({"enabled": true})).await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(180);
    let jobs = loop {
        let jobs = server.jobs(&token).await;
        if jobs.len() == 2
            && jobs.iter().all(|j| ["SKIPPED", "COMPLETED", "FAILED"].contains(&j["status"].as_str().unwrap()))
        {
            break jobs;
        }
        assert!(Instant::now() < deadline, "the jobs never ended: {jobs:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let job = |name: &str| jobs.iter().find(|j| j["fileName"] == name).unwrap().clone();
    let skipped = server.job(&token, job("damaged.mkv")["id"].as_i64().unwrap()).await;
    assert_eq!(skipped["status"], "SKIPPED", "{skipped}");
    assert_eq!(skipped["skipReason"], "damaged: error while decoding MB 7 3 (at 0.5 s)", "{skipped}");
    assert_eq!(job("ignored.mkv")["status"], "COMPLETED", "{jobs:#?}");
    server.finish().await;
}

/// One request a loopback server got.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    key: Option<String>,
    body: Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Answers as Sonarr v3 and Radarr v3 document (a series "Show" with two episodes in one
/// file; a movie "Heat" with its file), and as a webhook.
async fn arr(req: HttpRequest, body: web::Bytes, log: web::Data<Log>) -> HttpResponse {
    let path = match req.query_string() {
        "" => req.path().to_string(),
        query => format!("{}?{query}", req.path()),
    };
    let key = req.headers().get("X-Api-Key").and_then(|v| v.to_str().ok()).map(String::from);
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().unwrap().push(Seen { method: req.method().to_string(), path: path.clone(), key, body: body.clone() });
    match path.as_str() {
        "/sonarr/api/v3/series" => HttpResponse::Ok().json(json!([
            {"id": 3, "title": "Other", "path": "/data/tv/Other"},
            {"id": 7, "title": "Show", "path": "/data/tv/Show"},
        ])),
        "/sonarr/api/v3/episodefile?seriesId=7" => HttpResponse::Ok().json(json!([
            {"id": 40, "seriesId": 7, "path": "/data/tv/Show/S01/e2.mkv"},
            {"id": 41, "seriesId": 7, "path": "/data/tv/Show/S01/e1.mkv"},
        ])),
        "/sonarr/api/v3/episode?episodeFileId=41" => HttpResponse::Ok().json(json!([
            {"id": 100, "seriesId": 7, "episodeFileId": 41, "seasonNumber": 1, "episodeNumber": 1},
            {"id": 101, "seriesId": 7, "episodeFileId": 41, "seasonNumber": 1, "episodeNumber": 2},
        ])),
        "/radarr/api/v3/movie" => {
            HttpResponse::Ok().json(json!([{"id": 12, "title": "Heat", "path": "/data/films/Heat (1995)"}]))
        }
        "/radarr/api/v3/moviefile?movieId=12" => {
            HttpResponse::Ok().json(json!([{"id": 5, "movieId": 12, "path": "/data/films/Heat (1995)/heat.mkv"}]))
        }
        p if p.ends_with("/api/v3/command") => {
            let mut command = body;
            command["id"] = json!(1);
            command["status"] = json!("queued");
            HttpResponse::Created().json(command)
        }
        _ => HttpResponse::Ok().finish(),
    }
}

#[actix_web::test]
async fn a_scheduled_check_tells_a_webhook_and_gets_new_copies_from_sonarr_and_radarr() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log: Log = Arc::default();
    let data = web::Data::new(log.clone());
    let handle: ServerHandle = serve(listener, move || App::new().app_data(data.clone()).default_service(web::to(arr)));
    let seen = |prefix: &str| -> Vec<Seen> {
        log.lock().unwrap().iter().filter(|s| s.path.starts_with(prefix)).cloned().collect()
    };

    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for folder in ["tv/Show/S01", "films/Heat (1995)"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    // Not media at all: unreadable at any depth.
    std::fs::write(root.join("tv/Show/S01/e1.mkv"), b"not a video").unwrap();
    std::fs::write(root.join("films/Heat (1995)/heat.mkv"), b"not a video either").unwrap();
    let (status, hook) = server
        .post(
            "/notifications",
            Some(&token),
            &json!({"name": "hook", "kind": "webhook", "url": format!("{base}/hook"), "events": ["file.damaged"]}),
        )
        .await;
    assert_eq!(status, 201, "{hook}");
    // Each app maps its own folder: only it may hold the files there.
    let mut ids = Vec::new();
    for (kind, key, folder) in [("sonarr", "SonKey", "tv"), ("radarr", "RadKey", "films")] {
        let body = json!({"name": kind, "kind": kind, "url": format!("{base}/{kind}"), "apiKey": key,
            "pathMappings": [{"from": root.join(folder), "to": format!("/data/{folder}")}]});
        let (status, made) = server.post("/connections", Some(&token), &body).await;
        assert_eq!(status, 201, "{made}");
        ids.push(made["id"].as_i64().unwrap());
    }
    let (status, refused) = server
        .post("/libraries", Some(&token), &json!({"name": "x", "paths": [root], "healthSchedule": "daily"}))
        .await;
    assert_eq!((status, refused["error"]["code"].as_str()), (422, Some("validation_failed")), "{refused}");
    // Weekly, never checked: due at once (the default schedule is always open).
    let library =
        server.library_with(&token, &root, json!({"healthSchedule": "weekly", "healthAction": "regrab"})).await;
    let (_, stored) = server.get(&format!("/libraries/{library}"), Some(&token)).await;
    assert_eq!((stored["healthSchedule"].as_str(), stored["healthAction"].as_str()), (Some("weekly"), Some("regrab")));

    let deadline = Instant::now() + Duration::from_secs(120);
    while seen("/hook").len() < 2 {
        assert!(Instant::now() < deadline, "the webhook was not told: {:#?}", log.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let health = ended(&server.url(""), &token, library, 120).await;
    assert_eq!(health["run"]["scheduled"], true, "{health}");
    // What the dashboard offers "get a new copy" from, per file.
    assert_eq!(
        verdict_of(&health, "e1.mkv")["newCopyFrom"],
        json!([{"id": ids[0], "name": "sonarr", "kind": "sonarr"}]),
        "{health}"
    );
    assert_eq!(
        verdict_of(&health, "heat.mkv")["newCopyFrom"],
        json!([{"id": ids[1], "name": "radarr", "kind": "radarr"}]),
        "{health}"
    );
    let told: Vec<Value> = seen("/hook").iter().map(|s| s.body.clone()).collect();
    assert!(told.iter().all(|t| t["event"] == "file.damaged"), "{told:#?}");
    let episode = told.iter().find(|t| t["file"]["path"].as_str().unwrap().ends_with("e1.mkv")).unwrap();
    assert_eq!(episode["file"]["verdict"], "unreadable", "{episode}");
    assert!(episode["file"]["regrab"].as_str().unwrap().contains("sonarr deleted its record"), "{episode}");

    // Sonarr: the series, the file's record, its episodes, the record's deletion, the search
    // (never asked about the film, outside its mapped folder).
    let sonarr = seen("/sonarr/");
    assert!(sonarr.iter().all(|s| s.key.as_deref() == Some("SonKey")), "{sonarr:#?}");
    assert_eq!(
        sonarr.iter().map(|s| format!("{} {}", s.method, s.path)).collect::<Vec<_>>(),
        [
            "GET /sonarr/api/v3/series",
            "GET /sonarr/api/v3/episodefile?seriesId=7",
            "GET /sonarr/api/v3/episode?episodeFileId=41",
            "DELETE /sonarr/api/v3/episodefile/41",
            "POST /sonarr/api/v3/command",
        ]
    );
    let search = sonarr.iter().find(|s| s.method == "POST").unwrap();
    assert_eq!(search.body, json!({"name": "EpisodeSearch", "episodeIds": [100, 101]}));
    // Radarr: the movie, its file, the deletion, the search.
    let radarr = seen("/radarr/");
    assert!(radarr.iter().all(|s| s.key.as_deref() == Some("RadKey")), "{radarr:#?}");
    assert_eq!(
        radarr.iter().map(|s| format!("{} {}", s.method, s.path)).collect::<Vec<_>>(),
        [
            "GET /radarr/api/v3/movie",
            "GET /radarr/api/v3/moviefile?movieId=12",
            "DELETE /radarr/api/v3/moviefile/5",
            "POST /radarr/api/v3/command",
        ]
    );
    assert_eq!(radarr[3].body, json!({"name": "MoviesSearch", "movieIds": [12]}));
    // condense itself removed nothing.
    assert!(root.join("tv/Show/S01/e1.mkv").exists() && root.join("films/Heat (1995)/heat.mkv").exists());
    handle.stop(false).await;
    server.finish().await;
}
