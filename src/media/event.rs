//! What the media children report to the node, one JSON line each on stdout (`Event`), and
//! how a run ended (`RunEnd`). No FFmpeg here: the node reads these without linking it.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::domain::job::FailureCode;
use crate::domain::segments::SpanView;

/// What the transcoder reports, one JSON line each on stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Event {
    #[serde(rename_all = "camelCase")]
    Started {
        resume_after_frames: u64,
        segments_kept: u32,
        partial_reset: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Progress {
        frame: u64,
        fps: f64,
        out_time: f64,
        percent: f64,
        size: u64,
        /// Encoder sessions at work on this job's segments.
        #[serde(default)]
        sessions: u32,
    },
    #[serde(rename_all = "camelCase")]
    SegmentDone {
        index: u32,
        frames: u64,
        bytes: u64,
    },
    /// The planned spans of the video and what is done of each (a video cut into spans).
    Spans {
        spans: Vec<SpanView>,
    },
    /// A session of this run began planned span `span`.
    SpanStarted {
        span: u32,
    },
    /// A session of this run finished its piece of planned span `span`, having decoded
    /// `dropped` frames before the piece's start and dropped them: the frames from the
    /// keyframe before its cut, none where the cut is a keyframe that decoding starts at
    /// cleanly (`domain::segments::Keyframe`).
    SpanDecoded {
        span: u32,
        dropped: u64,
    },
    #[serde(rename_all = "camelCase")]
    Paused {
        frames_done: u64,
        segments: u32,
    },
    Muxing,
    /// A two-pass encode began pass `pass` (1: statistics, 2: the encode kept) over the
    /// whole video; `restarted`: a stop or a crash had cut that pass short before.
    Pass {
        pass: u8,
        restarted: bool,
    },
    /// The quality search tried `quality` on the samples.
    Probed {
        quality: u32,
        vmaf: f64,
        percent: f64,
    },
    /// The quality search settled (or its kept result was read): the encode uses `quality`.
    #[serde(rename_all = "camelCase")]
    Searched {
        quality: u32,
        met: bool,
        vmaf: f64,
        vmaf_p5: f64,
        percent: f64,
        predicted_size: u64,
        max_size_percent: u32,
    },
    /// The output's VMAF on the search's samples.
    Measured {
        mean: f64,
        p5: f64,
    },
    /// The encode stopped early: its output, projected from the bytes written per frame,
    /// would pass `limit` bytes.
    #[serde(rename_all = "camelCase")]
    NotSmaller {
        projected: u64,
        limit: u64,
        frames_done: u64,
    },
    /// A helper found nothing to do.
    Nothing {
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    Done {
        output: String,
        size: u64,
        frames_encoded_this_run: u64,
        frames_skipped_this_run: u64,
        /// CPU time of this run (all threads) and its wall time, in milliseconds.
        cpu_ms: u64,
        wall_ms: u64,
        /// Where this run's time went, phase by phase (`PhaseClock`); empty from a child
        /// that does not say (a helper, an older build).
        #[serde(default)]
        phases: Vec<PhaseTime>,
        /// Wall time of the video's encode during which a session had no span left to take
        /// while another still encoded (the tail), in milliseconds.
        #[serde(default)]
        alone_ms: u64,
    },
    #[serde(rename_all = "camelCase")]
    Error {
        code: FailureCode,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Completed,
    Paused,
    /// Another transcoder holds the partial output's lock: nothing was touched.
    Busy,
    /// Stopped early: the output would not be smaller than the plan's `size_limit`.
    NotSmaller,
}

/// One phase of a job's work: its wall time and the CPU time it took (every thread of the
/// process that did it), in milliseconds. A job's completion records its phases in order
/// (validation, the transcoder's, verification, the replace), so where the time of a job
/// went is the service's own measurement, not a guess.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseTime {
    pub phase: String,
    pub wall_ms: u64,
    /// 0 where nobody measured it: a transfer's (`download`, `upload`) waits on the link.
    pub cpu_ms: u64,
    /// The linked node a phase ran on, for the phases that node reported with the upload of
    /// a job it took by transfer; absent: the node that verified and replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl PhaseTime {
    pub fn new(phase: &str, wall_ms: u64, cpu_ms: u64) -> Self {
        PhaseTime { phase: phase.to_string(), wall_ms, cpu_ms, node: None }
    }

    /// Phase `phase`, begun at `started` and ended now, having taken `cpu_ms` (0 where
    /// nobody measured it).
    pub fn since(phase: &str, started: Instant, cpu_ms: u64) -> Self {
        PhaseTime::new(phase, u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX), cpu_ms)
    }
}

/// Times the consecutive phases of a process's work: each `lap` closes the phase that ran
/// since the last one with its wall time and the process's CPU time over it (all threads:
/// a phase's helper threads, the audio encoded ahead, count in the phase they ran in).
#[derive(Debug)]
pub struct PhaseClock {
    at: Instant,
    cpu_ms: u64,
    phases: Vec<PhaseTime>,
}

impl PhaseClock {
    pub fn start() -> Self {
        PhaseClock { at: Instant::now(), cpu_ms: cpu_time_ms(), phases: Vec::new() }
    }

    /// Closes the phase `phase` at now. A phase lapped twice (a run that goes through it
    /// again) adds up in its first entry.
    pub fn lap(&mut self, phase: &str) {
        let (now, cpu) = (Instant::now(), cpu_time_ms());
        let wall_ms = u64::try_from(now.duration_since(self.at).as_millis()).unwrap_or(u64::MAX);
        let cpu_ms = cpu.saturating_sub(self.cpu_ms);
        (self.at, self.cpu_ms) = (now, cpu);
        match self.phases.iter_mut().find(|p| p.phase == phase) {
            Some(p) => {
                p.wall_ms = p.wall_ms.saturating_add(wall_ms);
                p.cpu_ms = p.cpu_ms.saturating_add(cpu_ms);
            }
            None => self.phases.push(PhaseTime::new(phase, wall_ms, cpu_ms)),
        }
    }

    /// The phases closed so far, in the order they first ran.
    pub fn phases(&self) -> Vec<PhaseTime> {
        self.phases.clone()
    }
}

/// What a transcoder run said of its time (`Event::Done`), carried to the job's completion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    pub cpu_ms: u64,
    pub wall_ms: u64,
    pub phases: Vec<PhaseTime>,
    pub alone_ms: u64,
}

/// CPU time this process has used (user + system, all threads), in milliseconds: what
/// `Event::Done` reports as `cpu_ms`.
pub fn cpu_time_ms() -> u64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let ms = |t: libc::timeval| (t.tv_sec as u64) * 1000 + (t.tv_usec as u64) / 1000;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// CPU time the calling thread has used, in milliseconds: a phase the node runs on one
/// blocking thread (the replace) is timed by it, as the node's other threads serve other
/// jobs meanwhile.
pub fn thread_cpu_time_ms() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    u64::try_from(t.tv_sec).unwrap_or(0) * 1000 + u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Spins on this thread for `d` of wall time (CPU time, as long as the thread runs).
    fn spin(d: Duration) -> u64 {
        let (start, mut x) = (Instant::now(), 0u64);
        while start.elapsed() < d {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        x
    }

    #[test]
    fn a_lap_closes_the_phase_with_its_wall_and_cpu_time() {
        let mut clock = PhaseClock::start();
        std::thread::sleep(Duration::from_millis(150));
        clock.lap("waiting");
        spin(Duration::from_millis(300));
        clock.lap("working");
        let phases = clock.phases();
        let names: Vec<&str> = phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(names, ["waiting", "working"]);
        let (waiting, working) = (&phases[0], &phases[1]);
        assert!(waiting.wall_ms >= 150, "{waiting:?}");
        // Sleeping takes no CPU; spinning takes it (getrusage counts in 1 ms or finer on
        // Linux; half of the spin is left for a loaded machine's descheduling).
        assert!(waiting.cpu_ms < 100, "{waiting:?}");
        assert!(working.wall_ms >= 300, "{working:?}");
        assert!(working.cpu_ms >= 100, "{working:?}");
    }

    #[test]
    fn a_phase_lapped_again_adds_up_in_its_first_place() {
        let mut clock = PhaseClock::start();
        std::thread::sleep(Duration::from_millis(20));
        clock.lap("video");
        clock.lap("mux");
        std::thread::sleep(Duration::from_millis(20));
        clock.lap("video");
        let phases = clock.phases();
        assert_eq!(phases.len(), 2);
        assert_eq!(phases[0].phase, "video");
        assert!(phases[0].wall_ms >= 40, "{phases:?}");
        assert_eq!(phases[1].phase, "mux");
    }

    #[test]
    fn the_thread_clock_counts_this_threads_work_only() {
        let before = thread_cpu_time_ms();
        // Another thread's work is not this one's.
        std::thread::spawn(|| spin(Duration::from_millis(300))).join().unwrap();
        let between = thread_cpu_time_ms();
        assert!(between - before < 100, "{before} {between}");
        spin(Duration::from_millis(300));
        assert!(thread_cpu_time_ms() - between >= 100);
    }

    #[test]
    fn a_done_event_from_a_child_that_does_not_time_its_phases_still_reads() {
        let old = r#"{"type":"done","output":"/o.mkv","size":3,"framesEncodedThisRun":1,"framesSkippedThisRun":0,"cpuMs":5,"wallMs":6}"#;
        match serde_json::from_str::<Event>(old).unwrap() {
            Event::Done { phases, alone_ms, cpu_ms, .. } => {
                assert!(phases.is_empty());
                assert_eq!((alone_ms, cpu_ms), (0, 5));
            }
            other => panic!("{other:?}"),
        }
    }
}
