//! Codec contexts, allocated without rsmpeg's panic where FFmpeg has no memory for one.

use rsmpeg::avcodec::{AVCodec, AVCodecContext};
use rsmpeg::ffi;

use condense::domain::job::FailureCode;
use condense::media::MediaError;

/// A context for `codec`, or an out-of-memory error where FFmpeg cannot allocate one:
/// rsmpeg's `AVCodecContext::new` panics there, which turned a session thread at its
/// memory limit (TRANSCODER_MEMORY_LIMIT_MB) into a crash.
pub fn codec_context(codec: &AVCodec) -> Result<AVCodecContext, MediaError> {
    // SAFETY: allocates a context for a codec we hold; a null answer is handled below.
    let raw = std::ptr::NonNull::new(unsafe { ffi::avcodec_alloc_context3(codec.as_ptr()) }).ok_or_else(|| {
        MediaError::new(
            FailureCode::OutOfMemory,
            format!("cannot allocate memory for a {} context", codec.name().to_string_lossy()),
        )
    })?;
    // SAFETY: a context just allocated, owned by nothing else; the wrapper frees it.
    Ok(unsafe { AVCodecContext::from_raw(raw) })
}
