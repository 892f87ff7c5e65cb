//! What a `JobSupervisor` needs from the job's record, behind one trait: on the main node
//! the database itself (`DbStore`); on a linked node the same calls made over its link to
//! the main node, which checks each against the job's lease (see `cluster`). One pipeline
//! runs on every node.

use entities::{job, library};
use serde::{Deserialize, Serialize};

use super::lifecycle::{EventContext, Lifecycle, LifecycleError};
use crate::domain::job::{transition, Effect, JobEvent, JobStatus};
use crate::domain::library_health::LastCheck;
use crate::domain::segments::SpanView;
use crate::media::layout::partial_dir_for;
use crate::media::partial::remove_partial;
use crate::repo::jobs::{self, snapshot, JobChange};
use crate::repo::segments::{HelperTotals, SpanDone};
use crate::repo::{self, events::NewEvent, segments};

/// How long a helper's lease on a span lasts without renewal: granted by the scheduler,
/// renewed by each `span_progress` (a helper reports every few seconds).
pub const SPAN_LEASE_SECONDS: i64 = 30;

/// The answer to an applied transition: the job, and whether its partial output must go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    pub job: job::Model,
    pub delete_partial: bool,
}

#[async_trait::async_trait(?Send)]
pub trait JobStore: Send + Sync {
    async fn job(&self, id: i32) -> Result<job::Model, LifecycleError>;
    async fn library(&self, id: i32) -> Result<library::Model, LifecycleError>;
    /// The settings an attempt follows; an error when they cannot be read, never a guessed
    /// default.
    async fn job_settings(&self) -> Result<JobSettings, LifecycleError>;
    /// What the last library health check found of the job's file, if one read it.
    async fn last_health(&self, id: i32) -> Result<Option<LastCheck>, LifecycleError>;
    async fn apply(
        &self,
        id: i32,
        lease: &str,
        event: JobEvent,
        change: JobChange,
        ctx: EventContext,
    ) -> Result<Applied, LifecycleError>;
    async fn update_live(&self, id: i32, lease: &str, change: JobChange) -> Result<(), LifecycleError>;
    /// Appends an event to the job's history without a transition (a replace step, a
    /// resume from kept segments), fenced by the lease.
    async fn record_event(
        &self,
        id: i32,
        lease: &str,
        kind: &str,
        node: Option<String>,
        detail: Option<serde_json::Value>,
    ) -> Result<(), LifecycleError>;
    /// Fencing: this node still holds the job's lease and the job is ENCODING.
    async fn lease_is_mine(&self, id: i32, lease: &str) -> bool;
    fn publish_progress(&self, job: &job::Model);
    /// Publishes live fields with the file the job moves now (stage TRANSFERRING).
    fn publish_transfer(&self, job: &job::Model, transfer: crate::domain::transfer::LiveTransfer);
    /// The job's run reports its planned spans (`repo::segments::sync_spans`), fenced by
    /// the job's lease; `owner` is this node (the main node takes a link's word for it
    /// from the link itself).
    async fn sync_spans(
        &self,
        id: i32,
        lease: &str,
        owner: (i32, String),
        spans: Vec<SpanView>,
    ) -> Result<HelperTotals, LifecycleError>;
    /// A helper's progress on a span, renewing its lease; `false` when the lease is gone.
    async fn span_progress(
        &self,
        id: i32,
        span: u32,
        lease: &str,
        progress: (u64, f64, u64),
    ) -> Result<bool, LifecycleError>;
    /// A helper ended: the span DONE with what it encoded, or (`None`) given back.
    async fn span_end(&self, id: i32, span: u32, lease: &str, done: Option<SpanDone>) -> Result<(), LifecycleError>;
}

/// Removes the partial output when a transition says so (it lives next to the source, on
/// storage every node sees).
pub async fn delete_partial_if(applied: &Applied) {
    if !applied.delete_partial {
        return;
    }
    let dir = partial_dir_for(&crate::repo::jobs::source_path(&applied.job));
    if let Ok(Err(e)) = tokio::task::spawn_blocking(move || remove_partial(&dir)).await {
        tracing::warn!(job_id = applied.job.id, error = %e, "could not remove the partial output");
    }
}

/// Whether `event`, applied to `job` as it stands, removes the job's partial output.
pub fn removes_partial(job: &job::Model, event: &JobEvent) -> bool {
    transition(&snapshot(job), event).is_ok_and(|o| o.effects.contains(&Effect::DeletePartial))
}

/// The main node's store: the database, and the event bus for live updates.
pub struct DbStore {
    pub lifecycle: Lifecycle,
}

/// The service settings a job's attempt follows.
///
/// On the link (the answer to `Call::Settings`) they travel as the pair
/// `[keepOriginals, timeoutHours]`, which is what nodes from before this struct send and
/// read; an object with those two fields is read too, so a later change to send it is
/// understood by nodes from this one on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "JobSettingsWire", into = "(bool, u64)")]
pub struct JobSettings {
    /// Keep the original beside the output, under a numbered name, after the replace.
    pub keep_originals: bool,
    /// How long one attempt may run, in hours (at least 1).
    pub timeout_hours: u64,
}

/// Either shape of `JobSettings` on the wire.
#[derive(Deserialize)]
#[serde(untagged)]
enum JobSettingsWire {
    Pair(bool, u64),
    #[serde(rename_all = "camelCase")]
    Named {
        keep_originals: bool,
        timeout_hours: u64,
    },
}

impl From<JobSettingsWire> for JobSettings {
    fn from(wire: JobSettingsWire) -> Self {
        match wire {
            JobSettingsWire::Pair(keep_originals, timeout_hours)
            | JobSettingsWire::Named { keep_originals, timeout_hours } => JobSettings { keep_originals, timeout_hours },
        }
    }
}

impl From<JobSettings> for (bool, u64) {
    fn from(settings: JobSettings) -> Self {
        (settings.keep_originals, settings.timeout_hours)
    }
}

/// The job settings, with the defaults `repo::settings` owns for settings never set; a read
/// that fails, or a stored value that does not parse, is an error.
pub async fn settings(db: &sea_orm::DatabaseConnection) -> Result<JobSettings, repo::RepoError> {
    let s = repo::settings::service_settings(db).await?;
    Ok(JobSettings { keep_originals: s.keep_originals, timeout_hours: u64::from(s.job_timeout_hours.max(1)) })
}

/// Whether `lease` is the job's current lease while it runs.
pub fn holds_lease(job: &job::Model, lease: &str) -> bool {
    job.lease_id.as_deref() == Some(lease) && JobStatus::from(job.status).is_running()
}

#[async_trait::async_trait(?Send)]
impl JobStore for DbStore {
    async fn job(&self, id: i32) -> Result<job::Model, LifecycleError> {
        Ok(jobs::get(&self.lifecycle.db, id).await?)
    }

    async fn library(&self, id: i32) -> Result<library::Model, LifecycleError> {
        Ok(repo::libraries::get(&self.lifecycle.db, id).await?)
    }

    async fn job_settings(&self) -> Result<JobSettings, LifecycleError> {
        Ok(settings(&self.lifecycle.db).await?)
    }

    async fn last_health(&self, id: i32) -> Result<Option<LastCheck>, LifecycleError> {
        let db = &self.lifecycle.db;
        let job = jobs::get(db, id).await?;
        let Some(library_id) = job.library_id else { return Ok(None) };
        let library = repo::libraries::get(db, library_id).await?;
        let roots = repo::libraries::paths_of(&library);
        let row = repo::health::result_for_path(db, library_id, &roots, &jobs::source_path(&job)).await?;
        Ok(row.as_ref().map(repo::health::last_check))
    }

    async fn apply(
        &self,
        id: i32,
        lease: &str,
        event: JobEvent,
        change: JobChange,
        ctx: EventContext,
    ) -> Result<Applied, LifecycleError> {
        let (job, outcome) = self.lifecycle.apply_as(id, Some(lease), event, change, ctx).await?;
        Ok(Applied { job, delete_partial: outcome.effects.contains(&Effect::DeletePartial) })
    }

    async fn update_live(&self, id: i32, lease: &str, change: JobChange) -> Result<(), LifecycleError> {
        Ok(jobs::update_live_leased(&self.lifecycle.db, id, lease, change).await?)
    }

    async fn record_event(
        &self,
        id: i32,
        lease: &str,
        kind: &str,
        node: Option<String>,
        detail: Option<serde_json::Value>,
    ) -> Result<(), LifecycleError> {
        let mut event = NewEvent::new(kind).on_node(node);
        if let Some(detail) = detail {
            event = event.with_detail(detail);
        }
        Ok(jobs::record_event_leased(&self.lifecycle.db, id, lease, event).await?)
    }

    async fn lease_is_mine(&self, id: i32, lease: &str) -> bool {
        jobs::get(&self.lifecycle.db, id).await.is_ok_and(|j| holds_lease(&j, lease) && j.status == JobStatus::Encoding)
    }

    fn publish_progress(&self, job: &job::Model) {
        self.lifecycle.publish_progress(job);
    }

    fn publish_transfer(&self, job: &job::Model, transfer: crate::domain::transfer::LiveTransfer) {
        self.lifecycle.publish_transfer(job, Some(transfer));
    }

    async fn sync_spans(
        &self,
        id: i32,
        lease: &str,
        owner: (i32, String),
        spans: Vec<SpanView>,
    ) -> Result<HelperTotals, LifecycleError> {
        let owner = segments::NodeRef { id: owner.0, name: &owner.1 };
        let totals = segments::sync_spans(&self.lifecycle.db, id, lease, owner, &spans).await?;
        self.lifecycle.publish_segments(id).await;
        Ok(totals)
    }

    async fn span_progress(
        &self,
        id: i32,
        span: u32,
        lease: &str,
        progress: (u64, f64, u64),
    ) -> Result<bool, LifecycleError> {
        let expires = chrono::Utc::now() + chrono::Duration::seconds(SPAN_LEASE_SECONDS);
        let mine = segments::renew(&self.lifecycle.db, id, span, lease, progress, expires).await?;
        if mine {
            self.lifecycle.publish_segments(id).await;
        }
        Ok(mine)
    }

    async fn span_end(&self, id: i32, span: u32, lease: &str, done: Option<SpanDone>) -> Result<(), LifecycleError> {
        if segments::release(&self.lifecycle.db, id, span, lease, done).await? {
            self.lifecycle.publish_segments(id).await;
        }
        Ok(())
    }
}
