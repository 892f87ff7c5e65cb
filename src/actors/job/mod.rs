//! `JobSupervisor`: one actor per live job on this node. Each attempt runs in three parts:
//! `prepare` (recovery, analysis, plan), `supervise` (the transcoder child) and `commit`
//! (verification and replace), each applying its transitions through the job store and
//! carrying out their effects, while a heartbeat renews the job's lease. Pause, cancel and
//! shutdown arrive as commands. docs/ARCHITECTURE.md follows a job through them.

mod ahead;
mod by_transfer;
mod command;
mod commit;
mod heartbeat;
pub mod helper;
mod parts;
mod prepare;
pub mod remote;
pub mod span_by_transfer;
mod supervise;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::mpsc;

pub use self::command::JobCommand;
pub use self::heartbeat::LEASE_SECONDS;
use super::lifecycle::{EventContext, LifecycleError};
use super::store::{delete_partial_if, holds_lease, removes_partial, Applied, JobStore};
use crate::domain::job::{FailureCode, JobEvent};
use crate::domain::segments::Parallelism;
use crate::media::partial::PartialLock;
use crate::media::MediaError;
use crate::repo::jobs::JobChange;

const DB_WRITE_EVERY: Duration = Duration::from_secs(2);
const PUBLISH_EVERY: Duration = Duration::from_millis(250);
/// How long a transcoder asked to stop (pause, shutdown) may take to finish its segment
/// before it is killed: the job's lease is held until it has exited.
pub const STOP_BOUND: Duration = Duration::from_secs(20);

/// What every job on this node shares.
#[derive(Clone)]
pub struct NodeEnv {
    /// The job records: the database on the main node, the link on a linked node.
    pub store: Arc<dyn JobStore>,
    pub node_name: String,
    pub node_id: i32,
    /// The binary to start as `transcode` child (this executable).
    pub transcoder: PathBuf,
    pub segment_seconds: f64,
    /// Encoder sessions per job, from `PARALLEL_SEGMENTS`, the cores and the node's jobs.
    pub parallel_segments: Parallelism,
    pub cores: u32,
    pub max_jobs: u32,
    /// Test and benchmark aid: slows each encoded frame (see `EncodePlan`).
    pub throttle_ms_per_frame: u64,
    /// Base time limit of a validation or verification child (see `media::worker`).
    pub analysis_timeout: Duration,
    /// A linked node that takes files it does not see: how it reaches the main node for
    /// them, and its WORK_DIR (`by_transfer`). `None` on the main node and on a node with
    /// `SHARED_STORAGE=required`.
    pub transfer: Option<Arc<crate::actors::transfer::TransferSetup>>,
    /// A linked node's record of the files its jobs did not find at their paths, which its
    /// link reports as libraries not seen; `None` on the main node.
    pub not_here: Option<crate::host::sight::NotHere>,
}

/// Job `job_id`'s file, when no regular file is at its path here; `None` when it is, or the
/// job cannot be read (the attempt or helper then says why).
pub async fn missing_source(env: &NodeEnv, job_id: i32) -> Option<PathBuf> {
    let job = env.store.job(job_id).await.ok()?;
    let source = crate::repo::jobs::source_path(&job);
    let at = source.clone();
    let here = tokio::task::spawn_blocking(move || std::fs::metadata(at).is_ok_and(|m| m.is_file())).await;
    (!here.unwrap_or(true)).then_some(source)
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Command(pub JobCommand);

/// A job's supervisor stopped, whatever the attempt's end: its slot is free.
#[derive(Message)]
#[rtype(result = "()")]
pub struct JobEnded {
    pub job_id: i32,
}

pub struct JobSupervisor {
    pub job_id: i32,
    pub lease_id: String,
    pub env: Arc<NodeEnv>,
    /// This node does not see the file: it fetches it and sends the output back
    /// (`by_transfer`).
    pub by_transfer: bool,
    /// Told when this supervisor stops (the node's slots).
    ended: Recipient<JobEnded>,
    commands: Option<mpsc::UnboundedSender<JobCommand>>,
}

impl JobSupervisor {
    pub fn new(job_id: i32, lease_id: String, env: Arc<NodeEnv>, ended: Recipient<JobEnded>) -> Self {
        JobSupervisor { job_id, lease_id, env, by_transfer: false, ended, commands: None }
    }

    /// A job this node takes by transfer (`by_transfer`).
    pub fn taken_by_transfer(mut self, by_transfer: bool) -> Self {
        self.by_transfer = by_transfer;
        self
    }
}

impl Actor for JobSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.commands = Some(tx.clone());
        let heartbeat = heartbeat::Heartbeat {
            store: self.env.store.clone(),
            job_id: self.job_id,
            lease_id: self.lease_id.clone(),
            on_lost: tx,
        };
        let mut attempt = Attempt {
            env: self.env.clone(),
            job_id: self.job_id,
            lease_id: self.lease_id.clone(),
            commands: rx,
            by_transfer: self.by_transfer,
        };
        let job_id = self.job_id;
        ctx.spawn(
            async move {
                // The library's folder is here but not the file (a stale share, another disk
                // mounted there): a linked node counts the library as not seen from now on
                // (`host::sight::NotHere`), and rather than fail the attempt on a file that is
                // fine it fetches the file if it takes files by transfer, or gives the job
                // back to the queue.
                let mut give_back = false;
                if let (Some(not_here), false) = (attempt.env.not_here.clone(), attempt.by_transfer) {
                    if let Some(source) = missing_source(&attempt.env, job_id).await {
                        not_here.add(source);
                        if attempt.env.transfer.is_some() {
                            tracing::info!(job_id, "the job's file is not here: the job goes by transfer");
                            attempt.by_transfer = true;
                        } else {
                            tracing::warn!(job_id, "the job's file is not here: the job goes back to the queue");
                            give_back = true;
                        }
                    }
                }
                let run = async move {
                    if give_back {
                        attempt.file_not_here().await
                    } else if attempt.by_transfer {
                        attempt.run_by_transfer().await
                    } else {
                        attempt.run().await
                    }
                };
                if let Err(e) = heartbeat.around(run).await {
                    tracing::error!(job_id, error = %e, "job supervisor stopped on an error");
                }
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        );
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        tracing::debug!(job_id = self.job_id, "the job's attempt here ended: its slot is free");
        self.ended.do_send(JobEnded { job_id: self.job_id });
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

/// One attempt at a job, under one lease.
struct Attempt {
    env: Arc<NodeEnv>,
    job_id: i32,
    lease_id: String,
    commands: mpsc::UnboundedReceiver<JobCommand>,
    /// The job was taken by transfer: its copy and its partial output are this node's own,
    /// in WORK_DIR, so a node cut off from the main node (`JobCommand::Fence`) goes on with
    /// it; nothing another node could be given touches them, and what goes back to the main
    /// node carries the lease, which it checks.
    by_transfer: bool,
}

enum Step {
    Continue,
    Stop,
}

/// How a part of the attempt ended: the attempt goes on with `T`, or it is over (its
/// transition applied, or the job left as it is for a restart or for another node).
type Phase<T> = Result<Option<T>, LifecycleError>;

/// What a part of the attempt answers once the attempt has ended in it: `None` from a part
/// it would have gone on from (a `Phase`), nothing from the commit, the last. Lets a part
/// end the attempt with `return self.fail(e).await;` whatever it answers.
trait Ended {
    fn ended() -> Self;
}

impl Ended for () {
    fn ended() {}
}

impl<T> Ended for Option<T> {
    fn ended() -> Self {
        None
    }
}

impl Attempt {
    async fn run(mut self) -> Result<(), LifecycleError> {
        let Some(prepared) = self.prepare(None, None).await? else { return Ok(()) };
        let Some(encoded) = self.supervise(&prepared, None).await? else { return Ok(()) };
        self.commit(prepared, encoded).await
    }

    fn node(&self) -> Option<String> {
        Some(self.env.node_name.clone())
    }

    /// Gives the job back to the queue: its file is not at its path on this node, which does
    /// not take files by transfer. Not the file's failure; the node no longer counts the
    /// library as seen (`NodeEnv::not_here`), so the job goes to a node that sees it.
    async fn file_not_here(self) -> Result<(), LifecycleError> {
        let detail =
            serde_json::json!({ "reason": format!("the file is not at its path on node {}", self.env.node_name) });
        let ctx = EventContext { detail: Some(detail), ..self.ctx() };
        self.apply(JobEvent::Busy, JobChange::default(), ctx).await.map(|_| ())
    }

    fn ctx(&self) -> EventContext {
        EventContext { node: self.node(), ..Default::default() }
    }

    async fn apply(&self, event: JobEvent, patch: JobChange, ctx: EventContext) -> Result<Applied, LifecycleError> {
        self.apply_holding(event, patch, ctx, None).await
    }

    /// Applies `event` under this attempt's lease. The store removes the partial output
    /// before it records a transition that removes it, under the folder's lock; where this
    /// attempt holds that lock already (`held`, the commit), no second open can take it, so
    /// the folder goes here, under the lock held, first.
    async fn apply_holding(
        &self,
        event: JobEvent,
        patch: JobChange,
        ctx: EventContext,
        held: Option<PartialLock>,
    ) -> Result<Applied, LifecycleError> {
        if let Some(lock) = held {
            let current = self.env.store.job(self.job_id).await?;
            if holds_lease(&current, &self.lease_id) && removes_partial(&current, &event) {
                match tokio::task::spawn_blocking(move || lock.remove()).await.map_err(join_error) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) | Err(e) => {
                        tracing::warn!(job_id = self.job_id, error = %e, "could not remove the partial output")
                    }
                }
            }
        }
        let applied = self.env.store.apply(self.job_id, &self.lease_id, event, patch, ctx).await?;
        // Gone already where the main node sees the folder at the same path; a linked node
        // that sees it elsewhere removes it here.
        delete_partial_if(&applied).await;
        Ok(applied)
    }

    async fn update(&self, patch: JobChange) -> Result<(), LifecycleError> {
        self.env.store.update_live(self.job_id, &self.lease_id, patch).await
    }

    /// Fails the attempt; its partial output goes with it.
    async fn fail<T: Ended>(&self, e: MediaError) -> Result<T, LifecycleError> {
        self.fail_attempt(e, false, None).await
    }

    /// `fail` while holding the partial output's lock (the commit, from verification on):
    /// the folder is removed under that lock, which no second open could take.
    async fn fail_holding<T: Ended>(&self, e: MediaError, held: PartialLock) -> Result<T, LifecycleError> {
        self.fail_attempt(e, false, Some(held)).await
    }

    /// Fails an attempt whose transcoder stopped while encoding: the segments it finished
    /// are good, and the retry continues from them.
    async fn fail_resumable<T: Ended>(&self, e: MediaError) -> Result<T, LifecycleError> {
        self.fail_attempt(e, true, None).await
    }

    async fn fail_attempt<T: Ended>(
        &self,
        e: MediaError,
        resumable: bool,
        held: Option<PartialLock>,
    ) -> Result<T, LifecycleError> {
        tracing::warn!(job_id = self.job_id, code = e.code.as_str(), message = %e.message, resumable, "job attempt failed");
        let ctx = EventContext { node: self.node(), detail: None, failure_detail: Some(e.message) };
        self.apply_holding(JobEvent::Fail { code: e.code, resumable }, JobChange::default(), ctx, held).await?;
        Ok(T::ended())
    }

    /// Handles a command that arrived outside the encode loop.
    async fn check_commands(&mut self) -> Result<Step, LifecycleError> {
        if let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                JobCommand::Pause => {
                    self.apply(JobEvent::Pause, JobChange::default(), self.ctx()).await?;
                    return Ok(Step::Stop);
                }
                JobCommand::Yield => {
                    self.apply(JobEvent::Yield, JobChange::default(), self.ctx()).await?;
                    return Ok(Step::Stop);
                }
                JobCommand::Cancel => {
                    self.apply(JobEvent::Cancel, JobChange::default(), self.ctx()).await?;
                    return Ok(Step::Stop);
                }
                JobCommand::Fence if self.by_transfer => {}
                JobCommand::Shutdown | JobCommand::Fence | JobCommand::LeaseLost => return Ok(Step::Stop),
            }
        }
        Ok(Step::Continue)
    }

    /// The partial output is locked by another transcoder (an earlier attempt still
    /// stopping): back to the queue, without using a retry or touching the folder.
    async fn busy<T: Ended>(&self) -> Result<T, LifecycleError> {
        tracing::info!(job_id = self.job_id, "the partial output is in use by another transcoder; requeued");
        self.apply(JobEvent::Busy, JobChange::default(), self.ctx()).await?;
        Ok(T::ended())
    }

    /// Fencing: only the node holding the job's current lease may touch the original.
    async fn lease_is_mine(&self) -> bool {
        self.env.store.lease_is_mine(self.job_id, &self.lease_id).await
    }
}
