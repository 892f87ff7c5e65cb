//! A main node and linked nodes as separate processes on loopback, sharing media folders.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use condense::actors::lifecycle::EventContext;
use condense::actors::node::RunningJob;
use condense::actors::protocol::{Call, Frame};
use condense::domain::job::{FailureCode, JobEvent};
use condense::domain::placement::SharedStorage;
use condense::repo::jobs::JobChange;
use entities::job;

use crate::common::cluster::{
    add_library, blind_command, blind_command_leaving, blind_node, call, hidden_share, job_detail, jobs, linked,
    linked_command, login, main_command, main_node, main_on_port, media_dir, mount_namespaces, nodes, pro_main, sees,
    status_of, up, wait_all_done, wait_for_names, wait_until, CLUSTER_TOKEN,
};
use crate::common::license::{key_of, pro_key};
use crate::common::media as clips;
use crate::common::server::{free_port, media_children, Nodes, ServerProcess};

#[actix_web::test]
async fn main_and_two_linked_nodes_share_six_jobs_and_forward_the_api() {
    let (dir, media) = media_dir();
    for i in 0..6 {
        clips::h264(&media, &format!("clip{i}.mkv"), "320x240", 2);
    }
    let (main, token) = pro_main(dir.path(), 1).await;
    let w1 = linked(dir.path(), &main, "w1", 20);
    let w2 = linked(dir.path(), &main, "w2", 20);
    wait_until(&main, &token, "both linked nodes up", 30, |l| up(l, "w1") && up(l, "w2")).await;

    // A linked node's API answers with the main node's answer.
    let (status, via_w1) = call("GET", &format!("{}/api/nodes", w1.api), Some(&token), None).await;
    assert_eq!(status, 200, "{via_w1}");
    let names = |v: &Value| {
        v.as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap().to_string()).collect::<HashSet<_>>()
    };
    assert_eq!(names(&via_w1), names(&Value::Array(nodes(&main, &token).await)));
    // Each node reports what really opens on it: here, with no GPU device, the CPU encoders
    // and no hardware encoder, nothing to decode on; the encoder table says why not.
    if !std::path::Path::new("/dev/dri").exists() && !std::path::Path::new("/dev/nvidiactl").exists() {
        for node in nodes(&main, &token).await {
            let encoders: Vec<&str> = node["encoders"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            assert!(encoders.contains(&"libx265") && encoders.contains(&"libsvtav1"), "{node}");
            assert!(!encoders.iter().any(|e| ["hevc_nvenc", "hevc_qsv", "hevc_vaapi"].contains(e)), "{node}");
            assert_eq!(node["decoders"], json!([]), "{node}");
        }
        let (status, catalog) = call("GET", &format!("{}/api/encoders", main.api), Some(&token), None).await;
        assert_eq!(status, 200, "{catalog}");
        let hevc = catalog["codecs"][0]["encoders"].as_array().unwrap();
        for (entry, needs) in hevc.iter().skip(1).zip(["NVENC", "Quick Sync", "VAAPI device"]) {
            assert_eq!(entry["available"], false, "{entry}");
            assert!(entry["unavailableReason"].as_str().unwrap().contains(needs), "{entry}");
        }
    }
    let (status, _) = call("GET", &format!("{}/api/nodes", w2.ui), None, None).await;
    assert_eq!(status, 401, "the token rule holds through a linked node");

    // The live feed through a linked node: the main node's messages, relayed; its token
    // rule too.
    let refused = awc::Client::new().ws(format!("{}/ws", w2.api)).connect().await;
    assert!(
        matches!(refused, Err(awc::error::WsClientError::InvalidResponseStatus(s)) if s.as_u16() == 401),
        "{:?}",
        refused.map(|(response, _)| response.status())
    );
    let (response, mut feed) = awc::Client::new().ws(format!("{}/ws?token={token}", w1.ui)).connect().await.unwrap();
    assert_eq!(response.status().as_u16(), 101);
    let seen: std::rc::Rc<std::cell::RefCell<Vec<Value>>> = std::rc::Rc::default();
    let collector = {
        use futures_util::{SinkExt, StreamExt};
        let seen = seen.clone();
        actix_web::rt::spawn(async move {
            while let Some(Ok(frame)) = feed.next().await {
                match frame {
                    awc::ws::Frame::Text(bytes) => seen.borrow_mut().push(serde_json::from_slice(&bytes).unwrap()),
                    awc::ws::Frame::Ping(bytes) => {
                        let _ = feed.send(awc::ws::Message::Pong(bytes)).await;
                    }
                    awc::ws::Frame::Close(_) => break,
                    _ => {}
                }
            }
        })
    };

    add_library(&main, &token, &media).await;
    let done = wait_all_done(&main, &token, 6, 240).await;
    assert!(done.iter().all(|j| j["status"] == "COMPLETED"), "{done:#?}");
    let completed = |seen: &[Value]| -> HashSet<i64> {
        seen.iter()
            .filter(|m| m["type"] == "status" && m["status"] == "COMPLETED")
            .filter_map(|m| m["jobId"].as_i64())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while completed(&seen.borrow()).len() < 6 {
        assert!(Instant::now() < deadline, "through w1's feed: {:#?}", seen.borrow());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    collector.abort();
    let used: HashSet<&str> = done.iter().map(|j| j["node"].as_str().expect("each job names its node")).collect();
    assert!(used.len() >= 2, "all jobs ran on {used:?}");
    for job in &done {
        let info = condense_media::probe::probe(Path::new(job["filePath"].as_str().unwrap())).unwrap();
        assert_eq!(info.video().unwrap().codec, "hevc");
    }
}

// A linked node's API listener asks the main node under /api, its web interface as asked
// (issue 19): behind the nginx example, which sends only /api/, /ws and /cluster/link to the
// API, an unprefixed /jobs asked of a linked node came back as the dashboard's page. The
// "main node" here is a loopback server that records what it is asked.
#[actix_web::test]
async fn a_linked_node_asks_the_main_node_for_its_api_under_api() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream_url = format!("http://{}", upstream.local_addr().unwrap());
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = asked.clone();
    std::thread::spawn(move || {
        for stream in upstream.incoming().flatten() {
            let mut line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // Skip the rest of the head (these requests carry no body).
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            log.lock().unwrap().push(line.split_whitespace().nth(1).unwrap_or("").to_string());
            let _ = (&stream)
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
        }
    });
    let data = dir.path().join("w1");
    // Its link to this "main node" fails and is retried; its listeners serve meanwhile.
    let w1 = ServerProcess::start(linked_command(&data, &upstream_url, "w1", 0));
    for (url, expected) in [
        (format!("{}/jobs?page=2", w1.api), "/api/jobs?page=2"),
        (format!("{}/api/nodes", w1.api), "/api/nodes"),
        (format!("{}/queue/stats", w1.api), "/api/queue/stats"),
        (format!("{}/assets/app.js", w1.ui), "/assets/app.js"),
        (format!("{}/api/jobs", w1.ui), "/api/jobs"),
    ] {
        asked.lock().unwrap().retain(|p| p.starts_with("/cluster/"));
        let (status, _) = call("GET", &url, None, None).await;
        assert_eq!(status, 200, "{url}");
        let seen: Vec<String> = asked.lock().unwrap().iter().filter(|p| !p.starts_with("/cluster/")).cloned().collect();
        assert_eq!(seen, [expected], "{url}");
    }
}

/// Transcoder processes of this test's nodes (their DATA_DIRs lie under `dir`); other tests
/// run at the same time.
fn transcoders_running(dir: &Path) -> usize {
    media_children(dir, Nodes::Below, b"transcode").len()
}

#[actix_web::test]
async fn a_linked_node_killed_mid_encode_goes_offline_and_its_job_completes_elsewhere() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let (dir, media) = media_dir();
    let source = clips::h264(&media, "movie.mkv", "320x240", 8);
    let original = std::fs::read(&source).unwrap();
    // The main node only coordinates: the job must run on a linked node.
    let (main, token) = pro_main(dir.path(), 0).await;
    let mut workers = [linked(dir.path(), &main, "w1", 30), linked(dir.path(), &main, "w2", 30)];
    wait_until(&main, &token, "linked nodes up", 30, |l| up(l, "w1") && up(l, "w2")).await;

    let stop = Arc::new(AtomicBool::new(false));
    let (missing, most) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let watcher = {
        let (stop, missing, most, path) = (stop.clone(), missing.clone(), most.clone(), source.clone());
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if !path.exists() {
                    missing.store(true, Ordering::SeqCst);
                }
                most.fetch_max(transcoders_running(&root), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    add_library(&main, &token, &media).await;
    let partial = condense::media::layout::partial_dir_for(&source);
    let deadline = Instant::now() + Duration::from_secs(60);
    let victim = loop {
        let all = jobs(&main, &token).await;
        let segments = std::fs::read_to_string(partial.join("manifest.json")).is_ok_and(|m| m.contains("seg-00001"));
        if let Some(job) = all.first().filter(|j| j["status"] == "ENCODING" && segments) {
            break job["node"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "the encode never got going: {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let index = if victim == "w1" { 0 } else { 1 };
    let killed_at = Instant::now();
    workers[index].child.kill().unwrap();
    workers[index].child.wait().unwrap();
    wait_until(&main, &token, "the killed node marked OFFLINE", 20, |l| status_of(l, &victim) == Some("OFFLINE")).await;
    let noticed = killed_at.elapsed();

    let done = wait_all_done(&main, &token, 1, 120).await;
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    let job = &done[0];
    assert_eq!(job["status"], "COMPLETED", "{job}");
    assert_ne!(job["node"].as_str(), Some(victim.as_str()), "the job finished on the dead node?");
    assert!(!missing.load(Ordering::SeqCst), "the original's path was empty at some moment");
    let most = most.load(Ordering::SeqCst);
    assert_eq!(most, 1, "transcoders seen at once: {most} (0 means the check saw none)");
    assert!(noticed < Duration::from_secs(4 + 10), "OFFLINE came after {noticed:?}");
    let (_, detail) = call("GET", &format!("{}/jobs/{}", main.api, job["id"]), Some(&token), None).await;
    let kinds: Vec<&str> = detail["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"orphaned"), "{kinds:?}");
    assert_ne!(std::fs::read(&source).unwrap(), original, "the file was not replaced");
    let info = condense_media::probe::probe(&source).unwrap();
    assert_eq!(info.video().unwrap().codec, "hevc");
}

#[actix_web::test]
async fn under_free_a_second_node_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let main = main_node(&dir.path().join("main"), 1, None);
    let token = login(&main).await;
    let worker = linked(dir.path(), &main, "w1", 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = worker.output().join("\n");
        if out.contains("refused") {
            assert!(out.contains("FREE") && out.contains("licence"), "{out}");
            break;
        }
        assert!(Instant::now() < deadline, "no refusal: {out}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let list = nodes(&main, &token).await;
    assert_eq!(status_of(&list, "w1"), None, "{list:#?}");
}

/// A main node in `dir/main` that only coordinates (no job slot), with a PRO licence, and its
/// first user's token. Heartbeats every 5 s (linked nodes offline after 30 s of silence): what
/// a node reports within a few seconds of a library's creation came with the library's
/// change, not with a heartbeat.
async fn patient_coordinator(dir: &Path) -> (ServerProcess, String) {
    let mut coordinator = main_command(&dir.join("main"), 0, Some(&pro_key()));
    coordinator.env("HEARTBEAT_SECONDS", "5").env("NODE_TIMEOUT_SECONDS", "30");
    let main = ServerProcess::start(coordinator);
    let token = login(&main).await;
    (main, token)
}

/// The hidden share (`hidden_share`) with three one-second clips in its library folder.
fn hidden_with_three_clips(dir: &Path) -> (PathBuf, PathBuf) {
    let (hidden, media) = hidden_share(dir);
    for i in 0..3 {
        clips::h264(&media, &format!("c{i}.mkv"), "320x240", 1);
    }
    (hidden, media)
}

/// The blind node "blind", taking only files it sees (`SHARED_STORAGE=required`).
fn blind_seeing_only_its_own(dir: &Path, hidden: &Path, main: &ServerProcess) -> ServerProcess {
    let mut blind = blind_command(dir, hidden, main, "blind");
    blind.env("SHARED_STORAGE", "required");
    ServerProcess::start(blind)
}

/// A node that takes only files it sees (`SHARED_STORAGE=required`) and cannot see a library
/// is DEGRADED for it and gets none of its jobs, even with the main node busy.
#[actix_web::test]
async fn a_linked_node_that_cannot_see_a_library_is_degraded_and_gets_none_of_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let (hidden, media) = hidden_with_three_clips(dir.path());
    if !mount_namespaces("cluster::a_linked_node_that_cannot_see_a_library") {
        return;
    }
    let (main, token) = pro_main(dir.path(), 1).await;
    let _blind = blind_seeing_only_its_own(dir.path(), &hidden, &main);
    wait_until(&main, &token, "blind ONLINE", 30, |l| status_of(l, "blind").is_some()).await;
    add_library(&main, &token, &media).await;
    let blind_reason = |l: &[Value]| {
        l.iter().find(|n| n["name"] == "blind").and_then(|n| n["statusReason"].as_str()).unwrap_or("").to_string()
    };
    let path = media.to_str().unwrap().to_string();
    let list = wait_until(&main, &token, "blind DEGRADED for the path", 30, |l| {
        status_of(l, "blind") == Some("DEGRADED") && blind_reason(l).contains(&path)
    })
    .await;
    assert!(blind_reason(&list).contains("cannot see"), "{}", blind_reason(&list));
    let done = wait_all_done(&main, &token, 3, 120).await;
    assert!(done.iter().all(|j| j["status"] == "COMPLETED" && j["node"] == "main"), "{done:#?}");
}

/// A node whose library folder is the empty folder a share should be mounted over (an
/// empty tmpfs over the library's own folder: the folder is there, its files are not) does
/// not see the library, as the main node finds files in it: with `SHARED_STORAGE=required`
/// it is DEGRADED for it and gets none of its jobs, which the main node encodes. (A folder
/// was enough before: the node said it saw the library and was given jobs it could not
/// read.)
#[actix_web::test]
async fn a_node_whose_library_folder_is_an_empty_mount_point_does_not_see_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let (_share, media) = hidden_with_three_clips(dir.path());
    if !mount_namespaces("cluster::a_node_whose_library_folder_is_an_empty_mount_point") {
        return;
    }
    let (main, token) = pro_main(dir.path(), 1).await;
    let _blind = blind_seeing_only_its_own(dir.path(), &media, &main);
    wait_until(&main, &token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&main, &token, &media).await;
    let list = wait_until(&main, &token, "blind says it does not see the library, DEGRADED", 30, |l| {
        sees(l, "blind", "media") == Some(false) && status_of(l, "blind") == Some("DEGRADED")
    })
    .await;
    assert_eq!(sees(&list, "main", "media"), Some(true), "{list:#?}");
    let done = wait_all_done(&main, &token, 3, 120).await;
    assert!(
        done.iter().all(|j| j["status"] == "COMPLETED" && j["node"] == "main" && j["retryCount"] == 0),
        "{done:#?}"
    );
}

/// A node with `SHARED_STORAGE=required` whose library folder holds something else than the
/// library (a stale share, another disk mounted there) says it sees the library and is given
/// its jobs; each finds no file at its path and goes back to the queue instead of failing
/// (a file that is fine), and the node counts the library as not seen from then on:
/// DEGRADED, given nothing more. A node that sees the library encodes them all at their
/// first try.
#[actix_web::test]
async fn jobs_a_node_does_not_find_at_their_paths_go_back_to_the_queue_unfailed() {
    let dir = tempfile::tempdir().unwrap();
    let (_share, media) = hidden_with_three_clips(dir.path());
    if !mount_namespaces("cluster::jobs_a_node_does_not_find_at_their_paths_go_back_to_the_queue_unfailed") {
        return;
    }
    let (main, token) = patient_coordinator(dir.path()).await;
    let mut stale = blind_command_leaving(dir.path(), &media, &main, "blind", Some("other.mkv"));
    stale.env("SHARED_STORAGE", "required");
    let blind = ServerProcess::start(stale);
    wait_until(&main, &token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&main, &token, &media).await;
    let list = wait_until(&main, &token, "blind finds the files missing, DEGRADED", 60, |l| {
        sees(l, "blind", "media") == Some(false) && status_of(l, "blind") == Some("DEGRADED")
    })
    .await;
    assert_eq!(sees(&list, "main", "media"), Some(true), "{list:#?}");
    let given_back =
        blind.output().iter().any(|l| l.contains("the job's file is not here: the job goes back to the queue"));
    assert!(given_back, "{}", blind.output().join("\n"));
    let all = jobs(&main, &token).await;
    assert!(all.iter().all(|j| j["status"] != "FAILED" && j["retryCount"] == 0), "{all:#?}");
    let _sighted = linked(dir.path(), &main, "sighted", 0);
    let done = wait_all_done(&main, &token, 3, 180).await;
    for job in &done {
        assert!(job["status"] == "COMPLETED" && job["node"] == "sighted" && job["retryCount"] == 0, "{job:#}");
    }
    let reasons: Vec<String> = {
        let mut reasons = Vec::new();
        for job in &done {
            let detail = job_detail(&main, &token, job["id"].as_i64().unwrap()).await;
            reasons.extend(
                detail["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|e| e["detail"]["reason"].as_str().map(String::from)),
            );
        }
        reasons
    };
    assert!(reasons.iter().any(|r| r == "the file is not at its path on node blind"), "{reasons:?}");
}

/// Issue 39's acceptance: a library created after a node that cannot see it linked. The
/// main node only coordinates (MAX_JOBS=0) and heartbeats every 5 s, the default; the node
/// has the default `SHARED_STORAGE=auto`. It says at once that it does not see the library
/// (and is not DEGRADED for it: it takes its files by transfer), fetches each file over
/// its link, encodes it in its WORK_DIR and uploads the output, which the main node
/// verifies and puts in the original's place: every job COMPLETED on that node, each
/// output the source's frames in the codec asked, and nothing left in WORK_DIR.
#[actix_web::test]
async fn a_library_created_after_a_blind_node_linked_is_encoded_by_it_by_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let (hidden, media) = hidden_share(dir.path());
    let clips: Vec<(PathBuf, u64, Vec<u8>)> = (0..3)
        .map(|i| {
            let clip = clips::h264(&media, &format!("c{i}.mkv"), "320x240", 1);
            let frames = crate::common::shim::video_frames(&clip);
            let before = clips::sha(&clip);
            (clip, frames, before)
        })
        .collect();
    if !mount_namespaces("cluster::a_library_created_after_a_blind_node_linked_is_encoded_by_it") {
        return;
    }
    let (main, token) = patient_coordinator(dir.path()).await;
    let blind = blind_node(dir.path(), &hidden, &main, "blind");
    wait_until(&main, &token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&main, &token, &media).await;
    let list = wait_until(&main, &token, "blind reports it cannot see the library", 30, |l| {
        sees(l, "blind", "media") == Some(false)
    })
    .await;
    let row = list.iter().find(|n| n["name"] == "blind").unwrap();
    assert_eq!((&row["sharedStorage"], &row["transfer"]), (&json!("auto"), &json!(true)), "{row:#}");
    let done = wait_all_done(&main, &token, 3, 240).await;
    for job in &done {
        assert!(job["status"] == "COMPLETED" && job["node"] == "blind", "{job:#}\n{}", blind.output().join("\n"));
        let detail = job_detail(&main, &token, job["id"].as_i64().unwrap()).await;
        assert!(detail.to_string().contains("\"byTransfer\":true"), "{detail:#}");
    }
    for (clip, frames, before) in &clips {
        let info = condense_media::probe::probe(clip).unwrap();
        assert_eq!(info.video().unwrap().codec, "hevc", "{}", clip.display());
        assert_eq!(crate::common::shim::video_frames(clip), *frames, "{}", clip.display());
        assert_ne!(&clips::sha(clip), before, "{} was not replaced", clip.display());
    }
    // Nothing beside the originals (no partial folder, no upload), nothing in WORK_DIR.
    let mut names: Vec<_> = std::fs::read_dir(&media).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["c0.mkv", "c1.mkv", "c2.mkv"].map(std::ffi::OsString::from), "{names:?}");
    wait_for_names(&dir.path().join("blind/work"), &[], 20).await;
    // Not DEGRADED for the library it does not see: it takes its files by transfer. (The
    // machine's load may degrade it, as any node: only the library's cause is checked.)
    let list = nodes(&main, &token).await;
    let row = list.iter().find(|n| n["name"] == "blind").unwrap();
    let reason = row["statusReason"].as_str().unwrap_or_default();
    assert!(!reason.contains("cannot see"), "{row:#}");
    assert_eq!(sees(&list, "blind", "media"), Some(false), "{list:#?}");
}

/// Issue 39: `SHARED_STORAGE=required` keeps a node to the files it sees: a library created
/// after it linked that it cannot see gives it none of its jobs (the main node only
/// coordinates, MAX_JOBS=0); it says so in `GET /nodes`, with its WORK_DIR's room, and is
/// DEGRADED for the library. A node that sees the library takes them all.
#[actix_web::test]
async fn a_blind_node_with_shared_storage_required_gets_none_of_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let (hidden, media) = hidden_with_three_clips(dir.path());
    if !mount_namespaces("cluster::a_blind_node_with_shared_storage_required") {
        return;
    }
    let (main, token) = patient_coordinator(dir.path()).await;
    let _blind = blind_seeing_only_its_own(dir.path(), &hidden, &main);
    wait_until(&main, &token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&main, &token, &media).await;
    let list = wait_until(&main, &token, "blind reports it cannot see the library, DEGRADED", 30, |l| {
        let reason = l.iter().find(|n| n["name"] == "blind").and_then(|n| n["statusReason"].as_str());
        sees(l, "blind", "media") == Some(false)
            && status_of(l, "blind") == Some("DEGRADED")
            && reason.is_some_and(|r| r.contains("cannot see"))
    })
    .await;
    assert_eq!(sees(&list, "main", "media"), Some(true), "{list:#?}");
    // What it said of its storage: its setting, no transfers, and WORK_DIR's room (its
    // default place, made private at its start).
    let row = list.iter().find(|n| n["name"] == "blind").unwrap();
    assert_eq!(row["sharedStorage"], json!("required"), "{row:#}");
    assert_eq!(row["transfer"], json!(false), "{row:#}");
    assert!(row["workDirFreeBytes"].as_i64().is_some_and(|b| b > 0), "{row:#}");
    let work = std::fs::metadata(dir.path().join("blind/work")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&work.permissions()) & 0o777, 0o700);
    let main_row = list.iter().find(|n| n["name"] == "main").unwrap();
    assert_eq!((&main_row["sharedStorage"], &main_row["workDirFreeBytes"]), (&Value::Null, &Value::Null));
    // Probed and waiting: no node that sees them has a free slot.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let all = jobs(&main, &token).await;
        assert!(all.iter().all(|j| j["node"] != "blind" && j["status"] != "FAILED"), "{all:#?}");
        if all.len() == 3 && all.iter().all(|j| j["status"] == "QUEUED") {
            break;
        }
        assert!(Instant::now() < deadline, "jobs not queued: {all:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _sighted = linked(dir.path(), &main, "sighted", 0);
    let done = wait_all_done(&main, &token, 3, 180).await;
    for job in &done {
        assert!(job["status"] == "COMPLETED" && job["node"] == "sighted" && job["retryCount"] == 0, "{job:#}");
        let detail = job_detail(&main, &token, job["id"].as_i64().unwrap()).await;
        assert!(!detail.to_string().contains("\"blind\""), "the blind node had a part in it: {detail:#}");
    }
    let list = nodes(&main, &token).await;
    assert_eq!(sees(&list, "sighted", "media"), Some(true), "{list:#?}");
    assert_eq!(sees(&list, "blind", "media"), Some(false), "{list:#?}");
}

/// Waits until one of the process's output lines contains `what`, and returns that line.
async fn wait_for_line(process: &ServerProcess, what: &str, limit: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        if let Some(line) = process.output().into_iter().find(|l| l.contains(what)) {
            return line;
        }
        assert!(Instant::now() < deadline, "no {what:?} in:\n{}", process.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn identity_in(data: &Path) -> Option<String> {
    std::fs::read_to_string(data.join("node-id")).ok().map(|s| s.trim().to_string())
}

#[actix_web::test]
async fn a_second_node_with_a_linked_nodes_name_is_refused_and_orphans_nothing() {
    let (dir, media) = media_dir();
    clips::h264(&media, "movie.mkv", "320x240", 8);
    // SUPPORTER: three nodes, the main node and two linked ones; a third linked node (here
    // one that only repeats a name) is over the licence.
    let license = key_of(condense::domain::license::Tier::Supporter);
    let main = main_node(&dir.path().join("main"), 0, Some(&license));
    let token = login(&main).await;
    let _workers = [linked(dir.path(), &main, "w1", 100), linked(dir.path(), &main, "w2", 100)];
    wait_until(&main, &token, "linked nodes up", 30, |l| up(l, "w1") && up(l, "w2")).await;
    add_library(&main, &token, &media).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let (job_id, busy) = loop {
        let all = jobs(&main, &token).await;
        if let Some(job) = all.first().filter(|j| j["status"] == "ENCODING") {
            break (job["id"].clone(), job["node"].as_str().unwrap().to_string());
        }
        assert!(Instant::now() < deadline, "the encode never got going: {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let before = nodes(&main, &token).await;
    let row = before.iter().find(|n| n["name"] == busy.as_str()).unwrap().clone();
    assert_eq!(row["identity"].as_str().map(str::to_string), identity_in(&dir.path().join(&busy)), "{row:#}");

    // The same NODE_NAME with its own DATA_DIR: another machine given the same name.
    let other = dir.path().join("same-name");
    let twin = ServerProcess::start(linked_command(&other, &main.api, &busy, 100));
    let refusal = wait_for_line(&twin, "refused", 30).await;
    assert!(refusal.contains(&format!("{busy:?}")) && refusal.contains("NODE_NAME"), "{refusal}");
    let said = wait_for_line(&main, "linked node refused", 30).await;
    assert!(said.contains("NODE_NAME"), "{said}");
    assert_eq!(identity_in(&other), None, "the refused node was given an identity");

    // The job runs on where it started (the twin's empty heartbeats would have orphaned it).
    let done = wait_all_done(&main, &token, 1, 120).await;
    assert_eq!(done[0]["status"], "COMPLETED", "{:#}", done[0]);
    assert_eq!(done[0]["node"].as_str(), Some(busy.as_str()));
    let (_, detail) = call("GET", &format!("{}/jobs/{job_id}", main.api), Some(&token), None).await;
    let kinds: Vec<&str> = detail["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(!kinds.contains(&"orphaned"), "{kinds:?}");
    let after = nodes(&main, &token).await;
    assert_eq!(after.len(), 3, "{after:#?}");
    let rows: Vec<&Value> = after.iter().filter(|n| n["name"] == busy.as_str()).collect();
    assert_eq!(rows.len(), 1, "{after:#?}");
    assert_eq!((&rows[0]["id"], &rows[0]["identity"]), (&row["id"], &row["identity"]));
    assert!(twin.output().iter().all(|l| !l.contains("registered with the main node")), "{:#?}", twin.output());
}

#[actix_web::test]
async fn a_linked_node_restarted_with_its_data_dir_keeps_its_identity() {
    let dir = tempfile::tempdir().unwrap();
    let (main, token) = pro_main(dir.path(), 1).await;
    // The order in which the node's files appear, as inotify reports their renames into place.
    let data = dir.path().join("w1");
    std::fs::create_dir_all(&data).unwrap();
    let (tx, placed) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            for path in event.paths {
                if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                    if name == "node-id" || name == "node-credential" {
                        let _ = tx.send(name.to_string());
                    }
                }
            }
        }
    })
    .unwrap();
    notify::Watcher::watch(&mut watcher, &data, notify::RecursiveMode::NonRecursive).unwrap();
    let mut worker = linked(dir.path(), &main, "w1", 0);
    let list = wait_until(&main, &token, "w1 up with an identity", 30, |l| {
        up(l, "w1") && l.iter().any(|n| n["name"] == "w1" && n["identity"].is_string())
    })
    .await;
    let first = list.iter().find(|n| n["name"] == "w1").unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while identity_in(&data).is_none() || credential_in(&data).is_none() {
        assert!(Instant::now() < deadline, "no node-id or node-credential in {}", data.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(identity_in(&data).as_deref(), first["identity"].as_str());
    // The credential is in place before the identity: a kill between the two must leave a
    // node that enrolls again, not an identity without its credential (refused for good).
    let order: Vec<String> = placed.try_iter().collect();
    assert_eq!(order.first().map(String::as_str), Some("node-credential"), "{order:?}");
    drop(watcher);

    // Killed, not stopped: it comes back before the main node has taken it offline.
    worker.child.kill().unwrap();
    worker.child.wait().unwrap();
    let again = linked(dir.path(), &main, "w1", 0);
    wait_for_line(&again, "registered with the main node", 60).await;
    let list = nodes(&main, &token).await;
    let rows: Vec<&Value> = list.iter().filter(|n| n["role"] == "linked").collect();
    assert_eq!(rows.len(), 1, "{list:#?}");
    assert_eq!((&rows[0]["id"], &rows[0]["identity"]), (&first["id"], &first["identity"]), "{list:#?}");
    assert_eq!(identity_in(&data).as_deref(), first["identity"].as_str());
    assert!(up(&list, "w1"), "{list:#?}");
}

/// A main node killed and started again on its port: the linked node sees its link end
/// once, links again once, and stays linked. The main node is stopped (SIGSTOP) before the
/// kill, so the node's last heartbeats lie unread in its socket and the kill resets the
/// connection: the node reads an error, then the end. Both counted as the link's end
/// started two tries to link again; the second linked while the first's link was up, was
/// refused, and took the working link with it, over and over, each time orphaning what
/// the node ran.
#[actix_web::test]
async fn a_linked_node_links_once_again_after_its_main_node_was_killed_and_stays_linked() {
    let dir = tempfile::tempdir().unwrap();
    let license = pro_key();
    let port = free_port().to_string();
    let start_main = || main_on_port(&dir.path().join("main"), &license, &port);
    let mut main = start_main();
    let token = login(&main).await;
    let node = linked(dir.path(), &main, "w1", 0);
    wait_until(&main, &token, "w1 up", 30, |l| up(l, "w1")).await;
    // The main node lists the node up before its answer to the registration reaches it:
    // stopped in between (seen under load), the node never read it and enrolls once only.
    wait_for_line(&node, "registered with the main node", 30).await;
    let pid = i32::try_from(main.child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Heartbeats come each second: some are sent, none read.
    let sent = node.output().len();
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.output().len() == sent && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    main.signal_and_wait(libc::SIGKILL);
    let main = start_main();
    let token = login(&main).await;
    wait_until(&main, &token, "w1 up again", 60, |l| up(l, "w1")).await;
    // Up, and up it stays: past the tries a second count of the end would make (its
    // backoff doubles from 1 s) and past the main node's timeout (4 s).
    let until = Instant::now() + Duration::from_secs(12);
    while Instant::now() < until {
        let list = nodes(&main, &token).await;
        assert!(up(&list, "w1"), "{list:#?}\n{}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let said = node.output();
    let why = said.join("\n");
    assert!(!said.iter().any(|l| l.contains("refused")), "{why}");
    assert_eq!(said.iter().filter(|l| l.contains("registered with the main node")).count(), 2, "{why}");
    assert_eq!(said.iter().filter(|l| l.contains("link to the main node lost")).count(), 1, "{why}");
}

fn credential_in(data: &Path) -> Option<String> {
    std::fs::read_to_string(data.join("node-credential")).ok().map(|s| s.trim().to_string())
}

async fn wait_for_file(path: &Path, limit: u64) {
    let deadline = Instant::now() + Duration::from_secs(limit);
    while !path.exists() {
        assert!(Instant::now() < deadline, "no {}", path.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// CLUSTER_TOKEN only enrolls: the node gets a credential of its own (the main node keeps
/// its hash only, the API never shows it), links with it after a restart without the token,
/// and the token cannot take its identity over. Revoked mid-encode, its link closes at
/// once, its job goes back to the queue and completes on another node, and its credential
/// is refused from then on; removed, its row is gone.
#[actix_web::test]
async fn a_node_links_with_its_own_credential_and_a_revoked_node_is_refused_and_its_job_requeued() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, media) = media_dir();
    let source = clips::h264(&media, "movie.mkv", "320x240", 8);
    // The main node only coordinates: the job must run on a linked node.
    let (main, token) = pro_main(dir.path(), 0).await;
    let mut first = linked(dir.path(), &main, "w1", 60);
    let data = dir.path().join("w1");
    wait_for_file(&data.join("node-credential"), 30).await;
    wait_for_file(&data.join("node-id"), 30).await;
    let (credential, identity) = (credential_in(&data).unwrap(), identity_in(&data).unwrap());
    assert!(credential.len() >= 32, "{credential}");
    let mode = std::fs::metadata(data.join("node-credential")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    // The main node keeps its hash, never the credential itself.
    let mut stored = Vec::new();
    for file in ["condense.db", "condense.db-wal"] {
        stored.extend(std::fs::read(dir.path().join("main").join(file)).unwrap_or_default());
    }
    let stored = String::from_utf8_lossy(&stored);
    assert!(stored.contains(&condense::security::hash_secret(&credential)), "the credential's hash is not stored");
    assert!(!stored.contains(&credential), "the credential is stored in the clear");
    let list = wait_until(&main, &token, "w1 up", 30, |l| up(l, "w1")).await;
    let row = list.iter().find(|n| n["name"] == "w1").unwrap().clone();
    assert_eq!((&row["hasCredential"], &row["revoked"]), (&json!(true), &json!(false)), "{row:#}");
    assert!(!serde_json::to_string(&list).unwrap().contains(&credential), "the API shows the credential");
    let node_id = row["id"].as_i64().unwrap();

    // Restarted without CLUSTER_TOKEN: it links with its credential, as the same node.
    assert!(first.signal_and_wait(libc::SIGTERM).success());
    let mut cmd = linked_command(&data, &main.api, "w1", 60);
    cmd.env_remove("CLUSTER_TOKEN");
    let again = ServerProcess::start(cmd);
    let line = wait_for_line(&again, "registered with the main node", 60).await;
    assert!(line.contains("enrolled=false"), "{line}");
    wait_until(&main, &token, "w1 up again", 30, |l| up(l, "w1")).await;
    assert_eq!(credential_in(&data).as_deref(), Some(credential.as_str()));

    // CLUSTER_TOKEN with w1's identity but not its credential: refused, w1 stays linked.
    let thief = dir.path().join("thief");
    std::fs::create_dir_all(&thief).unwrap();
    std::fs::write(thief.join("node-id"), format!("{identity}\n")).unwrap();
    let impostor = ServerProcess::start(linked_command(&thief, &main.api, "w9", 0));
    let refusal = wait_for_line(&impostor, "refused", 30).await;
    assert!(refusal.contains("credential of its own"), "{refusal}");
    drop(impostor);
    // A wrong credential is refused before the upgrade.
    let forged = awc::Client::new()
        .ws(format!("{}/cluster/link", main.api))
        .bearer_auth(format!("{identity}.{}", "x".repeat(48)))
        .connect()
        .await;
    assert!(
        matches!(forged, Err(awc::error::WsClientError::InvalidResponseStatus(status)) if status.as_u16() == 401),
        "{:?}",
        forged.map(|(response, _)| response.status())
    );

    // Revoked while it encodes.
    add_library(&main, &token, &media).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let job_id = loop {
        let all = jobs(&main, &token).await;
        if let Some(job) = all.first().filter(|j| j["status"] == "ENCODING" && j["node"] == "w1") {
            break job["id"].as_i64().unwrap();
        }
        assert!(Instant::now() < deadline, "the encode never got going on w1: {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _second = linked(dir.path(), &main, "w2", 0);
    wait_until(&main, &token, "w2 up", 30, |l| up(l, "w2")).await;
    let (status, body) = call("POST", &format!("{}/nodes/{node_id}/revoke", main.api), Some(&token), None).await;
    assert_eq!((status, &body["requeued"]), (200, &json!(1)), "{body}");
    let list = nodes(&main, &token).await;
    let row = list.iter().find(|n| n["name"] == "w1").unwrap();
    assert_eq!((&row["status"], &row["revoked"]), (&json!("OFFLINE"), &json!(true)), "at once: {row:#}");
    wait_for_line(&again, "link to the main node lost", 10).await;
    wait_for_line(&again, "it was revoked", 30).await;

    let done = wait_all_done(&main, &token, 1, 120).await;
    assert_eq!((&done[0]["status"], &done[0]["node"]), (&json!("COMPLETED"), &json!("w2")), "{:#}", done[0]);
    let (_, detail) = call("GET", &format!("{}/jobs/{job_id}", main.api), Some(&token), None).await;
    let kinds: Vec<&str> = detail["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"orphaned"), "{kinds:?}");
    let info = condense_media::probe::probe(&source).unwrap();
    assert_eq!(info.video().unwrap().codec, "hevc");
    // Still refused: it never came back.
    let list = nodes(&main, &token).await;
    assert_eq!(status_of(&list, "w1"), Some("OFFLINE"), "{list:#?}");
    assert!(again.output().iter().filter(|l| l.contains("registered with the main node")).count() == 1);

    // Removed: the row is gone (the node, refused, is not linked).
    let (status, body) = call("DELETE", &format!("{}/nodes/{node_id}", main.api), Some(&token), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(status_of(&nodes(&main, &token).await, "w1"), None);
    // The main node cannot be removed.
    let main_id = nodes(&main, &token).await.iter().find(|n| n["role"] == "main").unwrap()["id"].clone();
    let (status, body) = call("DELETE", &format!("{}/nodes/{main_id}", main.api), Some(&token), None).await;
    assert_eq!(status, 409, "{body}");
}

/// `condense-media <subcommand>` children of the node whose DATA_DIR is `data`.
fn children_of(data: &Path, subcommand: &[u8]) -> usize {
    media_children(data, Nodes::At, subcommand).len()
}

/// The nodes whose segments of the job are ENCODING now, by name, with the spans.
fn encoding_on(detail: &Value) -> Vec<(String, i64, bool)> {
    detail["segments"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter(|s| s["status"] == "ENCODING")
                .map(|s| {
                    (
                        s["nodeName"].as_str().unwrap_or("").to_string(),
                        s["index"].as_i64().unwrap(),
                        s["helper"] == true,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A 16 s clip with a keyframe every second (16 spans of 1 s), a main node that only
/// coordinates, and two linked nodes with one slot each, slowed so the encode lasts: the
/// node given the job runs it, the other's idle slot takes spans of it.
struct Helped {
    dir: tempfile::TempDir,
    source: std::path::PathBuf,
    main: ServerProcess,
    workers: Vec<ServerProcess>,
    token: String,
    job: i64,
}

async fn helped_cluster(throttle: u64) -> Helped {
    let (dir, media) = media_dir();
    let source = clips::h264(&media, "movie.mkv", "320x240", 16);
    let (main, token) = pro_main(dir.path(), 0).await;
    let workers = vec![linked(dir.path(), &main, "w1", throttle), linked(dir.path(), &main, "w2", throttle)];
    wait_until(&main, &token, "linked nodes up", 30, |l| up(l, "w1") && up(l, "w2")).await;
    add_library(&main, &token, &media).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let job = loop {
        if let Some(job) = jobs(&main, &token).await.first() {
            break job["id"].as_i64().unwrap();
        }
        assert!(Instant::now() < deadline, "no job for the clip");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    Helped { dir, source, main, workers, token, job }
}

impl Helped {
    fn data(&self, node: &str) -> std::path::PathBuf {
        self.dir.path().join(node)
    }

    /// Waits until the job's run and a helper on the other node encode spans at once, seen
    /// in the API and in /proc; answers (the job's node, the helper's node).
    async fn until_two_nodes_encode(&self) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let detail = job_detail(&self.main, &self.token, self.job).await;
            let encoding = encoding_on(&detail);
            let spans: Vec<i64> = encoding.iter().map(|e| e.1).collect();
            let distinct: HashSet<i64> = spans.iter().copied().collect();
            assert_eq!(spans.len(), distinct.len(), "a span encoded twice at once: {encoding:?}");
            if let (Some(owner), Some(helper)) =
                (detail["node"].as_str(), encoding.iter().find(|e| e.2).map(|e| e.0.clone()))
            {
                let (runs, helps) =
                    (children_of(&self.data(owner), b"transcode"), children_of(&self.data(&helper), b"helper"));
                if owner != helper && encoding.iter().any(|e| e.0 == owner && !e.2) && runs == 1 && helps == 1 {
                    return (owner.to_string(), helper);
                }
            }
            assert!(Instant::now() < deadline, "two nodes never encoded at once: {detail:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn until_status(&self, status: &str, limit: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(limit);
        loop {
            let detail = job_detail(&self.main, &self.token, self.job).await;
            if detail["status"] == status {
                return detail;
            }
            assert!(Instant::now() < deadline, "never {status}: {detail:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The replaced file has every frame of the 16 s source, in HEVC.
    fn check_output(&self) {
        let info = condense_media::probe::probe(&self.source).unwrap();
        assert_eq!(info.video().unwrap().codec, "hevc");
        assert_eq!(crate::common::shim::video_frames(&self.source), 400);
    }
}

#[actix_web::test]
async fn one_jobs_spans_are_encoded_by_two_linked_nodes_at_once_and_a_pause_stops_both() {
    let cluster = helped_cluster(60).await;
    let (owner, helper) = cluster.until_two_nodes_encode().await;

    let (status, body) =
        call("POST", &format!("{}/jobs/{}/pause", cluster.main.api, cluster.job), Some(&cluster.token), None).await;
    assert_eq!(status, 200, "{body}");
    cluster.until_status("PAUSED", 30).await;
    // Both stop at a segment boundary: the run's transcoder and the helper.
    let deadline = Instant::now() + Duration::from_secs(30);
    while children_of(&cluster.data(&owner), b"transcode") + children_of(&cluster.data(&helper), b"helper") > 0 {
        assert!(Instant::now() < deadline, "an encoder kept running after the pause");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let paused = job_detail(&cluster.main, &cluster.token, cluster.job).await;
    // What both encoded up to the pause is kept (spans closed at their last frame).
    let kept: i64 = paused["segments"].as_array().unwrap().iter().map(|s| s["frames"].as_i64().unwrap()).sum();
    assert!(kept > 0 && kept < 400, "{paused:#}");

    let (status, body) =
        call("POST", &format!("{}/jobs/{}/resume", cluster.main.api, cluster.job), Some(&cluster.token), None).await;
    assert_eq!(status, 200, "{body}");
    let finished = cluster.until_status("COMPLETED", 180).await;
    let segments = finished["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 16, "{finished:#}");
    assert!(segments.iter().all(|s| s["status"] == "DONE"), "{finished:#}");
    let by: HashSet<&str> = segments.iter().filter_map(|s| s["nodeName"].as_str()).collect();
    assert!(by.contains("w1") && by.contains("w2"), "segments done by {by:?}");
    let frames: i64 = segments.iter().map(|s| s["frames"].as_i64().unwrap()).sum();
    assert_eq!(frames, 400, "{finished:#}");
    cluster.check_output();
}

#[actix_web::test]
async fn kill_9_of_a_helper_node_mid_span_costs_only_its_span() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut cluster = helped_cluster(40).await;
    let stop = Arc::new(AtomicBool::new(false));
    let missing = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, missing, path) = (stop.clone(), missing.clone(), cluster.source.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if !path.exists() {
                    missing.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let (owner, helper) = cluster.until_two_nodes_encode().await;
    let index = if helper == "w1" { 0 } else { 1 };
    cluster.workers[index].child.kill().unwrap();
    cluster.workers[index].child.wait().unwrap();

    let finished = cluster.until_status("COMPLETED", 180).await;
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    assert!(!missing.load(Ordering::SeqCst), "the original's path was empty at some moment");
    // The job itself never moved: its run took the dead helper's span back and went on.
    assert_eq!(finished["node"].as_str(), Some(owner.as_str()), "{finished:#}");
    assert_eq!(finished["retryCount"], 0, "{finished:#}");
    let kinds: Vec<&str> = finished["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(!kinds.contains(&"orphaned") && !kinds.contains(&"failed"), "{kinds:?}");
    let segments = finished["segments"].as_array().unwrap();
    assert!(segments.iter().all(|s| s["status"] == "DONE"), "{finished:#}");
    cluster.check_output();
}

/// A node enrolled with the cluster token that speaks the link protocol itself, and lies.
struct Rogue {
    socket: actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>,
    node_id: i32,
    next_id: u64,
    running: Vec<RunningJob>,
    /// Whether it takes the jobs the main node starts on it.
    accepting: bool,
    last_beat: Instant,
    /// What its heartbeats say it sees: the paths checked (`None`: every one, as an older
    /// node) and those of them missing; whether it takes files by transfer, with the room.
    checked: Option<Vec<String>>,
    missing: Vec<String>,
    transfer: bool,
    work_dir_free: Option<u64>,
    /// Each job the main node started on it, and whether by transfer.
    starts: Vec<(i32, bool)>,
}

impl Rogue {
    async fn enroll(main: &ServerProcess) -> Rogue {
        Rogue::enroll_with(main, false).await
    }

    /// Enrolls, saying whether it takes files by transfer (with a terabyte free for them).
    async fn enroll_with(main: &ServerProcess, transfer: bool) -> Rogue {
        use futures_util::SinkExt;
        let (_, socket) = awc::Client::new()
            .ws(format!("{}/cluster/link", main.api))
            .bearer_auth(CLUSTER_TOKEN)
            .connect()
            .await
            .unwrap();
        let mut rogue = Rogue {
            socket,
            node_id: 0,
            next_id: 0,
            running: Vec::new(),
            accepting: true,
            last_beat: Instant::now(),
            checked: None,
            missing: Vec::new(),
            transfer,
            work_dir_free: transfer.then_some(1_000_000_000_000),
            starts: Vec::new(),
        };
        let register = Frame::Register {
            name: "rogue".into(),
            address: "127.0.0.1".into(),
            cores: 2,
            memory_total: 1 << 30,
            gpu: None,
            encoders: vec!["libx265".into(), "libsvtav1".into()],
            decoders: Vec::new(),
            // More free slots than the main node: the scheduler gives it the job.
            max_jobs: 4,
            version: env!("CARGO_PKG_VERSION").into(),
            identity: None,
            shared_storage: transfer.then_some(SharedStorage::Auto),
            transfer,
            work_dir_free_bytes: transfer.then_some(1_000_000_000_000),
            health_checks: false,
        };
        rogue.socket.send(awc::ws::Message::Text(serde_json::to_string(&register).unwrap().into())).await.unwrap();
        let registered = rogue.until(30, |f| matches!(f, Frame::Registered { .. }).then(|| f.clone())).await;
        let Frame::Registered { node_id, .. } = registered else { unreachable!() };
        rogue.node_id = node_id;
        // One heartbeat at once: a node is given jobs only once it reported what it sees
        // (this one, without `checkedPaths`, as an older node: every path it was told of).
        rogue.last_beat = Instant::now().checked_sub(Duration::from_secs(1)).unwrap();
        rogue.until(30, |f| matches!(f, Frame::Libraries { .. }).then_some(())).await;
        rogue
    }

    async fn send(&mut self, frame: &Frame) {
        use futures_util::SinkExt;
        self.socket.send(awc::ws::Message::Text(serde_json::to_string(frame).unwrap().into())).await.unwrap();
    }

    /// Reads frames, heartbeating every second as a node does, until `wanted` picks one;
    /// jobs the main node starts on it are accepted and reported running.
    async fn until<T>(&mut self, limit: u64, mut wanted: impl FnMut(&Frame) -> Option<T>) -> T {
        use futures_util::StreamExt;
        let deadline = Instant::now() + Duration::from_secs(limit);
        loop {
            assert!(Instant::now() < deadline, "the rogue node waited in vain");
            if self.node_id != 0 && self.last_beat.elapsed() >= Duration::from_millis(900) {
                self.last_beat = Instant::now();
                let beat = Frame::Heartbeat {
                    load1: 0.0,
                    memory_used: 0,
                    running: self.running.clone(),
                    helping: Vec::new(),
                    missing_paths: self.missing.clone(),
                    checked_paths: self.checked.clone(),
                    transfer: self.transfer,
                    work_dir_free_bytes: self.work_dir_free,
                    kept_jobs: Vec::new(),
                };
                self.send(&beat).await;
            }
            let frame = match tokio::time::timeout(Duration::from_millis(300), self.socket.next()).await {
                Err(_) => continue,
                Ok(Some(Ok(awc::ws::Frame::Text(bytes)))) => serde_json::from_slice::<Frame>(&bytes).unwrap(),
                Ok(Some(Ok(_))) => continue,
                Ok(other) => panic!("the link closed: {other:?}"),
            };
            if let Frame::Request { id, call } = &frame {
                if let Call::StartJob { job_id, lease_id, by_transfer } = call.as_ref() {
                    self.starts.push((*job_id, *by_transfer));
                    if self.accepting {
                        self.running.push(RunningJob { job_id: *job_id, lease_id: lease_id.clone() });
                    }
                    self.send(&Frame::Reply { id: *id, result: Ok(json!(self.accepting)) }).await;
                }
            }
            if let Some(found) = wanted(&frame) {
                return found;
            }
        }
    }

    /// Reads frames (heartbeating, taking jobs) for about `millis` ms: the main node answers
    /// each heartbeat, so a frame comes at least every second.
    async fn listen(&mut self, millis: u64) {
        let deadline = Instant::now() + Duration::from_millis(millis);
        self.until(30, |_| (Instant::now() >= deadline).then_some(())).await;
    }

    /// A job-store call, and the main node's answer.
    async fn call(&mut self, call: Call) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&Frame::Request { id, call: Box::new(call) }).await;
        self.until(30, |f| match f {
            Frame::Reply { id: answered, result } if *answered == id => Some(result.clone()),
            _ => None,
        })
        .await
    }
}

/// The feed's text messages until it has been quiet for `quiet` ms.
async fn drain(feed: &mut actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>, quiet: u64) -> Vec<String> {
    use futures_util::StreamExt;
    let mut carried = Vec::new();
    while let Ok(Some(Ok(frame))) = tokio::time::timeout(Duration::from_millis(quiet), feed.next()).await {
        if let awc::ws::Frame::Text(bytes) = frame {
            carried.push(String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    carried
}

/// Issue 34, item 3: a linked node's messages cannot name files, nor speak for jobs it does
/// not hold. A rogue node enrolled with the cluster token moves the job it holds onto a
/// file outside every library (a live update, and the patch of a failure), then publishes
/// progress for the job once it no longer holds it. Each frame is refused whole; the job
/// keeps its path, its retry on the main node encodes its own file, the foreign file stays
/// byte for byte what it was, and the dashboard's feed never carries the forged progress.
#[actix_web::test]
async fn a_rogue_linked_node_cannot_point_a_job_at_a_foreign_file_nor_speak_for_jobs_it_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let media = dir.path().join("media");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&media).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let source = clips::h264(&media, "movie.mkv", "320x240", 2);
    // A valid clip, so that an encode pointed at it would replace it.
    let foreign = clips::h264(&outside, "precious.mkv", "320x240", 2);
    let before = std::fs::read(&foreign).unwrap();
    let (main, token) = pro_main(dir.path(), 1).await;
    let mut rogue = Rogue::enroll(&main).await;
    wait_until(&main, &token, "the rogue up", 30, |l| up(l, "rogue")).await;
    let (_, mut feed) = awc::Client::new().ws(format!("{}/ws", main.api)).bearer_auth(&token).connect().await.unwrap();

    add_library(&main, &token, &media).await;
    rogue
        .until(60, |f| {
            matches!(f, Frame::Request { call, .. } if matches!(call.as_ref(), Call::StartJob { .. })).then_some(())
        })
        .await;
    let RunningJob { job_id, lease_id } = rogue.running[0].clone();
    let foreign_path = foreign.to_string_lossy().into_owned();
    let moved = JobChange {
        file_path: Some(PathBuf::from(&foreign_path)),
        file_name: Some("precious.mkv".into()),
        ..Default::default()
    };
    let live = rogue.call(Call::UpdateLive { id: job_id, lease: lease_id.clone(), patch: moved.clone() }).await;
    let refusal = live.expect_err("a live update that moves the job was accepted");
    assert!(refusal.contains("filePath") && refusal.contains("fileName"), "{refusal}");
    // Refused whole: the progress that came with the path is not written either.
    let with_progress = JobChange { progress: Some(42.42), ..moved.clone() };
    assert!(rogue.call(Call::UpdateLive { id: job_id, lease: lease_id.clone(), patch: with_progress }).await.is_err());
    let fail = JobEvent::Fail { code: FailureCode::Miscellaneous, resumable: false };
    let ctx = EventContext { node: Some("rogue".into()), detail: None, failure_detail: None };
    let applied =
        Call::Apply { id: job_id, lease: lease_id.clone(), event: fail, patch: moved.clone(), ctx: ctx.clone() };
    assert!(rogue.call(applied).await.unwrap_err().contains("filePath"));
    // Nor may it start, retry or force anything.
    let start = Call::Apply {
        id: job_id,
        lease: lease_id.clone(),
        event: JobEvent::Retry,
        patch: JobChange::default(),
        ctx: ctx.clone(),
    };
    assert!(rogue.call(start).await.is_err());
    let (_, job) = call("GET", &format!("{}/jobs/{job_id}", main.api), Some(&token), None).await;
    assert_eq!(job["filePath"].as_str(), Some(source.to_str().unwrap()), "{job:#}");
    assert_ne!(job["progress"].as_f64(), Some(42.42), "{job:#}");

    // Its own failure, without a path, is its to report: the job goes back for a retry.
    let model: job::Model = serde_json::from_value(rogue.call(Call::Job { id: job_id }).await.unwrap()).unwrap();
    let failed = Call::Apply { id: job_id, lease: lease_id.clone(), event: fail, patch: JobChange::default(), ctx };
    rogue.accepting = false;
    rogue.call(failed).await.unwrap();
    rogue.running.clear();
    // Progress for the job it no longer holds, dressed as its own.
    let forged = job::Model { node_id: Some(rogue.node_id), progress: 42.42, fps: 4242.25, ..model };
    let published = rogue.call(Call::Progress { job: Box::new(forged), transfer: None }).await;
    assert!(published.is_err(), "progress for a job the node does not hold was taken: {published:?}");
    drop(rogue);
    let mut carried = drain(&mut feed, 1000).await;

    let done = wait_all_done(&main, &token, 1, 120).await;
    assert_eq!((&done[0]["status"], &done[0]["node"]), (&json!("COMPLETED"), &json!("main")), "{:#}", done[0]);
    assert_eq!(done[0]["filePath"].as_str(), Some(source.to_str().unwrap()));
    assert_eq!(condense_media::probe::probe(&source).unwrap().video().unwrap().codec, "hevc");
    assert!(std::fs::read(&foreign).unwrap() == before, "the foreign file was changed");
    // Everything the feed carried until the job completed: never the forged figures.
    carried.extend(drain(&mut feed, 200).await);
    assert!(!carried.is_empty(), "the feed carried nothing at all");
    for text in &carried {
        assert!(!text.contains("4242.25"), "the forged progress was published: {text}");
    }
    let refused = main.output().iter().filter(|l| l.contains("refused") && l.contains("rogue")).count();
    assert!(refused >= 3, "the refusals are logged with the node's name: {:#?}", main.output());
}

/// Issue 39: a job goes first to a node that sees its file. A node that does not see the
/// library and says it takes files by transfer (a rogue node speaks for one, with four free
/// slots to the main node's one) is given a job only once the seeing node is full, by
/// transfer, as its start says.
#[actix_web::test]
async fn a_blind_node_offering_transfers_comes_after_the_node_that_sees_the_file() {
    let (dir, media) = media_dir();
    for i in 0..2 {
        clips::h264(&media, &format!("c{i}.mkv"), "320x240", 2);
    }
    let (main, token) = pro_main(dir.path(), 1).await;
    let mut rogue = Rogue::enroll_with(&main, true).await;
    // It cannot see the library's folder, and says so from before the library exists.
    // (As given, and with links resolved: whichever the library keeps.)
    let roots = vec![
        media.to_string_lossy().into_owned(),
        std::fs::canonicalize(&media).unwrap().to_string_lossy().into_owned(),
    ];
    rogue.checked = Some(roots.clone());
    rogue.missing = roots;
    rogue.listen(1500).await;
    let list = nodes(&main, &token).await;
    let row = list.iter().find(|n| n["name"] == "rogue").unwrap();
    assert_eq!(
        (&row["sharedStorage"], &row["transfer"], &row["workDirFreeBytes"]),
        (&json!("auto"), &json!(true), &json!(1_000_000_000_000_i64)),
        "{row:#}"
    );
    add_library(&main, &token, &media).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    let all = loop {
        rogue.listen(1000).await;
        let all = jobs(&main, &token).await;
        if !rogue.starts.is_empty() {
            break all;
        }
        assert!(all.len() < 2 || all.iter().any(|j| j["status"] != "COMPLETED"), "none went by transfer: {all:#?}");
        assert!(Instant::now() < deadline, "jobs not done: {all:#?}");
    };
    // The first job went to the main node, idle and seeing the file; the second, with the
    // main node full, to the rogue by transfer, as its start says.
    assert!(matches!(rogue.starts.as_slice(), [(_, true)]), "{:?}", rogue.starts);
    let (given, _) = rogue.starts[0];
    let started = |j: &Value| chrono::DateTime::parse_from_rfc3339(j["startedAt"].as_str().unwrap()).unwrap();
    let on_main = all.iter().find(|j| j["node"] == "main" && j["id"] != json!(given)).expect("none on main");
    let by_transfer = all.iter().find(|j| j["id"] == json!(given)).unwrap();
    assert!(started(on_main) <= started(by_transfer), "the blind node came first: {all:#?}");
    let detail = job_detail(&main, &token, i64::from(given)).await;
    assert!(detail.to_string().contains("\"byTransfer\":true"), "{detail:#}");
}

/// A main node with a slot of its own helps a job that runs on a linked node, as a linked
/// node's idle slot does (issue 40 saw, with two one-core nodes, every span encoded by the
/// linked node; the path itself works, and this keeps it so). Two 16 s clips, one job on
/// each node; the linked node is slowed, so the main node finishes its own first and its
/// idle slot takes spans of the other.
#[actix_web::test]
async fn the_main_nodes_idle_slot_takes_spans_of_a_job_running_on_a_linked_node() {
    let (dir, media) = media_dir();
    clips::h264(&media, "a.mkv", "320x240", 16);
    clips::h264(&media, "b.mkv", "320x240", 16);
    let (main, token) = pro_main(dir.path(), 1).await;
    let worker = linked(dir.path(), &main, "w1", 60);
    wait_until(&main, &token, "linked node up", 30, |l| up(l, "w1")).await;
    add_library(&main, &token, &media).await;
    // Both jobs start, one on each node.
    let deadline = Instant::now() + Duration::from_secs(60);
    let on_w1 = loop {
        let list = jobs(&main, &token).await;
        let running: Vec<&Value> = list.iter().filter(|j| j["status"] == "ENCODING").collect();
        if let Some(job) = running.iter().find(|j| j["node"] == "w1") {
            break job["id"].as_i64().unwrap();
        }
        assert!(Instant::now() < deadline, "no job ran on w1: {list:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let deadline = Instant::now() + Duration::from_secs(240);
    let detail = loop {
        let detail = job_detail(&main, &token, on_w1).await;
        if detail["status"] == "COMPLETED" {
            break detail;
        }
        assert!(
            !matches!(detail["status"].as_str(), Some("FAILED" | "CANCELLED")) && Instant::now() < deadline,
            "{detail:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(detail["node"], "w1", "{detail:#}");
    let segments = detail["segments"].as_array().unwrap();
    let by: HashSet<&str> = segments.iter().filter_map(|s| s["nodeName"].as_str()).collect();
    assert!(by.contains("main") && by.contains("w1"), "segments of w1's job done by {by:?}: {detail:#}");
    let frames: i64 = segments.iter().map(|s| s["frames"].as_i64().unwrap()).sum();
    assert_eq!(frames, 400, "{detail:#}");
    drop(worker);
}
