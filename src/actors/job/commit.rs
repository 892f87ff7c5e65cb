//! The third part of a job's attempt: verification of the output (in a child) and the
//! replace of the original, then the completion. A replace that a crash interrupted after
//! its swap is completed here too.

use std::path::Path;

use super::prepare::Prepared;
use super::supervise::Encoded;
use super::{join_error, Attempt, Ended};
use crate::actors::lifecycle::{EventContext, LifecycleError};
use crate::domain::job::{JobEvent, Stage};
use crate::domain::path_bytes::readable;
use crate::media::event::{thread_cpu_time_ms, PhaseTime};
use crate::media::partial::{self, remove_partial, PinnedOutput};
use crate::media::plan::{final_path_with, SourceIdentity};
use crate::media::replace::{replace, Replace, Swapped};
use crate::media::worker;
use crate::media::MediaError;
use crate::repo::jobs::JobChange;

impl Attempt {
    /// Verifies the output and puts it in the original's place, under the partial folder's
    /// lock from the first check to the last, then completes the job.
    pub(super) async fn commit(&self, prepared: Prepared, encoded: Encoded) -> Result<(), LifecycleError> {
        let Prepared { info, plan, keep_originals, keep_modified_time, roots, mut phases, .. } = prepared;
        let Encoded { mut job, run_stats } = encoded;
        let env = self.env.clone();
        job.stage = Some(Stage::Transferring.into());
        self.update(JobChange { stage: Some(Stage::Transferring), ..Default::default() }).await?;
        env.store.publish_progress(&job);

        // The lock is held from verification through the replace, and the output is
        // pinned (held open, its identity compared before the swap): the file renamed over
        // the original is the file verified, and nobody writes the folder meanwhile. The
        // folder is reached through the lock's handle, never by its name again.
        let (dir, output_name) = (plan.partial_dir.clone(), plan.output_file_name());
        let pin = output_name.clone();
        let held = tokio::task::spawn_blocking(move || -> Result<Option<_>, MediaError> {
            let Ok(lock) = partial::lock(&dir)? else { return Ok(None) };
            let pinned = PinnedOutput::open(&lock.dir().join(&pin))?;
            Ok(Some((lock, pinned)))
        })
        .await
        .map_err(join_error);
        let (mut lock, pinned) = match held {
            Ok(Ok(Some(held))) => held,
            Ok(Ok(None)) => return self.busy().await,
            Ok(Err(e)) | Err(e) => return self.fail(e).await,
        };
        let (output, output_for_child) = (lock.dir().join(&output_name), lock.dir_for_children().join(&output_name));
        let (verified, verification) = match worker::verify_output(
            &env.transcoder,
            &output_for_child,
            &plan.input,
            &info,
            &plan.target_codec,
            plan.streams.as_ref(),
            env.analysis_timeout,
        )
        .await
        {
            Ok(v) => v,
            Err(e) => return self.fail_holding(e, lock).await,
        };
        if let Err(e) = pinned.check() {
            return self.fail_holding(e, lock).await;
        }
        let run_stats = run_stats.unwrap_or_default();
        let (cpu, wall, alone_ms) = (run_stats.cpu_ms, run_stats.wall_ms, run_stats.alone_ms);
        phases.extend(run_stats.phases);
        phases.push(verification);
        let source = crate::repo::jobs::source_path(&job);
        let mut set = JobChange {
            encoder: Some(plan.encoder.as_str().to_string()),
            cpu_time_ms: Some(job.cpu_time_ms.unwrap_or(0) + i64::try_from(cpu).unwrap_or(0)),
            wall_time_ms: Some(job.wall_time_ms.unwrap_or(0) + i64::try_from(wall).unwrap_or(0)),
            ..Default::default()
        };
        let mut detail = serde_json::json!({"outputSize": verified.size_bytes});
        if verified.size_bytes >= info.size_bytes {
            // Nothing saved: the original stays, the output goes.
            set.output_size = Some(i64::try_from(info.size_bytes).unwrap_or(i64::MAX));
            detail = serde_json::json!({"keptOriginal": true, "reason": "the encoded file was not smaller"});
        } else {
            // Asked of the store while the lock is held; the replace checks the answer
            // right before the swap (a blocking thread cannot ask the store itself).
            let mine = self.lease_is_mine().await;
            if !mine {
                // The folder is the new owner's now: released, not removed (the
                // transition, refused without the lease, removes nothing either).
                drop(lock);
                let e = MediaError::misc("this node no longer holds the job's lease; the original was left as it is");
                return self.fail(e).await;
            }
            // Checked again on the resolved path right before the replace.
            if let Err(e) = super::prepare::contained(&source, &roots).await {
                drop(lock);
                return self.fail(e).await;
            }
            // Under the plan's extension: a library's `container` rule may change it.
            let target = final_path_with(&source, &plan.output_extension);
            let (s, o, t, identity) = (source.clone(), output.clone(), target.clone(), plan.source);
            let replaced = tokio::task::spawn_blocking(move || {
                let (started, cpu) = (std::time::Instant::now(), thread_cpu_time_ms());
                let mut steps = Vec::new();
                pinned.check()?;
                let r = Replace {
                    source: &s,
                    identity,
                    output: &o,
                    final_path: &t,
                    keep_original: keep_originals,
                    keep_modified_time,
                };
                replace(&r, &|| mine && pinned.check().is_ok(), &mut |step| steps.push(step.name()))?;
                let timed = PhaseTime::since("replace", started, thread_cpu_time_ms().saturating_sub(cpu));
                Ok::<_, MediaError>((steps, lock, timed))
            })
            .await
            .map_err(join_error);
            let (steps, held, timed) = match replaced {
                Ok(Ok(done)) => done,
                Ok(Err(e)) | Err(e) => return self.fail(e).await,
            };
            lock = held;
            phases.push(timed);
            for step in steps {
                env.store.record_event(job.id, &self.lease_id, step, self.node(), None).await?;
            }
            let identity = SourceIdentity::of(&target).ok();
            set.output_size = Some(i64::try_from(verified.size_bytes).unwrap_or(i64::MAX));
            set.source_mtime_ns = identity.map(|i| i.mtime_ns);
            set.source_inode = identity.map(|i| i64::try_from(i.inode).unwrap_or(0));
            if target != source {
                set.file_name = target.file_name().map(|n| readable(n).into_owned());
                set.file_path = Some(target.clone());
            }
        }
        // Where the job's time went, by the service's own clocks (docs/ARCHITECTURE.md,
        // "Phase times"); only what this node saw of a job encoded elsewhere.
        if let Some(fields) = detail.as_object_mut() {
            fields.insert("phases".into(), serde_json::to_value(&phases).unwrap_or_default());
            fields.insert("aloneMs".into(), alone_ms.into());
        }
        let ctx = EventContext { node: self.node(), detail: Some(detail), failure_detail: None };
        if set.source_inode.is_some() {
            // The swap is on the job's row before its folder (and the intent in it) goes: a
            // crash between the removal and the completion completes the job from the row
            // (see `swapped_on_record`) instead of taking the output for a new source. The
            // path stays the source's until the completion, so the folder is found by it.
            let swapped = JobChange { file_path: None, file_name: None, ..set.clone() };
            self.update(swapped).await?;
        }
        // The folder goes before the completion is recorded, under the lock held since
        // verification, so that a COMPLETED job never leaves a partial output behind.
        match tokio::task::spawn_blocking(move || lock.remove()).await.map_err(join_error) {
            Ok(Ok(())) => {}
            Ok(Err(e)) | Err(e) => tracing::warn!(job_id = job.id, error = %e, "could not remove the partial output"),
        }
        self.apply(JobEvent::Complete, set, ctx).await?;
        Ok(())
    }

    /// Completes a job whose replace swapped the files before a crash (see `recover`).
    pub(super) async fn complete_swapped<T: Ended>(
        &self,
        source: &Path,
        swapped: Swapped,
    ) -> Result<T, LifecycleError> {
        tracing::info!(job_id = self.job_id, "the replace had swapped the files before a restart; completing the job");
        let stage = JobChange { stage: Some(Stage::Transferring), ..Default::default() };
        self.apply(JobEvent::Analyzed { skip: false }, stage, self.ctx()).await?;
        let identity = SourceIdentity::of(&swapped.final_path).ok();
        let mut set = JobChange {
            output_size: Some(i64::try_from(swapped.output_size).unwrap_or(i64::MAX)),
            source_mtime_ns: identity.map(|i| i.mtime_ns),
            source_inode: identity.map(|i| i64::try_from(i.inode).unwrap_or(0)),
            ..Default::default()
        };
        if swapped.final_path != source {
            set.file_path = Some(swapped.final_path.clone());
            set.file_name = swapped.final_path.file_name().map(|n| readable(n).into_owned());
        }
        let detail = serde_json::json!({"outputSize": swapped.output_size, "rolledForward": true});
        let ctx = EventContext { node: self.node(), detail: Some(detail), failure_detail: None };
        // As in `commit`: the swap on the row, then the folder, then the completion, so that a
        // COMPLETED job never leaves a partial output behind (the fault suite's kill at the
        // swap saw one, once in about 60 runs, when the node was stopped right after the
        // completion), and a crash in between completes the job from the row.
        if set.source_inode.is_some() {
            self.update(JobChange { file_path: None, file_name: None, ..set.clone() }).await?;
        }
        let dir = crate::media::layout::partial_dir_for(source);
        match tokio::task::spawn_blocking(move || remove_partial(&dir)).await.map_err(join_error) {
            Ok(Ok(())) => {}
            Ok(Err(e)) | Err(e) => {
                tracing::warn!(job_id = self.job_id, error = %e, "could not remove the partial output")
            }
        }
        self.apply(JobEvent::Complete, set, ctx).await?;
        Ok(T::ended())
    }
}
