//! Every job transition goes through `Lifecycle::apply`: read the job, ask the pure state
//! machine, write the new status, its fields and the event in one compare-and-set
//! transaction, then publish. Persisted before anyone is told.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use actix::Addr;
use entities::job;
use sea_orm::DatabaseConnection;

use super::bus::{EventBus, JobUpdate, Publish};
use super::cluster::span_claims::SpanClaims;
use crate::domain::job::{transition, Effect, JobEvent, JobStatus, Outcome, TransitionError};
use crate::domain::transfer::LiveTransfer;
use crate::media::layout::partial_dir_for;
use crate::media::partial::remove_partial_within;

/// How long a removal waits for helpers encoding spans of the job to let go.
const HELPERS_STOP: std::time::Duration = std::time::Duration::from_secs(10);
use crate::repo::events::NewEvent;
use crate::repo::jobs::{self, snapshot, JobChange, StatusChange};
use crate::repo::RepoError;

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("{0}")]
    Invalid(#[from] TransitionError),
    #[error("{0}")]
    Repo(#[from] RepoError),
}

/// Name of an event in the job's history.
pub fn event_kind(event: &JobEvent, outcome: &Outcome) -> &'static str {
    match event {
        JobEvent::Queue => "queued",
        JobEvent::Start => "started",
        JobEvent::Analyzed { .. } if outcome.to == JobStatus::Skipped => "skipped",
        JobEvent::Analyzed { .. } => "encoding",
        JobEvent::Complete => "completed",
        JobEvent::Fail { .. } if outcome.to == JobStatus::Queued => "retrying",
        JobEvent::Fail { .. } => "failed",
        JobEvent::Pause => "paused",
        JobEvent::Resume { .. } => "resumed",
        JobEvent::Retry => "retried",
        JobEvent::Cancel => "cancelled",
        JobEvent::Force => "forced",
        JobEvent::Orphaned { .. } if outcome.to == JobStatus::Failed => "failed",
        JobEvent::Orphaned { .. } => "orphaned",
        JobEvent::Busy => "busy",
        JobEvent::Yield => "yielded",
        JobEvent::SourceChanged => "source changed",
        JobEvent::NotSmaller | JobEvent::SkipProbed => "skipped",
        JobEvent::Probe => "analyzing",
        JobEvent::Probed => "queued",
        JobEvent::ProbeInterrupted => "probe interrupted",
    }
}

/// Extra facts that come with an event.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventContext {
    pub node: Option<String>,
    pub detail: Option<serde_json::Value>,
    /// The failure's own words (FFmpeg's message, the transcoder's log tail).
    pub failure_detail: Option<String>,
}

#[derive(Clone)]
pub struct Lifecycle {
    pub db: DatabaseConnection,
    pub bus: Addr<EventBus>,
    /// The transfers of jobs in stage TRANSFERRING, as their nodes last reported them.
    pub transfers: LiveTransfers,
    /// The spans this main node claims in partial folders for nodes without the share
    /// (`cluster::span_transfer`): a job's go before its partial folder is removed.
    pub span_claims: SpanClaims,
}

/// The last reported transfer of each job moving a file to or from a node (issue 39), in
/// memory only: a progress report without one, or any transition of the job, removes the
/// job's. Read by the API beside the job's row (`transfer`, only while its stage is
/// TRANSFERRING).
#[derive(Clone, Default)]
pub struct LiveTransfers(Arc<Mutex<HashMap<i32, LiveTransfer>>>);

impl LiveTransfers {
    fn lock(&self) -> MutexGuard<'_, HashMap<i32, LiveTransfer>> {
        // The map is whole after each of its calls: good to use after a panic elsewhere.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn set(&self, job_id: i32, transfer: Option<LiveTransfer>) {
        let mut map = self.lock();
        match transfer {
            Some(t) => map.insert(job_id, t),
            None => map.remove(&job_id),
        };
    }

    /// The job's transfer, while its node moves a file for it: the download before the
    /// analysis (ANALYZING) or beside the encode of a copy read as it arrives (ENCODING,
    /// issue 39's download ahead), the upload after the encode. A node's progress report
    /// without one, and every transition, clear it.
    pub fn of(&self, job: &job::Model) -> Option<LiveTransfer> {
        if !matches!(JobStatus::from(job.status), JobStatus::Analyzing | JobStatus::Encoding) {
            return None;
        }
        self.lock().get(&job.id).copied()
    }
}

impl Lifecycle {
    /// Applies `event` to the job; `change` carries columns the caller wants written with it.
    pub async fn apply(
        &self,
        job_id: i32,
        event: JobEvent,
        change: JobChange,
        ctx: EventContext,
    ) -> Result<(job::Model, Outcome), LifecycleError> {
        self.apply_as(job_id, None, event, change, ctx).await
    }

    /// `apply` by the holder of the job's lease: the lease is part of the compare-and-set,
    /// so a holder that lost the job changes nothing.
    pub async fn apply_as(
        &self,
        job_id: i32,
        lease: Option<&str>,
        event: JobEvent,
        change: JobChange,
        ctx: EventContext,
    ) -> Result<(job::Model, Outcome), LifecycleError> {
        let current = jobs::get(&self.db, job_id).await?;
        let from = snapshot(&current);
        let outcome = transition(&from, &event)?;
        // A job whose transition removes its partial output never stands recorded with the
        // folder still there, where a crash right after the write would leave it: the folder
        // goes first, under its lock (refused while a transcoder writes it), then the
        // transition is written. Not for a holder whose lease is gone: its transition is
        // refused below, and the folder is the new owner's.
        if outcome.effects.contains(&Effect::DeletePartial)
            && lease.is_none_or(|l| current.lease_id.as_deref() == Some(l))
        {
            let dir = partial_dir_for(&crate::repo::jobs::source_path(&current));
            // Helpers on other nodes are told to stop with the job; give them a moment to let
            // their spans go. The claims this node holds for nodes without the share go at
            // once: such a node cut off from here cannot be told, and its lease outlives the
            // moment given.
            let claims = self.span_claims.clone();
            let result = tokio::task::spawn_blocking(move || {
                claims.release_job(job_id);
                remove_partial_within(&dir, HELPERS_STOP)
            })
            .await;
            if let Ok(Err(e)) = result {
                tracing::warn!(job_id, error = %e, "could not remove the partial output");
            }
            // Its spans went with it: the next run plans them afresh.
            if let Err(e) = crate::repo::segments::clear(&self.db, job_id).await {
                tracing::warn!(job_id, error = %e, "could not clear the job's spans");
            }
        }
        let mut record = NewEvent::new(event_kind(&event, &outcome)).on_node(ctx.node.clone());
        let mut detail = ctx.detail.clone().unwrap_or_else(|| serde_json::json!({}));
        if let (JobEvent::Fail { code, .. }, Some(obj)) = (&event, detail.as_object_mut()) {
            obj.insert("code".into(), serde_json::json!(code.as_str()));
            if let Some(text) = &ctx.failure_detail {
                obj.insert("message".into(), serde_json::json!(text));
            }
        }
        if detail.as_object().is_some_and(|o| !o.is_empty()) {
            record = record.with_detail(detail);
        }
        let change =
            StatusChange { outcome: outcome.clone(), change, failure_detail: ctx.failure_detail, event: record };
        let model = jobs::change_status_as(&self.db, job_id, from.status, lease, change).await?;
        self.transfers.set(model.id, None);
        self.bus.do_send(Publish(JobUpdate::of("status", &model)));
        Ok((model, outcome))
    }

    /// Requeues a running job that its node no longer runs, as `job` was read: the read
    /// lease is part of the compare-and-set, so a job requeued and started again since
    /// (another reader got there first, under a new lease) is left alone. Answers whether
    /// this call requeued it. Found by kill-linked: the node's offline check and its
    /// reconcile on return both read the job running, and the later one orphaned the next
    /// attempt, a crash counted twice for one kill, until the job failed.
    pub async fn orphan(&self, job: &job::Model, crashed: bool, ctx: EventContext) -> Result<bool, LifecycleError> {
        let lease = job.lease_id.as_deref();
        match self.apply_as(job.id, lease, JobEvent::Orphaned { crashed }, JobChange::default(), ctx).await {
            Ok(_) => Ok(true),
            Err(LifecycleError::Invalid(_) | LifecycleError::Repo(RepoError::Conflict(_))) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Publishes live fields (progress, fps, ETA, stage) without a transition.
    pub fn publish_progress(&self, job: &job::Model) {
        self.publish_transfer(job, None);
    }

    /// Publishes live fields with the job's transfer, `None` when it moves no file now.
    pub fn publish_transfer(&self, job: &job::Model, transfer: Option<LiveTransfer>) {
        self.transfers.set(job.id, transfer);
        let mut update = JobUpdate::of("progress", job);
        update.transfer = transfer;
        self.bus.do_send(Publish(update));
    }

    /// A progress message that carries the job's segments (a span changed hands, or a
    /// helper reported).
    pub async fn publish_segments(&self, job_id: i32) {
        let (Ok(job), Ok(segments)) =
            (jobs::get(&self.db, job_id).await, crate::repo::segments::of_job(&self.db, job_id).await)
        else {
            return;
        };
        let mut update = JobUpdate::of("progress", &job);
        update.segments = Some(segments.iter().map(crate::repo::segments::SegmentView::from).collect());
        self.bus.do_send(Publish(update));
    }
}
