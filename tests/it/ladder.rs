//! The retry ladder end to end on a real node: a CPU encoder's first two attempts fail (a
//! read error injected into the transcoder by the EIO shim), and the retries run what their
//! rungs say: a faster preset, then 8-bit 4:2:0 with the cautious options. The job's history
//! names each rung and what it changed; ffprobe reads the output the last rung wrote.

use std::path::Path;
use std::time::{Duration, Instant};

use condense::domain::job::JobStatus;
use condense::repo;
use condense::repo::libraries::NewLibrary;

use crate::common::cluster::media_dir;
use crate::common::media as clips;
use crate::common::runtime::library;
use crate::common::server::{command, migrated, ServerProcess};
use crate::common::shim;

/// The first video stream's codec and pixel format, as the ffprobe program reads them.
fn codec_and_pix_fmt(path: &Path) -> (String, String) {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,pix_fmt"])
        .args(["-of", "default=noprint_wrappers=1"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).unwrap_or_default().trim().to_string()
    };
    (field("codec_name"), field("pix_fmt"))
}

#[actix_web::test]
async fn a_cpu_encoders_retries_run_a_faster_preset_then_eight_bit_four_two_zero() {
    let (dir, media) = media_dir();
    // 10-bit 4:2:2 SDR: x265 would keep both as they are; only the cautious rung changes them.
    let source = std::fs::canonicalize(clips::h264_422_ten_bit(&media, "movie.mkv", 4)).unwrap();
    assert_eq!(codec_and_pix_fmt(&source), ("h264".to_string(), "yuv422p10le".to_string()));
    let db = migrated(&dir.path().join("data")).await;
    // One step faster than superfast is ultrafast (x265 lists its presets fastest first).
    let films = NewLibrary { preset: "superfast".into(), ..library(&media, false) };
    repo::libraries::create(&db, films).await.unwrap();

    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let mut cmd = command(&dir.path().join("data"));
    // Two transcoders fail reading the source at 70 %; the third reads it whole.
    cmd.env("SEGMENT_SECONDS", "1").env("PARALLEL_SEGMENTS", "off").envs(shim::eio_env_times(
        &source,
        Some(70),
        &markers,
        2,
    ));
    let mut server = ServerProcess::start(cmd);

    let deadline = Instant::now() + Duration::from_secs(240);
    let job = loop {
        let job = repo::jobs::find_by_path(&db, source.to_str().unwrap()).await.unwrap();
        if let Some(job) = job.filter(|j| JobStatus::from(j.status).is_terminal()) {
            break job;
        }
        assert!(Instant::now() < deadline, "the job did not end:\n{:#?}", server.output());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let history = repo::events::list(&db, job.id).await.unwrap();
    let kinds: Vec<&str> = history.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(JobStatus::from(job.status), JobStatus::Completed, "{:?} {kinds:?}", job.failure_detail);
    assert_eq!(std::fs::read_dir(&markers).unwrap().count(), 2, "the shim did not fail two attempts");
    assert_eq!(job.retry_count, 2, "{kinds:?}");

    // One `encoding` event per attempt, each naming its rung and what it changed.
    let rungs: Vec<serde_json::Value> =
        history.iter().filter(|e| e.kind == "encoding").map(|e| e.detail.clone().unwrap_or_default()).collect();
    assert_eq!(rungs.len(), 3, "{kinds:?}");
    let said = |rung: &serde_json::Value| {
        (
            rung["rung"].as_u64(),
            rung["retryProfile"].as_str().map(str::to_string),
            rung["preset"].as_str().map(str::to_string),
            rung["tenBitAllowed"].as_bool(),
            rung["cautious"].as_bool(),
        )
    };
    let s = |v: &str| Some(v.to_string());
    assert_eq!(said(&rungs[0]), (Some(0), s("as_configured"), s("superfast"), Some(true), Some(false)));
    assert_eq!(said(&rungs[1]), (Some(1), s("software_decode"), s("ultrafast"), Some(true), Some(false)));
    assert_eq!(said(&rungs[2]), (Some(2), s("cpu_encoder"), s("ultrafast"), Some(false), Some(true)));
    let changes = |rung: &serde_json::Value| -> Vec<String> {
        rung["changes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect()
    };
    assert!(changes(&rungs[0]).is_empty(), "{:?}", rungs[0]);
    assert_eq!(changes(&rungs[1]), ["preset ultrafast instead of superfast", "one session"]);
    assert_eq!(
        changes(&rungs[2]),
        ["preset ultrafast instead of superfast", "8-bit output", "4:2:0 chroma", "no hdr10-opt", "one session"]
    );
    // The attempts before the cautious rung ran and failed; the retries say so.
    assert_eq!(kinds.iter().filter(|k| **k == "retrying").count(), 2, "{kinds:?}");

    // The node planned each retry's encode with its rung's preset: the plan the transcoder got.
    let planned = |rung: &str, preset: &str| {
        server.output().iter().any(|l| l.contains("planned the encode") && l.contains(rung) && l.contains(preset))
    };
    assert!(planned("software_decode", "ultrafast"), "{:#?}", server.output());
    assert!(planned("cpu_encoder", "ultrafast"), "{:#?}", server.output());

    // What the cautious rung wrote replaced the source: HEVC, 8-bit 4:2:0.
    assert_eq!(codec_and_pix_fmt(&source), ("hevc".to_string(), "yuv420p".to_string()));
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}
