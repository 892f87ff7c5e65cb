//! Library health checks on linked nodes (issue 38, item 3), with real processes on
//! loopback: a main node that takes no jobs (MAX_JOBS=0) and a linked node that sees the
//! library check it on the linked node's idle slot, each result naming that node, and a
//! cancel stops the check on the linked node, and one file checked again goes there too; a linked
//! node that drops its link mid-batch gives its batch back, and the main node checks it;
//! and a linked node's own check of the paths it is given refuses any outside the library
//! paths it was told (`..`, a link out of the library, a root it was not told, a file gone)
//! without opening them.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use condense::actors::health_batch::check_told;
use condense::actors::protocol::{Call, Frame};
use condense::media::health::{Depth, Verdict};

use crate::common::cluster::{call, linked, media_dir, pro_main, up, wait_until, CLUSTER_TOKEN};
use crate::common::health::{ended, verdict_of};
use crate::common::media as clips;
use crate::common::server::{media_binary, media_children, Nodes, ServerProcess};

/// A good clip (HEVC, which a library encoding to HEVC leaves alone), one cut short in the
/// middle of its data, and a `.mkv` that is not media, in `dir`.
fn three_files(dir: &Path) {
    clips::hevc(dir, "good.mkv");
    let whole = clips::h264(dir, "whole.mkv", "320x240", 2);
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::write(dir.join("cut.mkv"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::remove_file(whole).unwrap();
    std::fs::write(dir.join("notes.mkv"), b"these are not the frames you are looking for").unwrap();
}

/// A library over `dir` that encodes nothing (disabled): its files are only checked.
async fn quiet_library(main: &ServerProcess, token: &str, dir: &Path) -> i64 {
    let body = json!({"name": "media", "paths": [dir], "encoder": "libx265", "quality": 30, "preset": "ultrafast",
        "watch": false, "enabled": false});
    let (status, library) = call("POST", &format!("{}/libraries", main.api), Some(token), Some(body)).await;
    assert_eq!(status, 201, "{library}");
    library["id"].as_i64().unwrap()
}

/// Whether the node named `node` is known to see the library named `library`.
fn sees(list: &[Value], node: &str, library: &str) -> bool {
    list.iter()
        .find(|n| n["name"] == node)
        .and_then(|n| n["libraries"].as_array()?.iter().find(|l| l["name"] == library).cloned())
        .is_some_and(|l| l["sees"] == json!(true))
}

/// Starts a quick check of `library` on `main`.
async fn start_quick_check(main: &ServerProcess, token: &str, library: i64) {
    let url = format!("{}/libraries/{library}/health", main.api);
    let (status, run) = call("POST", &url, Some(token), Some(json!({"depth": "quick"}))).await;
    assert_eq!(status, 202, "{run}");
}

/// The verdicts a quick check gives the three files, each checked by `node`.
fn assert_checked_by(health: &Value, node: &str) {
    assert_eq!(health["run"]["status"], "DONE", "{health}");
    assert_eq!((health["run"]["filesTotal"].as_i64(), health["run"]["filesDone"].as_i64()), (Some(3), Some(3)));
    assert_eq!(verdict_of(health, "good.mkv")["verdict"], "ok", "{health}");
    let cut = verdict_of(health, "cut.mkv")["verdict"].as_str().unwrap();
    assert!(cut == "damaged" || cut == "unreadable", "{health}");
    assert_eq!(verdict_of(health, "notes.mkv")["verdict"], "unreadable", "{health}");
    for name in ["good.mkv", "cut.mkv", "notes.mkv"] {
        assert_eq!(verdict_of(health, name)["node"], node, "{name}: {health}");
    }
}

#[actix_web::test]
async fn a_linked_node_that_sees_the_library_checks_it_on_its_idle_slot() {
    let (dir, media) = media_dir();
    three_files(&media);
    // The main node takes no jobs: its checks go to the linked node that has a slot.
    let (main, token) = pro_main(dir.path(), 0).await;
    let _w1 = linked(dir.path(), &main, "w1", 0);
    wait_until(&main, &token, "w1 up", 30, |l| up(l, "w1")).await;
    let library = quiet_library(&main, &token, &media).await;
    wait_until(&main, &token, "w1 sees the library", 30, |l| sees(l, "w1", "media")).await;

    start_quick_check(&main, &token, library).await;
    let health = ended(&main.api, &token, library, 120).await;
    assert_checked_by(&health, "w1");
    // A thorough check goes there too, one file a batch.
    let body = json!({"depth": "thorough", "all": true});
    let (status, run) =
        call("POST", &format!("{}/libraries/{library}/health", main.api), Some(&token), Some(body)).await;
    assert_eq!(status, 202, "{run}");
    let health = ended(&main.api, &token, library, 120).await;
    assert_checked_by(&health, "w1");
    let good = verdict_of(&health, "good.mkv");
    assert_eq!(good["depth"], "thorough", "{health}");

    // One file checked again: dealt like a run's batch, so it goes to w1's idle slot too
    // (the main node takes no jobs and leaves the library to w1, as in a run), and counts
    // toward no run.
    let url = format!("{}/libraries/{library}/health/files/{}/recheck", main.api, good["id"]);
    let (status, answer) = call("POST", &url, Some(&token), Some(json!({"depth": "quick"}))).await;
    assert_eq!(status, 202, "{answer}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let again = loop {
        let health = ended(&main.api, &token, library, 10).await;
        let file = verdict_of(&health, "good.mkv").clone();
        if file["depth"] == "quick" {
            assert_eq!(health["run"]["filesDone"], 3, "a check again counted toward the run: {health}");
            break file;
        }
        assert!(Instant::now() < deadline, "never checked again: {health}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!((again["verdict"].as_str(), again["node"].as_str()), (Some("ok"), Some("w1")), "{again}");
    assert_ne!(again["checkedAt"], good["checkedAt"], "{again}");
}

/// Whether process `pid` is stopped (SIGSTOP), as /proc says.
fn stopped(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().unwrap_or("").split_whitespace().next() == Some("T")
}

#[actix_web::test]
async fn a_cancel_stops_the_check_on_the_linked_node() {
    let (dir, media) = media_dir();
    let clip = clips::hevc(&media, "clip-0.mkv");
    for i in 1..6 {
        std::fs::copy(&clip, media.join(format!("clip-{i}.mkv"))).unwrap();
    }
    let (main, token) = pro_main(dir.path(), 0).await;
    let _w1 = linked(dir.path(), &main, "w1", 0);
    wait_until(&main, &token, "w1 up", 30, |l| up(l, "w1")).await;
    let library = quiet_library(&main, &token, &media).await;
    wait_until(&main, &token, "w1 sees the library", 30, |l| sees(l, "w1", "media")).await;
    let health = format!("{}/libraries/{library}/health", main.api);
    let (status, run) = call("POST", &health, Some(&token), Some(json!({"depth": "thorough"}))).await;
    assert_eq!(status, 202, "{run}");

    // One of w1's check children, stopped: left alone it would hold w1's slot until its
    // time limit (ANALYSIS_TIMEOUT_SECONDS, 300 s by default).
    let w1 = dir.path().join("w1");
    let deadline = Instant::now() + Duration::from_secs(60);
    let child = loop {
        assert!(Instant::now() < deadline, "w1 never ran a check child");
        if let Some(&pid) = media_children(&w1, Nodes::At, b"media").first() {
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            if stopped(pid) {
                break pid;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let (status, body) = call("DELETE", &health, Some(&token), None).await;
    assert_eq!(status, 202, "{body}");
    let ended = ended(&main.api, &token, library, 30).await;
    assert_eq!(ended["run"]["status"], "CANCELLED", "{ended}");
    // The cancel reached w1: the stopped child is killed, not left to its time limit.
    let deadline = Instant::now() + Duration::from_secs(60);
    while media_children(&w1, Nodes::At, b"media").contains(&child) {
        assert!(Instant::now() < deadline, "w1's check child {child} was left running after the cancel");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A linked node speaking the link's frames by hand: it registers as a node that takes
/// health checks, says it sees every library path it is told, and on the first health batch
/// it is given either answers with an error (as a node that does not know the call) or
/// closes its link without answering.
async fn node_that_gives_back(main_api: String, drop_link: bool) -> Vec<String> {
    use futures_util::{SinkExt, StreamExt};
    let (_, mut socket) =
        awc::Client::new().ws(format!("{main_api}/cluster/link")).bearer_auth(CLUSTER_TOKEN).connect().await.unwrap();
    let text = |frame: &Frame| awc::ws::Message::Text(serde_json::to_string(frame).unwrap().into());
    let register = Frame::Register {
        name: "giver".into(),
        address: "127.0.0.1".into(),
        cores: 2,
        memory_total: 1 << 30,
        gpu: None,
        encoders: vec!["libx265".into()],
        decoders: Vec::new(),
        max_jobs: 2,
        version: env!("CARGO_PKG_VERSION").into(),
        identity: None,
        shared_storage: None,
        transfer: false,
        work_dir_free_bytes: None,
        health_checks: true,
    };
    socket.send(text(&register)).await.unwrap();
    let mut told: Vec<String> = Vec::new();
    let mut beat = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(Instant::now() < deadline, "the main node gave the node no health batch");
        if beat.elapsed() >= Duration::from_millis(500) {
            beat = Instant::now();
            let heartbeat = Frame::Heartbeat {
                load1: 0.0,
                memory_used: 0,
                running: Vec::new(),
                helping: Vec::new(),
                missing_paths: Vec::new(),
                checked_paths: Some(told.clone()),
                transfer: false,
                work_dir_free_bytes: None,
                kept_jobs: Vec::new(),
            };
            socket.send(text(&heartbeat)).await.unwrap();
        }
        let frame = match tokio::time::timeout(Duration::from_millis(200), socket.next()).await {
            Err(_) => continue,
            Ok(Some(Ok(awc::ws::Frame::Text(bytes)))) => serde_json::from_slice::<Frame>(&bytes).unwrap(),
            Ok(Some(Ok(_))) => continue,
            Ok(other) => panic!("the link closed: {other:?}"),
        };
        match frame {
            Frame::Libraries { paths, .. } => told = paths,
            Frame::Request { id, call } => {
                if let Call::HealthBatch { paths, .. } = *call {
                    let given = paths.iter().map(|p| p.display().to_string()).collect();
                    if drop_link {
                        let _ = socket.close().await;
                    } else {
                        let refused = Frame::Reply { id, result: Err("not a call for a linked node".into()) };
                        socket.send(text(&refused)).await.unwrap();
                    }
                    return given;
                }
            }
            _ => {}
        }
    }
}

/// The main node takes no jobs, and the only linked node that sees the library takes a
/// batch and does not check it: the batch goes back to the run's queue, the node gets no
/// more, and the main node checks every file itself.
async fn a_batch_a_node_did_not_check_is_checked_by_the_main_node(drop_link: bool) {
    let (dir, media) = media_dir();
    three_files(&media);
    let (main, token) = pro_main(dir.path(), 0).await;
    let library = quiet_library(&main, &token, &media).await;
    let giver = actix_web::rt::spawn(node_that_gives_back(main.api.clone(), drop_link));
    wait_until(&main, &token, "the node sees the library", 30, |l| sees(l, "giver", "media")).await;
    start_quick_check(&main, &token, library).await;
    let given = giver.await.unwrap();
    assert_eq!(given.len(), 3, "the whole library is one quick batch: {given:?}");
    let health = ended(&main.api, &token, library, 120).await;
    assert_checked_by(&health, "main");
}

#[actix_web::test]
async fn a_batch_whose_node_drops_its_link_mid_batch_goes_back_to_the_queue() {
    a_batch_a_node_did_not_check_is_checked_by_the_main_node(true).await;
}

#[actix_web::test]
async fn a_batch_a_node_refuses_goes_back_to_the_queue() {
    a_batch_a_node_did_not_check_is_checked_by_the_main_node(false).await;
}

#[actix_web::test]
async fn a_node_refuses_paths_outside_the_library_paths_it_was_told_without_opening_them() {
    let tmp = tempfile::tempdir().unwrap();
    let library = tmp.path().join("library");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&library).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let good = clips::hevc(&library, "good.mkv");
    let secret = clips::hevc(&outside, "secret.mkv");
    std::os::unix::fs::symlink(&secret, library.join("link.mkv")).unwrap();
    let root = library.display().to_string();
    let told = vec![root.clone()];
    let paths = vec![
        good.clone(),
        library.join("../outside/secret.mkv"),
        library.join("link.mkv"),
        secret.clone(),
        library.join("gone.mkv"),
    ];
    // The call names the outside folder as a root too: it was never told as a library path.
    let roots = vec![root, outside.display().to_string()];
    let limit = Duration::from_secs(60);
    let results = check_told(media_binary(), limit, &told, &roots, &paths, Depth::Quick).await;
    assert_eq!(results.len(), paths.len());
    assert_eq!(results[0].verdict, Verdict::Ok, "{:?}", results[0]);
    // Refused, not read: the secret file is a good clip, which a check finds `ok`.
    for (path, result) in paths.iter().zip(&results).skip(1) {
        assert_eq!(result.verdict, Verdict::Unreadable, "{}: {result:?}", path.display());
        let message = result.message.as_deref().unwrap_or_default();
        assert!(message.contains("is not a file in any library"), "{}: {message}", path.display());
    }
    // Told the outside folder too, the same call reads the secret file.
    let told = roots.clone();
    let results = check_told(media_binary(), limit, &told, &roots, &[secret], Depth::Thorough).await;
    assert_eq!(results[0].verdict, Verdict::Ok, "{:?}", results[0]);
}
