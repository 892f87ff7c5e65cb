//! Insights: job history and totals, failed jobs, storage saved, encoding
//! time, the savings trend, failures by category, node performance and the codec
//! distribution.

use actix_web::web;
use chrono::Utc;
use serde::Deserialize;

use super::auth::AuthUser;
use super::views::{FailedJobView, InsightsView, LibraryVmaf, SavingsView};
use crate::domain::failures::{breakdown, FailureBreakdown};
use crate::domain::stats::{self, CodecShare, CompletedJob, NodePerformance, HISTORY_DAYS, MAX_TREND_DAYS};
use crate::error::AppError;
use crate::http::state::AppState;
use crate::media::info::StreamKind;
use crate::repo;
use crate::repo::stats::CompletedRow;

/// Aggregated encoding statistics
#[utoipa::path(
    get,
    path = "/insights/stats",
    tag = "insights",
    responses(
        (status = 200, description = "OK", body = InsightsView),
    ),
)]
pub async fn overview(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<InsightsView>, AppError> {
    let now = Utc::now();
    let window = stats::window_start(now, HISTORY_DAYS);
    let recent = repo::stats::completed_jobs_with_probe(&state.db, window).await?;
    let all = repo::stats::completed_jobs(&state.db, None).await?;
    let failed = repo::stats::failed_since(&state.db, window, stats::MAX_FAILED_JOBS).await?;
    let (cpu_ms, wall_ms) = repo::stats::encoding_time_ms(&state.db).await?;
    let libraries = repo::libraries::list(&state.db).await?;
    let vmaf = repo::stats::vmaf_per_library(&state.db)
        .await?
        .into_iter()
        .map(|row| LibraryVmaf {
            library_name: libraries.iter().find(|l| Some(l.id) == row.library_id).map(|l| l.name.clone()),
            library_id: row.library_id,
            jobs: row.jobs,
            mean_vmaf: row.mean_vmaf,
            lowest_p5: row.lowest_p5,
            mean_quality: row.mean_quality,
        })
        .collect();

    let (history, totals) = stats::history(&completed(&recent), now.date_naive(), HISTORY_DAYS);
    let sizes: Vec<(i64, Option<i64>)> = all.iter().map(|row| (row.source_size, row.output_size)).collect();
    Ok(web::Json(InsightsView {
        history,
        totals,
        failed_jobs: failed.iter().map(FailedJobView::from).collect(),
        storage: stats::storage(&sizes),
        encoding_time: stats::encoding_time(cpu_ms, wall_ms),
        vmaf,
    }))
}

/// Encoding statistics (the spec's /api/statistics)
///
/// The same body as GET /insights/stats.
#[utoipa::path(
    get,
    path = "/statistics",
    tag = "insights",
    responses(
        (status = 200, description = "OK", body = InsightsView),
    ),
)]
pub async fn statistics(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<InsightsView>, AppError> {
    overview(user, state).await
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
/// A window of days ending today, for the savings trend and the failures by category.
pub struct WindowQuery {
    /// Number of days, ending today (UTC): 1 to 365, default 30.
    #[param(minimum = 1, maximum = 365)]
    days: Option<u32>,
}

/// Daily and cumulative savings
///
/// GET /insights/savings?days=N (1 to 365, default 30)
#[utoipa::path(
    get,
    path = "/insights/savings",
    tag = "insights",
    params(WindowQuery),
    responses(
        (status = 200, description = "OK", body = SavingsView),
    ),
)]
pub async fn savings(
    _user: AuthUser,
    state: web::Data<AppState>,
    query: web::Query<WindowQuery>,
) -> Result<web::Json<SavingsView>, AppError> {
    let days = window_days(query.days)?;
    let now = Utc::now();
    let rows = repo::stats::completed_jobs(&state.db, Some(stats::window_start(now, days))).await?;
    Ok(web::Json(SavingsView { days: stats::savings_trend(&completed(&rows), now.date_naive(), days) }))
}

/// A window's `days`: 1 to 365, 30 when not given.
fn window_days(days: Option<u32>) -> Result<u32, AppError> {
    let days = days.unwrap_or(HISTORY_DAYS);
    if !(1..=MAX_TREND_DAYS).contains(&days) {
        return Err(AppError::BadRequest {
            code: "invalid_query",
            message: format!("days must be 1 to {MAX_TREND_DAYS}, not {days}"),
        });
    }
    Ok(days)
}

/// Failures by category
///
/// Jobs that failed (status FAILED) in the last `days` UTC calendar days, the window of the
/// failed jobs listed by GET /insights/stats: their number, and per category (always every
/// one, in a fixed order) its count, its share of the failures and the count of each of its
/// reasons.
///
/// GET /insights/failures?days=N (1 to 365, default 30)
#[utoipa::path(
    get,
    operation_id = "failures_by_category",
    path = "/insights/failures",
    tag = "insights",
    params(WindowQuery),
    responses(
        (status = 200, description = "OK", body = FailureBreakdown),
    ),
)]
pub async fn failures(
    _user: AuthUser,
    state: web::Data<AppState>,
    query: web::Query<WindowQuery>,
) -> Result<web::Json<FailureBreakdown>, AppError> {
    let days = window_days(query.days)?;
    let since = stats::window_start(Utc::now(), days);
    let counts = repo::stats::failed_per_code_since(&state.db, since).await?;
    Ok(web::Json(breakdown(days, &counts)))
}

/// Node performance comparison
///
/// Every registered node, and any node name jobs ran on, sorted by name.
///
/// GET /insights/nodes
#[utoipa::path(
    get,
    operation_id = "node_performance",
    path = "/insights/nodes",
    tag = "insights",
    responses(
        (status = 200, description = "OK", body = Vec<NodePerformance>),
    ),
)]
pub async fn nodes(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<NodePerformance>>, AppError> {
    let registered: Vec<String> = repo::nodes::list(&state.db).await?.into_iter().map(|node| node.name).collect();
    let counts = repo::stats::jobs_per_node_and_status(&state.db).await?;
    let rows = repo::stats::completed_jobs(&state.db, None).await?;
    Ok(web::Json(stats::node_performance(&registered, &counts, &completed(&rows), Utc::now())))
}

/// Codec distribution of the libraries
///
/// What the libraries hold now: the target codec of jobs whose output replaced the
/// original, the source codec of every other analysed file (files not yet analysed are not
/// counted). Always the five entries h264, hevc, av1, vp9, other, in that order.
///
/// GET /insights/codecs
#[utoipa::path(
    get,
    path = "/insights/codecs",
    tag = "insights",
    responses(
        (status = 200, description = "OK", body = Vec<CodecShare>),
    ),
)]
pub async fn codecs(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<CodecShare>>, AppError> {
    Ok(web::Json(stats::codec_distribution(&repo::stats::codec_counts(&state.db).await?)))
}

fn completed(rows: &[CompletedRow]) -> Vec<CompletedJob> {
    rows.iter()
        .filter_map(|row| {
            Some(CompletedJob {
                completed_at: row.completed_at?,
                node: row.node_name.clone(),
                source_size: row.source_size,
                output_size: row.output_size,
                average_fps: stats::average_fps(row.duration_seconds, frame_rate(row), row.wall_time_ms),
            })
        })
        .collect()
}

/// The fields of `media::info::MediaInfo` the speed needs; the rest of the probe is ignored.
#[derive(Deserialize)]
struct ProbedStreams {
    streams: Vec<ProbedStream>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProbedStream {
    kind: StreamKind,
    #[serde(default)]
    attached_picture: bool,
    frame_rate: Option<f64>,
}

/// Frame rate of the main video stream (not a cover picture), from the stored probe.
fn frame_rate(row: &CompletedRow) -> Option<f64> {
    let probed = ProbedStreams::deserialize(row.probe.as_ref()?).ok()?;
    probed.streams.into_iter().find(|s| s.kind == StreamKind::Video && !s.attached_picture)?.frame_rate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(probe: serde_json::Value) -> CompletedRow {
        CompletedRow {
            node_name: None,
            source_size: 0,
            output_size: None,
            completed_at: None,
            duration_seconds: None,
            wall_time_ms: None,
            probe: Some(probe),
        }
    }

    #[test]
    fn frame_rate_of_the_main_video_stream() {
        let probe = serde_json::json!({
            "container": "matroska",
            "streams": [
                {"index": 0, "kind": "video", "codec": "mjpeg", "attachedPicture": true, "frameRate": 90000.0},
                {"index": 1, "kind": "audio", "codec": "aac", "attachedPicture": false},
                {"index": 2, "kind": "video", "codec": "h264", "attachedPicture": false, "frameRate": 23.976},
            ],
        });
        assert_eq!(frame_rate(&row(probe)), Some(23.976));
        assert_eq!(frame_rate(&row(serde_json::json!({"streams": []}))), None);
        assert_eq!(frame_rate(&row(serde_json::json!("not a probe"))), None);
        assert_eq!(frame_rate(&CompletedRow { probe: None, ..row(serde_json::json!({})) }), None);
    }
}
