//! Stream rules (issue 37) through the real runtime: the library's filters leave files
//! alone at analysis, each SKIPPED job naming the rule, while a file the filters pass is
//! encoded; through the real server, each attempt carries out the plan of the rules as they
//! are when it starts, `GET /jobs/{id}/plan` shows it and the history names the rules.

use std::time::Duration;

use condense::domain::job::JobStatus;
use condense::domain::stream_rules::StreamRules;
use condense::repo;
use sea_orm::DatabaseConnection;
use serde_json::{json, Value};

use crate::both_backends;
use crate::common::api::{code, TestServer};
use crate::common::db::TestDb;
use crate::common::media as clips;
use crate::common::runtime::{library, start_runtime, wait_terminal};
use crate::common::streams::{acceptance_clip, ffprobe_streams};

both_backends!(filters_skip_files_with_the_rule_named, |db: DatabaseConnection| async move {
    let filtered = tempfile::tempdir().unwrap();
    std::fs::create_dir(filtered.path().join("Extras")).unwrap();
    clips::h264(&filtered.path().join("Extras"), "bonus.mkv", "64x64", 1);
    clips::h264(filtered.path(), "thin.mkv", "64x64", 1);
    let rules = StreamRules {
        skip_paths: vec!["Extras/**".into()],
        // Far above what any file reaches at 1080p's pixel rate.
        min_bitrate_kbps: Some(1_000_000),
        ..StreamRules::default()
    };
    repo::libraries::create(
        &db,
        repo::libraries::NewLibrary { stream_rules: rules, ..library(filtered.path(), false) },
    )
    .await
    .unwrap();
    let passed = tempfile::tempdir().unwrap();
    std::fs::create_dir(passed.path().join("Films")).unwrap();
    clips::h264(&passed.path().join("Films"), "kept.mkv", "64x64", 1);
    let rules = StreamRules { skip_paths: vec!["Extras/**".into(), "*.mkv".into()], ..StreamRules::default() };
    let other =
        repo::libraries::NewLibrary { name: "other".into(), stream_rules: rules, ..library(passed.path(), false) };
    repo::libraries::create(&db, other).await.unwrap();

    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let jobs = wait_terminal(&db, 3, Duration::from_secs(240)).await;
    let by_name: std::collections::HashMap<_, _> = jobs.iter().map(|j| (j.file_name.as_str(), j)).collect();
    let bonus = by_name["bonus.mkv"];
    assert_eq!(bonus.status, JobStatus::Skipped);
    assert_eq!(bonus.skip_reason.as_deref(), Some("skipPaths: Extras/bonus.mkv matches \"Extras/**\""));
    let thin = by_name["thin.mkv"];
    assert_eq!(thin.status, JobStatus::Skipped);
    let reason = thin.skip_reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("minBitrateKbps: ") && reason.ends_with("under 1000000 kb/s"), "{reason}");
    // `*` stays within one folder: Films/kept.mkv is not matched by "*.mkv".
    let kept = by_name["kept.mkv"];
    assert_eq!(kept.status, JobStatus::Completed, "{:?} {:?}", kept.skip_reason, kept.failure_detail);
});

/// Each stream of `path` as (kind, codec, channels, language, default).
fn summary(path: &std::path::Path) -> Vec<(String, String, Option<u64>, String, i64)> {
    ffprobe_streams(path)
        .iter()
        .map(|s| {
            (
                s["codec_type"].as_str().unwrap().to_string(),
                s["codec_name"].as_str().unwrap().to_string(),
                s["channels"].as_u64(),
                s["tags"]["language"].as_str().unwrap_or("").to_string(),
                s["disposition"]["default"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn row(
    kind: &str,
    codec: &str,
    channels: Option<u64>,
    language: &str,
    default: i64,
) -> (String, String, Option<u64>, String, i64) {
    (kind.to_string(), codec.to_string(), channels, language.to_string(), default)
}

/// The rules an attempt's history recorded, from its `encoding` event.
fn recorded_rules(job: &Value) -> Vec<Value> {
    job["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "encoding")
        .map(|e| e["detail"]["streamRules"].clone())
        .collect()
}

/// Two files, one slot: the first attempt starts under the acceptance rules (keep English
/// and German, drop commentary, DTS to AAC, a stereo track, English subtitles); the rules are
/// changed while the second file waits in the queue, and its attempt follows the new ones.
async fn each_attempt_follows_the_rules_as_they_are_when_it_starts(test_db: TestDb) {
    let server = TestServer::start_throttled(test_db, 20).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    acceptance_clip(dir.path(), "a.mkv");
    acceptance_clip(dir.path(), "b.mkv");
    let rules = json!({"audioLanguages": ["eng", "deu"], "dropCommentary": true, "audioCodec": "aac",
        "addStereo": true, "subtitleLanguages": ["eng"]});
    let library = server.library_with(&token, dir.path(), json!({ "streamRules": rules })).await;
    let (status, report) = server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;
    assert_eq!((status, report["found"].as_i64()), (200, Some(2)), "{report}");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let (first, second) = loop {
        let all = server.jobs(&token).await;
        if let Some(running) = all.iter().position(|j| j["status"] == "ENCODING") {
            let other = &all[1 - running];
            assert_eq!(other["status"], "QUEUED", "{all:?}");
            break (all[running]["id"].as_i64().unwrap(), other["id"].as_i64().unwrap());
        }
        assert!(std::time::Instant::now() < deadline, "nothing started: {all:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The queued job's plan, before it runs: the library's rules now.
    let (status, plan) = server.get(&format!("/jobs/{second}/plan"), Some(&token)).await;
    assert_eq!((status, plan["basis"].as_str()), (200, Some("current")), "{plan}");
    assert_eq!(plan["rules"]["audioLanguages"], json!(["eng", "deu"]));
    let (status, changed) = server
        .put(&format!("/libraries/{library}"), Some(&token), &json!({"streamRules": {"audioLanguages": ["fra"]}}))
        .await;
    assert_eq!(status, 200, "{changed}");
    let (status, plan) = server.get(&format!("/jobs/{second}/plan"), Some(&token)).await;
    assert_eq!((status, plan["rules"]["audioLanguages"].clone()), (200, json!(["fra"])), "{plan}");

    let first_job = server.wait_for(&token, first, &["COMPLETED", "FAILED", "SKIPPED"]).await;
    let second_job = server.wait_for(&token, second, &["COMPLETED", "FAILED", "SKIPPED"]).await;
    for job in [&first_job, &second_job] {
        assert_eq!(job["status"], "COMPLETED", "{job}");
    }
    // Exactly the planned streams, in the planned order, with their languages and the
    // default flag the source's English track had.
    let output = std::path::PathBuf::from(first_job["filePath"].as_str().unwrap());
    assert_eq!(output.extension().unwrap(), "mkv");
    assert_eq!(
        summary(&output),
        [
            row("video", "hevc", None, "", 0),
            row("audio", "aac", Some(6), "eng", 1),
            row("audio", "aac", Some(2), "eng", 0),
            row("audio", "aac", Some(1), "deu", 0),
            row("subtitle", "subrip", None, "eng", 0),
        ]
    );
    // The second attempt read the rules changed after it was queued: French audio only,
    // every subtitle, nothing converted.
    let output = std::path::PathBuf::from(second_job["filePath"].as_str().unwrap());
    let kinds: Vec<_> = summary(&output).into_iter().map(|(k, c, ch, l, _)| (k, c, ch, l)).collect();
    let plain = |k: &str, c: &str, ch: Option<u64>, l: &str| (k.to_string(), c.to_string(), ch, l.to_string());
    assert_eq!(
        kinds,
        [
            plain("video", "hevc", None, ""),
            plain("audio", "aac", Some(1), "fra"),
            plain("subtitle", "subrip", None, "eng"),
            plain("subtitle", "subrip", None, "fra"),
        ]
    );

    // The history names the rules each attempt ran with, and the plan's notes.
    let job = server.job(&token, first).await;
    let ran = recorded_rules(&job);
    assert_eq!(ran.len(), 1, "{job}");
    assert_eq!(ran[0]["audioLanguages"], json!(["eng", "deu"]));
    assert_eq!(ran[0]["audioCodec"], "aac");
    let encoding = job["events"].as_array().unwrap().iter().find(|e| e["kind"] == "encoding").unwrap();
    assert!(encoding["detail"]["streamPlan"]["notes"].is_array(), "{encoding}");
    assert_eq!(recorded_rules(&server.job(&token, second).await)[0]["audioLanguages"], json!(["fra"]));

    // The plan that ran, with every source stream's fate and the rule that decided it.
    let (status, plan) = server.get(&format!("/jobs/{first}/plan"), Some(&token)).await;
    assert_eq!((status, plan["basis"].as_str(), plan["jobId"].as_i64()), (200, Some("ran"), Some(first)), "{plan}");
    assert_eq!((plan["container"].as_str(), plan["videoSize"].clone()), (Some("mkv"), Value::Null));
    let fates: Vec<(u64, &str)> = plan["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sourceIndex"].as_u64().unwrap(), s["fate"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fates,
        [(0, "encode"), (1, "convert"), (1, "add"), (2, "copy"), (3, "drop"), (4, "drop"), (5, "copy"), (6, "drop")]
    );
    assert!(plan["streams"].as_array().unwrap().iter().all(|s| !s["rule"].as_str().unwrap().is_empty()), "{plan}");
    server.finish().await;
}

#[actix_web::test]
async fn each_attempt_follows_the_rules_as_they_are_when_it_starts_sqlite() {
    each_attempt_follows_the_rules_as_they_are_when_it_starts(TestDb::sqlite().await).await;
}

#[actix_web::test]
async fn each_attempt_follows_the_rules_as_they_are_when_it_starts_postgres() {
    let Some(db) = TestDb::postgres(concat!(module_path!(), "::each_attempt_postgres")).await else { return };
    each_attempt_follows_the_rules_as_they_are_when_it_starts(db).await;
}

/// A file the filters rule out is SKIPPED by the probe after the scan, before any attempt,
/// with the rule named; its plan is the one an attempt would run with; a job whose file has
/// not been analysed has no plan yet.
async fn the_probe_skips_filtered_files_and_a_plan_needs_an_analysis(test_db: TestDb) {
    let server = TestServer::start_throttled(test_db, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    acceptance_clip(dir.path(), "small.mkv");
    let rules = json!({"minSizeMb": 1000000, "audioLanguages": ["deu"]});
    let library = server.library_with(&token, dir.path(), json!({ "streamRules": rules })).await;
    let id = server.scan(&token, library).await[0].1;
    let job = server.wait_for(&token, id, &["SKIPPED", "COMPLETED", "FAILED"]).await;
    assert_eq!(job["status"], "SKIPPED", "{job}");
    let reason = job["skipReason"].as_str().unwrap();
    assert!(reason.starts_with("minSizeMb: ") && reason.ends_with("is under 1000000 MB"), "{reason}");
    let kinds: Vec<&str> = job["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(!kinds.contains(&"started"), "skipped by an attempt, not the probe: {kinds:?}");

    let (status, plan) = server.get(&format!("/jobs/{id}/plan"), Some(&token)).await;
    assert_eq!((status, plan["basis"].as_str()), (200, Some("current")), "{plan}");
    let fates: Vec<&str> = plan["streams"].as_array().unwrap().iter().map(|s| s["fate"].as_str().unwrap()).collect();
    assert_eq!(fates, ["encode", "drop", "copy", "drop", "drop", "copy", "copy"], "{plan}");

    // No rules: the video encoded, everything else copied.
    let (status, _) = server.put(&format!("/libraries/{library}"), Some(&token), &json!({"streamRules": {}})).await;
    assert_eq!(status, 200);
    let (_, plan) = server.get(&format!("/jobs/{id}/plan"), Some(&token)).await;
    let fates: Vec<&str> = plan["streams"].as_array().unwrap().iter().map(|s| s["fate"].as_str().unwrap()).collect();
    assert_eq!(fates, ["encode", "copy", "copy", "copy", "copy", "copy", "copy"], "{plan}");

    let (status, body) = server.get("/jobs/999999/plan", Some(&token)).await;
    assert_eq!((status, code(&body)), (404, "not_found"));
    // A job no probe has seen (a PENDING one, as the scan registers it).
    let pending =
        crate::common::rows::new_job(Some(i32::try_from(library).unwrap()), "/media/later.mkv", JobStatus::Pending);
    let unprobed = repo::jobs::insert(server.db(), pending).await.unwrap().id;
    let (status, body) = server.get(&format!("/jobs/{unprobed}/plan"), Some(&token)).await;
    assert_eq!((status, code(&body)), (409, "not_analysed"), "{body}");
    server.finish().await;
}

#[actix_web::test]
async fn the_probe_skips_filtered_files_and_a_plan_needs_an_analysis_sqlite() {
    the_probe_skips_filtered_files_and_a_plan_needs_an_analysis(TestDb::sqlite().await).await;
}

#[actix_web::test]
async fn the_probe_skips_filtered_files_and_a_plan_needs_an_analysis_postgres() {
    let Some(db) = TestDb::postgres(concat!(module_path!(), "::the_probe_postgres")).await else { return };
    the_probe_skips_filtered_files_and_a_plan_needs_an_analysis(db).await;
}

/// `container: mp4`: the output is `film.mp4`, the `.mkv` gone, its text subtitle converted to
/// `mov_text`; a file with an image subtitle that MP4 cannot hold is SKIPPED with the plan's
/// reason, and encoded once `dropImageSubtitles` is set.
async fn an_mp4_rule_renames_the_output_and_refuses_image_subtitles(test_db: TestDb) {
    let server = TestServer::start_throttled(test_db, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    acceptance_clip(dir.path(), "film.mkv");
    let plain = clips::h264(dir.path(), "plain.mkv", "64x64", 1);
    crate::common::streams::with_image_subtitle(&plain, &dir.path().join("pictures.mkv"), "eng");
    std::fs::remove_file(&plain).unwrap();
    let rules = json!({"audioLanguages": ["eng", "deu"], "dropCommentary": true, "audioCodec": "aac",
        "addStereo": true, "subtitleLanguages": ["eng"], "container": "mp4"});
    let library = server.library_with(&token, dir.path(), json!({ "streamRules": rules })).await;
    let jobs = server.scan(&token, library).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let (film, pictures) = (jobs[0].1, jobs[1].1);
    let job = server.wait_for(&token, film, &["COMPLETED", "FAILED", "SKIPPED"]).await;
    assert_eq!(job["status"], "COMPLETED", "{job}");
    assert_eq!(job["filePath"].as_str(), Some(dir.path().join("film.mp4").to_str().unwrap()));
    assert!(!dir.path().join("film.mkv").exists());
    let got: Vec<_> = summary(&dir.path().join("film.mp4")).into_iter().map(|(k, c, ch, l, _)| (k, c, ch, l)).collect();
    let plain = |k: &str, c: &str, ch: Option<u64>, l: &str| (k.to_string(), c.to_string(), ch, l.to_string());
    assert_eq!(
        got,
        [
            plain("video", "hevc", None, "und"),
            plain("audio", "aac", Some(6), "eng"),
            plain("audio", "aac", Some(2), "eng"),
            plain("audio", "aac", Some(1), "deu"),
            plain("subtitle", "mov_text", None, "eng"),
        ]
    );

    let job = server.wait_for(&token, pictures, &["COMPLETED", "FAILED", "SKIPPED"]).await;
    assert_eq!(job["status"], "SKIPPED", "{job}");
    let reason = job["skipReason"].as_str().unwrap();
    assert!(reason.contains("dvd_subtitle"), "{reason}");
    let (status, plan) = server.get(&format!("/jobs/{pictures}/plan"), Some(&token)).await;
    assert_eq!((status, plan["refused"].as_str()), (200, Some(reason)), "{plan}");
    // The next attempt follows the rules as they are then.
    let rules = json!({"container": "mp4", "dropImageSubtitles": true});
    let (status, _) =
        server.put(&format!("/libraries/{library}"), Some(&token), &json!({ "streamRules": rules })).await;
    assert_eq!(status, 200);
    let (status, forced) = server.post(&format!("/jobs/{pictures}/force"), Some(&token), &json!({})).await;
    assert_eq!(status, 200, "{forced}");
    let job = server.wait_for(&token, pictures, &["COMPLETED", "FAILED"]).await;
    assert_eq!(job["status"], "COMPLETED", "{job}");
    let kinds: Vec<String> = summary(&dir.path().join("pictures.mp4")).into_iter().map(|(k, ..)| k).collect();
    assert_eq!(kinds, ["video"]);
    server.finish().await;
}

#[actix_web::test]
async fn an_mp4_rule_renames_the_output_and_refuses_image_subtitles_sqlite() {
    an_mp4_rule_renames_the_output_and_refuses_image_subtitles(TestDb::sqlite().await).await;
}

#[actix_web::test]
async fn an_mp4_rule_renames_the_output_and_refuses_image_subtitles_postgres() {
    let Some(db) = TestDb::postgres(concat!(module_path!(), "::an_mp4_postgres")).await else { return };
    an_mp4_rule_renames_the_output_and_refuses_image_subtitles(db).await;
}
