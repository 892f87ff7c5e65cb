//! The main node's end of a job a linked node encoded without seeing the library (issue
//! 39): once its upload is whole and checked (`actors::cluster::transfer::finish`), the
//! output is verified against the source and put in the original's place here, by the same
//! `Attempt::commit` as a local encode, under the linked node's lease and in its name. What
//! commit needs of `prepare` (the source's analysis, the library's settings and stream
//! rules, the plan) is made again on this node from the source itself.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;

use super::prepare::{settings_for, Prepared, SourceContext};
use super::supervise::Encoded;
use super::{Attempt, NodeEnv, Phase};
use crate::actors::lifecycle::LifecycleError;
use crate::actors::store::JobSettings;
use crate::media::event::{Event, RunStats};
use crate::media::plan::{output_extension, EncodePlan, SourceIdentity};
use crate::media::stream_plan::plan_streams;
use crate::media::transcoder::{ChildEnd, Transcoder};
use crate::media::worker;
use crate::media::MediaError;
use crate::repo::libraries::rules_of;

/// The jobs whose uploaded output this main node is committing. A finish asked again while
/// one runs (the node's answer lost on the way, its client trying again) must start no
/// second commit, and must not find the upload gone (it is `output.<ext>` by then) and tell
/// the node to send it again.
#[derive(Clone, Default)]
pub struct RemoteCommits(Arc<Mutex<HashSet<i32>>>);

/// A job's place in `RemoteCommits`, given back when dropped (the commit ended, or the finish
/// that claimed it was refused).
pub struct Claim {
    commits: RemoteCommits,
    job_id: i32,
}

impl RemoteCommits {
    /// The job's claim, or None while a commit of it runs.
    pub fn claim(&self, job_id: i32) -> Option<Claim> {
        let mut running = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        running.insert(job_id).then(|| Claim { commits: self.clone(), job_id })
    }

    /// Whether a commit of the job runs now (a finish took its upload).
    pub fn running(&self, job_id: i32) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).contains(&job_id)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.commits.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.job_id);
    }
}

/// Verifies the output uploaded for job `job_id` (`output.<extension>` in its partial
/// folder) and replaces the original with it, then completes the job; or fails the attempt
/// with the reason, as a local commit does. `lease` is the linked node's, and the job's
/// events carry `node_name`. `source`: the identity of the source version the output was
/// encoded from (its SHA-256 the node's); the original is replaced only while it is still
/// that version. `run_stats`: the node's CPU and wall time of the encode, in milliseconds,
/// and its phases, when it said.
pub async fn commit_remote(
    env: &NodeEnv,
    job_id: i32,
    lease: String,
    node_name: Option<String>,
    uploaded: Uploaded,
    source: SourceIdentity,
    run_stats: Option<RunStats>,
) -> Result<(), LifecycleError> {
    let mut env = env.clone();
    if let Some(name) = node_name {
        env.node_name = name;
    }
    // No command reaches this attempt: pause and cancel go to the linked node, which holds
    // the job (a cancel after the upload is too late, as it is during a local commit).
    let (_commands, rx) = mpsc::unbounded_channel();
    let attempt = Attempt { env: Arc::new(env), job_id, lease_id: lease, commands: rx, by_transfer: false };
    let extension = match &uploaded {
        Uploaded::Output { extension } | Uploaded::Parts { extension, .. } => extension.clone(),
    };
    let Some(mut prepared) = attempt.prepare_remote(&extension, source).await? else { return Ok(()) };
    // In the order they ran: the node's phases, then this node's validation and mux
    // (`commit` adds its verification and replace).
    let mut run_stats = run_stats.unwrap_or_default();
    run_stats.phases.append(&mut prepared.phases);
    if let Uploaded::Parts { plan, .. } = uploaded {
        let plan = prepared.plan.to_mux(&plan);
        let Some(mut muxed) = attempt.mux(&plan).await? else { return Ok(()) };
        run_stats.phases.append(&mut muxed.phases);
        run_stats.cpu_ms += muxed.cpu_ms;
        prepared.plan = plan;
    }
    let encoded = Encoded { job: prepared.job.clone(), run_stats: Some(run_stats) };
    attempt.commit(prepared, encoded).await
}

/// What a node without the share uploaded of its encode.
pub enum Uploaded {
    /// The output it muxed, `output.<extension>` in the job's partial folder.
    Output { extension: String },
    /// Its segments and planned audio, in the job's partial folder under its manifest (issue
    /// 39, "upload while encoding"), encoded by `plan`: this node muxes the output.
    Parts { extension: String, plan: Box<EncodePlan> },
}

impl Attempt {
    /// Muxes the output from the original and the parts a node uploaded, with a
    /// transcoder child that encodes nothing (`RunScope::Mux`): its figures, or `None` once
    /// the attempt failed with the reason.
    async fn mux(&self, plan: &EncodePlan) -> Phase<RunStats> {
        let mut child = match Transcoder::spawn(&self.env.transcoder, plan).await {
            Ok(child) => child,
            Err(e) => return self.fail(e).await,
        };
        let mut stats = None;
        while let Some(event) = child.events.recv().await {
            if let Event::Done { cpu_ms, wall_ms, phases, alone_ms, .. } = event {
                stats = Some(RunStats { cpu_ms, wall_ms, phases, alone_ms });
            }
        }
        match child.wait().await {
            ChildEnd::Completed => Ok(Some(stats.unwrap_or_default())),
            ChildEnd::Failed(e) => self.fail(e).await,
            other => self.fail(MediaError::misc(format!("the mux of the uploaded parts ended {other:?}"))).await,
        }
    }

    /// What `commit` needs, made from the source on this node: its analysis (in a child),
    /// the library's settings and the plan under the uploaded `extension`, which must be the
    /// one the library's rules give this source.
    async fn prepare_remote(&self, extension: &str, encoded_from: SourceIdentity) -> Phase<Prepared> {
        let env = self.env.clone();
        let job = env.store.job(self.job_id).await?;
        let path = crate::repo::jobs::source_path(&job);
        let Some(SourceContext { settings: JobSettings { keep_originals, timeout_hours }, library, roots }) =
            self.source_context(&job, &path, true).await?
        else {
            return Ok(None);
        };
        let (info, validation) = match worker::validate(&env.transcoder, &path, None, false, env.analysis_timeout).await
        {
            Ok(validated) => validated,
            Err(e) => return self.fail(e).await,
        };
        let mut plan = match settings_for(&job, &info, library.as_ref())
            .and_then(|settings| self.plan(&job, &path, None, &info, library.as_ref(), &settings))
        {
            Ok(plan) => plan,
            Err(e) => return self.fail(e).await,
        };
        // The stream rules as `prepare` applies them: the verification checks the output
        // against the plan they give, and the container is theirs.
        let rules = library.as_ref().map(rules_of).unwrap_or_default();
        let streams =
            (!rules.is_default()).then(|| plan_streams(&info, &rules, output_extension(&path, &job.target_codec)));
        if let Some(streams) = streams.filter(|s| !(s.copies_everything() && s.container == plan.output_extension)) {
            plan.output_extension = streams.container.clone();
            plan.streams = Some(streams);
        }
        // The plan's identity is what the replace checks right before its swap: it must be
        // the version the node encoded, or an output of a file replaced since (a better
        // release, same length) would take the new file's place.
        if plan.source != encoded_from {
            let e =
                MediaError::misc("the source changed since the node's upload was checked; the upload was discarded");
            return self.fail(e).await;
        }
        // The node does not choose the container the original is replaced by.
        if plan.output_extension != extension {
            let e = MediaError::misc(format!(
                "the node uploaded a .{extension} output where this file's output is .{}",
                plan.output_extension
            ));
            return self.fail(e).await;
        }
        let keep_modified_time = library.as_ref().is_some_and(|l| l.keep_modified_time);
        // The node's own validation and encode are its to time; this is the main node's.
        let phases = vec![validation];
        Ok(Some(Prepared { job, info, plan, keep_originals, keep_modified_time, roots, timeout_hours, phases }))
    }
}
