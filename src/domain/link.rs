//! What a linked node may write over its link. A node reports on the jobs it holds: their
//! analysis, progress, stage, statistics and its own ending of the attempt. It never names
//! files: a job's path is the main node's (the scan, the webhook), and a patch that moved it
//! would have the main node's next attempt encode and replace whatever file it named. The
//! one path a node's completion carries, the output's new name after a container change,
//! the main node derives itself and compares.

use super::job::JobEvent;

/// A field of a job's row that a patch may carry (`repo::jobs::JobChange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobField {
    SourceCodec,
    SourceSize,
    DurationSeconds,
    SourceBitrate,
    Hdr,
    Probe,
    Stage,
    Progress,
    Fps,
    EtaSeconds,
    Stalled,
    LastProgressAt,
    LeaseExpiresAt,
    Encoder,
    CpuTimeMs,
    WallTimeMs,
    OutputSize,
    SourceMtimeNs,
    SourceInode,
    FilePath,
    FileName,
    SkipReason,
    ChosenQuality,
    PredictedSize,
    Vmaf,
    VmafP5,
    EncodePass,
}

impl JobField {
    pub const ALL: &'static [JobField] = &[
        JobField::SourceCodec,
        JobField::SourceSize,
        JobField::DurationSeconds,
        JobField::SourceBitrate,
        JobField::Hdr,
        JobField::Probe,
        JobField::Stage,
        JobField::Progress,
        JobField::Fps,
        JobField::EtaSeconds,
        JobField::Stalled,
        JobField::LastProgressAt,
        JobField::LeaseExpiresAt,
        JobField::Encoder,
        JobField::CpuTimeMs,
        JobField::WallTimeMs,
        JobField::OutputSize,
        JobField::SourceMtimeNs,
        JobField::SourceInode,
        JobField::FilePath,
        JobField::FileName,
        JobField::SkipReason,
        JobField::ChosenQuality,
        JobField::PredictedSize,
        JobField::Vmaf,
        JobField::VmafP5,
        JobField::EncodePass,
    ];

    /// The field's name on the wire (the link's JSON), for the refusal's words.
    pub fn wire_name(self) -> &'static str {
        match self {
            JobField::SourceCodec => "sourceCodec",
            JobField::SourceSize => "sourceSize",
            JobField::DurationSeconds => "durationSeconds",
            JobField::SourceBitrate => "sourceBitrate",
            JobField::Hdr => "hdr",
            JobField::Probe => "probe",
            JobField::Stage => "stage",
            JobField::Progress => "progress",
            JobField::Fps => "fps",
            JobField::EtaSeconds => "etaSeconds",
            JobField::Stalled => "stalled",
            JobField::LastProgressAt => "lastProgressAt",
            JobField::LeaseExpiresAt => "leaseExpiresAt",
            JobField::Encoder => "encoder",
            JobField::CpuTimeMs => "cpuTimeMs",
            JobField::WallTimeMs => "wallTimeMs",
            JobField::OutputSize => "outputSize",
            JobField::SourceMtimeNs => "sourceMtimeNs",
            JobField::SourceInode => "sourceInode",
            JobField::FilePath => "filePath",
            JobField::FileName => "fileName",
            JobField::SkipReason => "skipReason",
            JobField::ChosenQuality => "chosenQuality",
            JobField::PredictedSize => "predictedSize",
            JobField::Vmaf => "vmaf",
            JobField::VmafP5 => "vmafP5",
            JobField::EncodePass => "encodePass",
        }
    }
}

/// How a node writes to a job it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkWrite<'a> {
    /// Facts and progress while it runs (`Call::UpdateLive`).
    Live,
    /// A transition of the attempt (`Call::Apply`).
    Transition(&'a JobEvent),
}

/// What the main node does with a field of a node's patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRule {
    Accept,
    /// Only as the name the replace gives the output (`media::plan::final_path` of the job's
    /// own path), which the main node derives and compares.
    OutputName,
    Refuse,
}

/// The rule for `field` in a node's `write`.
pub fn field_rule(field: JobField, write: LinkWrite<'_>) -> FieldRule {
    match (field, write) {
        (JobField::FilePath | JobField::FileName, LinkWrite::Transition(JobEvent::Complete)) => FieldRule::OutputName,
        (JobField::FilePath | JobField::FileName, _) => FieldRule::Refuse,
        _ => FieldRule::Accept,
    }
}

/// Whether a node may apply `event` to a job it holds: the endings of its own attempt and
/// the steps of its run. Starting, queueing, retrying, resuming, forcing, orphaning and the
/// scan's and probe's events are the main node's.
pub fn node_may_apply(event: &JobEvent) -> bool {
    match event {
        JobEvent::Analyzed { .. }
        | JobEvent::Complete
        | JobEvent::Fail { .. }
        | JobEvent::Pause
        | JobEvent::Cancel
        | JobEvent::Busy
        | JobEvent::Yield
        | JobEvent::NotSmaller => true,
        JobEvent::Queue
        | JobEvent::Start
        | JobEvent::Resume { .. }
        | JobEvent::Retry
        | JobEvent::Force
        | JobEvent::Orphaned { .. }
        | JobEvent::SourceChanged
        | JobEvent::SkipProbed
        | JobEvent::Probe
        | JobEvent::Probed
        | JobEvent::ProbeInterrupted => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::{FailureCode, PartialOutput};

    fn every_event() -> Vec<JobEvent> {
        let mut events = vec![
            JobEvent::Queue,
            JobEvent::Start,
            JobEvent::Analyzed { skip: false },
            JobEvent::Analyzed { skip: true },
            JobEvent::Complete,
            JobEvent::Pause,
            JobEvent::Retry,
            JobEvent::Cancel,
            JobEvent::Force,
            JobEvent::Orphaned { crashed: true },
            JobEvent::Orphaned { crashed: false },
            JobEvent::Busy,
            JobEvent::Yield,
            JobEvent::NotSmaller,
            JobEvent::SourceChanged,
            JobEvent::SkipProbed,
            JobEvent::Probe,
            JobEvent::Probed,
            JobEvent::ProbeInterrupted,
        ];
        for code in FailureCode::ALL {
            events.push(JobEvent::Fail { code: *code, resumable: true });
            events.push(JobEvent::Fail { code: *code, resumable: false });
        }
        for partial in PartialOutput::ALL {
            events.push(JobEvent::Resume { partial: *partial });
        }
        events
    }

    #[test]
    fn a_node_never_names_a_file_but_the_output_of_its_completion() {
        let events = every_event();
        let writes = std::iter::once(LinkWrite::Live).chain(events.iter().map(LinkWrite::Transition));
        for write in writes {
            for field in JobField::ALL {
                let rule = field_rule(*field, write);
                let expected = match (field, write) {
                    (JobField::FilePath | JobField::FileName, LinkWrite::Transition(JobEvent::Complete)) => {
                        FieldRule::OutputName
                    }
                    (JobField::FilePath | JobField::FileName, _) => FieldRule::Refuse,
                    _ => FieldRule::Accept,
                };
                assert_eq!(rule, expected, "{field:?} in {write:?}");
            }
        }
    }

    #[test]
    fn a_node_ends_and_steps_its_own_attempt_and_nothing_else() {
        let mine = |e: &JobEvent| {
            matches!(
                e,
                JobEvent::Analyzed { .. }
                    | JobEvent::Complete
                    | JobEvent::Fail { .. }
                    | JobEvent::Pause
                    | JobEvent::Cancel
                    | JobEvent::Busy
                    | JobEvent::Yield
                    | JobEvent::NotSmaller
            )
        };
        for event in every_event() {
            assert_eq!(node_may_apply(&event), mine(&event), "{event:?}");
        }
        assert!(!node_may_apply(&JobEvent::Start) && !node_may_apply(&JobEvent::Retry));
    }

    #[test]
    fn every_field_has_its_own_wire_name() {
        let names: std::collections::HashSet<_> = JobField::ALL.iter().map(|f| f.wire_name()).collect();
        assert_eq!(names.len(), JobField::ALL.len());
        assert_eq!(JobField::FilePath.wire_name(), "filePath");
    }
}
