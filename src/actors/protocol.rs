//! The link between a linked node and the main node: JSON text frames over a WebSocket
//! (`/cluster/link`, authenticated with the node's own credential, or CLUSTER_TOKEN to enroll). Either side may send a request with
//! an id; the other answers with a reply carrying the same id.

use serde::{Deserialize, Serialize};

use super::job::helper::HelperRef;
use super::job::JobCommand;
use super::lifecycle::EventContext;
use super::node::{NodeCapacity, RunningJob};
use crate::domain::job::JobEvent;
use crate::domain::segments::SpanView;
use crate::repo::jobs::JobChange;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Frame {
    /// Linked -> main, first frame: who the node is.
    #[serde(rename_all = "camelCase")]
    Register {
        name: String,
        address: String,
        cores: i32,
        memory_total: i64,
        gpu: Option<String>,
        encoders: Vec<String>,
        /// Absent from nodes older than this field: none.
        #[serde(default)]
        decoders: Vec<String>,
        max_jobs: i32,
        version: String,
        /// The identity the main node gave this node at its first registration (kept in
        /// its DATA_DIR); absent the first time.
        #[serde(default)]
        identity: Option<String>,
    },
    /// Main -> linked: accepted; heartbeat every `heartbeat_seconds`.
    #[serde(rename_all = "camelCase")]
    Registered {
        node_id: i32,
        heartbeat_seconds: u64,
        timeout_seconds: u64,
        /// The node's identity, to keep and present on every later link.
        identity: String,
        /// At enrollment (a link authenticated with CLUSTER_TOKEN): the node's own
        /// credential, to keep and present as `Bearer <identity>.<credential>` on every
        /// later link. Only its hash is kept on the main node.
        #[serde(default)]
        credential: Option<String>,
    },
    /// Main -> linked: not accepted, and why (then the link closes).
    Refused {
        reason: String,
    },
    /// Linked -> main.
    #[serde(rename_all = "camelCase")]
    Heartbeat {
        load1: f64,
        memory_used: i64,
        running: Vec<RunningJob>,
        /// Spans of other nodes' jobs this node's helpers encode.
        #[serde(default)]
        helping: Vec<HelperRef>,
        missing_paths: Vec<String>,
    },
    /// Main -> linked, answering a heartbeat: the library paths the node must see.
    #[serde(rename_all = "camelCase")]
    Libraries {
        paths: Vec<String>,
    },
    Request {
        id: u64,
        call: Box<Call>,
    },
    Reply {
        id: u64,
        result: Result<serde_json::Value, String>,
    },
}

/// A request either side makes of the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "camelCase")]
pub enum Call {
    // Linked -> main: the job store (each checked against the caller's lease).
    Job {
        id: i32,
    },
    Library {
        id: i32,
    },
    Settings,
    Apply {
        id: i32,
        lease: String,
        event: JobEvent,
        patch: JobChange,
        ctx: EventContext,
    },
    UpdateLive {
        id: i32,
        lease: String,
        patch: JobChange,
    },
    RecordEvent {
        id: i32,
        lease: String,
        kind: String,
        node: Option<String>,
        #[serde(default)]
        detail: Option<serde_json::Value>,
    },
    LeaseIsMine {
        id: i32,
        lease: String,
    },
    Progress {
        job: Box<entities::job::Model>,
    },
    /// The node's run of a job reports its spans (fenced by the job's lease).
    SyncSpans {
        id: i32,
        lease: String,
        spans: Vec<SpanView>,
    },
    /// A helper's progress (fenced by the span's lease); answers whether it is still its.
    SpanProgress {
        id: i32,
        span: u32,
        lease: String,
        frames: u64,
        fps: f64,
        bytes: u64,
    },
    /// A helper ended (fenced by the span's lease).
    SpanEnd {
        id: i32,
        span: u32,
        lease: String,
        done: Option<(u64, u64)>,
    },
    // Main -> linked: the node's slots.
    #[serde(rename_all = "camelCase")]
    StartJob {
        job_id: i32,
        lease_id: String,
    },
    #[serde(rename_all = "camelCase")]
    ControlJob {
        job_id: i32,
        command: JobCommand,
    },
    /// A span of a job to encode beside its run, under the span's lease.
    #[serde(rename_all = "camelCase")]
    StartHelper {
        job_id: i32,
        span: u32,
        lease_id: String,
    },
}

/// Capacity as the main node sees a linked node between heartbeats: `busy` slots run jobs
/// or helpers.
pub fn capacity(max_jobs: i32, busy: usize, missing_paths: &[String]) -> NodeCapacity {
    NodeCapacity {
        free: usize::try_from(max_jobs).unwrap_or(0).saturating_sub(busy),
        missing_paths: missing_paths.to_vec(),
    }
}
