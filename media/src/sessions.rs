//! The parallel encoder sessions of one run: spans of the video taken from a queue by up to
//! `plan.sessions` threads, each with its own decoder and encoder session, every finished
//! segment handed to the run's main thread, which alone records it (`Recorder`: the
//! manifest, a helper's record, the search's samples) and reports progress. Used by the
//! transcoder's run, by helpers and by the quality search (see `SessionMode`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;

use crate::decode::{
    clean_keyframe_at, main_video_index, open_decoder_on, stream_nal_format, to_system_memory, Coding,
};
use crate::error::from_rsmpeg;
use crate::probe;
use crate::recorder::Recorder;
use crate::segment::packet_data;
use crate::segment_writer::{SegmentWriter, VideoFormat};
use crate::verify;
use condense::domain::encoding::{Encoder, Hardware};
use condense::domain::quality;
use condense::domain::segments::{self, Sessions, Span, SpanView};
use condense::media::codec_params::CodecParams;
use condense::media::event::Event;
use condense::media::hdr_metadata::{self, Carry, FrameMetadata};
use condense::media::info::MediaInfo;
use condense::media::manifest::Segment;
use condense::media::plan::{EncodePlan, PassRun};
use condense::media::{layout, partial, span_record, MediaError};

/// Who runs the sessions: it decides how spans are taken, how segment files are named and
/// what the progress reports judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionMode {
    /// A job's run: it owns the manifest, claims each span before it encodes it and waits
    /// for spans held elsewhere; its progress is a percent of the video, and it stops early
    /// when the output would not be smaller.
    Run,
    /// A helper on planned span `span`, whose claim it holds already: its segment files are
    /// named by the span, and its progress is no percent of the video; a span is too short
    /// to judge the output's size by.
    Helper { span: u32 },
    /// The quality search's samples: no claims, and nothing of the output to judge.
    Sample,
    /// The first pass of a two-pass run: every planned span whole, its statistics written
    /// (`media::transcode`); its encoded files are thrown away. No claims: no helper takes
    /// a two-pass job's spans.
    FirstPass,
}

impl SessionMode {
    /// The pass a two-pass plan's sessions encode in this mode.
    fn pass(self) -> u8 {
        if self == SessionMode::FirstPass {
            1
        } else {
            2
        }
    }
}

/// What a session tells the run's main thread, which alone writes the manifest and reports.
enum SessionEvent {
    /// A finished segment, with the encoder's stream parameters (none for an empty span).
    Segment(Segment, Option<CodecParams>),
    Failed(MediaError),
    /// A session began planned span `.0` (whose claim it holds).
    Started(u32),
    /// Another writer (a helper on another node) holds planned span `.1`; `.0` is the piece
    /// of it this run meant to encode.
    Elsewhere(Span, u32),
    /// A helper finished (part of) the claimed span and left its record: take it in, then
    /// let the claim go.
    TakeIn(partial::SpanClaim),
    /// Every segment of the claimed span was sent before this: let the claim go once they
    /// are recorded, so no helper takes a span the manifest does not show as done yet.
    Release(partial::SpanClaim),
    /// A session finished its piece of planned span `span`, having decoded and dropped
    /// `dropped` frames before its start.
    Decoded {
        span: u32,
        dropped: u64,
    },
    /// A session ended.
    Ended,
}

/// What the sessions of one run share.
struct SessionContext<'a> {
    plan: &'a EncodePlan,
    info: &'a MediaInfo,
    /// The planned cuts, which number the spans and their claims.
    boundaries: Vec<i64>,
    mode: SessionMode,
    /// Spans no session has taken yet.
    queue: Mutex<VecDeque<Span>>,
    /// A pause or shutdown: every session closes the segment it writes and takes no other.
    stop: &'a AtomicBool,
    /// A session failed: the others stop the same way.
    halt: AtomicBool,
    next_index: AtomicU32,
    segment_frames: u64,
    /// Frames encoded, and decoded then dropped, by this run; frames in open segments;
    /// sessions at work.
    encoded: AtomicU64,
    skipped: AtomicU64,
    open_frames: AtomicU64,
    active: AtomicU32,
    /// Segment files being written, for the size in progress reports.
    open_files: Mutex<Vec<std::path::PathBuf>>,
    /// Whether a session alone at work may take every session's threads (`grows`).
    grows: bool,
    /// Where the video ends, in its time base: how much is left of an unbounded span.
    video_end: Option<i64>,
    /// The points validation decodes at, which a span decoded to the end of the file must
    /// have reached: the job's validation only probed the source (`verify::validate_source`).
    points: Option<verify::Points>,
}

impl SessionContext<'_> {
    fn halted(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.halt.load(Ordering::SeqCst)
    }

    /// The threads a session opening an encoder now gives it (`segments::session_threads`).
    fn threads_now(&self) -> u32 {
        let at_work = self.active.load(Ordering::SeqCst);
        segments::session_threads(self.plan.sessions, self.grows, at_work, !self.queue_empty())
    }

    fn queue_empty(&self) -> bool {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }

    fn close_file(&self, name: &str) {
        let mut files = self.open_files.lock().unwrap_or_else(PoisonError::into_inner);
        files.retain(|p| p.file_name() != Some(std::ffi::OsStr::new(name)));
    }

    fn open_bytes(&self) -> u64 {
        let files = self.open_files.lock().unwrap_or_else(PoisonError::into_inner);
        files.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
    }

    fn segment_file(&self, index: u32) -> String {
        match self.mode {
            SessionMode::Helper { span } => layout::helper_segment_file(span, index),
            SessionMode::FirstPass => layout::first_pass_file(index),
            SessionMode::Run | SessionMode::Sample => layout::segment_file(index),
        }
    }
}

/// Runs `todo` through up to `plan.sessions` sessions, recording each finished segment with
/// `recorder` on this thread; answers the frames encoded and skipped. In a run (`mode`),
/// each span is claimed before it is encoded, and spans held elsewhere are waited for (see
/// `transcode::encode_video`).
#[allow(clippy::too_many_arguments, reason = "one run's parts, each used once; a struct would only rename them")]
pub(crate) fn run_sessions(
    plan: &EncodePlan,
    info: &MediaInfo,
    todo: Vec<Span>,
    boundaries: Vec<i64>,
    mode: SessionMode,
    next_index: u32,
    recorder: &mut dyn Recorder,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<Totals, MediaError> {
    let fps = info.video().and_then(|v| v.frame_rate).filter(|r| *r > 0.0).unwrap_or(25.0);
    let duration = info.video().and_then(|v| v.duration_seconds).or(info.duration_seconds).unwrap_or(0.0);
    let total_frames = duration * fps;
    let sessions = plan.sessions.sessions.clamp(1, u32::try_from(todo.len()).unwrap_or(u32::MAX).max(1));
    let opened = probe::open_input(&plan.input).ok().and_then(|input| Some((main_video_index(&input)?, input)));
    let video_end = info.video().and_then(|v| v.duration_seconds).or(info.duration_seconds).and_then(|d| {
        let (vi, input) = opened.as_ref()?;
        let s = input.streams().get(*vi)?;
        let start = Some(s.start_time).filter(|t| *t != ffi::AV_NOPTS_VALUE).unwrap_or(0);
        let ticks = d * f64::from(s.time_base.den) / f64::from(s.time_base.num.max(1));
        Some(start.saturating_add(ticks.round() as i64))
    });
    // A run's or a helper's span that decodes on to the end of the file checks that the
    // video reached its stated length there (samples and first passes are no such check).
    let points = match mode {
        SessionMode::Run | SessionMode::Helper { .. } => match (&opened, verify::video_length(info)) {
            (Some((vi, input)), Some(length)) => Some(verify::Points::of(input, *vi, length)?),
            _ => None,
        },
        SessionMode::Sample | SessionMode::FirstPass => None,
    };
    drop(opened);
    let shared = SessionContext {
        plan,
        info,
        boundaries,
        mode,
        queue: Mutex::new(todo.into()),
        stop,
        halt: AtomicBool::new(false),
        next_index: AtomicU32::new(next_index),
        // Two passes: one encoder session per span, so each second pass reads the statistics
        // of exactly the frames its first pass saw.
        segment_frames: if plan.two_pass { u64::MAX } else { ((plan.segment_seconds * fps).round() as u64).max(1) },
        encoded: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
        open_frames: AtomicU64::new(0),
        active: AtomicU32::new(0),
        open_files: Mutex::new(Vec::new()),
        grows: grows(plan, mode),
        video_end,
        points,
    };
    let started = Instant::now();
    let mut failure: Option<MediaError> = None;
    let mut fail = |shared: &SessionContext<'_>, e: MediaError| {
        shared.halt.store(true, Ordering::SeqCst);
        failure.get_or_insert(e);
    };
    let mut bytes_done = recorder.bytes_done();
    // The early abort: a helper's span is too short to judge, so only a job's run does.
    let size_limit = plan.size_limit.filter(|_| mode == SessionMode::Run);
    let mut over_limit = None;
    let mut first_idle: Option<Instant> = None;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<SessionEvent>();
        let shared = &shared;
        let spawn = |tx: &mpsc::Sender<SessionEvent>| {
            let tx = tx.clone();
            scope.spawn(move || session(shared, &tx));
        };
        let mut running = 0u32;
        for _ in 0..sessions {
            spawn(&tx);
            running += 1;
        }
        // Planned spans another writer holds, by number, with the piece this run meant to encode.
        let mut elsewhere: std::collections::BTreeMap<u32, Span> = std::collections::BTreeMap::new();
        // Planned spans this run's sessions encode now, and the spans last shown.
        let mut here: Vec<u32> = Vec::new();
        let mut shown: Option<Vec<SpanView>> = None;
        let mut last_shown = Instant::now();
        let mut last_report = Instant::now();
        let mut last_look = Instant::now();
        loop {
            let mut back: Vec<Span> = Vec::new();
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(SessionEvent::Segment(segment, params)) => {
                    let (frames, file) = (segment.frames, segment.file.clone());
                    let recorded = recorder.record(plan, segment, params, emit);
                    // Its frames and bytes leave the open counts only now that the manifest
                    // holds them: taken off by the session, a report in between would show
                    // progress and size falling back by a segment.
                    shared.open_frames.fetch_sub(frames, Ordering::SeqCst);
                    shared.close_file(&file);
                    match recorded {
                        Ok(bytes) => bytes_done += bytes,
                        Err(e) => fail(shared, e),
                    }
                }
                Ok(SessionEvent::Failed(e)) => fail(shared, e),
                Ok(SessionEvent::Started(span)) => {
                    here.push(span);
                    emit(Event::SpanStarted { span });
                }
                Ok(SessionEvent::Elsewhere(piece, span)) => {
                    elsewhere.insert(span, piece);
                }
                Ok(SessionEvent::TakeIn(claim)) => {
                    match recorder.take_in(plan, claim.index, &shared.next_index, emit) {
                        Ok(rest) => back = rest,
                        Err(e) => fail(shared, e),
                    }
                }
                Ok(SessionEvent::Release(claim)) => {
                    here.retain(|s| *s != claim.index);
                    drop(claim);
                }
                Ok(SessionEvent::Decoded { span, dropped }) => emit(Event::SpanDecoded { span, dropped }),
                Ok(SessionEvent::Ended) => {
                    running = running.saturating_sub(1);
                    if running > 0 && first_idle.is_none() {
                        first_idle = Some(Instant::now());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            // A span held elsewhere comes back when its holder lets go: taken in if it left
            // a record, encoded here if it did not (its node died, or it gave the span up).
            if !elsewhere.is_empty() && !shared.halted() && last_look.elapsed() >= Duration::from_millis(250) {
                last_look = Instant::now();
                let held: Vec<u32> = elsewhere.keys().copied().collect();
                for span in held {
                    match partial::claim_span(&plan.partial_dir, span) {
                        Ok(partial::Claim::Held) => {}
                        Ok(partial::Claim::Mine(claim)) => {
                            elsewhere.remove(&span);
                            match recorder.take_in(plan, claim.index, &shared.next_index, emit) {
                                Ok(rest) => back.extend(rest),
                                Err(e) => fail(shared, e),
                            }
                            drop(claim);
                        }
                        Ok(partial::Claim::Gone) => {
                            fail(shared, MediaError::misc("the partial output was removed while the video was encoded"))
                        }
                        Err(e) => fail(shared, e),
                    }
                }
            }
            if !back.is_empty() && !shared.halted() {
                let mut queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
                for span in back.into_iter().rev() {
                    queue.push_front(span);
                }
                drop(queue);
                if running < sessions.max(1) {
                    spawn(&tx);
                    running += 1;
                }
            }
            if last_report.elapsed() >= Duration::from_millis(500) {
                last_report = Instant::now();
                let frame = recorder.frames_done() + shared.open_frames.load(Ordering::SeqCst);
                let out_time = frame as f64 / fps;
                emit(Event::Progress {
                    frame,
                    fps: shared.encoded.load(Ordering::SeqCst) as f64 / started.elapsed().as_secs_f64().max(0.001),
                    out_time,
                    percent: if total_frames > 0.0 && matches!(mode, SessionMode::Run | SessionMode::FirstPass) {
                        (frame as f64 / total_frames * 100.0).clamp(0.0, 99.9)
                    } else {
                        0.0
                    },
                    size: bytes_done + shared.open_bytes(),
                    sessions: shared.active.load(Ordering::SeqCst),
                });
                let projected = size_limit.and_then(|limit| {
                    quality::projected_over(frame, total_frames, bytes_done + shared.open_bytes(), limit)
                });
                if let (Some(projected), None) = (projected, over_limit) {
                    // Every session stops where it is; the node removes the partial output.
                    over_limit = Some(projected);
                    shared.halt.store(true, Ordering::SeqCst);
                }
                // Also when nothing changed here, now and then: the node learns from the
                // answer how far the helpers have got.
                let views = recorder.views(&here);
                if views.is_some() && (views != shown || last_shown.elapsed() >= Duration::from_secs(2)) {
                    emit(Event::Spans { spans: views.clone().unwrap_or_default() });
                    shown = views;
                    last_shown = Instant::now();
                }
            }
            let queue_empty = shared.queue.lock().unwrap_or_else(PoisonError::into_inner).is_empty();
            if running == 0 && (shared.halted() || (elsewhere.is_empty() && queue_empty)) {
                break;
            }
        }
    });
    // Where the spans stand as the run ends (nothing encodes here any more).
    if let Some(views) = recorder.views(&[]) {
        emit(Event::Spans { spans: views });
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Totals {
        encoded: shared.encoded.load(Ordering::SeqCst),
        skipped: shared.skipped.load(Ordering::SeqCst),
        over_limit,
        alone_ms: first_idle.map_or(0, |at| u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX)),
    })
}

/// Whether a job's run gives a session alone at work every session's threads. Only x265's
/// pools and SVT-AV1's `lp` grow, which change no stream header (x265 writes no options
/// into them, `info=0`), so its segments join the others'. Not in two passes: a span's
/// second pass is one encoder session, as its first was. Not for helpers (one session, their
/// slot's threads) or the search's samples (tries compared with each other).
fn grows(plan: &EncodePlan, mode: SessionMode) -> bool {
    mode == SessionMode::Run && !plan.two_pass && matches!(plan.encoder, Encoder::Libx265 | Encoder::Libsvtav1)
}

/// What a run of sessions did: frames encoded and skipped, and, when it was stopped because
/// its output would not be smaller than the plan's `size_limit`, the projected size.
pub(crate) struct Totals {
    pub encoded: u64,
    pub skipped: u64,
    pub over_limit: Option<u64>,
    /// Wall time, in milliseconds, from the first session that found no span left to take
    /// while another still encoded, to the end: the tail, where fewer sessions work than
    /// the run has (those left get the idle threads where the encoder allows, `grows`).
    pub alone_ms: u64,
}

/// One encoder session: takes spans from the queue until there is none, or a stop.
fn session(shared: &SessionContext<'_>, tx: &mpsc::Sender<SessionEvent>) {
    /// Says the session ended however it ends, a panic included: the run's main thread
    /// waits for every session it started.
    struct Ending<'a>(&'a mpsc::Sender<SessionEvent>);
    impl Drop for Ending<'_> {
        fn drop(&mut self) {
            let _ = self.0.send(SessionEvent::Ended);
        }
    }
    let _ending = Ending(tx);
    take_spans(shared, tx);
}

fn take_spans(shared: &SessionContext<'_>, tx: &mpsc::Sender<SessionEvent>) {
    loop {
        if shared.halted() {
            return;
        }
        let next = shared.queue.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        let Some(span) = next else { return };
        let index = segments::planned_index(&shared.boundaries, span.from);
        let claim = if shared.mode == SessionMode::Run {
            match partial::claim_span(&shared.plan.partial_dir, index) {
                Ok(partial::Claim::Mine(claim)) => Some(claim),
                Ok(partial::Claim::Held) => {
                    let _ = tx.send(SessionEvent::Elsewhere(span, index));
                    continue;
                }
                Ok(partial::Claim::Gone) => {
                    let e = MediaError::misc("the partial output was removed while the video was encoded");
                    let _ = tx.send(SessionEvent::Failed(e));
                    return;
                }
                Err(e) => {
                    let _ = tx.send(SessionEvent::Failed(e));
                    return;
                }
            }
        } else {
            None
        };
        if let Some(claim) = claim {
            // A helper finished this span and let it go before this run reached it.
            if span_record::has_record(&shared.plan.partial_dir, index) {
                let _ = tx.send(SessionEvent::TakeIn(claim));
                continue;
            }
            let _ = tx.send(SessionEvent::Started(index));
            if !encode_at_work(shared, span, tx) {
                return;
            }
            let _ = tx.send(SessionEvent::Release(claim));
            continue;
        }
        if !encode_at_work(shared, span, tx) {
            return;
        }
    }
}

/// `encode_span`, counted among the sessions at work while it runs; false where it failed
/// (the failure sent on `tx`, for the run to stop the others).
fn encode_at_work(shared: &SessionContext<'_>, span: Span, tx: &mpsc::Sender<SessionEvent>) -> bool {
    shared.active.fetch_add(1, Ordering::SeqCst);
    let result = encode_span(shared, span, tx);
    shared.active.fetch_sub(1, Ordering::SeqCst);
    match result {
        Ok(()) => true,
        Err(e) => {
            let _ = tx.send(SessionEvent::Failed(e));
            false
        }
    }
}

/// Encodes the frames of `span` into one or more segments (a new one every
/// `segment_frames`). A stop closes the segment being written at the last frame encoded;
/// the rest of the span stays to do.
fn encode_span(shared: &SessionContext<'_>, span: Span, tx: &mpsc::Sender<SessionEvent>) -> Result<(), MediaError> {
    let mut dropped = 0;
    match run_span(shared, span, tx, true, &mut dropped)? {
        SpanRun::Finished => {}
        SpanRun::LandedLate(pts) => {
            // A seek that lands past the span's start would lose frames: decode from the
            // first frame instead (slower, never wrong).
            tracing::warn!(from = ?span.from, landed = pts, "the seek landed after the span's start; decoding from the beginning");
            run_span(shared, span, tx, false, &mut dropped)?;
        }
    }
    if shared.mode != SessionMode::Sample {
        let index = segments::planned_index(&shared.boundaries, span.from);
        let _ = tx.send(SessionEvent::Decoded { span: index, dropped });
    }
    Ok(())
}

enum SpanRun {
    Finished,
    /// The first frame decoded after the seek came after the span's start (its pts);
    /// nothing was written.
    LandedLate(i64),
}

/// Decodes from the keyframe before `span` (or from the first frame without `seek`), drops
/// the frames before it, encodes its frames, and stops at the first frame past it.
fn run_span(
    shared: &SessionContext<'_>,
    span: Span,
    tx: &mpsc::Sender<SessionEvent>,
    seek: bool,
    dropped: &mut u64,
) -> Result<SpanRun, MediaError> {
    // Two passes: this span's statistics file, written by the first pass and read by the
    // second; a second pass always encodes whole planned spans (it restarts, see
    // `transcode::passes`), so the frames are those the first pass saw.
    let span_plan;
    let plan = if shared.plan.two_pass {
        let stats = layout::pass_stats_file(segments::planned_index(&shared.boundaries, span.from));
        let pass = Some(PassRun { pass: shared.mode.pass(), stats: shared.plan.partial_dir.join(stats) });
        span_plan = EncodePlan { pass, ..shared.plan.clone() };
        &span_plan
    } else {
        shared.plan
    };
    let mut input = probe::open_input(&plan.input)?;
    let vi = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let hardware = if plan.hardware_decode { plan.encoder.profile().hardware } else { Hardware::Cpu };
    let (mut decoder, hardware_format) = open_decoder_on(&input, vi, hardware)?;
    let (time_base, frame_rate) = {
        let stream = input.streams().get(vi).ok_or_else(|| MediaError::invalid("no video stream"))?;
        let rate =
            stream.guess_framerate().filter(|r| r.num > 0 && r.den > 0).unwrap_or(ffi::AVRational { num: 25, den: 1 });
        (stream.time_base, rate)
    };
    let tb = f64::from(time_base.num) / f64::from(time_base.den);
    let start_pts = input.streams().get(vi).map(|s| s.start_time).filter(|t| *t != ffi::AV_NOPTS_VALUE).unwrap_or(0);
    // HDR10+ and Dolby Vision RPUs are read from the source's access units and kept by
    // presentation time until the decoder gives out the frame (see `media::hdr_metadata`).
    let carry = Carry::of(plan.hdr, shared.info, &plan.target_codec).map(|c| (c, stream_nal_format(&input, vi)));
    let mut dynamic: BTreeMap<i64, FrameMetadata> = BTreeMap::new();
    // The keyframe strictly before the span's start: decoding from there gives every frame
    // from the start on, whether the cut is a keyframe's presentation or decode time (the
    // frames shown just before a keyframe may be decoded after it), and with an open GOP.
    let mut sought = None;
    // A cut on a keyframe that decoding starts at cleanly (an IDR, an HEVC IRAP) is decoded
    // from there: its first packet, read to tell, goes to the decoder first, and no frame is
    // decoded to be dropped.
    let mut pending = None;
    if let Some(from) = span.from.filter(|_| seek) {
        let coding = Coding::of(&input, vi);
        match clean_keyframe_at(&mut input, vi, &coding, from)? {
            Some((pts, packet)) if pts == from => {
                pending = Some(packet);
                sought = Some(from);
            }
            _ => {
                let ret = probe::seek_before(&mut input, vi, from);
                if ret < 0 {
                    // Some inputs cannot seek: decode from the start (the look above moved
                    // the input, so it opens again) and drop what comes before.
                    tracing::warn!(code = ret, "seek failed; decoding from the start");
                    input = probe::open_input(&plan.input)?;
                } else {
                    sought = Some(from);
                }
            }
        }
    }

    let mut format: Option<VideoFormat> = None;
    let mut writer: Option<SegmentWriter> = None;
    let mut seg_from = span.from;
    let mut last_pts: Option<i64> = None;
    let mut next_synth_pts = span.from.unwrap_or(start_pts);
    let mut decode_errors = 0u32;
    let mut eof = false;
    let mut span_ended = false;
    // The last frame decoded, kept or not, and whether decoding ran out of the file.
    let mut last_decoded: Option<i64> = None;
    let mut drained = false;
    let mut writer_threads = plan.sessions.threads;

    'run: loop {
        if shared.halted() {
            break;
        }
        if !eof {
            let next = match pending.take() {
                Some(packet) => Some(packet),
                None => probe::read_packet(&mut input, "the source")?,
            };
            match next {
                Some(packet) => {
                    if packet.stream_index as usize != vi {
                        continue;
                    }
                    if let Some((what, format)) = carry.filter(|_| packet.pts != ffi::AV_NOPTS_VALUE) {
                        dynamic.insert(packet.pts, hdr_metadata::read(packet_data(&packet), format, what));
                    }
                    if let Err(e) = decoder.send_packet(Some(&packet)) {
                        decode_errors += 1;
                        tracing::debug!(error = %e, "decode error");
                        if decode_errors > 50 {
                            return Err(MediaError::invalid(format!("too many decoding errors: {e}")));
                        }
                        continue;
                    }
                }
                None => {
                    eof = true;
                    decoder.send_packet(None).map_err(|e| from_rsmpeg("flushing the decoder", &e))?;
                }
            }
        }
        let mut got_frame = false;
        loop {
            let frame = match decoder.receive_frame() {
                Ok(f) => to_system_memory(f, hardware_format)?,
                Err(RsmpegError::DecoderDrainError) => break,
                Err(RsmpegError::DecoderFlushedError) => {
                    got_frame = false;
                    eof = true;
                    break;
                }
                Err(e) => {
                    decode_errors += 1;
                    if decode_errors > 50 {
                        return Err(MediaError::invalid(format!("too many decoding errors: {e}")));
                    }
                    break;
                }
            };
            got_frame = true;
            let pts = if frame.best_effort_timestamp != ffi::AV_NOPTS_VALUE {
                frame.best_effort_timestamp
            } else {
                next_synth_pts
            };
            let step = (f64::from(frame_rate.den) / f64::from(frame_rate.num) / tb).max(1.0) as i64;
            next_synth_pts = pts + step;
            last_decoded = Some(last_decoded.map_or(pts, |l| l.max(pts)));
            // Frames come out in presentation order: what is kept for earlier times is spent.
            let frame_dynamic = dynamic.remove(&pts);
            dynamic.retain(|&at, _| at > pts);
            if let Some(from) = sought.take() {
                if pts > from {
                    return Ok(SpanRun::LandedLate(pts));
                }
            }
            if span.is_before(pts) || last_pts.is_some_and(|p| pts <= p) {
                shared.skipped.fetch_add(1, Ordering::SeqCst);
                *dropped += 1;
                continue;
            }
            if span.is_past(pts) {
                span_ended = true;
                break 'run;
            }
            let fmt = *format.get_or_insert(VideoFormat {
                width: frame.width,
                height: frame.height,
                src_pix_fmt: frame.format,
                sample_aspect_ratio: frame.sample_aspect_ratio,
                color_primaries: frame.color_primaries,
                color_trc: frame.color_trc,
                colorspace: frame.colorspace,
                color_range: frame.color_range,
                chroma_location: frame.chroma_location,
                time_base,
                frame_rate,
            });
            if frame.width != fmt.width || frame.height != fmt.height || frame.format != fmt.src_pix_fmt {
                return Err(MediaError::misc("the video changes resolution or pixel format mid-stream"));
            }
            if writer.is_none() {
                let index = shared.next_index.fetch_add(1, Ordering::SeqCst);
                writer_threads = shared.threads_now();
                let threaded;
                let session_plan = if writer_threads == plan.sessions.threads {
                    plan
                } else {
                    let sessions = Sessions { threads: writer_threads, ..plan.sessions };
                    threaded = EncodePlan { sessions, ..plan.clone() };
                    &threaded
                };
                let opened = SegmentWriter::open(session_plan, shared.info, index, shared.segment_file(index), &fmt)?;
                shared.open_files.lock().unwrap_or_else(PoisonError::into_inner).push(opened.path.clone());
                writer = Some(opened);
            }
            if let Some(w) = writer.as_mut() {
                w.push(&frame, pts, frame_dynamic)?;
                shared.encoded.fetch_add(1, Ordering::SeqCst);
                shared.open_frames.fetch_add(1, Ordering::SeqCst);
                last_pts = Some(pts);
                if plan.throttle_ms_per_frame > 0 {
                    std::thread::sleep(Duration::from_millis(plan.throttle_ms_per_frame));
                }
            }
            // A full segment is closed at once, so a kill loses less than a segment. So is one
            // whose session is now alone with cores left idle, where enough of its span is
            // left to pay for a new encoder session: the next frame opens one with them.
            let full = writer.as_ref().is_some_and(|w| w.frames >= shared.segment_frames);
            if full || (writer.is_some() && grows_now(shared, writer_threads, span, pts, tb)) {
                if let Some(full) = writer.take() {
                    let end = pts.saturating_add(1);
                    finish_segment(full, Span::new(seg_from, Some(end)), tx)?;
                    seg_from = Some(end);
                }
            }
            if shared.halted() {
                break 'run;
            }
        }
        if eof && !got_frame {
            span_ended = true;
            drained = true;
            break;
        }
    }
    // A source that ends before its stated length fails here as its validation would have,
    // before the rest of it is encoded (a span cut past the end finds no frame at once).
    if let (true, Some(points)) = (drained, &shared.points) {
        points.reached_by(last_decoded)?;
    }
    let to = if span_ended { span.to } else { last_pts.map(|p| p.saturating_add(1)) };
    match writer.take() {
        Some(w) => finish_segment(w, Span::new(seg_from, to), tx)?,
        None if span_ended && !(seg_from.is_some() && seg_from == span.to) => {
            // No frame left in this span (after a segment closed at its last frame, or the
            // rest of a span stopped right after its last frame): recorded as covered, so
            // it is not taken again.
            let empty = Segment {
                index: shared.next_index.fetch_add(1, Ordering::SeqCst),
                file: String::new(),
                span: Span::new(seg_from, span.to),
                first_pts: 0,
                last_pts: 0,
                frames: 0,
                bytes: 0,
            };
            tx.send(SessionEvent::Segment(empty, None))
                .map_err(|_| MediaError::misc("the run ended before a segment was recorded"))?;
        }
        None => {}
    }
    Ok(SpanRun::Finished)
}

/// Whether a session whose encoder has `threads` should close its segment after the frame at
/// `pts` and open one with more: it is now alone at work with the job's other cores idle,
/// and at least `MIN_SPAN_SECONDS` of its span is left (a new encoder session costs a
/// keyframe and its lookahead's start).
fn grows_now(shared: &SessionContext<'_>, threads: u32, span: Span, pts: i64, tb: f64) -> bool {
    if !shared.grows || shared.threads_now() <= threads {
        return false;
    }
    let Some(end) = span.to.or(shared.video_end) else { return false };
    (end.saturating_sub(pts) as f64) * tb >= segments::MIN_SPAN_SECONDS
}

/// Closes a segment durably and hands it to the main thread to record.
fn finish_segment(writer: SegmentWriter, span: Span, tx: &mpsc::Sender<SessionEvent>) -> Result<(), MediaError> {
    let (segment, params) = writer.finish(span)?;
    tx.send(SessionEvent::Segment(segment, Some(params)))
        .map_err(|_| MediaError::misc("the run ended before a segment was recorded"))
}
