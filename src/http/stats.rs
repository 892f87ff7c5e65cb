//! The dashboard's live panels: queue statistics, health checks, and the whole dashboard
//! (health, this machine, queue, active jobs, nodes).

use std::collections::BTreeSet;

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use entities::job;
use sea_orm::DatabaseConnection;

use super::auth::AuthUser;
use super::views::{self, CpuView, DashboardView, DiskView, HealthInputs, HealthView, JobView, MemoryView, SystemView};
use crate::domain::health;
use crate::domain::job::JobStatus;
use crate::domain::stats::{self, QueueStats, RunningJob};
use crate::error::AppError;
use crate::host::gpu::GpuInfo;
use crate::host::memory_trend::{self, MemorySample};
use crate::host::{self, disk};
use crate::http::coalesce;
use crate::http::state::AppState;
use crate::repo;

/// Queue statistics
///
/// Jobs per status (one count per status), stalled running jobs, active workers, throughput
/// over the last 24 hours and the estimated time to work off the queue.
///
/// GET /queue/stats
#[utoipa::path(
    get,
    operation_id = "queue_stats",
    path = "/queue/stats",
    tag = "statistics",
    responses(
        (status = 200, description = "OK", body = QueueStats),
    ),
)]
pub async fn queue(_user: AuthUser, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    let db = state.db.clone();
    coalesce::shared_json(&state.reads.queue_stats, (), move || {
        let db = db.clone();
        async move { Ok(queue_and_running(&db, Utc::now()).await?.0) }
    })
    .await
}

/// Health checks only
///
/// GET /system/dashboard/health: always answers; checks the database cannot feed are left
/// out while it is down (its own check is then critical).
#[utoipa::path(
    get,
    operation_id = "health_checks",
    path = "/system/dashboard/health",
    tag = "statistics",
    responses(
        (status = 200, description = "OK", body = HealthView),
    ),
)]
pub async fn health(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<HealthView>, AppError> {
    let now = Utc::now();
    let machine = machine(&state, None).await?;
    let connected = repo::ping(&state.db).await;
    let stuck = match repo::jobs::in_statuses(&state.db, &RUNNING).await {
        Ok(running) => Some(stats::stuck_count(running.iter().map(RunningJob::from), now)),
        Err(error) => {
            tracing::warn!(%error, "health: running jobs unreadable");
            None
        }
    };
    let nodes =
        repo::nodes::list(&state.db).await.inspect_err(|error| tracing::warn!(%error, "health: nodes unreadable"));
    Ok(web::Json(views::health(&HealthInputs {
        load1: machine.load1,
        cores: machine.cores,
        memory_percent: machine.memory_percent(),
        database_connected: connected,
        stuck_jobs: stuck,
        nodes: nodes.as_deref().ok(),
    })))
}

/// The complete dashboard, all panels
///
/// Health checks, this node's machine (CPU, memory with its trend, disks of the library
/// paths, NVIDIA GPUs), queue statistics, the ANALYZING and ENCODING jobs, and the nodes.
///
/// GET /system/dashboard
#[utoipa::path(
    get,
    path = "/system/dashboard",
    tag = "statistics",
    responses(
        (status = 200, description = "OK", body = DashboardView),
    ),
)]
pub async fn dashboard(_user: AuthUser, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    // Every open dashboard polls this: the ones that wait together share one reading.
    let shared = state.clone();
    coalesce::shared_json(&state.reads.dashboard, (), move || {
        let state = shared.clone();
        async move { dashboard_view(&state).await }
    })
    .await
}

async fn dashboard_view(state: &AppState) -> Result<DashboardView, AppError> {
    let now = Utc::now();
    let libraries = repo::libraries::list(&state.db).await?;
    let paths: BTreeSet<String> = libraries.iter().flat_map(repo::libraries::paths_of).collect();
    let machine = machine(state, Some(paths.into_iter().collect())).await?;
    let connected = repo::ping(&state.db).await;
    let (queue, running) = queue_and_running(&state.db, now).await?;
    let nodes = repo::nodes::list(&state.db).await?;
    let health = views::health(&HealthInputs {
        load1: machine.load1,
        cores: machine.cores,
        memory_percent: machine.memory_percent(),
        database_connected: connected,
        stuck_jobs: Some(queue.stalled),
        nodes: Some(&nodes),
    });
    let mut node_views = views::nodes(&nodes);
    super::schedule::fill_windows(state, &mut node_views).await?;
    super::nodes::fill_sight(state, &mut node_views).await?;
    Ok(DashboardView {
        health,
        system: machine.into_view(),
        queue,
        active_jobs: running.iter().map(|job| JobView::live(job, &state.runtime.lifecycle.transfers)).collect(),
        nodes: node_views,
    })
}

const RUNNING: [JobStatus; 2] = [JobStatus::Analyzing, JobStatus::Encoding];

/// Queue statistics, and the running jobs they were computed from.
pub(super) async fn queue_and_running(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
) -> Result<(QueueStats, Vec<job::Model>), AppError> {
    let counts = repo::jobs::count_by_status(db).await?;
    let running = repo::jobs::in_statuses(db, &RUNNING).await?;
    let window = chrono::Duration::hours(stats::THROUGHPUT_WINDOW_HOURS);
    let recent = repo::stats::completed_after(db, now - window).await?;
    let stuck = stats::stuck_count(running.iter().map(RunningJob::from), now);
    // A file in the batch probe after a scan is ANALYZING without a node's lease.
    let working = running.iter().filter(|job| job.lease_id.is_some()).count() as u64;
    Ok((stats::queue_stats(&counts, stuck, working, recent), running))
}

/// What was read of this machine.
struct Machine {
    load1: f64,
    cores: usize,
    memory_used: u64,
    memory_total: u64,
    memory_trend: Vec<MemorySample>,
    disks: Vec<DiskView>,
    gpus: Vec<GpuInfo>,
}

impl Machine {
    fn memory_percent(&self) -> f64 {
        memory_trend::percent(self.memory_used, self.memory_total)
    }

    fn into_view(self) -> SystemView {
        let memory_percent = self.memory_percent();
        SystemView {
            cpu: CpuView {
                load1: self.load1,
                cores: self.cores,
                load_ratio: health::load_ratio(self.load1, self.cores),
            },
            memory: MemoryView {
                used: self.memory_used,
                total: self.memory_total,
                percent: memory_percent,
                trend: self.memory_trend,
            },
            disks: self.disks,
            gpus: self.gpus,
        }
    }
}

/// Load, memory (offered to the trend), and with `library_paths` also their disks and the
/// GPUs. sysinfo, statvfs and NVML block, so this runs on a blocking thread.
async fn machine(state: &AppState, library_paths: Option<Vec<String>>) -> Result<Machine, AppError> {
    let trend = state.memory_trend.clone();
    let machine = web::block(move || {
        let (memory_used, memory_total) = host::memory();
        let sample = MemorySample { at: Utc::now(), percent: memory_trend::percent(memory_used, memory_total) };
        let memory_trend = memory_trend::offer(&trend, sample);
        let (disks, gpus) = match library_paths {
            Some(paths) => (disks(paths), host::gpu::gpus()),
            None => (Vec::new(), Vec::new()),
        };
        Machine { load1: host::load1(), cores: host::cores(), memory_used, memory_total, memory_trend, disks, gpus }
    })
    .await?;
    Ok(machine)
}

/// Space of each library path; a path that cannot be read (gone, unmounted) is left out.
fn disks(paths: Vec<String>) -> Vec<DiskView> {
    paths
        .into_iter()
        .filter_map(|path| match disk::space(std::path::Path::new(&path)) {
            Ok(space) => Some(DiskView::new(path, &space)),
            Err(error) => {
                tracing::debug!(%path, %error, "library path unreadable for disk usage");
                None
            }
        })
        .collect()
}
