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

    /// The reason for an FFmpeg error code (a negative errno for system errors) met while
    /// writing or reading files; `condense-media` adds FFmpeg's text for it.
    pub fn failure_of_av(code: i32) -> FailureCode {
        match -code {
            libc::ENOMEM => FailureCode::OutOfMemory,
            libc::ENOSPC | libc::EDQUOT | libc::EFBIG => FailureCode::InsufficientDiskSpace,
            libc::EACCES | libc::EPERM | libc::EROFS => FailureCode::PermissionDenied,
            _ => FailureCode::Miscellaneous,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_codes_map_to_spec_reasons() {
        assert_eq!(MediaError::failure_of_av(-libc::ENOSPC), FailureCode::InsufficientDiskSpace);
        assert_eq!(MediaError::failure_of_av(-libc::EACCES), FailureCode::PermissionDenied);
        assert_eq!(MediaError::failure_of_av(-libc::EINVAL), FailureCode::Miscellaneous);
        assert_eq!(MediaError::failure_of_av(-libc::ENOMEM), FailureCode::OutOfMemory);
        let io = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(MediaError::from_io("fsync", &io).code, FailureCode::InsufficientDiskSpace);
    }
}
