//! Reading a linked node's copy of a source while it still downloads (issue 39, "download
//! ahead"; `condense::media::plan::GrowingSource`). The node starts this child before the
//! copy is whole: the copy grows from its first byte, and its last bytes were fetched first
//! into a file of their own. Every open of that copy in this child (`probe::open_input`)
//! reads through `Reader`: bytes from the tail's start on come from the tail file, others
//! from the copy once it holds them, waiting until then; its size is the whole file's from
//! the start, so a demuxer seeks and reads as in a whole file. A copy that shrinks (the
//! download started over: another version of the source) or stops growing for `STALL`
//! fails the read; the node stops the child long before the latter (its download gives up,
//! and the attempt ends).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use condense::media::plan::GrowingSource;
use condense::media::MediaError;
use rsmpeg::avformat::{AVFormatContextInput, AVIOContextCustom};
use rsmpeg::avutil::AVMem;
use rsmpeg::ffi;

/// How often a read that waits looks at the copy again.
const POLL: Duration = Duration::from_millis(20);

/// How long a read waits for a copy that does not grow before it fails.
const STALL: Duration = Duration::from_secs(15 * 60);

/// Bytes of the buffer FFmpeg reads the copy through (its own default for files).
const BUFFER: usize = 32 * 1024;

/// The copy this child reads as it arrives: one per child, set from its request.
static GROWING: ChildCopy<GrowingSource> = ChildCopy::unset();

/// Makes every later open of `source.path` in this process read it as it arrives.
pub fn expect(source: &GrowingSource) {
    GROWING.expect(source);
}

/// The growing copy at `path`, when it is this child's.
pub fn of(path: &Path) -> Option<&'static GrowingSource> {
    GROWING.of(path)
}

/// A copy of a source a child reads while the node fills it (a growing one, a sparse one,
/// `crate::sparse`): at most one of each kind per child, set from its request.
pub struct ChildCopy<T>(OnceLock<T>);

/// Where such a copy is, as the child opens it.
pub trait CopyAt: Clone {
    fn at(&self) -> &Path;
}

impl CopyAt for GrowingSource {
    fn at(&self) -> &Path {
        &self.path
    }
}

impl<T: CopyAt> ChildCopy<T> {
    pub const fn unset() -> ChildCopy<T> {
        ChildCopy(OnceLock::new())
    }

    pub fn expect(&self, source: &T) {
        if self.0.set(source.clone()).is_err() {
            tracing::warn!(path = %source.at().display(), "a second copy of one kind in one child is ignored");
        }
    }

    pub fn of(&self, path: &Path) -> Option<&T> {
        self.0.get().filter(|c| c.at() == path)
    }
}

/// An open input, and the reader it reads a growing copy through: dropped after the input
/// (fields drop in order), which never closes an I/O context it did not open.
pub struct Input {
    input: AVFormatContextInput,
    _io: Option<AVIOContextCustom>,
}

impl Input {
    pub fn new(input: AVFormatContextInput, io: Option<AVIOContextCustom>) -> Input {
        Input { input, _io: io }
    }
}

impl std::ops::Deref for Input {
    type Target = AVFormatContextInput;
    fn deref(&self) -> &AVFormatContextInput {
        &self.input
    }
}

impl std::ops::DerefMut for Input {
    fn deref_mut(&mut self) -> &mut AVFormatContextInput {
        &mut self.input
    }
}

/// A reader of a growing copy at its own position.
pub struct Reader {
    copy: File,
    tail: File,
    source: &'static GrowingSource,
    pos: u64,
    /// The copy's length when last looked at: it only grows.
    seen: u64,
}

impl Reader {
    pub fn open(source: &'static GrowingSource) -> Result<Reader, MediaError> {
        let open = |path: &Path, what: &str| {
            File::open(path).map_err(|e| MediaError::from_io(&format!("opening the {what} {}", path.display()), &e))
        };
        let (copy, tail) = (open(&source.path, "copy")?, open(&source.tail, "tail of the copy")?);
        let tail_len = tail.metadata().map_err(|e| MediaError::from_io("reading the copy's tail", &e))?.len();
        if source.tail_from.saturating_add(tail_len) < source.size {
            return Err(MediaError::misc(format!(
                "the copy's tail holds {tail_len} bytes from {}, short of its size {}",
                source.tail_from, source.size
            )));
        }
        Ok(Reader { copy, tail, source, pos: 0, seen: 0 })
    }

    /// Waits until the copy holds the byte at `at`; answers its length then.
    fn wait_for(&mut self, at: u64) -> std::io::Result<u64> {
        let mut grew = Instant::now();
        loop {
            let len = self.copy.metadata()?.len();
            if len < self.seen {
                return Err(std::io::Error::other(format!(
                    "the copy being downloaded shrank from {} to {len} bytes: its download started over",
                    self.seen
                )));
            }
            if len > self.seen {
                (self.seen, grew) = (len, Instant::now());
            }
            if len > at {
                return Ok(len);
            }
            if grew.elapsed() > STALL {
                return Err(timed_out(format!("the copy being downloaded stayed at {len} bytes"), STALL));
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Moves a reader's position `pos` on by the `n` bytes it read of a copy of `size`:
/// none read before the end is a copy that ended early.
pub fn advance(pos: &mut u64, n: usize, size: u64) -> std::io::Result<usize> {
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the copy ended at byte {pos} of {size}"),
        ));
    }
    *pos += n as u64;
    Ok(n)
}

/// A read that waited `stall` for bytes that did not come.
pub fn timed_out(what: String, stall: Duration) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{what} for {} s", stall.as_secs()))
}

/// Moves `pos` in a file of `size` bytes as FFmpeg's seek callback asks (`AVSEEK_SIZE`
/// answers the size); answers the new position or FFmpeg's error.
pub fn seek_in(pos: &mut u64, size: u64, offset: i64, whence: i32) -> i64 {
    let size = i64::try_from(size).unwrap_or(i64::MAX);
    let here = i64::try_from(*pos).unwrap_or(i64::MAX);
    let whence = whence & !(ffi::AVSEEK_FORCE as i32);
    let to = match whence {
        w if w == ffi::AVSEEK_SIZE as i32 => return size,
        libc::SEEK_SET => Some(offset),
        libc::SEEK_CUR => here.checked_add(offset),
        libc::SEEK_END => size.checked_add(offset),
        _ => None,
    };
    match to.and_then(|to| u64::try_from(to).ok().map(|at| (to, at))) {
        Some((to, at)) => {
            *pos = at;
            to
        }
        // FFmpeg's AVERROR(e) is -e.
        None => i64::from(-libc::EINVAL),
    }
}

/// A reader FFmpeg can seek: `seek_to` as its seek callback asks.
pub trait Seekable: std::io::Read + Send + 'static {
    fn seek_to(&mut self, offset: i64, whence: i32) -> i64;
}

impl Seekable for Reader {
    fn seek_to(&mut self, offset: i64, whence: i32) -> i64 {
        seek_in(&mut self.pos, self.source.size, offset, whence)
    }
}

impl std::io::Read for Reader {
    /// Reads at the reader's position, waiting for bytes the copy does not hold yet; 0 at
    /// the source's end.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let (size, from) = (self.source.size, self.source.tail_from);
        if self.pos >= size || buf.is_empty() {
            return Ok(0);
        }
        let left = |end: u64, pos: u64| usize::try_from(end.saturating_sub(pos)).unwrap_or(usize::MAX);
        let n = if self.pos >= from {
            let want = buf.len().min(left(size, self.pos));
            self.tail.read_at(buf.get_mut(..want).unwrap_or_default(), self.pos - from)?
        } else {
            let have = self.wait_for(self.pos)?.min(from);
            let want = buf.len().min(left(have, self.pos));
            self.copy.read_at(buf.get_mut(..want).unwrap_or_default(), self.pos)?
        };
        advance(&mut self.pos, n, size)
    }
}

/// An FFmpeg I/O context reading the growing copy `source` (seekable, its whole size).
pub fn io_context(source: &'static GrowingSource) -> Result<AVIOContextCustom, MediaError> {
    Ok(io_context_of(Reader::open(source)?, "reading the copy being downloaded"))
}

/// An FFmpeg I/O context reading through `reader` (a copy this child reads as the node
/// fetches it); a failed read is logged with `what`.
pub fn io_context_of<R: Seekable>(reader: R, what: &'static str) -> AVIOContextCustom {
    let reader = Arc::new(Mutex::new(reader));
    let for_seek = reader.clone();
    let read = move |_: &mut Vec<u8>, buf: &mut [u8]| -> i32 {
        let mut reader = reader.lock().unwrap_or_else(PoisonError::into_inner);
        match std::io::Read::read(&mut *reader, buf) {
            Ok(0) => ffi::AVERROR_EOF,
            Ok(n) => i32::try_from(n).unwrap_or(i32::MAX),
            Err(e) => {
                tracing::warn!(error = %e, "{what}");
                -e.raw_os_error().unwrap_or(libc::EIO)
            }
        }
    };
    let seek = move |_: &mut Vec<u8>, offset: i64, whence: i32| -> i64 {
        for_seek.lock().unwrap_or_else(PoisonError::into_inner).seek_to(offset, whence)
    };
    AVIOContextCustom::alloc_context(
        AVMem::new(BUFFER),
        false,
        Vec::new(),
        Some(Box::new(read)),
        None,
        Some(Box::new(seek)),
    )
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    fn leaked(source: GrowingSource) -> &'static GrowingSource {
        Box::leak(Box::new(source))
    }

    /// A copy written in parts by another thread, its last bytes in a tail file: the reader
    /// gives every byte in order, waiting for those not there yet, and seeks by the whole size.
    #[test]
    fn reads_a_copy_as_it_arrives_and_its_tail_from_the_tail_file() {
        let dir = tempfile::tempdir().unwrap();
        let whole: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let tail_from = 250_000u64;
        std::fs::write(dir.path().join("tail"), &whole[tail_from as usize..]).unwrap();
        let copy = dir.path().join("copy");
        let mut writer = File::create(&copy).unwrap();
        let source =
            leaked(GrowingSource { path: copy, size: whole.len() as u64, tail: dir.path().join("tail"), tail_from });
        let mut reader = Reader::open(source).unwrap();
        assert_eq!(reader.seek_to(0, ffi::AVSEEK_SIZE as i32), whole.len() as i64);
        // The tail is there before the copy has a byte.
        assert_eq!(reader.seek_to(-10, libc::SEEK_END), whole.len() as i64 - 10);
        let mut end = Vec::new();
        reader.read_to_end(&mut end).unwrap();
        assert_eq!(end, &whole[whole.len() - 10..]);
        reader.seek_to(0, libc::SEEK_SET);
        let head = whole[..tail_from as usize].to_vec();
        let feeder = std::thread::spawn(move || {
            for part in head.chunks(40_000) {
                std::thread::sleep(Duration::from_millis(30));
                writer.write_all(part).unwrap();
            }
        });
        let mut read = Vec::new();
        reader.read_to_end(&mut read).unwrap();
        feeder.join().unwrap();
        assert_eq!(read, whole);
    }

    /// A copy that shrinks under the reader (its download started over) fails the read.
    #[test]
    fn a_copy_that_shrinks_fails_the_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tail"), [7u8; 10]).unwrap();
        let copy = dir.path().join("copy");
        std::fs::write(&copy, [1u8; 100]).unwrap();
        let source =
            leaked(GrowingSource { path: copy.clone(), size: 1_000, tail: dir.path().join("tail"), tail_from: 990 });
        let mut reader = Reader::open(source).unwrap();
        let mut buf = [0u8; 100];
        assert_eq!(reader.read(&mut buf).unwrap(), 100);
        std::fs::write(&copy, [2u8; 10]).unwrap();
        let e = reader.read(&mut buf).unwrap_err();
        assert!(e.to_string().contains("started over"), "{e}");
    }

    /// A tail file shorter than the copy's end is refused at the open.
    #[test]
    fn a_short_tail_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tail"), [7u8; 5]).unwrap();
        std::fs::write(dir.path().join("copy"), b"").unwrap();
        let source = leaked(GrowingSource {
            path: dir.path().join("copy"),
            size: 1_000,
            tail: dir.path().join("tail"),
            tail_from: 990,
        });
        assert!(Reader::open(source).is_err());
    }
}
