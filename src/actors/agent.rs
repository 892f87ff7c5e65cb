//! A linked node's side of the cluster: the `Agent` keeps the link to the main node
//! (reconnecting with backoff), registers, sends heartbeats, runs the jobs the main node
//! gives its `NodeSupervisor`, and carries their job-store calls (`RemoteStore`). Cut off
//! for longer than half the main node's timeout, it stops its encodes at a segment
//! boundary, so a job it lost is never encoded twice at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::io::{SinkWrite, WriteHandler};
use actix::prelude::*;
use actix_codec::Framed;
use awc::error::WsProtocolError;
use awc::ws::{Codec, Frame as WsFrame, Message};
use awc::BoxedSocket;
use entities::{job, library};
use futures_util::stream::{SplitSink, StreamExt};
use tokio::sync::oneshot;

use super::job::helper::HelperRef;
use super::lifecycle::{EventContext, LifecycleError};
use super::node::{
    CancelTold, CheckTold, ControlJob, NodeSupervisor, RunningHelpers, RunningJobs, StartHelper, StartJob, StopAll,
};
use super::protocol::{Call, Frame};
use super::store::{Applied, JobSettings, JobStore};
use crate::domain::job::JobEvent;
use crate::domain::library_health::LastCheck;
use crate::domain::node::MAX_LINK_BACKOFF;
use crate::domain::segments::SpanView;
use crate::repo::jobs::JobChange;
use crate::repo::segments::{HelperTotals, SpanDone};
use crate::repo::RepoError;

type Sink = SplitSink<Framed<BoxedSocket, Codec>, Message>;

/// What one link's stream yields, tagged with the link it came from (`Agent::link`): each
/// frame or error, then `None` once the stream has ended. Only the current link's items
/// count, and its first end (a close frame, an error, `None`) ends it. A close frame or an
/// error followed by the stream's end counted as two ends and started two tries to link
/// again: the second linked while the first's link was up, the main node refused it, and
/// that refusal took the working link down with it, over and over (docs/cluster.md,
/// "Status").
struct LinkItem {
    link: u64,
    item: Option<Result<WsFrame, WsProtocolError>>,
}

const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How the linked node introduces itself.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub main_url: String,
    /// CLUSTER_TOKEN: presented only to enroll (no credential yet, or the main node no
    /// longer knows it).
    pub cluster_token: Option<String>,
    /// The node's own credential (from its enrollment), presented on every link it has.
    pub credential: Option<String>,
    pub register: Frame,
    /// Where the identity the main node gives this node is kept.
    pub data_dir: std::path::PathBuf,
    /// WORK_DIR, whose free space each heartbeat reports.
    pub work_dir: std::path::PathBuf,
    /// Whether the node takes files it does not see, by transfer (`SHARED_STORAGE`).
    pub transfer: bool,
    /// Where the node's jobs taken by transfer find the credential the link presents
    /// (`actors::transfer::TransferSetup`): set once the node has one.
    pub bearer: crate::actors::transfer::Bearer,
    /// The files the node's jobs did not find at their paths: their libraries are reported
    /// as not seen.
    pub not_here: crate::host::sight::NotHere,
}

/// Free bytes in WORK_DIR; `None` where they cannot be read (then the main node gives the
/// node nothing by transfer). Blocking (statvfs).
pub fn work_dir_free_bytes(work_dir: &std::path::Path) -> Option<u64> {
    match crate::host::disk::space(work_dir) {
        Ok(space) => Some(space.free),
        Err(e) => {
            tracing::warn!(work_dir = %work_dir.display(), error = %e, "WORK_DIR's free space is unreadable");
            None
        }
    }
}

pub struct Agent {
    config: AgentConfig,
    node: Option<Addr<NodeSupervisor>>,
    sink: Option<SinkWrite<Message, Sink>>,
    /// The current link's number; a frame or an end of any other link is stale.
    link: u64,
    /// The current link's stream in the actor's context, cancelled when the link ends.
    stream: Option<SpawnHandle>,
    registered: bool,
    heartbeat: Duration,
    timeout: Duration,
    heartbeat_started: bool,
    cut_off_since: Option<Instant>,
    fenced: bool,
    backoff: Duration,
    library_paths: Vec<String>,
    /// Those of `library_paths` that hold something on the main node (`Frame::Libraries`).
    library_not_empty: Vec<String>,
    next_id: u64,
    pending: HashMap<u64, oneshot::Sender<Result<serde_json::Value, String>>>,
    /// Registrations with the main node since this node started: the folders kept in
    /// WORK_DIR are looked at again after each (`actors::work_dir`).
    registrations: u64,
}

impl Agent {
    pub fn new(config: AgentConfig) -> Self {
        Agent {
            config,
            node: None,
            sink: None,
            link: 0,
            stream: None,
            registered: false,
            heartbeat: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
            heartbeat_started: false,
            cut_off_since: Some(Instant::now()),
            fenced: false,
            backoff: Duration::from_secs(1),
            library_paths: Vec::new(),
            library_not_empty: Vec::new(),
            next_id: 0,
            pending: HashMap::new(),
            registrations: 0,
        }
    }

    fn write(&mut self, frame: &Frame) -> bool {
        let (Some(sink), Ok(text)) = (self.sink.as_mut(), serde_json::to_string(frame)) else { return false };
        sink.write(Message::Text(text.into())).is_ok()
    }

    /// What the link presents: the node's credential as `<identity>.<credential>` once it
    /// has one, else CLUSTER_TOKEN to enroll.
    fn bearer(&self) -> Option<String> {
        let Frame::Register { identity, .. } = &self.config.register else { return None };
        match (identity, &self.config.credential) {
            (Some(identity), Some(credential)) => Some(format!("{identity}.{credential}")),
            _ => self.config.cluster_token.clone(),
        }
    }

    fn connect(&mut self, ctx: &mut Context<Self>) {
        let url = format!("{}/cluster/link", self.config.main_url);
        let Some(token) = self.bearer() else {
            // Only when a credential was refused as unknown and there is no token to enroll.
            tracing::error!(
                "the main node does not know this node's credential and CLUSTER_TOKEN is not set to enroll it again"
            );
            return self.retry(ctx);
        };
        let with_credential = self.config.credential.is_some();
        async move {
            awc::Client::builder()
                .timeout(Duration::from_secs(10))
                .finish()
                .ws(url)
                .bearer_auth(token)
                .max_frame_size(64 << 20)
                .connect()
                .await
        }
        .into_actor(self)
        .map(move |result, this, ctx| match result {
            Ok((_, framed)) => {
                let (sink, stream) = framed.split();
                this.link += 1;
                let link = this.link;
                let ended = futures_util::stream::once(async move { LinkItem { link, item: None } });
                let items = stream.map(move |item| LinkItem { link, item: Some(item) }).chain(ended);
                this.stream = Some(ctx.add_stream(items));
                this.sink = Some(SinkWrite::new(sink, ctx));
                let register = this.config.register.clone();
                this.write(&register);
            }
            Err(e) => {
                let status = match &e {
                    awc::error::WsClientError::InvalidResponseStatus(status) => Some(status.as_u16()),
                    _ => None,
                };
                if with_credential && status == Some(401) {
                    // The main node does not know the credential (the node was removed, or its
                    // database replaced): enroll again with CLUSTER_TOKEN, if set. A revoked
                    // node gets 403 and keeps trying with its credential, so it stays out.
                    tracing::warn!(
                        "the main node does not know this node's credential; enrolling again with CLUSTER_TOKEN"
                    );
                    this.config.credential = None;
                }
                if status == Some(403) {
                    tracing::error!(retry_in = ?this.backoff, "the main node refused this node's link: it was revoked");
                    eprintln!("condense: the main node refused this node: it was revoked by an administrator");
                } else {
                    tracing::warn!(error = %e, retry_in = ?this.backoff, "cannot reach the main node");
                }
                this.retry(ctx);
            }
        })
        .wait(ctx);
    }

    fn retry(&mut self, ctx: &mut Context<Self>) {
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_LINK_BACKOFF);
        ctx.run_later(wait, Agent::connect);
    }

    /// The current link ended: one try to link again is scheduled. Whatever the ended link's
    /// stream still yields is stale from here on.
    fn disconnected(&mut self, ctx: &mut Context<Self>) {
        self.link += 1;
        if let Some(stream) = self.stream.take() {
            ctx.cancel_future(stream);
        }
        // The ended link's writer goes with its socket: left spawned, it would hold the
        // socket open and answer its next failed flush through `WriteHandler`.
        let had_sink = self.sink.take().map(|sink| ctx.cancel_future(sink.handle())).is_some();
        if had_sink || self.registered {
            tracing::warn!("link to the main node lost; reconnecting");
        }
        self.registered = false;
        self.cut_off_since.get_or_insert_with(Instant::now);
        // Dropped unanswered: each caller learns the link went down, which is not an
        // answer of the main node (`AskMain`).
        self.pending.clear();
        self.retry(ctx);
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        // Self-fencing: past half the main node's timeout it may give our jobs to others.
        if let Some(since) = self.cut_off_since {
            if !self.fenced && since.elapsed() > self.timeout / 2 {
                if let Some(node) = &self.node {
                    tracing::warn!("cut off from the main node: stopping local encodes");
                    node.do_send(StopAll);
                }
                self.fenced = true;
            }
        }
        if !self.registered {
            return;
        }
        let Some(node) = self.node.clone() else { return };
        let paths = self.library_paths.clone();
        let not_empty = self.library_not_empty.clone();
        let not_here = self.config.not_here.clone();
        let work_dir = self.config.work_dir.clone();
        let transfer = self.config.transfer;
        async move {
            let running = node.send(RunningJobs).await.unwrap_or_default();
            let helping = node.send(RunningHelpers).await.unwrap_or_default();
            let checked = paths.clone();
            let missing = tokio::task::spawn_blocking(move || {
                let mut missing = crate::host::sight::unseen(&paths, &not_empty);
                for path in not_here.libraries(&paths) {
                    if !missing.contains(&path) {
                        missing.push(path);
                    }
                }
                missing
            })
            .await;
            // The job folders WORK_DIR holds: those of jobs running here, and those kept from
            // earlier attempts (`actors::work_dir`), which the scheduler gives back here first.
            let (free, kept) = tokio::task::spawn_blocking(move || {
                let kept = if transfer { crate::actors::transfer::job_dir_ids(&work_dir) } else { Vec::new() };
                (work_dir_free_bytes(&work_dir), kept)
            })
            .await
            .unwrap_or_default();
            // Unchecked (the check itself failed): reported as checked against nothing, so
            // the main node counts no library as seen.
            let (checked, missing) = match missing {
                Ok(missing) => (checked, missing),
                Err(_) => (Vec::new(), Vec::new()),
            };
            (running, helping, checked, missing, free, kept)
        }
        .into_actor(self)
        .map(|(running, helping, checked, missing_paths, work_dir_free_bytes, kept_jobs), this, _| {
            let (memory_used, _) = crate::host::memory();
            let heartbeat = Frame::Heartbeat {
                load1: crate::host::load1(),
                memory_used: i64::try_from(memory_used).unwrap_or(i64::MAX),
                running,
                helping,
                missing_paths,
                checked_paths: Some(checked),
                transfer: this.config.transfer,
                work_dir_free_bytes,
                kept_jobs,
            };
            this.write(&heartbeat);
        })
        .spawn(ctx);
    }

    fn answer(&mut self, id: u64, call: Call, ctx: &mut Context<Self>) {
        let Some(node) = self.node.clone() else { return };
        // What a health batch's paths are contained against: the library paths the main
        // node told this node, never more than them.
        let told = self.library_paths.clone();
        async move {
            match call {
                Call::StartJob { job_id, lease_id, by_transfer } => node
                    .send(StartJob { job_id, lease_id, by_transfer })
                    .await
                    .map(serde_json::Value::Bool)
                    .map_err(|e| e.to_string()),
                Call::ControlJob { job_id, command } => node
                    .send(ControlJob { job_id, command })
                    .await
                    .map(serde_json::Value::Bool)
                    .map_err(|e| e.to_string()),
                Call::StartHelper { job_id, span, lease_id, by_transfer } => node
                    .send(StartHelper(HelperRef { job_id, span, lease_id, by_transfer }))
                    .await
                    .map(serde_json::Value::Bool)
                    .map_err(|e| e.to_string()),
                Call::HealthBatch { library_id, depth, roots, paths } => {
                    tracing::debug!(library = library_id, files = paths.len(), "health batch from the main node");
                    let told = CheckTold { library_id, depth, told, roots, paths };
                    let answer = node.send(told).await.map_err(|e| e.to_string())?;
                    serde_json::to_value(answer).map_err(|e| e.to_string())
                }
                Call::CancelHealth { library_id } => {
                    node.send(CancelTold { library_id }).await.map(serde_json::Value::from).map_err(|e| e.to_string())
                }
                _ => Err("not a call for a linked node".to_string()),
            }
        }
        .into_actor(self)
        .map(move |result, this, _| {
            this.write(&Frame::Reply { id, result });
        })
        .spawn(ctx);
    }
}

impl Agent {
    /// Presents `identity` (and `credential`, given at an enrollment) on every later link, and
    /// keeps them in DATA_DIR for the next start: the credential (mode 0600) before the
    /// identity, in one task, so that a crash between the two leaves a credential without its
    /// identity (ignored; the node enrolls again), never an identity whose credential is lost
    /// (refused for good). One task, not two `ctx.wait` futures: actix runs its wait queue
    /// newest first, and the identity went to disk before the credential (a linked node
    /// killed in between could never link again; the cluster loop saw it).
    fn keep_registration(&mut self, identity: String, credential: Option<String>, ctx: &mut Context<Self>) {
        if let Some(credential) = &credential {
            self.config.credential = Some(credential.clone());
        }
        let Frame::Register { identity: presented, .. } = &mut self.config.register else { return };
        let new_identity = presented.as_deref() != Some(identity.as_str());
        if !new_identity && credential.is_none() {
            return;
        }
        *presented = Some(identity.clone());
        let data_dir = self.config.data_dir.clone();
        async move {
            let kept = identity.clone();
            let stored = tokio::task::spawn_blocking(move || {
                if let Some(credential) = credential {
                    crate::config::store_node_credential(&data_dir, &credential).map_err(|e| {
                        format!("cannot keep the node credential in DATA_DIR ({e}); a restart must enroll again")
                    })?;
                    tracing::info!("node credential kept in DATA_DIR");
                }
                if new_identity {
                    crate::config::store_node_identity(&data_dir, &kept).map_err(|e| {
                        format!("cannot keep the node identity in DATA_DIR ({e}); a restart registers as a new node")
                    })?;
                }
                Ok::<(), String>(())
            })
            .await;
            match stored {
                Ok(Ok(())) => tracing::info!(%identity, "node identity kept in DATA_DIR"),
                Ok(Err(e)) => tracing::error!(%identity, error = %e, "registration not kept"),
                Err(e) => tracing::error!(error = %e, "cannot keep the registration in DATA_DIR"),
            }
        }
        .into_actor(self)
        .wait(ctx);
    }
}

impl Actor for Agent {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.connect(ctx);
        ctx.run_interval(Duration::from_secs(1), Agent::tick);
    }
}

/// A write on the link that fails ends that writer only. actix's defaults would stop the
/// whole agent (`finished` stops the actor's context), and the node would never link again
/// while the process went on; the link's end itself comes through its stream (`LinkItem`),
/// which links again.
impl WriteHandler<WsProtocolError> for Agent {
    fn error(&mut self, err: WsProtocolError, _: &mut Context<Self>) -> Running {
        tracing::debug!(error = %err, "a write on the link to the main node failed");
        Running::Stop
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

impl StreamHandler<LinkItem> for Agent {
    fn handle(&mut self, LinkItem { link, item }: LinkItem, ctx: &mut Context<Self>) {
        if link != self.link {
            return;
        }
        let text = match item {
            Some(Ok(WsFrame::Text(bytes))) => bytes,
            Some(Ok(WsFrame::Ping(bytes))) => {
                if let Some(sink) = self.sink.as_mut() {
                    let _ = sink.write(Message::Pong(bytes));
                }
                return;
            }
            Some(Ok(WsFrame::Close(_)) | Err(_)) | None => {
                self.disconnected(ctx);
                return;
            }
            Some(Ok(_)) => return,
        };
        let Ok(frame) = serde_json::from_slice::<Frame>(&text) else { return };
        match frame {
            Frame::Registered { node_id, heartbeat_seconds, timeout_seconds, identity, credential } => {
                tracing::info!(node_id, enrolled = credential.is_some(), "registered with the main node");
                self.keep_registration(identity, credential, ctx);
                // The transfers present the node's own credential, never CLUSTER_TOKEN.
                let own = self.config.credential.is_some().then(|| self.bearer()).flatten();
                self.config.bearer.set(own);
                self.registered = true;
                self.registrations += 1;
                self.backoff = Duration::from_secs(1);
                self.cut_off_since = None;
                self.fenced = false;
                self.heartbeat = Duration::from_secs(heartbeat_seconds.max(1));
                self.timeout = Duration::from_secs(timeout_seconds.max(1));
                if !self.heartbeat_started {
                    self.heartbeat_started = true;
                    ctx.run_interval(self.heartbeat, Agent::tick);
                }
                self.tick(ctx);
            }
            Frame::Refused { reason } => {
                tracing::error!(%reason, "the main node refused this node's registration");
                eprintln!("condense: the main node refused this node: {reason}");
            }
            // A library was created, moved or deleted, a library folder on the main node
            // filled or emptied (or the link is new): checked and reported at once, as the
            // main node gives no job of a path not reported.
            Frame::Libraries { paths, not_empty }
                if paths != self.library_paths || not_empty != self.library_not_empty =>
            {
                self.library_paths = paths;
                self.library_not_empty = not_empty;
                self.tick(ctx);
            }
            Frame::Request { id, call } => self.answer(id, *call, ctx),
            Frame::Reply { id, result } => {
                if let Some(tx) = self.pending.remove(&id) {
                    let _ = tx.send(result);
                }
            }
            _ => {}
        }
    }

    /// A link's end comes as its last item (`LinkItem`), once; the actor goes on.
    fn finished(&mut self, _: &mut Context<Self>) {}
}

/// Sets the node whose jobs the agent runs (created after the agent, which its store needs).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetNode(pub Addr<NodeSupervisor>);

impl Handler<SetNode> for Agent {
    type Result = ();
    fn handle(&mut self, msg: SetNode, _: &mut Context<Self>) {
        self.node = Some(msg.0);
    }
}

/// A job-store call to the main node.
#[derive(Message)]
#[rtype(result = "Result<serde_json::Value, String>")]
pub struct CallMain(pub Call);

impl Handler<CallMain> for Agent {
    type Result = ResponseFuture<Result<serde_json::Value, String>>;

    fn handle(&mut self, msg: CallMain, _: &mut Context<Self>) -> Self::Result {
        let asked = self.ask(msg.0);
        Box::pin(async move { asked.await.and_then(|answer| answer) })
    }
}

/// A call to the main node whose caller tells its answer from no answer: `Ok` with what the
/// main node answered (its refusal among them), `Err` when it could not be asked or did
/// not answer within `CALL_TIMEOUT`.
#[derive(Message)]
#[rtype(result = "Result<Result<serde_json::Value, String>, String>")]
pub struct AskMain(pub Call);

impl Handler<AskMain> for Agent {
    type Result = ResponseFuture<Result<Result<serde_json::Value, String>, String>>;

    fn handle(&mut self, msg: AskMain, _: &mut Context<Self>) -> Self::Result {
        Box::pin(self.ask(msg.0))
    }
}

/// What `Agent::ask` answers for a call it could not send (no link now): nothing reached
/// the main node, so the call may be made again once the link is back.
const NOT_SENT: &str = "not connected to the main node";

impl Agent {
    fn ask(
        &mut self,
        call: Call,
    ) -> impl std::future::Future<Output = Result<Result<serde_json::Value, String>, String>> + 'static {
        let sent = if self.registered {
            self.next_id += 1;
            let id = self.next_id;
            let (tx, rx) = oneshot::channel();
            self.pending.insert(id, tx);
            if self.write(&Frame::Request { id, call: Box::new(call) }) {
                Ok(rx)
            } else {
                self.pending.remove(&id);
                Err(NOT_SENT)
            }
        } else {
            Err(NOT_SENT)
        };
        async move {
            match tokio::time::timeout(CALL_TIMEOUT, sent.map_err(str::to_string)?).await {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(_)) => Err("the link to the main node is down".to_string()),
                Err(_) => Err("the main node did not answer".to_string()),
            }
        }
    }
}

/// How many times the node registered with the main node since it started.
#[derive(Message)]
#[rtype(result = "u64")]
pub struct Registrations;

impl Handler<Registrations> for Agent {
    type Result = u64;
    fn handle(&mut self, _: Registrations, _: &mut Context<Self>) -> u64 {
        self.registrations
    }
}

/// A call that needs no answer (live progress).
#[derive(Message)]
#[rtype(result = "()")]
pub struct NotifyMain(pub Call);

impl Handler<NotifyMain> for Agent {
    type Result = ();
    fn handle(&mut self, msg: NotifyMain, _: &mut Context<Self>) {
        if self.registered {
            // Id 0: the answer is ignored.
            self.write(&Frame::Request { id: 0, call: Box::new(msg.0) });
        }
    }
}

/// The job store of a linked node: every call goes to the main node.
pub struct RemoteStore {
    pub agent: Addr<Agent>,
}

fn remote(message: String) -> LifecycleError {
    LifecycleError::Repo(RepoError::Conflict(message))
}

impl RemoteStore {
    /// A call of the job store over the link. One that could not be sent (the link is down:
    /// the main node restarting, a network blip) is made again each second once the link is
    /// back, for as long as a transfer waits (`transfer::PATIENCE`): a job's attempt rides
    /// out what its transfers ride out, instead of ending on its next write and leaving its
    /// job to be requeued. A call sent whose answer was lost is not made again: it may have
    /// been applied.
    async fn call<T: serde::de::DeserializeOwned>(&self, call: Call) -> Result<T, LifecycleError> {
        let deadline = tokio::time::Instant::now() + super::transfer::PATIENCE;
        let value = loop {
            match self.agent.send(CallMain(call.clone())).await.map_err(|e| remote(e.to_string()))? {
                Ok(value) => break value,
                Err(e) if e == NOT_SENT && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(remote(e)),
            }
        };
        serde_json::from_value(value).map_err(|e| remote(format!("unreadable answer from the main node: {e}")))
    }
}

#[async_trait::async_trait(?Send)]
impl JobStore for RemoteStore {
    async fn job(&self, id: i32) -> Result<job::Model, LifecycleError> {
        self.call(Call::Job { id }).await
    }

    async fn library(&self, id: i32) -> Result<library::Model, LifecycleError> {
        self.call(Call::Library { id }).await
    }

    async fn job_settings(&self) -> Result<JobSettings, LifecycleError> {
        self.call(Call::Settings).await
    }

    async fn last_health(&self, id: i32) -> Result<Option<LastCheck>, LifecycleError> {
        self.call(Call::LastHealth { id }).await
    }

    async fn apply(
        &self,
        id: i32,
        lease: &str,
        event: JobEvent,
        patch: JobChange,
        ctx: EventContext,
    ) -> Result<Applied, LifecycleError> {
        self.call(Call::Apply { id, lease: lease.to_string(), event, patch, ctx }).await
    }

    async fn update_live(&self, id: i32, lease: &str, patch: JobChange) -> Result<(), LifecycleError> {
        self.call::<serde_json::Value>(Call::UpdateLive { id, lease: lease.to_string(), patch }).await.map(|_| ())
    }

    async fn record_event(
        &self,
        id: i32,
        lease: &str,
        kind: &str,
        node: Option<String>,
        detail: Option<serde_json::Value>,
    ) -> Result<(), LifecycleError> {
        let call = Call::RecordEvent { id, lease: lease.to_string(), kind: kind.to_string(), node, detail };
        self.call::<serde_json::Value>(call).await.map(|_| ())
    }

    async fn lease_is_mine(&self, id: i32, lease: &str) -> bool {
        self.call(Call::LeaseIsMine { id, lease: lease.to_string() }).await.unwrap_or(false)
    }

    fn publish_progress(&self, job: &job::Model) {
        self.agent.do_send(NotifyMain(Call::Progress { job: Box::new(job.clone()), transfer: None }));
    }

    fn publish_transfer(&self, job: &job::Model, transfer: crate::domain::transfer::LiveTransfer) {
        self.agent.do_send(NotifyMain(Call::Progress { job: Box::new(job.clone()), transfer: Some(transfer) }));
    }

    async fn sync_spans(
        &self,
        id: i32,
        lease: &str,
        _: (i32, String),
        spans: Vec<SpanView>,
    ) -> Result<HelperTotals, LifecycleError> {
        self.call(Call::SyncSpans { id, lease: lease.to_string(), spans }).await
    }

    async fn span_progress(
        &self,
        id: i32,
        span: u32,
        lease: &str,
        progress: (u64, f64, u64),
    ) -> Result<bool, LifecycleError> {
        let (frames, fps, bytes) = progress;
        self.call(Call::SpanProgress { id, span, lease: lease.to_string(), frames, fps, bytes }).await
    }

    async fn span_end(&self, id: i32, span: u32, lease: &str, done: Option<SpanDone>) -> Result<(), LifecycleError> {
        self.call::<serde_json::Value>(Call::SpanEnd { id, span, lease: lease.to_string(), done }).await.map(|_| ())
    }
}
