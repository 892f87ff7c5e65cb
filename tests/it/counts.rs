//! The queue's PENDING and ANALYZING counts through the real server: a found file is
//! PENDING until the probe after the scan takes it up, ANALYZING while its batch's child
//! runs, then what the probe decided. The child is held by the read trap (`common::shim`),
//! which makes its read of one file hang: no hook in the product. A stop in the middle of a
//! batch leaves nothing ANALYZING.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::cluster::{call, login, main_command};
use crate::common::media as clips;
use crate::common::server::{media_children, Nodes, ServerProcess};
use crate::common::shim;

/// `condense serve` over `data` that takes no jobs itself (MAX_JOBS=0: nothing leaves the
/// queue), whose `condense-media` children hang for ever reading `hung`.
fn held(data: &Path, trap: &Path, hung: &Path) -> ServerProcess {
    let mut cmd = main_command(data, 0, None);
    cmd.env("LD_PRELOAD", trap)
        .env("CONDENSE_SHIM_PATH", hung)
        .env("CONDENSE_SHIM_MODE", "hang")
        // The hung child is not killed for its time while the test looks.
        .env("ANALYSIS_TIMEOUT_SECONDS", "3600");
    ServerProcess::start(cmd)
}

/// `dir/media` holding `a_hung.mkv` (H.264), its canonical path, and the trap built in `dir`.
fn library_dir(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let media = dir.join("media");
    std::fs::create_dir_all(&media).unwrap();
    let hung = std::fs::canonicalize(clips::h264(&media, "a_hung.mkv", "64x64", 1)).unwrap();
    let trap = shim::build(dir, "read-trap", shim::READ_TRAP);
    (media, hung, trap)
}

/// A library over `media` (its target HEVC), scanned at its creation: its id.
async fn add_library(server: &ServerProcess, token: &str, media: &Path) -> i64 {
    let body = json!({"name": "media", "paths": [media], "encoder": "libx265", "watch": false});
    let (status, library) = call("POST", &format!("{}/libraries", server.api), Some(token), Some(body)).await;
    assert_eq!(status, 201, "{library}");
    library["id"].as_i64().unwrap()
}

/// `GET /queue/stats` once `ok` holds for it (fails the test, naming `what`, after 120 s).
async fn stats_once(server: &ServerProcess, token: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (status, stats) = call("GET", &format!("{}/queue/stats", server.api), Some(token), None).await;
        assert_eq!(status, 200, "{stats}");
        if ok(&stats) {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {stats}\n{:#?}",
            server.output().iter().rev().take(30).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The file names of the jobs in `status`, as the job list filters them.
async fn names_in(server: &ServerProcess, token: &str, status: &str) -> Vec<String> {
    let url = format!("{}/jobs?status={status}&pageSize=500&sort=fileName&order=asc", server.api);
    let (code, page) = call("GET", &url, Some(token), None).await;
    assert_eq!(code, 200, "{page}");
    page["items"].as_array().unwrap().iter().map(|j| j["fileName"].as_str().unwrap().to_string()).collect()
}

/// Every job, by file name: (status, source codec).
async fn outcomes(server: &ServerProcess, token: &str) -> Vec<(String, String, Value)> {
    let url = format!("{}/jobs?pageSize=500&sort=fileName&order=asc", server.api);
    let (_, page) = call("GET", &url, Some(token), None).await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["fileName"].as_str().unwrap().to_string(),
                j["status"].as_str().unwrap().to_string(),
                j["sourceCodec"].clone(),
            )
        })
        .collect()
}

fn count(stats: &Value, name: &str) -> u64 {
    stats[name].as_u64().unwrap()
}

#[actix_web::test]
async fn found_files_are_pending_until_probed_and_analyzing_while_their_batch_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (media, hung, trap) = library_dir(dir.path());
    let mut server = held(&data, &trap, &hung);
    let token = login(&server).await;
    let library = add_library(&server, &token, &media).await;

    // The first file's batch is in its child, which hangs on it.
    stats_once(&server, &token, "the first file in its probe", |s| count(s, "analyzing") == 1).await;
    // Files found meanwhile wait, PENDING, counted, until the probe takes them up.
    std::fs::copy(&hung, media.join("b.mkv")).unwrap();
    std::fs::copy(&hung, media.join("c.mkv")).unwrap();
    clips::hevc(&media, "d_hevc.mkv");
    let (status, scanned) =
        call("POST", &format!("{}/libraries/{library}/scan", server.api), Some(&token), Some(json!({}))).await;
    assert_eq!(status, 200, "{scanned}");
    let stats = stats_once(&server, &token, "three files found", |s| count(s, "pending") == 3).await;
    assert_eq!((count(&stats, "analyzing"), count(&stats, "queued"), count(&stats, "skipped")), (1, 0, 0), "{stats}");
    // A file in the batch probe holds no worker.
    assert_eq!(count(&stats, "activeWorkers"), 0, "{stats}");
    assert_eq!(names_in(&server, &token, "PENDING").await, ["b.mkv", "c.mkv", "d_hevc.mkv"]);
    assert_eq!(names_in(&server, &token, "ANALYZING").await, ["a_hung.mkv"]);

    // The hung child dies: its file is left to its attempt, the others are probed and decided.
    let children = media_children(&data, Nodes::At, b"media");
    assert!(!children.is_empty(), "no probe child");
    for pid in children {
        // SAFETY: kill(2) on a probe child of the server this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let stats = stats_once(&server, &token, "every file decided", |s| {
        count(s, "pending") == 0 && count(s, "analyzing") == 0 && count(s, "queued") == 3
    })
    .await;
    assert_eq!(count(&stats, "skipped"), 1, "{stats}");
    assert_eq!(
        outcomes(&server, &token).await,
        [
            ("a_hung.mkv".to_string(), "QUEUED".to_string(), Value::Null),
            ("b.mkv".to_string(), "QUEUED".to_string(), json!("h264")),
            ("c.mkv".to_string(), "QUEUED".to_string(), json!("h264")),
            ("d_hevc.mkv".to_string(), "SKIPPED".to_string(), json!("hevc")),
        ]
    );
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}

#[actix_web::test]
async fn a_stop_during_a_batch_probe_leaves_its_files_to_be_probed_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (media, hung, trap) = library_dir(dir.path());
    std::fs::copy(&hung, media.join("b.mkv")).unwrap();
    std::fs::copy(&hung, media.join("c.mkv")).unwrap();
    let mut server = held(&data, &trap, &hung);
    let token = login(&server).await;
    add_library(&server, &token, &media).await;
    stats_once(&server, &token, "the batch in its probe", |s| count(s, "analyzing") == 3).await;
    // A crash in the middle of the batch.
    server.signal_and_wait(libc::SIGKILL);

    let mut server = ServerProcess::start(main_command(&data, 0, None));
    let token = login(&server).await;
    stats_once(&server, &token, "the batch probed again", |s| {
        count(s, "pending") == 0 && count(s, "analyzing") == 0 && count(s, "queued") == 3
    })
    .await;
    // Probed at the start, not handed to the attempts as orphans without facts.
    let probed = outcomes(&server, &token).await;
    for name in ["a_hung.mkv", "b.mkv", "c.mkv"] {
        assert!(probed.contains(&(name.to_string(), "QUEUED".to_string(), json!("h264"))), "{name}: {probed:?}");
    }
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}
