//! What each new file is, known right after the scan and without an encode slot: queued jobs
//! that never started and have no facts yet are probed in batches in a `condense-media`
//! child (the demuxer's facts: container, codecs, duration, HDR kind; nothing decoded), and
//! each batch's facts, skip decisions and transitions are written in one transaction
//! (`repo::jobs::record_probes`). A file already in the target codec is SKIPPED there; every
//! other job keeps waiting, its facts on record for the codec distribution and forecasts.
//! The full decode validation stays just before the encode (`job::prepare`), which also
//! analyses any job this probe could not (a crash or hang on its file, a job the scheduler
//! started first).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::bus::{JobUpdate, Publish};
use super::lifecycle::{event_kind, Lifecycle};
use crate::domain::job::{transition, JobEvent};
use crate::media::info::MediaInfo;
use crate::media::layout::partial_dir_for;
use crate::media::plan::{decide, Decision};
use crate::media::worker;
use crate::repo::events::NewEvent;
use crate::repo::jobs::{self, snapshot, JobChange, Probed};
use crate::repo::RepoError;

/// Files per child and per transaction: a child's start (about 20 ms) is spread over a
/// batch, and a batch's transaction holds SQLite's write lock for a few milliseconds only.
pub const BATCH: u64 = 250;

/// The columns a probe fills in, for this probe and for the attempt's own analysis.
pub fn facts_of(info: &MediaInfo) -> JobChange {
    JobChange {
        source_codec: info.video().map(|v| v.codec.clone()),
        source_size: Some(i64::try_from(info.size_bytes).unwrap_or(i64::MAX)),
        duration_seconds: info.duration_seconds,
        source_bitrate: info.bit_rate,
        hdr: Some(info.hdr.kind.as_str().to_string()),
        probe: serde_json::to_value(info).ok(),
        ..Default::default()
    }
}

/// The probe's work on one node (the main node): woken after every scan that took files in.
#[derive(Clone)]
pub struct Prober {
    wake: Arc<Notify>,
}

impl Prober {
    /// Starts the probe loop; `binary` is `condense-media`, `per_file` how long a child may
    /// take over one file before it is killed.
    pub fn start(lifecycle: Lifecycle, binary: PathBuf, per_file: Duration) -> Prober {
        let wake = Arc::new(Notify::new());
        let woken = wake.clone();
        actix::spawn(async move {
            let mut unreadable = HashSet::new();
            loop {
                // A wake while a pass runs is kept (one permit) and starts the next pass.
                woken.notified().await;
                match drain(&lifecycle, &binary, per_file, &mut unreadable).await {
                    Ok(0) => {}
                    Ok(skipped) => tracing::info!(skipped, "files already in their target codec: skipped"),
                    Err(e) => tracing::warn!(error = %e, "the probe after the scan stopped"),
                }
            }
        });
        // Jobs a stop left unprobed are taken up at start.
        wake.notify_one();
        Prober { wake }
    }

    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

/// Probes every queued job that never started and has no facts, a batch at a time; answers
/// how many were skipped. `unreadable` holds the jobs whose file this process could not
/// probe (missing, refused, a child's hang): they are not tried again on every pass, and
/// wait for their attempt, which says why.
pub async fn drain(
    lifecycle: &Lifecycle,
    binary: &Path,
    per_file: Duration,
    unreadable: &mut HashSet<i32>,
) -> Result<u64, RepoError> {
    let (mut after, mut skipped) = (0, 0);
    loop {
        let batch = jobs::never_probed(&lifecycle.db, after, BATCH).await?;
        let Some(last) = batch.last() else { return Ok(skipped) };
        after = last.id;
        // A file that is not there (yet, or any more) costs no child. (Looked at on a
        // blocking thread: a library on a network share answers slowly.)
        let batch: Vec<_> = batch.into_iter().filter(|job| !unreadable.contains(&job.id)).collect();
        let batch = tokio::task::spawn_blocking(move || {
            batch.into_iter().filter(|job| jobs::source_path(job).is_file()).collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        if batch.is_empty() {
            continue;
        }
        let paths: Vec<PathBuf> = batch.iter().map(jobs::source_path).collect();
        let results = worker::probe_batch(binary, &paths, per_file).await;
        let (probed, failed) = tokio::task::spawn_blocking(move || {
            let (mut probed, mut failed) = (Vec::with_capacity(batch.len()), Vec::new());
            for (job, result) in batch.iter().zip(results) {
                match result {
                    Some(Ok(info)) => probed.push(decided(job, &info)),
                    Some(Err(_)) | None => failed.push(job.id),
                }
            }
            (probed, failed)
        })
        .await
        .unwrap_or_default();
        unreadable.extend(failed);
        let moved = jobs::record_probes(&lifecycle.db, probed).await?;
        skipped += moved.len() as u64;
        for job in &moved {
            lifecycle.bus.do_send(Publish(JobUpdate::of("status", job)));
        }
    }
}

/// The facts of one job's file and, when it needs no encode, its skip.
fn decided(job: &entities::job::Model, info: &MediaInfo) -> Probed {
    let mut change = facts_of(info);
    let reason = match decide(info, &job.target_codec, job.forced) {
        Ok(Decision::Skip { reason }) => Some(reason),
        // What cannot be encoded faithfully is failed by the attempt, with its reason.
        Ok(Decision::Encode) | Err(_) => None,
    };
    // The skip removes a partial output; one left by some earlier job at this path is the
    // attempt's business (it removes it under the folder's lock).
    // A link at that name counts too (never followed): the attempt refuses it with its reason.
    let clean = || std::fs::symlink_metadata(partial_dir_for(&jobs::source_path(job))).is_err();
    let skip = reason.filter(|_| clean()).and_then(|reason| {
        let event = JobEvent::SkipProbed;
        let outcome = transition(&snapshot(job), &event).ok()?;
        let record = NewEvent::new(event_kind(&event, &outcome)).with_detail(serde_json::json!({ "reason": reason }));
        change.skip_reason = Some(reason);
        Some((outcome, record))
    });
    Probed { id: job.id, change, skip }
}
