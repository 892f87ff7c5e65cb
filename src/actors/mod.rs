//! The actor system of a node: the event bus, the local `NodeSupervisor` with its
//! `JobSupervisor`s, the `Scheduler`, and the `LibrarySupervisor`s.

pub mod agent;
pub mod bus;
pub mod cluster;
pub mod job;
pub mod library;
pub mod lifecycle;
pub mod node;
pub mod protocol;
pub mod scheduler;
pub mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use self::bus::EventBus;
use self::job::NodeEnv;
use self::library::Libraries;
use self::lifecycle::{EventContext, Lifecycle, LifecycleError};
use self::node::{NodeSupervisor, SetScheduler};
use self::scheduler::{NodeHandle, Scheduler};
use crate::domain::job::{JobEvent, JobStatus};
use crate::repo::jobs::{self, JobChange};

/// How a node's actors are set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub node_name: String,
    pub node_id: i32,
    /// The executable started as the `transcode` child.
    pub transcoder: PathBuf,
    pub max_jobs: usize,
    pub segment_seconds: f64,
    /// How long a new file must stop growing before it becomes a job.
    pub settle: Duration,
    pub throttle_ms_per_frame: u64,
    /// Base time limit of a validation or verification child.
    pub analysis_timeout: Duration,
    pub license_public_key: String,
    /// The last run of this node did not stop cleanly (see `host::clean_stop`): jobs it left
    /// running count a crash.
    pub previous_run_crashed: bool,
    /// How often the node refreshes its own row (load, memory, jobs); `None`: never.
    pub own_heartbeat: Option<Duration>,
}

/// Addresses of a running node's actors.
#[derive(Clone)]
pub struct Runtime {
    pub bus: Addr<EventBus>,
    pub lifecycle: Lifecycle,
    pub node: Addr<NodeSupervisor>,
    pub scheduler: Addr<Scheduler>,
    pub libraries: Addr<Libraries>,
}

/// Jobs left ANALYZING or ENCODING by a crash or restart go back to QUEUED, to continue
/// from their partial output. After a crash (`crashed`: the last run did not stop cleanly)
/// each counts it, so a file that brings the node down fails after a few tries.
pub async fn recover_orphans(lifecycle: &Lifecycle, crashed: bool) -> Result<u64, LifecycleError> {
    let mut recovered = 0;
    for job in jobs::in_statuses(&lifecycle.db, &[JobStatus::Analyzing, JobStatus::Encoding]).await? {
        let ctx = EventContext {
            node: job.node_name.clone(),
            detail: Some(serde_json::json!({"reason": "the node restarted while the job ran"})),
            failure_detail: None,
        };
        let (job, outcome) = lifecycle.apply(job.id, JobEvent::Orphaned { crashed }, JobChange::default(), ctx).await?;
        lifecycle.carry_out_offline(&job, &outcome).await;
        recovered += 1;
    }
    if recovered > 0 {
        tracing::info!(jobs = recovered, "requeued jobs orphaned by a restart");
    }
    Ok(recovered)
}

/// The main node's own row in the nodes table: load, memory, running jobs and status,
/// refreshed like a linked node's heartbeat.
fn keep_own_facts_fresh(db: DatabaseConnection, node_id: i32, node: Addr<NodeSupervisor>, period: Duration) {
    actix::spawn(async move {
        let mut every = tokio::time::interval(period);
        loop {
            every.tick().await;
            let running = node.send(node::RunningJobs).await.map(|r| r.len()).unwrap_or(0);
            let (load1, (used, _)) = (crate::host::load1(), crate::host::memory());
            let active = i32::try_from(running).unwrap_or(i32::MAX);
            let memory = i64::try_from(used).unwrap_or(i64::MAX);
            if crate::repo::nodes::record_heartbeat(&db, node_id, load1, memory, active).await.is_err() {
                continue;
            }
            let ratio = crate::domain::health::load_ratio(load1, crate::host::cores());
            let (status, reason) = crate::domain::node::node_status(0, 60, ratio, 0, &[]);
            let _ = crate::repo::nodes::set_status(&db, node_id, status, reason).await;
        }
    });
}

/// Starts the node's actors (after start-up recovery).
pub async fn start(db: DatabaseConnection, config: RuntimeConfig) -> Result<Runtime, LifecycleError> {
    let bus = EventBus::default().start();
    let lifecycle = Lifecycle { db: db.clone(), bus: bus.clone() };
    recover_orphans(&lifecycle, config.previous_run_crashed).await?;
    let env = Arc::new(NodeEnv {
        store: Arc::new(store::DbStore { lifecycle: lifecycle.clone() }),
        node_name: config.node_name.clone(),
        node_id: config.node_id,
        transcoder: config.transcoder.clone(),
        segment_seconds: config.segment_seconds,
        throttle_ms_per_frame: config.throttle_ms_per_frame,
        analysis_timeout: config.analysis_timeout,
    });
    let node = NodeSupervisor::new(env, config.max_jobs).start();
    // A main node with MAX_JOBS=0 coordinates only; its node takes no jobs.
    let handles = if config.max_jobs > 0 {
        vec![NodeHandle::local(config.node_name.clone(), config.node_id, &node)]
    } else {
        Vec::new()
    };
    let scheduler = Scheduler::new(lifecycle.clone(), handles, config.license_public_key.clone()).start();
    node.do_send(SetScheduler(scheduler.clone().recipient()));
    let libraries = Libraries::new(db.clone(), scheduler.clone().recipient(), config.settle).start();
    if let Some(every) = config.own_heartbeat {
        keep_own_facts_fresh(db, config.node_id, node.clone(), every);
    }
    sweep_expired_leases(lifecycle.clone(), config.node_id, node.clone(), SWEEP_EVERY);
    Ok(Runtime { bus, lifecycle, node, scheduler, libraries })
}

/// How often the main node looks for running jobs nobody holds any more.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Jobs of this node whose lease expired while no supervisor here runs them (one stopped on
/// a database error, say) go back to the queue; a linked node's are requeued when its
/// heartbeats stop naming them (see `cluster`).
fn sweep_expired_leases(lifecycle: Lifecycle, node_id: i32, node: Addr<NodeSupervisor>, period: Duration) {
    actix::spawn(async move {
        let mut every = tokio::time::interval(period);
        loop {
            every.tick().await;
            let Ok(expired) = jobs::expired_leases(&lifecycle.db, node_id, chrono::Utc::now()).await else { continue };
            if expired.is_empty() {
                continue;
            }
            let Ok(running) = node.send(node::RunningJobs).await else { continue };
            for job in expired {
                if running.iter().any(|r| r.job_id == job.id) {
                    continue;
                }
                let ctx = EventContext {
                    node: job.node_name.clone(),
                    detail: Some(serde_json::json!({"reason": "its lease expired and no supervisor holds it"})),
                    failure_detail: None,
                };
                // The lease is part of the compare-and-set: a job started again meanwhile
                // (under a new lease) is left alone.
                let (id, lease) = (job.id, job.lease_id.clone());
                let set = JobChange::default();
                // Our supervisor gave up on it (a database error): not the file's doing.
                let orphaned = JobEvent::Orphaned { crashed: false };
                match lifecycle.apply_as(id, lease.as_deref(), orphaned, set, ctx).await {
                    Ok(_) => tracing::warn!(job_id = id, "requeued a job whose lease expired with nobody holding it"),
                    Err(e) => tracing::debug!(job_id = id, error = %e, "the sweeper left a job"),
                }
            }
        }
    });
}
