//! Health checks and their thresholds.
//!
//! Boundaries: "below X" is healthy and "above Y" is critical, so X and Y themselves are
//! warnings. CPU load ratio: < 1.5 healthy, 1.5..=2.0 warning, > 2.0 critical. Memory
//! percent: < 85 healthy, 85..=95 warning, > 95 critical. Stuck jobs: 0 healthy, 1..=5
//! warning, > 5 critical. A value that is not a number (NaN) is a warning: not known good.
//!
//! Beside the panel's checks, the node's own checks (`NodeCheck`: each library path readable,
//! its disk not at risk), which `actors::recheck` runs at start, every
//! `HEALTH_RECHECK_MINUTES` and on demand: when one the node had failed passes again, the
//! node is told without anyone touching it.

use chrono::{DateTime, Utc};

use super::job::JobStatus;
use super::named_enum;
use super::node::{NodeRole, NodeStatus, CPU_CRITICAL_RATIO};

pub const CPU_WARNING_RATIO: f64 = 1.5;
pub const MEMORY_WARNING_PERCENT: f64 = 85.0;
pub const MEMORY_CRITICAL_PERCENT: f64 = 95.0;
pub const STUCK_JOBS_CRITICAL_ABOVE: u64 = 5;
/// Disk use above this may make encodes fail for lack of space.
pub const DISK_RISK_PERCENT: f64 = 90.0;
/// A running job without progress for longer than this is stalled, i.e. stuck.
pub const STALLED_AFTER_SECS: u64 = 10 * 60;

named_enum!(
    HealthLevel, "health level" {
        Healthy => "HEALTHY",
        Warning => "WARNING",
        Critical => "CRITICAL",
    }
);

impl HealthLevel {
    fn severity(self) -> u8 {
        match self {
            HealthLevel::Healthy => 0,
            HealthLevel::Warning => 1,
            HealthLevel::Critical => 2,
        }
    }
}

named_enum!(
    /// The checks the health panel shows.
    CheckName, "health check" {
        Cpu => "cpu",
        Memory => "memory",
        Database => "database",
        Queue => "queue",
        Nodes => "nodes",
    }
);

/// The measured value a check judged.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum CheckValue {
    Number(f64),
    Count(u64),
    Flag(bool),
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Check {
    pub name: CheckName,
    pub level: HealthLevel,
    pub value: CheckValue,
    pub message: String,
}

/// CRITICAL if any check is critical, else WARNING if any warns, else HEALTHY.
pub fn overall(checks: &[Check]) -> HealthLevel {
    worst(checks.iter().map(|check| check.level))
}

/// The most severe of `levels`; HEALTHY for none.
pub fn worst(levels: impl IntoIterator<Item = HealthLevel>) -> HealthLevel {
    levels.into_iter().max_by_key(|level| level.severity()).unwrap_or(HealthLevel::Healthy)
}

/// The 1-minute load average per core; a machine reporting no cores counts as one.
pub fn load_ratio(load1: f64, cores: usize) -> f64 {
    load1 / cores.max(1) as f64
}

/// Shared by every "below warn healthy, above critical critical" threshold pair.
fn level_between(value: f64, warning_from: f64, critical_above: f64) -> HealthLevel {
    if value < warning_from {
        HealthLevel::Healthy
    } else if value > critical_above {
        HealthLevel::Critical
    } else {
        HealthLevel::Warning
    }
}

pub fn cpu_level(load_ratio: f64) -> HealthLevel {
    level_between(load_ratio, CPU_WARNING_RATIO, CPU_CRITICAL_RATIO)
}

pub fn memory_level(used_percent: f64) -> HealthLevel {
    level_between(used_percent, MEMORY_WARNING_PERCENT, MEMORY_CRITICAL_PERCENT)
}

pub fn queue_level(stuck_jobs: u64) -> HealthLevel {
    match stuck_jobs {
        0 => HealthLevel::Healthy,
        n if n > STUCK_JOBS_CRITICAL_ABOVE => HealthLevel::Critical,
        _ => HealthLevel::Warning,
    }
}

pub fn cpu_check(load1: f64, cores: usize) -> Check {
    let ratio = load_ratio(load1, cores);
    Check {
        name: CheckName::Cpu,
        level: cpu_level(ratio),
        value: CheckValue::Number(ratio),
        message: format!("load {load1:.2} on {cores} cores ({ratio:.2} per core)"),
    }
}

pub fn memory_check(used_percent: f64) -> Check {
    Check {
        name: CheckName::Memory,
        level: memory_level(used_percent),
        value: CheckValue::Number(used_percent),
        message: format!("{used_percent:.1}% of memory used"),
    }
}

pub fn database_check(connected: bool) -> Check {
    let (level, message) = if connected {
        (HealthLevel::Healthy, "database connected")
    } else {
        (HealthLevel::Critical, "database disconnected")
    };
    Check { name: CheckName::Database, level, value: CheckValue::Flag(connected), message: message.to_string() }
}

pub fn queue_check(stuck_jobs: u64) -> Check {
    let message = match stuck_jobs {
        0 => "no stuck jobs".to_string(),
        1 => "1 stuck job".to_string(),
        n => format!("{n} stuck jobs"),
    };
    Check { name: CheckName::Queue, level: queue_level(stuck_jobs), value: CheckValue::Count(stuck_jobs), message }
}

/// DEGRADED nodes are reachable, so only OFFLINE
/// ones count against this check. The value is the number of offline nodes.
pub fn nodes_check(nodes: &[(NodeRole, NodeStatus)]) -> Check {
    let offline = nodes.iter().filter(|(_, status)| *status == NodeStatus::Offline).count() as u64;
    let main_offline = nodes.contains(&(NodeRole::Main, NodeStatus::Offline));
    let (level, message) = if main_offline {
        (HealthLevel::Critical, "main node offline".to_string())
    } else if offline > 0 {
        (HealthLevel::Warning, format!("{offline} of {} nodes offline", nodes.len()))
    } else {
        (HealthLevel::Healthy, format!("all {} nodes online", nodes.len()))
    };
    Check { name: CheckName::Nodes, level, value: CheckValue::Count(offline), message }
}

/// What the health checks judge. `stuck_jobs` and `nodes` are `None` when the database could
/// not say; those checks are then left out (the database check is critical anyway).
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub load1: f64,
    pub cores: usize,
    pub memory_percent: f64,
    pub database_connected: bool,
    pub stuck_jobs: Option<u64>,
    pub nodes: Option<Vec<(NodeRole, NodeStatus)>>,
}

/// Every check of the health panel (and of `health.changed`), in the panel's order.
pub fn checks(inputs: &Inputs) -> Vec<Check> {
    let mut checks = vec![
        cpu_check(inputs.load1, inputs.cores),
        memory_check(inputs.memory_percent),
        database_check(inputs.database_connected),
    ];
    if let Some(stuck) = inputs.stuck_jobs {
        checks.push(queue_check(stuck));
    }
    if let Some(nodes) = &inputs.nodes {
        checks.push(nodes_check(nodes));
    }
    checks
}

/// A library path this full raises the risk of failed encodes.
pub fn disk_risk(used_percent: f64) -> bool {
    used_percent > DISK_RISK_PERCENT
}

/// A node is Overloaded when it holds more than twice the average work.
pub fn is_overloaded(node_jobs: u32, average_jobs: f64) -> bool {
    f64::from(node_jobs) > 2.0 * average_jobs
}

/// A running job is stalled, and counts as stuck, after more than 10 minutes without
/// progress.
pub fn is_stalled(status: JobStatus, seconds_since_progress: u64) -> bool {
    status.is_running() && seconds_since_progress > STALLED_AFTER_SECS
}

named_enum!(
    /// What one of the node's own checks looks at.
    NodeCheckKind, "node check" {
        LibraryPath => "libraryPath",
        Disk => "disk",
        Encoder => "encoder",
    }
);

/// One of the node's own checks: a library path it must read, the disk under it, or an
/// encoder a library uses.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCheck {
    pub kind: NodeCheckKind,
    /// The library path, or the encoder, looked at.
    pub subject: String,
    pub level: HealthLevel,
    pub message: String,
}

/// What was read of one library path: whether its folder could be listed (else why not), and
/// how full its filesystem is (`None` when that could not be read).
#[derive(Debug, Clone, PartialEq)]
pub struct PathReading {
    pub path: String,
    pub readable: Result<(), String>,
    pub used_percent: Option<f64>,
}

/// The checks of one path: readable (a WARNING when not: the node is DEGRADED and gets no
/// jobs of it), and, when its disk could be read, that disk (a WARNING above
/// `DISK_RISK_PERCENT`).
pub fn path_checks(reading: &PathReading) -> Vec<NodeCheck> {
    let path = &reading.path;
    let check = |kind, level, message: String| NodeCheck { kind, subject: path.clone(), level, message };
    let mut checks = vec![match &reading.readable {
        Ok(()) => check(NodeCheckKind::LibraryPath, HealthLevel::Healthy, format!("{path} is readable")),
        Err(why) => check(NodeCheckKind::LibraryPath, HealthLevel::Warning, format!("cannot read {path}: {why}")),
    }];
    if let Some(used) = reading.used_percent {
        checks.push(if disk_risk(used) {
            check(
                NodeCheckKind::Disk,
                HealthLevel::Warning,
                format!("the disk of {path} is {used:.0} % full; encodes there may fail for lack of space"),
            )
        } else {
            check(NodeCheckKind::Disk, HealthLevel::Healthy, format!("the disk of {path} is {used:.0} % full"))
        });
    }
    checks
}

/// Every check of the node, path by path in the order given.
pub fn node_checks(readings: &[PathReading]) -> Vec<NodeCheck> {
    readings.iter().flat_map(path_checks).collect()
}

/// The checks of the encoders the enabled libraries use (`used`): each must open on a node
/// that is up (`up`: each such node's name and the encoders that opened there), else it is a
/// WARNING: that library's jobs wait.
pub fn encoder_checks(used: &[String], up: &[(String, Vec<String>)]) -> Vec<NodeCheck> {
    used.iter()
        .map(|encoder| {
            let nodes: Vec<&str> =
                up.iter().filter(|(_, opened)| opened.contains(encoder)).map(|(name, _)| name.as_str()).collect();
            let (level, message) = if nodes.is_empty() {
                (HealthLevel::Warning, format!("no node that is up opens {encoder}: its libraries' jobs wait"))
            } else {
                (HealthLevel::Healthy, format!("{encoder} opens on {}", nodes.join(", ")))
            };
            NodeCheck { kind: NodeCheckKind::Encoder, subject: encoder.clone(), level, message }
        })
        .collect()
}

/// The encoders whose check failed: they opened on no node that is up.
pub fn missing_encoders(checks: &[NodeCheck]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| c.kind == NodeCheckKind::Encoder && c.level != HealthLevel::Healthy)
        .map(|c| c.subject.clone())
        .collect()
}

/// The library paths the node cannot read (`node::node_status` makes it DEGRADED for them).
pub fn unreadable_paths(checks: &[NodeCheck]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| c.kind == NodeCheckKind::LibraryPath && c.level != HealthLevel::Healthy)
        .map(|c| c.subject.clone())
        .collect()
}

/// Whether the node's checks are due again: never run, or last run `every` or longer ago. A
/// clock set back (the last run in the future) makes them due too, rather than silent until
/// it catches up.
pub fn recheck_due(last: Option<DateTime<Utc>>, now: DateTime<Utc>, every: chrono::Duration) -> bool {
    match last {
        None => true,
        Some(last) => now < last || now - last >= every,
    }
}

/// The result of one run of the node's checks, as the API serves it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecheckReport {
    /// The worst level among the checks (HEALTHY when there are none).
    pub overall: HealthLevel,
    pub checks: Vec<NodeCheck>,
    pub checked_at: DateTime<Utc>,
    /// When they run again on their own (`HEALTH_RECHECK_MINUTES` after this run).
    pub next_at: DateTime<Utc>,
    /// Whether this run changed what fails (and `health.changed` was written).
    pub changed: bool,
}

/// What a run of the node's checks tells: `Some((before, now))`, the overall levels, when the
/// failing checks (kind, path, level) differ from the last run's (`None`: no run yet, which
/// counts as all passing). A message that changes alone (a disk one percent fuller) is not
/// news.
pub fn recheck_news(before: Option<&[NodeCheck]>, after: &[NodeCheck]) -> Option<(HealthLevel, HealthLevel)> {
    let failing = |checks: &[NodeCheck]| -> std::collections::HashSet<(NodeCheckKind, String, HealthLevel)> {
        checks
            .iter()
            .filter(|c| c.level != HealthLevel::Healthy)
            .map(|c| (c.kind, c.subject.clone(), c.level))
            .collect()
    };
    let before = before.unwrap_or_default();
    if failing(before) == failing(after) {
        return None;
    }
    Some((worst(before.iter().map(|c| c.level)), worst(after.iter().map(|c| c.level))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use HealthLevel::*;

    #[test]
    fn cpu_thresholds() {
        let table = [
            (0.0, Healthy),
            (1.49, Healthy),
            (1.5, Warning),
            (1.51, Warning),
            (1.99, Warning),
            (2.0, Warning),
            (2.01, Critical),
            (8.0, Critical),
            (f64::NAN, Warning),
        ];
        for (ratio, level) in table {
            assert_eq!(cpu_level(ratio), level, "{ratio}");
        }
    }

    #[test]
    fn cpu_check_divides_by_cores() {
        let table = [
            (5.9, 4, Healthy),
            (6.0, 4, Warning),
            (8.0, 4, Warning),
            (8.04, 4, Critical),
            (1.4, 1, Healthy),
            (1.6, 0, Warning),
        ];
        for (load1, cores, level) in table {
            let check = cpu_check(load1, cores);
            assert_eq!((check.name, check.level), (CheckName::Cpu, level), "{load1} / {cores}");
        }
        let check = cpu_check(6.0, 4);
        assert_eq!(check.value, CheckValue::Number(1.5));
        assert_eq!(check.message, "load 6.00 on 4 cores (1.50 per core)");
    }

    #[test]
    fn memory_thresholds() {
        let table = [
            (0.0, Healthy),
            (84.9, Healthy),
            (85.0, Warning),
            (85.1, Warning),
            (94.9, Warning),
            (95.0, Warning),
            (95.1, Critical),
            (100.0, Critical),
        ];
        for (percent, level) in table {
            assert_eq!(memory_level(percent), level, "{percent}");
            assert_eq!(memory_check(percent).level, level, "{percent}");
        }
        assert_eq!(memory_check(85.0).message, "85.0% of memory used");
    }

    #[test]
    fn database_check_is_healthy_or_critical() {
        assert_eq!(database_check(true).level, Healthy);
        assert_eq!(database_check(false).level, Critical);
        assert_eq!(database_check(false).value, CheckValue::Flag(false));
    }

    #[test]
    fn queue_thresholds() {
        let table = [(0, Healthy), (1, Warning), (2, Warning), (5, Warning), (6, Critical), (100, Critical)];
        for (stuck, level) in table {
            assert_eq!(queue_level(stuck), level, "{stuck}");
            assert_eq!(queue_check(stuck).level, level, "{stuck}");
        }
        assert_eq!(queue_check(1).message, "1 stuck job");
        assert_eq!(queue_check(6).message, "6 stuck jobs");
    }

    #[test]
    fn nodes_check_levels() {
        use NodeRole::*;
        use NodeStatus::*;
        type Nodes = &'static [(NodeRole, NodeStatus)];
        let table: [(Nodes, HealthLevel, u64); 7] = [
            (&[], Healthy, 0),
            (&[(Main, Online)], Healthy, 0),
            (&[(Main, Online), (Linked, Degraded)], Healthy, 0),
            (&[(Main, Online), (Linked, Offline)], Warning, 1),
            (&[(Main, Degraded), (Linked, Offline), (Linked, Offline)], Warning, 2),
            (&[(Main, Offline)], Critical, 1),
            (&[(Main, Offline), (Linked, Online)], Critical, 1),
        ];
        for (nodes, level, offline) in table {
            let check = nodes_check(nodes);
            assert_eq!((check.level, check.value), (level, CheckValue::Count(offline)), "{nodes:?}");
        }
        assert_eq!(nodes_check(&[(Main, Online), (Linked, Offline)]).message, "1 of 2 nodes offline");
    }

    fn check(level: HealthLevel) -> Check {
        Check { name: CheckName::Cpu, level, value: CheckValue::Count(0), message: String::new() }
    }

    #[test]
    fn overall_takes_the_worst_level() {
        let table: [(&[HealthLevel], HealthLevel); 7] = [
            (&[], Healthy),
            (&[Healthy], Healthy),
            (&[Healthy, Healthy], Healthy),
            (&[Healthy, Warning], Warning),
            (&[Warning, Healthy, Warning], Warning),
            (&[Warning, Critical, Healthy], Critical),
            (&[Critical], Critical),
        ];
        for (levels, expected) in table {
            let checks: Vec<Check> = levels.iter().map(|level| check(*level)).collect();
            assert_eq!(overall(&checks), expected, "{levels:?}");
        }
    }

    #[test]
    fn disk_risk_starts_above_ninety_percent() {
        for (percent, risky) in [(0.0, false), (89.9, false), (90.0, false), (90.1, true), (100.0, true)] {
            assert_eq!(disk_risk(percent), risky, "{percent}");
        }
    }

    #[test]
    fn overloaded_means_more_than_twice_the_average() {
        let table =
            [(0, 0.0, false), (1, 0.5, false), (2, 1.0, false), (3, 1.0, true), (5, 2.5, false), (6, 2.5, true)];
        for (jobs, average, overloaded) in table {
            assert_eq!(is_overloaded(jobs, average), overloaded, "{jobs} vs {average}");
        }
    }

    #[test]
    fn stalled_after_ten_minutes_without_progress_while_running() {
        let table = [
            (JobStatus::Encoding, 599, false),
            (JobStatus::Encoding, 600, false),
            (JobStatus::Encoding, 601, true),
            (JobStatus::Analyzing, 601, true),
            (JobStatus::Paused, 10_000, false),
            (JobStatus::Queued, 10_000, false),
        ];
        for (status, seconds, stalled) in table {
            assert_eq!(is_stalled(status, seconds), stalled, "{status} {seconds}");
        }
    }

    #[test]
    fn checks_serialize_for_the_dashboard() {
        let json = serde_json::to_value(queue_check(2)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "queue", "level": "WARNING", "value": 2, "message": "2 stuck jobs"})
        );
    }

    fn reading(path: &str, readable: Result<(), &str>, used: Option<f64>) -> PathReading {
        PathReading { path: path.into(), readable: readable.map_err(str::to_string), used_percent: used }
    }

    #[test]
    fn a_path_is_judged_readable_then_by_its_disk() {
        use NodeCheckKind::{Disk, LibraryPath};
        type Row = (Result<(), &'static str>, Option<f64>, &'static [(NodeCheckKind, HealthLevel)]);
        let table: [Row; 6] = [
            (Ok(()), Some(50.0), &[(LibraryPath, Healthy), (Disk, Healthy)]),
            (Ok(()), Some(90.0), &[(LibraryPath, Healthy), (Disk, Healthy)]),
            (Ok(()), Some(90.1), &[(LibraryPath, Healthy), (Disk, Warning)]),
            (Ok(()), None, &[(LibraryPath, Healthy)]),
            (Err("Permission denied"), None, &[(LibraryPath, Warning)]),
            (Err("No such file or directory"), Some(99.0), &[(LibraryPath, Warning), (Disk, Warning)]),
        ];
        for (readable, used, expected) in table {
            let checks = path_checks(&reading("/m", readable, used));
            let got: Vec<(NodeCheckKind, HealthLevel)> = checks.iter().map(|c| (c.kind, c.level)).collect();
            assert_eq!(got, expected, "{readable:?} {used:?}");
            assert!(checks.iter().all(|c| c.subject == "/m"));
        }
        let checks = path_checks(&reading("/m", Err("Permission denied"), None));
        assert_eq!(checks[0].message, "cannot read /m: Permission denied");
        let checks = path_checks(&reading("/m", Ok(()), Some(93.2)));
        assert_eq!(checks[1].message, "the disk of /m is 93 % full; encodes there may fail for lack of space");
    }

    #[test]
    fn the_unreadable_paths_are_those_of_failed_path_checks() {
        let checks = node_checks(&[
            reading("/a", Ok(()), Some(95.0)),
            reading("/b", Err("Permission denied"), None),
            reading("/c", Ok(()), Some(10.0)),
            reading("/d", Err("No such file or directory"), None),
        ]);
        assert_eq!(unreadable_paths(&checks), ["/b", "/d"]);
        assert!(unreadable_paths(&node_checks(&[reading("/a", Ok(()), Some(99.0))])).is_empty());
    }

    #[test]
    fn a_recheck_is_due_once_the_interval_has_passed() {
        let at = |minutes: i64| DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::minutes(minutes);
        let hour = chrono::Duration::minutes(60);
        let table = [
            (None, 0, true),
            (Some(0), 0, false),
            (Some(0), 59, false),
            (Some(0), 60, true),
            (Some(0), 61, true),
            (Some(120), 60, true),
        ];
        for (last, now, due) in table {
            assert_eq!(recheck_due(last.map(at), at(now), hour), due, "{last:?} {now}");
        }
    }

    #[test]
    fn a_recheck_is_news_when_what_fails_changes() {
        let ok = node_checks(&[reading("/a", Ok(()), Some(10.0)), reading("/b", Ok(()), Some(10.0))]);
        let a_gone = node_checks(&[reading("/a", Err("gone"), None), reading("/b", Ok(()), Some(10.0))]);
        let a_gone_again = node_checks(&[reading("/a", Err("still gone"), None), reading("/b", Ok(()), Some(11.0))]);
        let b_full = node_checks(&[reading("/a", Ok(()), Some(10.0)), reading("/b", Ok(()), Some(95.0))]);
        assert_eq!(recheck_news(None, &ok), None, "all passing at the first run is no news");
        assert_eq!(recheck_news(None, &a_gone), Some((Healthy, Warning)));
        assert_eq!(recheck_news(Some(ok.as_slice()), &a_gone), Some((Healthy, Warning)));
        assert_eq!(recheck_news(Some(a_gone.as_slice()), &a_gone_again), None, "the same failure again");
        assert_eq!(recheck_news(Some(a_gone.as_slice()), &b_full), Some((Warning, Warning)), "another check fails");
        assert_eq!(recheck_news(Some(a_gone.as_slice()), &ok), Some((Warning, Healthy)));
        assert_eq!(recheck_news(Some(ok.as_slice()), &[]), None, "a library removed");
    }

    #[test]
    fn an_encoder_is_healthy_while_a_node_that_is_up_opens_it() {
        type Up = Vec<(String, Vec<String>)>;
        let used = ["libx265".to_string(), "hevc_nvenc".to_string()];
        let up = |nodes: &[(&str, &[&str])]| -> Up {
            nodes.iter().map(|(n, e)| ((*n).to_string(), e.iter().map(|s| (*s).to_string()).collect())).collect()
        };
        let table: [(Up, [HealthLevel; 2]); 4] = [
            (up(&[]), [Warning, Warning]),
            (up(&[("main", &["libx265"])]), [Healthy, Warning]),
            (up(&[("main", &["libx265"]), ("gpu", &["libx265", "hevc_nvenc"])]), [Healthy, Healthy]),
            (up(&[("main", &[]), ("gpu", &["hevc_nvenc"])]), [Warning, Healthy]),
        ];
        for (nodes, levels) in table {
            let checks = encoder_checks(&used, &nodes);
            assert_eq!(checks.iter().map(|c| c.level).collect::<Vec<_>>(), levels, "{nodes:?}");
            assert!(checks.iter().all(|c| c.kind == NodeCheckKind::Encoder));
            let missing: Vec<&String> =
                used.iter().zip(levels).filter(|(_, l)| *l == Warning).map(|(e, _)| e).collect();
            assert_eq!(missing_encoders(&checks).iter().collect::<Vec<_>>(), missing);
        }
        let checks = encoder_checks(&used, &up(&[("main", &["libx265"]), ("gpu", &["libx265"])]));
        assert_eq!(checks[0].message, "libx265 opens on main, gpu");
        assert_eq!(checks[1].message, "no node that is up opens hevc_nvenc: its libraries' jobs wait");
        assert!(unreadable_paths(&checks).is_empty());
    }

    #[test]
    fn node_checks_serialize_for_the_dashboard() {
        let json = serde_json::to_value(&path_checks(&reading("/m", Err("gone"), None))[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "libraryPath", "subject": "/m", "level": "WARNING", "message": "cannot read /m: gone"})
        );
    }
}
