//! Insights read through the API: failures by category over a window of days. Failed jobs
//! are written with known failure codes and failure times, and the counts are checked
//! exactly, the shares to the last bit the JSON parser keeps.

use chrono::{DateTime, Duration, NaiveTime, Utc};
use condense::domain::failures::FailureCategory;
use condense::domain::job::{FailureCode, JobStatus};
use condense::domain::stats::MAX_TREND_DAYS;
use condense::repo;
use entities::job;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Set};
use serde_json::{json, Value};

use crate::api_test_on_both_databases;
use crate::common::api::{TestServer, PREFIXES};
use crate::common::rows::new_job;

/// The first second of the day `days_ago` days before today (UTC): inside that day.
fn day_start(days_ago: i64) -> DateTime<Utc> {
    (Utc::now().date_naive() - Duration::days(days_ago)).and_time(NaiveTime::MIN).and_utc() + Duration::seconds(1)
}

/// A job in `status` with `code` recorded, last changed at the start of the day `days_ago`
/// days back (a FAILED job's last change is its failure).
async fn ended(server: &TestServer, name: &str, status: JobStatus, code: Option<FailureCode>, days_ago: i64) {
    let id = repo::jobs::insert(server.db(), new_job(None, &format!("/media/{name}"), status)).await.unwrap().id;
    let set = job::ActiveModel {
        failure_code: Set(code.map(Into::into)),
        failure_reason: Set(code.map(|c| c.reason().to_string())),
        updated_at: Set(day_start(days_ago)),
        ..Default::default()
    };
    job::Entity::update_many().set(set).filter(job::Column::Id.eq(id)).exec(server.db()).await.unwrap();
}

/// (name, count) pairs, in the answer's order.
type Counts = Vec<(String, u64)>;

/// (category, count) for every category in the answer's order, then (code, count) for every
/// reason, category after category.
fn counts(body: &Value) -> (Counts, Counts) {
    let categories = body["categories"].as_array().unwrap();
    let per_category = categories
        .iter()
        .map(|c| (c["category"].as_str().unwrap().to_string(), c["count"].as_u64().unwrap()))
        .collect();
    let per_reason = categories
        .iter()
        .flat_map(|c| c["reasons"].as_array().unwrap())
        .map(|r| (r["code"].as_str().unwrap().to_string(), r["count"].as_u64().unwrap()))
        .collect();
    (per_category, per_reason)
}

/// A share as the answer gives it. serde_json's default float parsing (without its
/// `float_roundtrip` feature) may land one unit in the last place off the number the server
/// wrote, so the comparison allows that much and no more.
fn assert_share(share: &Value, expected: f64) {
    let share = share.as_f64().unwrap();
    assert!((share - expected).abs() <= f64::EPSILON * expected, "{share} != {expected}");
}

/// One window asked for and what it must count.
type Window = (Option<u32>, u32, u64, [u64; 7], [u64; 10]);

async fn failures_by_category_over_a_window(server: &TestServer) {
    use FailureCode::*;
    let token = server.login().await;
    let token = Some(token.as_str());
    // | days ago | FAILED with                                                                |
    // |----------|----------------------------------------------------------------------------|
    // | 0        | file_validation_failed x2, unsupported_codec, unsupported_stream,          |
    // |          | transcoder_crashed, out_of_memory, no code                                 |
    // | 2        | insufficient_disk_space, permission_denied                                 |
    // | 6        | timeout                                                                    |
    // | 10       | miscellaneous                                                              |
    // | 29       | unsupported_container (first day of the 30-day window)                     |
    // | 30       | file_validation_failed (the day before it)                                 |
    // | 40       | timeout                                                                    |
    let failed = [
        (Some(FileValidationFailed), 0),
        (Some(FileValidationFailed), 0),
        (Some(UnsupportedCodec), 0),
        (Some(UnsupportedStream), 0),
        (Some(TranscoderCrashed), 0),
        (Some(OutOfMemory), 0),
        (None, 0),
        (Some(InsufficientDiskSpace), 2),
        (Some(PermissionDenied), 2),
        (Some(Timeout), 6),
        (Some(Miscellaneous), 10),
        (Some(UnsupportedContainer), 29),
        (Some(FileValidationFailed), 30),
        (Some(Timeout), 40),
    ];
    for (i, (code, days_ago)) in failed.into_iter().enumerate() {
        ended(server, &format!("f{i}.mkv"), JobStatus::Failed, code, days_ago).await;
    }
    // A failure recorded on a job that is not FAILED (cancelled, paused after a retry) is
    // not a failed job.
    ended(server, "c.mkv", JobStatus::Cancelled, Some(InsufficientDiskSpace), 0).await;
    ended(server, "p.mkv", JobStatus::Paused, Some(TranscoderCrashed), 0).await;

    // Per window: the total, then the count of each category and of each reason, in order.
    let category_order: Vec<&str> = FailureCategory::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        category_order,
        ["corrupted_file", "disk_space", "codec_issues", "transcoder_errors", "permission", "timeout", "other"]
    );
    let reason_order = [
        "file_validation_failed",
        "insufficient_disk_space",
        "unsupported_codec",
        "unsupported_stream",
        "unsupported_container",
        "transcoder_crashed",
        "out_of_memory",
        "permission_denied",
        "timeout",
        "miscellaneous",
    ];
    // (`days` asked, `days` answered, total, per category, per reason)
    let windows: [Window; 5] = [
        (Some(1), 1, 7, [2, 0, 2, 2, 0, 0, 1], [2, 0, 1, 1, 0, 1, 1, 0, 0, 1]),
        (Some(3), 3, 9, [2, 1, 2, 2, 1, 0, 1], [2, 1, 1, 1, 0, 1, 1, 1, 0, 1]),
        (None, 30, 12, [2, 1, 3, 2, 1, 1, 2], [2, 1, 1, 1, 1, 1, 1, 1, 1, 2]),
        (Some(31), 31, 13, [3, 1, 3, 2, 1, 1, 2], [3, 1, 1, 1, 1, 1, 1, 1, 1, 2]),
        (Some(365), 365, 14, [3, 1, 3, 2, 1, 2, 2], [3, 1, 1, 1, 1, 1, 1, 1, 2, 2]),
    ];
    for prefix in PREFIXES {
        for (days, expected_days, total, categories, reasons) in windows {
            let query = days.map(|d| format!("?days={d}")).unwrap_or_default();
            let (status, body) = server.get(&format!("{prefix}/insights/failures{query}"), token).await;
            assert_eq!(status, 200, "{query}: {body}");
            assert_eq!((body["days"].as_u64(), body["total"].as_u64()), (Some(u64::from(expected_days)), Some(total)));
            let (per_category, per_reason) = counts(&body);
            let expected: Counts = category_order.iter().zip(categories).map(|(c, n)| (c.to_string(), n)).collect();
            assert_eq!(per_category, expected, "{query}");
            let expected: Counts = reason_order.iter().zip(reasons).map(|(r, n)| (r.to_string(), n)).collect();
            assert_eq!(per_reason, expected, "{query}");
            for category in body["categories"].as_array().unwrap() {
                let count = category["count"].as_u64().unwrap();
                assert_share(&category["share"], count as f64 / total as f64);
            }
        }
    }

    // The shares of the default window, and how a category and a reason read.
    let (_, body) = server.get("/insights/failures", token).await;
    let twelfths = [2.0, 1.0, 3.0, 2.0, 1.0, 1.0, 2.0];
    for (category, twelfths) in body["categories"].as_array().unwrap().iter().zip(twelfths) {
        assert_share(&category["share"], twelfths / 12.0);
    }
    assert_eq!(body["categories"][0]["label"], "Corrupted file");
    assert_eq!(
        body["categories"][2]["reasons"][1],
        json!({"code": "unsupported_stream", "reason": "unsupported stream", "count": 1})
    );
    // The same window as the failed jobs /insights/stats lists.
    let (_, stats) = server.get("/insights/stats", token).await;
    assert_eq!(stats["failedJobs"].as_array().unwrap().len(), 12);

    // `days` is bounded, and the document says so.
    for bad in ["0", "366", "-1", "abc", "1.5", ""] {
        let (status, body) = server.get(&format!("/insights/failures?days={bad}"), token).await;
        assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_query")), "days={bad}: {body}");
    }
    let (status, doc) = server.get("/openapi.json", token).await;
    assert_eq!(status, 200);
    let parameters = doc["paths"]["/insights/failures"]["get"]["parameters"].as_array().unwrap();
    let days = parameters.iter().find(|p| p["name"] == "days").unwrap();
    assert_eq!(
        (days["schema"]["minimum"].as_u64(), days["schema"]["maximum"].as_u64()),
        (Some(1), Some(u64::from(MAX_TREND_DAYS))),
        "{days}"
    );
}
api_test_on_both_databases!(failures_by_category_over_a_window);

async fn no_failure_is_every_category_at_zero(server: &TestServer) {
    let token = server.login().await;
    let (status, body) = server.get("/api/insights/failures?days=7", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["days"].as_u64(), body["total"].as_u64()), (Some(7), Some(0)));
    let categories = body["categories"].as_array().unwrap();
    assert_eq!(categories.len(), FailureCategory::ALL.len());
    for category in categories {
        assert_eq!((category["count"].as_u64(), category["share"].as_f64()), (Some(0), Some(0.0)), "{category}");
    }
}
api_test_on_both_databases!(no_failure_is_every_category_at_zero);
