//! The event bus: live job updates fanned out to subscribers (WebSocket sessions, tests).
//! Delivery uses `try_send`, so a slow subscriber loses messages instead of slowing the
//! service; a closed one is dropped.

use std::collections::HashMap;

use actix::prelude::*;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::domain::job::{allowed_actions, JobStatus, Stage, UserAction};

/// One live update of a job, as sent on the WebSocket (`type`, `jobId`, `progress`,
/// `status` and the other live fields).
#[derive(Debug, Clone, PartialEq, Serialize, Message, utoipa::ToSchema)]
#[rtype(result = "()")]
#[serde(rename_all = "camelCase")]
pub struct JobUpdate {
    /// `snapshot` (an active job, on connect), `progress` or `status`.
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
        }
    }
}

pub enum Subscriber {
    Actor(Recipient<JobUpdate>),
    Channel(mpsc::Sender<JobUpdate>),
}

#[derive(Message)]
#[rtype(result = "u64")]
pub struct Subscribe(pub Subscriber);

#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe(pub u64);

#[derive(Message)]
#[rtype(result = "()")]
pub struct Publish(pub JobUpdate);

#[derive(Default)]
pub struct EventBus {
    subscribers: HashMap<u64, Subscriber>,
    next_id: u64,
    dropped: u64,
}

impl Actor for EventBus {
    type Context = Context<Self>;
}

impl Handler<Subscribe> for EventBus {
    type Result = u64;

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) -> u64 {
        self.next_id += 1;
        self.subscribers.insert(self.next_id, msg.0);
        self.next_id
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
        let mut closed = Vec::new();
        for (id, sub) in &self.subscribers {
            let gone = match sub {
                Subscriber::Actor(r) => match r.try_send(msg.0.clone()) {
                    Ok(()) => false,
                    Err(SendError::Full(_)) => {
                        self.dropped += 1;
                        false
                    }
                    Err(SendError::Closed(_)) => true,
                },
                Subscriber::Channel(tx) => match tx.try_send(msg.0.clone()) {
                    Ok(()) => false,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        self.dropped += 1;
                        false
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => true,
                },
            };
            if gone {
                closed.push(*id);
            }
        }
        for id in closed {
            self.subscribers.remove(&id);
        }
    }
}
