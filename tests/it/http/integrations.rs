//! The *arr integration: an import queued ahead of the backlog, with the key in the URL.

use condense::repo;
use serde_json::{json, Value};

use super::media_dirs;
use crate::common::api::{code, message, TestServer};

/// A Sonarr import, as Sonarr sends it with the key in the URL, makes the file a job at once,
/// after the path mapping, ahead of the older QUEUED jobs; the connection test answers 200;
/// a file in no library is refused with the reason; only an operator's key is taken, and
/// never a login token in the URL. A user raises or lowers a job the same way.
#[actix_web::test]
async fn an_arr_import_is_queued_ahead_of_the_backlog() {
    let server = TestServer::sqlite().await;
    let admin = server.login().await;
    let (_dir, paths) = media_dirs(&["tv"]);
    let show = std::path::Path::new(&paths[0]).join("Show");
    std::fs::create_dir_all(&show).unwrap();
    for name in ["e1.mkv", "e2.mkv", "e3.mkv"] {
        std::fs::write(show.join(name), b"not looked at before an encode").unwrap();
    }
    let (status, library) = server
        .post(
            "/libraries",
            Some(&admin),
            &json!({"name": "TV", "paths": [paths[0]], "encoder": "libx265", "quality": 28, "watch": false}),
        )
        .await;
    assert_eq!(status, 201, "{library}");
    let (status, report) = server.post(&format!("/libraries/{}/scan", library["id"]), Some(&admin), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    // Found files are queued once the probe after the scan has looked at them.
    let backlog = queued_once(&server, 3).await;
    std::fs::write(show.join("e9.mkv"), b"imported just now").unwrap();

    let (status, mappings) = server
        .put("/settings/arr", Some(&admin), &json!({"pathMappings": [{"from": "/data/tv", "to": paths[0]}]}))
        .await;
    assert_eq!(status, 200, "{mappings}");
    let (_, key) = server.post("/api-keys", Some(&admin), &json!({"name": "sonarr", "scope": "integration"})).await;
    let key = key["key"].as_str().unwrap().to_string();
    let sonarr = |event: &str, path: &str| {
        json!({
            "eventType": event,
            "instanceName": "Sonarr",
            "series": {"id": 1, "title": "Show", "path": "/data/tv/Show", "tvdbId": 1},
            "episodes": [{"id": 9, "episodeNumber": 9, "seasonNumber": 1, "title": "Nine"}],
            "episodeFile": {"id": 9, "relativePath": "e9.mkv", "path": path},
            "isUpgrade": false
        })
    };
    let hook = |query: String, body: Value| {
        let server = &server;
        async move { server.post(&format!("/integrations/arr{query}"), None, &body).await }
    };
    let (status, answer) = hook(format!("?apikey={key}"), sonarr("Test", "")).await;
    assert_eq!((status, &answer["outcome"]), (200, &json!("test")), "{answer}");
    let (status, answer) = hook(format!("?apikey={key}"), sonarr("Download", "/data/tv/Show/e9.mkv")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "queued", "{answer}");
    let local = show.join("e9.mkv").display().to_string();
    assert_eq!(answer["path"], local.as_str(), "{answer}");
    assert_eq!(answer["job"]["priority"], 5, "{answer}");
    // Next in line once probed, ahead of the three queued before it.
    let order: Vec<String> = queued_once(&server, 4).await.into_iter().map(|job| job.file_name).collect();
    let before: Vec<String> = backlog.iter().map(|job| job.file_name.clone()).collect();
    assert_eq!(order[0], "e9.mkv");
    assert_eq!(order[1..], before[..], "the backlog keeps its order behind it");
    // A user lowers it back, and raises another.
    let id = answer["job"]["id"].as_i64().unwrap();
    let (status, lowered) = server.post(&format!("/jobs/{id}/priority"), Some(&admin), &json!({"priority": -1})).await;
    assert_eq!((status, &lowered["priority"]), (200, &json!(-1)), "{lowered}");
    let e3 = backlog.iter().find(|job| job.file_name == "e3.mkv").unwrap().id;
    assert_eq!(server.post(&format!("/jobs/{e3}/priority"), Some(&admin), &json!({"priority": 10})).await.0, 200);
    let order: Vec<String> =
        repo::jobs::queued_next(server.db(), 10).await.unwrap().into_iter().map(|job| job.file_name).collect();
    let mut expected = vec!["e3.mkv".to_string()];
    expected.extend(before.iter().filter(|name| *name != "e3.mkv").cloned());
    expected.push("e9.mkv".to_string());
    assert_eq!(order, expected);
    let (status, body) = server.post(&format!("/jobs/{id}/priority"), Some(&admin), &json!({"priority": 11})).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");

    // Refusals: a file in no library, an event naming no file.
    let (status, body) = hook(format!("?apikey={key}"), sonarr("Download", "/elsewhere/x.mkv")).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");
    assert!(message(&body).contains("is not a media file in any library"), "{body}");
    let (status, body) = hook(format!("?apikey={key}"), json!({"eventType": "Download"})).await;
    assert_eq!(status, 422, "{body}");
    let (status, answer) = hook(format!("?apikey={key}"), sonarr("Grab", "")).await;
    assert_eq!((status, &answer["outcome"]), (200, &json!("ignored")), "{answer}");
    // Who may call it: an integration or operate key; never a login token in the URL, nor a
    // read key.
    assert_eq!(hook(format!("?apikey={admin}"), sonarr("Test", "")).await.0, 401);
    assert_eq!(hook(String::new(), sonarr("Test", "")).await.0, 401);
    let (_, read_only) = server.post("/api-keys", Some(&admin), &json!({"name": "ro", "readOnly": true})).await;
    let read_only = read_only["key"].as_str().unwrap();
    assert_eq!(hook(format!("?apikey={read_only}"), sonarr("Test", "")).await.0, 403);
    // The query key is for the integrations only.
    assert_eq!(server.get(&format!("/jobs?apikey={key}"), None).await.0, 401);
    server.finish().await;
}

/// The queue in its order (`repo::jobs::queued_next`) once it holds `n` jobs (fails the
/// test after 60 s).
async fn queued_once(server: &TestServer, n: usize) -> Vec<entities::job::Model> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let queued = repo::jobs::queued_next(server.db(), 10).await.unwrap();
        if queued.len() == n {
            return queued;
        }
        assert!(std::time::Instant::now() < deadline, "{n} queued expected: {queued:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
