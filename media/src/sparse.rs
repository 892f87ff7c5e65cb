//! Reading a linked node's sparse copy of a source in a span's helper (issue 39, item 4;
//! `condense::media::sparse`). Every open of that copy in this child (`probe::open_input`)
//! reads through `Reader`: a byte the copy's map holds is read from the copy; for one it
//! does not, the reader notes where it reads (`sparse::tell`) and waits for the node to
//! fetch it and write the map again. Each new chunk read is noted too, so the node fetches
//! the chunks after it while this one is decoded. A map that names another source than the
//! first it read (the source changed on the main node), or the node's reason to stop
//! (`sparse::stopped`), fails the read, as does a byte that does not come for `STALL`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use condense::domain::byte_ranges::Ranges;
use condense::media::sparse::{stopped, tell, Held, SparseSource};
use condense::media::MediaError;
use rsmpeg::avformat::AVIOContextCustom;

use crate::growing::{advance, io_context_of, seek_in, timed_out, ChildCopy, CopyAt, Seekable};

/// How often a read that waits looks at the map again.
const POLL: Duration = Duration::from_millis(10);

/// How long a read waits for a byte the node does not fetch before it fails (the node
/// stops the child long before, when its fetches give up).
const STALL: Duration = Duration::from_secs(10 * 60);

/// The sparse copy this child reads: one per child, set from its plan.
static SPARSE: ChildCopy<SparseSource> = ChildCopy::unset();

impl CopyAt for SparseSource {
    fn at(&self) -> &Path {
        &self.path
    }
}

/// Makes every later open of `source.path` in this process read it as the node fetches it.
pub fn expect(source: &SparseSource) {
    SPARSE.expect(source);
}

/// The sparse copy at `path`, when it is this child's.
pub fn of(path: &Path) -> Option<&'static SparseSource> {
    SPARSE.of(path)
}

/// A reader of the sparse copy at its own position.
pub struct Reader {
    copy: File,
    source: &'static SparseSource,
    /// The source the copy's bytes are of, as the map first said.
    sha256: String,
    held: Ranges,
    pos: u64,
    /// The chunk last noted as read.
    told: Option<u64>,
}

impl Reader {
    pub fn open(source: &'static SparseSource) -> Result<Reader, MediaError> {
        let copy = File::open(&source.path)
            .map_err(|e| MediaError::from_io(&format!("opening the copy {}", source.path.display()), &e))?;
        let held = Held::read_file(&source.held)
            .ok_or_else(|| MediaError::misc("the map of the copy of the source is missing or unreadable"))?;
        if held.size != source.size {
            return Err(MediaError::misc(format!(
                "the copy's map is of a source of {} bytes, not {}",
                held.size, source.size
            )));
        }
        Ok(Reader { copy, source, sha256: held.sha256, held: held.ranges, pos: 0, told: None })
    }

    /// The map as the node wrote it last: an error when it names another source or the
    /// node's reason to stop.
    fn reread(&mut self) -> std::io::Result<()> {
        if let Some(why) = stopped(&self.source.stop) {
            return Err(std::io::Error::other(format!("the node stopped fetching the source: {why}")));
        }
        let Some(held) = Held::read_file(&self.source.held) else { return Ok(()) };
        if held.sha256 != self.sha256 {
            return Err(std::io::Error::other(
                "the source changed on the main node while its copy here was read: its bytes are of two versions",
            ));
        }
        self.held = held.ranges;
        Ok(())
    }

    /// Waits until the copy holds byte `at`; answers the end of the run that holds it.
    fn wait_for(&mut self, at: u64) -> std::io::Result<u64> {
        tell(&self.source.wants, at)?;
        self.told = Some(at / self.source.chunk.max(1));
        let since = Instant::now();
        loop {
            self.reread()?;
            if let Some(end) = self.held.held_to(at) {
                return Ok(end);
            }
            if since.elapsed() > STALL {
                return Err(timed_out(format!("byte {at} of the source was waited for"), STALL));
            }
            std::thread::sleep(POLL);
        }
    }
}

impl std::io::Read for Reader {
    /// Reads at the reader's position, waiting for bytes the copy does not hold yet; 0 at
    /// the source's end.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.source.size;
        if self.pos >= size || buf.is_empty() {
            return Ok(0);
        }
        let chunk = self.pos / self.source.chunk.max(1);
        let end = match self.held.held_to(self.pos) {
            Some(end) => {
                if self.told != Some(chunk) {
                    // A new chunk read: the node fetches those after it meanwhile.
                    tell(&self.source.wants, self.pos)?;
                    self.told = Some(chunk);
                }
                end
            }
            None => self.wait_for(self.pos)?,
        }
        .min(size);
        let want = buf.len().min(usize::try_from(end - self.pos).unwrap_or(usize::MAX));
        let n = self.copy.read_at(buf.get_mut(..want).unwrap_or_default(), self.pos)?;
        advance(&mut self.pos, n, size)
    }
}

impl Seekable for Reader {
    fn seek_to(&mut self, offset: i64, whence: i32) -> i64 {
        seek_in(&mut self.pos, self.source.size, offset, whence)
    }
}

/// An FFmpeg I/O context reading the sparse copy `source` (seekable, its whole size).
pub fn io_context(source: &'static SparseSource) -> Result<AVIOContextCustom, MediaError> {
    Ok(io_context_of(Reader::open(source)?, "reading the copy of the source"))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use condense::media::sparse::wanted;

    /// A sparse copy in `dir` of a source of `size` bytes fetched by `chunk`, its map
    /// holding `[0, held)` of a source whose hash is `a` 64 times; and the copy's file.
    fn copy_in(dir: &Path, size: u64, chunk: u64, held: u64) -> (&'static SparseSource, File, Held) {
        let path = dir.join("copy");
        let copy = File::create(&path).unwrap();
        copy.set_len(size).unwrap();
        let mut map = Held { sha256: "a".repeat(64), size, ..Held::default() };
        map.ranges.add(0, held);
        map.write(dir).unwrap();
        let source = SparseSource {
            path,
            size,
            chunk,
            held: dir.join(condense::media::sparse::HELD_FILE),
            wants: dir.join("wants"),
            stop: dir.join("stop"),
        };
        (Box::leak(Box::new(source)), copy, map)
    }

    /// A copy filled by another thread as the reader notes where it reads: every byte
    /// comes in order, the held ones at once, the others once the map holds them.
    #[test]
    fn reads_held_bytes_and_waits_for_the_ones_it_asks_for() {
        let dir = tempfile::tempdir().unwrap();
        let whole: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let (source, copy, mut held) = copy_in(dir.path(), 1000, 100, 100);
        copy.write_at(&whole[..100], 0).unwrap();
        let mut reader = Reader::open(source).unwrap();
        let mut head = [0u8; 100];
        reader.read_exact(&mut head).unwrap();
        assert_eq!(head[..], whole[..100]);
        // The node: fetches the chunk asked for, as a map written after its bytes.
        let (wants, dir_path, bytes) = (source.wants.clone(), dir.path().to_path_buf(), whole.clone());
        let node = std::thread::spawn(move || {
            let mut fetched = Vec::new();
            while fetched.len() < 9 {
                if let Some(at) = wanted(&wants) {
                    let from = at / 100 * 100;
                    if !held.ranges.holds(from, from + 100) {
                        copy.write_at(&bytes[from as usize..from as usize + 100], from).unwrap();
                        held.ranges.add(from, from + 100);
                        held.write(&dir_path).unwrap();
                        fetched.push(from);
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            fetched
        });
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, whole[100..]);
        assert_eq!(node.join().unwrap(), (1..10).map(|n| n * 100).collect::<Vec<u64>>());
        // A seek to the end and back, as a demuxer looking for its index does.
        assert_eq!(reader.seek_to(0, rsmpeg::ffi::AVSEEK_SIZE as i32), 1000);
        assert_eq!(reader.seek_to(-10, libc::SEEK_END), 990);
        let mut end = Vec::new();
        reader.read_to_end(&mut end).unwrap();
        assert_eq!(end, whole[990..]);
    }

    /// A map that names another source, or the node's reason to stop, fails a read that
    /// waits; held bytes read before are as they were.
    #[test]
    fn a_changed_source_or_a_stopped_node_fails_the_read() {
        for (sha, failed, said) in [("b", None, "changed"), ("a", Some("the link gave up"), "the link gave up")] {
            let dir = tempfile::tempdir().unwrap();
            let (source, _copy, held) = copy_in(dir.path(), 200, 100, 100);
            let mut reader = Reader::open(source).unwrap();
            let mut buf = [0u8; 100];
            reader.read_exact(&mut buf).unwrap();
            Held { sha256: sha.repeat(64), ..held.clone() }.write(dir.path()).unwrap();
            if let Some(why) = failed {
                condense::media::sparse::stop(&source.stop, why).unwrap();
            }
            let e = reader.read(&mut buf).unwrap_err();
            assert!(e.to_string().contains(said), "{e}");
            assert_eq!(wanted(&source.wants), Some(100));
        }
    }

    /// A map of another size than the plan's is refused at the open.
    #[test]
    fn a_map_of_another_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (source, _copy, _) = copy_in(dir.path(), 10, 5, 0);
        Held { sha256: "a".repeat(64), size: 9, ..Held::default() }.write(dir.path()).unwrap();
        assert!(Reader::open(source).is_err());
    }
}
