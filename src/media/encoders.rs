//! Which encoders really open on this machine: an encoder listed by FFmpeg may still need a
//! GPU, a driver or a device that is not there.

use std::ffi::CString;

use rsmpeg::avcodec::{AVCodec, AVCodecContext};
use rsmpeg::ffi;

use crate::domain::encoding::{Encoder, ENCODERS};

/// Whether the encoder can be used here: present for software encoders, present and
/// opening for a small picture for hardware ones. Software encoders are not test-opened
/// (SVT-AV1 1.4 hangs when an encoder that never received a frame is closed).
pub fn opens(encoder: Encoder) -> bool {
    opens_named(encoder.as_str(), !encoder.is_hardware())
}

fn opens_named(name: &str, software: bool) -> bool {
    let Ok(c) = CString::new(name) else { return false };
    let Some(codec) = AVCodec::find_encoder_by_name(&c) else { return false };
    if software {
        return true;
    }
    let pix_fmt = codec.pix_fmts().and_then(|f| f.first().copied()).unwrap_or(ffi::AVPixelFormat_AV_PIX_FMT_YUV420P);
    if pix_fmt == ffi::AVPixelFormat_AV_PIX_FMT_VAAPI || pix_fmt == ffi::AVPixelFormat_AV_PIX_FMT_QSV {
        // Needs a hardware frames context: only usable with a device, which this build
        // does not set up yet.
        return false;
    }
    let mut ctx = AVCodecContext::new(&codec);
    ctx.set_width(320);
    ctx.set_height(240);
    ctx.set_pix_fmt(pix_fmt);
    ctx.set_time_base(ffi::AVRational { num: 1, den: 25 });
    ctx.set_framerate(ffi::AVRational { num: 25, den: 1 });
    ctx.open(None).is_ok()
}

/// The encoders of condense's table that open here, in the table's order.
pub fn available() -> Vec<String> {
    // SAFETY: quiets FFmpeg while failed opens are expected.
    let level = unsafe { ffi::av_log_get_level() };
    unsafe { ffi::av_log_set_level(ffi::AV_LOG_QUIET) };
    let list = ENCODERS.iter().filter(|p| opens(p.encoder)).map(|p| p.encoder.as_str().to_string()).collect();
    unsafe { ffi::av_log_set_level(level) };
    list
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpu_encoders_open_and_unknown_ones_do_not() {
        let list = super::available();
        for cpu in ["libx265", "libsvtav1"] {
            assert!(list.iter().any(|e| e == cpu), "{list:?}");
        }
        assert!(!super::opens_named("no_such_encoder", true));
        assert!(!super::opens_named("no_such_encoder", false));
    }
}
