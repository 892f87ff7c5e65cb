//! Quality and size rules: when an encode in progress is stopped because its output would
//! not be smaller (the early abort).

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
