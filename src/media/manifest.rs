//! The partial output's manifest: where the video is cut, and which segments are complete.
//! It is rewritten atomically (temp file, fsync, rename, fsync of the folder) after each
//! segment, so after a crash it names only segments that were fully written. Segments may
//! finish in any order (several sessions encode at once); each says which span of the
//! source it holds, and the manifest keeps them in the order of their spans.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::codec_params::CodecParams;
use super::event::Event;
use super::layout::MANIFEST_FILE;
use super::plan::{EncodePlan, SourceIdentity};
use super::MediaError;
use crate::domain::segments::{self, Span};

/// 2: segments carry their span and the cut points are recorded (parallel sessions).
pub const MANIFEST_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    /// Numbers the segment's file; unrelated to its place in the video.
    pub index: u32,
    /// Empty for a span that held no frame (the end of a span whose encode was stopped
    /// right after its last frame).
    pub file: String,
    /// The source frames this segment holds: all the frames of the span.
    pub span: Span,
    /// First and last source presentation timestamps encoded, in the source stream's time base.
    pub first_pts: i64,
    pub last_pts: i64,
    pub frames: u64,
    pub bytes: u64,
}

/// One run of the transcoder over this partial output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// Source frames encoded by this run (kept segments only).
    pub frames_encoded: u64,
    /// Frames decoded and thrown away to reach the resume point.
    pub frames_skipped: u64,
    pub ended: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: u32,
    pub plan_digest: String,
    pub source: SourceIdentity,
    /// Where the video is cut into spans (source keyframes, see `domain::segments`); `None`
    /// until the first run has planned them, empty for a video encoded as one span.
    pub boundaries: Option<Vec<i64>>,
    /// Finished segments, in the order of their spans.
    pub segments: Vec<Segment>,
    /// The encoder's stream parameters, from the first segment.
    pub video: Option<CodecParams>,
    pub video_complete: bool,
    pub runs: Vec<Run>,
    /// The lease of the run that owns this partial output: a run whose lease is no longer
    /// the one here was replaced by another and must not write.
    #[serde(default)]
    pub epoch: String,
    /// A two-pass encode: every span's first pass finished and its statistics are kept
    /// (see `transcode::passes`).
    #[serde(default)]
    pub first_pass_done: bool,
}

/// Puts `segment` among `segments` in the order of their spans.
pub fn insert_in_order(segments: &mut Vec<Segment>, segment: Segment) {
    let key = |s: &Segment| s.span.from.unwrap_or(i64::MIN);
    let at = segments.partition_point(|s| key(s) < key(&segment));
    segments.insert(at, segment);
}

/// What a job finds where its partial output should be.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "made once per run and moved once; a box would only add an allocation")]
pub enum PartialState {
    Missing,
    Valid(Manifest),
    Corrupt(String),
}

impl Manifest {
    pub fn new(plan: &EncodePlan) -> Self {
        Manifest {
            version: MANIFEST_VERSION,
            plan_digest: plan.digest(),
            source: plan.source,
            boundaries: None,
            segments: Vec::new(),
            video: None,
            video_complete: false,
            runs: Vec::new(),
            epoch: plan.epoch.clone(),
            first_pass_done: false,
        }
    }

    pub fn path(dir: &Path) -> PathBuf {
        dir.join(MANIFEST_FILE)
    }

    pub fn frames_done(&self) -> u64 {
        self.segments.iter().map(|s| s.frames).sum()
    }

    /// The spans no finished segment holds yet, in order.
    pub fn remaining(&self) -> Vec<Span> {
        let done: Vec<Span> = self.segments.iter().map(|s| s.span).collect();
        segments::remaining(self.boundaries.as_deref().unwrap_or(&[]), &done)
    }

    /// Records a finished segment in the order of its span.
    pub fn insert(&mut self, segment: Segment) {
        insert_in_order(&mut self.segments, segment);
    }

    /// The number for the next segment file: above every kept one.
    pub fn next_index(&self) -> u32 {
        self.segments.iter().map(|s| s.index.saturating_add(1)).max().unwrap_or(0)
    }

    /// Makes this run the owner of the partial output: its epoch goes into the manifest,
    /// whatever epoch was there.
    pub fn claim(&mut self, epoch: &str, dir: &Path) -> Result<(), MediaError> {
        self.epoch = epoch.to_string();
        self.write(dir)
    }

    /// Writes the manifest durably, unless another run has claimed the partial output
    /// since this one did (its epoch is in the manifest on disk): then nothing is written.
    pub fn save(&self, dir: &Path) -> Result<(), MediaError> {
        if let Some(owner) = epoch_on_disk(dir) {
            if owner != self.epoch {
                return Err(MediaError::misc(
                    "another run took over the partial output (its lease is in the manifest); this one stopped without writing",
                ));
            }
        }
        self.write(dir)
    }

    /// Writes the manifest durably: a crash leaves the old or the new one, never a mix.
    fn write(&self, dir: &Path) -> Result<(), MediaError> {
        write_durably(dir, MANIFEST_FILE, self, "writing the manifest")
    }
}

/// Writes `value` as JSON to `dir/name` durably: a temp file, fsync, rename, fsync of the
/// folder, so a crash leaves the old file or the new one, never a mix.
pub fn write_durably<T: Serialize>(dir: &Path, name: &str, value: &T, what: &'static str) -> Result<(), MediaError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let body = serde_json::to_vec_pretty(value).map_err(|e| MediaError::misc(format!("{what}: {e}")))?;
    let io = |e: std::io::Error| MediaError::from_io(what, &e);
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(&body).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, dir.join(name)).map_err(io)?;
    sync_dir(dir).map_err(io)
}

/// The epoch of the manifest in `dir`, if there is a readable one.
fn epoch_on_disk(dir: &Path) -> Option<String> {
    #[derive(Deserialize)]
    struct Owner {
        #[serde(default)]
        epoch: String,
    }
    let text = std::fs::read(Manifest::path(dir)).ok()?;
    serde_json::from_slice::<Owner>(&text).ok().map(|o| o.epoch)
}

pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Reads the partial output of `plan` and says whether it can be continued.
pub fn inspect(plan: &EncodePlan) -> PartialState {
    let dir = &plan.partial_dir;
    if !dir.exists() {
        return PartialState::Missing;
    }
    let path = Manifest::path(dir);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A folder without a manifest holds nothing worth keeping.
            return PartialState::Missing;
        }
        Err(e) => return PartialState::Corrupt(format!("manifest unreadable: {e}")),
    };
    let manifest: Manifest = match serde_json::from_slice(&text) {
        Ok(m) => m,
        Err(e) => return PartialState::Corrupt(format!("manifest unparsable: {e}")),
    };
    if manifest.version != MANIFEST_VERSION {
        return PartialState::Corrupt(format!("manifest version {}", manifest.version));
    }
    if manifest.plan_digest != plan.digest() {
        return PartialState::Corrupt("encoding settings changed since the partial output was made".into());
    }
    if manifest.source != plan.source {
        return PartialState::Corrupt("the source file changed since the partial output was made".into());
    }
    let spans: Vec<Span> = manifest.segments.iter().map(|s| s.span).collect();
    if segments::overlapping(&spans) {
        return PartialState::Corrupt("two segments hold the same frames".into());
    }
    if manifest
        .segments
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.span.from.unwrap_or(i64::MIN) > b.span.from.unwrap_or(i64::MIN)))
    {
        return PartialState::Corrupt("the segments are out of order".into());
    }
    for seg in manifest.segments.iter().filter(|s| !s.file.is_empty()) {
        match std::fs::metadata(dir.join(&seg.file)) {
            Ok(m) if m.len() == seg.bytes => {}
            Ok(m) => {
                return PartialState::Corrupt(format!("{} has {} bytes, expected {}", seg.file, m.len(), seg.bytes))
            }
            Err(_) => return PartialState::Corrupt(format!("{} is missing", seg.file)),
        }
    }
    PartialState::Valid(manifest)
}

/// A quick look at a paused job's partial output, without its plan: whether there is one,
/// and whether its manifest and listed segments are intact. The transcoder checks the
/// rest (settings, source identity) when it continues.
pub fn quick_state(dir: &Path) -> crate::domain::job::PartialOutput {
    use crate::domain::job::PartialOutput;
    let Ok(text) = std::fs::read(Manifest::path(dir)) else { return PartialOutput::Missing };
    let Ok(manifest) = serde_json::from_slice::<Manifest>(&text) else { return PartialOutput::Corrupt };
    let intact = manifest
        .segments
        .iter()
        .filter(|s| !s.file.is_empty())
        .all(|s| std::fs::metadata(dir.join(&s.file)).is_ok_and(|m| m.len() == s.bytes));
    if intact {
        PartialOutput::Valid
    } else {
        PartialOutput::Corrupt
    }
}

/// Keeps the first segment's encoder headers in `known`: a segment with other headers
/// cannot be joined to the others.
pub fn keep_headers(known: &mut Option<CodecParams>, params: Option<CodecParams>) -> Result<(), MediaError> {
    match (known.as_ref(), params) {
        (_, None) => Ok(()),
        (None, Some(params)) => {
            *known = Some(params);
            Ok(())
        }
        (Some(k), Some(params)) if k.joins(&params) => Ok(()),
        (Some(_), Some(_)) => Err(MediaError::misc("the encoder's stream headers changed between segments")),
    }
}

/// Records a finished segment in the manifest (main thread only): its encoder headers must
/// be those of every other segment, or the segments cannot be joined.
pub fn record_segment(
    plan: &EncodePlan,
    manifest: &mut Manifest,
    segment: Segment,
    params: Option<CodecParams>,
    emit: &mut dyn FnMut(Event),
) -> Result<u64, MediaError> {
    keep_headers(&mut manifest.video, params)?;
    sync_dir(&plan.partial_dir).map_err(|e| MediaError::from_io("syncing the partial output", &e))?;
    let bytes = segment.bytes;
    emit(Event::SegmentDone { index: segment.index, frames: segment.frames, bytes });
    manifest.insert(segment);
    manifest.save(&plan.partial_dir)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            plan_digest: "digest".into(),
            source: SourceIdentity { size: 1, mtime_ns: 2, inode: 3 },
            boundaries: None,
            segments: Vec::new(),
            video: None,
            video_complete: false,
            runs: Vec::new(),
            epoch: String::new(),
            first_pass_done: false,
        }
    }

    fn segment(index: u32, from: Option<i64>, to: Option<i64>, frames: u64) -> Segment {
        Segment {
            index,
            file: if frames == 0 { String::new() } else { format!("seg-{index:05}.seg") },
            span: Span::new(from, to),
            first_pts: from.unwrap_or(0),
            last_pts: to.unwrap_or(0),
            frames,
            bytes: frames,
        }
    }

    #[test]
    fn segments_finished_in_any_order_are_kept_in_the_order_of_their_spans() {
        let mut m = manifest();
        m.boundaries = Some(vec![50, 100]);
        m.insert(segment(0, Some(100), None, 40));
        m.insert(segment(1, None, Some(50), 50));
        assert_eq!(m.remaining(), vec![Span::new(Some(50), Some(100))]);
        m.insert(segment(2, Some(50), Some(73), 23));
        m.insert(segment(3, Some(73), Some(100), 0));
        let order: Vec<u32> = m.segments.iter().map(|s| s.index).collect();
        assert_eq!(order, vec![1, 2, 3, 0]);
        assert!(m.remaining().is_empty());
        assert_eq!((m.frames_done(), m.next_index()), (113, 4));
    }

    #[test]
    fn a_manifest_whose_segments_overlap_or_are_missing_is_not_continued() {
        let dir = tempfile::tempdir().unwrap();
        let info_free_plan = |dir: &Path| {
            let mut plan: EncodePlan = serde_json::from_value(serde_json::json!({
                "input": "/nonexistent.mkv", "partialDir": dir, "targetCodec": "hevc", "encoder": "libx265",
                "encoderOptions": [["crf", "28"]], "hardwareDecode": false, "bitDepth": 8,
                "retryProfile": "as_configured", "segmentSeconds": 1.0, "outputExtension": "mkv",
                "source": {"size": 1, "mtimeNs": 2, "inode": 3}, "minFreeBytes": 0, "hdr": "SDR"
            }))
            .unwrap();
            plan.epoch = "e".into();
            plan
        };
        let plan = info_free_plan(dir.path());
        let write = |segments: Vec<Segment>| {
            let mut m = Manifest::new(&plan);
            for s in &segments {
                if !s.file.is_empty() {
                    std::fs::write(dir.path().join(&s.file), vec![0u8; s.bytes as usize]).unwrap();
                }
            }
            m.segments = segments;
            m.claim("e", dir.path()).unwrap();
        };
        write(vec![segment(0, None, Some(50), 50), segment(1, Some(50), Some(60), 10), segment(2, Some(60), None, 0)]);
        assert!(matches!(inspect(&plan), PartialState::Valid(_)), "{:?}", inspect(&plan));
        write(vec![segment(0, None, Some(60), 60), segment(1, Some(50), None, 10)]);
        assert!(
            matches!(inspect(&plan), PartialState::Corrupt(r) if r.contains("same frames")),
            "{:?}",
            inspect(&plan)
        );
        write(vec![segment(1, Some(50), None, 10), segment(0, None, Some(50), 50)]);
        assert!(matches!(inspect(&plan), PartialState::Corrupt(r) if r.contains("out of order")));
        write(vec![segment(0, None, Some(50), 50)]);
        std::fs::remove_file(dir.path().join("seg-00000.seg")).unwrap();
        assert!(matches!(inspect(&plan), PartialState::Corrupt(r) if r.contains("missing")));
    }

    #[test]
    fn a_run_whose_epoch_was_taken_over_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = manifest();
        first.claim("lease-1", dir.path()).unwrap();
        first.save(dir.path()).unwrap();
        let mut second = manifest();
        second.claim("lease-2", dir.path()).unwrap();
        first.video_complete = true;
        let err = first.save(dir.path()).unwrap_err();
        assert!(err.message.contains("another run"), "{err}");
        let on_disk: Manifest = serde_json::from_slice(&std::fs::read(Manifest::path(dir.path())).unwrap()).unwrap();
        assert_eq!((on_disk.epoch.as_str(), on_disk.video_complete), ("lease-2", false));
        second.save(dir.path()).unwrap();
    }
}
