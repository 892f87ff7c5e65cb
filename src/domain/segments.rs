//! Segments as units of work. A job's video is cut into spans of source presentation time,
//! each encoded by its own encoder session, so spans can be encoded at the same time and
//! stitched in order. Boundaries are source keyframes: a session seeks to the keyframe that
//! starts its span and decodes from there (see docs/ARCHITECTURE.md, "Segments").
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
/// waits (the encode benchmark's 60 s clip: 93.5 s so, 84.6 s with 6 spans).
pub fn spans_wanted(segment_seconds: f64, duration: Option<f64>, sessions: u32) -> Option<u32> {
    let d = duration.filter(|d| *d > 0.0 && sessions > 1)?;
    // Whole spans the setting gives, and the most the floor allows.
    let by_setting = (d / segment_seconds).floor() as u32;
    let most = (d / MIN_SPAN_SECONDS).floor() as u32;
    let spans = sessions.saturating_mul(SPANS_PER_SESSION).min(most);
    (spans > by_setting.max(1)).then_some(spans)
}

/// Cut points for `spans` spans of about equal length between `start` and `end`: for each
/// ideal cut, the keyframe nearest to it (so 60 s with a keyframe every 2 s makes six spans
/// of 10 s, where "the first keyframe at least 10.004 s on" would make five of 12 s).
/// Fewer where keyframes are too sparse.
pub fn balanced_boundaries(keyframes: &[i64], start: i64, end: i64, spans: u32) -> Vec<i64> {
    let mut sorted: Vec<i64> = keyframes.iter().copied().filter(|&k| k > start && k < end).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut cuts: Vec<i64> = Vec::new();
    let length = (end - start) as f64;
    for k in 1..spans {
        let ideal = start as f64 + length * f64::from(k) / f64::from(spans);
        let nearest =
            sorted.iter().copied().min_by(|a, b| (*a as f64 - ideal).abs().total_cmp(&(*b as f64 - ideal).abs()));
        if let Some(cut) = nearest.filter(|c| cuts.last().is_none_or(|last| c > last)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(from: Option<i64>, to: Option<i64>) -> Span {
        Span::new(from, to)
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

        // Keyframes every 2 s (50 ticks at 25 fps), 60 s and a frame: cuts at 10 s steps.
        let keys: Vec<i64> = (0..31).map(|i| i * 50).collect();
        assert_eq!(balanced_boundaries(&keys, 0, 1501, 6), vec![250, 500, 750, 1000, 1250]);
        // The cut the old rule made: five spans of 12 s.
        assert_eq!(boundaries(&keys, 251), vec![300, 600, 900, 1200, 1500]);
        // Sparse keyframes: fewer cuts, never a repeated or out-of-range one.
        assert_eq!(balanced_boundaries(&[0, 700, 1400], 0, 1501, 6), vec![700, 1400]);
        assert_eq!(balanced_boundaries(&[0], 0, 1501, 6), Vec::<i64>::new());
        assert_eq!(balanced_boundaries(&keys, 0, 1501, 1), Vec::<i64>::new());
    }
}
