//! Filesystem safety through the real server: kept originals stay kept, a container change
//! never overwrites a file, the watcher stays inside its library and out of partial
//! outputs, deleting a library cleans up, and libraries stay out of system folders.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use condense::media::layout::numbered_backup_path;
use condense::media::layout::{backup_path_for, partial_dir_for};
use condense::repo;
use sea_orm::ConnectionTrait;
use serde_json::{json, Value};

use crate::common::api::{failure_message, TestServer};
use crate::common::cluster::{self, call};
use crate::common::db::TestDb;
use crate::common::license;
use crate::common::media as clips;
use crate::common::server::ServerProcess;

async fn force(server: &TestServer, token: &str, id: i64) {
    let (status, forced) = server.post(&format!("/jobs/{id}/force"), Some(token), &json!({})).await;
    assert_eq!((status, forced["status"].as_str()), (200, Some("QUEUED")), "{forced}");
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[actix_web::test]
async fn kept_originals_survive_reencodes_a_setting_turned_off_and_a_settings_read_that_fails() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let source = clips::h264(dir.path(), "a.mkv", "320x240", 2);
    let original = read(&source);
    let (status, body) = server.put("/settings", Some(&token), &json!({"keepOriginals": true})).await;
    assert_eq!(status, 200, "{body}");
    let library = server.library(&token, dir.path()).await;
    let id = server.scan(&token, library).await[0].1;
    assert_eq!(server.wait_for(&token, id, &["COMPLETED", "FAILED"]).await["status"], "COMPLETED");
    assert_eq!(read(&backup_path_for(&source)), original);
    let first_output = read(&source);
    assert_ne!(first_output, original);

    // A forced re-encode of the completed file (smaller again: a higher CRF) keeps both.
    let (status, body) = server.put(&format!("/libraries/{library}"), Some(&token), &json!({"quality": 51})).await;
    assert_eq!(status, 200, "{body}");
    force(&server, &token, id).await;
    let done = server.wait_for(&token, id, &["COMPLETED", "FAILED"]).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    assert_ne!(read(&source), first_output, "the second encode did not replace the file: {done}");
    assert_eq!(read(&numbered_backup_path(&source, 1)), original, "the first kept original was lost");
    assert_eq!(read(&numbered_backup_path(&source, 2)), first_output, "the second kept original was lost");

    // Turning the setting off and touching the file again removes no backup.
    let (status, body) = server.put("/settings", Some(&token), &json!({"keepOriginals": false})).await;
    assert_eq!(status, 200, "{body}");
    // (Its source is the CRF 51 output, so this encode may find its output no smaller and
    // stop early, SKIPPED with the file kept: either end touches the file again.)
    force(&server, &token, id).await;
    let again = server.wait_for(&token, id, &["COMPLETED", "SKIPPED", "FAILED"]).await;
    assert_ne!(again["status"], "FAILED", "{again}");
    let (status, report) = server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(read(&numbered_backup_path(&source, 1)), original);
    assert_eq!(read(&numbered_backup_path(&source, 2)), first_output);

    // A settings value that does not read fails the attempt; nothing is removed or replaced.
    repo::settings::set(server.db(), repo::settings::KEEP_ORIGINALS, &"yes").await.unwrap();
    let current = read(&source);
    force(&server, &token, id).await;
    let failed = server.wait_for(&token, id, &["FAILED", "COMPLETED"]).await;
    assert_eq!(failed["status"], "FAILED", "{failed}");
    assert!(failure_message(&failed).contains("the settings could not be read"), "{failed}");
    assert_eq!(read(&source), current);
    assert_eq!(read(&numbered_backup_path(&source, 1)), original);
    assert_eq!(read(&numbered_backup_path(&source, 2)), first_output);
    server.finish().await;
}

#[actix_web::test]
async fn a_settings_read_that_fails_is_an_error_not_a_default() {
    let test_db = TestDb::sqlite().await;
    let db = &test_db.db;
    let settings = condense::actors::store::settings(db).await.unwrap();
    assert_eq!((settings.keep_originals, settings.timeout_hours), (false, 24));
    repo::settings::set(db, repo::settings::KEEP_ORIGINALS, &true).await.unwrap();
    let settings = condense::actors::store::settings(db).await.unwrap();
    assert_eq!((settings.keep_originals, settings.timeout_hours), (true, 24));
    repo::settings::set(db, repo::settings::KEEP_ORIGINALS, &"yes").await.unwrap();
    let err = condense::actors::store::settings(db).await.unwrap_err().to_string();
    assert!(err.contains("keep_originals"), "{err}");
    repo::settings::set(db, repo::settings::KEEP_ORIGINALS, &false).await.unwrap();
    db.execute_unprepared("DROP TABLE settings").await.unwrap();
    assert!(condense::actors::store::settings(db).await.is_err());
    test_db.finish().await;
}

fn clip_as(dir: &Path, name: &str, codec: &str) -> PathBuf {
    let out = dir.join(name);
    clips::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=25",
        "-t",
        "2",
        "-c:v",
        codec,
        "-q:v",
        "2",
        out.to_str().unwrap(),
    ]);
    out
}

#[actix_web::test]
async fn two_sources_with_one_final_name_never_overwrite_each_other() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let avi = clip_as(dir.path(), "a.avi", "mpeg4");
    let wmv = clip_as(dir.path(), "a.wmv", "wmv2");
    let originals = [(avi.clone(), read(&avi)), (wmv.clone(), read(&wmv))];
    // b.mkv is a link to a disk that is not mounted: a check of "exists" says no, yet it is a
    // name in the folder that the output must not take.
    let other = clip_as(dir.path(), "b.avi", "mpeg4");
    let other_bytes = read(&other);
    let link = dir.path().join("b.mkv");
    std::os::unix::fs::symlink("/mnt/not-mounted/b.mkv", &link).unwrap();
    let library = server.library(&token, dir.path()).await;
    let found = server.scan(&token, library).await;
    assert_eq!(found.len(), 3, "{found:?}");
    let mut ended = Vec::new();
    for (name, id) in found {
        let job = server.wait_for(&token, id, &["COMPLETED", "FAILED"]).await;
        if name == "b.avi" {
            assert_eq!(job["status"], "FAILED", "{job}");
            assert!(failure_message(&job).contains("b.mkv exists already"), "{job}");
            assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
            assert_eq!(read(&other), other_bytes);
        } else {
            ended.push(job);
        }
    }
    let target = dir.path().join("a.mkv");
    let completed: Vec<&Value> = ended.iter().filter(|j| j["status"] == "COMPLETED").collect();
    assert_eq!(completed.len(), 1, "{ended:?}");
    assert_eq!(completed[0]["filePath"], target.to_str().unwrap());
    let failed = ended.iter().find(|j| j["status"] == "FAILED").expect("the second one fails");
    assert!(failure_message(failed).contains("a.mkv exists already"), "{failed}");
    let loser = PathBuf::from(failed["filePath"].as_str().unwrap());
    for (path, bytes) in &originals {
        if *path == loser {
            assert_eq!(&read(path), bytes, "the failed job's original changed");
        } else {
            assert!(!path.exists(), "the completed job's original is still there");
        }
    }
    let info = condense_media::probe::probe(&target).unwrap();
    assert_eq!(info.video().unwrap().codec, "hevc");
    server.finish().await;
}

/// Waits until the library's first scan ran (its watcher is set up before it).
async fn wait_scanned(server: &TestServer, token: &str, library: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.get(&format!("/libraries/{library}"), Some(token)).await.1["lastScanAt"].is_null() {
        assert!(Instant::now() < deadline, "library {library} was never scanned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_web::test]
async fn the_watcher_follows_no_link_to_a_folder_and_registers_nothing_in_a_partial_output() {
    // No job slots: what the watcher registers stays QUEUED for the test to see.
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let templates = tempfile::tempdir().unwrap();
    let clip = clips::h264(templates.path(), "clip.mkv", "160x120", 1);
    let root = tempfile::tempdir().unwrap();
    let (media, outside) = (root.path().join("media"), root.path().join("outside"));
    std::fs::create_dir_all(&media).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, media.join("elsewhere")).unwrap();
    // There before the first scan, which does not follow the link either.
    std::fs::copy(&clip, outside.join("before.mkv")).unwrap();
    let library = server.library_with(&token, &media, json!({"watch": true})).await;
    wait_scanned(&server, &token, library).await;

    std::fs::copy(&clip, outside.join("outside.mkv")).unwrap();
    let partial = partial_dir_for(&media.join("a.mkv"));
    std::fs::create_dir_all(&partial).unwrap();
    for name in ["output.mkv", "seg-00000.mkv"] {
        std::fs::copy(&clip, partial.join(name)).unwrap();
    }
    // Written last: once it is registered, the files before it were seen and settled too.
    std::fs::copy(&clip, media.join("marker.mkv")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let registered = loop {
        let all = server.jobs(&token).await;
        if all.iter().any(|j| j["fileName"] == "marker.mkv") {
            break all;
        }
        assert!(Instant::now() < deadline, "the watcher never registered marker.mkv: {all:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let paths: Vec<&str> = registered.iter().map(|j| j["filePath"].as_str().unwrap()).collect();
    assert_eq!(paths, [media.join("marker.mkv").to_str().unwrap()]);
    server.finish().await;
}

#[actix_web::test]
async fn deleting_a_library_removes_its_idle_jobs_partial_outputs() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let sources: Vec<PathBuf> = ["a.mkv", "b.mkv"].iter().map(|n| clips::h264(dir.path(), n, "160x120", 1)).collect();
    let library = server.library(&token, dir.path()).await;
    let found = server.scan(&token, library).await;
    assert_eq!(found.len(), 2);
    // The scan answers once the jobs are registered (PENDING); the probe queues them after,
    // and only a queued job pauses.
    server.wait_for(&token, found[0].1, &["QUEUED"]).await;
    let (status, paused) = server.post(&format!("/jobs/{}/pause", found[0].1), Some(&token), &json!({})).await;
    assert_eq!((status, paused["status"].as_str()), (200, Some("PAUSED")), "{paused}");
    // What a paused (a) and an interrupted, requeued (b) encode leave next to their sources.
    for source in &sources {
        let partial = partial_dir_for(source);
        std::fs::create_dir_all(&partial).unwrap();
        std::fs::write(partial.join("manifest.json"), b"{}").unwrap();
        std::fs::write(partial.join("seg-00000.mkv"), b"segment").unwrap();
    }
    let (status, body) = server.delete(&format!("/libraries/{library}"), Some(&token)).await;
    assert_eq!(status, 204, "{body}");
    for source in &sources {
        assert!(!partial_dir_for(source).exists(), "{} still has its partial output", source.display());
        assert!(source.exists());
    }
    server.finish().await;
}

async fn create_at(server: &TestServer, token: &str, path: &Path) -> (u16, Value) {
    server.post("/libraries", Some(token), &json!({"name": "x", "paths": [path]})).await
}

#[actix_web::test]
async fn system_folders_and_data_dir_are_refused_as_library_paths() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let data_dir = server.state.library_places.data_dir.clone().unwrap();
    std::fs::create_dir_all(data_dir.join("inside")).unwrap();
    let mut refused = vec![
        PathBuf::from("/"),
        PathBuf::from("/etc"),
        PathBuf::from("/usr"),
        PathBuf::from("/usr/share"),
        PathBuf::from("/proc"),
        PathBuf::from("/dev"),
        PathBuf::from("/sys"),
        data_dir.clone(),
        data_dir.join("inside"),
        data_dir.parent().unwrap().to_path_buf(),
    ];
    refused.extend(["/bin", "/boot", "/var/lib", "/var"].iter().map(PathBuf::from).filter(|p| p.is_dir()));
    for path in &refused {
        let (status, body) = create_at(&server, &token, path).await;
        assert_eq!(status, 422, "{}: {body}", path.display());
        assert_eq!(body["error"]["code"], "validation_failed", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("system folder") || message.contains("DATA_DIR"), "{}: {message}", path.display());
    }
    let ok = tempfile::tempdir().unwrap();
    let (status, created) = create_at(&server, &token, ok.path()).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().unwrap();
    let (status, body) = server.put(&format!("/libraries/{id}"), Some(&token), &json!({"paths": ["/usr/share"]})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("inside /usr, a system folder"), "{body}");
    server.finish().await;
}

#[actix_web::test]
async fn library_roots_limit_where_libraries_may_be() {
    let dir = tempfile::tempdir().unwrap();
    let (media, video, other) = (dir.path().join("media"), dir.path().join("srv-video"), dir.path().join("other"));
    for folder in [media.join("films"), video.clone(), other.clone()] {
        std::fs::create_dir_all(folder).unwrap();
    }
    let roots = format!("{},{}", media.display(), video.display());
    let mut cmd = cluster::main_command(&dir.path().join("data"), 0, None);
    cmd.env("LIBRARY_ROOTS", &roots);
    let server = ServerProcess::start(cmd);
    let token = cluster::login(&server).await;
    let token = token.as_str();
    let url = format!("{}/libraries", server.api);

    let (status, body) =
        call("POST", &url, Some(token), Some(json!({"name": "a", "paths": [media.join("films")]}))).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_i64().unwrap();
    let (status, body) = call("POST", &url, Some(token), Some(json!({"name": "b", "paths": [video]}))).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call("POST", &url, Some(token), Some(json!({"name": "c", "paths": [other]}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("is outside LIBRARY_ROOTS ({}, {})", media.display(), video.display())),
        "{message}"
    );
    let (status, body) = call("PUT", &format!("{url}/{id}"), Some(token), Some(json!({"paths": [other]}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");
    // A system folder stays refused even inside a root.
    drop(server);
    let mut cmd = cluster::main_command(&dir.path().join("data"), 0, None);
    cmd.env("LIBRARY_ROOTS", "/");
    let server = ServerProcess::start(cmd);
    let token = cluster::login(&server).await;
    let url = format!("{}/libraries", server.api);
    let (status, body) = call("POST", &url, Some(&token), Some(json!({"name": "d", "paths": ["/etc"]}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");
    let (status, body) = call("POST", &url, Some(&token), Some(json!({"name": "e", "paths": [other]}))).await;
    assert_eq!(status, 201, "{body}");
}

/// The settings reach a linked node through the main node: a read that fails there fails
/// the linked node's attempt too, instead of defaulting to "don't keep".
#[actix_web::test]
async fn a_linked_node_fails_its_attempt_when_the_main_node_cannot_read_the_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (main_data, media) = (dir.path().join("main"), dir.path().join("media"));
    std::fs::create_dir_all(&media).unwrap();
    let source = clips::h264(&media, "a.mkv", "160x120", 1);
    let original = read(&source);
    let main = cluster::main_node(&main_data, 0, Some(&license::pro_key()));
    let db = crate::common::server::database_of(&main_data).await;
    repo::settings::set(&db, repo::settings::KEEP_ORIGINALS, &"yes").await.unwrap();

    let _linked = ServerProcess::start(cluster::linked_command(&dir.path().join("linked"), &main.api, "worker", 0));

    let token = cluster::login(&main).await;
    let token = token.as_str();
    cluster::add_library(&main, token, &media).await;
    let done = cluster::wait_all_done(&main, token, 1, 120).await;
    let id = done[0]["id"].as_i64().unwrap();
    let job = cluster::job_detail(&main, token, id).await;
    assert_eq!(job["status"], "FAILED", "{job}");
    assert_eq!(job["node"], "worker", "{job}");
    assert!(failure_message(&job).contains("the settings could not be read"), "{job}");
    assert_eq!(read(&source), original);
    assert!(!backup_path_for(&source).exists());
}

/// A job whose transition removes its partial output is never recorded with the folder
/// still there (a crash right after the write would leave it): the folder goes first. Seen
/// from inside the write: PostgreSQL holds the UPDATE that records CANCELLED (a trigger
/// waits on an advisory lock the test holds), and the test looks at the folder meanwhile,
/// as a crash at that moment would leave it. The old code recorded first and removed after.
#[actix_web::test]
async fn a_cancelled_job_is_recorded_only_once_its_partial_output_is_gone() {
    use sea_orm::TransactionTrait;
    let name = "fs_safety::a_cancelled_job_is_recorded_only_once_its_partial_output_is_gone";
    let Some(test_db) = TestDb::postgres(name).await else { return };
    let server = TestServer::start_throttled(test_db, 40).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::canonicalize(clips::h264(dir.path(), "movie.mkv", "320x240", 8)).unwrap();
    let partial = partial_dir_for(&source);
    server
        .db()
        .execute_unprepared(
            "CREATE FUNCTION hold_ended() RETURNS trigger AS $$ BEGIN \
               IF NEW.status IN ('CANCELLED', 'FAILED', 'COMPLETED') AND NEW.status IS DISTINCT FROM OLD.status THEN \
                 PERFORM pg_advisory_xact_lock(4242); \
               END IF; RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER hold_ended BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION hold_ended();",
        )
        .await
        .unwrap();
    let hold = server.db().begin().await.unwrap();
    hold.execute_unprepared("SELECT pg_advisory_xact_lock(4242)").await.unwrap();

    let library = server.library(&token, dir.path()).await;
    let id = server.scan(&token, library).await[0].1;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_dir(&partial)
        .map(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with("seg-")))
        .unwrap_or(false)
    {
        assert!(Instant::now() < deadline, "no segment was written: {}", server.job(&token, id).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancel =
        awc::Client::new().post(server.url(&format!("/jobs/{id}/cancel"))).bearer_auth(&token).send_json(&json!({}));
    let cancelling = actix_web::rt::spawn(async move { cancel.await.map(|r| r.status().as_u16()) });

    // The UPDATE to CANCELLED waits in the trigger.
    let waiting = "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted";
    let deadline = Instant::now() + Duration::from_secs(60);
    while server
        .db()
        .query_all(sea_orm::Statement::from_string(sea_orm::DbBackend::Postgres, waiting))
        .await
        .unwrap()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "CANCELLED was never written: {}", server.job(&token, id).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = partial.exists();
    hold.commit().await.unwrap();
    assert_eq!(cancelling.await.unwrap().unwrap(), 200);
    assert!(!left, "CANCELLED was being recorded while the partial output was still there");
    let cancelled = server.wait_for(&token, id, &["CANCELLED"]).await;
    assert!(!partial.exists(), "{cancelled}");
    assert!(source.exists(), "the original is gone");
    server.finish().await;
}
