//! The transcoder seen from the node: it runs in a child process (`condense-media transcode`,
//! see `worker::binary`; its side is the `condense-media` crate's `child`), so a crash in a
//! decoder or encoder fails one job, never the node. The plan arrives on stdin;
//! events leave as JSON lines on stdout; FFmpeg's log goes to stderr, whose last lines
//! explain a failure. SIGTERM asks for a graceful stop (the segment in progress is finished
//! and kept). The child dies with its parent (PR_SET_PDEATHSIG), so no orphaned encoder
//! keeps writing after a node crash.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::plan::EncodePlan;
use super::MediaError;
use crate::domain::job::FailureCode;

/// Exit status of a child that stopped on request with its partial output kept.
pub const EXIT_PAUSED: u8 = 3;
/// Exit status of a child that found the partial output locked by another transcoder and
/// touched nothing.
pub const EXIT_BUSY: u8 = 4;
/// Exit status of a helper that found nothing to help with.
pub const EXIT_NOTHING: u8 = 5;
/// Exit status of a transcoder that stopped early: its output would not be smaller.
pub const EXIT_NOT_SMALLER: u8 = 6;
const STDERR_LINES_KEPT: usize = 20;

/// What a helper child is asked (on stdin of `condense-media helper`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelperRequest {
    #[serde(with = "crate::domain::path_bytes::lossless")]
    pub partial_dir: PathBuf,
    /// The planned span this helper was given (its row's lease, `repo::segments`).
    pub span: u32,
    /// The encoder threads this slot may use (0: the encoder's default).
    pub threads: u32,
    /// A node without the share (issue 39): the main node claimed the span for it and said
    /// what is left of it; `partial_dir` is then this node's own folder in WORK_DIR, holding
    /// the plan (its input the node's copy of the source), where the segments and the record
    /// are written for the upload. `None`: the job's partial folder on the share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<GivenSpan>,
}

/// What is left of a span the main node claimed for a node without the share
/// (`media::span_transfer`), as the job's manifest has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GivenSpan {
    pub piece: crate::domain::segments::Span,
    /// The run's planned cuts, which number the spans.
    pub boundaries: Vec<i64>,
    /// The first segment number of the span free in the job's partial folder: an earlier
    /// helper's part of the span may hold the ones before.
    pub first_free: u32,
}

/// How a transcoder child ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildEnd {
    Completed,
    Paused,
    /// Another transcoder holds the partial output: nothing was done.
    Busy,
    /// A helper found nothing to help with.
    Nothing,
    /// Stopped early: the output would not be smaller (its `Event::NotSmaller` says how big).
    NotSmaller,
    Failed(MediaError),
}

/// A running transcoder child, seen from the node.
pub struct Transcoder {
    child: Child,
    pub events: mpsc::UnboundedReceiver<Event>,
    last_error: Arc<Mutex<Option<MediaError>>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Its address-space limit, named when it runs out of memory.
    memory: u64,
}

impl Transcoder {
    /// Starts `binary transcode` with the plan on its stdin.
    pub async fn spawn(binary: &Path, plan: &EncodePlan) -> Result<Transcoder, MediaError> {
        let body = serde_json::to_vec(plan).map_err(|e| MediaError::misc(format!("plan: {e}")))?;
        let memory = super::worker::address_space(
            plan.frame_pixels,
            plan.sessions.sessions,
            plan.encoder.is_hardware() || plan.hardware_decode,
        );
        Self::start(binary, "transcode", body, memory).await
    }

    /// Starts `binary helper`, a helper on one span of a running job (see `media::helper`).
    pub async fn spawn_helper(binary: &Path, request: &HelperRequest) -> Result<Transcoder, MediaError> {
        let body = serde_json::to_vec(request).map_err(|e| MediaError::misc(format!("request: {e}")))?;
        // The helper reads the plan from the partial folder, and may encode on a GPU: no
        // default limit, a configured one.
        Self::start(binary, "helper", body, super::worker::address_space(None, 1, true)).await
    }

    async fn start(binary: &Path, subcommand: &str, body: Vec<u8>, memory: u64) -> Result<Transcoder, MediaError> {
        let mut cmd = super::worker::child_command(binary, subcommand, memory);
        cmd.env("SVT_LOG", "1");
        let mut child = cmd.spawn().map_err(|e| MediaError::from_io("starting the transcoder", &e))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&body).await.map_err(|e| MediaError::from_io("sending the plan", &e))?;
            drop(stdin);
        }
        let (tx, events) = mpsc::unbounded_channel();
        let last_error = Arc::new(Mutex::new(None));
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stdout) = child.stdout.take() {
            let last_error = last_error.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    match serde_json::from_str::<Event>(&line) {
                        Ok(Event::Error { code, message }) => {
                            if let Ok(mut slot) = last_error.lock() {
                                *slot = Some(MediaError::new(code, message.clone()));
                            }
                            let _ = tx.send(Event::Error { code, message });
                        }
                        Ok(event) => {
                            let _ = tx.send(event);
                        }
                        Err(_) => tracing::debug!(line, "transcoder said"),
                    }
                }
            });
        }
        if let Some(stderr) = child.stderr.take() {
            let tail = stderr_tail.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(mut t) = tail.lock() {
                        if t.len() == STDERR_LINES_KEPT {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            });
        }
        Ok(Transcoder { child, events, last_error, stderr_tail, memory })
    }

    /// Asks for a graceful stop: the segment in progress is finished and kept.
    pub fn pause(&self) {
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }

    /// Stops at once (cancel, timeout).
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Waits for a child asked to stop; one that has not exited within `bound` (it ignores
    /// SIGTERM, or hangs) is killed, so nothing outlives the stop.
    pub async fn wait_within(&mut self, bound: std::time::Duration) -> ChildEnd {
        match tokio::time::timeout(bound, self.child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                tracing::warn!(pid = ?self.child.id(), ?bound, "the transcoder did not stop when asked; killing it");
                let _ = self.child.kill().await;
            }
        }
        self.wait().await
    }

    /// The last lines the transcoder wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default()
    }

    /// Waits for the child to end and says how.
    pub async fn wait(&mut self) -> ChildEnd {
        let status = match self.child.wait().await {
            Ok(s) => s,
            Err(e) => return ChildEnd::Failed(MediaError::from_io("waiting for the transcoder", &e)),
        };
        // Let the readers take the last lines.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let reported = self.last_error.lock().ok().and_then(|e| e.clone());
        match classify(
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
            reported,
            &self.stderr_tail(),
        ) {
            ChildEnd::Failed(e) => ChildEnd::Failed(e.out_of_memory_in(self.memory)),
            other => other,
        }
    }
}

/// Turns an exit status into a job outcome with a specific reason.
pub fn classify(code: Option<i32>, signal: Option<i32>, reported: Option<MediaError>, stderr_tail: &str) -> ChildEnd {
    match (code, signal) {
        (Some(0), _) => ChildEnd::Completed,
        (Some(c), _) if c == i32::from(EXIT_PAUSED) => ChildEnd::Paused,
        (Some(c), _) if c == i32::from(EXIT_BUSY) => ChildEnd::Busy,
        (Some(c), _) if c == i32::from(EXIT_NOTHING) => ChildEnd::Nothing,
        (Some(c), _) if c == i32::from(EXIT_NOT_SMALLER) => ChildEnd::NotSmaller,
        (Some(_), _) if reported.is_some() => ChildEnd::Failed(reported.unwrap_or_else(|| MediaError::misc("unknown"))),
        (_, Some(sig)) => ChildEnd::Failed(MediaError::new(
            FailureCode::TranscoderCrashed,
            format!("the transcoder was killed by signal {sig}{}", tail_suffix(stderr_tail)),
        )),
        (code, None) => ChildEnd::Failed(MediaError::new(
            FailureCode::TranscoderCrashed,
            format!("the transcoder exited with status {}{}", code.unwrap_or(-1), tail_suffix(stderr_tail)),
        )),
    }
}

fn tail_suffix(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", tail.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_map_to_outcomes() {
        assert_eq!(classify(Some(0), None, None, ""), ChildEnd::Completed);
        assert_eq!(classify(Some(3), None, None, ""), ChildEnd::Paused);
        assert_eq!(classify(Some(4), None, None, ""), ChildEnd::Busy);
        assert_eq!(classify(Some(5), None, None, ""), ChildEnd::Nothing);
        let reported = MediaError::new(FailureCode::InsufficientDiskSpace, "full");
        assert_eq!(classify(Some(1), None, Some(reported.clone()), ""), ChildEnd::Failed(reported));
        match classify(None, Some(11), None, "x265 [error]: boom") {
            ChildEnd::Failed(e) => {
                assert_eq!(e.code, FailureCode::TranscoderCrashed);
                assert!(e.message.contains("signal 11") && e.message.contains("boom"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        match classify(Some(101), None, None, "") {
            ChildEnd::Failed(e) => assert_eq!(e.code, FailureCode::TranscoderCrashed),
            other => panic!("{other:?}"),
        }
    }
}
