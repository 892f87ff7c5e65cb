//! The transcoder proper, run inside the `condense-media transcode` child process: decodes the
//! source's main video stream and encodes it into segments (each segment is a fresh encoder
//! session, so it starts on a keyframe and stands alone), recording each finished segment in
//! the manifest. The video is first cut into spans (see `plan_boundaries`); several sessions,
//! each in its own thread with its own decoder, encode spans at the same time (see
//! `domain::segments` and docs/ARCHITECTURE.md, "Segments"). A stop request closes the
//! segments in progress at the last frame encoded, so a pause loses nothing; a kill loses at
//! most those segments. When the video is complete the segments are muxed, in the order of
//! their spans, with the source's other streams (see `mux`). Converted and added audio is
//! encoded meanwhile, on a thread of its own at the lowest priority (see `audio_ahead`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

use rsmpeg::ffi;

use crate::audio_ahead;
use crate::decode::{clean_keyframe_at, main_video_index, Coding};
use crate::mux;
use crate::probe;
use crate::recorder::{span_views, Recorder};
use crate::sessions::{run_sessions, SessionMode};
use condense::domain::job::FailureCode;
use condense::domain::segments::{self, Keyframe, Span};
use condense::host::disk;
use condense::media::codec_params::CodecParams;
use condense::media::event::{cpu_time_ms, Event, PhaseClock, RunEnd};
use condense::media::info::MediaInfo;
use condense::media::manifest::{inspect, Manifest, PartialState, Run, Segment};
use condense::media::plan::{EncodePlan, RunScope};
use condense::media::{layout, partial, span_record, MediaError};

/// Runs (or continues) the encode described by `plan`.
pub fn transcode(plan: &EncodePlan, stop: &AtomicBool, emit: &mut dyn FnMut(Event)) -> Result<RunEnd, MediaError> {
    let wall = Instant::now();
    if let Some(growing) = &plan.growing {
        crate::growing::expect(growing);
    }
    // Where the run's time goes, said with its end (`Event::Done`).
    let mut clock = PhaseClock::start();
    // A stream the output cannot hold refuses the file before anything is written.
    mux::check_streams(plan)?;
    // One writer per partial output: the lock comes before anything else, and is held
    // (by this process's open file description) until the run ends, however it ends.
    let created = std::fs::symlink_metadata(&plan.partial_dir).is_err();
    let lock = match partial::lock_run(&plan.partial_dir)? {
        Ok(lock) => lock,
        Err(partial::Held::Busy) => return Ok(RunEnd::Busy),
    };
    // From here on the folder is reached through the lock's handle, never by its name: a
    // link put at the name while the run goes on leads nowhere (`media::handle`). The plan
    // helpers read keeps the name (they open their own handle on it).
    let published = plan;
    let held_plan = EncodePlan { partial_dir: lock.dir().to_path_buf(), ..plan.clone() };
    let plan = &held_plan;
    // A start that fails before writing anything leaves no folder it made.
    let refuse = |lock: partial::PartialLock, e: MediaError| {
        if created {
            let _ = lock.remove();
        }
        e
    };
    let info = match probe::probe(&plan.input) {
        Ok(info) => info,
        Err(e) => return Err(refuse(lock, e)),
    };
    // VMAF mode: the quality comes from the search (kept in the folder for a later run).
    let searched = match plan.search {
        Some(asked) => {
            clock.lap("start");
            let found = if plan.scope == RunScope::Mux {
                // Mux only: the search the encoding node made must be here; none is made.
                match crate::search::kept(plan, asked) {
                    Some(kept) => Some(kept),
                    None => return Err(refuse(lock, not_whole("the quality search's result"))),
                }
            } else {
                crate::search::load_or_search(plan, asked, &info, stop, emit)?
            };
            match found {
                Some(result) => {
                    clock.lap("search");
                    Some(result)
                }
                None => return Ok(RunEnd::Paused),
            }
        }
        None => None,
    };
    let searched_plan;
    let plan = match &searched {
        Some(result) => {
            emit(Event::Searched {
                quality: result.quality,
                met: result.met,
                vmaf: result.vmaf.mean,
                vmaf_p5: result.vmaf.p5,
                percent: result.percent,
                predicted_size: result.predicted_size,
                max_size_percent: result.asked.max_size_percent,
            });
            if result.too_large() {
                // Nothing is encoded; the node removes the folder.
                return Ok(RunEnd::NotSmaller);
            }
            searched_plan = plan.with_quality(result.quality);
            &searched_plan
        }
        None => plan,
    };
    let state = inspect(plan);
    // Check room before writing anything: segments plus the final file need about the
    // output's size twice, minus what finished segments already hold.
    let kept: u64 = match &state {
        PartialState::Valid(m) => m.segments.iter().map(|s| s.bytes).sum(),
        _ => 0,
    };
    let probe_dir = plan.partial_dir.as_path();
    let free = disk::space(probe_dir).map_err(|e| MediaError::from_io("checking free space", &e))?.free;
    let needed = plan.min_free_bytes.saturating_sub(kept);
    if free < needed {
        let e = MediaError::new(
            FailureCode::InsufficientDiskSpace,
            format!("{} has {free} bytes free; encoding needs {needed}", published.partial_dir.display()),
        );
        return Err(refuse(lock, e));
    }
    // Mux only: what the encoding node uploaded is taken as it is or refused, never
    // started over here.
    if plan.scope == RunScope::Mux {
        match &state {
            PartialState::Valid(m) if m.video_complete => {}
            PartialState::Valid(_) => return Err(refuse(lock, not_whole("every segment of the video"))),
            PartialState::Missing => return Err(refuse(lock, not_whole("a manifest"))),
            PartialState::Corrupt(why) => return Err(refuse(lock, not_whole(why))),
        }
    }
    let mut reset = None;
    let mut manifest = match state {
        PartialState::Valid(m) => m,
        PartialState::Missing => Manifest::new(plan),
        PartialState::Corrupt(reason) => {
            lock.clear()?;
            reset = Some(reason);
            Manifest::new(plan)
        }
    };
    manifest.claim(&plan.epoch, &plan.partial_dir)?;
    // Helpers on other nodes encode spans by this run's plan, and leave records of what
    // they finished since the last run: taken in before anything else is counted.
    span_record::publish_plan(published, plan)?;
    let next_index = AtomicU32::new(manifest.next_index());
    span_record::take_in_all(plan, &mut manifest, &next_index)?;
    // Two passes: a second pass cut short is started over, never continued (see `passes`);
    // its segments go before anything is counted as kept.
    let second_pass_restarts = plan.two_pass && !manifest.video_complete && manifest.first_pass_done;
    if plan.two_pass && !manifest.video_complete && !manifest.segments.is_empty() {
        manifest.segments.clear();
        manifest.video = None;
        manifest.save(&plan.partial_dir)?;
    }
    remove_strays(&plan.partial_dir, &manifest)?;
    emit(Event::Started {
        resume_after_frames: manifest.frames_done(),
        segments_kept: u32::try_from(manifest.segments.len()).unwrap_or(u32::MAX),
        partial_reset: reset,
    });

    // The planned audio, encoded while the video is (unless a finished file is kept from an
    // earlier run). Dropped on every way out but the mux, which stops it.
    // A run that stops before the mux leaves the audio made too, for the node to upload.
    let ahead = if manifest.video_complete && plan.scope != RunScope::Encode { None } else { audio_ahead::start(plan) };
    clock.lap("start");
    let (mut encoded, mut skipped, mut alone_ms) = (0, 0, 0);
    if !manifest.video_complete {
        if plan.two_pass && !passes(plan, &info, &mut manifest, second_pass_restarts, stop, emit)? {
            manifest.runs.push(Run { frames_encoded: 0, frames_skipped: 0, ended: "paused in the first pass".into() });
            manifest.save(&plan.partial_dir)?;
            emit(Event::Paused { frames_done: 0, segments: 0 });
            return Ok(RunEnd::Paused);
        }
        if plan.two_pass {
            clock.lap("first pass");
        }
        let end = encode_video(plan, &info, &mut manifest, stop, emit, &mut clock)?;
        encoded = end.frames_encoded;
        skipped = end.frames_skipped;
        alone_ms = end.alone_ms;
        if let VideoEnding::OverLimit { projected } = end.end {
            // Nothing of this output is worth keeping; the node removes the folder.
            let limit = plan.size_limit.unwrap_or(0);
            emit(Event::NotSmaller { projected, limit, frames_done: manifest.frames_done() });
            return Ok(RunEnd::NotSmaller);
        }
        let paused = matches!(end.end, VideoEnding::Paused);
        manifest.runs.push(Run {
            frames_encoded: encoded,
            frames_skipped: skipped,
            ended: if paused { "paused" } else { "video complete" }.into(),
        });
        manifest.save(&plan.partial_dir)?;
        if paused {
            emit(Event::Paused {
                frames_done: manifest.frames_done(),
                segments: u32::try_from(manifest.segments.len()).unwrap_or(u32::MAX),
            });
            return Ok(RunEnd::Paused);
        }
    }
    if let Some(audio) = ahead {
        audio.finish();
        // What the audio thread had left when the video ended.
        clock.lap("audio");
    }
    // A run that stops before the mux (`RunScope::Encode`) has no output: the main node
    // muxes what this node uploads.
    let (output, size) = if plan.scope == RunScope::Encode {
        (String::new(), 0)
    } else {
        emit(Event::Muxing);
        let output = plan.output_path();
        mux::mux(plan, &info, &manifest, &output)?;
        clock.lap("mux");
        if let Some(result) = &searched {
            // What the output scores is a record, not a gate: a failure to score it is logged.
            match crate::search::measure(plan, result, &output) {
                Ok(score) => emit(Event::Measured { mean: score.mean, p5: score.p5 }),
                Err(e) => tracing::warn!(error = %e.message, "the output's VMAF could not be measured"),
            }
            clock.lap("measure");
        }
        let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
        (published.output_path().display().to_string(), size)
    };
    emit(Event::Done {
        output,
        size,
        frames_encoded_this_run: encoded,
        frames_skipped_this_run: skipped,
        cpu_ms: cpu_time_ms(),
        wall_ms: u64::try_from(wall.elapsed().as_millis()).unwrap_or(u64::MAX),
        phases: clock.phases(),
        alone_ms,
    });
    Ok(RunEnd::Completed)
}

/// A mux-only run's refusal of a partial folder that lacks `what` (`RunScope::Mux`).
fn not_whole(what: &str) -> MediaError {
    MediaError::misc(format!("the uploaded partial output is not whole: {what} is missing or does not match the plan"))
}

/// Two passes (x265; docs/ARCHITECTURE.md, "Two-pass encoding"). The first pass runs over
/// every planned span whole, one encoder session each, writing that span's statistics to its
/// own file in the partial folder (through the folder's handle); what it encodes is thrown
/// away. A first pass cut short (a pause, a kill, a crash) runs again from its start, as
/// the specification says, since x265 cannot continue its statistics. The second pass, the
/// encode that is kept, reads them: each session must see exactly the frames its span's
/// first pass saw, and a pause closes a segment mid-span, so a second pass cut short starts
/// over too (the caller has dropped its segments; `restarts` says one was). Answers false
/// when stopped during the first pass.
fn passes(
    plan: &EncodePlan,
    info: &MediaInfo,
    manifest: &mut Manifest,
    restarts: bool,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<bool, MediaError> {
    let planned_before = manifest.boundaries.is_some();
    if manifest.boundaries.is_none() {
        manifest.boundaries = Some(plan_boundaries(plan, info)?);
        manifest.save(&plan.partial_dir)?;
    }
    let boundaries = manifest.boundaries.clone().unwrap_or_default();
    if !manifest.first_pass_done {
        remove_pass_stats(&plan.partial_dir)?;
        emit(Event::Pass { pass: 1, restarted: planned_before });
        let mut first = FirstPass::default();
        let spans = segments::spans(&boundaries);
        run_sessions(plan, info, spans, boundaries.clone(), SessionMode::FirstPass, 0, &mut first, stop, emit)?;
        let left = segments::remaining(&boundaries, &first.done);
        if !left.is_empty() {
            if !stop.load(Ordering::SeqCst) {
                return Err(MediaError::misc(format!(
                    "{} span(s) of the video were left out of the first pass",
                    left.len()
                )));
            }
            return Ok(false);
        }
        if first.frames == 0 {
            return Err(MediaError::invalid("no video frame could be decoded"));
        }
        manifest.first_pass_done = true;
        manifest.save(&plan.partial_dir)?;
    }
    emit(Event::Pass { pass: 2, restarted: restarts });
    Ok(true)
}

/// Deletes the statistics of an earlier first pass (and x265's files beside them).
fn remove_pass_stats(dir: &Path) -> Result<(), MediaError> {
    let entries = std::fs::read_dir(dir).map_err(|e| MediaError::from_io("reading the partial output", &e))?;
    for entry in entries.flatten() {
        if layout::is_pass_stats(&entry.file_name().to_string_lossy()) {
            std::fs::remove_file(entry.path())
                .map_err(|e| MediaError::from_io("removing a first pass's statistics", &e))?;
        }
    }
    Ok(())
}

/// Where a first pass's sessions hand their finished spans: only which spans were covered
/// and how many frames; the encoded files are removed at once (their statistics are what
/// the pass is for).
#[derive(Default)]
struct FirstPass {
    done: Vec<Span>,
    frames: u64,
}

impl Recorder for FirstPass {
    fn record(
        &mut self,
        plan: &EncodePlan,
        segment: Segment,
        _params: Option<CodecParams>,
        _emit: &mut dyn FnMut(Event),
    ) -> Result<u64, MediaError> {
        if !segment.file.is_empty() {
            let _ = std::fs::remove_file(plan.partial_dir.join(&segment.file));
        }
        self.frames += segment.frames;
        self.done.push(segment.span);
        Ok(0)
    }

    fn frames_done(&self) -> u64 {
        self.frames
    }

    fn bytes_done(&self) -> u64 {
        0
    }
}

/// Deletes files the manifest does not list: a segment cut short by a kill, an old output,
/// a helper's leftovers. What a helper is writing now (its span's claim is held) stays.
fn remove_strays(dir: &Path, manifest: &Manifest) -> Result<(), MediaError> {
    let entries = std::fs::read_dir(dir).map_err(|e| MediaError::from_io("reading the partial output", &e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let listed = manifest.segments.iter().any(|s| s.file == name);
        if layout::helper_span_of(&name).is_some_and(|span| partial::span_held(dir, span)) {
            continue;
        }
        if !listed && !layout::is_bookkeeping(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

struct VideoEnd {
    end: VideoEnding,
    frames_encoded: u64,
    frames_skipped: u64,
    /// `sessions::Totals::alone_ms`.
    alone_ms: u64,
}

enum VideoEnding {
    Complete,
    Paused,
    /// Stopped early: the output, projected, would pass the plan's `size_limit`.
    OverLimit {
        projected: u64,
    },
}

/// Containers with an index of the video's keyframes that the demuxer reads with the header
/// (Matroska's cues, MP4's sample tables), and whose seek goes by it: only these are cut
/// into spans encoded at once. Others (MPEG-TS and -PS seek by byte position, AVI's index
/// counts frames) are encoded as one span.
fn cuts_exactly(container: &str) -> bool {
    container.split(',').any(|name| matches!(name, "matroska" | "webm" | "mov" | "mp4"))
}

/// Where to cut the video: keyframes from the demuxer's index, about `segment_seconds`
/// apart (no pass over the file), or, for a video too short to give every session three
/// spans so, equal spans cut at any frame (`segments::even_boundaries`). None with a single session whose spans no helper may take,
/// or a container without such an index. The index gives presentation times (Matroska) or decode times (MP4) of the
/// keyframes; either is a valid cut, because a session starts decoding at the keyframe
/// before its span (see `sessions::encode_span`).
fn plan_boundaries(plan: &EncodePlan, info: &MediaInfo) -> Result<Vec<i64>, MediaError> {
    if (plan.sessions.sessions <= 1 && !plan.shared_spans) || !cuts_exactly(&info.container) {
        return Ok(Vec::new());
    }
    let mut input = probe::open_input(&plan.input)?;
    let vi = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let (tb, raw, start, rate) = {
        let stream = input.streams().get(vi).ok_or_else(|| MediaError::invalid("no video stream"))?;
        let start = Some(stream.start_time).filter(|t| *t != ffi::AV_NOPTS_VALUE).unwrap_or(0);
        let rate = stream.guess_framerate().filter(|r| r.num > 0 && r.den > 0);
        (stream.time_base, stream.as_ptr().cast_mut(), start, rate)
    };
    let every = (plan.segment_seconds * f64::from(tb.den) / f64::from(tb.num.max(1))).round() as i64;
    // Helpers on other nodes count as a second session: spans are shared either way.
    let sessions = plan.sessions.sessions.max(if plan.shared_spans { 2 } else { 1 });
    let duration = info.video().and_then(|v| v.duration_seconds).or(info.duration_seconds);
    let wanted = segments::spans_wanted(plan.segment_seconds, duration, sessions);
    // SAFETY: reads the index of a stream of an input we hold open (the stream lives as
    // long as the input); FFmpeg returns null for an entry out of range.
    let keyframes = |raw: *mut ffi::AVStream| -> Vec<i64> {
        unsafe {
            let n = ffi::avformat_index_get_entries_count(raw);
            (0..n)
                .filter_map(|i| ffi::avformat_index_get_entry(raw, i).as_ref())
                .filter(|e| e.flags() & ffi::AVINDEX_KEYFRAME as i32 != 0)
                .map(|e| e.timestamp)
                .collect()
        }
    };
    // Matroska reads its cues at the first seek, not with the header (which indexes only
    // the first cluster's keyframe). A seek that fails (or a read error in the cues) leaves
    // the index as the header made it: fewer spans, or one.
    // SAFETY: seeking an open input context we own.
    let ret = unsafe {
        ffi::av_seek_frame(input.as_mut_ptr(), i32::try_from(vi).unwrap_or(0), start, ffi::AVSEEK_FLAG_BACKWARD as i32)
    };
    if ret < 0 {
        tracing::debug!(code = ret, "seek failed; the index is what the header gave");
    }
    let keyframes = keyframes(raw);
    // Whether decoding starts cleanly at a keyframe (and its presentation time, where MP4's
    // index gives its decode time) is read from its packet: one seek and read each, so only
    // for the keyframes a cut may go onto.
    let coding = Coding::of(&input, vi);
    // Not for a copy still downloading (issue 39): each look waits for the download to
    // reach its keyframe, most of them far into the file; its spans decode from the
    // keyframe before their cut instead, which is always right.
    let growing = crate::growing::of(&plan.input).is_some();
    let mut clean_at = |at: i64| -> Result<Option<i64>, MediaError> {
        if growing {
            return Ok(None);
        }
        Ok(clean_keyframe_at(&mut input, vi, &coding, at)?.map(|(pts, _)| pts))
    };
    Ok(match (wanted, rate) {
        // Equal spans, cut at frames wherever the keyframes are (a source with one keyframe
        // every 10 s still splits evenly): each session decodes from the keyframe before its
        // span and drops the frames before it, or from its cut where that is a clean
        // keyframe.
        (Some(spans), Some(rate)) => {
            let ticks = |seconds: f64| seconds * f64::from(tb.den) / f64::from(tb.num.max(1));
            let end = start.saturating_add(ticks(duration.unwrap_or(0.0)).round() as i64);
            let per_frame = ticks(f64::from(rate.den) / f64::from(rate.num));
            let grid = segments::grid_cuts(start, end, spans, per_frame);
            // Both rules reach `KEYFRAME_SNAP_FRAMES` at most; twice that allows for a decode
            // time ahead of the presentation time.
            let reach = (2.0 * segments::KEYFRAME_SNAP_FRAMES * per_frame).ceil() as i64;
            let mut known = Vec::with_capacity(keyframes.len());
            for index in keyframes {
                let near = grid.iter().any(|g| g.abs_diff(index) <= reach.unsigned_abs());
                known.push(Keyframe { index, clean_at: if near { clean_at(index)? } else { None } });
            }
            segments::even_boundaries(&known, start, end, spans, per_frame)
        }
        // Cuts at keyframes: a clean one's presentation time, so its span decodes from its
        // cut (the same time in Matroska's index; MP4's gives its decode time).
        _ => {
            let mut cuts: Vec<i64> = Vec::new();
            for index in segments::boundaries(&keyframes, every) {
                let cut = clean_at(index)?.filter(|pts| *pts >= index).unwrap_or(index);
                if cuts.last().is_none_or(|last| cut > *last) {
                    cuts.push(cut);
                }
            }
            cuts
        }
    })
}

/// Encodes every span of the video that the manifest does not hold yet, `plan.sessions`
/// spans at a time, each in its own thread with its own decoder and encoder session. Spans
/// that helpers on other nodes hold are left to them, and taken in when they finish (or
/// encoded here when their helper went away without finishing).
fn encode_video(
    plan: &EncodePlan,
    info: &MediaInfo,
    manifest: &mut Manifest,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
    clock: &mut PhaseClock,
) -> Result<VideoEnd, MediaError> {
    if manifest.boundaries.is_none() {
        manifest.boundaries = Some(plan_boundaries(plan, info)?);
        manifest.save(&plan.partial_dir)?;
        clock.lap("spans");
    }
    let boundaries = manifest.boundaries.clone().unwrap_or_default();
    if !boundaries.is_empty() {
        emit(Event::Spans { spans: span_views(manifest, &[]) });
    }
    let todo = manifest.remaining();
    let next_index = manifest.next_index();
    let totals = run_sessions(plan, info, todo, boundaries, SessionMode::Run, next_index, manifest, stop, emit)?;
    clock.lap("video");
    let (frames_encoded, frames_skipped, alone_ms) = (totals.encoded, totals.skipped, totals.alone_ms);
    if let Some(projected) = totals.over_limit {
        return Ok(VideoEnd { end: VideoEnding::OverLimit { projected }, frames_encoded, frames_skipped, alone_ms });
    }
    let left = manifest.remaining();
    if left.is_empty() {
        if manifest.frames_done() == 0 {
            return Err(MediaError::invalid("no video frame could be decoded"));
        }
        manifest.video_complete = true;
        return Ok(VideoEnd { end: VideoEnding::Complete, frames_encoded, frames_skipped, alone_ms });
    }
    if !stop.load(Ordering::SeqCst) {
        // Every session covers its whole span unless stopped: a gap here is a defect, and
        // muxing over it would drop frames.
        return Err(MediaError::misc(format!("{} span(s) of the video were left unencoded", left.len())));
    }
    Ok(VideoEnd { end: VideoEnding::Paused, frames_encoded, frames_skipped, alone_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_containers_that_seek_exactly_are_cut_into_spans() {
        for exact in ["matroska,webm", "mov,mp4,m4a,3gp,3g2,mj2"] {
            assert!(cuts_exactly(exact), "{exact}");
        }
        for one_span in ["mpegts", "mpeg", "avi", "flv", "asf", ""] {
            assert!(!cuts_exactly(one_span), "{one_span}");
        }
    }
}
