//! What a linked node keeps in WORK_DIR across a stop or a kill (issue 39): the folder of a
//! job it took by transfer (`WORK_DIR/<job id>/`: the copy of the source, the partial output
//! beside it) stays while the job may come back to it, so that it continues from the copy
//! and the finished segments instead of downloading and encoding the whole again. After
//! each registration with the main node (and every `SWEEP_EVERY` while linked) the node
//! asks the main node about each job folder over its link (`protocol::Call::Job`; every
//! `SPANS_SWEEP_EVERY` while a folder of a job's spans is there) and
//! removes those of jobs that ended, that no longer exist, that were not written for
//! `domain::transfer::KEPT_FOR`, or that it could not ask about within `ASK_WITHIN`
//! (`domain::transfer::keeps_job_dir`); a node that cannot register within that bound
//! removes them all. Only names that are job ids, through directory handles that follow
//! no link (`actors::transfer::job_dirs`); the removal itself is the `NodeSupervisor`'s
//! (`DropJobDir`), which never removes the folder of a job running there.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use actix::Addr;

use super::agent::{Agent, AskMain, Registrations};
use super::node::{DropJobDir, NodeSupervisor};
use super::protocol::Call;
use crate::domain::job::JobStatus;
use crate::domain::transfer::{keeps_job_dir, Asked, ASK_WITHIN, KEPT_FOR};

/// How often a linked node looks at its kept job folders again between registrations: a
/// job that ended on another node meanwhile frees its folder here within this time (issue
/// 39: nothing is left in WORK_DIR once a job ends). A look is one call over the link per
/// kept folder, and there are few.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// How often instead while WORK_DIR holds the folder of a job's spans
/// (`job::span_by_transfer`): a copy of a source made only for the spans of a running job
/// is worth nothing once the job ended, which is mostly moments after this node's last
/// span of it.
const SPANS_SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Runs for the node's life: a sweep of WORK_DIR's job folders after each registration and
/// every `SWEEP_EVERY`, or once without asking when no registration came within
/// `ASK_WITHIN` of the start.
pub async fn keep_work_dir(agent: Addr<Agent>, node: Addr<NodeSupervisor>, work_dir: PathBuf) {
    let started = Instant::now();
    let (mut swept, mut last, mut gave_up) = (0, Instant::now(), false);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let Ok(registrations) = agent.send(Registrations).await else { return };
        let due = registrations > 0 && last.elapsed() >= SWEEP_EVERY;
        // Between those, a quiet look while a copy made for a job's spans is kept.
        let quick = registrations > 0 && last.elapsed() >= SPANS_SWEEP_EVERY && spans_kept(&work_dir).await;
        if registrations > swept || due || quick {
            let loud = registrations > swept || due;
            swept = registrations;
            sweep(&agent, &node, &work_dir, true, loud).await;
            last = Instant::now();
        } else if registrations == 0 && !gave_up && started.elapsed() >= ASK_WITHIN {
            gave_up = true;
            tracing::warn!("the main node could not be reached: the job folders in WORK_DIR are removed");
            sweep(&agent, &node, &work_dir, false, true).await;
        }
    }
}

/// Whether WORK_DIR holds the folder of a job's spans.
async fn spans_kept(work_dir: &std::path::Path) -> bool {
    let w = work_dir.to_path_buf();
    tokio::task::spawn_blocking(move || crate::actors::transfer::has_spans_dirs(&w)).await.unwrap_or(false)
}

/// One look at every job folder in WORK_DIR (`ask`: asking the main node about each;
/// `loud`: saying what it keeps, not only what it removes).
async fn sweep(agent: &Addr<Agent>, node: &Addr<NodeSupervisor>, work_dir: &std::path::Path, ask: bool, loud: bool) {
    let deadline = Instant::now() + ASK_WITHIN;
    let w = work_dir.to_path_buf();
    let dirs = match tokio::task::spawn_blocking(move || crate::actors::transfer::job_dirs(&w)).await {
        Ok(Ok(dirs)) => dirs,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the job folders in WORK_DIR could not be read");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "the job folders in WORK_DIR could not be read");
            return;
        }
    };
    let (mut kept, mut removed) = (0, 0);
    for (job_id, idle) in dirs {
        // Past the bound nothing is asked: the folder goes whatever the job's status.
        let asked = if ask && idle <= KEPT_FOR { ask_about(agent, job_id, deadline).await } else { Asked::Unanswered };
        if keeps_job_dir(asked, idle) {
            if loud {
                tracing::info!(job_id, ?asked, "keeping the job's folder in WORK_DIR: the job may come back here");
            }
            kept += 1;
        } else if node.send(DropJobDir { job_id }).await.unwrap_or(false) {
            tracing::info!(job_id, ?asked, idle_s = idle.as_secs(), "removed the job's folder from WORK_DIR");
            removed += 1;
        }
    }
    if removed > 0 || (loud && kept > 0) {
        tracing::info!(kept, removed, "looked at the job folders in WORK_DIR");
    }
}

/// What the main node says of job `job_id`, asked again each second while the link is
/// down, until `deadline`.
async fn ask_about(agent: &Addr<Agent>, job_id: i32, deadline: Instant) -> Asked {
    loop {
        match agent.send(AskMain(Call::Job { id: job_id })).await {
            Ok(Ok(Ok(job))) => match serde_json::from_value::<entities::job::Model>(job) {
                Ok(job) => return Asked::Status(JobStatus::from(job.status)),
                Err(e) => tracing::debug!(job_id, error = %e, "the main node's answer about the job is unreadable"),
            },
            // The main node's store answers a missing row so (`repo::jobs::get`).
            Ok(Ok(Err(refused))) if refused == format!("job {job_id} not found") => return Asked::NoSuchJob,
            Ok(Ok(Err(refused))) => tracing::debug!(job_id, %refused, "the main node could not say about the job"),
            Ok(Err(e)) => tracing::debug!(job_id, error = %e, "the main node could not be asked about the job"),
            Err(_) => return Asked::Unanswered,
        }
        if Instant::now() >= deadline {
            return Asked::Unanswered;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
