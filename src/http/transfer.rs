//! Transfers for linked nodes that do not see a job's library (issue 39), on the API
//! listener beside `/cluster/link` and, like it, outside the OpenAPI document: a node
//! presents its own credential (`Bearer <identity>.<credential>`) and the lease it holds on
//! the job (`X-Condense-Lease`); any other node, or a lease taken over since, is refused.
//!
//! - `GET /cluster/jobs/{id}/source`: the source, with `Range` (206, `Content-Range`; 416
//!   out of range) and its SHA-256, size and modification time in `X-Condense-*` headers.
//! - `GET /cluster/jobs/{id}/output`: `{"length"}`, the upload's durable bytes; or
//!   `{"length": 0, "committing": true}` while a finish's commit runs (a node whose answer to
//!   the finish was lost asks this before it would upload again).
//! - `PUT /cluster/jobs/{id}/output` with `Content-Range: bytes N-M/*`: appends at N, which
//!   must be the durable length (409 `offset_mismatch` otherwise); answers the new length.
//! - `POST /cluster/jobs/{id}/output/finish` `{sha256, size, extension, sourceSha256}`:
//!   409 `source_changed` when the source changed since, 409 `checksum_mismatch` (the
//!   upload discarded) when the upload is not what the node sent; otherwise 202: the output
//!   is verified and replaces the original in the background (`job::remote`), and the node
//!   follows the job to COMPLETED or FAILED.
//!
//! A job's output in parts, uploaded while the node encodes (issue 39, "upload while
//! encoding"; `actors::cluster::parts`), under the job's lease:
//! - `GET /cluster/jobs/{id}/parts`: `{parts: [{name, size, sha256}], arriving: [{name,
//!   length}]}`, the parts taken whole and those under way with their durable bytes; or
//!   `{committing: true}` while a finish's commit runs. An older main node answers 404: the
//!   node then muxes and uploads the output whole.
//! - `PUT /cluster/jobs/{id}/parts/{name}` with `Content-Range: bytes N-M/*`: appends at N,
//!   the part's durable length (409 `offset_mismatch` otherwise); answers the new length.
//!   The first part of an attempt empties the job's partial folder here.
//! - `POST /cluster/jobs/{id}/parts/{name}/done` `{size, sha256}`: the part taken whole; 409
//!   `checksum_mismatch` (the part discarded) when it is not what the node sent.
//! - `POST /cluster/jobs/{id}/parts/finish` `{extension, sourceSha256, plan, manifest,
//!   parts}`: 409 `source_changed` (the parts discarded), 409 `checksum_mismatch` when a
//!   part is not here whole; otherwise 202: the main node muxes the output from the original
//!   and the parts, verifies it and replaces the original in the background.
//!
//! A span of a job given to a node without the share (issue 39, item 4;
//! `actors::cluster::span_transfer`), under the span's lease (`X-Condense-Lease`):
//! - `GET /cluster/jobs/{id}/spans/{span}`: claims the span for the node and answers
//!   `{plan, given}` (`media::span_transfer::SpanTask`), or 409 `nothing_to_do` with why.
//! - `GET /cluster/jobs/{id}/source` with `X-Condense-Span: N`: the source, as above.
//! - `PUT /cluster/jobs/{id}/spans/{span}/files/{name}` with `X-Condense-Size` and
//!   `X-Condense-Sha256`: one segment file of the span, whole; 409 `checksum_mismatch`
//!   when it is not what the node sent (it is removed).
//! - `POST /cluster/jobs/{id}/spans/{span}/finish` `{record, sourceSha256}`: the span's
//!   record, for the job's run to take in; 409 `source_changed` when the source changed.
//!   Asked again after the claim went with the record (an answer lost on the way), the same
//!   record still in place is answered as the first try was.

use super::body::Body;
use actix_files::NamedFile;
use actix_web::http::header::{HeaderName, HeaderValue, CONTENT_RANGE, RANGE};
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::actors::cluster::parts::{self as job_parts, PartsFinish};
use crate::actors::cluster::span_transfer::{self, authorize_span, SpanFinish, SPAN_HEADER};
use crate::actors::cluster::transfer::{
    self, authorize, Finish, TransferError, LEASE_HEADER, MTIME_HEADER, RANGE_SHA256_HEADER, SHA256_HEADER, SIZE_HEADER,
};
use crate::actors::job::remote::{commit_remote, Claim, Uploaded};
use crate::domain::byte_ranges::asked_range;
use crate::domain::transfer::upload_range;
use crate::error::AppError;
use crate::http::cluster::enrolled_node;
use crate::http::state::AppState;
use crate::media::event::RunStats;
use crate::media::plan::SourceIdentity;
use crate::media::transfer::{read_range, TransferFileError};

impl From<TransferError> for AppError {
    fn from(err: TransferError) -> Self {
        let message = err.to_string();
        match err {
            TransferError::NotYours(_) => AppError::Forbidden(message),
            TransferError::NoJob(_) => AppError::NotFound(message),
            TransferError::Invalid(_) => AppError::bad_request(message),
            TransferError::SourceChanged { .. } => AppError::conflict("source_changed", message),
            TransferError::Body(_) => AppError::bad_request(message),
            TransferError::Repo(e) => e.into(),
            TransferError::File(e) => match e {
                TransferFileError::Outside(_) | TransferFileError::Foreign(_) | TransferFileError::NotAFile(_) => {
                    AppError::conflict("source_refused", message)
                }
                TransferFileError::Busy => AppError::conflict("busy", message),
                TransferFileError::Offset { .. } => AppError::conflict("offset_mismatch", message),
                TransferFileError::Mismatch(_) => AppError::conflict("checksum_mismatch", message),
                TransferFileError::Refused(_) => AppError::bad_request(message),
                TransferFileError::Media(_) => AppError::Internal(message),
            },
        }
    }
}

fn lease_of(req: &HttpRequest) -> &str {
    req.headers().get(LEASE_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// Where the bytes of an upload's body go in what it adds to (`Content-Range: bytes
/// FIRST-LAST/*`): a part sent in pieces resumes where the last one ended.
fn body_range(req: &HttpRequest) -> Result<(u64, u64), AppError> {
    let range = req.headers().get(CONTENT_RANGE).and_then(|v| v.to_str().ok()).and_then(upload_range);
    range.ok_or_else(|| AppError::bad_request("an upload names its bytes: Content-Range: bytes FIRST-LAST/*"))
}

/// The job, when the requesting node holds its current lease, or (with `X-Condense-Span`)
/// the lease of that span of it.
async fn leased(state: &AppState, req: &HttpRequest, job_id: i32) -> Result<entities::job::Model, AppError> {
    let node = enrolled_node(state, req).await?;
    let lease = lease_of(req);
    match req.headers().get(SPAN_HEADER) {
        Some(span) => {
            let span = span.to_str().ok().and_then(|s| s.parse::<u32>().ok());
            let span = span.ok_or_else(|| AppError::bad_request("X-Condense-Span is a span's number"))?;
            Ok(authorize_span(&state.db, node, job_id, span, lease).await?)
        }
        None => Ok(authorize(&state.db, node, job_id, lease).await?),
    }
}

/// The job and span, when the requesting node holds that span's lease.
async fn span_leased(
    state: &AppState,
    req: &HttpRequest,
    job_id: i32,
    span: u32,
) -> Result<(entities::job::Model, i32), AppError> {
    let node = enrolled_node(state, req).await?;
    Ok((authorize_span(&state.db, node, job_id, span, lease_of(req)).await?, node))
}

fn header(name: &'static str, value: String) -> Option<(HeaderName, HeaderValue)> {
    Some((HeaderName::from_static(name), HeaderValue::from_str(&value).ok()?))
}

/// The job's source, opened for the node that holds the job's lease or a span's.
async fn leased_source(state: &AppState, req: &HttpRequest, job_id: i32) -> Result<transfer::Source, AppError> {
    let job = leased(state, req, job_id).await?;
    Ok(transfer::open_source(&state.db, &job).await?)
}

pub async fn source(
    req: HttpRequest,
    path: web::Path<i32>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let source = leased_source(&state, &req, path.into_inner()).await?;
    let facts = [
        header(SHA256_HEADER, source.sha256.clone()),
        header(SIZE_HEADER, source.file.size.to_string()),
        header(MTIME_HEADER, source.file.mtime_ns.to_string()),
    ];
    // actix-files answers the ranges (206, Content-Range, 416) from the open file itself.
    let named = NamedFile::from_file(source.file.file, "source")
        .map_err(|e| AppError::Internal(format!("serving the source: {e}")))?
        .set_content_type(actix_web::http::header::ContentType::octet_stream().0)
        .use_etag(false)
        .use_last_modified(false)
        .disable_content_disposition();
    let mut res = named.into_response(&req);
    for (name, value) in facts.into_iter().flatten() {
        res.headers_mut().insert(name, value);
    }
    Ok(res)
}

/// One range of the job's source (`Range: bytes=FIRST-LAST`, at most
/// `domain::byte_ranges::RANGE_MOST` bytes), for a span a node without the share encodes
/// from a sparse copy (issue 39, item 4): 206 with the range's own SHA-256 beside the whole
/// source's, so the node checks each range it keeps and that all are of one version.
pub async fn source_range(
    req: HttpRequest,
    path: web::Path<i32>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let source = leased_source(&state, &req, path.into_inner()).await?;
    let size = source.file.size;
    let asked = req.headers().get(RANGE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let (from, to) = asked_range(asked, size).map_err(AppError::bad_request)?;
    let file = source.file.file;
    let (bytes, range_sha) = web::block(move || read_range(&file, from, to))
        .await
        .map_err(|e| AppError::Internal(format!("reading the source: {e}")))?
        .map_err(|e| AppError::Internal(format!("reading bytes {from}-{to} of the source: {e}")))?;
    let mut res = HttpResponse::PartialContent();
    res.content_type("application/octet-stream");
    res.insert_header((CONTENT_RANGE, format!("bytes {from}-{}/{size}", to - 1)));
    let facts = [
        header(SHA256_HEADER, source.sha256),
        header(SIZE_HEADER, size.to_string()),
        header(RANGE_SHA256_HEADER, range_sha),
    ];
    for (name, value) in facts.into_iter().flatten() {
        res.insert_header((name, value));
    }
    Ok(res.body(bytes))
}

pub async fn output_length(
    req: HttpRequest,
    path: web::Path<i32>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let job = leased(&state, &req, path.into_inner()).await?;
    // The commit holds the partial folder (the upload is its output now): asked while it
    // runs, the node learns its finish was taken rather than that the upload is busy.
    if state.runtime.remote_commits.running(job.id) {
        return Ok(HttpResponse::Ok().json(json!({ "length": 0, "committing": true })));
    }
    let length = transfer::upload_length(&job).await?;
    Ok(HttpResponse::Ok().json(json!({ "length": length })))
}

pub async fn put_output(
    req: HttpRequest,
    path: web::Path<i32>,
    body: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let job = leased(&state, &req, path.into_inner()).await?;
    let (first, last) = body_range(&req)?;
    let length = transfer::append(&job, first, last, body).await?;
    Ok(HttpResponse::Ok().json(json!({ "length": length })))
}

pub async fn finish_output(
    req: HttpRequest,
    path: web::Path<i32>,
    body: Body<Finish>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let Some((job, claim)) = to_commit(&state, &req, path.into_inner()).await? else { return Ok(committing()) };
    let done = body.into_inner();
    let (extension, run_stats) = (done.extension.clone(), done.run.run_stats(job.node_name.as_deref()));
    let transfer::Finished { lock, output, source } = transfer::finish(&state.db, &job, done).await?;
    // The commit takes the partial folder's whole lock itself, from its verification on.
    drop(lock);
    commit_in_background(&state, job, claim, Uploaded::Output { extension }, source, run_stats);
    Ok(HttpResponse::Accepted().json(json!({ "output": output, "committing": true })))
}

/// The job whose upload the node says is whole, with its place among the commits running;
/// None while its commit already runs.
async fn to_commit(
    state: &AppState,
    req: &HttpRequest,
    job_id: i32,
) -> Result<Option<(entities::job::Model, Claim)>, AppError> {
    let job = leased(state, req, job_id).await?;
    Ok(state.runtime.remote_commits.claim(job.id).map(|claim| (job, claim)))
}

/// The answer to a finished upload: Accepted, the node follows the job to COMPLETED or
/// FAILED in its store; asked again while the commit runs, the same answer.
fn committing() -> HttpResponse {
    HttpResponse::Accepted().json(json!({ "committing": true }))
}

/// Runs the commit of what the node holding `job` uploaded, in the node's name, holding
/// the job's place in `RemoteCommits` until it ends.
fn commit_in_background(
    state: &AppState,
    job: entities::job::Model,
    claim: Claim,
    uploaded: Uploaded,
    source: SourceIdentity,
    run_stats: Option<RunStats>,
) {
    let (env, lease) = (state.runtime.jobs.clone(), job.lease_id.clone().unwrap_or_default());
    actix_web::rt::spawn(async move {
        if let Err(e) = commit_remote(&env, job.id, lease, job.node_name.clone(), uploaded, source, run_stats).await {
            tracing::error!(job_id = job.id, error = %e, "the commit of an uploaded output stopped on an error");
        }
        drop(claim);
    });
}

pub async fn parts(
    req: HttpRequest,
    path: web::Path<i32>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let job = leased(&state, &req, path.into_inner()).await?;
    if state.runtime.remote_commits.running(job.id) {
        return Ok(HttpResponse::Ok().json(json!({ "committing": true })));
    }
    Ok(HttpResponse::Ok().json(job_parts::uploaded(&state.db, &job).await?))
}

pub async fn put_part(
    req: HttpRequest,
    path: web::Path<(i32, String)>,
    body: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let (job_id, name) = path.into_inner();
    let job = leased(&state, &req, job_id).await?;
    let (first, last) = body_range(&req)?;
    let length = job_parts::append(&state.db, &job, name, first, last, body).await?;
    Ok(HttpResponse::Ok().json(json!({ "length": length })))
}

/// The size and SHA-256 of a part the node sent whole.
#[derive(serde::Deserialize)]
pub struct PartDone {
    size: u64,
    sha256: String,
}

pub async fn take_part(
    req: HttpRequest,
    path: web::Path<(i32, String)>,
    body: Body<PartDone>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let (job_id, name) = path.into_inner();
    let job = leased(&state, &req, job_id).await?;
    let PartDone { size, sha256 } = body.into_inner();
    Ok(HttpResponse::Ok().json(job_parts::take(&state.db, &job, name, size, sha256).await?))
}

pub async fn finish_parts(
    req: HttpRequest,
    path: web::Path<i32>,
    body: Body<PartsFinish>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let Some((job, claim)) = to_commit(&state, &req, path.into_inner()).await? else { return Ok(committing()) };
    let done = body.into_inner();
    let (lock, source) = job_parts::finish(&state.db, &job, &done).await?;
    // The mux takes the partial folder's lock itself.
    drop(lock);
    let run_stats = done.run.run_stats(job.node_name.as_deref());
    let uploaded = Uploaded::Parts { extension: done.extension, plan: Box::new(done.plan) };
    commit_in_background(&state, job, claim, uploaded, source, run_stats);
    Ok(committing())
}

pub async fn span_task(
    req: HttpRequest,
    path: web::Path<(i32, u32)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let (job_id, span) = path.into_inner();
    let (job, node) = span_leased(&state, &req, job_id, span).await?;
    match span_transfer::take(&state.db, &state.runtime.lifecycle.span_claims, &job, node, span, lease_of(&req)).await?
    {
        Ok(task) => Ok(HttpResponse::Ok().json(task)),
        Err(why) => Err(AppError::conflict("nothing_to_do", why)),
    }
}

pub async fn put_span_file(
    req: HttpRequest,
    path: web::Path<(i32, u32, String)>,
    body: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let (job_id, span, name) = path.into_inner();
    span_leased(&state, &req, job_id, span).await?;
    let head = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (Some(size), Some(sha256)) = (head(SIZE_HEADER).and_then(|s| s.parse::<u64>().ok()), head(SHA256_HEADER))
    else {
        return Err(AppError::bad_request(
            "a span's file names its size and SHA-256 (X-Condense-Size, X-Condense-Sha256)",
        ));
    };
    let claims = &state.runtime.lifecycle.span_claims;
    let bytes = span_transfer::put_file(claims, job_id, span, lease_of(&req), name, size, sha256, body).await?;
    Ok(HttpResponse::Ok().json(json!({ "bytes": bytes })))
}

pub async fn finish_span(
    req: HttpRequest,
    path: web::Path<(i32, u32)>,
    body: Body<SpanFinish>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let (job_id, span) = path.into_inner();
    let (job, _) = span_leased(&state, &req, job_id, span).await?;
    let claims = &state.runtime.lifecycle.span_claims;
    span_transfer::finish(&state.db, claims, &job, span, lease_of(&req), body.into_inner()).await?;
    Ok(HttpResponse::Ok().json(json!({ "span": span })))
}
