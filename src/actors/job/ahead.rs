//! A job taken by transfer whose copy is read as it arrives (issue 39, "download ahead"):
//! the node fetches the source's end first (`TAIL_FILE`: Matroska's cues and tags, an MP4's
//! sample tables), then downloads the rest from the start while the same attempt analyses
//! and encodes the copy, the media child waiting for bytes not there yet
//! (`condense-media`'s `growing` reader). The download runs beside the analysis and the
//! encode (`supervise::Beside`): a download that fails ends the encode with its reason;
//! one that ends with another SHA-256 than the end's was fetched under (the source changed
//! on the main node meanwhile) sends the job back to the queue, no retry used. The encoded
//! parts go up beside both (`parts`), and the finish once both are done, as after a whole
//! download (`by_transfer`).

use std::cell::{Cell, RefCell};
use std::pin::pin;
use std::time::Instant;

use super::by_transfer::{full_work_dir, transfer_failed, Copy, Delivery, Moved, Start};
use super::parts::BesideWork;
use super::supervise::{Beside, Stop};
use super::{join_error, Attempt};
use crate::actors::lifecycle::LifecycleError;
use crate::actors::transfer::{
    ClientError, Downloaded, Progress, Tail, TransferClient, TransferSetup, SOURCE_FILE, SOURCE_HASH_FILE, TAIL_FILE,
};
use crate::domain::job::FailureCode;
use crate::domain::transfer::tail_bytes;
use crate::media::event::PhaseTime;
use crate::media::plan::GrowingSource;
use crate::media::MediaError;

impl Attempt {
    /// Fetches the source's end into the job's folder: `None` when it could not be had
    /// (an older main node, a dropped link), and the download then runs whole first.
    pub(super) async fn fetch_tail(
        &mut self,
        client: &TransferClient,
        start: &Start,
    ) -> Result<Moved<Option<Tail>>, LifecycleError> {
        let want = tail_bytes(u64::try_from(start.job.source_size).unwrap_or(0));
        if want == 0 {
            return Ok(Moved::Done(None));
        }
        let mut reported = start.job.clone();
        let lease = self.lease_id.clone();
        let seen = Cell::new(None);
        let mut on_progress = |p: Progress| seen.set(Some(p));
        let path = start.dir.join(TAIL_FILE);
        let fetched = client.download_tail(self.job_id, &lease, &path, want, &mut on_progress);
        Ok(match self.follow(fetched, &seen, &mut reported).await? {
            // The end was the whole file: it is the copy, which the download then only checks.
            Moved::Done(Ok(tail)) if tail.from == 0 => {
                let (dir, sha) = (start.dir.clone(), tail.sha256.clone());
                let adopted = tokio::task::spawn_blocking(move || {
                    std::fs::write(dir.join(SOURCE_HASH_FILE), sha)?;
                    std::fs::rename(dir.join(TAIL_FILE), dir.join(SOURCE_FILE))
                })
                .await;
                if !matches!(adopted, Ok(Ok(()))) {
                    tracing::debug!(
                        job_id = self.job_id,
                        ?adopted,
                        "the whole file fetched as its end is fetched again"
                    );
                }
                Moved::Done(None)
            }
            Moved::Done(Ok(tail)) => {
                tracing::debug!(
                    job_id = self.job_id,
                    from = tail.from,
                    size = tail.size,
                    "fetched the source's end first"
                );
                Moved::Done(Some(tail))
            }
            Moved::Done(Err(e)) => {
                tracing::info!(job_id = self.job_id, error = %e, "the source's end could not be fetched first; downloading it whole");
                Moved::Done(None)
            }
            Moved::Stopped => Moved::Stopped,
        })
    }

    /// The attempt from the source's end on: the download of the rest beside the analysis
    /// and the encode of the copy as it arrives, then the upload and the main node's commit.
    pub(super) async fn ahead(
        &mut self,
        setup: &TransferSetup,
        client: &TransferClient,
        start: Start,
        tail: Tail,
        delivery: Delivery,
    ) -> Result<(), LifecycleError> {
        let Start { job, dir, copy, started, .. } = start;
        // The copy under two names of one file: the download's, which it writes, and one
        // with the original's extension, which the encode reads (its container follows
        // from it).
        let input = dir.join(&copy);
        let (data, name) = (dir.join(SOURCE_FILE), input.clone());
        let linked = tokio::task::spawn_blocking(move || {
            std::fs::File::create(&data)?;
            match std::fs::remove_file(&name) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            std::fs::hard_link(&data, &name)
        })
        .await;
        match linked {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return self.fail(MediaError::from_io("naming the copy being downloaded", &e)).await,
            Err(e) => return self.fail(join_error(e)).await,
        }
        let growing =
            GrowingSource { path: input.clone(), size: tail.size, tail: dir.join(TAIL_FILE), tail_from: tail.from };
        tracing::info!(job_id = self.job_id, bytes = tail.size, "encoding the copy as it downloads");

        let lease = self.lease_id.clone();
        let transfer = Cell::new(None);
        // The download says it starts over (fewer bytes than before) before the copy
        // shrinks: what was read of it so far may be of another version.
        let started_over = tokio::sync::Notify::new();
        let mut on_progress = |p: Progress| {
            if transfer.get().is_some_and(|last: Progress| p.bytes < last.bytes) {
                started_over.notify_one();
            }
            transfer.set(Some(p));
        };
        let download = client.download(self.job_id, &lease, &dir, &mut on_progress);
        let outcome: RefCell<Option<(Downloaded, Instant)>> = RefCell::new(None);
        // Set once the download ended: the parts sent beside the encode show from then on.
        let arrived = Cell::new(false);
        let (work_dir, job_row, tail_path) = (setup.work_dir.clone(), job.clone(), growing.tail.clone());
        let mut beside = pin!(async {
            let got = tokio::select! {
                got = download => got,
                () = started_over.notified() => return Some(Stop::Requeue(serde_json::json!({
                    "reason": "the download of the source started over (the source changed on the main node, or the bytes did not match its SHA-256)",
                }))),
            };
            arrived.set(true);
            let stop = match got {
                Ok(downloaded) => {
                    let stop = judged(&downloaded, &tail, tail_path).await;
                    *outcome.borrow_mut() = Some((downloaded, Instant::now()));
                    stop
                }
                Err(ClientError::Full { what, error }) => {
                    let why = full_work_dir(&work_dir, &dir, &job_row, &format!("{what}: {error}")).await;
                    Some(Stop::Fail(MediaError::new(FailureCode::InsufficientDiskSpace, why)))
                }
                Err(e) => Some(Stop::Fail(transfer_failed("the download of the source", e))),
            };
            stop
        });

        // The analysis, the download going on beside it; a download that ends the attempt
        // stops the analysis's child with it.
        let mut beside_open = true;
        let mut stopped = None;
        let prepared = {
            let mut prepare = pin!(self.prepare(Some(&input), Some(&growing)));
            loop {
                tokio::select! {
                    prepared = prepare.as_mut() => break Some(prepared),
                    stop = beside.as_mut(), if beside_open => {
                        beside_open = false;
                        if stop.is_some() {
                            stopped = stop;
                            break None;
                        }
                    }
                }
            }
        };
        if let Some(stop) = stopped {
            return self.stopped_by(stop).await;
        }
        let Some(mut prepared) = prepared.transpose()?.flatten() else { return Ok(()) };
        let download = beside_open.then_some(beside.as_mut() as BesideWork<'_>);
        let (encoded, sent) = if matches!(delivery, Delivery::Parts) {
            // The parts go beside the encode and the download, and both end within.
            let Some((encoded, sent)) =
                self.encode_in_parts(client, &mut prepared, download, &transfer, &arrived).await?
            else {
                return Ok(());
            };
            (encoded, Some(sent))
        } else {
            let beside_now = download.map(|work| Beside { work, transfer: &transfer });
            let Some(encoded) = self.supervise(&prepared, beside_now).await? else { return Ok(()) };
            // The encode can end before the download: the copy's last bytes came from its end.
            if outcome.borrow().is_none() {
                let mut reported = encoded.job.clone();
                match self.follow(beside.as_mut(), &transfer, &mut reported).await? {
                    Moved::Done(None) => {}
                    Moved::Done(Some(stop)) => return self.stopped_by(stop).await,
                    Moved::Stopped => return Ok(()),
                }
            }
            (encoded, None)
        };
        let Some((downloaded, done)) = outcome.take() else {
            return self.fail(MediaError::misc("the download ended without its result")).await;
        };
        tracing::info!(job_id = self.job_id, bytes = downloaded.size, "downloaded the source beside its encode");
        // The folder as a whole download leaves it: the copy under its one name, its hash.
        let (data, tail_file) = (downloaded.path.clone(), growing.tail.clone());
        let tidied = tokio::task::spawn_blocking(move || {
            std::fs::remove_file(&data)?;
            std::fs::remove_file(&tail_file)
        })
        .await;
        if let Ok(Err(e)) = tidied {
            tracing::warn!(job_id = self.job_id, error = %e, "could not tidy the job's folder in WORK_DIR");
        }
        let took = PhaseTime::new("download", u64::try_from((done - started).as_millis()).unwrap_or(u64::MAX), 0);
        let copy = Copy { input, sha256: downloaded.sha256, took };
        let delivered = match sent {
            Some(sent) => self.finish_parts(client, &copy, &prepared, (encoded, sent)).await?,
            None => self.upload(client, &copy, &prepared, encoded).await?,
        };
        let Some(()) = delivered else { return Ok(()) };
        self.await_commit().await
    }
}

/// Whether the copy the encode read is the source the main node has: the download's
/// SHA-256 is the one its end was fetched under, and the end fetched first holds the same
/// bytes as the whole copy's end. `None` when it is; otherwise how the attempt ends.
async fn judged(downloaded: &Downloaded, tail: &Tail, tail_path: std::path::PathBuf) -> Option<Stop> {
    if downloaded.sha256 != tail.sha256 {
        return Some(Stop::Requeue(serde_json::json!({
            "reason": "the source changed on the main node while it downloaded",
            "sha256": downloaded.sha256,
            "endSha256": tail.sha256,
        })));
    }
    let (copy, from) = (downloaded.path.clone(), tail.from);
    let same = tokio::task::spawn_blocking(move || -> std::io::Result<bool> {
        use std::os::unix::fs::FileExt;
        let end = std::fs::read(&tail_path)?;
        let mut whole = vec![0u8; end.len()];
        std::fs::File::open(&copy)?.read_exact_at(&mut whole, from)?;
        Ok(whole == end)
    })
    .await;
    match same {
        Ok(Ok(true)) => None,
        Ok(Ok(false)) => Some(Stop::Fail(MediaError::misc(
            "the source's end fetched first differs from the downloaded copy's, whose SHA-256 is the main node's",
        ))),
        Ok(Err(e)) => Some(Stop::Fail(MediaError::from_io("comparing the source's end with the copy's", &e))),
        Err(e) => Some(Stop::Fail(join_error(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn downloaded(dir: &std::path::Path, bytes: &[u8], sha256: &str) -> Downloaded {
        let path = dir.join(SOURCE_FILE);
        std::fs::write(&path, bytes).unwrap();
        Downloaded { path, sha256: sha256.into(), size: bytes.len() as u64 }
    }

    #[actix_web::test]
    async fn a_copy_is_taken_only_under_its_ends_hash_and_with_its_end_fetched_first() {
        let dir = tempfile::tempdir().unwrap();
        let whole: Vec<u8> = (0..1000u32).map(|i| (i % 253) as u8).collect();
        let tail_path = dir.path().join(TAIL_FILE);
        std::fs::write(&tail_path, &whole[900..]).unwrap();
        let tail = Tail { sha256: "aa".into(), size: 1000, from: 900 };

        // The same source, its end as fetched first: the encode goes on.
        let same = downloaded(dir.path(), &whole, "aa");
        assert!(judged(&same, &tail, tail_path.clone()).await.is_none());

        // Another SHA-256: the source changed on the main node meanwhile; back to the queue.
        let changed = downloaded(dir.path(), &whole, "bb");
        match judged(&changed, &tail, tail_path.clone()).await {
            Some(Stop::Requeue(detail)) => assert_eq!(detail["endSha256"], "aa", "{detail}"),
            _ => panic!("a changed source is requeued"),
        }

        // The hash agrees but the end fetched first does not hold the copy's last bytes.
        let mut other = whole.clone();
        other[950] ^= 0xff;
        let differs = downloaded(dir.path(), &other, "aa");
        match judged(&differs, &tail, tail_path).await {
            Some(Stop::Fail(e)) => assert!(e.message.contains("differs"), "{}", e.message),
            _ => panic!("an end that differs fails the attempt"),
        }
    }
}
