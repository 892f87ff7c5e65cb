//! A job taken by transfer uploads its output while it encodes (issue 39, "upload while
//! encoding"): its run stops before the mux (`RunScope::Encode`), and beside the encode each
//! segment the run's manifest lists goes to the main node as a part (`PartsUpload`, run as
//! `supervise::Beside`), then the planned audio and a search's result once the encode is
//! done, then the finish with the manifest and the plan: the main node muxes the output from
//! the original, verifies it and replaces the original (`remote::commit_remote`). What is
//! left to send when the encode ends is its last segments, not the whole output. A main node
//! that takes no parts (an older release) gets the output muxed here and whole, as before.
//! The client is `actors::transfer::parts`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::by_transfer::{transfer_failed, Copy, Moved};
use super::prepare::Prepared;
use super::supervise::{Encoded, Stop};
use super::{join_error, Attempt, Phase};
use crate::actors::cluster::parts::PartsFinish;
use crate::actors::cluster::transfer::NodeRun;
use crate::actors::transfer::parts::Finished;
use crate::actors::transfer::{ClientError, Direction, Progress, TransferClient};
use crate::media::event::PhaseTime;
use crate::media::layout::{AUDIO_FILE, MANIFEST_FILE, SEARCH_FILE};
use crate::media::manifest::Manifest;
use crate::media::parts::Part;
use crate::media::plan::RunScope;
use crate::media::MediaError;

/// How often the manifest is looked at for segments to send while the encode runs.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How long a part that could not be sent while the encode runs waits for its next try (the
/// link may be down; the encode goes on meanwhile).
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// A future beside the encode, as `supervise::Beside` takes it.
pub(super) type BesideWork<'a> = Pin<&'a mut dyn Future<Output = Option<Stop>>>;

/// Runs `a` and `b` together: the first `Some` either of them ends with ends both; `None`
/// once both ended with `None`.
pub(super) async fn together(mut a: Option<BesideWork<'_>>, mut b: Option<BesideWork<'_>>) -> Option<Stop> {
    std::future::poll_fn(|cx| {
        if let Some(stop) = poll_slot(&mut a, cx).or_else(|| poll_slot(&mut b, cx)) {
            return Poll::Ready(Some(stop));
        }
        if a.is_none() && b.is_none() {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Polls the work in `slot`, emptied once it ended: the stop it ended with, if any.
fn poll_slot(slot: &mut Option<BesideWork<'_>>, cx: &mut std::task::Context<'_>) -> Option<Stop> {
    let work = slot.as_mut()?;
    match work.as_mut().poll(cx) {
        Poll::Ready(stop) => {
            *slot = None;
            stop
        }
        Poll::Pending => None,
    }
}

/// The files of the attempt's run sent to the main node as they finish.
pub(super) struct PartsUpload<'a> {
    client: &'a TransferClient,
    job_id: i32,
    lease: String,
    /// The run's partial folder in WORK_DIR.
    dir: PathBuf,
    /// Every part sent whole in this attempt.
    sent: RefCell<Vec<Part>>,
    /// The encode is over: what is left goes, with the audio and the search's result.
    encoded: Cell<bool>,
    wake: tokio::sync::Notify,
    /// Where its progress shows, while `quiet` says nothing else moves (a download).
    shown: &'a Cell<Option<Progress>>,
    quiet: &'a Cell<bool>,
}

impl<'a> PartsUpload<'a> {
    pub(super) fn new(
        client: &'a TransferClient,
        attempt: &Attempt,
        dir: &Path,
        shown: &'a Cell<Option<Progress>>,
        quiet: &'a Cell<bool>,
    ) -> Self {
        PartsUpload {
            client,
            job_id: attempt.job_id,
            lease: attempt.lease_id.clone(),
            dir: dir.to_path_buf(),
            sent: RefCell::new(Vec::new()),
            encoded: Cell::new(false),
            wake: tokio::sync::Notify::new(),
            shown,
            quiet,
        }
    }

    /// Says the encode is over: `run` sends what is left and ends.
    pub(super) fn encoded(&self) {
        self.encoded.set(true);
        self.wake.notify_one();
    }

    /// Sends each segment as the manifest lists it, until the encode is over; then the rest,
    /// and ends (`None`), or ends the attempt when that fails. A part that cannot be sent
    /// while the encode runs is tried again later: the encode goes on whatever the link does.
    pub(super) async fn run(&self) -> Option<Stop> {
        loop {
            let last = self.encoded.get();
            match self.send(last).await {
                Ok(()) if last => return None,
                Ok(()) => {
                    let _ = tokio::time::timeout(LOOK_EVERY, self.wake.notified()).await;
                }
                Err(e) if last => return Some(stop_for(e)),
                Err(e) => {
                    tracing::info!(job_id = self.job_id, error = %e, "a part could not be sent yet; the encode goes on");
                    let _ = tokio::time::timeout(RETRY_AFTER, self.wake.notified()).await;
                }
            }
        }
    }

    /// Sends the run's finished files not sent yet: its segments, and with `all` its audio
    /// and search's result.
    async fn send(&self, all: bool) -> Result<(), ClientError> {
        let dir = self.dir.clone();
        let files = tokio::task::spawn_blocking(move || finished_files(&dir, all))
            .await
            .map_err(|e| ClientError::Io { what: "reading the partial output", error: e.to_string() })?
            .map_err(|e| ClientError::Io { what: "reading the partial output", error: e.to_string() })?;
        let total: u64 = files.iter().map(|(_, size)| size).sum();
        for (name, _) in files {
            if self.sent.borrow().iter().any(|p| p.name == name) {
                continue;
            }
            let before: u64 = self.sent.borrow().iter().map(|p| p.size).sum();
            let mut report = |bytes: u64, rate: f64| {
                if self.quiet.get() {
                    let bytes = before + bytes;
                    self.shown.set(Some(Progress { direction: Direction::Upload, bytes, total, rate }));
                }
            };
            let part =
                self.client.upload_part(self.job_id, &self.lease, &name, &self.dir.join(&name), &mut report).await?;
            tracing::debug!(job_id = self.job_id, part = part.name, bytes = part.size, "sent a part");
            self.sent.borrow_mut().push(part);
        }
        Ok(())
    }
}

/// The run's finished files in its partial folder, with their sizes: the segments its
/// manifest lists (whole once listed), and with `all` its audio and search's result.
fn finished_files(dir: &Path, all: bool) -> std::io::Result<Vec<(String, u64)>> {
    let manifest = manifest_in(dir)?;
    let mut files: Vec<(String, u64)> = manifest
        .iter()
        .flat_map(|m| m.segments.iter())
        .filter(|s| !s.file.is_empty())
        .map(|s| (s.file.clone(), s.bytes))
        .collect();
    if all {
        for name in [AUDIO_FILE, SEARCH_FILE] {
            match std::fs::metadata(dir.join(name)) {
                Ok(m) => files.push((name.to_string(), m.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(files)
}

/// The run's manifest in its partial folder `dir`; `None` before the run wrote one.
fn manifest_in(dir: &Path) -> std::io::Result<Option<Manifest>> {
    match std::fs::read(dir.join(MANIFEST_FILE)) {
        Ok(text) => serde_json::from_slice(&text).map(Some).map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The parts an encode sent, and since when it sent them alone (its end).
pub(super) struct SentParts {
    parts: Vec<Part>,
    since: Instant,
}

/// How a failed upload of parts ends the attempt.
fn stop_for(e: ClientError) -> Stop {
    match e {
        // Not the file's failure: the job goes back to the queue, to be encoded from the
        // version there now.
        ClientError::SourceChanged(message) => {
            Stop::Requeue(serde_json::json!({ "reason": "the source changed on the main node", "message": message }))
        }
        e => Stop::Fail(transfer_failed("the upload of the encoded parts", e)),
    }
}

impl Attempt {
    /// The encode of `prepared` with its parts sent beside it (and `other`, the download of
    /// the copy when it still arrives), then what is left of them once it is over.
    pub(super) async fn encode_in_parts(
        &mut self,
        client: &TransferClient,
        prepared: &mut Prepared,
        other: Option<BesideWork<'_>>,
        shown: &Cell<Option<Progress>>,
        quiet: &Cell<bool>,
    ) -> Phase<(Encoded, SentParts)> {
        prepared.plan.scope = RunScope::Encode;
        let uploads = PartsUpload::new(client, self, &prepared.plan.partial_dir, shown, quiet);
        let mut sending = std::pin::pin!(uploads.run());
        let mut both = std::pin::pin!(together(other, Some(sending.as_mut() as BesideWork<'_>)));
        let beside = super::supervise::Beside { work: both.as_mut() as BesideWork<'_>, transfer: shown };
        let Some(encoded) = self.supervise(prepared, Some(beside)).await? else { return Ok(None) };
        let sending_since = Instant::now();
        uploads.encoded();
        let mut reported = encoded.job.clone();
        match self.follow(both.as_mut(), shown, &mut reported).await? {
            Moved::Done(None) => {}
            Moved::Done(Some(stop)) => return self.stopped_by(stop).await,
            Moved::Stopped => return Ok(None),
        }
        Ok(Some((encoded, SentParts { parts: uploads.sent.take(), since: sending_since })))
    }

    /// Finishes the parts sent by `encode_in_parts`: the main node checks them against the
    /// manifest and muxes. `Some` once it took the finish to commit; a part it does not hold
    /// whole is sent again first (once).
    pub(super) async fn finish_parts(
        &mut self,
        client: &TransferClient,
        copy: &Copy,
        prepared: &Prepared,
        (encoded, sent): (Encoded, SentParts),
    ) -> Phase<()> {
        let SentParts { mut parts, since } = sent;
        let Encoded { job, run_stats } = encoded;
        let dir = prepared.plan.partial_dir.clone();
        let manifest = match tokio::task::spawn_blocking(move || manifest_in(&dir)).await {
            Ok(Ok(Some(manifest))) => manifest,
            Ok(Ok(None)) => return self.fail(MediaError::misc("the encode left no manifest")).await,
            Ok(Err(e)) => return self.fail(MediaError::from_io("reading the run's manifest", &e)).await,
            Err(e) => return self.fail(join_error(e)).await,
        };
        let mut reported = job;
        let lease = self.lease_id.clone();
        for sent_again in [false, true] {
            // The node's phases in order, for the job's completion on the main node: the
            // download, the validation of the copy, the transcoder's, and the parts' upload
            // after the encode (the main node adds its mux).
            let mut phases = vec![copy.took.clone()];
            phases.extend(prepared.phases.iter().cloned());
            phases.extend(run_stats.iter().flat_map(|s| s.phases.iter().cloned()));
            phases.push(PhaseTime::since("upload", since, 0));
            let finish = PartsFinish {
                extension: prepared.plan.output_extension.clone(),
                source_sha256: copy.sha256.clone(),
                plan: prepared.plan.clone(),
                manifest: manifest.clone(),
                parts: parts.clone(),
                run: NodeRun::of(run_stats.as_ref(), phases),
            };
            let asked = client.finish_parts(self.job_id, &lease, &finish);
            match self.follow(asked, &Cell::new(None), &mut reported).await? {
                Moved::Done(Ok(Finished::Committing)) => {
                    tracing::info!(job_id = self.job_id, parts = parts.len(), "the parts are up; the main node muxes");
                    return Ok(Some(()));
                }
                Moved::Done(Ok(Finished::Missing(why))) if !sent_again => {
                    tracing::warn!(job_id = self.job_id, %why, "sending the parts the main node lacks again");
                    let shown = Cell::new(None);
                    let quiet = Cell::new(true);
                    let uploads = PartsUpload::new(client, self, &prepared.plan.partial_dir, &shown, &quiet);
                    uploads.encoded();
                    match self.follow(uploads.run(), &shown, &mut reported).await? {
                        Moved::Done(None) => parts = uploads.sent.take(),
                        Moved::Done(Some(stop)) => return self.stopped_by(stop).await,
                        Moved::Stopped => return Ok(None),
                    }
                }
                Moved::Done(Ok(Finished::Missing(why))) => {
                    return self.fail(MediaError::misc(format!("the main node did not take the parts: {why}"))).await
                }
                Moved::Done(Err(e)) => return self.stopped_by(stop_for(e)).await,
                Moved::Stopped => return Ok(None),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn ready(stop: Option<Stop>) -> impl Future<Output = Option<Stop>> {
        std::future::ready(stop)
    }

    #[actix_web::test]
    async fn together_ends_with_the_first_stop_or_once_both_are_done() {
        let (mut a, mut b) = (std::pin::pin!(ready(None)), std::pin::pin!(ready(None)));
        assert!(together(Some(a.as_mut() as BesideWork), Some(b.as_mut() as BesideWork)).await.is_none());
        let (mut a, mut b) = (std::pin::pin!(ready(None)), std::pin::pin!(std::future::pending::<Option<Stop>>()));
        let one_runs = together(Some(a.as_mut() as BesideWork), Some(b.as_mut() as BesideWork)).now_or_never();
        assert!(one_runs.is_none(), "one still runs");
        let (mut a, mut b) = (
            std::pin::pin!(std::future::pending::<Option<Stop>>()),
            std::pin::pin!(ready(Some(Stop::Fail(MediaError::misc("the link"))))),
        );
        match together(Some(a.as_mut() as BesideWork), Some(b.as_mut() as BesideWork)).now_or_never() {
            Some(Some(Stop::Fail(e))) => assert_eq!(e.message, "the link"),
            _ => panic!("a stop ends both"),
        }
        assert!(together(None, None).await.is_none());
    }

    #[test]
    fn the_files_to_send_are_the_listed_segments_then_the_audio_and_the_search() {
        let dir = tempfile::tempdir().unwrap();
        assert!(finished_files(dir.path(), true).unwrap().is_empty(), "no manifest yet");
        let manifest = serde_json::json!({
            "version": 2, "planDigest": "d", "source": {"size": 1, "mtimeNs": 1, "inode": 1},
            "boundaries": [], "videoComplete": false, "runs": [], "video": null,
            "segments": [
                {"index": 0, "file": "seg-00000.seg", "span": {"from": null, "to": 10}, "firstPts": 0, "lastPts": 9, "frames": 10, "bytes": 5},
                {"index": 1, "file": "", "span": {"from": 10, "to": 20}, "firstPts": 0, "lastPts": 0, "frames": 0, "bytes": 0},
            ],
        });
        std::fs::write(dir.path().join(MANIFEST_FILE), manifest.to_string()).unwrap();
        std::fs::write(dir.path().join("seg-00001.seg"), b"being written").unwrap();
        std::fs::write(dir.path().join(AUDIO_FILE), b"audio").unwrap();
        assert_eq!(finished_files(dir.path(), false).unwrap(), [("seg-00000.seg".to_string(), 5)]);
        assert_eq!(
            finished_files(dir.path(), true).unwrap(),
            [("seg-00000.seg".to_string(), 5), (AUDIO_FILE.to_string(), 5)]
        );
    }
}
