//! The partial output folder has one writer at a time, and the filesystem enforces it: an
//! OFD lock (`fcntl(F_OFD_SETLK)`, which NFSv4 servers honour, unlike `flock`) on a lock file
//! inside the folder. The transcoder takes it before touching anything; the node takes it to
//! verify and replace the finished output; every removal of the folder takes it. The lock
//! belongs to the open file description, so it is released when its holder dies, however it
//! dies, and a second open of the file (even in the same process) is refused while it is held.
//!
//! The lock is taken on byte ranges of that file, so one folder can have several writers
//! that never write the same file: byte 0 is the run that owns the manifest (the job's
//! transcoder), byte 1 + k the claim on the video's planned span k (whoever encodes it: a
//! session of that transcoder or a helper on another node, see `media::helper`). Removal,
//! verification and the replace take the whole file, so they wait for every writer.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, OFlags};

use super::handle::{Folder, Foreign};
use super::layout::LOCK_FILE;
use super::MediaError;
use crate::domain::job::FailureCode;

/// An open partial folder: the source's folder and condense's own folder in it, both
/// held open (`media::handle`), so nothing done through it follows a link put at either
/// name, before or while a job runs.
#[derive(Debug)]
pub struct PartialDir {
    parent: Folder,
    name: OsString,
    folder: Folder,
    /// `/proc/self/fd/N` of `folder`: what the code that takes paths writes into.
    path: PathBuf,
}

const WHAT: &str = "the partial output";

fn foreign(e: Foreign) -> MediaError {
    MediaError::new(FailureCode::PermissionDenied, e.to_string())
}

impl PartialDir {
    /// Opens the partial folder `dir` (making it, private to condense's user, with
    /// `create`). `Ok(None)`: there is none and `create` is false, or the source's folder
    /// itself is gone. A link, or anything condense did not make, at that name, or a link
    /// on the way to it, is an error that says so, and nothing is touched.
    pub fn open(dir: &Path, create: bool) -> Result<Option<PartialDir>, MediaError> {
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Err(MediaError::misc(format!("{} is no partial output folder", dir.display())));
        };
        let parent = match Folder::open_resolved(parent, "the source's folder") {
            Ok(Ok(folder)) => folder,
            Ok(Err(e)) => return Err(foreign(e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => return Err(MediaError::from_io("opening the source's folder", &e)),
        };
        let folder = match parent.own_folder(name, create, WHAT).map_err(io("opening the partial output"))? {
            Ok(Some(folder)) => folder,
            Ok(None) => return Ok(None),
            Err(e) => return Err(foreign(e)),
        };
        let path = folder.path();
        Ok(Some(PartialDir { parent, name: name.to_os_string(), folder, path }))
    }

    /// The path that reaches this folder from this process, whatever its name becomes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The same folder as reached from this process's children.
    pub fn path_for_children(&self) -> PathBuf {
        self.folder.path_for_children()
    }

    /// Opens a file of condense's in the folder, through its handle, never through a link.
    pub fn open_file(&self, name: &str, flags: OFlags, mode: u32) -> std::io::Result<File> {
        self.folder.open_file(OsStr::new(name), flags, mode)
    }

    /// Removes one of condense's files in the folder (a link there itself, never what it
    /// points to).
    pub fn remove_file(&self, name: &str) -> std::io::Result<()> {
        self.folder.remove_entry(OsStr::new(name))
    }

    /// Makes the folder's entries durable.
    pub fn sync(&self) -> std::io::Result<()> {
        self.folder.sync()
    }

    /// Whether the folder is still at its name (not removed, not swapped for a link).
    fn in_place(&self) -> Result<bool, MediaError> {
        match self.parent.entry(&self.name).map_err(io("looking at the partial output"))? {
            Some(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => Err(foreign(Foreign::Link {
                what: WHAT,
                path: self.parent.shown().join(&self.name).display().to_string(),
            })),
            _ => self.parent.holds(&self.name, &self.folder).map_err(io("looking at the partial output")),
        }
    }
}

/// The held lock of one partial folder; dropping it releases the lock.
#[derive(Debug)]
pub struct PartialLock {
    /// The open file description that holds the lock; closing it releases the lock.
    _description: File,
    dir: PartialDir,
}

/// Which bytes of the lock file a holder locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Range {
    /// Every byte: no other holder of any kind (removal, verification, the replace).
    Whole,
    /// Byte 0: the run that owns the manifest.
    Run,
    /// Byte 1 + k: the writer of planned span k's segments.
    Span(u32),
}

impl Range {
    /// (start, length); a length of 0 reaches past the end of the file, to every byte.
    fn bounds(self) -> (i64, i64) {
        match self {
            Range::Whole => (0, 0),
            Range::Run => (0, 1),
            Range::Span(k) => (1 + i64::from(k), 1),
        }
    }
}

/// The claim on one planned span of a partial folder; dropping it releases the claim.
#[derive(Debug)]
pub struct SpanClaim {
    _description: File,
    pub index: u32,
}

/// What `claim_span` found.
#[derive(Debug)]
pub enum Claim {
    Mine(SpanClaim),
    /// Another writer holds the span.
    Held,
    /// There is no partial folder (or no lock file in it) any more.
    Gone,
}

/// Why `lock` answered without the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Another open file description (another transcoder, another node) holds it.
    Busy,
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> MediaError {
    move |e| MediaError::from_io(what, &e)
}

fn flock_of(range: Range) -> libc::flock {
    let (start, len) = range.bounds();
    // SAFETY: a zeroed flock is a valid value; every field the calls read is set below.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = start;
    lock.l_len = len;
    lock.l_pid = 0;
    lock
}

/// Write-locks `range` of the file through its own open file description; `false` when
/// another one holds a conflicting lock.
fn try_ofd_write_lock(file: &File, range: Range) -> std::io::Result<bool> {
    let lock = flock_of(range);
    // SAFETY: fcntl on a descriptor we own with a flock we own.
    let ret = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) };
    if ret == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(err),
    }
}

/// Takes the lock of the partial folder `dir`, creating the folder if needed. Answers
/// `Err(Held::Busy)` inside `Ok` when someone else holds it.
pub fn lock(dir: &Path) -> Result<Result<PartialLock, Held>, MediaError> {
    // A holder may remove the folder (and its lock file) between our open and our lock:
    // the lock we got is then on a file nobody else will ever open. Check that the locked
    // file is still the one at the path, and start over when it is not.
    lock_range(dir, Range::Whole)
}

/// Takes the run's part of the lock (byte 0), creating the folder if needed: the one
/// transcoder that owns the manifest. Helpers encoding spans of the same folder hold other
/// bytes and do not stand in its way; removal and the commit (the whole file) do.
pub fn lock_run(dir: &Path) -> Result<Result<PartialLock, Held>, MediaError> {
    lock_range(dir, Range::Run)
}

fn lock_range(dir: &Path, range: Range) -> Result<Result<PartialLock, Held>, MediaError> {
    for _ in 0..16 {
        let Some(partial) = PartialDir::open(dir, true)? else { continue };
        match lock_existing(&partial, range, true)? {
            Some(locked) => return Ok(locked.map(|file| PartialLock { _description: file, dir: partial })),
            None => continue,
        }
    }
    Err(MediaError::misc(format!("the lock of {} kept disappearing", dir.display())))
}

/// Claims planned span `index` of an existing partial folder, making nothing: a folder that
/// is gone (removed with its job) is `Claim::Gone`. `dir` is a folder this process holds
/// open (`PartialLock::dir`, `PartialDir::path`): the claim is taken through its handle.
pub fn claim_span(dir: &Path, index: u32) -> Result<Claim, MediaError> {
    let path = dir.join(LOCK_FILE);
    let file = match open_lock_file(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Claim::Gone),
        Err(e) => return Err(MediaError::from_io("opening the partial output's lock", &e)),
    };
    if !try_ofd_write_lock(&file, Range::Span(index)).map_err(io("locking the partial output"))? {
        return Ok(Claim::Held);
    }
    // Removed since it was opened (its job ended): the claim is on a file nobody uses.
    let held = file.metadata().map_err(io("locking the partial output"))?;
    match std::fs::symlink_metadata(&path) {
        Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
            Ok(Claim::Mine(SpanClaim { _description: file, index }))
        }
        Ok(_) => Ok(Claim::Gone),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Claim::Gone),
        Err(e) => Err(MediaError::from_io("locking the partial output", &e)),
    }
}

/// The lock file at `path`, never through a link at its own name.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// Whether someone holds the claim on planned span `index` (asked without taking it) of a
/// folder this process holds open (see `claim_span`).
pub fn span_held(dir: &Path, index: u32) -> bool {
    let Ok(file) = open_lock_file(&dir.join(LOCK_FILE)) else { return false };
    let mut lock = flock_of(Range::Span(index));
    // SAFETY: fcntl on a descriptor we own with a flock we own; F_OFD_GETLK writes into it.
    let ret = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    ret == 0 && lock.l_type != libc::F_UNLCK as libc::c_short
}

/// One attempt on an open folder: `None` when the folder or its lock file went away
/// meanwhile. `create` makes the lock file when it is missing (a holder that may start a
/// folder); otherwise a missing one is `None`.
fn lock_existing(partial: &PartialDir, range: Range, create: bool) -> Result<Option<Result<File, Held>>, MediaError> {
    let name = OsStr::new(LOCK_FILE);
    let flags = if create { OFlags::RDWR | OFlags::CREATE } else { OFlags::RDWR };
    let file = match partial.folder.open_file(name, flags, 0o600) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MediaError::from_io("opening the partial output's lock", &e)),
    };
    if !try_ofd_write_lock(&file, range).map_err(io("locking the partial output"))? {
        return Ok(Some(Err(Held::Busy)));
    }
    let held = file.metadata().map_err(io("locking the partial output"))?;
    let now = partial.folder.entry(name).map_err(io("locking the partial output"))?;
    let same = now.is_some_and(|now| now.st_dev == held.dev() && now.st_ino == held.ino());
    if same && partial.in_place()? {
        Ok(Some(Ok(file)))
    } else {
        Ok(None)
    }
}

impl PartialLock {
    /// The folder, reached through its handle: the path to read and write it by.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The folder as this process's children reach it.
    pub fn dir_for_children(&self) -> PathBuf {
        self.dir.path_for_children()
    }

    /// Opens a file of condense's in the folder, through its handle, never through a link.
    pub fn open_file(&self, name: &str, flags: OFlags, mode: u32) -> std::io::Result<File> {
        self.dir.folder.open_file(OsStr::new(name), flags, mode)
    }

    /// Renames one of condense's files in the folder to another of its names, and makes
    /// the rename durable.
    pub fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        self.dir.folder.rename(OsStr::new(from), OsStr::new(to))?;
        self.dir.folder.sync()
    }

    /// Removes one of condense's files in the folder (a link there itself, never what it
    /// points to).
    pub fn remove_file(&self, name: &str) -> std::io::Result<()> {
        self.dir.folder.remove_entry(OsStr::new(name))
    }

    /// Removes everything in the folder but the lock file (a corrupt partial output that
    /// the holder starts over).
    pub fn clear(&self) -> Result<(), MediaError> {
        self.dir.folder.clear(&[OsStr::new(LOCK_FILE)]).map_err(io("removing the partial output"))
    }

    /// Removes the folder, lock file last, while the lock is held; the folder's name only
    /// while it still names this folder.
    pub fn remove(self) -> Result<(), MediaError> {
        self.clear()?;
        self.dir.folder.remove_entry(OsStr::new(LOCK_FILE)).map_err(io("removing the partial output"))?;
        self.dir.parent.remove_own_folder(&self.dir.name, &self.dir.folder).map_err(io("removing the partial output"))
    }
}

/// Takes the lock of an existing partial folder; `None` when there is no folder (nothing
/// in it to act on, and none is made).
pub fn lock_if_exists(dir: &Path) -> Result<Option<Result<PartialLock, Held>>, MediaError> {
    for _ in 0..16 {
        let Some(partial) = PartialDir::open(dir, false)? else { return Ok(None) };
        if let Some(locked) = lock_existing(&partial, Range::Whole, true)? {
            return Ok(Some(locked.map(|file| PartialLock { _description: file, dir: partial })));
        }
    }
    Err(MediaError::misc(format!("the lock of {} kept disappearing", dir.display())))
}

/// The one way to remove a partial output folder (corrupt, cancelled, failed or finished):
/// under its lock, through its handle. A folder whose lock someone else holds is left as it
/// is and the call fails, so a live transcoder's work is never pulled from under it; a link
/// or anything else condense did not make at its name is left too, and the call says so.
pub fn remove_partial(dir: &Path) -> Result<(), MediaError> {
    for _ in 0..16 {
        let Some(partial) = PartialDir::open(dir, false)? else { return Ok(()) };
        match lock_existing(&partial, Range::Whole, true)? {
            Some(Ok(file)) => return PartialLock { _description: file, dir: partial }.remove(),
            Some(Err(Held::Busy)) => {
                return Err(MediaError::misc(format!(
                    "{} is in use by a running transcoder; it was left in place",
                    dir.display()
                )))
            }
            None => continue,
        }
    }
    Err(MediaError::misc(format!("the lock of {} kept disappearing", dir.display())))
}

/// `remove_partial`, waiting up to `bound` for the writers to let go: helpers encoding
/// spans on other nodes are told to stop when their job ends, and need a moment to exit.
/// A folder condense did not make is refused at once.
pub fn remove_partial_within(dir: &Path, bound: std::time::Duration) -> Result<(), MediaError> {
    let until = std::time::Instant::now() + bound;
    loop {
        match remove_partial(dir) {
            Err(e) if e.code != FailureCode::PermissionDenied && std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            result => return result,
        }
    }
}

/// What identifies a verified output: the file renamed over the original must be this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned {
    pub dev: u64,
    pub inode: u64,
    pub size: u64,
    pub mtime_ns: i64,
}

impl Pinned {
    fn of(m: &std::fs::Metadata) -> Pinned {
        Pinned { dev: m.dev(), inode: m.ino(), size: m.len(), mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec() }
    }
}

/// An output held open from before its verification until its replace, so the file at the
/// path can be compared with the one verified.
#[derive(Debug)]
pub struct PinnedOutput {
    file: File,
    path: PathBuf,
    pub pinned: Pinned,
}

impl PinnedOutput {
    pub fn open(path: &Path) -> Result<PinnedOutput, MediaError> {
        let file = File::open(path).map_err(io("opening the encoded output"))?;
        let pinned = Pinned::of(&file.metadata().map_err(io("reading the encoded output"))?);
        Ok(PinnedOutput { file, path: path.to_path_buf(), pinned })
    }

    /// The file at the path is still the one pinned, unchanged.
    pub fn check(&self) -> Result<(), MediaError> {
        let held = Pinned::of(&self.file.metadata().map_err(io("reading the encoded output"))?);
        let at_path = Pinned::of(&std::fs::metadata(&self.path).map_err(io("reading the encoded output"))?);
        if held != self.pinned || at_path != self.pinned {
            return Err(MediaError::misc(format!(
                "{} changed after it was verified; it was not used",
                self.path.display()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_removal_refused_while_held() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".a.mkv.condense-partial");
        let first = lock(&dir).unwrap().unwrap();
        std::fs::write(dir.join("seg-00000.seg"), b"x").unwrap();
        // A second open file description is refused, even in this process.
        assert_eq!(lock(&dir).unwrap().unwrap_err(), Held::Busy);
        assert!(remove_partial(&dir).is_err());
        assert!(dir.join("seg-00000.seg").exists(), "a refused removal must leave the folder");
        first.clear().unwrap();
        assert!(!dir.join("seg-00000.seg").exists());
        assert!(dir.join(LOCK_FILE).exists());
        drop(first);
        remove_partial(&dir).unwrap();
        assert!(!dir.exists());
        remove_partial(&dir).unwrap();
        // After a removal the folder can be locked again.
        let again = lock(&dir).unwrap().unwrap();
        again.remove().unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn the_run_and_each_span_have_their_own_writer_and_removal_waits_for_all() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".a.mkv.condense-partial");
        assert!(matches!(claim_span(&dir, 0).unwrap(), Claim::Gone), "a claim never makes the folder");
        let run = lock_run(&dir).unwrap().unwrap();
        assert_eq!(lock_run(&dir).unwrap().unwrap_err(), Held::Busy, "one run at a time");
        assert!(!span_held(&dir, 2));
        let Claim::Mine(two) = claim_span(&dir, 2).unwrap() else { panic!("span 2 is free beside the run") };
        assert!(span_held(&dir, 2) && !span_held(&dir, 3));
        assert!(matches!(claim_span(&dir, 2).unwrap(), Claim::Held), "one writer per span");
        let Claim::Mine(three) = claim_span(&dir, 3).unwrap() else { panic!("span 3 is free") };
        drop(run);
        // The run has ended, a span writer has not: removal and the commit wait for it.
        assert_eq!(lock(&dir).unwrap().unwrap_err(), Held::Busy);
        assert!(remove_partial(&dir).is_err());
        drop(two);
        assert!(remove_partial(&dir).is_err());
        let started = std::time::Instant::now();
        let waiter = std::thread::spawn({
            let dir = dir.clone();
            move || remove_partial_within(&dir, std::time::Duration::from_secs(10))
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(three);
        waiter.join().unwrap().unwrap();
        assert!(!dir.exists() && started.elapsed() >= std::time::Duration::from_millis(300));
        assert!(!span_held(&dir, 3));
    }

    #[test]
    fn a_pinned_output_notices_a_replaced_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("output.mkv");
        std::fs::write(&path, b"verified").unwrap();
        let pinned = PinnedOutput::open(&path).unwrap();
        pinned.check().unwrap();
        let other = tmp.path().join("other.mkv");
        std::fs::write(&other, b"verified").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(pinned.check().is_err());
    }
}
