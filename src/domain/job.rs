//! Job statuses, stages and failure reasons.

use super::named_enum;

named_enum!(
    /// Where a job is in its lifecycle (SPEC: States and transitions; DESIGN: Job states).
    JobStatus, "job status" {
        Pending => "PENDING",
        Queued => "QUEUED",
        Analyzing => "ANALYZING",
        Encoding => "ENCODING",
        Paused => "PAUSED",
        Completed => "COMPLETED",
        Skipped => "SKIPPED",
        Failed => "FAILED",
        Cancelled => "CANCELLED",
    }
);

impl JobStatus {
    /// A node is working on the job right now.
    pub fn is_running(self) -> bool {
        matches!(self, JobStatus::Analyzing | JobStatus::Encoding)
    }

    /// The job will not move again without a user's action.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobStatus::Completed | JobStatus::Skipped | JobStatus::Failed | JobStatus::Cancelled)
    }
}

named_enum!(
    /// What a running job is doing (SPEC: stage).
    Stage, "stage" {
        Analyzing => "ANALYZING",
        Encoding => "ENCODING",
        Transferring => "TRANSFERRING",
    }
);

named_enum!(
    /// Machine-readable failure reasons; `reason()` is the text the dashboard shows (SPEC: Errors).
    FailureCode, "failure code" {
        FileValidationFailed => "file_validation_failed",
        InsufficientDiskSpace => "insufficient_disk_space",
        UnsupportedCodec => "unsupported_codec",
        TranscoderCrashed => "transcoder_crashed",
        PermissionDenied => "permission_denied",
        Timeout => "timeout",
        Miscellaneous => "miscellaneous",
    }
);

impl FailureCode {
    /// The reason as displayed.
    pub fn reason(self) -> &'static str {
        match self {
            FailureCode::FileValidationFailed => "file validation failed",
            FailureCode::InsufficientDiskSpace => "insufficient disk space",
            FailureCode::UnsupportedCodec => "unsupported codec",
            FailureCode::TranscoderCrashed => "transcoder process crashed",
            FailureCode::PermissionDenied => "permission denied",
            FailureCode::Timeout => "timeout",
            FailureCode::Miscellaneous => "miscellaneous",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn every_status_round_trips_through_its_name() {
        for status in JobStatus::ALL {
            assert_eq!(JobStatus::from_str(status.as_str()), Ok(*status));
            let json = serde_json::to_string(status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
            assert_eq!(serde_json::from_str::<JobStatus>(&json).unwrap(), *status);
        }
        assert_eq!(JobStatus::from_str("queued"), Ok(JobStatus::Queued));
        assert!(JobStatus::from_str("DONE").is_err());
    }

    #[test]
    fn running_and_terminal_are_disjoint() {
        for status in JobStatus::ALL {
            assert!(!(status.is_running() && status.is_terminal()), "{status}");
        }
        let running: Vec<_> = JobStatus::ALL.iter().filter(|s| s.is_running()).collect();
        assert_eq!(running, [&JobStatus::Analyzing, &JobStatus::Encoding]);
    }

    #[test]
    fn failure_reasons_are_the_spec_texts() {
        assert_eq!(FailureCode::FileValidationFailed.reason(), "file validation failed");
        assert_eq!(FailureCode::InsufficientDiskSpace.reason(), "insufficient disk space");
        assert_eq!(FailureCode::UnsupportedCodec.reason(), "unsupported codec");
        assert_eq!(FailureCode::TranscoderCrashed.reason(), "transcoder process crashed");
        for code in FailureCode::ALL {
            assert_eq!(FailureCode::from_str(code.as_str()), Ok(*code));
        }
    }

    #[test]
    fn stages_round_trip() {
        for stage in Stage::ALL {
            assert_eq!(Stage::from_str(stage.as_str()), Ok(*stage));
        }
    }
}
