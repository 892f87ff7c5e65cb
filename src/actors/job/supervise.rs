//! The second part of a job's attempt: the transcoder child, followed until it has
//! written the whole output or is stopped.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use entities::job;

use super::prepare::Prepared;
use super::{Attempt, JobCommand, Phase, DB_WRITE_EVERY, PUBLISH_EVERY, STOP_BOUND};
use crate::actors::lifecycle::{EventContext, LifecycleError};
use crate::actors::transfer::Progress;
use crate::domain::health::STALLED_AFTER_SECS;
use crate::domain::job::{FailureCode, JobEvent};
use crate::domain::quality;
use crate::media::event::{Event, RunStats};
use crate::media::transcoder::{ChildEnd, Transcoder};
use crate::media::MediaError;
use crate::repo::jobs::JobChange;

/// Why the child was asked to stop at its next segment boundary.
#[derive(Clone, Copy)]
enum Stopping {
    Pause,
    Yield,
    Shutdown,
}

/// Work that runs beside the encode and may end it: the download of the copy the encode
/// reads as it arrives (issue 39, `ahead`). Its `work` ends with `None` when it finished
/// and the encode goes on; `transfer` is how far it is, shown with the encode's progress.
pub(super) struct Beside<'a> {
    pub work: Pin<&'a mut dyn Future<Output = Option<Stop>>>,
    pub transfer: &'a Cell<Option<Progress>>,
}

/// Why work beside the encode ended the attempt.
pub(super) enum Stop {
    /// The attempt fails with this reason.
    Fail(MediaError),
    /// The job goes back to the queue with this history detail, no retry used: the source
    /// changed on the main node meanwhile, which is not the file's failure.
    Requeue(serde_json::Value),
}

/// Waits for `beside` to end; never, when there is none.
async fn ended(beside: &mut Option<Beside<'_>>) -> Option<Stop> {
    match beside {
        Some(beside) => beside.work.as_mut().await,
        None => std::future::pending().await,
    }
}

/// The job's live figures, with the download beside the encode while it runs.
fn publish(env: &super::NodeEnv, job: &job::Model, beside: Option<&Beside<'_>>) {
    match beside.and_then(|b| b.transfer.get()) {
        Some(p) => env.store.publish_transfer(job, p.into()),
        None => env.store.publish_progress(job),
    }
}

/// What the encode left for the commit.
pub(super) struct Encoded {
    /// The job with the progress this attempt reached.
    pub job: job::Model,
    /// CPU and wall time of the child, in milliseconds, and its phases, when it said.
    pub run_stats: Option<RunStats>,
}

impl Attempt {
    /// Runs the transcoder child on the plan and follows it: progress, pause, cancel,
    /// shutdown, the time limit, a stall, and `beside`'s end. `Some`: the child encoded and
    /// muxed the whole output, to be committed; `None`: the attempt is over (its transition
    /// is applied).
    pub(super) async fn supervise(&mut self, prepared: &Prepared, mut beside: Option<Beside<'_>>) -> Phase<Encoded> {
        let (plan, timeout_hours) = (&prepared.plan, prepared.timeout_hours);
        let mut job = prepared.job.clone();
        let env = self.env.clone();
        let mut child = match Transcoder::spawn(&env.transcoder, plan).await {
            Ok(c) => c,
            Err(e) => return self.fail(e).await,
        };
        let deadline = tokio::time::sleep(Duration::from_secs(timeout_hours * 3600));
        tokio::pin!(deadline);
        let mut stall_check = tokio::time::interval(Duration::from_secs(30));
        let mut transfer_shown = tokio::time::interval(Duration::from_secs(1));
        let started = Instant::now();
        let start_percent = job.progress;
        let mut last_progress = Instant::now();
        let (mut last_write, mut last_publish) = (Instant::now(), Instant::now());
        let mut run_stats: Option<RunStats> = None;
        let mut stopping: Option<Stopping> = None;
        let mut stop_by: Option<tokio::time::Instant> = None;
        let mut events_open = true;
        let mut helpers = crate::repo::segments::HelperTotals::default();
        let mut not_smaller = None;
        let mut searched: Option<(f64, u32)> = None;

        loop {
            let kill_at = stop_by.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                event = child.events.recv(), if events_open => match event {
                    Some(Event::Progress { fps, percent, frame, .. }) => {
                        last_progress = Instant::now();
                        // Helpers' spans count with the run's own (not yet in its manifest).
                        let total = if percent > 0.0 { frame as f64 * 100.0 / percent } else { 0.0 };
                        job.progress = if total > 0.0 && helpers.frames > 0 {
                            ((frame + helpers.frames) as f64 / total * 100.0).min(99.9)
                        } else {
                            percent
                        };
                        let percent = job.progress;
                        job.fps = fps + helpers.fps;
                        let gained = percent - start_percent;
                        job.eta_seconds = (gained > 0.1).then(|| {
                            (started.elapsed().as_secs_f64() * (100.0 - percent) / gained) as i64
                        });
                        if job.stalled {
                            job.stalled = false;
                        }
                        if last_write.elapsed() >= DB_WRITE_EVERY {
                            last_write = Instant::now();
                            let now = chrono::Utc::now();
                            let patch = JobChange {
                                progress: Some(job.progress),
                                fps: Some(job.fps),
                                eta_seconds: job.eta_seconds,
                                stalled: Some(false),
                                last_progress_at: Some(now),
                                ..Default::default()
                            };
                            self.update(patch).await?;
                        }
                        if last_publish.elapsed() >= PUBLISH_EVERY {
                            last_publish = Instant::now();
                            publish(&env, &job, beside.as_ref());
                        }
                    }
                    Some(Event::Done { cpu_ms, wall_ms, phases, alone_ms, .. }) => {
                        run_stats = Some(RunStats { cpu_ms, wall_ms, phases, alone_ms });
                    }
                    Some(Event::NotSmaller { projected, limit, frames_done }) => {
                        not_smaller = Some((projected, limit, frames_done));
                    }
                    // VMAF mode: what the search chose and predicted, then what the output
                    // measured, recorded on the job as they come.
                    Some(Event::Searched { quality, met, vmaf, percent, predicted_size, max_size_percent, .. }) => {
                        tracing::info!(job_id = job.id, quality, met, vmaf, percent, "quality searched");
                        searched = Some((percent, max_size_percent));
                        let change = JobChange {
                            chosen_quality: Some(i32::try_from(quality).unwrap_or(i32::MAX)),
                            predicted_size: Some(i64::try_from(predicted_size).unwrap_or(i64::MAX)),
                            ..Default::default()
                        };
                        self.update(change).await?;
                    }
                    Some(Event::Measured { mean, p5 }) => {
                        self.update(JobChange { vmaf: Some(mean), vmaf_p5: Some(p5), ..Default::default() }).await?;
                    }
                    // Where the video's spans stand, for helpers to take and the job's page
                    // to show; fenced by the lease like every write of the run.
                    Some(Event::Spans { spans }) => {
                        let owner = (env.node_id, env.node_name.clone());
                        match env.store.sync_spans(job.id, &self.lease_id, owner, spans).await {
                            Ok(totals) => helpers = totals,
                            Err(e) => tracing::debug!(job_id = job.id, error = %e, "the spans were not recorded"),
                        }
                    }
                    // Two passes: the job shows the pass it is in, and its history each pass
                    // begun (a first pass cut short begins again).
                    Some(Event::Pass { pass, restarted }) => {
                        job.encode_pass = Some(i32::from(pass));
                        let change = JobChange { encode_pass: job.encode_pass, ..Default::default() };
                        self.update(change).await?;
                        let detail = serde_json::json!({ "pass": pass, "restarted": restarted });
                        env.store.record_event(job.id, &self.lease_id, "pass", self.node(), Some(detail)).await?;
                    }
                    // The history says how much of an earlier attempt's work this one kept.
                    Some(Event::Started { resume_after_frames, segments_kept, .. }) if segments_kept > 0 => {
                        let detail = serde_json::json!({ "frames": resume_after_frames, "segments": segments_kept });
                        env.store.record_event(job.id, &self.lease_id, "continued", self.node(), Some(detail)).await?;
                    }
                    Some(_) => {}
                    None => events_open = false,
                },
                cmd = self.commands.recv(), if stopping.is_none() => match cmd {
                    // The lease is kept until the child has exited: the pause is applied
                    // (and the lease released) after it, so no other node can start on the
                    // partial output while this one still flushes its segment.
                    Some(JobCommand::Pause) => {
                        child.pause();
                        stopping = Some(Stopping::Pause);
                        stop_by = Some(tokio::time::Instant::now() + STOP_BOUND);
                    }
                    // As a pause: the lease is kept until the child has exited.
                    Some(JobCommand::Yield) => {
                        child.pause();
                        stopping = Some(Stopping::Yield);
                        stop_by = Some(tokio::time::Instant::now() + STOP_BOUND);
                    }
                    Some(JobCommand::Cancel) => {
                        child.kill().await;
                        let _ = child.wait().await;
                        self.apply(JobEvent::Cancel, JobChange::default(), self.ctx()).await?;
                        return Ok(None);
                    }
                    // Another node holds the job now: stop at once, and leave the job and
                    // the folder to it (the lock keeps it out until this child is gone).
                    Some(JobCommand::LeaseLost) => {
                        tracing::warn!(job_id = job.id, "the job's lease was lost; stopping its transcoder");
                        child.kill().await;
                        let _ = child.wait().await;
                        return Ok(None);
                    }
                    // Cut off from the main node: a copy's encode goes on (`Attempt::by_transfer`).
                    Some(JobCommand::Fence) if self.by_transfer => {}
                    Some(JobCommand::Shutdown | JobCommand::Fence) | None => {
                        child.pause();
                        stopping = Some(Stopping::Shutdown);
                        stop_by = Some(tokio::time::Instant::now() + STOP_BOUND);
                    }
                },
                _ = tokio::time::sleep_until(kill_at), if stop_by.is_some() => {
                    tracing::warn!(job_id = job.id, "the transcoder did not stop within {:?}; killing it", STOP_BOUND);
                    child.kill().await;
                    stop_by = None;
                }
                _ = &mut deadline, if stopping.is_none() => {
                    child.kill().await;
                    let _ = child.wait().await;
                    let e = MediaError::new(FailureCode::Timeout, format!("the job ran longer than {timeout_hours} h"));
                    return self.fail_resumable(e).await;
                }
                // The download beside shows even while the encode waits for its bytes.
                _ = transfer_shown.tick(), if beside.is_some() => {
                    if last_publish.elapsed() >= PUBLISH_EVERY {
                        last_publish = Instant::now();
                        publish(&env, &job, beside.as_ref());
                    }
                }
                stop = ended(&mut beside), if beside.is_some() => {
                    beside = None;
                    if let Some(stop) = stop {
                        child.kill().await;
                        let _ = child.wait().await;
                        return self.stopped_by(stop).await;
                    }
                }
                _ = stall_check.tick() => {
                    if !job.stalled && last_progress.elapsed().as_secs() > STALLED_AFTER_SECS {
                        job.stalled = true;
                        self.update(JobChange { stalled: Some(true), ..Default::default() }).await?;
                        env.store.publish_progress(&job);
                        tracing::warn!(job_id = job.id, "job stalled: no progress for 10 minutes");
                    }
                }
            }
            if !events_open {
                break;
            }
        }
        let end = child.wait_within(STOP_BOUND).await;
        match (end, stopping) {
            // The node stops: the job stays as it is, to be continued after the restart.
            (_, Some(Stopping::Shutdown)) => Ok(None),
            // The child has exited (whether it finished its segment, the whole encode, or
            // was cut short): now the pause releases the lease.
            (_, Some(Stopping::Pause)) => {
                self.apply(JobEvent::Pause, JobChange::default(), self.ctx()).await?;
                Ok(None)
            }
            (_, Some(Stopping::Yield)) => {
                self.apply(JobEvent::Yield, JobChange::default(), self.ctx()).await?;
                Ok(None)
            }
            (ChildEnd::Busy, _) => self.busy().await,
            (ChildEnd::NotSmaller, _) => {
                let source = u64::try_from(job.source_size).unwrap_or(0);
                let (reason, detail) = match (not_smaller, searched) {
                    // The search predicted too large an output: nothing was encoded.
                    (None, Some((percent, max_size_percent))) => {
                        let reason = quality::search_skip_reason(percent, max_size_percent);
                        let detail = serde_json::json!({
                            "reason": reason, "predictedPercent": percent, "maxSizePercent": max_size_percent,
                        });
                        (reason, detail)
                    }
                    (projection, _) => {
                        let (projected, limit, frames_done) = projection.unwrap_or((0, 0, 0));
                        let reason = quality::not_smaller_reason(projected, limit, source);
                        let detail = serde_json::json!({
                            "reason": reason, "projectedSize": projected, "limit": limit, "framesDone": frames_done,
                        });
                        (reason, detail)
                    }
                };
                tracing::info!(job_id = job.id, "{reason}; skipped");
                let ctx = EventContext { detail: Some(detail), ..self.ctx() };
                let change = JobChange { skip_reason: Some(reason), ..Default::default() };
                self.apply(JobEvent::NotSmaller, change, ctx).await.map(|_| None)
            }
            (ChildEnd::Completed, _) => Ok(Some(Encoded { job, run_stats })),
            (ChildEnd::Paused | ChildEnd::Nothing, _) => {
                // Stopped by someone else (a signal to the process group): continue later.
                let e = MediaError::misc("the transcoder stopped without being asked");
                self.fail_resumable(e).await
            }
            (ChildEnd::Failed(e), _) => self.fail_resumable(e).await,
        }
    }

    /// Ends the attempt as `stop` says.
    pub(super) async fn stopped_by<T: super::Ended>(&self, stop: Stop) -> Result<T, LifecycleError> {
        match stop {
            Stop::Fail(e) => self.fail(e).await,
            Stop::Requeue(detail) => {
                tracing::warn!(job_id = self.job_id, %detail, "requeued");
                let ctx = EventContext { detail: Some(detail), ..self.ctx() };
                self.apply(JobEvent::Busy, JobChange::default(), ctx).await?;
                Ok(T::ended())
            }
        }
    }
}
