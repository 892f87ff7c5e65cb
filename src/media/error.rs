//! Media errors carry the failure code the job shows, plus FFmpeg's own words.

use crate::domain::job::FailureCode;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct MediaError {
    pub code: FailureCode,
    pub message: String,
}

impl MediaError {
    /// A child that ran out of memory (`domain::limits::says_out_of_memory` of its last
    /// words, or an ENOMEM it reported) fails as such, with its address-space limit named.
    pub fn out_of_memory_in(self, address_space: u64) -> Self {
        if self.code != FailureCode::OutOfMemory && !crate::domain::limits::says_out_of_memory(&self.message) {
            return self;
        }
        MediaError::new(
            FailureCode::OutOfMemory,
            format!(
                "out of memory: the media child outgrew its address-space limit of {} MiB \
                 (TRANSCODER_MEMORY_LIMIT_MB): {}",
                address_space / (1024 * 1024),
                self.message
            ),
        )
    }

    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        MediaError { code, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        MediaError::new(FailureCode::FileValidationFailed, message)
    }

    pub fn misc(message: impl Into<String>) -> Self {
        MediaError::new(FailureCode::Miscellaneous, message)
    }

    /// Classifies an FFmpeg error code (a negative errno for system errors) met while
    /// writing or reading files.
    pub fn from_av(context: &str, code: i32) -> Self {
        let failure = match -code {
            libc::ENOMEM => FailureCode::OutOfMemory,
            libc::ENOSPC | libc::EDQUOT | libc::EFBIG => FailureCode::InsufficientDiskSpace,
            libc::EACCES | libc::EPERM | libc::EROFS => FailureCode::PermissionDenied,
            _ => FailureCode::Miscellaneous,
        };
        MediaError::new(failure, format!("{context}: {}", av_error_text(code)))
    }

    /// Classifies an I/O error of the standard library.
    pub fn from_io(context: &str, err: &std::io::Error) -> Self {
        let failure = match err.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG) => FailureCode::InsufficientDiskSpace,
            Some(libc::ENOMEM) => FailureCode::OutOfMemory,
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => FailureCode::PermissionDenied,
            _ if err.kind() == std::io::ErrorKind::PermissionDenied => FailureCode::PermissionDenied,
            _ => FailureCode::Miscellaneous,
        };
        MediaError::new(failure, format!("{context}: {err}"))
    }
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
        Some(code) => MediaError::from_av(context, code),
        None => MediaError::misc(format!("{context}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_codes_map_to_spec_reasons() {
        assert_eq!(MediaError::from_av("write", -libc::ENOSPC).code, FailureCode::InsufficientDiskSpace);
        assert_eq!(MediaError::from_av("open", -libc::EACCES).code, FailureCode::PermissionDenied);
        assert_eq!(MediaError::from_av("x", -libc::EINVAL).code, FailureCode::Miscellaneous);
        assert_eq!(MediaError::from_av("decode", -libc::ENOMEM).code, FailureCode::OutOfMemory);
        let io = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(MediaError::from_io("fsync", &io).code, FailureCode::InsufficientDiskSpace);
        assert!(MediaError::from_av("write", -libc::ENOSPC).message.contains("No space"));
    }
}
