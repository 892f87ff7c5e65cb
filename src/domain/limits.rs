//! What a media child may use: the largest frame condense decodes (`MAX_PIXELS`) and the
//! address space (`RLIMIT_AS`) each `condense-media` child runs under. A frame size over the
//! cap is refused from the container's header, before any decoder allocates a frame; a
//! child that still outgrows its address space fails its attempt as "out of memory" and
//! the node stays up.

/// The default cap on a video's frame: 8192x8192.
pub const DEFAULT_MAX_PIXELS: u64 = 8192 * 8192;

const MIB: u64 = 1024 * 1024;
/// What a child maps before it decodes anything: its program, FFmpeg's and the encoders'
/// libraries, and room for the demuxer, the muxer and the VMAF model.
const BASE_BYTES: u64 = 2048 * MIB;
/// Per core of the machine: glibc reserves a 64 MiB malloc arena per thread (up to eight
/// per core) and every thread an 8 MiB stack, address space an encoder's thread pools take
/// whatever the frame size.
const PER_CORE_BYTES: u64 = 256 * MIB;
/// Per pixel of the source's frame and encoder session: 128 frames at 8 bytes a pixel
/// (16-bit 4:4:4 with padding), more than x265, SVT-AV1 or NVENC hold (decoder references,
/// the encoder's look-ahead and references, frame threads, the scaled copies). A 4K
/// session gets 8.5 GB, a 1080p one 2.1 GB: a normal encode, HDR 4K included, stays far
/// below, while a decoder that allocates without bound is stopped.
const PER_PIXEL_BYTES: u64 = 128 * 8;

/// How a frame size stands against the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameCheck {
    Fits,
    /// More pixels than `max_pixels`: refused before decoding.
    TooLarge {
        width: u64,
        height: u64,
        max_pixels: u64,
    },
}

/// Whether a `width` x `height` frame fits under `max_pixels` (unknown sizes, 0, fit: the
/// check runs again once the stream is understood).
pub fn check_frame(width: u64, height: u64, max_pixels: u64) -> FrameCheck {
    if width.saturating_mul(height) > max_pixels {
        FrameCheck::TooLarge { width, height, max_pixels }
    } else {
        FrameCheck::Fits
    }
}

impl FrameCheck {
    /// The refusal as a job shows it; `None` when the frame fits.
    pub fn refusal(self) -> Option<String> {
        match self {
            FrameCheck::Fits => None,
            FrameCheck::TooLarge { width, height, max_pixels } => Some(format!(
                "the video's frame is {width}x{height} ({} pixels), larger than the limit of {} pixels \
                 (MAX_PIXELS); refused before decoding",
                width.saturating_mul(height),
                max_pixels
            )),
        }
    }
}

/// The address space a media child gets: `configured_mb` (TRANSCODER_MEMORY_LIMIT_MB) when
/// set, else sized from the source's frame (`pixels`; the largest allowed frame when not
/// known yet), the encoder sessions the child runs and the machine's cores.
pub fn address_space_limit(configured_mb: Option<u64>, pixels: u64, sessions: u32, cores: u32) -> u64 {
    if let Some(mb) = configured_mb {
        return mb.saturating_mul(MIB);
    }
    let sessions = u64::from(sessions.max(1));
    BASE_BYTES
        .saturating_add(PER_CORE_BYTES.saturating_mul(u64::from(cores.max(1))))
        .saturating_add(sessions.saturating_mul(pixels).saturating_mul(PER_PIXEL_BYTES))
}

/// How close to its address-space limit a child's peak must come for its failure to be
/// taken for running out of memory: FFmpeg reports a failed allocation as whatever it was
/// doing ("get_buffer() failed", a decoder that does not open when its threads cannot be
/// made), and the allocations that fail are a new thread's stack and malloc arena (128 MiB
/// reserved) or a frame.
pub const NEAR_LIMIT_BYTES: u64 = 192 * MIB;

/// Whether a child whose address space peaked at `peak` under the limit `limit` failed for
/// want of memory.
pub fn near_limit(peak: u64, limit: u64) -> bool {
    peak.saturating_add(NEAR_LIMIT_BYTES) >= limit
}

/// Whether a child's last words say it ran out of memory: FFmpeg's ENOMEM text, Rust's
/// allocation failure, C++'s `bad_alloc`, an encoder's failed `malloc`, a thread it could
/// not create.
pub fn says_out_of_memory(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    [
        "cannot allocate memory",
        "out of memory",
        "memory allocation of",
        "bad_alloc",
        "malloc of size",
        "failed to allocate",
        "allocation failed",
    ]
    .iter()
    .any(|words| text.contains(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_up_to_the_cap_fit_and_larger_ones_are_refused_with_their_size() {
        assert_eq!(check_frame(8192, 8192, DEFAULT_MAX_PIXELS), FrameCheck::Fits);
        assert_eq!(check_frame(3840, 2160, DEFAULT_MAX_PIXELS), FrameCheck::Fits);
        assert_eq!(check_frame(0, 0, DEFAULT_MAX_PIXELS), FrameCheck::Fits);
        let refused = check_frame(16384, 16384, DEFAULT_MAX_PIXELS);
        assert_eq!(refused, FrameCheck::TooLarge { width: 16384, height: 16384, max_pixels: DEFAULT_MAX_PIXELS });
        let words = refused.refusal().unwrap();
        assert!(words.contains("16384x16384") && words.contains("268435456") && words.contains("67108864"), "{words}");
        assert!(words.contains("MAX_PIXELS"), "{words}");
        assert!(check_frame(8193, 8192, DEFAULT_MAX_PIXELS).refusal().is_some());
        assert!(check_frame(u64::MAX, u64::MAX, DEFAULT_MAX_PIXELS).refusal().is_some());
        assert_eq!(FrameCheck::Fits.refusal(), None);
    }

    #[test]
    fn a_configured_limit_wins() {
        assert_eq!(address_space_limit(Some(512), 3840 * 2160, 4, 16), 512 * MIB);
        assert_eq!(address_space_limit(Some(u64::MAX), 0, 1, 1), u64::MAX);
    }

    #[test]
    fn the_default_leaves_every_normal_encode_room_and_grows_with_frame_and_sessions() {
        let gib = |b: u64| b as f64 / (1024.0 * MIB as f64);
        let hd = address_space_limit(None, 1920 * 1080, 1, 2);
        let uhd = address_space_limit(None, 3840 * 2160, 1, 16);
        // x265 and SVT-AV1 on 4K HDR keep under 4 GiB of address space per session.
        assert!(gib(uhd) > 12.0, "{}", gib(uhd));
        assert!(gib(hd) > 4.0, "{}", gib(hd));
        assert!(address_space_limit(None, 3840 * 2160, 4, 16) > uhd);
        assert!(address_space_limit(None, 3840 * 2160, 1, 32) > uhd);
        assert_eq!(address_space_limit(None, 1920 * 1080, 0, 0), address_space_limit(None, 1920 * 1080, 1, 1));
        assert_eq!(address_space_limit(None, u64::MAX, u32::MAX, u32::MAX), u64::MAX);
    }

    #[test]
    fn a_failure_near_the_limit_is_out_of_memory() {
        let limit = 600 * MIB;
        assert!(near_limit(limit, limit));
        assert!(near_limit(limit - NEAR_LIMIT_BYTES, limit));
        assert!(!near_limit(limit - NEAR_LIMIT_BYTES - 1, limit));
        assert!(!near_limit(0, u64::MAX));
        assert!(near_limit(u64::MAX, u64::MAX));
    }

    #[test]
    fn out_of_memory_is_told_from_other_failures() {
        for words in [
            "decoding: Cannot allocate memory",
            "memory allocation of 4294967296 bytes failed",
            "terminate called after throwing an instance of 'std::bad_alloc'",
            "x265 [error]: malloc of size 1048576 failed",
            "Svt[error]: failed to allocate",
        ] {
            assert!(says_out_of_memory(words), "{words}");
        }
        for words in ["Invalid data found when processing input", "No space left on device", ""] {
            assert!(!says_out_of_memory(words), "{words}");
        }
    }
}
