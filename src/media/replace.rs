//! The replace protocol: the verified output takes the original's place without a moment
//! where neither exists, and every step is safe to repeat after a crash.
//!
//! Same file name: the original gets a second name (a hard link, `.NAME.condense-original`,
//! or `.NAME.condense-original.N` when earlier kept originals hold that name), then the
//! output is renamed over the original's path. `rename(2)` replaces atomically, so the path
//! always holds a complete file: the original before, the output after.
//! Different name (container change): the output is moved to its new name without ever
//! replacing a file there (`renameat2(RENAME_NOREPLACE)`), then the original is removed or
//! kept. Folders are fsynced after each step.
//!
//! Right before the swap, an `Intent` is written durably into the partial output's folder:
//! it names the backup this swap makes and whether it is kept. A backup is only ever
//! removed by the swap that made it, or by recovery acting on that swap's intent, and only
//! while it still is that swap's original (same inode). A crash after the swap but before
//! the job is marked complete leaves the intent there, and `recover` then finishes the job
//! instead of taking its output for a source that is already in the target codec.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, RenameFlags, Stat};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::handle::{Folder, Foreign};
use super::layout::{numbered_backup_path, INTENT_FILE};
use super::manifest::sync_dir;
use super::plan::SourceIdentity;
use super::MediaError;
use crate::domain::job::FailureCode;

/// Kept originals of one file, at most: a limit so a name search always ends.
const MAX_BACKUPS: u32 = 1000;

/// A step of the protocol, for the job's event history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    SourceChecked,
    BackupLinked,
    OutputInPlace,
    OriginalRemoved,
    BackupKept,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::SourceChecked => "replace_source_checked",
            Step::BackupLinked => "replace_backup_linked",
            Step::OutputInPlace => "replace_output_in_place",
            Step::OriginalRemoved => "replace_original_removed",
            Step::BackupKept => "replace_backup_kept",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Replace<'a> {
    pub source: &'a Path,
    pub identity: SourceIdentity,
    /// The verified output, inside the job's partial output folder (the intent goes there).
    pub output: &'a Path,
    pub final_path: &'a Path,
    pub keep_original: bool,
    /// Give the output the original's modification time (a library's `keepModifiedTime`).
    pub keep_modified_time: bool,
}

fn io(context: &str) -> impl Fn(std::io::Error) -> MediaError + '_ {
    move |e| MediaError::from_io(context, &e)
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("."))
}

fn foreign(e: Foreign) -> MediaError {
    MediaError::new(FailureCode::PermissionDenied, e.to_string())
}

/// The source's folder, opened without following a link on the way (the paths condense keeps
/// are resolved ones: a link met now was put there since), and the source's name in it.
/// Everything the replace does beside the source goes through this handle.
struct Beside<'a> {
    folder: Folder,
    source: &'a OsStr,
}

impl<'a> Beside<'a> {
    fn open(source: &'a Path) -> Result<Beside<'a>, MediaError> {
        let name = source.file_name().ok_or_else(|| MediaError::misc(format!("{} names no file", source.display())))?;
        let folder = Folder::open_resolved(parent(source), "the source's folder")
            .map_err(io("opening the source's folder"))?
            .map_err(foreign)?;
        Ok(Beside { folder, source: name })
    }

    /// The name of `path` in this folder: every name the replace uses is a sibling of the
    /// source, and one that is not is refused rather than reached by its path.
    fn name_of<'p>(&self, path: &'p Path) -> Result<&'p OsStr, MediaError> {
        match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) if dir == self.folder.shown() => Ok(name),
            _ => Err(MediaError::misc(format!("{} is not beside the source; nothing was replaced", path.display()))),
        }
    }

    /// What is at `name` now, not followed.
    fn identity(&self, name: &OsStr) -> std::io::Result<Option<(SourceIdentity, bool)>> {
        Ok(self.folder.entry(name)?.map(|st| {
            let regular = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
            (SourceIdentity::of_stat(&st), regular)
        }))
    }

    fn inode_of_file(&self, name: &OsStr) -> Option<u64> {
        self.identity(name).ok().flatten().filter(|(_, regular)| *regular).map(|(id, _)| id.inode)
    }

    fn link(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        // linkat without AT_SYMLINK_FOLLOW: a link at `from` is linked itself, never followed.
        rustix::fs::linkat(&self.folder, from, &self.folder, to, AtFlags::empty()).map_err(std::io::Error::from)
    }

    fn unlink(&self, name: &OsStr) -> std::io::Result<()> {
        rustix::fs::unlinkat(&self.folder, name, AtFlags::empty()).map_err(std::io::Error::from)
    }

    /// Moves `from` (a path this process reaches through a handle, or a name here) to
    /// `to` here, never replacing what is at `to`.
    fn rename_noreplace(&self, from_dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        match rustix::fs::renameat_with(from_dir, from, &self.folder, to, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            // Filesystems without the flag (NFS, some FUSE mounts) and old kernels refuse it;
            // a hard link does not replace either, so link + unlink is the same promise.
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
        rustix::fs::linkat(from_dir, from, &self.folder, to, AtFlags::empty())?;
        rustix::fs::unlinkat(from_dir, from, AtFlags::empty()).map_err(std::io::Error::from)
    }

    fn sync(&self) -> Result<(), MediaError> {
        self.folder.sync().map_err(io("syncing the folder"))
    }
}

/// The first backup name that no file, folder or link holds: a kept original is never
/// replaced by a later one.
fn free_backup_path(source: &Path) -> Result<PathBuf, MediaError> {
    let beside = Beside::open(source)?;
    for n in 1..=MAX_BACKUPS {
        let candidate = numbered_backup_path(source, n);
        let name = beside.name_of(&candidate)?;
        match beside.folder.entry(name) {
            Ok(None) => return Ok(candidate),
            Err(e) => return Err(MediaError::from_io("looking for a free backup name", &e)),
            Ok(Some(_)) => {}
        }
    }
    Err(MediaError::misc(format!(
        "{MAX_BACKUPS} kept originals of {} exist already; nothing was replaced",
        source.display()
    )))
}

/// Gives the output the original's permissions, owner and group (and, when asked, its
/// modification time) before it takes the original's place. Changing the owner needs the
/// right to (root, or the same owner): where it is refused the mode is still kept, and the
/// node says so in its log.
fn take_on_original(output: &std::fs::File, original: &Stat, keep_modified_time: bool) -> Result<(), MediaError> {
    let owner =
        (original.st_uid != rustix::process::geteuid().as_raw()).then(|| rustix::fs::Uid::from_raw(original.st_uid));
    let group = Some(rustix::fs::Gid::from_raw(original.st_gid));
    match rustix::fs::fchown(output, owner, group) {
        Ok(()) => {}
        Err(Errno::PERM) => {
            tracing::warn!(
                uid = original.st_uid,
                gid = original.st_gid,
                "not allowed to give the output the original's owner and group"
            );
        }
        Err(e) => return Err(MediaError::from_io("giving the output the original's owner", &e.into())),
    }
    // After the owner: chown clears set-user-ID and set-group-ID bits.
    let mode = rustix::fs::Mode::from_raw_mode(original.st_mode & 0o7777);
    rustix::fs::fchmod(output, mode)
        .map_err(|e| MediaError::from_io("giving the output the original's mode", &e.into()))?;
    if keep_modified_time {
        let times = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec { tv_sec: original.st_atime, tv_nsec: original.st_atime_nsec as _ },
            last_modification: rustix::fs::Timespec { tv_sec: original.st_mtime, tv_nsec: original.st_mtime_nsec as _ },
        };
        rustix::fs::futimens(output, &times)
            .map_err(|e| MediaError::from_io("keeping the modification time", &e.into()))?;
    }
    Ok(())
}

/// Replaces the original with the verified output. `still_mine` is asked right before the
/// swap: a node that lost its lease on the job must not touch the file. The intent, naming
/// the backup, is written into the output's folder before anything moves. Everything beside
/// the source is done through a handle on its folder, on names that are never followed.
pub fn replace(
    r: &Replace,
    still_mine: &dyn Fn() -> bool,
    record: &mut dyn FnMut(Step),
) -> Result<PathBuf, MediaError> {
    let beside = Beside::open(r.source)?;
    let (source, final_name) = (beside.source, beside.name_of(r.final_path)?);
    let now = beside.identity(source).map_err(io("reading the source"))?;
    if now != Some((r.identity, true)) {
        return Err(MediaError::misc("the source changed while it was being encoded; it was left as it is"));
    }
    let original = beside.folder.entry(source).map_err(io("reading the source"))?;
    if !still_mine() {
        return Err(MediaError::misc("this node no longer holds the job; the source was left as it is"));
    }
    let output_file = std::fs::File::open(r.output).map_err(io("opening the output"))?;
    if let Some(original) = &original {
        take_on_original(&output_file, original, r.keep_modified_time)?;
    }
    output_file.sync_all().map_err(io("syncing the output"))?;
    let output_dir = std::fs::File::open(parent(r.output)).map_err(io("opening the partial output"))?;
    let output_name = r.output.file_name().ok_or_else(|| MediaError::misc("the output names no file"))?;
    let intent = Intent::of(r)?;
    intent.write(parent(r.output))?;
    record(Step::SourceChecked);
    if r.final_path == r.source {
        let backup = intent.backup.as_deref().ok_or_else(|| MediaError::misc("the replace intent names no backup"))?;
        let backup = beside.name_of(backup)?;
        // link(2) never replaces: a name taken since the intent was written stops the swap.
        beside.link(source, backup).map_err(io("linking the original"))?;
        beside.sync()?;
        record(Step::BackupLinked);
        rustix::fs::renameat(&output_dir, output_name, &beside.folder, final_name)
            .map_err(|e| MediaError::from_io("moving the output in place", &e.into()))?;
        beside.sync()?;
        record(Step::OutputInPlace);
        if r.keep_original {
            record(Step::BackupKept);
        } else {
            beside.unlink(backup).map_err(io("removing the original"))?;
            beside.sync()?;
            record(Step::OriginalRemoved);
        }
    } else {
        // Two sources may share a final name (a.avi and a.wmv both become a.mkv): the file
        // (or link) already there, whoever made it, is never replaced.
        beside.rename_noreplace(output_dir.as_fd(), output_name, final_name).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                MediaError::misc(format!(
                    "{} exists already (another file of that name); the original was left as it is",
                    r.final_path.display()
                ))
            } else {
                MediaError::from_io("moving the output in place", &e)
            }
        })?;
        beside.sync()?;
        record(Step::OutputInPlace);
        match &intent.backup {
            Some(backup) => {
                let backup = beside.name_of(backup)?;
                beside.rename_noreplace(beside.folder.as_fd(), source, backup).map_err(io("keeping the original"))?;
                record(Step::BackupKept);
            }
            None => {
                beside.unlink(source).map_err(io("removing the original"))?;
                record(Step::OriginalRemoved);
            }
        }
        beside.sync()?;
    }
    Ok(r.final_path.to_path_buf())
}

fn keep_when_unknown() -> bool {
    true
}

/// What a replace is about to do, written before the swap so a restart can tell whether the
/// file at the final path is the job's output (a rename keeps the inode), and which backup
/// is this swap's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Intent {
    pub output_inode: u64,
    pub output_size: u64,
    #[serde(with = "crate::domain::path_bytes::lossless")]
    pub final_path: PathBuf,
    /// The original the job started on.
    pub source: SourceIdentity,
    /// The name this swap gives the original: always for a same-name swap (the link that
    /// keeps it reachable), for a container change only when it is kept. Absent from intents
    /// written before backups were numbered: recovery then leaves every backup alone.
    #[serde(default, with = "crate::domain::path_bytes::lossless_opt")]
    pub backup: Option<PathBuf>,
    /// Whether the original is kept, decided when the swap began (unknown: kept).
    #[serde(default = "keep_when_unknown")]
    pub keep_original: bool,
}

impl Intent {
    pub fn of(r: &Replace) -> Result<Intent, MediaError> {
        use std::os::unix::fs::MetadataExt;
        let output = std::fs::metadata(r.output).map_err(io("reading the output"))?;
        let needs_backup = r.final_path == r.source || r.keep_original;
        Ok(Intent {
            output_inode: output.ino(),
            output_size: output.len(),
            final_path: r.final_path.to_path_buf(),
            source: r.identity,
            backup: if needs_backup { Some(free_backup_path(r.source)?) } else { None },
            keep_original: r.keep_original,
        })
    }

    /// Writes the intent durably into `dir` (the partial output's folder).
    pub fn write(&self, dir: &Path) -> Result<(), MediaError> {
        use std::io::Write;
        let body = serde_json::to_vec(self).map_err(|e| MediaError::misc(format!("replace intent: {e}")))?;
        let tmp = dir.join(format!("{INTENT_FILE}.tmp"));
        let mut file = std::fs::File::create(&tmp).map_err(io("writing the replace intent"))?;
        file.write_all(&body).map_err(io("writing the replace intent"))?;
        file.sync_all().map_err(io("writing the replace intent"))?;
        std::fs::rename(&tmp, dir.join(INTENT_FILE)).map_err(io("writing the replace intent"))?;
        sync_dir(dir).map_err(io("syncing the folder"))
    }

    pub fn read(dir: &Path) -> Option<Intent> {
        serde_json::from_slice(&std::fs::read(dir.join(INTENT_FILE)).ok()?).ok()
    }
}

/// A replace a crash interrupted after its swap: the output is in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swapped {
    pub final_path: PathBuf,
    pub output_size: u64,
}

/// What recovery found for a source path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// No replace was under way (no intent in the partial output's folder).
    Nothing,
    /// The swap had not happened: the original is in place; the backup link the swap made,
    /// if any, and the intent are gone.
    RolledBack,
    /// The output was in place: the protocol was finished as the intent says (the backup
    /// removed or kept); the job completes with this output, nothing is encoded again.
    RolledForward(Swapped),
}

/// Finishes or undoes a replace interrupted by a crash, acting only on what the job's own
/// intent names, and on a backup only while it still holds that swap's original. `partial`
/// is the job's partial folder as its holder reaches it (`PartialLock::dir`).
pub fn recover(source: &Path, partial: &Path) -> Result<Recovered, MediaError> {
    let Some(intent) = Intent::read(partial) else { return Ok(Recovered::Nothing) };
    let beside = Beside::open(source)?;
    let source_name = beside.source;
    let original = intent.source.inode;
    let ours = match &intent.backup {
        Some(b) => Some(beside.name_of(b)?).filter(|b| beside.inode_of_file(b) == Some(original)),
        None => None,
    };
    let final_name = beside.name_of(&intent.final_path)?;
    if beside.inode_of_file(final_name) != Some(intent.output_inode) {
        // Crash before the swap: the original is still at its path.
        if let Some(backup) = ours {
            match beside.identity(source_name).map_err(io("reading the source"))? {
                // Only the link was made.
                Some((id, true)) if id.inode == original => {
                    beside.unlink(backup).map_err(io("removing a stray link"))?;
                }
                // Never left this way by `replace`, but an empty path gets its original back.
                None => {
                    beside
                        .rename_noreplace(beside.folder.as_fd(), backup, source_name)
                        .map_err(io("restoring the original"))?;
                }
                _ => {}
            }
            beside.sync()?;
        }
        match std::fs::remove_file(partial.join(INTENT_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(MediaError::from_io("removing a stale replace intent", &e))
            }
            _ => {}
        }
        return Ok(Recovered::RolledBack);
    }
    if intent.final_path == source {
        if let Some(backup) = ours.filter(|_| !intent.keep_original) {
            beside.unlink(backup).map_err(io("removing the original"))?;
            beside.sync()?;
        }
    } else if beside.identity(source_name).ok().flatten() == Some((intent.source, true)) {
        // A container change: the original goes, or is kept, as the swap meant to.
        if intent.keep_original {
            let backup = match intent.backup.clone() {
                Some(b) => b,
                None => free_backup_path(source)?,
            };
            let backup = beside.name_of(&backup)?;
            beside.rename_noreplace(beside.folder.as_fd(), source_name, backup).map_err(io("keeping the original"))?;
        } else {
            beside.unlink(source_name).map_err(io("removing the original"))?;
        }
        beside.sync()?;
    }
    Ok(Recovered::RolledForward(Swapped { final_path: intent.final_path, output_size: intent.output_size }))
}

/// A swap the job's record names where no intent is left to: the file at `target` (the
/// output's path, `plan::final_path`) is still the output recorded after the swap, by its
/// size and inode. The attempt recorded the swap, removed its partial folder (the intent
/// with it) and stopped short of completing: the replace is done, and the job completes
/// without encoding the output again.
pub fn swapped_on_record(target: PathBuf, output_size: u64, output_inode: u64) -> Option<Swapped> {
    let now = SourceIdentity::of(&target).ok()?;
    (now.inode == output_inode && now.size == output_size).then_some(Swapped { final_path: target, output_size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::layout::{backup_path_for, is_service_file, partial_dir_for};

    /// A source and, in its partial output folder, an output of `output` bytes.
    fn setup_named(name: &str, output: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join(name);
        std::fs::write(&source, b"original bytes").unwrap();
        let output_path = put_output(&source, output);
        (dir, source, output_path)
    }

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        setup_named("movie.mkv", b"new")
    }

    fn put_output(source: &Path, bytes: &[u8]) -> PathBuf {
        let partial = partial_dir_for(source);
        std::fs::create_dir_all(&partial).unwrap();
        let output = partial.join("output.mkv");
        std::fs::write(&output, bytes).unwrap();
        output
    }

    /// The replace of `source` (as it is now) by `output` at `target`.
    fn request<'a>(source: &'a Path, output: &'a Path, target: &'a Path, keep: bool) -> Replace<'a> {
        let identity = SourceIdentity::of(source).unwrap();
        Replace { source, identity, output, final_path: target, keep_original: keep, keep_modified_time: false }
    }

    fn replace_with(source: &Path, output: &Path, target: &Path, keep: bool) -> Result<PathBuf, MediaError> {
        replace(&request(source, output, target, keep), &|| true, &mut |_| {})
    }

    #[test]
    fn a_swap_on_record_is_the_file_of_that_size_and_inode_at_the_target() {
        let (_dir, source, _) = setup();
        let now = SourceIdentity::of(&source).unwrap();
        let swapped = swapped_on_record(source.clone(), now.size, now.inode);
        assert_eq!(swapped, Some(Swapped { final_path: source.clone(), output_size: now.size }));
        assert_eq!(swapped_on_record(source.clone(), now.size + 1, now.inode), None);
        assert_eq!(swapped_on_record(source.clone(), now.size, now.inode + 1), None);
        assert_eq!(swapped_on_record(source.with_extension("mp4"), now.size, now.inode), None);
    }

    #[test]
    fn same_name_replace_records_every_step_and_removes_the_backup() {
        let (_dir, source, output) = setup();
        let mut steps = Vec::new();
        let r = request(&source, &output, &source, false);
        replace(&r, &|| true, &mut |s| steps.push(s)).unwrap();
        assert_eq!(std::fs::read(&source).unwrap(), b"new");
        assert!(!backup_path_for(&source).exists());
        assert_eq!(steps, [Step::SourceChecked, Step::BackupLinked, Step::OutputInPlace, Step::OriginalRemoved]);
    }

    #[test]
    fn keep_original_leaves_the_backup() {
        let (_dir, source, output) = setup();
        replace_with(&source, &output, &source, true).unwrap();
        assert_eq!(std::fs::read(backup_path_for(&source)).unwrap(), b"original bytes");
    }

    #[test]
    fn a_second_kept_original_never_replaces_the_first() {
        let (dir, source, output) = setup_named("movie.mkv", b"first output");
        replace_with(&source, &output, &source, true).unwrap();
        let output = put_output(&source, b"second output");
        replace_with(&source, &output, &source, true).unwrap();
        assert_eq!(std::fs::read(&source).unwrap(), b"second output");
        assert_eq!(std::fs::read(numbered_backup_path(&source, 1)).unwrap(), b"original bytes");
        assert_eq!(std::fs::read(numbered_backup_path(&source, 2)).unwrap(), b"first output");
        // A swap that keeps nothing removes only the link it made itself.
        let output = put_output(&source, b"third output");
        replace_with(&source, &output, &source, false).unwrap();
        assert_eq!(std::fs::read(numbered_backup_path(&source, 1)).unwrap(), b"original bytes");
        assert_eq!(std::fs::read(numbered_backup_path(&source, 2)).unwrap(), b"first output");
        assert!(!numbered_backup_path(&source, 3).exists());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(names.iter().filter(|p| **p != source).all(|p| is_service_file(p)), "{names:?}");
    }

    #[test]
    fn every_backup_name_is_a_service_file() {
        let source = Path::new("/m/Movie (2020).mkv");
        for n in [1, 2, 10, MAX_BACKUPS] {
            let backup = numbered_backup_path(source, n);
            assert!(is_service_file(&backup), "{}", backup.display());
            assert!(backup.file_name().unwrap().to_string_lossy().starts_with('.'), "{}", backup.display());
        }
        assert_eq!(numbered_backup_path(source, 2), Path::new("/m/.Movie (2020).mkv.condense-original.2"));
    }

    #[test]
    fn container_change_writes_the_new_name_then_removes_the_old() {
        let (dir, avi, output) = setup_named("clip.avi", b"new");
        let target = dir.path().join("clip.mkv");
        replace_with(&avi, &output, &target, false).unwrap();
        assert!(!avi.exists());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_container_change_never_replaces_a_file_of_the_final_name() {
        let (dir, avi, output) = setup_named("a.avi", b"new");
        let target = dir.path().join("a.mkv");
        // A link whose target is gone "does not exist" to a check, but is a name in the folder.
        std::os::unix::fs::symlink(dir.path().join("on-an-unmounted-disk.mkv"), &target).unwrap();
        let err = replace_with(&avi, &output, &target, false).unwrap_err();
        assert!(err.message.contains("exists already"), "{}", err.message);
        assert!(std::fs::symlink_metadata(&target).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&avi).unwrap(), b"original bytes");
        assert!(output.exists());
        std::fs::remove_file(&target).unwrap();
        std::fs::write(&target, b"made from a.wmv").unwrap();
        assert!(replace_with(&avi, &output, &target, false).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"made from a.wmv");
        assert_eq!(std::fs::read(&avi).unwrap(), b"original bytes");
    }

    #[test]
    fn two_sources_racing_for_one_final_name_never_overwrite_each_other() {
        for _ in 0..200 {
            let dir = tempfile::tempdir().unwrap();
            let target = dir.path().join("a.mkv");
            let sources: Vec<(PathBuf, PathBuf)> = ["a.avi", "a.wmv"]
                .iter()
                .map(|name| {
                    let source = dir.path().join(name);
                    std::fs::write(&source, name.as_bytes()).unwrap();
                    let output = put_output(&source, format!("encoded {name}").as_bytes());
                    (source, output)
                })
                .collect();
            let barrier = std::sync::Barrier::new(2);
            let results: Vec<bool> = std::thread::scope(|s| {
                let handles: Vec<_> = sources
                    .iter()
                    .map(|(source, output)| {
                        let (barrier, target) = (&barrier, &target);
                        s.spawn(move || {
                            barrier.wait();
                            replace_with(source, output, target, false).is_ok()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(results.iter().filter(|ok| **ok).count(), 1, "{results:?}");
            let winner = usize::from(results[1]);
            let (loser_source, _) = &sources[1 - winner];
            let name = loser_source.file_name().unwrap().to_string_lossy().into_owned();
            assert_eq!(std::fs::read(loser_source).unwrap(), name.as_bytes(), "the loser's original changed");
            let won = sources[winner].0.file_name().unwrap().to_string_lossy().into_owned();
            assert_eq!(std::fs::read(&target).unwrap(), format!("encoded {won}").as_bytes());
        }
    }

    #[test]
    fn a_kept_original_of_a_container_change_never_replaces_an_earlier_backup() {
        let (dir, avi, output) = setup_named("clip.avi", b"new");
        std::fs::write(backup_path_for(&avi), b"kept by an earlier job").unwrap();
        let target = dir.path().join("clip.mkv");
        replace_with(&avi, &output, &target, true).unwrap();
        assert_eq!(std::fs::read(backup_path_for(&avi)).unwrap(), b"kept by an earlier job");
        assert_eq!(std::fs::read(numbered_backup_path(&avi, 2)).unwrap(), b"original bytes");
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_changed_source_or_a_lost_lease_touches_nothing() {
        let (_dir, source, output) = setup();
        let r = request(&source, &output, &source, false);
        assert!(replace(&r, &|| false, &mut |_| {}).is_err());
        assert_eq!(std::fs::read(&source).unwrap(), b"original bytes");
        std::fs::write(&source, b"edited by the user").unwrap();
        assert!(replace(&r, &|| true, &mut |_| {}).is_err());
        assert_eq!(std::fs::read(&source).unwrap(), b"edited by the user");
        assert!(output.exists());
    }

    /// A source with its output in the partial folder and the intent written, as `replace`
    /// leaves them right before it links the backup.
    fn with_intent(final_name: &str, source_name: &str, keep: bool) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let (dir, source, output) = setup_named(source_name, b"new");
        let target = dir.path().join(final_name);
        let r = request(&source, &output, &target, keep);
        Intent::of(&r).unwrap().write(&partial_dir_for(&source)).unwrap();
        (dir, source, output, target)
    }

    #[test]
    fn recovery_rolls_back_a_link_and_forward_a_swap() {
        // Crash after the link, before the rename.
        let (_dir, source, _output, _) = with_intent("movie.mkv", "movie.mkv", false);
        let backup = backup_path_for(&source);
        std::fs::hard_link(&source, &backup).unwrap();
        assert_eq!(recover(&source, &partial_dir_for(&source)).unwrap(), Recovered::RolledBack);
        assert!(!backup.exists());
        assert!(!partial_dir_for(&source).join(INTENT_FILE).exists());
        assert_eq!(std::fs::read(&source).unwrap(), b"original bytes");
        assert_eq!(recover(&source, &partial_dir_for(&source)).unwrap(), Recovered::Nothing);

        // Crash after the rename, before the backup was removed (or kept, as the intent says).
        for keep in [false, true] {
            let (_dir, source, output, _) = with_intent("movie.mkv", "movie.mkv", keep);
            let backup = backup_path_for(&source);
            std::fs::hard_link(&source, &backup).unwrap();
            std::fs::rename(&output, &source).unwrap();
            let swapped = Swapped { final_path: source.clone(), output_size: 3 };
            assert_eq!(recover(&source, &partial_dir_for(&source)).unwrap(), Recovered::RolledForward(swapped));
            assert_eq!(backup.exists(), keep);
            assert_eq!(std::fs::read(&source).unwrap(), b"new");
        }
    }

    #[test]
    fn recovery_touches_no_backup_its_intent_does_not_name() {
        // No intent: backups kept by earlier jobs stay, whatever the setting is now.
        let (_dir, source, _output) = setup();
        std::fs::write(backup_path_for(&source), b"kept by an earlier job").unwrap();
        assert_eq!(recover(&source, &partial_dir_for(&source)).unwrap(), Recovered::Nothing);
        assert_eq!(std::fs::read(backup_path_for(&source)).unwrap(), b"kept by an earlier job");

        // An intent whose swap happened and kept nothing removes its own link only: the
        // earlier backup has another inode and another name.
        let (_dir, source, output) = setup();
        let earlier = backup_path_for(&source);
        std::fs::write(&earlier, b"kept by an earlier job").unwrap();
        let r = request(&source, &output, &source, false);
        let intent = Intent::of(&r).unwrap();
        let ours = numbered_backup_path(&source, 2);
        assert_eq!(intent.backup.as_deref(), Some(ours.as_path()));
        intent.write(&partial_dir_for(&source)).unwrap();
        std::fs::hard_link(&source, &ours).unwrap();
        std::fs::rename(&output, &source).unwrap();
        assert!(matches!(recover(&source, &partial_dir_for(&source)).unwrap(), Recovered::RolledForward(_)));
        assert!(!ours.exists());
        assert_eq!(std::fs::read(&earlier).unwrap(), b"kept by an earlier job");
    }

    #[test]
    fn recovery_finishes_a_container_change_or_drops_an_intent_whose_swap_never_happened() {
        // Crash before the swap: the intent goes, the original stays.
        let (_dir, source, _output, _) = with_intent("clip.mkv", "clip.avi", false);
        assert_eq!(recover(&source, &partial_dir_for(&source)).unwrap(), Recovered::RolledBack);
        assert!(!partial_dir_for(&source).join(INTENT_FILE).exists());
        assert_eq!(std::fs::read(&source).unwrap(), b"original bytes");

        // Crash after the swap of a container change: the original goes, or is kept.
        for keep in [false, true] {
            let (_dir, source, output, target) = with_intent("clip.mkv", "clip.avi", keep);
            std::fs::rename(&output, &target).unwrap();
            let Recovered::RolledForward(swapped) = recover(&source, &partial_dir_for(&source)).unwrap() else {
                panic!("not rolled forward")
            };
            assert_eq!(swapped.final_path, target);
            assert!(!source.exists());
            assert_eq!(backup_path_for(&source).exists(), keep);
            assert_eq!(std::fs::read(&target).unwrap(), b"new");
        }
        // No intent: nothing to do.
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("x.mkv");
        assert_eq!(recover(&x, &partial_dir_for(&x)).unwrap(), Recovered::Nothing);
    }
}
