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
use crate::recorder::Recorder;
use crate::sessions::{run_sessions, SessionMode};
use condense::domain::segments::Sessions;
use condense::media::codec_params::CodecParams;
use condense::media::event::{cpu_time_ms, Event};
use condense::media::layout::{self, PLAN_FILE};
use condense::media::manifest::{insert_in_order, keep_headers, sync_dir, write_durably, Segment};
use condense::media::partial;
use condense::media::plan::EncodePlan;
use condense::media::span_record::SpanRecord;
use condense::media::span_transfer::{take_span, SpanTask, Taken};
use condense::media::transcoder::{GivenSpan, HelperRequest};
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
    if let Some(given) = &request.given {
        return run_given(request, given, stop, emit);
    }
    let (held, task) = match take_span(&request.partial_dir, request.span)? {
        Taken::Span(held, task) => (held, task),
        Taken::Nothing(why) => {
            emit(Event::Nothing { reason: why.to_string() });
            return Ok(HelperEnd::Nothing);
        }
    };
    let SpanTask { mut plan, given } = *task;
    plan.sessions = Sessions { sessions: 1, threads: request.threads };
    let end = encode_span(request, &plan, given, stop, emit);
    // The claim goes once the record is durable (or the encode ended without one).
    drop(held);
    end
}

/// A span the main node claimed for this node, which does not see the share: the plan is
/// in this node's own folder (`request.partial_dir`), the segments and the record go there
/// for the node to upload (`actors::job::span_by_transfer`).
fn run_given(
    request: &HelperRequest,
    given: &GivenSpan,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<HelperEnd, MediaError> {
    let Some(held) = partial::PartialDir::open(&request.partial_dir, false)? else {
        return Err(MediaError::misc("the span's folder in WORK_DIR is gone"));
    };
    let dir = held.path();
    let text = std::fs::read(dir.join(PLAN_FILE)).map_err(|e| MediaError::from_io("reading the span's plan", &e))?;
    let mut plan: EncodePlan =
        serde_json::from_slice(&text).map_err(|e| MediaError::misc(format!("the span's plan is unreadable: {e}")))?;
    plan.partial_dir = dir.to_path_buf();
    plan.sessions = Sessions { sessions: 1, threads: request.threads };
    if let Some(sparse) = &plan.sparse {
        crate::sparse::expect(sparse);
    }
    encode_span(request, &plan, given.clone(), stop, emit)
}

/// Encodes what is left of the span with one session into `plan.partial_dir`, and writes
/// the record of what it finished there.
fn encode_span(
    request: &HelperRequest,
    plan: &EncodePlan,
    given: GivenSpan,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<HelperEnd, MediaError> {
    let span = request.span;
    emit(Event::SpanStarted { span });
    let info = probe::probe(&plan.input)?;
    let mut written = HelperSegments { segments: Vec::new(), video: None };
    let started = std::time::Instant::now();
    let totals = run_sessions(
        plan,
        &info,
        vec![given.piece],
        given.boundaries,
        SessionMode::Helper { span },
        given.first_free,
        &mut written,
        stop,
        emit,
    )?;
    let (encoded, skipped) = (totals.encoded, totals.skipped);
    let frames: u64 = written.frames_done();
    let bytes = written.bytes_done();
    if !written.segments.is_empty() {
        let record = SpanRecord { plan_digest: plan.digest(), span, segments: written.segments, video: written.video };
        write_durably(&plan.partial_dir, &layout::span_record_file(span), &record, "writing a helper's record")?;
    }
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
