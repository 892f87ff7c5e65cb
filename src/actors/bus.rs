//! The event bus: live job updates fanned out to subscribers (WebSocket sessions).
//!
//! Each update is serialized once and kept, shared, in every subscriber's bounded
//! [`Outbox`] (`domain::feed`: status messages never dropped, progress coalesced, a resync
//! or a close past the bound); the subscriber is then woken with a [`TakeOutbox`] notice, at
//! most one in flight. Publishing never waits for a subscriber, and a slow one costs the
//! server at most its bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use actix::prelude::*;
use bytestring::ByteString;
use serde::Serialize;

use crate::domain::feed::{FeedState, Outbox};
use crate::domain::job::{allowed_actions, JobStatus, Stage, UserAction};

/// One live update of a job, as sent on the WebSocket (`type`, `jobId`, `progress`,
/// `status` and the other live fields).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobUpdate {
    /// `snapshot` (an active job, on connect and after a `resync`), `progress` or `status`.
    /// A client that fell behind first gets `{"type":"resync"}` (a `Resync`), then snapshots.
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: &'static str,
    pub job_id: i32,
    pub progress: f64,
    #[schema(value_type = JobStatus)]
    pub status: String,
    #[schema(value_type = Option<Stage>)]
    pub stage: Option<String>,
    pub fps: f64,
    pub eta_seconds: Option<i64>,
    pub node: Option<String>,
    pub stalled: bool,
    pub file_name: String,
    pub retry_count: i32,
    pub failure_reason: Option<String>,
    /// What a user may do with the job in its new status, as in the job's JSON.
    pub actions: Vec<UserAction>,
    /// In progress messages sent when a segment changed hands or a helper reported: the
    /// job's segments as `GET /jobs/{id}` lists them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments: Option<Vec<crate::repo::segments::SegmentView>>,
    /// While the job's stage is TRANSFERRING: the file moving to or from its node, as in
    /// the job's JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<crate::domain::transfer::LiveTransfer>,
}

impl JobUpdate {
    pub fn of(kind: &'static str, job: &entities::job::Model) -> Self {
        JobUpdate {
            kind,
            job_id: job.id,
            progress: job.progress,
            status: JobStatus::from(job.status).to_string(),
            stage: job.stage.map(|stage| Stage::from(stage).to_string()),
            fps: job.fps,
            eta_seconds: job.eta_seconds,
            node: job.node_name.clone(),
            stalled: job.stalled,
            file_name: job.file_name.clone(),
            retry_count: job.retry_count,
            failure_reason: job.failure_reason.clone(),
            actions: allowed_actions(JobStatus::from(job.status)),
            segments: None,
            transfer: None,
        }
    }
}

/// A subscriber's outbox, shared by the bus (which fills it) and the session (which empties it).
#[derive(Clone, Default)]
pub struct SharedOutbox(Arc<Mutex<Outbox<ByteString>>>);

impl SharedOutbox {
    /// The outbox, also after a panic elsewhere while it was held: its state is whole after
    /// every one of its methods, so it is still good to use.
    pub fn lock(&self) -> MutexGuard<'_, Outbox<ByteString>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Told to a subscriber when its outbox has something to take now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TakeOutbox;

/// The first message after a subscriber fell behind: drop live state, a snapshot follows.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Resync {
    /// Always `resync`.
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: &'static str,
}

impl Resync {
    pub const MESSAGE: Resync = Resync { kind: "resync" };
}

/// Subscribes a session; the answer is its id and the outbox it takes from.
#[derive(Message)]
#[rtype(result = "(u64, SharedOutbox)")]
pub struct Subscribe {
    pub session: Recipient<TakeOutbox>,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe(pub u64);

#[derive(Message)]
#[rtype(result = "()")]
pub struct Publish(pub JobUpdate);

struct Subscriber {
    session: Recipient<TakeOutbox>,
    outbox: SharedOutbox,
}

#[derive(Default)]
pub struct EventBus {
    subscribers: HashMap<u64, Subscriber>,
    next_id: u64,
    /// The last update published of each job that runs. A segments update is read from the
    /// database, where the run writes its progress only every 2 s and which a status change
    /// may pass while it is read; it carries these live fields instead of its own, so a
    /// client never sees progress go back, nor a job that ended run again. Found by
    /// `actions::a_websocket_client_sees_progress_rise_and_the_job_complete` in CI:
    /// progress 73.5, 92.0, 73.5, 92.0.
    running: HashMap<i32, JobUpdate>,
}

impl EventBus {
    /// What is sent of `update`, after the live state is brought up to date; None drops it.
    fn settle(&mut self, mut update: JobUpdate) -> Option<JobUpdate> {
        if update.segments.is_some() {
            // Segments of a job that no longer runs (here) have nothing live to show.
            let live = self.running.get(&update.job_id)?;
            let segments = update.segments.take();
            return Some(JobUpdate { kind: "progress", segments, ..live.clone() });
        }
        if update.status.parse::<JobStatus>().is_ok_and(JobStatus::is_running) {
            self.running.insert(update.job_id, update.clone());
        } else {
            self.running.remove(&update.job_id);
        }
        Some(update)
    }
}

impl Actor for EventBus {
    type Context = Context<Self>;
}

impl Handler<Subscribe> for EventBus {
    type Result = MessageResult<Subscribe>;

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) -> Self::Result {
        self.next_id += 1;
        let outbox = SharedOutbox::default();
        self.subscribers.insert(self.next_id, Subscriber { session: msg.session, outbox: outbox.clone() });
        MessageResult((self.next_id, outbox))
    }
}

impl Handler<Unsubscribe> for EventBus {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, _: &mut Context<Self>) {
        self.subscribers.remove(&msg.0);
    }
}

impl Handler<Publish> for EventBus {
    type Result = ();

    fn handle(&mut self, msg: Publish, _: &mut Context<Self>) {
        let Some(update) = self.settle(msg.0) else { return };
        let text = match serde_json::to_string(&update) {
            Ok(text) => ByteString::from(text),
            Err(e) => {
                tracing::error!(error = %e, job = update.job_id, "cannot serialize a live update");
                return;
            }
        };
        let is_progress = update.kind == "progress";
        self.subscribers.retain(|id, sub| {
            if !sub.session.connected() {
                return false;
            }
            let (wake, state) = {
                let mut outbox = sub.outbox.lock();
                let before = outbox.state();
                let wake = outbox.push(update.job_id, is_progress, text.clone());
                let after = outbox.state();
                if after != before {
                    tracing::info!(subscriber = id, state = ?after, "a live-feed subscriber fell behind");
                }
                (wake, after)
            };
            if wake {
                // At most one notice in flight per subscriber (the outbox says when), so
                // sending past the mailbox's capacity cannot grow without bound.
                sub.session.do_send(TakeOutbox);
            }
            // A closed one is told once and then forgotten: it holds nothing more.
            state != FeedState::Closed
        });
    }
}
