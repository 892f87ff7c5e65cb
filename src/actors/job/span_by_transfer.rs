//! A helper on a node that does not see the job's library (issue 39, item 4): it asks the
//! main node for its span (which the main node claims in the job's partial folder for this
//! node's span lease, `actors::cluster::span_transfer`), downloads the source into the
//! folder of the job's spans in WORK_DIR (`WORK_DIR/<job id>-spans/`, resumed and checked
//! as a job's download is, and kept for the job's next span here), encodes what is left of
//! the span there (`condense-media helper` with the span given), uploads each segment
//! file and then the record, which the job's run takes in as any helper's. The span's own
//! folder goes whatever the end; the copy of the source goes when the job ends
//! (`actors::work_dir`). The lease is renewed all along; a command or a lost lease stops
//! the helper, and what it had not uploaded is encoded again by whoever takes the span.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::helper::{encode, end, slot_threads, HelperRef, RENEW_EVERY};
use super::{JobCommand, NodeEnv};
use crate::actors::transfer::{
    make_span_dir, remove_span_dir, short_of_room_in, Progress, TransferClient, TransferSetup, SOURCE_FILE,
};
use crate::domain::placement::JobNeeds;
use crate::media::layout::{span_record_file, PLAN_FILE};
use crate::media::manifest::write_durably;
use crate::media::span_record::SpanRecord;
use crate::media::span_transfer::SpanTask;
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
    // One download of the job's source at a time here: a second span of the job waits for
    // the first's, then finds the copy whole (checked again against the main node's hash).
    let gate = setup.span_sources.of(job_id);
    let fetched = async {
        let _one = gate.lock().await;
        if let Some(why) =
            short_of_room_in(&setup.work_dir, &spans_dir, needs.work_dir_bytes()).await.unwrap_or_else(Some)
        {
            return Err(why);
        }
        let copy = spans_dir.join(SOURCE_FILE);
        let had = tokio::fs::metadata(&copy).await.map(|m| m.len()).unwrap_or(0);
        let mut quiet = |_: Progress| {};
        let downloaded = client.download_for_span(job_id, span, lease, &spans_dir, &mut quiet).await;
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
    };
    let downloaded = match beside_lease(env, helper, commands, SpanDone { frames: 0, bytes: 0 }, fetched).await? {
        None => return Ok(None),
        Some(Err(e)) => return Err(format!("the download of the source: {e}")),
        Some(Ok(downloaded)) => downloaded,
    };
    let SpanTask { mut plan, given } = task;
    plan.input = spans_dir.join(SOURCE_FILE);
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
    let Some(done) = encode(env, helper, &request, commands).await? else { return Ok(None) };
    let record = read_record(&span_dir, span).await?;
    let mut quiet = |_: Progress| {};
    let sent = client.upload_span(job_id, span, lease, &span_dir, &record, &downloaded.sha256, &mut quiet);
    match beside_lease(env, helper, commands, done, sent).await? {
        None => Ok(None),
        Some(Err(e)) => Err(format!("the upload of the span: {e}")),
        Some(Ok(bytes)) => {
            tracing::info!(job_id, span, bytes, "a span encoded here is in the job's partial output");
            Ok(Some(done))
        }
    }
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
