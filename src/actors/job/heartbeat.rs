//! The lease heartbeat: while an attempt runs, whatever part it is in (a long analysis, an
//! encode that makes no progress for a while, a verification of a large file), its lease
//! is renewed on a timer of its own, so that the lease says "a node is on it" exactly as
//! long as one is. A renewal refused because the lease is somebody else's now stops the
//! attempt (its transcoder first): the job moved to another node, and this one must not
//! keep writing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::command::JobCommand;
use crate::actors::store::{holds_lease, JobStore};
use crate::repo::jobs::JobChange;

/// How long a lease lasts without renewal; progress renews it.
pub const LEASE_SECONDS: i64 = 120;

/// A renewal every quarter of the lease: three can fail (a database or link hiccup) before
/// it expires.
const RENEW_EVERY: Duration = Duration::from_secs(LEASE_SECONDS.unsigned_abs() / 4);

pub(super) struct Heartbeat {
    pub store: Arc<dyn JobStore>,
    pub job_id: i32,
    pub lease_id: String,
    /// Where the attempt hears that its lease is lost.
    pub on_lost: mpsc::UnboundedSender<JobCommand>,
}

impl Heartbeat {
    /// Runs `attempt` to its end, renewing the lease meanwhile.
    pub async fn around<T>(self, attempt: impl Future<Output = T>) -> T {
        tokio::pin!(attempt);
        let mut every = tokio::time::interval(RENEW_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate; the lease was just granted.
        every.tick().await;
        let mut lost = false;
        loop {
            tokio::select! {
                out = &mut attempt => return out,
                _ = every.tick(), if !lost => lost = self.renew().await,
            }
        }
    }

    /// True when the lease is definitely someone else's now.
    async fn renew(&self) -> bool {
        let expires = chrono::Utc::now() + chrono::Duration::seconds(LEASE_SECONDS);
        let patch = JobChange { lease_expires_at: Some(expires), ..Default::default() };
        let Err(e) = self.store.update_live(self.job_id, &self.lease_id, patch).await else { return false };
        // Only a clear "not yours" stops the attempt; a store that cannot answer (a database
        // or link error) is tried again at the next tick.
        match self.store.job(self.job_id).await {
            Ok(job) if !holds_lease(&job, &self.lease_id) => {
                tracing::warn!(job_id = self.job_id, error = %e, "the job's lease is held by another attempt now");
                let _ = self.on_lost.send(JobCommand::LeaseLost);
                true
            }
            Ok(_) | Err(_) => {
                tracing::warn!(job_id = self.job_id, error = %e, "could not renew the job's lease");
                false
            }
        }
    }
}
