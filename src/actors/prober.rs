//! What each new file is, known right after the scan and without an encode slot: found files
//! (PENDING) are probed in batches in a `condense-media` child (the demuxer's facts:
//! container, codecs, duration, HDR kind; nothing decoded). A batch is ANALYZING while its
//! child runs (one statement, `repo::jobs::begin_probes`), and its facts, skip decisions and
//! transitions are written in one transaction (`repo::jobs::record_probes`). A file already
//! in the target codec, or one its library's filters rule out (issue 37), is SKIPPED there;
//! every other job goes to the queue, its facts on
//! record for the codec distribution and forecasts. The full decode validation stays just
//! before the encode (`job::prepare`), which also analyses any job this probe could not (a
//! crash or hang on its file, a file missing). A batch a stop interrupts is PENDING again at
//! the next start (`actors::recover_orphans`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actix::Recipient;
use tokio::sync::Notify;

use super::bus::{JobUpdate, Publish};
use super::lifecycle::{event_kind, Lifecycle};
use super::node::Wake;
use crate::domain::job::{transition, JobEvent, JobSnapshot, JobStatus};
use crate::domain::stream_rules::StreamRules;
use crate::media::info::MediaInfo;
use crate::media::layout::partial_dir_for;
use crate::media::plan::{decide, Decision};
use crate::media::stream_plan::filtered_out;
use crate::media::worker;
use crate::repo::events::NewEvent;
use crate::repo::jobs::{self, JobChange, Probed};
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
    /// take over one file before it is killed, `scheduler` told of each batch it queued.
    pub fn start(lifecycle: Lifecycle, binary: PathBuf, per_file: Duration, scheduler: Recipient<Wake>) -> Prober {
        let wake = Arc::new(Notify::new());
        let woken = wake.clone();
        actix::spawn(async move {
            loop {
                // A wake while a pass runs is kept (one permit) and starts the next pass.
                woken.notified().await;
                match drain(&lifecycle, &binary, per_file, &scheduler).await {
                    Ok(0) => {}
                    Ok(skipped) => tracing::info!(skipped, "files already in their target codec: skipped"),
                    Err(e) => tracing::warn!(error = %e, "the probe after the scan stopped"),
                }
            }
        });
        // Jobs a stop left unprobed (PENDING, or PENDING again) are taken up at start.
        wake.notify_one();
        Prober { wake }
    }

    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

/// Probes every found file (PENDING), a batch at a time; answers how many were skipped.
/// Each job leaves PENDING for good here: a file this process could not probe (missing,
/// refused, a child's hang) goes to the queue without facts, and its attempt says why.
pub async fn drain(
    lifecycle: &Lifecycle,
    binary: &Path,
    per_file: Duration,
    scheduler: &Recipient<Wake>,
) -> Result<u64, RepoError> {
    let (mut after, mut skipped) = (0, 0);
    loop {
        let batch = jobs::never_probed(&lifecycle.db, after, BATCH).await?;
        let Some(last) = batch.last() else { return Ok(skipped) };
        after = last.id;
        let ids: Vec<i32> = batch.iter().map(|job| job.id).collect();
        jobs::begin_probes(&lifecycle.db, &ids).await?;
        let recorded = probe_and_record(lifecycle, binary, per_file, batch).await;
        let moved = match recorded {
            Ok(moved) => moved,
            Err(e) => {
                // Not left ANALYZING with nobody probing it: found again, for the next pass.
                jobs::interrupt_probes(&lifecycle.db, Some(&ids)).await?;
                return Err(e);
            }
        };
        for job in &moved {
            if JobStatus::from(job.status) == JobStatus::Skipped {
                skipped += 1;
            }
            lifecycle.bus.do_send(Publish(JobUpdate::of("status", job)));
        }
        if !moved.is_empty() {
            scheduler.do_send(Wake);
        }
    }
}

/// One batch: its files probed in a child, its facts and decisions recorded.
async fn probe_and_record(
    lifecycle: &Lifecycle,
    binary: &Path,
    per_file: Duration,
    batch: Vec<entities::job::Model>,
) -> Result<Vec<entities::job::Model>, RepoError> {
    // A file that is not there (any more) costs no child. (Looked at on a blocking thread:
    // a library on a network share answers slowly.)
    let (present, mut probed) = tokio::task::spawn_blocking(move || {
        let (present, missing): (Vec<_>, Vec<_>) = batch.into_iter().partition(|job| jobs::source_path(job).is_file());
        (present, missing.into_iter().map(unknown).collect::<Vec<_>>())
    })
    .await
    .unwrap_or_default();
    if !present.is_empty() {
        // The libraries' filters, as they are now (the attempt reads them again).
        let filters: HashMap<i32, Filters> = crate::repo::libraries::list(&lifecycle.db)
            .await?
            .iter()
            .map(|l| (l.id, (crate::repo::libraries::rules_of(l), crate::repo::libraries::paths_of(l))))
            .filter(|(_, (rules, _))| !rules.is_default())
            .map(|(id, (rules, roots))| (id, (rules, roots.into_iter().map(PathBuf::from).collect())))
            .collect();
        let paths: Vec<PathBuf> = present.iter().map(jobs::source_path).collect();
        let results = worker::probe_batch(binary, &paths, per_file).await;
        let mut known = tokio::task::spawn_blocking(move || {
            present
                .iter()
                .zip(results)
                .map(|(job, result)| match result {
                    Some(Ok(info)) => {
                        let filters = job.library_id.and_then(|id| filters.get(&id));
                        decided(job, &info, filters)
                    }
                    Some(Err(_)) | None => unknown(job.clone()),
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        probed.append(&mut known);
    }
    jobs::record_probes(&lifecycle.db, probed).await
}

/// A job whose file the probe could not read: queued without facts.
fn unknown(job: entities::job::Model) -> Probed {
    Probed { id: job.id, change: JobChange::default(), skip: None }
}

/// A library's stream rules (not the defaults) and its folders.
type Filters = (StreamRules, Vec<PathBuf>);

/// The facts of one job's file and, when it needs no encode, its skip: the file is in its
/// target codec already, or its library's filters (`filters`) rule it out, the rule named
/// as the attempt would name it (`media::stream_plan::filtered_out`).
fn decided(job: &entities::job::Model, info: &MediaInfo, filters: Option<&Filters>) -> Probed {
    let mut change = facts_of(info);
    let reason = match decide(info, &job.target_codec, job.forced) {
        Ok(Decision::Skip { reason }) => Some(reason),
        // What cannot be encoded faithfully is failed by the attempt, with its reason.
        Ok(Decision::Encode) | Err(_) => None,
    };
    let reason = reason.or_else(|| {
        let (rules, roots) = filters.filter(|_| !job.forced)?;
        let path = jobs::source_path(job);
        let relative = roots.iter().find_map(|root| path.strip_prefix(root).ok())?;
        filtered_out(info, rules, relative)
    });
    // The skip removes a partial output; one left by some earlier job at this path is the
    // attempt's business (it removes it under the folder's lock).
    // A link at that name counts too (never followed): the attempt refuses it with its reason.
    let clean = || std::fs::symlink_metadata(partial_dir_for(&jobs::source_path(job))).is_err();
    let skip = reason.filter(|_| clean()).and_then(|reason| {
        let event = JobEvent::SkipProbed;
        // The job is in its batch probe now (`repo::jobs::begin_probes`).
        let probing = JobSnapshot { status: JobStatus::Analyzing, ..jobs::snapshot(job) };
        let outcome = transition(&probing, &event).ok()?;
        let record = NewEvent::new(event_kind(&event, &outcome)).with_detail(serde_json::json!({ "reason": reason }));
        change.skip_reason = Some(reason);
        Some((outcome, record))
    });
    Probed { id: job.id, change, skip }
}
