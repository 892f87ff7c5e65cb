//! Jobs: listed, filtered, sorted and paged (by number or cursor), and shown with their
//! events.

use condense::domain::job::JobStatus;
use condense::repo;
use serde_json::{json, Value};

use super::{insert_job, media_dirs};
use crate::api_test_on_both_databases;
use crate::common::api::{code, message, TestServer, PREFIXES};

const JOB_FIELDS: [&str; 31] = [
    "encodePass",
    "skipReason",
    "chosenQuality",
    "predictedSize",
    "vmaf",
    "vmafP5",
    "id",
    "fileName",
    "filePath",
    "libraryId",
    "status",
    "stage",
    "progress",
    "fps",
    "node",
    "etaSeconds",
    "retryCount",
    "failureReason",
    "failureCode",
    "stalled",
    "sourceCodec",
    "targetCodec",
    "sourceSize",
    "outputSize",
    "savedBytes",
    "createdAt",
    "startedAt",
    "completedAt",
    "updatedAt",
    "actions",
    "priority",
];

/// Twelve jobs in two libraries: `movie-NN.mkv` QUEUED in the first, `show-NN.mp4` in the
/// second, two of which are COMPLETED on node-a with an output 600 bytes smaller.
async fn seed_jobs(server: &TestServer, token: &str) -> (i64, i64) {
    let (_dir, paths) = media_dirs(&["movies", "shows"]);
    let library = |name: &str, path: &str| json!({"name": name, "paths": [path]});
    let movies = server.post("/libraries", Some(token), &library("Movies", &paths[0])).await.1["id"].as_i64().unwrap();
    let shows = server.post("/libraries", Some(token), &library("Shows", &paths[1])).await.1["id"].as_i64().unwrap();
    // Scans are serialized per library: once these return, the first scans are over and
    // no scan will drop the jobs below (whose files do not exist).
    for id in [movies, shows] {
        let (status, _) = server.post(&format!("/libraries/{id}/scan"), Some(token), &json!({})).await;
        assert_eq!(status, 200);
    }
    for n in 0..7 {
        insert_job(server, Some(movies as i32), &format!("movie-{n:02}.mkv"), JobStatus::Queued, 1000 + n).await;
    }
    for n in 0..5 {
        let status = if n < 2 { JobStatus::Completed } else { JobStatus::Failed };
        let id = insert_job(server, Some(shows as i32), &format!("show-{n:02}.mp4"), status, 2000 + n).await;
        let set = entities::job::ActiveModel {
            id: sea_orm::Set(id),
            node_name: sea_orm::Set(Some("node-a".into())),
            output_size: sea_orm::Set(Some(1400 + n)),
            progress: sea_orm::Set(100.0),
            ..Default::default()
        };
        sea_orm::ActiveModelTrait::update(set, server.db()).await.unwrap();
    }
    (movies, shows)
}

fn names_of(page: &Value) -> Vec<String> {
    page["items"].as_array().unwrap().iter().map(|j| j["fileName"].as_str().unwrap().to_string()).collect()
}

async fn jobs_are_listed_filtered_sorted_and_paginated(server: &TestServer) {
    let token = server.login().await;
    let (movies, shows) = seed_jobs(server, &token).await;
    let token = Some(token.as_str());

    let (status, page) = server.get("/jobs", token).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!((&page["total"], &page["page"], &page["pageSize"]), (&json!(12), &json!(1), &json!(50)));
    // Newest first by default.
    assert_eq!(names_of(&page)[0], "show-04.mp4");
    let job = &page["items"][0];
    let mut keys: Vec<&str> = job.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected: Vec<&str> = JOB_FIELDS.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    // And they are the fields the generated document promises, with `transfer`, which a job
    // carries only while a node moves its file (issue 39).
    let (_, doc) = server.get("/openapi.json", token).await;
    let mut documented: Vec<&str> =
        doc["components"]["schemas"]["JobView"]["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    documented.sort_unstable();
    let mut promised = expected.clone();
    promised.push("transfer");
    promised.sort_unstable();
    assert_eq!(documented, promised);
    let required = doc["components"]["schemas"]["JobView"]["required"].as_array().unwrap();
    assert!(!required.contains(&serde_json::json!("transfer")), "transfer is optional: {required:?}");

    for prefix in PREFIXES {
        let (status, page) =
            server.get(&format!("{prefix}/jobs?page=2&pageSize=5&sort=fileName&order=asc"), token).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!((&page["total"], &page["page"], &page["pageSize"]), (&json!(12), &json!(2), &json!(5)));
        assert_eq!(names_of(&page), ["movie-05.mkv", "movie-06.mkv", "show-00.mp4", "show-01.mp4", "show-02.mp4"]);
    }
    let (_, last) = server.get("/jobs?page=3&pageSize=5&sort=fileName&order=asc", token).await;
    assert_eq!(names_of(&last), ["show-03.mp4", "show-04.mp4"]);
    let (_, beyond) = server.get("/jobs?page=9&pageSize=5", token).await;
    assert_eq!((beyond["items"].as_array().unwrap().len(), &beyond["total"]), (0, &json!(12)));
    let (_, clamped) = server.get("/jobs?pageSize=100000", token).await;
    assert_eq!(clamped["pageSize"], 500);

    let (_, done) = server.get("/jobs?status=COMPLETED&sort=fileName&order=asc", token).await;
    assert_eq!(names_of(&done), ["show-00.mp4", "show-01.mp4"]);
    let completed = &done["items"][0];
    assert_eq!((&completed["status"], &completed["node"]), (&json!("COMPLETED"), &json!("node-a")));
    assert_eq!(
        (&completed["sourceSize"], &completed["outputSize"], &completed["savedBytes"]),
        (&json!(2000), &json!(1400), &json!(600))
    );
    let (_, failed) = server.get("/jobs?status=failed&sort=fileName", token).await;
    assert_eq!(failed["items"][0]["savedBytes"], 0, "{failed}");
    let (_, some) = server.get("/jobs?status=COMPLETED,failed", token).await;
    assert_eq!(some["total"], 5);
    let (_, none) = server.get("/jobs?status=PAUSED", token).await;
    assert_eq!(none["total"], 0);
    let (_, in_movies) = server.get(&format!("/jobs?libraryId={movies}"), token).await;
    assert_eq!(in_movies["total"], 7);
    let (_, shows_on_a) = server.get(&format!("/api/jobs?libraryId={shows}&node=node-a"), token).await;
    assert_eq!(shows_on_a["total"], 5);
    let (_, searched) = server.get("/jobs?q=MOVIE-0&sort=sourceSize&order=desc&pageSize=2", token).await;
    assert_eq!(
        (names_of(&searched), &searched["total"]),
        (vec!["movie-06.mkv".to_string(), "movie-05.mkv".to_string()], &json!(7))
    );
    let (_, wildcard) = server.get("/jobs?q=%25", token).await;
    assert_eq!(wildcard["total"], 0, "a % in q is a literal, not a wildcard");
    let (_, ignored) = server.get("/jobs?unknownParameter=1", token).await;
    assert_eq!(ignored["total"], 12);

    // Keyset pages: nextCursor given back as `after`, with the same sort and order, walks the
    // same rows as numbered pages, and the last page has none.
    let mut walked = Vec::new();
    let mut after = String::new();
    loop {
        let (status, page) =
            server.get(&format!("/jobs?pageSize=5&sort=fileName&order=asc&after={after}"), token).await;
        assert_eq!((status, &page["total"], &page["page"]), (200, &json!(12), &json!(1)), "{page}");
        walked.extend(names_of(&page));
        match page["nextCursor"].as_str() {
            Some(next) => after = next.to_string(),
            None => break,
        }
    }
    let (_, whole) = server.get("/jobs?sort=fileName&order=asc", token).await;
    assert_eq!((walked, &whole["nextCursor"]), (names_of(&whole), &Value::Null));
    let (_, first) = server.get("/jobs?pageSize=5&sort=fileName&order=asc", token).await;
    let cursor = first["nextCursor"].as_str().unwrap();
    for (query, says) in [
        (format!("after={cursor}&sort=fileName&order=asc&page=2"), "cannot be combined"),
        (format!("after={cursor}&sort=fileName"), "another order"),
        (format!("after={cursor}&order=asc"), "another order"),
        ("after=bm90LWEtY3Vyc29y".to_string(), "not a cursor"),
        ("after=%25%25".to_string(), "not a cursor"),
    ] {
        let (status, body) = server.get(&format!("/jobs?{query}"), token).await;
        assert_eq!((status, code(&body)), (400, "invalid_query"), "{query}: {body}");
        assert!(message(&body).contains(says), "{query}: {body}");
    }

    for sort in ["createdAt", "updatedAt", "completedAt", "fileName", "status", "progress", "sourceSize"] {
        for order in ["asc", "desc"] {
            let (status, page) = server.get(&format!("/jobs?sort={sort}&order={order}"), token).await;
            assert_eq!((status, &page["total"]), (200, &json!(12)), "{sort} {order}: {page}");
        }
    }
    for query in [
        "status=BOGUS",
        "status=QUEUED,NOPE",
        "sort=size",
        "order=sideways",
        "page=0",
        "pageSize=0",
        "page=-1",
        "page=first",
        "pageSize=abc",
        "libraryId=x",
    ] {
        for prefix in PREFIXES {
            let (status, body) = server.get(&format!("{prefix}/jobs?{query}"), token).await;
            assert_eq!((status, code(&body)), (400, "invalid_query"), "{query}: {body}");
        }
    }
}
api_test_on_both_databases!(jobs_are_listed_filtered_sorted_and_paginated);

async fn a_job_is_shown_with_its_events(server: &TestServer) {
    let token = server.login().await;
    let id = insert_job(server, None, "clip.mkv", JobStatus::Pending, 1234).await;
    repo::events::append(
        server.db(),
        id,
        repo::events::NewEvent::transition("queued", JobStatus::Pending, JobStatus::Queued)
            .on_node(Some("main".into()))
            .with_detail(json!({"reason": "scan"})),
    )
    .await
    .unwrap();
    for prefix in PREFIXES {
        let (status, job) = server.get(&format!("{prefix}/jobs/{id}"), Some(&token)).await;
        assert_eq!(status, 200, "{job}");
        assert_eq!(
            (&job["id"], &job["fileName"], &job["filePath"]),
            (&json!(id), &json!("clip.mkv"), &json!("/media/clip.mkv"))
        );
        assert_eq!(
            (&job["status"], &job["sourceSize"], &job["savedBytes"]),
            (&json!("PENDING"), &json!(1234), &json!(0))
        );
        let events = job["events"].as_array().unwrap();
        assert_eq!(events.len(), 2, "{job}");
        assert_eq!(
            (&events[0]["kind"], &events[0]["fromStatus"], &events[0]["toStatus"]),
            (&json!("created"), &Value::Null, &json!("PENDING"))
        );
        let queued = &events[1];
        let mut keys: Vec<&String> = queued.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["at", "detail", "fromStatus", "id", "kind", "nodeName", "toStatus"]);
        assert_eq!(
            (&queued["kind"], &queued["fromStatus"], &queued["toStatus"]),
            (&json!("queued"), &json!("PENDING"), &json!("QUEUED"))
        );
        assert_eq!((&queued["nodeName"], &queued["detail"]), (&json!("main"), &json!({"reason": "scan"})));

        for missing in ["999999", "abc", "-1x", "1e3"] {
            let (status, body) = server.get(&format!("{prefix}/jobs/{missing}"), Some(&token)).await;
            assert_eq!((status, code(&body)), (404, "not_found"), "{missing}: {body}");
        }
    }
}
api_test_on_both_databases!(a_job_is_shown_with_its_events);
