//! Libraries: sets of media paths with their encoding settings.

use entities::library::{self, ActiveModel, Column, Entity};
use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, QueryOrder, Set};

use super::{now, RepoError, RepoResult};
use crate::domain::library_health::{HealthAction, HealthSchedule};
use crate::domain::stream_rules::StreamRules;

#[derive(Debug, Clone, PartialEq)]
pub struct NewLibrary {
    pub name: String,
    pub paths: Vec<String>,
    pub target_codec: String,
    pub encoder: String,
    pub quality: i32,
    pub preset: String,
    pub watch: bool,
    pub quality_mode: String,
    pub target_vmaf: f64,
    pub max_size_percent: i32,
    pub keep_dolby_vision: bool,
    pub keep_modified_time: bool,
    pub stream_rules: StreamRules,
    pub rate_control: String,
    pub target_bitrate_kbps: Option<i32>,
}

/// Fields to change; `None` keeps the current value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LibraryPatch {
    pub name: Option<String>,
    pub paths: Option<Vec<String>>,
    pub target_codec: Option<String>,
    pub encoder: Option<String>,
    pub quality: Option<i32>,
    pub preset: Option<String>,
    pub watch: Option<bool>,
    pub enabled: Option<bool>,
    pub quality_mode: Option<String>,
    pub target_vmaf: Option<f64>,
    pub max_size_percent: Option<i32>,
    pub keep_dolby_vision: Option<bool>,
    pub keep_modified_time: Option<bool>,
    pub stream_rules: Option<StreamRules>,
    pub rate_control: Option<String>,
    /// A bitrate given is kept; none keeps the stored one.
    pub target_bitrate_kbps: Option<i32>,
    /// `domain::library_health::HealthSchedule`, checked by the caller.
    pub health_schedule: Option<String>,
    /// `domain::library_health::HealthAction`, checked by the caller.
    pub health_action: Option<String>,
}

pub fn paths_of(model: &library::Model) -> Vec<String> {
    serde_json::from_value(model.paths.clone()).unwrap_or_default()
}

/// The library's stream rules. Stored text that no longer reads (written by a newer
/// version, or edited by hand) gives the defaults, today's behaviour, and a warning.
pub fn rules_of(model: &library::Model) -> StreamRules {
    serde_json::from_str(&model.stream_rules).unwrap_or_else(|error| {
        tracing::warn!(library = model.id, %error, "unreadable stream rules: the defaults apply");
        StreamRules::default()
    })
}

fn rules_text(rules: &StreamRules) -> String {
    serde_json::to_string(rules).unwrap_or_else(|_| "{}".to_string())
}

pub async fn create(db: &impl ConnectionTrait, new: NewLibrary) -> RepoResult<library::Model> {
    let at = now();
    let name = new.name.clone();
    ActiveModel {
        name: Set(new.name),
        paths: Set(serde_json::json!(new.paths)),
        target_codec: Set(new.target_codec),
        encoder: Set(new.encoder),
        quality: Set(new.quality),
        preset: Set(new.preset),
        watch: Set(new.watch),
        enabled: Set(true),
        quality_mode: Set(new.quality_mode),
        target_vmaf: Set(new.target_vmaf),
        max_size_percent: Set(new.max_size_percent),
        keep_dolby_vision: Set(new.keep_dolby_vision),
        keep_modified_time: Set(new.keep_modified_time),
        stream_rules: Set(rules_text(&new.stream_rules)),
        rate_control: Set(new.rate_control),
        target_bitrate_kbps: Set(new.target_bitrate_kbps),
        health_schedule: Set(HealthSchedule::Off.as_str().to_string()),
        health_action: Set(HealthAction::Notify.as_str().to_string()),
        created_at: Set(at),
        updated_at: Set(at),
        last_scan_at: Set(None),
        ..Default::default()
    }
    .insert(db)
    .await
    .map_err(|e| RepoError::unique(e, || format!("a library named {name:?} exists")))
}

pub async fn get(db: &impl ConnectionTrait, id: i32) -> RepoResult<library::Model> {
    Entity::find_by_id(id).one(db).await?.ok_or_else(|| RepoError::NotFound(format!("library {id}")))
}

pub async fn list(db: &impl ConnectionTrait) -> RepoResult<Vec<library::Model>> {
    Ok(Entity::find().order_by_asc(Column::Id).all(db).await?)
}

pub async fn update(db: &impl ConnectionTrait, id: i32, patch: LibraryPatch) -> RepoResult<library::Model> {
    let current = get(db, id).await?;
    let mut model: ActiveModel = current.into();
    let name = patch.name.clone();
    if let Some(v) = patch.name {
        model.name = Set(v);
    }
    if let Some(v) = patch.paths {
        model.paths = Set(serde_json::json!(v));
    }
    if let Some(v) = patch.target_codec {
        model.target_codec = Set(v);
    }
    if let Some(v) = patch.encoder {
        model.encoder = Set(v);
    }
    if let Some(v) = patch.quality {
        model.quality = Set(v);
    }
    if let Some(v) = patch.preset {
        model.preset = Set(v);
    }
    if let Some(v) = patch.watch {
        model.watch = Set(v);
    }
    if let Some(v) = patch.enabled {
        model.enabled = Set(v);
    }
    if let Some(v) = patch.quality_mode {
        model.quality_mode = Set(v);
    }
    if let Some(v) = patch.target_vmaf {
        model.target_vmaf = Set(v);
    }
    if let Some(v) = patch.max_size_percent {
        model.max_size_percent = Set(v);
    }
    if let Some(v) = patch.keep_dolby_vision {
        model.keep_dolby_vision = Set(v);
    }
    if let Some(v) = patch.keep_modified_time {
        model.keep_modified_time = Set(v);
    }
    if let Some(v) = patch.stream_rules {
        model.stream_rules = Set(rules_text(&v));
    }
    if let Some(v) = patch.rate_control {
        model.rate_control = Set(v);
    }
    if let Some(v) = patch.target_bitrate_kbps {
        model.target_bitrate_kbps = Set(Some(v));
    }
    if let Some(v) = patch.health_schedule {
        model.health_schedule = Set(v);
    }
    if let Some(v) = patch.health_action {
        model.health_action = Set(v);
    }
    model.updated_at = Set(now());
    model
        .update(db)
        .await
        .map_err(|e| RepoError::unique(e, || format!("a library named {:?} exists", name.unwrap_or_default())))
}

pub async fn mark_scanned(db: &impl ConnectionTrait, id: i32) -> RepoResult<()> {
    let mut model: ActiveModel = get(db, id).await?.into();
    model.last_scan_at = Set(Some(now()));
    model.update(db).await?;
    Ok(())
}

/// Deletes the library and, by cascade, its jobs and their events.
pub async fn delete(db: &impl ConnectionTrait, id: i32) -> RepoResult<()> {
    let result = Entity::delete_by_id(id).exec(db).await?;
    if result.rows_affected == 0 {
        return Err(RepoError::NotFound(format!("library {id}")));
    }
    Ok(())
}
