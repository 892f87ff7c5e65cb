//! Job statuses, stages, failure reasons, and the job state machine.

use super::encoding::RetryProfile;
use super::named_enum;

named_enum!(
    /// Where a job is in its lifecycle.
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
    /// What a running job is doing.
    Stage, "stage" {
        Analyzing => "ANALYZING",
        Encoding => "ENCODING",
        Transferring => "TRANSFERRING",
    }
);

named_enum!(
    /// Machine-readable failure reasons; `reason()` is the text the dashboard shows.
    FailureCode, "failure code" {
        FileValidationFailed => "file_validation_failed",
        InsufficientDiskSpace => "insufficient_disk_space",
        UnsupportedCodec => "unsupported_codec",
        TranscoderCrashed => "transcoder_crashed",
        PermissionDenied => "permission_denied",
        Timeout => "timeout",
        Miscellaneous => "miscellaneous",
        UnsupportedStream => "unsupported_stream",
        UnsupportedContainer => "unsupported_container",
        OutOfMemory => "out_of_memory",
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
            FailureCode::UnsupportedStream => "unsupported stream",
            FailureCode::UnsupportedContainer => "unsupported container",
            FailureCode::OutOfMemory => "out of memory",
        }
    }
}

/// Automatic retries per job: a job gets its first attempt plus this many.
pub const MAX_AUTOMATIC_RETRIES: u32 = 3;

/// Times a job may be orphaned by a crash of the node running it before it fails with
/// "transcoder process crashed": a file that brings down whatever runs it must not
/// crash-loop every node, since an orphaned job otherwise uses no retry.
pub const MAX_CRASHES: u32 = 3;

/// How long a job that found its partial output locked by another transcoder (`Busy`)
/// `streak` times in a row waits in the queue before it is started again. The first waits
/// are short, since the usual holder is an earlier attempt still stopping (at most
/// `STOP_BOUND`, 20 s); a lock held for ever (a hung NFS client) costs one start every five
/// minutes instead of one every scheduling round.
pub fn busy_hold(streak: u32) -> std::time::Duration {
    const FIRST_SECS: u64 = 5;
    const MAX_SECS: u64 = 300;
    if streak == 0 {
        return std::time::Duration::ZERO;
    }
    let doubled = FIRST_SECS.saturating_mul(1u64.checked_shl(streak - 1).unwrap_or(u64::MAX));
    std::time::Duration::from_secs(doubled.min(MAX_SECS))
}

/// What the state machine needs to know about a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSnapshot {
    pub status: JobStatus,
    pub retry_count: u32,
    /// Re-encode even when the source is already in the target codec.
    pub forced: bool,
    /// Times the job was orphaned by a crash since a user last started it afresh.
    pub crash_count: u32,
    /// The running job is in its last stage (verification and the replace): the files may
    /// already be swapped, which only its next attempt can tell and finish (see
    /// `docs/ARCHITECTURE.md`, "Replacing an original").
    pub replacing: bool,
}

impl JobSnapshot {
    /// A job as its row stores it: the counters are signed columns (one below zero, which no
    /// write makes, reads as 0), and the job is in its replace while its stage is
    /// `Transferring`.
    pub fn of_row(status: JobStatus, retry_count: i32, forced: bool, crash_count: i32, stage: Option<Stage>) -> Self {
        JobSnapshot {
            status,
            retry_count: u32::try_from(retry_count).unwrap_or(0),
            forced,
            crash_count: u32::try_from(crash_count).unwrap_or(0),
            replacing: stage == Some(Stage::Transferring),
        }
    }
}

named_enum!(
    /// The state of a paused job's partial output, as found when the job is resumed.
    PartialOutput, "partial output" {
        Valid => "valid",
        Missing => "missing",
        Corrupt => "corrupt",
    }
);

/// Something that happened to a job; `transition` decides what it leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum JobEvent {
    /// The library scan hands a discovered file to the queue.
    Queue,
    /// The scheduler assigned a node, which starts analysing the source.
    Start,
    /// Analysis finished; `skip` when the source is already in the target codec.
    Analyzed { skip: bool },
    /// The encode was verified and replaced the original (TRANSFERRING is a stage of ENCODING).
    Complete,
    /// The attempt failed. `resumable` when the finished segments are still good (the
    /// transcoder failed while encoding: a read error, a crash, a full disk): the retry
    /// continues from them. Not after verification or the replace failed, where the
    /// segments themselves may be what is wrong.
    Fail {
        code: FailureCode,
        #[serde(default)]
        resumable: bool,
    },
    /// A user paused the job, or paused the whole queue.
    Pause,
    /// A user resumed a paused job; the actor has checked its partial output.
    Resume { partial: PartialOutput },
    /// A user asked for a failed or cancelled job to run again.
    Retry,
    /// A user cancelled the job.
    Cancel,
    /// A user asked to re-encode a skipped or completed file anyway.
    Force,
    /// The job was running when its node restarted or went away; `crashed` unless the node
    /// stopped cleanly or simply refused to start it.
    Orphaned { crashed: bool },
    /// The transcoder found the job's partial output locked by another one (an earlier
    /// attempt still stopping): the job waits in the queue, its retries and partial output intact.
    Busy,
    /// The node's encoding window closed (`domain::schedule`, "pause" on close): back to the
    /// queue, the transcoder stopped at a segment boundary and the partial output kept, to
    /// continue when a window opens. Nobody's fault: no retry used.
    Yield,
    /// The encode was stopped early: its output, projected from what was written so far,
    /// would not be smaller than the limit (`domain::quality::projected_over`). The file is
    /// skipped, its partial output removed; nobody's fault, no retry used.
    NotSmaller,
    /// A rescan found the file of an ended job changed (another size or modification time
    /// than the job left it with): a new file to analyse, with fresh retries.
    SourceChanged,
    /// The probe made right after the scan (`actors::prober`) found a job that never
    /// started needs no encode (its video is already in the target codec): skipped without
    /// waiting for an encode slot. The file is not touched; a forced job is never skipped.
    SkipProbed,
    /// The probe after the scan takes a found file up (its batch's child starts): the job
    /// is ANALYZING, held by no node, until the batch is recorded.
    Probe,
    /// The probe after the scan is done with the file and it needs an encode (or the probe
    /// could not read it, which its attempt's own analysis then tells): to the queue.
    Probed,
    /// The node stopped while the file's batch was being probed: found again, not analysed.
    ProbeInterrupted,
}

impl JobEvent {
    /// The event as a verb, for messages like "cannot pause a job that is COMPLETED".
    pub fn name(&self) -> &'static str {
        match self {
            JobEvent::Queue => "queue",
            JobEvent::Start => "start",
            JobEvent::Analyzed { .. } => "finish analyzing",
            JobEvent::Complete => "complete",
            JobEvent::Fail { .. } => "fail",
            JobEvent::Pause => "pause",
            JobEvent::Resume { .. } => "resume",
            JobEvent::Retry => "retry",
            JobEvent::Cancel => "cancel",
            JobEvent::Force => "force",
            JobEvent::Orphaned { .. } => "requeue as orphaned",
            JobEvent::Busy => "requeue as busy",
            JobEvent::Yield => "yield to the schedule",
            JobEvent::SourceChanged => "requeue as changed",
            JobEvent::NotSmaller => "skip as not smaller",
            JobEvent::SkipProbed => "skip after the probe",
            JobEvent::Probe => "probe",
            JobEvent::Probed => "queue after the probe",
            JobEvent::ProbeInterrupted => "interrupt the probe of",
        }
    }
}

/// Work the actor must carry out for a transition, in the order listed. Each is safe to
/// repeat after a crash (stopping a transcoder that already exited, deleting a partial
/// output that is already gone: both do nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Stop the job's transcoder; `graceful` flushes the encoder and closes the current
    /// segment so the partial output can be continued later.
    StopTranscoder { graceful: bool },
    /// Leave the partial output in place for a later resume.
    KeepPartial,
    /// Remove the partial output.
    DeletePartial,
    /// The next attempt continues from the partial output (after checking its manifest).
    ContinueFromPartial,
    /// The next attempt encodes from the first frame, ignoring any partial output.
    StartFromScratch,
    /// The next attempt uses this rung of the retry ladder.
    UseRetryProfile(RetryProfile),
    /// Store the failure reason on the job and in its history.
    RecordFailure(FailureCode),
    /// Remove the failure reason from the job.
    ClearFailure,
    /// End the node's lease on the job and free its slot.
    ReleaseNode,
}

/// The result of an accepted transition: the job's new fields and the work to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub to: JobStatus,
    pub retry_count: u32,
    pub forced: bool,
    pub crash_count: u32,
    pub effects: Vec<Effect>,
}

/// An event that does not apply to the job's current status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {event_name} a job that is {from}")]
pub struct TransitionError {
    pub from: JobStatus,
    pub event_name: &'static str,
}

/// The job state machine. Every pair of
/// status and event not listed here is refused, so nothing changes silently.
pub fn transition(job: &JobSnapshot, event: &JobEvent) -> Result<Outcome, TransitionError> {
    use Effect::*;
    use JobStatus::*;

    let keep_counters = |to: JobStatus, effects: Vec<Effect>| Outcome {
        to,
        retry_count: job.retry_count,
        forced: job.forced,
        crash_count: job.crash_count,
        effects,
    };
    let afresh =
        |forced: bool, effects: Vec<Effect>| Outcome { to: Queued, retry_count: 0, forced, crash_count: 0, effects };

    let outcome = match (job.status, *event) {
        (Pending, JobEvent::Queue) => keep_counters(Queued, vec![StartFromScratch]),
        (Queued, JobEvent::Start) => keep_counters(Analyzing, vec![]),
        // The batch probe's ANALYZING (no node holds the job: `repo::jobs` writes these three
        // only where no lease is set). A found file is PENDING until its probe starts.
        (Pending, JobEvent::Probe) => keep_counters(Analyzing, vec![]),
        (Analyzing, JobEvent::Probed) => keep_counters(Queued, vec![StartFromScratch]),
        (Analyzing, JobEvent::ProbeInterrupted) => keep_counters(Pending, vec![]),
        // A job may find a partial output some earlier job left at its path.
        (Analyzing, JobEvent::SkipProbed) if !job.forced => keep_counters(Skipped, vec![DeletePartial]),
        (Analyzing, JobEvent::Analyzed { skip }) => {
            if skip && !job.forced {
                keep_counters(Skipped, vec![ReleaseNode])
            } else {
                keep_counters(Encoding, vec![])
            }
        }
        (Encoding, JobEvent::Complete) => keep_counters(Completed, vec![ReleaseNode]),
        (Encoding, JobEvent::NotSmaller) => {
            keep_counters(Skipped, vec![StopTranscoder { graceful: false }, DeletePartial, ReleaseNode])
        }
        (Analyzing | Encoding, JobEvent::Fail { code, resumable }) => fail(job, code, resumable),
        (Encoding, JobEvent::Pause) => {
            keep_counters(Paused, vec![StopTranscoder { graceful: true }, KeepPartial, ReleaseNode])
        }
        // Pause-all also holds jobs that have no transcoder running yet.
        (Analyzing, JobEvent::Pause) => keep_counters(Paused, vec![ReleaseNode]),
        (Queued, JobEvent::Pause) => keep_counters(Paused, vec![]),
        (Paused, JobEvent::Resume { partial }) => {
            let effects = match partial {
                PartialOutput::Valid => vec![ContinueFromPartial],
                PartialOutput::Missing => vec![StartFromScratch],
                PartialOutput::Corrupt => vec![DeletePartial, StartFromScratch],
            };
            keep_counters(Queued, effects)
        }
        (Failed, JobEvent::Retry) => afresh(job.forced, vec![ClearFailure, StartFromScratch]),
        (Cancelled, JobEvent::Retry) => afresh(job.forced, vec![StartFromScratch]),
        (Pending, JobEvent::Cancel) => keep_counters(Cancelled, vec![]),
        // A queued or paused job may hold a partial output from an earlier attempt.
        (Queued | Paused, JobEvent::Cancel) => keep_counters(Cancelled, vec![DeletePartial]),
        (Analyzing, JobEvent::Cancel) => keep_counters(Cancelled, vec![DeletePartial, ReleaseNode]),
        (Encoding, JobEvent::Cancel) => {
            keep_counters(Cancelled, vec![StopTranscoder { graceful: false }, DeletePartial, ReleaseNode])
        }
        (Skipped | Completed, JobEvent::Force) => afresh(true, vec![StartFromScratch]),
        // Maybe not the job's fault, so it does not use up a retry; but a job whose node
        // crashed under it MAX_CRASHES times is failed for good. Never in the middle of its
        // replace: failing it there would remove the intent that says how far the swap got,
        // with the output perhaps already at the original's path. It is requeued, and its
        // next attempt completes or undoes the replace before it can be failed.
        (Analyzing | Encoding, JobEvent::Orphaned { crashed: true })
            if job.crash_count + 1 >= MAX_CRASHES && !job.replacing =>
        {
            Outcome {
                to: Failed,
                retry_count: job.retry_count,
                forced: job.forced,
                crash_count: job.crash_count + 1,
                effects: vec![DeletePartial, RecordFailure(FailureCode::TranscoderCrashed), ReleaseNode],
            }
        }
        (Analyzing | Encoding, JobEvent::Orphaned { crashed }) => Outcome {
            crash_count: job.crash_count + u32::from(crashed),
            ..keep_counters(Queued, vec![ReleaseNode, ContinueFromPartial])
        },
        // Nobody's fault and nothing lost: no retry used, and the folder (another writer's
        // work) is left alone.
        (Analyzing | Encoding, JobEvent::Busy) => keep_counters(Queued, vec![ReleaseNode, ContinueFromPartial]),
        (Encoding, JobEvent::Yield) => keep_counters(
            Queued,
            vec![StopTranscoder { graceful: true }, KeepPartial, ReleaseNode, ContinueFromPartial],
        ),
        (Analyzing, JobEvent::Yield) => keep_counters(Queued, vec![ReleaseNode, ContinueFromPartial]),
        // Whatever the job decided was about the file it saw; a user's force was too.
        (Completed | Skipped | Failed | Cancelled, JobEvent::SourceChanged) => {
            afresh(false, vec![ClearFailure, StartFromScratch])
        }
        (from, event) => return Err(TransitionError { from, event_name: event.name() }),
    };
    Ok(outcome)
}

named_enum!(
    /// What a user may ask of one job (`POST /jobs/{id}/<action>`), in the order the
    /// dashboard offers them.
    UserAction, "job action" {
        Pause => "pause",
        Resume => "resume",
        Retry => "retry",
        Force => "force",
        Cancel => "cancel",
    }
);

impl UserAction {
    /// The state machine event the action asks for. Whether a resume continues depends on
    /// the partial output the actor finds; whether it is allowed does not.
    pub fn event(self) -> JobEvent {
        match self {
            UserAction::Pause => JobEvent::Pause,
            UserAction::Resume => JobEvent::Resume { partial: PartialOutput::Valid },
            UserAction::Retry => JobEvent::Retry,
            UserAction::Force => JobEvent::Force,
            UserAction::Cancel => JobEvent::Cancel,
        }
    }
}

/// The actions `transition` accepts from this status, in display order: what the API
/// lists in a job's `actions`, so no client copies the state machine. A user's events
/// depend on the status alone, not on the job's counters.
pub fn allowed_actions(status: JobStatus) -> Vec<UserAction> {
    let job = JobSnapshot { status, retry_count: 0, forced: false, crash_count: 0, replacing: false };
    UserAction::ALL.iter().copied().filter(|action| transition(&job, &action.event()).is_ok()).collect()
}

/// A failed attempt: retried with the next rung of the ladder until the retries run out.
/// A resumable failure keeps the finished segments for the retry; the transcoder discards
/// them itself if the next rung changes what shapes the encoded bits (the plan's digest).
/// A failure for good removes the partial output either way.
fn fail(job: &JobSnapshot, code: FailureCode, resumable: bool) -> Outcome {
    let mut effects = Vec::new();
    if job.status == JobStatus::Encoding {
        effects.push(Effect::StopTranscoder { graceful: false });
    }
    let retrying = job.retry_count < MAX_AUTOMATIC_RETRIES;
    let keep = retrying && resumable;
    effects.extend([
        if keep { Effect::KeepPartial } else { Effect::DeletePartial },
        Effect::RecordFailure(code),
        Effect::ReleaseNode,
    ]);

    if retrying {
        let retry_count = job.retry_count + 1;
        effects.extend([
            Effect::UseRetryProfile(RetryProfile::for_retry_count(retry_count)),
            if keep { Effect::ContinueFromPartial } else { Effect::StartFromScratch },
        ]);
        Outcome { to: JobStatus::Queued, retry_count, forced: job.forced, crash_count: job.crash_count, effects }
    } else {
        Outcome {
            to: JobStatus::Failed,
            retry_count: job.retry_count,
            forced: job.forced,
            crash_count: job.crash_count,
            effects,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn a_busy_job_waits_longer_each_time_up_to_five_minutes() {
        use std::time::Duration;
        assert_eq!(busy_hold(0), Duration::ZERO);
        let holds: Vec<u64> = (1..=9).map(|n| busy_hold(n).as_secs()).collect();
        assert_eq!(holds, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(busy_hold(u32::MAX), Duration::from_secs(300));
    }

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

    #[test]
    fn allowed_actions_are_what_the_state_machine_accepts_whatever_the_counters() {
        use UserAction::*;
        let expected = |status: JobStatus| -> &[UserAction] {
            match status {
                JobStatus::Pending => &[Cancel],
                JobStatus::Queued | JobStatus::Analyzing | JobStatus::Encoding => &[Pause, Cancel],
                JobStatus::Paused => &[Resume, Cancel],
                JobStatus::Completed | JobStatus::Skipped => &[Force],
                JobStatus::Failed | JobStatus::Cancelled => &[Retry],
            }
        };
        for status in JobStatus::ALL.iter().copied() {
            let allowed = allowed_actions(status);
            assert_eq!(allowed, expected(status), "{status}");
            for (retry_count, forced, crash_count) in [(0, false, 0), (3, true, 2), (9, false, 7)] {
                let job = JobSnapshot { status, retry_count, forced, crash_count, replacing: false };
                for action in UserAction::ALL.iter().copied() {
                    let partials: &[PartialOutput] =
                        if action == Resume { PartialOutput::ALL } else { &[PartialOutput::Valid] };
                    for partial in partials.iter().copied() {
                        let event = match action {
                            Resume => JobEvent::Resume { partial },
                            other => other.event(),
                        };
                        let accepted = transition(&job, &event).is_ok();
                        assert_eq!(accepted, allowed.contains(&action), "{status} x {action} ({job:?}, {partial})");
                    }
                }
            }
        }
    }

    #[test]
    fn actions_serialize_as_the_path_segment_of_their_endpoint() {
        let json = serde_json::to_value(allowed_actions(JobStatus::Encoding)).unwrap();
        assert_eq!(json, serde_json::json!(["pause", "cancel"]));
    }

    mod state_machine {
        use super::super::*;
        use crate::domain::encoding::RetryProfile;
        use std::collections::{BTreeSet, HashMap};
        use Effect::*;
        use JobStatus::*;

        /// An event, and the counters of the job it is applied to.
        struct Sample {
            label: &'static str,
            retry_count: u32,
            forced: bool,
            crash_count: u32,
            event: JobEvent,
        }

        /// Crash counts are 1 (non-zero, so a reset shows) unless the sample says otherwise.
        fn sample(label: &'static str, retry_count: u32, forced: bool, event: JobEvent) -> Sample {
            Sample { label, retry_count, forced, crash_count: 1, event }
        }

        impl Sample {
            fn snapshot(&self, status: JobStatus) -> JobSnapshot {
                JobSnapshot {
                    status,
                    retry_count: self.retry_count,
                    forced: self.forced,
                    crash_count: self.crash_count,
                    replacing: false,
                }
            }
        }

        /// Counters are mostly non-zero so that an accidental reset shows.
        fn samples() -> Vec<Sample> {
            vec![
                sample("queue", 1, false, JobEvent::Queue),
                sample("start", 1, false, JobEvent::Start),
                sample("analyzed: skip", 1, false, JobEvent::Analyzed { skip: true }),
                sample("analyzed: encode", 1, false, JobEvent::Analyzed { skip: false }),
                sample("analyzed forced: skip", 1, true, JobEvent::Analyzed { skip: true }),
                sample("analyzed forced: encode", 1, true, JobEvent::Analyzed { skip: false }),
                sample("complete", 1, false, JobEvent::Complete),
                sample(
                    "fail at 0",
                    0,
                    false,
                    JobEvent::Fail { code: FailureCode::FileValidationFailed, resumable: false },
                ),
                sample("fail at 2", 2, true, JobEvent::Fail { code: FailureCode::TranscoderCrashed, resumable: false }),
                sample(
                    "fail at 3",
                    3,
                    false,
                    JobEvent::Fail { code: FailureCode::InsufficientDiskSpace, resumable: false },
                ),
                sample(
                    "fail resumable at 1",
                    1,
                    false,
                    JobEvent::Fail { code: FailureCode::Miscellaneous, resumable: true },
                ),
                sample(
                    "fail resumable at 3",
                    3,
                    true,
                    JobEvent::Fail { code: FailureCode::TranscoderCrashed, resumable: true },
                ),
                sample("pause", 1, false, JobEvent::Pause),
                sample("resume: valid", 1, false, JobEvent::Resume { partial: PartialOutput::Valid }),
                sample("resume: missing", 1, false, JobEvent::Resume { partial: PartialOutput::Missing }),
                sample("resume: corrupt", 1, false, JobEvent::Resume { partial: PartialOutput::Corrupt }),
                sample("retry", 3, true, JobEvent::Retry),
                sample("cancel", 1, false, JobEvent::Cancel),
                sample("force", 2, false, JobEvent::Force),
                sample("orphaned, not a crash", 2, false, JobEvent::Orphaned { crashed: false }),
                Sample {
                    crash_count: 0,
                    ..sample("orphaned by a first crash", 2, false, JobEvent::Orphaned { crashed: true })
                },
                Sample {
                    crash_count: 2,
                    ..sample("orphaned by a third crash", 2, true, JobEvent::Orphaned { crashed: true })
                },
                sample("busy", 2, true, JobEvent::Busy),
                sample("yield", 2, true, JobEvent::Yield),
                sample("source changed", 2, true, JobEvent::SourceChanged),
                sample("not smaller", 1, true, JobEvent::NotSmaller),
                sample("skip probed", 0, false, JobEvent::SkipProbed),
                sample("skip probed forced", 0, true, JobEvent::SkipProbed),
                sample("probe", 0, false, JobEvent::Probe),
                sample("probed", 0, false, JobEvent::Probed),
                sample("probe interrupted", 0, false, JobEvent::ProbeInterrupted),
            ]
        }

        /// Exhaustive on purpose: a new event variant does not compile until it is counted here
        /// and given samples and rows.
        fn variant_index(event: &JobEvent) -> usize {
            match event {
                JobEvent::Queue => 0,
                JobEvent::Start => 1,
                JobEvent::Analyzed { .. } => 2,
                JobEvent::Complete => 3,
                JobEvent::Fail { .. } => 4,
                JobEvent::Pause => 5,
                JobEvent::Resume { .. } => 6,
                JobEvent::Retry => 7,
                JobEvent::Cancel => 8,
                JobEvent::Force => 9,
                JobEvent::Orphaned { .. } => 10,
                JobEvent::Busy => 11,
                JobEvent::SourceChanged => 12,
                JobEvent::Yield => 13,
                JobEvent::NotSmaller => 14,
                JobEvent::SkipProbed => 15,
                JobEvent::Probe => 16,
                JobEvent::Probed => 17,
                JobEvent::ProbeInterrupted => 18,
            }
        }
        const EVENT_VARIANTS: usize = 19;

        struct Row {
            from: JobStatus,
            sample: &'static str,
            expected: Option<Outcome>,
        }

        fn moves(
            from: JobStatus,
            sample: &'static str,
            to: JobStatus,
            retry_count: u32,
            forced: bool,
            effects: Vec<Effect>,
        ) -> Vec<Row> {
            vec![Row { from, sample, expected: Some(Outcome { to, retry_count, forced, crash_count: KEEP, effects }) }]
        }

        /// A row whose crash count is not the sample's own.
        fn moves_counting(row: Vec<Row>, crash_count: u32) -> Vec<Row> {
            row.into_iter()
                .map(|mut r| {
                    if let Some(o) = r.expected.as_mut() {
                        o.crash_count = crash_count;
                    }
                    r
                })
                .collect()
        }

        /// Stands for "the sample's crash count, unchanged" in the table.
        const KEEP: u32 = u32::MAX;

        fn refused(sample: &'static str, froms: &[JobStatus]) -> Vec<Row> {
            froms.iter().map(|&from| Row { from, sample, expected: None }).collect()
        }

        fn rows() -> Vec<Row> {
            let stop_hard = StopTranscoder { graceful: false };
            let fail_effects = |running: bool, code: FailureCode, retry: Option<RetryProfile>| {
                let mut effects = if running { vec![stop_hard] } else { vec![] };
                effects.extend([DeletePartial, RecordFailure(code), ReleaseNode]);
                if let Some(profile) = retry {
                    effects.extend([UseRetryProfile(profile), StartFromScratch]);
                }
                effects
            };
            let crashed = FailureCode::TranscoderCrashed;
            let corrupt = FailureCode::FileValidationFailed;
            let disk = FailureCode::InsufficientDiskSpace;
            let misc = FailureCode::Miscellaneous;
            let crash_failure = vec![DeletePartial, RecordFailure(crashed), ReleaseNode];

            [
                moves(Pending, "queue", Queued, 1, false, vec![StartFromScratch]),
                refused("queue", &[Queued, Analyzing, Encoding, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Queued, "start", Analyzing, 1, false, vec![]),
                refused("start", &[Pending, Analyzing, Encoding, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "analyzed: skip", Skipped, 1, false, vec![ReleaseNode]),
                refused("analyzed: skip", &[Pending, Queued, Encoding, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "analyzed: encode", Encoding, 1, false, vec![]),
                refused(
                    "analyzed: encode",
                    &[Pending, Queued, Encoding, Paused, Completed, Skipped, Failed, Cancelled],
                ),
                moves(Analyzing, "analyzed forced: skip", Encoding, 1, true, vec![]),
                refused(
                    "analyzed forced: skip",
                    &[Pending, Queued, Encoding, Paused, Completed, Skipped, Failed, Cancelled],
                ),
                moves(Analyzing, "analyzed forced: encode", Encoding, 1, true, vec![]),
                refused(
                    "analyzed forced: encode",
                    &[Pending, Queued, Encoding, Paused, Completed, Skipped, Failed, Cancelled],
                ),
                moves(Encoding, "complete", Completed, 1, false, vec![ReleaseNode]),
                refused("complete", &[Pending, Queued, Analyzing, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(
                    Analyzing,
                    "fail at 0",
                    Queued,
                    1,
                    false,
                    fail_effects(false, corrupt, Some(RetryProfile::SoftwareDecode)),
                ),
                moves(
                    Encoding,
                    "fail at 0",
                    Queued,
                    1,
                    false,
                    fail_effects(true, corrupt, Some(RetryProfile::SoftwareDecode)),
                ),
                refused("fail at 0", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(
                    Analyzing,
                    "fail at 2",
                    Queued,
                    3,
                    true,
                    fail_effects(false, crashed, Some(RetryProfile::Conservative)),
                ),
                moves(
                    Encoding,
                    "fail at 2",
                    Queued,
                    3,
                    true,
                    fail_effects(true, crashed, Some(RetryProfile::Conservative)),
                ),
                refused("fail at 2", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "fail at 3", Failed, 3, false, fail_effects(false, disk, None)),
                moves(Encoding, "fail at 3", Failed, 3, false, fail_effects(true, disk, None)),
                refused("fail at 3", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                // The finished segments stay for the retry, which continues from them.
                moves(
                    Analyzing,
                    "fail resumable at 1",
                    Queued,
                    2,
                    false,
                    vec![
                        KeepPartial,
                        RecordFailure(misc),
                        ReleaseNode,
                        UseRetryProfile(RetryProfile::for_retry_count(2)),
                        ContinueFromPartial,
                    ],
                ),
                moves(
                    Encoding,
                    "fail resumable at 1",
                    Queued,
                    2,
                    false,
                    vec![
                        stop_hard,
                        KeepPartial,
                        RecordFailure(misc),
                        ReleaseNode,
                        UseRetryProfile(RetryProfile::for_retry_count(2)),
                        ContinueFromPartial,
                    ],
                ),
                refused("fail resumable at 1", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                // No retry left: the partial output goes, resumable or not.
                moves(Analyzing, "fail resumable at 3", Failed, 3, true, fail_effects(false, crashed, None)),
                moves(Encoding, "fail resumable at 3", Failed, 3, true, fail_effects(true, crashed, None)),
                refused("fail resumable at 3", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Queued, "pause", Paused, 1, false, vec![]),
                moves(Analyzing, "pause", Paused, 1, false, vec![ReleaseNode]),
                moves(
                    Encoding,
                    "pause",
                    Paused,
                    1,
                    false,
                    vec![StopTranscoder { graceful: true }, KeepPartial, ReleaseNode],
                ),
                refused("pause", &[Pending, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Paused, "resume: valid", Queued, 1, false, vec![ContinueFromPartial]),
                refused(
                    "resume: valid",
                    &[Pending, Queued, Analyzing, Encoding, Completed, Skipped, Failed, Cancelled],
                ),
                moves(Paused, "resume: missing", Queued, 1, false, vec![StartFromScratch]),
                refused(
                    "resume: missing",
                    &[Pending, Queued, Analyzing, Encoding, Completed, Skipped, Failed, Cancelled],
                ),
                moves(Paused, "resume: corrupt", Queued, 1, false, vec![DeletePartial, StartFromScratch]),
                refused(
                    "resume: corrupt",
                    &[Pending, Queued, Analyzing, Encoding, Completed, Skipped, Failed, Cancelled],
                ),
                moves_counting(moves(Failed, "retry", Queued, 0, true, vec![ClearFailure, StartFromScratch]), 0),
                moves_counting(moves(Cancelled, "retry", Queued, 0, true, vec![StartFromScratch]), 0),
                refused("retry", &[Pending, Queued, Analyzing, Encoding, Paused, Completed, Skipped]),
                moves(Pending, "cancel", Cancelled, 1, false, vec![]),
                moves(Queued, "cancel", Cancelled, 1, false, vec![DeletePartial]),
                moves(Analyzing, "cancel", Cancelled, 1, false, vec![DeletePartial, ReleaseNode]),
                moves(Encoding, "cancel", Cancelled, 1, false, vec![stop_hard, DeletePartial, ReleaseNode]),
                moves(Paused, "cancel", Cancelled, 1, false, vec![DeletePartial]),
                refused("cancel", &[Completed, Skipped, Failed, Cancelled]),
                moves_counting(moves(Skipped, "force", Queued, 0, true, vec![StartFromScratch]), 0),
                moves_counting(moves(Completed, "force", Queued, 0, true, vec![StartFromScratch]), 0),
                refused("force", &[Pending, Queued, Analyzing, Encoding, Paused, Failed, Cancelled]),
                moves(Analyzing, "orphaned, not a crash", Queued, 2, false, vec![ReleaseNode, ContinueFromPartial]),
                moves(Encoding, "orphaned, not a crash", Queued, 2, false, vec![ReleaseNode, ContinueFromPartial]),
                refused("orphaned, not a crash", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves_counting(
                    moves(
                        Analyzing,
                        "orphaned by a first crash",
                        Queued,
                        2,
                        false,
                        vec![ReleaseNode, ContinueFromPartial],
                    ),
                    1,
                ),
                moves_counting(
                    moves(
                        Encoding,
                        "orphaned by a first crash",
                        Queued,
                        2,
                        false,
                        vec![ReleaseNode, ContinueFromPartial],
                    ),
                    1,
                ),
                refused("orphaned by a first crash", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves_counting(
                    moves(Analyzing, "orphaned by a third crash", Failed, 2, true, crash_failure.clone()),
                    3,
                ),
                moves_counting(moves(Encoding, "orphaned by a third crash", Failed, 2, true, crash_failure), 3),
                refused("orphaned by a third crash", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "busy", Queued, 2, true, vec![ReleaseNode, ContinueFromPartial]),
                moves(Encoding, "busy", Queued, 2, true, vec![ReleaseNode, ContinueFromPartial]),
                refused("busy", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "yield", Queued, 2, true, vec![ReleaseNode, ContinueFromPartial]),
                moves(
                    Encoding,
                    "yield",
                    Queued,
                    2,
                    true,
                    vec![StopTranscoder { graceful: true }, KeepPartial, ReleaseNode, ContinueFromPartial],
                ),
                refused("yield", &[Pending, Queued, Paused, Completed, Skipped, Failed, Cancelled]),
                moves_counting(
                    moves(Completed, "source changed", Queued, 0, false, vec![ClearFailure, StartFromScratch]),
                    0,
                ),
                moves_counting(
                    moves(Skipped, "source changed", Queued, 0, false, vec![ClearFailure, StartFromScratch]),
                    0,
                ),
                moves_counting(
                    moves(Failed, "source changed", Queued, 0, false, vec![ClearFailure, StartFromScratch]),
                    0,
                ),
                moves_counting(
                    moves(Cancelled, "source changed", Queued, 0, false, vec![ClearFailure, StartFromScratch]),
                    0,
                ),
                refused("source changed", &[Pending, Queued, Analyzing, Encoding, Paused]),
                moves(Encoding, "not smaller", Skipped, 1, true, vec![stop_hard, DeletePartial, ReleaseNode]),
                refused("not smaller", &[Pending, Queued, Analyzing, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "skip probed", Skipped, 0, false, vec![DeletePartial]),
                refused("skip probed", &[Pending, Queued, Encoding, Paused, Completed, Skipped, Failed, Cancelled]),
                refused(
                    "skip probed forced",
                    &[Pending, Queued, Analyzing, Encoding, Paused, Completed, Skipped, Failed, Cancelled],
                ),
                moves(Pending, "probe", Analyzing, 0, false, vec![]),
                refused("probe", &[Queued, Analyzing, Encoding, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "probed", Queued, 0, false, vec![StartFromScratch]),
                refused("probed", &[Pending, Queued, Encoding, Paused, Completed, Skipped, Failed, Cancelled]),
                moves(Analyzing, "probe interrupted", Pending, 0, false, vec![]),
                refused(
                    "probe interrupted",
                    &[Pending, Queued, Encoding, Paused, Completed, Skipped, Failed, Cancelled],
                ),
            ]
            .into_iter()
            .flatten()
            .collect()
        }

        #[test]
        fn samples_cover_every_event_variant() {
            let covered: BTreeSet<usize> = samples().iter().map(|s| variant_index(&s.event)).collect();
            assert_eq!(covered, (0..EVENT_VARIANTS).collect());
        }

        #[test]
        fn the_table_has_one_row_per_status_and_sample() {
            let samples = samples();
            let rows = rows();
            assert_eq!(rows.len(), JobStatus::ALL.len() * samples.len());
            let mut seen = HashMap::new();
            for row in &rows {
                assert!(samples.iter().any(|s| s.label == row.sample), "row for unknown sample {:?}", row.sample);
                *seen.entry((row.from, row.sample)).or_insert(0) += 1;
            }
            for status in JobStatus::ALL {
                for sample in &samples {
                    assert_eq!(seen.get(&(*status, sample.label)), Some(&1), "{status} x {}", sample.label);
                }
            }
        }

        #[test]
        fn every_status_and_event_gives_the_tabled_result() {
            let samples = samples();
            for row in rows() {
                let sample = samples.iter().find(|s| s.label == row.sample).unwrap();
                let job = sample.snapshot(row.from);
                let expected = match row.expected {
                    Some(mut outcome) => {
                        if outcome.crash_count == KEEP {
                            outcome.crash_count = sample.crash_count;
                        }
                        Ok(outcome)
                    }
                    None => Err(TransitionError { from: row.from, event_name: sample.event.name() }),
                };
                assert_eq!(transition(&job, &sample.event), expected, "{} x {}", row.from, row.sample);
            }
        }

        #[test]
        fn every_way_into_the_queue_says_how_the_next_attempt_begins() {
            for status in JobStatus::ALL {
                for sample in samples() {
                    let job = sample.snapshot(*status);
                    let Ok(outcome) = transition(&job, &sample.event) else { continue };
                    let continues = outcome.effects.contains(&ContinueFromPartial);
                    let restarts = outcome.effects.contains(&StartFromScratch);
                    if outcome.to == Queued {
                        assert!(continues != restarts, "{status} x {}: {:?}", sample.label, outcome.effects);
                    } else {
                        assert!(!continues && !restarts, "{status} x {}: {:?}", sample.label, outcome.effects);
                    }
                    assert!(
                        !(continues && outcome.effects.contains(&DeletePartial)),
                        "{status} x {}: deletes what it continues from",
                        sample.label
                    );
                }
            }
        }

        #[test]
        fn refusals_read_as_sentences() {
            let completed =
                JobSnapshot { status: Completed, retry_count: 0, forced: false, crash_count: 0, replacing: false };
            let error = transition(&completed, &JobEvent::Pause).unwrap_err();
            assert_eq!(error.to_string(), "cannot pause a job that is COMPLETED");
            let pending =
                JobSnapshot { status: Pending, retry_count: 0, forced: false, crash_count: 0, replacing: false };
            let error = transition(&pending, &JobEvent::Analyzed { skip: true }).unwrap_err();
            assert_eq!(error.to_string(), "cannot finish analyzing a job that is PENDING");
        }

        /// Acceptance: a corrupt source ends FAILED with retry counter 3 after 4 attempts.
        #[test]
        fn a_corrupt_file_fails_for_good_after_four_attempts() {
            let apply = |job: JobSnapshot, event: JobEvent| {
                let outcome = transition(&job, &event).unwrap();
                JobSnapshot {
                    status: outcome.to,
                    retry_count: outcome.retry_count,
                    forced: outcome.forced,
                    crash_count: outcome.crash_count,
                    replacing: false,
                }
            };
            let mut job = apply(
                JobSnapshot { status: Pending, retry_count: 0, forced: false, crash_count: 0, replacing: false },
                JobEvent::Queue,
            );
            let mut attempts = 0;
            while job.status == Queued {
                attempts += 1;
                job = apply(job, JobEvent::Start);
                job = apply(job, JobEvent::Fail { code: FailureCode::FileValidationFailed, resumable: false });
            }
            assert_eq!((job.status, job.retry_count, attempts), (Failed, 3, 4));

            job = apply(job, JobEvent::Retry);
            assert_eq!((job.status, job.retry_count), (Queued, 0));
        }

        #[test]
        fn a_counter_beyond_the_limit_still_fails_without_growing() {
            let job = JobSnapshot { status: Encoding, retry_count: 7, forced: false, crash_count: 0, replacing: false };
            let outcome = transition(&job, &JobEvent::Fail { code: FailureCode::Timeout, resumable: true }).unwrap();
            assert_eq!((outcome.to, outcome.retry_count), (Failed, 7));
        }

        /// A file that crashes whatever runs it: the job fails on its third crash instead
        /// of being requeued for ever; clean stops do not count.
        #[test]
        fn a_job_whose_node_crashes_three_times_fails_as_crashed() {
            let mut job =
                JobSnapshot { status: Queued, retry_count: 0, forced: false, crash_count: 0, replacing: false };
            let run = |job: &mut JobSnapshot, event: JobEvent| {
                let outcome = transition(job, &event).unwrap();
                *job = JobSnapshot {
                    status: outcome.to,
                    retry_count: outcome.retry_count,
                    forced: outcome.forced,
                    crash_count: outcome.crash_count,
                    replacing: false,
                };
                outcome
            };
            for _ in 0..5 {
                run(&mut job, JobEvent::Start);
                run(&mut job, JobEvent::Orphaned { crashed: false });
            }
            assert_eq!((job.status, job.crash_count), (Queued, 0));
            run(&mut job, JobEvent::Start);
            run(&mut job, JobEvent::Orphaned { crashed: true });
            run(&mut job, JobEvent::Start);
            run(&mut job, JobEvent::Orphaned { crashed: true });
            assert_eq!((job.status, job.crash_count, job.retry_count), (Queued, 2, 0));
            run(&mut job, JobEvent::Start);
            let last = run(&mut job, JobEvent::Orphaned { crashed: true });
            assert_eq!((job.status, job.crash_count), (Failed, 3));
            assert!(last.effects.contains(&RecordFailure(FailureCode::TranscoderCrashed)));
            run(&mut job, JobEvent::Retry);
            assert_eq!((job.status, job.crash_count), (Queued, 0));
        }

        /// Found by kill-linked: a job failed for its crashes while its replace had swapped
        /// the files lost its intent and left the output at the original's path, the job
        /// FAILED. In its replace, a crash is counted but requeues the job, whose next
        /// attempt finishes the replace; a crash after that can fail it.
        #[test]
        fn a_crash_in_the_middle_of_the_replace_never_fails_the_job() {
            for status in [Analyzing, Encoding] {
                let replacing = JobSnapshot {
                    status,
                    retry_count: 0,
                    forced: false,
                    crash_count: MAX_CRASHES - 1,
                    replacing: true,
                };
                let outcome = transition(&replacing, &JobEvent::Orphaned { crashed: true }).unwrap();
                assert_eq!((outcome.to, outcome.crash_count), (Queued, MAX_CRASHES), "{status}");
                assert!(!outcome.effects.contains(&DeletePartial), "{status}: {:?}", outcome.effects);
                assert!(outcome.effects.contains(&ContinueFromPartial), "{status}: {:?}", outcome.effects);
                let later = JobSnapshot { status, crash_count: MAX_CRASHES, replacing: false, ..replacing };
                let outcome = transition(&later, &JobEvent::Orphaned { crashed: true }).unwrap();
                assert_eq!(outcome.to, Failed, "{status}");
            }
        }
    }

    #[test]
    fn a_row_is_in_its_replace_only_while_transferring_and_negative_counters_read_as_zero() {
        // Every stage, so a new one has to be placed here.
        assert_eq!(Stage::ALL.len(), 3);
        for (stage, replacing) in [
            (None, false),
            (Some(Stage::Analyzing), false),
            (Some(Stage::Encoding), false),
            (Some(Stage::Transferring), true),
        ] {
            assert_eq!(
                JobSnapshot::of_row(JobStatus::Encoding, 2, true, 1, stage),
                JobSnapshot { status: JobStatus::Encoding, retry_count: 2, forced: true, crash_count: 1, replacing },
                "{stage:?}"
            );
        }
        let job = JobSnapshot::of_row(JobStatus::Queued, -1, false, i32::MIN, None);
        assert_eq!((job.retry_count, job.crash_count), (0, 0));
        assert_eq!(JobSnapshot::of_row(JobStatus::Queued, i32::MAX, false, 0, None).retry_count, 2_147_483_647);
    }
}
