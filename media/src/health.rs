//! A library health check of one file (issue 38), run in a `condense-media media` child:
//! `quick` parses the headers, demuxes every packet and decodes keyframes; `thorough` decodes
//! every frame of every video and audio stream. The file is only read. What each depth
//! checks is described in docs/verification.md, "Library health checks".

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use condense::media::health::{Depth, FileHealth, StreamErrors, Verdict};
use rsmpeg::avcodec::{AVCodec, AVCodecContext, AVPacket};
use rsmpeg::avformat::AVFormatContextInput;
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use crate::error::{av_code, av_error_text};
use crate::probe::open_input;

/// In `quick`, a video keyframe is decoded when it lies at least this far (in seconds) past
/// the last one decoded: every keyframe of a short file, one every 10 s of a film (a 2 h film
/// has 720 decodes of one picture each, a few seconds in all; see BENCHMARKS.md).
const KEYFRAME_SPACING_SECONDS: f64 = 10.0;

/// A truncated file ends before its container's stated duration by more than this: 1 s or
/// 2 %, whichever is larger (muxers round, and streams end a frame apart).
pub fn duration_tolerance(stated_seconds: f64) -> f64 {
    (stated_seconds * 0.02).max(1.0)
}

/// Errors read in a row from the demuxer after which the rest of the file is given up on:
/// some demuxers answer the same error again without moving on.
const MAX_READ_ERRORS_IN_A_ROW: u32 = 100;

/// Rounds of a decoder's send and receive loops before it is given up on for this packet:
/// a decoder that answers neither a frame nor "need more" cannot hold the check forever.
const MAX_TRIES: usize = 100_000;

/// Log lines kept between two drains; past it lines are only counted.
const MAX_LOG_LINES: usize = 1000;

/// FFmpeg's error messages met while a check runs: decoders report most damage (a CRC
/// mismatch, a macroblock that does not parse) only in the log, concealing it in the picture.
/// Each line with the stream it came from (None: the demuxer or an unknown context).
static LOGGED: Mutex<Vec<(Option<usize>, String)>> = Mutex::new(Vec::new());
/// Lines dropped past `MAX_LOG_LINES`, counted all the same.
static DROPPED: Mutex<Vec<Option<usize>>> = Mutex::new(Vec::new());
static CAPTURING: AtomicBool = AtomicBool::new(false);

/// The stream a decoder's log line is about: its context's `opaque` holds the stream index
/// plus one (set in `open_decoder`; FFmpeg's frame-thread copies of a context keep it).
///
/// # Safety
/// `avcl` is null or points at a struct whose first field is an `AVClass` pointer, as
/// `av_log` requires.
unsafe fn stream_of(avcl: *mut c_void) -> Option<usize> {
    if avcl.is_null() {
        return None;
    }
    // SAFETY: as the function's contract says.
    unsafe {
        let class = *(avcl as *const *const ffi::AVClass);
        if class != ffi::avcodec_get_class() {
            return None;
        }
        let opaque = (*(avcl as *const ffi::AVCodecContext)).opaque as usize;
        opaque.checked_sub(1).filter(|i| *i < 1 << 20)
    }
}

unsafe extern "C" fn capture(avcl: *mut c_void, level: c_int, fmt: *const c_char, vl: *mut ffi::__va_list_tag) {
    if !CAPTURING.load(Ordering::Relaxed) {
        // SAFETY: hands FFmpeg's own arguments on unchanged.
        unsafe { ffi::av_log_default_callback(avcl, level, fmt, vl) };
        return;
    }
    if level > ffi::AV_LOG_ERROR as c_int {
        return;
    }
    let mut buf = [0 as c_char; 512];
    let mut print_prefix: c_int = 0;
    // SAFETY: FFmpeg's arguments, formatted into a buffer of the size given; `stream_of`
    // gets what av_log got.
    let (line, stream) = unsafe {
        ffi::av_log_format_line2(avcl, level, fmt, vl, buf.as_mut_ptr(), buf.len() as c_int, &mut print_prefix);
        (CStr::from_ptr(buf.as_ptr()).to_string_lossy().trim().to_string(), stream_of(avcl))
    };
    if line.is_empty() {
        return;
    }
    // A poisoned lock only means a panic elsewhere; the lines are still good.
    let mut logged = LOGGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if logged.len() < MAX_LOG_LINES {
        logged.push((stream, line));
    } else {
        drop(logged);
        DROPPED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(stream);
    }
}

/// Routes FFmpeg's log into `LOGGED` while it lives.
struct Capture;

impl Capture {
    fn start() -> Capture {
        LOGGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        DROPPED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        // SAFETY: `capture` is safe to call from any thread at any time.
        unsafe { ffi::av_log_set_callback(Some(capture)) };
        CAPTURING.store(true, Ordering::SeqCst);
        Capture
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        CAPTURING.store(false, Ordering::SeqCst);
    }
}

/// One stream as the check follows it.
struct Stream {
    index: usize,
    kind: &'static str,
    codec: String,
    time_base: ffi::AVRational,
    /// The stream's start in its time base (the file's start time).
    start: i64,
    last_dts: Option<i64>,
    /// The latest packet end seen, in seconds from the file's start.
    end: Option<f64>,
    decoder: Option<AVCodecContext>,
    /// Times of the packets last sent to the decoder: a log line from a decoder thread is
    /// about one of them (frame threads hold up to their count), placed at the earliest.
    in_flight: VecDeque<f64>,
    in_flight_max: usize,
    /// In `quick`, the time of the last keyframe decoded.
    last_keyframe: Option<f64>,
    errors: u64,
}

impl Stream {
    fn seconds(&self, ts: i64) -> f64 {
        if self.time_base.den == 0 {
            return 0.0;
        }
        (ts.saturating_sub(self.start)) as f64 * f64::from(self.time_base.num) / f64::from(self.time_base.den)
    }

    fn what(&self) -> String {
        format!("stream {} ({} {})", self.index, self.kind, self.codec)
    }

    fn sent(&mut self, seconds: f64) {
        self.in_flight.push_back(seconds);
        while self.in_flight.len() > self.in_flight_max {
            self.in_flight.pop_front();
        }
    }
}

/// What the check has found so far.
#[derive(Default)]
struct Findings {
    /// Errors of no one stream (the demuxer's, the duration).
    file_errors: u64,
    /// The earliest error: its time and words.
    first: Option<(f64, String)>,
    /// The time of the last packet read, for errors of the demuxer.
    now: f64,
}

impl Findings {
    fn note(&mut self, streams: &mut [Stream], stream: Option<usize>, seconds: f64, message: String) {
        match stream.and_then(|i| streams.get_mut(i)) {
            Some(s) => s.errors += 1,
            None => self.file_errors += 1,
        }
        let seconds = seconds.max(0.0);
        if self.first.as_ref().is_none_or(|(t, _)| seconds < *t) {
            self.first = Some((seconds, message));
        }
    }

    /// Counts the log lines FFmpeg wrote since the last drain.
    fn drain_log(&mut self, streams: &mut [Stream]) {
        let lines = std::mem::take(&mut *LOGGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let dropped = std::mem::take(&mut *DROPPED.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for (stream, line) in lines {
            let (at, what) = match stream.and_then(|i| streams.get(i)) {
                Some(s) => (s.in_flight.iter().copied().reduce(f64::min).unwrap_or(self.now), s.what()),
                None => (self.now, "reading the file".to_string()),
            };
            self.note(streams, stream, at, format!("{what}: {line}"));
        }
        for stream in dropped {
            let now = self.now;
            self.note(streams, stream, now, String::new());
        }
    }
}

fn kind_of(codec_type: ffi::AVMediaType) -> &'static str {
    match codec_type {
        ffi::AVMediaType_AVMEDIA_TYPE_VIDEO => "video",
        ffi::AVMediaType_AVMEDIA_TYPE_AUDIO => "audio",
        ffi::AVMediaType_AVMEDIA_TYPE_SUBTITLE => "subtitle",
        ffi::AVMediaType_AVMEDIA_TYPE_ATTACHMENT => "attachment",
        ffi::AVMediaType_AVMEDIA_TYPE_DATA => "data",
        _ => "unknown",
    }
}

/// Opens stream `index`'s decoder to report errors: CRC checks on (FLAC, MP3 and others
/// only check their CRCs when asked), `threads` threads (0: FFmpeg's choice, frame and
/// slice threads, as the `ffmpeg` program decodes). `Ok(None)`: no decoder for its codec
/// here, so it cannot be judged. `Err`: its headers do not open one.
fn open_decoder(input: &AVFormatContextInput, index: usize, threads: i32) -> Result<Option<AVCodecContext>, String> {
    let stream = input.streams().get(index).ok_or("no such stream")?;
    let par = stream.codecpar();
    let Some(decoder) = AVCodec::find_decoder(par.codec_id) else { return Ok(None) };
    let mut ctx = crate::context::codec_context(&decoder).map_err(|e| e.message)?;
    ctx.apply_codecpar(&par).map_err(|e| format!("its parameters do not apply: {e}"))?;
    // SAFETY: plain field writes before the decoder is opened.
    unsafe {
        let raw = ctx.deref_mut();
        raw.pkt_timebase = stream.time_base;
        raw.thread_count = threads;
        raw.thread_type = (ffi::FF_THREAD_FRAME | ffi::FF_THREAD_SLICE) as c_int;
        raw.err_recognition |= ffi::AV_EF_CRCCHECK as c_int;
        raw.opaque = (index + 1) as *mut c_void;
    }
    ctx.open(None).map_err(|e| format!("its decoder does not open: {e}"))?;
    Ok(Some(ctx))
}

/// Checks one file at `depth`. Never fails: a file that cannot be read is `unreadable`.
pub fn check(path: &Path, depth: Depth) -> FileHealth {
    let unreadable = |message: String| FileHealth {
        depth,
        verdict: Verdict::Unreadable,
        first_error_seconds: None,
        message: Some(message),
        error_count: 0,
        streams: Vec::new(),
    };
    let mut input = match open_input(path) {
        Ok(input) => input,
        Err(e) => return unreadable(e.message),
    };
    if input.nb_streams == 0 || input.streams.is_null() {
        return unreadable(format!("{}: no streams", path.display()));
    }
    let _capture = Capture::start();
    let start = if input.start_time != ffi::AV_NOPTS_VALUE { input.start_time } else { 0 };
    let mut findings = Findings::default();
    let mut streams = Vec::new();
    let mut header_errors = Vec::new();
    for (index, s) in input.streams().into_iter().enumerate() {
        let par = s.codecpar();
        let kind = kind_of(par.codec_type);
        // SAFETY: avcodec_get_name returns a static string.
        let codec = unsafe { CStr::from_ptr(ffi::avcodec_get_name(par.codec_id)) }.to_string_lossy().into_owned();
        let av_time_base = ffi::AVRational { num: 1, den: ffi::AV_TIME_BASE as i32 };
        // SAFETY: pure arithmetic.
        let stream_start = unsafe { ffi::av_rescale_q(start, av_time_base, s.time_base) };
        let mut stream = Stream {
            index,
            kind,
            codec,
            time_base: s.time_base,
            start: stream_start,
            last_dts: None,
            end: None,
            decoder: None,
            in_flight: VecDeque::new(),
            in_flight_max: 1,
            last_keyframe: None,
            errors: 0,
        };
        // Quick decodes video keyframes; it opens audio decoders only to see that they open.
        let decoded = kind == "video" || (kind == "audio" && depth == Depth::Thorough);
        let headers = match kind {
            "video" if par.width <= 0 || par.height <= 0 => Some("no picture size in its headers".to_string()),
            "audio" if par.sample_rate <= 0 || par.ch_layout.nb_channels <= 0 => {
                Some("no sample rate or channels in its headers".to_string())
            }
            _ => None,
        };
        if let Some(why) = headers {
            header_errors.push((index, format!("{}: {why}", stream.what())));
        } else if matches!(kind, "video" | "audio") {
            // Quick decodes single pictures, which threads only delay; audio decodes fast
            // on one thread, and its errors are then placed on the packet that had them.
            let threads = if depth == Depth::Thorough && kind == "video" { 0 } else { 1 };
            match open_decoder(&input, index, threads) {
                Ok(decoder) => {
                    if let Some(d) = &decoder {
                        stream.in_flight_max = usize::try_from(d.thread_count.max(1)).unwrap_or(1);
                    }
                    stream.decoder = decoder.filter(|_| decoded);
                }
                Err(why) => header_errors.push((index, format!("{}: {why}", stream.what()))),
            }
        }
        streams.push(stream);
    }
    for (index, message) in header_errors {
        findings.note(&mut streams, Some(index), 0.0, message);
    }
    findings.drain_log(&mut streams);

    let mut packets = 0u64;
    let mut errors_in_a_row = 0;
    loop {
        let packet = match input.read_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            Err(e) => {
                let code = av_code(&e).unwrap_or(ffi::AVERROR_UNKNOWN);
                // SAFETY: `pb` belongs to the open input (checked for null first).
                let at_end = !input.pb.is_null() && unsafe { ffi::avio_feof(input.pb) } != 0;
                let now = findings.now;
                let message = if at_end {
                    format!("the file ends inside a packet after {now:.2} s: cut short ({})", av_error_text(code))
                } else {
                    format!("reading the file after {now:.2} s: {}", av_error_text(code))
                };
                findings.note(&mut streams, None, now, message);
                errors_in_a_row += 1;
                if at_end || errors_in_a_row >= MAX_READ_ERRORS_IN_A_ROW {
                    break;
                }
                continue;
            }
        };
        errors_in_a_row = 0;
        packets += 1;
        let Some(stream) = usize::try_from(packet.stream_index).ok().filter(|i| *i < streams.len()) else { continue };
        if let Some(s) = streams.get_mut(stream) {
            let ts = if packet.pts != ffi::AV_NOPTS_VALUE { packet.pts } else { packet.dts };
            let at = if ts != ffi::AV_NOPTS_VALUE { s.seconds(ts) } else { findings.now };
            findings.now = at;
            if ts != ffi::AV_NOPTS_VALUE {
                let end = s.seconds(ts.saturating_add(packet.duration.max(0)));
                s.end = Some(s.end.map_or(end, |e| e.max(end)));
            }
            let mut problems = Vec::new();
            if packet.dts != ffi::AV_NOPTS_VALUE {
                if let Some(last) = s.last_dts.filter(|last| packet.dts < *last) {
                    problems.push(format!(
                        "{}: timestamps go backwards at {at:.2} s (DTS {} after {last})",
                        s.what(),
                        packet.dts
                    ));
                }
                s.last_dts = Some(packet.dts);
            }
            if packet.flags & ffi::AV_PKT_FLAG_CORRUPT as c_int != 0 {
                problems.push(format!("{}: the packet at {at:.2} s is marked corrupt by the demuxer", s.what()));
            }
            for message in problems {
                findings.note(&mut streams, Some(stream), at, message);
            }
            decode_packet(&mut streams, stream, &packet, at, depth, &mut findings);
        }
        findings.drain_log(&mut streams);
    }
    if packets == 0 && findings.first.is_none() {
        return unreadable(format!("{}: no packet could be read", path.display()));
    }
    if depth == Depth::Thorough {
        for stream in 0..streams.len() {
            drain_decoder(&mut streams, stream, &mut findings);
            findings.drain_log(&mut streams);
        }
    }
    check_duration(&input, &mut streams, &mut findings);
    let streams_with_errors: Vec<StreamErrors> = streams
        .iter()
        .filter(|s| s.errors > 0)
        .map(|s| StreamErrors { index: s.index, kind: s.kind.to_string(), errors: s.errors })
        .collect();
    let error_count = findings.file_errors + streams.iter().map(|s| s.errors).sum::<u64>();
    let (first_error_seconds, message) = match findings.first {
        Some((t, m)) if error_count > 0 => (Some(t), Some(m)),
        _ => (None, None),
    };
    FileHealth {
        depth,
        verdict: if error_count == 0 { Verdict::Ok } else { Verdict::Damaged },
        first_error_seconds,
        message,
        error_count,
        streams: streams_with_errors,
    }
}

/// A file that ends before its container says it does was cut short (its header was written
/// whole, its end was not). Durations the demuxer only estimated from the bit rate are not
/// compared: they are guesses. A file longer than it says is not counted: real files often
/// carry a stream past the stated length.
fn check_duration(input: &AVFormatContextInput, streams: &mut [Stream], findings: &mut Findings) {
    if input.duration == ffi::AV_NOPTS_VALUE
        || input.duration <= 0
        || input.duration_estimation_method == ffi::AVDurationEstimationMethod_AVFMT_DURATION_FROM_BITRATE
    {
        return;
    }
    let stated = input.duration as f64 / f64::from(ffi::AV_TIME_BASE);
    let Some(end) = streams.iter().filter_map(|s| s.end).reduce(f64::max) else { return };
    if end + duration_tolerance(stated) < stated {
        findings.note(
            streams,
            None,
            end,
            format!("the file ends at {end:.2} s, its container says it lasts {stated:.2} s: it is cut short"),
        );
    }
}

/// Sends a packet to its stream's decoder, where it has one: in `thorough` every packet, in
/// `quick` a keyframe now and then, alone (the decoder drained and reset after it).
fn decode_packet(
    streams: &mut [Stream],
    stream: usize,
    packet: &AVPacket,
    at: f64,
    depth: Depth,
    findings: &mut Findings,
) {
    let Some(s) = streams.get_mut(stream) else { return };
    if s.decoder.is_none() {
        return;
    }
    if depth == Depth::Quick {
        let key = packet.flags & ffi::AV_PKT_FLAG_KEY as c_int != 0;
        if !key || s.last_keyframe.is_some_and(|t| at >= t && at - t < KEYFRAME_SPACING_SECONDS) {
            return;
        }
        s.last_keyframe = Some(at);
    }
    s.sent(at);
    // A decoder that is full hands out its frames first, then takes the same packet.
    for _ in 0..MAX_TRIES {
        let Some(s) = streams.get_mut(stream) else { return };
        let Some(decoder) = s.decoder.as_mut() else { return };
        match decoder.send_packet(Some(packet)) {
            Ok(()) => break,
            Err(RsmpegError::DecoderFullError) => receive_frames(streams, stream, findings),
            Err(e) => {
                let what = s.what();
                findings.note(
                    streams,
                    Some(stream),
                    at,
                    format!("{what}: the packet at {at:.2} s does not decode: {e}"),
                );
                break;
            }
        }
    }
    if depth == Depth::Quick {
        drain_decoder(streams, stream, findings);
        if let Some(decoder) = streams.get_mut(stream).and_then(|s| s.decoder.as_mut()) {
            // SAFETY: resets an open decoder after a drain, so it takes packets again.
            unsafe { ffi::avcodec_flush_buffers(decoder.as_mut_ptr()) };
        }
    } else {
        receive_frames(streams, stream, findings);
    }
}

/// Takes every frame the decoder has ready, counting the frames it flags as damaged and
/// its failures (after one it goes on with the next frame).
fn receive_frames(streams: &mut [Stream], stream: usize, findings: &mut Findings) {
    for _ in 0..MAX_TRIES {
        let Some(s) = streams.get_mut(stream) else { return };
        let Some(decoder) = s.decoder.as_mut() else { return };
        match decoder.receive_frame() {
            Ok(frame) => {
                let damaged = frame.flags & ffi::AV_FRAME_FLAG_CORRUPT as c_int != 0 || frame.decode_error_flags != 0;
                if damaged {
                    let ts = frame.best_effort_timestamp;
                    let at = if ts != ffi::AV_NOPTS_VALUE { s.seconds(ts) } else { findings.now };
                    let what = s.what();
                    findings.note(streams, Some(stream), at, format!("{what}: the frame at {at:.2} s decodes damaged"));
                }
            }
            Err(RsmpegError::DecoderDrainError | RsmpegError::DecoderFlushedError) => return,
            Err(e) => {
                let at = s.in_flight.iter().copied().reduce(f64::min).unwrap_or(findings.now);
                let what = s.what();
                findings.note(streams, Some(stream), at, format!("{what}: decoding near {at:.2} s failed: {e}"));
            }
        }
    }
}

/// Drains a decoder to its end.
fn drain_decoder(streams: &mut [Stream], stream: usize, findings: &mut Findings) {
    let Some(decoder) = streams.get_mut(stream).and_then(|s| s.decoder.as_mut()) else { return };
    if decoder.send_packet(None).is_err() {
        return;
    }
    receive_frames(streams, stream, findings);
}
