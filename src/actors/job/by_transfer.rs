//! A job this linked node takes by transfer (issue 39): it does not see the file's library,
//! so the attempt downloads the source over the node's link into the job's folder in
//! WORK_DIR (`WORK_DIR/<job id>/`), analyses and encodes that copy here as `prepare` and
//! `supervise` do (the partial output beside the copy, never in the library), uploads the
//! output (in parts while it encodes, `parts`) and asks the main node to finish it, then keeps the lease while the main node
//! verifies the output against the original and replaces it (`remote::commit_remote`),
//! until the job has ended there. The job's folder goes with the attempt, unless the
//! attempt left the job as it was (the node stops, or its link is down): then it stays for
//! the job to come back to this node (`actors::work_dir`). The client of
//! the transfers is `actors::transfer`; docs/ARCHITECTURE.md, "The cluster link", follows
//! a job through it.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::prepare::Prepared;
use super::supervise::{Encoded, Stop};
use super::{join_error, Attempt, JobCommand, Phase};
use crate::actors::lifecycle::LifecycleError;
use crate::actors::store::holds_lease;
use crate::actors::transfer::parts::Held;
use crate::actors::transfer::{
    keep_only, make_job_dir, remove_job_dir, reopen_copy, short_of_room_in, ClientError, Direction, Progress,
    TransferClient, TransferSetup, SOURCE_FILE, SOURCE_HASH_FILE,
};
use crate::domain::job::{FailureCode, JobEvent, Stage};
use crate::domain::placement::JobNeeds;
use crate::domain::transfer::{copy_name, full_while_downloading};
use crate::media::event::{PhaseTime, RunStats};
use crate::media::MediaError;
use crate::repo::jobs::JobChange;

/// How often a transfer's progress goes to the main node, and the job is looked at while
/// the main node commits the output.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// The source as this node downloaded it.
pub(super) struct Copy {
    /// The copy, `input.<ext>` in the job's folder (`domain::transfer::copy_name`).
    pub input: PathBuf,
    /// The SHA-256 the main node gave for it (and the download was checked against).
    pub sha256: String,
    /// The download's wall time, the job's first phase here.
    pub took: PhaseTime,
}

/// The job's folder in WORK_DIR, made ready for the download.
pub(super) struct Start {
    pub job: entities::job::Model,
    pub dir: PathBuf,
    /// The copy's name in it (`domain::transfer::copy_name`).
    pub copy: String,
    /// The SHA-256 of a copy an earlier attempt here left, which the download continues.
    pub kept: Option<String>,
    pub started: std::time::Instant,
}

/// How a transfer in the attempt ended.
pub(super) enum Moved<T> {
    Done(T),
    /// A command or a lost lease ended the attempt (its transition applied, if any).
    Stopped,
}

/// How the attempt's output reaches the main node.
pub(super) enum Delivery {
    /// In parts while it encodes; the main node muxes.
    Parts,
    /// Muxed here and uploaded whole once encoded.
    Whole,
    /// The main node commits it already (a finish of this lease taken before a restart).
    Committing,
}

impl Attempt {
    /// The attempt of a job taken by transfer, to its end; the job's folder in WORK_DIR is
    /// removed after it, unless the job is still this attempt's (the node stops, and the job
    /// is continued after its restart, as a local encode is) or the main node cannot say:
    /// what the folder holds is then kept for the job to come back here, and the node's
    /// next look at WORK_DIR decides (`actors::work_dir`).
    pub(super) async fn run_by_transfer(mut self) -> Result<(), LifecycleError> {
        let Some(setup) = self.env.transfer.clone() else {
            let e = MediaError::misc("this node takes no files by transfer (SHARED_STORAGE=required)");
            return self.fail(e).await;
        };
        let ended = self.by_transfer(&setup).await;
        match self.env.store.job(self.job_id).await {
            Ok(job) if !holds_lease(&job, &self.lease_id) => {}
            Ok(_) => {
                tracing::info!(job_id = self.job_id, "the job stays as it is; its folder in WORK_DIR is kept");
                return ended;
            }
            Err(e) => {
                tracing::info!(job_id = self.job_id, error = %e, "the job cannot be read; its folder in WORK_DIR is kept");
                return ended;
            }
        }
        let (work_dir, job_id) = (setup.work_dir.clone(), self.job_id);
        match tokio::task::spawn_blocking(move || remove_job_dir(&work_dir, job_id)).await {
            Ok(Ok(())) => tracing::debug!(job_id, "removed the job's folder in WORK_DIR"),
            Ok(Err(e)) => tracing::warn!(job_id, error = %e, "could not remove the job's folder in WORK_DIR"),
            Err(e) => tracing::warn!(job_id, error = %e, "could not remove the job's folder in WORK_DIR"),
        }
        ended
    }

    async fn by_transfer(&mut self, setup: &Arc<TransferSetup>) -> Result<(), LifecycleError> {
        let Some(client) = setup.client() else {
            let e = MediaError::misc("this node has no credential of the main node yet to fetch the file with");
            return self.fail(e).await;
        };
        let Some(start) = self.make_room(setup).await? else { return Ok(()) };
        let Some(delivery) = self.delivery(setup, &client, &start.job).await? else { return Ok(()) };
        if matches!(delivery, Delivery::Committing) {
            tracing::info!(job_id = self.job_id, "the main node commits this job's parts already");
            return self.await_commit().await;
        }
        // A fresh copy is read as it arrives, once its end is here (download ahead); a copy
        // kept from an earlier attempt here is checked whole first, as its segments may be
        // continued.
        if start.kept.is_none() && setup.ahead {
            match self.fetch_tail(&client, &start).await? {
                Moved::Done(Some(tail)) => return self.ahead(setup, &client, start, tail, delivery).await,
                Moved::Done(None) => {}
                Moved::Stopped => return Ok(()),
            }
        }
        let Some(copy) = self.download(setup, &client, start).await? else { return Ok(()) };
        let Some(mut prepared) = self.prepare(Some(copy.input.as_path()), None).await? else { return Ok(()) };
        let delivered = if matches!(delivery, Delivery::Parts) {
            let (shown, quiet) = (Cell::new(None), Cell::new(true));
            let Some(done) = self.encode_in_parts(&client, &mut prepared, None, &shown, &quiet).await? else {
                return Ok(());
            };
            self.finish_parts(&client, &copy, &prepared, done).await?
        } else {
            let Some(encoded) = self.supervise(&prepared, None).await? else { return Ok(()) };
            self.upload(&client, &copy, &prepared, encoded).await?
        };
        let Some(()) = delivered else { return Ok(()) };
        self.await_commit().await
    }

    /// How this attempt's output will reach the main node: asked of it before the encode
    /// (an older main node takes no parts).
    async fn delivery(
        &mut self,
        setup: &TransferSetup,
        client: &TransferClient,
        job: &entities::job::Model,
    ) -> Phase<Delivery> {
        if !setup.parts {
            return Ok(Some(Delivery::Whole));
        }
        let (id, lease) = (self.job_id, self.lease_id.clone());
        let asked = client.parts_held(id, &lease);
        let seen = Cell::new(None);
        let mut reported = job.clone();
        match self.follow(asked, &seen, &mut reported).await? {
            Moved::Done(Ok(Some(Held::Parts(_)))) => Ok(Some(Delivery::Parts)),
            Moved::Done(Ok(Some(Held::Committing))) => Ok(Some(Delivery::Committing)),
            Moved::Done(Ok(None)) => {
                tracing::info!(job_id = self.job_id, "the main node takes no parts; the output goes up whole");
                Ok(Some(Delivery::Whole))
            }
            Moved::Done(Err(e)) => self.fail(transfer_failed("asking the main node for the job's parts", e)).await,
            Moved::Stopped => Ok(None),
        }
    }

    /// The job's folder in WORK_DIR, what an earlier attempt left in it, and whether
    /// WORK_DIR has the room for the transfer.
    async fn make_room(&mut self, setup: &TransferSetup) -> Phase<Start> {
        let started = std::time::Instant::now();
        let job = self.env.store.job(self.job_id).await?;
        let (work_dir, job_id) = (setup.work_dir.clone(), self.job_id);
        let dir = match tokio::task::spawn_blocking(move || make_job_dir(&work_dir, job_id)).await {
            Ok(Ok(dir)) => dir,
            Ok(Err(e)) => return self.fail(MediaError::misc(e)).await,
            Err(e) => return self.fail(join_error(e)).await,
        };
        // A folder kept from an earlier attempt here (the node stopped or was killed, the job
        // came back, `actors::work_dir`): its completed copy is downloaded "again" from its
        // own bytes, checked whole against the main node's SHA-256, and its segments are
        // continued from only when that is the hash they were encoded from.
        let copy = copy_name(&crate::repo::jobs::source_path(&job));
        let (w, c) = (setup.work_dir.clone(), copy.clone());
        let kept = match tokio::task::spawn_blocking(move || reopen_copy(&w, job_id, &c)).await {
            Ok(Ok(kept)) => kept,
            Ok(Err(e)) => return self.fail(MediaError::from_io("reopening the job's folder in WORK_DIR", &e)).await,
            Err(e) => return self.fail(join_error(e)).await,
        };
        // The room: the source, the output expected and a tenth more, less what an earlier
        // download of this source left (it continues from there).
        let roots = Vec::new();
        let needs = JobNeeds {
            roots: &roots,
            source_bytes: u64::try_from(job.source_size).unwrap_or(0),
            output_bytes: job.predicted_size.and_then(|s| u64::try_from(s).ok()),
        };
        match short_of_room_in(&setup.work_dir, &dir, needs.work_dir_bytes()).await {
            Ok(None) => {}
            Ok(Some(why)) => return self.fail(MediaError::new(FailureCode::InsufficientDiskSpace, why)).await,
            Err(why) => return self.fail(MediaError::misc(why)).await,
        }
        Ok(Some(Start { job, dir, copy, kept, started }))
    }

    /// Downloads the source into the job's folder, whole, before anything reads it.
    async fn download(&mut self, setup: &TransferSetup, client: &TransferClient, start: Start) -> Phase<Copy> {
        let Start { job, dir, copy, kept, started } = start;
        let mut reported = job.clone();
        let lease = self.lease_id.clone();
        let seen = Rc::new(Cell::new(None));
        let on = seen.clone();
        let mut on_progress = move |p: Progress| on.set(Some(p));
        let fetched = client.download(self.job_id, &lease, &dir, &mut on_progress);
        let downloaded = match self.follow(fetched, &seen, &mut reported).await? {
            Moved::Done(Ok(downloaded)) => downloaded,
            Moved::Done(Err(ClientError::Full { what, error })) => {
                let why = full_work_dir(&setup.work_dir, &dir, &job, &format!("{what}: {error}")).await;
                return self.fail(MediaError::new(FailureCode::InsufficientDiskSpace, why)).await;
            }
            Moved::Done(Err(e)) => return self.fail(transfer_failed("the download of the source", e)).await,
            Moved::Stopped => return Ok(None),
        };
        if kept.as_deref() == Some(downloaded.sha256.as_str()) {
            tracing::info!(
                job_id = self.job_id,
                "the source kept in WORK_DIR is unchanged on the main node; continuing from it"
            );
        } else {
            // Another source than the one an earlier attempt here encoded (it changed on
            // the main node meanwhile), or none: nothing made from it is continued.
            if kept.is_some() {
                tracing::info!(
                    job_id = self.job_id,
                    "the source changed on the main node since this node's copy; what was encoded from it is discarded"
                );
            }
            let (w, job_id) = (setup.work_dir.clone(), self.job_id);
            match tokio::task::spawn_blocking(move || keep_only(&w, job_id, &[SOURCE_FILE, SOURCE_HASH_FILE])).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return self.fail(MediaError::from_io("emptying the job's folder in WORK_DIR", &e)).await,
                Err(e) => return self.fail(join_error(e)).await,
            }
        }
        // The copy keeps the original's extension: the output's container follows from it.
        let input = dir.join(&copy);
        let (from, to) = (downloaded.path.clone(), input.clone());
        match tokio::task::spawn_blocking(move || std::fs::rename(from, to)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return self.fail(MediaError::from_io("naming the downloaded source", &e)).await,
            Err(e) => return self.fail(join_error(e)).await,
        }
        tracing::info!(job_id = self.job_id, bytes = downloaded.size, "downloaded the source");
        // The download may end over HTTP before the link to a main node that restarted is
        // back; the encode needs the link (and the lease still this attempt's).
        let store = self.env.store.clone();
        let (job_id, patience) = (self.job_id, crate::actors::transfer::PATIENCE);
        let answered = async move {
            let since = std::time::Instant::now();
            loop {
                match store.job(job_id).await {
                    Err(e) if since.elapsed() < patience => {
                        tracing::debug!(job_id, error = %e, "waiting for the link to the main node");
                        tokio::time::sleep(REPORT_EVERY / 2).await;
                    }
                    answer => return answer,
                }
            }
        };
        match self.follow(answered, &Cell::new(None), &mut reported).await? {
            Moved::Done(Ok(now)) if holds_lease(&now, &self.lease_id) => {}
            Moved::Done(Ok(_)) => {
                tracing::warn!(job_id = self.job_id, "the job's lease was lost while the source downloaded");
                return Ok(None);
            }
            Moved::Done(Err(e)) => return Err(e),
            Moved::Stopped => return Ok(None),
        }
        // The encode's progress starts from nothing, not from the download's.
        self.update(JobChange { progress: Some(0.0), ..Default::default() }).await?;
        Ok(Some(Copy { input, sha256: downloaded.sha256, took: PhaseTime::since("download", started, 0) }))
    }

    /// Uploads the encoded output and finishes it on the main node. `Some` once the main node
    /// took it to commit; `None`: the attempt is over.
    pub(super) async fn upload(
        &mut self,
        client: &TransferClient,
        copy: &Copy,
        prepared: &Prepared,
        encoded: Encoded,
    ) -> Phase<()> {
        let Encoded { job, run_stats } = encoded;
        let output = prepared.plan.partial_dir.join(prepared.plan.output_file_name());
        let mut reported = job;
        reported.progress = 0.0;
        let lease = self.lease_id.clone();
        let seen = Rc::new(Cell::new(None));
        let on = seen.clone();
        let mut on_progress = move |p: Progress| on.set(Some(p));
        let extension = prepared.plan.output_extension.clone();
        // The node's phases in order, for the job's completion on the main node: the
        // download, the validation of the copy, the transcoder's (the upload adds its own).
        let run_stats = run_stats.map(|mut stats| {
            let mut phases = vec![copy.took.clone()];
            phases.extend(prepared.phases.iter().cloned());
            phases.append(&mut stats.phases);
            RunStats { phases, ..stats }
        });
        let sent = client.upload(self.job_id, &lease, &output, &extension, &copy.sha256, run_stats, &mut on_progress);
        match self.follow(sent, &seen, &mut reported).await? {
            Moved::Done(Ok(size)) => {
                tracing::info!(job_id = self.job_id, bytes = size, "uploaded the output; the main node commits it");
                Ok(Some(()))
            }
            Moved::Done(Err(ClientError::SourceChanged(message))) => {
                // Not the file's failure: the job goes back to the queue, to be encoded from
                // the version there now.
                let detail = serde_json::json!({ "reason": "the source changed on the main node", "message": message });
                self.stopped_by(Stop::Requeue(detail)).await
            }
            Moved::Done(Err(e)) => self.fail(transfer_failed("the upload of the output", e)).await,
            Moved::Stopped => Ok(None),
        }
    }

    /// Follows a transfer to its end: its progress goes to the main node each second (the
    /// job's stage TRANSFERRING, its percent), and a command stops it (pause, cancel and a
    /// closing window apply their transition; a shutdown or a lost lease leave the job as
    /// it is).
    pub(super) async fn follow<T>(
        &mut self,
        transfer: impl std::future::Future<Output = T>,
        seen: &Cell<Option<Progress>>,
        job: &mut entities::job::Model,
    ) -> Result<Moved<T>, LifecycleError> {
        tokio::pin!(transfer);
        let mut every = tokio::time::interval(REPORT_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tokio::select! {
                done = &mut transfer => return Ok(Moved::Done(done)),
                _ = every.tick() => {
                    let progress = seen.take();
                    if first || progress.is_some() {
                        first = false;
                        if let Err(e) = self.report(progress, job).await {
                            // A report that does not reach the main node (the link down, the
                            // main node restarting) is not the transfer's failure: its own
                            // requests carry the lease, and resume once the main node is back.
                            // Only a lease that is definitely another's now stops it.
                            match self.env.store.job(self.job_id).await {
                                Ok(now) if !holds_lease(&now, &self.lease_id) => {
                                    tracing::warn!(job_id = self.job_id, error = %e, "the job's lease was lost; stopping its transfer");
                                    return Ok(Moved::Stopped);
                                }
                                _ => tracing::debug!(job_id = self.job_id, error = %e, "the transfer's progress did not reach the main node"),
                            }
                        }
                    }
                }
                cmd = self.commands.recv() => {
                    let event = match cmd {
                        Some(JobCommand::Pause) => JobEvent::Pause,
                        Some(JobCommand::Yield) => JobEvent::Yield,
                        Some(JobCommand::Cancel) => JobEvent::Cancel,
                        Some(JobCommand::LeaseLost) => {
                            tracing::warn!(job_id = self.job_id, "the job's lease was lost; stopping its transfer");
                            return Ok(Moved::Stopped);
                        }
                        Some(JobCommand::Fence) => {
                            tracing::info!(job_id = self.job_id, "cut off from the main node; the transfer goes on under its lease");
                            continue;
                        }
                        Some(JobCommand::Shutdown) | None => return Ok(Moved::Stopped),
                    };
                    self.apply(event, JobChange::default(), self.ctx()).await?;
                    return Ok(Moved::Stopped);
                }
            }
        }
    }

    /// The job's stage TRANSFERRING and the percent of the bytes moved, on its row and in
    /// the live feed.
    async fn report(&self, progress: Option<Progress>, job: &mut entities::job::Model) -> Result<(), LifecycleError> {
        job.stage = Some(Stage::Transferring.into());
        if let Some(p) = &progress {
            job.progress = if p.total > 0 { (p.bytes as f64 * 100.0 / p.total as f64).min(100.0) } else { 100.0 };
            job.fps = 0.0;
            job.eta_seconds = (p.rate > 0.0).then(|| (p.total.saturating_sub(p.bytes) as f64 / p.rate) as i64);
            let direction = match p.direction {
                Direction::Download => "download",
                Direction::Upload => "upload",
            };
            tracing::debug!(job_id = job.id, direction, bytes = p.bytes, total = p.total, rate = p.rate, "transfer");
        }
        let patch = JobChange {
            stage: Some(Stage::Transferring),
            progress: Some(job.progress),
            fps: Some(job.fps),
            eta_seconds: job.eta_seconds,
            ..Default::default()
        };
        self.update(patch).await?;
        match progress {
            Some(p) => self.env.store.publish_transfer(job, p.into()),
            None => self.env.store.publish_progress(job),
        }
        Ok(())
    }

    /// Keeps the lease (the heartbeat renews it) while the main node verifies the output and
    /// replaces the original, until the job is no longer this attempt's: completed, failed,
    /// or taken from it. Commands are too late now, as during a local commit; a shutdown
    /// leaves the main node to finish alone.
    pub(super) async fn await_commit(&mut self) -> Result<(), LifecycleError> {
        let mut every = tokio::time::interval(REPORT_EVERY);
        loop {
            tokio::select! {
                _ = every.tick() => match self.env.store.job(self.job_id).await {
                    Ok(job) if !holds_lease(&job, &self.lease_id) => {
                        tracing::info!(job_id = self.job_id, status = ?job.status, "the main node ended the job");
                        return Ok(());
                    }
                    Ok(_) => {}
                    // The link may be down a while; the heartbeat says when the lease is lost.
                    Err(e) => tracing::debug!(job_id = self.job_id, error = %e, "the job could not be read"),
                },
                cmd = self.commands.recv() => match cmd {
                    Some(JobCommand::LeaseLost | JobCommand::Shutdown) | None => return Ok(()),
                    // Waiting changes nothing the main node could give another node.
                    Some(JobCommand::Fence) => {}
                    Some(JobCommand::Pause | JobCommand::Yield | JobCommand::Cancel) => {
                        tracing::info!(job_id = self.job_id, "the output is being committed; the command is too late");
                    }
                },
            }
        }
    }
}

/// The reason of a download that WORK_DIR's disk filled up under: how far it came, the room
/// it still needed and what is free now.
pub(super) async fn full_work_dir(work_dir: &Path, dir: &Path, job: &entities::job::Model, cause: &str) -> String {
    let (d, w) = (dir.join(SOURCE_FILE), work_dir.to_path_buf());
    let read = tokio::task::spawn_blocking(move || {
        let have = std::fs::metadata(d).map(|m| m.len()).unwrap_or(0);
        let free = crate::host::disk::space(&w).map(|s| s.free).unwrap_or(0);
        (have, free)
    })
    .await;
    let (have, free) = read.unwrap_or((0, 0));
    let total = u64::try_from(job.source_size).unwrap_or(0);
    full_while_downloading(&work_dir.display().to_string(), have, total, free, cause)
}

/// A transfer that failed, as the attempt's failure: the reason says which and why.
pub(super) fn transfer_failed(what: &str, e: ClientError) -> MediaError {
    MediaError::misc(format!("{what} failed: {e}"))
}
