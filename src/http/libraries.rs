//! Libraries: list, create, read, partial update, delete. Every field is checked here, and
//! paths are stored canonical (symlinks resolved), so two spellings of one folder are one.

use super::body::Body;
use std::path::{Path, PathBuf};

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;

use super::auth::AuthUser;
use super::views::LibraryView;
use crate::actors::library::Reload;
use crate::actors::scheduler::{Action, JobAction};
use crate::domain::encoding::{self, Encoder, RateControlMode, TargetCodec};
use crate::domain::job::JobStatus;
use crate::domain::library_health::{HealthAction, HealthSchedule};
use crate::domain::quality::{self, QualityMode};
use crate::domain::stream_rules::StreamRules;
use crate::error::{AppError, ErrorBody};
use crate::http::library_places::LibraryPlaces;
use crate::http::state::AppState;
use crate::media::layout::partial_dir_for;
use crate::media::partial::remove_partial;
use crate::repo;
use crate::repo::libraries::{LibraryPatch, NewLibrary};

pub const MAX_NAME_CHARS: usize = 100;
pub const MAX_PATHS: usize = 32;

/// A library's settings beside its name and paths, as creation and update both take them
/// (each absent one: the default at creation, unchanged at update; the stream rules' doc
/// is each body's own). One list for both bodies: serde cannot flatten a struct into one
/// that refuses unknown fields.
macro_rules! with_library_settings {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* } $(#[$rules:meta])* stream_rules) => {
        $(#[$meta])*
        pub struct $name {
            $($own)*
            /// Default: the codec of `encoder` when given, else hevc.
            #[schema(schema_with = codec_schema)]
            pub target_codec: Option<String>,
            /// One that makes `targetCodec`.
            #[schema(schema_with = encoder_schema)]
            pub encoder: Option<String>,
            /// The CRF/CQ in crf mode; where the search starts in vmaf mode. On the encoder's
            /// scale: 0 to 51 (HEVC, H.264), 0 to 63 (AV1).
            #[schema(minimum = 0, maximum = 63)]
            #[serde(default, deserialize_with = "super::schema::optional_whole_number")]
            pub quality: Option<i64>,
            /// One the encoder takes (see GET /encoders); none for an encoder without presets.
            pub preset: Option<String>,
            /// `crf` (default) or `vmaf`.
            #[schema(value_type = Option<QualityMode>)]
            pub quality_mode: Option<String>,
            /// 80 to 99, default 95.
            #[schema(minimum = 80, maximum = 99)]
            pub target_vmaf: Option<f64>,
            /// 10 to 100, default 80.
            #[schema(minimum = 10, maximum = 100)]
            #[serde(default, deserialize_with = "super::schema::optional_whole_number")]
            pub max_size_percent: Option<i64>,
            /// Default false. HEVC targets only: Dolby Vision sources keep it (profile 8.1).
            pub keep_dolby_vision: Option<bool>,
            /// Default false: a replaced file keeps the original's modification time.
            pub keep_modified_time: Option<bool>,
            $(#[$rules])*
            pub stream_rules: Option<StreamRules>,
            /// `crf` (default) or `twoPass`: two passes to `targetBitrateKbps` (libx265, and
            /// hevc_nvenc's multipass; refused for AV1 encoders and in qualityMode vmaf).
            #[schema(value_type = Option<RateControlMode>)]
            pub rate_control: Option<String>,
            /// kbit/s, 50 to 200000; required for `twoPass`.
            #[schema(minimum = 50, maximum = 200000)]
            #[serde(default, deserialize_with = "super::schema::optional_whole_number")]
            pub target_bitrate_kbps: Option<i64>,
            /// `off` (default), `weekly` or `monthly`: a quick health check of every file, inside
            /// the encoding windows.
            #[schema(value_type = Option<HealthSchedule>)]
            pub health_schedule: Option<String>,
            /// `notify` (default) or `regrab`: what a scheduled health check does about a damaged
            /// file (regrab: ask the Sonarr or Radarr that holds it for a new copy, and notify).
            #[schema(value_type = Option<HealthAction>)]
            pub health_action: Option<String>,
            pub watch: Option<bool>,
            /// Default true; a disabled library is neither scanned nor watched.
            pub enabled: Option<bool>,
        }
    };
}

with_library_settings! {
    #[derive(Debug, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct CreateLibrary {
        /// 1 to 100 characters once trimmed, no control characters.
        #[schema(schema_with = name_schema)]
        pub name: String,
        #[schema(schema_with = paths_schema)]
        pub paths: Vec<String>,
    }
    /// What each file becomes besides its video, and which files are left alone; absent
    /// fields take their defaults (today's behaviour).
    stream_rules
}

with_library_settings! {
    /// Any subset of the fields; absent or null keeps the current value.
    #[derive(Debug, Default, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct UpdateLibrary {
        #[schema(schema_with = name_or_null_schema)]
        pub name: Option<String>,
        #[schema(schema_with = paths_or_null_schema)]
        pub paths: Option<Vec<String>>,
    }
    /// Replaces the whole set of rules (absent fields inside take their defaults); the next
    /// attempt of every job uses them.
    stream_rules
}

fn name_schema() -> utoipa::openapi::schema::Object {
    super::schema::described(
        super::schema::trimmed_name(MAX_NAME_CHARS, false),
        "1 to 100 characters once trimmed, no control characters.",
    )
}

fn name_or_null_schema() -> utoipa::openapi::schema::Object {
    super::schema::or_null(name_schema())
}

fn paths_schema() -> utoipa::openapi::schema::Array {
    super::schema::absolute_paths(MAX_PATHS, false)
}

fn paths_or_null_schema() -> utoipa::openapi::schema::Array {
    super::schema::absolute_paths(MAX_PATHS, true)
}

fn codec_schema() -> utoipa::openapi::schema::Object {
    let names: Vec<&str> = TargetCodec::ALL.iter().map(|c| c.as_str()).collect();
    let schema = super::schema::or_null(super::schema::any_case_one_of(&names));
    super::schema::described(schema, "Default: the codec of `encoder` when given, else hevc.")
}

fn encoder_schema() -> utoipa::openapi::schema::Object {
    let names: Vec<&str> = Encoder::ALL.iter().map(|e| e.as_str()).collect();
    let schema = super::schema::or_null(super::schema::any_case_one_of(&names));
    super::schema::described(schema, "One that makes `targetCodec`.")
}

/// Every library
#[utoipa::path(
    get,
    operation_id = "list_libraries",
    path = "/libraries",
    tag = "libraries",
    responses(
        (status = 200, description = "Libraries, oldest first", body = Vec<LibraryView>),
    ),
)]
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<LibraryView>>, AppError> {
    let libraries = repo::libraries::list(&state.db).await?;
    Ok(web::Json(libraries.iter().map(LibraryView::from).collect()))
}

/// One library
#[utoipa::path(
    get,
    operation_id = "get_library",
    path = "/libraries/{id}",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 200, description = "The library", body = LibraryView),
    ),
)]
pub async fn get(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<LibraryView>, AppError> {
    let library = repo::libraries::get(&state.db, id.into_inner()).await?;
    Ok(web::Json(LibraryView::from(&library)))
}

/// Create a library
#[utoipa::path(
    post,
    operation_id = "create_library",
    path = "/libraries",
    tag = "libraries",
    request_body = CreateLibrary,
    responses(
        (status = 201, description = "Created", body = LibraryView),
        (status = 409, description = "The name is taken (code conflict)", body = ErrorBody),
    ),
)]
pub async fn create(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<CreateLibrary>,
) -> Result<HttpResponse, AppError> {
    let body = body.into_inner();
    let name = check_name(&body.name)?;
    let requested_encoder = body.encoder.as_deref().map(parse_encoder).transpose()?;
    let codec = match (body.target_codec.as_deref(), requested_encoder) {
        (Some(codec), _) => parse_codec(codec)?,
        (None, Some(encoder)) => encoder.codec(),
        (None, None) => TargetCodec::Hevc,
    };
    let encoder = requested_encoder.unwrap_or_else(|| codec.default_encoder());
    check_encoder_makes(encoder, codec)?;
    let quality = match body.quality {
        Some(quality) => check_quality(quality, encoder)?,
        None => encoder.profile().quality.default,
    };
    let preset = match body.preset.as_deref() {
        Some(preset) => check_preset(preset, encoder)?,
        None => encoder.default_preset().unwrap_or_default().to_string(),
    };
    let quality_mode = body.quality_mode.as_deref().map(check_quality_mode).transpose()?.unwrap_or(QualityMode::Crf);
    let rate_mode = body.rate_control.as_deref().map(check_rate_control).transpose()?.unwrap_or(RateControlMode::Crf);
    encoding::rate_control(rate_mode, body.target_bitrate_kbps, encoder, quality_mode == QualityMode::Vmaf)
        .map_err(|e| AppError::invalid(e.to_string()))?;
    let paths = canonical_paths(body.paths, &state.library_places).await?;
    check_runs_somewhere(&state, encoder).await?;
    let new = NewLibrary {
        name,
        paths,
        target_codec: codec.as_str().to_string(),
        encoder: encoder.as_str().to_string(),
        quality: stored_quality(quality),
        preset,
        watch: body.watch.unwrap_or(true),
        quality_mode: quality_mode.to_string(),
        target_vmaf: body.target_vmaf.map(check_target_vmaf).transpose()?.unwrap_or(quality::TARGET_VMAF_DEFAULT),
        max_size_percent: stored_percent(
            body.max_size_percent.map(check_max_size_percent).transpose()?.unwrap_or(quality::MAX_SIZE_PERCENT_DEFAULT),
        ),
        keep_dolby_vision: check_keep_dolby_vision(body.keep_dolby_vision.unwrap_or(false), codec)?,
        keep_modified_time: body.keep_modified_time.unwrap_or(false),
        stream_rules: body.stream_rules.map(check_rules).transpose()?.unwrap_or_default(),
        rate_control: rate_mode.to_string(),
        target_bitrate_kbps: body.target_bitrate_kbps.and_then(|k| i32::try_from(k).ok()),
    };
    let health_schedule = body.health_schedule.as_deref().map(check_health_schedule).transpose()?;
    let health_action = body.health_action.as_deref().map(check_health_action).transpose()?;
    let mut library = repo::libraries::create(&state.db, new).await?;
    if body.enabled == Some(false) || health_schedule.is_some() || health_action.is_some() {
        let patch = LibraryPatch {
            enabled: body.enabled.filter(|e| !e),
            health_schedule: health_schedule.map(|s| s.to_string()),
            health_action: health_action.map(|a| a.to_string()),
            ..Default::default()
        };
        library = repo::libraries::update(&state.db, library.id, patch).await?;
    }
    state.runtime.libraries.do_send(Reload);
    state.runtime.health.wake_schedule();
    tracing::info!(user = %user.username, library = library.id, name = %library.name, "library created");
    Ok(HttpResponse::Created().json(LibraryView::from(&library)))
}

/// Change any subset of a library's fields
///
/// Absent or null fields keep their value. The result must be valid as a whole: a new
/// targetCodec needs an encoder and a quality that fit it.
#[utoipa::path(
    put,
    operation_id = "update_library",
    path = "/libraries/{id}",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    request_body = UpdateLibrary,
    responses(
        (status = 200, description = "The library after the change", body = LibraryView),
        (status = 409, description = "The name is taken (code conflict)", body = ErrorBody),
    ),
)]
pub async fn update(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
    body: Body<UpdateLibrary>,
) -> Result<web::Json<LibraryView>, AppError> {
    let id = id.into_inner();
    let body = body.into_inner();
    let current = repo::libraries::get(&state.db, id).await?;
    let stored = |what: &str, error: crate::domain::UnknownName| {
        AppError::Internal(format!("library {id} has an unreadable {what}: {error}"))
    };
    let current_codec: TargetCodec = current.target_codec.parse().map_err(|e| stored("target codec", e))?;
    let current_encoder: Encoder = current.encoder.parse().map_err(|e| stored("encoder", e))?;

    // The result of the change must be valid as a whole: a new codec needs an encoder and
    // a quality that fit it, given now or already stored.
    let codec = body.target_codec.as_deref().map(parse_codec).transpose()?.unwrap_or(current_codec);
    let encoder = body.encoder.as_deref().map(parse_encoder).transpose()?.unwrap_or(current_encoder);
    check_encoder_makes(encoder, codec)?;
    // Another encoder of the same codec that counts on a scale of its own (the hardware AV1
    // ones) gets the stored quality at the same place on its scale.
    let kept = u32::try_from(current.quality).unwrap_or(0);
    let kept = if encoder.codec() == current_encoder.codec() {
        current_encoder.profile().quality.carry_to(kept, encoder.profile().quality)
    } else {
        kept
    };
    let quality = check_quality(body.quality.unwrap_or(i64::from(kept)), encoder)?;
    let preset = match body.preset.as_deref() {
        Some(preset) => Some(check_preset(preset, encoder)?),
        // Another encoder does not take the old one's preset: it gets its own default.
        None if encoder != current_encoder && !encoder.takes_preset(&current.preset) => {
            Some(encoder.default_preset().unwrap_or_default().to_string())
        }
        None => None,
    };

    // The rate control must hold with the encoder and quality mode after the change.
    let quality_mode = match body.quality_mode.as_deref() {
        Some(mode) => check_quality_mode(mode)?,
        None => current.quality_mode.parse().map_err(|e| stored("quality mode", e))?,
    };
    let rate_mode = match body.rate_control.as_deref() {
        Some(mode) => check_rate_control(mode)?,
        None => current.rate_control.parse().map_err(|e| stored("rate control", e))?,
    };
    let bitrate = body.target_bitrate_kbps.or(current.target_bitrate_kbps.map(i64::from));
    encoding::rate_control(rate_mode, bitrate, encoder, quality_mode == QualityMode::Vmaf)
        .map_err(|e| AppError::invalid(e.to_string()))?;

    if encoder != current_encoder {
        check_runs_somewhere(&state, encoder).await?;
    }
    let patch = LibraryPatch {
        name: body.name.as_deref().map(check_name).transpose()?,
        paths: match body.paths {
            Some(paths) => Some(canonical_paths(paths, &state.library_places).await?),
            None => None,
        },
        target_codec: Some(codec.as_str().to_string()),
        encoder: Some(encoder.as_str().to_string()),
        quality: Some(stored_quality(quality)),
        preset,
        watch: body.watch,
        enabled: body.enabled,
        quality_mode: body.quality_mode.is_some().then(|| quality_mode.to_string()),
        target_vmaf: body.target_vmaf.map(check_target_vmaf).transpose()?,
        max_size_percent: body.max_size_percent.map(check_max_size_percent).transpose()?.map(stored_percent),
        keep_dolby_vision: Some(check_keep_dolby_vision(
            body.keep_dolby_vision.unwrap_or(current.keep_dolby_vision),
            codec,
        )?),
        keep_modified_time: body.keep_modified_time,
        stream_rules: body.stream_rules.map(check_rules).transpose()?,
        rate_control: Some(rate_mode.to_string()),
        target_bitrate_kbps: body.target_bitrate_kbps.and_then(|k| i32::try_from(k).ok()),
        health_schedule: body.health_schedule.as_deref().map(check_health_schedule).transpose()?.map(|s| s.to_string()),
        health_action: body.health_action.as_deref().map(check_health_action).transpose()?.map(|a| a.to_string()),
    };
    let library = repo::libraries::update(&state.db, id, patch).await?;
    state.runtime.libraries.do_send(Reload);
    state.runtime.health.wake_schedule();
    tracing::info!(user = %user.username, library = id, "library updated");
    Ok(web::Json(LibraryView::from(&library)))
}

/// Delete a library and its jobs
#[utoipa::path(
    delete,
    operation_id = "delete_library",
    path = "/libraries/{id}",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub async fn delete(user: AuthUser, state: web::Data<AppState>, id: web::Path<i32>) -> Result<HttpResponse, AppError> {
    let id = id.into_inner();
    repo::libraries::get(&state.db, id).await?;
    // Running encodes of the library stop first (their partial outputs are removed);
    // deleting the rows under a running job would leave its transcoder writing.
    let running = repo::jobs::list(
        &state.db,
        &repo::jobs::JobQuery {
            statuses: vec![JobStatus::Analyzing, JobStatus::Encoding],
            library_id: Some(id),
            page_size: repo::jobs::MAX_PAGE_SIZE,
            ..Default::default()
        },
    )
    .await?;
    for job in running.items {
        let action = JobAction { job_id: job.id, action: Action::Cancel };
        if let Ok(Err(e)) = state.runtime.scheduler.send(action).await {
            tracing::warn!(job_id = job.id, error = %e, "could not stop a job of a deleted library");
        }
    }
    // Paused (and queued, failed, cancelled) jobs may have partial outputs next to their
    // sources; with their rows gone, nothing would ever continue or remove them.
    let idle: Vec<PathBuf> = repo::jobs::known_files(&state.db, id)
        .await?
        .into_iter()
        .filter(|(_, known)| known.status != JobStatus::Analyzing && known.status != JobStatus::Encoding)
        .map(|(path, _)| path)
        .collect();
    repo::libraries::delete(&state.db, id).await?;
    state.runtime.libraries.do_send(Reload);
    state.runtime.health.wake_schedule();
    let removed = web::block(move || remove_partials(&idle)).await.unwrap_or(0);
    tracing::info!(user = %user.username, library = id, partial_outputs_removed = removed, "library deleted");
    Ok(HttpResponse::NoContent().finish())
}

/// Removes the partial outputs of these sources; answers how many there were.
fn remove_partials(sources: &[PathBuf]) -> usize {
    let mut removed = 0;
    for source in sources {
        let dir = partial_dir_for(source);
        if std::fs::symlink_metadata(&dir).is_err() {
            continue;
        }
        match remove_partial(&dir) {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "could not remove a partial output"),
        }
    }
    removed
}

fn check_name(name: &str) -> Result<String, AppError> {
    let name = name.trim();
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        return Err(AppError::invalid(format!("name must be 1 to {MAX_NAME_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(AppError::invalid("name must not contain control characters"));
    }
    Ok(name.to_string())
}

fn parse_codec(codec: &str) -> Result<TargetCodec, AppError> {
    codec.parse().map_err(|_| {
        AppError::invalid(format!(
            "targetCodec must be one of {}, not {codec:?}",
            names(TargetCodec::ALL, super::super::domain::encoding::TargetCodec::as_str)
        ))
    })
}

fn parse_encoder(encoder: &str) -> Result<Encoder, AppError> {
    encoder.parse().map_err(|_| {
        AppError::invalid(format!(
            "encoder must be one of {}, not {encoder:?}",
            names(Encoder::ALL, super::super::domain::encoding::Encoder::as_str)
        ))
    })
}

fn check_encoder_makes(encoder: Encoder, codec: TargetCodec) -> Result<(), AppError> {
    if encoder.codec() == codec {
        return Ok(());
    }
    let fitting: Vec<Encoder> = Encoder::ALL.iter().copied().filter(|e| e.codec() == codec).collect();
    Err(AppError::invalid(format!(
        "encoder {encoder} produces {}, not the targetCodec {codec}; for {codec} use one of {}",
        encoder.codec(),
        names(&fitting, super::super::domain::encoding::Encoder::as_str)
    )))
}

/// The quality must lie on the encoder's scale (see `domain::encoding`).
fn check_quality(quality: i64, encoder: Encoder) -> Result<u32, AppError> {
    let range = encoder.profile().quality;
    u32::try_from(quality).ok().filter(|q| range.contains(*q)).ok_or_else(|| {
        AppError::invalid(format!("quality must be {} to {} for {encoder}, not {quality}", range.min, range.max))
    })
}

/// A hardware encoder is taken only where a node that is up runs it (a library of an
/// encoder no node runs would queue jobs no node takes); the refusal says what is missing.
/// CPU encoders are part of every build.
async fn check_runs_somewhere(state: &AppState, encoder: Encoder) -> Result<(), AppError> {
    if !encoder.is_hardware() {
        return Ok(());
    }
    match super::encoders::unavailable(&super::encoders::reports(&state.db).await?, encoder) {
        Some(why) => Err(AppError::invalid(format!("encoder {encoder} cannot be used: {why}"))),
        None => Ok(()),
    }
}

/// Dolby Vision is kept in HEVC outputs only (profile 8.1 has an HEVC base layer).
fn check_keep_dolby_vision(keep: bool, codec: TargetCodec) -> Result<bool, AppError> {
    if keep && codec != TargetCodec::Hevc {
        return Err(AppError::invalid(format!(
            "keepDolbyVision needs targetCodec hevc (Dolby Vision profile 8.1 is HEVC); this library encodes to {}",
            codec.as_str()
        )));
    }
    Ok(keep)
}

/// The rules within their bounds; the message names the field (`streamRules.maxHeight`).
fn check_rules(rules: StreamRules) -> Result<StreamRules, AppError> {
    rules.check().map_err(|e| AppError::invalid(e.to_string()))?;
    Ok(rules)
}

fn check_quality_mode(mode: &str) -> Result<QualityMode, AppError> {
    mode.parse().map_err(|_| AppError::invalid(format!("qualityMode must be crf or vmaf, not {mode:?}")))
}

fn check_health_schedule(schedule: &str) -> Result<HealthSchedule, AppError> {
    schedule
        .parse()
        .map_err(|_| AppError::invalid(format!("healthSchedule must be off, weekly or monthly, not {schedule:?}")))
}

fn check_health_action(action: &str) -> Result<HealthAction, AppError> {
    action.parse().map_err(|_| AppError::invalid(format!("healthAction must be notify or regrab, not {action:?}")))
}

fn check_rate_control(mode: &str) -> Result<RateControlMode, AppError> {
    mode.parse().map_err(|_| AppError::invalid(format!("rateControl must be crf or twoPass, not {mode:?}")))
}

fn check_target_vmaf(target: f64) -> Result<f64, AppError> {
    if (quality::TARGET_VMAF_MIN..=quality::TARGET_VMAF_MAX).contains(&target) {
        Ok(target)
    } else {
        Err(AppError::invalid(format!(
            "targetVmaf must be {} to {}, not {target}",
            quality::TARGET_VMAF_MIN,
            quality::TARGET_VMAF_MAX
        )))
    }
}

fn check_max_size_percent(percent: i64) -> Result<u32, AppError> {
    let range = quality::MAX_SIZE_PERCENT_MIN..=quality::MAX_SIZE_PERCENT_MAX;
    u32::try_from(percent).ok().filter(|p| range.contains(p)).ok_or_else(|| {
        AppError::invalid(format!("maxSizePercent must be {} to {}, not {percent}", range.start(), range.end()))
    })
}

/// Percentages end at 100, so every one fits the column.
fn stored_percent(percent: u32) -> i32 {
    i32::try_from(percent).unwrap_or(i32::MAX)
}

/// Quality scales end at 255 (VAAPI's AV1 quantizer index), so every quality fits the column.
fn stored_quality(quality: u32) -> i32 {
    i32::try_from(quality).unwrap_or(i32::MAX)
}

/// The preset must be one the encoder takes; an encoder without presets takes none (an
/// empty preset).
fn check_preset(preset: &str, encoder: Encoder) -> Result<String, AppError> {
    let preset = preset.trim();
    let presets = encoder.profile().presets;
    if presets.is_empty() {
        if !preset.is_empty() {
            return Err(AppError::invalid(format!("preset: {encoder} takes no preset, not {preset:?}")));
        }
        return Ok(String::new());
    }
    if !encoder.takes_preset(preset) {
        return Err(AppError::invalid(format!(
            "preset must be one of {} for {encoder}, not {preset:?}",
            presets.join(", ")
        )));
    }
    Ok(preset.to_string())
}

fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> String {
    all.iter().map(|v| name(*v)).collect::<Vec<_>>().join(", ")
}

/// Checks every path and returns them canonical: absolute, existing directories, none the
/// same as or inside another, each where libraries may be.
async fn canonical_paths(paths: Vec<String>, places: &LibraryPlaces) -> Result<Vec<String>, AppError> {
    if paths.is_empty() || paths.len() > MAX_PATHS {
        return Err(AppError::invalid(format!("paths must list 1 to {MAX_PATHS} directories")));
    }
    // canonicalize and metadata touch the filesystem, which may be a slow network share.
    let places = places.clone();
    web::block(move || canonical_paths_blocking(&paths, &places)).await?
}

fn canonical_paths_blocking(paths: &[String], places: &LibraryPlaces) -> Result<Vec<String>, AppError> {
    let mut canonical: Vec<PathBuf> = Vec::with_capacity(paths.len());
    for (i, raw) in paths.iter().enumerate() {
        let path = Path::new(raw);
        if !path.is_absolute() {
            return Err(AppError::invalid(format!("paths[{i}] {raw:?} is not an absolute path")));
        }
        let resolved = std::fs::canonicalize(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => AppError::invalid(format!("paths[{i}] {raw:?} does not exist")),
            _ => AppError::invalid(format!("paths[{i}] {raw:?} cannot be opened: {error}")),
        })?;
        if !resolved.is_dir() {
            return Err(AppError::invalid(format!("paths[{i}] {raw:?} is not a directory")));
        }
        if let Some(why) = places.refusal(&resolved) {
            return Err(AppError::invalid(format!("paths[{i}] {raw:?} {why}")));
        }
        // `canonical` holds the paths before this one, in order.
        for (j, (earlier, earlier_raw)) in canonical.iter().zip(paths).enumerate() {
            if resolved.starts_with(earlier) || earlier.starts_with(&resolved) {
                return Err(AppError::invalid(format!(
                    "paths[{i}] {raw:?} overlaps paths[{j}] {earlier_raw:?}: one is the same as or inside the other"
                )));
            }
        }
        canonical.push(resolved);
    }
    canonical
        .into_iter()
        .zip(paths)
        .enumerate()
        .map(|(i, (path, raw))| {
            path.into_os_string()
                .into_string()
                .map_err(|_| AppError::invalid(format!("paths[{i}] {raw:?} is not valid UTF-8 once resolved")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quality_and_preset_follow_the_encoder() {
        assert_eq!(check_quality(51, Encoder::HevcNvenc).unwrap(), 51);
        assert!(check_quality(52, Encoder::Libx265).is_err());
        assert_eq!(check_quality(63, Encoder::Libsvtav1).unwrap(), 63);
        assert!(check_quality(64, Encoder::LibaomAv1).is_err());
        assert!(check_quality(-1, Encoder::LibaomAv1).is_err());
        assert_eq!(check_quality(255, Encoder::Av1Vaapi).unwrap(), 255);
        assert!(check_quality(0, Encoder::Av1Qsv).is_err());
        assert_eq!(check_preset(" slow ", Encoder::Libx265).unwrap(), "slow");
        assert!(check_preset("p5", Encoder::Libx265).unwrap_err().to_string().contains("ultrafast"));
        assert_eq!(check_preset("p5", Encoder::HevcNvenc).unwrap(), "p5");
        assert_eq!(check_preset("", Encoder::HevcVaapi).unwrap(), "");
        assert!(check_preset("medium", Encoder::HevcVaapi).is_err());
        assert!(check_preset("14", Encoder::Libsvtav1).is_err());
    }

    #[test]
    fn paths_are_resolved_and_may_not_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let link = dir.path().join("link").display().to_string();
        let canonical = std::fs::canonicalize(&real).unwrap().display().to_string();
        let places = LibraryPlaces::default();
        assert_eq!(canonical_paths_blocking(std::slice::from_ref(&link), &places).unwrap(), [canonical.as_str()]);
        let err = canonical_paths_blocking(&[link, canonical], &places).unwrap_err().to_string();
        assert!(err.contains("overlaps paths[0]"), "{err}");
    }
}
