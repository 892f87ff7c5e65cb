//! A helper: one slot of this node encodes one planned span of a job that runs elsewhere
//! (or in another slot here), under the span's own lease (`repo::segments`). It starts a
//! `condense-media helper` child (`media::helper`), renews the lease with the child's progress,
//! stops it on pause, cancel, shutdown or a lost lease, and gives the span back (DONE, or
//! QUEUED for the next taker) when the child ends. The job's own run takes in what it wrote.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{JobCommand, NodeEnv, STOP_BOUND};
use crate::media::event::Event;
use crate::media::layout::partial_dir_for;
use crate::media::transcoder::HelperRequest;
use crate::media::transcoder::{ChildEnd, Transcoder};
use crate::repo::segments::SpanDone;

pub(super) const RENEW_EVERY: Duration = Duration::from_secs(3);

/// A span this node's helper works on, with its lease.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelperRef {
    pub job_id: i32,
    pub span: u32,
    pub lease_id: String,
    /// This node does not see the job's library: the main node claims the span for it,
    /// and it fetches the source and sends the segments back (`span_by_transfer`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_transfer: bool,
}

/// Runs the helper to its end and gives the span back.
pub async fn run(env: Arc<NodeEnv>, helper: HelperRef, mut commands: mpsc::UnboundedReceiver<JobCommand>) {
    let helped = help(&env, &helper, &mut commands).await;
    end(&env, &helper, helped).await;
}

/// Gives the span back: DONE with what `helped` encoded, or QUEUED for the next taker.
pub(super) async fn end(env: &NodeEnv, helper: &HelperRef, helped: Result<Option<SpanDone>, String>) {
    let HelperRef { job_id, span, lease_id, .. } = helper;
    let done = match helped {
        Ok(done) => done,
        Err(why) => {
            tracing::warn!(job_id, span, reason = %why, "a helper ended without finishing its span");
            None
        }
    };
    match env.store.span_end(*job_id, *span, lease_id, done).await {
        Ok(()) => {}
        Err(e) => tracing::debug!(job_id, span, error = %e, "the span's end was not recorded (its lease is gone)"),
    }
}

/// `Ok(Some(done))`: the span is encoded; `Ok(None)`: stopped or nothing to do.
async fn help(
    env: &NodeEnv,
    helper: &HelperRef,
    commands: &mut mpsc::UnboundedReceiver<JobCommand>,
) -> Result<Option<SpanDone>, String> {
    let job = env.store.job(helper.job_id).await.map_err(|e| e.to_string())?;
    let request = HelperRequest {
        partial_dir: partial_dir_for(&crate::repo::jobs::source_path(&job)),
        span: helper.span,
        threads: slot_threads(env),
        given: None,
    };
    encode(env, helper, &request, commands).await
}

/// The encoder threads of one slot.
pub(super) fn slot_threads(env: &NodeEnv) -> u32 {
    (env.cores / env.max_jobs.max(1)).max(1)
}

/// Runs the helper child on `request` to its end, renewing the span's lease with its
/// progress; `Ok(Some(done))`: the span is encoded and its record written.
pub(super) async fn encode(
    env: &NodeEnv,
    helper: &HelperRef,
    request: &HelperRequest,
    commands: &mut mpsc::UnboundedReceiver<JobCommand>,
) -> Result<Option<SpanDone>, String> {
    let mut child = Transcoder::spawn_helper(&env.transcoder, request).await.map_err(|e| e.to_string())?;
    let mut renew = tokio::time::interval(RENEW_EVERY);
    let (mut frames, mut fps, mut bytes) = (0u64, 0.0f64, 0u64);
    let mut finished: Option<SpanDone> = None;
    let mut stop_by: Option<tokio::time::Instant> = None;
    let mut events_open = true;
    loop {
        let kill_at = stop_by.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            event = child.events.recv(), if events_open => match event {
                Some(Event::Progress { frame, fps: f, size, .. }) => (frames, fps, bytes) = (frame, f, size),
                Some(Event::Done { size, frames_encoded_this_run, .. }) => {
                    finished = Some(SpanDone { frames: frames_encoded_this_run, bytes: size });
                }
                Some(Event::Nothing { reason }) => tracing::debug!(job_id = helper.job_id, span = helper.span, %reason, "nothing to help with"),
                Some(_) => {}
                None => events_open = false,
            },
            _ = renew.tick() => {
                let mine = env.store.span_progress(helper.job_id, helper.span, &helper.lease_id, (frames, fps, bytes)).await;
                // Only a clear "not yours" stops the helper: while the link is down the node
                // fences itself (`StopAll` after half the timeout), as it does for its jobs.
                if matches!(mine, Ok(false)) {
                    child.kill().await;
                    let _ = child.wait().await;
                    return Err("the span's lease was taken back".into());
                }
            }
            cmd = commands.recv(), if stop_by.is_none() => match cmd {
                Some(JobCommand::Cancel | JobCommand::LeaseLost) => {
                    child.kill().await;
                    let _ = child.wait().await;
                    return Ok(None);
                }
                Some(JobCommand::Pause | JobCommand::Yield | JobCommand::Shutdown | JobCommand::Fence) | None => {
                    child.pause();
                    stop_by = Some(tokio::time::Instant::now() + STOP_BOUND);
                }
            },
            _ = tokio::time::sleep_until(kill_at), if stop_by.is_some() => {
                child.kill().await;
                stop_by = None;
            }
        }
        if !events_open {
            break;
        }
    }
    match child.wait_within(STOP_BOUND).await {
        ChildEnd::Completed => Ok(finished),
        ChildEnd::Paused | ChildEnd::Nothing | ChildEnd::Busy | ChildEnd::NotSmaller => Ok(None),
        ChildEnd::Failed(e) => Err(e.message),
    }
}
