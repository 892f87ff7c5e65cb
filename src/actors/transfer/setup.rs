//! What a linked node's transfers share: the main node's address, the node's credential as
//! its link has it now (`Bearer`), the rate cap, WORK_DIR, and a lock per job whose spans
//! it encodes by transfer around its copy of the source.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use super::client::TransferClient;

/// What a linked node's jobs taken by transfer share (`actors::job::by_transfer`): where
/// the main node is, the credential to present there, the rate cap and WORK_DIR.
pub struct TransferSetup {
    pub main_url: String,
    pub bearer: Bearer,
    /// `TRANSFER_MBPS`, 0 for no cap.
    pub mbps: u32,
    /// Whether a fresh copy is read as it downloads (issue 39's download ahead; off only to
    /// measure it, `CONDENSE_DOWNLOAD_AHEAD`).
    pub ahead: bool,
    /// Whether a job's finished files go up while it encodes and the main node muxes (issue
    /// 39's upload while encoding; off only to measure it, `CONDENSE_UPLOAD_PARTS`).
    pub parts: bool,
    /// Whether a span encoded without the share fetches only the ranges of the source it
    /// reads (issue 39, item 4; off only to measure it, `CONDENSE_SPAN_RANGES`), or the
    /// whole source, as it does from a main node that serves no ranges.
    pub ranges: bool,
    /// WORK_DIR: each job's files in a folder named by its id.
    pub work_dir: PathBuf,
    /// One download at a time per job's span folder: two slots helping with one job share
    /// its copy of the source (`actors::job::span_by_transfer`).
    pub span_sources: SpanSources,
}

/// A lock per job whose spans this node encodes by transfer, around its copy of the source.
#[derive(Default)]
pub struct SpanSources(Mutex<std::collections::HashMap<i32, Arc<tokio::sync::Mutex<()>>>>);

impl SpanSources {
    /// Job `job_id`'s lock (made when none is held).
    pub fn of(&self, job_id: i32) -> Arc<tokio::sync::Mutex<()>> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // The locks nobody holds or waits for go: one per job ever helped would only grow.
        all.retain(|_, lock| Arc::strong_count(lock) > 1);
        all.entry(job_id).or_default().clone()
    }
}

impl TransferSetup {
    /// A client presenting the node's credential as the link has it now; `None` before the
    /// node has one (not enrolled yet).
    pub fn client(&self) -> Option<TransferClient> {
        Some(TransferClient::new(&self.main_url, &self.bearer.get()?, self.mbps))
    }

    /// The folder of job `job_id` in WORK_DIR.
    pub fn job_dir(&self, job_id: i32) -> PathBuf {
        self.work_dir.join(job_id.to_string())
    }
}

/// The node's `identity.credential` as its link presents it, set by the agent once it has
/// both (at its start from DATA_DIR, or at the enrollment).
#[derive(Clone, Default)]
pub struct Bearer(Arc<Mutex<Option<String>>>);

/// Never the secret itself in a log.
impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.0.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        f.debug_struct("Bearer").field("set", &set).finish()
    }
}

impl Bearer {
    pub fn set(&self, bearer: Option<String>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = bearer;
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}
