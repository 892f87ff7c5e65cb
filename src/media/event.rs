//! What the media children report to the node, one JSON line each on stdout (`Event`), and
//! how a run ended (`RunEnd`). No FFmpeg here: the node reads these without linking it.

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
