//! `condense-media`: every piece of condense that links FFmpeg (rsmpeg) and libvmaf. The node
//! (`condense`) never links this crate; it starts the `condense-media` program for every piece
//! of media work (`condense::media::transcoder`, `condense::media::worker`), so a decoder's
//! crash ends a child, never the node. What the two share without FFmpeg (plans, manifests,
//! probe facts, errors) lives in `condense::media`. See docs/ARCHITECTURE.md, "Media".

pub mod audio;
pub mod audio_ahead;
pub mod child;
pub mod cli;
pub mod context;
pub mod decode;
pub mod device;
pub mod encoder_options;
pub mod encoders;
pub mod error;
pub mod growing;
pub mod health;
pub mod helper;
pub mod mux;
pub mod probe;
pub mod recorder;
pub mod search;
pub mod segment;
pub mod segment_writer;
pub mod sessions;
pub mod sparse;
pub mod subtitle;
pub mod transcode;
pub mod verify;
pub mod vmaf;

use std::ffi::CStr;

/// Versions of the FFmpeg libraries linked into this binary, e.g. "libavformat 59.27.100".
/// (libavfilter is not used: naming it here would link it, and with it 31 more shared
/// libraries that cost every process about 11 MB of memory.)
pub fn ffmpeg_versions() -> Vec<String> {
    fn version(name: &str, packed: u32) -> String {
        format!("{name} {}.{}.{}", packed >> 16, (packed >> 8) & 0xff, packed & 0xff)
    }
    // SAFETY: the version functions only read constants compiled into the libraries.
    unsafe {
        vec![
            version("libavutil", rsmpeg::ffi::avutil_version()),
            version("libavcodec", rsmpeg::ffi::avcodec_version()),
            version("libavformat", rsmpeg::ffi::avformat_version()),
            version("libswscale", rsmpeg::ffi::swscale_version()),
            version("libswresample", rsmpeg::ffi::swresample_version()),
        ]
    }
}

/// FFmpeg's own release string, e.g. "5.1.6-0+deb12u1".
pub fn ffmpeg_release() -> String {
    // SAFETY: av_version_info returns a pointer to a static NUL-terminated string.
    unsafe {
        let ptr = rsmpeg::ffi::av_version_info();
        if ptr.is_null() {
            return "unknown".to_string();
        }
        CStr::from_ptr(ptr).to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_against_ffmpeg_5() {
        let versions = ffmpeg_versions();
        let avformat = versions.iter().find(|v| v.starts_with("libavformat")).unwrap();
        // FFmpeg 5.x ships libavformat 59.
        assert!(avformat.starts_with("libavformat 59."), "{avformat}");
        assert!(!ffmpeg_release().is_empty());
    }
}
