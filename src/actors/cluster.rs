//! The main node's side of the cluster: a `RemoteNode` actor per linked node's link. It
//! registers the node (within the licence's node limit), mirrors it to the scheduler as a
//! node with slots, relays job commands to it, answers its job-store calls after checking
//! each against the job's lease (a node that lost a job cannot touch it), and turns missed
//! heartbeats into OFFLINE with the node's jobs back in the queue.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web_actors::ws;
use entities::job;
use sea_orm::DatabaseConnection;
use tokio::sync::oneshot;

use super::lifecycle::{Context as EventContext, Lifecycle, LifecycleError};
use super::node::{Capacity, ControlJob, NodeCapacity, RunningJob, StartJob};
use super::protocol::{capacity, Call, Frame};
use super::scheduler::{effective_tier, AddNode, NodeHandle, RemoveNode, Scheduler};
use super::store::{holds_lease, DbStore, JobStore};
use crate::domain::job::{JobEvent, JobStatus};
use crate::domain::node::{node_status, NodeRole, NodeStatus};
use crate::media::manifest::remove_partial;
use crate::media::plan::partial_dir_for;
use crate::repo::{self, jobs, nodes::NodeFacts};

/// What the main node tells linked nodes.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub heartbeat: Duration,
    pub timeout: Duration,
    pub license_public_key: String,
    pub main_node_name: String,
}

/// A job the node reported less than this ago is not yet expected in its heartbeats.
const START_GRACE: chrono::Duration = chrono::Duration::seconds(10);

pub struct RemoteNode {
    db: DatabaseConnection,
    lifecycle: Lifecycle,
    scheduler: Addr<Scheduler>,
    config: ClusterConfig,
    node: Option<(i32, String)>,
    max_jobs: i32,
    running: Vec<RunningJob>,
    missing_paths: Vec<String>,
    last_seen: Instant,
    next_id: u64,
    pending: HashMap<u64, oneshot::Sender<Result<serde_json::Value, String>>>,
}

impl RemoteNode {
    pub fn new(
        db: DatabaseConnection,
        lifecycle: Lifecycle,
        scheduler: Addr<Scheduler>,
        config: ClusterConfig,
    ) -> Self {
        RemoteNode {
            db,
            lifecycle,
            scheduler,
            config,
            node: None,
            max_jobs: 0,
            running: Vec::new(),
            missing_paths: Vec::new(),
            last_seen: Instant::now(),
            next_id: 0,
            pending: HashMap::new(),
        }
    }

    fn send(ctx: &mut ws::WebsocketContext<Self>, frame: &Frame) {
        if let Ok(text) = serde_json::to_string(frame) {
            ctx.text(text);
        }
    }

    /// Sends a request to the node; the answer arrives as a Reply frame.
    fn request(
        &mut self,
        call: Call,
        ctx: &mut ws::WebsocketContext<Self>,
    ) -> oneshot::Receiver<Result<serde_json::Value, String>> {
        let (tx, rx) = oneshot::channel();
        self.next_id += 1;
        self.pending.insert(self.next_id, tx);
        Self::send(ctx, &Frame::Request { id: self.next_id, call: Box::new(call) });
        rx
    }

    fn register(&mut self, frame: Frame, ctx: &mut ws::WebsocketContext<Self>) {
        let Frame::Register { name, address, cores, memory_total, gpu, encoders, max_jobs, .. } = frame else { return };
        let (db, key, main_name) =
            (self.db.clone(), self.config.license_public_key.clone(), self.config.main_node_name.clone());
        let facts = NodeFacts {
            name: name.clone(),
            role: NodeRole::Linked,
            address,
            gpu,
            cores,
            memory_total,
            max_jobs,
            encoders,
        };
        ctx.wait(
            async move {
                if name == main_name {
                    return Err(format!("the name {name:?} is the main node's; give the linked node its own NODE_NAME"));
                }
                let tier = effective_tier(&db, &key).await;
                let nodes = repo::nodes::list(&db).await.map_err(|e| e.to_string())?;
                let others = nodes
                    .iter()
                    .filter(|n| n.role == NodeRole::Linked.as_str() && n.name != name && n.status != NodeStatus::Offline.as_str())
                    .count();
                if let Some(max) = tier.max_nodes() {
                    // The main node counts as one.
                    if others + 2 > max as usize {
                        return Err(format!(
                            "the {} licence allows {max} node(s) and {} are in use; install a SUPPORTER or PRO licence to add linked nodes",
                            tier.as_str(),
                            others + 1
                        ));
                    }
                }
                repo::nodes::upsert(&db, facts).await.map(|n| (n.id, n.name)).map_err(|e| e.to_string())
            }
            .into_actor(self)
            .map(move |result, this, ctx| match result {
                Ok((id, name)) => {
                    tracing::info!(node = %name, node_id = id, "linked node registered");
                    this.node = Some((id, name.clone()));
                    this.max_jobs = max_jobs;
                    this.last_seen = Instant::now();
                    Self::send(
                        ctx,
                        &Frame::Registered {
                            node_id: id,
                            heartbeat_seconds: this.config.heartbeat.as_secs().max(1),
                            timeout_seconds: this.config.timeout.as_secs().max(1),
                        },
                    );
                    let me = ctx.address();
                    this.scheduler.do_send(AddNode(NodeHandle {
                        name,
                        id,
                        start: me.clone().recipient(),
                        capacity: me.clone().recipient(),
                        control: me.recipient(),
                    }));
                }
                Err(reason) => {
                    tracing::warn!(%reason, "linked node refused");
                    Self::send(ctx, &Frame::Refused { reason: reason.clone() });
                    ctx.close(Some(ws::CloseReason { code: ws::CloseCode::Policy, description: Some(reason) }));
                    ctx.stop();
                }
            }),
        );
    }

    fn heartbeat(
        &mut self,
        load1: f64,
        memory_used: i64,
        running: Vec<RunningJob>,
        missing: Vec<String>,
        ctx: &mut ws::WebsocketContext<Self>,
    ) {
        let Some((id, name)) = self.node.clone() else { return };
        self.last_seen = Instant::now();
        self.running = running.clone();
        self.missing_paths = missing.clone();
        let (db, lifecycle, timeout) = (self.db.clone(), self.lifecycle.clone(), self.config.timeout);
        ctx.spawn(
            async move {
                let active = i32::try_from(running.len()).unwrap_or(i32::MAX);
                let _ = repo::nodes::record_heartbeat(&db, id, load1, memory_used, active).await;
                let node = repo::nodes::get(&db, id).await.ok();
                let ratio = node
                    .as_ref()
                    .map(|n| crate::domain::health::load_ratio(load1, n.cores.max(1) as usize))
                    .unwrap_or(0.0);
                let (status, reason) = node_status(0, timeout.as_secs(), ratio, 0, &missing);
                let _ = repo::nodes::set_status(&db, id, status, reason).await;
                reconcile(&lifecycle, id, &name, &running).await;
                let stale = lost_leases(&db, id, &running).await;
                let libraries = repo::libraries::list(&db).await.unwrap_or_default();
                (libraries.iter().flat_map(repo::libraries::paths_of).collect::<Vec<_>>(), stale)
            }
            .into_actor(self)
            .map(|(paths, stale), this, ctx| {
                Self::send(ctx, &Frame::Libraries { paths });
                this.stop_lost_jobs(stale, ctx);
            }),
        );
    }

    /// Answers a job-store call of the node, refusing any write on a job whose lease it lost.
    fn serve_call(&mut self, id: u64, call: Call, ctx: &mut ws::WebsocketContext<Self>) {
        let Some((node_id, _)) = self.node.clone() else { return };
        let (db, lifecycle) = (self.db.clone(), self.lifecycle.clone());
        ctx.spawn(
            async move {
                let store = DbStore { lifecycle };
                let json = |v: Result<serde_json::Value, serde_json::Error>| v.map_err(|e| e.to_string());
                let fenced = |job: &job::Model, lease: &str| {
                    if job.node_id == Some(node_id) && holds_lease(job, lease) {
                        Ok(())
                    } else {
                        Err(format!("job {} is no longer this node's (its lease was taken over)", job.id))
                    }
                };
                match call {
                    Call::Job { id } => json(serde_json::to_value(store.job(id).await.map_err(|e| e.to_string())?)),
                    Call::Library { id } => {
                        json(serde_json::to_value(store.library(id).await.map_err(|e| e.to_string())?))
                    }
                    Call::Settings => {
                        json(serde_json::to_value(store.job_settings().await.map_err(|e| e.to_string())?))
                    }
                    Call::Apply { id, lease, event, patch, ctx } => {
                        let before = jobs::get(&db, id).await.map_err(|e| e.to_string())?;
                        fenced(&before, &lease)?;
                        let applied = store.apply(id, &lease, event, patch, ctx).await.map_err(|e| e.to_string())?;
                        if applied.job.status == JobStatus::Completed.as_str() {
                            // The node removes it too, but may die before it does.
                            let dir = partial_dir_for(std::path::Path::new(&before.file_path));
                            let _ = tokio::task::spawn_blocking(move || remove_partial(&dir)).await;
                        }
                        json(serde_json::to_value(applied))
                    }
                    Call::UpdateLive { id, lease, patch } => {
                        fenced(&jobs::get(&db, id).await.map_err(|e| e.to_string())?, &lease)?;
                        store.update_live(id, &lease, patch).await.map_err(|e| e.to_string())?;
                        Ok(serde_json::Value::Null)
                    }
                    Call::RecordEvent { id, lease, kind, node } => {
                        fenced(&jobs::get(&db, id).await.map_err(|e| e.to_string())?, &lease)?;
                        store.record_event(id, &lease, &kind, node).await.map_err(|e| e.to_string())?;
                        Ok(serde_json::Value::Null)
                    }
                    Call::LeaseIsMine { id, lease } => {
                        let job = jobs::get(&db, id).await.map_err(|e| e.to_string())?;
                        let mine = fenced(&job, &lease).is_ok() && store.lease_is_mine(id, &lease).await;
                        Ok(serde_json::Value::Bool(mine))
                    }
                    Call::Progress { job } => {
                        if job.node_id == Some(node_id) {
                            store.publish_progress(&job);
                        }
                        Ok(serde_json::Value::Null)
                    }
                    Call::StartJob { .. } | Call::ControlJob { .. } => Err("not a call for the main node".into()),
                }
            }
            .into_actor(self)
            .map(move |result, _, ctx| Self::send(ctx, &Frame::Reply { id, result })),
        );
    }
}

/// Jobs the database says run on the node but the node does not report go back to the
/// queue (the node restarted, or stopped them while cut off).
async fn reconcile(lifecycle: &Lifecycle, node_id: i32, node: &str, running: &[RunningJob]) {
    let Ok(leased) = jobs::in_statuses(&lifecycle.db, &[JobStatus::Analyzing, JobStatus::Encoding]).await else {
        return;
    };
    let now = chrono::Utc::now();
    for job in leased.into_iter().filter(|j| j.node_id == Some(node_id)) {
        let reported = running.iter().any(|r| r.job_id == job.id && Some(&r.lease_id) == job.lease_id.as_ref());
        let young = job.started_at.is_some_and(|t| now - t < START_GRACE);
        if !reported && !young {
            let ctx = EventContext {
                node: Some(node.to_string()),
                detail: Some(serde_json::json!({"reason": "the node no longer runs it"})),
                failure_detail: None,
            };
            // The node restarted under the job: counted as a crash.
            let orphaned = JobEvent::Orphaned { crashed: true };
            match lifecycle.apply(job.id, orphaned, job::ActiveModel::default(), ctx).await {
                Ok((job, outcome)) => lifecycle.carry_out_offline(&job, &outcome).await,
                Err(e) => tracing::debug!(job_id = job.id, error = %e, "reconcile skipped a job"),
            }
        }
    }
}

/// Marks the node OFFLINE and gives its running jobs back to the queue.
pub async fn take_offline(
    lifecycle: &Lifecycle,
    node_id: i32,
    node: &str,
    reason: String,
) -> Result<u64, LifecycleError> {
    repo::nodes::set_status(&lifecycle.db, node_id, NodeStatus::Offline, Some(reason.clone())).await?;
    let mut requeued = 0;
    for job in jobs::in_statuses(&lifecycle.db, &[JobStatus::Analyzing, JobStatus::Encoding]).await? {
        if job.node_id == Some(node_id) {
            let ctx = EventContext {
                node: Some(node.to_string()),
                detail: Some(serde_json::json!({"reason": reason})),
                failure_detail: None,
            };
            // The node vanished without a word: counted as a crash.
            let (job, outcome) =
                lifecycle.apply(job.id, JobEvent::Orphaned { crashed: true }, job::ActiveModel::default(), ctx).await?;
            lifecycle.carry_out_offline(&job, &outcome).await;
            requeued += 1;
        }
    }
    tracing::warn!(node, requeued, %reason, "node offline");
    Ok(requeued)
}

impl Actor for RemoteNode {
    type Context = ws::WebsocketContext<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(Duration::from_secs(1), |this, ctx| {
            if this.last_seen.elapsed() > this.config.timeout {
                tracing::warn!(node = ?this.node, "no heartbeat within the timeout; closing the link");
                ctx.stop();
            }
        });
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        for (_, tx) in self.pending.drain() {
            let _ = tx.send(Err("the link closed".into()));
        }
        let Some((id, name)) = self.node.take() else { return };
        self.scheduler.do_send(RemoveNode(name.clone()));
        // A short disconnect keeps the node's jobs: only if it has not come back by the
        // timeout does it go OFFLINE and its jobs go elsewhere.
        let (lifecycle, timeout, last_seen) = (self.lifecycle.clone(), self.config.timeout, self.last_seen);
        let wait = timeout.saturating_sub(last_seen.elapsed());
        actix::spawn(async move {
            tokio::time::sleep(wait).await;
            let seen = repo::nodes::get(&lifecycle.db, id).await.ok().and_then(|n| n.last_seen_at);
            let stale =
                seen.is_none_or(|t| chrono::Utc::now() - t >= chrono::Duration::from_std(timeout).unwrap_or_default());
            if stale {
                let reason = format!("no heartbeat for {} s", timeout.as_secs());
                if let Err(e) = take_offline(&lifecycle, id, &name, reason).await {
                    tracing::warn!(node = %name, error = %e, "could not take the node offline");
                }
            }
        });
    }
}

impl StreamHandler<Result<ws::Message, ws::ProtocolError>> for RemoteNode {
    fn handle(&mut self, msg: Result<ws::Message, ws::ProtocolError>, ctx: &mut Self::Context) {
        let text = match msg {
            Ok(ws::Message::Text(text)) => text,
            Ok(ws::Message::Ping(bytes)) => {
                ctx.pong(&bytes);
                return;
            }
            Ok(ws::Message::Close(_)) | Err(_) => {
                ctx.stop();
                return;
            }
            Ok(_) => return,
        };
        let frame: Frame = match serde_json::from_str(&text) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "bad frame from a linked node");
                return;
            }
        };
        match frame {
            Frame::Register { .. } if self.node.is_none() => self.register(frame, ctx),
            Frame::Heartbeat { load1, memory_used, running, missing_paths } => {
                self.heartbeat(load1, memory_used, running, missing_paths, ctx)
            }
            Frame::Request { id, call } => self.serve_call(id, *call, ctx),
            Frame::Reply { id, result } => {
                if let Some(tx) = self.pending.remove(&id) {
                    let _ = tx.send(result);
                }
            }
            _ => {}
        }
    }
}

impl Handler<StartJob> for RemoteNode {
    type Result = ResponseActFuture<Self, bool>;

    fn handle(&mut self, msg: StartJob, ctx: &mut Self::Context) -> Self::Result {
        let rx = self.request(Call::StartJob { job_id: msg.job_id, lease_id: msg.lease_id.clone() }, ctx);
        let job = RunningJob { job_id: msg.job_id, lease_id: msg.lease_id };
        Box::pin(async move { matches!(rx.await, Ok(Ok(serde_json::Value::Bool(true)))) }.into_actor(self).map(
            move |accepted, this, _| {
                if accepted {
                    // Counted until the next heartbeat says otherwise.
                    this.running.push(job);
                }
                accepted
            },
        ))
    }
}

impl Handler<Capacity> for RemoteNode {
    type Result = MessageResult<Capacity>;
    fn handle(&mut self, _: Capacity, _: &mut Self::Context) -> Self::Result {
        if self.node.is_none() {
            return MessageResult(NodeCapacity::default());
        }
        MessageResult(capacity(self.max_jobs, self.running.len(), &self.missing_paths))
    }
}

impl Handler<ControlJob> for RemoteNode {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, msg: ControlJob, ctx: &mut Self::Context) -> Self::Result {
        if !self.running.iter().any(|r| r.job_id == msg.job_id) {
            return Box::pin(async { false });
        }
        let rx = self.request(Call::ControlJob { job_id: msg.job_id, command: msg.command }, ctx);
        Box::pin(async move { matches!(rx.await, Ok(Ok(serde_json::Value::Bool(true)))) })
    }
}

/// At start-up no link is open yet: linked nodes recorded as up are not.
pub async fn mark_linked_nodes_offline(db: &DatabaseConnection) {
    if let Ok(nodes) = repo::nodes::list(db).await {
        for n in nodes
            .into_iter()
            .filter(|n| n.role == NodeRole::Linked.as_str() && n.status != NodeStatus::Offline.as_str())
        {
            let _ =
                repo::nodes::set_status(db, n.id, NodeStatus::Offline, Some("the main node restarted".into())).await;
        }
    }
}

/// Jobs a node reports running under a lease the database no longer gives it (the job was
/// requeued while the node was cut off or stuck, and may run elsewhere now).
async fn lost_leases(db: &DatabaseConnection, node_id: i32, running: &[RunningJob]) -> Vec<i32> {
    let mut lost = Vec::new();
    for reported in running {
        let Ok(job) = jobs::get(db, reported.job_id).await else { continue };
        if !(job.node_id == Some(node_id) && holds_lease(&job, &reported.lease_id)) {
            lost.push(job.id);
        }
    }
    lost
}

impl RemoteNode {
    /// Tells the node to stop jobs whose lease it lost, leaving their records alone (the
    /// records belong to whoever holds the lease now).
    fn stop_lost_jobs(&mut self, lost: Vec<i32>, ctx: &mut ws::WebsocketContext<Self>) {
        for job_id in lost {
            tracing::info!(job_id, node = ?self.node, "the node runs a job whose lease it lost; telling it to stop");
            // The answer only says whether the node still ran it.
            drop(self.request(Call::ControlJob { job_id, command: super::job::JobCommand::Shutdown }, ctx));
        }
    }
}
