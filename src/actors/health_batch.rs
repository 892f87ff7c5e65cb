//! One batch of a library health check (issue 38) as a node runs it, the main node's own or
//! a linked node's: the messages a health run sends a linked node's link (`OfferChecks`,
//! `CheckOnNode`, `CancelOnNode`), and the check of the paths a linked node is given (`check_told`), which
//! contains each path again against the library roots the node was told before it opens
//! anything. The run itself is `actors::health`; the wire call is
//! `protocol::Call::HealthBatch`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::Message;
use serde::{Deserialize, Serialize};

use crate::domain::library_health::CheckOffer;
use crate::media::contain;
use crate::media::health::{Depth, FileHealth, Verdict};
use crate::media::worker;

/// Asks a linked node's link what it offers a health run of a library under `roots`: its
/// name and its slots (`domain::library_health::deal`); `None` from a node that takes no
/// checks (one older than them, or not registered yet).
#[derive(Message)]
#[rtype(result = "Option<(String, CheckOffer)>")]
pub struct OfferChecks {
    pub roots: Vec<String>,
}

/// Gives a linked node one batch: `paths` of library `library_id` (whole paths, as the main
/// node stores them, under `roots`) checked at `depth` on one idle slot. Answers one result
/// per path, in order.
#[derive(Message)]
#[rtype(result = "Result<Vec<FileHealth>, NotTaken>")]
pub struct CheckOnNode {
    pub library_id: i32,
    pub depth: Depth,
    pub roots: Vec<String>,
    pub paths: Vec<PathBuf>,
}

/// Tells a linked node's link that the run of `library_id` was cancelled: the node stops the
/// batches of that library it checks (their children killed), so their slots come back at
/// once.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CancelOnNode {
    pub library_id: i32,
}

/// Why a linked node checked none of a batch: the batch goes back to its run's queue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotTaken {
    /// No idle slot now (a job took it first): another node, or this one later.
    #[error("no idle job slot")]
    Busy,
    /// The node refused the call or answered nonsense (an older node): the run gives it no
    /// more batches.
    #[error("the node refused the health check: {0}")]
    Refused(String),
    /// The link closed before the answer.
    #[error("the link closed mid-batch: {0}")]
    Lost(String),
}

/// A linked node's answer to `Call::HealthBatch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BatchAnswer {
    /// No idle slot: nothing was checked.
    Busy,
    /// One result per path, in order.
    Checked(Vec<FileHealth>),
    /// The run was cancelled (`Call::CancelHealth`) while the node checked the batch.
    Cancelled,
}

/// A file a check could not read, or refused to: unreadable, with the reason.
pub fn unreadable(depth: Depth, message: String) -> FileHealth {
    FileHealth {
        depth,
        verdict: Verdict::Unreadable,
        first_error_seconds: None,
        message: Some(message),
        error_count: 1,
        streams: Vec::new(),
    }
}

/// Checks `paths` in this node's `condense-media` children (`binary`, validation's time
/// limits from `base_limit`), as `actors::health` checks a batch of its own: a thorough
/// check or a lone file in a child of its own, a quick batch in one child. Each path must be
/// a file inside one of `roots` that is also among `told` (the library paths the main node
/// told this node): a call cannot widen what a node reads. A path outside them (`..`, a
/// link out of the library, a file gone) is not opened: its result is unreadable with the
/// reason (`media::contain`). One result per path, in order.
pub async fn check_told(
    binary: &Path,
    base_limit: Duration,
    told: &[String],
    roots: &[String],
    paths: &[PathBuf],
    depth: Depth,
) -> Vec<FileHealth> {
    let allowed: Vec<PathBuf> = roots.iter().filter(|r| told.contains(r)).map(PathBuf::from).collect();
    let asked = paths.to_vec();
    let contained = tokio::task::spawn_blocking(move || {
        asked.iter().map(|p| contain::still_inside(p, &allowed).map_err(|e| e.to_string())).collect::<Vec<_>>()
    })
    .await
    .unwrap_or_else(|e| vec![Err(format!("the containment check failed: {e}")); paths.len()]);
    let mut results: Vec<Option<FileHealth>> = Vec::with_capacity(paths.len());
    let mut inside: Vec<(usize, PathBuf)> = Vec::new();
    for (i, (path, contained)) in paths.iter().zip(contained).enumerate() {
        match contained {
            Ok(()) => {
                inside.push((i, path.clone()));
                results.push(None);
            }
            Err(why) => results.push(Some(unreadable(depth, why))),
        }
    }
    match (depth, inside.as_slice()) {
        (_, []) => {}
        (Depth::Thorough, _) | (_, [_]) => {
            for (i, path) in &inside {
                let health = worker::check_health(binary, path, depth, base_limit)
                    .await
                    .unwrap_or_else(|e| unreadable(depth, e.to_string()));
                if let Some(slot) = results.get_mut(*i) {
                    *slot = Some(health);
                }
            }
        }
        (Depth::Quick, _) => {
            let batch: Vec<PathBuf> = inside.iter().map(|(_, p)| p.clone()).collect();
            let mut found: Vec<(usize, FileHealth)> = Vec::with_capacity(batch.len());
            let mut each = |k: usize, result: Result<FileHealth, crate::media::MediaError>| {
                found.push((k, result.unwrap_or_else(|e| unreadable(depth, e.to_string()))));
            };
            worker::health_batch(binary, &batch, depth, base_limit, &mut each).await;
            for (k, health) in found {
                if let Some(slot) = inside.get(k).and_then(|(i, _)| results.get_mut(*i)) {
                    *slot = Some(health);
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| unreadable(depth, "the health check gave no result for the file".into())))
        .collect()
}
