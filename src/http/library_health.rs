//! A library's health check (issue 38): started, read and cancelled here, run by
//! `actors::health`; and what to do about one file's finding: check it again, ignore it, or
//! have the Sonarr or Radarr that holds it get a new copy (`actors::regrab`).

use super::body::Body;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::AuthUser;
use crate::actors::regrab::{new_copy, NewCopyError};
use crate::domain::connect::{Connection, ConnectionKind};
use crate::domain::library_health::RunStatus;
use crate::domain::paging::MAX_PAGE;
use crate::domain::regrab::may_hold;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::media::health::{Depth, Verdict};
use crate::repo;
use crate::repo::health::MAX_PAGE_SIZE;

const DEFAULT_PAGE_SIZE: u64 = 100;

/// POST /libraries/{id}/health
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartHealth {
    /// `quick` (every header parses, every packet demuxes to the end) or `thorough` (every
    /// frame of every video and audio stream decodes too).
    // Text read by hand: serde_json reports a wrong type where an enum is expected as a
    // syntax error, which would answer 400 malformed_json instead of 422.
    #[schema(value_type = Depth)]
    pub depth: String,
    /// Also the files unchanged since a check found them `ok` (default false).
    #[serde(default)]
    pub all: bool,
}

/// A library's latest health run.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthRunView {
    pub depth: Depth,
    pub all: bool,
    /// Started by the library's `healthSchedule`.
    pub scheduled: bool,
    #[schema(value_type = RunStatus)]
    pub status: String,
    /// Files this run reads (0 until the library's folders are walked).
    pub files_total: i32,
    pub files_done: i32,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// What the last check of one file found.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileHealthView {
    /// Identifies the result in the per-file actions.
    pub id: i32,
    /// The file's whole path.
    pub path: String,
    pub size: i64,
    pub depth: Depth,
    pub verdict: Verdict,
    /// Damaged files: where the first error is, in seconds from the start.
    pub first_error_seconds: Option<f64>,
    /// The first error (damaged) or why the file cannot be read (unreadable).
    pub message: Option<String>,
    pub error_count: i64,
    pub checked_at: DateTime<Utc>,
    /// The finding no longer keeps the file from encoding.
    pub ignored: bool,
    /// The node whose check this is: the main node's or a linked node's name (checks run on
    /// idle job slots of every node that sees the library). Null for results kept from
    /// before nodes were recorded.
    pub node: Option<String>,
    /// The enabled Sonarr and Radarr connections that may hold the file, in the order "get a
    /// new copy" asks them: those with a path mapping whose `from` folder holds it, and those
    /// without mappings. Empty: none could, and the action is refused (`not_held`).
    pub new_copy_from: Vec<NewCopySource>,
}

/// A connection "get a new copy" may ask.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewCopySource {
    pub id: i32,
    pub name: String,
    pub kind: ConnectionKind,
}

/// Results by verdict, all files of the library that were ever checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCounts {
    pub ok: u64,
    pub damaged: u64,
    pub unreadable: u64,
}

/// GET /libraries/{id}/health: the latest run and a page of per-file results.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LibraryHealthView {
    pub library_id: i32,
    /// Null when the library was never checked.
    pub run: Option<HealthRunView>,
    pub counts: HealthCounts,
    /// Damaged and unreadable files first, then by path.
    pub files: Vec<FileHealthView>,
    /// Files matching the filter.
    pub total: u64,
    pub page: u64,
    pub page_size: u64,
}

/// The path of one result: `/libraries/{id}/health/files/{fileId}/…`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Path, rename_all = "camelCase")]
pub struct FilePath {
    /// The library
    id: i32,
    /// The result's `id`
    file_id: i32,
}

/// GET /libraries/{id}/health query parameters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct HealthQuery {
    /// 1 to 1,000,000.
    #[param(minimum = 1, maximum = 1000000)]
    pub page: Option<u64>,
    #[param(schema_with = page_size)]
    pub page_size: Option<u64>,
    /// Only the files with this verdict.
    pub verdict: Option<Verdict>,
}

fn page_size() -> utoipa::openapi::schema::Object {
    super::schema::page_size(DEFAULT_PAGE_SIZE)
}

/// POST /libraries/{id}/health/files/{fileId}/ignore
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IgnoreFinding {
    /// True: the finding no longer keeps the file from encoding; false: it does again.
    pub ignored: bool,
}

/// POST /libraries/{id}/health/files/{fileId}/recheck
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RecheckFile {
    /// Default: the depth of the file's last check.
    #[schema(value_type = Option<Depth>)]
    pub depth: Option<String>,
}

/// POST /libraries/{id}/health/files/{fileId}/regrab
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Regrab {
    /// Must be true: the app deletes the file, and this cannot be undone.
    #[schema(schema_with = must_be_true)]
    pub confirm: bool,
}

/// `true` and nothing else: `false` is refused (422), so the document does not offer it.
fn must_be_true() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let yes = ObjectBuilder::new().schema_type(Type::Boolean).enum_values(Some([true])).build();
    super::schema::described(yes, "Must be true: the app deletes the file, and this cannot be undone.")
}

/// What "get a new copy" did.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegrabView {
    pub message: String,
}

/// A depth as the API takes it.
fn parse_depth(text: &str) -> Result<Depth, AppError> {
    Depth::parse(text).ok_or_else(|| AppError::invalid(format!("depth must be quick or thorough, not {text:?}")))
}

/// A stored depth: the server writes only `Depth::as_str`; anything else reads as the
/// shallower one rather than failing the whole page.
fn depth_of(text: &str) -> Depth {
    Depth::parse(text).unwrap_or(Depth::Quick)
}

/// The enabled Sonarr and Radarr connections, in the order `new_copy` asks them.
async fn arrs(state: &AppState) -> Result<Vec<(NewCopySource, Connection)>, AppError> {
    Ok(repo::connections::list(&state.db)
        .await?
        .into_iter()
        .filter(|(model, _)| model.enabled)
        .filter_map(|(model, _)| {
            let conn = repo::connections::connection_of(&model)?;
            matches!(conn.kind, ConnectionKind::Sonarr | ConnectionKind::Radarr)
                .then(|| (NewCopySource { id: model.id, name: model.name.clone(), kind: conn.kind }, conn))
        })
        .collect())
}

fn run_view(row: &entities::library_health_run::Model) -> HealthRunView {
    HealthRunView {
        depth: depth_of(&row.depth),
        all: row.all,
        scheduled: row.scheduled,
        status: row.status.clone(),
        files_total: row.files_total,
        files_done: row.files_done,
        started_at: row.started_at,
        finished_at: row.finished_at,
    }
}

fn file_view(row: &entities::library_health_file::Model, arrs: &[(NewCopySource, Connection)]) -> FileHealthView {
    let path = crate::domain::path_bytes::readable(repo::health::path_of(row).as_os_str()).into_owned();
    FileHealthView {
        id: row.id,
        new_copy_from: arrs
            .iter()
            .filter(|(_, conn)| may_hold(conn, &path))
            .map(|(source, _)| source.clone())
            .collect(),
        path,
        size: row.size,
        depth: depth_of(&row.depth),
        verdict: repo::health::verdict_of(row),
        first_error_seconds: row.first_error_seconds,
        message: row.message.clone(),
        error_count: row.error_count,
        checked_at: row.checked_at,
        ignored: row.ignored,
        node: row.node.clone(),
    }
}

/// Check a library's health
///
/// Starts, in the background, a check of every media file of the library (encoded, skipped
/// and untouched alike) on idle job slots, at the lowest priority: no check starts while a
/// job waits for a slot. Files unchanged since a check found them `ok` are skipped unless
/// `all`. Nothing is written beside the files. Read it with GET.
#[utoipa::path(
    post,
    operation_id = "start_library_health",
    path = "/libraries/{id}/health",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    request_body = StartHealth,
    responses(
        (status = 202, description = "Started", body = HealthRunView),
        (status = 409, description = "A health check of the library is running (code conflict)", body = ErrorBody),
    ),
)]
pub async fn start(
    user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
    body: Body<StartHealth>,
) -> Result<HttpResponse, AppError> {
    let depth = parse_depth(&body.depth)?;
    let library = repo::libraries::get(&state.db, id.into_inner()).await?;
    let row = state.runtime.health.start(&library, depth, body.all).await?;
    tracing::info!(user = %user.username, library = library.id, depth = depth.as_str(), all = body.all,
        "health check started");
    Ok(HttpResponse::Accepted().json(run_view(&row)))
}

/// A library's health
///
/// The latest run (its progress) and a page of per-file results, damaged and unreadable
/// files first.
#[utoipa::path(
    get,
    operation_id = "get_library_health",
    path = "/libraries/{id}/health",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404."), HealthQuery),
    responses(
        (status = 200, description = "The latest run and the results", body = LibraryHealthView),
    ),
)]
pub async fn get(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
    query: web::Query<HealthQuery>,
) -> Result<web::Json<LibraryHealthView>, AppError> {
    let id = id.into_inner();
    repo::libraries::get(&state.db, id).await?;
    let invalid = |message: String| AppError::BadRequest { code: "invalid_query", message };
    let page = match query.page {
        Some(page) if page == 0 || page > MAX_PAGE => return Err(invalid(format!("page must be 1 to {MAX_PAGE}"))),
        Some(page) => page,
        None => 1,
    };
    let page_size = match query.page_size {
        Some(0) => return Err(invalid(format!("pageSize must be 1 to {MAX_PAGE_SIZE}"))),
        Some(size) => size.min(MAX_PAGE_SIZE),
        None => DEFAULT_PAGE_SIZE,
    };
    let run = repo::health::run_of(&state.db, id).await?;
    let counts = repo::health::counts(&state.db, id).await?;
    let count = |v: Verdict| counts.get(v.as_str()).copied().unwrap_or(0);
    let results = repo::health::page(&state.db, id, query.verdict, page, page_size).await?;
    let arrs = arrs(&state).await?;
    Ok(web::Json(LibraryHealthView {
        library_id: id,
        run: run.as_ref().map(run_view),
        counts: HealthCounts {
            ok: count(Verdict::Ok),
            damaged: count(Verdict::Damaged),
            unreadable: count(Verdict::Unreadable),
        },
        files: results.items.iter().map(|row| file_view(row, &arrs)).collect(),
        total: results.total,
        page,
        page_size,
    }))
}

/// Cancel a library's health check
#[utoipa::path(
    delete,
    operation_id = "cancel_library_health",
    path = "/libraries/{id}/health",
    tag = "libraries",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 202, description = "Cancelled: checks in progress stop; what was found stays"),
        (status = 409, description = "No health check of the library runs (code conflict)", body = ErrorBody),
    ),
)]
pub async fn cancel(user: AuthUser, state: web::Data<AppState>, id: web::Path<i32>) -> Result<HttpResponse, AppError> {
    let id = id.into_inner();
    repo::libraries::get(&state.db, id).await?;
    if !state.runtime.health.cancel(id) {
        return Err(AppError::from(repo::RepoError::Conflict(format!("no health check of library {id} runs"))));
    }
    tracing::info!(user = %user.username, library = id, "health check cancelled");
    Ok(HttpResponse::Accepted().finish())
}

/// Check one file again
///
/// In the background, on an idle slot as a run does; read the result with GET. The body
/// may be `{}`.
#[utoipa::path(
    post,
    operation_id = "recheck_library_file",
    path = "/libraries/{id}/health/files/{fileId}/recheck",
    tag = "libraries",
    params(FilePath),
    request_body = RecheckFile,
    responses(
        (status = 202, description = "The check is on its way", body = FileHealthView),
    ),
)]
pub async fn recheck(
    user: AuthUser,
    state: web::Data<AppState>,
    path: web::Path<FilePath>,
    body: Body<RecheckFile>,
) -> Result<HttpResponse, AppError> {
    let FilePath { id, file_id } = path.into_inner();
    let depth = body.depth.as_deref().map(parse_depth).transpose()?;
    let library = repo::libraries::get(&state.db, id).await?;
    let row = repo::health::result(&state.db, id, file_id).await?;
    let depth = depth.unwrap_or_else(|| depth_of(&row.depth));
    state.runtime.health.recheck(&library, &row, depth);
    tracing::info!(user = %user.username, library = id, file = file_id, "file health check again");
    Ok(HttpResponse::Accepted().json(file_view(&row, &arrs(&state).await?)))
}

/// Ignore a finding (or stop ignoring it)
///
/// An ignored finding no longer keeps the file from encoding; it comes back when the file
/// changes and a check finds it damaged again.
#[utoipa::path(
    post,
    operation_id = "ignore_library_file",
    path = "/libraries/{id}/health/files/{fileId}/ignore",
    tag = "libraries",
    params(FilePath),
    request_body = IgnoreFinding,
    responses(
        (status = 200, description = "The result after the change", body = FileHealthView),
    ),
)]
pub async fn ignore(
    user: AuthUser,
    state: web::Data<AppState>,
    path: web::Path<FilePath>,
    body: Body<IgnoreFinding>,
) -> Result<web::Json<FileHealthView>, AppError> {
    let FilePath { id, file_id } = path.into_inner();
    repo::libraries::get(&state.db, id).await?;
    let row = repo::health::set_ignored(&state.db, id, file_id, body.ignored).await?;
    tracing::info!(user = %user.username, library = id, file = file_id, ignored = body.ignored, "health finding");
    Ok(web::Json(file_view(&row, &arrs(&state).await?)))
}

/// Get a new copy of a damaged file
///
/// The Sonarr or Radarr connection whose series (movie) holds the file is asked, through
/// its API v3, to delete its record of the file (it removes the file itself) and to search
/// for the episodes (the movie) again. Needs `{"confirm":true}`.
#[utoipa::path(
    post,
    operation_id = "regrab_library_file",
    path = "/libraries/{id}/health/files/{fileId}/regrab",
    tag = "libraries",
    params(FilePath),
    request_body = Regrab,
    responses(
        (status = 200, description = "The app deleted its record and searches", body = RegrabView),
        (status = 409, description = "No Sonarr or Radarr connection holds the file (code not_held)", body = ErrorBody),
        (status = 422, description = "Not confirmed (code validation_failed)", body = ErrorBody),
        (status = 503, description = "The app could not be asked, or did not start the search (code unavailable)", body = ErrorBody),
    ),
)]
pub async fn regrab(
    user: AuthUser,
    state: web::Data<AppState>,
    path: web::Path<FilePath>,
    body: Body<Regrab>,
) -> Result<web::Json<RegrabView>, AppError> {
    let FilePath { id, file_id } = path.into_inner();
    repo::libraries::get(&state.db, id).await?;
    let row = repo::health::result(&state.db, id, file_id).await?;
    if !body.confirm {
        return Err(AppError::invalid(
            "getting a new copy deletes the file in Sonarr or Radarr: confirm with {\"confirm\":true}; nothing was asked",
        ));
    }
    let message = match new_copy(&state.db, &repo::health::path_of(&row)).await {
        Ok(message) => message,
        Err(e @ NewCopyError::NotHeld(_)) => return Err(AppError::conflict("not_held", e.to_string())),
        Err(NewCopyError::Repo(e)) => return Err(AppError::from(e)),
        Err(e) => return Err(AppError::Unavailable(e.to_string())),
    };
    tracing::info!(user = %user.username, library = id, file = file_id, "asked for a new copy");
    Ok(web::Json(RegrabView { message }))
}
