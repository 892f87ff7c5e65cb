//! The quality search of a VMAF-mode library, in the transcoder child before it encodes:
//! samples of the video (`domain::quality::sample_layout`) are encoded at a candidate
//! quality by the same sessions that encode segments (in parallel, one sample each), scored
//! with libvmaf against the source's frames, and the next candidate chosen
//! (`domain::quality::next_quality`) until the highest quality value that reaches the target
//! is found. Its result is written into the partial folder (`search.json`), so a run that
//! continues the job does not search again; and after the mux the output is scored on the
//! same samples.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::decode::main_video_index;
use crate::probe::{open_input, read_packet};
use crate::recorder::Recorder;
use crate::sessions::{run_sessions, SessionMode};
use crate::vmaf::{score_pairs, window_span, Frames};
use condense::domain::encoding::{EncodeProfile, Encoder, RetryProfile};
use condense::domain::quality::{self, Next, Probe};
use condense::domain::segments::{Sessions, Span};
use condense::media::codec_params::CodecParams;
use condense::media::event::Event;
use condense::media::info::MediaInfo;
use condense::media::layout;
use condense::media::manifest::{write_durably, Segment};
use condense::media::plan::{EncodePlan, QualitySearch};
use condense::media::quality::{SearchResult, VmafScore, Window};
use condense::media::MediaError;

/// The search's result for `plan`: the one kept in the partial folder when it was made for
/// this plan and target, else a new search. None when a stop came first.
pub fn load_or_search(
    plan: &EncodePlan,
    asked: QualitySearch,
    info: &MediaInfo,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<Option<SearchResult>, MediaError> {
    if let Some(kept) = kept(plan, asked) {
        return Ok(Some(kept));
    }
    let every = quality::SEARCH_SCORE_EVERY;
    let Some(result) = search(plan, asked, info, stop, emit, Tries { fixed: false, every })? else {
        return Ok(None);
    };
    write_durably(&plan.partial_dir, layout::SEARCH_FILE, &result, "writing the search's result")?;
    Ok(Some(result))
}

/// The search's result kept in the partial folder, when it was made for this plan and
/// target.
pub fn kept(plan: &EncodePlan, asked: QualitySearch) -> Option<SearchResult> {
    let path = plan.partial_dir.join(layout::SEARCH_FILE);
    let kept = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<SearchResult>(&b).ok());
    kept.filter(|k| k.plan_digest == plan.digest() && k.asked == asked)
}

/// What `search_file` is asked.
pub struct FileSearch {
    pub encoder: Encoder,
    pub preset: Option<String>,
    /// Where it starts (the encoder's default quality when None).
    pub start: Option<u32>,
    /// Only `start` is tried (what a crf-mode library would give).
    pub fixed: bool,
    pub asked: QualitySearch,
    pub sessions: Sessions,
    /// Score one block of sample frames in this many (`domain::quality::SEARCH_SCORE_EVERY`).
    pub score_every: u32,
}

/// How a search tries its candidates.
#[derive(Clone, Copy)]
struct Tries {
    /// Only the first (`FileSearch::fixed`).
    fixed: bool,
    /// One block of frames in this many scored (`vmaf::score_frames`).
    every: u32,
}

/// The search alone, on any file (`condense crf-search`), in a folder of its own under
/// `work` (removed after).
pub fn search_file(input: &Path, request: FileSearch, work: &Path) -> Result<SearchResult, MediaError> {
    let FileSearch { encoder, preset, start, fixed, asked, sessions, score_every } = request;
    let info = crate::probe::probe(input)?;
    let profile = EncodeProfile {
        encoder,
        hardware_decode: false,
        ten_bit_allowed: true,
        preset: preset.or_else(|| encoder.default_preset().map(str::to_string)),
        quality: start.unwrap_or(encoder.profile().quality.default),
        cautious: false,
        retry_profile: RetryProfile::AsConfigured,
        rate: condense::domain::encoding::RateControl::Crf,
    };
    let mut plan = EncodePlan::new(input, &info, &profile)?;
    plan.partial_dir = work.join(format!(".condense-search-{}", std::process::id()));
    plan.sessions = sessions;
    std::fs::create_dir_all(&plan.partial_dir).map_err(|e| MediaError::from_io("creating a work folder", &e))?;
    let stop = AtomicBool::new(false);
    let result = search(&plan, asked, &info, &stop, &mut |_| {}, Tries { fixed, every: score_every });
    let _ = std::fs::remove_dir_all(&plan.partial_dir);
    result?.ok_or_else(|| MediaError::misc("the search was stopped"))
}

/// The samples of the video, as windows.
fn samples(info: &MediaInfo) -> Vec<Window> {
    let duration = info.video().and_then(|v| v.duration_seconds).or(info.duration_seconds).unwrap_or(0.0);
    quality::sample_layout(duration).into_iter().map(|(start, length)| Window { start, length }).collect()
}

fn search(
    plan: &EncodePlan,
    asked: QualitySearch,
    info: &MediaInfo,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
    tries: Tries,
) -> Result<Option<SearchResult>, MediaError> {
    let profile = plan.encoder.profile();
    let range = (profile.quality.min, profile.quality.max);
    let windows = samples(info);
    let duration = info.video().and_then(|v| v.duration_seconds).or(info.duration_seconds).unwrap_or(0.0);
    // Bounded spans (the whole video's too), so each sample can be cut for the sessions.
    let spans: Vec<Span> = {
        let input = open_input(&plan.input)?;
        let video = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
        windows.iter().map(|w| window_span(&input, video, *w, false)).collect()
    };
    let source_bytes: u64 = spans.iter().map(|s| video_bytes(&plan.input, *s)).sum::<Result<u64, _>>()?;
    if source_bytes == 0 {
        return Err(MediaError::invalid("the samples hold no video"));
    }
    let mut probes: Vec<Probe> = Vec::new();
    let mut scores: Vec<(u32, VmafScore)> = Vec::new();
    let (quality, met) = loop {
        let next = match probes.first() {
            Some(first) if tries.fixed => Next::Settle { quality: first.quality, met: first.vmaf >= asked.target_vmaf },
            _ => quality::next_quality(&probes, asked.target_vmaf, range, plan.quality()),
        };
        match next {
            Next::Try(q) => {
                let Some((score, bytes, seconds)) = probe(plan, info, &spans, q, tries.every, stop)? else {
                    return Ok(None);
                };
                let probe = Probe {
                    quality: q,
                    vmaf: score.mean,
                    percent: bytes as f64 * 100.0 / source_bytes as f64,
                    seconds,
                };
                tracing::debug!(?probe, "search probe");
                emit(Event::Probed { quality: q, vmaf: score.mean, percent: probe.percent });
                probes.push(probe);
                scores.push((q, score));
            }
            Next::Settle { quality, met } => break (quality, met),
        }
    };
    let chosen = probes.iter().find(|p| p.quality == quality).copied();
    let vmaf = scores.iter().find(|(q, _)| *q == quality).map(|(_, s)| *s);
    let (Some(chosen), Some(vmaf)) = (chosen, vmaf) else {
        return Err(MediaError::misc("the search settled on a quality it did not try"));
    };
    Ok(Some(SearchResult {
        plan_digest: plan.digest(),
        asked,
        quality,
        met,
        vmaf,
        percent: chosen.percent,
        predicted_size: (plan.source.size as f64 * chosen.percent / 100.0) as u64,
        predicted_seconds: chosen.seconds * duration / windows.iter().map(|w| w.length).sum::<f64>().max(0.001),
        probes,
        samples: windows,
    }))
}

/// Bytes of the source's main video in `span`: read from the keyframe before it to a few
/// seconds past it (packets come in decode order, a little out of presentation order).
fn video_bytes(input: &Path, span: Span) -> Result<u64, MediaError> {
    let mut input = open_input(input)?;
    let video = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let slack = input
        .streams()
        .get(video)
        .map_or(0, |s| (10.0 * f64::from(s.time_base.den) / f64::from(s.time_base.num.max(1))) as i64);
    if let Some(from) = span.from {
        // A failed seek reads from the start: slower, the same bytes.
        crate::probe::seek_before(&mut input, video, from);
    }
    let mut bytes = 0u64;
    while let Some(packet) = read_packet(&mut input, "the source")? {
        if packet.stream_index as usize != video {
            continue;
        }
        let pts = if packet.pts == rsmpeg::ffi::AV_NOPTS_VALUE { packet.dts } else { packet.pts };
        if span.to.is_some_and(|to| pts >= to.saturating_add(slack)) {
            break;
        }
        if !span.is_before(pts) && !span.is_past(pts) {
            bytes += u64::try_from(packet.size).unwrap_or(0);
        }
    }
    Ok(bytes)
}

/// The samples' segments, as the sessions finish them.
#[derive(Default)]
struct Samples {
    segments: Vec<Segment>,
    /// The encoder's stream parameters, to decode the segments with.
    params: Option<CodecParams>,
}

impl Recorder for Samples {
    fn record(
        &mut self,
        _: &EncodePlan,
        segment: Segment,
        params: Option<CodecParams>,
        _: &mut dyn FnMut(Event),
    ) -> Result<u64, MediaError> {
        let bytes = segment.bytes;
        if self.params.is_none() {
            self.params = params;
        }
        self.segments.push(segment);
        Ok(bytes)
    }

    fn frames_done(&self) -> u64 {
        self.segments.iter().map(|s| s.frames).sum()
    }

    fn bytes_done(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }
}

/// A folder removed when this is dropped, on every way out of a try.
struct SampleFolder(std::path::PathBuf);

impl Drop for SampleFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Encodes every sample at `quality` (one session each, as many at once as the plan's
/// sessions) into a folder of its own inside the partial folder, and scores them (one block
/// of frames in `every`); answers the score over all samples, the bytes encoded and the
/// seconds the encode took, or None after a stop.
fn probe(
    plan: &EncodePlan,
    info: &MediaInfo,
    spans: &[Span],
    quality: u32,
    every: u32,
    stop: &AtomicBool,
) -> Result<Option<(VmafScore, u64, f64)>, MediaError> {
    let folder = SampleFolder(plan.partial_dir.join(format!("search-{quality}")));
    let dir = folder.0.as_path();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| MediaError::from_io("creating a sample folder", &e))?;
    let mut sample_plan = plan.with_quality(quality);
    sample_plan.partial_dir = dir.to_path_buf();
    sample_plan.size_limit = None;
    sample_plan.search = None;
    // Samples are cut into segments as the encode will be (each a fresh encoder session),
    // so they score as the encode will.
    // Fewer samples than sessions: each is cut in parts, so every session encodes.
    let parts = (plan.sessions.sessions.max(1) as usize).div_ceil(spans.len().max(1));
    let pieces: Vec<Span> = spans.iter().flat_map(|span| cut(*span, parts)).collect();
    let mut samples = Samples::default();
    let mut quiet = |_: Event| {};
    let started = std::time::Instant::now();
    run_sessions(&sample_plan, info, pieces, Vec::new(), SessionMode::Sample, 0, &mut samples, stop, &mut quiet)?;
    let seconds = started.elapsed().as_secs_f64();
    if stop.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let threads = plan.sessions.sessions.max(1) * plan.sessions.threads.max(1);
    let mut parts = Vec::new();
    for span in spans {
        // The sample's segments, in order (a segment's span lies within its sample's).
        let mut files: Vec<&Segment> = samples
            .segments
            .iter()
            .filter(|s| !s.file.is_empty() && !span.is_before(s.first_pts) && !span.is_past(s.first_pts))
            .collect();
        files.sort_by_key(|s| s.first_pts);
        if files.is_empty() {
            return Err(MediaError::misc("a sample was not encoded"));
        }
        let params = samples.params.as_ref().ok_or_else(|| MediaError::misc("a sample has no encoder headers"))?;
        let reference = at_output_size(plan, Frames::open_span(&plan.input, None, |_, _| *span)?);
        let canvas = reference.canvas();
        let distorted = Frames::of_segments(files.iter().map(|s| dir.join(&s.file)).collect(), params, canvas)?;
        parts.push(score_pairs(reference, distorted, threads, every)?);
    }
    let score = VmafScore::combine(&parts).ok_or_else(|| MediaError::invalid("the samples hold no frame"))?;
    Ok(Some((score, samples.bytes_done(), seconds)))
}

/// The source's frames as the encoder was given them: where the plan scales the video
/// (maxHeight), brought to the output's size with the encoder's scaler, so a scaled encode
/// is scored at its own size against a reference scaled the same way (what the encoder
/// lost, not what the scaling took: the scaling is the library's choice, the same at every
/// quality the search tries). Else the source's frames at their size.
fn at_output_size(plan: &EncodePlan, frames: Frames) -> Frames {
    match plan.streams.as_ref().and_then(|s| s.video_size) {
        Some(size) => frames.scaled_like_encode(
            i32::try_from(size.width).unwrap_or(i32::MAX),
            i32::try_from(size.height).unwrap_or(i32::MAX),
        ),
        None => frames,
    }
}

/// `span` in `parts` pieces of equal length (itself when unbounded or one part).
fn cut(span: Span, parts: usize) -> Vec<Span> {
    let (Some(from), Some(to)) = (span.from, span.to) else { return vec![span] };
    let parts = i64::try_from(parts).unwrap_or(1).clamp(1, (to - from).max(1));
    let at = |i: i64| from + (to - from) * i / parts;
    (0..parts).map(|i| Span::new(Some(at(i)), Some(at(i + 1)))).collect()
}

/// The VMAF of the muxed `output` against the source on the search's samples (seconds from
/// each file's video start, so container time bases and offsets do not matter).
pub fn measure(plan: &EncodePlan, result: &SearchResult, output: &Path) -> Result<VmafScore, MediaError> {
    // One sample from the start is the whole video: every frame of both, whatever their ends.
    let whole = result.samples.len() == 1 && result.samples.first().is_some_and(|w| w.start == 0.0);
    let threads = plan.sessions.sessions.max(1) * plan.sessions.threads.max(1);
    let mut parts = Vec::new();
    for window in &result.samples {
        let reference = at_output_size(plan, Frames::open_window(&plan.input, None, *window, whole)?);
        let canvas = reference.canvas();
        let distorted = Frames::open_window(output, Some(canvas), *window, whole)?;
        parts.push(score_pairs(reference, distorted, threads, 1)?);
    }
    VmafScore::combine(&parts).ok_or_else(|| MediaError::invalid("the samples hold no frame"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_cut_in_equal_pieces_that_cover_it() {
        let pieces = cut(Span::new(Some(100), Some(400)), 3);
        assert_eq!(
            pieces,
            [Span::new(Some(100), Some(200)), Span::new(Some(200), Some(300)), Span::new(Some(300), Some(400))]
        );
        assert_eq!(cut(Span::new(Some(0), Some(2)), 4), [Span::new(Some(0), Some(1)), Span::new(Some(1), Some(2))]);
        assert_eq!(cut(Span::ALL, 2), [Span::ALL]);
        assert_eq!(cut(Span::new(Some(5), Some(9)), 1), [Span::new(Some(5), Some(9))]);
    }
}
