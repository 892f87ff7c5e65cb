//! Library health checks (issue 38), run by the main node on idle job slots of every node
//! that sees the library: every media file of a library (encoded, skipped and untouched
//! alike, as the scan finds them, each checked again by `media::contain`) is read in a
//! `condense-media` child, at the lowest priority: only on idle slots (this node's through
//! `node::ReserveCheck`, a linked node's through its link: `health_batch`,
//! `protocol::Call::HealthBatch`), never while a job waits for one (an encode always goes
//! first; a running check may finish), several at once where several slots are idle
//! (`library_health::deal`; a main node with MAX_JOBS=0 checks only libraries no linked node
//! with job slots sees). Quick checks go many files to a child and a slot
//! (`worker::health_batch`, cut by `library_health::batches`); a thorough one is one file a
//! child (`worker::check_health`). A batch a linked node does not check (busy, refused, its
//! link gone mid-batch) goes back to the run's queue. Files unchanged since a check found
//! them `ok` are skipped unless a run asks for `all`. Each result is written here as it
//! comes (`repo::health`), with the name of the node that checked it. A library's
//! `healthSchedule` starts a quick run inside this node's encoding windows; after a
//! scheduled run each damaged file is told (`file.damaged`) and, with
//! `healthAction: regrab`, its Sonarr or Radarr is asked for a new copy (`regrab`).

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actix::{Addr, Recipient};
use entities::{library, library_health_file, library_health_run};
use sea_orm::DatabaseConnection;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::cluster::Links;
use super::health_batch::{CheckOnNode, NotTaken, OfferChecks};
use super::library_runs::LibraryRuns;
use super::node::{Capacity, CheckEnded, NodeSupervisor, ReserveCheck};
use super::regrab;
use crate::domain::job::JobStatus;
use crate::domain::library_health::{self, CheckOffer, HealthAction, HealthSchedule, RunStatus};
use crate::domain::notify::NotifyEvent;
use crate::host::clock::Clock;
use crate::media::contain;
use crate::media::health::{Depth, FileHealth};
use crate::media::worker;
use crate::repo::health::FoundFile;
use crate::repo::{self, RepoError};

/// How long a run waits before it asks for a slot again.
const SLOT_POLL: Duration = Duration::from_millis(500);
/// How often the schedules are looked at (and whenever a library changes).
const SCHEDULE_EVERY: Duration = Duration::from_secs(60);

/// The health checks of this node: the runs in progress by library, each with the signal
/// that cancels it.
#[derive(Clone)]
pub struct HealthChecks {
    db: DatabaseConnection,
    /// The executable started as the `media` children.
    binary: PathBuf,
    analysis_timeout: Duration,
    node: Addr<NodeSupervisor>,
    node_id: i32,
    /// Whether the scheduler gives this node jobs (a main node with MAX_JOBS=0 does not).
    takes_jobs: bool,
    clock: Clock,
    running: LibraryRuns,
    schedule_wake: Arc<Notify>,
    /// This node's name, recorded with each result it checks.
    node_name: String,
    /// The open links to linked nodes, whose idle slots take batches too (`None`: only
    /// this node checks).
    links: Option<Links>,
}

/// Where a run's next batch goes.
enum Placed {
    /// A slot of this node, taken.
    Here(Slot),
    /// A linked node that offered an idle slot.
    There(Linked),
}

/// A batch given where it was placed: this node's slot, or a linked node's link with the
/// batch already in its mailbox (sent before the run asks the nodes for the next offer, so
/// the link counts that slot taken).
enum Given {
    Here(Slot),
    There(Box<(Linked, actix::dev::RecipientRequest<CheckOnNode>)>),
}

impl Given {
    fn to(placed: Placed, library_id: i32, depth: Depth, batch: &[FoundFile]) -> Given {
        match placed {
            Placed::Here(slot) => Given::Here(slot),
            Placed::There(node) => {
                let paths = batch.iter().map(|f| f.path.clone()).collect();
                let asked = node.check.send(CheckOnNode { library_id, depth, roots: node.roots.clone(), paths });
                Given::There(Box::new((node, asked)))
            }
        }
    }
}

/// A linked node a batch is given to.
struct Linked {
    row: i32,
    name: String,
    check: Recipient<CheckOnNode>,
    roots: Vec<String>,
}

/// How a batch's check ended.
enum Ended {
    /// Its findings (every result recorded).
    Checked(Vec<library_health_file::Model>),
    /// Not checked: back to the queue, and the linked node (by row) that refused it or lost
    /// its link gets no more batches of this run.
    Back { batch: Vec<FoundFile>, refuse: Option<i32> },
}

/// What a run keeps while its batches are out.
#[derive(Default)]
struct RunState {
    findings: Vec<library_health_file::Model>,
    /// Linked nodes (by row) this run gives no more batches.
    refused: HashSet<i32>,
}

impl RunState {
    fn settle(&mut self, ended: Result<Ended, tokio::task::JoinError>, queue: &mut VecDeque<Vec<FoundFile>>) {
        match ended {
            Ok(Ended::Checked(found)) => self.findings.extend(found),
            Ok(Ended::Back { batch, refuse }) => {
                self.refused.extend(refuse);
                queue.push_back(batch);
            }
            Err(_) => {}
        }
    }
}

/// Whether a checked file counts toward the library's run (`repo::health::advance`): a
/// run's batches do; a single file checked again outside any run does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    Yes,
    No,
}

/// Where a check of one file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    User,
    Schedule,
}

/// Frees the slot a check holds when the check ends, however it ends (a cancel drops it).
struct Slot(Addr<NodeSupervisor>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.do_send(CheckEnded);
    }
}

impl HealthChecks {
    pub fn new(
        db: DatabaseConnection,
        binary: PathBuf,
        analysis_timeout: Duration,
        node: Addr<NodeSupervisor>,
        node_id: i32,
        takes_jobs: bool,
        clock: Clock,
    ) -> Self {
        HealthChecks {
            db,
            binary,
            analysis_timeout,
            node,
            node_id,
            takes_jobs,
            clock,
            running: LibraryRuns::default(),
            schedule_wake: Arc::default(),
            node_name: String::new(),
            links: None,
        }
    }

    /// A main node named `node_name` whose linked nodes (`links`) take batches on their
    /// idle slots too.
    pub fn with_cluster(mut self, node_name: String, links: Links) -> Self {
        self.node_name = node_name;
        self.links = Some(links);
        self
    }

    /// Starts a run of `library`; a conflict while one runs.
    pub async fn start(
        &self,
        library: &library::Model,
        depth: Depth,
        all: bool,
    ) -> Result<library_health_run::Model, RepoError> {
        self.begin(library, depth, all, Origin::User).await
    }

    async fn begin(
        &self,
        library: &library::Model,
        depth: Depth,
        all: bool,
        origin: Origin,
    ) -> Result<library_health_run::Model, RepoError> {
        let busy = || RepoError::Conflict(format!("a health check of library {} is running", library.id));
        let record = repo::health::start(&self.db, library.id, depth, all, origin == Origin::Schedule);
        let (started, cancel) = self.running.enter_recorded(library.id, busy, record).await?;
        let this = self.clone();
        let library = library.clone();
        actix::spawn(async move {
            let (status, findings) = this.run(&library, depth, all, &cancel).await;
            // Out of the map first: once its end is recorded a cancel is refused, as it
            // should be.
            this.running.leave(library.id);
            if let Err(e) = repo::health::finish(&this.db, library.id, status).await {
                tracing::warn!(library = library.id, error = %e, "the health check's end was not recorded");
            }
            if origin == Origin::Schedule && status == RunStatus::Done {
                this.act_on(&library, &findings).await;
            }
        });
        Ok(started)
    }

    /// Cancels the run of `library_id`; false when none runs. Checks in progress are
    /// stopped (their children killed); what was found stays.
    pub fn cancel(&self, library_id: i32) -> bool {
        self.running.cancel(library_id)
    }

    /// Whether a run of `library_id` is in progress here.
    pub fn is_running(&self, library_id: i32) -> bool {
        self.running.is_running(library_id)
    }

    /// Checks one stored file again, in the background, at `depth`, as a run would: on an
    /// idle slot of a node that sees the library (this one or a linked one), no job
    /// waiting.
    pub fn recheck(&self, library: &library::Model, row: &library_health_file::Model, depth: Depth) {
        let this = self.clone();
        let (library_id, roots) = (library.id, repo::libraries::paths_of(library));
        let path = repo::health::path_of(row);
        let root = row.root.clone();
        actix::spawn(async move {
            let Some(found) = this.find_one(&roots, &root, &path).await else {
                tracing::info!(library = library_id, path = %path.display(), "a file to check again is gone");
                return;
            };
            // Dealt as a run's batch of one (`place`): an idle slot of this node or of a
            // linked node that sees the library, so a main node that takes no jobs itself
            // checks again too. A node that refuses or drops it gets it no more.
            let (mut batch, mut refused) = (vec![found], HashSet::new());
            loop {
                let Some(placed) = this.place(&roots, &refused).await else {
                    tokio::time::sleep(SLOT_POLL).await;
                    continue;
                };
                let given = Given::to(placed, library_id, depth, &batch);
                match this.check_given(library_id, batch, depth, given, Count::No).await {
                    Ended::Checked(_) => return,
                    Ended::Back { batch: back, refuse } => {
                        refused.extend(refuse);
                        batch = back;
                    }
                }
            }
        });
    }

    /// The file at `path` under `root`, with its size and modification time, when it is
    /// still a file inside the library.
    async fn find_one(&self, roots: &[String], root: &str, path: &Path) -> Option<FoundFile> {
        let (roots, root, path) = (roots.to_vec(), root.to_string(), path.to_path_buf());
        tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::MetadataExt;
            let roots: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
            contain::still_inside(&path, &roots).ok()?;
            let m = std::fs::symlink_metadata(&path).ok()?;
            Some(FoundFile {
                root,
                size: i64::try_from(m.len()).ok()?,
                mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                path,
            })
        })
        .await
        .ok()
        .flatten()
    }

    /// Every media file of the library as the scan finds it, each under its root and still
    /// inside the library (`media::contain`).
    async fn walk(library: &library::Model) -> Vec<FoundFile> {
        let roots = repo::libraries::paths_of(library);
        tokio::task::spawn_blocking(move || {
            let (found, _) = super::library::walk(&roots);
            let resolved: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
            found
                .into_iter()
                .filter(|f| contain::still_inside(&f.path, &resolved).is_ok())
                .filter_map(|f| {
                    let root = roots.iter().filter(|r| f.path.starts_with(r.as_str())).max_by_key(|r| r.len())?;
                    Some(FoundFile { root: root.clone(), path: f.path, size: f.size, mtime_ns: f.mtime_ns })
                })
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    /// One run: the files to read, cut into batches, each dealt to an idle slot of a node
    /// that sees the library (`library_health::deal`): this node's own, or a linked node's
    /// (`health_batch::CheckOnNode`); as many at once as idle slots allow. A batch a linked
    /// node did not check (busy, refused, its link closed mid-batch) goes back to the
    /// queue, and a node that refused or dropped one gets no more of this run. Answers how
    /// it ended and the findings it recorded.
    async fn run(
        &self,
        library: &library::Model,
        depth: Depth,
        all: bool,
        cancel: &Notify,
    ) -> (RunStatus, Vec<library_health_file::Model>) {
        let files = tokio::select! {
            files = self.to_check(library, all) => files,
            () = cancel.notified() => return (RunStatus::Cancelled, Vec::new()),
        };
        let total = u32::try_from(files.len()).unwrap_or(u32::MAX);
        if let Err(e) = repo::health::set_total(&self.db, library.id, total).await {
            tracing::warn!(library = library.id, error = %e, "the health check's size was not recorded");
        }
        // Quick checks go many files to a child (and a slot); a thorough one is a file's
        // whole decode, one file a child.
        let sizes: Vec<u64> = files.iter().map(|f| u64::try_from(f.size).unwrap_or(0)).collect();
        let cut = match depth {
            Depth::Quick => {
                library_health::batches(&sizes, library_health::QUICK_BATCH_FILES, library_health::QUICK_BATCH_BYTES)
            }
            Depth::Thorough => library_health::batches(&sizes, 1, 0),
        };
        let mut queue: VecDeque<Vec<FoundFile>> =
            cut.into_iter().map(|range| files.get(range).unwrap_or_default().to_vec()).collect();
        let roots = repo::libraries::paths_of(library);
        let mut run = RunState::default();
        let mut checks: JoinSet<Ended> = JoinSet::new();
        loop {
            while let Some(ended) = checks.try_join_next() {
                run.settle(ended, &mut queue);
            }
            // Not raced with the cancel: a slot a node gave is always taken (and freed by
            // the check that holds it); placing asks, it does not wait.
            let placed = if queue.is_empty() { None } else { self.place(&roots, &run.refused).await };
            match placed {
                Some(placed) => {
                    let batch = queue.pop_front().unwrap_or_default();
                    let this = self.clone();
                    let library_id = library.id;
                    let given = Given::to(placed, library_id, depth, &batch);
                    checks.spawn_local(
                        async move { this.check_given(library_id, batch, depth, given, Count::Yes).await },
                    );
                }
                None if queue.is_empty() && checks.is_empty() => return (RunStatus::Done, run.findings),
                None => {
                    tokio::select! {
                        () = tokio::time::sleep(SLOT_POLL), if !queue.is_empty() => {}
                        Some(ended) = checks.join_next() => run.settle(ended, &mut queue),
                        () = cancel.notified() => {
                            // Linked nodes stop this library's batches (older ones finish
                            // them); the results are dropped with the tasks that wait.
                            checks.abort_all();
                            if let Some(links) = &self.links {
                                links.cancel_checks(library.id);
                            }
                            return (RunStatus::Cancelled, run.findings);
                        }
                    }
                }
            }
        }
    }

    /// The node that checks the next batch (`library_health::deal`), its slot taken; `None`
    /// while none may.
    async fn place(&self, roots: &[String], refused: &HashSet<i32>) -> Option<Placed> {
        let queued = repo::jobs::count_by_status(&self.db)
            .await
            .map(|c| c.get(&JobStatus::Queued).copied().unwrap_or(0))
            .unwrap_or(u64::MAX);
        let free = self.node.send(Capacity).await.map(|c| c.free).unwrap_or(0);
        let mut offers = vec![CheckOffer { free, sees: true, takes_jobs: self.takes_jobs, main: true }];
        let mut linked = vec![None];
        for (row, offer, check) in self.links.as_ref().map(Links::checkers).unwrap_or_default() {
            if refused.contains(&row) {
                continue;
            }
            if let Ok(Some((name, o))) = offer.send(OfferChecks { roots: roots.to_vec() }).await {
                offers.push(o);
                linked.push(Some(Linked { row, name, check, roots: roots.to_vec() }));
            }
        }
        match library_health::deal(&offers, queued)? {
            // The node answers whether a slot is free by taking it.
            0 => self.node.send(ReserveCheck).await.unwrap_or(false).then(|| Placed::Here(Slot(self.node.clone()))),
            i => linked.into_iter().nth(i).flatten().map(Placed::There),
        }
    }

    /// Checks a batch where it was placed; answers its findings, or the batch back.
    async fn check_given(
        &self,
        library_id: i32,
        batch: Vec<FoundFile>,
        depth: Depth,
        given: Given,
        count: Count,
    ) -> Ended {
        let (node, asked) = match given {
            Given::Here(slot) => return Ended::Checked(self.check_batch(library_id, &batch, depth, slot, count).await),
            Given::There(given) => *given,
        };
        match asked.await {
            Ok(Ok(results)) => {
                let mut findings = Vec::new();
                for (found, health) in batch.iter().zip(results) {
                    findings.extend(self.record_one(library_id, found, &health, &node.name, count).await);
                }
                Ended::Checked(findings)
            }
            Ok(Err(NotTaken::Busy)) => {
                // Its slot was taken since it offered it: asked again after a pause.
                tokio::time::sleep(SLOT_POLL).await;
                Ended::Back { batch, refuse: None }
            }
            Ok(Err(e)) => {
                tracing::warn!(library = library_id, node = %node.name, error = %e, "a linked node did not check a health batch; it goes back to the queue");
                Ended::Back { batch, refuse: Some(node.row) }
            }
            Err(e) => {
                tracing::warn!(library = library_id, node = %node.name, error = %e, "a linked node's link went away mid-batch; the batch goes back to the queue");
                Ended::Back { batch, refuse: Some(node.row) }
            }
        }
    }

    /// Records one file's result, from `node` (counted toward the run when `count` says
    /// so); answers it when it is a finding.
    async fn record_one(
        &self,
        library_id: i32,
        found: &FoundFile,
        health: &FileHealth,
        node: &str,
        count: Count,
    ) -> Option<library_health_file::Model> {
        let recorded = repo::health::record(&self.db, library_id, found, health, node).await;
        if count == Count::Yes {
            let _ = repo::health::advance(&self.db, library_id).await;
        }
        match recorded {
            Ok(row) => library_health::is_finding(repo::health::verdict_of(&row), row.ignored).then_some(row),
            Err(e) => {
                tracing::warn!(library = library_id, error = %e, "a file's health was not recorded");
                None
            }
        }
    }

    /// Checks `files` on the slot it holds (freed once the checks end), each result recorded
    /// as it comes; answers the findings among them.
    async fn check_batch(
        &self,
        library_id: i32,
        files: &[FoundFile],
        depth: Depth,
        slot: Slot,
        count: Count,
    ) -> Vec<library_health_file::Model> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, FileHealth)>();
        let checking = async move {
            match files {
                [one] => {
                    if let Some(health) = self.check(one, depth).await {
                        let _ = tx.send((0, health));
                    }
                }
                _ => {
                    let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
                    let mut each = |i: usize, result: Result<FileHealth, crate::media::MediaError>| {
                        let _ = tx.send((i, result.unwrap_or_else(|e| failed(depth, &e))));
                    };
                    worker::health_batch(&self.binary, &paths, depth, self.analysis_timeout, &mut each).await;
                }
            }
            drop(slot);
        };
        let recording = async {
            let mut findings = Vec::new();
            while let Some((i, health)) = rx.recv().await {
                let Some(found) = files.get(i) else { continue };
                findings.extend(self.record_one(library_id, found, &health, &self.node_name, count).await);
            }
            findings
        };
        tokio::join!(checking, recording).1
    }

    /// The library's files this run reads: all, or those not unchanged since an `ok`.
    async fn to_check(&self, library: &library::Model, all: bool) -> Vec<FoundFile> {
        let last = repo::health::results_of(&self.db, library.id).await.unwrap_or_default();
        let found = Self::walk(library).await;
        found
            .into_iter()
            .filter(|f| {
                let relative = f.path.strip_prefix(&f.root).unwrap_or(&f.path);
                let key = (f.root.clone(), crate::domain::path_bytes::readable(relative.as_os_str()).into_owned());
                let known = last.get(&key).map(repo::health::last_check);
                library_health::needs_check(known.as_ref(), f.size, f.mtime_ns, all)
            })
            .collect()
    }

    /// One file's check; a check that itself failed (the child crashed, ran out of time)
    /// is recorded as the file's finding, as unreadable with the reason.
    async fn check(&self, found: &FoundFile, depth: Depth) -> Option<FileHealth> {
        match worker::check_health(&self.binary, &found.path, depth, self.analysis_timeout).await {
            Ok(health) => Some(health),
            Err(e) => Some(failed(depth, &e)),
        }
    }

    /// After a scheduled run: each finding told (`file.damaged`) and, where the library
    /// says so, a new copy asked for.
    async fn act_on(&self, library: &library::Model, findings: &[library_health_file::Model]) {
        let action: HealthAction = library.health_action.parse().unwrap_or(HealthAction::Notify);
        for finding in findings {
            let path = repo::health::path_of(finding);
            let regrabbed = match action {
                HealthAction::Notify => None,
                HealthAction::Regrab => Some(match regrab::new_copy(&self.db, &path).await {
                    Ok(done) => done,
                    Err(e) => e.to_string(),
                }),
            };
            let fields = serde_json::json!({ "file": {
                "library": library.name,
                "path": crate::domain::path_bytes::readable(path.as_os_str()),
                "verdict": finding.verdict,
                "message": finding.message,
                "firstErrorSeconds": finding.first_error_seconds,
                "errorCount": finding.error_count,
                "regrab": regrabbed,
            }});
            if let Err(e) = repo::notifications::enqueue(&self.db, NotifyEvent::FileDamaged, fields).await {
                tracing::warn!(library = library.id, error = %e, "a damaged file was not told");
            }
        }
    }

    /// Looks at every library's `healthSchedule` now (a library was changed).
    pub fn wake_schedule(&self) {
        self.schedule_wake.notify_one();
    }

    /// Starts the scheduled runs that are due, inside this node's encoding windows.
    pub async fn run_schedules(&self) -> Result<(), RepoError> {
        let now = self.clock.now();
        let windows = repo::schedules::in_force(&self.db, &[self.node_id]).await?;
        if !windows.get(&self.node_id).is_none_or(|w| w.schedule.is_open(now)) {
            return Ok(());
        }
        for library in repo::libraries::list(&self.db).await? {
            let schedule: HealthSchedule = library.health_schedule.parse().unwrap_or(HealthSchedule::Off);
            if !library.enabled || self.is_running(library.id) {
                continue;
            }
            let last = repo::health::run_of(&self.db, library.id).await?.map(|r| r.started_at);
            if library_health::scheduled_due(schedule, last, now) {
                match self.begin(&library, Depth::Quick, false, Origin::Schedule).await {
                    Ok(_) => tracing::info!(library = library.id, "scheduled health check started"),
                    Err(e) => tracing::debug!(library = library.id, error = %e, "scheduled health check not started"),
                }
            }
        }
        Ok(())
    }

    /// Looks at the schedules every `SCHEDULE_EVERY` and when woken.
    pub fn schedule_forever(&self) {
        let this = self.clone();
        actix::spawn(async move {
            loop {
                if let Err(e) = this.run_schedules().await {
                    tracing::warn!(error = %e, "the health check schedules could not be read");
                }
                tokio::select! {
                    () = tokio::time::sleep(SCHEDULE_EVERY) => {}
                    () = this.schedule_wake.notified() => {}
                }
            }
        });
    }
}

/// A check that itself failed (its child crashed or ran out of time on the file): the file
/// is recorded unreadable, with the reason.
fn failed(depth: Depth, e: &crate::media::MediaError) -> FileHealth {
    super::health_batch::unreadable(depth, e.to_string())
}
