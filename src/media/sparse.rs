//! A linked node's sparse copy of a source, for the spans it encodes without the share
//! (issue 39, item 4; the rules are `domain::byte_ranges`). Three files, in the folder of
//! the job's spans in WORK_DIR: the copy (`SPARSE_FILE`, the source's size, holes where
//! nothing was fetched), the map of what it holds (`HELD_FILE`, written durably after the
//! bytes it names, by the node only), and per span helper a note of where its demuxer
//! reads (`WANTS_FILE` in the span's own folder, by the `condense-media helper` child
//! only) and the node's reason to stop fetching for it (`STOP_FILE`, beside it, by the
//! node only). The child reads only bytes the map holds; where it reads a byte the map does
//! not hold it writes the note and waits; the node fetches that chunk and those after it,
//! and writes the map. Blocking.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::domain::byte_ranges::Ranges;
use crate::domain::path_bytes;
use crate::media::manifest::write_durably;
use crate::media::MediaError;

/// The sparse copy of the source, in the folder of the job's spans.
pub const SPARSE_FILE: &str = "source.sparse";
/// What the sparse copy holds (`Held`), beside it.
pub const HELD_FILE: &str = "source.held";
/// Where a span's demuxer reads, in the span's own folder.
pub const WANTS_FILE: &str = "wants";
/// Why the node stopped fetching for a span (the link gave up, a range never came whole),
/// in the span's own folder: its child, waiting for bytes, fails with it.
pub const STOP_FILE: &str = "stop";

/// A sparse copy as the helper child reads it (`EncodePlan::sparse`; not part of the digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SparseSource {
    /// The copy, as the child opens it (the plan's input).
    #[serde(with = "path_bytes::lossless")]
    pub path: PathBuf,
    /// The source's size.
    pub size: u64,
    /// The chunk it is fetched by (`domain::byte_ranges::chunk_bytes`).
    pub chunk: u64,
    /// The map of what it holds.
    #[serde(with = "path_bytes::lossless")]
    pub held: PathBuf,
    /// Where this child notes the byte its demuxer reads.
    #[serde(with = "path_bytes::lossless")]
    pub wants: PathBuf,
    /// Where the node says why it stopped fetching for this child.
    #[serde(with = "path_bytes::lossless")]
    pub stop: PathBuf,
}

/// What the sparse copy holds, of which source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// The main node's SHA-256 of the whole source the bytes are of.
    pub sha256: String,
    pub size: u64,
    pub ranges: Ranges,
}

impl Held {
    /// The map in `dir`, if there is a readable one.
    pub fn read(dir: &Path) -> Option<Held> {
        Held::read_file(&dir.join(HELD_FILE))
    }

    pub fn read_file(path: &Path) -> Option<Held> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    /// Writes the map into `dir`, durably: after the bytes it names are.
    pub fn write(&self, dir: &Path) -> Result<(), MediaError> {
        write_durably(dir, HELD_FILE, self, "writing what the copy of the source holds")
    }
}

/// Notes that the demuxer reads byte `pos` (written whole, by a rename; not durable: a
/// note lost with the machine is written again by the next read).
pub fn tell(wants: &Path, pos: u64) -> std::io::Result<()> {
    let tmp = wants.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(pos.to_string().as_bytes())?;
    drop(file);
    std::fs::rename(&tmp, wants)
}

/// The byte the demuxer last said it reads, if it said any.
pub fn wanted(wants: &Path) -> Option<u64> {
    std::fs::read_to_string(wants).ok()?.trim().parse().ok()
}

/// Says why the node stopped fetching for the child that reads through `stop`.
pub fn stop(stop: &Path, why: &str) -> std::io::Result<()> {
    std::fs::write(stop, why)
}

/// Why the node stopped fetching, once it did.
pub fn stopped(stop: &Path) -> Option<String> {
    std::fs::read_to_string(stop).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_and_a_map_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let wants = dir.path().join(WANTS_FILE);
        assert_eq!(wanted(&wants), None);
        tell(&wants, 12_345).unwrap();
        tell(&wants, 99).unwrap();
        assert_eq!(wanted(&wants), Some(99));
        let why = dir.path().join(STOP_FILE);
        assert_eq!(stopped(&why), None);
        stop(&why, "the link gave up").unwrap();
        assert_eq!(stopped(&why).as_deref(), Some("the link gave up"));
        assert_eq!(Held::read(dir.path()), None);
        let mut held = Held { sha256: "ab".repeat(32), size: 1000, ..Held::default() };
        held.ranges.add(0, 100);
        held.write(dir.path()).unwrap();
        assert_eq!(Held::read(dir.path()), Some(held));
    }
}
