//! The JSON shapes of the API's resources, built from database rows. One place, so the REST
//! endpoints and the WebSocket feed show a job (or anything else) the same way.

use chrono::{DateTime, Utc};
use entities::{audit_entry, job, job_event, library, license, node, user};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::encoding::{RateControlMode, TargetCodec};
use crate::domain::health;
use crate::domain::job::{allowed_actions, FailureCode, JobStatus, Stage, UserAction};
use crate::domain::license::{effective_tier, tier_in_force, Tier, Trial};
use crate::domain::node::{NodeRole, NodeStatus};
use crate::domain::placement::SharedStorage;
use crate::domain::quality::QualityMode;
use crate::domain::schedule::{OnClose, Window};
use crate::domain::stats::{self, QueueStats};
use crate::domain::stream_rules::StreamRules;
use crate::host::disk::DiskSpace;
use crate::host::gpu::GpuInfo;
use crate::host::memory_trend::MemorySample;
use crate::repo;

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: i32,
    pub file_name: String,
    pub file_path: String,
    pub library_id: Option<i32>,
    #[schema(value_type = JobStatus)]
    pub status: String,
    #[schema(value_type = Option<Stage>)]
    pub stage: Option<String>,
    /// Percent, 0 to 100.
    pub progress: f64,
    pub fps: f64,
    /// The node processing (or last processing) the job, by name.
    pub node: Option<String>,
    pub eta_seconds: Option<i64>,
    pub retry_count: i32,
    pub failure_reason: Option<String>,
    #[schema(value_type = Option<FailureCode>)]
    pub failure_code: Option<String>,
    /// Why a SKIPPED job was skipped: "video is already hevc", "output would not be smaller
    /// (projected at 130 % of the source)".
    pub skip_reason: Option<String>,
    /// VMAF mode: the quality (CRF/CQ) the search chose for the file, the output size it
    /// predicted (bytes), and the output's VMAF on the search's samples (mean and 5th
    /// percentile of the frames' scores).
    pub chosen_quality: Option<i32>,
    pub predicted_size: Option<i64>,
    pub vmaf: Option<f64>,
    pub vmaf_p5: Option<f64>,
    /// A two-pass encode (a library's `rateControl` `twoPass` on libx265) while it runs: the
    /// pass it is in, 1 (statistics) or 2 (the encode kept). Its history records each pass
    /// started (event `pass`).
    #[schema(minimum = 1, maximum = 2)]
    pub encode_pass: Option<i32>,
    pub stalled: bool,
    pub source_codec: Option<String>,
    #[schema(value_type = TargetCodec)]
    pub target_codec: String,
    pub source_size: i64,
    pub output_size: Option<i64>,
    /// sourceSize - outputSize once COMPLETED; 0 before.
    pub saved_bytes: i64,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// What a user may do with the job now, each an endpoint `POST /jobs/{id}/<action>`.
    pub actions: Vec<UserAction>,
    /// -10 to 10: QUEUED jobs run highest first, then oldest (`POST /jobs/{id}/priority`).
    pub priority: i32,
    /// While the job's stage is TRANSFERRING (a node that does not see the library moves
    /// its file, issue 39): which way, bytes moved of the total, and the rate. Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<crate::domain::transfer::LiveTransfer>,
}

impl JobView {
    /// The job's view with its live transfer, if it moves a file now.
    pub fn live(job: &job::Model, transfers: &crate::actors::lifecycle::LiveTransfers) -> Self {
        JobView { transfer: transfers.of(job), ..JobView::from(job) }
    }
}

impl From<&job::Model> for JobView {
    fn from(job: &job::Model) -> Self {
        let completed = job.status == JobStatus::Completed;
        let saved_bytes = match (completed, job.output_size) {
            (true, Some(output)) => job.source_size - output,
            _ => 0,
        };
        JobView {
            id: job.id,
            file_name: job.file_name.clone(),
            file_path: job.file_path.clone(),
            library_id: job.library_id,
            status: JobStatus::from(job.status).to_string(),
            stage: job.stage.map(|stage| Stage::from(stage).to_string()),
            progress: job.progress,
            fps: job.fps,
            node: job.node_name.clone(),
            eta_seconds: job.eta_seconds,
            retry_count: job.retry_count,
            failure_reason: job.failure_reason.clone(),
            failure_code: job.failure_code.map(|code| FailureCode::from(code).to_string()),
            skip_reason: job.skip_reason.clone(),
            chosen_quality: job.chosen_quality,
            predicted_size: job.predicted_size,
            vmaf: job.vmaf,
            vmaf_p5: job.vmaf_p5,
            encode_pass: job.encode_pass,
            stalled: job.stalled,
            source_codec: job.source_codec.clone(),
            target_codec: job.target_codec.clone(),
            source_size: job.source_size,
            output_size: job.output_size,
            saved_bytes,
            created_at: job.created_at,
            started_at: job.started_at,
            completed_at: job.completed_at,
            updated_at: job.updated_at,
            actions: allowed_actions(JobStatus::from(job.status)),
            priority: job.priority,
            transfer: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobEventView {
    pub id: i32,
    pub at: DateTime<Utc>,
    pub kind: String,
    #[schema(value_type = Option<JobStatus>)]
    pub from_status: Option<String>,
    #[schema(value_type = Option<JobStatus>)]
    pub to_status: Option<String>,
    pub node_name: Option<String>,
    /// What the event records beyond its kind (a failure's code and reason, a retry's profile, ...).
    pub detail: Option<serde_json::Value>,
}

impl From<&job_event::Model> for JobEventView {
    fn from(event: &job_event::Model) -> Self {
        JobEventView {
            id: event.id,
            at: event.at,
            kind: event.kind.clone(),
            from_status: event.from_status.map(|status| JobStatus::from(status).to_string()),
            to_status: event.to_status.map(|status| JobStatus::from(status).to_string()),
            node_name: event.node_name.clone(),
            detail: event.detail.clone(),
        }
    }
}

/// A job with its history, oldest event first, and the planned spans of its video.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct JobDetailView {
    #[serde(flatten)]
    pub job: JobView,
    pub events: Vec<JobEventView>,
    /// The video's segments as planned units of work, in order; empty for a video encoded
    /// as one span (or before its run has planned them).
    pub segments: Vec<SegmentView>,
}

pub use crate::repo::segments::{SegmentState, SegmentView};

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LibraryView {
    pub id: i32,
    pub name: String,
    pub paths: Vec<String>,
    #[schema(value_type = TargetCodec)]
    pub target_codec: String,
    pub encoder: String,
    /// The CRF/CQ in crf mode; where the search starts in vmaf mode.
    pub quality: i32,
    pub preset: String,
    /// `crf`: every file at `quality`; `vmaf`: each file at the highest CRF/CQ whose VMAF,
    /// measured on samples of it, reaches `targetVmaf`, and skipped when its output is
    /// predicted larger than `maxSizePercent` of it.
    #[schema(value_type = QualityMode)]
    pub quality_mode: String,
    pub target_vmaf: f64,
    pub max_size_percent: i32,
    /// HEVC outputs of Dolby Vision sources (profiles 7 and 8.1) keep it as profile 8.1,
    /// every frame's RPU carried; false: they become their base layer's HDR10.
    pub keep_dolby_vision: bool,
    /// A replaced file keeps the original's modification time (its mode, owner and group
    /// are always kept).
    pub keep_modified_time: bool,
    /// What each file becomes besides its video, and which files are left alone.
    pub stream_rules: StreamRules,
    /// `crf`: the CRF/CQ of `quality` (or the searched one in vmaf mode); `twoPass`: two
    /// passes to an average of `targetBitrateKbps` (libx265; hevc_nvenc's multipass).
    #[schema(value_type = RateControlMode)]
    pub rate_control: String,
    /// kbit/s of video that `twoPass` aims at; kept while `crf` is chosen.
    pub target_bitrate_kbps: Option<i32>,
    /// `off`, `weekly` or `monthly`: a quick health check of every file, inside the
    /// encoding windows.
    #[schema(value_type = crate::domain::library_health::HealthSchedule)]
    pub health_schedule: String,
    /// `notify` (`file.damaged`) or `regrab` (ask Sonarr or Radarr for a new copy, and
    /// notify): what a scheduled health check does about a damaged file.
    #[schema(value_type = crate::domain::library_health::HealthAction)]
    pub health_action: String,
    pub watch: bool,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_scan_at: Option<DateTime<Utc>>,
}

impl From<&library::Model> for LibraryView {
    fn from(library: &library::Model) -> Self {
        LibraryView {
            id: library.id,
            name: library.name.clone(),
            paths: repo::libraries::paths_of(library),
            target_codec: library.target_codec.clone(),
            encoder: library.encoder.clone(),
            quality: library.quality,
            preset: library.preset.clone(),
            quality_mode: library.quality_mode.clone(),
            target_vmaf: library.target_vmaf,
            max_size_percent: library.max_size_percent,
            keep_dolby_vision: library.keep_dolby_vision,
            keep_modified_time: library.keep_modified_time,
            stream_rules: repo::libraries::rules_of(library),
            rate_control: library.rate_control.clone(),
            target_bitrate_kbps: library.target_bitrate_kbps,
            health_schedule: library.health_schedule.clone(),
            health_action: library.health_action.clone(),
            watch: library.watch,
            enabled: library.enabled,
            created_at: library.created_at,
            updated_at: library.updated_at,
            last_scan_at: library.last_scan_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    pub id: i32,
    pub username: String,
    pub role: crate::domain::access::UserRole,
    pub created_at: DateTime<Utc>,
}

impl From<&user::Model> for UserView {
    fn from(user: &user::Model) -> Self {
        UserView { id: user.id, username: user.username.clone(), role: user.role.into(), created_at: user.created_at }
    }
}

/// One change made through the API (GET /audit).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntryView {
    pub id: i32,
    pub at: DateTime<Utc>,
    pub username: String,
    /// The user's role when they acted.
    pub role: crate::domain::access::UserRole,
    pub method: String,
    /// The route as declared, e.g. `/jobs/{id}/cancel`.
    pub route: String,
    /// The path as requested, e.g. `/api/jobs/12/cancel`.
    pub path: String,
    /// How it was answered: 2xx done, 403 refused for the role, other codes refused or failed.
    pub status: i32,
    /// The API key the request came with; null for a session (a login token).
    pub api_key: Option<AuditKeyView>,
    /// The client's address (behind `TRUSTED_PROXIES`, the one they forwarded for).
    pub client: Option<String>,
}

/// The API key an audited request came with, as it was named then.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditKeyView {
    pub id: i32,
    pub name: String,
}

impl From<&audit_entry::Model> for AuditEntryView {
    fn from(entry: &audit_entry::Model) -> Self {
        AuditEntryView {
            id: entry.id,
            at: entry.at,
            username: entry.username.clone(),
            role: entry.role.into(),
            method: entry.method.clone(),
            route: entry.route.clone(),
            path: entry.path.clone(),
            status: entry.status,
            api_key: entry.key_id.map(|id| AuditKeyView { id, name: entry.key_name.clone().unwrap_or_default() }),
            client: entry.client.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub id: i32,
    pub name: String,
    #[schema(value_type = NodeRole)]
    pub role: String,
    pub address: String,
    #[schema(value_type = NodeStatus)]
    pub status: String,
    pub status_reason: Option<String>,
    pub gpu: Option<String>,
    pub load1: f64,
    pub cores: i32,
    /// load1 per core.
    pub load_ratio: f64,
    pub memory_used: i64,
    pub memory_total: i64,
    pub active_jobs: i32,
    pub max_jobs: i32,
    pub encoders: Vec<String>,
    /// The hardware it can decode on (`nvidia`, `intel_qsv`, `vaapi`): a device of that
    /// kind opens there.
    pub decoders: Vec<String>,
    /// Holds more than twice the average active jobs of the ONLINE nodes.
    pub overloaded: bool,
    pub last_seen_at: Option<DateTime<Utc>>,
    /// A linked node's identity (kept in its DATA_DIR); null for the main node, and for
    /// anyone but an administrator (it is half of the node's credential).
    pub identity: Option<String>,
    /// A linked node that links with a credential of its own (given at its enrollment).
    pub has_credential: bool,
    /// Revoked by an administrator: refused until removed.
    pub revoked: bool,
    /// The encoding window it follows and whether it is open now.
    pub window: Option<ScheduleView>,
    /// Per library, whether the node sees its folders. It is given jobs of a library it does
    /// not see only by transfer (`transfer`).
    pub libraries: Vec<LibrarySight>,
    /// A linked node's `SHARED_STORAGE` (`auto`: it may take jobs of libraries it does not
    /// see, by transfer; `required`: never), as it registered; null for the main node (it
    /// reads every library where it lies), and for a node not linked now or older than the
    /// setting.
    #[schema(value_type = Option<SharedStorage>)]
    pub shared_storage: Option<SharedStorage>,
    /// It takes jobs of libraries it does not see, by transfer: its `SHARED_STORAGE` is
    /// `auto` and both it and the main node carry the transfer flow.
    pub transfer: bool,
    /// Free bytes in the node's WORK_DIR, where it keeps files taken by transfer, as it last
    /// reported; null for the main node and for a node that did not report it.
    pub work_dir_free_bytes: Option<i64>,
}

/// Whether a node sees a library's folders, as it last reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LibrarySight {
    pub library_id: i32,
    pub name: String,
    /// true: it sees every folder of the library; false: it reported one missing; null: not
    /// reported yet (the library was created or moved since the node's last report, or the
    /// node is not linked). The main node sees every library.
    pub sees: Option<bool>,
}

/// A schedule as served: what was set, whether it is open now, and for a node whether it
/// follows the default.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleView {
    pub time_zone: String,
    /// No windows: always open.
    pub windows: Vec<Window>,
    pub on_close: OnClose,
    /// Whether the window is open now: a node encodes only then.
    pub open: bool,
    /// A node without a schedule of its own follows the default (always false for the
    /// default itself).
    pub follows_default: bool,
}

/// The nodes as shown, each compared with the average work of the ONLINE ones.
pub fn nodes(models: &[node::Model]) -> Vec<NodeView> {
    let online: Vec<f64> = models
        .iter()
        .filter(|node| node.status == NodeStatus::Online)
        .map(|node| f64::from(node.active_jobs.max(0)))
        .collect();
    let average = if online.is_empty() { 0.0 } else { online.iter().sum::<f64>() / online.len() as f64 };
    models
        .iter()
        .map(|node| {
            let active = u32::try_from(node.active_jobs).unwrap_or(0);
            NodeView {
                id: node.id,
                name: node.name.clone(),
                role: NodeRole::from(node.role).to_string(),
                address: node.address.clone(),
                status: NodeStatus::from(node.status).to_string(),
                status_reason: node.status_reason.clone(),
                gpu: node.gpu.clone(),
                load1: node.load1,
                cores: node.cores,
                load_ratio: health::load_ratio(node.load1, usize::try_from(node.cores).unwrap_or(0)),
                memory_used: node.memory_used,
                memory_total: node.memory_total,
                active_jobs: node.active_jobs,
                max_jobs: node.max_jobs,
                encoders: serde_json::from_value(node.encoders.clone()).unwrap_or_default(),
                decoders: serde_json::from_value(node.decoders.clone()).unwrap_or_default(),
                // An OFFLINE node does no work, whatever its last heartbeat said.
                overloaded: node.status != NodeStatus::Offline && health::is_overloaded(active, average),
                last_seen_at: node.last_seen_at,
                identity: node.identity.clone(),
                has_credential: node.credential_hash.is_some(),
                revoked: node.revoked,
                // Filled in by the handlers, which read the schedules (`schedule::fill_windows`).
                window: None,
                // Filled in by the handlers, from the links (`nodes::fill_sight`).
                libraries: Vec::new(),
                shared_storage: None,
                transfer: false,
                work_dir_free_bytes: None,
            }
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LicenseView {
    /// The tier the key claims (FREE without a key).
    pub tier: Tier,
    pub licensee: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    /// Limits of the effective tier; null: unlimited.
    pub max_nodes: Option<u32>,
    pub max_concurrent_jobs: Option<u32>,
    /// The tier in force: the key's until it expires; without a key in force, the trial's
    /// while it runs; else FREE.
    pub effective_tier: Tier,
    pub trial: TrialView,
}

/// The installation's one trial of a paid tier (`POST /license/trial`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrialView {
    /// Whether the trial was started: it cannot be started again, even after it ended.
    pub used: bool,
    /// Whether it runs now (it grants its tier unless a paid key is in force).
    pub running: bool,
    /// null while unused.
    pub tier: Option<Tier>,
    pub started_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    /// Days left, a begun day counting whole: 14 at the start, 0 once ended or unused.
    pub days_left: u32,
}

pub fn license(installed: Option<&license::Model>, trial: Option<&Trial>, now: DateTime<Utc>) -> LicenseView {
    // The tier was read from a verified key when it was installed.
    let tier = installed.map_or(Tier::Free, |installed| Tier::from(installed.tier));
    let key = effective_tier(tier, installed.and_then(|installed| installed.expires_at), now);
    let effective = tier_in_force(key, trial, now);
    LicenseView {
        tier,
        licensee: installed.map(|installed| installed.licensee.clone()),
        expires_at: installed.and_then(|installed| installed.expires_at),
        max_nodes: effective.max_nodes(),
        max_concurrent_jobs: effective.max_concurrent_jobs(),
        effective_tier: effective,
        trial: TrialView {
            used: trial.is_some(),
            running: trial.is_some_and(|trial| trial.is_running(now)),
            tier: trial.map(|trial| trial.tier),
            started_at: trial.map(|trial| trial.started_at),
            ends_at: trial.map(|trial| trial.ends_at),
            days_left: trial.map_or(0, |trial| trial.days_left(now)),
        },
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SettingsView {
    pub job_timeout_hours: u32,
    pub keep_originals: bool,
    /// Whether new linked nodes can enroll (CLUSTER_TOKEN is set on this main node). The
    /// token itself is never served: it is read where it was set.
    pub enrollment_open: bool,
}

/// The health panel: every check and the worst level among them.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct HealthView {
    pub overall: health::HealthLevel,
    pub checks: Vec<health::Check>,
}

/// What the health checks judge. `stuck_jobs` and `nodes` are `None` when the database could
/// not say; those checks are then left out (the database check is critical anyway).
pub struct HealthInputs<'a> {
    pub load1: f64,
    pub cores: usize,
    pub memory_percent: f64,
    pub database_connected: bool,
    pub stuck_jobs: Option<u64>,
    pub nodes: Option<&'a [node::Model]>,
}

pub fn health(inputs: &HealthInputs<'_>) -> HealthView {
    let checks = health::checks(&health::Inputs {
        load1: inputs.load1,
        cores: inputs.cores,
        memory_percent: inputs.memory_percent,
        database_connected: inputs.database_connected,
        stuck_jobs: inputs.stuck_jobs,
        nodes: inputs.nodes.map(|nodes| nodes.iter().map(|node| (node.role.into(), node.status.into())).collect()),
    });
    HealthView { overall: health::overall(&checks), checks }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuView {
    pub load1: f64,
    pub cores: usize,
    /// load1 per core.
    pub load_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryView {
    /// Bytes.
    pub used: u64,
    pub total: u64,
    pub percent: f64,
    /// One sample every 30 s at most, the last 2 hours, oldest first.
    pub trend: Vec<MemorySample>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskView {
    /// A library path.
    pub path: String,
    /// Bytes of the filesystem holding the path.
    pub total: u64,
    pub used: u64,
    pub free: u64,
    /// used / (used + free), as df reports it.
    pub used_percent: f64,
    /// Above 90 % used: encodes may fail for lack of space.
    pub at_risk: bool,
}

impl DiskView {
    pub fn new(path: String, space: &DiskSpace) -> Self {
        let used_percent = space.used_percent();
        DiskView {
            path,
            total: space.total,
            used: space.used,
            free: space.free,
            used_percent,
            at_risk: health::disk_risk(used_percent),
        }
    }
}

/// This node's machine.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SystemView {
    pub cpu: CpuView,
    pub memory: MemoryView,
    pub disks: Vec<DiskView>,
    pub gpus: Vec<GpuInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardView {
    pub health: HealthView,
    pub system: SystemView,
    pub queue: QueueStats,
    /// ANALYZING and ENCODING jobs.
    pub active_jobs: Vec<JobView>,
    pub nodes: Vec<NodeView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedJobView {
    pub job_id: i32,
    pub file_name: String,
    pub reason: Option<String>,
    pub node: Option<String>,
    /// When the job failed.
    pub date: DateTime<Utc>,
}

impl From<&repo::stats::FailedRow> for FailedJobView {
    fn from(row: &repo::stats::FailedRow) -> Self {
        FailedJobView {
            job_id: row.id,
            file_name: row.file_name.clone(),
            reason: row.failure_reason.clone(),
            node: row.node_name.clone(),
            date: row.updated_at,
        }
    }
}

/// Aggregated encoding statistics (GET /insights/stats, /statistics).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InsightsView {
    /// The last 30 days, oldest first, days without jobs included.
    pub history: Vec<stats::DayHistory>,
    /// Over the same 30 days.
    pub totals: stats::HistoryTotals,
    /// Failed in the last 30 days, newest first, 100 at most.
    pub failed_jobs: Vec<FailedJobView>,
    /// Every completed job so far.
    pub storage: stats::StorageSummary,
    /// Every job's runs so far.
    pub encoding_time: stats::EncodingTime,
    /// Per library in VMAF mode, what its completed jobs' outputs measured.
    pub vmaf: Vec<LibraryVmaf>,
}

/// What a library's completed jobs measured: their mean VMAF (each on its search's
/// samples), the lowest 5th percentile among them, and the mean CRF/CQ the searches chose.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LibraryVmaf {
    pub library_id: Option<i32>,
    pub library_name: Option<String>,
    pub jobs: i64,
    pub mean_vmaf: Option<f64>,
    pub lowest_p5: Option<f64>,
    pub mean_quality: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SavingsView {
    pub days: Vec<stats::SavingsDay>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, status: NodeStatus, active_jobs: i32) -> node::Model {
        let at = Utc::now();
        node::Model {
            id: 1,
            name: name.into(),
            role: NodeRole::Linked.into(),
            address: name.into(),
            status: status.into(),
            status_reason: None,
            gpu: None,
            cores: 4,
            load1: 6.0,
            memory_used: 1,
            memory_total: 2,
            active_jobs,
            max_jobs: 8,
            encoders: serde_json::json!(["libx265"]),
            decoders: serde_json::json!([]),
            credential_hash: None,
            revoked: false,
            identity: None,
            last_seen_at: Some(at),
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn overloaded_means_more_than_twice_the_online_average() {
        let models = [
            node("a", NodeStatus::Online, 7),
            node("b", NodeStatus::Online, 1),
            node("c", NodeStatus::Online, 1),
            node("d", NodeStatus::Offline, 9),
        ];
        let views = nodes(&models);
        // Average of the ONLINE nodes: 3.
        assert_eq!(views.iter().map(|v| v.overloaded).collect::<Vec<_>>(), [true, false, false, false]);
        assert_eq!(views[0].load_ratio, 1.5);
        assert_eq!(views[0].encoders, ["libx265"]);
    }

    #[test]
    fn health_leaves_out_what_the_database_cannot_say() {
        use health::HealthLevel::{Healthy, Warning};
        let inputs = HealthInputs {
            load1: 1.0,
            cores: 4,
            memory_percent: 50.0,
            database_connected: false,
            stuck_jobs: None,
            nodes: None,
        };
        let view = health(&inputs);
        let names: Vec<_> = view.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cpu", "memory", "database"]);
        assert_eq!(view.overall, health::HealthLevel::Critical);

        let models = [node("main", NodeStatus::Online, 0), node("w", NodeStatus::Offline, 0)];
        let models = [node::Model { role: NodeRole::Main.into(), ..models[0].clone() }, models[1].clone()];
        let view =
            health(&HealthInputs { database_connected: true, stuck_jobs: Some(0), nodes: Some(&models), ..inputs });
        let levels: Vec<_> = view.checks.iter().map(|c| (c.name.as_str(), c.level)).collect();
        assert_eq!(
            levels,
            [("cpu", Healthy), ("memory", Healthy), ("database", Healthy), ("queue", Healthy), ("nodes", Warning)]
        );
        assert_eq!(view.overall, Warning);
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["overall"], "WARNING");
        assert_eq!(
            json["checks"][4],
            serde_json::json!({"name": "nodes", "level": "WARNING", "value": 1, "message": "1 of 2 nodes offline"})
        );
    }

    #[test]
    fn a_disk_above_ninety_percent_is_at_risk() {
        let view = DiskView::new("/media".into(), &DiskSpace { total: 100, used: 91, free: 9 });
        assert_eq!((view.used_percent, view.at_risk), (91.0, true));
        let view = DiskView::new("/media".into(), &DiskSpace { total: 100, used: 90, free: 10 });
        assert_eq!((view.used_percent, view.at_risk), (90.0, false));
    }

    #[test]
    fn an_expired_licence_keeps_its_tier_but_grants_free() {
        let now = Utc::now();
        let model = license::Model {
            id: 1,
            key: "k".into(),
            tier: Tier::Pro.into(),
            licensee: "Ada".into(),
            expires_at: Some(now - chrono::Duration::days(1)),
            installed_at: now,
        };
        let view = license(Some(&model), None, now);
        assert_eq!((view.tier, view.effective_tier), (Tier::Pro, Tier::Free));
        assert_eq!((view.max_nodes, view.max_concurrent_jobs), (Some(1), Some(1)));
        let valid = license::Model { expires_at: None, ..model };
        let view = license(Some(&valid), None, now);
        assert_eq!((view.effective_tier, view.max_nodes), (Tier::Pro, None));
        assert_eq!(license(None, None, now).licensee, None);
        assert!(!license(None, None, now).trial.used);
    }

    #[test]
    fn a_running_trial_is_in_force_without_a_key_and_shows_its_days() {
        let now = Utc::now();
        let trial = Trial { tier: Tier::Supporter, started_at: now, ends_at: now + chrono::Duration::days(14) };
        let view = license(None, Some(&trial), now + chrono::Duration::hours(30));
        assert_eq!((view.tier, view.effective_tier, view.max_concurrent_jobs), (Tier::Free, Tier::Supporter, Some(5)));
        assert_eq!(
            serde_json::to_value(&view.trial).unwrap(),
            serde_json::json!({"used": true, "running": true, "tier": "SUPPORTER", "startedAt": now, "endsAt": trial.ends_at, "daysLeft": 13})
        );
        let ended = license(None, Some(&trial), trial.ends_at);
        assert_eq!(
            (ended.effective_tier, ended.trial.used, ended.trial.running, ended.trial.days_left),
            (Tier::Free, true, false, 0)
        );
    }
}
