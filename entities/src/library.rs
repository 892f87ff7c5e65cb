use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// A set of media paths scanned for files, each file becoming a job.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "libraries")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    #[sea_orm(unique)]
    pub name: String,
    /// JSON array of absolute, canonical directory paths.
    pub paths: Json,
    /// "hevc" or "av1".
    pub target_codec: String,
    /// FFmpeg encoder name, e.g. "libx265" or "hevc_nvenc".
    pub encoder: String,
    /// CRF / CQ value.
    pub quality: i32,
    pub preset: String,
    /// "crf" (the fixed `quality`) or "vmaf" (searched per file to reach `target_vmaf`).
    pub quality_mode: String,
    pub target_vmaf: f64,
    /// In vmaf mode: a file whose output is predicted larger than this percent of it is skipped.
    pub max_size_percent: i32,
    pub keep_dolby_vision: bool,
    /// A replaced file keeps the original's modification time.
    pub keep_modified_time: bool,
    /// JSON text of the library's `StreamRules` (issue 37); `{}` is every default.
    #[sea_orm(column_type = "Text")]
    pub stream_rules: String,
    /// "crf" (the fixed `quality`, or the searched one) or "twoPass" (two passes to
    /// `target_bitrate_kbps`).
    pub rate_control: String,
    pub target_bitrate_kbps: Option<i32>,
    /// "off", "weekly" or "monthly": a quick health check run inside the encoding windows.
    pub health_schedule: String,
    /// "notify" or "regrab": what a scheduled health check does about a damaged file.
    pub health_action: String,
    /// Watch the paths for new files (in addition to scans).
    pub watch: bool,
    pub enabled: bool,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    pub last_scan_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(has_many = "super::job::Entity")]
    Job,
}

impl Related<super::job::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Job.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
