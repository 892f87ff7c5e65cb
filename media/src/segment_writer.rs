//! One segment being written: its own encoder session (with its pixel conversion and, for
//! encoders that take pictures on a device, the device's picture pool), the dynamic HDR
//! metadata of its frames written back into their access units, and its NUT file, closed
//! durably. Beside `segment` rather than in it: it describes what it wrote as the manifest's
//! `Segment`, and the manifest itself is built on `segment`'s `CodecParams`.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::PathBuf;

use rsmpeg::avcodec::{AVCodec, AVCodecContext};
use rsmpeg::avutil::AVFrame;
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use rsmpeg::swscale::SwsContext;
use rsmpeg::UnsafeDerefMut;

use crate::device::DeviceFrames;
use crate::encoder_options::{choose_pix_fmt, encoder_options, open_with_options};
use crate::error::from_rsmpeg;
use crate::segment::{packet_data, CodecParamsExt, SegmentFile};
use condense::domain::encoding::FrameInput;
use condense::domain::job::FailureCode;
use condense::domain::segments::Span;
use condense::media::codec_params::CodecParams;
use condense::media::hdr_metadata::{self, FrameMetadata};
use condense::media::info::MediaInfo;
use condense::media::manifest::Segment;
use condense::media::plan::EncodePlan;
use condense::media::MediaError;

/// Colour facts carried from the decoder to every segment's encoder.
#[derive(Clone, Copy)]
pub(crate) struct VideoFormat {
    pub(crate) width: i32,
    pub(crate) height: i32,
    pub(crate) src_pix_fmt: i32,
    pub(crate) sample_aspect_ratio: ffi::AVRational,
    pub(crate) color_primaries: ffi::AVColorPrimaries,
    pub(crate) color_trc: ffi::AVColorTransferCharacteristic,
    pub(crate) colorspace: ffi::AVColorSpace,
    pub(crate) color_range: ffi::AVColorRange,
    pub(crate) chroma_location: ffi::AVChromaLocation,
    pub(crate) time_base: ffi::AVRational,
    pub(crate) frame_rate: ffi::AVRational,
}

/// How frames are scaled to the plan's `video_size` (maxHeight): Lanczos, the sharpest of
/// swscale's filters for a reduction, with accurate rounding (no drift of levels from the
/// fast integer paths) and full chroma resolution in the horizontal filter. The quality
/// search scales its reference frames with the same flags (`vmaf::Frames::scaled_like_encode`),
/// so a sample scores against what its encoder was given.
pub(crate) const SCALE_FLAGS: u32 = ffi::SWS_LANCZOS | ffi::SWS_ACCURATE_RND | ffi::SWS_FULL_CHR_H_INT;

/// The size and sample aspect ratio a segment's encoder is opened with: the plan's
/// `video_size` where it scales, with the sample aspect ratio changed as FFmpeg's `scale`
/// filter changes it, so the picture's display aspect stays the source's (an unknown 0:1
/// stays unknown); else the source's.
pub(crate) fn output_geometry(plan: &EncodePlan, fmt: &VideoFormat) -> (i32, i32, ffi::AVRational) {
    let Some(size) = plan.streams.as_ref().and_then(|s| s.video_size) else {
        return (fmt.width, fmt.height, fmt.sample_aspect_ratio);
    };
    let (width, height) =
        (i32::try_from(size.width).unwrap_or(i32::MAX), i32::try_from(size.height).unwrap_or(i32::MAX));
    let sar = scaled_sample_aspect(fmt.sample_aspect_ratio, (fmt.width, fmt.height), (width, height));
    (width, height, sar)
}

/// `sar` of a `from` picture scaled to `to`, the display aspect kept, reduced.
fn scaled_sample_aspect(sar: ffi::AVRational, from: (i32, i32), to: (i32, i32)) -> ffi::AVRational {
    if sar.num <= 0 || sar.den <= 0 || to.0 <= 0 || from.1 <= 0 {
        return sar;
    }
    let num = i64::from(sar.num) * i64::from(to.1) * i64::from(from.0);
    let den = i64::from(sar.den) * i64::from(to.0) * i64::from(from.1);
    let (mut a, mut b) = (num, den);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let g = a.max(1);
    match (i32::try_from(num / g), i32::try_from(den / g)) {
        (Ok(num), Ok(den)) => ffi::AVRational { num, den },
        _ => sar,
    }
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
pub(crate) struct SegmentWriter {
    index: u32,
    file: String,
    pub(crate) path: PathBuf,
    output: SegmentFile,
    encoder: AVCodecContext,
    /// Pixel conversion and, where the plan scales, the scaling, in one swscale pass.
    scaler: Option<SwsContext>,
    /// The encoder's picture size (the plan's `video_size`, or the source's).
    width: i32,
    height: i32,
    /// The device's picture pool, for encoders that take pictures on their device.
    device_frames: Option<DeviceFrames>,
    first_pts: Option<i64>,
    last_pts: i64,
    pub(crate) frames: u64,
    /// Dynamic metadata of the frames sent to the encoder and not yet out of it, by
    /// presentation time (the encoder reorders frames).
    dynamic: BTreeMap<i64, FrameMetadata>,
}

impl SegmentWriter {
    pub(crate) fn open(
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
        let (width, height, sample_aspect_ratio) = output_geometry(plan, fmt);
        // Quick Sync and VAAPI take pictures on their device: uploaded from their format.
        let device_frames = match plan.encoder.profile().frame_input(plan.bit_depth) {
            FrameInput::System => None,
            FrameInput::Device { hardware, upload_format } => Some(
                DeviceFrames::open(hardware, upload_format, width, height)
                    .map_err(|why| MediaError::new(FailureCode::UnsupportedCodec, why))?,
            ),
        };
        let (pix_fmt, encoder_fmt) = match &device_frames {
            Some(frames) => (frames.sw_format, frames.hw_format),
            None => {
                let chosen = choose_pix_fmt(&codec, fmt.src_pix_fmt, plan.bit_depth, plan.cautious);
                (chosen, chosen)
            }
        };
        let mut encoder = crate::context::codec_context(&codec)?;
        encoder.set_width(width);
        encoder.set_height(height);
        encoder.set_pix_fmt(encoder_fmt);
        encoder.set_time_base(fmt.time_base);
        encoder.set_framerate(fmt.frame_rate);
        encoder.set_sample_aspect_ratio(sample_aspect_ratio);
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
        let scaled = (width, height) != (fmt.width, fmt.height);
        let scaler = if pix_fmt != fmt.src_pix_fmt || scaled {
            // A conversion alone keeps the bicubic filter it always had (the segments of a
            // resumed run match); scaling takes the high-quality one.
            let flags = if scaled { SCALE_FLAGS } else { ffi::SWS_BICUBIC };
            Some(
                SwsContext::get_context(fmt.width, fmt.height, fmt.src_pix_fmt, width, height, pix_fmt, flags)
                    .ok_or_else(|| {
                        MediaError::misc(format!(
                            "cannot scale {}x{} frames to {width}x{height} for the encoder",
                            fmt.width, fmt.height
                        ))
                    })?,
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
            width,
            height,
            device_frames,
            first_pts: None,
            last_pts: 0,
            frames: 0,
            dynamic: BTreeMap::new(),
        })
    }

    /// Encodes one frame; `dynamic` is its dynamic HDR metadata, written into its access unit.
    pub(crate) fn push(&mut self, frame: &AVFrame, pts: i64, dynamic: Option<FrameMetadata>) -> Result<(), MediaError> {
        if let Some(meta) = dynamic.filter(|m| !m.is_empty()) {
            self.dynamic.insert(pts, meta);
        }
        let mut converted;
        let frame = match self.scaler.as_mut() {
            Some(scaler) => {
                converted = AVFrame::new();
                converted.set_width(self.width);
                converted.set_height(self.height);
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
                let with = hdr_metadata::write(packet_data(&packet), &meta);
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
    pub(crate) fn finish(mut self, span: Span) -> Result<(Segment, CodecParams), MediaError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_scaled_picture_keeps_its_display_aspect() {
        let r = |num, den| ffi::AVRational { num, den };
        let same = |a: ffi::AVRational, b: ffi::AVRational| (a.num, a.den) == (b.num, b.den);
        // Square pixels, 16:9 to 16:9: still square.
        assert!(same(scaled_sample_aspect(r(1, 1), (1920, 1080), (1280, 720)), r(1, 1)));
        // Width rounded to even: the pixels widen by what the rounding took.
        assert!(same(scaled_sample_aspect(r(1, 1), (1440, 1080), (958, 720)), r(480, 479)));
        // Anamorphic DVD (720x576, 16:9 by 64:45 pixels) to 480 lines.
        let sar = scaled_sample_aspect(r(64, 45), (720, 576), (600, 480));
        assert!(same(sar, r(64, 45)), "{}:{}", sar.num, sar.den);
        // Unknown stays unknown.
        assert!(same(scaled_sample_aspect(r(0, 1), (1920, 1080), (1280, 720)), r(0, 1)));
    }
}
