//! Failures by category: which category each failure reason belongs to (the specification's
//! table of reasons and categories), and the breakdown of failed jobs over a window that
//! `GET /insights/failures` answers.

use serde::Serialize;
use utoipa::ToSchema;

use super::job::FailureCode;
use super::named_enum;

named_enum!(
    /// What kind of trouble a failure reason is: the specification's categories (corrupted
    /// file, disk space, codec issues, transcoder errors, other), with permission and timeout,
    /// which its table of causes names apart, as categories of their own.
    FailureCategory, "failure category" {
        CorruptedFile => "corrupted_file",
        DiskSpace => "disk_space",
        CodecIssues => "codec_issues",
        TranscoderErrors => "transcoder_errors",
        Permission => "permission",
        Timeout => "timeout",
        Other => "other",
    }
);

impl FailureCategory {
    /// The category as displayed.
    pub fn label(self) -> &'static str {
        match self {
            FailureCategory::CorruptedFile => "Corrupted file",
            FailureCategory::DiskSpace => "Disk space",
            FailureCategory::CodecIssues => "Codec issues",
            FailureCategory::TranscoderErrors => "Transcoder errors",
            FailureCategory::Permission => "Permission",
            FailureCategory::Timeout => "Timeout",
            FailureCategory::Other => "Other",
        }
    }

    /// Its reasons, in `FailureCode::ALL` order.
    pub fn reasons(self) -> impl Iterator<Item = FailureCode> {
        FailureCode::ALL.iter().copied().filter(move |code| category(*code) == self)
    }
}

/// The category of a failure reason.
///
/// The source being damaged is `file_validation_failed`, whether the check before the encode
/// or the verification of the output refused it: both write that code. A child that ran out
/// of memory is the transcoder's failure, like one that crashed; a stream or container the
/// encoder cannot carry is a codec issue, like a codec it cannot decode or encode.
pub fn category(code: FailureCode) -> FailureCategory {
    match code {
        FailureCode::FileValidationFailed => FailureCategory::CorruptedFile,
        FailureCode::InsufficientDiskSpace => FailureCategory::DiskSpace,
        FailureCode::UnsupportedCodec | FailureCode::UnsupportedStream | FailureCode::UnsupportedContainer => {
            FailureCategory::CodecIssues
        }
        FailureCode::TranscoderCrashed | FailureCode::OutOfMemory => FailureCategory::TranscoderErrors,
        FailureCode::PermissionDenied => FailureCategory::Permission,
        FailureCode::Timeout => FailureCategory::Timeout,
        FailureCode::Miscellaneous => FailureCategory::Other,
    }
}

/// One reason within its category.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureReasonCount {
    pub code: FailureCode,
    /// The reason as displayed (a job's `failureReason`).
    pub reason: &'static str,
    pub count: u64,
}

/// One category: its failed jobs and their share of all failed jobs in the window.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureCategoryShare {
    pub category: FailureCategory,
    /// The category as displayed.
    pub label: &'static str,
    pub count: u64,
    /// 0 to 1; 0 when nothing failed.
    #[schema(minimum = 0, maximum = 1)]
    pub share: f64,
    /// Every reason of the category, in a fixed order, with its count (0 included).
    pub reasons: Vec<FailureReasonCount>,
}

/// Failed jobs per category over the last `days` days.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureBreakdown {
    /// The window: this many UTC calendar days, ending today.
    #[schema(minimum = 1, maximum = 365)]
    pub days: u32,
    /// Jobs that failed in the window.
    pub total: u64,
    /// Every category, always in this order: corrupted_file, disk_space, codec_issues,
    /// transcoder_errors, permission, timeout, other.
    pub categories: Vec<FailureCategoryShare>,
}

/// The breakdown of failed jobs from their number per failure code. A failed job without a
/// code (written before codes were recorded) counts as `miscellaneous`, so the total is the
/// number of failed jobs whatever their rows hold.
pub fn breakdown(days: u32, counts: &[(Option<FailureCode>, u64)]) -> FailureBreakdown {
    let per_code = |code: FailureCode| -> u64 {
        counts
            .iter()
            .filter(|(c, _)| c.unwrap_or(FailureCode::Miscellaneous) == code)
            .map(|(_, n)| n)
            .fold(0u64, |sum, n| sum.saturating_add(*n))
    };
    let total = counts.iter().fold(0u64, |sum, (_, n)| sum.saturating_add(*n));
    let categories = FailureCategory::ALL
        .iter()
        .map(|&category| {
            let reasons: Vec<FailureReasonCount> = category
                .reasons()
                .map(|code| FailureReasonCount { code, reason: code.reason(), count: per_code(code) })
                .collect();
            let count = reasons.iter().fold(0u64, |sum, r| sum.saturating_add(r.count));
            FailureCategoryShare {
                category,
                label: category.label(),
                count,
                share: if total == 0 { 0.0 } else { count as f64 / total as f64 },
                reasons,
            }
        })
        .collect();
    FailureBreakdown { days, total, categories }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every failure reason, by name, with the category it belongs to. `FailureCode::ALL`
    /// must be this list exactly: a new reason fails here until it is given a category.
    const TABLE: [(FailureCode, FailureCategory); 10] = [
        (FailureCode::FileValidationFailed, FailureCategory::CorruptedFile),
        (FailureCode::InsufficientDiskSpace, FailureCategory::DiskSpace),
        (FailureCode::UnsupportedCodec, FailureCategory::CodecIssues),
        (FailureCode::TranscoderCrashed, FailureCategory::TranscoderErrors),
        (FailureCode::PermissionDenied, FailureCategory::Permission),
        (FailureCode::Timeout, FailureCategory::Timeout),
        (FailureCode::Miscellaneous, FailureCategory::Other),
        (FailureCode::UnsupportedStream, FailureCategory::CodecIssues),
        (FailureCode::UnsupportedContainer, FailureCategory::CodecIssues),
        (FailureCode::OutOfMemory, FailureCategory::TranscoderErrors),
    ];

    #[test]
    fn every_failure_reason_has_its_category() {
        let listed: Vec<FailureCode> = TABLE.iter().map(|(code, _)| *code).collect();
        assert_eq!(listed, FailureCode::ALL, "the table lists every failure code once, in order");
        for (code, expected) in TABLE {
            assert_eq!(category(code), expected, "{code}");
        }
    }

    #[test]
    fn the_specifications_reasons_fall_in_its_categories() {
        // The specification's table: reason as displayed -> category.
        let spec = [
            ("file validation failed", "corrupted_file"),
            ("insufficient disk space", "disk_space"),
            ("unsupported codec", "codec_issues"),
            ("transcoder process crashed", "transcoder_errors"),
            ("miscellaneous", "other"),
        ];
        for (reason, expected) in spec {
            let code = FailureCode::ALL.iter().copied().find(|c| c.reason() == reason).unwrap();
            assert_eq!(category(code).as_str(), expected, "{reason}");
        }
    }

    #[test]
    fn every_category_has_a_reason_and_lists_exactly_its_own() {
        let mut seen = Vec::new();
        for &category in FailureCategory::ALL {
            let reasons: Vec<FailureCode> = category.reasons().collect();
            assert!(!reasons.is_empty(), "{category} has no reason");
            assert!(reasons.iter().all(|code| super::category(*code) == category));
            assert!(!category.label().is_empty());
            seen.extend(reasons);
        }
        assert_eq!(seen.len(), FailureCode::ALL.len(), "each reason in one category");
    }

    #[test]
    fn breakdown_counts_and_shares_per_category_and_reason() {
        let counts = [
            (Some(FailureCode::FileValidationFailed), 3),
            (Some(FailureCode::UnsupportedStream), 1),
            (Some(FailureCode::UnsupportedCodec), 2),
            (Some(FailureCode::OutOfMemory), 1),
            (Some(FailureCode::Miscellaneous), 1),
            (None, 2),
        ];
        let result = breakdown(30, &counts);
        assert_eq!((result.days, result.total), (30, 10));
        let per_category: Vec<(FailureCategory, u64, f64)> =
            result.categories.iter().map(|c| (c.category, c.count, c.share)).collect();
        assert_eq!(
            per_category,
            [
                (FailureCategory::CorruptedFile, 3, 0.3),
                (FailureCategory::DiskSpace, 0, 0.0),
                (FailureCategory::CodecIssues, 3, 0.3),
                (FailureCategory::TranscoderErrors, 1, 0.1),
                (FailureCategory::Permission, 0, 0.0),
                (FailureCategory::Timeout, 0, 0.0),
                // The miscellaneous one and the two without a code.
                (FailureCategory::Other, 3, 0.3),
            ]
        );
        let codec = &result.categories[2];
        let reasons: Vec<(FailureCode, &str, u64)> =
            codec.reasons.iter().map(|r| (r.code, r.reason, r.count)).collect();
        assert_eq!(
            reasons,
            [
                (FailureCode::UnsupportedCodec, "unsupported codec", 2),
                (FailureCode::UnsupportedStream, "unsupported stream", 1),
                (FailureCode::UnsupportedContainer, "unsupported container", 0),
            ]
        );
        assert_eq!(result.categories.iter().map(|c| c.count).sum::<u64>(), result.total);
    }

    #[test]
    fn nothing_failed_is_every_category_at_zero() {
        let result = breakdown(7, &[]);
        assert_eq!(result.total, 0);
        assert_eq!(result.categories.len(), FailureCategory::ALL.len());
        assert!(result.categories.iter().all(|c| c.count == 0 && c.share == 0.0));
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["categories"][0]["category"], "corrupted_file");
        assert_eq!(json["categories"][0]["label"], "Corrupted file");
        assert_eq!(json["categories"][0]["reasons"][0]["code"], "file_validation_failed");
    }
}
