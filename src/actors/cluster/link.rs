//! The main node's side of one linked node's link: a `RemoteNode` actor per link. It
//! registers the node (within the licence's node limit, as `membership` admits it),
//! mirrors it to the scheduler as a node with slots, relays job commands to it, answers its
//! job-store calls after checking each against the job's lease (a node that lost a job
//! cannot touch it), and tells it to stop the jobs it reports under a lease it lost.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web_actors::ws;
use entities::job;
use sea_orm::DatabaseConnection;
use tokio::sync::oneshot;

use super::membership::{admit, enrollment, reconcile, AskLibraries, CloseLink, ClusterConfig, LinkAuth, LinkControl};
use crate::actors::health_batch::{BatchAnswer, CancelOnNode, CheckOnNode, NotTaken, OfferChecks};
use crate::actors::job::helper::HelperRef;
use crate::actors::job::JobCommand;
use crate::actors::lifecycle::Lifecycle;
use crate::actors::node::{Capacity, ControlJob, NodeCapacity, RunningJob, StartHelper, StartJob, Wake};
use crate::actors::protocol::{capacity, Call, Frame, Sight};
use crate::actors::scheduler::{effective_tier, AddNode, NodeHandle, RemoveNode, Scheduler};
use crate::actors::store::{holds_lease, DbStore, JobStore};
use crate::actors::teardown::dropped_in_runtime;
use crate::domain::job::{JobEvent, JobStatus};
use crate::domain::library_health::CheckOffer;
use crate::domain::link::{field_rule, node_may_apply, FieldRule, JobField, LinkWrite};
use crate::domain::node::{degrading_paths, node_status, sees_library, NodeRole, NodeStatus};
use crate::domain::placement::{work_dir_free_after_failure, TRANSFER_FLOW};
use crate::media::health::FileHealth;
use crate::media::layout::partial_dir_for;
use crate::media::partial::remove_partial;
use crate::media::plan::final_paths;
use crate::repo::jobs::{self, JobChange};
use crate::repo::{self, nodes::NodeFacts};

pub struct RemoteNode {
    db: DatabaseConnection,
    lifecycle: Lifecycle,
    scheduler: Addr<Scheduler>,
    config: ClusterConfig,
    auth: LinkAuth,
    node: Option<(i32, String)>,
    /// This link's entry in `config.links`, once it claimed a name.
    link: Option<u64>,
    max_jobs: i32,
    running: Vec<RunningJob>,
    /// Spans its helpers encode (each takes a slot).
    helping: Vec<HelperRef>,
    /// What the node last reported it sees; nothing until its first report.
    sight: Sight,
    /// It takes library health batches (as its registration said).
    health_checks: bool,
    /// Health batches it checks now (each takes a slot until answered).
    checks: usize,
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
        auth: LinkAuth,
    ) -> Self {
        RemoteNode {
            db,
            lifecycle,
            scheduler,
            config,
            auth,
            node: None,
            link: None,
            max_jobs: 0,
            running: Vec::new(),
            helping: Vec::new(),
            sight: Sight::unreported(),
            health_checks: false,
            checks: 0,
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
        let Frame::Register {
            name,
            address,
            cores,
            memory_total,
            gpu,
            encoders,
            decoders,
            max_jobs,
            identity,
            shared_storage,
            transfer,
            work_dir_free_bytes,
            health_checks,
            ..
        } = frame
        else {
            return;
        };
        // Claimed before any database work, so two links with one name cannot both pass.
        let Some(link) = self.config.links.claim_name(&name) else {
            let reason = format!("another node named {name:?} is linked now; give each linked node its own NODE_NAME");
            return Self::refuse(reason, ctx);
        };
        self.link = Some(link);
        let now = self.config.clock.now();
        let (db, key, main_name, links) = (
            self.db.clone(),
            self.config.license_public_key.clone(),
            self.config.main_node_name.clone(),
            self.config.links.clone(),
        );
        let me = LinkControl {
            close: ctx.address().recipient(),
            ask: ctx.address().recipient(),
            offer: ctx.address().recipient(),
            check: ctx.address().recipient(),
            cancel: ctx.address().recipient(),
        };
        let auth = self.auth.clone();
        let facts = NodeFacts {
            name: name.clone(),
            role: NodeRole::Linked,
            address,
            gpu,
            cores,
            memory_total,
            max_jobs,
            encoders,
            decoders,
        };
        ctx.wait(
            dropped_in_runtime(async move {
                if name == main_name {
                    return Err(format!("the name {name:?} is the main node's; give the linked node its own NODE_NAME"));
                }
                let by_identity = match identity.as_deref() {
                    Some(identity) => repo::nodes::find_by_identity(&db, identity).await.map_err(|e| e.to_string())?,
                    None => None,
                };
                let by_name = repo::nodes::find(&db, &name).await.map_err(|e| e.to_string())?;
                let enrolling = enrollment(&auth, identity.as_deref(), by_identity.as_ref(), by_name.as_ref())?;
                let row = admit(&name, by_identity.as_ref(), by_name.as_ref(), |row| {
                    links.holder_of(row).is_some_and(|holder| holder != link)
                })?;
                let tier = effective_tier(&db, &key, now).await;
                let nodes = repo::nodes::list(&db).await.map_err(|e| e.to_string())?;
                let others = nodes
                    .iter()
                    .filter(|n| {
                        n.role == NodeRole::Linked
                            && Some(n.id) != row
                            && n.status != NodeStatus::Offline
                    })
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
                if let Some(row) = row {
                    if !links.claim_row(link, row, me.clone()) {
                        return Err(format!("node {row} is linked now by another connection"));
                    }
                }
                let identity = identity.unwrap_or_else(|| crate::security::generate_secret(32));
                // Enrolled: a credential of its own, of which only the hash is kept.
                let credential = enrolling.then(|| crate::security::generate_secret(48));
                let hash = credential.as_deref().map(crate::security::hash_secret);
                let node = repo::nodes::register_linked(&db, row, facts, &identity, hash.as_deref())
                    .await
                    .map_err(|e| e.to_string())?;
                let was_up = row.and_then(|id| nodes.iter().find(|n| n.id == id)).is_some_and(|n| n.status != NodeStatus::Offline);
                if !was_up {
                    if let Err(e) = repo::notifications::node_changed(&db, true, &node.name, None).await {
                        tracing::warn!(node = %node.name, error = %e, "the node.online notification was not written");
                    }
                }
                if !links.claim_row(link, node.id, me) {
                    return Err(format!("node {} is linked now by another connection", node.id));
                }
                Ok((node.id, node.name, identity, credential))
            })
            .into_actor(self)
            .map(move |result, this, ctx| match result {
                Ok((id, name, identity, credential)) => {
                    tracing::info!(node = %name, node_id = id, "linked node registered");
                    this.node = Some((id, name.clone()));
                    this.max_jobs = max_jobs;
                    this.health_checks = health_checks;
                    // Whether it takes files by transfer, until its heartbeats say again.
                    this.sight = Sight { shared_storage, transfer, work_dir_free_bytes, ..Sight::unreported() };
                    this.config.links.record_sight(id, this.sight.clone());
                    this.last_seen = Instant::now();
                    Self::send(
                        ctx,
                        &Frame::Registered {
                            node_id: id,
                            heartbeat_seconds: this.config.heartbeat.as_secs().max(1),
                            timeout_seconds: this.config.timeout.as_secs().max(1),
                            identity,
                            credential,
                        },
                    );
                    // Asked at once what it sees, so it is given no job before it answered.
                    this.send_libraries(ctx);
                    let me = ctx.address();
                    this.scheduler.do_send(AddNode(NodeHandle {
                        name,
                        id,
                        start: me.clone().recipient(),
                        help: me.clone().recipient(),
                        capacity: me.clone().recipient(),
                        control: me.recipient(),
                    }));
                }
                Err(reason) => Self::refuse(reason, ctx),
            }),
        );
    }

    /// Tells the node why it is not accepted, and closes the link.
    fn refuse(reason: String, ctx: &mut ws::WebsocketContext<Self>) {
        tracing::warn!(%reason, "linked node refused");
        Self::send(ctx, &Frame::Refused { reason: reason.clone() });
        ctx.close(Some(ws::CloseReason { code: ws::CloseCode::Policy, description: Some(reason) }));
        ctx.stop();
    }

    fn heartbeat(
        &mut self,
        load1: f64,
        memory_used: i64,
        running: Vec<RunningJob>,
        helping: Vec<HelperRef>,
        sight: Sight,
        ctx: &mut ws::WebsocketContext<Self>,
    ) {
        let Some((id, name)) = self.node.clone() else { return };
        self.last_seen = Instant::now();
        self.running = running.clone();
        self.helping = helping;
        // As the scheduler weighs it: the main node's own build must carry the flow.
        let missing = degrading_paths(&sight.missing, TRANSFER_FLOW && sight.transfer).to_vec();
        self.config.links.record_sight(id, sight.clone());
        self.sight = sight;
        let (db, lifecycle, timeout) = (self.db.clone(), self.lifecycle.clone(), self.config.timeout);
        let folders = self.config.folders.clone();
        ctx.spawn(
            dropped_in_runtime(async move {
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
                (folders.frame(&libraries).await, stale)
            })
            .into_actor(self)
            .map(|(libraries, stale), this, ctx| {
                Self::send(ctx, &libraries);
                this.stop_lost_jobs(stale, ctx);
            }),
        );
    }

    /// Answers a job-store call of the node, refusing any write on a job whose lease it lost.
    fn serve_call(&mut self, id: u64, call: Call, ctx: &mut ws::WebsocketContext<Self>) {
        let Some((node_id, node_name)) = self.node.clone() else { return };
        if let Call::Apply { id: job_id, event: JobEvent::Fail { code, .. }, .. } = &call {
            // Before the failure is applied (which requeues the job and wakes the
            // scheduler): the retry must not go straight back to a node that ran out of room,
            // nor to the node as one that keeps the job's folder, which its last heartbeat
            // listed while the attempt ran: a failed attempt's folder goes with it.
            let free = work_dir_free_after_failure(*code, self.sight.work_dir_free_bytes);
            let kept = self.sight.kept_jobs.contains(job_id);
            if free != self.sight.work_dir_free_bytes || kept {
                self.sight.work_dir_free_bytes = free;
                self.sight.kept_jobs.retain(|kept| kept != job_id);
                self.config.links.record_sight(node_id, self.sight.clone());
            }
        }
        let (db, lifecycle, scheduler) = (self.db.clone(), self.lifecycle.clone(), self.scheduler.clone());
        ctx.spawn(
            dropped_in_runtime(async move {
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
                    Call::LastHealth { id } => {
                        json(serde_json::to_value(store.last_health(id).await.map_err(|e| e.to_string())?))
                    }
                    Call::Settings => {
                        json(serde_json::to_value(store.job_settings().await.map_err(|e| e.to_string())?))
                    }
                    Call::Apply { id, lease, event, patch, ctx } => {
                        let before = jobs::get(&db, id).await.map_err(|e| e.to_string())?;
                        fenced(&before, &lease)?;
                        judged(&node_name, &before, LinkWrite::Transition(&event), &patch)?;
                        // A transition (a completion among them) from a node revoked since
                        // its link opened is refused, also before its leases are taken over.
                        if repo::nodes::get(&db, node_id).await.map_err(|e| e.to_string())?.revoked {
                            return Err(format!("node {node_id} was revoked"));
                        }
                        let applied = store.apply(id, &lease, event, patch, ctx).await.map_err(|e| e.to_string())?;
                        if applied.job.status == JobStatus::Completed {
                            // The node removes it too, but may die before it does.
                            let dir = partial_dir_for(&crate::repo::jobs::source_path(&before));
                            let _ = tokio::task::spawn_blocking(move || remove_partial(&dir)).await;
                        }
                        json(serde_json::to_value(applied))
                    }
                    Call::UpdateLive { id, lease, patch } => {
                        let before = jobs::get(&db, id).await.map_err(|e| e.to_string())?;
                        fenced(&before, &lease)?;
                        judged(&node_name, &before, LinkWrite::Live, &patch)?;
                        store.update_live(id, &lease, patch).await.map_err(|e| e.to_string())?;
                        Ok(serde_json::Value::Null)
                    }
                    Call::RecordEvent { id, lease, kind, node, detail } => {
                        fenced(&jobs::get(&db, id).await.map_err(|e| e.to_string())?, &lease)?;
                        store.record_event(id, &lease, &kind, node, detail).await.map_err(|e| e.to_string())?;
                        Ok(serde_json::Value::Null)
                    }
                    Call::LeaseIsMine { id, lease } => {
                        let job = jobs::get(&db, id).await.map_err(|e| e.to_string())?;
                        let mine = fenced(&job, &lease).is_ok() && store.lease_is_mine(id, &lease).await;
                        Ok(serde_json::Value::Bool(mine))
                    }
                    Call::Progress { job: reported, transfer } => {
                        // Published from the job's own row, for a job this link's node holds
                        // under the lease it reports: of the node's frame only the live figures
                        // are taken, never its node, path or status.
                        let job = jobs::get(&db, reported.id).await.map_err(|e| e.to_string())?;
                        let lease = reported.lease_id.as_deref().unwrap_or_default();
                        if let Err(refusal) = fenced(&job, lease) {
                            tracing::warn!(node = %node_name, job_id = job.id, "a linked node's progress for a job it does not hold was refused");
                            return Err(refusal);
                        }
                        match transfer {
                            Some(transfer) => store.publish_transfer(&live_figures(job, &reported), transfer),
                            None => store.publish_progress(&live_figures(job, &reported)),
                        }
                        Ok(serde_json::Value::Null)
                    }
                    Call::SyncSpans { id, lease, spans } => {
                        fenced(&jobs::get(&db, id).await.map_err(|e| e.to_string())?, &lease)?;
                        let totals = store.sync_spans(id, &lease, (node_id, node_name), spans).await;
                        json(serde_json::to_value(totals.map_err(|e| e.to_string())?))
                    }
                    Call::SpanProgress { id, span, lease, frames, fps, bytes } => {
                        let mine = store.span_progress(id, span, &lease, (frames, fps, bytes)).await;
                        Ok(serde_json::Value::Bool(mine.map_err(|e| e.to_string())?))
                    }
                    Call::SpanEnd { id, span, lease, done } => {
                        store.span_end(id, span, &lease, done).await.map_err(|e| e.to_string())?;
                        // The helper's slot is free: a round now gives it the next waiting
                        // span, not the next tick (up to 2 s, a span's worth of idle core
                        // each time). The main node's own slots wake it as they free
                        // (`NodeSupervisor::idle`).
                        scheduler.do_send(Wake);
                        Ok(serde_json::Value::Null)
                    }
                    Call::StartJob { .. }
                    | Call::ControlJob { .. }
                    | Call::StartHelper { .. }
                    | Call::HealthBatch { .. }
                    | Call::CancelHealth { .. } => {
                        Err("not a call for the main node".into())
                    }
                }
            })
            .into_actor(self)
            .map(move |result, _, ctx| Self::send(ctx, &Frame::Reply { id, result })),
        );
    }
}

/// Judges a node's patch for the job `before` by `domain::link`: an event that is not the
/// node's to apply, or a field it may not write (a path above all), refuses the whole frame,
/// logged with the node's name; nothing of it is written.
fn judged(node: &str, before: &job::Model, write: LinkWrite<'_>, patch: &JobChange) -> Result<(), String> {
    if let LinkWrite::Transition(event) = write {
        if !node_may_apply(event) {
            tracing::warn!(node, job_id = before.id, event = event.name(), "a linked node's transition was refused");
            return Err(format!("a linked node may not {} job {}", event.name(), before.id));
        }
    }
    // Any of the names a container rule may give the output (`final_paths`); the name must
    // be the one of the path the patch gives.
    let outputs = final_paths(&crate::repo::jobs::source_path(before), &before.target_codec);
    let output = patch.file_path.as_ref().filter(|p| outputs.contains(p)).or(outputs.first());
    let refused: Vec<&str> = patch
        .fields()
        .into_iter()
        .filter(|field| match field_rule(*field, write) {
            FieldRule::Accept => false,
            FieldRule::Refuse => true,
            FieldRule::OutputName => match field {
                JobField::FilePath => patch.file_path.is_none() || patch.file_path.as_ref() != output,
                _ => {
                    let readable = output.and_then(|o| o.file_name()).map(crate::domain::path_bytes::readable);
                    patch.file_name.as_deref() != readable.as_deref()
                }
            },
        })
        .map(JobField::wire_name)
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    tracing::warn!(node, job_id = before.id, fields = ?refused, "a linked node's write of fields it may not change was refused");
    Err(format!("a linked node may not change {} of job {}; nothing was written", refused.join(", "), before.id))
}

/// The job's row with the live figures a node's progress reports (percent, speed, time
/// left, stalled): what the feed shows between the row's own writes.
fn live_figures(mut job: job::Model, reported: &job::Model) -> job::Model {
    job.progress = reported.progress;
    job.fps = reported.fps;
    job.eta_seconds = reported.eta_seconds;
    job.stalled = reported.stalled;
    job
}

impl Handler<CloseLink> for RemoteNode {
    type Result = ();
    fn handle(&mut self, msg: CloseLink, ctx: &mut Self::Context) {
        tracing::warn!(node = ?self.node, reason = %msg.reason, "closing the link");
        if msg.stop_jobs {
            // Sent before the close frame, on the same socket, so the node reads them first.
            let running = self.running.iter().map(|job| job.job_id).collect();
            self.stop_lost_jobs(running, ctx);
        }
        ctx.close(Some(ws::CloseReason { code: ws::CloseCode::Away, description: Some(msg.reason) }));
        ctx.stop();
    }
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
        if let Some((_, name)) = self.node.take() {
            tracing::info!(node = %name, since_heartbeat = ?self.last_seen.elapsed(), "link closed");
            // Before the name is released: a new link of the same node adds it again after.
            self.scheduler.do_send(RemoveNode(name));
        }
        // A short disconnect keeps the node's jobs: `watch_links` takes it OFFLINE and gives
        // them to others only if it has not come back by the timeout.
        if let Some(link) = self.link.take() {
            self.config.links.release(link);
        }
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
            Frame::Heartbeat {
                load1,
                memory_used,
                running,
                helping,
                missing_paths,
                checked_paths,
                transfer,
                work_dir_free_bytes,
                kept_jobs,
            } => {
                let sight = Sight {
                    checked: checked_paths,
                    missing: missing_paths,
                    shared_storage: self.sight.shared_storage,
                    transfer,
                    work_dir_free_bytes,
                    kept_jobs,
                };
                self.heartbeat(load1, memory_used, running, helping, sight, ctx)
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
        let call = Call::StartJob { job_id: msg.job_id, lease_id: msg.lease_id.clone(), by_transfer: msg.by_transfer };
        let rx = self.request(call, ctx);
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

impl Handler<StartHelper> for RemoteNode {
    type Result = ResponseActFuture<Self, bool>;

    fn handle(&mut self, msg: StartHelper, ctx: &mut Self::Context) -> Self::Result {
        let helper = msg.0;
        let call = Call::StartHelper {
            job_id: helper.job_id,
            span: helper.span,
            lease_id: helper.lease_id.clone(),
            by_transfer: helper.by_transfer,
        };
        let rx = self.request(call, ctx);
        Box::pin(async move { matches!(rx.await, Ok(Ok(serde_json::Value::Bool(true)))) }.into_actor(self).map(
            move |accepted, this, _| {
                if accepted {
                    // Counted until the next heartbeat says otherwise.
                    this.helping.push(helper);
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
        MessageResult(capacity(self.max_jobs, self.busy(), &self.sight))
    }
}

impl RemoteNode {
    /// Slots in use as the main node counts them: jobs and helpers (as the last heartbeat
    /// said, and those started since) and health batches not yet answered.
    fn busy(&self) -> usize {
        self.running.len() + self.helping.len() + self.checks
    }
}

impl Handler<OfferChecks> for RemoteNode {
    type Result = MessageResult<OfferChecks>;
    fn handle(&mut self, msg: OfferChecks, _: &mut Self::Context) -> Self::Result {
        let Some((_, name)) = self.node.as_ref().filter(|_| self.health_checks) else { return MessageResult(None) };
        let max_jobs = usize::try_from(self.max_jobs).unwrap_or(0);
        let offer = CheckOffer {
            free: max_jobs.saturating_sub(self.busy()),
            sees: sees_library(&msg.roots, self.sight.checked.as_deref(), &self.sight.missing) == Some(true),
            takes_jobs: max_jobs > 0,
            main: false,
        };
        MessageResult(Some((name.clone(), offer)))
    }
}

impl Handler<CancelOnNode> for RemoteNode {
    type Result = ();
    fn handle(&mut self, msg: CancelOnNode, ctx: &mut Self::Context) {
        if self.node.is_some() && self.health_checks {
            // The answer only says how many batches it stopped.
            drop(self.request(Call::CancelHealth { library_id: msg.library_id }, ctx));
        }
    }
}

impl Handler<CheckOnNode> for RemoteNode {
    type Result = ResponseActFuture<Self, Result<Vec<FileHealth>, NotTaken>>;

    fn handle(&mut self, msg: CheckOnNode, ctx: &mut Self::Context) -> Self::Result {
        if self.node.is_none() || !self.health_checks {
            return Box::pin(actix::fut::ready(Err(NotTaken::Refused("the node takes no health checks".into()))));
        }
        if self.busy() >= usize::try_from(self.max_jobs).unwrap_or(0) {
            return Box::pin(actix::fut::ready(Err(NotTaken::Busy)));
        }
        // Counted busy until the answer, so the scheduler gives the slot no job meanwhile.
        self.checks += 1;
        let asked = msg.paths.len();
        let call =
            Call::HealthBatch { library_id: msg.library_id, depth: msg.depth, roots: msg.roots, paths: msg.paths };
        let rx = self.request(call, ctx);
        Box::pin(
            async move {
                match rx.await {
                    Ok(Ok(value)) => match serde_json::from_value::<BatchAnswer>(value) {
                        Ok(BatchAnswer::Busy) => Err(NotTaken::Busy),
                        Ok(BatchAnswer::Cancelled) => Err(NotTaken::Refused("the run was cancelled".into())),
                        Ok(BatchAnswer::Checked(results)) if results.len() == asked => Ok(results),
                        Ok(BatchAnswer::Checked(results)) => Err(NotTaken::Refused(format!(
                            "{} results for {asked} files",
                            results.len()
                        ))),
                        Err(e) => Err(NotTaken::Refused(format!("an unreadable answer: {e}"))),
                    },
                    Ok(Err(refused)) => Err(NotTaken::Refused(refused)),
                    Err(_) => Err(NotTaken::Lost("no answer".into())),
                }
            }
            .into_actor(self)
            .map(|result, this, _| {
                this.checks = this.checks.saturating_sub(1);
                if let Err(e) = &result {
                    tracing::info!(node = ?this.node, error = %e, "a health batch was not checked; it goes back to its run");
                }
                result
            }),
        )
    }
}

impl Handler<ControlJob> for RemoteNode {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, msg: ControlJob, ctx: &mut Self::Context) -> Self::Result {
        if !self.running.iter().any(|r| r.job_id == msg.job_id) && !self.helping.iter().any(|h| h.job_id == msg.job_id)
        {
            return Box::pin(async { false });
        }
        let rx = self.request(Call::ControlJob { job_id: msg.job_id, command: msg.command }, ctx);
        Box::pin(async move { matches!(rx.await, Ok(Ok(serde_json::Value::Bool(true)))) })
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

impl Handler<AskLibraries> for RemoteNode {
    type Result = ();
    fn handle(&mut self, _: AskLibraries, ctx: &mut Self::Context) {
        if self.node.is_some() {
            self.send_libraries(ctx);
        }
    }
}

impl RemoteNode {
    /// Sends the node the library paths it must see; it checks them and answers with a
    /// heartbeat at once.
    fn send_libraries(&mut self, ctx: &mut ws::WebsocketContext<Self>) {
        let (db, folders) = (self.db.clone(), self.config.folders.clone());
        let told = async move {
            match repo::libraries::list(&db).await {
                Ok(libraries) => Ok(folders.frame(&libraries).await),
                Err(e) => Err(e),
            }
        };
        ctx.spawn(dropped_in_runtime(told).into_actor(self).map(|libraries, _, ctx| match libraries {
            Ok(libraries) => Self::send(ctx, &libraries),
            Err(e) => tracing::warn!(error = %e, "cannot read the libraries to tell a linked node"),
        }));
    }

    /// Tells the node to stop jobs whose lease it lost, leaving their records alone (the
    /// records belong to whoever holds the lease now).
    fn stop_lost_jobs(&mut self, lost: Vec<i32>, ctx: &mut ws::WebsocketContext<Self>) {
        for job_id in lost {
            tracing::info!(job_id, node = ?self.node, "the node runs a job whose lease it lost; telling it to stop");
            // The answer only says whether the node still ran it.
            drop(self.request(Call::ControlJob { job_id, command: JobCommand::Shutdown }, ctx));
        }
    }
}
