//! The link between a linked node and the main node: JSON text frames over a WebSocket
//! (`/cluster/link`, authenticated with the node's own credential, or CLUSTER_TOKEN to enroll). Either side may send a request with
//! an id; the other answers with a reply carrying the same id.

use serde::{Deserialize, Serialize};

use super::job::helper::HelperRef;
use super::job::JobCommand;
use super::lifecycle::EventContext;
use super::node::{NodeCapacity, RunningJob};
use crate::domain::job::JobEvent;
use crate::domain::placement::SharedStorage;
use crate::domain::segments::SpanView;
use crate::repo::jobs::JobChange;
use crate::repo::segments::SpanDone;

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
        /// Its `SHARED_STORAGE`; absent from nodes older than it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shared_storage: Option<SharedStorage>,
        /// It can take jobs of libraries it does not see, by transfer
        /// (`domain::placement::takes_transfers`); false from older nodes.
        #[serde(default)]
        transfer: bool,
        /// Free bytes in its WORK_DIR; absent from older nodes (and where unreadable).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        work_dir_free_bytes: Option<u64>,
        /// It checks library health batches on idle slots (`Call::HealthBatch`); false from
        /// older nodes, which would drop the call unanswered, so they are given none.
        #[serde(default)]
        health_checks: bool,
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
        /// The library paths `missing_paths` was checked against (the last `Libraries` the
        /// node had). A path not among them is not known to be seen, and the main node gives
        /// the node no job of it. Absent from older nodes: every path counts as checked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checked_paths: Option<Vec<String>>,
        /// As at registration: absent (false) from older nodes.
        #[serde(default)]
        transfer: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        work_dir_free_bytes: Option<u64>,
        /// The jobs whose folders it keeps in WORK_DIR from an earlier attempt (a copy of
        /// the source, finished segments): the scheduler gives such a job back to it first
        /// (`domain::placement::choose`). Absent from older nodes, and when it keeps none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kept_jobs: Vec<i32>,
    },
    /// Main -> linked: the library paths the node must see, at its registration, answering
    /// each heartbeat, and at once whenever a library is created, moved or deleted; the node
    /// answers a changed list with a heartbeat at once.
    #[serde(rename_all = "camelCase")]
    Libraries {
        paths: Vec<String>,
        /// The paths among `paths` that hold something on the main node: a node that finds
        /// one of them empty is looking at the folder a share is mounted over, not the
        /// library (`host::sight`). Absent from older main nodes: a folder is enough.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        not_empty: Vec<String>,
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
    /// The last library health check of the job's file (issue 38).
    LastHealth {
        id: i32,
    },
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
        /// The file the job moves now (stage TRANSFERRING, issue 39); absent from older
        /// nodes and while it moves none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transfer: Option<crate::domain::transfer::LiveTransfer>,
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
        /// Sent as `[frames, bytes]`, as every node reads it (see `SpanDone`).
        done: Option<SpanDone>,
    },
    // Main -> linked: the node's slots.
    #[serde(rename_all = "camelCase")]
    StartJob {
        job_id: i32,
        lease_id: String,
        /// The node does not see the file and takes it by transfer (issue 39); absent
        /// from older main nodes, which give only files a node sees.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_transfer: bool,
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
        /// The node does not see the job's library (`HelperRef::by_transfer`); absent
        /// from an older main node, which gives no such span.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_transfer: bool,
    },
    /// A batch of a library health check (issue 38) on one idle slot: the paths as the main
    /// node stores them, under the library's `roots`; the node contains each again against
    /// the library paths it was told. Answered by `actors::health_batch::BatchAnswer`.
    #[serde(rename_all = "camelCase")]
    HealthBatch {
        library_id: i32,
        depth: crate::media::health::Depth,
        roots: Vec<String>,
        #[serde(with = "crate::domain::path_bytes::lossless_vec")]
        paths: Vec<std::path::PathBuf>,
    },
    /// The run of `library_id` was cancelled: the node stops that library's batches (their
    /// results are dropped anyway). Sent only to nodes that take health batches.
    #[serde(rename_all = "camelCase")]
    CancelHealth {
        library_id: i32,
    },
}

/// Capacity as the main node sees a linked node between heartbeats: `busy` slots run jobs
/// or helpers; what it sees as its last heartbeat said.
pub fn capacity(max_jobs: i32, busy: usize, sight: &Sight) -> NodeCapacity {
    NodeCapacity {
        free: usize::try_from(max_jobs).unwrap_or(0).saturating_sub(busy),
        missing_paths: sight.missing.clone(),
        checked_paths: sight.checked.clone(),
        transfer: sight.transfer,
        work_dir_free_bytes: sight.work_dir_free_bytes,
        kept_jobs: sight.kept_jobs.clone(),
    }
}

/// What a linked node's last heartbeat said it sees: the library paths it checked (`None`:
/// an older node, which checked every path it was told of) and those of them it found
/// missing; and whether it takes files it does not see by transfer, with the room for them
/// (as its registration, then its last heartbeat, said).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sight {
    pub checked: Option<Vec<String>>,
    pub missing: Vec<String>,
    /// Its `SHARED_STORAGE` (`None`: a node older than the setting).
    pub shared_storage: Option<SharedStorage>,
    pub transfer: bool,
    pub work_dir_free_bytes: Option<u64>,
    /// The jobs whose folders it keeps in WORK_DIR, as its last heartbeat said.
    pub kept_jobs: Vec<i32>,
}

impl Sight {
    /// Before the node's first report: it sees nothing known yet.
    pub fn unreported() -> Self {
        Sight { checked: Some(Vec::new()), ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::actors::store::JobSettings;

    fn span_end(done: Value) -> String {
        json!({"type": "request", "id": 7, "call": {"call": "spanEnd", "id": 3, "span": 2, "lease": "l", "done": done}})
            .to_string()
    }

    fn span_end_frame(done: Option<SpanDone>) -> Frame {
        Frame::Request { id: 7, call: Box::new(Call::SpanEnd { id: 3, span: 2, lease: "l".into(), done }) }
    }

    #[test]
    fn a_span_end_from_an_older_node_parses_and_is_sent_in_the_same_shape() {
        // A helper's end as nodes from before `SpanDone` send it: `[frames, bytes]`.
        let old = span_end(json!([120, 4096]));
        let done = SpanDone { frames: 120, bytes: 4096 };
        assert_eq!(serde_json::from_str::<Frame>(&old).unwrap(), span_end_frame(Some(done)));
        // What this node sends: the same frame, which older main nodes read.
        let sent = serde_json::to_value(span_end_frame(Some(done))).unwrap();
        assert_eq!(sent, serde_json::from_str::<Value>(&old).unwrap());
        // A span given back.
        assert_eq!(serde_json::from_str::<Frame>(&span_end(Value::Null)).unwrap(), span_end_frame(None));
        // The named shape, should a later node send it.
        let named = span_end(json!({"frames": 120, "bytes": 4096}));
        assert_eq!(serde_json::from_str::<Frame>(&named).unwrap(), span_end_frame(Some(done)));
    }

    #[test]
    fn libraries_from_an_older_main_node_parse_and_are_sent_in_the_same_shape() {
        // An older main node says no path holds something: a folder is enough, as before.
        let older = json!({"type": "libraries", "paths": ["/media"]});
        let frame: Frame = serde_json::from_value(older.clone()).unwrap();
        assert_eq!(frame, Frame::Libraries { paths: vec!["/media".into()], not_empty: Vec::new() });
        assert_eq!(serde_json::to_value(&frame).unwrap(), older);
        let now = Frame::Libraries { paths: vec!["/media".into(), "/new".into()], not_empty: vec!["/media".into()] };
        let sent = serde_json::to_value(&now).unwrap();
        assert_eq!(sent, json!({"type": "libraries", "paths": ["/media", "/new"], "notEmpty": ["/media"]}));
        assert_eq!(serde_json::from_value::<Frame>(sent).unwrap(), now);
    }

    #[test]
    fn frames_of_nodes_older_than_transfers_parse_as_nodes_that_take_none() {
        let register = json!({"type": "register", "name": "w1", "address": "w1", "cores": 4,
            "memoryTotal": 1024, "gpu": null, "encoders": ["libx265"], "maxJobs": 1, "version": "0.1.0"});
        let Frame::Register { shared_storage, transfer, work_dir_free_bytes, health_checks, .. } =
            serde_json::from_value(register).unwrap()
        else {
            panic!("not a registration")
        };
        assert_eq!((shared_storage, transfer, work_dir_free_bytes), (None, false, None));
        // Nor health checks: such a node is given no `HealthBatch` call.
        assert!(!health_checks);
        let heartbeat = json!({"type": "heartbeat", "load1": 0.5, "memoryUsed": 10, "running": [],
            "missingPaths": ["/media"], "checkedPaths": ["/media"]});
        let Frame::Heartbeat { transfer, work_dir_free_bytes, kept_jobs, .. } =
            serde_json::from_value(heartbeat).unwrap()
        else {
            panic!("not a heartbeat")
        };
        assert_eq!((transfer, work_dir_free_bytes), (false, None));
        // Nor kept job folders: no job goes back to such a node first.
        assert!(kept_jobs.is_empty());
        let start = json!({"type": "request", "id": 3, "call": {"call": "startJob", "jobId": 9, "leaseId": "l"}});
        let expected = Call::StartJob { job_id: 9, lease_id: "l".into(), by_transfer: false };
        assert_eq!(
            serde_json::from_value::<Frame>(start.clone()).unwrap(),
            Frame::Request { id: 3, call: Box::new(expected.clone()) }
        );
        // A job a node sees is sent as before, which older linked nodes read.
        let sent = serde_json::to_value(Frame::Request { id: 3, call: Box::new(expected) }).unwrap();
        assert_eq!(sent, start);
    }

    #[test]
    fn progress_without_a_transfer_parses_as_from_older_nodes_and_is_sent_in_that_shape() {
        use crate::domain::transfer::{LiveTransfer, TransferDirection};
        // A job's row as a node reads it: the fields without a value are left out.
        let status = serde_json::to_value(entities::sea_orm_active_enums::JobStatus::Encoding).unwrap();
        let job: entities::job::Model = serde_json::from_value(json!({"id": 4, "file_path": "/m/a.mkv",
            "file_name": "a.mkv", "status": status, "progress": 12.5, "fps": 0.0, "retry_count": 0, "crash_count": 0,
            "stalled": false, "forced": false, "target_codec": "hevc", "source_size": 40, "priority": 0,
            "created_at": "2026-11-29T00:00:00Z", "updated_at": "2026-11-29T00:00:00Z"}))
        .unwrap();
        let call = |transfer: Option<LiveTransfer>| Call::Progress { job: Box::new(job.clone()), transfer };
        // An older node's frame: the job alone.
        let old = json!({"call": "progress", "job": serde_json::to_value(&job).unwrap()});
        assert_eq!(serde_json::from_value::<Call>(old.clone()).unwrap(), call(None));
        // Without a transfer this node sends that same frame, which older main nodes read.
        assert_eq!(serde_json::to_value(call(None)).unwrap(), old);
        // With one, the transfer goes beside the job.
        let moving =
            LiveTransfer { direction: TransferDirection::Upload, bytes: 10, total: 40, rate_bytes_per_second: 5.5 };
        let sent = serde_json::to_value(call(Some(moving))).unwrap();
        assert_eq!(
            sent["transfer"],
            json!({"direction": "upload", "bytes": 10, "total": 40, "rateBytesPerSecond": 5.5})
        );
        assert_eq!(serde_json::from_value::<Call>(sent).unwrap(), call(Some(moving)));
    }

    #[test]
    fn what_a_node_says_of_transfers_goes_both_ways() {
        let register = Frame::Register {
            name: "w1".into(),
            address: "w1".into(),
            cores: 4,
            memory_total: 1024,
            gpu: None,
            encoders: vec![],
            decoders: vec![],
            max_jobs: 1,
            version: "0.1.0".into(),
            identity: None,
            shared_storage: Some(SharedStorage::Required),
            transfer: false,
            work_dir_free_bytes: Some(5_000_000_000),
            health_checks: true,
        };
        let text = serde_json::to_value(&register).unwrap();
        assert_eq!(
            (&text["sharedStorage"], &text["transfer"], &text["workDirFreeBytes"]),
            (&json!("required"), &json!(false), &json!(5_000_000_000u64))
        );
        assert_eq!(serde_json::from_value::<Frame>(text).unwrap(), register);
        let beat = |kept_jobs: Vec<i32>| Frame::Heartbeat {
            load1: 0.1,
            memory_used: 1,
            running: vec![],
            helping: vec![],
            missing_paths: vec![],
            checked_paths: Some(vec![]),
            transfer: true,
            work_dir_free_bytes: Some(7),
            kept_jobs,
        };
        let heartbeat = beat(vec![]);
        let text = serde_json::to_value(&heartbeat).unwrap();
        assert_eq!((&text["transfer"], &text["workDirFreeBytes"]), (&json!(true), &json!(7)));
        // Keeping no job folder, the frame is the one older main nodes read.
        assert!(text.get("keptJobs").is_none(), "{text}");
        assert_eq!(serde_json::from_value::<Frame>(text).unwrap(), heartbeat);
        // The jobs whose folders it keeps, both ways.
        let keeping = beat(vec![4, 12]);
        let text = serde_json::to_value(&keeping).unwrap();
        assert_eq!(text["keptJobs"], json!([4, 12]));
        assert_eq!(serde_json::from_value::<Frame>(text).unwrap(), keeping);
        let start = Call::StartJob { job_id: 9, lease_id: "l".into(), by_transfer: true };
        let text = serde_json::to_value(&start).unwrap();
        assert_eq!(text["byTransfer"], json!(true));
        assert_eq!(serde_json::from_value::<Call>(text).unwrap(), start);
    }

    #[test]
    fn job_settings_from_an_older_main_node_parse_and_are_answered_in_the_same_shape() {
        // The answer to `Call::Settings` as main nodes from before `JobSettings` send it.
        let old = r#"{"type":"reply","id":1,"result":{"Ok":[true,24]}}"#;
        let Frame::Reply { result: Ok(value), .. } = serde_json::from_str::<Frame>(old).unwrap() else {
            panic!("not a successful reply: {old}")
        };
        let settings = JobSettings { keep_originals: true, timeout_hours: 24 };
        assert_eq!(serde_json::from_value::<JobSettings>(value).unwrap(), settings);
        // What this main node answers: the same pair, which older linked nodes read.
        assert_eq!(serde_json::to_value(settings).unwrap(), json!([true, 24]));
        // The named shape, should a later main node send it.
        let named = json!({"keepOriginals": false, "timeoutHours": 6});
        let expected = JobSettings { keep_originals: false, timeout_hours: 6 };
        assert_eq!(serde_json::from_value::<JobSettings>(named).unwrap(), expected);
        assert!(serde_json::from_value::<JobSettings>(json!([true])).is_err());
    }

    #[test]
    fn a_health_batch_goes_both_ways_and_older_calls_still_parse() {
        use crate::actors::health_batch::BatchAnswer;
        use std::os::unix::ffi::OsStrExt;
        let odd = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b"/media/caf\xe9.mkv"));
        let call = Call::HealthBatch {
            library_id: 4,
            depth: crate::media::health::Depth::Quick,
            roots: vec!["/media".into()],
            paths: vec!["/media/a.mkv".into(), odd],
        };
        let frame = Frame::Request { id: 9, call: Box::new(call) };
        let text = serde_json::to_value(&frame).unwrap();
        assert_eq!(text["call"]["call"], json!("healthBatch"));
        assert_eq!(text["call"]["libraryId"], json!(4));
        assert_eq!(text["call"]["paths"][0], json!("/media/a.mkv"));
        assert_eq!(serde_json::from_value::<Frame>(text).unwrap(), frame);
        let cancel = Call::CancelHealth { library_id: 4 };
        assert_eq!(serde_json::to_value(&cancel).unwrap(), json!({"call": "cancelHealth", "libraryId": 4}));
        // The calls of older main nodes parse as they did.
        let helper =
            json!({"type": "request", "id": 2, "call": {"call": "startHelper", "jobId": 1, "span": 3, "leaseId": "l"}});
        let expected = Call::StartHelper { job_id: 1, span: 3, lease_id: "l".into(), by_transfer: false };
        assert_eq!(
            serde_json::from_value::<Frame>(helper).unwrap(),
            Frame::Request { id: 2, call: Box::new(expected) }
        );
        // The answer, both ways.
        let health = crate::actors::health_batch::unreadable(crate::media::health::Depth::Quick, "no".into());
        for answer in [BatchAnswer::Busy, BatchAnswer::Cancelled, BatchAnswer::Checked(vec![health])] {
            let value = serde_json::to_value(&answer).unwrap();
            assert_eq!(serde_json::from_value::<BatchAnswer>(value).unwrap(), answer);
        }
        assert_eq!(serde_json::to_value(BatchAnswer::Busy).unwrap(), json!("busy"));
    }
}
