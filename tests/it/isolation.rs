//! FFmpeg never runs inside the node: a source that crashes or hangs its decoder ends a
//! child process and fails the job's attempt, and the node that holds the database and the
//! secrets stays up. A job whose node crashes under it again and again fails instead of
//! crash-looping.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use condense::domain::job::{FailureCode, JobStatus};
use entities::job;
use sea_orm::DatabaseConnection;

use crate::common::server::{command, library_with_clip, ServerProcess};
use crate::common::shim;

async fn job_of(db: &DatabaseConnection, source: &Path) -> Option<job::Model> {
    condense::repo::jobs::find_by_path(db, source.to_str().unwrap()).await.unwrap()
}

async fn wait_for(
    db: &DatabaseConnection,
    source: &Path,
    server: &ServerProcess,
    limit: Duration,
    done: impl Fn(&job::Model) -> bool,
) -> job::Model {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(job) = job_of(db, source).await {
            if done(&job) {
                return job;
            }
        }
        assert!(Instant::now() < deadline, "waited in vain: {:?}\n{:#?}", job_of(db, source).await, server.output());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn with_trap(cmd: &mut Command, trap: &Path, source: &Path, mode: &str) {
    cmd.env("LD_PRELOAD", trap).env("CONDENSE_SHIM_PATH", source).env("CONDENSE_SHIM_MODE", mode);
}

/// The node answers and its process is still the one started.
async fn assert_alive(server: &mut ServerProcess) {
    assert!(server.child.try_wait().unwrap().is_none(), "the node died:\n{:#?}", server.output());
    let mut response = awc::Client::default().get(format!("{}/healthz", server.api)).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let _ = response.body().await;
}

#[actix_web::test]
async fn a_decoder_that_crashes_on_a_file_fails_the_job_never_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let (db, source) = library_with_clip(dir.path(), 2).await;
    let original = std::fs::read(&source).unwrap();
    let trap = shim::build(dir.path(), "read-trap", shim::READ_TRAP);
    let mut cmd = command(&dir.path().join("data"));
    with_trap(&mut cmd, &trap, &source, "crash");
    let mut server = ServerProcess::start(cmd);

    let job = wait_for(&db, &source, &server, Duration::from_secs(120), |j| j.status == JobStatus::Failed).await;
    assert_alive(&mut server).await;
    assert_eq!(job.failure_code, Some(FailureCode::TranscoderCrashed.into()), "{job:?}");
    assert_eq!(job.retry_count, 3, "every attempt crashed and was retried");
    let detail = job.failure_detail.unwrap_or_default();
    assert!(detail.contains("signal 11") && detail.contains("validating"), "{detail}");
    assert_eq!(std::fs::read(&source).unwrap(), original, "the original changed");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}

#[actix_web::test]
async fn a_decoder_that_hangs_on_a_file_is_stopped_by_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (db, source) = library_with_clip(dir.path(), 2).await;
    let original = std::fs::read(&source).unwrap();
    let trap = shim::build(dir.path(), "read-trap", shim::READ_TRAP);
    let mut cmd = command(&dir.path().join("data"));
    with_trap(&mut cmd, &trap, &source, "hang");
    cmd.env("ANALYSIS_TIMEOUT_SECONDS", "2");
    let mut server = ServerProcess::start(cmd);

    let job = wait_for(&db, &source, &server, Duration::from_secs(120), |j| j.status == JobStatus::Failed).await;
    assert_alive(&mut server).await;
    assert_eq!(job.failure_code, Some(FailureCode::Timeout.into()), "{job:?}");
    assert!(job.failure_detail.unwrap_or_default().contains("longer than 2 s"));
    assert_eq!(std::fs::read(&source).unwrap(), original, "the original changed");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}

/// A job whose node is killed under it three times fails as crashed; clean stops of the
/// node do not count.
#[actix_web::test]
async fn a_job_whose_node_crashes_three_times_fails_as_crashed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (db, source) = library_with_clip(dir.path(), 20).await;
    let original = std::fs::read(&source).unwrap();
    let start = || {
        let mut cmd = command(&data);
        cmd.env("SEGMENT_SECONDS", "1").env("CONDENSE_THROTTLE_MS_PER_FRAME", "40");
        ServerProcess::start(cmd)
    };
    let started = |job: &job::Model| job.status == JobStatus::Encoding && job.progress > 0.0;

    // A clean stop (SIGTERM) leaves the job to continue, and counts nothing.
    let mut server = start();
    wait_for(&db, &source, &server, Duration::from_secs(60), started).await;
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    let mut server = start();
    let job = wait_for(&db, &source, &server, Duration::from_secs(60), started).await;
    assert_eq!(job.crash_count, 0, "a clean stop was counted as a crash");

    for crash in 1..=3 {
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        assert_eq!(std::fs::read(&source).unwrap(), original, "the original changed");
        server = start();
        let job = wait_for(&db, &source, &server, Duration::from_secs(60), |j| {
            j.crash_count == crash && (started(j) || j.status == JobStatus::Failed)
        })
        .await;
        if crash < 3 {
            assert_eq!(job.status, JobStatus::Encoding, "requeued and running again after crash {crash}");
        } else {
            assert_eq!(job.status, JobStatus::Failed);
            assert_eq!(job.failure_code, Some(FailureCode::TranscoderCrashed.into()));
        }
    }
    assert_eq!(std::fs::read(&source).unwrap(), original, "the original changed");
    assert!(!condense::media::layout::partial_dir_for(&source).exists(), "the failed job's partial output is left");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}

/// A read error at 70 % of the source fails the attempt, and the retry continues from the
/// segments the failed attempt finished (recorded in the history as "continued", with the
/// frames kept) instead of encoding the file again from its first frame. The output has
/// every frame.
#[actix_web::test]
async fn a_retry_after_a_read_error_continues_from_the_finished_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (db, source) = library_with_clip(dir.path(), 6).await;
    let frames = shim::video_frames(&source);
    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let mut cmd = command(&dir.path().join("data"));
    // One session: with parallel sessions the span planning reads Matroska's cues at the
    // end of the file first, where the shim's one failure would land (harmlessly: one span).
    cmd.env("SEGMENT_SECONDS", "1").env("PARALLEL_SEGMENTS", "off").envs(shim::eio_env(&source, Some(70), &markers));
    let server = ServerProcess::start(cmd);

    let job = wait_for(&db, &source, &server, Duration::from_secs(180), |j| j.status == JobStatus::Completed).await;
    assert_eq!(std::fs::read_dir(&markers).unwrap().count(), 1, "the shim failed no read");
    let history = condense::repo::events::list(&db, job.id).await.unwrap();
    let kinds: Vec<&str> = history.iter().map(|e| e.kind.as_str()).collect();
    let retried = kinds.iter().position(|k| *k == "retrying").unwrap_or_else(|| panic!("no retry: {kinds:?}"));
    let continued = history
        .iter()
        .skip(retried)
        .find(|e| e.kind == "continued")
        .unwrap_or_else(|| panic!("the retry started from scratch: {kinds:?}"));
    let detail = continued.detail.clone().unwrap_or_default();
    let kept = detail["frames"].as_u64().unwrap_or(0);
    // 1 s segments of a 25 fps clip: the segments before the failed read are whole ones.
    assert!(kept >= 50 && kept < frames && kept % 25 == 0, "kept {kept} of {frames} frames: {detail}");
    assert_eq!(job.retry_count, 1, "{kinds:?}");
    assert_eq!(shim::video_frames(&source), frames, "the replacement lost frames");
}

/// A verification that fails (its child crashes reading the output) fails the attempt, and
/// its partial output goes with it, though the commit holds the folder's lock from
/// verification on (a second open of the lock, even in the same process, is refused): the
/// folder is removed under the lock held. The old code tried to remove it through a second
/// lock and left it behind at every failed verification.
#[actix_web::test]
async fn a_verification_that_fails_leaves_no_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let (db, source) = library_with_clip(dir.path(), 1).await;
    let original = std::fs::read(&source).unwrap();
    let partial = condense::media::layout::partial_dir_for(&source);
    let trap = shim::build(dir.path(), "read-trap", shim::READ_TRAP);
    let mut cmd = command(&dir.path().join("data"));
    with_trap(&mut cmd, &trap, &condense::media::layout::output_path(&partial, "mkv"), "crash");
    let mut server = ServerProcess::start(cmd);

    let job = wait_for(&db, &source, &server, Duration::from_secs(240), |j| j.status == JobStatus::Failed).await;
    assert_alive(&mut server).await;
    assert_eq!(job.retry_count, 3, "every verification failed and was retried: {job:?}");
    let detail = job.failure_detail.unwrap_or_default();
    assert!(detail.contains("signal 11"), "the verification did not crash on the output: {detail}");
    assert!(!partial.exists(), "the failed job left its partial output: {:?}", std::fs::read_dir(&partial));
    assert_eq!(std::fs::read(&source).unwrap(), original, "the original changed");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}
