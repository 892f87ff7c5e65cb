//! Quality and size rules: a library's quality mode and its bounds, where the samples of a
//! CRF search lie, which quality the search tries next and which it settles on, and when an
//! encode in progress is stopped because its output would not be smaller (the early abort).

use super::named_enum;

named_enum!(
    /// How a library sets an encode's quality: a fixed CRF/CQ (`quality`), or the highest
    /// CRF/CQ whose VMAF, measured on samples of each file, meets `targetVmaf`.
    QualityMode, "quality mode" {
        Crf => "crf",
        Vmaf => "vmaf",
    }
);

/// `targetVmaf`: bounds and default (ab-av1's default target is 95 too).
pub const TARGET_VMAF_MIN: f64 = 80.0;
pub const TARGET_VMAF_MAX: f64 = 99.0;
pub const TARGET_VMAF_DEFAULT: f64 = 95.0;
/// `maxSizePercent`: the largest output, in percent of the source, worth encoding.
pub const MAX_SIZE_PERCENT_MIN: u32 = 10;
pub const MAX_SIZE_PERCENT_MAX: u32 = 100;
pub const MAX_SIZE_PERCENT_DEFAULT: u32 = 80;
/// The early abort's margin over `maxSizePercent` in vmaf mode: the search predicted the
/// size from samples, so only an encode clearly past it is stopped.
pub const EARLY_ABORT_MARGIN_PERCENT: u32 = 10;

/// Length of one sample and how much video each stands for (as ab-av1: 20 s every 12 min).
pub const SAMPLE_SECONDS: f64 = 20.0;
pub const SAMPLE_EVERY_SECONDS: f64 = 720.0;
/// How far above the target a first try may score and still be taken (doubled at each try).
pub const ACCEPT_MARGIN: f64 = 0.1;
/// Qualities a search tries at most before it settles on the best it found.
pub const MAX_PROBES: usize = 8;
/// The search scores one block of consecutive sample frames in this many
/// (`condense_media::vmaf::score_frames`, blocks of 32). Scoring was half of a search's
/// time (BENCHMARKS.md, "where the CRF search's time goes"), and frames close together
/// score alike: on 9 encodes of a 20 s clip (x264, x265 at four presets, SVT-AV1 at two)
/// the mean of every other block of 32 lay within 0.1 of the whole mean (BENCHMARKS.md,
/// "scoring a block in two"). The encode's own score after the mux (`search::measure`) and
/// `condense vmaf` score every frame.
pub const SEARCH_SCORE_EVERY: u32 = 2;
/// `condense crf-search --score-every`: at most one block in this many.
pub const SEARCH_SCORE_EVERY_MAX: u32 = 8;

/// Where the samples of a video `duration` seconds long lie, as (start, length) in seconds
/// from its start: one per 12 minutes begun, spread evenly with equal gaps; the whole video
/// as one sample when the samples would cover it anyway.
pub fn sample_layout(duration: f64) -> Vec<(f64, f64)> {
    if !duration.is_finite() || duration <= 0.0 {
        return vec![(0.0, 0.0)];
    }
    let count = (duration / SAMPLE_EVERY_SECONDS).ceil().max(1.0);
    if count * SAMPLE_SECONDS >= duration {
        return vec![(0.0, duration)];
    }
    let gap = (duration - count * SAMPLE_SECONDS) / (count + 1.0);
    (0..count as u32)
        .map(|i| {
            let i = f64::from(i);
            (gap * (i + 1.0) + SAMPLE_SECONDS * i, SAMPLE_SECONDS)
        })
        .collect()
}

/// One quality tried on the samples: the VMAF it gave and the encoded size in percent of
/// the samples' source bytes.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Probe {
    pub quality: u32,
    pub vmaf: f64,
    pub percent: f64,
    /// Seconds the samples took to encode at this quality.
    #[serde(default)]
    pub seconds: f64,
}

/// What a search does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Try(u32),
    /// Settled on a quality already tried; `met`: its VMAF reaches the target (else it is
    /// the best quality tried, and no quality in range reaches the target).
    Settle {
        quality: u32,
        met: bool,
    },
}

/// The next step of an interpolated binary search for the highest quality value (CRF/CQ:
/// higher is smaller and worse) in `range` whose VMAF reaches `target`, from `start`. With a
/// passing and a failing value known, the next is interpolated between them on VMAF; with
/// only one side known, it steps by the VMAF still to gain or lose, at the slope seen so far
/// (one point per step before two values are known). It settles when the passing and the
/// failing value are neighbours, at an end of the range, after `MAX_PROBES`, or when the
/// last try passes by less than a margin that doubles with each try (`ACCEPT_MARGIN`).
pub fn next_quality(probes: &[Probe], target: f64, range: (u32, u32), start: u32) -> Next {
    let (min, max) = range;
    let Some(first) = probes.first() else { return Next::Try(start.clamp(min, max)) };
    let pass = probes.iter().filter(|p| p.vmaf >= target).max_by_key(|p| p.quality);
    // The failing value that bounds the passing one from above (a failure below it would
    // be noise, and is not a bound).
    let fail = probes
        .iter()
        .filter(|p| p.vmaf < target && pass.is_none_or(|ok| p.quality > ok.quality))
        .min_by_key(|p| p.quality);
    let best = probes.iter().min_by_key(|p| p.quality).unwrap_or(first);
    if probes.len() >= MAX_PROBES {
        return match pass {
            Some(ok) => Next::Settle { quality: ok.quality, met: true },
            None => Next::Settle { quality: best.quality, met: false },
        };
    }
    // Close enough above the target: the last try passes by less than a margin that doubles
    // with every try (0.1, 0.2, 0.4 ... points, as ab-av1 allows), and is the best pass.
    let margin = ACCEPT_MARGIN * 2f64.powi(i32::try_from(probes.len()).unwrap_or(i32::MAX).saturating_sub(1));
    if let (Some(last), Some(ok)) = (probes.last(), pass) {
        if last.quality == ok.quality && last.vmaf < target + margin {
            return Next::Settle { quality: ok.quality, met: true };
        }
    }
    let slope = slope(probes);
    let tried = |q: u32| probes.iter().any(|p| p.quality == q);
    match (pass, fail) {
        (Some(ok), Some(bad)) => {
            if bad.quality <= ok.quality + 1 {
                return Next::Settle { quality: ok.quality, met: true };
            }
            let share = ((ok.vmaf - target) / (ok.vmaf - bad.vmaf).max(f64::EPSILON)).clamp(0.0, 1.0);
            let guess = f64::from(ok.quality) + share * f64::from(bad.quality - ok.quality);
            let q = (guess.round() as u32).clamp(ok.quality + 1, bad.quality - 1);
            if tried(q) {
                Next::Settle { quality: ok.quality, met: true }
            } else {
                Next::Try(q)
            }
        }
        (Some(ok), None) => {
            if ok.quality >= max {
                return Next::Settle { quality: ok.quality, met: true };
            }
            let step = ((ok.vmaf - target) / slope).ceil().clamp(1.0, 10.0) as u32;
            Next::Try((ok.quality + step).min(max))
        }
        (None, _) => {
            if best.quality <= min {
                return Next::Settle { quality: best.quality, met: false };
            }
            let step = ((target - best.vmaf) / slope).ceil().clamp(1.0, 10.0) as u32;
            Next::Try(best.quality.saturating_sub(step).max(min))
        }
    }
}

/// VMAF points lost per quality step, from the two values tried closest together (one
/// point before two are known, or where the scores do not fall as the value rises; never
/// under 0.3, so a flat stretch cannot send a step far).
fn slope(probes: &[Probe]) -> f64 {
    let mut sorted: Vec<&Probe> = probes.iter().collect();
    sorted.sort_by_key(|p| p.quality);
    sorted
        .windows(2)
        .filter_map(|w| match w {
            [a, b] if b.quality > a.quality => {
                Some(((a.vmaf - b.vmaf) / f64::from(b.quality - a.quality), b.quality - a.quality))
            }
            _ => None,
        })
        .min_by_key(|(_, gap)| *gap)
        .map_or(1.0, |(s, _)| if s > 0.0 { s.max(0.3) } else { 1.0 })
}

/// The skip reason of a search whose predicted size is past `maxSizePercent`.
pub fn search_skip_reason(predicted_percent: f64, max_size_percent: u32) -> String {
    let saving = (100.0 - predicted_percent).round();
    if saving <= 0.0 {
        format!(
            "would not save anything at the target quality (predicted {} % of the source)",
            predicted_percent.round()
        )
    } else {
        format!("would save only {saving} % at the target quality (at most {max_size_percent} % of the source is kept)")
    }
}

/// Frames an encode must have done before its size is projected: a tenth of the video, and
/// at least this many, so that the first keyframes (large) and the encoder's look-ahead
/// (frames fed, not yet written) do not decide alone.
pub const MIN_FRAMES_TO_PROJECT: u64 = 50;

/// The output's projected size, when an encode of `total_frames` has done `frames` and
/// written `bytes`, and whether it passes `limit`: Some(projected) once the projection
/// exceeds it, None while it does not or it is too early to tell. The bytes written lag the
/// frames (an encoder holds its look-ahead), so the projection errs low: an encode that
/// could still have saved is never stopped by it.
pub fn projected_over(frames: u64, total_frames: f64, bytes: u64, limit: u64) -> Option<u64> {
    if frames < MIN_FRAMES_TO_PROJECT || total_frames <= 0.0 || (frames as f64) < total_frames / 10.0 {
        return None;
    }
    let projected = (bytes as f64 / frames as f64 * total_frames.max(frames as f64)) as u64;
    (projected > limit).then_some(projected)
}

/// The skip reason of an encode stopped by `projected_over`, as the dashboard shows it.
pub fn not_smaller_reason(projected: u64, limit: u64, source: u64) -> String {
    let percent = |bytes: u64| (bytes as f64 * 100.0 / source.max(1) as f64).round();
    if limit >= source {
        format!("output would not be smaller (projected at {} % of the source)", percent(projected))
    } else {
        format!(
            "output would not be smaller than {} % of the source (projected at {} %)",
            percent(limit),
            percent(projected)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(quality: u32, vmaf: f64) -> Probe {
        Probe { quality, vmaf, percent: 50.0, seconds: 1.0 }
    }

    #[test]
    fn samples_are_20_s_every_12_minutes_spread_evenly_or_the_whole_video() {
        assert_eq!(sample_layout(60.0), vec![(20.0, 20.0)]);
        assert_eq!(sample_layout(15.0), vec![(0.0, 15.0)]);
        // 30 minutes: 3 samples, 4 equal gaps of 435 s.
        assert_eq!(sample_layout(1800.0), vec![(435.0, 20.0), (890.0, 20.0), (1345.0, 20.0)]);
        assert_eq!(sample_layout(0.0), vec![(0.0, 0.0)]);
        assert_eq!(sample_layout(f64::NAN), vec![(0.0, 0.0)]);
    }

    #[test]
    fn the_search_starts_where_asked_within_the_range() {
        assert_eq!(next_quality(&[], 95.0, (0, 51), 28), Next::Try(28));
        assert_eq!(next_quality(&[], 95.0, (0, 51), 60), Next::Try(51));
    }

    #[test]
    fn with_one_side_known_it_steps_by_the_vmaf_to_gain_or_lose() {
        // 98 at 28: three points to spare at one a step.
        assert_eq!(next_quality(&[probe(28, 98.0)], 95.0, (0, 51), 28), Next::Try(31));
        // 90 at 28: five points short.
        assert_eq!(next_quality(&[probe(28, 90.0)], 95.0, (0, 51), 28), Next::Try(23));
        // A measured slope of 2 points a step halves the steps.
        assert_eq!(next_quality(&[probe(28, 89.0), probe(26, 93.0)], 95.0, (0, 51), 28), Next::Try(25));
        // Steps are at most 10, and stay in range.
        assert_eq!(next_quality(&[probe(5, 40.0)], 95.0, (0, 51), 5), Next::Try(0));
        assert_eq!(next_quality(&[probe(48, 99.9)], 95.0, (0, 51), 48), Next::Try(51));
    }

    #[test]
    fn between_a_pass_and_a_fail_it_interpolates_and_settles_on_neighbours() {
        // 97 at 24, 92 at 32: 95 is 2/5 of the way, at 27.2.
        assert_eq!(next_quality(&[probe(24, 97.0), probe(32, 92.0)], 95.0, (0, 51), 28), Next::Try(27));
        // Never a value already bounded: at least one past the pass, one short of the fail.
        assert_eq!(next_quality(&[probe(24, 99.0), probe(26, 80.0)], 95.0, (0, 51), 28), Next::Try(25));
        assert_eq!(
            next_quality(&[probe(24, 97.0), probe(25, 94.0)], 95.0, (0, 51), 28),
            Next::Settle { quality: 24, met: true }
        );
        // A failure below the best pass is noise, not a bound.
        assert_eq!(next_quality(&[probe(20, 94.9), probe(24, 95.5)], 95.0, (0, 51), 24), Next::Try(25));
    }

    #[test]
    fn it_settles_at_the_ends_of_the_range_and_after_the_most_probes() {
        assert_eq!(next_quality(&[probe(51, 96.0)], 95.0, (0, 51), 51), Next::Settle { quality: 51, met: true });
        assert_eq!(next_quality(&[probe(0, 90.0)], 95.0, (0, 51), 0), Next::Settle { quality: 0, met: false });
        let many: Vec<Probe> = (0..MAX_PROBES as u32).map(|i| probe(10 + i, 90.0)).collect();
        assert_eq!(next_quality(&many, 95.0, (0, 51), 28), Next::Settle { quality: 10, met: false });
        let mut found = many.clone();
        found[3].vmaf = 96.0;
        assert_eq!(next_quality(&found, 95.0, (0, 51), 28), Next::Settle { quality: 13, met: true });
    }

    #[test]
    fn a_search_on_a_smooth_curve_finds_the_highest_passing_value_in_few_probes() {
        // VMAF falls 1.3 points per step from 100 at 10: 95 is reached up to 13.
        let curve = |q: u32| 100.0 - 1.3 * f64::from(q.saturating_sub(10));
        let mut probes = Vec::new();
        let settled = loop {
            match next_quality(&probes, 95.0, (0, 51), 28) {
                Next::Try(q) => probes.push(probe(q, curve(q))),
                Next::Settle { quality, met } => break (quality, met),
            }
        };
        assert_eq!(settled, (13, true), "{probes:?}");
        assert!(probes.len() <= 5, "{probes:?}");
    }

    #[test]
    fn a_pass_close_enough_above_the_target_is_taken_the_margin_doubling_with_each_try() {
        assert_eq!(next_quality(&[probe(28, 95.05)], 95.0, (0, 51), 28), Next::Settle { quality: 28, met: true });
        assert_eq!(next_quality(&[probe(28, 95.15)], 95.0, (0, 51), 28), Next::Try(29));
        // Third try: 0.4 points are close enough.
        let tries = [probe(28, 90.0), probe(23, 96.0), probe(24, 95.3)];
        assert_eq!(next_quality(&tries, 95.0, (0, 51), 28), Next::Settle { quality: 24, met: true });
        // Only when the last try is the best pass.
        let tries = [probe(28, 90.0), probe(24, 95.3), probe(22, 95.35)];
        assert_eq!(next_quality(&tries, 95.0, (0, 51), 28), Next::Try(25));
    }

    #[test]
    fn a_search_that_skips_says_how_little_it_would_save() {
        assert_eq!(
            search_skip_reason(88.0, 80),
            "would save only 12 % at the target quality (at most 80 % of the source is kept)"
        );
        assert_eq!(
            search_skip_reason(130.0, 80),
            "would not save anything at the target quality (predicted 130 % of the source)"
        );
    }

    #[test]
    fn the_reason_says_how_big_the_output_would_be_against_the_source_or_the_limit() {
        assert_eq!(
            not_smaller_reason(1300, 1000, 1000),
            "output would not be smaller (projected at 130 % of the source)"
        );
        assert_eq!(
            not_smaller_reason(850, 800, 1000),
            "output would not be smaller than 80 % of the source (projected at 85 %)"
        );
    }

    #[test]
    fn nothing_is_projected_before_a_tenth_of_the_video_and_fifty_frames() {
        // Already twice the limit, but too early: 49 frames, then 9 % of the video.
        assert_eq!(projected_over(49, 100.0, 10_000, 100), None);
        assert_eq!(projected_over(90, 1000.0, 10_000, 100), None);
        assert_eq!(projected_over(100, 1000.0, 10_000, 100), Some(100_000));
        // No length known: never.
        assert_eq!(projected_over(500, 0.0, 10_000, 100), None);
    }

    #[test]
    fn the_projection_is_bytes_per_frame_times_all_frames_and_must_pass_the_limit() {
        // 1000 bytes a frame over 1000 frames: 1 000 000.
        assert_eq!(projected_over(100, 1000.0, 100_000, 999_999), Some(1_000_000));
        assert_eq!(projected_over(100, 1000.0, 100_000, 1_000_000), None);
        // More frames done than the length said: the frames done count.
        assert_eq!(projected_over(1200, 1000.0, 1_200_000, 1_100_000), Some(1_200_000));
    }
}
