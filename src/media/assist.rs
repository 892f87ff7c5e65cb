//! Helpers: a slot on another node (or an idle one on the same node) encodes one planned
//! span of a running job's video into that job's partial folder, which every node sees.
//! The run that owns the manifest (the job's transcoder) stays its only writer; a helper
//! writes only its span's segment files and, once they are durable, a record of them
//! (`span-NNNNN.json`), which the run takes in. Who writes a span is settled by the
//! filesystem: its claim is a byte-range lock on the folder's lock file (`media::partial`),
//! held by the run's session or by one helper, never both, and let go by death as surely as
//! by exit. A helper that dies leaves no record; the run finds the claim free and encodes
//! the span itself. See docs/ARCHITECTURE.md, "Segments".

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use serde::{Deserialize, Serialize};

use super::event::{cpu_time_ms, Event};
use super::layout::{self, PLAN_FILE};
use super::manifest::{
    insert_in_order, inspect, keep_headers, record_segment, sync_dir, write_durably, Manifest, PartialState, Segment,
};
use super::partial::{self, Claim};
use super::plan::EncodePlan;
use super::probe;
use super::segment::CodecParams;
use super::sessions::{run_sessions, Recorder, SessionMode};
use super::MediaError;
use crate::domain::segments::{self, Sessions, Span};

/// What a helper writes when its span's segments are durable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanRecord {
    pub plan_digest: String,
    pub span: u32,
    /// In the order of their spans; `index` numbers them within the record only.
    pub segments: Vec<Segment>,
    pub video: Option<CodecParams>,
}

/// What a helper child is asked (on stdin of `condense-media assist`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistRequest {
    #[serde(with = "crate::domain::path_bytes::lossless")]
    pub partial_dir: PathBuf,
    /// The planned span this helper was given (its row's lease, `repo::segments`).
    pub span: u32,
    /// The encoder threads this slot may use (0: the encoder's default).
    pub threads: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssistEnd {
    /// The span is encoded and its record written.
    Finished,
    /// Stopped on request: what was encoded is recorded, the rest of the span is left.
    Paused,
    /// Nothing to help with (no plan yet, every span done or taken, the job gone).
    Nothing,
}

/// The planned span a helper's record file belongs to.
pub fn record_span_of(name: &str) -> Option<u32> {
    name.strip_prefix("span-")?.strip_suffix(".json")?.parse().ok()
}

pub fn has_record(dir: &Path, span: u32) -> bool {
    dir.join(layout::span_record_file(span)).exists()
}

/// Writes the run's plan (`published`, naming the folder by its path) where helpers read
/// it, into the folder the run holds (`held.partial_dir`).
pub fn publish_plan(published: &EncodePlan, held: &EncodePlan) -> Result<(), MediaError> {
    write_durably(&held.partial_dir, PLAN_FILE, published, "writing the plan for helpers")
}

/// Removes a record and the files it names that the manifest does not list.
fn discard(dir: &Path, manifest: &Manifest, span: u32, record: Option<&SpanRecord>, why: &str) {
    tracing::warn!(span, reason = why, "a helper's record was not used; the span is encoded again");
    for seg in record.map(|r| r.segments.as_slice()).unwrap_or(&[]) {
        if !seg.file.is_empty() && !manifest.segments.iter().any(|s| s.file == seg.file) {
            let _ = std::fs::remove_file(dir.join(&seg.file));
        }
    }
    let _ = std::fs::remove_file(dir.join(layout::span_record_file(span)));
}

/// Takes a helper's record of planned span `span` into the manifest (the caller holds the
/// span's claim, or knows nobody does): every segment checked (same plan, inside what is
/// left of the span, its file whole, the encoder's headers those of the other segments),
/// or none is used and the span is encoded again.
pub(crate) fn take_in(
    plan: &EncodePlan,
    manifest: &mut Manifest,
    span: u32,
    next_index: &AtomicU32,
    emit: &mut dyn FnMut(Event),
) -> Result<(), MediaError> {
    let dir = plan.partial_dir.as_path();
    let path = dir.join(layout::span_record_file(span));
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(MediaError::from_io("reading a helper's record", &e)),
    };
    let record: SpanRecord = match serde_json::from_slice(&text) {
        Ok(r) => r,
        Err(e) => {
            discard(dir, manifest, span, None, &format!("unreadable: {e}"));
            return Ok(());
        }
    };
    // Taken in before a crash that came before the record's removal: nothing to add.
    if record.segments.iter().all(|r| manifest.segments.iter().any(|s| s.span == r.span && s.file == r.file)) {
        let _ = std::fs::remove_file(&path);
        return Ok(());
    }
    let boundaries = manifest.boundaries.clone().unwrap_or_default();
    let left = manifest.remaining();
    let inside = |s: &Span| {
        left.iter().any(|piece| {
            piece.from.is_none_or(|f| s.from.is_some_and(|sf| sf >= f))
                && piece.to.is_none_or(|t| s.to.is_some_and(|st| st <= t))
        })
    };
    let whole = |seg: &Segment| {
        seg.file.is_empty() || std::fs::metadata(dir.join(&seg.file)).is_ok_and(|m| m.len() == seg.bytes)
    };
    let why = if record.plan_digest != manifest.plan_digest || record.span != span {
        Some("made for another plan")
    } else if record
        .segments
        .iter()
        .any(|s| segments::planned_index(&boundaries, s.span.from) != span || !inside(&s.span))
    {
        Some("its segments are not what is left of its span")
    } else if record.segments.iter().any(|r| !r.file.is_empty() && manifest.segments.iter().any(|s| s.file == r.file)) {
        Some("a segment file is one the manifest already holds")
    } else if !record.segments.iter().all(whole) {
        Some("a segment file is missing or not whole")
    } else if matches!((&manifest.video, &record.video), (Some(a), Some(b)) if !a.joins(b)) {
        Some("its encoder's stream headers differ from the other segments' (another encoder build)")
    } else {
        None
    };
    if let Some(why) = why {
        discard(dir, manifest, span, Some(&record), why);
        return Ok(());
    }
    for mut seg in record.segments {
        seg.index = next_index.fetch_add(1, Ordering::SeqCst);
        let params = if seg.file.is_empty() { None } else { record.video.clone() };
        record_segment(plan, manifest, seg, params, emit)?;
    }
    std::fs::remove_file(&path).map_err(|e| MediaError::from_io("removing a helper's record", &e))?;
    sync_dir(dir).map_err(|e| MediaError::from_io("syncing the partial output", &e))
}

/// Takes in every record whose helper has let its span go (at the start of a run).
pub(crate) fn take_in_all(
    plan: &EncodePlan,
    manifest: &mut Manifest,
    next_index: &AtomicU32,
) -> Result<(), MediaError> {
    let Some(boundaries) = manifest.boundaries.clone() else { return Ok(()) };
    for span in 0..u32::try_from(segments::spans(&boundaries).len()).unwrap_or(0) {
        if has_record(&plan.partial_dir, span) && !partial::span_held(&plan.partial_dir, span) {
            take_in(plan, manifest, span, next_index, &mut |_| {})?;
        }
    }
    Ok(())
}

/// A helper's segments, kept for its record.
struct Collected {
    segments: Vec<Segment>,
    video: Option<CodecParams>,
}

impl Recorder for Collected {
    fn record(
        &mut self,
        plan: &EncodePlan,
        segment: Segment,
        params: Option<CodecParams>,
        emit: &mut dyn FnMut(Event),
    ) -> Result<u64, MediaError> {
        keep_headers(&mut self.video, params)?;
        sync_dir(&plan.partial_dir).map_err(|e| MediaError::from_io("syncing the partial output", &e))?;
        emit(Event::SegmentDone { index: segment.index, frames: segment.frames, bytes: segment.bytes });
        let bytes = segment.bytes;
        insert_in_order(&mut self.segments, segment);
        Ok(bytes)
    }

    fn frames_done(&self) -> u64 {
        self.segments.iter().map(|s| s.frames).sum()
    }

    fn bytes_done(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }
}

/// `condense-media assist`: claims the span it was given (unless someone holds it or it is done),
/// encodes what is left of it with one session, and writes its record.
pub fn assist(
    request: &AssistRequest,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<AssistEnd, MediaError> {
    let mut nothing = |why: &str| {
        emit(Event::Nothing { reason: why.to_string() });
        Ok(AssistEnd::Nothing)
    };
    // Everything below goes through the folder's handle, never its name (`media::handle`).
    let Some(held) = partial::PartialDir::open(&request.partial_dir, false)? else {
        return nothing("the partial output is gone");
    };
    let dir = held.path();
    let text = match std::fs::read(dir.join(PLAN_FILE)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return nothing("the job has no plan in its partial output yet")
        }
        Err(e) => return Err(MediaError::from_io("reading the job's plan", &e)),
    };
    let mut plan: EncodePlan = match serde_json::from_slice(&text) {
        Ok(p) => p,
        Err(_) => return nothing("the job's plan is unreadable"),
    };
    if plan.partial_dir != request.partial_dir {
        return nothing("the plan belongs to another folder");
    }
    plan.partial_dir = dir.to_path_buf();
    plan.sessions = Sessions { sessions: 1, threads: request.threads };
    let PartialState::Valid(manifest) = inspect(&plan) else {
        return nothing("the partial output is not one to continue");
    };
    let boundaries = match &manifest.boundaries {
        Some(b) if !b.is_empty() && !manifest.video_complete => b.clone(),
        _ => return nothing("the video is done, or is encoded as one span"),
    };
    let span = request.span;
    let Some(piece) = manifest.remaining().into_iter().find(|p| segments::planned_index(&boundaries, p.from) == span)
    else {
        return nothing("the span is done");
    };
    if has_record(dir, span) {
        return nothing("the span is done, its record not yet taken in");
    }
    let claim = match partial::claim_span(dir, span)? {
        Claim::Mine(claim) => claim,
        Claim::Held => return nothing("another writer holds the span"),
        Claim::Gone => return nothing("the partial output is gone"),
    };
    // The run may have finished the span and let it go since the manifest was read.
    let PartialState::Valid(now) = inspect(&plan) else { return nothing("the partial output changed") };
    if !now.remaining().contains(&piece) || has_record(dir, span) {
        return nothing("the span was finished meanwhile");
    }
    let span = claim.index;
    emit(Event::SpanStarted { span });
    let info = probe::probe(&plan.input)?;
    let mut collected = Collected { segments: Vec::new(), video: None };
    let started = std::time::Instant::now();
    // An earlier helper's part of this span may be in the manifest already, in files named
    // like this helper's: its files are numbered after every one there, never over one (a
    // second helper on a span taken in part wrote over the first's segment: 23 frames twice,
    // caught only by the output's frame count).
    let first_free = (0u32..).find(|n| !dir.join(layout::assist_segment_file(span, *n)).exists()).unwrap_or(0);
    let totals = run_sessions(
        &plan,
        &info,
        vec![piece],
        boundaries,
        SessionMode::Helper { span },
        first_free,
        &mut collected,
        stop,
        emit,
    )?;
    let (encoded, skipped) = (totals.encoded, totals.skipped);
    let frames: u64 = collected.frames_done();
    let bytes = collected.bytes_done();
    if !collected.segments.is_empty() {
        let record =
            SpanRecord { plan_digest: plan.digest(), span, segments: collected.segments, video: collected.video };
        write_durably(dir, &layout::span_record_file(span), &record, "writing a helper's record")?;
    }
    drop(claim);
    if stop.load(Ordering::SeqCst) {
        emit(Event::Paused { frames_done: frames, segments: 0 });
        return Ok(AssistEnd::Paused);
    }
    emit(Event::Done {
        output: request.partial_dir.join(layout::span_record_file(span)).display().to_string(),
        size: bytes,
        frames_encoded_this_run: encoded,
        frames_skipped_this_run: skipped,
        cpu_ms: cpu_time_ms(),
        wall_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    Ok(AssistEnd::Finished)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_read_back_and_segment_names_are_not_records() {
        assert_eq!(record_span_of(&layout::span_record_file(7)), Some(7));
        assert_eq!(record_span_of(&layout::assist_segment_file(7, 1)), None);
        assert_eq!(layout::assist_span_of(&layout::assist_segment_file(7, 1)), Some(7));
        // Every file of a helper names its span, so a run's clean-up leaves a live one's alone.
        assert_eq!(layout::assist_span_of(&layout::span_record_file(7)), Some(7));
        assert_eq!(layout::assist_span_of("span-00007.json.tmp"), Some(7));
        assert_eq!(layout::assist_span_of("span-.json"), None);
        assert_eq!(record_span_of("manifest.json"), None);
        assert_eq!(layout::assist_span_of(&layout::segment_file(3)), None);
    }
}
