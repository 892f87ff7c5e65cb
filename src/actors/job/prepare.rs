//! The first part of a job's attempt: make sure no interrupted replace is pending, analyse
//! the source (in a child: a decoder crash ends the child, not the node), decide whether
//! to encode, and plan the encode.

use std::path::{Path, PathBuf};

use entities::job;

use super::{join_error, Attempt, Phase, Step};
use crate::actors::lifecycle::EventContext;
use crate::actors::store::JobSettings;
use crate::domain::encoding::{
    profile_for_attempt, rate_control, EncodeSettings, Hardware, RateControl, RateControlMode, RetryProfile,
    TargetCodec,
};
use crate::domain::job::{FailureCode, JobEvent, Stage};
use crate::domain::library_health;
use crate::domain::quality::{self, QualityMode};
use crate::domain::segments::{self, Sessions};
use crate::domain::stream_rules::StreamRules;
use crate::media::contain;
use crate::media::event::PhaseTime;
use crate::media::info::{HdrKind, MediaInfo};
use crate::media::partial;
use crate::media::plan::{
    decide, final_paths, output_extension, Decision, EncodePlan, GrowingSource, QualitySearch, SourceIdentity,
};
use crate::media::replace::{recover, swapped_on_record, Recovered};
use crate::media::stream_plan::{filtered_out, plan_streams, StreamPlan};
use crate::media::worker;
use crate::media::MediaError;
use crate::repo::jobs::JobChange;
use crate::repo::libraries::{paths_of, rules_of};

/// What the encode needs, as prepared.
pub(super) struct Prepared {
    pub job: job::Model,
    pub info: MediaInfo,
    pub plan: EncodePlan,
    pub keep_originals: bool,
    /// The library's `keepModifiedTime`.
    pub keep_modified_time: bool,
    /// The library's folders: the source is checked to be inside them again before the replace.
    pub roots: Vec<PathBuf>,
    pub timeout_hours: u64,
    /// The time of the work done so far (the validation), for the job's phase times.
    pub phases: Vec<PhaseTime>,
}

impl Attempt {
    /// Recovery of an interrupted replace, analysis in a child, the skip decision and the
    /// plan. `None`: the attempt is over (its transition is applied). `copy`: the source as
    /// this node downloaded it (a job taken by transfer, `by_transfer`): analysed and
    /// encoded there, whole on this node (no spans for helpers), with no recovery beside an
    /// original this node does not see and no new identity of it on the job; `growing`
    /// when the copy is still downloading (read as it arrives, issue 39).
    pub(super) async fn prepare(&mut self, copy: Option<&Path>, growing: Option<&GrowingSource>) -> Phase<Prepared> {
        let env = self.env.clone();
        let job = env.store.job(self.job_id).await?;
        let path = crate::repo::jobs::source_path(&job);
        if let Some(copy) = copy {
            return self.analyse_and_plan(job, &path, copy, true, growing).await;
        }

        // Recovery acts on what the partial folder's intent says: not while someone else
        // holds the folder (a stale attempt may be in the middle of its swap).
        let dir = crate::media::layout::partial_dir_for(&path);
        let held = match tokio::task::spawn_blocking(move || partial::lock_if_exists(&dir)).await.map_err(join_error) {
            Ok(Ok(Some(Ok(lock)))) => Some(lock),
            Ok(Ok(Some(Err(partial::Held::Busy)))) => return self.busy().await,
            Ok(Ok(None)) => None,
            Ok(Err(e)) | Err(e) => return self.fail(e).await,
        };
        // A replace interrupted by a crash is finished or undone first, as its own intent
        // says. A replace that had swapped the files completes the job: its output, verified
        // before the swap, is in place; nothing is encoded again.
        let p = path.clone();
        let recovered = tokio::task::spawn_blocking(move || match &held {
            Some(lock) => recover(&p, lock.dir()),
            None => Ok(Recovered::Nothing),
        })
        .await
        .map_err(join_error);
        match recovered {
            Ok(Ok(Recovered::RolledForward(swapped))) => return self.complete_swapped(&path, swapped).await,
            Ok(Ok(Recovered::RolledBack)) => {
                tracing::info!(job_id = job.id, "undid a replace interrupted before its swap")
            }
            Ok(Ok(Recovered::Nothing)) => {
                // The swap recorded on the row (`output_size`, and in `source_inode` the
                // output's inode) by an attempt that then removed its folder, intent and all.
                // The output may be under any container a rule asked for (`final_paths`).
                let on_record = job.output_size.zip(job.source_inode).and_then(|(size, inode)| {
                    let (size, inode) = (u64::try_from(size).ok()?, u64::try_from(inode).ok()?);
                    final_paths(&path, &job.target_codec)
                        .into_iter()
                        .find_map(|target| swapped_on_record(target, size, inode))
                });
                if let Some(swapped) = on_record {
                    return self.complete_swapped(&path, swapped).await;
                }
            }
            Ok(Err(e)) | Err(e) => return self.fail(e).await,
        }
        self.analyse_and_plan(job, &path, &path, false, None).await
    }

    /// Analysis of the source read at `read` (the original at `path`, or this node's copy
    /// of it, `copied`, perhaps still `growing`), the skip decision and the plan.
    async fn analyse_and_plan(
        &mut self,
        job: job::Model,
        path: &Path,
        read: &Path,
        copied: bool,
        growing: Option<&GrowingSource>,
    ) -> Phase<Prepared> {
        let env = self.env.clone();
        let path = path.to_path_buf();
        let Some(SourceContext { settings: JobSettings { keep_originals, timeout_hours }, library, roots }) =
            self.source_context(&job, &path, !copied).await?
        else {
            return Ok(None);
        };
        // What a rescan compares the file with (see `repo::jobs::KnownFile`): the size and
        // modification time of the file analysed, recorded together. A copy's are its own,
        // not the original's: the job keeps the identity the main node recorded, which
        // the health finding is compared with too.
        let identity = if copied {
            job.source_mtime_ns.map(|mtime_ns| SourceIdentity {
                size: u64::try_from(job.source_size).unwrap_or(0),
                mtime_ns,
                inode: job.source_inode.and_then(|i| u64::try_from(i).ok()).unwrap_or(0),
            })
        } else {
            SourceIdentity::of(&path).ok()
        };
        // A first attempt only probes the source: if it is encoded, its encode decodes every
        // frame and fails where the video stops short of its length, as the points would
        // (`condense_media::verify::Points`), without a decode of its own first; if it is
        // left alone, the points are decoded below. A retry decodes them first: a source
        // that failed once should fail before its encode, not after part of it.
        let probe_only = retry_count(&job) == 0;
        let (info, validation) =
            match worker::validate(&env.transcoder, read, growing, probe_only, env.analysis_timeout).await {
                Ok(validated) => validated,
                Err(e) => return self.fail(e).await,
            };
        let analysis = if copied {
            crate::actors::prober::facts_of(&info)
        } else {
            JobChange {
                source_mtime_ns: identity.map(|i| i.mtime_ns),
                source_inode: identity.map(|i| i64::try_from(i.inode).unwrap_or(0)),
                ..crate::actors::prober::facts_of(&info)
            }
        };
        self.update(analysis).await?;
        if let Step::Stop = self.check_commands().await? {
            return Ok(None);
        }

        let target = job.target_codec.clone();
        let skip_reason = match decide(&info, &target, job.forced) {
            Ok(Decision::Skip { reason }) => Some(reason),
            Ok(Decision::Encode) => None,
            Err(e) => return self.fail(e).await,
        };
        // A file the last health check found damaged, unchanged since (issue 38), is left
        // alone unless it is forced or the finding is ignored.
        let skip_reason = match skip_reason {
            Some(reason) => Some(reason),
            None => self.damaged(&job, identity).await,
        };
        // The library's stream rules (issue 37), read at each attempt: a rule changed after
        // the job was queued applies to this attempt. Its filters leave a file alone unless
        // it is forced; a plan the rules cannot carry out (an image subtitle into MP4)
        // leaves it alone with the plan's reason.
        let rules = library.as_ref().map(rules_of).unwrap_or_default();
        let skip_reason = skip_reason.or_else(|| {
            if rules.is_default() || job.forced {
                return None;
            }
            let relative = roots.iter().find_map(|root| path.strip_prefix(root).ok())?;
            filtered_out(&info, &rules, relative)
        });
        let streams = (!rules.is_default()).then(|| plan_streams(&info, &rules, output_extension(&path, &target)));
        let skip_reason = skip_reason.or_else(|| streams.as_ref().and_then(|s| s.refused.clone()));
        let skip = skip_reason.is_some();
        // A file left alone is validated as before: decoded at its points, so a broken one
        // fails rather than being skipped.
        if skip && probe_only {
            if let Err(e) = worker::validate(&env.transcoder, read, growing, false, env.analysis_timeout).await {
                return self.fail(e).await;
            }
        }
        // The rung of the retry ladder this attempt runs, and what it changed, go into the
        // history with the `encoding` event.
        let settings = (!skip).then(|| settings_for(&job, &info, library.as_ref()));
        let rung = settings.as_ref().and_then(|s| s.as_ref().ok()).map(|s| {
            let record = RetryProfile::for_retry_count(retry_count(&job)).record(s);
            serde_json::to_value(&record).unwrap_or_default()
        });
        let ctx = EventContext { detail: with_rules(rung, &rules, streams.as_ref()), ..self.ctx() };
        let patch = JobChange { stage: (!skip).then_some(Stage::Encoding), skip_reason, ..Default::default() };
        let job = self.apply(JobEvent::Analyzed { skip }, patch, ctx).await?.job;
        let Some(settings) = settings else {
            return Ok(None);
        };
        let original = identity.filter(|_| copied);
        let planned = settings.and_then(|settings| self.plan(&job, read, original, &info, library.as_ref(), &settings));
        let mut plan = match planned {
            Ok(plan) => plan,
            Err(e) => return self.fail(e).await,
        };
        plan.growing = growing.cloned();
        if copied {
            // Helpers on other nodes would read the original, which this node's run does
            // not: the whole file is encoded here (issue 39's spans by byte ranges are not
            // built).
            plan.shared_spans = false;
        }
        // A plan that copies every stream into the usual container is today's path: the mux
        // and verification then carry every stream as before rules existed.
        if let Some(streams) = streams.filter(|s| !(s.copies_everything() && s.container == plan.output_extension)) {
            plan.output_extension = streams.container.clone();
            plan.streams = Some(streams);
        }
        let keep_modified_time = library.as_ref().is_some_and(|l| l.keep_modified_time);
        let phases = vec![validation];
        Ok(Some(Prepared { job, info, plan, keep_originals, keep_modified_time, roots, timeout_hours, phases }))
    }

    /// "damaged: …" when the last health check of the source found it damaged or
    /// unreadable (`domain::library_health::skip_reason`). A finding that cannot be read
    /// (a main node from before issue 38) lets the encode go on, as before checks existed.
    async fn damaged(&self, job: &job::Model, identity: Option<SourceIdentity>) -> Option<String> {
        let identity = identity?;
        let last = match self.env.store.last_health(job.id).await {
            Ok(last) => last,
            Err(e) => {
                tracing::debug!(job_id = job.id, error = %e, "the file's last health check could not be read");
                return None;
            }
        };
        let size = i64::try_from(identity.size).unwrap_or(i64::MAX);
        library_health::skip_reason(last.as_ref(), size, identity.mtime_ns, job.forced)
    }

    /// The plan of `job`'s encode, reading the source at `input` (its path, or this node's
    /// copy of it, whose `original` is the file the main node recorded).
    pub(super) fn plan(
        &self,
        job: &job::Model,
        input: &Path,
        original: Option<SourceIdentity>,
        info: &MediaInfo,
        library: Option<&entities::library::Model>,
        settings: &EncodeSettings,
    ) -> Result<EncodePlan, MediaError> {
        let profile = profile_for_attempt(settings, retry_count(job));
        tracing::info!(
            job_id = job.id,
            retry_profile = %profile.retry_profile,
            encoder = %profile.encoder,
            preset = profile.preset.as_deref().unwrap_or(""),
            hardware_decode = profile.hardware_decode,
            cautious = profile.cautious,
            "planned the encode"
        );
        let mut plan = EncodePlan::new(input, info, &profile)?;
        if let Some(original) = original {
            plan.of_original(original);
        }
        plan.segment_seconds = self.env.segment_seconds;
        // A retry runs one session (one decoder from the first frame, cuts by frame count):
        // the conservative path, for a source whose index or seeking misled the first
        // attempt (verification refuses what that would lose; the retry then starts over).
        let one_session = profile.retry_profile.one_session();
        plan.sessions = if one_session {
            Sessions::ONE
        } else {
            let hardware = profile.encoder.profile().hardware != Hardware::Cpu;
            segments::sessions(self.env.parallel_segments, self.env.cores, self.env.max_jobs, hardware)
        };
        // Spans for helpers on other slots, unless PARALLEL_SEGMENTS is off; never on a
        // retry, which is the conservative path.
        // Nor for two passes: each span's second pass reads the statistics this run's first
        // pass wrote for exactly that span (`media::transcode`).
        plan.shared_spans = !one_session && !plan.two_pass && self.env.parallel_segments != segments::Parallelism::Off;
        plan.throttle_ms_per_frame = self.env.throttle_ms_per_frame;
        plan.epoch = self.lease_id.clone();
        if library.is_some_and(|l| l.keep_dolby_vision) && plan.keep_dolby_vision(info) {
            tracing::info!(job_id = job.id, "the output keeps Dolby Vision (profile 8.1)");
        }
        // VMAF mode: the child searches the quality first (from the library's quality), and
        // an encode clearly past the size the library keeps is stopped early.
        if let Some(library) = library.filter(|l| l.quality_mode == QualityMode::Vmaf.as_str()) {
            let max_size_percent = u32::try_from(library.max_size_percent).unwrap_or(quality::MAX_SIZE_PERCENT_DEFAULT);
            plan.search = Some(QualitySearch { target_vmaf: library.target_vmaf, max_size_percent });
            let limit = (max_size_percent + quality::EARLY_ABORT_MARGIN_PERCENT).min(100);
            plan.size_limit = Some(plan.source.size.saturating_mul(u64::from(limit)) / 100);
        }
        Ok(plan)
    }
}

/// The attempt's history entry with the library's stream rules and the plan they gave
/// (fates, notes), when the rules are not the default: which rules ran (issue 37), and what
/// `GET /jobs/{id}/plan` shows for a finished job.
fn with_rules(
    detail: Option<serde_json::Value>,
    rules: &StreamRules,
    plan: Option<&StreamPlan>,
) -> Option<serde_json::Value> {
    let Some(plan) = plan.filter(|_| !rules.is_default()) else { return detail };
    let mut detail = match detail {
        Some(serde_json::Value::Object(map)) => map,
        Some(other) => serde_json::Map::from_iter([("profile".to_string(), other)]),
        None => serde_json::Map::new(),
    };
    detail.insert("streamRules".into(), serde_json::to_value(rules).unwrap_or_default());
    detail.insert("streamPlan".into(), serde_json::to_value(plan).unwrap_or_default());
    Some(serde_json::Value::Object(detail))
}

/// The job's automatic retries so far: which rung of the ladder its attempt runs.
fn retry_count(job: &job::Model) -> u32 {
    u32::try_from(job.retry_count).unwrap_or(0)
}

/// What an attempt reads before it touches a source, a local one and the commit of a linked
/// node's upload alike (`remote`): the settings, the job's library and its roots, the source
/// contained in them.
pub(super) struct SourceContext {
    pub settings: JobSettings,
    pub library: Option<entities::library::Model>,
    pub roots: Vec<PathBuf>,
}

impl Attempt {
    /// The `SourceContext` of `job`, whose source is at `path`; the attempt fails where the
    /// settings cannot be read or (with `contain`) the source is not inside the library. A
    /// node that took the job by transfer does not see the library: the main node contains
    /// the source when it serves it and again when it commits the output.
    pub(super) async fn source_context(&self, job: &job::Model, path: &Path, contain: bool) -> Phase<SourceContext> {
        // Guessing a default here would delete originals a user asked to keep.
        let settings = match self.env.store.job_settings().await {
            Ok(settings) => settings,
            Err(e) => return self.fail(MediaError::misc(format!("the settings could not be read: {e}"))).await,
        };
        let library = match job.library_id {
            Some(id) => Some(self.env.store.library(id).await?),
            None => None,
        };
        // The stored path is the resolved one the scan or the webhook found; a link put on
        // its way since, or a library that no longer holds it, is refused before the source
        // is opened (`media::contain`).
        let roots: Vec<PathBuf> =
            library.as_ref().map(|l| paths_of(l).into_iter().map(PathBuf::from).collect()).unwrap_or_default();
        if contain {
            if let Err(e) = contained(path, &roots).await {
                return self.fail(e).await;
            }
        }
        Ok(Some(SourceContext { settings, library, roots }))
    }
}

/// What the job's library asks for, with what analysis found. A stored encoder, preset or
/// quality that no longer fits falls back to the table's default rather than failing every
/// attempt.
pub(super) fn settings_for(
    job: &job::Model,
    info: &MediaInfo,
    library: Option<&entities::library::Model>,
) -> Result<EncodeSettings, MediaError> {
    let codec: TargetCodec = job.target_codec.parse().map_err(|e| MediaError::misc(format!("{e}")))?;
    let ten_bit = info.video().and_then(|v| v.bit_depth).unwrap_or(8) > 8;
    let mut settings = EncodeSettings::for_library(
        codec,
        library.and_then(|l| l.encoder.parse().ok()),
        library.map(|l| l.preset.as_str()),
        library.map(|l| i64::from(l.quality)),
        ten_bit && info.hdr.kind != HdrKind::Sdr,
    );
    // Two passes as the library stores them, checked again (the API did): a stored pair
    // that no longer holds (another encoder, say) falls back to CRF, as a stored preset
    // that no longer fits falls back to the default.
    if let Some(library) = library {
        let mode = library.rate_control.parse().unwrap_or(RateControlMode::Crf);
        let vmaf = library.quality_mode == QualityMode::Vmaf.as_str();
        let bitrate = library.target_bitrate_kbps.map(i64::from);
        settings.rate = rate_control(mode, bitrate, settings.encoder, vmaf).unwrap_or(RateControl::Crf);
    }
    Ok(settings)
}

/// `media::contain::still_inside` on a blocking thread (the filesystem may be a slow share),
/// as the attempt's failure when it refuses.
pub(super) async fn contained(path: &Path, roots: &[PathBuf]) -> Result<(), MediaError> {
    let (p, r) = (path.to_path_buf(), roots.to_vec());
    match tokio::task::spawn_blocking(move || contain::still_inside(&p, &r)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(MediaError::new(FailureCode::PermissionDenied, e.to_string())),
        Err(e) => Err(join_error(e)),
    }
}
