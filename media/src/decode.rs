//! Opening a stream's decoder, on the CPU or on a hardware device, and the facts about an
//! input every reader of frames needs (its main video stream, how its packets frame NAL
//! units). Shared by the transcoder's sessions, verification, VMAF, the mux and the search.

use rsmpeg::avcodec::{AVCodec, AVCodecContext, AVPacket};
use rsmpeg::avformat::AVFormatContextInput;
use rsmpeg::avutil::AVFrame;
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use crate::device;
use crate::error::from_rsmpeg;
use crate::segment::packet_data;
use condense::domain::encoding::Hardware;
use condense::domain::job::FailureCode;
use condense::media::hdr_metadata::NalFormat;
use condense::media::MediaError;

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

/// What a keyframe's packet of one stream is read with (`media::keyframe::clean_start`): the
/// stream's codec name and codec private data.
pub struct Coding {
    codec: String,
    extradata: Vec<u8>,
}

impl Coding {
    pub fn of(input: &AVFormatContextInput, index: usize) -> Coding {
        let Some(stream) = input.streams().get(index) else {
            return Coding { codec: String::new(), extradata: Vec::new() };
        };
        let par = stream.codecpar();
        // SAFETY: avcodec_get_name returns a static string.
        let codec = unsafe { std::ffi::CStr::from_ptr(ffi::avcodec_get_name(par.codec_id)) };
        let extradata = if par.extradata.is_null() || par.extradata_size <= 0 {
            Vec::new()
        } else {
            // SAFETY: the codec parameters hold `extradata_size` bytes at `extradata` while
            // the input is open.
            unsafe { std::slice::from_raw_parts(par.extradata, par.extradata_size as usize) }.to_vec()
        };
        Coding { codec: codec.to_string_lossy().into_owned(), extradata }
    }
}

/// Packets read past a seek looking for the keyframe at a time, at most: more than a GOP of
/// x264's default (250 frames), so it is found wherever the seek lands before it.
const KEYFRAME_SCAN_PACKETS: u32 = 600;

/// Reads the keyframe of stream `video` at time `at` (its presentation time, or its decode
/// time as MP4's index gives it): seeks to at or before `at` and reads that stream's packets
/// up to it (MP4's demuxer takes a seek's time for a presentation time and lands on the
/// keyframe before one given by decode time). Answers the keyframe with its presentation
/// time when decoding starts cleanly at it (`media::keyframe::clean_start`); None where the
/// seek fails, no keyframe is at `at`, or it is not clean. The input is then anywhere: the
/// caller seeks again.
pub fn clean_keyframe_at(
    input: &mut AVFormatContextInput,
    video: usize,
    coding: &Coding,
    at: i64,
) -> Result<Option<(i64, AVPacket)>, MediaError> {
    // SAFETY: seeking an open input context the caller owns.
    let ret = unsafe {
        ffi::av_seek_frame(input.as_mut_ptr(), i32::try_from(video).unwrap_or(0), at, ffi::AVSEEK_FLAG_BACKWARD as i32)
    };
    if ret < 0 {
        return Ok(None);
    }
    let mut read = 0u32;
    while let Some(packet) = crate::probe::read_packet(input, "the source")? {
        if packet.stream_index as usize != video {
            continue;
        }
        read += 1;
        let known = |t: i64| t != ffi::AV_NOPTS_VALUE;
        let key = packet.flags & ffi::AV_PKT_FLAG_KEY as i32 != 0;
        if key && known(packet.pts) && (packet.pts == at || packet.dts == at) {
            let clean = condense::media::keyframe::clean_start(&coding.codec, &coding.extradata, packet_data(&packet));
            return Ok(clean.then_some((packet.pts, packet)));
        }
        // Decode order: a keyframe shown at `at` is decoded at or before it.
        if (known(packet.dts) && packet.dts > at) || read >= KEYFRAME_SCAN_PACKETS {
            return Ok(None);
        }
    }
    Ok(None)
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
    let mut ctx = crate::context::codec_context(&decoder)?;
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
