//! The main node's own health checks, run again on their own: each enabled library's paths
//! readable, the disks under them not at risk (`domain::health::node_checks`), and each
//! encoder the libraries use opening on a node that is up (`encoder_checks`; one that opens
//! nowhere makes this node ask its `condense-media` again what opens, and record it: a driver
//! loaded after the start is taken up without a restart). They run
//! at start, every `HEALTH_RECHECK_MINUTES` after the last run (read from the injected
//! `host::clock::Clock`, so a test moves time on instead of waiting), and on demand
//! (`POST /health/recheck`). A run whose unreadable paths changed writes the node's status
//! (DEGRADED for a path it cannot read, as a linked node's heartbeat does for what it cannot
//! see) and, when what fails changed, `health.changed`. So a failed check that passes again is noticed, and told,
//! without anyone touching the node.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;

use crate::domain::health::{self, NodeCheck, PathReading, RecheckReport};
use crate::domain::node::{self as node_rules, NodeStatus};
use crate::domain::notify::NotifyEvent;
use crate::host::clock::Clock;
use crate::repo::nodes::NodeFacts;
use crate::repo::{self, RepoError};

/// How often the clock is read to see whether a run is due: no I/O until one is, and short,
/// so a clock set forward (by a test, or an NTP step) is seen within a second.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// The longest the paths' reading may take: a mount that hangs makes its paths unreadable
/// for this run, instead of holding every later run (and `POST /health/recheck`) behind it.
const READ_LIMIT: Duration = Duration::from_secs(30);

/// How this node asks again what encoders open: the `condense-media` program, and the facts
/// its row was written with at start (written again with the encoders found).
pub struct EncoderProbe {
    pub transcoder: PathBuf,
    pub facts: NodeFacts,
}

/// The handle to the re-check: cheap to clone, shared by the node's heartbeat and the API.
#[derive(Clone)]
pub struct HealthRecheck {
    db: DatabaseConnection,
    node_id: i32,
    node_name: String,
    every: Duration,
    clock: Clock,
    probe: Arc<EncoderProbe>,
    /// One run at a time; holds the checks of the last run (`None` before the first).
    running: Arc<tokio::sync::Mutex<Option<Vec<NodeCheck>>>>,
    /// The last run's report, for readers that must not wait for a run in progress.
    last: Arc<Mutex<Option<RecheckReport>>>,
}

impl HealthRecheck {
    /// Starts the periodic runs (the first at once) for the node `node_id`.
    pub fn start(db: DatabaseConnection, node_id: i32, probe: EncoderProbe, every: Duration, clock: Clock) -> Self {
        let recheck = HealthRecheck {
            db,
            node_id,
            node_name: probe.facts.name.clone(),
            every,
            clock,
            probe: Arc::new(probe),
            running: Arc::default(),
            last: Arc::default(),
        };
        actix::spawn(recheck.clone().run_forever());
        recheck
    }

    fn every(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.every).unwrap_or(chrono::Duration::hours(1))
    }

    /// The last run's report; `None` before the first run ended.
    pub fn last(&self) -> Option<RecheckReport> {
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The library paths the last run could not read (none before the first run).
    pub fn unreadable_paths(&self) -> Vec<String> {
        self.last().map(|report| health::unreadable_paths(&report.checks)).unwrap_or_default()
    }

    async fn run_forever(self) {
        let mut look = tokio::time::interval(LOOK_EVERY);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A run that failed (the database did not answer) counts as a run for the timing:
        // it is tried again after the interval, not every second.
        let mut attempted: Option<DateTime<Utc>> = None;
        loop {
            look.tick().await;
            let last = self.last().map(|report| report.checked_at).max(attempted);
            let now = self.clock.now();
            if !health::recheck_due(last, now, self.every()) {
                continue;
            }
            attempted = Some(now);
            if let Err(e) = self.run().await {
                tracing::warn!(error = %e, "the health re-check could not run");
            }
        }
    }

    /// Runs every check now, writes the node's status, and writes `health.changed` when what
    /// fails changed since the last run. Answers the run's report.
    pub async fn run(&self) -> Result<RecheckReport, RepoError> {
        let mut previous = self.running.lock().await;
        let libraries = repo::libraries::list(&self.db).await?;
        let mut paths: Vec<String> =
            libraries.iter().filter(|l| l.enabled).flat_map(repo::libraries::paths_of).collect();
        paths.sort();
        paths.dedup();
        let mut checks = health::node_checks(&read_paths(paths).await);
        let mut encoders: Vec<String> = libraries.iter().filter(|l| l.enabled).map(|l| l.encoder.clone()).collect();
        encoders.sort();
        encoders.dedup();
        let (encoder_checks, row_written) = self.encoder_checks(&encoders).await?;
        checks.extend(encoder_checks);
        let checked_at = self.clock.now();

        // The status is written when the paths it names changed (or the row was written
        // again, which makes it ONLINE): between, the node's heartbeat keeps it with the
        // load, so a run leaves a status others set alone.
        let unreadable = health::unreadable_paths(&checks);
        let before = previous.as_deref().map(health::unreadable_paths).unwrap_or_default();
        if unreadable != before || row_written {
            let (status, reason) = own_status(crate::host::load1(), &unreadable);
            repo::nodes::set_status(&self.db, self.node_id, status, reason).await?;
        }

        let news = health::recheck_news(previous.as_deref(), &checks);
        if let Some((before, now)) = news {
            tracing::info!(%before, %now, unreadable = ?unreadable, "the node's own health checks changed");
            let fields = serde_json::json!({ "health": {
                "previous": before,
                "overall": now,
                "node": self.node_name,
                "checks": checks,
            }});
            repo::notifications::enqueue(&self.db, NotifyEvent::HealthChanged, fields).await?;
        }
        let report = RecheckReport {
            overall: health::worst(checks.iter().map(|c| c.level)),
            checks: checks.clone(),
            checked_at,
            next_at: checked_at + self.every(),
            changed: news.is_some(),
        };
        *previous = Some(checks);
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(report.clone());
        Ok(report)
    }
}

impl HealthRecheck {
    /// The checks of the encoders `used`; where one opens on no node that is up, this node's
    /// `condense-media` is asked again, and what opens now is written to its row first.
    /// Answers whether the row was written.
    async fn encoder_checks(&self, used: &[String]) -> Result<(Vec<NodeCheck>, bool), RepoError> {
        let checks = health::encoder_checks(used, &up_nodes(&repo::nodes::list(&self.db).await?));
        let missing = health::missing_encoders(&checks);
        if missing.is_empty() {
            return Ok((checks, false));
        }
        match crate::media::worker::capabilities(&self.probe.transcoder).await {
            Ok(found) if missing.iter().any(|e| found.encoders.contains(e)) => {
                tracing::info!(encoders = ?found.encoders, "an encoder that did not open before opens on this node now");
                let facts = NodeFacts { encoders: found.encoders, ..self.probe.facts.clone() };
                repo::nodes::upsert(&self.db, facts).await?;
                Ok((health::encoder_checks(used, &up_nodes(&repo::nodes::list(&self.db).await?)), true))
            }
            Ok(_) => Ok((checks, false)),
            Err(e) => {
                tracing::warn!(error = %e.message, "could not ask again which encoders open on this node");
                Ok((checks, false))
            }
        }
    }
}

/// Each node that is not OFFLINE, with the encoders that opened on it.
fn up_nodes(nodes: &[entities::node::Model]) -> Vec<(String, Vec<String>)> {
    nodes
        .iter()
        .filter(|n| NodeStatus::from(n.status) != NodeStatus::Offline)
        .map(|n| (n.name.clone(), serde_json::from_value(n.encoders.clone()).unwrap_or_default()))
        .collect()
}

/// The main node's status from this machine's load and the library paths it cannot read:
/// what its own heartbeat and every run here write.
pub fn own_status(load1: f64, unreadable: &[String]) -> (NodeStatus, Option<String>) {
    let ratio = health::load_ratio(load1, crate::host::cores());
    node_rules::node_status(0, 60, ratio, 0, unreadable)
}

/// Lists each path's folder and reads its filesystem, on a blocking thread, within
/// `READ_LIMIT` (past it, every path is unreadable for this run).
async fn read_paths(paths: Vec<String>) -> Vec<PathReading> {
    let given = paths.clone();
    let read = tokio::task::spawn_blocking(move || paths.iter().map(String::as_str).map(read_path).collect::<Vec<_>>());
    match tokio::time::timeout(READ_LIMIT, read).await {
        Ok(Ok(readings)) => readings,
        Ok(Err(_)) | Err(_) => given
            .into_iter()
            .map(|path| PathReading {
                path,
                readable: Err(format!("no answer within {} s", READ_LIMIT.as_secs())),
                used_percent: None,
            })
            .collect(),
    }
}

fn read_path(path: &str) -> PathReading {
    let at = std::path::Path::new(path);
    // Listing the folder is what a scan does first: a folder that exists but cannot be
    // listed (its permissions, a stale mount) fails here as it would there.
    let readable = std::fs::read_dir(at).map(|_| ()).map_err(|e| e.to_string());
    let used_percent = crate::host::disk::space(at).ok().map(|space| space.used_percent());
    PathReading { path: path.to_string(), readable, used_percent }
}
