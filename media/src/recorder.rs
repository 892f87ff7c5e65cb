//! Where the finished segments of a run's sessions go (`Recorder`): the manifest of the run
//! that owns the partial output (here), a helper's record of its span (`helper`), the quality
//! search's samples (`search`), a first pass's statistics (`transcode`); and the planned spans
//! as the node shows them.

use std::sync::atomic::AtomicU32;

use condense::domain::segments::{self, Span, SpanView};
use condense::media::codec_params::CodecParams;
use condense::media::event::Event;
use condense::media::manifest::{record_segment, Manifest, Segment};
use condense::media::plan::EncodePlan;
use condense::media::{span_record, MediaError};

/// Where a run's finished segments go: the manifest (the run that owns the partial output)
/// or a helper's record of its span (`media::helper`).
pub(crate) trait Recorder {
    /// Records a finished segment; answers its bytes.
    fn record(
        &mut self,
        plan: &EncodePlan,
        segment: Segment,
        params: Option<CodecParams>,
        emit: &mut dyn FnMut(Event),
    ) -> Result<u64, MediaError>;
    fn frames_done(&self) -> u64;
    fn bytes_done(&self) -> u64;
    /// The planned spans as the node shows them (the run that owns the manifest only);
    /// `here` are those this run's sessions encode now.
    fn views(&self, _here: &[u32]) -> Option<Vec<SpanView>> {
        None
    }
    /// Takes in a helper's record of planned span `span`; answers what is left of that span.
    /// Only the run that owns the manifest waits on other writers; other recorders have
    /// nothing to take in.
    fn take_in(
        &mut self,
        _plan: &EncodePlan,
        _span: u32,
        _next_index: &AtomicU32,
        _emit: &mut dyn FnMut(Event),
    ) -> Result<Vec<Span>, MediaError> {
        Ok(Vec::new())
    }
}

impl Recorder for Manifest {
    fn record(
        &mut self,
        plan: &EncodePlan,
        segment: Segment,
        params: Option<CodecParams>,
        emit: &mut dyn FnMut(Event),
    ) -> Result<u64, MediaError> {
        record_segment(plan, self, segment, params, emit)
    }

    fn frames_done(&self) -> u64 {
        Manifest::frames_done(self)
    }

    fn bytes_done(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    fn views(&self, here: &[u32]) -> Option<Vec<SpanView>> {
        self.boundaries.as_ref().filter(|b| !b.is_empty()).map(|_| span_views(self, here))
    }

    fn take_in(
        &mut self,
        plan: &EncodePlan,
        span: u32,
        next_index: &AtomicU32,
        emit: &mut dyn FnMut(Event),
    ) -> Result<Vec<Span>, MediaError> {
        span_record::take_in(plan, self, span, next_index, emit)?;
        let boundaries = self.boundaries.clone().unwrap_or_default();
        Ok(self.remaining().into_iter().filter(|s| segments::planned_index(&boundaries, s.from) == span).collect())
    }
}

/// The planned spans and what is done of each, for the node to show (`Event::Spans`);
/// `here` are the spans this run's sessions encode now.
pub(crate) fn span_views(manifest: &Manifest, here: &[u32]) -> Vec<SpanView> {
    let boundaries = manifest.boundaries.clone().unwrap_or_default();
    let left = manifest.remaining();
    segments::spans(&boundaries)
        .into_iter()
        .enumerate()
        .map(|(i, whole)| {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let mine = |s: &Span| segments::planned_index(&boundaries, s.from) == index;
            let done: Vec<&Segment> = manifest.segments.iter().filter(|s| mine(&s.span)).collect();
            SpanView {
                index,
                from: whole.from,
                to: whole.to,
                frames: done.iter().map(|s| s.frames).sum(),
                bytes: done.iter().map(|s| s.bytes).sum(),
                done: !left.iter().any(mine),
                here: here.contains(&index),
            }
        })
        .collect()
}
