//! Memory use over time: a bounded ring of samples, one every 30 s at most, the last 2 hours.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

pub const SAMPLE_EVERY: Duration = Duration::from_secs(30);
pub const KEEP_FOR: Duration = Duration::from_secs(2 * 60 * 60);
/// Samples the ring holds at most.
pub const CAPACITY: usize = (KEEP_FOR.as_secs() / SAMPLE_EVERY.as_secs()) as usize + 1;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct MemorySample {
    pub at: DateTime<Utc>,
    /// Used memory, percent of total.
    pub percent: f64,
}

#[derive(Debug, Default)]
pub struct MemoryTrend {
    samples: VecDeque<MemorySample>,
}

/// Shared between the request handlers and the sampling task.
pub type SharedMemoryTrend = Arc<Mutex<MemoryTrend>>;

impl MemoryTrend {
    /// Keeps the sample unless the last one is younger than `SAMPLE_EVERY`, so callers may
    /// offer samples as often as they like. Drops samples older than `KEEP_FOR`.
    pub fn offer(&mut self, sample: MemorySample) -> bool {
        let every = chrono::Duration::from_std(SAMPLE_EVERY).unwrap_or(chrono::Duration::MAX);
        if self.samples.back().is_some_and(|last| sample.at - last.at < every) {
            return false;
        }
        self.samples.push_back(sample);
        let keep = chrono::Duration::from_std(KEEP_FOR).unwrap_or(chrono::Duration::MAX);
        while self.samples.front().is_some_and(|first| sample.at - first.at > keep) || self.samples.len() > CAPACITY {
            self.samples.pop_front();
        }
        true
    }

    /// Oldest first.
    pub fn samples(&self) -> Vec<MemorySample> {
        self.samples.iter().copied().collect()
    }
}

/// Offers a sample to a shared trend; a poisoned lock still holds valid samples.
pub fn offer(trend: &SharedMemoryTrend, sample: MemorySample) -> Vec<MemorySample> {
    let mut trend = trend.lock().unwrap_or_else(PoisonError::into_inner);
    trend.offer(sample);
    trend.samples()
}

/// Used memory in percent of total now (0 where the total is unknown). Blocking.
pub fn sample_now() -> MemorySample {
    let (used, total) = super::memory();
    MemorySample { at: Utc::now(), percent: percent(used, total) }
}

pub fn percent(used: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        used as f64 / total as f64 * 100.0
    }
}

/// Samples memory every `SAMPLE_EVERY` into `trend`, for as long as the runtime lives, so
/// the trend has no gaps while nobody watches the dashboard.
pub async fn sample_forever(trend: SharedMemoryTrend) {
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // sysinfo reads /proc: off the async threads.
        match tokio::task::spawn_blocking(sample_now).await {
            Ok(sample) => {
                offer(&trend, sample);
            }
            Err(error) => tracing::warn!(%error, "memory sampling failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seconds: i64, percent: f64) -> MemorySample {
        let start = DateTime::parse_from_rfc3339("2024-03-02T10:00:00Z").unwrap().with_timezone(&Utc);
        MemorySample { at: start + chrono::Duration::seconds(seconds), percent }
    }

    #[test]
    fn one_sample_per_thirty_seconds() {
        let mut trend = MemoryTrend::default();
        assert!(trend.offer(sample(0, 10.0)));
        assert!(!trend.offer(sample(29, 11.0)));
        assert!(trend.offer(sample(30, 12.0)));
        assert_eq!(trend.samples().iter().map(|s| s.percent).collect::<Vec<_>>(), [10.0, 12.0]);
    }

    #[test]
    fn keeps_two_hours_and_stays_bounded() {
        let mut trend = MemoryTrend::default();
        for n in 0..1000 {
            trend.offer(sample(n * 30, n as f64));
        }
        let samples = trend.samples();
        assert_eq!(samples.len(), CAPACITY);
        assert_eq!(CAPACITY, 241);
        let span = samples[samples.len() - 1].at - samples[0].at;
        assert_eq!(span, chrono::Duration::hours(2));
        // A gap longer than two hours leaves only the new sample.
        trend.offer(sample(1000 * 30 + 3 * 3600, 1.0));
        assert_eq!(trend.samples().len(), 1);
    }

    #[test]
    fn serializes_at_and_percent() {
        let json = serde_json::to_value(sample(0, 42.5)).unwrap();
        assert_eq!(json, serde_json::json!({"at": "2024-03-02T10:00:00Z", "percent": 42.5}));
    }

    #[test]
    fn percent_of_nothing_is_zero() {
        assert_eq!(percent(5, 0), 0.0);
        assert_eq!(percent(1, 4), 25.0);
    }
}
