//! A span of a job taken by a helper, on the side of the node that holds the job's partial
//! folder: `take_span` claims the span there and says what is left of it, with the checks a
//! helper on the share makes (`condense-media helper`) and the main node makes for a node
//! that does not see the library (issue 39, item 4; `actors::cluster::span_transfer` keeps
//! the claim while that node's span lease lives). Such a node uploads each segment file it
//! encoded, written here through the folder's handle under the claim, checked against its
//! SHA-256 and made durable (`SpanFile`), then its record, checked against the files written
//! (`HeldSpan::finish`): the run that owns the manifest takes it in as any helper's
//! (`media::span_record`). Blocking.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use rustix::fs::OFlags;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::layout::{self, PLAN_FILE};
use super::manifest::{inspect, write_durably, PartialState};
use super::partial::{self, Claim, PartialDir, SpanClaim};
use super::plan::EncodePlan;
use super::span_record::{has_record, SpanRecord};
use super::transcoder::GivenSpan;
use super::transfer::{hex, TransferFileError};
use super::MediaError;
use crate::domain::segments;

/// What a helper is told of the span it was given: the run's plan (its paths the main
/// node's) and what is left of the span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanTask {
    pub plan: EncodePlan,
    pub given: GivenSpan,
}

/// A span claimed in a job's partial folder, held open by its handle; the claim goes with it.
#[derive(Debug)]
pub struct HeldSpan {
    dir: PartialDir,
    _claim: SpanClaim,
    span: u32,
    plan_digest: String,
    /// The segment files written under this claim, each whole and checked.
    written: Vec<(String, u64)>,
}

/// What `take_span` found.
#[derive(Debug)]
pub enum Taken {
    Span(Box<HeldSpan>, Box<SpanTask>),
    /// Nothing to help with, and why.
    Nothing(&'static str),
}

/// Claims planned span `span` of the partial folder `partial_dir` and answers what is left
/// of it, or why there is nothing to do (no plan yet, a two-pass encode, the span done or
/// held by another writer, the folder gone). The task's plan names the folder by its handle
/// (`HeldSpan::path`).
pub fn take_span(partial_dir: &Path, span: u32) -> Result<Taken, MediaError> {
    // Everything below goes through the folder's handle, never its name (`media::handle`).
    let Some(dir) = PartialDir::open(partial_dir, false)? else {
        return Ok(Taken::Nothing("the partial output is gone"));
    };
    let text = match std::fs::read(dir.path().join(PLAN_FILE)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Taken::Nothing("the job has no plan in its partial output yet"))
        }
        Err(e) => return Err(MediaError::from_io("reading the job's plan", &e)),
    };
    let Ok(mut plan) = serde_json::from_slice::<EncodePlan>(&text) else {
        return Ok(Taken::Nothing("the job's plan is unreadable"));
    };
    if plan.partial_dir != partial_dir {
        return Ok(Taken::Nothing("the plan belongs to another folder"));
    }
    if plan.two_pass {
        // Each span's second pass reads the statistics its first pass wrote in the job's
        // own run, for exactly the span's frames: a piece of a span encoded here could not.
        return Ok(Taken::Nothing("a two-pass encode's spans are encoded by its own run"));
    }
    plan.partial_dir = dir.path().to_path_buf();
    let PartialState::Valid(manifest) = inspect(&plan) else {
        return Ok(Taken::Nothing("the partial output is not one to continue"));
    };
    let boundaries = match &manifest.boundaries {
        Some(b) if !b.is_empty() && !manifest.video_complete => b.clone(),
        _ => return Ok(Taken::Nothing("the video is done, or is encoded as one span")),
    };
    let Some(piece) = manifest.remaining().into_iter().find(|p| segments::planned_index(&boundaries, p.from) == span)
    else {
        return Ok(Taken::Nothing("the span is done"));
    };
    if has_record(dir.path(), span) {
        return Ok(Taken::Nothing("the span is done, its record not yet taken in"));
    }
    let claim = match partial::claim_span(dir.path(), span)? {
        Claim::Mine(claim) => claim,
        Claim::Held => return Ok(Taken::Nothing("another writer holds the span")),
        Claim::Gone => return Ok(Taken::Nothing("the partial output is gone")),
    };
    // The run may have finished the span and let it go since the manifest was read.
    let PartialState::Valid(now) = inspect(&plan) else { return Ok(Taken::Nothing("the partial output changed")) };
    if !now.remaining().contains(&piece) || has_record(dir.path(), span) {
        return Ok(Taken::Nothing("the span was finished meanwhile"));
    }
    let first_free = layout::first_free_helper_file(dir.path(), span);
    let held = HeldSpan { span, plan_digest: plan.digest(), written: Vec::new(), dir, _claim: claim };
    let task = SpanTask { plan, given: GivenSpan { piece, boundaries, first_free } };
    Ok(Taken::Span(Box::new(held), Box::new(task)))
}

/// Whether the partial folder `partial_dir` holds `record` as span `span`'s record: a finish
/// asked again, its answer lost, finds the record its first try wrote (until the run takes it
/// in). Read through the folder's handle, never through a link.
pub fn record_written(partial_dir: &Path, span: u32, record: &SpanRecord) -> Result<bool, MediaError> {
    let Some(dir) = PartialDir::open(partial_dir, false)? else { return Ok(false) };
    match std::fs::read(dir.path().join(layout::span_record_file(span))) {
        Ok(text) => Ok(serde_json::from_slice::<SpanRecord>(&text).is_ok_and(|written| written == *record)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(MediaError::from_io("reading a span's record", &e)),
    }
}

/// A segment file being uploaded into the partial folder.
#[derive(Debug)]
pub struct SpanFile {
    name: String,
    file: File,
    hasher: Sha256,
    len: u64,
}

impl HeldSpan {
    /// The folder, reached through its handle.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Starts segment file `name` of this span (a name `layout::helper_segment_file` gives
    /// for this span), from its first byte: one written under this claim before (a try
    /// that broke off) is written again; any other file of that name is refused.
    pub fn begin_file(&self, name: &str) -> Result<SpanFile, TransferFileError> {
        if layout::helper_segment_of(name).map(|(span, _)| span) != Some(self.span) {
            return Err(TransferFileError::Refused(format!(
                "{name:?} is not a segment file name of span {}",
                self.span
            )));
        }
        let again = self.written.iter().any(|(w, _)| w == name);
        let flags = OFlags::WRONLY | OFlags::CREATE | if again { OFlags::TRUNC } else { OFlags::EXCL };
        let file = self.dir.open_file(name, flags, 0o600).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => TransferFileError::Refused(format!(
                "{name} is in the partial output already; a helper's files are numbered after it"
            )),
            _ => TransferFileError::Media(MediaError::from_io("opening a span's segment file", &e)),
        })?;
        Ok(SpanFile { name: name.to_string(), file, hasher: Sha256::new(), len: 0 })
    }

    /// Makes the file durable and checks it whole against the node's `size` and `sha256`;
    /// one that is not what the node sent is removed.
    pub fn end_file(&mut self, mut upload: SpanFile, size: u64, sha256: &str) -> Result<u64, TransferFileError> {
        let got = hex(&upload.hasher.finalize_reset());
        if upload.len != size || got != sha256 {
            drop(upload.file);
            let _ = self.dir.remove_file(&upload.name);
            self.written.retain(|(w, _)| *w != upload.name);
            return Err(TransferFileError::Mismatch(format!(
                "{} holds {} bytes with SHA-256 {got}, not the {size} bytes with SHA-256 {sha256} sent",
                upload.name, upload.len
            )));
        }
        upload.file.sync_all().map_err(|e| MediaError::from_io("syncing a span's segment file", &e))?;
        self.dir.sync().map_err(|e| MediaError::from_io("syncing the partial output", &e))?;
        self.written.retain(|(w, _)| *w != upload.name);
        self.written.push((upload.name, size));
        Ok(size)
    }

    /// Writes the node's record of the span once every file it names was written whole
    /// under this claim, for the run to take in; the claim goes with `self`.
    pub fn finish(self, record: &SpanRecord) -> Result<(), TransferFileError> {
        let refused = |why: String| Err(TransferFileError::Refused(why));
        if record.span != self.span || record.plan_digest != self.plan_digest {
            return refused(format!("the record is not one of span {} of this plan", self.span));
        }
        if record.segments.is_empty() {
            return refused("the record names no segment".into());
        }
        for seg in record.segments.iter().filter(|s| !s.file.is_empty()) {
            if !self.written.iter().any(|(name, bytes)| *name == seg.file && *bytes == seg.bytes) {
                return refused(format!("{} was not uploaded whole ({} bytes)", seg.file, seg.bytes));
            }
        }
        write_durably(self.dir.path(), &layout::span_record_file(self.span), record, "writing a helper's record")?;
        Ok(())
    }
}

impl SpanFile {
    /// Appends `bytes` (durable at `HeldSpan::end_file`).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), TransferFileError> {
        self.file.write_all(bytes).map_err(|e| MediaError::from_io("writing a span's segment file", &e))?;
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
        Ok(())
    }
}
