//! `NodeSupervisor`: the local node's job slots. It starts a `JobSupervisor` per job the
//! scheduler gives it, routes commands to them, and on shutdown asks each to stop at a
//! segment boundary so the work continues after the restart.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::health_batch::{check_told, BatchAnswer};
use super::job::helper::{self, HelperRef};
use super::job::span_by_transfer;
use super::job::{Command, JobCommand, JobEnded, JobSupervisor, NodeEnv};
use crate::media::health::Depth;

#[derive(Message)]
#[rtype(result = "bool")]
pub struct StartJob {
    pub job_id: i32,
    pub lease_id: String,
    /// The node does not see the file: it takes it by transfer (issue 39). A node that
    /// takes only files it sees (`SHARED_STORAGE=required`) refuses such a job.
    pub by_transfer: bool,
}

/// A span of a job to encode beside its run (`actors::job::helper`); answers whether a
/// slot took it.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct StartHelper(pub HelperRef);

#[derive(Message)]
#[rtype(result = "()")]
struct HelperEnded {
    job_id: i32,
    span: u32,
}

#[derive(Message)]
#[rtype(result = "Vec<HelperRef>")]
pub struct RunningHelpers;

/// A library health check (`actors::health`) asks for an idle slot; answers whether it got
/// one. The slot counts as busy until `CheckEnded`, so the scheduler gives no job to it
/// meanwhile: a running check may finish.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct ReserveCheck;

/// A health check's slot is free again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CheckEnded;

/// A batch of a library health check the main node gives this (linked) node
/// (`protocol::Call::HealthBatch`): checked on one idle slot, each path contained again
/// against `told`, the library paths the main node told it (`health_batch::check_told`).
/// `BatchAnswer::Busy` when no slot is idle.
#[derive(Message)]
#[rtype(result = "BatchAnswer")]
pub struct CheckTold {
    pub library_id: i32,
    pub depth: Depth,
    pub told: Vec<String>,
    pub roots: Vec<String>,
    pub paths: Vec<PathBuf>,
}

/// Stops the told batches of library `library_id` (its run was cancelled on the main node):
/// their children are killed and their slots freed. Answers how many it stopped.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct CancelTold {
    pub library_id: i32,
}

/// A told batch ended (checked or stopped): its slot is free again.
#[derive(Message)]
#[rtype(result = "()")]
struct ToldEnded(u64);

/// Frees the slot a told batch holds when its check ends, however it ends (a stop drops it).
struct Held(Addr<NodeSupervisor>, u64);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.do_send(ToldEnded(self.1));
    }
}

/// Free job slots, and which library paths the node sees (`domain::node::sees_library`: it
/// gets jobs only of libraries it sees).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCapacity {
    pub free: usize,
    pub missing_paths: Vec<String>,
    /// The paths `missing_paths` was checked against; `None`: every path (the main node's
    /// own, or a linked node older than this report).
    #[serde(default)]
    pub checked_paths: Option<Vec<String>>,
    /// It takes jobs of libraries it does not see, by transfer (`domain::placement`).
    #[serde(default)]
    pub transfer: bool,
    /// Free bytes in its WORK_DIR, for files taken by transfer.
    #[serde(default)]
    pub work_dir_free_bytes: Option<u64>,
    /// The jobs whose folders it keeps in WORK_DIR from an earlier attempt: such a job
    /// goes back to it first (`domain::placement::choose`).
    #[serde(default)]
    pub kept_jobs: Vec<i32>,
}

#[derive(Message)]
#[rtype(result = "NodeCapacity")]
pub struct Capacity;

/// Sends a command to the job if it runs here; answers whether it does.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct ControlJob {
    pub job_id: i32,
    pub command: JobCommand,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Wake;

#[derive(Message)]
#[rtype(result = "()")]
pub struct SetScheduler(pub Recipient<Wake>);

/// Stops every job at a segment boundary; resolves when all have ended (or after a bound).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// A job running on a node, with the lease it runs under.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningJob {
    pub job_id: i32,
    pub lease_id: String,
}

#[derive(Message)]
#[rtype(result = "Vec<RunningJob>")]
pub struct RunningJobs;

/// Stops every running encode at a segment boundary, leaving their records as they are (a
/// linked node cut off from the main node fences itself this way); transfers go on
/// (`JobCommand::Fence`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopAll;

pub struct NodeSupervisor {
    env: Arc<NodeEnv>,
    max_jobs: usize,
    jobs: HashMap<i32, (Addr<JobSupervisor>, String)>,
    /// Helpers by (job, span): their lease and their command channel. Each takes a slot.
    helpers: HashMap<(i32, u32), (HelperRef, tokio::sync::mpsc::UnboundedSender<JobCommand>)>,
    /// Slots held by library health checks (this node's own, and told batches).
    checks: usize,
    /// Told batches in progress, by a number of their own: their library, and how to stop
    /// them.
    told: HashMap<u64, (i32, tokio::task::AbortHandle)>,
    next_told: u64,
    /// Whether it takes jobs by transfer (`domain::placement::takes_transfers`).
    takes_transfers: bool,
    scheduler: Option<Recipient<Wake>>,
    shutting_down: bool,
    waiters: Vec<oneshot::Sender<()>>,
}

impl NodeSupervisor {
    /// At least one slot: a main node with `MAX_JOBS=0` is simply never given jobs (its
    /// scheduler gets no handle of it, see `actors::start_node`).
    pub fn new(env: Arc<NodeEnv>, max_jobs: usize) -> Self {
        NodeSupervisor {
            env,
            max_jobs: max_jobs.max(1),
            jobs: HashMap::new(),
            helpers: HashMap::new(),
            checks: 0,
            told: HashMap::new(),
            next_told: 0,
            takes_transfers: false,
            scheduler: None,
            shutting_down: false,
            waiters: Vec::new(),
        }
    }
}

impl NodeSupervisor {
    /// A node that takes jobs of libraries it does not see (a linked node whose
    /// `SHARED_STORAGE` and build allow it).
    pub fn taking_transfers(mut self, takes: bool) -> Self {
        self.takes_transfers = takes;
        self
    }
}

impl Actor for NodeSupervisor {
    type Context = Context<Self>;
}

impl Handler<SetScheduler> for NodeSupervisor {
    type Result = ();
    fn handle(&mut self, msg: SetScheduler, _: &mut Context<Self>) {
        self.scheduler = Some(msg.0);
    }
}

impl Handler<StartJob> for NodeSupervisor {
    type Result = bool;
    fn handle(&mut self, msg: StartJob, ctx: &mut Context<Self>) -> bool {
        if self.shutting_down || self.busy() >= self.max_jobs || self.jobs.contains_key(&msg.job_id) {
            return false;
        }
        if msg.by_transfer && !self.takes_transfers {
            tracing::warn!(job_id = msg.job_id, "a job by transfer was refused: this node takes only files it sees");
            return false;
        }
        // The job's folder in WORK_DIR holds a helper's copy of the source meanwhile.
        if msg.by_transfer && self.helpers.iter().any(|((job, _), (h, _))| *job == msg.job_id && h.by_transfer) {
            return false;
        }
        let supervisor =
            JobSupervisor::new(msg.job_id, msg.lease_id.clone(), self.env.clone(), ctx.address().recipient())
                .taken_by_transfer(msg.by_transfer)
                .start();
        self.jobs.insert(msg.job_id, (supervisor, msg.lease_id));
        true
    }
}

impl NodeSupervisor {
    /// Slots in use: jobs, helpers and health checks.
    fn busy(&self) -> usize {
        self.jobs.len() + self.helpers.len() + self.checks
    }

    fn idle(&mut self) {
        if let Some(s) = &self.scheduler {
            s.do_send(Wake);
        }
        if self.jobs.is_empty() && self.helpers.is_empty() {
            for w in self.waiters.drain(..) {
                let _ = w.send(());
            }
        }
    }
}

impl Handler<StartHelper> for NodeSupervisor {
    type Result = bool;
    fn handle(&mut self, msg: StartHelper, ctx: &mut Context<Self>) -> bool {
        let key = (msg.0.job_id, msg.0.span);
        let off = self.env.parallel_segments == crate::domain::segments::Parallelism::Off;
        if off || self.shutting_down || self.busy() >= self.max_jobs || self.helpers.contains_key(&key) {
            return false;
        }
        // A span by transfer needs the flow, and the job's folder in WORK_DIR is its run's
        // when the job itself runs here by transfer.
        if msg.0.by_transfer && (self.env.transfer.is_none() || self.jobs.contains_key(&msg.0.job_id)) {
            return false;
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.helpers.insert(key, (msg.0.clone(), tx));
        let (env, me) = (self.env.clone(), ctx.address());
        let may_fetch = self.env.transfer.is_some() && !self.jobs.contains_key(&msg.0.job_id);
        actix::spawn(async move {
            let mut helper = msg.0;
            // The library's folder is here but not the file (a stale share, another disk
            // mounted there): the library counts as not seen from now on, and the span is
            // fetched instead where the node takes files by transfer.
            if let (Some(not_here), false) = (&env.not_here, helper.by_transfer) {
                if let Some(source) = crate::actors::job::missing_source(&env, helper.job_id).await {
                    not_here.add(source);
                    if may_fetch {
                        tracing::info!(
                            job_id = helper.job_id,
                            span = helper.span,
                            "the job's file is not here: the span goes by transfer"
                        );
                        helper.by_transfer = true;
                    }
                }
            }
            if helper.by_transfer {
                span_by_transfer::run(env, helper, rx).await;
            } else {
                helper::run(env, helper, rx).await;
            }
            me.do_send(HelperEnded { job_id: key.0, span: key.1 });
        });
        true
    }
}

impl Handler<ReserveCheck> for NodeSupervisor {
    type Result = bool;
    fn handle(&mut self, _: ReserveCheck, _: &mut Context<Self>) -> bool {
        if self.shutting_down || self.busy() >= self.max_jobs {
            return false;
        }
        self.checks += 1;
        true
    }
}

impl Handler<CheckTold> for NodeSupervisor {
    type Result = ResponseFuture<BatchAnswer>;
    fn handle(&mut self, msg: CheckTold, ctx: &mut Context<Self>) -> Self::Result {
        if self.shutting_down || self.busy() >= self.max_jobs {
            return Box::pin(async { BatchAnswer::Busy });
        }
        self.checks += 1;
        self.next_told += 1;
        let id = self.next_told;
        let held = Held(ctx.address(), id);
        let (binary, limit) = (self.env.transcoder.clone(), self.env.analysis_timeout);
        // A task of its own, so a cancel can stop it (dropping it kills its children).
        let task = tokio::task::spawn_local(async move {
            let results = check_told(&binary, limit, &msg.told, &msg.roots, &msg.paths, msg.depth).await;
            drop(held);
            results
        });
        self.told.insert(id, (msg.library_id, task.abort_handle()));
        Box::pin(async move {
            match task.await {
                Ok(results) => BatchAnswer::Checked(results),
                Err(_) => BatchAnswer::Cancelled,
            }
        })
    }
}

impl Handler<ToldEnded> for NodeSupervisor {
    type Result = ();
    fn handle(&mut self, msg: ToldEnded, _: &mut Context<Self>) {
        if self.told.remove(&msg.0).is_some() {
            self.checks = self.checks.saturating_sub(1);
            self.idle();
        }
    }
}

impl Handler<CancelTold> for NodeSupervisor {
    type Result = usize;
    fn handle(&mut self, msg: CancelTold, _: &mut Context<Self>) -> usize {
        let mut stopped = 0;
        for (library_id, task) in self.told.values() {
            if *library_id == msg.library_id {
                task.abort();
                stopped += 1;
            }
        }
        if stopped > 0 {
            tracing::info!(
                library = msg.library_id,
                batches = stopped,
                "health batches stopped: the run was cancelled"
            );
        }
        stopped
    }
}

impl Handler<CheckEnded> for NodeSupervisor {
    type Result = ();
    fn handle(&mut self, _: CheckEnded, _: &mut Context<Self>) {
        self.checks = self.checks.saturating_sub(1);
        self.idle();
    }
}

impl Handler<HelperEnded> for NodeSupervisor {
    type Result = ();
    fn handle(&mut self, msg: HelperEnded, _: &mut Context<Self>) {
        self.helpers.remove(&(msg.job_id, msg.span));
        self.idle();
    }
}

impl Handler<RunningHelpers> for NodeSupervisor {
    type Result = MessageResult<RunningHelpers>;
    fn handle(&mut self, _: RunningHelpers, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.helpers.values().map(|(helper, _)| helper.clone()).collect())
    }
}

impl Handler<Capacity> for NodeSupervisor {
    type Result = MessageResult<Capacity>;
    fn handle(&mut self, _: Capacity, _: &mut Context<Self>) -> Self::Result {
        let free = if self.shutting_down { 0 } else { self.max_jobs.saturating_sub(self.busy()) };
        MessageResult(NodeCapacity { free, checked_paths: None, ..Default::default() })
    }
}

impl Handler<StopAll> for NodeSupervisor {
    type Result = ();
    fn handle(&mut self, _: StopAll, _: &mut Context<Self>) {
        for (job, _) in self.jobs.values() {
            job.do_send(Command(JobCommand::Fence));
        }
        for (_, tx) in self.helpers.values() {
            let _ = tx.send(JobCommand::Fence);
        }
    }
}

impl Handler<ControlJob> for NodeSupervisor {
    type Result = bool;
    fn handle(&mut self, msg: ControlJob, _: &mut Context<Self>) -> bool {
        // The job's helpers here stop with it (pause, cancel, a closing window); the
        // answer says whether the job itself runs here.
        for ((job_id, _), (_, tx)) in &self.helpers {
            if *job_id == msg.job_id {
                let _ = tx.send(msg.command);
            }
        }
        match self.jobs.get(&msg.job_id) {
            Some((job, _)) => {
                job.do_send(Command(msg.command));
                true
            }
            None => false,
        }
    }
}

impl Handler<RunningJobs> for NodeSupervisor {
    type Result = MessageResult<RunningJobs>;
    fn handle(&mut self, _: RunningJobs, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.jobs.iter().map(|(id, (_, lease))| RunningJob { job_id: *id, lease_id: lease.clone() }).collect(),
        )
    }
}

/// Removes job `job_id`'s folder from WORK_DIR (`actors::work_dir`), unless the job runs
/// on this node now; answers whether it went. Here, in the actor that starts jobs, so that
/// no attempt given the job meanwhile finds its folder going under it.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct DropJobDir {
    pub job_id: i32,
}

impl Handler<DropJobDir> for NodeSupervisor {
    type Result = bool;
    fn handle(&mut self, msg: DropJobDir, _: &mut Context<Self>) -> bool {
        let in_use = self.jobs.contains_key(&msg.job_id) || self.helpers.keys().any(|(job, _)| *job == msg.job_id);
        let Some(setup) = self.env.transfer.as_ref().filter(|_| !in_use) else {
            return false;
        };
        match crate::actors::transfer::remove_job_dir(&setup.work_dir, msg.job_id) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(job_id = msg.job_id, error = %e, "could not remove the job's folder in WORK_DIR");
                false
            }
        }
    }
}

impl Handler<JobEnded> for NodeSupervisor {
    type Result = ();
    fn handle(&mut self, msg: JobEnded, _: &mut Context<Self>) {
        self.jobs.remove(&msg.job_id);
        self.idle();
    }
}

impl Handler<Shutdown> for NodeSupervisor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, _: Shutdown, _: &mut Context<Self>) -> Self::Result {
        self.shutting_down = true;
        if self.jobs.is_empty() && self.helpers.is_empty() {
            return Box::pin(async {});
        }
        for (job, _) in self.jobs.values() {
            job.do_send(Command(JobCommand::Shutdown));
        }
        for (_, tx) in self.helpers.values() {
            let _ = tx.send(JobCommand::Shutdown);
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push(tx);
        Box::pin(async move {
            // An encoder finishes its segment quickly; do not hang the shutdown on one that won't.
            let _ = tokio::time::timeout(Duration::from_secs(60), rx).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::bus::EventBus;
    use crate::actors::lifecycle::Lifecycle;
    use crate::actors::store::DbStore;

    /// A node whose job store is never reached: what is tested here is refused first.
    fn node(max_jobs: usize) -> NodeSupervisor {
        let lifecycle = Lifecycle {
            db: sea_orm::DatabaseConnection::Disconnected,
            bus: EventBus::default().start(),
            transfers: Default::default(),
            span_claims: Default::default(),
        };
        let env = NodeEnv {
            store: Arc::new(DbStore { lifecycle }),
            node_name: "n".into(),
            node_id: 1,
            transcoder: "condense-media".into(),
            segment_seconds: 1.0,
            parallel_segments: crate::domain::segments::Parallelism::Off,
            cores: 1,
            max_jobs: 1,
            throttle_ms_per_frame: 0,
            analysis_timeout: Duration::from_secs(1),
            transfer: None,
            not_here: None,
        };
        NodeSupervisor::new(Arc::new(env), max_jobs)
    }

    #[actix_web::test]
    async fn a_node_that_takes_only_files_it_sees_refuses_a_job_by_transfer() {
        let node = node(2).start();
        let start = StartJob { job_id: 7, lease_id: "l".into(), by_transfer: true };
        assert!(!node.send(start).await.unwrap());
        // Nothing started: both slots free, no job running.
        assert_eq!(node.send(Capacity).await.unwrap().free, 2);
        assert!(node.send(RunningJobs).await.unwrap().is_empty());
    }
}
