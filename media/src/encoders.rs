//! Which encoders really open on this machine: an encoder listed by FFmpeg may still need a
//! GPU, a driver or a device that is not there.

use std::ffi::CString;

use rsmpeg::avcodec::AVCodec;
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use crate::device::DeviceFrames;
use condense::domain::encoding::{Encoder, FrameInput, ENCODERS};

/// Whether the encoder can be used here: present for software encoders, present and
/// opening for a small picture for hardware ones (Quick Sync and VAAPI with a pool of
/// pictures on their device, as the transcoder feeds them). Software encoders are not
/// test-opened (SVT-AV1 1.4 hangs when an encoder that never received a frame is closed).
pub fn opens(encoder: Encoder) -> bool {
    why_not(encoder).is_none()
}

/// Why the encoder cannot be used here, if it cannot.
pub fn why_not(encoder: Encoder) -> Option<String> {
    let name = encoder.as_str();
    let c = CString::new(name).ok()?;
    let Some(codec) = AVCodec::find_encoder_by_name(&c) else {
        return Some(format!("this build of FFmpeg has no {name}"));
    };
    if !encoder.is_hardware() {
        return None;
    }
    let mut ctx = match crate::context::codec_context(&codec) {
        Ok(ctx) => ctx,
        Err(e) => return Some(e.message),
    };
    ctx.set_width(320);
    ctx.set_height(240);
    ctx.set_time_base(ffi::AVRational { num: 1, den: 25 });
    ctx.set_framerate(ffi::AVRational { num: 25, den: 1 });
    // Kept alive until the encoder is closed (the context holds a reference too).
    let frames = match encoder.profile().frame_input(8) {
        FrameInput::System => {
            let pix_fmt =
                codec.pix_fmts().and_then(|f| f.first().copied()).unwrap_or(ffi::AVPixelFormat_AV_PIX_FMT_YUV420P);
            ctx.set_pix_fmt(pix_fmt);
            None
        }
        FrameInput::Device { hardware, upload_format } => match DeviceFrames::open(hardware, upload_format, 320, 240) {
            Ok(frames) => {
                ctx.set_pix_fmt(frames.hw_format);
                // SAFETY: a field write before opening; the context releases the reference.
                unsafe { ctx.deref_mut().hw_frames_ctx = frames.new_ref() };
                Some(frames)
            }
            Err(why) => return Some(why),
        },
    };
    let opened = ctx.open(None).map_err(|e| format!("{name} does not open: {e}")).err();
    drop(ctx);
    drop(frames);
    opened
}

/// The encoders of condense's table that open here, in the table's order; why each other
/// one does not is logged.
pub fn available() -> Vec<String> {
    // SAFETY: quiets FFmpeg while failed opens are expected.
    let level = unsafe { ffi::av_log_get_level() };
    unsafe { ffi::av_log_set_level(ffi::AV_LOG_QUIET) };
    let list = ENCODERS
        .iter()
        .filter(|p| match why_not(p.encoder) {
            None => true,
            Some(why) => {
                tracing::info!(encoder = %p.encoder, reason = %why, "encoder not offered by this node");
                false
            }
        })
        .map(|p| p.encoder.as_str().to_string())
        .collect();
    unsafe { ffi::av_log_set_level(level) };
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_encoders_open_and_hardware_ones_say_why_they_do_not_without_a_device() {
        let list = available();
        for cpu in ["libx265", "libsvtav1"] {
            assert!(list.iter().any(|e| e == cpu), "{list:?}");
        }
        if std::path::Path::new("/dev/dri").exists() || std::path::Path::new("/dev/nvidiactl").exists() {
            eprintln!("this machine has a GPU device: skipping the no-device checks");
            return;
        }
        // No device here: none of the hardware encoders is listed, each with its reason.
        for encoder in [
            Encoder::HevcNvenc,
            Encoder::HevcQsv,
            Encoder::HevcVaapi,
            Encoder::Av1Nvenc,
            Encoder::Av1Qsv,
            Encoder::Av1Vaapi,
        ] {
            assert!(!list.iter().any(|e| e == encoder.as_str()), "{list:?}");
            let why = why_not(encoder).unwrap();
            assert!(why.contains("no ") || why.contains("does not open"), "{encoder}: {why}");
        }
        assert!(why_not(Encoder::HevcVaapi).unwrap().starts_with("no vaapi device"));
    }
}
