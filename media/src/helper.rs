//! Helpers: a slot on another node (or an idle one on the same node) encodes one planned
//! span of a running job's video into that job's partial folder, which every node sees.
//! The run that owns the manifest (the job's transcoder) stays its only writer; a helper
//! writes only its span's segment files and, once they are durable, a record of them
//! (`span-NNNNN.json`, `media::span_record`), which the run takes in. Who writes a span is settled by the
//! filesystem: its claim is a byte-range lock on the folder's lock file (`media::partial`),
//! held by the run's session or by one helper, never both, and let go by death as surely as
//! by exit. A helper that dies leaves no record; the run finds the claim free and encodes
//! the span itself. See docs/ARCHITECTURE.md, "Segments".

use std::sync::atomic::{AtomicBool, Ordering};

use crate::probe;
use crate::sessions::{run_sessions, Recorder, SessionMode};
use condense::domain::segments::{self, Sessions};
use condense::media::codec_params::CodecParams;
use condense::media::event::{cpu_time_ms, Event};
use condense::media::layout::{self, PLAN_FILE};
use condense::media::manifest::{
    insert_in_order, inspect, keep_headers, sync_dir, write_durably, PartialState, Segment,
};
use condense::media::partial::{self, Claim};
use condense::media::plan::EncodePlan;
use condense::media::span_record::{has_record, SpanRecord};
use condense::media::transcoder::HelperRequest;
use condense::media::MediaError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperEnd {
    /// The span is encoded and its record written.
    Finished,
    /// Stopped on request: what was encoded is recorded, the rest of the span is left.
    Paused,
    /// Nothing to help with (no plan yet, every span done or taken, the job gone).
    Nothing,
}

/// A helper's segments, kept for its record.
struct HelperSegments {
    segments: Vec<Segment>,
    video: Option<CodecParams>,
}

impl Recorder for HelperSegments {
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

/// `condense-media helper`: claims the span it was given (unless someone holds it or it is done),
/// encodes what is left of it with one session, and writes its record.
pub fn run(request: &HelperRequest, stop: &AtomicBool, emit: &mut dyn FnMut(Event)) -> Result<HelperEnd, MediaError> {
    let mut nothing = |why: &str| {
        emit(Event::Nothing { reason: why.to_string() });
        Ok(HelperEnd::Nothing)
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
    if plan.two_pass {
        // Each span's second pass reads the statistics its first pass wrote in the job's
        // own run, for exactly the span's frames: a piece of a span encoded here could not.
        return nothing("a two-pass encode's spans are encoded by its own run");
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
    let mut written = HelperSegments { segments: Vec::new(), video: None };
    let started = std::time::Instant::now();
    // An earlier helper's part of this span may be in the manifest already, in files named
    // like this helper's: its files are numbered after every one there, never over one (a
    // second helper on a span taken in part wrote over the first's segment: 23 frames twice,
    // caught only by the output's frame count).
    let first_free = (0u32..).find(|n| !dir.join(layout::helper_segment_file(span, *n)).exists()).unwrap_or(0);
    let totals = run_sessions(
        &plan,
        &info,
        vec![piece],
        boundaries,
        SessionMode::Helper { span },
        first_free,
        &mut written,
        stop,
        emit,
    )?;
    let (encoded, skipped) = (totals.encoded, totals.skipped);
    let frames: u64 = written.frames_done();
    let bytes = written.bytes_done();
    if !written.segments.is_empty() {
        let record = SpanRecord { plan_digest: plan.digest(), span, segments: written.segments, video: written.video };
        write_durably(dir, &layout::span_record_file(span), &record, "writing a helper's record")?;
    }
    drop(claim);
    if stop.load(Ordering::SeqCst) {
        emit(Event::Paused { frames_done: frames, segments: 0 });
        return Ok(HelperEnd::Paused);
    }
    emit(Event::Done {
        output: request.partial_dir.join(layout::span_record_file(span)).display().to_string(),
        size: bytes,
        frames_encoded_this_run: encoded,
        frames_skipped_this_run: skipped,
        cpu_ms: cpu_time_ms(),
        wall_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        phases: Vec::new(),
        alone_ms: 0,
    });
    Ok(HelperEnd::Finished)
}
