//! `Scheduler`: matches QUEUED jobs to nodes with free slots, within the licence's limit on
//! concurrent jobs and the nodes' encoding windows (nodes that see a job's file first, then
//! those that take it by transfer: `domain::placement`), and carries out users' job actions
//! (pause, resume, retry, cancel, force) on jobs wherever they are. A node whose window is
//! closed gets no new work; with "pause" on close, its running jobs are told to yield at a
//! segment boundary (`JobCommand::Yield`), back to the queue, to continue where they stopped
//! once a window opens.

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;
use entities::job;
use futures_util::stream::{self, StreamExt};
use sea_orm::DatabaseConnection;

use super::job::helper::HelperRef;
use super::job::{JobCommand, LEASE_SECONDS};
use super::lifecycle::{EventContext, Lifecycle, LifecycleError};
use super::node::{Capacity, ControlJob, NodeCapacity, NodeSupervisor, StartHelper, StartJob, Wake};
use super::store::SPAN_LEASE_SECONDS;
use crate::domain::job::{JobEvent, JobStatus, PartialOutput, Stage};
use crate::domain::license::{tier_in_force, Tier};
use crate::domain::node::sees_library;
use crate::domain::placement::{choose, place, JobNeeds, NodeOffer, Placement, TRANSFER_FLOW};
use crate::domain::schedule::OnClose;
use crate::host::clock::Clock;
use crate::media::layout::partial_dir_for;
use crate::media::manifest::quick_state;
use crate::repo::jobs::{self, Assignment, JobChange};
use crate::repo::{self, RepoError};

/// A node the scheduler can give jobs to: the local `NodeSupervisor` or a linked node's
/// `RemoteNode`, which answer the same messages.
#[derive(Clone)]
pub struct NodeHandle {
    pub name: String,
    pub id: i32,
    pub start: Recipient<StartJob>,
    pub help: Recipient<StartHelper>,
    pub capacity: Recipient<Capacity>,
    pub control: Recipient<ControlJob>,
}

impl NodeHandle {
    pub fn local(name: String, id: i32, addr: &Addr<NodeSupervisor>) -> Self {
        NodeHandle {
            name,
            id,
            start: addr.clone().recipient(),
            help: addr.clone().recipient(),
            capacity: addr.clone().recipient(),
            control: addr.clone().recipient(),
        }
    }
}

/// A node joined (or rejoined) the cluster.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AddNode(pub NodeHandle);

/// A node left the cluster.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RemoveNode(pub String);

/// A user's action on one job; the domain lists which ones a job's status allows.
pub use crate::domain::job::UserAction as Action;

#[derive(Message)]
#[rtype(result = "Result<job::Model, LifecycleError>")]
pub struct JobAction {
    pub job_id: i32,
    pub action: Action,
}

/// Pauses every QUEUED, ANALYZING and ENCODING job (or resumes every PAUSED one).
#[derive(Message)]
#[rtype(result = "Result<u64, LifecycleError>")]
pub struct QueueAction {
    pub pause: bool,
}

pub struct Scheduler {
    db: DatabaseConnection,
    lifecycle: Lifecycle,
    nodes: Vec<NodeHandle>,
    license_public_key: String,
    clock: Clock,
    /// Idle slots take spans of running jobs (`PARALLEL_SEGMENTS` is not `off`).
    helpers: bool,
    ticking: bool,
    again: bool,
}

impl Scheduler {
    pub fn new(lifecycle: Lifecycle, nodes: Vec<NodeHandle>, license_public_key: String, clock: Clock) -> Self {
        Scheduler {
            db: lifecycle.db.clone(),
            lifecycle,
            nodes,
            license_public_key,
            clock,
            helpers: true,
            ticking: false,
            again: false,
        }
    }

    /// Whether idle slots are given spans of running jobs.
    pub fn with_helpers(mut self, helpers: bool) -> Self {
        self.helpers = helpers;
        self
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.ticking {
            self.again = true;
            return;
        }
        self.ticking = true;
        let (db, lifecycle, nodes, key) =
            (self.db.clone(), self.lifecycle.clone(), self.nodes.clone(), self.license_public_key.clone());
        let helpers = self.helpers;
        let now = self.clock.now();
        ctx.spawn(
            async move {
                let open = match windows(&db, &nodes, now).await {
                    Ok(open) => open,
                    Err(e) => {
                        tracing::warn!(error = %e, "scheduling round failed: the encoding windows are unreadable");
                        return;
                    }
                };
                if let Err(e) = assign(&db, &lifecycle, &nodes, &key, &open, now).await {
                    tracing::warn!(error = %e, "scheduling round failed");
                }
                if let Err(e) = assign_spans(&db, &nodes, &key, &open, helpers, now).await {
                    tracing::warn!(error = %e, "giving spans to idle slots failed");
                }
            }
            .into_actor(self)
            .map(|_, this, ctx| {
                this.ticking = false;
                if std::mem::take(&mut this.again) {
                    this.tick(ctx);
                }
            }),
        );
    }
}

/// The tier in force at `now`: the installed key's, if it verifies and has not expired;
/// otherwise the trial's while it runs (`domain::license::tier_in_force`).
pub async fn effective_tier(db: &DatabaseConnection, public_key: &str, now: chrono::DateTime<chrono::Utc>) -> Tier {
    let key = match repo::licenses::current(db).await {
        Ok(Some(installed)) => match crate::license::verify(&installed.key, public_key) {
            Ok(payload) => payload.effective_tier(now),
            Err(e) => {
                tracing::warn!(error = %e, "the installed licence does not verify; running as FREE");
                Tier::Free
            }
        },
        _ => Tier::Free,
    };
    let trial = repo::licenses::trial(db).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "the licence trial is unreadable; running without it");
        None
    });
    tier_in_force(key, trial.as_ref(), now)
}

/// A node as one scheduling round sees it: its free slots, which library paths it sees,
/// and whether it takes files it does not see by transfer.
struct Slots<'a> {
    node: &'a NodeHandle,
    free: u64,
    missing: Vec<String>,
    /// The paths `missing` was checked against (`None`: all).
    checked: Option<Vec<String>>,
    /// It takes files by transfer (as it reported, and only where this build has the flow).
    transfer: bool,
    work_dir_free: Option<u64>,
    /// The jobs whose folders it keeps in WORK_DIR from an earlier attempt.
    kept_jobs: Vec<i32>,
}

impl Slots<'_> {
    fn new(node: &NodeHandle, capacity: NodeCapacity) -> Slots<'_> {
        Slots {
            node,
            free: capacity.free as u64,
            missing: capacity.missing_paths,
            checked: capacity.checked_paths,
            // The main node serves the transfer too: without the flow it gives none.
            transfer: TRANSFER_FLOW && capacity.transfer,
            work_dir_free: capacity.work_dir_free_bytes,
            kept_jobs: capacity.kept_jobs,
        }
    }

    /// The node as `domain::placement` weighs it for job `job_id` of a library with `roots`.
    fn offer(&self, job_id: i32, roots: &[String]) -> NodeOffer {
        NodeOffer {
            sees: sees_library(roots, self.checked.as_deref(), &self.missing),
            transfer: self.transfer,
            work_dir_free: self.work_dir_free,
            free_slots: self.free,
            keeps: self.kept_jobs.contains(&job_id),
        }
    }
}

/// The nodes whose encoding window is open at `now`; running jobs of a closed node whose
/// schedule says "pause" are told to yield (again every round until they have: a command
/// to a job that already stopped does nothing).
async fn windows(
    db: &DatabaseConnection,
    nodes: &[NodeHandle],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<std::collections::HashSet<i32>, LifecycleError> {
    let ids: Vec<i32> = nodes.iter().map(|n| n.id).collect();
    let schedules = repo::schedules::in_force(db, &ids).await?;
    let open: std::collections::HashSet<i32> =
        ids.iter().copied().filter(|id| schedules.get(id).is_none_or(|s| s.schedule.is_open(now))).collect();
    let yielding: Vec<&NodeHandle> = nodes
        .iter()
        .filter(|n| {
            !open.contains(&n.id) && schedules.get(&n.id).is_some_and(|s| s.schedule.on_close == OnClose::Pause)
        })
        .collect();
    if yielding.is_empty() {
        return Ok(open);
    }
    for job in jobs::in_statuses(db, &[JobStatus::Analyzing, JobStatus::Encoding]).await? {
        // Helpers there stop at a segment boundary too, leaving their span to others.
        let helping = repo::segments::helper_nodes(db, job.id).await?;
        for node in yielding.iter().filter(|n| job.node_id == Some(n.id) || helping.contains(&n.id)) {
            let told =
                node.control.send(ControlJob { job_id: job.id, command: JobCommand::Yield }).await.unwrap_or(false);
            tracing::debug!(job_id = job.id, node = %node.name, told, "the node's encoding window closed; its work on the job yields");
        }
    }
    Ok(open)
}

async fn assign(
    db: &DatabaseConnection,
    lifecycle: &Lifecycle,
    nodes: &[NodeHandle],
    public_key: &str,
    open: &std::collections::HashSet<i32>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), LifecycleError> {
    let tier = effective_tier(db, public_key, now).await;
    let counts = jobs::count_by_status(db).await?;
    let queued = counts.get(&JobStatus::Queued).copied().unwrap_or(0);
    if queued == 0 {
        return Ok(());
    }
    // Files in the batch probe after a scan are ANALYZING too, but take no encode slot.
    let running = (counts.get(&JobStatus::Analyzing).copied().unwrap_or(0)
        + counts.get(&JobStatus::Encoding).copied().unwrap_or(0))
    .saturating_sub(jobs::count_probing(db).await?);
    let allowed = tier.max_concurrent_jobs().map(|m| u64::from(m).saturating_sub(running)).unwrap_or(u64::MAX);
    let allowed_nodes = tier.max_nodes().map(|m| m as usize).unwrap_or(usize::MAX);
    let mut slots = Vec::new();
    // A node outside its encoding window takes nothing new.
    for node in nodes.iter().take(allowed_nodes).filter(|n| open.contains(&n.id)) {
        let capacity = node.capacity.send(Capacity).await.unwrap_or_default();
        slots.push(Slots::new(node, capacity));
    }
    let budget = allowed.min(slots.iter().map(|s| s.free).sum());
    if budget == 0 {
        return Ok(());
    }
    let libraries: HashMap<i32, Vec<String>> =
        repo::libraries::list(db).await?.iter().map(|l| (l.id, repo::libraries::paths_of(l))).collect();
    // Highest priority first, then oldest. Look a little past the budget: those jobs may
    // belong to libraries the free nodes cannot see.
    let mut budget = budget;
    let mut left = Vec::new();
    // First every job a node that sees its file can take; then, for the jobs left, nodes
    // that take files by transfer: with a free slot left after the first pass, each would
    // otherwise be idle while the queue is not empty (`domain::placement`).
    for candidate in jobs::queued_next(db, budget.saturating_mul(4)).await? {
        if budget == 0 || slots.iter().all(|s| s.free == 0) {
            return Ok(());
        }
        // A job whose partial output another transcoder holds waits longer each time it
        // finds it so, instead of being started and requeued every round.
        if let Some((streak, at)) = repo::events::busy_streak(db, candidate.id).await? {
            let hold = chrono::Duration::from_std(crate::domain::job::busy_hold(streak)).unwrap_or_default();
            if chrono::Utc::now() < at + hold {
                continue;
            }
        }
        let roots = candidate.library_id.and_then(|id| libraries.get(&id)).map(Vec::as_slice).unwrap_or_default();
        let needs =
            JobNeeds { roots, source_bytes: u64::try_from(candidate.source_size).unwrap_or(0), output_bytes: None };
        let offers: Vec<NodeOffer> = slots.iter().map(|s| s.offer(candidate.id, roots)).collect();
        // A node that keeps the job's folder may take it back by transfer in this round
        // already (`choose`).
        match choose(&needs, &offers, false) {
            Some((at, placement)) => {
                if give(lifecycle, &candidate, &mut slots, at, placement == Placement::TakeByTransfer).await? {
                    budget -= 1;
                }
            }
            None => left.push(candidate),
        }
    }
    if !slots.iter().any(|s| s.transfer && s.free > 0) {
        return Ok(());
    }
    // The output's expected size: the quality search's prediction, else the library's
    // forecast's, else (unknown) the source's.
    let mut forecasts: HashMap<i32, HashMap<i32, u64>> = HashMap::new();
    for candidate in left {
        if budget == 0 || slots.iter().all(|s| s.free == 0) {
            break;
        }
        let mut output = candidate.predicted_size.and_then(|p| u64::try_from(p).ok());
        if let (None, Some(library)) = (output, candidate.library_id) {
            if let std::collections::hash_map::Entry::Vacant(entry) = forecasts.entry(library) {
                let files = repo::forecasts::get(db, library).await?.map(|f| repo::forecasts::files_of(&f));
                let predicted = files
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|f| Some((f.job_id, u64::try_from(f.predicted_size?).ok()?)))
                    .collect();
                entry.insert(predicted);
            }
            output = forecasts.get(&library).and_then(|f| f.get(&candidate.id)).copied();
        }
        let roots = candidate.library_id.and_then(|id| libraries.get(&id)).map(Vec::as_slice).unwrap_or_default();
        let needs =
            JobNeeds { roots, source_bytes: u64::try_from(candidate.source_size).unwrap_or(0), output_bytes: output };
        let offers: Vec<NodeOffer> = slots.iter().map(|s| s.offer(candidate.id, roots)).collect();
        match choose(&needs, &offers, true) {
            Some((at, placement)) => {
                if give(lifecycle, &candidate, &mut slots, at, placement == Placement::TakeByTransfer).await? {
                    budget -= 1;
                }
            }
            None => {
                let reasons: Vec<String> = slots
                    .iter()
                    .zip(&offers)
                    .filter_map(|(slot, offer)| match place(&needs, offer, false) {
                        Placement::No(reason) => Some(format!("{}: {reason}", slot.node.name)),
                        _ => None,
                    })
                    .collect();
                tracing::debug!(job_id = candidate.id, ?reasons, "no node takes the job now");
            }
        }
    }
    Ok(())
}

/// Starts `job` on the node of `slots[at]` (by transfer: it does not see the file);
/// answers whether the node took it. A node that refused it (it filled up meanwhile) is
/// counted full for the rest of the round, and the job goes back to the queue.
async fn give(
    lifecycle: &Lifecycle,
    job: &job::Model,
    slots: &mut [Slots<'_>],
    at: usize,
    by_transfer: bool,
) -> Result<bool, LifecycleError> {
    let Some(slot) = slots.get_mut(at) else { return Ok(false) };
    let node = slot.node;
    let lease = crate::security::generate_secret(24);
    let now = chrono::Utc::now();
    let start = JobChange {
        stage: Some(Stage::Analyzing),
        lease_expires_at: Some(now + chrono::Duration::seconds(LEASE_SECONDS)),
        last_progress_at: Some(now),
        stalled: Some(false),
        assignment: Some(Assignment {
            node_id: node.id,
            node_name: node.name.clone(),
            lease_id: lease.clone(),
            started_at: now,
        }),
        ..Default::default()
    };
    // The job's history says how it went to the node.
    let detail = by_transfer.then(|| serde_json::json!({"byTransfer": true}));
    let ctx = EventContext { node: Some(node.name.clone()), detail, ..Default::default() };
    if let Err(e) = lifecycle.apply(job.id, JobEvent::Start, start, ctx).await {
        tracing::debug!(job_id = job.id, error = %e, "job changed before it could start");
        return Ok(false);
    }
    let start = StartJob { job_id: job.id, lease_id: lease.clone(), by_transfer };
    if node.start.send(start).await.unwrap_or(false) {
        if by_transfer {
            tracing::info!(job_id = job.id, node = %node.name, "the job goes to a node that takes it by transfer");
        } else {
            tracing::debug!(job_id = job.id, node = %node.name, "the job goes to a node");
        }
        slot.free -= 1;
        return Ok(true);
    }
    let ctx = EventContext { node: Some(node.name.clone()), ..Default::default() };
    // The node refused the job (it filled up meanwhile): nothing crashed.
    let orphaned = JobEvent::Orphaned { crashed: false };
    lifecycle.apply_as(job.id, Some(&lease), orphaned, JobChange::default(), ctx).await?;
    slot.free = 0;
    Ok(false)
}

/// Slots left idle once every queued job has a node take spans of running jobs: the last
/// span still waiting of each (the job's run works from the first), round the jobs in turn,
/// each under its own lease. Leases of helpers that went silent are swept back first. The
/// licence counts jobs, not spans; its node limit applies.
async fn assign_spans(
    db: &DatabaseConnection,
    nodes: &[NodeHandle],
    public_key: &str,
    open: &std::collections::HashSet<i32>,
    enabled: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), LifecycleError> {
    let swept = repo::segments::sweep(db, chrono::Utc::now()).await?;
    if swept > 0 {
        tracing::info!(swept, "spans whose helper went silent are waiting again");
    }
    if !enabled {
        return Ok(());
    }
    let counts = jobs::count_by_status(db).await?;
    if counts.get(&JobStatus::Queued).copied().unwrap_or(0) > 0 {
        return Ok(());
    }
    let mut waiting = repo::segments::jobs_waiting(db).await?;
    if waiting.is_empty() {
        return Ok(());
    }
    let tier = effective_tier(db, public_key, now).await;
    let allowed_nodes = tier.max_nodes().map(|m| m as usize).unwrap_or(usize::MAX);
    let mut slots = Vec::new();
    for node in nodes.iter().take(allowed_nodes).filter(|n| open.contains(&n.id)) {
        let capacity = node.capacity.send(Capacity).await.unwrap_or_default();
        if capacity.free > 0 {
            slots.push(Slots::new(node, capacity));
        }
    }
    let libraries: std::collections::HashMap<i32, (Vec<String>, String)> = repo::libraries::list(db)
        .await?
        .iter()
        .map(|l| (l.id, (repo::libraries::paths_of(l), l.encoder.clone())))
        .collect();
    // A helper runs the job's encoder: a node that lacks it (no NVENC there) would fail the
    // span again and again.
    let encoders: std::collections::HashMap<i32, Vec<String>> = repo::nodes::list(db)
        .await?
        .into_iter()
        .map(|n| (n.id, serde_json::from_value(n.encoders).unwrap_or_default()))
        .collect();
    let mut turn = 0usize;
    while !waiting.is_empty() {
        let Some(slot) = slots.iter_mut().filter(|s| s.free > 0).max_by_key(|s| s.free) else { break };
        // How the slot's node would encode a span of the job: `Some(false)` from the share,
        // `Some(true)` by transfer (it does not see the library, takes files so and has the
        // room a whole attempt there would need: its next span of the job reuses the copy).
        let how = |job: &job::Model, s: &Slots| {
            let (paths, encoder) = job.library_id.and_then(|id| libraries.get(&id))?;
            if !encoders.get(&s.node.id).is_some_and(|list| list.contains(encoder)) {
                return None;
            }
            let needs = JobNeeds {
                roots: paths,
                source_bytes: u64::try_from(job.source_size).unwrap_or(0),
                output_bytes: job.predicted_size.and_then(|b| u64::try_from(b).ok()),
            };
            match place(&needs, &s.offer(job.id, paths), false) {
                Placement::Take => Some(false),
                Placement::TakeByTransfer => Some(true),
                Placement::No(_) => None,
            }
        };
        let Some((at, by_transfer)) = (0..waiting.len())
            .map(|i| (turn + i) % waiting.len())
            .find_map(|i| waiting.get(i).and_then(|j| how(j, slot)).map(|t| (i, t)))
        else {
            slot.free = 0;
            continue;
        };
        turn = at + 1;
        let job_id = waiting.get(at).map(|j| j.id).unwrap_or_default();
        let lease = crate::security::generate_secret(24);
        let expires = chrono::Utc::now() + chrono::Duration::seconds(SPAN_LEASE_SECONDS);
        let node = repo::segments::NodeRef { id: slot.node.id, name: &slot.node.name };
        let Some(row) = repo::segments::lease_span(db, job_id, node, &lease, expires).await? else {
            waiting.remove(at);
            continue;
        };
        let span = u32::try_from(row.span).unwrap_or_default();
        let helper = HelperRef { job_id, span, lease_id: lease.clone(), by_transfer };
        if slot.node.help.send(StartHelper(helper)).await.unwrap_or(false) {
            tracing::debug!(job_id, span, node = %slot.node.name, by_transfer, "a span goes to an idle slot");
            slot.free -= 1;
        } else {
            repo::segments::release(db, job_id, span, &lease, None).await?;
            slot.free = 0;
        }
    }
    Ok(())
}

impl Actor for Scheduler {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(Duration::from_secs(2), Scheduler::tick);
        self.tick(ctx);
    }
}

impl Handler<AddNode> for Scheduler {
    type Result = ();
    fn handle(&mut self, msg: AddNode, ctx: &mut Context<Self>) {
        self.nodes.retain(|n| n.name != msg.0.name);
        self.nodes.push(msg.0);
        self.tick(ctx);
    }
}

impl Handler<RemoveNode> for Scheduler {
    type Result = ();
    fn handle(&mut self, msg: RemoveNode, _: &mut Context<Self>) {
        self.nodes.retain(|n| n.name != msg.0);
    }
}

impl Handler<Wake> for Scheduler {
    type Result = ();
    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        self.tick(ctx);
    }
}

/// Carries out a user's action on one job.
async fn act(
    lifecycle: &Lifecycle,
    nodes: &[NodeHandle],
    job_id: i32,
    action: Action,
) -> Result<job::Model, LifecycleError> {
    let ctx = EventContext::default;
    match action {
        Action::Pause | Action::Cancel => {
            let command = if action == Action::Pause { JobCommand::Pause } else { JobCommand::Cancel };
            let event = if action == Action::Pause { JobEvent::Pause } else { JobEvent::Cancel };
            // The scheduler may move the job (start it) while this runs: a stale view is
            // re-read and the action tried again, where the job now is.
            let mut attempt = 0;
            loop {
                // Every node is told: the one running the job, and those whose helpers
                // encode its spans (they stop with it).
                let mut runs = false;
                for node in nodes {
                    runs |= node.control.send(ControlJob { job_id, command }).await.unwrap_or(false);
                }
                if runs {
                    // The job's supervisor persists the transition; wait for it briefly.
                    return wait_for_change(lifecycle, job_id).await;
                }
                match lifecycle.apply(job_id, event, JobChange::default(), ctx()).await {
                    Ok((job, _)) => return Ok(job),
                    Err(LifecycleError::Repo(RepoError::Conflict(_))) if attempt < 3 => attempt += 1,
                    Err(e) => return Err(e),
                }
            }
        }
        Action::Resume => {
            let current = jobs::get(&lifecycle.db, job_id).await?;
            let dir = partial_dir_for(&crate::repo::jobs::source_path(&current));
            let partial =
                tokio::task::spawn_blocking(move || quick_state(&dir)).await.unwrap_or(PartialOutput::Missing);
            Ok(lifecycle.apply(job_id, JobEvent::Resume { partial }, JobChange::default(), ctx()).await?.0)
        }
        Action::Retry | Action::Force => {
            let event = if action == Action::Retry { JobEvent::Retry } else { JobEvent::Force };
            Ok(lifecycle.apply(job_id, event, JobChange::default(), ctx()).await?.0)
        }
    }
}

async fn wait_for_change(lifecycle: &Lifecycle, job_id: i32) -> Result<job::Model, LifecycleError> {
    for _ in 0..50 {
        let job = jobs::get(&lifecycle.db, job_id).await?;
        if !JobStatus::from(job.status).is_running() {
            return Ok(job);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(jobs::get(&lifecycle.db, job_id).await?)
}

impl Handler<JobAction> for Scheduler {
    type Result = ResponseActFuture<Self, Result<job::Model, LifecycleError>>;

    fn handle(&mut self, msg: JobAction, _: &mut Context<Self>) -> Self::Result {
        let (lifecycle, nodes) = (self.lifecycle.clone(), self.nodes.clone());
        Box::pin(async move { act(&lifecycle, &nodes, msg.job_id, msg.action).await }.into_actor(self).map(
            |result, this, ctx| {
                this.tick(ctx);
                result
            },
        ))
    }
}

impl Handler<QueueAction> for Scheduler {
    type Result = ResponseActFuture<Self, Result<u64, LifecycleError>>;

    fn handle(&mut self, msg: QueueAction, _: &mut Context<Self>) -> Self::Result {
        let (lifecycle, nodes) = (self.lifecycle.clone(), self.nodes.clone());
        Box::pin(
            async move {
                let (statuses, action) = if msg.pause {
                    (vec![JobStatus::Queued, JobStatus::Analyzing, JobStatus::Encoding], Action::Pause)
                } else {
                    (vec![JobStatus::Paused], Action::Resume)
                };
                // Several at a time: a pause waits for the job's transcoder to stop.
                let targets = jobs::in_statuses(&lifecycle.db, &statuses).await?;
                let results: Vec<_> = stream::iter(targets.iter().map(|job| {
                    let (lifecycle, nodes) = (&lifecycle, &nodes);
                    async move { (job.id, act(lifecycle, nodes, job.id, action).await) }
                }))
                .buffer_unordered(16)
                .collect()
                .await;
                let mut affected = 0;
                for (job_id, result) in results {
                    match result {
                        Ok(_) => affected += 1,
                        Err(e) => tracing::debug!(job_id, error = %e, "queue action skipped a job"),
                    }
                }
                Ok(affected)
            }
            .into_actor(self)
            .map(|result, this, ctx| {
                this.tick(ctx);
                result
            }),
        )
    }
}
