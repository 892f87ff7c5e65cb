//! Helpers' records: what a helper writes into the partial folder once its span's segments
//! are durable (`span-NNNNN.json`), and how the run that owns the manifest takes one in,
//! every segment checked, or discards it and encodes the span itself. Also the plan the run
//! publishes there for helpers to read. Kept apart from the helper's own run
//! (`media::helper`), which writes records, because the run's sessions take them in and the
//! helper runs sessions.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};

use super::codec_params::CodecParams;
use super::event::Event;
use super::layout::{self, PLAN_FILE};
use super::manifest::{record_segment, sync_dir, write_durably, Manifest, Segment};
use super::partial;
use super::plan::EncodePlan;
use super::MediaError;
use crate::domain::segments::{self, Span};

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
pub fn take_in(
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
pub fn take_in_all(plan: &EncodePlan, manifest: &mut Manifest, next_index: &AtomicU32) -> Result<(), MediaError> {
    let Some(boundaries) = manifest.boundaries.clone() else { return Ok(()) };
    for span in 0..u32::try_from(segments::spans(&boundaries).len()).unwrap_or(0) {
        if has_record(&plan.partial_dir, span) && !partial::span_held(&plan.partial_dir, span) {
            take_in(plan, manifest, span, next_index, &mut |_| {})?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_read_back_and_segment_names_are_not_records() {
        assert_eq!(record_span_of(&layout::span_record_file(7)), Some(7));
        assert_eq!(record_span_of(&layout::helper_segment_file(7, 1)), None);
        assert_eq!(layout::helper_span_of(&layout::helper_segment_file(7, 1)), Some(7));
        // Every file of a helper names its span, so a run's clean-up leaves a live one's alone.
        assert_eq!(layout::helper_span_of(&layout::span_record_file(7)), Some(7));
        assert_eq!(layout::helper_span_of("span-00007.json.tmp"), Some(7));
        assert_eq!(layout::helper_span_of("span-.json"), None);
        assert_eq!(record_span_of("manifest.json"), None);
        assert_eq!(layout::helper_span_of(&layout::segment_file(3)), None);
    }
}
