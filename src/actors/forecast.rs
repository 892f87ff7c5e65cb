//! Library forecasts, run in the background on the main node: for each file of a library
//! that is not done yet, a child process probes it (`condense probe`) and, unless it would be
//! skipped, encodes and scores samples of it (`condense crf-search`: the VMAF search in vmaf
//! mode, the library's own CRF alone in crf mode), at the lowest CPU priority, one file at a
//! time; each result is written as it comes (`repo::forecasts`). Nothing is encoded for real
//! and nothing is written beside the files. A cancel kills the child at once.

use std::path::{Path, PathBuf};

use entities::library;
use sea_orm::DatabaseConnection;
use tokio::sync::Notify;

use super::library_runs::LibraryRuns;
use crate::domain::forecast::{nominal_audio_kbps, planned_output_size, ForecastFile, ForecastStatus, PlannedBytes};
use crate::domain::job::JobStatus;
use crate::domain::quality::{self, QualityMode};
use crate::media::info::{MediaInfo, StreamKind};
use crate::media::plan::{decide, output_extension, Decision};
use crate::media::quality::SearchResult;
use crate::media::stream_plan::{filtered_out, plan_streams, Fate, StreamPlan};
use crate::repo::{self, RepoError};

/// The forecasts that run, by library; each with the signal that cancels it.
#[derive(Clone)]
pub struct Forecasts {
    db: DatabaseConnection,
    /// The executable started as the `probe` and `crf-search` children.
    binary: PathBuf,
    running: LibraryRuns,
}

/// What `condense crf-search` prints.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Searched {
    result: SearchResult,
    too_large: bool,
}

/// Jobs in these statuses are forecast: files not encoded yet, nor being encoded. ANALYZING
/// is read too, for the files in the probe after a scan (no node's lease); an attempt's
/// ANALYZING is left out (`forecast_it`).
const FORECAST: &[JobStatus] = &[
    JobStatus::Pending,
    JobStatus::Queued,
    JobStatus::Analyzing,
    JobStatus::Paused,
    JobStatus::Failed,
    JobStatus::Cancelled,
];

/// Whether a job read in a `FORECAST` status is forecast: an attempt (a node's lease) is
/// about to encode it.
fn forecast_it(job: &entities::job::Model) -> bool {
    JobStatus::from(job.status) != JobStatus::Analyzing || job.lease_id.is_none()
}

impl Forecasts {
    pub fn new(db: DatabaseConnection, binary: PathBuf) -> Self {
        Forecasts { db, binary, running: LibraryRuns::default() }
    }

    /// Starts a forecast of `library`; a conflict while one runs.
    pub async fn start(&self, library: &library::Model) -> Result<entities::library_forecast::Model, RepoError> {
        // Every such file: a page of the job list would stop at 500.
        let mut jobs = repo::jobs::of_library_in_statuses(&self.db, library.id, FORECAST).await?;
        jobs.retain(forecast_it);
        let total = u32::try_from(jobs.len()).unwrap_or(u32::MAX);
        let busy = || RepoError::Conflict(format!("a forecast of library {} is running", library.id));
        let (started, cancel) =
            self.running.enter_recorded(library.id, busy, repo::forecasts::start(&self.db, library.id, total)).await?;
        let this = self.clone();
        let library = library.clone();
        actix::spawn(async move {
            let status = this.run(&library, jobs, &cancel).await;
            // Out of the map first: once its end is recorded, a cancel is refused as it
            // should be (a new start meanwhile finds the row still RUNNING and is refused).
            this.running.leave(library.id);
            if let Err(e) = repo::forecasts::finish(&this.db, library.id, status).await {
                tracing::warn!(library = library.id, error = %e, "the forecast's end was not recorded");
            }
        });
        Ok(started)
    }

    /// Cancels the forecast of `library_id`; false when none runs.
    pub fn cancel(&self, library_id: i32) -> bool {
        self.running.cancel(library_id)
    }

    async fn run(&self, library: &library::Model, jobs: Vec<entities::job::Model>, cancel: &Notify) -> ForecastStatus {
        for job in jobs {
            let file = tokio::select! {
                file = self.file(library, &job) => file,
                () = cancel.notified() => return ForecastStatus::Cancelled,
            };
            if let Err(e) = repo::forecasts::record(&self.db, library.id, &file).await {
                tracing::warn!(library = library.id, error = %e, "a file's forecast was not recorded");
            }
        }
        ForecastStatus::Done
    }

    /// One file's forecast; its failure is recorded in it, never the forecast's.
    async fn file(&self, library: &library::Model, job: &entities::job::Model) -> ForecastFile {
        let mut file = ForecastFile {
            job_id: job.id,
            file_name: job.file_name.clone(),
            current_size: job.source_size,
            predicted_size: None,
            predicted_seconds: None,
            quality: None,
            vmaf: None,
            skip_reason: None,
            error: None,
        };
        let source = crate::repo::jobs::source_path(job);
        let info: MediaInfo = match self.child("probe", &source, &[]).await {
            Ok(info) => info,
            Err(e) => {
                file.error = Some(e);
                return file;
            }
        };
        file.current_size = i64::try_from(info.size_bytes).unwrap_or(i64::MAX);
        // As the job's analysis decides it.
        match decide(&info, &library.target_codec, false) {
            Ok(Decision::Skip { reason }) => {
                file.skip_reason = Some(reason);
                return file;
            }
            Ok(Decision::Encode) => {}
            Err(e) => {
                file.error = Some(e.message);
                return file;
            }
        }
        // The library's stream rules, as the job's analysis applies them (issue 37).
        let rules = repo::libraries::rules_of(library);
        let plan = (!rules.is_default())
            .then(|| plan_streams(&info, &rules, output_extension(&source, &library.target_codec)));
        if let Some(plan) = &plan {
            let relative = repo::libraries::paths_of(library)
                .iter()
                .find_map(|root| source.strip_prefix(root).ok().map(Path::to_path_buf));
            let filtered = relative.and_then(|r| filtered_out(&info, &rules, &r));
            if let Some(reason) = filtered.or_else(|| plan.refused.clone()) {
                file.skip_reason = Some(reason);
                return file;
            }
        }
        let vmaf_mode = library.quality_mode == QualityMode::Vmaf.as_str();
        let max_size_percent = if vmaf_mode { library.max_size_percent.to_string() } else { "100".to_string() };
        let target = library.target_vmaf.to_string();
        let start = library.quality.to_string();
        let mut args = vec![
            "--encoder",
            &library.encoder,
            "--start",
            &start,
            "--target",
            &target,
            "--max-size-percent",
            &max_size_percent,
        ];
        if !library.preset.is_empty() {
            args.extend(["--preset", &library.preset]);
        }
        if !vmaf_mode {
            args.push("--fixed");
        }
        let searched: Searched = match self.child("crf-search", &source, &args).await {
            Ok(searched) => searched,
            Err(e) => {
                file.error = Some(e);
                return file;
            }
        };
        let result = &searched.result;
        file.quality = Some(result.quality);
        file.vmaf = Some(result.vmaf.mean);
        if searched.too_large {
            let max = u32::try_from(library.max_size_percent).unwrap_or(100);
            file.skip_reason = Some(if vmaf_mode {
                quality::search_skip_reason(result.percent, max)
            } else {
                let source = u64::try_from(file.current_size).unwrap_or(0);
                quality::not_smaller_reason(result.predicted_size, source, source)
            });
            return file;
        }
        let predicted = match &plan {
            Some(plan) => planned_output_size(info.size_bytes, result.percent, &planned_bytes(&info, plan)),
            None => result.predicted_size,
        };
        file.predicted_size = Some(i64::try_from(predicted).unwrap_or(i64::MAX));
        file.predicted_seconds = Some(result.predicted_seconds);
        file
    }

    /// Runs `binary args`, at the lowest CPU priority, killed if the forecast is dropped;
    /// answers what its JSON says, or the error it printed.
    /// `condense-media SUBCOMMAND FILE ARGS…`: the file as its bytes, whatever they are.
    async fn child<T: serde::de::DeserializeOwned>(
        &self,
        subcommand: &str,
        file: &Path,
        args: &[&str],
    ) -> Result<T, String> {
        let mut command = tokio::process::Command::new(&self.binary);
        command.arg(subcommand).arg(file).args(args).kill_on_drop(true).stdin(std::process::Stdio::null());
        // SAFETY: setpriority is async-signal-safe; it only lowers this child's priority.
        unsafe {
            command.pre_exec(|| {
                libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                Ok(())
            });
        }
        let out = command.output().await.map_err(|e| format!("starting {}: {e}", self.binary.display()))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            return Err(said.trim().trim_start_matches("condense: ").to_string());
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("unreadable answer: {e}"))
    }
}

/// What `plan` does to the bytes of `info`'s streams besides the video: each audio track's
/// bytes at its codec's nominal bitrate (a probe gives no track's own), converted and added
/// tracks at their planned bitrate, over the file's duration; subtitles and the rest count as
/// nothing (a few kilobytes).
fn planned_bytes(info: &MediaInfo, plan: &StreamPlan) -> PlannedBytes {
    let seconds = info.duration_seconds.unwrap_or(0.0).max(0.0);
    let bytes = |kbps: u64| (kbps as f64 * 1000.0 / 8.0 * seconds) as u64;
    let source_bytes = |index: usize| {
        info.streams
            .iter()
            .find(|s| s.index == index && s.kind == StreamKind::Audio)
            .map_or(0, |s| bytes(nominal_audio_kbps(&s.codec, s.channels, s.sample_rate)))
    };
    let audio_indexes = info.streams.iter().filter(|s| s.kind == StreamKind::Audio).map(|s| s.index);
    let other_source_bytes = audio_indexes.map(source_bytes).sum();
    let mut planned = PlannedBytes { other_source_bytes, other_kept_bytes: 0, other_new_bytes: 0, pixel_ratio: 1.0 };
    for stream in &plan.streams {
        match stream.fate {
            Fate::Copy => planned.other_kept_bytes += source_bytes(stream.source_index),
            Fate::Convert | Fate::Add if stream.kind == "audio" => {
                let kbps = stream
                    .bit_rate
                    .map(|b| b / 1000)
                    .unwrap_or_else(|| nominal_audio_kbps(&stream.codec, stream.channels, None));
                planned.other_new_bytes += bytes(kbps);
            }
            Fate::Convert | Fate::Add | Fate::Encode | Fate::Drop => {}
        }
    }
    let source_pixels = info.video().and_then(|v| Some(f64::from(v.width?) * f64::from(v.height?)));
    if let (Some(size), Some(pixels)) = (plan.video_size, source_pixels.filter(|p| *p > 0.0)) {
        planned.pixel_ratio = f64::from(size.width) * f64::from(size.height) / pixels;
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::stream_rules::{AudioCodec, StreamRules};

    /// 1080p video, English DTS 5.1 and French AAC stereo, 10 s.
    fn film() -> MediaInfo {
        let stream = |index: usize, kind: &str, codec: &str, extra: serde_json::Value| {
            let mut s = serde_json::json!({"index": index, "kind": kind, "codec": codec, "attachedPicture": false});
            s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            s
        };
        serde_json::from_value(serde_json::json!({
            "container": "matroska,webm", "durationSeconds": 10.0, "sizeBytes": 20_000_000, "chapters": 0,
            "hdr": {"kind": "SDR", "hdr10Plus": false},
            "streams": [
                stream(0, "video", "h264", serde_json::json!({"width": 1920, "height": 1080})),
                stream(1, "audio", "dts", serde_json::json!({"channels": 6, "language": "eng"})),
                stream(2, "audio", "aac", serde_json::json!({"channels": 2, "language": "fra"})),
            ],
        }))
        .unwrap()
    }

    #[test]
    fn the_plan_drops_converts_and_scales_in_the_forecasts_bytes() {
        let rules = StreamRules {
            audio_languages: vec!["eng".into()],
            audio_codec: AudioCodec::Aac,
            max_height: Some(720),
            ..StreamRules::default()
        };
        let plan = plan_streams(&film(), &rules, "mkv");
        let planned = planned_bytes(&film(), &plan);
        // DTS 5.1 at 1509 kb/s and AAC stereo at 128 kb/s over 10 s.
        assert_eq!(planned.other_source_bytes, 1_886_250 + 160_000);
        // The French track dropped, the DTS one converted: nothing copied as it was.
        assert_eq!(planned.other_kept_bytes, 0);
        // AAC 5.1 at 6 x 128 kb/s over 10 s.
        assert_eq!(planned.other_new_bytes, 960_000);
        assert!((planned.pixel_ratio - 4.0 / 9.0).abs() < 1e-9, "{}", planned.pixel_ratio);
        // Without rules: every audio track copied, the size kept.
        let plan = plan_streams(&film(), &StreamRules::default(), "mkv");
        let planned = planned_bytes(&film(), &plan);
        assert_eq!((planned.other_kept_bytes, planned.other_new_bytes), (planned.other_source_bytes, 0));
        assert_eq!(planned.pixel_ratio, 1.0);
    }
}
