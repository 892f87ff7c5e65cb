//! The actor system of a node, started in one place (`start_node`) for either role: on a
//! main node the event bus, the local `NodeSupervisor` with its `JobSupervisor`s, the
//! `Scheduler`, the `LibrarySupervisor`s and the cluster's link watch; on a linked node the
//! `Agent` (its link to the main node) and its `NodeSupervisor`.

pub mod agent;
pub mod bus;
pub mod cluster;
pub mod forecast;
pub mod health;
pub mod health_batch;
pub mod job;
pub mod library;
pub mod library_runs;
pub mod lifecycle;
pub mod node;
pub mod notifier;
pub mod prober;
pub mod protocol;
pub mod recheck;
pub mod regrab;
pub mod scheduler;
pub mod store;
pub mod teardown;
pub mod transfer;
pub mod work_dir;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use self::agent::{Agent, AgentConfig, RemoteStore, SetNode};
use self::bus::EventBus;
use self::job::NodeEnv;
use self::library::Libraries;
use self::lifecycle::{EventContext, Lifecycle, LifecycleError};
use self::node::{NodeSupervisor, SetScheduler};
use self::protocol::Frame;
use self::scheduler::{NodeHandle, Scheduler};
use crate::domain::job::JobStatus;
use crate::domain::node::NodeRole;
use crate::domain::placement::{takes_transfers, SharedStorage};
use crate::domain::segments::Parallelism;
use crate::host::memory_trend::SharedMemoryTrend;
use crate::repo::jobs;
use crate::repo::nodes::NodeFacts;
use crate::repo::RepoError;

/// How a node is set up: what it is, how it encodes, and its role's own settings.
pub struct NodeConfig {
    pub name: String,
    pub host: HostFacts,
    /// Jobs this node encodes at once; 0: none (a main node that only coordinates).
    pub max_jobs: usize,
    /// The executable started as the `transcode` and `media` children.
    pub transcoder: PathBuf,
    pub segment_seconds: f64,
    /// `PARALLEL_SEGMENTS`: encoder sessions per job (see `domain::segments::sessions`).
    pub parallel_segments: Parallelism,
    pub throttle_ms_per_frame: u64,
    /// Base time limit of a validation or verification child.
    pub analysis_timeout: Duration,
    pub role: RoleConfig,
}

/// What a node tells about its machine (the nodes table, a linked node's registration).
#[derive(Debug, Clone, Default)]
pub struct HostFacts {
    pub address: String,
    pub gpu: Option<String>,
    pub cores: i32,
    pub memory_total: i64,
    /// The encoders that really open on this machine.
    pub encoders: Vec<String>,
    /// The hardware it can decode on.
    pub decoders: Vec<String>,
}

/// The settings only one role has.
pub enum RoleConfig {
    Main(MainConfig),
    Linked(LinkedConfig),
}

/// A main node: the database, the queue, the libraries and the cluster's links.
pub struct MainConfig {
    pub db: DatabaseConnection,
    /// How long a new file must stop growing before it becomes a job.
    pub settle: Duration,
    /// The last run of this node did not stop cleanly (see `host::clean_stop`): jobs it left
    /// running count a crash.
    pub previous_run_crashed: bool,
    /// How often the node refreshes its own row (load, memory, jobs); `None`: never.
    pub own_heartbeat: Option<Duration>,
    /// Heartbeat period and timeout told to linked nodes.
    pub heartbeat: Duration,
    pub node_timeout: Duration,
    pub license_public_key: String,
    /// What the encoding windows and the health re-check read the time from (the system's;
    /// a test's by hand).
    pub clock: crate::host::clock::Clock,
    /// `HEALTH_RECHECK_MINUTES`: how long after a run the node's own health checks run again
    /// (`recheck`).
    pub health_recheck: Duration,
}

/// A linked node: where its main node is and what it presents there.
pub struct LinkedConfig {
    pub main_url: String,
    /// CLUSTER_TOKEN, to enroll; `None` on a node that links with its own credential.
    pub cluster_token: Option<String>,
    /// The credential kept in DATA_DIR from its enrollment.
    pub credential: Option<String>,
    /// Where the identity the main node gives this node is kept.
    pub data_dir: PathBuf,
    /// The identity kept there from an earlier registration.
    pub identity: Option<String>,
    /// TRANSFER_MBPS: the cap of this node's transfers with the main node (`actors::transfer`),
    /// 0 for none.
    pub transfer_mbps: u32,
    /// Whether a copy is read as it downloads (`CONDENSE_DOWNLOAD_AHEAD`, issue 39).
    pub download_ahead: bool,
    /// Whether a job's output goes up in parts while it encodes (`CONDENSE_UPLOAD_PARTS`).
    pub upload_parts: bool,
    /// Whether a span without the share fetches only what it reads (`CONDENSE_SPAN_RANGES`).
    pub span_ranges: bool,
    /// WORK_DIR (made ready by the caller: `config::prepare_work_dir`).
    pub work_dir: PathBuf,
    /// `SHARED_STORAGE`: whether it takes jobs of libraries it does not see, by transfer.
    pub shared_storage: SharedStorage,
}

/// A running node: what its listeners and its shutdown need.
pub enum Node {
    Main(Box<MainNode>),
    Linked(LinkedNode),
}

/// A running main node.
#[derive(Clone)]
pub struct MainNode {
    pub db: DatabaseConnection,
    pub name: String,
    pub runtime: Runtime,
    pub cluster: cluster::ClusterConfig,
    /// This node's memory use over the last 2 hours, sampled in the background.
    pub memory_trend: SharedMemoryTrend,
    /// The clock the encoding windows are read with.
    pub clock: crate::host::clock::Clock,
}

/// A running linked node.
pub struct LinkedNode {
    pub name: String,
    pub node: Addr<NodeSupervisor>,
    pub agent: Addr<Agent>,
}

impl Node {
    pub fn name(&self) -> &str {
        match self {
            Node::Main(main) => &main.name,
            Node::Linked(linked) => &linked.name,
        }
    }

    /// Running encodes finish their segment and stop; they continue after the next start.
    pub async fn shutdown(&self) {
        let node = match self {
            Node::Main(main) => &main.runtime.node,
            Node::Linked(linked) => &linked.node,
        };
        let _ = node.send(node::Shutdown).await;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Repo(#[from] RepoError),
    #[error("{0}")]
    Lifecycle(#[from] LifecycleError),
}

/// Starts a node's actors, for either role: the one wiring that `condense serve`, the
/// tests and the benchmarks share.
pub async fn start_node(config: NodeConfig) -> Result<Node, StartError> {
    let NodeConfig {
        name,
        host,
        max_jobs,
        transcoder,
        segment_seconds,
        parallel_segments,
        throttle_ms_per_frame,
        analysis_timeout,
        role,
    } = config;
    let env = |store: Arc<dyn store::JobStore>,
               node_id: i32,
               transfer: Option<Arc<transfer::TransferSetup>>,
               not_here: Option<crate::host::sight::NotHere>| {
        Arc::new(NodeEnv {
            store,
            node_name: name.clone(),
            node_id,
            transcoder: transcoder.clone(),
            segment_seconds,
            parallel_segments,
            // What the transcoders may run on (this process's CPU affinity, which they
            // inherit), not the cores the node reports.
            cores: u32::try_from(crate::host::cores()).unwrap_or(1),
            max_jobs: u32::try_from(max_jobs).unwrap_or(1),
            throttle_ms_per_frame,
            analysis_timeout,
            transfer,
            not_here,
        })
    };
    match role {
        RoleConfig::Main(main) => {
            let db = main.db;
            let facts = NodeFacts {
                name: name.clone(),
                role: NodeRole::Main,
                address: host.address,
                gpu: host.gpu,
                cores: host.cores,
                memory_total: host.memory_total,
                max_jobs: i32::try_from(max_jobs).unwrap_or(i32::MAX),
                encoders: host.encoders,
                decoders: host.decoders,
            };
            let row = crate::repo::nodes::upsert(&db, facts.clone()).await?;
            // No link is open yet: linked nodes recorded as up are not.
            cluster::mark_linked_nodes_offline(&db).await;
            let bus = EventBus::default().start();
            let lifecycle = Lifecycle {
                db: db.clone(),
                bus: bus.clone(),
                transfers: Default::default(),
                span_claims: Default::default(),
            };
            let kept = recover_orphans(&lifecycle, main.previous_run_crashed, row.id).await?;
            let store = Arc::new(store::DbStore { lifecycle: lifecycle.clone() });
            let jobs = env(store, row.id, None, None);
            let node = NodeSupervisor::new(jobs.clone(), max_jobs).start();
            // A main node with MAX_JOBS=0 coordinates only; its node takes no jobs.
            let handles = if max_jobs > 0 { vec![NodeHandle::local(name.clone(), row.id, &node)] } else { Vec::new() };
            let scheduler =
                Scheduler::new(lifecycle.clone(), handles, main.license_public_key.clone(), main.clock.clone())
                    .with_helpers(parallel_segments != crate::domain::segments::Parallelism::Off)
                    .start();
            node.do_send(SetScheduler(scheduler.clone().recipient()));
            let prober = prober::Prober::start(
                lifecycle.clone(),
                transcoder.clone(),
                analysis_timeout,
                scheduler.clone().recipient(),
            );
            let links = cluster::Links::default();
            let libraries = Libraries::new(db.clone(), scheduler.clone().recipient(), prober.clone(), main.settle)
                .asking(links.clone())
                .start();
            let probe = recheck::EncoderProbe { transcoder: transcoder.clone(), facts };
            let recheck =
                recheck::HealthRecheck::start(db.clone(), row.id, probe, main.health_recheck, main.clock.clone());
            if let Some(every) = main.own_heartbeat {
                keep_own_facts_fresh(db.clone(), row.id, node.clone(), recheck.clone(), every);
            }
            sweep_expired_leases(lifecycle.clone(), row.id, node.clone(), SWEEP_EVERY);
            let cluster = cluster::ClusterConfig {
                heartbeat: main.heartbeat,
                timeout: main.node_timeout,
                license_public_key: main.license_public_key,
                clock: main.clock.clone(),
                main_node_name: name.clone(),
                links,
                folders: Default::default(),
            };
            actix::spawn(cluster::watch_links(lifecycle.clone(), cluster.clone()));
            if !kept.is_empty() {
                let grace = crate::domain::node::relink_grace(main.node_timeout);
                let crashed = main.previous_run_crashed;
                actix::spawn(cluster::requeue_unclaimed(lifecycle.clone(), kept, grace, crashed));
            }
            actix::spawn(notifier::deliver_forever(db.clone()));
            actix::spawn(notifier::watch_disks(db.clone()));
            actix::spawn(notifier::watch_health(db.clone()));
            let memory_trend = SharedMemoryTrend::default();
            // Sampled in the background, so the trend has no gaps while nobody watches.
            actix::spawn(crate::host::memory_trend::sample_forever(memory_trend.clone()));
            // Nothing runs a forecast left running by the last stop.
            crate::repo::forecasts::interrupt_running(&db).await?;
            let forecasts = forecast::Forecasts::new(db.clone(), transcoder.clone());
            // Nor a health check.
            crate::repo::health::interrupt_running(&db).await?;
            let health = health::HealthChecks::new(
                db.clone(),
                transcoder.clone(),
                analysis_timeout,
                node.clone(),
                row.id,
                max_jobs > 0,
                main.clock.clone(),
            )
            .with_cluster(name.clone(), cluster.links.clone());
            health.schedule_forever();
            let runtime = Runtime {
                bus,
                lifecycle,
                node,
                jobs,
                remote_commits: Default::default(),
                scheduler,
                libraries,
                prober,
                forecasts,
                health,
                recheck,
            };
            let clock = main.clock.clone();
            Ok(Node::Main(Box::new(MainNode { db, name, runtime, cluster, memory_trend, clock })))
        }
        RoleConfig::Linked(linked) => {
            let transfer = takes_transfers(linked.shared_storage);
            // What a crash or a kill left in WORK_DIR stays for the job to come back here
            // (`work_dir`, once the node is linked); a node that takes no file by transfer
            // now has no use for it.
            if !transfer {
                let work_dir = linked.work_dir.clone();
                match tokio::task::spawn_blocking(move || transfer::clear_job_dirs(&work_dir)).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => tracing::info!(folders = n, "removed the job folders a stopped run left in WORK_DIR"),
                    Ok(Err(e)) => tracing::warn!(error = %e, "could not empty WORK_DIR of stale job folders"),
                    Err(e) => tracing::warn!(error = %e, "could not empty WORK_DIR of stale job folders"),
                }
            }
            let work_dir = linked.work_dir.clone();
            let free = tokio::task::spawn_blocking(move || agent::work_dir_free_bytes(&work_dir)).await.ok().flatten();
            let register = Frame::Register {
                name: name.clone(),
                address: host.address,
                cores: host.cores,
                memory_total: host.memory_total,
                gpu: host.gpu,
                encoders: host.encoders,
                decoders: host.decoders,
                max_jobs: i32::try_from(max_jobs).unwrap_or(i32::MAX),
                version: env!("CARGO_PKG_VERSION").to_string(),
                identity: linked.identity,
                shared_storage: Some(linked.shared_storage),
                transfer,
                work_dir_free_bytes: free,
                health_checks: true,
            };
            let bearer = transfer::Bearer::default();
            let setup = transfer.then(|| {
                Arc::new(transfer::TransferSetup {
                    main_url: linked.main_url.clone(),
                    bearer: bearer.clone(),
                    mbps: linked.transfer_mbps,
                    ahead: linked.download_ahead,
                    parts: linked.upload_parts,
                    ranges: linked.span_ranges,
                    work_dir: linked.work_dir.clone(),
                    span_sources: Default::default(),
                })
            });
            let not_here = crate::host::sight::NotHere::default();
            let agent = Agent::new(AgentConfig {
                main_url: linked.main_url,
                bearer,
                cluster_token: linked.cluster_token,
                credential: linked.credential,
                register,
                data_dir: linked.data_dir,
                work_dir: linked.work_dir.clone(),
                transfer,
                not_here: not_here.clone(),
            })
            .start();
            let store = Arc::new(RemoteStore { agent: agent.clone() });
            let node =
                NodeSupervisor::new(env(store, 0, setup, Some(not_here)), max_jobs).taking_transfers(transfer).start();
            agent.do_send(SetNode(node.clone()));
            if transfer {
                actix::spawn(work_dir::keep_work_dir(agent.clone(), node.clone(), linked.work_dir));
            }
            Ok(Node::Linked(LinkedNode { name, node, agent }))
        }
    }
}

/// Addresses of a running node's actors.
#[derive(Clone)]
pub struct Runtime {
    pub bus: Addr<EventBus>,
    pub lifecycle: Lifecycle,
    pub node: Addr<NodeSupervisor>,
    /// What this node's jobs share: the commit of an output a linked node uploaded runs
    /// with it (`job::commit_remote`).
    pub jobs: Arc<NodeEnv>,
    /// The uploaded outputs being committed.
    pub remote_commits: job::remote::RemoteCommits,
    pub scheduler: Addr<Scheduler>,
    pub libraries: Addr<Libraries>,
    /// The probe after a scan: what registers a file outside a scan (an import) wakes it.
    pub prober: prober::Prober,
    pub forecasts: forecast::Forecasts,
    /// Library health checks (issue 38), on this node's idle slots.
    pub health: health::HealthChecks,
    /// The node's own health checks, run again on their own and on demand.
    pub recheck: recheck::HealthRecheck,
}

/// Jobs left ANALYZING or ENCODING by a crash or restart go back to QUEUED, to continue
/// from their partial output. After a crash (`crashed`: the last run did not stop cleanly)
/// each counts it, so a file that brings the node down fails after a few tries. Jobs the
/// batch probe held (ANALYZING without a lease) are found files again (PENDING), for the
/// probe that starts with the node: no attempt ran, so nothing is counted.
///
/// A job a linked node holds (its `node_id` another than `own`, this node's row) is left to
/// it: the main node restarted, not that node, which may be moving or encoding the job
/// still. Its link's heartbeats say so (`cluster` keeps what the node reports and requeues
/// the rest), and the jobs answered here go back to the queue if their node does not link
/// again in time (`cluster::requeue_unclaimed`). Unless its output had left the node's
/// hands (`media::transfer::output_beside`): a commit this node did for it, or the node's
/// own, may have been cut short, and the queue's next attempt recovers it, as before.
pub async fn recover_orphans(
    lifecycle: &Lifecycle,
    crashed: bool,
    own: i32,
) -> Result<Vec<entities::job::Model>, LifecycleError> {
    let found_again = jobs::interrupt_probes(&lifecycle.db, None).await?;
    if found_again > 0 {
        tracing::info!(jobs = found_again, "files whose probe a stop interrupted: to be probed again");
    }
    let (mut recovered, mut kept) = (0, Vec::new());
    for job in jobs::in_statuses(&lifecycle.db, &[JobStatus::Analyzing, JobStatus::Encoding]).await? {
        if job.node_id.is_some_and(|node| node != own) && job.lease_id.is_some() {
            let source = jobs::source_path(&job);
            match tokio::task::spawn_blocking(move || crate::media::transfer::output_beside(&source)).await {
                Ok(Ok(false)) => {
                    tracing::info!(job_id = job.id, node = ?job.node_name, "left to the linked node that holds it");
                    kept.push(job);
                    continue;
                }
                Ok(Ok(true)) => {}
                Ok(Err(e)) => tracing::warn!(job_id = job.id, error = %e, "the job's partial output cannot be read"),
                Err(e) => tracing::warn!(job_id = job.id, error = %e, "the job's partial output cannot be read"),
            }
        }
        let ctx = EventContext {
            node: job.node_name.clone(),
            detail: Some(serde_json::json!({"reason": "the node restarted while the job ran"})),
            failure_detail: None,
        };
        if lifecycle.orphan(&job, crashed, ctx).await? {
            recovered += 1;
        }
    }
    if recovered > 0 {
        tracing::info!(jobs = recovered, "requeued jobs orphaned by a restart");
    }
    Ok(kept)
}

/// The main node's own row in the nodes table: load, memory, running jobs and status,
/// refreshed like a linked node's heartbeat. The library paths it cannot read are those of
/// the last health re-check: a path is not listed every few seconds.
fn keep_own_facts_fresh(
    db: DatabaseConnection,
    node_id: i32,
    node: Addr<NodeSupervisor>,
    recheck: recheck::HealthRecheck,
    period: Duration,
) {
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
            let (status, reason) = recheck::own_status(load1, &recheck.unreadable_paths());
            let _ = crate::repo::nodes::set_status(&db, node_id, status, reason).await;
        }
    });
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
                // A job started again meanwhile (under a new lease) is left alone; our
                // supervisor gave up on it (a database error): not the file's doing.
                match lifecycle.orphan(&job, false, ctx).await {
                    Ok(true) => {
                        tracing::warn!(job_id = job.id, "requeued a job whose lease expired with nobody holding it")
                    }
                    Ok(false) => {}
                    Err(e) => tracing::debug!(job_id = job.id, error = %e, "the sweeper left a job"),
                }
            }
        }
    });
}
