//! The main node's side of a span encoded by a linked node that does not see the job's
//! library (issue 39, item 4). The node asks for the span its helper lease names; the main
//! node claims it in the job's partial folder (`media::span_transfer::take_span`) and keeps
//! the claim for as long as that lease lives (`SpanClaims`): the job's run, wherever it
//! runs, then leaves the span to the helper as it does a helper's on the share, and takes
//! it back when the claim goes without a record. The node downloads the source as a job's
//! transfer does (`X-Condense-Span` names the span whose lease it presents), uploads each
//! segment file it encoded, then the span's record with the SHA-256 of the source it
//! encoded from: refused when the source changed since. Only the node holding the span's
//! current lease is answered.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actix_web::web::Bytes;
use entities::job;
use futures_util::{Stream, StreamExt};
use sea_orm::DatabaseConnection;

use super::span_claims::SpanClaims;
use super::transfer::{blocking, contained_source, job_of, open_source, TransferError};
use crate::domain::transfer::valid_sha256;
use crate::media::layout::partial_dir_for;
use crate::media::span_record::SpanRecord;
use crate::media::span_transfer::{record_written, take_span, SpanTask, Taken};
use crate::media::transfer::TransferFileError;
use crate::repo;

/// The header that names the span whose lease a node presents (`LEASE_HEADER`).
pub const SPAN_HEADER: &str = "x-condense-span";

/// How often a claim's lease is looked at: a node that went silent loses its claim within
/// this of its lease running out (`repo::segments::sweep`), and the run takes the span back.
const WATCH_EVERY: Duration = Duration::from_secs(2);

/// The job, when node `node_id` holds planned span `span` of it under `lease`.
pub async fn authorize_span(
    db: &DatabaseConnection,
    node_id: i32,
    job_id: i32,
    span: u32,
    lease: &str,
) -> Result<job::Model, TransferError> {
    let job = job_of(db, job_id).await?;
    if repo::segments::held_by(db, job_id, span, node_id, lease).await? {
        Ok(job)
    } else {
        Err(TransferError::NotYours(job_id))
    }
}

/// The job's partial folder, its source contained again in the library (never through a
/// link).
async fn partial_dir(db: &DatabaseConnection, job: &job::Model) -> Result<PathBuf, TransferError> {
    Ok(partial_dir_for(&contained_source(db, job).await?))
}

/// Claims span `span` of the job for the node presenting `lease` and answers what is left
/// of it, or why there is nothing to do. Asked again under the same lease (an answer lost
/// on the way), the claim is taken afresh.
pub async fn take(
    db: &DatabaseConnection,
    claims: &SpanClaims,
    job: &job::Model,
    node_id: i32,
    span: u32,
    lease: &str,
) -> Result<Result<SpanTask, &'static str>, TransferError> {
    let dir = partial_dir(db, job).await?;
    claims.release(job.id, span, lease);
    let taken = tokio::task::spawn_blocking(move || take_span(&dir, span)).await.map_err(blocking)?;
    let (held, task) = match taken.map_err(TransferFileError::from)? {
        Taken::Span(held, task) => (held, task),
        Taken::Nothing(why) => return Ok(Err(why)),
    };
    let held = Arc::new(Mutex::new(Some(*held)));
    claims.hold(job.id, span, lease, held);
    actix_web::rt::spawn(watch(db.clone(), claims.clone(), (job.id, node_id), span, lease.to_string()));
    tracing::info!(job_id = job.id, span, "a span is claimed for a node without the share");
    Ok(Ok(*task))
}

/// Lets the claim go once its lease is no longer the span's (released, swept, taken over,
/// run out: `repo::segments::held_by`).
async fn watch(db: DatabaseConnection, claims: SpanClaims, (job_id, node_id): (i32, i32), span: u32, lease: String) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        if claims.held(job_id, span, &lease).is_none() {
            return;
        }
        // The database unreadable: the claim stays until it can say.
        if !repo::segments::held_by(&db, job_id, span, node_id, &lease).await.unwrap_or(true) {
            claims.release(job_id, span, &lease);
            tracing::info!(job_id, span, "the claim of a node without the share went with its lease");
            return;
        }
    }
}

fn not_held(job_id: i32) -> TransferError {
    TransferError::Invalid(format!("job {job_id}'s span is not claimed for this lease here (ask for the span again)"))
}

/// Writes segment file `name` of the span from `body`, checked whole against `size` and
/// `sha256` and durable before it is answered; one that broke off or does not match is
/// written again from its first byte.
#[allow(clippy::too_many_arguments, reason = "one upload's parts, each used once")]
pub async fn put_file<S, E>(
    claims: &SpanClaims,
    job_id: i32,
    span: u32,
    lease: &str,
    name: String,
    size: u64,
    sha256: String,
    mut body: S,
) -> Result<u64, TransferError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    if !valid_sha256(&sha256) {
        return Err(TransferError::Invalid("a SHA-256 is 64 lowercase hex digits".into()));
    }
    let held = claims.held(job_id, span, lease).ok_or_else(|| not_held(job_id))?;
    let h = held.clone();
    let begun = tokio::task::spawn_blocking(move || {
        let guard = h.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().map(|held| held.begin_file(&name))
    })
    .await
    .map_err(blocking)?;
    let mut file = begun.ok_or_else(|| not_held(job_id))?.map_err(TransferError::File)?;
    let mut received = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| TransferError::Body(e.to_string()))?;
        received += chunk.len() as u64;
        if received > size {
            return Err(TransferError::Body(format!("the body is longer than the {size} bytes it names")));
        }
        file = tokio::task::spawn_blocking(move || file.write(&chunk).map(|()| file)).await.map_err(blocking)??;
    }
    tokio::task::spawn_blocking(move || {
        let mut guard = held.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.as_mut() {
            Some(held) => held.end_file(file, size, &sha256).map_err(TransferError::File),
            None => Err(not_held(job_id)),
        }
    })
    .await
    .map_err(blocking)?
}

/// What a node sends when its span is encoded and every file uploaded.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanFinish {
    pub record: SpanRecord,
    /// The source's SHA-256 as the node downloaded and encoded it.
    pub source_sha256: String,
}

/// Writes the span's record for the run to take in and lets the claim go; refused (the
/// claim let go all the same, the span encoded again) when the source changed since the
/// node read it or the record names a file not uploaded whole.
pub async fn finish(
    db: &DatabaseConnection,
    claims: &SpanClaims,
    job: &job::Model,
    span: u32,
    lease: &str,
    done: SpanFinish,
) -> Result<(), TransferError> {
    if !valid_sha256(&done.source_sha256) {
        return Err(TransferError::Invalid("a SHA-256 is 64 lowercase hex digits".into()));
    }
    let Some(held) = claims.release(job.id, span, lease) else {
        // Asked again after its answer was lost: the first try let the claim go with the
        // record it wrote, and that same record in place is the answer it had.
        let (dir, record) = (partial_dir(db, job).await?, done.record.clone());
        let written = tokio::task::spawn_blocking(move || record_written(&dir, span, &record))
            .await
            .map_err(blocking)?
            .map_err(TransferFileError::from)?;
        if written {
            tracing::info!(job_id = job.id, span, "a span's finish asked again: its record is in place");
            return Ok(());
        }
        return Err(not_held(job.id));
    };
    let now = open_source(db, job).await?.sha256;
    if now != done.source_sha256 {
        tracing::warn!(job_id = job.id, span, "a span was refused: the source changed since the node read it");
        return Err(TransferError::SourceChanged { now });
    }
    tokio::task::spawn_blocking(move || {
        let taken = held.lock().unwrap_or_else(PoisonError::into_inner).take();
        match taken {
            Some(held) => held.finish(&done.record).map_err(TransferError::File),
            None => Err(TransferError::Invalid("the span was finished already".into())),
        }
    })
    .await
    .map_err(blocking)??;
    tracing::info!(job_id = job.id, span, "a span encoded by a node without the share is in the partial output");
    Ok(())
}
