//! A library's forecast: per file, what encoding it would give (the predicted size, the
//! quality a VMAF-mode search would choose, the time it would take on the forecasting node,
//! or why it would be skipped), and the totals the dashboard leads with.

use serde::{Deserialize, Serialize};

use super::named_enum;

named_enum!(
    /// Where a library's latest forecast stands (INTERRUPTED: the node stopped while it ran).
    ForecastStatus, "forecast status" {
        Running => "RUNNING",
        Done => "DONE",
        Cancelled => "CANCELLED",
        Interrupted => "INTERRUPTED",
    }
);

/// One file's forecast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForecastFile {
    pub job_id: i32,
    pub file_name: String,
    pub current_size: i64,
    /// None when the file would be skipped, or could not be forecast (`error`).
    pub predicted_size: Option<i64>,
    /// Seconds its encode would take on one slot of the node that made the forecast, from
    /// the speed its samples encoded at.
    pub predicted_seconds: Option<f64>,
    /// The CRF/CQ it would be encoded at (searched in VMAF mode), and the VMAF its samples
    /// scored there.
    pub quality: Option<u32>,
    pub vmaf: Option<f64>,
    pub skip_reason: Option<String>,
    pub error: Option<String>,
}

/// What the forecast adds up to (files done so far).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForecastTotals {
    pub files: u32,
    /// Files that would be encoded, and their sizes now and predicted.
    pub encoded: u32,
    pub current_size: i64,
    pub predicted_size: i64,
    pub saved_bytes: i64,
    /// Of every file's size now (skipped files count with their size kept).
    pub saved_percent: f64,
    pub skipped: u32,
    pub failed: u32,
    /// On one slot of the forecasting node, and spread over `slots` (every online node's
    /// encoding slots).
    pub predicted_seconds: f64,
    pub predicted_wall_seconds: f64,
}

/// The totals of `files`, with `slots` encoding slots to spread the time over.
pub fn totals(files: &[ForecastFile], slots: u32) -> ForecastTotals {
    let encoded: Vec<&ForecastFile> = files.iter().filter(|f| f.predicted_size.is_some()).collect();
    let all_size: i64 = files.iter().map(|f| f.current_size).sum();
    let current_size: i64 = encoded.iter().map(|f| f.current_size).sum();
    // An output predicted larger than its source is never kept: it saves nothing.
    let predicted_size: i64 = encoded.iter().map(|f| f.predicted_size.unwrap_or(0).min(f.current_size)).sum();
    let saved_bytes = current_size - predicted_size;
    let predicted_seconds: f64 = encoded.iter().filter_map(|f| f.predicted_seconds).sum();
    let count =
        |pred: fn(&ForecastFile) -> bool| u32::try_from(files.iter().filter(|f| pred(f)).count()).unwrap_or(u32::MAX);
    ForecastTotals {
        files: u32::try_from(files.len()).unwrap_or(u32::MAX),
        encoded: u32::try_from(encoded.len()).unwrap_or(u32::MAX),
        current_size,
        predicted_size,
        saved_bytes,
        saved_percent: if all_size > 0 { saved_bytes as f64 * 100.0 / all_size as f64 } else { 0.0 },
        skipped: count(|f| f.skip_reason.is_some()),
        failed: count(|f| f.error.is_some()),
        predicted_seconds,
        predicted_wall_seconds: predicted_seconds / f64::from(slots.max(1)),
    }
}

/// What a file's stream plan (issue 37) changes in its output's size, besides the video's
/// own shrinking: the streams other than the video in the source, what of them is carried
/// unchanged, what the converted and added audio adds, and the scaled video's pixel ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannedBytes {
    /// Bytes of every source stream besides the video (estimated, see `nominal_audio_kbps`).
    pub other_source_bytes: u64,
    /// Of those, the bytes copied into the output (dropped and converted ones left out).
    pub other_kept_bytes: u64,
    /// Bytes of the converted and added audio: the planned bitrate over the duration.
    pub other_new_bytes: u64,
    /// The output's pixels over the source's (1 where the video keeps its size).
    pub pixel_ratio: f64,
}

/// The output's predicted size under a stream plan: the video's share of the source
/// (`source_size` less the other streams) shrunk to `video_percent` of itself and scaled by
/// the pixel ratio, plus the streams kept as they are and the audio the plan makes.
pub fn planned_output_size(source_size: u64, video_percent: f64, planned: &PlannedBytes) -> u64 {
    let video_source = source_size.saturating_sub(planned.other_source_bytes) as f64;
    let video = video_source * video_percent.max(0.0) / 100.0 * planned.pixel_ratio.max(0.0);
    let other = planned.other_kept_bytes.min(planned.other_source_bytes).saturating_add(planned.other_new_bytes);
    (video.round() as u64).saturating_add(other)
}

/// A nominal bitrate, in kb/s, of an audio track whose own is not known: what its codec
/// usually takes at its channels (PCM exactly: rate × channels × sample size). A forecast's
/// estimate of what dropping or converting the track saves.
pub fn nominal_audio_kbps(codec: &str, channels: Option<u32>, sample_rate: Option<u32>) -> u64 {
    let channels = u64::from(channels.unwrap_or(2).max(1));
    let rate = u64::from(sample_rate.unwrap_or(48_000));
    let surround = channels > 2;
    if let Some(format) = codec.strip_prefix("pcm_") {
        let bits = match format.trim_start_matches(['s', 'u', 'f']).get(..2) {
            Some("24") => 24,
            Some("32") => 32,
            Some("64") => 64,
            _ if format.starts_with("u8") || format.starts_with("s8") => 8,
            _ => 16,
        };
        return rate * channels * bits / 1000;
    }
    match codec {
        // Lossless compression keeps about 60 % of 16-bit PCM.
        "flac" | "alac" => rate * channels * 16 * 6 / 10 / 1000,
        "truehd" | "mlp" => 3000,
        "dts" if surround => 1509,
        "dts" => 768,
        "ac3" if surround => 640,
        "ac3" => 192,
        "eac3" if surround => 768,
        "eac3" => 224,
        "mp3" | "mp2" => 192,
        "aac" | "opus" | "vorbis" => 64 * channels,
        _ => 96 * channels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_without_changes_shrinks_only_the_video() {
        let none =
            PlannedBytes { other_source_bytes: 200, other_kept_bytes: 200, other_new_bytes: 0, pixel_ratio: 1.0 };
        // 800 bytes of video to 50 %, the 200 others kept.
        assert_eq!(planned_output_size(1000, 50.0, &none), 600);
    }

    #[test]
    fn dropped_streams_leave_the_output_and_converted_audio_takes_its_planned_bytes() {
        // 300 of 1000 bytes are audio: 100 kept, 150 dropped, 50 converted into 20.
        let planned =
            PlannedBytes { other_source_bytes: 300, other_kept_bytes: 100, other_new_bytes: 20, pixel_ratio: 1.0 };
        assert_eq!(planned_output_size(1000, 40.0, &planned), 700 * 40 / 100 + 100 + 20);
    }

    #[test]
    fn scaled_video_scales_the_video_bytes_by_the_pixel_ratio() {
        // 1920x1080 to 1280x720: 4/9 of the pixels.
        let ratio = (1280.0 * 720.0) / (1920.0 * 1080.0);
        let planned =
            PlannedBytes { other_source_bytes: 100, other_kept_bytes: 100, other_new_bytes: 0, pixel_ratio: ratio };
        assert_eq!(planned_output_size(1000, 45.0, &planned), 180 + 100);
        // Estimates that exceed the file leave no video, never a negative one; kept bytes
        // never exceed the source's.
        let over =
            PlannedBytes { other_source_bytes: 5000, other_kept_bytes: 6000, other_new_bytes: 7, pixel_ratio: 1.0 };
        assert_eq!(planned_output_size(1000, 50.0, &over), 5007);
    }

    #[test]
    fn nominal_bitrates_follow_codec_and_channels() {
        assert_eq!(nominal_audio_kbps("pcm_s16le", Some(2), Some(48_000)), 1536);
        assert_eq!(nominal_audio_kbps("pcm_s24le", Some(6), Some(48_000)), 6912);
        assert_eq!(nominal_audio_kbps("pcm_u8", Some(1), Some(8_000)), 64);
        assert_eq!(nominal_audio_kbps("pcm_f32le", None, None), 3072);
        assert_eq!(nominal_audio_kbps("flac", Some(2), Some(44_100)), 846);
        assert_eq!(nominal_audio_kbps("dts", Some(6), None), 1509);
        assert_eq!(nominal_audio_kbps("dts", Some(2), None), 768);
        assert_eq!(nominal_audio_kbps("truehd", Some(8), None), 3000);
        assert_eq!(nominal_audio_kbps("ac3", Some(6), None), 640);
        assert_eq!(nominal_audio_kbps("eac3", Some(2), None), 224);
        assert_eq!(nominal_audio_kbps("aac", Some(6), None), 384);
        assert_eq!(nominal_audio_kbps("mp3", Some(2), None), 192);
        assert_eq!(nominal_audio_kbps("wmav2", Some(0), None), 96);
    }

    fn file(current: i64, predicted: Option<i64>, seconds: Option<f64>) -> ForecastFile {
        ForecastFile {
            job_id: 1,
            file_name: "f.mkv".into(),
            current_size: current,
            predicted_size: predicted,
            predicted_seconds: seconds,
            quality: None,
            vmaf: None,
            skip_reason: None,
            error: None,
        }
    }

    #[test]
    fn totals_add_up_what_would_be_encoded_and_count_the_rest() {
        let skipped = ForecastFile { skip_reason: Some("video is already hevc".into()), ..file(500, None, None) };
        let failed = ForecastFile { error: Some("no video stream".into()), ..file(100, None, None) };
        let files = [file(1000, Some(400), Some(30.0)), file(2000, Some(1000), Some(90.0)), skipped, failed];
        let totals = totals(&files, 2);
        assert_eq!(
            totals,
            ForecastTotals {
                files: 4,
                encoded: 2,
                current_size: 3000,
                predicted_size: 1400,
                saved_bytes: 1600,
                saved_percent: 1600.0 * 100.0 / 3600.0,
                skipped: 1,
                failed: 1,
                predicted_seconds: 120.0,
                predicted_wall_seconds: 60.0,
            }
        );
    }

    #[test]
    fn an_output_predicted_larger_saves_nothing_and_no_files_is_all_zeros() {
        let totals = totals(&[file(1000, Some(1300), Some(10.0))], 0);
        assert_eq!((totals.predicted_size, totals.saved_bytes, totals.predicted_wall_seconds), (1000, 0, 10.0));
        let none = super::totals(&[], 1);
        assert_eq!((none.files, none.saved_percent, none.predicted_seconds), (0, 0.0, 0.0));
    }
}
