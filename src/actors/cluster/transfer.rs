//! The main node's side of a transfer to a linked node that does not see the library (issue
//! 39): only the node holding a job's current lease may read its source or upload its
//! output. The source's SHA-256 is computed once per size and modification time and kept
//! (`repo::transfers`); an output is appended at its durable length and checked whole
//! against the node's SHA-256, and refused when the source changed since the node read it.
//! The files themselves are `media::transfer`'s.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use actix_web::web::Bytes;
use entities::job;
use futures_util::{Stream, StreamExt};
use sea_orm::DatabaseConnection;

use crate::actors::store::holds_lease;
use crate::domain::transfer::{valid_extension, valid_sha256};
use crate::media::contain::still_inside;
use crate::media::event::{PhaseTime, RunStats};
use crate::media::partial::PartialLock;
use crate::media::plan::SourceIdentity;
use crate::media::transfer::{self as files, SourceFile, TransferFileError, Upload};
use crate::media::MediaError;
use crate::repo::{self, jobs, RepoError};

/// The header that carries the lease a node acts under.
pub const LEASE_HEADER: &str = "x-condense-lease";
/// The source's SHA-256, size and modification time, on every answer with its bytes.
pub const SHA256_HEADER: &str = "x-condense-sha256";
/// The SHA-256 of the bytes of one range of the source (`http::transfer::source_range`).
pub const RANGE_SHA256_HEADER: &str = "x-condense-range-sha256";
pub const SIZE_HEADER: &str = "x-condense-size";
pub const MTIME_HEADER: &str = "x-condense-mtime-ns";

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("job {0} is not this node's to transfer (it holds no current lease on it)")]
    NotYours(i32),
    #[error("no job {0}")]
    NoJob(i32),
    #[error("{0}")]
    Invalid(String),
    #[error("the source changed since the node read it (its SHA-256 is now {now}); the upload was discarded")]
    SourceChanged { now: String },
    #[error(transparent)]
    File(#[from] TransferFileError),
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error("the upload's body broke off: {0}")]
    Body(String),
}

/// A blocking task that ended without its answer (it panicked, or the runtime is going).
pub(super) fn blocking(e: tokio::task::JoinError) -> TransferError {
    TransferError::File(TransferFileError::Media(MediaError::misc(format!("a blocking task ended: {e}"))))
}

/// The job `job_id`, when node `node_id` holds its current `lease`.
pub async fn authorize(
    db: &DatabaseConnection,
    node_id: i32,
    job_id: i32,
    lease: &str,
) -> Result<job::Model, TransferError> {
    let job = job_of(db, job_id).await?;
    if job.node_id == Some(node_id) && holds_lease(&job, lease) {
        Ok(job)
    } else {
        Err(TransferError::NotYours(job_id))
    }
}

/// Job `job_id`'s row.
pub(super) async fn job_of(db: &DatabaseConnection, job_id: i32) -> Result<job::Model, TransferError> {
    match jobs::get(db, job_id).await {
        Ok(job) => Ok(job),
        Err(RepoError::NotFound(_)) => Err(TransferError::NoJob(job_id)),
        Err(e) => Err(e.into()),
    }
}

/// The job's source, contained again in its library (never through a link).
pub(super) async fn contained_source(db: &DatabaseConnection, job: &job::Model) -> Result<PathBuf, TransferError> {
    let roots = roots_of(db, job).await?;
    let source = jobs::source_path(job);
    let checked = source.clone();
    tokio::task::spawn_blocking(move || still_inside(&checked, &roots))
        .await
        .map_err(blocking)?
        .map_err(|e| TransferError::File(e.into()))?;
    Ok(source)
}

/// The job's source with its SHA-256.
pub struct Source {
    pub file: SourceFile,
    pub sha256: String,
}

async fn roots_of(db: &DatabaseConnection, job: &job::Model) -> Result<Vec<PathBuf>, TransferError> {
    Ok(match job.library_id {
        Some(id) => {
            repo::libraries::paths_of(&repo::libraries::get(db, id).await?).into_iter().map(PathBuf::from).collect()
        }
        None => Vec::new(),
    })
}

/// Opens the job's source (contained again, never through a link) and finds its SHA-256:
/// the one kept for this size and time, or read now and kept.
pub async fn open_source(db: &DatabaseConnection, job: &job::Model) -> Result<Source, TransferError> {
    let roots = roots_of(db, job).await?;
    let path = jobs::source_path(job);
    let file = tokio::task::spawn_blocking(move || files::open_source(&path, &roots)).await.map_err(blocking)??;
    let size = i64::try_from(file.size).unwrap_or(i64::MAX);
    if let Some(sha256) = repo::transfers::hash_of(db, job.id, size, file.mtime_ns).await? {
        return Ok(Source { file, sha256 });
    }
    let reader =
        file.file.try_clone().map_err(|e| TransferFileError::from(MediaError::from_io("opening the source", &e)))?;
    let sha256 = hash_and_keep(db.clone(), job.id, file.size, file.mtime_ns, reader).await.map_err(blocking)??;
    Ok(Source { file, sha256 })
}

/// Hashes the first `len` bytes of the source open in `reader` (job `job_id`'s, `len` bytes
/// long and modified at `mtime_ns` when opened) and keeps the hash, in a task of its own: a
/// request dropped meanwhile does not lose it. The node's client waits 10 minutes for its
/// first answer; a large file on slow storage may take longer to hash, and a hash dropped
/// with its request was begun again by every try, never kept. Now the next try finds it kept.
pub fn hash_and_keep(
    db: DatabaseConnection,
    job_id: i32,
    len: u64,
    mtime_ns: i64,
    reader: std::fs::File,
) -> tokio::task::JoinHandle<Result<String, TransferError>> {
    tokio::spawn(async move {
        let sha256 = tokio::task::spawn_blocking(move || files::sha256_of(&reader, len))
            .await
            .map_err(blocking)?
            .map_err(|e| TransferFileError::from(MediaError::from_io("reading the source", &e)))?;
        let size = i64::try_from(len).unwrap_or(i64::MAX);
        repo::transfers::keep(&db, job_id, size, mtime_ns, &sha256).await?;
        tracing::info!(job_id, bytes = len, "hashed a source for a transfer");
        Ok(sha256)
    })
}

/// The upload's durable length.
pub async fn upload_length(job: &job::Model) -> Result<u64, TransferError> {
    let source = jobs::source_path(job);
    let upload = tokio::task::spawn_blocking(move || Upload::open(&source)).await.map_err(blocking)??;
    Ok(upload.len())
}

/// Appends the part `first..=last` read from `body` at the upload's durable length (refused
/// unless `first` is that length); what arrived is made durable even when the body breaks
/// off. The durable length after.
pub async fn append<S, E>(job: &job::Model, first: u64, last: u64, body: S) -> Result<u64, TransferError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let source = jobs::source_path(job);
    append_to(move || Upload::open(&source), first, last, body).await
}

/// Appends as `append` does, to the upload `open` opens (the output, or one of a job's parts).
pub(super) async fn append_to<S, E>(
    open: impl FnOnce() -> Result<Upload, TransferFileError> + Send + 'static,
    first: u64,
    last: u64,
    mut body: S,
) -> Result<u64, TransferError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut upload = tokio::task::spawn_blocking(open).await.map_err(blocking)??;
    upload.expect_offset(first)?;
    let declared = last - first + 1;
    let mut received = 0u64;
    let mut broke = None;
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                broke = Some(e.to_string());
                break;
            }
        };
        if received + chunk.len() as u64 > declared {
            broke = Some(format!("the body is longer than the {declared} bytes its Content-Range names"));
            break;
        }
        received += chunk.len() as u64;
        upload =
            tokio::task::spawn_blocking(move || upload.append(&chunk).map(|()| upload)).await.map_err(blocking)??;
    }
    // The lock is released with the upload, once what arrived is durable.
    let durable = tokio::task::spawn_blocking(move || upload.sync()).await.map_err(blocking)??;
    match broke {
        Some(why) => Err(TransferError::Body(format!("{why}; {durable} bytes are durable"))),
        None if received < declared => {
            Err(TransferError::Body(format!("{received} of {declared} bytes arrived; {durable} bytes are durable")))
        }
        None => Ok(durable),
    }
}

/// What the node says it uploaded.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finish {
    pub sha256: String,
    pub size: u64,
    pub extension: String,
    /// The source's SHA-256 as the node downloaded and encoded it.
    pub source_sha256: String,
    #[serde(flatten)]
    pub run: NodeRun,
}

/// What a node says of its run with the finish of its upload.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRun {
    /// The encode's CPU and wall time on the node, in milliseconds, when it measured them.
    #[serde(default)]
    pub cpu_ms: Option<u64>,
    #[serde(default)]
    pub wall_ms: Option<u64>,
    /// Where the node's time went (its download, validation, the transcoder's phases, the
    /// upload), for the job's completion (`media::event::PhaseTime`); none from an older node.
    #[serde(default)]
    pub phases: Vec<PhaseTime>,
    /// The transcoder's `alone_ms`, when it said.
    #[serde(default)]
    pub alone_ms: Option<u64>,
}

impl NodeRun {
    /// What a node sends of `stats` (its run, when it measured it), with its `phases`.
    pub fn of(stats: Option<&RunStats>, phases: Vec<PhaseTime>) -> NodeRun {
        NodeRun {
            cpu_ms: stats.map(|s| s.cpu_ms),
            wall_ms: stats.map(|s| s.wall_ms),
            phases,
            alone_ms: stats.map(|s| s.alone_ms),
        }
    }

    /// What the node said of its run, its phases marked with its name (`node`), for the
    /// commit; `None` when it measured nothing.
    pub fn run_stats(&self, node: Option<&str>) -> Option<RunStats> {
        let (cpu_ms, wall_ms) = self.cpu_ms.zip(self.wall_ms)?;
        let phases = self.phases.iter().map(|p| PhaseTime { node: node.map(str::to_string), ..p.clone() }).collect();
        Some(RunStats { cpu_ms, wall_ms, phases, alone_ms: self.alone_ms.unwrap_or(0) })
    }
}

/// The identity of the job's source, when its SHA-256 is still `sha256` (the one the node
/// encoded from); otherwise what the node uploaded is thrown away (`discard`) and the
/// answer is `SourceChanged`.
pub(super) async fn unchanged(
    db: &DatabaseConnection,
    job: &job::Model,
    sha256: &str,
    discard: fn(&std::path::Path) -> Result<(), TransferFileError>,
) -> Result<SourceIdentity, TransferError> {
    if !valid_sha256(sha256) {
        return Err(TransferError::Invalid("a SHA-256 is 64 lowercase hex digits".into()));
    }
    let opened = open_source(db, job).await?;
    let inode = opened
        .file
        .file
        .metadata()
        .map_err(|e| TransferFileError::from(MediaError::from_io("reading the source's identity", &e)))?
        .ino();
    let identity = SourceIdentity { size: opened.file.size, mtime_ns: opened.file.mtime_ns, inode };
    let now = opened.sha256;
    if now != sha256 {
        let source = jobs::source_path(job);
        tokio::task::spawn_blocking(move || discard(&source)).await.map_err(blocking)??;
        tracing::warn!(job_id = job.id, "an upload was refused: the source changed since the node read it");
        return Err(TransferError::SourceChanged { now });
    }
    Ok(identity)
}

/// A finished upload: the job's `output.<ext>` under its partial folder's lock, and the
/// identity of the source version whose SHA-256 the node's matched.
pub struct Finished {
    pub lock: PartialLock,
    pub output: String,
    pub source: SourceIdentity,
}

/// Checks the finished upload: refused when the source changed since the node read it
/// (the upload discarded), or when it does not match the node's size and SHA-256 (discarded
/// too); a match is the job's `output.<ext>`, its partial folder's lock handed back.
pub async fn finish(db: &DatabaseConnection, job: &job::Model, done: Finish) -> Result<Finished, TransferError> {
    if !valid_extension(&done.extension) {
        return Err(TransferError::Invalid(format!("{:?} is not an output extension", done.extension)));
    }
    if !valid_sha256(&done.sha256) {
        return Err(TransferError::Invalid("a SHA-256 is 64 lowercase hex digits".into()));
    }
    let source = jobs::source_path(job);
    let identity = unchanged(db, job, &done.source_sha256, files::discard_upload).await?;
    let (lock, output) =
        tokio::task::spawn_blocking(move || files::finish_upload(&source, done.size, &done.sha256, &done.extension))
            .await
            .map_err(blocking)??;
    Ok(Finished { lock, output, source: identity })
}
