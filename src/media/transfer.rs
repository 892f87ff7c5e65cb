//! The main node's files in a transfer to a node that does not see the library (issue 39):
//! the source opened for reading, never through a link, and hashed once; the output the node
//! uploads, appended in the job's partial folder under its lock and made durable before its
//! length is told, then checked against the node's SHA-256 and named `output.<ext>` (or
//! discarded). Blocking: callers run these on a blocking thread.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use sha2::{Digest, Sha256};

use super::contain::{still_inside, Outside};
use super::handle::{Folder, Foreign};
use super::layout::{is_output_file_name, output_file_name, partial_dir_for, INTENT_FILE, UPLOAD_FILE};
use super::partial::{self, Held, PartialDir, PartialLock};
use super::MediaError;

#[derive(Debug, thiserror::Error)]
pub enum TransferFileError {
    #[error(transparent)]
    Outside(#[from] Outside),
    #[error(transparent)]
    Foreign(#[from] Foreign),
    #[error("{0} is not a regular file")]
    NotAFile(String),
    #[error("the job's partial output is in use; try again")]
    Busy,
    #[error("the upload holds {durable} durable bytes; a part starting at byte {offset} cannot be appended")]
    Offset { durable: u64, offset: u64 },
    #[error("{0}; the upload was discarded")]
    Mismatch(String),
    /// What the node sent is not something it may send (a name, a manifest): nothing was
    /// written.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Media(#[from] MediaError),
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> TransferFileError {
    move |e| TransferFileError::Media(MediaError::from_io(what, &e))
}

/// A job's source, open for reading.
#[derive(Debug)]
pub struct SourceFile {
    pub file: File,
    pub size: u64,
    pub mtime_ns: i64,
}

/// Opens the job's stored `path`: still inside `roots` and resolving to itself
/// (`contain::still_inside`), then opened through its folder's handle without following a
/// link anywhere on the way or at its name.
pub fn open_source(path: &Path, roots: &[PathBuf]) -> Result<SourceFile, TransferFileError> {
    still_inside(path, roots)?;
    let refused = || Outside::NotInLibrary(path.display().to_string());
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return Err(refused().into()) };
    let folder = Folder::open_resolved(parent, "the source's folder").map_err(io("opening the source's folder"))??;
    let file = folder.open_file(name, OFlags::RDONLY, 0).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => TransferFileError::Outside(refused()),
        _ => io("opening the source")(e),
    })?;
    let meta = file.metadata().map_err(io("reading the source's size"))?;
    if !meta.is_file() {
        return Err(TransferFileError::NotAFile(path.display().to_string()));
    }
    let mtime_ns = meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec());
    Ok(SourceFile { file, size: meta.len(), mtime_ns })
}

/// The SHA-256 (lowercase hex) of the first `len` bytes of `file`, read from its start
/// whatever its offset.
/// Bytes `[from, to)` of `file`, with their SHA-256 (a range a node without the share
/// fetches for a span, `domain::byte_ranges`; at most `RANGE_MOST` bytes, held in memory).
pub fn read_range(file: &File, from: u64, to: u64) -> std::io::Result<(Vec<u8>, String)> {
    let len = usize::try_from(to.saturating_sub(from)).map_err(std::io::Error::other)?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, from)?;
    let sha = hex(&Sha256::digest(&bytes));
    Ok((bytes, sha))
}

pub fn sha256_of(file: &File, len: u64) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < len {
        let want = usize::try_from((len - at).min(buf.len() as u64)).unwrap_or(buf.len());
        let n = file.read_at(buf.get_mut(..want).unwrap_or_default(), at)?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file ended early"));
        }
        hasher.update(buf.get(..n).unwrap_or_default());
        at += n as u64;
    }
    Ok(hex(&hasher.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The upload into one job's partial folder, held (the folder's run lock) while it is open.
pub struct Upload {
    /// Held while the upload is open: one writer at a time, and none during the finish.
    _lock: PartialLock,
    file: File,
    len: u64,
}

fn held(
    dir: &Path,
    take: fn(&Path) -> Result<Result<PartialLock, Held>, MediaError>,
) -> Result<PartialLock, TransferFileError> {
    match take(dir)? {
        Ok(lock) => Ok(lock),
        Err(_) => Err(TransferFileError::Busy),
    }
}

impl Upload {
    /// Opens (making it when there is none) the upload beside the job's source at `source`,
    /// under the partial folder's run lock; what it holds is made durable first, so its
    /// length is bytes the node need not send again.
    pub fn open(source: &Path) -> Result<Upload, TransferFileError> {
        Upload::open_as(source, UPLOAD_FILE, |_| Ok(()))
    }

    /// As `open`, for the upload named `name` in the folder (one of the files a node uploads
    /// in parts, `media::parts`); `first` runs under the lock before it is opened.
    pub fn open_as(
        source: &Path,
        name: &str,
        first: impl FnOnce(&PartialLock) -> Result<(), TransferFileError>,
    ) -> Result<Upload, TransferFileError> {
        let lock = held(&partial_dir_for(source), partial::lock_run)?;
        first(&lock)?;
        let file = lock.open_file(name, OFlags::RDWR | OFlags::CREATE, 0o600).map_err(io("opening the upload"))?;
        file.sync_all().map_err(io("syncing the upload"))?;
        let len = file.metadata().map_err(io("reading the upload's length"))?.len();
        Ok(Upload { _lock: lock, file, len })
    }

    /// Its durable length.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Refuses a part that does not start at the durable length.
    pub fn expect_offset(&self, offset: u64) -> Result<(), TransferFileError> {
        if offset == self.len {
            Ok(())
        } else {
            Err(TransferFileError::Offset { durable: self.len, offset })
        }
    }

    /// Appends `bytes` (not yet durable until `sync`).
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), TransferFileError> {
        self.file.write_all_at(bytes, self.len).map_err(io("writing the upload"))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Makes what was appended durable; its length after.
    pub fn sync(&mut self) -> Result<u64, TransferFileError> {
        self.file.sync_data().map_err(io("syncing the upload"))?;
        Ok(self.len)
    }
}

/// Discards the upload beside `source` (a source changed since the node read it).
pub fn discard_upload(source: &Path) -> Result<(), TransferFileError> {
    let lock = held(&partial_dir_for(source), partial::lock)?;
    lock.remove_file(UPLOAD_FILE).map_err(io("removing the upload"))?;
    Ok(())
}

/// Checks the whole upload beside `source` against the node's `size` and `sha256`, under
/// the partial folder's whole lock: a match is renamed `output.<extension>` (its name
/// answered, the lock handed back for what follows), anything else is discarded.
pub fn finish_upload(
    source: &Path,
    size: u64,
    sha256: &str,
    extension: &str,
) -> Result<(PartialLock, String), TransferFileError> {
    let lock = held(&partial_dir_for(source), partial::lock)?;
    let name = output_file_name(extension);
    take_whole(&lock, UPLOAD_FILE, size, sha256, &name)?;
    Ok((lock, name))
}

/// Checks the upload `upload` in the folder `lock` holds against the node's `size` and
/// `sha256`: a match is renamed `name`, anything else is discarded (`Mismatch`).
pub fn take_whole(
    lock: &PartialLock,
    upload: &str,
    size: u64,
    sha256: &str,
    name: &str,
) -> Result<(), TransferFileError> {
    let file = match lock.open_file(upload, OFlags::RDONLY, 0) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(TransferFileError::Mismatch(format!("there is no upload of {name} for this job")))
        }
        Err(e) => return Err(io("opening the upload")(e)),
    };
    let len = file.metadata().map_err(io("reading the upload's length"))?.len();
    let discard = |why: String| -> Result<(), TransferFileError> {
        lock.remove_file(upload).map_err(io("removing the upload"))?;
        Err(TransferFileError::Mismatch(why))
    };
    if len != size {
        return discard(format!("the upload of {name} holds {len} bytes, the node sent {size}"));
    }
    let got = sha256_of(&file, len).map_err(io("reading the upload"))?;
    if got != sha256 {
        return discard(format!("the upload of {name} has SHA-256 {got}, the node's {sha256}"));
    }
    lock.rename(upload, name).map_err(io("naming the upload"))
}

/// Whether the partial folder beside `source` holds a finished output (`output.<ext>`) or
/// a replace's intent: the output had left the hands of the node that encoded it (the main
/// node was committing an upload, or a node that sees the library its own output), so a
/// main node starting again gives the job back to the queue, where the next attempt's
/// recovery finishes or undoes what was cut short. Read through the folder's handle,
/// never through a link; no folder is `false`.
pub fn output_beside(source: &Path) -> Result<bool, MediaError> {
    let Some(partial) = PartialDir::open(&partial_dir_for(source), false)? else { return Ok(false) };
    let entries =
        std::fs::read_dir(partial.path()).map_err(|e| MediaError::from_io("reading the partial output", &e))?;
    for entry in entries {
        let name = entry.map_err(|e| MediaError::from_io("reading the partial output", &e))?.file_name();
        if name == INTENT_FILE || name.to_str().is_some_and(is_output_file_name) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_or_an_intent_beside_the_source_is_found_an_upload_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let source = root.join("a.mkv");
        std::fs::write(&source, b"source").unwrap();
        assert!(!output_beside(&source).unwrap(), "no partial folder");
        let mut up = Upload::open(&source).unwrap();
        up.append(b"part").unwrap();
        up.sync().unwrap();
        drop(up);
        assert!(!output_beside(&source).unwrap(), "an upload in progress is the node's still");
        let sha = hex(&Sha256::digest(b"part"));
        let (lock, _) = finish_upload(&source, 4, &sha, "mkv").unwrap();
        drop(lock);
        assert!(output_beside(&source).unwrap(), "a finished upload is the main node's");
        let partial = partial_dir_for(&source);
        std::fs::remove_file(partial.join("output.mkv")).unwrap();
        std::fs::write(partial.join(INTENT_FILE), b"{}").unwrap();
        assert!(output_beside(&source).unwrap(), "a replace's intent");
        // A link at the folder's name is not followed.
        std::fs::remove_dir_all(&partial).unwrap();
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("output.mkv"), b"x").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &partial).unwrap();
        assert!(output_beside(&source).is_err());
    }

    #[test]
    fn an_upload_appends_at_its_durable_length_and_is_checked_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let source = root.join("a.mkv");
        std::fs::write(&source, b"source").unwrap();
        let mut up = Upload::open(&source).unwrap();
        up.expect_offset(0).unwrap();
        up.append(b"hello ").unwrap();
        assert_eq!(up.sync().unwrap(), 6);
        drop(up);
        let mut up = Upload::open(&source).unwrap();
        assert!(matches!(up.expect_offset(0), Err(TransferFileError::Offset { durable: 6, offset: 0 })));
        up.append(b"world").unwrap();
        up.sync().unwrap();
        drop(up);
        let want = {
            let f = tempfile::tempfile().unwrap();
            f.write_all_at(b"hello world", 0).unwrap();
            sha256_of(&f, 11).unwrap()
        };
        assert!(matches!(finish_upload(&source, 11, &"0".repeat(64), "mkv"), Err(TransferFileError::Mismatch(_))));
        assert!(!partial_dir_for(&source).join(UPLOAD_FILE).exists(), "a mismatch discards the upload");
        let mut up = Upload::open(&source).unwrap();
        up.append(b"hello world").unwrap();
        up.sync().unwrap();
        drop(up);
        let (_lock, name) = finish_upload(&source, 11, &want, "mkv").unwrap();
        assert_eq!(std::fs::read(partial_dir_for(&source).join(&name)).unwrap(), b"hello world");
    }

    #[test]
    fn a_source_behind_a_link_is_not_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (lib, outside) = (root.join("lib"), root.join("home"));
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.mkv"), b"secret").unwrap();
        std::fs::write(lib.join("a.mkv"), b"source").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.mkv"), lib.join("b.mkv")).unwrap();
        let roots = [lib.clone()];
        let opened = open_source(&lib.join("a.mkv"), &roots).unwrap();
        assert_eq!(opened.size, 6);
        assert!(matches!(open_source(&lib.join("b.mkv"), &roots), Err(TransferFileError::Outside(_))));
        assert!(matches!(open_source(&lib.join("../home/secret.mkv"), &roots), Err(TransferFileError::Outside(_))));
    }
}
