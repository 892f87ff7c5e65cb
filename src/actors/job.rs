//! `JobSupervisor`: one actor per live job on this node. It analyses the source, runs the
//! transcoder child, verifies the result and replaces the original, applying each
//! transition through `Lifecycle` and carrying out its effects. Pause, cancel and shutdown
//! arrive as commands.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use entities::job;
use tokio::sync::mpsc;

use super::lifecycle::{Context as EventContext, LifecycleError};
use super::node::{JobEnded, NodeSupervisor};
use super::store::{delete_partial_if, Applied, JobPatch, JobStore};
use crate::domain::health::STALLED_AFTER_SECS;
use crate::domain::job::{FailureCode, JobEvent};
use crate::domain::retry::{profile_for_attempt, EncodeSettings, Encoder};
use crate::media::child::{ChildEnd, Transcoder};
use crate::media::encode::Event;
use crate::media::partial::remove_partial;
use crate::media::partial::{self, PinnedOutput};
use crate::media::plan::{decide, final_path, Decision, EncodePlan, SourceIdentity};
use crate::media::probe::{HdrKind, MediaInfo};
use crate::media::replace::{recover, replace, Recovered, Replace, Swapped};
use crate::media::worker;
use crate::media::MediaError;

/// How long a lease lasts without renewal; progress renews it.
pub const LEASE_SECONDS: i64 = 120;
const DB_WRITE_EVERY: Duration = Duration::from_secs(2);
const PUBLISH_EVERY: Duration = Duration::from_millis(250);
/// How long a transcoder asked to stop (pause, shutdown) may take to finish its segment
/// before it is killed: the job's lease is held until it has exited.
pub const STOP_BOUND: Duration = Duration::from_secs(20);

/// What every job on this node shares.
pub struct NodeEnv {
    /// The job records: the database on the main node, the link on a linked node.
    pub store: Arc<dyn JobStore>,
    pub node_name: String,
    pub node_id: i32,
    /// The binary to start as `transcode` child (this executable).
    pub transcoder: PathBuf,
    pub segment_seconds: f64,
    /// Test and benchmark aid: slows each encoded frame (see `EncodePlan`).
    pub throttle_ms_per_frame: u64,
    /// Base time limit of a validation or verification child (see `media::worker`).
    pub analysis_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum JobCommand {
    Pause,
    Cancel,
    /// The node is stopping: finish the current segment and leave the job as it is, to be
    /// continued after the restart.
    Shutdown,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Command(pub JobCommand);

pub struct JobSupervisor {
    pub job_id: i32,
    pub lease_id: String,
    pub env: Arc<NodeEnv>,
    pub node: Addr<NodeSupervisor>,
    commands: Option<mpsc::UnboundedSender<JobCommand>>,
}

impl JobSupervisor {
    pub fn new(job_id: i32, lease_id: String, env: Arc<NodeEnv>, node: Addr<NodeSupervisor>) -> Self {
        JobSupervisor { job_id, lease_id, env, node, commands: None }
    }
}

impl Actor for JobSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.commands = Some(tx);
        let run = Run { env: self.env.clone(), job_id: self.job_id, lease_id: self.lease_id.clone(), commands: rx };
        let job_id = self.job_id;
        ctx.spawn(
            async move {
                if let Err(e) = run.run().await {
                    tracing::error!(job_id, error = %e, "job supervisor stopped on an error");
                }
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        );
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.node.do_send(JobEnded { job_id: self.job_id });
    }
}

impl Handler<Command> for JobSupervisor {
    type Result = ();

    fn handle(&mut self, msg: Command, _: &mut Context<Self>) {
        if let Some(tx) = &self.commands {
            let _ = tx.send(msg.0);
        }
    }
}

fn join_error(e: tokio::task::JoinError) -> MediaError {
    MediaError::new(FailureCode::TranscoderCrashed, format!("a worker thread failed: {e}"))
}

struct Run {
    env: Arc<NodeEnv>,
    job_id: i32,
    lease_id: String,
    commands: mpsc::UnboundedReceiver<JobCommand>,
}

enum Step {
    Continue,
    Stop,
}

impl Run {
    fn node(&self) -> Option<String> {
        Some(self.env.node_name.clone())
    }

    fn ctx(&self) -> EventContext {
        EventContext { node: self.node(), ..Default::default() }
    }

    async fn apply(&self, event: JobEvent, patch: JobPatch, ctx: EventContext) -> Result<Applied, LifecycleError> {
        let applied = self.env.store.apply(self.job_id, &self.lease_id, event, patch, ctx).await?;
        delete_partial_if(&applied).await;
        Ok(applied)
    }

    async fn update(&self, patch: JobPatch) -> Result<(), LifecycleError> {
        self.env.store.update_live(self.job_id, &self.lease_id, patch).await
    }

    /// Fails the attempt; its partial output goes with it.
    async fn fail(&self, e: MediaError) -> Result<(), LifecycleError> {
        self.fail_attempt(e, false).await
    }

    /// Fails an attempt whose transcoder stopped while encoding: the segments it finished
    /// are good, and the retry continues from them.
    async fn fail_resumable(&self, e: MediaError) -> Result<(), LifecycleError> {
        self.fail_attempt(e, true).await
    }

    async fn fail_attempt(&self, e: MediaError, resumable: bool) -> Result<(), LifecycleError> {
        tracing::warn!(job_id = self.job_id, code = e.code.as_str(), message = %e.message, resumable, "job attempt failed");
        let ctx = EventContext { node: self.node(), detail: None, failure_detail: Some(e.message) };
        self.apply(JobEvent::Fail { code: e.code, resumable }, JobPatch::default(), ctx).await?;
        Ok(())
    }

    /// Handles a command that arrived outside the encode loop.
    async fn check_commands(&mut self) -> Result<Step, LifecycleError> {
        if let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                JobCommand::Pause => {
                    self.apply(JobEvent::Pause, JobPatch::default(), self.ctx()).await?;
                    return Ok(Step::Stop);
                }
                JobCommand::Cancel => {
                    self.apply(JobEvent::Cancel, JobPatch::default(), self.ctx()).await?;
                    return Ok(Step::Stop);
                }
                JobCommand::Shutdown => return Ok(Step::Stop),
            }
        }
        Ok(Step::Continue)
    }

    async fn run(mut self) -> Result<(), LifecycleError> {
        let env = self.env.clone();
        let job = env.store.job(self.job_id).await?;
        let path = PathBuf::from(&job.file_path);

        // Recovery acts on what the partial folder's intent says: not while someone else
        // holds the folder (a stale attempt may be in the middle of its swap).
        let dir = crate::media::layout::partial_dir_for(&path);
        let held = match tokio::task::spawn_blocking(move || partial::lock_if_exists(&dir)).await.map_err(join_error) {
            Ok(Ok(Some(Ok(lock)))) => Some(lock),
            Ok(Ok(Some(Err(partial::Held::Busy)))) => return self.busy().await,
            Ok(Ok(None)) => None,
            Ok(Err(e)) | Err(e) => return self.fail(e).await,
        };
        // A replace interrupted by a crash is finished or undone first, as its own intent
        // says. A replace that had swapped the files completes the job: its output, verified
        // before the swap, is in place; nothing is encoded again.
        let p = path.clone();
        let recovered = tokio::task::spawn_blocking(move || recover(&p)).await.map_err(join_error);
        drop(held);
        match recovered {
            Ok(Ok(Recovered::RolledForward(swapped))) => return self.complete_swapped(&path, swapped).await,
            Ok(Ok(Recovered::RolledBack)) => {
                tracing::info!(job_id = job.id, "undid a replace interrupted before its swap")
            }
            Ok(Ok(Recovered::Nothing)) => {
                if let Some(swapped) = swapped_on_record(&job) {
                    return self.complete_swapped(&path, swapped).await;
                }
            }
            Ok(Err(e)) | Err(e) => return self.fail(e).await,
        }
        // Guessing a default here would delete originals a user asked to keep.
        let (keep_originals, timeout_hours) = match env.store.job_settings().await {
            Ok(settings) => settings,
            Err(e) => return self.fail(MediaError::misc(format!("the settings could not be read: {e}"))).await,
        };

        let info = match worker::validate(&env.transcoder, &path, env.analysis_timeout).await {
            Ok(info) => info,
            Err(e) => return self.fail(e).await,
        };
        let video = info.video().cloned();
        let analysis = JobPatch {
            source_codec: video.as_ref().map(|v| v.codec.clone()),
            source_size: Some(i64::try_from(info.size_bytes).unwrap_or(i64::MAX)),
            duration_seconds: info.duration_seconds,
            source_bitrate: info.bit_rate,
            hdr: Some(info.hdr.kind.as_str().to_string()),
            probe: serde_json::to_value(&info).ok(),
            ..Default::default()
        };
        self.update(analysis).await?;
        if let Step::Stop = self.check_commands().await? {
            return Ok(());
        }

        let library = match job.library_id {
            Some(id) => Some(env.store.library(id).await?),
            None => None,
        };
        let target = job.target_codec.clone();
        let skip = match decide(&info, &target, job.forced) {
            Ok(Decision::Skip { .. }) => true,
            Ok(Decision::Encode) => false,
            Err(e) => return self.fail(e).await,
        };
        let patch = JobPatch { stage: (!skip).then(|| "ENCODING".to_string()), ..Default::default() };
        let job = self.apply(JobEvent::Analyzed { skip }, patch, self.ctx()).await?.job;
        if skip {
            return Ok(());
        }
        let plan = match self.plan(&job, &info, library.as_ref()) {
            Ok(plan) => plan,
            Err(e) => return self.fail(e).await,
        };
        self.encode(job, info, plan, keep_originals, timeout_hours).await
    }

    fn plan(
        &self,
        job: &job::Model,
        info: &MediaInfo,
        library: Option<&entities::library::Model>,
    ) -> Result<EncodePlan, MediaError> {
        let (encoder, quality, preset) = match library {
            Some(l) => (l.encoder.clone(), l.quality, l.preset.clone()),
            None => (default_encoder(&job.target_codec).to_string(), 28, "medium".to_string()),
        };
        let encoder: Encoder = encoder.parse().map_err(|e| MediaError::misc(format!("{e}")))?;
        let ten_bit = info.video().and_then(|v| v.bit_depth).unwrap_or(8) > 8;
        let settings = EncodeSettings {
            encoder,
            hardware_decode: false,
            ten_bit_allowed: true,
            preset: Some(preset),
            quality: u32::try_from(quality).ok(),
            source_is_ten_bit_hdr: ten_bit && info.hdr.kind != HdrKind::Sdr,
        };
        let profile = profile_for_attempt(&settings, u32::try_from(job.retry_count).unwrap_or(0));
        let mut plan = EncodePlan::new(
            Path::new(&job.file_path),
            info,
            &job.target_codec,
            profile.encoder.as_str(),
            profile.quality.and_then(|q| i32::try_from(q).ok()).unwrap_or(quality),
            profile.preset.as_deref().unwrap_or("medium"),
        )?;
        plan.segment_seconds = self.env.segment_seconds;
        plan.throttle_ms_per_frame = self.env.throttle_ms_per_frame;
        plan.epoch = self.lease_id.clone();
        Ok(plan)
    }

    async fn encode(
        &mut self,
        mut job: job::Model,
        info: MediaInfo,
        plan: EncodePlan,
        keep_originals: bool,
        timeout_hours: u64,
    ) -> Result<(), LifecycleError> {
        let env = self.env.clone();
        let mut child = match Transcoder::spawn(&env.transcoder, &plan).await {
            Ok(c) => c,
            Err(e) => return self.fail(e).await,
        };
        let deadline = tokio::time::sleep(Duration::from_secs(timeout_hours * 3600));
        tokio::pin!(deadline);
        let mut stall_check = tokio::time::interval(Duration::from_secs(30));
        let started = Instant::now();
        let start_percent = job.progress;
        let mut last_progress = Instant::now();
        let (mut last_write, mut last_publish) = (Instant::now(), Instant::now());
        let mut run_stats: Option<(u64, u64)> = None;
        let mut stopping: Option<JobCommand> = None;
        let mut stop_by: Option<tokio::time::Instant> = None;
        let mut events_open = true;

        loop {
            let kill_at = stop_by.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                event = child.events.recv(), if events_open => match event {
                    Some(Event::Progress { fps, percent, .. }) => {
                        last_progress = Instant::now();
                        job.progress = percent;
                        job.fps = fps;
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
                            let patch = JobPatch {
                                progress: Some(job.progress),
                                fps: Some(job.fps),
                                eta_seconds: job.eta_seconds,
                                stalled: Some(false),
                                last_progress_at: Some(now),
                                lease_expires_at: Some(now + chrono::Duration::seconds(LEASE_SECONDS)),
                                ..Default::default()
                            };
                            self.update(patch).await?;
                        }
                        if last_publish.elapsed() >= PUBLISH_EVERY {
                            last_publish = Instant::now();
                            env.store.publish_progress(&job);
                        }
                    }
                    Some(Event::Done { cpu_ms, wall_ms, .. }) => run_stats = Some((cpu_ms, wall_ms)),
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
                        stopping = Some(JobCommand::Pause);
                        stop_by = Some(tokio::time::Instant::now() + STOP_BOUND);
                    }
                    Some(JobCommand::Cancel) => {
                        child.kill().await;
                        let _ = child.wait().await;
                        let applied =
                            env.store.apply(job.id, &self.lease_id, JobEvent::Cancel, JobPatch::default(), self.ctx()).await?;
                        delete_partial_if(&applied).await;
                        return Ok(());
                    }
                    Some(JobCommand::Shutdown) | None => {
                        child.pause();
                        stopping = Some(JobCommand::Shutdown);
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
                _ = stall_check.tick() => {
                    if !job.stalled && last_progress.elapsed().as_secs() > STALLED_AFTER_SECS {
                        job.stalled = true;
                        self.update(JobPatch { stalled: Some(true), ..Default::default() }).await?;
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
            (_, Some(JobCommand::Shutdown)) => Ok(()),
            // The child has exited (whether it finished its segment, the whole encode, or
            // was cut short): now the pause releases the lease.
            (_, Some(JobCommand::Pause)) => {
                self.apply(JobEvent::Pause, JobPatch::default(), self.ctx()).await?;
                Ok(())
            }
            (ChildEnd::Busy, _) => self.busy().await,
            (ChildEnd::Completed, _) => self.finish(job, info, plan, keep_originals, run_stats).await,
            (ChildEnd::Paused, _) => {
                // Stopped by someone else (a signal to the process group): continue later.
                let e = MediaError::misc("the transcoder stopped without being asked");
                self.fail_resumable(e).await
            }
            (ChildEnd::Failed(e), _) => self.fail_resumable(e).await,
        }
    }

    async fn finish(
        &self,
        mut job: job::Model,
        info: MediaInfo,
        plan: EncodePlan,
        keep_originals: bool,
        run_stats: Option<(u64, u64)>,
    ) -> Result<(), LifecycleError> {
        let env = self.env.clone();
        job.stage = Some("TRANSFERRING".into());
        self.update(JobPatch { stage: job.stage.clone(), ..Default::default() }).await?;
        env.store.publish_progress(&job);

        let output = plan.output_path();
        // The lock is held from verification through the replace, and the output is
        // pinned (held open, its identity compared before the swap): the file renamed over
        // the original is the file verified, and nobody writes the folder meanwhile.
        let (o, dir) = (output.clone(), plan.partial_dir.clone());
        let held = tokio::task::spawn_blocking(move || -> Result<Option<_>, MediaError> {
            let Ok(lock) = partial::lock(&dir)? else { return Ok(None) };
            let pinned = PinnedOutput::open(&o)?;
            Ok(Some((lock, pinned)))
        })
        .await
        .map_err(join_error);
        let (mut lock, pinned) = match held {
            Ok(Ok(Some(held))) => held,
            Ok(Ok(None)) => return self.busy().await,
            Ok(Err(e)) | Err(e) => return self.fail(e).await,
        };
        let verified = match worker::verify_output(
            &env.transcoder,
            &output,
            &plan.input,
            &info,
            &plan.target_codec,
            env.analysis_timeout,
        )
        .await
        {
            Ok(v) => v,
            Err(e) => return self.fail(e).await,
        };
        if let Err(e) = pinned.check() {
            return self.fail(e).await;
        }
        let (cpu, wall) = run_stats.unwrap_or((0, 0));
        let source = PathBuf::from(&job.file_path);
        let mut set = JobPatch {
            encoder: Some(plan.encoder.clone()),
            cpu_time_ms: Some(job.cpu_time_ms.unwrap_or(0) + i64::try_from(cpu).unwrap_or(0)),
            wall_time_ms: Some(job.wall_time_ms.unwrap_or(0) + i64::try_from(wall).unwrap_or(0)),
            ..Default::default()
        };
        let mut detail = serde_json::json!({"outputSize": verified.size_bytes});
        if verified.size_bytes >= info.size_bytes {
            // Nothing saved: the original stays, the output goes.
            set.output_size = Some(i64::try_from(info.size_bytes).unwrap_or(i64::MAX));
            detail = serde_json::json!({"keptOriginal": true, "reason": "the encoded file was not smaller"});
        } else {
            // Asked of the store while the lock is held; the replace checks the answer
            // right before the swap (a blocking thread cannot ask the store itself).
            let mine = self.lease_is_mine().await;
            if !mine {
                drop(lock);
                let e = MediaError::misc("this node no longer holds the job's lease; the original was left as it is");
                return self.fail(e).await;
            }
            let target = final_path(&source, &plan.target_codec);
            let (s, o, t, identity) = (source.clone(), output.clone(), target.clone(), plan.source);
            let replaced = tokio::task::spawn_blocking(move || {
                let mut steps = Vec::new();
                pinned.check()?;
                let r = Replace { source: &s, identity, output: &o, final_path: &t, keep_original: keep_originals };
                replace(&r, &|| mine && pinned.check().is_ok(), &mut |step| steps.push(step.name()))?;
                Ok::<_, MediaError>((steps, lock))
            })
            .await
            .map_err(join_error);
            let (steps, held) = match replaced {
                Ok(Ok(done)) => done,
                Ok(Err(e)) | Err(e) => return self.fail(e).await,
            };
            lock = held;
            for step in steps {
                env.store.record_event(job.id, &self.lease_id, step, self.node(), None).await?;
            }
            let identity = SourceIdentity::of(&target).ok();
            set.output_size = Some(i64::try_from(verified.size_bytes).unwrap_or(i64::MAX));
            set.source_mtime_ns = identity.map(|i| i.mtime_ns);
            set.source_inode = identity.map(|i| i64::try_from(i.inode).unwrap_or(0));
            if target != source {
                set.file_path = Some(target.to_string_lossy().into_owned());
                set.file_name = target.file_name().map(|n| n.to_string_lossy().into_owned());
            }
        }
        let ctx = EventContext { node: self.node(), detail: Some(detail), failure_detail: None };
        if set.source_inode.is_some() {
            // The swap is on the job's row before its folder (and the intent in it) goes: a
            // crash between the removal and the completion completes the job from the row
            // (see `swapped_on_record`) instead of taking the output for a new source. The
            // path stays the source's until the completion, so the folder is found by it.
            let swapped = JobPatch { file_path: None, file_name: None, ..set.clone() };
            self.update(swapped).await?;
        }
        // The folder goes before the completion is recorded, under the lock held since
        // verification, so that a COMPLETED job never leaves a partial output behind.
        match tokio::task::spawn_blocking(move || lock.remove()).await.map_err(join_error) {
            Ok(Ok(())) => {}
            Ok(Err(e)) | Err(e) => tracing::warn!(job_id = job.id, error = %e, "could not remove the partial output"),
        }
        self.apply(JobEvent::Complete, set, ctx).await?;
        Ok(())
    }

    /// The partial output is locked by another transcoder (an earlier attempt still
    /// stopping): back to the queue, without using a retry or touching the folder.
    async fn busy(&self) -> Result<(), LifecycleError> {
        tracing::info!(job_id = self.job_id, "the partial output is in use by another transcoder; requeued");
        self.apply(JobEvent::Busy, JobPatch::default(), self.ctx()).await?;
        Ok(())
    }

    /// Completes a job whose replace swapped the files before a crash (see `recover`).
    async fn complete_swapped(&self, source: &Path, swapped: Swapped) -> Result<(), LifecycleError> {
        tracing::info!(job_id = self.job_id, "the replace had swapped the files before a restart; completing the job");
        let stage = JobPatch { stage: Some("TRANSFERRING".into()), ..Default::default() };
        self.apply(JobEvent::Analyzed { skip: false }, stage, self.ctx()).await?;
        let identity = SourceIdentity::of(&swapped.final_path).ok();
        let mut set = JobPatch {
            output_size: Some(i64::try_from(swapped.output_size).unwrap_or(i64::MAX)),
            source_mtime_ns: identity.map(|i| i.mtime_ns),
            source_inode: identity.map(|i| i64::try_from(i.inode).unwrap_or(0)),
            ..Default::default()
        };
        if swapped.final_path != source {
            set.file_path = Some(swapped.final_path.to_string_lossy().into_owned());
            set.file_name = swapped.final_path.file_name().map(|n| n.to_string_lossy().into_owned());
        }
        let detail = serde_json::json!({"outputSize": swapped.output_size, "rolledForward": true});
        let ctx = EventContext { node: self.node(), detail: Some(detail), failure_detail: None };
        self.apply(JobEvent::Complete, set, ctx).await?;
        let dir = crate::media::layout::partial_dir_for(source);
        let _ = tokio::task::spawn_blocking(move || remove_partial(&dir)).await;
        Ok(())
    }

    /// Fencing: only the node holding the job's current lease may touch the original.
    async fn lease_is_mine(&self) -> bool {
        self.env.store.lease_is_mine(self.job_id, &self.lease_id).await
    }
}

/// A swap this job's last attempt recorded on its row (an output size, and the file at its
/// path being the output the row names) before it removed its partial output and crashed
/// short of completing: the job completes without encoding the output again.
fn swapped_on_record(job: &job::Model) -> Option<Swapped> {
    let size = u64::try_from(job.output_size?).ok()?;
    let target = final_path(Path::new(&job.file_path), &job.target_codec);
    let now = SourceIdentity::of(&target).ok()?;
    let recorded = u64::try_from(job.source_inode?).ok()?;
    (now.inode == recorded && now.size == size).then_some(Swapped { final_path: target, output_size: size })
}

pub fn default_encoder(codec: &str) -> &'static str {
    if codec == "av1" {
        "libsvtav1"
    } else {
        "libx265"
    }
}
