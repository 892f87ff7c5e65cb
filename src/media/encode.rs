//! The transcoder proper, run inside the `condense transcode` child process: decodes the
//! source's main video stream and encodes it into keyframe-aligned segments (each segment is
//! a fresh encoder session, so it starts on a keyframe and stands alone), recording each
//! finished segment in the manifest. A stop request finishes the segment in progress, so a
//! pause loses nothing; a kill loses at most that segment. When the video is complete the
//! segments are muxed with the source's other streams (see `mux`).

use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rsmpeg::avcodec::{AVCodec, AVCodecContext};
use rsmpeg::avformat::AVFormatContextInput;
use rsmpeg::avutil::{AVDictionary, AVFrame};
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use rsmpeg::swscale::SwsContext;
use rsmpeg::UnsafeDerefMut;
use serde::Serialize;

use super::error::from_rsmpeg;
use super::manifest::{inspect, sync_dir, Manifest, PartialState, Run, Segment};
use super::plan::EncodePlan;
use super::probe::{self, HdrKind, MediaInfo};
use super::segment::{CodecParams, SegmentFile};
use super::{layout, mux, partial, MediaError};
use crate::domain::encoding::{Encoder, Hardware};
use crate::domain::job::FailureCode;

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
    },
    #[serde(rename_all = "camelCase")]
    SegmentDone {
        index: u32,
        frames: u64,
        bytes: u64,
    },
    #[serde(rename_all = "camelCase")]
    Paused {
        frames_done: u64,
        segments: u32,
    },
    Muxing,
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
    let created = !plan.partial_dir.exists();
    let lock = match partial::lock(&plan.partial_dir)? {
        Ok(lock) => lock,
        Err(partial::Held::Busy) => return Ok(RunEnd::Busy),
    };
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
    let state = inspect(plan);
    // Check room before writing anything: segments plus the final file need about the
    // output's size twice, minus what finished segments already hold.
    let kept: u64 = match &state {
        PartialState::Valid(m) => m.segments.iter().map(|s| s.bytes).sum(),
        _ => 0,
    };
    let probe_dir = if plan.partial_dir.exists() {
        plan.partial_dir.as_path()
    } else {
        plan.partial_dir.parent().unwrap_or(Path::new("."))
    };
    let free = free_bytes(probe_dir).map_err(|e| MediaError::from_io("checking free space", &e))?;
    let needed = plan.min_free_bytes.saturating_sub(kept);
    if free < needed {
        let e = MediaError::new(
            FailureCode::InsufficientDiskSpace,
            format!("{} has {free} bytes free; encoding needs {needed}", probe_dir.display()),
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
    std::fs::create_dir_all(&plan.partial_dir).map_err(|e| MediaError::from_io("creating the partial output", &e))?;
    remove_strays(&plan.partial_dir, &manifest)?;
    manifest.claim(&plan.epoch, &plan.partial_dir)?;
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
        manifest.runs.push(Run {
            frames_encoded: encoded,
            frames_skipped: skipped,
            ended: if end.paused { "paused" } else { "video complete" }.into(),
        });
        manifest.save(&plan.partial_dir)?;
        if end.paused {
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
    let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
    emit(Event::Done {
        output: output.display().to_string(),
        size,
        frames_encoded_this_run: encoded,
        frames_skipped_this_run: skipped,
        cpu_ms: cpu_time_ms(),
        wall_ms: u64::try_from(wall.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    Ok(RunEnd::Completed)
}

/// Deletes files the manifest does not list: a segment cut short by a kill, an old output.
fn remove_strays(dir: &Path, manifest: &Manifest) -> Result<(), MediaError> {
    let entries = std::fs::read_dir(dir).map_err(|e| MediaError::from_io("reading the partial output", &e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let listed = manifest.segments.iter().any(|s| s.file == name);
        if !listed && !layout::is_bookkeeping(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

struct VideoEnd {
    paused: bool,
    frames_encoded: u64,
    frames_skipped: u64,
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
    let hdr10 = matches!(plan.hdr, HdrKind::Hdr10 | HdrKind::Hdr10Plus);
    let mut options = plan.encoder_options.clone();
    match plan.encoder {
        Encoder::Libx265 => {
            let mut params = vec!["log-level=error".to_string()];
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
        Encoder::Libsvtav1 if hdr10 => {
            let mut params = Vec::new();
            if let Some(m) = svt_mastering(info) {
                params.push(format!("mastering-display={m}"));
            }
            if let Some(l) = info.hdr.content_light {
                params.push(format!("content-light={},{}", l.max_cll, l.max_fall));
            }
            if !params.is_empty() {
                options.push(("svtav1-params".into(), params.join(":")));
            }
        }
        _ => {}
    }
    let mut options = options.iter();
    let (key, value) = options.next().ok_or_else(|| MediaError::misc("the plan sets no encoder option"))?;
    let mut dict = AVDictionary::new(&c(key)?, &c(value)?, 0);
    for (key, value) in options {
        dict = dict.set(&c(key)?, &c(value)?, 0);
    }
    Ok(dict)
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

/// One segment being written: its own encoder session and NUT file.
struct SegmentWriter {
    index: u32,
    file: String,
    path: std::path::PathBuf,
    output: SegmentFile,
    encoder: AVCodecContext,
    scaler: Option<SwsContext>,
    first_pts: Option<i64>,
    last_pts: i64,
    frames: u64,
}

impl SegmentWriter {
    fn open(plan: &EncodePlan, info: &MediaInfo, index: u32, fmt: &VideoFormat) -> Result<Self, MediaError> {
        let name = CString::new(plan.encoder.as_str()).map_err(|_| MediaError::misc("bad encoder name"))?;
        let codec = AVCodec::find_encoder_by_name(&name).ok_or_else(|| {
            MediaError::new(FailureCode::UnsupportedCodec, format!("encoder {} is not available", plan.encoder))
        })?;
        let pix_fmt = choose_pix_fmt(&codec, fmt.src_pix_fmt, plan.bit_depth);
        let mut encoder = AVCodecContext::new(&codec);
        encoder.set_width(fmt.width);
        encoder.set_height(fmt.height);
        encoder.set_pix_fmt(pix_fmt);
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
            raw.thread_count = 0;
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

        let file = layout::segment_file(index);
        let path = plan.partial_dir.join(&file);
        let output = SegmentFile::create(&path)?;
        Ok(SegmentWriter { index, file, path, output, encoder, scaler, first_pts: None, last_pts: 0, frames: 0 })
    }

    fn push(&mut self, frame: &AVFrame, pts: i64) -> Result<(), MediaError> {
        let mut converted;
        let frame = match self.scaler.as_mut() {
            Some(scaler) => {
                converted = AVFrame::new();
                converted.set_width(frame.width);
                converted.set_height(frame.height);
                converted.set_format(self.encoder.pix_fmt);
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
        self.encoder.send_frame(Some(frame)).map_err(|e| from_rsmpeg("encoding", &e))?;
        self.first_pts.get_or_insert(pts);
        self.last_pts = pts;
        self.frames += 1;
        self.drain()
    }

    fn drain(&mut self) -> Result<(), MediaError> {
        loop {
            let packet = match self.encoder.receive_packet() {
                Ok(p) => p,
                Err(RsmpegError::EncoderDrainError | RsmpegError::EncoderFlushedError) => return Ok(()),
                Err(e) => return Err(from_rsmpeg("encoding", &e)),
            };
            self.output.write(&packet)?;
        }
    }

    /// Flushes the encoder, closes the file durably, and describes the segment.
    fn finish(mut self) -> Result<(Segment, CodecParams), MediaError> {
        self.encoder.send_frame(None).map_err(|e| from_rsmpeg("flushing the encoder", &e))?;
        self.drain()?;
        let params = CodecParams::of(&self.encoder);
        self.output.finish()?;
        let bytes = std::fs::metadata(&self.path).map_err(|e| MediaError::from_io("closing a segment", &e))?.len();
        let segment = Segment {
            index: self.index,
            file: self.file,
            first_pts: self.first_pts.unwrap_or(0),
            last_pts: self.last_pts,
            frames: self.frames,
            bytes,
        };
        Ok((segment, params))
    }
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

/// The FFmpeg device type of the hardware an encoder runs on.
fn device_type(hardware: Hardware) -> Option<ffi::AVHWDeviceType> {
    match hardware {
        Hardware::Cpu => None,
        Hardware::Nvidia => Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_CUDA),
        Hardware::IntelQsv => Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_QSV),
        Hardware::Vaapi => Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_VAAPI),
    }
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
    let device = device_type(hardware).ok_or("the CPU has no hardware decoder")?;
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
    let mut device_ctx: *mut ffi::AVBufferRef = std::ptr::null_mut();
    // SAFETY: creates a device reference we own, handed to the decoder context below,
    // which unreferences it when it is freed.
    let ret =
        unsafe { ffi::av_hwdevice_ctx_create(&mut device_ctx, device, std::ptr::null(), std::ptr::null_mut(), 0) };
    if ret < 0 || device_ctx.is_null() {
        return Err(format!("no {hardware} device: {}", rsmpeg::error::RsmpegError::AVError(ret)));
    }
    // SAFETY: plain field writes before the decoder is opened.
    unsafe {
        let raw = ctx.deref_mut();
        raw.hw_device_ctx = device_ctx;
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

fn encode_video(
    plan: &EncodePlan,
    info: &MediaInfo,
    manifest: &mut Manifest,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(Event),
) -> Result<VideoEnd, MediaError> {
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
    let fps = f64::from(frame_rate.num) / f64::from(frame_rate.den);
    let segment_frames = ((plan.segment_seconds * fps).round() as u64).max(1);
    let duration = info.video().and_then(|v| v.duration_seconds).or(info.duration_seconds).unwrap_or(0.0);
    let tb = f64::from(time_base.num) / f64::from(time_base.den);
    let start_pts = input.streams().get(vi).map(|s| s.start_time).filter(|t| *t != ffi::AV_NOPTS_VALUE).unwrap_or(0);

    let resume_after = manifest.segments.last().map(|s| s.last_pts);
    if let Some(pts) = resume_after {
        // SAFETY: seeking an open input context we own.
        let ret = unsafe {
            ffi::av_seek_frame(
                input.as_mut_ptr(),
                i32::try_from(vi).unwrap_or(0),
                pts,
                ffi::AVSEEK_FLAG_BACKWARD as i32,
            )
        };
        if ret < 0 {
            // Some inputs cannot seek: decode from the start and drop what is done.
            tracing::warn!(code = ret, "seek failed; decoding from the start");
        }
    }

    let mut format: Option<VideoFormat> = None;
    let mut writer: Option<SegmentWriter> = None;
    let mut last_pts = resume_after;
    let (mut encoded, mut skipped) = (0u64, 0u64);
    let mut next_synth_pts = resume_after.map(|p| p + 1).unwrap_or(start_pts);
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut bytes_done: u64 = manifest.segments.iter().map(|s| s.bytes).sum();
    let mut decode_errors = 0u32;
    let mut eof = false;

    loop {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if !eof {
            match probe::read_packet(&mut input, "the source")? {
                Some(packet) => {
                    if packet.stream_index as usize != vi {
                        continue;
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
            if last_pts.is_some_and(|p| pts <= p) {
                skipped += 1;
                continue;
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
                let index = u32::try_from(manifest.segments.len()).unwrap_or(u32::MAX);
                writer = Some(SegmentWriter::open(plan, info, index, &fmt)?);
            }
            if let Some(w) = writer.as_mut() {
                w.push(&frame, pts)?;
                encoded += 1;
                if plan.throttle_ms_per_frame > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(plan.throttle_ms_per_frame));
                }
                last_pts = Some(pts);
                if w.frames >= segment_frames {
                    if let Some(done) = writer.take() {
                        bytes_done += close_segment(plan, manifest, done, emit)?;
                    }
                }
            }
            if last_report.elapsed().as_millis() >= 500 {
                last_report = Instant::now();
                let out_time = (pts - start_pts) as f64 * tb;
                let partial = writer.as_ref().map(|w| std::fs::metadata(&w.path).map(|m| m.len()).unwrap_or(0));
                emit(Event::Progress {
                    frame: manifest.frames_done() + writer.as_ref().map(|w| w.frames).unwrap_or(0),
                    fps: encoded as f64 / started.elapsed().as_secs_f64().max(0.001),
                    out_time,
                    percent: if duration > 0.0 { (out_time / duration * 100.0).clamp(0.0, 99.9) } else { 0.0 },
                    size: bytes_done + partial.unwrap_or(0),
                });
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
        }
        if eof && !got_frame {
            break;
        }
    }
    let paused = stop.load(Ordering::SeqCst) && !(eof && writer.is_none());
    if let Some(w) = writer.take() {
        if w.frames > 0 {
            close_segment(plan, manifest, w, emit)?;
        }
    }
    if manifest.segments.is_empty() {
        return Err(MediaError::invalid("no video frame could be decoded"));
    }
    if !paused {
        manifest.video_complete = true;
    }
    Ok(VideoEnd { paused, frames_encoded: encoded, frames_skipped: skipped })
}

fn close_segment(
    plan: &EncodePlan,
    manifest: &mut Manifest,
    writer: SegmentWriter,
    emit: &mut dyn FnMut(Event),
) -> Result<u64, MediaError> {
    let (segment, params) = writer.finish()?;
    match &manifest.video {
        None => manifest.video = Some(params),
        Some(known) if known.extradata != params.extradata || known.codec_id != params.codec_id => {
            return Err(MediaError::misc("the encoder's stream headers changed between segments"));
        }
        Some(_) => {}
    }
    sync_dir(&plan.partial_dir).map_err(|e| MediaError::from_io("syncing the partial output", &e))?;
    let bytes = segment.bytes;
    emit(Event::SegmentDone { index: segment.index, frames: segment.frames, bytes });
    manifest.segments.push(segment);
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
    fn each_hardware_decodes_on_its_own_device_and_the_cpu_on_none() {
        assert_eq!(device_type(Hardware::Cpu), None);
        assert_eq!(device_type(Hardware::Nvidia), Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_CUDA));
        assert_eq!(device_type(Hardware::IntelQsv), Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_QSV));
        assert_eq!(device_type(Hardware::Vaapi), Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_VAAPI));
    }
}
