//! The main node's side of the cluster: a `RemoteNode` actor per linked node's link. It
//! registers the node (within the licence's node limit), mirrors it to the scheduler as a
//! node with slots, relays job commands to it, answers its job-store calls after checking
//! each against the job's lease (a node that lost a job cannot touch it), and turns missed
//! heartbeats into OFFLINE with the node's jobs back in the queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web_actors::ws;
use entities::{job, node};
use sea_orm::DatabaseConnection;
use tokio::sync::oneshot;

use super::job::helper::HelperRef;
use super::lifecycle::{EventContext, Lifecycle, LifecycleError};
use super::node::{Capacity, ControlJob, NodeCapacity, RunningJob, StartHelper, StartJob};
use super::protocol::{capacity, Call, Frame};
use super::scheduler::{effective_tier, AddNode, NodeHandle, RemoveNode, Scheduler};
use super::store::{holds_lease, DbStore, JobStore};
use crate::domain::job::JobStatus;
use crate::domain::link::{field_rule, node_may_apply, FieldRule, JobField, LinkWrite};
use crate::domain::node::{node_status, NodeRole, NodeStatus};
use crate::media::layout::partial_dir_for;
use crate::media::partial::remove_partial;
use crate::media::plan::final_path;
use crate::repo::jobs::{self, JobChange};
use crate::repo::{self, nodes::NodeFacts};

/// What the main node tells linked nodes.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub heartbeat: Duration,
    pub timeout: Duration,
    pub license_public_key: String,
    pub main_node_name: String,
    /// The links open now, shared by every link and the watch that takes nodes offline.
    pub links: Links,
}

/// The open links: at most one per node name and one per node row. Each link runs on the
/// thread of the HTTP worker that accepted it, so the table is shared behind a lock (held
/// only for map operations, never across an await).
#[derive(Clone, Default)]
pub struct Links(Arc<Mutex<LinkTable>>);

#[derive(Default)]
struct LinkTable {
    next: u64,
    names: HashMap<String, u64>,
    rows: HashMap<i32, (u64, Addr<RemoteNode>)>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = self.table();
        f.debug_struct("Links").field("names", &table.names.keys().collect::<Vec<_>>()).finish()
    }
}

impl Links {
    fn table(&self) -> MutexGuard<'_, LinkTable> {
        // The table stays consistent under a panic (single map operations).
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Claims `name` for a new link; `None` while another link holds it.
    fn claim_name(&self, name: &str) -> Option<u64> {
        let mut table = self.table();
        if table.names.contains_key(name) {
            return None;
        }
        table.next += 1;
        let link = table.next;
        table.names.insert(name.to_string(), link);
        Some(link)
    }

    /// Claims the node row `row` for `link`; false while another link holds it.
    fn claim_row(&self, link: u64, row: i32, addr: Addr<RemoteNode>) -> bool {
        let mut table = self.table();
        match table.rows.get(&row) {
            Some((holder, _)) if *holder != link => false,
            _ => {
                table.rows.insert(row, (link, addr));
                true
            }
        }
    }

    fn holder_of(&self, row: i32) -> Option<u64> {
        self.table().rows.get(&row).map(|(link, _)| *link)
    }

    fn address_of(&self, row: i32) -> Option<Addr<RemoteNode>> {
        self.table().rows.get(&row).map(|(_, addr)| addr.clone())
    }

    fn release(&self, link: u64) {
        let mut table = self.table();
        table.names.retain(|_, holder| *holder != link);
        table.rows.retain(|_, (holder, _)| *holder != link);
    }
}

/// How a link was authenticated (`http::cluster`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkAuth {
    /// With CLUSTER_TOKEN: a node enrolling (or one enrolled before credentials existed); it
    /// is given a credential of its own.
    Enrolling,
    /// With the credential of the node row `id`, whose identity is `identity`.
    Node { id: i32, identity: String },
}

/// A job the node reported less than this ago is not yet expected in its heartbeats.
const START_GRACE: chrono::Duration = chrono::Duration::seconds(10);

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
        let Frame::Register { name, address, cores, memory_total, gpu, encoders, decoders, max_jobs, identity, .. } =
            frame
        else {
            return;
        };
        // Claimed before any database work, so two links with one name cannot both pass.
        let Some(link) = self.config.links.claim_name(&name) else {
            let reason = format!("another node named {name:?} is linked now; give each linked node its own NODE_NAME");
            return Self::refuse(reason, ctx);
        };
        self.link = Some(link);
        let (db, key, main_name, links) = (
            self.db.clone(),
            self.config.license_public_key.clone(),
            self.config.main_node_name.clone(),
            self.config.links.clone(),
        );
        let me = ctx.address();
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
            async move {
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
                let tier = effective_tier(&db, &key).await;
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
            }
            .into_actor(self)
            .map(move |result, this, ctx| match result {
                Ok((id, name, identity, credential)) => {
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
                            identity,
                            credential,
                        },
                    );
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
        missing: Vec<String>,
        ctx: &mut ws::WebsocketContext<Self>,
    ) {
        let Some((id, name)) = self.node.clone() else { return };
        self.last_seen = Instant::now();
        self.running = running.clone();
        self.helping = helping;
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
        let Some((node_id, node_name)) = self.node.clone() else { return };
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
                    Call::Progress { job: reported } => {
                        // Published from the job's own row, for a job this link's node holds
                        // under the lease it reports: of the node's frame only the live figures
                        // are taken, never its node, path or status.
                        let job = jobs::get(&db, reported.id).await.map_err(|e| e.to_string())?;
                        let lease = reported.lease_id.as_deref().unwrap_or_default();
                        if let Err(refusal) = fenced(&job, lease) {
                            tracing::warn!(node = %node_name, job_id = job.id, "a linked node's progress for a job it does not hold was refused");
                            return Err(refusal);
                        }
                        store.publish_progress(&live_figures(job, &reported));
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
                        Ok(serde_json::Value::Null)
                    }
                    Call::StartJob { .. } | Call::ControlJob { .. } | Call::StartHelper { .. } => {
                        Err("not a call for the main node".into())
                    }
                }
            }
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
    let output = final_path(&crate::repo::jobs::source_path(before), &before.target_codec);
    let refused: Vec<&str> = patch
        .fields()
        .into_iter()
        .filter(|field| match field_rule(*field, write) {
            FieldRule::Accept => false,
            FieldRule::Refuse => true,
            FieldRule::OutputName => match field {
                JobField::FilePath => patch.file_path.as_deref() != Some(output.as_path()),
                _ => {
                    let readable = output.file_name().map(crate::domain::path_bytes::readable);
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

/// Whether this registration enrolls the node (it is given a new credential), or why it is
/// refused. A link made with a node's credential registers that node and no other; CLUSTER_TOKEN
/// enrolls a new node, or one from before credentials, but never takes over a node that has a
/// credential of its own (its identity or, while it is revoked, its name).
fn enrollment(
    auth: &LinkAuth,
    identity: Option<&str>,
    by_identity: Option<&node::Model>,
    by_name: Option<&node::Model>,
) -> Result<bool, String> {
    match auth {
        LinkAuth::Node { identity: own, .. } => match identity {
            Some(presented) if presented == own => Ok(false),
            _ => Err("the identity in the registration is not the one the credential belongs to".into()),
        },
        LinkAuth::Enrolling => {
            if let Some(own) = by_identity {
                if own.revoked {
                    return Err(format!(
                        "node {} ({:?}) was revoked; an administrator must remove it before it can enroll again",
                        own.id, own.name
                    ));
                }
                if own.credential_hash.is_some() {
                    return Err(format!(
                        "node {} ({:?}) has a credential of its own and links with it, not with CLUSTER_TOKEN; \
                         if its DATA_DIR/node-credential was lost, remove node-id beside it to enroll as a new node",
                        own.id, own.name
                    ));
                }
            }
            if let Some(named) = by_name.filter(|n| n.revoked) {
                return Err(format!(
                    "the name {:?} belongs to node {}, which was revoked; remove that node or give this one another NODE_NAME",
                    named.name, named.id
                ));
            }
            Ok(true)
        }
    }
}

/// Which node row a registering node gets (`None`: a new row), or why it is refused. A node
/// is known by the identity it presents; without one (or with one this main node does not
/// know) it may take the row of its name only while that row is OFFLINE, so a second node
/// given the same NODE_NAME never shares the row (and the jobs) of a node that is up.
/// `linked(row)`: another link holds that row now.
fn admit(
    name: &str,
    by_identity: Option<&node::Model>,
    by_name: Option<&node::Model>,
    linked: impl Fn(i32) -> bool,
) -> Result<Option<i32>, String> {
    if let Some(own) = by_identity {
        if linked(own.id) {
            return Err(format!(
                "node {} ({:?}) is linked now with this node's identity; two nodes must not share a DATA_DIR",
                own.id, own.name
            ));
        }
        return match by_name {
            Some(other) if other.id != own.id => Err(format!(
                "the name {name:?} belongs to node {}; give this node another NODE_NAME or remove that node",
                other.id
            )),
            _ => Ok(Some(own.id)),
        };
    }
    match by_name {
        None => Ok(None),
        Some(other) if other.role != NodeRole::Linked => {
            Err(format!("the name {name:?} is the main node's; give the linked node its own NODE_NAME"))
        }
        Some(other) if linked(other.id) || other.status != NodeStatus::Offline => Err(format!(
            "another node named {name:?} is linked (node {}, {}); give each linked node its own NODE_NAME",
            other.id,
            NodeStatus::from(other.status)
        )),
        Some(other) => Ok(Some(other.id)),
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
            if let Err(e) = lifecycle.orphan(&job, true, ctx).await {
                tracing::debug!(job_id = job.id, error = %e, "reconcile skipped a job");
            }
        }
    }
}

/// Marks the node OFFLINE and gives its running jobs back to the queue, unless a heartbeat
/// refreshed it since it was last seen at `seen` (then it is up, and nothing changes).
pub async fn take_offline(
    lifecycle: &Lifecycle,
    node_id: i32,
    node: &str,
    seen: Option<chrono::DateTime<chrono::Utc>>,
    reason: String,
) -> Result<Option<u64>, LifecycleError> {
    if !repo::nodes::set_offline_if_unseen_since(&lifecycle.db, node_id, seen, reason.clone()).await? {
        return Ok(None);
    }
    if let Err(e) = repo::notifications::node_changed(&lifecycle.db, false, node, Some(&reason)).await {
        tracing::warn!(node, error = %e, "the node.offline notification was not written");
    }
    // The node vanished without a word: counted as a crash.
    let requeued = requeue_jobs_of(lifecycle, node_id, node, &reason, true).await?;
    tracing::warn!(node, requeued, %reason, "node offline");
    Ok(Some(requeued))
}

/// Gives the node's running jobs back to the queue (their leases taken over, so the node can
/// no longer write to them); `crashed`: counted against the files as a crash.
async fn requeue_jobs_of(
    lifecycle: &Lifecycle,
    node_id: i32,
    node: &str,
    reason: &str,
    crashed: bool,
) -> Result<u64, LifecycleError> {
    let mut requeued = 0;
    for job in jobs::in_statuses(&lifecycle.db, &[JobStatus::Analyzing, JobStatus::Encoding]).await? {
        if job.node_id == Some(node_id) {
            let ctx = EventContext {
                node: Some(node.to_string()),
                detail: Some(serde_json::json!({"reason": reason})),
                failure_detail: None,
            };
            if lifecycle.orphan(&job, crashed, ctx).await? {
                requeued += 1;
            }
        }
    }
    Ok(requeued)
}

/// What an administrator's revocation or removal of a node did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeChange {
    /// Done; this many of its jobs went back to the queue.
    Done { requeued: u64 },
    /// No such linked node.
    NotFound,
    /// Refused, and why.
    Refused(String),
}

/// Revokes a linked node: its credential is refused from this moment (the row says so
/// first), its link is closed at once, and its running jobs go back to the queue, their
/// leases taken over so nothing it still sends can touch them. Not counted as a crash of
/// the files: nothing went wrong with them.
pub async fn revoke_node(lifecycle: &Lifecycle, links: &Links, id: i32) -> Result<NodeChange, LifecycleError> {
    if !repo::nodes::revoke(&lifecycle.db, id).await? {
        return Ok(NodeChange::NotFound);
    }
    let node = repo::nodes::get(&lifecycle.db, id).await?;
    if let Some(link) = links.address_of(id) {
        link.do_send(CloseLink { reason: "revoked by an administrator".into(), stop_jobs: true });
    }
    let requeued = requeue_jobs_of(lifecycle, id, &node.name, "the node was revoked", false).await?;
    tracing::warn!(node = %node.name, node_id = id, requeued, "linked node revoked");
    Ok(NodeChange::Done { requeued })
}

/// Removes a linked node's row, so its name and identity may enroll again. Refused while it
/// is linked: revoke it (or stop it) first.
pub async fn remove_node(lifecycle: &Lifecycle, links: &Links, id: i32) -> Result<NodeChange, LifecycleError> {
    let node = match repo::nodes::get(&lifecycle.db, id).await {
        Ok(node) => node,
        Err(repo::RepoError::NotFound(_)) => return Ok(NodeChange::NotFound),
        Err(other) => return Err(other.into()),
    };
    if node.role != NodeRole::Linked {
        return Ok(NodeChange::Refused(format!("node {id} ({:?}) is the main node", node.name)));
    }
    if links.address_of(id).is_some() {
        return Ok(NodeChange::Refused(format!(
            "node {id} ({:?}) is linked now; revoke it, or stop it, before removing it",
            node.name
        )));
    }
    let requeued = requeue_jobs_of(lifecycle, id, &node.name, "the node was removed", false).await?;
    if !repo::nodes::remove(&lifecycle.db, id).await? {
        return Ok(NodeChange::NotFound);
    }
    tracing::warn!(node = %node.name, node_id = id, requeued, "linked node removed");
    Ok(NodeChange::Done { requeued })
}

/// Takes linked nodes OFFLINE once their last heartbeat is older than the timeout, and gives
/// their jobs back to the queue. The decision is this task's alone, on its own timer and
/// from the database: it does not depend on a link noticing that it closed, nor on a link's
/// context still running (a closed link runs nothing, and one left half-open by a dead
/// peer may never hear of it).
pub async fn watch_links(lifecycle: Lifecycle, config: ClusterConfig) {
    let mut tick = tokio::time::interval(config.heartbeat.clamp(Duration::from_millis(200), Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let timeout = chrono::Duration::from_std(config.timeout).unwrap_or_else(|_| chrono::Duration::weeks(52));
    loop {
        tick.tick().await;
        let nodes = match repo::nodes::list(&lifecycle.db).await {
            Ok(nodes) => nodes,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the nodes to check their heartbeats");
                continue;
            }
        };
        let now = chrono::Utc::now();
        for n in nodes.into_iter().filter(|n| {
            n.role == NodeRole::Linked
                && n.status != NodeStatus::Offline
                && n.last_seen_at.is_none_or(|seen| now - seen > timeout)
        }) {
            let reason = format!("no heartbeat for {} s", config.timeout.as_secs());
            match take_offline(&lifecycle, n.id, &n.name, n.last_seen_at, reason.clone()).await {
                Ok(Some(_)) => {
                    // A link still open to it (a stopped or unreachable node) closes too,
                    // so the scheduler gives it nothing more.
                    if let Some(link) = config.links.address_of(n.id) {
                        link.do_send(CloseLink { reason, stop_jobs: false });
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(node = %n.name, error = %e, "could not take the node offline"),
            }
        }
    }
}

/// Closes a link from outside it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseLink {
    pub reason: String,
    /// Tell the node to stop its jobs first (a revocation: they are requeued at once, and
    /// their partial folders' locks stay taken until the node lets them go).
    pub stop_jobs: bool,
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
            Frame::Heartbeat { load1, memory_used, running, helping, missing_paths } => {
                self.heartbeat(load1, memory_used, running, helping, missing_paths, ctx)
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

impl Handler<StartHelper> for RemoteNode {
    type Result = ResponseActFuture<Self, bool>;

    fn handle(&mut self, msg: StartHelper, ctx: &mut Self::Context) -> Self::Result {
        let helper = msg.0;
        let call = Call::StartHelper { job_id: helper.job_id, span: helper.span, lease_id: helper.lease_id.clone() };
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
        MessageResult(capacity(self.max_jobs, self.running.len() + self.helping.len(), &self.missing_paths))
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

/// At start-up no link is open yet: linked nodes recorded as up are not.
pub async fn mark_linked_nodes_offline(db: &DatabaseConnection) {
    if let Ok(nodes) = repo::nodes::list(db).await {
        for n in nodes.into_iter().filter(|n| n.role == NodeRole::Linked && n.status != NodeStatus::Offline) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i32, name: &str, status: NodeStatus, identity: Option<&str>) -> node::Model {
        let at = chrono::Utc::now();
        node::Model {
            id,
            name: name.into(),
            role: NodeRole::Linked.into(),
            address: name.into(),
            status: status.into(),
            status_reason: None,
            gpu: None,
            cores: 1,
            load1: 0.0,
            memory_used: 0,
            memory_total: 0,
            active_jobs: 0,
            max_jobs: 1,
            encoders: serde_json::json!([]),
            decoders: serde_json::json!([]),
            credential_hash: None,
            revoked: false,
            identity: identity.map(str::to_string),
            last_seen_at: Some(at),
            created_at: at,
            updated_at: at,
        }
    }

    const NONE_LINKED: fn(i32) -> bool = |_| false;

    fn node_auth(identity: &str) -> LinkAuth {
        LinkAuth::Node { id: 2, identity: identity.into() }
    }

    #[test]
    fn a_credential_registers_its_own_node_and_no_other() {
        let own = row(2, "w1", NodeStatus::Online, Some("a"));
        assert_eq!(enrollment(&node_auth("a"), Some("a"), Some(&own), Some(&own)), Ok(false));
        for presented in [None, Some("b")] {
            let reason = enrollment(&node_auth("a"), presented, None, None).unwrap_err();
            assert!(reason.contains("not the one the credential belongs to"), "{reason}");
        }
    }

    #[test]
    fn the_cluster_token_enrolls_new_nodes_and_nodes_from_before_credentials() {
        assert_eq!(enrollment(&LinkAuth::Enrolling, None, None, None), Ok(true));
        let before = row(2, "w1", NodeStatus::Offline, Some("a"));
        assert_eq!(enrollment(&LinkAuth::Enrolling, Some("a"), Some(&before), Some(&before)), Ok(true));
        // An offline row of the name, without a credential of its own: taken over (`admit`).
        assert_eq!(enrollment(&LinkAuth::Enrolling, None, None, Some(&before)), Ok(true));
    }

    #[test]
    fn the_cluster_token_never_takes_over_a_node_with_a_credential_or_a_revoked_one() {
        let enrolled =
            node::Model { credential_hash: Some("h".into()), ..row(2, "w1", NodeStatus::Offline, Some("a")) };
        let reason = enrollment(&LinkAuth::Enrolling, Some("a"), Some(&enrolled), Some(&enrolled)).unwrap_err();
        assert!(reason.contains("credential of its own") && reason.contains("node-id"), "{reason}");
        let revoked = node::Model { revoked: true, ..enrolled.clone() };
        let reason = enrollment(&LinkAuth::Enrolling, Some("a"), Some(&revoked), None).unwrap_err();
        assert!(reason.contains("revoked") && reason.contains("remove"), "{reason}");
        // Nor by its name, from a fresh DATA_DIR.
        let reason = enrollment(&LinkAuth::Enrolling, None, None, Some(&revoked)).unwrap_err();
        assert!(reason.contains("revoked") && reason.contains("NODE_NAME"), "{reason}");
    }

    #[test]
    fn a_new_name_gets_a_new_row() {
        assert_eq!(admit("w1", None, None, NONE_LINKED), Ok(None));
    }

    #[test]
    fn a_known_identity_gets_its_row_back_while_no_link_holds_it() {
        let own = row(2, "w1", NodeStatus::Online, Some("a"));
        assert_eq!(admit("w1", Some(&own), Some(&own), NONE_LINKED), Ok(Some(2)));
        let reason = admit("w1", Some(&own), Some(&own), |id| id == 2).unwrap_err();
        assert!(reason.contains("DATA_DIR"), "{reason}");
    }

    #[test]
    fn a_known_identity_may_rename_its_row_but_not_onto_another_nodes_name() {
        let own = row(2, "old", NodeStatus::Offline, Some("a"));
        assert_eq!(admit("new", Some(&own), None, NONE_LINKED), Ok(Some(2)));
        let other = row(3, "new", NodeStatus::Offline, Some("b"));
        assert!(admit("new", Some(&own), Some(&other), NONE_LINKED).unwrap_err().contains("belongs to node 3"));
    }

    #[test]
    fn a_name_held_by_a_node_that_is_up_is_refused_to_any_other_node() {
        for status in [NodeStatus::Online, NodeStatus::Degraded] {
            let other = row(2, "w1", status, Some("a"));
            let reason = admit("w1", None, Some(&other), NONE_LINKED).unwrap_err();
            assert!(reason.contains("NODE_NAME"), "{reason}");
        }
        let offline = row(2, "w1", NodeStatus::Offline, Some("a"));
        assert!(admit("w1", None, Some(&offline), |id| id == 2).is_err());
    }

    #[test]
    fn an_offline_row_is_taken_over_by_a_node_without_a_known_identity() {
        let offline = row(2, "w1", NodeStatus::Offline, Some("a"));
        assert_eq!(admit("w1", None, Some(&offline), NONE_LINKED), Ok(Some(2)));
    }

    #[test]
    fn the_main_nodes_name_is_refused() {
        let main = node::Model { role: NodeRole::Main.into(), ..row(1, "main", NodeStatus::Offline, None) };
        assert!(admit("main", None, Some(&main), NONE_LINKED).is_err());
    }

    #[test]
    fn one_link_per_name_until_it_is_released() {
        let links = Links::default();
        let first = links.claim_name("w1").unwrap();
        assert_eq!(links.claim_name("w1"), None);
        links.release(first);
        assert!(links.claim_name("w1").is_some());
    }
}
