//! Hostile media: playlists and scripts disguised as videos (an HLS playlist or an ffconcat
//! script named `.mkv`) name other files, which FFmpeg's demuxers for them would open and
//! pull into an output. They are refused by their format, in validation and by the
//! service, and the files they name are never opened (inotify sees every open, by any
//! process, of the watched file).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use condense::domain::job::{FailureCode, JobStatus};
use condense_media::verify::validate_source;
use notify::{EventKind, RecursiveMode, Watcher};

use serde_json::json;

use crate::common::cluster::{add_library, call, login, main_command, media_dir, wait_all_done};
use crate::common::media as clips;
use crate::common::runtime::{library, start_runtime, wait_terminal};
use crate::common::server::ServerProcess;

/// Reports every open of one file, by any process.
struct OpenWatch {
    _watcher: notify::RecommendedWatcher,
    events: mpsc::Receiver<notify::Result<notify::Event>>,
}

impl OpenWatch {
    fn new(target: &Path) -> OpenWatch {
        let (tx, events) = mpsc::channel();
        let mut watcher = notify::recommended_watcher(tx).unwrap();
        watcher.watch(target, RecursiveMode::NonRecursive).unwrap();
        let watch = OpenWatch { _watcher: watcher, events };
        // The watch must see an open, or its silence later proves nothing.
        drop(std::fs::File::open(target).unwrap());
        assert!(watch.wait_open(Duration::from_secs(5)), "the watch on {} sees no open", target.display());
        watch
    }

    fn wait_open(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.events.recv_timeout(left) {
                Ok(Ok(event)) if matches!(event.kind, EventKind::Access(_)) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// Opens seen since the last call, after letting late events arrive.
    fn opened(&self) -> bool {
        self.wait_open(Duration::from_millis(500))
    }
}

struct Hostile {
    _dir: tempfile::TempDir,
    library: PathBuf,
    hls: PathBuf,
    concat: PathBuf,
    /// The files the playlist and the script name.
    named: Vec<PathBuf>,
}

/// A library folder holding `hls.mkv` (an HLS playlist naming a transport stream outside
/// the library by its absolute path) and `concat.mkv` (an ffconcat script naming a
/// Matroska file beside it, under an extension the scanner does not register).
fn hostile_library() -> Hostile {
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("library");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&library).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let segment = outside.join("secret.ts");
    clips::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=25",
        "-t",
        "1",
        "-c:v",
        "libx264",
        "-f",
        "mpegts",
        segment.to_str().unwrap(),
    ]);
    let beside = clips::h264(&library, "beside.mkv", "160x120", 1);
    let named_beside = library.join("beside.dat");
    std::fs::rename(&beside, &named_beside).unwrap();
    let hls = library.join("hls.mkv");
    std::fs::write(
        &hls,
        format!(
            "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:1.0,\n{}\n#EXT-X-ENDLIST\n",
            segment.display()
        ),
    )
    .unwrap();
    let concat = library.join("concat.mkv");
    std::fs::write(&concat, "ffconcat version 1.0\nfile beside.dat\n").unwrap();
    Hostile { _dir: dir, library, hls, concat, named: vec![segment, named_beside] }
}

#[test]
fn a_playlist_or_a_concat_script_named_mkv_fails_validation_without_opening_what_it_names() {
    let hostile = hostile_library();
    let watches: Vec<OpenWatch> = hostile.named.iter().map(|p| OpenWatch::new(p)).collect();
    for (path, format) in [(&hostile.hls, "hls"), (&hostile.concat, "concat")] {
        let err = validate_source(path, true).expect_err(format);
        assert_eq!(err.code, FailureCode::UnsupportedContainer, "{format}: {err}");
        assert!(err.message.contains(&format!("the format is {format}")), "{err}");
        for (watch, named) in watches.iter().zip(&hostile.named) {
            assert!(!watch.opened(), "validating {format} opened {}", named.display());
        }
    }
}

#[test]
fn every_allowed_container_still_validates() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a.mkv", "a.webm", "a.mp4", "a.mov", "a.avi", "a.mpg", "a.ts", "a.flv", "a.wmv"] {
        let path = dir.path().join(name);
        clips::ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "1", path.to_str().unwrap()]);
        validate_source(&path, true).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[actix_web::test]
async fn the_service_fails_hostile_files_with_the_reason_and_never_opens_what_they_name() {
    let hostile = hostile_library();
    let watches: Vec<OpenWatch> = hostile.named.iter().map(|p| OpenWatch::new(p)).collect();
    let test_db = crate::common::db::TestDb::sqlite().await;
    let db = test_db.db.clone();
    condense::repo::libraries::create(&db, library(&hostile.library, false)).await.unwrap();
    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let jobs = wait_terminal(&db, 2, Duration::from_secs(120)).await;
    for job in &jobs {
        let format = if Path::new(&job.file_path) == hostile.hls { "hls" } else { "concat" };
        assert_eq!(job.status, JobStatus::Failed, "{}: {:?}", job.file_name, job.failure_detail);
        assert_eq!(job.failure_code, Some(FailureCode::UnsupportedContainer.into()), "{}", job.file_name);
        assert_eq!(job.failure_reason.as_deref(), Some("unsupported container"));
        let detail = job.failure_detail.as_deref().unwrap_or_default();
        assert!(detail.contains(&format!("the format is {format}")), "{}: {detail}", job.file_name);
    }
    assert!(jobs.iter().any(|j| Path::new(&j.file_path) == hostile.concat));
    for (watch, named) in watches.iter().zip(&hostile.named) {
        assert!(!watch.opened(), "the service opened {}", named.display());
    }
    drop(_runtime);
    test_db.finish().await;
}

/// Issue 34, item 6: a 16k x 16k stream (16000x16000, FFmpeg's own frame limit keeps
/// 16384 from being written) is refused from its header, before any decoder allocates a
/// frame, with its size and the limit; the node stays up.
#[actix_web::test]
async fn a_frame_over_max_pixels_is_refused_at_analysis_with_its_size_and_the_limit() {
    let (dir, media) = media_dir();
    let huge = media.join("huge.mkv");
    // One flat frame: 1.5 MB on disk.
    let lavfi = "color=size=16000x16000:duration=0.04:rate=25";
    clips::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        lavfi,
        "-pix_fmt",
        "yuvj420p",
        "-c:v",
        "mjpeg",
        "-q:v",
        "31",
        huge.to_str().unwrap(),
    ]);
    // The child refuses it whatever its address space: nothing was decoded.
    let mut cmd = main_command(&dir.path().join("main"), 1, None);
    cmd.env("TRANSCODER_MEMORY_LIMIT_MB", "4096");
    let mut main = ServerProcess::start(cmd);
    let token = login(&main).await;
    add_library(&main, &token, &media).await;
    let done = wait_all_done(&main, &token, 1, 120).await;
    let job = &done[0];
    assert_eq!((&job["status"], &job["failureCode"]), (&json!("FAILED"), &json!("unsupported_stream")), "{job:#}");
    let detail = failure_messages(&main, &token, job).await;
    assert!(detail.contains("16000x16000") && detail.contains("67108864") && detail.contains("MAX_PIXELS"), "{job:#}");
    assert!(!detail.contains("out of memory"), "{job:#}");
    assert!(main.child.try_wait().unwrap().is_none(), "the node went down");
    assert!(main.signal_and_wait(libc::SIGTERM).success());
}

/// Issue 34, item 6: a child that outgrows its address space (TRANSCODER_MEMORY_LIMIT_MB,
/// set low here) fails its attempt as "out of memory"; the node stays up and serves on.
#[actix_web::test]
async fn a_child_over_its_memory_limit_fails_as_out_of_memory_and_the_node_stays_up() {
    let (dir, media) = media_dir();
    let source = clips::h264(&media, "movie.mkv", "1920x1080", 2);
    let before = std::fs::read(&source).unwrap();
    let mut cmd = main_command(&dir.path().join("main"), 1, None);
    cmd.env("TRANSCODER_MEMORY_LIMIT_MB", LOW_MEMORY_MB);
    let mut main = ServerProcess::start(cmd);
    let token = login(&main).await;
    add_library(&main, &token, &media).await;
    let done = wait_all_done(&main, &token, 1, 180).await;
    let job = &done[0];
    assert_eq!((&job["status"], &job["failureCode"]), (&json!("FAILED"), &json!("out_of_memory")), "{job:#}");
    assert_eq!(job["failureReason"], json!("out of memory"), "{job:#}");
    let detail = failure_messages(&main, &token, job).await;
    assert!(detail.contains("out of memory") && detail.contains(&format!("{LOW_MEMORY_MB} MiB")), "{job:#}");
    assert_eq!(std::fs::read(&source).unwrap(), before, "the source was touched");
    // The node is up and answers.
    assert!(main.child.try_wait().unwrap().is_none(), "the node went down");
    let (status, _) = call("GET", &format!("{}/api/nodes", main.api), Some(&token), None).await;
    assert_eq!(status, 200);
    assert!(main.signal_and_wait(libc::SIGTERM).success());
}

/// The failures' own words in the job's history.
async fn failure_messages(main: &ServerProcess, token: &str, job: &serde_json::Value) -> String {
    let (_, detail) = call("GET", &format!("{}/jobs/{}", main.api, job["id"]), Some(token), None).await;
    let events = detail["events"].as_array().cloned().unwrap_or_default();
    events.iter().filter_map(|e| e["detail"]["message"].as_str()).collect::<Vec<_>>().join("\n")
}

/// Enough address space for `condense-media` to start (its libraries mapped), too little for
/// a 1080p decoder's threads and frames: the transcoder runs out (a first attempt's
/// validation only probes). Its session threads used to hang there, in std's hook for a
/// refused allocation, and the job stayed ENCODING.
const LOW_MEMORY_MB: &str = "200";
