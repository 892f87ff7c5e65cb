//! VMAF, in-process: Netflix's libvmaf (the crate `libvmaf-sys` vendors its 2.3.1 source and
//! builds it, statically, with the model vmaf_v0.6.1 built in) fed with frames that FFmpeg's
//! decoders give here, both brought to the reference's size and to 4:2:0 at its bit depth
//! with swscale. No ffmpeg program: Debian's FFmpeg 5.1 has no libvmaf filter. It runs in
//! the child processes that encode (see docs/ARCHITECTURE.md, "Quality"), never in a server.

use std::ffi::CString;
use std::path::Path;
use std::ptr;

use libvmaf_sys as sys;
use rsmpeg::avcodec::{AVCodec, AVCodecContext, AVPacket};
use rsmpeg::avformat::AVFormatContextInput;
use rsmpeg::avutil::AVFrame;
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use rsmpeg::swscale::SwsContext;

use crate::decode::{main_video_index, open_decoder};
use crate::error::from_rsmpeg;
use crate::probe::{open_input, read_packet};
use crate::segment::{CodecParamsExt, SegmentPackets};
use condense::domain::segments::Span;
use condense::media::codec_params::CodecParams;
use condense::media::quality::{percentile_5, VmafScore, Window};
use condense::media::MediaError;
use rsmpeg::UnsafeDerefMut;

/// The model every score here is made with (the one ab-av1 and FFmpeg's filter default to).
pub const MODEL: &str = "vmaf_v0.6.1";

/// What the frames are brought to before scoring: the reference's size, 4:2:0, its depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Canvas {
    pub width: i32,
    pub height: i32,
    /// 8, or 10 for anything deeper (libvmaf scores 8, 10, 12 and 16 bits; 10 is what HEVC
    /// and AV1 sources carry).
    pub bpc: u32,
}

impl Canvas {
    fn pix_fmt(self) -> ffi::AVPixelFormat {
        if self.bpc > 8 {
            ffi::AVPixelFormat_AV_PIX_FMT_YUV420P10LE
        } else {
            ffi::AVPixelFormat_AV_PIX_FMT_YUV420P
        }
    }
}

/// A libvmaf context with the default model loaded, fed pairs of frames in order.
pub struct Vmaf {
    ctx: *mut sys::VmafContext,
    model: *mut sys::VmafModel,
    canvas: Canvas,
    frames: u32,
}

fn vmaf_error(what: &str, code: i32) -> MediaError {
    MediaError::misc(format!("libvmaf: {what} failed ({code})"))
}

impl Vmaf {
    /// `threads`: libvmaf's own worker threads (0: it scores on the calling thread).
    fn new(canvas: Canvas, threads: u32) -> Result<Self, MediaError> {
        let cfg = sys::VmafConfiguration {
            log_level: sys::VmafLogLevel::VMAF_LOG_LEVEL_NONE,
            n_threads: threads,
            n_subsample: 1,
            cpumask: 0,
        };
        let mut ctx = ptr::null_mut();
        // SAFETY: vmaf_init writes a new context into `ctx` or leaves it null on error.
        let err = unsafe { sys::vmaf_init(&mut ctx, cfg) };
        if err != 0 || ctx.is_null() {
            return Err(vmaf_error("init", err));
        }
        let mut vmaf = Vmaf { ctx, model: ptr::null_mut(), canvas, frames: 0 };
        let name = CString::new(MODEL).map_err(|_| MediaError::misc("model name"))?;
        let mut model_cfg = sys::VmafModelConfig { name: name.as_ptr(), flags: 0 };
        // SAFETY: the configuration and the version string outlive the call; the model is
        // owned by `vmaf` from here (destroyed in Drop).
        let err = unsafe { sys::vmaf_model_load(&mut vmaf.model, &mut model_cfg, name.as_ptr()) };
        if err != 0 || vmaf.model.is_null() {
            return Err(vmaf_error("loading the model vmaf_v0.6.1", err));
        }
        // SAFETY: both pointers are live and owned by `vmaf`.
        let err = unsafe { sys::vmaf_use_features_from_model(vmaf.ctx, vmaf.model) };
        if err != 0 {
            return Err(vmaf_error("registering the model's features", err));
        }
        Ok(vmaf)
    }

    /// Copies a frame (already on the canvas: its size, 4:2:0 at its depth) into a new
    /// libvmaf picture.
    fn picture(&self, frame: &AVFrame) -> Result<sys::VmafPicture, MediaError> {
        let Canvas { width, height, bpc } = self.canvas;
        if frame.width != width || frame.height != height || frame.format != self.canvas.pix_fmt() {
            return Err(MediaError::misc("a frame not brought to the scoring canvas"));
        }
        // SAFETY: a zeroed VmafPicture is its documented empty state; alloc fills it.
        let mut pic: sys::VmafPicture = unsafe { std::mem::zeroed() };
        // SAFETY: allocates planes for the canvas; freed by libvmaf once read (or below).
        let err = unsafe {
            sys::vmaf_picture_alloc(
                &mut pic,
                sys::VmafPixelFormat::VMAF_PIX_FMT_YUV420P,
                bpc,
                width.unsigned_abs(),
                height.unsigned_abs(),
            )
        };
        if err != 0 {
            return Err(vmaf_error("allocating a picture", err));
        }
        let bytes_per_sample = if bpc > 8 { 2 } else { 1 };
        let planes = pic.w.iter().zip(&pic.h).zip(pic.data.iter().zip(&pic.stride));
        for (((w, h), (dst, dst_stride)), (src, src_stride)) in planes.zip(frame.data.iter().zip(&frame.linesize)) {
            let row_bytes = *w as usize * bytes_per_sample;
            for row in 0..*h as isize {
                // SAFETY: both planes hold `h` rows of at least `row_bytes` bytes at their
                // strides (the frame is on the canvas, checked above; the picture was
                // allocated for it), and they do not overlap.
                unsafe {
                    ptr::copy_nonoverlapping(
                        src.offset(row * *src_stride as isize),
                        dst.cast::<u8>().offset(row * *dst_stride),
                        row_bytes,
                    );
                }
            }
        }
        Ok(pic)
    }

    /// Scores one pair, the next in order.
    fn push(&mut self, reference: &AVFrame, distorted: &AVFrame) -> Result<(), MediaError> {
        let mut reference = self.picture(reference)?;
        let mut distorted = match self.picture(distorted) {
            Ok(pic) => pic,
            Err(e) => {
                // SAFETY: the reference picture was allocated above and not handed over.
                unsafe { sys::vmaf_picture_unref(&mut reference) };
                return Err(e);
            }
        };
        // SAFETY: libvmaf takes both pictures (and frees them) whether or not it succeeds.
        let err = unsafe { sys::vmaf_read_pictures(self.ctx, &mut reference, &mut distorted, self.frames) };
        if err != 0 {
            return Err(vmaf_error("reading a pair of frames", err));
        }
        self.frames += 1;
        Ok(())
    }

    /// Flushes libvmaf and answers the score of each pair pushed, in order.
    fn frame_scores(self) -> Result<Vec<f64>, MediaError> {
        if self.frames == 0 {
            return Err(MediaError::invalid("no frames to score"));
        }
        // SAFETY: a null pair flushes the context (its documented end of input).
        let err = unsafe { sys::vmaf_read_pictures(self.ctx, ptr::null_mut(), ptr::null_mut(), 0) };
        if err != 0 {
            return Err(vmaf_error("flushing", err));
        }
        let mut scores = Vec::with_capacity(self.frames as usize);
        for index in 0..self.frames {
            let mut score = 0.0;
            // SAFETY: the context and model are live; the index is one that was read.
            let err = unsafe { sys::vmaf_score_at_index(self.ctx, self.model, &mut score, index) };
            if err != 0 {
                return Err(vmaf_error("scoring a frame", err));
            }
            scores.push(score);
        }
        Ok(scores)
    }
}

impl Drop for Vmaf {
    fn drop(&mut self) {
        // SAFETY: both were made in `new` and are destroyed once, here.
        unsafe {
            if !self.model.is_null() {
                sys::vmaf_model_destroy(self.model);
            }
            sys::vmaf_close(self.ctx);
        }
    }
}

/// Frames of a file's main video, in presentation order, brought to a canvas; all of them,
/// or those of a span of its timestamps.
pub struct Frames {
    packets: Packets,
    decoder: AVCodecContext,
    canvas: Canvas,
    span: Span,
    scaler: Option<(SwsContext, (i32, i32, ffi::AVPixelFormat))>,
    /// swscale's filter for bringing frames to the canvas.
    scale_flags: u32,
    ended: bool,
}

/// Where the packets come from: a file's main video stream, or segment files (the
/// encoder's packets, `media::segment`) one after the other.
enum Packets {
    File { input: crate::growing::Input, video: usize },
    Segments { files: std::vec::IntoIter<std::path::PathBuf>, current: Option<SegmentPackets> },
}

impl Packets {
    fn next(&mut self) -> Result<Option<AVPacket>, MediaError> {
        match self {
            Packets::File { input, video } => loop {
                match read_packet(input, "the video")? {
                    Some(packet) if packet.stream_index as usize != *video => continue,
                    other => return Ok(other),
                }
            },
            Packets::Segments { files, current } => loop {
                if let Some(reader) = current.as_mut() {
                    if let Some(packet) = reader.next_packet()? {
                        return Ok(Some(packet));
                    }
                }
                match files.next() {
                    Some(file) => *current = Some(SegmentPackets::open(&file)?),
                    None => return Ok(None),
                }
            },
        }
    }
}

/// The span of `window` in the timestamps of stream `video` of `input`; the whole video for
/// a window that starts at 0 and reaches its end (`whole`).
pub fn window_span(input: &AVFormatContextInput, video: usize, window: Window, whole: bool) -> Span {
    let Some(stream) = input.streams().get(video) else { return Span::ALL };
    if whole {
        return Span::ALL;
    }
    let tb = f64::from(stream.time_base.num) / f64::from(stream.time_base.den);
    let start = if stream.start_time == ffi::AV_NOPTS_VALUE { 0 } else { stream.start_time };
    let at = |seconds: f64| start + (seconds / tb).round() as i64;
    Span::new(Some(at(window.start)), Some(at(window.start + window.length)))
}

impl Frames {
    pub fn open(path: &Path, canvas: Option<Canvas>) -> Result<Self, MediaError> {
        Frames::open_span(path, canvas, |_, _| Span::ALL)
    }

    /// The frames of `window` only (of the whole video when `whole`).
    pub fn open_window(path: &Path, canvas: Option<Canvas>, window: Window, whole: bool) -> Result<Self, MediaError> {
        Frames::open_span(path, canvas, |input, video| window_span(input, video, window, whole))
    }

    /// The frames whose timestamps `span_of` (given the input and its video stream) answers.
    pub fn open_span(
        path: &Path,
        canvas: Option<Canvas>,
        span_of: impl FnOnce(&AVFormatContextInput, usize) -> Span,
    ) -> Result<Self, MediaError> {
        let mut input = open_input(path)?;
        let video = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
        let span = span_of(&input, video);
        if let Some(from) = span.from {
            // From the keyframe before the span: the frames before it are decoded and dropped.
            let ret = crate::probe::seek_before(&mut input, video, from);
            if ret < 0 {
                tracing::debug!(code = ret, "seek failed; decoding from the start");
            }
        }
        let decoder = open_decoder(&input, video)?;
        Frames::over(Packets::File { input, video }, decoder, canvas, span)
    }

    /// The frames of segment files written with `params`, in the order given.
    pub fn of_segments(
        files: Vec<std::path::PathBuf>,
        params: &CodecParams,
        canvas: Canvas,
    ) -> Result<Self, MediaError> {
        let par = params.to_codecpar()?;
        let codec =
            AVCodec::find_decoder(par.codec_id).ok_or_else(|| MediaError::misc("no decoder for the segments"))?;
        let mut decoder = crate::context::codec_context(&codec)?;
        decoder.apply_codecpar(&par).map_err(|e| from_rsmpeg("decoder parameters", &e))?;
        // SAFETY: a plain field write before opening.
        unsafe { decoder.deref_mut().pkt_timebase = params.time_base() };
        decoder.open(None).map_err(|e| from_rsmpeg("opening the decoder", &e))?;
        let packets = Packets::Segments { files: files.into_iter(), current: None };
        Frames::over(packets, decoder, Some(canvas), Span::ALL)
    }

    fn over(packets: Packets, decoder: AVCodecContext, canvas: Option<Canvas>, span: Span) -> Result<Self, MediaError> {
        let canvas = canvas.unwrap_or_else(|| Canvas {
            width: decoder.width,
            height: decoder.height,
            // SAFETY: a lookup in FFmpeg's static table of pixel formats.
            bpc: match unsafe { ffi::av_pix_fmt_desc_get(decoder.pix_fmt).as_ref() } {
                Some(desc) if desc.comp[0].depth > 8 => 10,
                _ => 8,
            },
        });
        Ok(Frames { packets, decoder, canvas, span, scaler: None, scale_flags: ffi::SWS_BICUBIC, ended: false })
    }

    pub fn canvas(&self) -> Canvas {
        self.canvas
    }

    /// These frames at `width` x `height` (their depth kept), scaled as the encoder's frames
    /// are where a plan scales the video (`segment_writer::SCALE_FLAGS`): the reference a
    /// scaled encode is scored against, at the output's size.
    pub fn scaled_like_encode(mut self, width: i32, height: i32) -> Self {
        self.canvas = Canvas { width, height, ..self.canvas };
        self.scale_flags = crate::segment_writer::SCALE_FLAGS;
        self.scaler = None;
        self
    }

    /// The next frame on the canvas, or None at the end of the video.
    pub fn next_frame(&mut self) -> Result<Option<AVFrame>, MediaError> {
        loop {
            match self.decoder.receive_frame() {
                Ok(frame) => {
                    let pts = frame.best_effort_timestamp;
                    if pts != ffi::AV_NOPTS_VALUE && self.span.is_before(pts) {
                        continue;
                    }
                    if pts != ffi::AV_NOPTS_VALUE && self.span.is_past(pts) {
                        return Ok(None);
                    }
                    return self.onto_canvas(&frame).map(Some);
                }
                Err(RsmpegError::DecoderFlushedError) => return Ok(None),
                Err(RsmpegError::DecoderDrainError) if !self.ended => {}
                Err(RsmpegError::DecoderDrainError) => return Ok(None),
                Err(e) => return Err(MediaError::invalid(format!("decode error: {e}"))),
            }
            match self.packets.next()? {
                Some(packet) => {
                    self.decoder
                        .send_packet(Some(&packet))
                        .map_err(|e| MediaError::invalid(format!("decode error: {e}")))?;
                }
                None => {
                    self.ended = true;
                    let _ = self.decoder.send_packet(None);
                }
            }
        }
    }

    fn onto_canvas(&mut self, frame: &AVFrame) -> Result<AVFrame, MediaError> {
        let Canvas { width, height, .. } = self.canvas;
        let pix_fmt = self.canvas.pix_fmt();
        if frame.width == width && frame.height == height && frame.format == pix_fmt {
            return Ok(frame.clone());
        }
        let from = (frame.width, frame.height, frame.format);
        if self.scaler.as_ref().is_none_or(|(_, made_for)| *made_for != from) {
            let scaler = SwsContext::get_context(from.0, from.1, from.2, width, height, pix_fmt, self.scale_flags)
                .ok_or_else(|| MediaError::misc("cannot scale the frames to score"))?;
            self.scaler = Some((scaler, from));
        }
        let mut out = AVFrame::new();
        out.set_width(width);
        out.set_height(height);
        out.set_format(pix_fmt);
        out.alloc_buffer().map_err(|e| from_rsmpeg("allocating a frame", &e))?;
        if let Some((scaler, _)) = self.scaler.as_mut() {
            scaler.scale_frame(frame, 0, frame.height, &mut out).map_err(|e| from_rsmpeg("scaling a frame", &e))?;
        }
        Ok(out)
    }
}

/// The VMAF of `distorted` against `reference`, frame by frame in order, both at the
/// reference's size and depth. The two must have the same number of frames: a score of a
/// video that lost frames would compare the wrong pairs.
pub fn compare(reference: &Path, distorted: &Path, threads: u32) -> Result<VmafScore, MediaError> {
    let reference = Frames::open(reference, None)?;
    let canvas = reference.canvas();
    score_pairs(reference, Frames::open(distorted, Some(canvas))?, threads, 1)
}

/// Pairs scored in blocks of this many (`score_frames`).
pub const BLOCK: u32 = 32;

/// The pairs one block scores: its own libvmaf context, fed the pair before the block first
/// and the pair after it last, neither of them scored. libvmaf's motion feature compares
/// each reference frame with the one before, and the model takes the lower of a frame's
/// motion and the next one's: with both neighbours fed, each pair of the block scores
/// exactly as it does when the whole video is scored.
struct Block {
    vmaf: Vmaf,
    /// The index of its first scored pair in the video.
    first: u32,
    /// Whether the pair before it was fed.
    lead: bool,
    scored: u32,
}

impl Block {
    fn finish(self) -> Result<impl Iterator<Item = (u32, f64)>, MediaError> {
        let Block { vmaf, first, lead, scored } = self;
        let scores = vmaf.frame_scores()?;
        Ok((first..).zip(scores.into_iter().skip(usize::from(lead)).take(scored as usize)))
    }
}

/// The scores of the pairs of `reference` and `distorted` (on the reference's canvas), in
/// order, as (index, score): of every pair when `every` is 1, else of the first `BLOCK` of
/// every `every` x `BLOCK` pairs. Blocks of consecutive frames, not every `every`-th frame
/// (libvmaf's `n_subsample`): an encoder's frames take turns in quality (B-frames, the
/// layers of a hierarchical group), and a step that matches their pattern picks the better
/// ones (one frame in two read 2.6 points high on x265 superfast, 0.5 on SVT-AV1; see
/// BENCHMARKS.md, "Scoring a block in two"). Also answers the number of pairs; the two
/// must end together.
pub fn score_frames(
    mut reference: Frames,
    mut distorted: Frames,
    threads: u32,
    every: u32,
) -> Result<(Vec<(u32, f64)>, u32), MediaError> {
    let every = every.max(1);
    let canvas = reference.canvas();
    let mut scores = Vec::new();
    let mut block: Option<Block> = None;
    let mut previous: Option<(AVFrame, AVFrame)> = None;
    let mut index = 0u32;
    loop {
        let (r, d) = match (reference.next_frame()?, distorted.next_frame()?) {
            (Some(r), Some(d)) => (r, d),
            (None, None) => break,
            (r, _) => {
                let longer = if r.is_some() { "reference" } else { "distorted" };
                return Err(MediaError::invalid(format!(
                    "the {longer} video has more frames than the other ({index})"
                )));
            }
        };
        if (index / BLOCK).is_multiple_of(every) {
            let open = match block.as_mut() {
                Some(open) => open,
                None => {
                    let mut vmaf = Vmaf::new(canvas, threads)?;
                    let lead = previous.take().map(|(pr, pd)| vmaf.push(&pr, &pd)).transpose()?.is_some();
                    block.insert(Block { vmaf, first: index, lead, scored: 0 })
                }
            };
            open.vmaf.push(&r, &d)?;
            open.scored += 1;
        } else if let Some(mut done) = block.take() {
            done.vmaf.push(&r, &d)?;
            scores.extend(done.finish()?);
        }
        previous = Some((r, d));
        index += 1;
    }
    if let Some(done) = block {
        scores.extend(done.finish()?);
    }
    Ok((scores, index))
}

/// The score of `distorted` against `reference` from the pairs `score_frames` scores.
pub fn score_pairs(reference: Frames, distorted: Frames, threads: u32, every: u32) -> Result<VmafScore, MediaError> {
    let (scores, frames) = score_frames(reference, distorted, threads, every)?;
    let scores: Vec<f64> = scores.into_iter().map(|(_, score)| score).collect();
    if scores.is_empty() {
        return Err(MediaError::invalid("no frames to score"));
    }
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    let p5 = percentile_5(&scores).unwrap_or(mean);
    Ok(VmafScore { mean, p5, frames })
}
