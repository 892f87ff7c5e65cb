use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sea_orm_active_enums::{FailureCode, JobStatus, Stage};

/// One media file and its way through the re-encoding lifecycle.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "jobs")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub library_id: Option<i32>,
    #[sea_orm(unique)]
    /// The path as text: the path itself when UTF-8, else its readable form with the
    /// invalid bytes written `\xHH` (`condense::domain::path_bytes`).
    pub file_path: String,
    /// The exact bytes of a path that is not UTF-8; None when `file_path` is the path.
    pub file_path_raw: Option<Vec<u8>>,
    pub file_name: String,
    pub status: JobStatus,
    /// Set while running.
    pub stage: Option<Stage>,
    /// 0 to 100.
    pub progress: f64,
    /// Current encoding speed in frames per second.
    pub fps: f64,
    pub eta_seconds: Option<i64>,
    pub node_id: Option<i32>,
    pub node_name: Option<String>,
    pub retry_count: i32,
    /// Times the job was orphaned by a crash of its node since a user last started it afresh.
    pub crash_count: i32,
    /// Displayed failure reason, e.g. "file validation failed".
    pub failure_reason: Option<String>,
    /// Machine-readable failure code, e.g. "file_validation_failed".
    pub failure_code: Option<FailureCode>,
    /// Detail behind the failure (the transcoder's last log lines).
    pub failure_detail: Option<String>,
    /// Why the job was skipped, as displayed ("output would not be smaller ...").
    pub skip_reason: Option<String>,
    /// VMAF mode: the quality (CRF/CQ) the search chose, the output size it predicted, and
    /// the output's VMAF on the search's samples (mean, 5th percentile).
    pub chosen_quality: Option<i32>,
    /// A two-pass encode: the pass it is in (1 or 2); none for one pass.
    pub encode_pass: Option<i32>,
    pub predicted_size: Option<i64>,
    pub vmaf: Option<f64>,
    pub vmaf_p5: Option<f64>,
    pub stalled: bool,
    /// Re-encode even when the source is already in the target codec.
    pub forced: bool,
    pub source_codec: Option<String>,
    pub target_codec: String,
    /// Encoder actually used by the last attempt.
    pub encoder: Option<String>,
    pub source_size: i64,
    /// Source modification time (ns since the epoch) when the job last saw it.
    pub source_mtime_ns: Option<i64>,
    pub source_inode: Option<i64>,
    pub output_size: Option<i64>,
    pub duration_seconds: Option<f64>,
    pub source_bitrate: Option<i64>,
    pub hdr: Option<String>,
    /// Full probe of the source (media::probe), as JSON.
    pub probe: Option<Json>,
    pub cpu_time_ms: Option<i64>,
    pub wall_time_ms: Option<i64>,
    /// Lease held by the node running the job (fencing against a returning node).
    pub lease_id: Option<String>,
    pub lease_expires_at: Option<ChronoDateTimeUtc>,
    pub last_progress_at: Option<ChronoDateTimeUtc>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    pub queued_at: Option<ChronoDateTimeUtc>,
    pub started_at: Option<ChronoDateTimeUtc>,
    pub completed_at: Option<ChronoDateTimeUtc>,
    /// -10 to 10: the scheduler takes QUEUED jobs highest first, then oldest.
    pub priority: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::library::Entity",
        from = "Column::LibraryId",
        to = "super::library::Column::Id",
        on_delete = "Cascade"
    )]
    Library,
    #[sea_orm(has_many = "super::job_event::Entity")]
    JobEvent,
}

impl Related<super::library::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Library.def()
    }
}

impl Related<super::job_event::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::JobEvent.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
