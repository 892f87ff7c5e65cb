//! Directory handles that never follow links. Every name condense makes beside a source (the
//! partial folder, a backup, a renamed output) sits in a folder other programs write into,
//! so a link can stand where condense's own name should be, or be put there while a job
//! runs. A `Folder` is an open directory: what is done through it (`*at` calls relative to
//! its descriptor) reaches that directory whatever its path becomes meanwhile, and the
//! names it acts on are never followed when they are links. See docs/ARCHITECTURE.md,
//! "Names condense did not make".

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat, CWD};
use rustix::io::Errno;

/// What stands where condense's own folder should be, when it is not condense's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Foreign {
    #[error("a symlink stands where {what} would go ({path}); nothing was followed, written, read or removed")]
    Link { what: &'static str, path: String },
    #[error("something that is not a folder stands where {what} would go ({path}); it was left as it is")]
    NotAFolder { what: &'static str, path: String },
    #[error("a folder condense did not make (owned by uid {uid}) stands where {what} would go ({path}); it was left as it is")]
    Owner { what: &'static str, path: String, uid: u32 },
    #[error("{what} ({path}) is on another filesystem than its source; it was left as it is")]
    OtherDevice { what: &'static str, path: String },
    #[error("the path of {what} ({path}) leads through a symlink; condense works only on the folder it found")]
    LinkOnTheWay { what: &'static str, path: String },
}

/// An open directory.
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    /// The path it was opened by, for messages only: never used to reach it again.
    shown: PathBuf,
    stat: Stat,
}

fn errno(e: Errno) -> std::io::Error {
    std::io::Error::from(e)
}

fn is_link(stat: &Stat) -> bool {
    FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
}

fn is_dir(stat: &Stat) -> bool {
    FileType::from_raw_mode(stat.st_mode) == FileType::Directory
}

impl Folder {
    /// Opens the folder at `path` refusing a link anywhere on the way (openat2's
    /// RESOLVE_NO_SYMLINKS): the paths condense keeps are the resolved ones, so a link met
    /// now was put there since. `Err(LinkOnTheWay)` inside `Ok` says so.
    pub fn open_resolved(path: &Path, what: &'static str) -> std::io::Result<Result<Folder, Foreign>> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat2(CWD, path, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS) {
            Ok(fd) => fd,
            Err(Errno::LOOP) | Err(Errno::XDEV) => {
                return Ok(Err(Foreign::LinkOnTheWay { what, path: path.display().to_string() }))
            }
            // Kernels before 5.6 have no openat2: the last component at least is not followed.
            Err(Errno::NOSYS) => match rustix::fs::openat(CWD, path, flags | OFlags::NOFOLLOW, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::LOOP) => return Ok(Err(Foreign::LinkOnTheWay { what, path: path.display().to_string() })),
                Err(e) => return Err(errno(e)),
            },
            Err(e) => return Err(errno(e)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(errno)?;
        Ok(Ok(Folder { fd, shown: path.to_path_buf(), stat }))
    }

    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// A path that reaches this very directory from this process, whatever its name
    /// becomes: the kernel resolves `/proc/self/fd/N` to the open directory, not by name.
    /// For code that takes paths (FFmpeg's I/O, file writes); names below it are condense's
    /// own, in a folder only condense's user can write.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&self.fd)))
    }

    /// The same directory as reached from this process's children (`/proc/PID/fd/N`).
    pub fn path_for_children(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), std::os::fd::AsRawFd::as_raw_fd(&self.fd)))
    }

    /// What stands at `name` in this folder, not followed: `None` when nothing does.
    pub fn entry(&self, name: &OsStr) -> std::io::Result<Option<Stat>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(stat)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }

    fn shown_of(&self, name: &OsStr) -> String {
        self.shown.join(name).display().to_string()
    }

    /// Opens (and with `create`, first makes, mode 0700) condense's own folder `name`
    /// inside this one: a real directory, owned by this process's user, on this folder's
    /// filesystem. `Ok(None)`: there is none and `create` is false. A link, a file or a
    /// folder of someone else there is `Err(Foreign)` inside `Ok`, and nothing is touched.
    pub fn own_folder(
        &self,
        name: &OsStr,
        create: bool,
        what: &'static str,
    ) -> std::io::Result<Result<Option<Folder>, Foreign>> {
        let path = self.shown_of(name);
        for _ in 0..4 {
            match self.entry(name)? {
                None if !create => return Ok(Ok(None)),
                None => match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(errno(e)),
                },
                Some(stat) if is_link(&stat) => return Ok(Err(Foreign::Link { what, path })),
                Some(stat) if !is_dir(&stat) => return Ok(Err(Foreign::NotAFolder { what, path })),
                Some(_) => {}
            }
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
                Ok(fd) => fd,
                // Replaced or removed between the look and the open: look again.
                Err(Errno::LOOP) | Err(Errno::NOTDIR) | Err(Errno::NOENT) => continue,
                Err(e) => return Err(errno(e)),
            };
            let stat = rustix::fs::fstat(&fd).map_err(errno)?;
            let me = rustix::process::geteuid().as_raw();
            if stat.st_uid != me {
                return Ok(Err(Foreign::Owner { what, path, uid: stat.st_uid }));
            }
            if stat.st_dev != self.stat.st_dev {
                return Ok(Err(Foreign::OtherDevice { what, path }));
            }
            return Ok(Ok(Some(Folder { fd, shown: self.shown.join(name), stat })));
        }
        // Whatever keeps changing the name is not condense.
        match self.entry(name)? {
            Some(stat) if is_link(&stat) => Ok(Err(Foreign::Link { what, path })),
            _ => Ok(Err(Foreign::NotAFolder { what, path })),
        }
    }

    /// Whether `name` in this folder is still `folder` (the same directory, not a link put
    /// in its place).
    pub fn holds(&self, name: &OsStr, folder: &Folder) -> std::io::Result<bool> {
        Ok(self
            .entry(name)?
            .is_some_and(|s| is_dir(&s) && s.st_ino == folder.stat.st_ino && s.st_dev == folder.stat.st_dev))
    }

    /// Opens a file in this folder, never through a link.
    pub fn open_file(&self, name: &OsStr, flags: OFlags, mode: u32) -> std::io::Result<std::fs::File> {
        let fd =
            rustix::fs::openat(&self.fd, name, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::from_raw_mode(mode))
                .map_err(errno)?;
        Ok(std::fs::File::from(fd))
    }

    /// Removes the entry `name` (a file or a link itself, never what it points to; a folder
    /// with everything in it, each level opened without following links).
    pub fn remove_entry(&self, name: &OsStr) -> std::io::Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(Errno::ISDIR) | Err(Errno::PERM) => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
                    Ok(fd) => fd,
                    Err(Errno::NOENT) => return Ok(()),
                    Err(e) => return Err(errno(e)),
                };
                let stat = rustix::fs::fstat(&fd).map_err(errno)?;
                let inner = Folder { fd, shown: self.shown.join(name), stat };
                inner.clear(&[])?;
                match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
                    Ok(()) | Err(Errno::NOENT) => Ok(()),
                    Err(e) => Err(errno(e)),
                }
            }
            Err(e) => Err(errno(e)),
        }
    }

    /// Removes everything in this folder but the names in `keep`.
    pub fn clear(&self, keep: &[&OsStr]) -> std::io::Result<()> {
        for name in self.names()? {
            if keep.contains(&name.as_os_str()) {
                continue;
            }
            self.remove_entry(&name)?;
        }
        Ok(())
    }

    /// The names in this folder (without `.` and `..`).
    pub fn names(&self) -> std::io::Result<Vec<std::ffi::OsString>> {
        let dir = rustix::fs::Dir::read_from(&self.fd).map_err(errno)?;
        let mut names = Vec::new();
        for entry in dir {
            let entry = entry.map_err(errno)?;
            let bytes = entry.file_name().to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            names.push(OsStr::from_bytes(bytes).to_os_string());
        }
        Ok(names)
    }

    /// Removes the empty folder `name` in this one, but only while it is still `folder`.
    pub fn remove_own_folder(&self, name: &OsStr, folder: &Folder) -> std::io::Result<()> {
        if !self.holds(name, folder)? {
            return Ok(());
        }
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(errno(e)),
        }
    }

    /// Renames `from` to `to`, both condense's own names in this folder (replacing `to`).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        rustix::fs::renameat(&self.fd, from, &self.fd, to).map_err(errno)
    }

    pub fn sync(&self) -> std::io::Result<()> {
        rustix::fs::fsync(&self.fd).map_err(errno)
    }
}

impl AsFd for Folder {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_folders_are_made_private_and_links_or_strangers_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let folder = Folder::open_resolved(&root, "the library").unwrap().unwrap();
        let mine = folder.own_folder(OsStr::new(".a.condense-partial"), true, "the partial output").unwrap().unwrap();
        let mine = mine.unwrap();
        let mode = std::fs::metadata(root.join(".a.condense-partial")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "only condense's user may enter its folder: {mode:o}");
        std::fs::write(mine.path().join("seg"), b"x").unwrap();
        assert!(root.join(".a.condense-partial/seg").exists(), "the handle's path reaches the folder");

        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("precious"), b"keep").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join(".b.condense-partial")).unwrap();
        let refused = folder.own_folder(OsStr::new(".b.condense-partial"), true, "the partial output").unwrap();
        assert!(matches!(refused, Err(Foreign::Link { .. })), "{refused:?}");
        assert!(refused.unwrap_err().to_string().starts_with("a symlink stands where the partial output would go"));
        std::fs::write(root.join(".c.condense-partial"), b"file").unwrap();
        let refused = folder.own_folder(OsStr::new(".c.condense-partial"), true, "the partial output").unwrap();
        assert!(matches!(refused, Err(Foreign::NotAFolder { .. })));
        assert!(folder.own_folder(OsStr::new(".d.condense-partial"), false, "x").unwrap().unwrap().is_none());
        assert!(!root.join(".d.condense-partial").exists(), "a look makes nothing");

        // Removing a link removes the link, never what it points to.
        folder.remove_entry(OsStr::new(".b.condense-partial")).unwrap();
        assert_eq!(std::fs::read(outside.path().join("precious")).unwrap(), b"keep");
        // A folder swapped for a link is not removed through it.
        std::fs::rename(root.join(".a.condense-partial"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join(".a.condense-partial")).unwrap();
        mine.clear(&[]).unwrap();
        folder.remove_own_folder(OsStr::new(".a.condense-partial"), &mine).unwrap();
        assert_eq!(std::fs::read(outside.path().join("precious")).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(root.join(".a.condense-partial")).unwrap().file_type().is_symlink());
    }

    #[test]
    fn a_link_on_the_way_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert!(Folder::open_resolved(&root.join("real"), "x").unwrap().is_ok());
        let refused = Folder::open_resolved(&root.join("link"), "the source's folder").unwrap();
        assert!(matches!(refused, Err(Foreign::LinkOnTheWay { .. })), "{refused:?}");
    }
}
