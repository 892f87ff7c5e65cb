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

#[cfg(test)]
mod tests {
    use super::*;

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
