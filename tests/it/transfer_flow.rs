//! Issue 39's faults of a job a linked node takes by transfer, with real processes: a main
//! node that only coordinates and a node that cannot see the library (its own mount
//! namespace, an empty tmpfs over the share). No original is lost: each test checks the
//! file in the library after the fault. The acceptance test (a whole library encoded by
//! such a node) is `cluster::a_library_created_after_a_blind_node_linked_is_encoded_by_it_by_transfer`;
//! the client's drops and checksums are `transfer`'s.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::cluster::{
    add_library, blind_command, blind_command_leaving, call, hidden_share, job_detail, jobs, login, main_on_port,
    mount_namespaces, nodes, pro_main, sees, up, wait_all_done, wait_for_names, wait_until,
};
use crate::common::license::pro_key;
use crate::common::media as clips;
use crate::common::server::{free_port, ServerProcess};
use crate::common::shim::video_frames;

/// A main node with no job slots of its own over `dir/main`, and a library folder under
/// `dir/shared` (the share a blind node does not see) with `clip` in it, `seconds` long.
struct Setup {
    main: ServerProcess,
    token: String,
    hidden: PathBuf,
    media: PathBuf,
    clip: PathBuf,
}

async fn setup(dir: &Path, seconds: u32) -> Setup {
    let (hidden, media) = hidden_share(dir);
    let clip = clips::h264(&media, "c0.mkv", "320x240", seconds);
    let (main, token) = pro_main(dir, 0).await;
    Setup { main, token, hidden, media, clip }
}

/// The blind node `blind` (DATA_DIR `dir/blind`), each encoded frame followed by a pause of
/// `throttle` ms.
fn blind(dir: &Path, s: &Setup, throttle: u64) -> ServerProcess {
    let mut cmd = blind_command(dir, &s.hidden, &s.main, "blind");
    cmd.env("CONDENSE_THROTTLE_MS_PER_FRAME", throttle.to_string());
    ServerProcess::start(cmd)
}

/// `blind`, once linked, and the library then made on the main node (a node reports what
/// it sees when a library appears).
async fn blind_with_library(dir: &Path, s: &Setup, throttle: u64) -> ServerProcess {
    let node = blind(dir, s, throttle);
    wait_until(&s.main, &s.token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&s.main, &s.token, &s.media).await;
    node
}

/// The only job once it is ENCODING on the blind node (its source downloaded).
async fn encoding_on_blind(s: &Setup, limit: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        let all = jobs(&s.main, &s.token).await;
        if let Some(job) = all.iter().find(|j| j["status"] == "ENCODING" && j["node"] == "blind") {
            return job.clone();
        }
        assert!(Instant::now() < deadline, "no job encoding on the blind node: {all:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Another version of the clip, `seconds` long, made aside and renamed over it (as a new
/// release arrives); answers its frames, which differ from the old version's.
fn replace_source(dir: &Path, s: &Setup, seconds: u32) -> u64 {
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let replacement = clips::h264(&other, "c0.mkv", "320x240", seconds);
    let new_frames = video_frames(&replacement);
    assert_ne!(new_frames, video_frames(&s.clip));
    std::fs::rename(&replacement, &s.clip).unwrap();
    new_frames
}

/// The clip replaced by a whole HEVC output of `frames` frames, nothing else in the
/// library folder, and WORK_DIR (`work`) down to `left` once the node has cleared it.
async fn replaced_whole(s: &Setup, frames: u64, work: &Path, left: &[&str]) {
    assert_eq!(condense_media::probe::probe(&s.clip).unwrap().video().unwrap().codec, "hevc");
    assert_eq!(video_frames(&s.clip), frames);
    assert_eq!(names_in(&s.media), ["c0.mkv"]);
    wait_for_names(work, left, 20).await;
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The source changed on the main node while the node encoded its copy: the upload is
/// refused, the job goes back to the queue without a failure of the file, and the next
/// attempt encodes the version there now. The new file is never replaced by the old
/// version's output.
#[actix_web::test]
async fn a_source_changed_while_a_node_encodes_its_copy_requeues_the_job_and_keeps_the_new_file() {
    if !mount_namespaces("transfer_flow::a_source_changed_while_a_node_encodes_its_copy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), 2).await;
    // Slow enough that the file is replaced while the node still encodes its copy.
    let node = blind_with_library(dir.path(), &s, 300).await;
    let job = encoding_on_blind(&s, 120).await;
    let id = job["id"].as_i64().unwrap();
    // Another version of the file takes its name (a better release, one second long).
    let new_frames = replace_source(dir.path(), &s, 1);

    let done = wait_all_done(&s.main, &s.token, 1, 240).await;
    let detail = job_detail(&s.main, &s.token, id).await;
    assert_eq!(done[0]["status"], "COMPLETED", "{detail:#}\n{}", node.output().join("\n"));
    assert_eq!(done[0]["retryCount"], 0, "{detail:#}");
    assert!(detail.to_string().contains("the source changed on the main node"), "{detail:#}");
    // The output is the new version's, whole.
    replaced_whole(&s, new_frames, &dir.path().join("blind/work"), &[]).await;
    // Where the completed attempt's time went: the node's phases in its name (the download,
    // its check of the copy, the transcoder's, the parts sent after the encode), then the
    // main node's (its mux child's start and mux among them).
    let completed = events_of(&detail, "completed");
    let phases = completed[0]["detail"]["phases"].as_array().unwrap();
    let named: Vec<(&str, &str)> =
        phases.iter().map(|p| (p["phase"].as_str().unwrap(), p["node"].as_str().unwrap_or("-"))).collect();
    let (node, main) = named.split_at(named.len() - 5);
    let mains = [("validation", "-"), ("start", "-"), ("mux", "-"), ("verification", "-"), ("replace", "-")];
    assert_eq!(main, mains, "{named:?}");
    assert_eq!(node.first(), Some(&("download", "blind")), "{named:?}");
    assert_eq!(node.get(1), Some(&("validation", "blind")), "{named:?}");
    assert_eq!(node.last(), Some(&("upload", "blind")), "{named:?}");
    assert!(node.contains(&("video", "blind")), "{named:?}");
}

/// The job once the main node gave it back to the queue (after the killed node's timeout).
async fn requeued(s: &Setup, limit: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        let all = jobs(&s.main, &s.token).await;
        if all[0]["status"] == "QUEUED" {
            return all[0].clone();
        }
        assert!(Instant::now() < deadline, "the job did not go back to the queue: {all:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The segments the manifest of the job's partial folder in WORK_DIR lists as finished,
/// and the frames they hold ((0, 0) while it has none).
fn segments_finished(folder: &Path) -> (usize, u64) {
    let partial = condense::media::layout::partial_dir_for(&folder.join("input.mkv"));
    let Ok(text) = std::fs::read(partial.join(condense::media::layout::MANIFEST_FILE)) else { return (0, 0) };
    let manifest: Value = serde_json::from_slice(&text).unwrap_or_default();
    let segments = manifest["segments"].as_array().cloned().unwrap_or_default();
    (segments.len(), segments.iter().filter_map(|s| s["frames"].as_u64()).sum())
}

/// Whether the run in the job's folder `folder` in WORK_DIR has finished the video.
fn video_complete(folder: &Path) -> bool {
    let partial = condense::media::layout::partial_dir_for(&folder.join("input.mkv"));
    let Ok(text) = std::fs::read(partial.join(condense::media::layout::MANIFEST_FILE)) else { return false };
    serde_json::from_slice::<Value>(&text).is_ok_and(|m| m["videoComplete"] == true)
}

/// The events of kind `kind` in the job's history.
fn events_of(detail: &Value, kind: &str) -> Vec<Value> {
    detail["events"].as_array().unwrap().iter().filter(|e| e["kind"] == kind).cloned().collect()
}

/// Whether a line of `node`'s log says `message` of job `id`.
fn logged(node: &ServerProcess, message: &str, id: i64) -> bool {
    node.output().iter().any(|l| l.contains(message) && l.contains(&format!("job_id={id}")))
}

/// The node is killed while it encodes its copy: the job goes back to the queue once the
/// node is offline, the original untouched; the node, started again, keeps the job's folder
/// (the job, paused meanwhile, may come back to it) and removes the folder of a job the main
/// node does not know (nothing else there), takes the job again and completes it. Nothing
/// is left in WORK_DIR after.
#[actix_web::test]
async fn a_node_killed_while_encoding_a_copy_keeps_the_jobs_folder_and_completes_the_job_at_restart() {
    if !mount_namespaces("transfer_flow::a_node_killed_while_encoding_a_copy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), 2).await;
    let before = clips::sha(&s.clip);
    let frames = video_frames(&s.clip);
    let mut node = blind_with_library(dir.path(), &s, 300).await;
    let job = encoding_on_blind(&s, 120).await;
    let id = job["id"].as_i64().unwrap();
    let work = dir.path().join("blind/work");
    let folder = work.join(id.to_string());
    assert!(folder.join("input.mkv").is_file(), "the copy is not in WORK_DIR: {:?}", names_in(&work));
    node.signal_and_wait(libc::SIGKILL);

    // Back to the queue after the node's timeout; the original as it was.
    requeued(&s, 60).await;
    assert_eq!(clips::sha(&s.clip), before, "the original changed");
    assert!(folder.is_dir(), "the kill left nothing in WORK_DIR");
    // A folder of a job the main node does not know, and a file that is not condense's.
    std::fs::create_dir_all(work.join("987654")).unwrap();
    std::fs::write(work.join("987654/input.mkv"), b"left").unwrap();
    std::fs::write(work.join("notes.txt"), b"mine").unwrap();
    // Paused while the node is down: its look at WORK_DIR after it links again then finds
    // the job not running there (a job it took back at once would finish before the look).
    let (status, paused) = call("POST", &format!("{}/jobs/{id}/pause", s.main.api), Some(&s.token), None).await;
    assert_eq!((status, &paused["status"]), (200, &"PAUSED".into()), "{paused:#}");

    let node = blind(dir.path(), &s, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(logged(&node, "keeping the job's folder in WORK_DIR", id)
        && logged(&node, "removed the job's folder from WORK_DIR", 987654))
    {
        assert!(Instant::now() < deadline, "WORK_DIR's folders not looked at: {}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, resumed) = call("POST", &format!("{}/jobs/{id}/resume", s.main.api), Some(&s.token), None).await;
    assert_eq!(status, 200, "{resumed:#}");
    let done = wait_all_done(&s.main, &s.token, 1, 180).await;
    assert_eq!(
        (&done[0]["status"], &done[0]["node"]),
        (&"COMPLETED".into(), &"blind".into()),
        "{:#}\n{}",
        done[0],
        node.output().join("\n")
    );
    replaced_whole(&s, frames, &work, &["notes.txt"]).await;
    assert!(
        logged(&node, "the source kept in WORK_DIR is unchanged on the main node", id),
        "{}",
        node.output().join("\n")
    );
}

/// Issue 39: a node killed after it finished some segments of its copy comes back (the same
/// DATA_DIR) and continues from them: the job, given back to the queue by the node's
/// timeout and paused while the node is down, goes to it again once resumed (after the node
/// decided to keep its folder), before another node with more free slots; its copy is
/// checked against the main node's SHA-256 and the
/// encode continues after the segments kept (its history says "continued", with the
/// segments and frames kept; the segment the kill cut is not among them). The output has
/// every frame of the source, and nothing is left in WORK_DIR.
#[actix_web::test]
async fn a_node_killed_mid_encode_comes_back_and_continues_from_its_kept_segments() {
    if !mount_namespaces("transfer_flow::a_node_killed_mid_encode_comes_back") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), 6).await;
    let before = clips::sha(&s.clip);
    let frames = video_frames(&s.clip);
    // 100 ms a frame: 25 frames of each 1 s segment take some seconds.
    let mut node = blind_with_library(dir.path(), &s, 100).await;
    let id = encoding_on_blind(&s, 120).await["id"].as_i64().unwrap();
    let work = dir.path().join("blind/work");
    let folder = work.join(id.to_string());
    killed_once_finished(&mut node, &folder, 2).await;
    let (finished, finished_frames) = segments_finished(&folder);
    assert!((2..6).contains(&finished), "{finished} segments finished at the kill");
    assert!((1..frames).contains(&finished_frames), "{finished_frames} frames finished at the kill");

    requeued(&s, 60).await;
    assert_eq!(clips::sha(&s.clip), before, "the original changed");
    assert!(folder.join("input.mkv").is_file(), "the copy is not kept: {:?}", names_in(&folder));
    // Paused while the node is down, so that the node's look at WORK_DIR after it links
    // again finds the job not running there: the folder stays by the node's decision alone
    // (a folder of a job running on the node is never removed).
    let (status, paused) = call("POST", &format!("{}/jobs/{id}/pause", s.main.api), Some(&s.token), None).await;
    assert_eq!((status, &paused["status"]), (200, &"PAUSED".into()), "{paused:#}");

    // Another blind node with more free slots: without the keeping node's precedence
    // (`domain::placement::choose`) the job would go to it.
    let mut other = blind_command(dir.path(), &s.hidden, &s.main, "other");
    other.env("MAX_JOBS", "2");
    let other = ServerProcess::start(other);
    wait_until(&s.main, &s.token, "other linked", 30, |l| up(l, "other")).await;
    let node = blind(dir.path(), &s, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !logged(&node, "keeping the job's folder in WORK_DIR", id) {
        assert!(Instant::now() < deadline, "the folder was not kept: {}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(folder.join("input.mkv").is_file(), "the copy is not kept: {:?}", names_in(&folder));
    // The node reports the folders it keeps in each heartbeat (one a second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (status, resumed) = call("POST", &format!("{}/jobs/{id}/resume", s.main.api), Some(&s.token), None).await;
    assert_eq!(status, 200, "{resumed:#}");
    let done = wait_all_done(&s.main, &s.token, 1, 180).await;
    let detail = job_detail(&s.main, &s.token, id).await;
    assert_eq!(
        (&done[0]["status"], &done[0]["node"]),
        (&"COMPLETED".into(), &"blind".into()),
        "{detail:#}\n{}\n{}",
        node.output().join("\n"),
        other.output().join("\n")
    );
    // The second attempt continued after the segments the kill left finished, and those
    // alone.
    let continued = events_of(&detail, "continued");
    assert_eq!(continued.len(), 1, "{detail:#}");
    let kept = &continued[0]["detail"];
    assert_eq!(kept["segments"].as_u64(), Some(finished as u64), "{detail:#}");
    assert_eq!(kept["frames"].as_u64(), Some(finished_frames), "{detail:#}");
    assert_eq!(continued[0]["nodeName"], "blind", "{detail:#}");
    assert!(
        logged(&node, "the source kept in WORK_DIR is unchanged on the main node", id),
        "{}",
        node.output().join("\n")
    );
    // The output, whole, replaced the original.
    replaced_whole(&s, frames, &work, &[]).await;
}

/// Kills `node` (SIGKILL) once `segments` segments of the job in `folder` are finished.
async fn killed_once_finished(node: &mut ServerProcess, folder: &Path, segments: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while segments_finished(folder).0 < segments {
        assert!(Instant::now() < deadline, "{segments} segment(s) not finished: {}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    node.signal_and_wait(libc::SIGKILL);
}

/// Issue 39: the source changes on the main node while the node that holds a copy and
/// segments of it is down: when the job comes back to it, the copy's SHA-256 is not the
/// main node's, so the copy and its segments are discarded and the new file is downloaded
/// and encoded from its start. The output is the new version's, never the old one's.
#[actix_web::test]
async fn a_source_changed_while_its_node_is_down_is_downloaded_again_and_its_old_segments_discarded() {
    if !mount_namespaces("transfer_flow::a_source_changed_while_its_node_is_down") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), 6).await;
    let mut node = blind_with_library(dir.path(), &s, 100).await;
    let id = encoding_on_blind(&s, 120).await["id"].as_i64().unwrap();
    let work = dir.path().join("blind/work");
    let folder = work.join(id.to_string());
    killed_once_finished(&mut node, &folder, 1).await;
    requeued(&s, 60).await;
    assert!(segments_finished(&folder).0 >= 1, "no segment kept: {:?}", names_in(&folder));
    // Another version of the file takes its name meanwhile (three seconds long).
    let new_frames = replace_source(dir.path(), &s, 3);

    let node = blind(dir.path(), &s, 0);
    let done = wait_all_done(&s.main, &s.token, 1, 180).await;
    let detail = job_detail(&s.main, &s.token, id).await;
    assert_eq!(done[0]["status"], "COMPLETED", "{detail:#}\n{}", node.output().join("\n"));
    // Nothing of the old copy was continued from.
    assert!(events_of(&detail, "continued").is_empty(), "{detail:#}");
    assert!(
        logged(&node, "the source changed on the main node since this node's copy", id),
        "{}",
        node.output().join("\n")
    );
    replaced_whole(&s, new_frames, &work, &[]).await;
}

/// Whether a job shows `transfer` where its node moves its file: in stage TRANSFERRING,
/// or a download beside the encode of the copy read as it arrives.
fn moving(job: &Value, transfer: &Value) -> bool {
    job["stage"] == "TRANSFERRING"
        || (job["stage"] == "ENCODING" && matches!(transfer["direction"].as_str(), Some("download" | "upload")))
}

/// A main node with no slot of its own, a blind node whose transfers are capped at 4 Mbit/s
/// (500 kB/s), and a library over a clip of noise `seconds` long (about 0.6 MB a second):
/// the clip, the main node, its token and the blind node.
async fn capped_blind_with_noise(dir: &Path, seconds: u32) -> (PathBuf, ServerProcess, String, ServerProcess) {
    let (hidden, media) = hidden_share(dir);
    let clip = clips::noisy_h264(&media, "c0.mkv", seconds);
    let (main, token) = pro_main(dir, 0).await;
    let mut cmd = blind_command(dir, &hidden, &main, "blind");
    cmd.env("TRANSFER_MBPS", "4");
    let node = ServerProcess::start(cmd);
    wait_until(&main, &token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&main, &token, &media).await;
    (clip, main, token, node)
}

/// Issue 39: while a node moves a job's file, the job says so over the API: `transfer`
/// (direction, bytes of total, rate) in stage TRANSFERRING, or ENCODING for a download or
/// the upload of parts beside the encode, in the job list and in `GET /jobs/{id}`, first the download of the
/// source, later the upload of the output;
/// absent once the job ended. The cap (TRANSFER_MBPS=4, 500 kB/s) and a clip of noise
/// (some MB in, over a MB out) keep each transfer going for seconds.
#[actix_web::test]
async fn a_job_moving_its_file_shows_the_direction_and_the_bytes_moved() {
    if !mount_namespaces("transfer_flow::a_job_moving_its_file_shows_the_direction_and_the_bytes_moved") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (clip, main, token, node) = capped_blind_with_noise(dir.path(), 2).await;
    let source_size = std::fs::metadata(&clip).unwrap().len();

    // Every transfer the API showed, from the list and from the job's own page.
    let (mut listed, mut detailed) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(240);
    let done = loop {
        let all = jobs(&main, &token).await;
        if let [job] = all.as_slice() {
            if matches!(job["status"].as_str(), Some("COMPLETED" | "FAILED")) {
                break job.clone();
            }
            if let Some(t) = job.get("transfer") {
                assert!(moving(job, t), "{job:#}");
                listed.push(t.clone());
            }
            let detail = job_detail(&main, &token, job["id"].as_i64().unwrap()).await;
            if let Some(t) = detail.get("transfer") {
                assert!(moving(&detail, t), "{detail:#}");
                detailed.push(t.clone());
            }
        }
        assert!(Instant::now() < deadline, "the job did not end: {all:#?}\n{}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done["status"], "COMPLETED", "{done:#}\n{}", node.output().join("\n"));
    assert!(done.get("transfer").is_none(), "{done:#}");
    let detail = job_detail(&main, &token, done["id"].as_i64().unwrap()).await;
    assert!(detail.get("transfer").is_none(), "{detail:#}");

    let seen = |of: &[Value], direction: &str| -> Vec<Value> {
        of.iter().filter(|t| t["direction"] == direction).cloned().collect()
    };
    for t in listed.iter().chain(&detailed) {
        let (bytes, total) = (t["bytes"].as_u64().unwrap(), t["total"].as_u64().unwrap());
        assert!(0 < bytes && bytes <= total, "{t:#}");
        assert!(t["rateBytesPerSecond"].as_f64().unwrap() > 0.0, "{t:#}");
        assert!(matches!(t["direction"].as_str(), Some("download" | "upload")), "{t:#}");
    }
    let downloads = seen(&listed, "download");
    assert!(!downloads.is_empty(), "no download shown: {listed:#?}");
    assert!(downloads.iter().all(|t| t["total"] == source_size), "{downloads:#?}");
    assert!(!seen(&listed, "upload").is_empty(), "no upload shown: {listed:#?}");
    assert!(!seen(&detailed, "download").is_empty(), "no download on the job's page: {detailed:#?}");
    // The download came first, the upload after it.
    let first_upload = listed.iter().position(|t| t["direction"] == "upload").unwrap();
    assert!(listed[first_upload..].iter().all(|t| t["direction"] == "upload"), "{listed:#?}");
    // The output, whole, replaced the original.
    assert_eq!(condense_media::probe::probe(&clip).unwrap().video().unwrap().codec, "hevc");
    wait_for_names(&dir.path().join("blind/work"), &[], 20).await;
}

/// Issue 39, "download ahead": a node without the share encodes its copy while the copy
/// still downloads (under a rate cap that makes the download take seconds): the job shows
/// frames encoded while the copy in WORK_DIR holds only part of the source; the output,
/// verified on the main node, replaces the original with every frame, and WORK_DIR is
/// empty after.
#[actix_web::test]
async fn a_node_encodes_its_copy_while_the_copy_still_downloads() {
    if !mount_namespaces("transfer_flow::a_node_encodes_its_copy_while_the_copy_still_downloads") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (clip, main, token, node) = capped_blind_with_noise(dir.path(), 8).await;
    let (source_size, frames) = (std::fs::metadata(&clip).unwrap().len(), video_frames(&clip));

    let work = dir.path().join("blind/work");
    let deadline = Instant::now() + Duration::from_secs(240);
    // The encode's progress and the copy's bytes, seen while the copy was short of the source.
    let mut partial = None;
    let done = loop {
        let all = jobs(&main, &token).await;
        if let [job] = all.as_slice() {
            if matches!(job["status"].as_str(), Some("COMPLETED" | "FAILED")) {
                break job.clone();
            }
            let progress = job["progress"].as_f64().unwrap_or(0.0);
            if partial.is_none() && job["status"] == "ENCODING" && progress > 0.0 {
                let copy = work.join(job["id"].to_string()).join("source");
                match std::fs::metadata(&copy) {
                    Ok(meta) if meta.len() < source_size => partial = Some((progress, meta.len())),
                    _ => {}
                }
            }
        }
        assert!(Instant::now() < deadline, "the job did not end: {all:#?}\n{}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done["status"], "COMPLETED", "{done:#}\n{}", node.output().join("\n"));
    let (progress, held) = partial.unwrap_or_else(|| {
        panic!("no frame was encoded while the copy was short of the source:\n{}", node.output().join("\n"))
    });
    assert!(held < source_size, "{held} of {source_size} bytes at {progress} %");
    assert!(
        node.output().iter().any(|l| l.contains("encoding the copy as it downloads")),
        "{}",
        node.output().join("\n")
    );
    // The output, whole, replaced the original.
    assert_eq!(condense_media::probe::probe(&clip).unwrap().video().unwrap().codec, "hevc");
    assert_eq!(video_frames(&clip), frames);
    wait_for_names(&work, &[], 20).await;
}

/// The names in the partial folder beside `source` on the main node (none while there is
/// no folder).
fn partial_names(source: &Path) -> Vec<String> {
    let partial = condense::media::layout::partial_dir_for(source);
    if partial.is_dir() {
        names_in(&partial)
    } else {
        Vec::new()
    }
}

/// Issue 39, "upload while encoding": a node without the share sends each segment of its
/// copy to the main node as it finishes, while the later ones still encode (a throttled
/// encode of six one-second segments): the main node's partial folder holds segments the
/// node sent while the job is ENCODING and the node's own run has not finished the video.
/// Then the main node muxes the output from the original and those segments, verifies it
/// and replaces the original with every frame; the node never muxed, nothing is left in
/// WORK_DIR nor beside the original.
#[actix_web::test]
async fn a_node_without_the_share_sends_each_segment_while_later_ones_encode() {
    if !mount_namespaces("transfer_flow::a_node_without_the_share_sends_each_segment") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), 6).await;
    let frames = video_frames(&s.clip);
    let node = blind_with_library(dir.path(), &s, 60).await;
    let id = encoding_on_blind(&s, 120).await["id"].as_i64().unwrap();
    let work = dir.path().join("blind/work");
    let folder = work.join(id.to_string());

    // Segments on the main node while the node's run is short of the video.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (sent, finished) = loop {
        let sent: Vec<String> = partial_names(&s.clip).into_iter().filter(|n| n.starts_with("seg-")).collect();
        let (finished, _) = segments_finished(&folder);
        let complete = video_complete(&folder);
        let encoding = jobs(&s.main, &s.token).await.iter().any(|j| j["status"] == "ENCODING");
        if !sent.is_empty() && encoding && !complete {
            break (sent, finished);
        }
        assert!(
            Instant::now() < deadline && !complete,
            "no segment on the main node while the node encoded (it finished {finished}):\n{}",
            node.output().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(sent.len() <= finished, "{sent:?} sent of {finished} finished");

    let done = wait_all_done(&s.main, &s.token, 1, 180).await;
    let log = node.output().join("\n");
    assert_eq!((&done[0]["status"], &done[0]["node"]), (&"COMPLETED".into(), &"blind".into()), "{:#}\n{log}", done[0]);
    assert!(logged(&node, "the parts are up; the main node muxes", id), "{log}");
    // The node's run stopped before the mux: it never wrote an output.
    assert!(!log.contains("uploaded the output"), "{log}");
    replaced_whole(&s, frames, &work, &[]).await;
    assert!(partial_names(&s.clip).is_empty(), "{:?}", partial_names(&s.clip));
}

/// A main node with no slot of its own on a fixed port, so that one started again on its
/// DATA_DIR is found by its node where it was.
struct Restartable {
    data: PathBuf,
    license: (String, String),
    port: String,
}

impl Restartable {
    fn start(&self) -> ServerProcess {
        main_on_port(&self.data, &self.license, &self.port)
    }
}

/// A `Restartable` main node under `dir`, a blind node (the share `hidden`) whose transfers
/// are capped at `mbps`, and the library over `media` made once it linked: the main node's
/// maker, the main node, its token and the blind node.
async fn restartable_with_capped_blind(
    dir: &Path,
    hidden: &Path,
    media: &Path,
    mbps: &str,
) -> (Restartable, ServerProcess, String, ServerProcess) {
    let restartable = Restartable { data: dir.join("main"), license: pro_key(), port: free_port().to_string() };
    let main = restartable.start();
    let token = login(&main).await;
    let mut cmd = blind_command(dir, hidden, &main, "blind");
    cmd.env("TRANSFER_MBPS", mbps);
    let node = ServerProcess::start(cmd);
    wait_until(&main, &token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&main, &token, media).await;
    (restartable, main, token, node)
}

/// Issue 39, download ahead: the source changes on the main node while a node downloads
/// and already encodes its copy (the main node killed mid-download, another version put in
/// the file's place, the main node started again): the node's download starts over on the
/// new version, the encode of the old bytes is stopped, the job goes back to the queue
/// without using a retry, and the next attempt encodes the new version, whole.
#[actix_web::test]
async fn a_source_changed_during_its_download_stops_the_encode_and_requeues_the_job() {
    if !mount_namespaces("transfer_flow::a_source_changed_during_its_download_stops_the_encode") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (hidden, media) = hidden_share(dir.path());
    // About 20 MB at 2 MB/s: the kill comes mid-download, past what sockets hold in flight.
    let clip = clips::noisy_h264(&media, "c0.mkv", 8);
    let (restartable, mut main, token, node) = restartable_with_capped_blind(dir.path(), &hidden, &media, "16").await;

    // The copy encoding while a quarter of it or more has come, not all.
    let deadline = Instant::now() + Duration::from_secs(180);
    let id = loop {
        let all = jobs(&main, &token).await;
        let shown = all.iter().find(|j| j["status"] == "ENCODING" && j["transfer"]["direction"] == "download");
        if let Some(job) = shown {
            let (bytes, total) =
                (job["transfer"]["bytes"].as_u64().unwrap(), job["transfer"]["total"].as_u64().unwrap());
            if bytes >= total / 4 && bytes < total {
                break job["id"].as_i64().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "no encode beside its download: {all:#?}\n{}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    main.signal_and_wait(libc::SIGKILL);
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let replacement = clips::h264(&other, "c0.mkv", "320x240", 3);
    let new_frames = video_frames(&replacement);
    std::fs::rename(&replacement, &clip).unwrap();
    let main = restartable.start();
    let token = login(&main).await;

    let done = wait_all_done(&main, &token, 1, 240).await;
    let detail = job_detail(&main, &token, id).await;
    let why = format!("{detail:#}\n{}", node.output().join("\n"));
    assert_eq!(done[0]["status"], "COMPLETED", "{why}");
    assert_eq!(done[0]["retryCount"], 0, "{why}");
    assert!(detail.to_string().contains("the download of the source started over"), "{why}");
    assert_eq!(condense_media::probe::probe(&clip).unwrap().video().unwrap().codec, "hevc");
    assert_eq!(video_frames(&clip), new_frames, "{why}");
    assert_eq!(names_in(&media), ["c0.mkv"]);
    wait_for_names(&dir.path().join("blind/work"), &[], 20).await;
}

/// Issue 39: the disk under the node's WORK_DIR fills up while it downloads the source
/// (here a 16 MiB tmpfs in the node's mount namespace, filled by another writer once the
/// download shows): the attempt fails `insufficient_disk_space` with a reason naming
/// WORK_DIR and the room it lacks, the original untouched, the job's folder removed. The
/// retry is not given back to that node (it has no room), and waits in the queue until
/// another node with room links, which encodes the file.
#[actix_web::test]
async fn a_work_dir_that_fills_up_during_the_download_fails_there_and_the_job_goes_to_a_node_with_room() {
    if !mount_namespaces("transfer_flow::a_work_dir_that_fills_up_during_the_download") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (hidden, media) = hidden_share(dir.path());
    let clip = clips::noisy_h264(&media, "c0.mkv", 2);
    let before = clips::sha(&clip);
    let frames = video_frames(&clip);
    let (main, token) = pro_main(dir.path(), 0).await;
    let work = dir.path().join("blind/work");
    std::fs::create_dir_all(&work).unwrap();
    let script = format!(
        "mount -t tmpfs tmpfs '{}' && mount -t tmpfs -o size=16m,mode=0700 tmpfs '{}' && exec \"$0\" \"$@\"",
        hidden.display(),
        work.display()
    );
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script, crate::common::server::binary()]);
    let mut cmd = crate::common::cluster::as_linked(cmd, &dir.path().join("blind"), &main.api, "blind", 0);
    // Two slots: one stays free after the failure, so only the room the main node counts
    // on (not a busy slot) keeps the retry off this node
    // (`domain::placement::work_dir_free_after_failure`, then its heartbeats).
    cmd.env("TRANSFER_MBPS", "4").env("MAX_JOBS", "2");
    let node = ServerProcess::start(cmd);
    // The node's WORK_DIR as the node sees it: its tmpfs, not the folder under it here.
    let seen_work = PathBuf::from(format!("/proc/{}/root", node.child.id())).join(work.strip_prefix("/").unwrap());
    wait_until(&main, &token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&main, &token, &media).await;

    // Once the download runs, another writer takes every byte left.
    let deadline = Instant::now() + Duration::from_secs(120);
    let id = loop {
        let all = jobs(&main, &token).await;
        if let Some(job) = all.iter().find(|j| j["transfer"]["direction"] == "download") {
            break job["id"].as_i64().unwrap();
        }
        assert!(Instant::now() < deadline, "no download shown: {all:#?}\n{}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(seen_work.join("filler")).unwrap();
        let block = vec![7u8; 1 << 16];
        while filler.write_all(&block).is_ok() {}
    }

    // The attempt failed for want of room, and said where and how much.
    let deadline = Instant::now() + Duration::from_secs(60);
    let detail = loop {
        let detail = job_detail(&main, &token, id).await;
        if detail.to_string().contains("insufficient_disk_space") {
            break detail;
        }
        assert!(Instant::now() < deadline, "no disk failure: {detail:#}\n{}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let events = detail["events"].as_array().unwrap();
    let failed = events.iter().find(|e| e["detail"]["code"] == "insufficient_disk_space").unwrap();
    let message = failed["detail"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("WORK_DIR ({}) is full", work.display())), "{failed:#}");
    assert!(message.contains("more there,") && message.contains("are free"), "{failed:#}");
    assert_eq!(failed["nodeName"], "blind", "{failed:#}");
    // Not given back to the node that ran out of room: the job waits in the queue (that
    // node's next heartbeats show no room either, the filler still there).
    let deadline = Instant::now() + Duration::from_secs(8);
    while Instant::now() < deadline {
        let job = jobs(&main, &token).await.remove(0);
        assert_eq!(
            job["status"],
            "QUEUED",
            "given again while no node has room: {job:#}\n{}",
            node.output().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let detail = job_detail(&main, &token, id).await;
    let failures =
        detail["events"].as_array().unwrap().iter().filter(|e| e["detail"]["code"] == "insufficient_disk_space");
    assert_eq!(failures.count(), 1, "{detail:#}");

    assert_eq!(clips::sha(&clip), before, "the original changed");

    // Another node with room links: the job goes to it, and is encoded there.
    let other = ServerProcess::start(crate::common::cluster::blind_command(dir.path(), &hidden, &main, "other"));
    let deadline = Instant::now() + Duration::from_secs(180);
    let done = loop {
        let job = jobs(&main, &token).await.remove(0);
        match job["status"].as_str() {
            Some("COMPLETED") => break job,
            Some("FAILED") => panic!("failed on the other node: {job:#}\n{}", other.output().join("\n")),
            _ => {}
        }
        assert!(Instant::now() < deadline, "not completed on the other node: {job:#}\n{}", other.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["node"], "other", "{done:#}");
    assert_eq!(done["retryCount"], 1, "{done:#}");
    assert_ne!(clips::sha(&clip), before, "the original was not replaced");
    assert_eq!(video_frames(&clip), frames, "the output has not the source's frames");
    assert_eq!(names_in(&media), ["c0.mkv"]);
    wait_for_names(&seen_work, &["filler"], 20).await;
}

/// The numbers `field=N` of the lines of `lines` that contain `what`.
fn logged_values(lines: &[String], what: &str, field: &str) -> Vec<u64> {
    let key = format!("{field}=");
    lines
        .iter()
        .filter(|l| l.contains(what))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix(&key))?.parse().ok())
        .collect()
}

/// Issue 39, "the main node restarted mid-transfer": while the blind node moves the job's
/// file (`direction`, the transfer shown with some of its bytes moved), the main node is
/// stopped with `signal` and started again on its DATA_DIR and port. The job is not given
/// back to the queue: the node holds it across the restart, its transfer resumes from the
/// bytes already moved (the API shows no fewer after the restart; after a kill mid-download
/// the node's log names the byte it asked from, no lower), and it completes on that node: the output whole
/// (the source's frames, HEVC) in the original's place, nothing else in the library folder,
/// nothing left in the node's WORK_DIR.
async fn main_restarted_mid_transfer(test: &str, direction: &str, signal: i32) {
    if !mount_namespaces(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (hidden, media) = hidden_share(dir.path());
    // The download is cut only past what the sockets hold in flight (some MB that a killed
    // main node's kernel still delivers): a source of about 20 MB, at 2 MB/s. The upload
    // goes in parts, each answered: its output of about 1 MB, at 250 kB/s.
    let (seconds, mbps) = if direction == "download" { (8, "16") } else { (2, "2") };
    let clip = clips::noisy_h264(&media, "c0.mkv", seconds);
    let (before, frames) = (clips::sha(&clip), video_frames(&clip));
    let (restartable, mut main, token, node) = restartable_with_capped_blind(dir.path(), &hidden, &media, mbps).await;

    // The moment: the transfer under way, some bytes moved (a quarter of the source, for
    // the download), not all.
    let deadline = Instant::now() + Duration::from_secs(180);
    let (id, moved) = loop {
        let all = jobs(&main, &token).await;
        let shown = all.iter().find(|j| j["transfer"]["direction"] == direction);
        if let Some(job) = shown {
            let (bytes, total) =
                (job["transfer"]["bytes"].as_u64().unwrap(), job["transfer"]["total"].as_u64().unwrap());
            let far_enough = if direction == "download" { bytes >= total / 4 } else { bytes > 0 };
            if far_enough && bytes < total {
                break (job["id"].as_i64().unwrap(), bytes);
            }
        }
        let ended = all.iter().any(|j| matches!(j["status"].as_str(), Some("COMPLETED" | "FAILED")));
        assert!(
            !ended && Instant::now() < deadline,
            "no {direction} under way: {all:#?}\n{}",
            node.output().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stopped = main.signal_and_wait(signal);
    assert!(signal == libc::SIGKILL || stopped.success(), "{stopped:?}\n{}", main.output().join("\n"));
    let main = restartable.start();
    let token = login(&main).await;

    // Every transfer the API shows from now on, to the job's end.
    let (mut after, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(240));
    let done = loop {
        let all = jobs(&main, &token).await;
        if let [job] = all.as_slice() {
            if matches!(job["status"].as_str(), Some("COMPLETED" | "FAILED")) {
                break all;
            }
            if let Some(t) = job.get("transfer") {
                after.push(t.clone());
            }
        }
        assert!(Instant::now() < deadline, "the job did not end: {all:#?}\n{}", node.output().join("\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let detail = job_detail(&main, &token, id).await;
    let why = format!("{detail:#}\n{}", node.output().join("\n"));
    assert_eq!((&done[0]["status"], &done[0]["node"]), (&"COMPLETED".into(), &"blind".into()), "{why}");
    // Held across the restart: not requeued, no retry spent.
    assert_eq!(done[0]["retryCount"], 0, "{why}");
    let events = detail["events"].as_array().unwrap();
    let requeued: Vec<&Value> =
        events.iter().filter(|e| matches!(e["kind"].as_str(), Some("orphaned" | "retrying"))).collect();
    assert!(requeued.is_empty(), "the job went back to the queue: {requeued:#?}\n{why}");
    // Resumed, not started over: the transfer the API shows after the restart never has
    // fewer bytes than before it, and an upload is not preceded by a second download.
    let first_upload = after.iter().position(|t| t["direction"] == "upload").unwrap_or(after.len());
    let going_on = if direction == "download" { &after[..first_upload] } else { &after[..] };
    assert!(
        going_on.iter().all(|t| t["direction"] == direction && t["bytes"].as_u64().unwrap() >= moved),
        "{moved} bytes moved before the restart, then: {after:#?}\n{why}"
    );
    // A kill cuts a download short (a graceful stop may let it end first: the main node
    // drains its answers for up to 10 s); the node asks for the rest, from the bytes it has.
    if signal == libc::SIGKILL && direction == "download" {
        let resumed = logged_values(&node.output(), "resuming the download", "from");
        assert!(
            resumed.iter().any(|&from| from >= moved),
            "resumed from {resumed:?}, {moved} bytes moved before the kill\n{why}"
        );
    }
    // The output, whole, in the original's place; nothing else there.
    assert_ne!(clips::sha(&clip), before);
    assert_eq!(condense_media::probe::probe(&clip).unwrap().video().unwrap().codec, "hevc");
    assert_eq!(video_frames(&clip), frames);
    assert_eq!(names_in(&media), ["c0.mkv"]);
    wait_for_names(&dir.path().join("blind/work"), &[], 20).await;
}

#[actix_web::test]
async fn a_main_node_killed_during_a_download_is_waited_for_and_the_download_resumes() {
    main_restarted_mid_transfer("transfer_flow::a_main_node_killed_during_a_download", "download", libc::SIGKILL).await;
}

#[actix_web::test]
async fn a_main_node_killed_during_an_upload_is_waited_for_and_the_upload_resumes() {
    main_restarted_mid_transfer("transfer_flow::a_main_node_killed_during_an_upload", "upload", libc::SIGKILL).await;
}

#[actix_web::test]
async fn a_main_node_stopped_during_a_download_is_waited_for_and_the_job_completes() {
    main_restarted_mid_transfer("transfer_flow::a_main_node_stopped_during_a_download", "download", libc::SIGTERM)
        .await;
}

#[actix_web::test]
async fn a_main_node_stopped_during_an_upload_is_waited_for_and_the_job_completes() {
    main_restarted_mid_transfer("transfer_flow::a_main_node_stopped_during_an_upload", "upload", libc::SIGTERM).await;
}

/// A 16 s clip (a keyframe a second: 16 spans; light noise, some MB) on a main node that
/// only coordinates, encoding on `w1`, which sees the share, and then `blind`, which does
/// not, linked with `throttle` ms per frame of its own encodes.
struct Helped {
    dir: tempfile::TempDir,
    main: ServerProcess,
    token: String,
    media: PathBuf,
    clip: PathBuf,
    /// The clip's size before it was encoded.
    clip_bytes: u64,
    seeing: ServerProcess,
    blind: ServerProcess,
    id: i64,
}

/// `stale_library`: the tmpfs is mounted over the library's folder itself, not the share
/// above it, and holds a file of its own: the node finds a folder with something in it
/// there and says it sees the library (a stale share, another disk mounted there), yet the
/// job's file is not in it. `env`: more of the blind node's environment.
async fn helped_by_blind(throttle: u64, stale_library: bool, env: &[(&str, &str)]) -> Helped {
    let dir = tempfile::tempdir().unwrap();
    let (share, media) = hidden_share(dir.path());
    let (hidden, left) = if stale_library { (media.clone(), Some("other.mkv")) } else { (share, None) };
    let clip = media.join("movie.mkv");
    let video = "testsrc2=size=320x240:rate=25,noise=alls=6:allf=t";
    let x264 = ["-c:v", "libx264", "-preset", "ultrafast", "-qp", "26", "-g", "25"];
    clips::ffmpeg(&[&["-f", "lavfi", "-i", video, "-t", "16"], &x264[..], &[clip.to_str().unwrap()]].concat());
    let clip_bytes = std::fs::metadata(&clip).unwrap().len();
    let (main, token) = pro_main(dir.path(), 0).await;
    let seeing = crate::common::cluster::linked(dir.path(), &main, "w1", 60);
    wait_until(&main, &token, "w1 linked", 30, |l| up(l, "w1")).await;
    add_library(&main, &token, &media).await;
    // The job runs on the node that sees the file before the other one links.
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let all = jobs(&main, &token).await;
        if let Some(job) = all.iter().find(|j| j["status"] == "ENCODING" && j["node"] == "w1") {
            break job["id"].as_i64().unwrap();
        }
        assert!(Instant::now() < deadline, "the job never ran on w1: {all:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut cmd = blind_command_leaving(dir.path(), &hidden, &main, "blind", left);
    cmd.env("CONDENSE_THROTTLE_MS_PER_FRAME", throttle.to_string()).envs(env.iter().copied());
    let blind = ServerProcess::start(cmd);
    Helped { dir, main, token, media, clip, clip_bytes, seeing, blind, id }
}

impl Helped {
    /// The span the main node claims for the node without the share, once it is ENCODING
    /// there (fails the test after 60 s).
    async fn span_claimed_for_blind(&self) -> u64 {
        let partial = condense::media::layout::partial_dir_for(&self.clip);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let detail = job_detail(&self.main, &self.token, self.id).await;
            let held = detail["segments"].as_array().and_then(|s| {
                s.iter()
                    .find(|s| s["status"] == "ENCODING" && s["nodeName"] == "blind")
                    .map(|s| s["index"].as_u64().unwrap())
            });
            if let Some(span) = held.filter(|s| condense::media::partial::span_held(&partial, *s as u32)) {
                return span;
            }
            assert!(Instant::now() < deadline, "no span was claimed for the node without the share: {detail:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The job once it ended, checked COMPLETED on w1 at its first try with every span
    /// DONE and 400 frames, and the original replaced by the whole HEVC encode.
    async fn completed(&self) -> Value {
        wait_all_done(&self.main, &self.token, 1, 180).await;
        let detail = job_detail(&self.main, &self.token, self.id).await;
        let logs = format!(
            "{detail:#}\n--- blind ---\n{}\n--- w1 ---\n{}",
            self.blind.output().join("\n"),
            self.seeing.output().join("\n")
        );
        assert_eq!((&detail["status"], &detail["node"]), (&Value::from("COMPLETED"), &Value::from("w1")), "{logs}");
        assert_eq!(detail["retryCount"], 0, "{logs}");
        let segments = detail["segments"].as_array().unwrap();
        assert!(segments.iter().all(|s| s["status"] == "DONE"), "{logs}");
        let frames: i64 = segments.iter().map(|s| s["frames"].as_i64().unwrap()).sum();
        assert_eq!(frames, 400, "{logs}");
        assert_eq!(condense_media::probe::probe(&self.clip).unwrap().video().unwrap().codec, "hevc");
        assert_eq!(video_frames(&self.clip), 400);
        assert_eq!(names_in(&self.media), ["movie.mkv"]);
        detail
    }
}

/// Issue 39, item 4: a node that does not see the library helps with a job another node
/// runs from the share. It takes spans of it by transfer (the main node claims each for it,
/// it fetches the ranges of the source each span reads into one sparse copy and uploads
/// each span's segments), the job's run takes them in, and the file is replaced whole;
/// nothing of the job is left in its WORK_DIR.
#[actix_web::test]
async fn a_node_without_the_share_encodes_spans_of_a_job_another_node_runs() {
    if !mount_namespaces("transfer_flow::a_node_without_the_share_encodes_spans_of_a_job_another_node_runs") {
        return;
    }
    let helped = helped_by_blind(60, false, &[]).await;
    let detail = helped.completed().await;
    let by_blind: Vec<i64> = detail["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["nodeName"] == "blind")
        .map(|s| s["index"].as_i64().unwrap())
        .collect();
    let blind = &helped.blind;
    assert!(!by_blind.is_empty(), "no span was encoded by the node without the share: {detail:#}");
    assert!(logged(blind, "a span encoded here is in the job's partial output", helped.id));
    // No span downloaded the source: each fetched the ranges it read, a fraction of it
    // (its container's header and cues, its own span, a few chunks ahead).
    let lines = blind.output();
    let fetched = logged_values(&lines, "fetched the ranges of the source the span read", "bytes");
    assert_eq!(fetched.len(), by_blind.len(), "{}", lines.join("\n"));
    let size = helped.clip_bytes;
    assert!(fetched.iter().all(|&bytes| bytes < size / 2), "{fetched:?} of {size}\n{}", lines.join("\n"));
    assert!(!lines.iter().any(|l| l.contains("downloaded the source")), "{}", lines.join("\n"));
    // The node's copy goes once it sees the job ended (its next look at WORK_DIR, within
    // seconds while it holds a copy for spans).
    wait_for_names(&helped.dir.path().join("blind/work"), &[], 20).await;
}

/// A node that fetches no ranges (as it does from a main node of an older release, which
/// serves none) downloads the whole source once for all its spans of the job: the later
/// spans find the copy whole, checked again. The job completes as with ranges.
#[actix_web::test]
async fn a_node_that_fetches_no_ranges_downloads_the_source_once_for_its_spans() {
    if !mount_namespaces("transfer_flow::a_node_that_fetches_no_ranges_downloads_the_source_once_for_its_spans") {
        return;
    }
    let helped = helped_by_blind(60, false, &[("CONDENSE_SPAN_RANGES", "false")]).await;
    let detail = helped.completed().await;
    let by_blind = detail["segments"].as_array().unwrap().iter().filter(|s| s["nodeName"] == "blind").count();
    assert!(by_blind > 0, "no span was encoded by the node without the share: {detail:#}");
    let lines = helped.blind.output();
    let said = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(said("downloaded the source for the job's spans"), 1, "{}", lines.join("\n"));
    assert_eq!(said("the copy of the source here is whole"), by_blind - 1, "{}", lines.join("\n"));
    assert_eq!(said("fetched the ranges of the source"), 0, "{}", lines.join("\n"));
    wait_for_names(&helped.dir.path().join("blind/work"), &[], 20).await;
}

/// A node whose library folder holds something else than the library (a stale share, or
/// another disk mounted there) says it sees the library and is given spans from the share;
/// its helper finds no file there and takes each span by transfer instead.
#[actix_web::test]
async fn a_node_with_a_stale_library_folder_takes_its_spans_by_transfer() {
    if !mount_namespaces("transfer_flow::a_node_with_a_stale_library_folder_takes_its_spans_by_transfer") {
        return;
    }
    let helped = helped_by_blind(60, true, &[]).await;
    let detail = helped.completed().await;
    let segments = detail["segments"].as_array().unwrap();
    assert!(segments.iter().any(|s| s["nodeName"] == "blind"), "{detail:#}");
    assert!(logged(&helped.blind, "the job's file is not here: the span goes by transfer", helped.id));
    assert!(logged(&helped.blind, "a span encoded here is in the job's partial output", helped.id));
    // The node no longer says it sees the library: it missed a file there.
    let list = nodes(&helped.main, &helped.token).await;
    assert_eq!(sees(&list, "blind", "media"), Some(false), "{list:#?}");
    wait_for_names(&helped.dir.path().join("blind/work"), &[], 20).await;
}

/// A node whose library folder holds something else than the library (a stale share, or
/// another disk mounted there) says it sees the library and is given its job as a node that
/// sees it; it finds no file there and takes the job by transfer instead of failing it.
#[actix_web::test]
async fn a_job_on_a_node_with_a_stale_library_folder_goes_by_transfer() {
    if !mount_namespaces("transfer_flow::a_job_on_a_node_with_a_stale_library_folder_goes_by_transfer") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), 2).await;
    let frames = video_frames(&s.clip);
    let node = ServerProcess::start(blind_command_leaving(dir.path(), &s.media, &s.main, "blind", Some("other.mkv")));
    wait_until(&s.main, &s.token, "blind linked", 30, |l| up(l, "blind")).await;
    add_library(&s.main, &s.token, &s.media).await;
    let done = wait_all_done(&s.main, &s.token, 1, 120).await;
    let id = done[0]["id"].as_i64().unwrap();
    let detail = job_detail(&s.main, &s.token, id).await;
    assert_eq!(
        (&done[0]["status"], &done[0]["node"]),
        (&Value::from("COMPLETED"), &Value::from("blind")),
        "{detail:#}"
    );
    assert_eq!(done[0]["retryCount"], 0, "{detail:#}");
    assert!(logged(&node, "the job's file is not here: the job goes by transfer", id), "{}", node.output().join("\n"));
    replaced_whole(&s, frames, &dir.path().join("blind/work"), &[]).await;
}

/// The node without the share is killed while the main node holds a span's claim for it:
/// once its lease runs out the claim goes, the job's run encodes the span itself, and the
/// job completes where it ran, whole.
#[actix_web::test]
async fn a_node_without_the_share_killed_mid_span_costs_only_that_span() {
    if !mount_namespaces("transfer_flow::a_node_without_the_share_killed_mid_span_costs_only_that_span") {
        return;
    }
    // Slow: the span is still being encoded there when it is killed.
    let mut helped = helped_by_blind(400, false, &[]).await;
    let span = helped.span_claimed_for_blind().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    helped.blind.child.kill().unwrap();
    helped.blind.child.wait().unwrap();

    let detail = helped.completed().await;
    let segments = detail["segments"].as_array().unwrap();
    let killed = segments.iter().find(|s| s["index"].as_u64() == Some(span)).unwrap();
    assert_eq!((&killed["status"], &killed["nodeName"]), (&Value::from("DONE"), &Value::from("w1")), "{detail:#}");
    let main = helped.main.output();
    assert!(main.iter().any(|l| l.contains("the claim of a node without the share went with its lease")));
}

/// A job is cancelled while a node without the share holds a span's claim and cannot be told
/// to stop (killed here: its lease outlives the moment a cancel gives helpers to let their
/// spans go): the main node lets its claims on the job go with the job, so the partial
/// folder goes at once, and the original is as it was.
#[actix_web::test]
async fn a_job_cancelled_while_a_cut_off_node_holds_a_span_leaves_no_partial_folder() {
    if !mount_namespaces("transfer_flow::a_job_cancelled_while_a_cut_off_node_holds_a_span_leaves_no_partial_folder") {
        return;
    }
    let mut helped = helped_by_blind(400, false, &[]).await;
    let original = std::fs::read(&helped.clip).unwrap();
    let partial = condense::media::layout::partial_dir_for(&helped.clip);
    helped.span_claimed_for_blind().await;
    helped.blind.child.kill().unwrap();
    helped.blind.child.wait().unwrap();
    let url = format!("{}/jobs/{}/cancel", helped.main.api, helped.id);
    let (status, answer) = call("POST", &url, Some(&helped.token), Some(json!({}))).await;
    assert_eq!(status, 200, "{answer:#}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let detail = job_detail(&helped.main, &helped.token, helped.id).await;
        if detail["status"] == "CANCELLED" {
            break;
        }
        assert!(Instant::now() < deadline, "the job was not cancelled: {detail:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!partial.exists(), "the partial folder stayed: {:?}", names_in(&partial));
    assert_eq!(names_in(&helped.media), ["movie.mkv"]);
    assert!(std::fs::read(&helped.clip).unwrap() == original, "the original changed");
    let main = helped.main.output();
    assert!(
        main.iter().any(|l| l.contains("a claim for a node without the share went with the job's partial output")),
        "{}",
        main.join("\n")
    );
}
