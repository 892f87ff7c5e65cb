//! The main node's side of a job a node without the share uploads while it encodes (issue
//! 39, "upload while encoding"): the node holding the job's lease sends each finished file of
//! its run as a part (appended at its durable length, then taken whole against its SHA-256;
//! `media::parts`), and once its video is done, its manifest, plan and the list of what it
//! sent. The finish is refused when the source changed since the node read it (the parts
//! thrown away) or a part is not here whole; otherwise the main node muxes the output from
//! the original and the parts, verifies it and replaces the original
//! (`job::remote::commit_remote`), in the node's name.

use std::path::Path;

use actix_web::web::Bytes;
use entities::job;
use futures_util::Stream;
use sea_orm::DatabaseConnection;

use super::transfer::{append_to, contained_source, unchanged, NodeRun, TransferError};
use crate::media::manifest::Manifest;
use crate::media::partial::PartialLock;
use crate::media::parts::{self, Part, Uploaded};
use crate::media::plan::{EncodePlan, SourceIdentity};
use crate::media::transfer::TransferFileError;
use crate::media::MediaError;

fn blocking(e: tokio::task::JoinError) -> TransferError {
    TransferError::File(TransferFileError::Media(MediaError::misc(format!("a blocking task ended: {e}"))))
}

/// Runs `work` on the job's contained source, on a blocking thread.
async fn on_source<T: Send + 'static>(
    db: &DatabaseConnection,
    job: &job::Model,
    work: impl FnOnce(&Path) -> Result<T, TransferFileError> + Send + 'static,
) -> Result<T, TransferError> {
    let source = contained_source(db, job).await?;
    Ok(tokio::task::spawn_blocking(move || work(&source)).await.map_err(blocking)??)
}

/// What the main node holds of the job's parts.
pub async fn uploaded(db: &DatabaseConnection, job: &job::Model) -> Result<Uploaded, TransferError> {
    on_source(db, job, parts::uploaded).await
}

/// Appends the bytes `first..=last` of part `name` from `body` at its durable length; the
/// durable length after.
pub async fn append<S, E>(
    db: &DatabaseConnection,
    job: &job::Model,
    name: String,
    first: u64,
    last: u64,
    body: S,
) -> Result<u64, TransferError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let source = contained_source(db, job).await?;
    append_to(move || parts::open_part(&source, &name), first, last, body).await
}

/// Takes part `name` whole, checked against the node's `size` and `sha256`.
pub async fn take(
    db: &DatabaseConnection,
    job: &job::Model,
    name: String,
    size: u64,
    sha256: String,
) -> Result<Part, TransferError> {
    if !crate::domain::transfer::valid_sha256(&sha256) {
        return Err(TransferError::Invalid("a SHA-256 is 64 lowercase hex digits".into()));
    }
    on_source(db, job, move |source| parts::take_part(source, &name, size, &sha256)).await
}

/// What a node sends once its video is done and every part uploaded.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartsFinish {
    /// The output's extension, which must be the one the library's rules give the source.
    pub extension: String,
    /// The source's SHA-256 as the node downloaded and encoded it.
    pub source_sha256: String,
    /// The node's plan: only how it encoded the video is taken from it
    /// (`EncodePlan::to_mux`).
    pub plan: EncodePlan,
    /// The node's manifest of the segments it uploaded.
    pub manifest: Manifest,
    /// Every part it sent.
    pub parts: Vec<Part>,
    #[serde(flatten)]
    pub run: NodeRun,
}

/// Puts the node's manifest in place over its parts, when the source is still the version
/// it encoded and every part is here whole; the partial folder's lock is handed back with
/// the source's identity. A source changed since: its parts are thrown away.
pub async fn finish(
    db: &DatabaseConnection,
    job: &job::Model,
    done: &PartsFinish,
) -> Result<(PartialLock, SourceIdentity), TransferError> {
    if !crate::domain::transfer::valid_extension(&done.extension) {
        return Err(TransferError::Invalid(format!("{:?} is not an output extension", done.extension)));
    }
    let identity = unchanged(db, job, &done.source_sha256, parts::discard_parts).await?;
    let (manifest, sent) = (done.manifest.clone(), done.parts.clone());
    let lock = on_source(db, job, move |source| parts::take_manifest(source, manifest, &sent, identity)).await?;
    Ok((lock, identity))
}
