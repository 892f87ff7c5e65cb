//! The cluster's membership, as the main node keeps it: which links are open (one per node
//! name and per node row), who may register as which node (enrollment with CLUSTER_TOKEN or
//! a node's own credential, and which row it gets), and how a node leaves: taken OFFLINE
//! when its heartbeats stop (`watch_links`), revoked or removed by an administrator, its
//! running jobs given back to the queue each time. The links themselves are `link`'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use actix::prelude::*;
use entities::node;
use sea_orm::DatabaseConnection;

use crate::actors::health_batch::{CancelOnNode, CheckOnNode, OfferChecks};
use crate::actors::lifecycle::{EventContext, Lifecycle, LifecycleError};
use crate::actors::node::RunningJob;
use crate::actors::protocol::{Frame, Sight};
use crate::domain::job::JobStatus;
use crate::domain::node::{NodeRole, NodeStatus};
use crate::repo::{self, jobs};

/// What the main node tells linked nodes.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub heartbeat: Duration,
    pub timeout: Duration,
    pub license_public_key: String,
    /// The clock the licence's tier is read with (a trial's or a key's end), as the
    /// scheduler's.
    pub clock: crate::host::clock::Clock,
    pub main_node_name: String,
    /// The links open now, shared by every link and the watch that takes nodes offline.
    pub links: Links,
    /// The main node's last look into its library folders, shared by every link
    /// (`Folders::frame`).
    pub folders: Folders,
}

/// The main node's last look into its library folders (which hold something), shared by
/// every link: each node's heartbeat, each second, is answered with it, and a share that
/// does not answer holds one blocking thread, not one per heartbeat.
#[derive(Debug, Clone, Default)]
pub struct Folders(Arc<Mutex<Looked>>);

#[derive(Debug, Default)]
struct Looked {
    at: Option<Instant>,
    paths: Vec<String>,
    not_empty: Vec<String>,
    looking: bool,
}

/// How long the main node waits for a look into its library folders before it tells a node
/// the paths without saying which hold something (a folder is then enough): a share that
/// does not answer must not hold up the heartbeat's answer.
const SIGHT_PATIENCE: Duration = Duration::from_secs(2);

/// How long a look into the library folders serves: every node's heartbeat is answered with
/// the paths, each second.
const SIGHT_FRESH: Duration = Duration::from_secs(10);

impl Folders {
    fn lock(&self) -> MutexGuard<'_, Looked> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The `Libraries` frame of `libraries`' paths, with those that hold something here
    /// (`host::sight`): a node that finds one of them empty sees a mount point, not the library.
    pub(super) async fn frame(&self, libraries: &[entities::library::Model]) -> Frame {
        let paths: Vec<String> = libraries.iter().flat_map(repo::libraries::paths_of).collect();
        let cached = |l: &Looked| if l.paths == paths { l.not_empty.clone() } else { Vec::new() };
        {
            let mut last = self.lock();
            let fresh = last.at.is_some_and(|at| at.elapsed() < SIGHT_FRESH);
            if (fresh && last.paths == paths) || last.looking {
                return Frame::Libraries { not_empty: cached(&last), paths };
            }
            last.looking = true;
        }
        let (all, record) = (paths.clone(), self.clone());
        // The look records itself, however late it ends.
        let look = tokio::task::spawn_blocking(move || {
            let not_empty: Vec<String> = all
                .iter()
                .filter(|p| crate::host::sight::holds_anything(std::path::Path::new(p.as_str())))
                .cloned()
                .collect();
            *record.lock() = Looked { at: Some(Instant::now()), paths: all, not_empty, looking: false };
        });
        let not_empty = match tokio::time::timeout(SIGHT_PATIENCE, look).await {
            Ok(Ok(())) => cached(&self.lock()),
            Ok(Err(_)) => {
                self.lock().looking = false;
                Vec::new()
            }
            Err(_) => Vec::new(),
        };
        Frame::Libraries { paths, not_empty }
    }
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
    /// Each row's link, how to reach it, and what its node last said it sees.
    rows: HashMap<i32, (u64, LinkControl, Sight)>,
}

/// How the rest of the main node reaches one link.
#[derive(Clone)]
pub struct LinkControl {
    pub close: Recipient<CloseLink>,
    pub ask: Recipient<AskLibraries>,
    /// Library health batches (`actors::health_batch`).
    pub offer: Recipient<OfferChecks>,
    pub check: Recipient<CheckOnNode>,
    pub cancel: Recipient<CancelOnNode>,
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
    pub(super) fn claim_name(&self, name: &str) -> Option<u64> {
        let mut table = self.table();
        if table.names.contains_key(name) {
            return None;
        }
        table.next += 1;
        let link = table.next;
        table.names.insert(name.to_string(), link);
        Some(link)
    }

    /// Claims the node row `row` for `link`; false while another link holds it. What the
    /// node sees is not known until it reports.
    pub(super) fn claim_row(&self, link: u64, row: i32, control: LinkControl) -> bool {
        let mut table = self.table();
        match table.rows.get(&row) {
            Some((holder, _, _)) if *holder != link => false,
            Some((_, _, sight)) => {
                let sight = sight.clone();
                table.rows.insert(row, (link, control, sight));
                true
            }
            None => {
                table.rows.insert(row, (link, control, Sight::unreported()));
                true
            }
        }
    }

    pub(super) fn holder_of(&self, row: i32) -> Option<u64> {
        self.table().rows.get(&row).map(|(link, _, _)| *link)
    }

    /// How to close the link that holds `row`, while one does.
    fn link_of(&self, row: i32) -> Option<Recipient<CloseLink>> {
        self.table().rows.get(&row).map(|(_, control, _)| control.close.clone())
    }

    /// Keeps what the node of `row` reported it sees, for `GET /nodes`.
    pub(super) fn record_sight(&self, row: i32, sight: Sight) {
        if let Some(entry) = self.table().rows.get_mut(&row) {
            entry.2 = sight;
        }
    }

    /// What the node of `row` last reported it sees, while it is linked.
    pub fn sight_of(&self, row: i32) -> Option<Sight> {
        self.table().rows.get(&row).map(|(_, _, sight)| sight.clone())
    }

    /// Tells every linked node the library paths again (a library was created, moved or
    /// deleted), so each checks them and reports at once.
    pub fn ask_libraries(&self) {
        let asks: Vec<Recipient<AskLibraries>> =
            self.table().rows.values().map(|(_, control, _)| control.ask.clone()).collect();
        for ask in asks {
            ask.do_send(AskLibraries);
        }
    }

    /// Every open link, by its node's row, as a health run reaches it: what it offers, and
    /// where its batches go.
    pub fn checkers(&self) -> Vec<(i32, Recipient<OfferChecks>, Recipient<CheckOnNode>)> {
        let mut all: Vec<_> = self
            .table()
            .rows
            .iter()
            .map(|(row, (_, control, _))| (*row, control.offer.clone(), control.check.clone()))
            .collect();
        // In the rows' order, so a tie between nodes goes the same way each time.
        all.sort_by_key(|(row, _, _)| *row);
        all
    }

    /// Tells every linked node that the health run of `library_id` was cancelled.
    pub fn cancel_checks(&self, library_id: i32) {
        let cancels: Vec<Recipient<CancelOnNode>> =
            self.table().rows.values().map(|(_, control, _)| control.cancel.clone()).collect();
        for cancel in cancels {
            cancel.do_send(CancelOnNode { library_id });
        }
    }

    pub(super) fn release(&self, link: u64) {
        let mut table = self.table();
        table.names.retain(|_, holder| *holder != link);
        table.rows.retain(|_, (holder, _, _)| *holder != link);
    }
}

/// Sends the node the library paths it must see (a library changed).
#[derive(Message)]
#[rtype(result = "()")]
pub struct AskLibraries;

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

/// Whether this registration enrolls the node (it is given a new credential), or why it is
/// refused. A link made with a node's credential registers that node and no other; CLUSTER_TOKEN
/// enrolls a new node, or one from before credentials, but never takes over a node that has a
/// credential of its own (its identity or, while it is revoked, its name).
pub(super) fn enrollment(
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
pub(super) fn admit(
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
pub(super) async fn reconcile(lifecycle: &Lifecycle, node_id: i32, node: &str, running: &[RunningJob]) {
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
    if let Some(link) = links.link_of(id) {
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
    if links.link_of(id).is_some() {
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
                    if let Some(link) = config.links.link_of(n.id) {
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

/// The jobs linked nodes held when the main node started (`actors::recover_orphans` left
/// them to their nodes): after `grace`, those whose node has not linked again go back to
/// the queue (`crashed`: the main node's last run did not stop cleanly, counted as its
/// restart counts its own jobs). A node that did link again reports what it runs in its
/// heartbeats (`reconcile`), and a job requeued or ended since is left alone (`orphan`
/// compares the lease).
pub async fn requeue_unclaimed(lifecycle: Lifecycle, kept: Vec<entities::job::Model>, grace: Duration, crashed: bool) {
    tokio::time::sleep(grace).await;
    let nodes = match repo::nodes::list(&lifecycle.db).await {
        Ok(nodes) => nodes,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the nodes; their jobs go back to the queue");
            Vec::new()
        }
    };
    for job in kept {
        let linked = nodes.iter().any(|n| Some(n.id) == job.node_id && n.status != NodeStatus::Offline);
        if linked {
            continue;
        }
        let ctx = EventContext {
            node: job.node_name.clone(),
            detail: Some(serde_json::json!({"reason": "its node did not link again after the main node restarted"})),
            failure_detail: None,
        };
        match lifecycle.orphan(&job, crashed, ctx).await {
            Ok(true) => tracing::warn!(job_id = job.id, node = ?job.node_name, "requeued: its node did not link again"),
            Ok(false) => {}
            Err(e) => tracing::warn!(job_id = job.id, error = %e, "could not requeue a job of a node that is away"),
        }
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
