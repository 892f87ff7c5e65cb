//! FFmpeg's errors as media errors: its text for a code, the code inside an rsmpeg error.

use condense::media::MediaError;

/// Classifies an FFmpeg error code met in `context`, with FFmpeg's text for it.
pub fn from_av(context: &str, code: i32) -> MediaError {
    MediaError::new(MediaError::failure_of_av(code), format!("{context}: {}", av_error_text(code)))
}

/// FFmpeg's text for an error code.
pub fn av_error_text(code: i32) -> String {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: av_strerror writes at most buf.len() bytes including the NUL terminator.
    unsafe {
        rsmpeg::ffi::av_strerror(code, buf.as_mut_ptr(), buf.len());
        std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    }
}

/// The raw FFmpeg error code inside an rsmpeg error, when it has one.
pub fn av_code(err: &rsmpeg::error::RsmpegError) -> Option<i32> {
    use rsmpeg::error::RsmpegError as E;
    match err {
        E::AVError(c)
        | E::OpenInputError(c)
        | E::OpenOutputError(c)
        | E::FindStreamInfoError(c)
        | E::WriteHeaderError(c)
        | E::WriteTrailerError(c)
        | E::CodecOpenError(c)
        | E::CodecSetParameterError(c)
        | E::SendPacketError(c)
        | E::ReceiveFrameError(c)
        | E::SendFrameError(c)
        | E::ReceivePacketError(c)
        | E::ReadFrameError(c)
        | E::WriteFrameError(c)
        | E::InterleavedWriteFrameError(c)
        | E::AVIOOpenError(c) => Some(*c),
        _ => None,
    }
}

/// Maps an rsmpeg error met in `context` to a media error.
pub fn from_rsmpeg(context: &str, err: &rsmpeg::error::RsmpegError) -> MediaError {
    match av_code(err) {
        Some(code) => from_av(context, code),
        None => MediaError::misc(format!("{context}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense::domain::job::FailureCode;

    #[test]
    fn errno_codes_map_to_spec_reasons_with_ffmpegs_text() {
        assert_eq!(from_av("write", -libc::ENOSPC).code, FailureCode::InsufficientDiskSpace);
        assert!(from_av("write", -libc::ENOSPC).message.contains("No space"));
    }
}
