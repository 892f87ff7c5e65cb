//! The transcoder proper, run inside the `condense-media transcode` child process: decodes the
//! source's main video stream and encodes it into segments (each segment is a fresh encoder
//! session, so it starts on a keyframe and stands alone), recording each finished segment in
//! the manifest. The video is first cut into spans at source keyframes; several sessions,
//! each in its own thread with its own decoder, encode spans at the same time (see
//! `domain::segments` and docs/ARCHITECTURE.md, "Segments"). A stop request closes the
//! segments in progress at the last frame encoded, so a pause loses nothing; a kill loses at
//! most those segments. When the video is complete the segments are muxed, in the order of
//! their spans, with the source's other streams (see `mux`).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rsmpeg::avcodec::{AVCodec, AVCodecContext};
use rsmpeg::avformat::AVFormatContextInput;
use rsmpeg::avutil::{AVDictionary, AVFrame};
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use rsmpeg::swscale::SwsContext;
use rsmpeg::UnsafeDerefMut;
use serde::Serialize;

use super::device::{self, DeviceFrames};
use super::dynamic::{self, Carry, FrameMetadata, NalFormat};
use super::error::from_rsmpeg;
use super::manifest::{inspect, sync_dir, Manifest, PartialState, Run, Segment};
use super::plan::EncodePlan;
use super::probe::{self, MediaInfo};
use super::segment::{packet_data, CodecParams, SegmentFile};
use super::{layout, mux, partial, MediaError};
use crate::domain::encoding::{Encoder, FrameInput, Hardware};
use crate::domain::job::FailureCode;
use crate::domain::quality;
use crate::domain::segments::{self, Span, SpanView};

/// What the transcoder reports, one JSON line each on stdout.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Event {
    #[serde(rename_all = "camelCase")]
    Started {
        resume_after_frames: u64,
        segments_kept: u32,
        partial_reset: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Progress {
        frame: u64,
        fps: f64,
        out_time: f64,
        percent: f64,
        size: u64,
        /// Encoder sessions at work on this job's segments.
        #[serde(default)]
        sessions: u32,
    },
    #[serde(rename_all = "camelCase")]
    SegmentDone {
        index: u32,
        frames: u64,
        bytes: u64,
    },
    /// The planned spans of the video and what is done of each (a video cut into spans).
    Spans {
        spans: Vec<SpanView>,
    },
    /// A session of this run began planned span `span`.
    SpanStarted {
        span: u32,
    },
    #[serde(rename_all = "camelCase")]
    Paused {
        frames_done: u64,
        segments: u32,
    },
    Muxing,
    /// The quality search tried `quality` on the samples.
    Probed {
        quality: u32,
        vmaf: f64,
        percent: f64,
    },
    /// The quality search settled (or its kept result was read): the encode uses `quality`.
    #[serde(rename_all = "camelCase")]
    Searched {
        quality: u32,
        met: bool,
        vmaf: f64,
        vmaf_p5: f64,
        percent: f64,
        predicted_size: u64,
        max_size_percent: u32,
    },
    /// The output's VMAF on the search's samples.
    Measured {
        mean: f64,
        p5: f64,
    },
    /// The encode stopped early: its output, projected from the bytes written per frame,
    /// would pass `limit` bytes.
    #[serde(rename_all = "camelCase")]
    NotSmaller {
        projected: u64,
        limit: u64,
        frames_done: u64,
    },
    /// A helper found nothing to do.
    Nothing {
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    Done {
        output: String,
        size: u64,
        frames_encoded_this_run: u64,
        frames_skipped_this_run: u64,
        /// CPU time of this run (all threads) and its wall time, in milliseconds.
        cpu_ms: u64,
        wall_ms: u64,
    },
    #[serde(rename_all = "camelCase")]
    Error {
        code: FailureCode,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Completed,
    Paused,
    /// Another transcoder holds the partial output's lock: nothing was touched.
    Busy,
    /// Stopped early: the output would not be smaller than the plan's `size_limit`.
    NotSmaller,
}

/// Free bytes on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| std::io::Error::other("NUL in path"))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs fills the struct we own from a valid C string path.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Runs (or continues) the encode described by `plan`.
/// CPU time this process has used (user + system, all threads), in milliseconds.
pub fn cpu_time_ms() -> u64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let ms = |t: libc::timeval| (t.tv_sec as u64) * 1000 + (t.tv_usec as u64) / 1000;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

pub fn transcode(plan: &EncodePlan, stop: &AtomicBool, emit: &mut dyn FnMut(Event)) -> Result<RunEnd, MediaError> {
    let wall = Instant::now();
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
        Some(asked) => match super::search::load_or_search(plan, asked, &info, stop, emit)? {
            Some(result) => Some(result),
            None => return Ok(RunEnd::Paused),
        },
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
    let free = free_bytes(probe_dir).map_err(|e| MediaError::from_io("checking free space", &e))?;
    let needed = plan.min_free_bytes.saturating_sub(kept);
    if free < needed {
        let e = MediaError::new(
            FailureCode::InsufficientDiskSpace,
            format!("{} has {free} bytes free; encoding needs {needed}", published.partial_dir.display()),
        );
        return Err(refuse(lock, e));
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
    super::assist::publish_plan(published, plan)?;
    let next_index = AtomicU32::new(manifest.next_index());
    super::assist::take_in_all(plan, &mut manifest, &next_index)?;
    remove_strays(&plan.partial_dir, &manifest)?;
    emit(Event::Started {
        resume_after_frames: manifest.frames_done(),
        segments_kept: u32::try_from(manifest.segments.len()).unwrap_or(u32::MAX),
        partial_reset: reset,
    });

    let (mut encoded, mut skipped) = (0, 0);
    if !manifest.video_complete {
        let end = encode_video(plan, &info, &mut manifest, stop, emit)?;
        encoded = end.frames_encoded;
        skipped = end.frames_skipped;
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
    emit(Event::Muxing);
    let output = plan.output_path();
    mux::mux(plan, &info, &manifest, &output)?;
    if let Some(result) = &searched {
        // What the output scores is a record, not a gate: a failure to score it is logged.
        match super::search::measure(plan, result, &output) {
            Ok(score) => emit(Event::Measured { mean: score.mean, p5: score.p5 }),
            Err(e) => tracing::warn!(error = %e.message, "the output's VMAF could not be measured"),
        }
    }
    let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
    emit(Event::Done {
        output: published.output_path().display().to_string(),
        size,
        frames_encoded_this_run: encoded,
        frames_skipped_this_run: skipped,
        cpu_ms: cpu_time_ms(),
        wall_ms: u64::try_from(wall.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    Ok(RunEnd::Completed)
}

/// Deletes files the manifest does not list: a segment cut short by a kill, an old output,
/// a helper's leftovers. What a helper is writing now (its span's claim is held) stays.
fn remove_strays(dir: &Path, manifest: &Manifest) -> Result<(), MediaError> {
    let entries = std::fs::read_dir(dir).map_err(|e| MediaError::from_io("reading the partial output", &e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let listed = manifest.segments.iter().any(|s| s.file == name);
        if layout::assist_span_of(&name).is_some_and(|span| partial::span_held(dir, span)) {
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
}

enum VideoEnding {
    Complete,
    Paused,
    /// Stopped early: the output, projected, would pass the plan's `size_limit`.
    OverLimit {
        projected: u64,
    },
}

/// The pixel format to encode: the source's when the encoder takes it at the plan's bit
/// depth, else 4:2:0 at that depth (10-bit sources stay 10-bit unless the plan says 8).
fn choose_pix_fmt(encoder: &AVCodec, src: i32, bit_depth: u8) -> i32 {
    let supported = encoder.pix_fmts().unwrap_or(&[]);
    let deep = bit_depth > 8;
    let src_deep = probe::pix_fmt_depth(src).unwrap_or(8) > 8;
    if supported.contains(&src) && src_deep == deep {
        return src;
    }
    let wanted: &[i32] = if deep {
        &[ffi::AVPixelFormat_AV_PIX_FMT_YUV420P10LE, ffi::AVPixelFormat_AV_PIX_FMT_P010LE]
    } else {
        &[ffi::AVPixelFormat_AV_PIX_FMT_YUV420P, ffi::AVPixelFormat_AV_PIX_FMT_NV12]
    };
    wanted.iter().copied().find(|f| supported.contains(f)).or_else(|| supported.first().copied()).unwrap_or(src)
}

/// Colour facts carried from the decoder to every segment's encoder.
#[derive(Clone, Copy)]
struct VideoFormat {
    width: i32,
    height: i32,
    src_pix_fmt: i32,
    sample_aspect_ratio: ffi::AVRational,
    color_primaries: ffi::AVColorPrimaries,
    color_trc: ffi::AVColorTransferCharacteristic,
    colorspace: ffi::AVColorSpace,
    color_range: ffi::AVColorRange,
    chroma_location: ffi::AVChromaLocation,
    time_base: ffi::AVRational,
    frame_rate: ffi::AVRational,
}

fn x265_mastering(info: &MediaInfo) -> Option<String> {
    let m = info.hdr.mastering_display?;
    let c = |v: f64| (v * 50000.0).round() as i64;
    let l = |v: f64| (v * 10000.0).round() as i64;
    Some(format!(
        "G({},{})B({},{})R({},{})WP({},{})L({},{})",
        c(m.green[0]),
        c(m.green[1]),
        c(m.blue[0]),
        c(m.blue[1]),
        c(m.red[0]),
        c(m.red[1]),
        c(m.white_point[0]),
        c(m.white_point[1]),
        l(m.max_luminance),
        l(m.min_luminance)
    ))
}

fn svt_mastering(info: &MediaInfo) -> Option<String> {
    let m = info.hdr.mastering_display?;
    Some(format!(
        "G({:.4},{:.4})B({:.4},{:.4})R({:.4},{:.4})WP({:.4},{:.4})L({:.4},{:.4})",
        m.green[0],
        m.green[1],
        m.blue[0],
        m.blue[1],
        m.red[0],
        m.red[1],
        m.white_point[0],
        m.white_point[1],
        m.max_luminance,
        m.min_luminance
    ))
}

/// The encoder's options: the plan's (quality, preset, fixed options) and, for HDR10, the
/// static metadata in the form each encoder takes it.
fn encoder_options(plan: &EncodePlan, info: &MediaInfo) -> Result<AVDictionary, MediaError> {
    let c = |s: &str| CString::new(s).map_err(|_| MediaError::misc("NUL in an encoder option"));
    let options = option_list(plan, info);
    let mut options = options.iter();
    let (key, value) = options.next().ok_or_else(|| MediaError::misc("the plan sets no encoder option"))?;
    let mut dict = AVDictionary::new(&c(key)?, &c(value)?, 0);
    for (key, value) in options {
        dict = dict.set(&c(key)?, &c(value)?, 0);
    }
    Ok(dict)
}

/// The options `encoder_options` gives the encoder, as (name, value) pairs.
fn option_list(plan: &EncodePlan, info: &MediaInfo) -> Vec<(String, String)> {
    let hdr10 = plan.hdr.has_hdr10_base();
    let threads = plan.sessions.threads;
    let mut options = plan.encoder_options.clone();
    match plan.encoder {
        Encoder::Libx265 => {
            // `info=0`: x265 writes its options (threads included) into the stream headers,
            // and the segments of one output must share their headers; sessions of another
            // size (a retry, another node) would otherwise write different ones and could
            // not be joined (the fault suite's kill-transcoder saw the retry fail so).
            let mut params = vec!["log-level=error".to_string(), "info=0".to_string()];
            if threads > 0 {
                // The session's share of the cores: its own thread pool of that size.
                params.push(format!("pools={threads}"));
            }
            if hdr10 {
                params.push("hdr10=1".into());
                params.push("hdr10-opt=1".into());
                if let Some(m) = x265_mastering(info) {
                    params.push(format!("master-display={m}"));
                }
                if let Some(l) = info.hdr.content_light {
                    params.push(format!("max-cll={},{}", l.max_cll, l.max_fall));
                }
            }
            options.push(("x265-params".into(), params.join(":")));
        }
        Encoder::Libsvtav1 => {
            let mut params = Vec::new();
            if threads > 0 {
                params.push(format!("lp={threads}"));
            }
            if let Some(m) = svt_mastering(info).filter(|_| hdr10) {
                params.push(format!("mastering-display={m}"));
            }
            if let Some(l) = info.hdr.content_light.filter(|_| hdr10) {
                params.push(format!("content-light={},{}", l.max_cll, l.max_fall));
            }
            if !params.is_empty() {
                options.push(("svtav1-params".into(), params.join(":")));
            }
        }
        // The hardware encoders take the plan's options as they are (their quality option,
        // preset and rate control come from the encoder table); their threads are the
        // device's.
        Encoder::HevcNvenc | Encoder::HevcQsv | Encoder::HevcVaapi | Encoder::LibaomAv1 => {}
    }
    options
}

/// Opens an encoder with its options. rsmpeg's `AVCodecContext::open` frees the options
/// twice when opening fails (FFmpeg has already replaced them), which crashed the
/// transcoder on an encoder that is present but cannot run here (NVENC without a driver);
/// here the dictionary FFmpeg leaves is freed once, whatever the outcome.
fn open_with_options(encoder: &mut AVCodecContext, options: AVDictionary) -> Result<(), RsmpegError> {
    let mut options = options.into_raw().as_ptr();
    // SAFETY: avcodec_open2 takes the dictionary we own, frees it and puts the options it
    // did not use in its place, on success and on failure alike; we free that.
    let ret = unsafe { ffi::avcodec_open2(encoder.as_mut_ptr(), std::ptr::null(), &mut options) };
    // SAFETY: `options` is null or a dictionary FFmpeg made for us.
    unsafe { ffi::av_dict_free(&mut options) };
    if ret < 0 {
        return Err(RsmpegError::CodecOpenError(ret));
    }
    Ok(())
}

/// The decode time to write instead of the encoder's, where the encoder's cannot be right:
/// none, or later than the presentation time. x265 derives decode times from its first
/// frames, and a session given fewer frames than its B-frame delay (a segment of one frame,
/// closed by a pause or at the end of a span) returns uninitialised memory there; joined
/// as it is, the output's timestamps were garbage (a pause with two sessions showed it).
/// The frame's own presentation time is a valid decode time; the mux keeps decode times
/// rising across the joins.
fn decode_time(pts: i64, dts: i64) -> Option<i64> {
    (pts != ffi::AV_NOPTS_VALUE && (dts == ffi::AV_NOPTS_VALUE || dts > pts)).then_some(pts)
}

/// One segment being written: its own encoder session and NUT file.
struct SegmentWriter {
    index: u32,
    file: String,
    path: std::path::PathBuf,
    output: SegmentFile,
    encoder: AVCodecContext,
    scaler: Option<SwsContext>,
    /// The device's picture pool, for encoders that take pictures on their device.
    device_frames: Option<DeviceFrames>,
    first_pts: Option<i64>,
    last_pts: i64,
    frames: u64,
    /// Dynamic metadata of the frames sent to the encoder and not yet out of it, by
    /// presentation time (the encoder reorders frames).
    dynamic: BTreeMap<i64, FrameMetadata>,
}

impl SegmentWriter {
    fn open(
        plan: &EncodePlan,
        info: &MediaInfo,
        index: u32,
        file: String,
        fmt: &VideoFormat,
    ) -> Result<Self, MediaError> {
        let name = CString::new(plan.encoder.as_str()).map_err(|_| MediaError::misc("bad encoder name"))?;
        let codec = AVCodec::find_encoder_by_name(&name).ok_or_else(|| {
            MediaError::new(FailureCode::UnsupportedCodec, format!("encoder {} is not available", plan.encoder))
        })?;
        // Quick Sync and VAAPI take pictures on their device: uploaded from their format.
        let device_frames = match plan.encoder.profile().frame_input(plan.bit_depth) {
            FrameInput::System => None,
            FrameInput::Device { hardware, upload_format } => Some(
                DeviceFrames::open(hardware, upload_format, fmt.width, fmt.height)
                    .map_err(|why| MediaError::new(FailureCode::UnsupportedCodec, why))?,
            ),
        };
        let (pix_fmt, encoder_fmt) = match &device_frames {
            Some(frames) => (frames.sw_format, frames.hw_format),
            None => {
                let chosen = choose_pix_fmt(&codec, fmt.src_pix_fmt, plan.bit_depth);
                (chosen, chosen)
            }
        };
        let mut encoder = AVCodecContext::new(&codec);
        encoder.set_width(fmt.width);
        encoder.set_height(fmt.height);
        encoder.set_pix_fmt(encoder_fmt);
        encoder.set_time_base(fmt.time_base);
        encoder.set_framerate(fmt.frame_rate);
        encoder.set_sample_aspect_ratio(fmt.sample_aspect_ratio);
        encoder.set_flags(encoder.flags | ffi::AV_CODEC_FLAG_GLOBAL_HEADER as i32);
        // SAFETY: plain field writes on a context we own, before it is opened.
        unsafe {
            let raw = encoder.deref_mut();
            raw.color_primaries = fmt.color_primaries;
            raw.color_trc = fmt.color_trc;
            raw.colorspace = fmt.colorspace;
            raw.color_range = fmt.color_range;
            raw.chroma_sample_location = fmt.chroma_location;
            // The session's share of the cores (libaom and the other encoders that take
            // FFmpeg's thread count; x265 and SVT-AV1 get theirs in their options).
            raw.thread_count = i32::try_from(plan.sessions.threads).unwrap_or(0);
            if let Some(frames) = &device_frames {
                // The context releases this reference when it is freed.
                raw.hw_frames_ctx = frames.new_ref();
            }
        }
        open_with_options(&mut encoder, encoder_options(plan, info)?).map_err(|e| {
            // Whatever FFmpeg's error code (NVENC answers EPERM without a driver), the
            // encoder cannot run here: never a file's permissions.
            let mut err = from_rsmpeg(&format!("opening encoder {}", plan.encoder), &e);
            err.code = FailureCode::UnsupportedCodec;
            err
        })?;
        let scaler = if pix_fmt != fmt.src_pix_fmt {
            Some(
                SwsContext::get_context(
                    fmt.width,
                    fmt.height,
                    fmt.src_pix_fmt,
                    fmt.width,
                    fmt.height,
                    pix_fmt,
                    ffi::SWS_BICUBIC,
                )
                .ok_or_else(|| MediaError::misc("cannot convert the pixel format"))?,
            )
        } else {
            None
        };

        let path = plan.partial_dir.join(&file);
        let output = SegmentFile::create(&path)?;
        Ok(SegmentWriter {
            index,
            file,
            path,
            output,
            encoder,
            scaler,
            device_frames,
            first_pts: None,
            last_pts: 0,
            frames: 0,
            dynamic: BTreeMap::new(),
        })
    }

    /// Encodes one frame; `dynamic` is its dynamic HDR metadata, written into its access unit.
    fn push(&mut self, frame: &AVFrame, pts: i64, dynamic: Option<FrameMetadata>) -> Result<(), MediaError> {
        if let Some(meta) = dynamic.filter(|m| !m.is_empty()) {
            self.dynamic.insert(pts, meta);
        }
        let mut converted;
        let frame = match self.scaler.as_mut() {
            Some(scaler) => {
                converted = AVFrame::new();
                converted.set_width(frame.width);
                converted.set_height(frame.height);
                converted.set_format(self.device_frames.as_ref().map_or(self.encoder.pix_fmt, |d| d.sw_format));
                converted.alloc_buffer().map_err(|e| from_rsmpeg("allocating a frame", &e))?;
                scaler
                    .scale_frame(frame, 0, frame.height, &mut converted)
                    .map_err(|e| from_rsmpeg("converting pixels", &e))?;
                &mut converted
            }
            None => {
                converted = frame.clone();
                &mut converted
            }
        };
        frame.set_pts(pts);
        frame.set_pict_type(ffi::AVPictureType_AV_PICTURE_TYPE_NONE);
        match &self.device_frames {
            Some(pool) => {
                let on_device = pool.upload(frame).map_err(MediaError::misc)?;
                self.encoder.send_frame(Some(&on_device)).map_err(|e| from_rsmpeg("encoding", &e))?;
            }
            None => self.encoder.send_frame(Some(frame)).map_err(|e| from_rsmpeg("encoding", &e))?,
        }
        self.first_pts.get_or_insert(pts);
        self.last_pts = pts;
        self.frames += 1;
        self.drain()
    }

    fn drain(&mut self) -> Result<(), MediaError> {
        loop {
            let mut packet = match self.encoder.receive_packet() {
                Ok(p) => p,
                Err(RsmpegError::EncoderDrainError | RsmpegError::EncoderFlushedError) => return Ok(()),
                Err(e) => return Err(from_rsmpeg("encoding", &e)),
            };
            if let Some(dts) = decode_time(packet.pts, packet.dts) {
                packet.set_dts(dts);
            }
            let with = self.dynamic.remove(&packet.pts).and_then(|meta| {
                let with = dynamic::write(packet_data(&packet), &meta);
                if with.is_none() {
                    // Left as encoded: verification finds the frame without its metadata.
                    tracing::warn!(pts = packet.pts, "an encoded frame has no slice to put its HDR metadata by");
                }
                with
            });
            match with {
                Some(data) => self.output.write_with(&packet, &data)?,
                None => self.output.write(&packet)?,
            }
        }
    }

    /// Flushes the encoder, closes the file durably, and describes the segment as holding
    /// the frames of `span`.
    fn finish(mut self, span: Span) -> Result<(Segment, CodecParams), MediaError> {
        self.encoder.send_frame(None).map_err(|e| from_rsmpeg("flushing the encoder", &e))?;
        self.drain()?;
        let params = CodecParams::of(&self.encoder);
        self.output.finish()?;
        let bytes = std::fs::metadata(&self.path).map_err(|e| MediaError::from_io("closing a segment", &e))?.len();
        let segment = Segment {
            index: self.index,
            file: self.file,
            span,
            first_pts: self.first_pts.unwrap_or(0),
            last_pts: self.last_pts,
            frames: self.frames,
            bytes,
        };
        Ok((segment, params))
    }
}

/// How the packets of stream `index` frame their NAL units (for HEVC; see
/// `media::hdr10plus`).
pub fn stream_nal_format(input: &AVFormatContextInput, index: usize) -> NalFormat {
    let Some(stream) = input.streams().get(index) else { return NalFormat::AnnexB };
    let par = stream.codecpar();
    let extradata = if par.extradata.is_null() || par.extradata_size <= 0 {
        &[][..]
    } else {
        // SAFETY: the codec parameters hold `extradata_size` bytes at `extradata` while the
        // input is open.
        unsafe { std::slice::from_raw_parts(par.extradata, par.extradata_size as usize) }
    };
    NalFormat::of_extradata(extradata)
}

pub fn main_video_index(input: &AVFormatContextInput) -> Option<usize> {
    input.streams().into_iter().position(|s| {
        s.codecpar().codec_type == ffi::AVMediaType_AVMEDIA_TYPE_VIDEO
            && s.disposition & ffi::AV_DISPOSITION_ATTACHED_PIC as i32 == 0
    })
}

pub fn open_decoder(input: &AVFormatContextInput, index: usize) -> Result<AVCodecContext, MediaError> {
    open_decoder_on(input, index, Hardware::Cpu).map(|(ctx, _)| ctx)
}

/// Picks the hardware pixel format stored in the context's `opaque` when the decoder
/// offers it for this stream, else FFmpeg's own (software) choice.
unsafe extern "C" fn hardware_format(
    ctx: *mut ffi::AVCodecContext,
    offered: *const ffi::AVPixelFormat,
) -> ffi::AVPixelFormat {
    // SAFETY: FFmpeg passes its context and a list ended by AV_PIX_FMT_NONE; `opaque`
    // holds the wanted format, set by `attach_hardware` before the decoder was opened.
    unsafe {
        let wanted = (*ctx).opaque as isize as ffi::AVPixelFormat;
        let mut p = offered;
        while *p != ffi::AVPixelFormat_AV_PIX_FMT_NONE {
            if *p == wanted {
                return wanted;
            }
            p = p.add(1);
        }
        ffi::avcodec_default_get_format(ctx, offered)
    }
}

/// Sets up decoding on `hardware`: answers the hardware pixel format decoded frames come
/// in, or why it cannot (no such device here, a decoder without support for it).
fn attach_hardware(ctx: &mut AVCodecContext, decoder: &AVCodec, hardware: Hardware) -> Result<i32, String> {
    let device = device::device_type(hardware).ok_or("the CPU has no hardware decoder")?;
    let mut pix_fmt = None;
    for i in 0.. {
        // SAFETY: avcodec_get_hw_config answers null past the last configuration.
        let config = unsafe { ffi::avcodec_get_hw_config(decoder.as_ptr(), i) };
        if config.is_null() {
            break;
        }
        // SAFETY: not null, owned by the codec (static).
        let config = unsafe { *config };
        if config.methods & ffi::AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX as i32 != 0 && config.device_type == device {
            pix_fmt = Some(config.pix_fmt);
            break;
        }
    }
    let pix_fmt = pix_fmt.ok_or_else(|| format!("the decoder has no {hardware} support"))?;
    let opened = device::Device::open(hardware)?;
    // SAFETY: plain field writes before the decoder is opened; the context releases its
    // reference to the device when it is freed.
    unsafe {
        let raw = ctx.deref_mut();
        raw.hw_device_ctx = opened.new_ref();
        raw.opaque = pix_fmt as isize as *mut std::ffi::c_void;
        raw.get_format = Some(hardware_format);
    }
    Ok(pix_fmt)
}

/// Opens the stream's decoder, on `hardware` where it can decode there (else on the CPU);
/// answers the hardware pixel format of its frames when it decodes on hardware.
pub fn open_decoder_on(
    input: &AVFormatContextInput,
    index: usize,
    hardware: Hardware,
) -> Result<(AVCodecContext, Option<i32>), MediaError> {
    let stream = input.streams().get(index).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let par = stream.codecpar();
    let decoder = AVCodec::find_decoder(par.codec_id).ok_or_else(|| {
        // SAFETY: avcodec_get_name returns a static string.
        let name = unsafe { std::ffi::CStr::from_ptr(ffi::avcodec_get_name(par.codec_id)) };
        MediaError::new(FailureCode::UnsupportedCodec, format!("no decoder for {}", name.to_string_lossy()))
    })?;
    let mut ctx = AVCodecContext::new(&decoder);
    ctx.apply_codecpar(&par).map_err(|e| from_rsmpeg("decoder parameters", &e))?;
    // SAFETY: plain field writes before opening.
    unsafe {
        let raw = ctx.deref_mut();
        raw.pkt_timebase = stream.time_base;
        raw.thread_count = 0;
    }
    if let Some(rate) = stream.guess_framerate() {
        ctx.set_framerate(rate);
    }
    let hardware_format = match hardware {
        Hardware::Cpu => None,
        hardware => match attach_hardware(&mut ctx, &decoder, hardware) {
            Ok(format) => Some(format),
            // The decoded pictures are the same either way; the hardware encoder will
            // say for itself whether its device is there.
            Err(why) => {
                tracing::warn!(%hardware, reason = %why, "decoding on the CPU instead");
                None
            }
        },
    };
    ctx.open(None)
        .map_err(|e| MediaError::new(FailureCode::UnsupportedCodec, format!("cannot open the decoder: {e}")))?;
    Ok((ctx, hardware_format))
}

/// A decoded frame in system memory: hardware frames are downloaded, with their
/// timestamps and colour properties.
pub fn to_system_memory(frame: AVFrame, hardware_format: Option<i32>) -> Result<AVFrame, MediaError> {
    if hardware_format != Some(frame.format) {
        return Ok(frame);
    }
    let mut system = AVFrame::new();
    // SAFETY: both frames are valid; the transfer allocates the destination's buffers.
    let ret = unsafe { ffi::av_hwframe_transfer_data(system.as_mut_ptr(), frame.as_ptr(), 0) };
    if ret < 0 {
        return Err(MediaError::invalid(format!(
            "cannot download a decoded frame from the hardware: {}",
            RsmpegError::AVError(ret)
        )));
    }
    // SAFETY: copies timestamps, colour properties and side data between valid frames.
    let ret = unsafe { ffi::av_frame_copy_props(system.as_mut_ptr(), frame.as_ptr()) };
    if ret < 0 {
        return Err(MediaError::misc("out of memory copying frame properties"));
    }
    Ok(system)
}

/// Containers with an index of the video's keyframes that the demuxer reads with the header
/// (Matroska's cues, MP4's sample tables), and whose seek goes by it: only these are cut
/// into spans encoded at once. Others (MPEG-TS and -PS seek by byte position, AVI's index
/// counts frames) are encoded as one span.
fn cuts_exactly(container: &str) -> bool {
    container.split(',').any(|name| matches!(name, "matroska" | "webm" | "mov" | "mp4"))
}

/// Where to cut the video: keyframes from the demuxer's index, about `segment_seconds`
/// apart (no pass over the file). None with a single session whose spans no helper may take,
/// or a container without such an index. The index gives presentation times (Matroska) or decode times (MP4) of the
/// keyframes; either is a valid cut, because a session starts decoding at the keyframe
/// before its span (see `encode_span`).
fn plan_boundaries(plan: &EncodePlan, info: &MediaInfo) -> Result<Vec<i64>, MediaError> {
    if (plan.sessions.sessions <= 1 && !plan.shared_spans) || !cuts_exactly(&info.container) {
        return Ok(Vec::new());
    }
    let mut input = probe::open_input(&plan.input)?;
    let vi = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let (tb, raw, start) = {
        let stream = input.streams().get(vi).ok_or_else(|| MediaError::invalid("no video stream"))?;
        let start = Some(stream.start_time).filter(|t| *t != ffi::AV_NOPTS_VALUE).unwrap_or(0);
        (stream.time_base, stream.as_ptr().cast_mut(), start)
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
    Ok(match wanted {
        Some(spans) => {
            let length = duration.unwrap_or(0.0) * f64::from(tb.den) / f64::from(tb.num.max(1));
            segments::balanced_boundaries(&keyframes, start, start.saturating_add(length.round() as i64), spans)
        }
        None => segments::boundaries(&keyframes, every),
    })
}

/// What a session tells the run's main thread, which alone writes the manifest and reports.
enum Msg {
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
    /// A session ended.
    Ended,
}

/// What the sessions of one run share.
struct Shared<'a> {
    plan: &'a EncodePlan,
    info: &'a MediaInfo,
    /// The planned cuts, which number the spans and their claims.
    boundaries: Vec<i64>,
    /// This run owns the manifest and claims each span before it encodes it; a helper
    /// holds its one claim already.
    claims: bool,
    /// A helper's span: its segment files are named by it.
    assist_span: Option<u32>,
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
}

impl Shared<'_> {
    fn halted(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.halt.load(Ordering::SeqCst)
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
        match self.assist_span {
            Some(span) => layout::assist_segment_file(span, index),
            None => layout::segment_file(index),
        }
    }
}

/// Where a run's finished segments go: the manifest (the run that owns the partial output)
/// or a helper's record of its span (`media::assist`).
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
        super::assist::take_in(plan, self, span, next_index, emit)?;
        let boundaries = self.boundaries.clone().unwrap_or_default();
        Ok(self.remaining().into_iter().filter(|s| segments::planned_index(&boundaries, s.from) == span).collect())
    }
}

/// The planned spans and what is done of each, for the node to show (`Event::Spans`);
/// `here` are the spans this run's sessions encode now.
fn span_views(manifest: &Manifest, here: &[u32]) -> Vec<SpanView> {
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
) -> Result<VideoEnd, MediaError> {
    if manifest.boundaries.is_none() {
        manifest.boundaries = Some(plan_boundaries(plan, info)?);
        manifest.save(&plan.partial_dir)?;
    }
    let boundaries = manifest.boundaries.clone().unwrap_or_default();
    if !boundaries.is_empty() {
        emit(Event::Spans { spans: span_views(manifest, &[]) });
    }
    let todo = manifest.remaining();
    let next_index = manifest.next_index();
    let totals = run_sessions(plan, info, todo, boundaries, true, None, next_index, manifest, stop, emit)?;
    let (frames_encoded, frames_skipped) = (totals.encoded, totals.skipped);
    if let Some(projected) = totals.over_limit {
        return Ok(VideoEnd { end: VideoEnding::OverLimit { projected }, frames_encoded, frames_skipped });
    }
    let left = manifest.remaining();
    if left.is_empty() {
        if manifest.frames_done() == 0 {
            return Err(MediaError::invalid("no video frame could be decoded"));
        }
        manifest.video_complete = true;
        return Ok(VideoEnd { end: VideoEnding::Complete, frames_encoded, frames_skipped });
    }
    if !stop.load(Ordering::SeqCst) {
        // Every session covers its whole span unless stopped: a gap here is a defect, and
        // muxing over it would drop frames.
        return Err(MediaError::misc(format!("{} span(s) of the video were left unencoded", left.len())));
    }
    Ok(VideoEnd { end: VideoEnding::Paused, frames_encoded, frames_skipped })
}

/// Runs `todo` through up to `plan.sessions` sessions, recording each finished segment with
/// `recorder` on this thread; answers the frames encoded and skipped. With `claims`, each
/// span is claimed before it is encoded, and spans held elsewhere are waited for (see
/// `encode_video`).
#[allow(clippy::too_many_arguments, reason = "one run's parts, each used once; a struct would only rename them")]
pub(crate) fn run_sessions(
    plan: &EncodePlan,
    info: &MediaInfo,
    todo: Vec<Span>,
    boundaries: Vec<i64>,
    claims: bool,
    assist_span: Option<u32>,
    next_index: u32,
    recorder: &mut dyn Recorder,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<Totals, MediaError> {
    let fps = info.video().and_then(|v| v.frame_rate).filter(|r| *r > 0.0).unwrap_or(25.0);
    let duration = info.video().and_then(|v| v.duration_seconds).or(info.duration_seconds).unwrap_or(0.0);
    let total_frames = duration * fps;
    let sessions = plan.sessions.sessions.clamp(1, u32::try_from(todo.len()).unwrap_or(u32::MAX).max(1));
    let shared = Shared {
        plan,
        info,
        boundaries,
        claims,
        assist_span,
        queue: Mutex::new(todo.into()),
        stop,
        halt: AtomicBool::new(false),
        next_index: AtomicU32::new(next_index),
        segment_frames: ((plan.segment_seconds * fps).round() as u64).max(1),
        encoded: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
        open_frames: AtomicU64::new(0),
        active: AtomicU32::new(0),
        open_files: Mutex::new(Vec::new()),
    };
    let started = Instant::now();
    let mut failure: Option<MediaError> = None;
    let mut fail = |shared: &Shared<'_>, e: MediaError| {
        shared.halt.store(true, Ordering::SeqCst);
        failure.get_or_insert(e);
    };
    let mut bytes_done = recorder.bytes_done();
    // The early abort: a helper's span is too short to judge, so only a job's run does.
    let size_limit = plan.size_limit.filter(|_| assist_span.is_none());
    let mut over_limit = None;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Msg>();
        let shared = &shared;
        let spawn = |tx: &mpsc::Sender<Msg>| {
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
                Ok(Msg::Segment(segment, params)) => {
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
                Ok(Msg::Failed(e)) => fail(shared, e),
                Ok(Msg::Started(span)) => {
                    here.push(span);
                    emit(Event::SpanStarted { span });
                }
                Ok(Msg::Elsewhere(piece, span)) => {
                    elsewhere.insert(span, piece);
                }
                Ok(Msg::TakeIn(claim)) => match recorder.take_in(plan, claim.index, &shared.next_index, emit) {
                    Ok(rest) => back = rest,
                    Err(e) => fail(shared, e),
                },
                Ok(Msg::Release(claim)) => {
                    here.retain(|s| *s != claim.index);
                    drop(claim);
                }
                Ok(Msg::Ended) => running = running.saturating_sub(1),
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
                    percent: if total_frames > 0.0 && assist_span.is_none() {
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
    })
}

/// What a run of sessions did: frames encoded and skipped, and, when it was stopped because
/// its output would not be smaller than the plan's `size_limit`, the projected size.
pub(crate) struct Totals {
    pub encoded: u64,
    pub skipped: u64,
    pub over_limit: Option<u64>,
}

/// One encoder session: takes spans from the queue until there is none, or a stop.
fn session(shared: &Shared<'_>, tx: &mpsc::Sender<Msg>) {
    /// Says the session ended however it ends, a panic included: the run's main thread
    /// waits for every session it started.
    struct Ending<'a>(&'a mpsc::Sender<Msg>);
    impl Drop for Ending<'_> {
        fn drop(&mut self) {
            let _ = self.0.send(Msg::Ended);
        }
    }
    let _ending = Ending(tx);
    take_spans(shared, tx);
}

fn take_spans(shared: &Shared<'_>, tx: &mpsc::Sender<Msg>) {
    loop {
        if shared.halted() {
            return;
        }
        let next = shared.queue.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        let Some(span) = next else { return };
        let index = segments::planned_index(&shared.boundaries, span.from);
        let claim = if shared.claims {
            match partial::claim_span(&shared.plan.partial_dir, index) {
                Ok(partial::Claim::Mine(claim)) => Some(claim),
                Ok(partial::Claim::Held) => {
                    let _ = tx.send(Msg::Elsewhere(span, index));
                    continue;
                }
                Ok(partial::Claim::Gone) => {
                    let e = MediaError::misc("the partial output was removed while the video was encoded");
                    let _ = tx.send(Msg::Failed(e));
                    return;
                }
                Err(e) => {
                    let _ = tx.send(Msg::Failed(e));
                    return;
                }
            }
        } else {
            None
        };
        if let Some(claim) = claim {
            // A helper finished this span and let it go before this run reached it.
            if super::assist::has_record(&shared.plan.partial_dir, index) {
                let _ = tx.send(Msg::TakeIn(claim));
                continue;
            }
            let _ = tx.send(Msg::Started(index));
            shared.active.fetch_add(1, Ordering::SeqCst);
            let result = encode_span(shared, span, tx);
            shared.active.fetch_sub(1, Ordering::SeqCst);
            if let Err(e) = result {
                let _ = tx.send(Msg::Failed(e));
                return;
            }
            let _ = tx.send(Msg::Release(claim));
            continue;
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        let result = encode_span(shared, span, tx);
        shared.active.fetch_sub(1, Ordering::SeqCst);
        if let Err(e) = result {
            let _ = tx.send(Msg::Failed(e));
            return;
        }
    }
}

/// Encodes the frames of `span` into one or more segments (a new one every
/// `segment_frames`). A stop closes the segment being written at the last frame encoded;
/// the rest of the span stays to do.
fn encode_span(shared: &Shared<'_>, span: Span, tx: &mpsc::Sender<Msg>) -> Result<(), MediaError> {
    match run_span(shared, span, tx, true)? {
        SpanRun::Finished => Ok(()),
        SpanRun::LandedLate(pts) => {
            // A seek that lands past the span's start would lose frames: decode from the
            // first frame instead (slower, never wrong).
            tracing::warn!(from = ?span.from, landed = pts, "the seek landed after the span's start; decoding from the beginning");
            run_span(shared, span, tx, false).map(|_| ())
        }
    }
}

enum SpanRun {
    Finished,
    /// The first frame decoded after the seek came after the span's start (its pts);
    /// nothing was written.
    LandedLate(i64),
}

/// Decodes from the keyframe before `span` (or from the first frame without `seek`), drops
/// the frames before it, encodes its frames, and stops at the first frame past it.
fn run_span(shared: &Shared<'_>, span: Span, tx: &mpsc::Sender<Msg>, seek: bool) -> Result<SpanRun, MediaError> {
    let plan = shared.plan;
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
    // presentation time until the decoder gives out the frame (see `media::dynamic`).
    let carry = Carry::of(plan.hdr, shared.info, &plan.target_codec).map(|c| (c, stream_nal_format(&input, vi)));
    let mut dynamic: BTreeMap<i64, FrameMetadata> = BTreeMap::new();
    // The keyframe strictly before the span's start: decoding from there gives every frame
    // from the start on, whether the cut is a keyframe's presentation or decode time (the
    // frames shown just before a keyframe may be decoded after it), and with an open GOP.
    let mut sought = None;
    if let Some(from) = span.from.filter(|_| seek) {
        let ret = probe::seek_before(&mut input, vi, from);
        if ret < 0 {
            // Some inputs cannot seek: decode from the start and drop what comes before.
            tracing::warn!(code = ret, "seek failed; decoding from the start");
        } else {
            sought = Some(from);
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

    'run: loop {
        if shared.halted() {
            break;
        }
        if !eof {
            match probe::read_packet(&mut input, "the source")? {
                Some(packet) => {
                    if packet.stream_index as usize != vi {
                        continue;
                    }
                    if let Some((what, format)) = carry.filter(|_| packet.pts != ffi::AV_NOPTS_VALUE) {
                        dynamic.insert(packet.pts, dynamic::read(packet_data(&packet), format, what));
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
                let opened = SegmentWriter::open(plan, shared.info, index, shared.segment_file(index), &fmt)?;
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
            // A full segment is closed at once, so a kill loses less than a segment.
            if writer.as_ref().is_some_and(|w| w.frames >= shared.segment_frames) {
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
            break;
        }
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
            tx.send(Msg::Segment(empty, None))
                .map_err(|_| MediaError::misc("the run ended before a segment was recorded"))?;
        }
        None => {}
    }
    Ok(SpanRun::Finished)
}

/// Closes a segment durably and hands it to the main thread to record.
fn finish_segment(writer: SegmentWriter, span: Span, tx: &mpsc::Sender<Msg>) -> Result<(), MediaError> {
    let (segment, params) = writer.finish(span)?;
    tx.send(Msg::Segment(segment, Some(params)))
        .map_err(|_| MediaError::misc("the run ended before a segment was recorded"))
}

/// Keeps the first segment's encoder headers in `known`: a segment with other headers
/// cannot be joined to the others.
pub(crate) fn keep_headers(known: &mut Option<CodecParams>, params: Option<CodecParams>) -> Result<(), MediaError> {
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
pub(crate) fn record_segment(
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

    #[test]
    fn the_output_pixel_format_follows_the_plans_bit_depth() {
        let x265 = AVCodec::find_encoder_by_name(c"libx265").unwrap();
        let (p8, p10) = (ffi::AVPixelFormat_AV_PIX_FMT_YUV420P, ffi::AVPixelFormat_AV_PIX_FMT_YUV420P10LE);
        assert_eq!(choose_pix_fmt(&x265, p8, 8), p8);
        assert_eq!(choose_pix_fmt(&x265, p10, 10), p10);
        // The conservative rung encodes a 10-bit SDR source in 8 bits.
        assert_eq!(choose_pix_fmt(&x265, p10, 8), p8);
        // A format the encoder does not take becomes 4:2:0 at the plan's depth.
        assert_eq!(choose_pix_fmt(&x265, ffi::AVPixelFormat_AV_PIX_FMT_NV12, 8), p8);
        assert_eq!(choose_pix_fmt(&x265, ffi::AVPixelFormat_AV_PIX_FMT_P010LE, 10), p10);
    }

    #[test]
    fn a_decode_time_after_the_frame_or_missing_is_replaced_by_its_presentation_time() {
        let none = ffi::AV_NOPTS_VALUE;
        assert_eq!(decode_time(4021, 6_148_914_691_236_521_227), Some(4021));
        assert_eq!(decode_time(4021, none), Some(4021));
        // Decode times before the presentation time are the encoder's reordering: kept.
        assert_eq!(decode_time(4021, 3941), None);
        assert_eq!(decode_time(4021, 4021), None);
        assert_eq!(decode_time(4021, i64::MIN + 1), None);
        assert_eq!(decode_time(none, 5), None);
    }

    #[test]
    fn only_containers_that_seek_exactly_are_cut_into_spans() {
        for exact in ["matroska,webm", "mov,mp4,m4a,3gp,3g2,mj2"] {
            assert!(cuts_exactly(exact), "{exact}");
        }
        for one_span in ["mpegts", "mpeg", "avi", "flv", "asf", ""] {
            assert!(!cuts_exactly(one_span), "{one_span}");
        }
    }

    #[test]
    fn every_encoder_gets_its_quality_preset_threads_and_hdr_options() {
        use crate::domain::encoding::{profile_for_attempt, EncodeSettings, TargetCodec};
        use crate::domain::segments::Sessions;
        use crate::media::probe::{ContentLight, HdrInfo, HdrKind};
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.mkv");
        std::fs::write(&input, b"source").unwrap();
        let info = MediaInfo {
            container: "matroska,webm".into(),
            duration_seconds: Some(10.0),
            size_bytes: 6,
            bit_rate: None,
            chapters: 0,
            streams: Vec::new(),
            hdr: HdrInfo {
                kind: HdrKind::Hdr10,
                dolby_vision: None,
                hdr10_plus: false,
                mastering_display: None,
                content_light: Some(ContentLight { max_cll: 1000, max_fall: 400 }),
            },
        };
        let get = |list: &[(String, String)], key: &str| list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        for encoder in
            [TargetCodec::Hevc, TargetCodec::Av1].into_iter().flat_map(TargetCodec::encoders).map(|p| p.encoder)
        {
            let profile = encoder.profile();
            let settings = EncodeSettings::for_library(profile.codec, Some(encoder), None, Some(23), true);
            let mut plan = EncodePlan::new(&input, &info, &profile_for_attempt(&settings, 0)).unwrap();
            plan.sessions = Sessions { sessions: 2, threads: 3 };
            let list = option_list(&plan, &info);
            // The quality in the encoder's own option, its default preset in its own.
            assert_eq!(get(&list, profile.quality_option).as_deref(), Some("23"), "{encoder}: {list:?}");
            if let Some(preset) = profile.default_preset {
                assert_eq!(get(&list, profile.preset_option).as_deref(), Some(preset), "{encoder}: {list:?}");
            }
            for (key, value) in profile.options {
                assert_eq!(get(&list, key).as_deref(), Some(*value), "{encoder}: {list:?}");
            }
            match encoder {
                Encoder::Libx265 => {
                    let params = get(&list, "x265-params").unwrap();
                    for p in ["info=0", "pools=3", "hdr10=1", "max-cll=1000,400"] {
                        assert!(params.split(':').any(|x| x == p), "{params}");
                    }
                }
                Encoder::Libsvtav1 => {
                    let params = get(&list, "svtav1-params").unwrap();
                    assert_eq!(params, "lp=3:content-light=1000,400");
                }
                Encoder::HevcNvenc | Encoder::HevcQsv | Encoder::HevcVaapi | Encoder::LibaomAv1 => {
                    assert!(get(&list, "x265-params").is_none() && get(&list, "svtav1-params").is_none());
                }
            }
        }
    }
}
