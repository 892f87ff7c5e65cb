//! The job lifecycle end to end with the real actors, real transcoder children and real
//! databases: libraries become jobs, jobs become encodes, failures retry, limits hold.

use std::path::Path;
use std::time::{Duration, Instant};

use condense::domain::job::{FailureCode, JobStatus};
use condense::domain::license::Tier;
use condense::repo::licenses::NewLicense;
use condense::repo::{self};
use condense_media::probe::probe;
use entities::job;
use sea_orm::DatabaseConnection;

use crate::both_backends;
use crate::common::license;
use crate::common::media as clips;
use crate::common::runtime::{all_jobs, library, start_runtime, wait_terminal};
use crate::common::server::own_children;

/// A job of no library, inserted as it is (the file need not exist).
fn job_of_no_library(path: &Path, status: JobStatus) -> repo::jobs::NewJob {
    let job = crate::common::rows::new_job(None, &path.to_string_lossy(), status);
    repo::jobs::NewJob { source_size: 1, source_mtime_ns: None, source_inode: None, ..job }
}

async fn event_kinds(db: &DatabaseConnection, job_id: i32) -> Vec<String> {
    repo::events::list(db, job_id).await.unwrap().into_iter().map(|e| e.kind).collect()
}

both_backends!(a_library_of_five_clips_ends_completed_skipped_and_failed, |db: DatabaseConnection| async move {
    let dir = tempfile::tempdir().unwrap();
    let mut sizes = std::collections::HashMap::new();
    for name in ["a.mkv", "b.mp4", "c.mkv"] {
        let path = clips::h264_with_audio_and_subs(dir.path(), name, "320x240", 1);
        sizes.insert(name.to_string(), std::fs::metadata(&path).unwrap().len());
    }
    std::fs::remove_file(dir.path().join("subs.srt")).unwrap();
    clips::hevc(dir.path(), "d_hevc.mkv");
    std::fs::write(dir.path().join("e_corrupt.mkv"), vec![0x1a; 50_000]).unwrap();
    repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();

    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let jobs = wait_terminal(&db, 5, Duration::from_secs(240)).await;
    let by_name: std::collections::HashMap<_, _> = jobs.iter().map(|j| (j.file_name.as_str(), j)).collect();

    for name in ["a.mkv", "b.mp4", "c.mkv"] {
        let job = by_name[name];
        assert_eq!(job.status, JobStatus::Completed, "{name}: {:?}", job.failure_detail);
        let path = dir.path().join(name);
        let info = probe(&path).unwrap();
        assert_eq!(info.video().unwrap().codec, "hevc", "{name}");
        assert!(info.size_bytes < sizes[name], "{name} not smaller");
        assert_eq!(job.output_size, Some(info.size_bytes as i64));
        assert!(job.cpu_time_ms.unwrap_or(0) > 0 && job.wall_time_ms.unwrap_or(0) > 0, "{name}");
        let kinds = event_kinds(&db, job.id).await;
        assert_eq!(&kinds[..4], ["created", "queued", "started", "encoding"], "{name}");
        assert_eq!(kinds.last().map(String::as_str), Some("completed"), "{name}: {kinds:?}");
        assert!(kinds.iter().any(|k| k == "replace_output_in_place"), "{name}: {kinds:?}");
        assert!(!condense::media::layout::partial_dir_for(&path).exists(), "{name}: partial output left behind");
        // Where the job's time went, by the service's own clocks, with its completion.
        let events = repo::events::list(&db, job.id).await.unwrap();
        let detail = events.iter().find(|e| e.kind == "completed").and_then(|e| e.detail.clone()).unwrap();
        let phases: Vec<condense::media::event::PhaseTime> =
            serde_json::from_value(detail["phases"].clone()).unwrap_or_else(|e| panic!("{name}: {e}: {detail}"));
        let names: Vec<&str> = phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(names, ["validation", "start", "spans", "video", "mux", "verification", "replace"], "{name}");
        let phase = |n: &str| phases.iter().find(|p| p.phase == n).unwrap();
        // The children said their CPU time; decoding and encoding take some.
        for n in ["validation", "video", "verification"] {
            assert!(phase(n).cpu_ms > 0 && phase(n).wall_ms > 0, "{name}: {n}: {phases:?}");
        }
        // The transcoder's phases are its run, cut into pieces.
        let transcoder: u64 = phases[1..5].iter().map(|p| p.wall_ms).sum();
        assert!(transcoder <= job.wall_time_ms.unwrap() as u64, "{name}: {phases:?} {:?}", job.wall_time_ms);
        assert!(detail["aloneMs"].as_u64().unwrap() <= phase("video").wall_ms, "{name}: {detail}");
    }
    let skipped = by_name["d_hevc.mkv"];
    assert_eq!(skipped.status, JobStatus::Skipped);
    assert_eq!(skipped.skip_reason.as_deref(), Some("video is already hevc"));
    // Skipped by the probe after the scan: a found file waits (PENDING) for it, so no
    // scheduler reaches it first.
    assert_eq!(event_kinds(&db, skipped.id).await, ["created", "skipped"]);

    let failed = by_name["e_corrupt.mkv"];
    assert_eq!(failed.status, JobStatus::Failed);
    assert_eq!(failed.failure_reason.as_deref(), Some("file validation failed"));
    assert_eq!(failed.failure_code, Some(FailureCode::FileValidationFailed.into()));
    assert_eq!(failed.retry_count, 3);
    let kinds = event_kinds(&db, failed.id).await;
    let mut expected = vec!["created", "queued"];
    for _ in 0..3 {
        expected.extend(["started", "retrying"]);
    }
    expected.extend(["started", "failed"]);
    assert_eq!(kinds, expected);
    assert_eq!(std::fs::read(dir.path().join("e_corrupt.mkv")).unwrap(), vec![0x1a; 50_000]);
});

// A file an attempt leaves alone is still decoded at its points first (a first attempt's
// validation only probes; an encode would decode it whole): the truncated HEVC file, queued
// before the probe could skip it, fails rather than being SKIPPED, and is left as it was.
both_backends!(a_broken_file_an_attempt_would_leave_alone_fails_its_validation, |db: DatabaseConnection| async move {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(clips::hevc(dir.path(), "whole.mkv")).unwrap();
    std::fs::remove_file(dir.path().join("whole.mkv")).unwrap();
    let cut = dir.path().canonicalize().unwrap().join("cut.mkv");
    std::fs::write(&cut, &whole[..whole.len() / 3]).unwrap();
    let library = repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();
    // Queued as the scan would have it, its identity the file's: the scan at the start
    // finds it known and unchanged, so it goes to an attempt, not to the probe.
    let identity = condense::media::plan::SourceIdentity::of(&cut).unwrap();
    let job = repo::jobs::NewJob {
        source_size: identity.size as i64,
        source_mtime_ns: Some(identity.mtime_ns),
        source_inode: Some(identity.inode as i64),
        ..crate::common::rows::new_job(Some(library.id), &cut.to_string_lossy(), JobStatus::Queued)
    };
    repo::jobs::insert(&db, job).await.unwrap();

    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let jobs = wait_terminal(&db, 1, Duration::from_secs(120)).await;
    let job = &jobs[0];
    assert_eq!(job.status, JobStatus::Failed, "{:?} {:?}", job.skip_reason, job.failure_detail);
    assert_eq!(job.failure_code, Some(FailureCode::FileValidationFailed.into()), "{:?}", job.failure_detail);
    assert_eq!(std::fs::read(&cut).unwrap(), &whole[..whole.len() / 3], "the file changed");
});

both_backends!(the_probe_after_a_scan_skips_what_needs_no_encode_without_a_slot, |db: DatabaseConnection| async move {
    let dir = tempfile::tempdir().unwrap();
    // 260 copies: two batches (`actors::prober::BATCH`), so two children and two
    // transactions.
    let first = clips::hevc(dir.path(), "hevc_000.mkv");
    let copies = condense::actors::prober::BATCH as usize + 10;
    for i in 1..copies {
        std::fs::copy(&first, dir.path().join(format!("hevc_{i:03}.mkv"))).unwrap();
    }
    let hevc_bytes = std::fs::read(&first).unwrap();
    clips::h264(dir.path(), "z_h264.mkv", "64x64", 1);
    std::fs::write(dir.path().join("z_garbage.mkv"), vec![0x1a; 50_000]).unwrap();
    repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();

    // No encode slot anywhere: only the probe after the scan can skip a job.
    let _runtime = start_runtime(&db, 0, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let jobs = loop {
        let jobs = all_jobs(&db).await;
        let skipped = jobs.iter().filter(|j| j.status == JobStatus::Skipped).count();
        let h264_known = jobs.iter().any(|j| j.file_name == "z_h264.mkv" && j.source_codec.is_some());
        if skipped == copies && h264_known {
            break jobs;
        }
        assert!(Instant::now() < deadline, "{skipped} of {copies} skipped; the H.264 file probed: {h264_known}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(jobs.len(), copies + 2);
    for job in jobs.iter().filter(|j| j.file_name.starts_with("hevc_")) {
        assert_eq!(job.status, JobStatus::Skipped, "{}", job.file_name);
        assert_eq!(job.skip_reason.as_deref(), Some("video is already hevc"));
        assert_eq!(job.source_codec.as_deref(), Some("hevc"));
        assert_eq!(job.hdr.as_deref(), Some("SDR"));
        assert!(job.duration_seconds.is_some_and(|d| d > 0.5), "{:?}", job.duration_seconds);
        assert!(job.started_at.is_none() && job.node_name.is_none() && job.completed_at.is_some());
        assert_eq!(event_kinds(&db, job.id).await, ["created", "skipped"], "{}", job.file_name);
        assert_eq!(std::fs::read(&job.file_path).unwrap(), hevc_bytes, "{} changed", job.file_name);
    }
    // The others wait for a slot, their facts known (the codec distribution, forecasts).
    let h264 = jobs.iter().find(|j| j.file_name == "z_h264.mkv").unwrap();
    assert_eq!((JobStatus::from(h264.status), h264.source_codec.as_deref()), (JobStatus::Queued, Some("h264")));
    assert!(h264.duration_seconds.is_some_and(|d| (d - 1.0).abs() < 0.2), "{:?}", h264.duration_seconds);
    assert_eq!(event_kinds(&db, h264.id).await, ["created", "queued"]);
    let probe = repo::jobs::get(&db, h264.id).await.unwrap().probe.unwrap();
    assert_eq!(probe["streams"][0]["codec"], "h264", "{probe}");
    // What the probe cannot read is left to its attempt, which says why.
    let garbage = jobs.iter().find(|j| j.file_name == "z_garbage.mkv").unwrap();
    assert_eq!((JobStatus::from(garbage.status), garbage.source_codec.as_deref()), (JobStatus::Queued, None));
    assert!(repo::jobs::get(&db, garbage.id).await.unwrap().probe.is_none());
    // The codec distribution covers every probed file at once.
    let mut codecs = repo::stats::codec_counts(&db).await.unwrap();
    codecs.sort();
    assert_eq!(codecs, [("h264".to_string(), 1), ("hevc".to_string(), copies as u64)]);
    // The kept counts moved with the batch's transitions.
    let counts = repo::jobs::count_by_status(&db).await.unwrap();
    assert_eq!((counts[&JobStatus::Skipped], counts[&JobStatus::Queued]), (copies as u64, 2));
});

#[actix_web::test]
async fn a_file_copied_into_a_watched_folder_becomes_a_job_once_it_stops_growing() {
    let test_db = crate::common::db::TestDb::sqlite().await;
    let db = test_db.db.clone();
    let media = tempfile::tempdir().unwrap();
    let staging = tempfile::tempdir().unwrap();
    let clip = clips::h264(staging.path(), "new.mkv", "320x240", 1);
    let bytes = std::fs::read(&clip).unwrap();
    repo::libraries::create(&db, library(media.path(), true)).await.unwrap();
    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(all_jobs(&db).await.is_empty());

    // Written in pieces, each well before the settle time (2 s) passes: never picked up meanwhile.
    let target = media.path().join("new.mkv");
    let pieces = bytes.chunks(bytes.len() / 5 + 1).collect::<Vec<_>>();
    for piece in &pieces {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&target).unwrap();
        f.write_all(piece).unwrap();
        drop(f);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(all_jobs(&db).await.is_empty(), "a growing file became a job");
    }
    // No rescan is asked for: the watcher alone must register it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = all_jobs(&db).await;
        if let Some(job) = jobs.first() {
            assert_eq!(job.file_name, "new.mkv");
            assert_eq!(job.source_size, bytes.len() as i64, "registered before it was complete");
            break;
        }
        assert!(Instant::now() < deadline, "the copied file never became a job");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let done = wait_terminal(&db, 1, Duration::from_secs(120)).await;
    assert_eq!(done[0].status, JobStatus::Completed);
    test_db.finish().await;
}

/// Largest number of jobs that were running at the same moment, from their histories.
async fn max_overlap(db: &DatabaseConnection) -> usize {
    let mut points = Vec::new();
    for job in all_jobs(db).await {
        let events = repo::events::list(db, job.id).await.unwrap();
        let start = events.iter().find(|e| e.kind == "started").unwrap().at;
        let end = events.iter().rev().find(|e| e.kind == "completed").unwrap().at;
        points.push((start, 1i32));
        points.push((end, -1i32));
    }
    points.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, delta) in points {
        now += delta;
        most = most.max(now);
    }
    most as usize
}

#[actix_web::test]
async fn free_runs_one_job_at_a_time_and_a_pro_key_lifts_it() {
    let (private, public) = condense::license::generate_keypair();
    for tier in [Tier::Free, Tier::Pro] {
        let test_db = crate::common::db::TestDb::sqlite().await;
        let db = test_db.db.clone();
        if tier == Tier::Pro {
            let key = license::key(&private, Tier::Pro, None);
            repo::licenses::install(
                &db,
                NewLicense { key, tier: Tier::Pro, licensee: "Test".into(), expires_at: None },
            )
            .await
            .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.mkv", "b.mkv", "c.mkv"] {
            clips::h264(dir.path(), name, "320x240", 1);
        }
        repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();
        let _runtime = start_runtime(&db, 2, 40, &public).await;
        let jobs = wait_terminal(&db, 3, Duration::from_secs(180)).await;
        assert!(jobs.iter().all(|j| j.status == JobStatus::Completed), "{tier:?}");
        let overlap = max_overlap(&db).await;
        match tier {
            Tier::Free => assert_eq!(overlap, 1, "FREE ran {overlap} jobs at once"),
            _ => assert_eq!(overlap, 2, "PRO with MAX_JOBS=2 ran {overlap} jobs at once"),
        }
        test_db.finish().await;
    }
}

/// A transcoder that finds its job's partial output locked (another writer still on it)
/// sends the job back to the queue: no retry used, no failure recorded, the folder left
/// alone. Once the lock is free the job completes.
#[actix_web::test]
async fn a_busy_start_goes_back_to_the_queue_without_using_a_retry() {
    let test_db = crate::common::db::TestDb::sqlite().await;
    let db = test_db.db.clone();
    let dir = tempfile::tempdir().unwrap();
    let source = clips::h264(dir.path(), "a.mkv", "160x120", 1);
    let partial = condense::media::layout::partial_dir_for(&source);
    // The other writer: this test's own open file description on the folder's lock.
    let held = condense::media::partial::lock(&partial).unwrap().unwrap();
    std::fs::write(partial.join("seg-00000.seg"), b"another writer's segment").unwrap();
    repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();
    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;

    let deadline = Instant::now() + Duration::from_secs(90);
    let job = loop {
        let jobs = all_jobs(&db).await;
        if let Some(job) = jobs.first() {
            if event_kinds(&db, job.id).await.iter().any(|k| k == "busy") {
                break repo::jobs::get(&db, job.id).await.unwrap();
            }
            assert!(
                !matches!(JobStatus::from(job.status), JobStatus::Completed | JobStatus::Failed),
                "ran past the lock: {job:?}"
            );
        }
        assert!(Instant::now() < deadline, "no busy start: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(job.retry_count, 0, "{job:?}");
    assert_eq!(job.failure_code, None, "{job:?}");
    assert_eq!(
        std::fs::read(partial.join("seg-00000.seg")).unwrap(),
        b"another writer's segment",
        "the busy start touched the other writer's folder"
    );
    let events = repo::events::list(&db, job.id).await.unwrap();
    let busy = events.iter().find(|e| e.kind == "busy").unwrap();
    // Found by the supervisor before recovery (ANALYZING) or by its transcoder (ENCODING).
    assert!(busy.from_status.is_some_and(|s| JobStatus::from(s).is_running()), "{busy:?}");
    assert_eq!(busy.to_status, Some(JobStatus::Queued.into()));

    // While the lock stays held, the job is not started again every scheduling round: it
    // waits in the queue, longer each time (`domain::job::busy_hold`: 5 s, then 10 s…).
    let deadline = Instant::now() + Duration::from_secs(90);
    let events = loop {
        let events = repo::events::list(&db, job.id).await.unwrap();
        if events.iter().filter(|e| e.kind == "busy").count() >= 2 {
            break events;
        }
        assert!(Instant::now() < deadline, "no second busy start: {events:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let first_busy = events.iter().position(|e| e.kind == "busy").unwrap();
    let restart = events[first_busy..].iter().find(|e| e.kind == "started").unwrap();
    let waited = restart.at - events[first_busy].at;
    assert!(waited >= chrono::Duration::milliseconds(4990), "started again {waited} after a busy start");

    drop(held);
    let jobs = wait_terminal(&db, 1, Duration::from_secs(120)).await;
    assert_eq!(jobs[0].status, JobStatus::Completed, "{:?}", jobs[0].failure_detail);
    assert_eq!(jobs[0].retry_count, 0);
    // The folder goes right after the job's completion is recorded.
    let deadline = Instant::now() + Duration::from_secs(20);
    while partial.exists() {
        let left: Vec<_> =
            std::fs::read_dir(&partial).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
        assert!(Instant::now() < deadline, "partial output left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    test_db.finish().await;
}

/// A job left ENCODING with an expired lease and no supervisor holding it (one that died
/// on a database error) is swept back to the queue.
#[actix_web::test]
async fn an_expired_lease_nobody_holds_is_swept_back_to_the_queue() {
    use sea_orm::{ActiveModelTrait, Set};
    let test_db = crate::common::db::TestDb::sqlite().await;
    let db = test_db.db.clone();
    let dir = tempfile::tempdir().unwrap();
    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let node = repo::nodes::list(&db).await.unwrap().into_iter().find(|n| n.name == "main").unwrap();
    let path = dir.path().join("gone.mkv");
    let job = repo::jobs::insert(&db, job_of_no_library(&path, JobStatus::Encoding)).await.unwrap();
    let expired = chrono::Utc::now() - chrono::Duration::seconds(300);
    job::ActiveModel {
        id: Set(job.id),
        node_id: Set(Some(node.id)),
        node_name: Set(Some("main".into())),
        lease_id: Set(Some("a lease whose supervisor died".into())),
        lease_expires_at: Set(Some(expired)),
        ..Default::default()
    }
    .update(&db)
    .await
    .unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = repo::events::list(&db, job.id).await.unwrap();
        if let Some(swept) = events.iter().find(|e| e.kind == "orphaned") {
            assert_eq!(swept.to_status, Some(JobStatus::Queued.into()));
            break;
        }
        assert!(Instant::now() < deadline, "the job was not swept: {events:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    test_db.finish().await;
}

/// A paused job's transcoder that does not stop (here: stopped with SIGSTOP, so it never
/// handles its SIGTERM) is killed after a bound; the job is PAUSED only once it has gone,
/// its lease held until then.
#[actix_web::test]
async fn a_paused_transcoder_that_ignores_sigterm_is_killed_and_the_job_pauses() {
    use condense::actors::scheduler::{Action, JobAction};
    let test_db = crate::common::db::TestDb::sqlite().await;
    let db = test_db.db.clone();
    let dir = tempfile::tempdir().unwrap();
    clips::h264(dir.path(), "a.mkv", "160x120", 4);
    repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();
    let runtime = start_runtime(&db, 1, 100, condense::license::BUILTIN_PUBLIC_KEY).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let (job, pid) = loop {
        let jobs = all_jobs(&db).await;
        let pids = own_children(b"transcode");
        // The manifest is written after the child set up its SIGTERM handler (a signal
        // before that would simply end it).
        if let (Some(job), [pid]) = (jobs.first(), pids.as_slice()) {
            let manifest = condense::media::layout::partial_dir_for(Path::new(&job.file_path)).join("manifest.json");
            if job.status == JobStatus::Encoding && manifest.exists() {
                break (job.clone(), *pid);
            }
        }
        assert!(Instant::now() < deadline, "no transcoder started: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // SAFETY: a child of this test process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let _ = runtime.scheduler.send(JobAction { job_id: job.id, action: Action::Pause }).await.unwrap();
    // The lease is held while the stuck child lives.
    let now = repo::jobs::get(&db, job.id).await.unwrap();
    if own_children(b"transcode").contains(&pid) {
        assert_eq!(now.status, JobStatus::Encoding, "paused while its transcoder still lives");
        assert_eq!(now.lease_id, job.lease_id);
    }
    let deadline = Instant::now() + condense::actors::job::STOP_BOUND + Duration::from_secs(30);
    loop {
        let now = repo::jobs::get(&db, job.id).await.unwrap();
        let alive = own_children(b"transcode").contains(&pid);
        if now.status == JobStatus::Paused {
            assert!(!alive, "PAUSED while its transcoder {pid} still lives");
            assert_eq!(now.lease_id, None);
            break;
        }
        assert!(Instant::now() < deadline, "the job did not pause: {now:?}, transcoder alive: {alive}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    test_db.finish().await;
}

// ---------------------------------------------------------------- rescans

/// A rescan leaves a completed file alone (the file condense wrote is the one its job
/// recorded) and queues it again once the user replaced it with other content, which is
/// then encoded like any new file.
#[actix_web::test]
async fn a_rescan_requeues_a_completed_file_only_after_the_user_replaced_it() {
    use condense::actors::library::ScanLibrary;
    let test_db = crate::common::db::TestDb::sqlite().await;
    let db = test_db.db.clone();
    let dir = tempfile::tempdir().unwrap();
    let path = clips::h264(dir.path(), "a.mkv", "160x120", 1);
    let library = repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();
    let runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let job = wait_terminal(&db, 1, Duration::from_secs(120)).await.remove(0);
    assert_eq!(job.status, JobStatus::Completed, "{:?}", job.failure_detail);
    let history = event_kinds(&db, job.id).await;
    let scan = || async { runtime.libraries.send(ScanLibrary(library.id)).await.unwrap().unwrap() };

    let report = scan().await;
    assert_eq!((report.found, report.queued), (1, 0), "the output condense wrote is not a change");
    // (The listed job carries no probe; see `repo::jobs::list`.)
    assert_eq!(job::Model { probe: None, ..repo::jobs::get(&db, job.id).await.unwrap() }, job);
    assert_eq!(event_kinds(&db, job.id).await, history);

    // A new download, renamed into place as downloaders do.
    let staging = dir.path().join(".incoming");
    std::fs::create_dir(&staging).unwrap();
    let download = clips::h264(&staging, "a.mkv", "320x240", 1);
    let download_size = std::fs::metadata(&download).unwrap().len() as i64;
    std::fs::rename(&download, &path).unwrap();
    let report = scan().await;
    assert_eq!(report.queued, 1);
    let events = repo::events::list(&db, job.id).await.unwrap();
    let changed = events.iter().find(|e| e.kind == "source changed").expect("a source changed event");
    assert!(changed.from_status.is_some_and(|s| s == JobStatus::Completed));
    assert!(changed.to_status.is_some_and(|s| s == JobStatus::Queued));
    assert_eq!(changed.detail.as_ref().unwrap()["previousSize"], job.output_size.unwrap());
    assert_eq!(changed.detail.as_ref().unwrap()["size"], download_size);

    let again = wait_terminal(&db, 1, Duration::from_secs(120)).await.remove(0);
    assert_eq!(again.id, job.id);
    assert_eq!(again.status, JobStatus::Completed, "{:?}", again.failure_detail);
    assert_eq!(again.source_size, download_size);
    let info = probe(&path).unwrap();
    let video = info.video().unwrap();
    assert_eq!((video.codec.as_str(), video.width), ("hevc", Some(320)));
    let kinds = event_kinds(&db, job.id).await;
    assert_eq!(kinds.iter().filter(|k| *k == "completed").count(), 2, "{kinds:?}");
    assert_eq!(scan().await.queued, 0, "the second output is not a change either");
}

both_backends!(
    a_rescan_requeues_ended_jobs_whose_file_changed_and_leaves_the_others,
    |db: DatabaseConnection| async move {
        use condense::actors::library::scan;
        use sea_orm::{ActiveModelTrait, Set};
        let dir = tempfile::tempdir().unwrap();
        let names = ["skipped.mkv", "failed.mkv", "cancelled.mkv", "touched.mkv", "encoding.mkv", "unchanged.mkv"];
        for name in names {
            std::fs::write(dir.path().join(name), vec![7u8; 1000]).unwrap();
        }
        let library = repo::libraries::create(&db, library(dir.path(), false)).await.unwrap();
        let (report, _) = scan(&db, library.id, Duration::ZERO).await.unwrap();
        assert_eq!(report.queued, 6);
        let ids: std::collections::HashMap<String, i32> =
            all_jobs(&db).await.into_iter().map(|j| (j.file_name.clone(), j.id)).collect();
        let set_status = |name: &'static str, status: JobStatus| {
            let (db, id) = (db.clone(), ids[name]);
            async move {
                job::ActiveModel {
                    id: Set(id),
                    status: Set(status.into()),
                    retry_count: Set(3),
                    forced: Set(true),
                    failure_code: Set(Some(FailureCode::FileValidationFailed.into())),
                    failure_reason: Set(Some("file validation failed".into())),
                    ..Default::default()
                }
                .update(&db)
                .await
                .unwrap();
            }
        };
        set_status("skipped.mkv", JobStatus::Skipped).await;
        set_status("failed.mkv", JobStatus::Failed).await;
        set_status("cancelled.mkv", JobStatus::Cancelled).await;
        set_status("touched.mkv", JobStatus::Skipped).await;
        set_status("encoding.mkv", JobStatus::Encoding).await;
        set_status("unchanged.mkv", JobStatus::Skipped).await;
        for name in ["skipped.mkv", "failed.mkv", "cancelled.mkv", "encoding.mkv"] {
            std::fs::write(dir.path().join(name), vec![8u8; 2000]).unwrap();
        }
        // Same size, another modification time.
        let touched = std::fs::File::options().write(true).open(dir.path().join("touched.mkv")).unwrap();
        touched.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600)).unwrap();

        let (report, deferred) = scan(&db, library.id, Duration::ZERO).await.unwrap();
        assert_eq!((report.found, report.queued, report.removed), (6, 4, 0));
        assert!(deferred.is_empty());
        for name in ["skipped.mkv", "failed.mkv", "cancelled.mkv", "touched.mkv"] {
            let job = repo::jobs::get(&db, ids[name]).await.unwrap();
            assert_eq!(job.status, JobStatus::Queued, "{name}");
            // A new file: fresh retries, no failure, not forced, analysed again.
            let failure = (job.failure_code, job.failure_reason.clone());
            assert_eq!((job.retry_count, job.forced, failure), (0, false, (None, None)), "{name}");
            let size = std::fs::metadata(dir.path().join(name)).unwrap().len() as i64;
            assert_eq!(job.source_size, size, "{name}");
            assert_eq!(event_kinds(&db, job.id).await.last().map(String::as_str), Some("source changed"), "{name}");
        }
        // A running job's file is its own business; an unchanged file is no news.
        assert_eq!(repo::jobs::get(&db, ids["encoding.mkv"]).await.unwrap().status, JobStatus::Encoding);
        assert_eq!(repo::jobs::get(&db, ids["unchanged.mkv"]).await.unwrap().status, JobStatus::Skipped);

        // What was queued again carries the new file's identity: the next rescan sees no change.
        for name in ["skipped.mkv", "failed.mkv", "cancelled.mkv", "touched.mkv"] {
            set_status(name, JobStatus::Skipped).await;
        }
        let (report, _) = scan(&db, library.id, Duration::ZERO).await.unwrap();
        assert_eq!(report.queued, 0);
    }
);

// Found by kill-linked: the offline check and the reconcile on the node's return each read
// the killed node's job as running; the later one orphaned the job's next attempt, so one
// kill counted as two crashes and the job failed before its replace was finished. A job
// is orphaned only under the lease it was read with.
both_backends!(a_job_orphaned_as_read_before_it_started_again_is_left_alone, |db: DatabaseConnection| async move {
    use actix::Actor;
    use condense::actors::bus::EventBus;
    use condense::actors::lifecycle::{EventContext, Lifecycle};
    use condense::domain::job::JobEvent;
    use condense::domain::node::NodeRole;
    use condense::repo::jobs::{Assignment, JobChange};
    let lifecycle = Lifecycle {
        db: db.clone(),
        bus: EventBus::default().start(),
        transfers: Default::default(),
        span_claims: Default::default(),
    };
    let facts =
        repo::nodes::NodeFacts { address: "10.0.0.2".into(), ..crate::common::rows::node("w1", NodeRole::Linked) };
    let node = repo::nodes::upsert(&db, facts).await.unwrap();
    let job = repo::jobs::insert(&db, job_of_no_library(Path::new("/nowhere/a.mkv"), JobStatus::Queued)).await.unwrap();
    let start = |lease: &str| JobChange {
        assignment: Some(Assignment {
            node_id: node.id,
            node_name: "w1".into(),
            lease_id: lease.into(),
            started_at: chrono::Utc::now(),
        }),
        ..Default::default()
    };
    let ctx = EventContext::default;
    lifecycle.apply(job.id, JobEvent::Start, start("first"), ctx()).await.unwrap();
    // Two readers see the first attempt running.
    let read_by_one = repo::jobs::get(&db, job.id).await.unwrap();
    let read_by_other = read_by_one.clone();
    assert!(lifecycle.orphan(&read_by_one, true, ctx()).await.unwrap());
    lifecycle.apply(job.id, JobEvent::Start, start("second"), ctx()).await.unwrap();
    assert!(!lifecycle.orphan(&read_by_other, true, ctx()).await.unwrap(), "the next attempt was orphaned");
    let now = repo::jobs::get(&db, job.id).await.unwrap();
    assert_eq!(JobStatus::from(now.status), JobStatus::Analyzing);
    assert_eq!((now.lease_id.as_deref(), now.crash_count), (Some("second"), 1));
});

// Issue 39, the main node restarted mid-transfer: at its start the main node gives its own
// running jobs back to the queue, and leaves those of linked nodes to them, unless their
// output already lay beside the source (a commit cut short); after the grace, the jobs of
// a node that did not link again go back too, those of one that did are left to its
// heartbeats.
both_backends!(
    a_main_node_starting_leaves_linked_nodes_their_jobs_until_the_grace_ends,
    |db: DatabaseConnection| async move {
        use actix::Actor;
        use condense::actors::bus::EventBus;
        use condense::actors::lifecycle::{EventContext, Lifecycle};
        use condense::domain::job::JobEvent;
        use condense::domain::node::{NodeRole, NodeStatus};
        use condense::media::transfer::{finish_upload, hex, Upload};
        use condense::repo::jobs::{Assignment, JobChange};
        use sha2::Digest;
        let lifecycle = Lifecycle {
            db: db.clone(),
            bus: EventBus::default().start(),
            transfers: Default::default(),
            span_claims: Default::default(),
        };
        let main = repo::nodes::upsert(&db, crate::common::rows::node("main", NodeRole::Main)).await.unwrap();
        let w1 = repo::nodes::upsert(&db, crate::common::rows::node("w1", NodeRole::Linked)).await.unwrap();
        let w2 = repo::nodes::upsert(&db, crate::common::rows::node("w2", NodeRole::Linked)).await.unwrap();
        // A source whose upload the main node had finished (named `output.mkv`) when it stopped.
        let dir = tempfile::tempdir().unwrap();
        let committing = dir.path().canonicalize().unwrap().join("c.mkv");
        std::fs::write(&committing, b"source").unwrap();
        let mut upload = Upload::open(&committing).unwrap();
        upload.append(b"output").unwrap();
        upload.sync().unwrap();
        drop(upload);
        drop(finish_upload(&committing, 6, &hex(&sha2::Sha256::digest(b"output")), "mkv").unwrap());
        let running = |path: &Path, node: &entities::node::Model| {
            let (path, node_id, name) = (path.to_path_buf(), node.id, node.name.clone());
            let (db, lifecycle) = (db.clone(), lifecycle.clone());
            async move {
                let job = repo::jobs::insert(&db, job_of_no_library(&path, JobStatus::Queued)).await.unwrap();
                let assignment = Assignment {
                    node_id,
                    node_name: name,
                    lease_id: format!("lease-{}", job.id),
                    started_at: chrono::Utc::now(),
                };
                let start = JobChange { assignment: Some(assignment), ..Default::default() };
                lifecycle.apply(job.id, JobEvent::Start, start, EventContext::default()).await.unwrap();
                job.id
            }
        };
        let own = running(Path::new("/nowhere/own.mkv"), &main).await;
        let on_w1 = running(Path::new("/nowhere/w1.mkv"), &w1).await;
        let committed = running(&committing, &w1).await;
        let on_w2 = running(Path::new("/nowhere/w2.mkv"), &w2).await;
        let status = |id: i32| {
            let db = db.clone();
            async move {
                let job = repo::jobs::get(&db, id).await.unwrap();
                (JobStatus::from(job.status), job.crash_count)
            }
        };

        condense::actors::cluster::mark_linked_nodes_offline(&db).await;
        let kept = condense::actors::recover_orphans(&lifecycle, true, main.id).await.unwrap();
        let mut kept_ids: Vec<i32> = kept.iter().map(|j| j.id).collect();
        kept_ids.sort();
        assert_eq!(kept_ids, [on_w1, on_w2]);
        assert_eq!(status(own).await, (JobStatus::Queued, 1));
        assert_eq!(status(committed).await, (JobStatus::Queued, 1));
        assert_eq!(status(on_w1).await, (JobStatus::Analyzing, 0));

        // w1 links again within the grace; w2 does not.
        repo::nodes::set_status(&db, w1.id, NodeStatus::Online, None).await.unwrap();
        condense::actors::cluster::requeue_unclaimed(lifecycle.clone(), kept, Duration::ZERO, true).await;
        assert_eq!(status(on_w1).await, (JobStatus::Analyzing, 0), "left to the node's heartbeats");
        assert_eq!(status(on_w2).await, (JobStatus::Queued, 1));
        let kinds = event_kinds(&db, on_w2).await;
        assert_eq!(kinds.last().map(String::as_str), Some("orphaned"), "{kinds:?}");
    }
);
