//! A helper on a node that does not see the job's library (issue 39, item 4): it asks the
//! main node for its span (which the main node claims in the job's partial folder for this
//! node's span lease, `actors::cluster::span_transfer`), encodes what is left of the span in
//! WORK_DIR (`condense-media helper` with the span given) from the job's sparse copy of the
//! source, fetching the ranges the helper reads as it reads them (`Fetcher`; the whole source
//! from an older main node), uploads each segment file and then the record, which the
//! job's run takes in as any helper's. The span's own folder goes whatever the end; the
//! copy of the source (`WORK_DIR/<job id>-spans/`, shared by the job's spans here) goes
//! when the job ends (`actors::work_dir`). The lease is renewed all along; a command or a
//! lost lease stops the helper, and what it had not uploaded is encoded again by whoever
//! takes the span.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::helper::{encode, end, slot_threads, HelperRef, RENEW_EVERY};
use super::{JobCommand, NodeEnv};
use crate::actors::transfer::ranges::{keep_range, sparse_copy, Range};
use crate::actors::transfer::{
    make_span_dir, remove_span_dir, short_of_room_in, ClientError, Downloaded, Progress, TransferClient, TransferSetup,
    SOURCE_FILE,
};
use crate::domain::byte_ranges::{chunk_bytes, next_chunk};
use crate::domain::placement::JobNeeds;
use crate::media::layout::{span_record_file, PLAN_FILE};
use crate::media::manifest::write_durably;
use crate::media::span_record::SpanRecord;
use crate::media::span_transfer::SpanTask;
use crate::media::sparse::{self, Held, SparseSource, HELD_FILE, SPARSE_FILE, STOP_FILE, WANTS_FILE};
use crate::media::transcoder::HelperRequest;
use crate::repo::segments::SpanDone;

/// Runs the helper of a span by transfer to its end and gives the span back.
pub async fn run(env: Arc<NodeEnv>, helper: HelperRef, mut commands: mpsc::UnboundedReceiver<JobCommand>) {
    let helped = help(&env, &helper, &mut commands).await;
    end(&env, &helper, helped).await;
}

/// `Ok(Some(done))` once the main node holds the span's record; `Ok(None)`: stopped, or
/// nothing to do.
async fn help(
    env: &NodeEnv,
    helper: &HelperRef,
    commands: &mut mpsc::UnboundedReceiver<JobCommand>,
) -> Result<Option<SpanDone>, String> {
    let setup = env.transfer.clone().ok_or("this node takes no files by transfer (SHARED_STORAGE=required)")?;
    let client = setup.client().ok_or("this node has no credential of the main node yet")?;
    let (job_id, span) = (helper.job_id, helper.span);
    let asked = client.span_task(job_id, span, &helper.lease_id);
    let task = match beside_lease(env, helper, commands, SpanDone { frames: 0, bytes: 0 }, asked).await? {
        None => return Ok(None),
        Some(Err(e)) => return Err(format!("asking the main node for the span: {e}")),
        Some(Ok(Err(why))) => {
            tracing::debug!(job_id, span, %why, "nothing to help with");
            return Ok(None);
        }
        Some(Ok(Ok(task))) => task,
    };
    let ended = encode_here(env, &setup, &client, helper, commands, task).await;
    let work_dir = setup.work_dir.clone();
    match tokio::task::spawn_blocking(move || remove_span_dir(&work_dir, job_id, span)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(job_id, span, error = %e, "could not remove the span's folder in WORK_DIR"),
        Err(e) => tracing::warn!(job_id, span, error = %e, "could not remove the span's folder in WORK_DIR"),
    }
    ended
}

async fn encode_here(
    env: &NodeEnv,
    setup: &TransferSetup,
    client: &TransferClient,
    helper: &HelperRef,
    commands: &mut mpsc::UnboundedReceiver<JobCommand>,
    task: SpanTask,
) -> Result<Option<SpanDone>, String> {
    let (job_id, span, lease) = (helper.job_id, helper.span, helper.lease_id.as_str());
    let grant = SpanGrant { job_id, span, lease };
    let work_dir = setup.work_dir.clone();
    let (spans_dir, span_dir) = tokio::task::spawn_blocking(move || make_span_dir(&work_dir, job_id, span))
        .await
        .map_err(|e| e.to_string())??;
    let job = env.store.job(job_id).await.map_err(|e| e.to_string())?;
    let needs = JobNeeds {
        roots: &[],
        source_bytes: u64::try_from(job.source_size).unwrap_or(0),
        output_bytes: job.predicted_size.and_then(|s| u64::try_from(s).ok()),
    };
    let SpanTask { mut plan, given } = task;
    let gate = setup.span_sources.of(job_id);
    // The ranges of the source the span reads, where the main node serves them; the room
    // asked is the span's share of the job's and the chunks fetched ahead.
    let room = needs.span_work_dir_bytes(given.boundaries.len());
    let begun = async {
        if let Some(why) = short_of_room_in(&setup.work_dir, &spans_dir, room).await.unwrap_or_else(Some) {
            return Err(why);
        }
        if !setup.ranges {
            return Ok(None);
        }
        Fetcher::begin(client, gate.clone(), grant, &spans_dir, &span_dir).await.map_err(|e| e.to_string())
    };
    let fetcher = match beside_lease(env, helper, commands, SpanDone { frames: 0, bytes: 0 }, begun).await? {
        None => return Ok(None),
        Some(Err(e)) => return Err(format!("the first bytes of the source: {e}")),
        Some(Ok(fetcher)) => fetcher,
    };
    let source_sha256 = match &fetcher {
        Some(fetcher) => {
            plan.input = spans_dir.join(SPARSE_FILE);
            plan.sparse = Some(fetcher.source.clone());
            fetcher.held.sha256.clone()
        }
        None => {
            // A main node that serves no ranges (an older release): the whole source.
            let fetched = download_whole(client, &gate, grant, &setup.work_dir, &spans_dir, &needs);
            let downloaded =
                match beside_lease(env, helper, commands, SpanDone { frames: 0, bytes: 0 }, fetched).await? {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(format!("the download of the source: {e}")),
                    Some(Ok(downloaded)) => downloaded,
                };
            plan.input = spans_dir.join(SOURCE_FILE);
            downloaded.sha256
        }
    };
    plan.partial_dir = span_dir.clone();
    // The test and benchmark aid slows this node's own encodes (not part of the digest).
    if env.throttle_ms_per_frame > 0 {
        plan.throttle_ms_per_frame = env.throttle_ms_per_frame;
    }
    let (dir, published) = (span_dir.clone(), plan);
    tokio::task::spawn_blocking(move || write_durably(&dir, PLAN_FILE, &published, "writing the span's plan"))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.message)?;
    let request = HelperRequest { partial_dir: span_dir.clone(), span, threads: slot_threads(env), given: Some(given) };
    let encoded = match fetcher {
        Some(fetcher) => encode_fetching(env, helper, &request, commands, fetcher).await?,
        None => encode(env, helper, &request, commands).await?,
    };
    let Some(done) = encoded else { return Ok(None) };
    let record = read_record(&span_dir, span).await?;
    let mut quiet = |_: Progress| {};
    let sent = client.upload_span(job_id, span, lease, &span_dir, &record, &source_sha256, &mut quiet);
    match beside_lease(env, helper, commands, done, sent).await? {
        None => Ok(None),
        Some(Err(e)) => Err(format!("the upload of the span: {e}")),
        Some(Ok(bytes)) => {
            tracing::info!(job_id, span, bytes, "a span encoded here is in the job's partial output");
            Ok(Some(done))
        }
    }
}

/// A span of a job, and the lease it is held under.
#[derive(Clone, Copy)]
struct SpanGrant<'a> {
    job_id: i32,
    span: u32,
    lease: &'a str,
}

/// The whole source into the folder of the job's spans, for a main node that serves no
/// ranges. One download of the job's source at a time here: a second span of the job
/// waits for the first's, then finds the copy whole (checked again against the main
/// node's hash).
async fn download_whole(
    client: &TransferClient,
    gate: &tokio::sync::Mutex<()>,
    SpanGrant { job_id, span, lease }: SpanGrant<'_>,
    work_dir: &Path,
    spans_dir: &Path,
    needs: &JobNeeds<'_>,
) -> Result<Downloaded, String> {
    let _one = gate.lock().await;
    if let Some(why) = short_of_room_in(work_dir, spans_dir, needs.work_dir_bytes()).await.unwrap_or_else(Some) {
        return Err(why);
    }
    let copy = spans_dir.join(SOURCE_FILE);
    let had = tokio::fs::metadata(&copy).await.map(|m| m.len()).unwrap_or(0);
    let mut quiet = |_: Progress| {};
    let downloaded = client.download_for_span(job_id, span, lease, spans_dir, &mut quiet).await;
    let downloaded = downloaded.map_err(|e| e.to_string())?;
    if had == downloaded.size {
        tracing::info!(job_id, span, "the copy of the source here is whole: no download");
    } else {
        tracing::info!(
            job_id,
            span,
            bytes = downloaded.size - had.min(downloaded.size),
            "downloaded the source for the job's spans"
        );
    }
    Ok(downloaded)
}

/// Bytes of the source fetched before the helper starts: its container's header is there.
const FIRST_BYTES: u64 = 64 << 10;

/// How often the fetcher looks at where the span's demuxer reads.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// Fills the job's sparse copy with what one span's helper reads (`media::sparse`).
struct Fetcher<'a> {
    client: &'a TransferClient,
    /// One fetch of the job's source at a time on this node: its slots share the copy.
    gate: Arc<tokio::sync::Mutex<()>>,
    grant: SpanGrant<'a>,
    /// The folder of the job's spans, which holds the copy and its map.
    dir: PathBuf,
    /// The copy as this span's helper reads it.
    source: SparseSource,
    /// What the copy holds, as this fetcher last read or wrote it.
    held: Held,
    /// Bytes this fetcher moved.
    fetched: u64,
}

impl<'a> Fetcher<'a> {
    /// Fetches the source's first bytes into the job's sparse copy (started over when it
    /// is of another source). `Ok(None)`: the main node serves no ranges.
    async fn begin(
        client: &'a TransferClient,
        gate: Arc<tokio::sync::Mutex<()>>,
        grant: SpanGrant<'a>,
        dir: &Path,
        span_dir: &Path,
    ) -> Result<Option<Fetcher<'a>>, ClientError> {
        let SpanGrant { job_id, span, lease } = grant;
        let one = gate.clone();
        let _one = one.lock().await;
        let Some(first) = client.fetch_range(job_id, span, lease, 0, FIRST_BYTES).await? else { return Ok(None) };
        let (at, sha256, size) = (dir.to_path_buf(), first.sha256.clone(), first.size);
        let held = blocking(move || sparse_copy(&at, &sha256, size)).await?;
        let mut fetcher = Fetcher {
            client,
            gate,
            grant,
            dir: dir.to_path_buf(),
            source: SparseSource {
                path: dir.join(SPARSE_FILE),
                size,
                chunk: chunk_bytes(size),
                held: dir.join(HELD_FILE),
                wants: span_dir.join(WANTS_FILE),
                stop: span_dir.join(STOP_FILE),
            },
            held,
            fetched: 0,
        };
        let end = first.from + first.bytes.len() as u64;
        if !fetcher.held.ranges.holds(first.from, end) {
            fetcher.keep(first).await?;
        }
        Ok(Some(fetcher))
    }

    /// Fetches what the span's demuxer reads, and the chunks after it, until a fetch
    /// fails: answers why.
    async fn serve(&mut self) -> ClientError {
        loop {
            let wants = self.source.wants.clone();
            let pos = match blocking(move || Ok(sparse::wanted(&wants))).await {
                Ok(pos) => pos,
                Err(e) => return e,
            };
            let next = pos.and_then(|pos| next_chunk(&self.held.ranges, pos, self.held.size, self.source.chunk));
            match next {
                Some((from, to)) => {
                    if let Err(e) = self.fetch(from, to).await {
                        return e;
                    }
                }
                None => tokio::time::sleep(LOOK_EVERY).await,
            }
        }
    }

    async fn fetch(&mut self, from: u64, to: u64) -> Result<(), ClientError> {
        let one = self.gate.clone();
        let _one = one.lock().await;
        // Another slot of this job may have fetched it meanwhile.
        let dir = self.dir.clone();
        if let Some(held) = blocking(move || Ok(Held::read(&dir))).await?.filter(|h| h.sha256 == self.held.sha256) {
            self.held = held;
        }
        if self.held.ranges.holds(from, to) {
            return Ok(());
        }
        let SpanGrant { job_id, span, lease } = self.grant;
        let range =
            self.client.fetch_range(job_id, span, lease, from, to).await?.ok_or_else(|| ClientError::Refused {
                status: 404,
                code: "not_found".into(),
                message: "the main node stopped serving ranges".into(),
            })?;
        self.keep(range).await
    }

    async fn keep(&mut self, range: Range) -> Result<(), ClientError> {
        let (dir, n) = (self.dir.clone(), range.bytes.len() as u64);
        self.held = blocking(move || keep_range(&dir, &range)).await?;
        self.fetched += n;
        Ok(())
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ClientError> + Send + 'static,
) -> Result<T, ClientError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ClientError::Io { what: "the copy of the source", error: e.to_string() })?
}

/// Runs the helper child while `fetcher` fetches what it reads. A fetch that fails tells
/// the child why (`media::sparse::STOP_FILE`): it fails with that reason where it waits for
/// bytes, or ends as it would have if it needed none (without the note it would wait for
/// its bytes for `condense-media`'s `sparse::STALL`).
async fn encode_fetching(
    env: &NodeEnv,
    helper: &HelperRef,
    request: &HelperRequest,
    commands: &mut mpsc::UnboundedReceiver<JobCommand>,
    mut fetcher: Fetcher<'_>,
) -> Result<Option<SpanDone>, String> {
    let stop = fetcher.source.stop.clone();
    let ended = {
        let encoded = encode(env, helper, request, commands);
        tokio::pin!(encoded);
        let fetching = fetcher.serve();
        tokio::pin!(fetching);
        tokio::select! {
            ended = &mut encoded => ended,
            failed = &mut fetching => {
                let why = failed.to_string();
                tracing::warn!(job_id = helper.job_id, span = helper.span, %why, "fetching the source for the span stopped");
                let what = "telling the span's helper to stop";
                let told = blocking(move || {
                    sparse::stop(&stop, &why).map_err(|e| ClientError::Io { what, error: e.to_string() })
                })
                .await;
                if let Err(e) = told {
                    tracing::warn!(job_id = helper.job_id, span = helper.span, error = %e, "the span's helper was not told");
                }
                encoded.await
            }
        }
    };
    tracing::info!(
        job_id = helper.job_id,
        span = helper.span,
        bytes = fetcher.fetched,
        held = fetcher.held.ranges.bytes(),
        size = fetcher.held.size,
        "fetched the ranges of the source the span read"
    );
    ended
}

async fn read_record(span_dir: &Path, span: u32) -> Result<SpanRecord, String> {
    let path: PathBuf = span_dir.join(span_record_file(span));
    let text = tokio::fs::read(&path).await.map_err(|e| format!("reading the span's record: {e}"))?;
    serde_json::from_slice(&text).map_err(|e| format!("the span's record is unreadable: {e}"))
}

/// Runs `work` while the span's lease is renewed (with `done`, what is encoded so far);
/// `Ok(None)` when a command stops the helper first, an error when the lease was taken back.
async fn beside_lease<T>(
    env: &NodeEnv,
    helper: &HelperRef,
    commands: &mut mpsc::UnboundedReceiver<JobCommand>,
    done: SpanDone,
    work: impl Future<Output = T>,
) -> Result<Option<T>, String> {
    tokio::pin!(work);
    let mut renew = tokio::time::interval(RENEW_EVERY);
    loop {
        tokio::select! {
            out = &mut work => return Ok(Some(out)),
            _ = renew.tick() => {
                let progress = (done.frames, 0.0, done.bytes);
                let mine = env.store.span_progress(helper.job_id, helper.span, &helper.lease_id, progress).await;
                // Only a clear "not yours": while the link is down the node fences itself.
                if matches!(mine, Ok(false)) {
                    return Err("the span's lease was taken back".into());
                }
            }
            // Any command (pause, cancel, shutdown, a lost lease) ends a transfer: the span
            // goes back to the queue, the copy of the source stays for the job's next span.
            _ = commands.recv() => return Ok(None),
        }
    }
}
