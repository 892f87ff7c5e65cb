//! The claims the main node holds in jobs' partial folders for spans that nodes without
//! the share encode (`span_transfer`), by (job, span): each held for one span lease, let
//! go when that lease goes, when the node finishes the span, or at once with the job's
//! partial folder (`actors::lifecycle`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::media::span_transfer::HeldSpan;

/// The spans this main node holds claims on for nodes without the share, by (job, span).
#[derive(Clone, Default)]
pub struct SpanClaims(Arc<Mutex<HashMap<(i32, u32), Entry>>>);

struct Entry {
    lease: String,
    held: Arc<Mutex<Option<HeldSpan>>>,
}

impl SpanClaims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(i32, u32), Entry>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The claim held for `lease`, if any.
    pub(super) fn held(&self, job_id: i32, span: u32, lease: &str) -> Option<Arc<Mutex<Option<HeldSpan>>>> {
        self.lock().get(&(job_id, span)).filter(|e| e.lease == lease).map(|e| e.held.clone())
    }

    /// Holds `held` for `lease` on span `span` of job `job_id`.
    pub(super) fn hold(&self, job_id: i32, span: u32, lease: &str, held: Arc<Mutex<Option<HeldSpan>>>) {
        self.lock().insert((job_id, span), Entry { lease: lease.to_string(), held });
    }

    /// Lets every claim on job `job_id`'s spans go at once (its partial folder is about to be
    /// removed): a request of the node under way finds its span no longer held. Blocking
    /// (waits for a file being begun or ended under a claim).
    pub fn release_job(&self, job_id: i32) {
        let gone: Vec<Entry> = self.lock().extract_if(|(job, _), _| *job == job_id).map(|(_, e)| e).collect();
        for entry in gone {
            let held = entry.held.lock().unwrap_or_else(PoisonError::into_inner).take();
            if held.is_some() {
                tracing::info!(job_id, "a claim for a node without the share went with the job's partial output");
            }
        }
    }

    /// Lets the claim held for `lease` go (another lease's stays).
    pub(super) fn release(&self, job_id: i32, span: u32, lease: &str) -> Option<Arc<Mutex<Option<HeldSpan>>>> {
        let mut claims = self.lock();
        if claims.get(&(job_id, span)).is_some_and(|e| e.lease == lease) {
            return claims.remove(&(job_id, span)).map(|e| e.held);
        }
        None
    }
}
