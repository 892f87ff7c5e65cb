//! Segments as units of work. A job's video is cut into spans of source presentation time,
//! each encoded by its own encoder session, so spans can be encoded at the same time and
//! stitched in order. A span may start at any frame: its session seeks to the keyframe
//! before the span, decodes from there and drops the frames before its start, and its
//! encoder starts the span with an IDR (see docs/ARCHITECTURE.md, "Segments").
//!
//! Everything here is arithmetic on timestamps and counts; the transcoder carries it out.

use serde::{Deserialize, Serialize};

/// Frames with `from <= pts < to`, in the source video stream's time base; `None` is
/// unbounded on that side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl Span {
    /// The whole video.
    pub const ALL: Span = Span { from: None, to: None };

    pub fn new(from: Option<i64>, to: Option<i64>) -> Span {
        Span { from, to }
    }

    /// Whether a frame at `pts` comes before this span.
    pub fn is_before(&self, pts: i64) -> bool {
        self.from.is_some_and(|f| pts < f)
    }

    /// Whether a frame at `pts` comes at or after this span's end.
    pub fn is_past(&self, pts: i64) -> bool {
        self.to.is_some_and(|t| pts >= t)
    }

    fn lo(&self) -> i64 {
        self.from.unwrap_or(i64::MIN)
    }

    fn hi(&self) -> i64 {
        self.to.unwrap_or(i64::MAX)
    }

    fn from_bounds(lo: i64, hi: i64) -> Span {
        Span { from: (lo != i64::MIN).then_some(lo), to: (hi != i64::MAX).then_some(hi) }
    }
}

/// The cut points: the first keyframe at least `every` after the previous cut, starting
/// from the first keyframe (which starts the first span, unbounded below). `keyframes` are
/// the presentation timestamps of the source's keyframes, in any order.
pub fn boundaries(keyframes: &[i64], every: i64) -> Vec<i64> {
    let mut sorted = keyframes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut cuts = Vec::new();
    let Some((&first, rest)) = sorted.split_first() else { return cuts };
    let mut last = first;
    for &k in rest {
        if k.saturating_sub(last) >= every.max(1) {
            cuts.push(k);
            last = k;
        }
    }
    cuts
}

/// Spans each session should get at least, so that the last round (sessions finishing
/// their final span while others have none left) is short against the whole.
pub const SPANS_PER_SESSION: u32 = 3;
/// Spans are never planned shorter than this: each starts an encoder session and decodes
/// from the keyframe before it (2 s spans cost 1 to 1.5 % in size in the encode benchmark).
pub const MIN_SPAN_SECONDS: f64 = 2.0;

/// How many spans a video of `duration` seconds needs for its `sessions` when cutting every
/// `SEGMENT_SECONDS` would give fewer than three each; None: the setting gives enough. With
/// 3 spans of 20 s for 2 sessions, one session encodes the third alone while the other
/// waits (the encode benchmark's 60 s clip: 93.5 s so, 84.6 s with 6 spans). Where the
/// 2 s floor allows fewer than three each, the count is a whole number per session (10 s
/// for 2 sessions: 4 spans of 2.5 s, not 5 of 2 s that leave one session the fifth alone).
pub fn spans_wanted(segment_seconds: f64, duration: Option<f64>, sessions: u32) -> Option<u32> {
    let d = duration.filter(|d| *d > 0.0 && sessions > 1)?;
    // Whole spans the setting gives, and the most the floor allows.
    let by_setting = (d / segment_seconds).floor() as u32;
    let most = (d / MIN_SPAN_SECONDS).floor() as u32;
    let spans = sessions.saturating_mul(SPANS_PER_SESSION).min(most);
    let whole = if spans >= sessions { spans - spans % sessions } else { spans };
    (whole > by_setting.max(1)).then_some(whole)
}

/// Frames a cut may lie after a keyframe before it is moved back onto that keyframe (see
/// `even_boundaries`): more than the B-frames x264 and x265 reorder (16 at most), so more
/// than an open GOP's leading pictures and than a keyframe's decode time runs ahead of its
/// presentation time.
pub const KEYFRAME_SNAP_FRAMES: f64 = 16.0;

/// A keyframe of the source: its time in the demuxer's index, and, where decoding can start
/// at it cleanly, its presentation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyframe {
    /// Presentation (Matroska) or decode (MP4) time, as the index gives it.
    pub index: i64,
    /// Its presentation time when decoding from it gives every frame shown at or after it and
    /// no frame before it in decode order is shown after it (an H.264 IDR, an HEVC IRAP:
    /// `media::keyframe::clean_start`): a span cut there starts decoding at its cut and drops
    /// nothing. None where it is not so, or was not read.
    pub clean_at: Option<i64>,
}

impl Keyframe {
    /// A keyframe known only by its index time.
    pub fn indexed(index: i64) -> Keyframe {
        Keyframe { index, clean_at: None }
    }
}

/// How far, in frames, a cut moves onto a clean keyframe (`Keyframe::clean_at`), either way:
/// a tenth of a span, at most `KEYFRAME_SNAP_FRAMES`. A span that starts there decodes none
/// of the frames before it (up to a whole GOP from the keyframe before, at about a fifteenth
/// of the cost of encoding one each), while the two spans beside the cut differ by twice the
/// move at most: no more than a fifth of a span, on short spans.
pub fn clean_snap_frames(frames_per_span: f64) -> f64 {
    (frames_per_span / 10.0).floor().clamp(0.0, KEYFRAME_SNAP_FRAMES)
}

/// The ideal cut points of `spans` equal spans between `start` and `end`: the time of the
/// frame nearest each one's place on the grid of `ticks_per_frame` from `start`. Empty where
/// nothing can be cut (see `even_boundaries`).
pub fn grid_cuts(start: i64, end: i64, spans: u32, ticks_per_frame: f64) -> Vec<i64> {
    if !(ticks_per_frame.is_finite() && ticks_per_frame > 0.0) || end <= start || spans < 2 {
        return Vec::new();
    }
    let frames = frames_between(start, end, ticks_per_frame);
    (1..spans)
        .map(|k| {
            let frame = (frames * f64::from(k) / f64::from(spans)).round();
            start.saturating_add((frame * ticks_per_frame).round() as i64)
        })
        .collect()
}

/// Frames with `start + n * ticks_per_frame < end`, allowing for an end that a time base
/// rounded half a tick up.
fn frames_between(start: i64, end: i64, ticks_per_frame: f64) -> f64 {
    ((end - start) as f64 / ticks_per_frame - 0.5 / ticks_per_frame).ceil().max(1.0)
}

/// Cut points for `spans` spans of equal length between `start` (the first frame's
/// presentation time) and `end`, whatever the source's keyframes: each cut is the time of
/// the frame nearest its ideal place on the grid of `ticks_per_frame` from `start`
/// (`grid_cuts`), so the spans hold whole frames, as many each as can be (counts differ by
/// one at most). A cut that misses a frame's time (a variable frame rate, a time base that
/// rounds) is still exact: a span is `from <= pts < to`, so every frame falls in one span,
/// and its session decodes from the keyframe before the span (`media::sessions`).
///
/// Two rules move a cut, the first that applies:
/// - a clean keyframe (`Keyframe::clean_at`) within `clean_snap_frames` of it, either way:
///   the cut goes onto its presentation time (the nearest; the earlier of two as near), and
///   the span after it decodes from its cut, dropping nothing;
/// - a cut up to `KEYFRAME_SNAP_FRAMES` after a keyframe's time in the demuxer's index goes
///   back onto it (its presentation time where it is clean). There the seek before the cut
///   lands on that keyframe, whose decode time (MP4's index) may come before the cut while
///   its presentation time, or its open GOP's leading pictures (which reference the GOP
///   before it, not decoded), come at or after the cut; a cut at the keyframe's own time is
///   sought from the keyframe before it.
///
/// None of the cuts repeats or leaves the video; fewer than `spans - 1` where the video has
/// fewer frames.
pub fn even_boundaries(keyframes: &[Keyframe], start: i64, end: i64, spans: u32, ticks_per_frame: f64) -> Vec<i64> {
    let grid = grid_cuts(start, end, spans, ticks_per_frame);
    if grid.is_empty() {
        return grid;
    }
    let per_span = frames_between(start, end, ticks_per_frame) / f64::from(spans);
    let near = (ticks_per_frame * clean_snap_frames(per_span)).floor() as i64;
    let snap = (ticks_per_frame * KEYFRAME_SNAP_FRAMES).ceil() as i64;
    let mut cuts: Vec<i64> = Vec::new();
    for on_grid in grid {
        let clean = keyframes
            .iter()
            .filter_map(|k| k.clean_at)
            .filter(|&at| at > start && at.abs_diff(on_grid) <= near.unsigned_abs())
            .min_by_key(|&at| (at.abs_diff(on_grid), at));
        let behind = || {
            keyframes
                .iter()
                .filter(|k| k.index > start && k.index < on_grid && on_grid - k.index <= snap)
                .max_by_key(|k| k.index)
                .map(|k| k.clean_at.unwrap_or(k.index))
        };
        let cut = clean.or_else(behind).unwrap_or(on_grid);
        if cut > start && cut < end && cuts.last().is_none_or(|last| cut > *last) {
            cuts.push(cut);
        }
    }
    cuts
}

/// The spans the cut points make: the whole video when there is none.
pub fn spans(boundaries: &[i64]) -> Vec<Span> {
    remaining(boundaries, &[])
}

/// What is left to encode: the parts of the whole video that no finished segment covers,
/// cut at the planned boundaries, in order.
pub fn remaining(boundaries: &[i64], done: &[Span]) -> Vec<Span> {
    let mut covered: Vec<Span> = done.to_vec();
    covered.sort_by_key(Span::lo);
    let mut gaps = Vec::new();
    // `cursor` is the start of what is not yet known to be covered.
    let mut cursor = i64::MIN;
    let mut open = true;
    for d in &covered {
        if d.lo() > cursor {
            gaps.push((cursor, d.lo()));
        }
        if d.to.is_none() {
            open = false;
            break;
        }
        cursor = cursor.max(d.hi());
    }
    if open {
        gaps.push((cursor, i64::MAX));
    }
    let mut out = Vec::new();
    for (lo, hi) in gaps {
        let mut start = lo;
        for &b in boundaries.iter().filter(|&&b| b > lo && b < hi) {
            out.push(Span::from_bounds(start, b));
            start = b;
        }
        out.push(Span::from_bounds(start, hi));
    }
    out
}

/// The planned span (its place among `spans(boundaries)`) that holds a frame at `from`, the
/// start of a span or of what is left of one: the number of cuts at or before it. Every
/// piece left of a planned span has the same number, which names the span's claim (see
/// `media::partial::claim_span`) whoever encodes it.
pub fn planned_index(boundaries: &[i64], from: Option<i64>) -> u32 {
    let Some(from) = from else { return 0 };
    u32::try_from(boundaries.iter().filter(|&&b| b <= from).count()).unwrap_or(u32::MAX)
}

/// The planned span at `index`: the whole of it, whatever is done.
pub fn planned_span(boundaries: &[i64], index: u32) -> Option<Span> {
    spans(boundaries).get(usize::try_from(index).ok()?).copied()
}

/// One planned span as the run that owns the manifest sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanView {
    pub index: u32,
    pub from: Option<i64>,
    pub to: Option<i64>,
    /// Frames and bytes of its finished segments.
    pub frames: u64,
    pub bytes: u64,
    /// Nothing of it is left to encode.
    pub done: bool,
    /// A session of the run encodes it now.
    #[serde(default)]
    pub here: bool,
}

/// Whether finished segments overlap (a frame would be encoded twice): a partial output
/// like that is not used.
pub fn overlapping(done: &[Span]) -> bool {
    let mut covered: Vec<Span> = done.to_vec();
    covered.sort_by_key(Span::lo);
    covered.windows(2).any(|w| match w {
        [a, b] => a.to.is_none() || a.hi() > b.lo(),
        _ => false,
    })
}

/// `PARALLEL_SEGMENTS`: how many encoder sessions one job may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    /// As many as keep the node's cores busy (see `sessions`).
    Auto,
    /// One session per job, segments one after another.
    Off,
    /// At most this many sessions per job.
    Max(u16),
}

impl std::str::FromStr for Parallelism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Parallelism::Auto),
            "off" | "0" | "1" => Ok(Parallelism::Off),
            n => match n.parse::<u16>() {
                Ok(n) if (2..=64).contains(&n) => Ok(Parallelism::Max(n)),
                _ => Err("PARALLEL_SEGMENTS is auto, off, or a number of sessions from 1 to 64".into()),
            },
        }
    }
}

/// Encoder sessions a job runs at once, and the threads each session's encoder may use
/// (0: the encoder's own default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sessions {
    pub sessions: u32,
    pub threads: u32,
}

impl Sessions {
    pub const ONE: Sessions = Sessions { sessions: 1, threads: 0 };
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::ONE
    }
}

/// How a job shares its node's cores. `cores` is what the transcoder may run on (its CPU
/// affinity), `jobs` how many jobs the node runs at once.
///
/// x265 at the medium preset keeps about 1.25 of 2 cores busy alone (frame threads wait on
/// each other), and its wavefront rows scale well up to about 4 threads at 1080p, so `auto`
/// runs at least two sessions wherever a job has two cores, and one session per 4 cores
/// beyond that, each with its share of the cores. A hardware encoder runs one session per
/// job unless a number is set: its session count is limited by the device (consumer NVENC
/// allows a few at once), and one session already keeps it busy.
pub fn sessions(setting: Parallelism, cores: u32, jobs: u32, hardware: bool) -> Sessions {
    let per_job = (cores / jobs.max(1)).max(1);
    let share = |sessions: u32| Sessions { sessions, threads: (per_job / sessions).max(1) };
    match setting {
        Parallelism::Off => Sessions::ONE,
        Parallelism::Max(n) if hardware => Sessions { sessions: u32::from(n).max(1), threads: 0 },
        Parallelism::Auto if hardware => Sessions::ONE,
        Parallelism::Auto if per_job < 2 => Sessions::ONE,
        Parallelism::Auto => share((per_job / 4).max(2)),
        Parallelism::Max(n) => {
            let n = u32::from(n).min(per_job).max(1);
            if n == 1 {
                Sessions::ONE
            } else {
                share(n)
            }
        }
    }
}

/// The threads a session opening an encoder gives it: its share of the job's cores, or, when
/// the session may grow (`grows`: see `media::sessions`) and it is the only one at work
/// (`at_work` counts it) with no span waiting, every session's share, so the cores of the
/// sessions that ran out of spans do not idle (the last span, or a video of one span).
pub fn session_threads(shares: Sessions, grows: bool, at_work: u32, spans_waiting: bool) -> u32 {
    if !grows || shares.threads == 0 || at_work > 1 || spans_waiting {
        return shares.threads;
    }
    shares.sessions.max(1).saturating_mul(shares.threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(from: Option<i64>, to: Option<i64>) -> Span {
        Span::new(from, to)
    }

    /// Keyframes known by their index times only.
    fn idx(times: &[i64]) -> Vec<Keyframe> {
        times.iter().copied().map(Keyframe::indexed).collect()
    }

    #[test]
    fn cuts_fall_on_the_first_keyframe_at_least_a_segment_after_the_last_cut() {
        // Keyframes every 25 frames (1 s at 25 fps), segments of 2 s.
        let keys: Vec<i64> = (0..10).map(|i| i * 25).collect();
        assert_eq!(boundaries(&keys, 50), vec![50, 100, 150, 200]);
        // Irregular keyframes (scene cuts): the first one past the length wins.
        assert_eq!(boundaries(&[0, 10, 70, 80, 125, 300], 50), vec![70, 125, 300]);
        // Unsorted input with repeats; a source that does not start at zero.
        assert_eq!(boundaries(&[130, 30, 30, 80], 50), vec![80, 130]);
        // One keyframe, or none: one span.
        assert!(boundaries(&[0], 50).is_empty());
        assert!(boundaries(&[], 50).is_empty());
        // A zero length never makes empty spans.
        assert_eq!(boundaries(&[0, 0, 1], 0), vec![1]);
    }

    #[test]
    fn spans_cover_everything_once_in_order() {
        assert_eq!(spans(&[]), vec![Span::ALL]);
        assert_eq!(spans(&[50, 100]), vec![s(None, Some(50)), s(Some(50), Some(100)), s(Some(100), None)]);
    }

    #[test]
    fn remaining_is_what_no_finished_segment_covers_cut_at_the_boundaries() {
        let b = [50, 100, 150];
        // Nothing done: every planned span.
        assert_eq!(remaining(&b, &[]), spans(&b));
        // Out-of-order completion (parallel sessions): only the gaps are left.
        let done = [s(Some(100), Some(150)), s(None, Some(50))];
        assert_eq!(remaining(&b, &done), vec![s(Some(50), Some(100)), s(Some(150), None)]);
        // A span stopped mid-way (pause at pts 72): the rest of it, up to its boundary.
        let done = [s(None, Some(50)), s(Some(50), Some(73))];
        assert_eq!(remaining(&b, &done), vec![s(Some(73), Some(100)), s(Some(100), Some(150)), s(Some(150), None)]);
        // A span cut into several segments by frame count counts as covered.
        let done = [s(None, Some(25)), s(Some(25), Some(50)), s(Some(50), Some(100)), s(Some(100), Some(150))];
        assert_eq!(remaining(&b, &done), vec![s(Some(150), None)]);
        // Everything covered.
        let all = [s(None, Some(50)), s(Some(50), Some(100)), s(Some(100), Some(150)), s(Some(150), None)];
        assert!(remaining(&b, &all).is_empty());
        assert!(remaining(&[], &[Span::ALL]).is_empty());
        // The sequential case: no boundaries, segments cut by frame count.
        assert_eq!(remaining(&[], &[s(None, Some(25)), s(Some(25), Some(50))]), vec![s(Some(50), None)]);
        // The last span done first: what is before it is left, cut at the boundaries.
        assert_eq!(
            remaining(&b, &[s(Some(150), None)]),
            vec![s(None, Some(50)), s(Some(50), Some(100)), s(Some(100), Some(150))]
        );
    }

    #[test]
    fn every_piece_of_a_planned_span_has_its_number() {
        let b = [50, 100, 150];
        assert_eq!(planned_index(&b, None), 0);
        assert_eq!(planned_index(&b, Some(10)), 0);
        assert_eq!(planned_index(&b, Some(50)), 1);
        assert_eq!(planned_index(&b, Some(73)), 1);
        assert_eq!(planned_index(&b, Some(150)), 3);
        assert_eq!(planned_index(&[], Some(150)), 0);
        // Each span that `remaining` leaves lies inside the planned span of its number.
        let done = [s(None, Some(50)), s(Some(50), Some(73))];
        for piece in remaining(&b, &done) {
            let whole = planned_span(&b, planned_index(&b, piece.from)).unwrap();
            assert!(whole.lo() <= piece.lo() && piece.hi() <= whole.hi(), "{piece:?} outside {whole:?}");
        }
        assert_eq!(planned_span(&b, 1), Some(s(Some(50), Some(100))));
        assert_eq!(planned_span(&b, 3), Some(s(Some(150), None)));
        assert_eq!(planned_span(&b, 4), None);
    }

    #[test]
    fn overlapping_segments_are_detected() {
        assert!(!overlapping(&[]));
        assert!(!overlapping(&[s(Some(50), None), s(None, Some(50))]));
        assert!(overlapping(&[s(None, Some(60)), s(Some(50), None)]));
        assert!(overlapping(&[s(None, None), s(Some(50), Some(60))]));
        assert!(overlapping(&[s(Some(10), Some(20)), s(Some(10), Some(20))]));
    }

    #[test]
    fn the_setting_parses_and_refuses_what_it_cannot_mean() {
        assert_eq!("auto".parse::<Parallelism>(), Ok(Parallelism::Auto));
        assert_eq!(" OFF ".parse::<Parallelism>(), Ok(Parallelism::Off));
        assert_eq!("1".parse::<Parallelism>(), Ok(Parallelism::Off));
        assert_eq!("4".parse::<Parallelism>(), Ok(Parallelism::Max(4)));
        for bad in ["", "-2", "65", "many", "2.5"] {
            assert!(bad.parse::<Parallelism>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sessions_share_the_cores_a_job_has() {
        use Parallelism::*;
        let cpu = |setting, cores, jobs| sessions(setting, cores, jobs, false);
        let x = |sessions, threads| Sessions { sessions, threads };
        // Off: one session with the encoder's default threads, whatever the machine.
        assert_eq!(cpu(Off, 2, 1), Sessions::ONE);
        assert_eq!(cpu(Off, 64, 1), Sessions::ONE);
        // Auto: two single-thread sessions on two cores; one on a single core.
        assert_eq!(cpu(Auto, 2, 1), x(2, 1));
        assert_eq!(cpu(Auto, 1, 1), Sessions::ONE);
        assert_eq!(cpu(Auto, 4, 1), x(2, 2));
        assert_eq!(cpu(Auto, 16, 1), x(4, 4));
        // The node's jobs split its cores first.
        assert_eq!(cpu(Auto, 2, 2), Sessions::ONE);
        assert_eq!(cpu(Auto, 16, 2), x(2, 4));
        assert_eq!(cpu(Auto, 3, 0), x(2, 1));
        // A maximum is a maximum: never more sessions than the job's cores.
        assert_eq!(cpu(Max(8), 2, 1), x(2, 1));
        assert_eq!(cpu(Max(3), 16, 1), x(3, 5));
        assert_eq!(cpu(Max(4), 1, 1), Sessions::ONE);
        // Hardware: one session unless a number is given, which is taken as the limit.
        assert_eq!(sessions(Auto, 16, 1, true), Sessions::ONE);
        assert_eq!(sessions(Max(3), 2, 1, true), x(3, 0));
        assert_eq!(sessions(Off, 16, 1, true), Sessions::ONE);
    }

    #[test]
    fn a_session_alone_with_no_span_waiting_takes_every_sessions_threads() {
        let two = Sessions { sessions: 2, threads: 1 };
        let four = Sessions { sessions: 4, threads: 4 };
        // Alone with nothing waiting: the job's cores.
        assert_eq!(session_threads(two, true, 1, false), 2);
        assert_eq!(session_threads(four, true, 1, false), 16);
        assert_eq!(session_threads(two, true, 0, false), 2);
        // Others at work, or spans waiting for them: its share.
        assert_eq!(session_threads(two, true, 2, false), 1);
        assert_eq!(session_threads(four, true, 1, true), 4);
        // An encoder that keeps its share (two passes, a helper, hardware), or the encoder's
        // own default (0), is left alone.
        assert_eq!(session_threads(two, false, 1, false), 1);
        assert_eq!(session_threads(Sessions::ONE, true, 1, false), 0);
        assert_eq!(session_threads(Sessions { sessions: 3, threads: 0 }, true, 1, false), 0);
    }

    #[test]
    fn short_videos_are_cut_into_equal_spans_so_every_session_gets_three_and_long_ones_keep_the_setting() {
        // 60 s for 2 sessions at 20 s: 6 spans, 3 each.
        assert_eq!(spans_wanted(20.0, Some(60.02), 2), Some(6));
        // A film keeps the setting; so does one session, or an unknown length.
        assert_eq!(spans_wanted(20.0, Some(5400.0), 2), None);
        assert_eq!(spans_wanted(20.0, Some(60.0), 1), None);
        assert_eq!(spans_wanted(20.0, None, 4), None);
        assert_eq!(spans_wanted(20.0, Some(0.0), 4), None);
        // Exactly enough at the setting: the setting.
        assert_eq!(spans_wanted(10.0, Some(60.0), 2), None);
        // Never shorter than 2 s: 8 s gives 4 spans, 3 s one (so none are planned); and
        // never fewer than the setting gives (8.04 s at 2 s: its own 4 spans).
        assert_eq!(spans_wanted(20.0, Some(8.0), 2), Some(4));
        assert_eq!(spans_wanted(20.0, Some(3.0), 2), None);
        assert_eq!(spans_wanted(2.0, Some(8.04), 2), None);
        assert_eq!(spans_wanted(20.0, Some(120.0), 4), Some(12));

        // Where the floor allows fewer than three each: a whole number per session.
        assert_eq!(spans_wanted(20.0, Some(10.0), 2), Some(4));
        assert_eq!(spans_wanted(20.0, Some(10.0), 3), Some(3));
        assert_eq!(spans_wanted(20.0, Some(30.0), 2), Some(6));
        assert_eq!(spans_wanted(20.0, Some(5.0), 2), Some(2));

        // 60 s at 25 fps in ms: cuts at 10 s steps, on frames.
        assert_eq!(even_boundaries(&[], 0, 60_000, 6, 40.0), vec![10_000, 20_000, 30_000, 40_000, 50_000]);
        // A source that does not start at zero; a time base of 1/12800 (512 ticks a frame).
        assert_eq!(even_boundaries(&[], 1400, 1400 + 250 * 40, 4, 40.0), vec![1400 + 2520, 1400 + 5000, 1400 + 7520]);
        assert_eq!(even_boundaries(&[], 0, 250 * 512, 2, 512.0), vec![125 * 512]);
        // Nothing to cut: one span, no frame grid, an empty or reversed range.
        assert!(even_boundaries(&[], 0, 1000, 1, 40.0).is_empty());
        assert!(even_boundaries(&[], 0, 1000, 4, 0.0).is_empty());
        assert!(even_boundaries(&[], 0, 1000, 4, f64::NAN).is_empty());
        assert!(even_boundaries(&[], 1000, 1000, 4, 40.0).is_empty());
        // Fewer frames than spans: a cut per frame at most, none repeated.
        assert_eq!(even_boundaries(&[], 0, 80, 6, 40.0), vec![40]);
    }

    /// The frames' presentation times as a muxer writes them: frame `n` at
    /// `start + round(n * ticks_per_frame)`.
    fn grid(start: i64, frames: u32, ticks_per_frame: f64) -> Vec<i64> {
        (0..frames).map(|n| start + (f64::from(n) * ticks_per_frame).round() as i64).collect()
    }

    /// Which spans hold a frame at `pts`.
    fn holders(spans: &[Span], pts: i64) -> Vec<usize> {
        spans.iter().enumerate().filter(|(_, s)| !s.is_before(pts) && !s.is_past(pts)).map(|(i, _)| i).collect()
    }

    #[test]
    fn even_cuts_fall_on_frames_and_every_frame_lands_in_exactly_one_span_in_order() {
        // (ticks a frame, start): 25 fps in ms, 23.976 fps in ms (rounded), 25 fps at
        // 1/12800, 29.97 fps at 1/90000, 50 fps in ms; starts at zero and after a priming.
        let grids = [(40.0, 0), (1001.0 / 24.0, 0), (1001.0 / 24.0, 21), (512.0, 0), (3003.0, 1800), (20.0, 7)];
        for (tpf, start) in grids {
            for frames in (1..=90u32).chain([131, 250, 251]) {
                let pts = grid(start, frames, tpf);
                // The stream's end as containers give it: after the last frame's duration,
                // or a little short of it (a rounded duration).
                let ends = [start + (f64::from(frames) * tpf).round() as i64, pts[pts.len() - 1] + 1];
                for end in ends {
                    // Keyframes every 250 frames (x264's default: none after the first here),
                    // every 50 and every 12 frames.
                    for gop in [250usize, 50, 12] {
                        // Keyframes known by their index only, and clean ones (IDR) indexed
                        // at their presentation time (Matroska) or two frames before it
                        // (MP4's decode times with B-frames).
                        for clean in [None, Some(0.0), Some(2.0)] {
                            let keys: Vec<Keyframe> = pts
                                .iter()
                                .step_by(gop)
                                .map(|&p| match clean {
                                    None => Keyframe::indexed(p),
                                    Some(ahead) => {
                                        Keyframe { index: p - (ahead * tpf).round() as i64, clean_at: Some(p) }
                                    }
                                })
                                .collect();
                            for spans_asked in 2..=7u32 {
                                let cuts = even_boundaries(&keys, start, end, spans_asked, tpf);
                                let ctx = format!("tpf {tpf} start {start} frames {frames} end {end} gop {gop} clean {clean:?} spans {spans_asked}: {cuts:?}");
                                check_even_cuts(&pts, &keys, &cuts, tpf, frames, spans_asked, gop == 250, &ctx);
                                check_clean_cuts(&keys, &cuts, start, end, spans_asked, tpf, &ctx);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Where a clean keyframe lies within `clean_snap_frames` of a cut's place on the grid,
    /// the cut is the nearest such keyframe; no cut is further from its place than either
    /// rule allows.
    fn check_clean_cuts(keys: &[Keyframe], cuts: &[i64], start: i64, end: i64, spans_asked: u32, tpf: f64, ctx: &str) {
        let per_span = frames_between(start, end, tpf) / f64::from(spans_asked);
        let near = (tpf * clean_snap_frames(per_span)).floor() as i64;
        let snap = (tpf * KEYFRAME_SNAP_FRAMES).ceil() as i64;
        let clean: Vec<i64> = keys.iter().filter_map(|k| k.clean_at).filter(|at| *at > start).collect();
        for g in grid_cuts(start, end, spans_asked, tpf) {
            let nearest = clean
                .iter()
                .copied()
                .filter(|at| at.abs_diff(g) <= near.unsigned_abs())
                .min_by_key(|at| at.abs_diff(g));
            if let Some(at) = nearest {
                // Onto it, or onto one as near (the earlier). Spans shorter than the
                // keyframe rule's reach may have an earlier cut there already.
                let found = cuts.iter().any(|c| clean.contains(c) && c.abs_diff(g) == at.abs_diff(g));
                let long = per_span >= 2.0 * KEYFRAME_SNAP_FRAMES + 2.0;
                assert!(found || (!long && cuts.iter().any(|c| *c >= at)), "grid {g} clean {at}: {ctx}");
            }
        }
        // A cut on a clean keyframe's time is one whose span drops nothing; every cut lies on
        // the grid, on a keyframe, or on a clean keyframe's presentation time.
        let indexed: Vec<i64> = keys.iter().map(|k| k.index).collect();
        let grid = grid_cuts(start, end, spans_asked, tpf);
        for c in cuts {
            assert!(grid.contains(c) || indexed.contains(c) || clean.contains(c), "{c}: {ctx}");
            let from_place = grid.iter().map(|g| g.abs_diff(*c)).min().unwrap_or(0);
            assert!(from_place <= snap.unsigned_abs() + (2.0 * tpf) as u64 + 1, "{c} moved {from_place}: {ctx}");
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_even_cuts(
        pts: &[i64],
        keys: &[Keyframe],
        cuts: &[i64],
        tpf: f64,
        frames: u32,
        spans_asked: u32,
        exact: bool,
        ctx: &str,
    ) {
        // Every cut is a frame's own time, inside the video, rising, and a keyframe or none
        // lies just after a keyframe (where the seek would land on it).
        assert!(cuts.iter().all(|c| pts.contains(c) && *c > pts[0]), "{ctx}");
        assert!(cuts.windows(2).all(|w| w[0] < w[1]), "{ctx}");
        let snap = (tpf * KEYFRAME_SNAP_FRAMES).ceil() as i64;
        let just_after = |c: &i64| keys.iter().any(|k| k.index > pts[0] && k.index < *c && c - k.index <= snap);
        let on_key = |c: &i64| keys.iter().any(|k| k.index == *c || k.clean_at == Some(*c));
        assert!(!cuts.iter().any(|c| !on_key(c) && just_after(c)), "{ctx}");
        let planned = spans(cuts);
        // Each frame in exactly one span; the spans, in order, give the frames in order;
        // none is empty.
        let owners: Vec<Vec<usize>> = pts.iter().map(|p| holders(&planned, *p)).collect();
        assert!(owners.iter().all(|o| o.len() == 1), "{ctx} {owners:?}");
        let owner: Vec<usize> = owners.iter().map(|o| o[0]).collect();
        assert!(owner.windows(2).all(|w| w[0] <= w[1]), "{ctx} {owner:?}");
        let counts: Vec<usize> = (0..planned.len()).map(|i| owner.iter().filter(|o| **o == i).count()).collect();
        assert!(counts.iter().all(|c| *c > 0), "{ctx} {counts:?}");
        let (lo, hi) = (counts.iter().min().unwrap_or(&0), counts.iter().max().unwrap_or(&0));
        if exact {
            // As many spans as asked while there are frames enough, within a frame of
            // each other.
            if frames >= spans_asked * 2 {
                assert_eq!(planned.len(), spans_asked as usize, "{ctx}");
            }
            assert!(hi - lo <= 1, "{ctx} {counts:?}");
        } else {
            // A cut moved back onto a keyframe moves at most that many frames.
            assert!(hi - lo <= 1 + 2 * KEYFRAME_SNAP_FRAMES as usize, "{ctx} {counts:?}");
        }
    }

    #[test]
    fn a_cut_just_after_a_keyframe_moves_onto_it() {
        // 10 s at 25 fps in ms, a keyframe at 4.92 s (a scene cut): the cut at 5 s is two
        // frames after it, so it moves there; one at 5.8 s (22 frames after) stays.
        assert_eq!(even_boundaries(&idx(&[0, 4920]), 0, 10_000, 2, 40.0), vec![4920]);
        assert_eq!(even_boundaries(&idx(&[0, 4200]), 0, 10_000, 2, 40.0), vec![5000]);
        // A keyframe just after the cut, or at it, changes nothing.
        assert_eq!(even_boundaries(&idx(&[0, 5040]), 0, 10_000, 2, 40.0), vec![5000]);
        assert_eq!(even_boundaries(&idx(&[0, 5000]), 0, 10_000, 2, 40.0), vec![5000]);
        // The first keyframe, at the start, is never a cut.
        assert_eq!(even_boundaries(&idx(&[0]), 0, 400, 2, 40.0), vec![200]);
        // MP4's index holds decode times, which need not be frames' times: the cut is still
        // the keyframe's own time, the one the seek strictly before it handles.
        assert_eq!(even_boundaries(&idx(&[-80, 4970]), 0, 10_000, 2, 40.0), vec![4970]);
    }

    #[test]
    fn cuts_go_onto_clean_keyframes_near_their_place() {
        let clean = |times: &[i64]| -> Vec<Keyframe> {
            times.iter().map(|&t| Keyframe { index: t, clean_at: Some(t) }).collect()
        };
        // 8 s at 25 fps in ms, an IDR every 2 s: 4 spans cut on them exactly.
        assert_eq!(even_boundaries(&clean(&[0, 2000, 4000, 6000]), 0, 8000, 4, 40.0), vec![2000, 4000, 6000]);
        // 60 s in 6 spans of 250 frames (a reach of 16 frames): an IDR 12 frames after the
        // place, or 16 before, draws the cut; one 17 frames after does not.
        let keys = clean(&[0, 10_480, 19_360, 30_680]);
        assert_eq!(even_boundaries(&keys, 0, 60_000, 6, 40.0), vec![10_480, 19_360, 30_000, 40_000, 50_000]);
        // Of two as near, the earlier; of two, the nearer.
        assert_eq!(even_boundaries(&clean(&[0, 9_800, 10_200]), 0, 60_000, 6, 40.0)[0], 9_800);
        assert_eq!(even_boundaries(&clean(&[0, 9_760, 10_120]), 0, 60_000, 6, 40.0)[0], 10_120);
        // 10 s in 4 spans of 62.5 frames (a reach of 6): an IDR 7 frames ahead stays away;
        // 6 frames ahead draws the cut.
        assert_eq!(even_boundaries(&clean(&[0, 2800]), 0, 10_000, 4, 40.0), vec![2520, 5000, 7520]);
        assert_eq!(even_boundaries(&clean(&[0, 2760]), 0, 10_000, 4, 40.0), vec![2760, 5000, 7520]);
        // One behind within the keyframe rule's 16 frames: onto its presentation time, not
        // its decode time in MP4's index (where the cut would be sought from the keyframe
        // before); one that is not clean: onto its index time, as before.
        let mp4 = [Keyframe { index: 1920, clean_at: Some(2000) }];
        assert_eq!(even_boundaries(&mp4, 0, 10_000, 4, 40.0), vec![2000, 5000, 7520]);
        assert_eq!(even_boundaries(&idx(&[1920]), 0, 10_000, 4, 40.0), vec![1920, 5000, 7520]);
        // Short spans reach no frame either way: only a clean keyframe on the place counts.
        assert_eq!(clean_snap_frames(9.9), 0.0);
        assert_eq!(clean_snap_frames(62.5), 6.0);
        assert_eq!(clean_snap_frames(1000.0), KEYFRAME_SNAP_FRAMES);
        // 4 s in 2 spans of 50 frames (a reach of 5): 5 frames off, onto it; 6, not.
        assert_eq!(even_boundaries(&clean(&[0, 2200]), 0, 4000, 2, 40.0), vec![2200]);
        assert_eq!(even_boundaries(&clean(&[0, 2240]), 0, 4000, 2, 40.0), vec![2000]);
        // The first frame is never a cut; a clean keyframe before the start is none either.
        assert_eq!(even_boundaries(&clean(&[-40, 0]), 0, 400, 2, 40.0), vec![200]);
    }

    #[test]
    fn a_cut_between_frames_still_puts_each_frame_on_one_side() {
        // A variable frame rate: the grid misses the frames, the rule still divides them.
        let pts = [0, 33, 70, 100, 167, 200, 233, 300, 310, 400, 433, 500];
        let cuts = even_boundaries(&[], 0, 533, 3, 40.0);
        assert_eq!(cuts.len(), 2, "{cuts:?}");
        let planned = spans(&cuts);
        for p in pts {
            assert_eq!(holders(&planned, p).len(), 1, "{p} in {planned:?}");
        }
        // What is left after a pause mid-span keeps to the same rule, and each piece keeps
        // its planned span's number.
        let done = [s(None, Some(cuts[0])), s(Some(cuts[0]), Some(234))];
        let left = remaining(&cuts, &done);
        let all: Vec<Span> = done.iter().copied().chain(left.iter().copied()).collect();
        for p in pts {
            assert_eq!(holders(&all, p).len(), 1, "{p} in {all:?}");
        }
        assert!(left.iter().all(|piece| planned_index(&cuts, piece.from) >= 1));
        assert_eq!(planned_index(&cuts, left[0].from), 1);
    }
}
