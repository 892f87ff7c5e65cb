//! Queue statistics and insights, computed from rows the repository fetched. Days are UTC
//! calendar days, bucketed here rather than
//! with SQL date functions, so that SQLite and PostgreSQL give the same answers.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::health;
use super::job::JobStatus;

/// Job history window, and the default savings trend window.
pub const HISTORY_DAYS: u32 = 30;
/// Longest savings trend a caller may ask for.
pub const MAX_TREND_DAYS: u32 = 365;
/// At most this many failed jobs are listed.
pub const MAX_FAILED_JOBS: u64 = 100;
/// Throughput is measured over the last 24 hours.
pub const THROUGHPUT_WINDOW_HOURS: i64 = 24;

/// Bytes a completed job saved. Never negative: an output that was not smaller leaves the
/// original in place.
pub fn saved_bytes(source_size: i64, output_size: Option<i64>) -> i64 {
    output_size.map_or(0, |output| source_size.saturating_sub(output).max(0))
}

/// Jobs completed per hour, from the number completed in the throughput window.
pub fn throughput_per_hour(completed_in_window: u64) -> f64 {
    completed_in_window as f64 / THROUGHPUT_WINDOW_HOURS as f64
}

/// A running job is stuck when its supervisor flagged it stalled, or when its last progress
/// is older than the stall limit (which also catches a job whose supervisor is gone).
pub fn is_stuck(status: JobStatus, flagged_stalled: bool, seconds_since_progress: Option<u64>) -> bool {
    status.is_running()
        && (flagged_stalled || seconds_since_progress.is_some_and(|seconds| health::is_stalled(status, seconds)))
}

/// What the stuck check reads of a running job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningJob {
    pub status: JobStatus,
    /// Flagged stalled by its supervisor.
    pub stalled: bool,
    pub last_progress_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
}

/// Of running jobs, those without progress for too long (flagged by their supervisor, or
/// silent): the health panel's queue check. A job that never reported progress counts from
/// its start.
pub fn stuck_count(jobs: impl IntoIterator<Item = RunningJob>, now: DateTime<Utc>) -> u64 {
    jobs.into_iter()
        .filter(|job| {
            let since = job.last_progress_at.or(job.started_at);
            let seconds = since.map(|at| u64::try_from((now - at).num_seconds()).unwrap_or(0));
            is_stuck(job.status, job.stalled, seconds)
        })
        .count() as u64
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStats {
    pub pending: u64,
    pub queued: u64,
    pub analyzing: u64,
    pub encoding: u64,
    pub paused: u64,
    pub completed: u64,
    pub failed: u64,
    pub skipped: u64,
    pub cancelled: u64,
    /// Running jobs without progress for more than 10 minutes.
    pub stalled: u64,
    /// ANALYZING + ENCODING jobs a node holds: work in progress right now.
    pub active_workers: u64,
    pub throughput_per_hour: f64,
    /// (QUEUED + ANALYZING) / throughput; null while nothing completes.
    pub estimated_completion_hours: Option<f64>,
}

/// `working`: the running jobs a node holds (a file in the batch probe after a scan is
/// ANALYZING, but no worker's).
pub fn queue_stats(
    counts: &HashMap<JobStatus, u64>,
    stalled: u64,
    working: u64,
    completed_in_window: u64,
) -> QueueStats {
    let count = |status| counts.get(&status).copied().unwrap_or(0);
    let throughput = throughput_per_hour(completed_in_window);
    let waiting = count(JobStatus::Queued) + count(JobStatus::Analyzing);
    QueueStats {
        pending: count(JobStatus::Pending),
        queued: count(JobStatus::Queued),
        analyzing: count(JobStatus::Analyzing),
        encoding: count(JobStatus::Encoding),
        paused: count(JobStatus::Paused),
        completed: count(JobStatus::Completed),
        failed: count(JobStatus::Failed),
        skipped: count(JobStatus::Skipped),
        cancelled: count(JobStatus::Cancelled),
        stalled,
        active_workers: working,
        throughput_per_hour: throughput,
        estimated_completion_hours: (throughput > 0.0).then(|| waiting as f64 / throughput),
    }
}

/// The `days` UTC calendar days ending with `today`, oldest first.
pub fn day_range(today: NaiveDate, days: u32) -> Vec<NaiveDate> {
    (0..i64::from(days)).rev().map(|back| today - Duration::days(back)).collect()
}

/// Midnight (UTC) of the first of the `days` days ending today: rows from then on are in
/// the window.
pub fn window_start(now: DateTime<Utc>, days: u32) -> DateTime<Utc> {
    let first = now.date_naive() - Duration::days(i64::from(days.max(1)) - 1);
    first.and_time(chrono::NaiveTime::MIN).and_utc()
}

/// A completed job, as the insights see it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedJob {
    pub completed_at: DateTime<Utc>,
    pub node: Option<String>,
    pub source_size: i64,
    pub output_size: Option<i64>,
    /// Average encoding speed over the job's runs (frames per second), when known.
    pub average_fps: Option<f64>,
}

impl CompletedJob {
    pub fn saved_bytes(&self) -> i64 {
        saved_bytes(self.source_size, self.output_size)
    }
}

/// A finished job's average speed: its frames (duration x frame rate) over the wall time its
/// runs took. Unknown when any of them is missing or not positive.
pub fn average_fps(duration_seconds: Option<f64>, frame_rate: Option<f64>, wall_time_ms: Option<i64>) -> Option<f64> {
    let frames = duration_seconds? * frame_rate?;
    let wall_seconds = wall_time_ms? as f64 / 1000.0;
    (frames.is_finite() && frames > 0.0 && wall_seconds > 0.0).then(|| frames / wall_seconds)
}

/// Mean of the known speeds; 0 when none is known.
fn mean_fps<'a>(jobs: impl Iterator<Item = &'a CompletedJob>) -> f64 {
    let (sum, n) = jobs.filter_map(|job| job.average_fps).fold((0.0, 0u64), |(sum, n), fps| (sum + fps, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DayHistory {
    pub date: NaiveDate,
    pub completed: u64,
    pub saved_bytes: i64,
    /// Mean of the day's jobs' average speeds; 0 when none is known.
    pub average_fps: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryTotals {
    pub completed: u64,
    pub saved_bytes: i64,
    /// Mean over every job of the window whose speed is known.
    pub average_fps: f64,
}

/// Jobs grouped by the UTC day they completed, for the days of the window only.
fn by_day(jobs: &[CompletedJob], days: &[NaiveDate]) -> BTreeMap<NaiveDate, Vec<CompletedJob>> {
    let mut grouped: BTreeMap<NaiveDate, Vec<CompletedJob>> = days.iter().map(|day| (*day, Vec::new())).collect();
    for job in jobs {
        if let Some(bucket) = grouped.get_mut(&job.completed_at.date_naive()) {
            bucket.push(job.clone());
        }
    }
    grouped
}

/// One entry per day of the window, days without jobs included, and the window's totals.
pub fn history(jobs: &[CompletedJob], today: NaiveDate, days: u32) -> (Vec<DayHistory>, HistoryTotals) {
    let grouped = by_day(jobs, &day_range(today, days));
    let history: Vec<DayHistory> = grouped
        .iter()
        .map(|(date, jobs)| DayHistory {
            date: *date,
            completed: jobs.len() as u64,
            saved_bytes: jobs.iter().map(CompletedJob::saved_bytes).sum(),
            average_fps: mean_fps(jobs.iter()),
        })
        .collect();
    let totals = HistoryTotals {
        completed: history.iter().map(|day| day.completed).sum(),
        saved_bytes: history.iter().map(|day| day.saved_bytes).sum(),
        average_fps: mean_fps(grouped.values().flatten()),
    };
    (history, totals)
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavingsDay {
    pub date: NaiveDate,
    pub saved_bytes: i64,
    /// Saved from the first day of the window up to and including this one.
    pub cumulative_bytes: i64,
}

pub fn savings_trend(jobs: &[CompletedJob], today: NaiveDate, days: u32) -> Vec<SavingsDay> {
    let mut cumulative = 0;
    by_day(jobs, &day_range(today, days))
        .into_iter()
        .map(|(date, jobs)| {
            let saved: i64 = jobs.iter().map(CompletedJob::saved_bytes).sum();
            cumulative += saved;
            SavingsDay { date, saved_bytes: saved, cumulative_bytes: cumulative }
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSummary {
    pub total_saved_bytes: i64,
    /// COMPLETED jobs.
    pub files_processed: u64,
    /// Mean over the completed files of each file's saving relative to its source size.
    pub average_savings_percent: f64,
}

/// From (source size, output size) of every completed job.
pub fn storage(sizes: &[(i64, Option<i64>)]) -> StorageSummary {
    let percents: Vec<f64> = sizes
        .iter()
        .filter(|(source, _)| *source > 0)
        .map(|(source, output)| saved_bytes(*source, *output) as f64 / *source as f64 * 100.0)
        .collect();
    StorageSummary {
        total_saved_bytes: sizes.iter().map(|(source, output)| saved_bytes(*source, *output)).sum(),
        files_processed: sizes.len() as u64,
        average_savings_percent: if percents.is_empty() {
            0.0
        } else {
            percents.iter().sum::<f64>() / percents.len() as f64
        },
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EncodingTime {
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    /// CPU time / wall time; 0 without wall time.
    pub efficiency: f64,
}

pub fn encoding_time(cpu_time_ms: i64, wall_time_ms: i64) -> EncodingTime {
    let cpu_seconds = cpu_time_ms as f64 / 1000.0;
    let wall_seconds = wall_time_ms as f64 / 1000.0;
    EncodingTime {
        cpu_seconds,
        wall_seconds,
        efficiency: if wall_seconds > 0.0 { cpu_seconds / wall_seconds } else { 0.0 },
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePerformance {
    pub node: String,
    /// Jobs processed (or last processed) by the node, in any status.
    pub jobs: u64,
    pub completed: u64,
    pub failed: u64,
    /// completed / (completed + failed), 0 to 1; 0 before any job finished.
    pub success_rate: f64,
    pub saved_bytes: i64,
    /// Completed in the last 24 hours / 24.
    pub throughput_per_hour: f64,
}

/// Per node, sorted by name: `nodes` are the registered ones (listed even without jobs),
/// `counts` the jobs per (node, status), `completed` every completed job.
pub fn node_performance(
    nodes: &[String],
    counts: &[(String, JobStatus, u64)],
    completed: &[CompletedJob],
    now: DateTime<Utc>,
) -> Vec<NodePerformance> {
    let mut table: BTreeMap<String, NodePerformance> = BTreeMap::new();
    let entry = |table: &mut BTreeMap<String, NodePerformance>, node: &str| {
        table.entry(node.to_string()).or_insert_with(|| NodePerformance {
            node: node.to_string(),
            jobs: 0,
            completed: 0,
            failed: 0,
            success_rate: 0.0,
            saved_bytes: 0,
            throughput_per_hour: 0.0,
        });
    };
    for node in nodes {
        entry(&mut table, node);
    }
    for (node, status, n) in counts {
        entry(&mut table, node);
        if let Some(row) = table.get_mut(node) {
            row.jobs += n;
            match status {
                JobStatus::Completed => row.completed += n,
                JobStatus::Failed => row.failed += n,
                _ => {}
            }
        }
    }
    let since = now - Duration::hours(THROUGHPUT_WINDOW_HOURS);
    let mut recent: HashMap<&str, u64> = HashMap::new();
    for job in completed {
        let Some(node) = job.node.as_deref() else { continue };
        if let Some(row) = table.get_mut(node) {
            row.saved_bytes += job.saved_bytes();
        }
        if job.completed_at > since {
            *recent.entry(node).or_default() += 1;
        }
    }
    table
        .into_values()
        .map(|mut row| {
            let finished = row.completed + row.failed;
            row.success_rate = if finished == 0 { 0.0 } else { row.completed as f64 / finished as f64 };
            row.throughput_per_hour = throughput_per_hour(recent.get(row.node.as_str()).copied().unwrap_or(0));
            row
        })
        .collect()
}

/// Codec families the distribution names; everything else is "other".
pub const CODEC_FAMILIES: [&str; 5] = ["h264", "hevc", "av1", "vp9", "other"];

/// The family of an FFmpeg codec name (or a library's target codec).
pub fn codec_family(codec: &str) -> &'static str {
    match codec.trim().to_ascii_lowercase().as_str() {
        "h264" | "avc" | "avc1" => "h264",
        "hevc" | "h265" | "hvc1" | "hev1" => "hevc",
        "av1" => "av1",
        "vp9" => "vp9",
        _ => "other",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodecShare {
    pub codec: &'static str,
    pub count: u64,
    /// 0 to 1.
    pub share: f64,
}

/// Every family, in `CODEC_FAMILIES` order, from (codec, number of files) pairs.
pub fn codec_distribution(counts: &[(String, u64)]) -> Vec<CodecShare> {
    let mut per_family: HashMap<&'static str, u64> = HashMap::new();
    for (codec, n) in counts {
        *per_family.entry(codec_family(codec)).or_default() += n;
    }
    let total: u64 = per_family.values().sum();
    CODEC_FAMILIES
        .iter()
        .map(|family| {
            let count = per_family.get(family).copied().unwrap_or(0);
            CodecShare { codec: family, count, share: if total == 0 { 0.0 } else { count as f64 / total as f64 } }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn day(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    fn done(when: &str, node: &str, source: i64, output: i64, fps: Option<f64>) -> CompletedJob {
        CompletedJob {
            completed_at: at(when),
            node: Some(node.into()),
            source_size: source,
            output_size: Some(output),
            average_fps: fps,
        }
    }

    #[test]
    fn saved_bytes_are_never_negative() {
        assert_eq!(saved_bytes(1000, Some(400)), 600);
        assert_eq!(saved_bytes(1000, Some(1000)), 0);
        assert_eq!(saved_bytes(1000, Some(1200)), 0);
        assert_eq!(saved_bytes(1000, None), 0);
        assert_eq!(saved_bytes(i64::MIN, Some(i64::MAX)), 0);
    }

    #[test]
    fn queue_stats_follow_the_spec_formula() {
        let counts: HashMap<JobStatus, u64> = [
            (JobStatus::Pending, 1),
            (JobStatus::Queued, 10),
            (JobStatus::Analyzing, 2),
            (JobStatus::Encoding, 3),
            (JobStatus::Completed, 50),
        ]
        .into();
        // One of the two ANALYZING is in the batch probe after a scan: no worker's.
        let stats = queue_stats(&counts, 1, 4, 48);
        assert_eq!((stats.pending, stats.queued, stats.analyzing, stats.paused, stats.cancelled), (1, 10, 2, 0, 0));
        assert_eq!((stats.active_workers, stats.stalled), (4, 1));
        assert_eq!(stats.throughput_per_hour, 2.0);
        // (10 queued + 2 analyzing) / 2 per hour.
        assert_eq!(stats.estimated_completion_hours, Some(6.0));
        assert_eq!(queue_stats(&counts, 0, 4, 0).estimated_completion_hours, None);
        let json = serde_json::to_value(queue_stats(&HashMap::new(), 0, 0, 0)).unwrap();
        assert_eq!(json["estimatedCompletionHours"], serde_json::Value::Null);
        assert_eq!(json["activeWorkers"], 0);
    }

    #[test]
    fn stuck_means_running_and_flagged_or_silent_for_ten_minutes() {
        let table = [
            (JobStatus::Encoding, true, None, true),
            (JobStatus::Encoding, false, Some(601), true),
            (JobStatus::Analyzing, false, Some(601), true),
            (JobStatus::Encoding, false, Some(600), false),
            (JobStatus::Encoding, false, None, false),
            (JobStatus::Paused, true, Some(10_000), false),
            (JobStatus::Queued, false, Some(10_000), false),
        ];
        for (status, flagged, seconds, stuck) in table {
            assert_eq!(is_stuck(status, flagged, seconds), stuck, "{status} {flagged} {seconds:?}");
        }
    }

    #[test]
    fn stuck_jobs_are_counted_from_their_last_progress_or_else_their_start() {
        let now = at("2024-03-02T10:30:00Z");
        let job = |status, stalled, last_progress_at: Option<&str>, started_at: Option<&str>| RunningJob {
            status,
            stalled,
            last_progress_at: last_progress_at.map(at),
            started_at: started_at.map(at),
        };
        // (job, stuck): 10 minutes without progress is the limit, more is stuck.
        let table = [
            (job(JobStatus::Encoding, false, Some("2024-03-02T10:20:00Z"), None), false),
            (job(JobStatus::Encoding, false, Some("2024-03-02T10:19:59Z"), None), true),
            // Progress since a start long ago: the progress counts.
            (job(JobStatus::Analyzing, false, Some("2024-03-02T10:29:00Z"), Some("2024-03-01T00:00:00Z")), false),
            // No progress yet: the start counts.
            (job(JobStatus::Analyzing, false, None, Some("2024-03-02T10:00:00Z")), true),
            (job(JobStatus::Analyzing, false, None, Some("2024-03-02T10:25:00Z")), false),
            // Neither: only the supervisor's flag can tell.
            (job(JobStatus::Encoding, false, None, None), false),
            (job(JobStatus::Encoding, true, None, None), true),
            // A clock behind the row's times reads as no time passed.
            (job(JobStatus::Encoding, false, Some("2024-03-02T11:00:00Z"), None), false),
            // Not running: never stuck.
            (job(JobStatus::Paused, true, Some("2024-03-01T00:00:00Z"), None), false),
            (job(JobStatus::Queued, false, None, Some("2024-03-01T00:00:00Z")), false),
        ];
        for (running, stuck) in table {
            assert_eq!(stuck_count([running], now), u64::from(stuck), "{running:?}");
        }
        assert_eq!(stuck_count(table.iter().map(|(running, _)| *running), now), 3);
        assert_eq!(stuck_count([] as [RunningJob; 0], now), 0);
    }

    #[test]
    fn windows_are_whole_utc_days_ending_today() {
        let now = at("2024-03-02T10:30:00Z");
        assert_eq!(window_start(now, 1), at("2024-03-02T00:00:00Z"));
        assert_eq!(window_start(now, 3), at("2024-02-29T00:00:00Z"));
        assert_eq!(day_range(day("2024-03-02"), 3), [day("2024-02-29"), day("2024-03-01"), day("2024-03-02")]);
        assert_eq!(day_range(day("2024-03-02"), 30).len(), 30);
    }

    #[test]
    fn history_has_every_day_and_totals() {
        let jobs = [
            done("2024-03-02T09:00:00Z", "a", 1000, 400, Some(30.0)),
            done("2024-03-02T00:00:00Z", "a", 500, 500, Some(10.0)),
            done("2024-02-29T23:59:59Z", "b", 300, 100, None),
            // Before the window: ignored.
            done("2024-02-28T23:59:59Z", "b", 9000, 1, Some(99.0)),
        ];
        let (days, totals) = history(&jobs, day("2024-03-02"), 3);
        let expected = [
            DayHistory { date: day("2024-02-29"), completed: 1, saved_bytes: 200, average_fps: 0.0 },
            DayHistory { date: day("2024-03-01"), completed: 0, saved_bytes: 0, average_fps: 0.0 },
            DayHistory { date: day("2024-03-02"), completed: 2, saved_bytes: 600, average_fps: 20.0 },
        ];
        assert_eq!(days, expected);
        assert_eq!(totals, HistoryTotals { completed: 3, saved_bytes: 800, average_fps: 20.0 });
        let json = serde_json::to_value(&days[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"date": "2024-02-29", "completed": 1, "savedBytes": 200, "averageFps": 0.0})
        );
    }

    #[test]
    fn savings_accumulate_over_the_window() {
        let jobs = [
            done("2024-03-01T12:00:00Z", "a", 1000, 400, None),
            done("2024-03-03T12:00:00Z", "a", 100, 50, None),
            done("2024-03-03T13:00:00Z", "a", 100, 150, None),
            done("2024-02-01T12:00:00Z", "a", 100_000, 0, None),
        ];
        let trend = savings_trend(&jobs, day("2024-03-03"), 4);
        let rows: Vec<(String, i64, i64)> =
            trend.iter().map(|d| (d.date.to_string(), d.saved_bytes, d.cumulative_bytes)).collect();
        assert_eq!(
            rows,
            [
                ("2024-02-29".to_string(), 0, 0),
                ("2024-03-01".to_string(), 600, 600),
                ("2024-03-02".to_string(), 0, 600),
                ("2024-03-03".to_string(), 50, 650),
            ]
        );
    }

    #[test]
    fn average_fps_is_frames_over_wall_time() {
        assert_eq!(average_fps(Some(60.0), Some(25.0), Some(30_000)), Some(50.0));
        assert_eq!(average_fps(None, Some(25.0), Some(30_000)), None);
        assert_eq!(average_fps(Some(60.0), None, Some(30_000)), None);
        assert_eq!(average_fps(Some(60.0), Some(25.0), Some(0)), None);
        assert_eq!(average_fps(Some(60.0), Some(25.0), None), None);
    }

    #[test]
    fn storage_and_encoding_time() {
        let summary = storage(&[(1000, Some(400)), (200, Some(200)), (0, Some(0)), (100, Some(150))]);
        assert_eq!(summary.total_saved_bytes, 600);
        assert_eq!(summary.files_processed, 4);
        // (60 + 0 + 0) / 3 files with a size.
        assert_eq!(summary.average_savings_percent, 20.0);
        assert_eq!(storage(&[]).average_savings_percent, 0.0);
        assert_eq!(
            encoding_time(30_000, 12_000),
            EncodingTime { cpu_seconds: 30.0, wall_seconds: 12.0, efficiency: 2.5 }
        );
        assert_eq!(encoding_time(5_000, 0).efficiency, 0.0);
    }

    #[test]
    fn node_performance_per_node() {
        let now = at("2024-03-02T12:00:00Z");
        let counts = vec![
            ("a".to_string(), JobStatus::Completed, 3),
            ("a".to_string(), JobStatus::Failed, 1),
            ("a".to_string(), JobStatus::Encoding, 1),
            ("ghost".to_string(), JobStatus::Failed, 2),
        ];
        let completed = [
            done("2024-03-02T11:00:00Z", "a", 1000, 400, None),
            done("2024-03-01T12:30:00Z", "a", 1000, 900, None),
            // Exactly 24 hours ago: outside "the last 24 hours".
            done("2024-03-01T12:00:00Z", "a", 1000, 1000, None),
        ];
        let rows = node_performance(&["a".into(), "idle".into()], &counts, &completed, now);
        let names: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
        assert_eq!(names, ["a", "ghost", "idle"]);
        assert_eq!(
            rows[0],
            NodePerformance {
                node: "a".into(),
                jobs: 5,
                completed: 3,
                failed: 1,
                success_rate: 0.75,
                saved_bytes: 700,
                throughput_per_hour: 2.0 / 24.0,
            }
        );
        assert_eq!((rows[1].jobs, rows[1].success_rate), (2, 0.0));
        assert_eq!((rows[2].jobs, rows[2].success_rate, rows[2].throughput_per_hour), (0, 0.0, 0.0));
    }

    #[test]
    fn codecs_group_into_families() {
        for (name, family) in [
            ("h264", "h264"),
            ("HEVC", "hevc"),
            ("av1", "av1"),
            ("vp9", "vp9"),
            ("mpeg2video", "other"),
            ("vp8", "other"),
        ] {
            assert_eq!(codec_family(name), family, "{name}");
        }
        let shares = codec_distribution(&[
            ("h264".into(), 2),
            ("hevc".into(), 1),
            ("mpeg4".into(), 1),
            ("mpeg2video".into(), 0),
        ]);
        let rows: Vec<(&str, u64, f64)> = shares.iter().map(|s| (s.codec, s.count, s.share)).collect();
        assert_eq!(rows, [("h264", 2, 0.5), ("hevc", 1, 0.25), ("av1", 0, 0.0), ("vp9", 0, 0.0), ("other", 1, 0.25)]);
        assert!(codec_distribution(&[]).iter().all(|s| s.count == 0 && s.share == 0.0));
    }
}
