//! The main node's files of a job a node without the share uploads while it encodes (issue
//! 39, "upload while encoding"): each finished segment, then the planned audio and a VMAF
//! search's result, go into the job's partial folder as parts, each appended at its durable
//! length under the folder's run lock (`media::transfer::Upload`), checked whole against the
//! node's SHA-256 and renamed into place; `PARTS_FILE` lists the parts taken so far. Once the
//! node's video is done, its manifest is put in place over them (`take_manifest`) and the
//! main node muxes the output from the original and these parts (`RunScope::Mux`).
//!
//! A part's name is only ever one a node's run gives such a file (`is_part_name`), and every
//! file is reached through the folder's handle, never a link. The first part of an attempt
//! finds no `PARTS_FILE` and empties the folder first: what a run here left in it (its own
//! manifest, segments under the same names) must never be joined with the node's. The list
//! is not one of the folder's bookkeeping files, so a run here that starts over removes it
//! with the parts it names. Blocking: callers run these on a blocking thread.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::layout::{partial_dir_for, segment_index_of, AUDIO_FILE, MANIFEST_FILE, SEARCH_FILE};
use super::manifest::{write_durably, Manifest, MANIFEST_VERSION};
use super::partial::{self, PartialDir, PartialLock};
use super::plan::SourceIdentity;
use super::transfer::{take_whole, TransferFileError, Upload};
use super::MediaError;

/// The parts taken whole so far, in the job's partial folder.
pub const PARTS_FILE: &str = "parts.json";

/// One file taken whole: its name in the partial folder, its size and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// A part still arriving: its durable bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Arriving {
    pub name: String,
    pub length: u64,
}

/// What the main node holds of a job's parts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Uploaded {
    pub parts: Vec<Part>,
    pub arriving: Vec<Arriving>,
}

/// Whether `name` is one a node may upload as a part: a segment of its run
/// (`layout::segment_file`), its planned audio or its search's result.
pub fn is_part_name(name: &str) -> bool {
    name == AUDIO_FILE || name == SEARCH_FILE || segment_index_of(name).is_some()
}

/// The name a part has in the folder while it arrives.
fn arriving_name(name: &str) -> String {
    format!("{name}.upload")
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> TransferFileError {
    move |e| TransferFileError::Media(MediaError::from_io(what, &e))
}

fn refused(name: &str) -> TransferFileError {
    TransferFileError::Refused(format!("{name:?} is not a part a node uploads"))
}

/// The list of parts in the folder at `dir` (a handle's path); `None` when there is none.
fn read_list(dir: &Path) -> Result<Option<Vec<Part>>, TransferFileError> {
    match std::fs::read(dir.join(PARTS_FILE)) {
        Ok(text) => serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| TransferFileError::Media(MediaError::misc(format!("the list of parts is unreadable: {e}")))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("reading the list of parts")(e)),
    }
}

/// The size of file `name` in the folder at `dir`, not through a link.
fn size_of(dir: &Path, name: &str) -> Option<u64> {
    std::fs::symlink_metadata(dir.join(name)).ok().filter(|m| m.file_type().is_file()).map(|m| m.len())
}

/// What the partial folder beside `source` holds of the node's parts: each taken part still
/// there whole, and each arriving one with its durable length (made durable first). No folder,
/// or no list in it: nothing.
pub fn uploaded(source: &Path) -> Result<Uploaded, TransferFileError> {
    let Some(dir) = PartialDir::open(&partial_dir_for(source), false)? else { return Ok(Uploaded::default()) };
    let Some(list) = read_list(dir.path())? else { return Ok(Uploaded::default()) };
    let parts = list.into_iter().filter(|p| size_of(dir.path(), &p.name) == Some(p.size)).collect();
    let mut arriving = Vec::new();
    let entries = std::fs::read_dir(dir.path()).map_err(io("reading the partial output"))?;
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_suffix(".upload")).filter(|n| is_part_name(n)) else {
            continue;
        };
        if let Some(length) = size_of(dir.path(), &arriving_name(name)) {
            arriving.push(Arriving { name: name.to_string(), length });
        }
    }
    arriving.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Uploaded { parts, arriving })
}

/// Opens the upload of part `name` beside `source`, under the folder's run lock. The first
/// part of an attempt (no list yet) empties the folder and begins the list.
pub fn open_part(source: &Path, name: &str) -> Result<Upload, TransferFileError> {
    if !is_part_name(name) {
        return Err(refused(name));
    }
    Upload::open_as(source, &arriving_name(name), |lock| {
        if read_list(lock.dir())?.is_none() {
            lock.clear()?;
            write_durably(lock.dir(), PARTS_FILE, &Vec::<Part>::new(), "beginning the list of parts")?;
        }
        Ok(())
    })
}

/// Takes part `name` beside `source` whole: checked against the node's `size` and `sha256`
/// (discarded otherwise: `Mismatch`), renamed into place and listed. Asked again after its
/// answer was lost, the same part listed is the answer.
pub fn take_part(source: &Path, name: &str, size: u64, sha256: &str) -> Result<Part, TransferFileError> {
    if !is_part_name(name) {
        return Err(refused(name));
    }
    let lock = match partial::lock_run(&partial_dir_for(source))? {
        Ok(lock) => lock,
        Err(_) => return Err(TransferFileError::Busy),
    };
    let part = Part { name: name.to_string(), size, sha256: sha256.to_string() };
    let Some(mut list) = read_list(lock.dir())? else {
        return Err(TransferFileError::Mismatch(format!("there is no upload of {name} for this job")));
    };
    if list.contains(&part) && size_of(lock.dir(), name) == Some(size) {
        let _ = lock.remove_file(&arriving_name(name));
        return Ok(part);
    }
    take_whole(&lock, &arriving_name(name), size, sha256, name)?;
    list.retain(|p| p.name != name);
    list.push(part.clone());
    write_durably(lock.dir(), PARTS_FILE, &list, "listing a part")?;
    Ok(part)
}

/// Puts the node's `manifest` in place beside `source`, under the folder's whole lock
/// (handed back, for the commit): every part in `sent` must be listed here as sent, every
/// segment the manifest names one of them under its size, and the video complete. The
/// manifest takes `source`'s identity here (`identity`, the version whose SHA-256 the
/// node's matched) and the version this node writes.
pub fn take_manifest(
    source: &Path,
    mut manifest: Manifest,
    sent: &[Part],
    identity: SourceIdentity,
) -> Result<PartialLock, TransferFileError> {
    let lock = match partial::lock(&partial_dir_for(source))? {
        Ok(lock) => lock,
        Err(_) => return Err(TransferFileError::Busy),
    };
    let list = read_list(lock.dir())?.unwrap_or_default();
    for part in sent {
        if !is_part_name(&part.name) {
            return Err(refused(&part.name));
        }
        if !list.contains(part) || size_of(lock.dir(), &part.name) != Some(part.size) {
            return Err(TransferFileError::Mismatch(format!("{} did not arrive whole", part.name)));
        }
    }
    if manifest.version != MANIFEST_VERSION || !manifest.video_complete {
        return Err(TransferFileError::Refused("the node's manifest is not of a whole video".into()));
    }
    for segment in manifest.segments.iter().filter(|s| !s.file.is_empty()) {
        if segment_index_of(&segment.file).is_none() {
            return Err(TransferFileError::Refused(format!("{:?} is not a segment's name", segment.file)));
        }
        if !sent.iter().any(|p| p.name == segment.file && p.size == segment.bytes) {
            return Err(TransferFileError::Mismatch(format!("segment {} was not uploaded whole", segment.file)));
        }
    }
    manifest.source = identity;
    write_durably(lock.dir(), MANIFEST_FILE, &manifest, "writing the node's manifest")?;
    Ok(lock)
}

/// Empties the partial folder beside `source` of the node's parts (the source changed since
/// the node read it: nothing of them is of use).
pub fn discard_parts(source: &Path) -> Result<(), TransferFileError> {
    let lock = match partial::lock_if_exists(&partial_dir_for(source))? {
        None => return Ok(()),
        Some(Ok(lock)) => lock,
        Some(Err(_)) => return Err(TransferFileError::Busy),
    };
    lock.clear()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::OFlags;

    /// A file of the folder `lock` holds, read through its handle.
    fn read(lock: &PartialLock, name: &str) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        lock.open_file(name, OFlags::RDONLY, 0).unwrap().read_to_end(&mut out).unwrap();
        out
    }
    use crate::media::layout::segment_file;
    use crate::media::manifest::Segment;
    use crate::media::transfer::hex;
    use sha2::{Digest, Sha256};

    fn sha(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes))
    }

    fn put(source: &Path, name: &str, bytes: &[u8]) -> Part {
        let mut up = open_part(source, name).unwrap();
        up.append(bytes).unwrap();
        up.sync().unwrap();
        drop(up);
        take_part(source, name, bytes.len() as u64, &sha(bytes)).unwrap()
    }

    fn manifest(segments: &[(&str, u64)]) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            plan_digest: "digest".into(),
            source: SourceIdentity { size: 1, mtime_ns: 1, inode: 1 },
            boundaries: Some(vec![]),
            segments: segments
                .iter()
                .enumerate()
                .map(|(i, (file, bytes))| Segment {
                    index: u32::try_from(i).unwrap(),
                    file: file.to_string(),
                    span: crate::domain::segments::Span { from: Some(i as i64 * 10), to: Some(i as i64 * 10 + 10) },
                    first_pts: 0,
                    last_pts: 0,
                    frames: 1,
                    bytes: *bytes,
                })
                .collect(),
            video: None,
            video_complete: true,
            runs: Vec::new(),
            epoch: "lease".into(),
            first_pass_done: false,
        }
    }

    fn source_in(root: &Path) -> std::path::PathBuf {
        let source = root.join("a.mkv");
        std::fs::write(&source, b"source").unwrap();
        source
    }

    #[test]
    fn only_the_names_a_nodes_run_gives_are_parts() {
        for name in [segment_file(0).as_str(), segment_file(12).as_str(), AUDIO_FILE, SEARCH_FILE] {
            assert!(is_part_name(name), "{name}");
        }
        for name in ["manifest.json", "parts.json", ".lock", "output.mkv", "../seg-00001.seg", "seg-1.seg", ""] {
            assert!(!is_part_name(name), "{name}");
        }
        let tmp = tempfile::tempdir().unwrap();
        let source = source_in(&tmp.path().canonicalize().unwrap());
        assert!(matches!(open_part(&source, "manifest.json"), Err(TransferFileError::Refused(_))));
        assert!(matches!(take_part(&source, "../a.mkv", 6, &sha(b"source")), Err(TransferFileError::Refused(_))));
    }

    #[test]
    fn the_first_part_empties_what_a_run_here_left_and_a_part_resumes_at_its_durable_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let source = source_in(&tmp.path().canonicalize().unwrap());
        let dir = partial_dir_for(&source);
        // A run of this node left a manifest and a segment under a name the node uses too.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(MANIFEST_FILE), b"{}").unwrap();
        std::fs::write(dir.join(segment_file(0)), b"this node's own").unwrap();
        assert_eq!(uploaded(&source).unwrap(), Uploaded::default(), "no list: nothing of the node's");

        let mut up = open_part(&source, &segment_file(0)).unwrap();
        assert!(!dir.join(MANIFEST_FILE).exists() && !dir.join(segment_file(0)).exists(), "emptied first");
        up.append(b"seg").unwrap();
        up.sync().unwrap();
        drop(up);
        let held = uploaded(&source).unwrap();
        assert_eq!(held.arriving, [Arriving { name: segment_file(0), length: 3 }]);
        // The rest continues at the durable length, and a part taken whole is listed.
        let mut up = open_part(&source, &segment_file(0)).unwrap();
        assert_eq!(up.len(), 3);
        up.expect_offset(0).unwrap_err();
        up.append(b"ment").unwrap();
        up.sync().unwrap();
        drop(up);
        let part = take_part(&source, &segment_file(0), 7, &sha(b"segment")).unwrap();
        assert_eq!(uploaded(&source).unwrap(), Uploaded { parts: vec![part.clone()], arriving: vec![] });
        // Asked again (its answer lost): the same part.
        assert_eq!(take_part(&source, &segment_file(0), 7, &sha(b"segment")).unwrap(), part);
        // A second part does not empty the folder again.
        put(&source, AUDIO_FILE, b"audio");
        assert_eq!(uploaded(&source).unwrap().parts.len(), 2);
    }

    #[test]
    fn a_part_that_is_not_what_the_node_sent_is_discarded() {
        let tmp = tempfile::tempdir().unwrap();
        let source = source_in(&tmp.path().canonicalize().unwrap());
        let mut up = open_part(&source, &segment_file(3)).unwrap();
        up.append(b"segmemt").unwrap();
        up.sync().unwrap();
        drop(up);
        match take_part(&source, &segment_file(3), 7, &sha(b"segment")) {
            Err(TransferFileError::Mismatch(why)) => assert!(why.contains("SHA-256"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(uploaded(&source).unwrap(), Uploaded::default());
    }

    #[test]
    fn a_manifest_is_put_in_place_only_over_every_part_it_names_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let source = source_in(&tmp.path().canonicalize().unwrap());
        let identity = SourceIdentity::of(&source).unwrap();
        let a = put(&source, &segment_file(0), b"first");
        let b = put(&source, &segment_file(1), b"second");
        let sent = vec![a.clone(), b.clone()];

        // A segment it names was not sent, or not under its size.
        let short = manifest(&[(&a.name, 5), (&segment_file(2), 3)]);
        assert!(matches!(take_manifest(&source, short, &sent, identity), Err(TransferFileError::Mismatch(_))));
        let wrong = manifest(&[(&a.name, 5), (&b.name, 7)]);
        assert!(matches!(take_manifest(&source, wrong, &sent, identity), Err(TransferFileError::Mismatch(_))));
        // A name outside the folder's, or a part the main node does not hold as sent.
        let outside = manifest(&[("../../a.mkv", 6)]);
        assert!(matches!(take_manifest(&source, outside, &[], identity), Err(TransferFileError::Refused(_))));
        let other = Part { sha256: sha(b"other"), ..b.clone() };
        let mismatched = manifest(&[(&a.name, 5), (&b.name, 6)]);
        assert!(matches!(
            take_manifest(&source, mismatched, &[a.clone(), other], identity),
            Err(TransferFileError::Mismatch(_))
        ));
        // The video not complete.
        let mut open = manifest(&[(&a.name, 5), (&b.name, 6)]);
        open.video_complete = false;
        assert!(matches!(take_manifest(&source, open, &sent, identity), Err(TransferFileError::Refused(_))));
        assert!(!partial_dir_for(&source).join(MANIFEST_FILE).exists(), "nothing written");

        let lock = take_manifest(&source, manifest(&[(&a.name, 5), (&b.name, 6)]), &sent, identity).unwrap();
        let written: Manifest = serde_json::from_slice(&read(&lock, MANIFEST_FILE)).unwrap();
        assert_eq!(written.source, identity, "this node's identity of the source");
        assert_eq!(written.segments.len(), 2);
        drop(lock);
        assert_eq!(uploaded(&source).unwrap().parts, sent);
        discard_parts(&source).unwrap();
        assert_eq!(uploaded(&source).unwrap(), Uploaded::default());
    }
}
