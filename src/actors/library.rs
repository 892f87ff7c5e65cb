//! `LibrarySupervisor`: one per library. Scans its paths on a blocking thread, watches them
//! for new, changed and removed files, waits until a new file stops growing, and registers
//! files as jobs. A file at a known path is compared with what its job last saw there (size
//! and modification time): an ended job whose file changed is queued again, a running one is
//! left alone. The service's own partial outputs and backups, and hidden files, are never
//! registered.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use actix::prelude::*;
use notify::{EventKind, RecursiveMode, Watcher};

use super::cluster::Links;
use super::node::Wake;
use super::prober::Prober;
use crate::domain::job::JobStatus;
use crate::domain::path_bytes;
use crate::media::contain;
use crate::media::layout::{is_hidden, is_partial_dir, is_service_file, partial_dir_for, source_of_partial};
use crate::media::partial::remove_partial;
use crate::media::plan::INPUT_EXTENSIONS;
use crate::repo::jobs::{self, FoundFile, KnownFile};
use crate::repo::{self, RepoError};
use sea_orm::DatabaseConnection;

/// Statuses whose job is dropped when its file disappears (nothing done yet worth keeping).
const DROPPED_WHEN_REMOVED: &[&str] = &["PENDING", "QUEUED", "PAUSED", "FAILED", "CANCELLED"];

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScanReport {
    pub found: u64,
    pub queued: u64,
    pub removed: u64,
}

#[derive(Message)]
#[rtype(result = "Result<ScanReport, String>")]
pub struct ScanNow;

#[derive(Message)]
#[rtype(result = "()")]
struct FileEvent {
    path: PathBuf,
    removed: bool,
}

/// Whether a path the watcher reported may become a job: a wanted file whose folders below
/// the library's root are neither hidden nor the service's own (a partial output folder
/// holds `output.mkv` and segment files that look like any other video).
fn wanted_below(roots: &[PathBuf], path: &Path) -> bool {
    let Some(relative) = roots.iter().find_map(|root| path.strip_prefix(root).ok()) else { return false };
    let folders = relative.parent().map(Path::components).into_iter().flatten();
    let plain_folders = folders.into_iter().all(|c| match c {
        std::path::Component::Normal(name) => !is_hidden(name) && !is_service_file(Path::new(name)),
        _ => false,
    });
    plain_folders && wanted(path)
}

fn wanted(path: &Path) -> bool {
    let hidden = path.file_name().is_some_and(is_hidden);
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    !hidden && !is_service_file(path) && ext.is_some_and(|e| INPUT_EXTENSIONS.contains(&e.as_str()))
}

fn found(path: &Path) -> Option<FoundFile> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.is_file() {
        return None;
    }
    Some(FoundFile {
        path: path.to_path_buf(),
        file_name: path_bytes::readable(path.file_name()?).into_owned(),
        size: i64::try_from(m.len()).ok()?,
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        inode: i64::try_from(m.ino()).unwrap_or(0),
    })
}

/// Walks the library's folders (not following links to folders), skipping hidden ones.
/// Answers the media files, and the partial output folders met on the way.
pub fn walk(roots: &[String]) -> (Vec<FoundFile>, Vec<PathBuf>) {
    let mut out = Vec::new();
    let mut partials = Vec::new();
    let mut stack: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            let hidden = is_hidden(&entry.file_name());
            if kind.is_dir() {
                if !hidden {
                    stack.push(path);
                } else if is_partial_dir(&path) {
                    partials.push(path);
                }
            } else if wanted(&path) {
                if let Some(f) = found(&path) {
                    out.push(f);
                }
            }
        }
    }
    (out, partials)
}

/// Removes partial outputs whose job has ended or is gone: a node that died between a
/// job's completion and the removal of its partial output leaves one behind.
async fn remove_stale_partials(db: &DatabaseConnection, partials: Vec<PathBuf>) -> Result<(), RepoError> {
    for dir in partials {
        let live = match source_of_partial(&dir) {
            Some(source) => {
                jobs::find_by_path(db, &source).await?.is_some_and(|j| !JobStatus::from(j.status).is_terminal())
            }
            // A shortened name (`layout::service_stem`): its owner is the job not ended, in
            // the same folder, whose partial folder it is; its source may be gone (a
            // container change cut short after the swap).
            None => match dir.parent() {
                Some(folder) => {
                    jobs::live_under(db, folder).await?.iter().any(|j| partial_dir_for(&jobs::source_path(j)) == dir)
                }
                None => false,
            },
        };
        if !live {
            tracing::info!(dir = %dir.display(), "removing a partial output left by a job that has ended");
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || remove_partial(&dir)).await {
                tracing::warn!(error = %e, "could not remove a stale partial output");
            }
        }
    }
    Ok(())
}

/// Outputs of replaces cut short after their swap: a job that has not ended, whose row
/// records the output it swapped in (inode and size), and whose final path holds exactly
/// that file. The job's next attempt completes it from the row
/// (`media::replace::swapped_on_record`); until then the output is its job's business, not
/// a new file, and the job's source is not "gone" (a container change left it under another
/// name). Answers final path -> job id.
/// Without this, a scan after a crash at that moment dropped the job and took its output
/// for a new source (the fault suite's kill of the main node found it: the job's history
/// lost, the file SKIPPED).
fn swapped_outputs<'a>(
    known: &HashMap<PathBuf, KnownFile>,
    files: impl IntoIterator<Item = &'a FoundFile>,
) -> HashMap<PathBuf, i32> {
    // Under any container a library's rule may have given it (`final_paths`).
    let targets: HashMap<PathBuf, (&KnownFile, (i64, i64))> = known
        .iter()
        .filter(|(_, job)| !job.status.is_terminal())
        .filter_map(|(path, job)| Some((path, job, job.recorded_output?)))
        .flat_map(|(path, job, recorded)| {
            crate::media::plan::final_paths(path, &job.target_codec).into_iter().map(move |t| (t, (job, recorded)))
        })
        .collect();
    files
        .into_iter()
        .filter_map(|file| {
            let (job, (inode, size)) = targets.get(&file.path)?;
            (file.inode == *inode && file.size == *size).then(|| (file.path.clone(), job.id))
        })
        .collect()
}

/// Files at paths no job has, and files of ended jobs that are not what the job last saw
/// (another size or modification time: the user replaced a file). A file under a job that
/// has not ended is its job's business, and so is the output its replace swapped in
/// (`swapped_outputs`).
fn new_and_changed(
    known: &HashMap<PathBuf, KnownFile>,
    files: impl IntoIterator<Item = FoundFile>,
) -> (Vec<FoundFile>, Vec<(KnownFile, FoundFile)>) {
    let files: Vec<FoundFile> = files.into_iter().collect();
    let swapped = swapped_outputs(known, &files);
    let (mut new, mut changed) = (Vec::new(), Vec::new());
    for file in files {
        match known.get(&file.path) {
            None if swapped.contains_key(&file.path) => {}
            None => new.push(file),
            Some(job) => {
                if job.status.is_terminal() && job.changed(&file) {
                    changed.push((job.clone(), file));
                }
            }
        }
    }
    (new, changed)
}

/// Registers new files and queues ended jobs whose file changed; answers how many jobs were
/// queued.
async fn take_in(
    db: &DatabaseConnection,
    library: &entities::library::Model,
    new: &[FoundFile],
    changed: &[(KnownFile, FoundFile)],
) -> Result<u64, RepoError> {
    let registered = jobs::register_batch(db, library.id, &library.target_codec, new).await?;
    let requeued = jobs::requeue_changed(db, changed).await?;
    if requeued > 0 {
        tracing::info!(library_id = library.id, jobs = requeued, "files changed since their jobs ended: queued again");
    }
    Ok(registered + requeued)
}

/// Why a file an *arr application imported could not be taken in. One wording for a path
/// outside the libraries, missing, or not media: the answer tells a caller nothing about
/// what exists outside the libraries.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(
        "{0} is not a media file in any library (as condense sees it: check the *arr path mappings, PUT /settings/arr)"
    )]
    Refused(String),
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Takes in one file an *arr application just imported, ahead of the backlog: a new job
/// (PENDING, for the probe), or the ended job of a file that changed (an upgrade), queued; a
/// job still waiting is raised to `priority`. A job that runs is left to run. Answers the file's job.
pub async fn import_file(
    db: &DatabaseConnection,
    path: &Path,
    priority: i32,
) -> Result<entities::job::Model, ImportError> {
    let shown = path.display().to_string();
    let refused = || ImportError::Refused(shown.clone());
    let libraries = repo::libraries::list(db).await?;
    let roots: Vec<(i32, Vec<PathBuf>)> = libraries
        .iter()
        .map(|l| (l.id, repo::libraries::paths_of(l).into_iter().map(PathBuf::from).collect()))
        .collect();
    // Resolved (`..` taken back, links followed) and inside a library's resolved root, on a
    // blocking thread: the filesystem may be a slow share. The job gets the resolved path.
    let given = path.to_path_buf();
    let resolved = tokio::task::spawn_blocking(move || {
        roots.into_iter().find_map(|(id, roots)| contain::resolve_inside(&given, &roots).ok().map(|p| (id, p)))
    })
    .await
    .ok()
    .flatten();
    let Some((library_id, resolved)) = resolved else { return Err(refused()) };
    let library = libraries.into_iter().find(|l| l.id == library_id).ok_or_else(refused)?;
    if !wanted(&resolved) {
        return Err(refused());
    }
    let file = tokio::task::spawn_blocking(move || found(&resolved)).await.ok().flatten().ok_or_else(refused)?;
    let known: HashMap<PathBuf, KnownFile> = jobs::find_by_path(db, &file.path)
        .await?
        .map(|job| (jobs::source_path(&job), KnownFile::from(&job)))
        .into_iter()
        .collect();
    let (new, changed) = new_and_changed(&known, [file.clone()]);
    take_in(db, &library, &new, &changed).await?;
    let job = jobs::find_by_path(db, &file.path).await?.ok_or_else(refused)?;
    let waiting = matches!(JobStatus::from(job.status), JobStatus::Pending | JobStatus::Queued);
    if waiting && job.priority < priority {
        return Ok(jobs::set_priority(db, job.id, priority).await?);
    }
    Ok(job)
}

/// Registers what is new or changed and drops jobs whose files are gone. In a watched
/// library, a file modified less than `settle` ago may still be being copied: it is not
/// taken in but answered, for the settle check to take in once it stops growing.
pub async fn scan(
    db: &DatabaseConnection,
    library_id: i32,
    settle: Duration,
) -> Result<(ScanReport, Vec<FoundFile>), RepoError> {
    let library = repo::libraries::get(db, library_id).await?;
    let roots = repo::libraries::paths_of(&library);
    let (files, partials) = tokio::task::spawn_blocking(move || walk(&roots)).await.unwrap_or_default();
    let known = jobs::known_files(db, library_id).await?;
    let seen: HashSet<&Path> = files.iter().map(|f| f.path.as_path()).collect();
    // In a watched library, a file may be being copied in while the scan runs.
    let recent_since = std::time::SystemTime::now()
        .checked_sub(settle)
        .filter(|_| library.watch)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(i64::MAX, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let (new, changed) = new_and_changed(&known, files.iter().cloned());
    let (deferred, new): (Vec<FoundFile>, Vec<FoundFile>) = new.into_iter().partition(|f| f.mtime_ns >= recent_since);
    let (deferred_changed, changed): (Vec<_>, Vec<_>) =
        changed.into_iter().partition(|(_, f)| f.mtime_ns >= recent_since);
    let deferred: Vec<FoundFile> = deferred.into_iter().chain(deferred_changed.into_iter().map(|(_, f)| f)).collect();
    let swapped: HashSet<i32> = swapped_outputs(&known, &files).into_values().collect();
    let gone: Vec<i32> = known
        .iter()
        .filter(|(path, k)| !seen.contains(path.as_path()) && DROPPED_WHEN_REMOVED.contains(&k.status.as_str()))
        .filter(|(_, k)| !swapped.contains(&k.id))
        .map(|(_, k)| k.id)
        .collect();
    let queued = take_in(db, &library, &new, &changed).await?;
    let removed = jobs::delete_many(db, &gone).await?;
    remove_stale_partials(db, partials).await?;
    repo::libraries::mark_scanned(db, library_id).await?;
    Ok((ScanReport { found: files.len() as u64, queued, removed }, deferred))
}

pub struct LibrarySupervisor {
    library_id: i32,
    db: DatabaseConnection,
    scheduler: Recipient<Wake>,
    /// Probes what the scans took in (`actors::prober`).
    prober: Prober,
    settle: Duration,
    watcher: Option<notify::RecommendedWatcher>,
    /// The watched folders: what the watcher reports is judged below them.
    watched_roots: Vec<PathBuf>,
    /// New or changed files waiting to stop growing: size last seen, and since when.
    growing: HashMap<PathBuf, (u64, Instant)>,
}

impl LibrarySupervisor {
    pub fn new(
        library_id: i32,
        db: DatabaseConnection,
        scheduler: Recipient<Wake>,
        prober: Prober,
        settle: Duration,
    ) -> Self {
        LibrarySupervisor {
            library_id,
            db,
            scheduler,
            prober,
            settle,
            watcher: None,
            watched_roots: Vec::new(),
            growing: HashMap::new(),
        }
    }

    fn watch(&mut self, roots: &[String], ctx: &mut Context<Self>) {
        let addr = ctx.address();
        // notify follows links to folders by default: a link inside a library to a folder
        // outside it would make that folder's files jobs (the scan does not follow them either).
        let config = notify::Config::default().with_follow_symlinks(false);
        let handler = move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            let removed = matches!(event.kind, EventKind::Remove(_));
            let relevant = removed || matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_));
            if relevant {
                for path in event.paths {
                    addr.do_send(FileEvent { path, removed });
                }
            }
        };
        self.watched_roots = roots.iter().map(PathBuf::from).collect();
        match notify::RecommendedWatcher::new(handler, config) {
            Ok(mut w) => {
                for root in roots {
                    if let Err(e) = w.watch(Path::new(root), RecursiveMode::Recursive) {
                        tracing::warn!(library_id = self.library_id, root, error = %e, "cannot watch this path");
                    }
                }
                self.watcher = Some(w);
            }
            Err(e) => tracing::warn!(library_id = self.library_id, error = %e, "file watching unavailable"),
        }
    }

    /// Registers files that stopped growing for the settle time.
    fn check_growing(&mut self, ctx: &mut Context<Self>) {
        let mut ready = Vec::new();
        self.growing.retain(|path, (size, since)| match std::fs::metadata(path) {
            Ok(m) if m.len() != *size => {
                *size = m.len();
                *since = Instant::now();
                true
            }
            Ok(m) if m.len() > 0 && since.elapsed() >= self.settle => {
                ready.push(path.clone());
                false
            }
            Ok(_) => true,
            Err(_) => false,
        });
        if ready.is_empty() {
            return;
        }
        // What the watcher reports is a name someone else made: only a file that resolves to
        // itself inside the library is taken in (`media::contain`).
        ready.retain(|p| contain::still_inside(p, &self.watched_roots).is_ok());
        let (db, id, scheduler, prober) =
            (self.db.clone(), self.library_id, self.scheduler.clone(), self.prober.clone());
        ctx.spawn(
            async move {
                match repo::libraries::get(&db, id).await {
                    Ok(library) => {
                        let known = jobs::known_files(&db, id).await.unwrap_or_default();
                        let (new, changed) = new_and_changed(&known, ready.iter().filter_map(|p| found(p)));
                        match take_in(&db, &library, &new, &changed).await {
                            Ok(n) if n > 0 => {
                                tracing::info!(library_id = id, files = n, "new or changed files queued");
                                prober.wake();
                                scheduler.do_send(Wake);
                            }
                            Ok(_) => {}
                            Err(e) => tracing::warn!(library_id = id, error = %e, "could not register new files"),
                        }
                    }
                    Err(e) => tracing::warn!(library_id = id, error = %e, "library gone"),
                }
            }
            .into_actor(self),
        );
    }
}

impl Actor for LibrarySupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let db = self.db.clone();
        let id = self.library_id;
        ctx.wait(async move { repo::libraries::get(&db, id).await }.into_actor(self).map(move |library, this, ctx| {
            match library {
                Ok(l) if l.enabled => {
                    if l.watch {
                        this.watch(&repo::libraries::paths_of(&l), ctx);
                    }
                    ctx.notify(ScanNow);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(library_id = id, error = %e, "cannot load library"),
            }
        }));
        ctx.run_interval(Duration::from_millis(500), LibrarySupervisor::check_growing);
    }
}

impl Handler<ScanNow> for LibrarySupervisor {
    // Atomic: one scan at a time per library, so two never register the same file.
    type Result = AtomicResponse<Self, Result<ScanReport, String>>;

    fn handle(&mut self, _: ScanNow, _: &mut Context<Self>) -> Self::Result {
        let (db, id, scheduler, settle) = (self.db.clone(), self.library_id, self.scheduler.clone(), self.settle);
        let prober = self.prober.clone();
        AtomicResponse::new(Box::pin(
            async move {
                let started = Instant::now();
                let (report, deferred) = scan(&db, id, settle).await.map_err(|e| e.to_string())?;
                tracing::info!(
                    library_id = id,
                    ?report,
                    deferred = deferred.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "library scanned"
                );
                if report.queued > 0 {
                    prober.wake();
                }
                scheduler.do_send(Wake);
                Ok((report, deferred))
            }
            .into_actor(self)
            .map(|result: Result<(ScanReport, Vec<FoundFile>), String>, this, _| {
                let (report, deferred) = result?;
                // Files that may still be being written wait for the settle check.
                for f in deferred {
                    let size = u64::try_from(f.size).unwrap_or(0);
                    this.growing.entry(f.path).or_insert((size, Instant::now()));
                }
                Ok(report)
            }),
        ))
    }
}

impl Handler<FileEvent> for LibrarySupervisor {
    type Result = ();

    fn handle(&mut self, msg: FileEvent, ctx: &mut Context<Self>) {
        if !wanted_below(&self.watched_roots, &msg.path) {
            return;
        }
        if msg.removed {
            self.growing.remove(&msg.path);
            // A rescan settles removals with the same rules as a full scan.
            ctx.notify(ScanNow);
            return;
        }
        let size = std::fs::metadata(&msg.path).map(|m| m.len()).unwrap_or(0);
        let entry = self.growing.entry(msg.path).or_insert((size, Instant::now()));
        if entry.0 != size {
            *entry = (size, Instant::now());
        }
    }
}

/// The set of running library supervisors, kept in step with the database.
pub struct Libraries {
    db: DatabaseConnection,
    scheduler: Recipient<Wake>,
    prober: Prober,
    settle: Duration,
    running: HashMap<i32, (Addr<LibrarySupervisor>, chrono::DateTime<chrono::Utc>)>,
    /// The linked nodes, asked again what they see whenever a library changes.
    links: Links,
}

impl Libraries {
    pub fn new(db: DatabaseConnection, scheduler: Recipient<Wake>, prober: Prober, settle: Duration) -> Self {
        Libraries { db, scheduler, prober, settle, running: HashMap::new(), links: Links::default() }
    }

    /// Asks the nodes of `links` again what they see whenever a library is created, moved or
    /// deleted.
    pub fn asking(mut self, links: Links) -> Self {
        self.links = links;
        self
    }
}

impl Actor for Libraries {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.notify(Reload);
    }
}

/// Starts supervisors of new libraries, restarts changed ones, stops deleted ones.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reload;

/// Scans one library now.
#[derive(Message)]
#[rtype(result = "Result<ScanReport, String>")]
pub struct ScanLibrary(pub i32);

impl Handler<Reload> for Libraries {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: Reload, _: &mut Context<Self>) -> Self::Result {
        let db = self.db.clone();
        Box::pin(async move { repo::libraries::list(&db).await }.into_actor(self).map(|libraries, this, _| {
            let Ok(libraries) = libraries else { return };
            let ids: HashSet<i32> = libraries.iter().map(|l| l.id).collect();
            let before = this.running.len();
            let mut changed = false;
            this.running.retain(|id, (addr, _)| {
                let keep = ids.contains(id);
                if !keep {
                    addr.do_send(Stop);
                }
                keep
            });
            for library in libraries {
                let current = this.running.get(&library.id).map(|(_, at)| *at);
                if current == Some(library.updated_at) {
                    continue;
                }
                changed = true;
                if let Some((old, _)) = this.running.remove(&library.id) {
                    old.do_send(Stop);
                }
                let addr = LibrarySupervisor::new(
                    library.id,
                    this.db.clone(),
                    this.scheduler.clone(),
                    this.prober.clone(),
                    this.settle,
                )
                .start();
                this.running.insert(library.id, (addr, library.updated_at));
            }
            if changed || this.running.len() != before {
                // A linked node is given no job of a path it has not reported on.
                this.links.ask_libraries();
            }
        }))
    }
}

impl Handler<ScanLibrary> for Libraries {
    type Result = ResponseFuture<Result<ScanReport, String>>;

    fn handle(&mut self, msg: ScanLibrary, _: &mut Context<Self>) -> Self::Result {
        let addr = self.running.get(&msg.0).map(|(a, _)| a.clone());
        Box::pin(async move {
            match addr {
                Some(a) => a.send(ScanNow).await.map_err(|e| e.to_string())?,
                None => Err(format!("library {} is not running", msg.0)),
            }
        })
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Stop;

impl Handler<Stop> for LibrarySupervisor {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        self.watcher = None;
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(status: JobStatus, recorded_output: Option<(i64, i64)>) -> HashMap<PathBuf, KnownFile> {
        let job =
            KnownFile { id: 7, status, size: 5000, mtime_ns: Some(1), target_codec: "hevc".into(), recorded_output };
        HashMap::from([(PathBuf::from("/m/c.avi"), job)])
    }

    fn file(path: &str, inode: i64, size: i64) -> FoundFile {
        FoundFile { path: path.into(), file_name: "x".into(), size, mtime_ns: 2, inode }
    }

    #[test]
    fn the_output_a_cut_short_replace_swapped_in_is_its_jobs_business() {
        // The row records the swapped-in output (inode 42, 1000 bytes); the source is gone.
        let known = known(JobStatus::Queued, Some((42, 1000)));
        let output = file("/m/c.mkv", 42, 1000);
        assert_eq!(swapped_outputs(&known, [&output]), HashMap::from([(PathBuf::from("/m/c.mkv"), 7)]));
        let (new, changed) = new_and_changed(&known, [output]);
        assert!(new.is_empty() && changed.is_empty(), "{new:?}");
    }

    #[test]
    fn any_other_file_at_a_jobs_final_path_is_new() {
        // Another file (not the recorded output), an ended job, or a job with no swap recorded.
        for (status, recorded, found) in [
            (JobStatus::Queued, Some((42, 1000)), file("/m/c.mkv", 43, 1000)),
            (JobStatus::Queued, Some((42, 1000)), file("/m/c.mkv", 42, 999)),
            (JobStatus::Completed, Some((42, 1000)), file("/m/c.mkv", 42, 1000)),
            (JobStatus::Encoding, None, file("/m/c.mkv", 42, 1000)),
        ] {
            let known = known(status, recorded);
            assert!(swapped_outputs(&known, [&found]).is_empty(), "{status} {recorded:?} {found:?}");
            let (new, _) = new_and_changed(&known, [found.clone()]);
            assert_eq!(new, [found]);
        }
    }

    #[test]
    fn the_watcher_ignores_files_in_partial_outputs_and_hidden_folders() {
        let roots = [PathBuf::from("/lib/films")];
        assert!(wanted_below(&roots, Path::new("/lib/films/a.mkv")));
        assert!(wanted_below(&roots, Path::new("/lib/films/2020/a.mkv")));
        for ignored in [
            "/lib/films/.a.mkv.condense-partial/output.mkv",
            "/lib/films/2020/.a.mkv.condense-partial/seg-00000.mkv",
            "/lib/films/.hidden/a.mkv",
            "/lib/films/.a.mkv.condense-original",
            "/lib/films/.a.mkv.condense-original.2",
            "/elsewhere/a.mkv",
        ] {
            assert!(!wanted_below(&roots, Path::new(ignored)), "{ignored}");
        }
        // A library inside a hidden folder is still watched: only folders below the root count.
        assert!(wanted_below(&[PathBuf::from("/home/u/.media")], Path::new("/home/u/.media/a.mkv")));
    }

    #[test]
    fn names_that_are_not_utf8_are_judged_by_their_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let path = |bytes: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(bytes));
        let roots = [PathBuf::from("/lib")];
        assert!(wanted_below(&roots, &path(b"/lib/caf\xe9/cr\xe8me.mkv")));
        for ignored in [
            b"/lib/.caf\xe9 cr\xe8me.mkv.condense-partial/output.mkv".as_slice(),
            b"/lib/.\xe9t\xe9/a.mkv",
            b"/lib/.caf\xe9.mkv",
            b"/lib/.caf\xe9.mkv.condense-original",
        ] {
            assert!(!wanted_below(&roots, &path(ignored)), "{}", path(ignored).display());
        }
    }
}
