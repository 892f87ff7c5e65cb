//! Analysis and verification run in a child process (`condense-media media`), as the encode
//! does: a decoder that crashes or hangs on a hostile file ends that child, never the node
//! that holds the database and the secrets. The node sends one request on the child's stdin,
//! reads JSON answers from its stdout (one; one per file for a batch probe), and kills it
//! when it runs past its time limit. FFmpeg's log goes to stderr, whose last lines explain a
//! crash. The node's own binary does not link FFmpeg at all (see `binary`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::event::PhaseTime;
use super::health::{Depth, FileHealth};
use super::info::{MediaInfo, MAX_PIXELS_VAR};
use super::plan::GrowingSource;
use super::stream_plan::StreamPlan;
use super::MediaError;
use crate::domain::job::FailureCode;
use crate::domain::limits;
use crate::domain::path_bytes;

/// What the node asks of a media child.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Request {
    /// Probe the source and decode it at several points (before any work).
    #[serde(rename_all = "camelCase")]
    Validate {
        #[serde(with = "path_bytes::lossless")]
        path: PathBuf,
        /// `path` is a linked node's copy still downloading (issue 39): the child reads it
        /// as it arrives, and only probes it (the main node validates the original before
        /// it verifies the output, and the encode decodes every frame anyway).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        growing: Option<GrowingSource>,
        /// Only probe: a first attempt's, whose encode decodes every frame and fails as the
        /// points would where the video stops short of its length (see
        /// `actors::job::prepare`). Absent (an older node): decode too.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        probe_only: bool,
    },
    /// Check an encoded output against its source before it may replace anything.
    #[serde(rename_all = "camelCase")]
    Verify {
        #[serde(with = "path_bytes::lossless")]
        output: PathBuf,
        #[serde(with = "path_bytes::lossless")]
        source_path: PathBuf,
        source: Box<MediaInfo>,
        target_codec: String,
        /// The job's stream plan: the output is checked against it. None (and from an older
        /// node): every stream of the source carried.
        #[serde(default)]
        plan: Option<Box<StreamPlan>>,
    },
    /// What each file is (the demuxer's facts, nothing decoded): one answer line per path,
    /// in order, each written as soon as it is known.
    Probe {
        #[serde(with = "path_bytes::lossless_vec")]
        paths: Vec<PathBuf>,
    },
    /// What this machine's FFmpeg can run.
    Capabilities,
    /// A library health check of one file (issue 38): read only, never written beside.
    Health {
        #[serde(with = "path_bytes::lossless")]
        path: PathBuf,
        depth: Depth,
    },
    /// Health checks of many files (issue 38), one answer line per path, in order, each
    /// written as soon as that file is checked: one child pays FFmpeg's start for many
    /// small files.
    HealthBatch {
        #[serde(with = "path_bytes::lossless_vec")]
        paths: Vec<PathBuf>,
        depth: Depth,
    },
}

impl Request {
    fn doing(&self) -> &'static str {
        match self {
            Request::Validate { .. } => "validating the source",
            Request::Verify { .. } => "verifying the output",
            Request::Probe { .. } => "probing",
            Request::Capabilities => "asking what FFmpeg can run",
            Request::Health { .. } | Request::HealthBatch { .. } => "checking the file's health",
        }
    }

    fn path(&self) -> &Path {
        match self {
            Request::Validate { path, .. } => path,
            Request::Verify { output, .. } => output,
            Request::Probe { paths } | Request::HealthBatch { paths, .. } => {
                paths.first().map_or(Path::new(""), PathBuf::as_path)
            }
            Request::Capabilities => Path::new(""),
            Request::Health { path, .. } => path,
        }
    }
}

/// What a node's FFmpeg can run, asked of a child once at start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// FFmpeg's release, e.g. "5.1.6-0+deb12u1".
    pub ffmpeg: String,
    /// The encoders that really open on this machine.
    pub encoders: Vec<String>,
    /// The hardware it can decode on.
    pub decoders: Vec<String>,
}

/// The program that runs FFmpeg: `condense-media`, installed beside `condense`. The server
/// process never maps FFmpeg's libraries (about 40 MiB of every node's memory); it starts
/// this one for every piece of media work.
pub const MEDIA_BINARY: &str = "condense-media";

/// `condense-media` beside the running executable.
pub fn binary() -> std::io::Result<PathBuf> {
    Ok(std::env::current_exe()?.with_file_name(MEDIA_BINARY))
}

/// The child's one answer (a probe's: one a path).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum Answer {
    Ok {
        info: Box<MediaInfo>,
        /// The child's CPU time for the request, in milliseconds (validation and
        /// verification, for the job's phase times); absent from a batch's answers.
        #[serde(default, rename = "cpuMs", skip_serializing_if = "Option::is_none")]
        cpu_ms: Option<u64>,
    },
    Failed {
        code: FailureCode,
        message: String,
    },
    Capabilities(Capabilities),
    Health(FileHealth),
}

/// How long a check may take: a base (the `ANALYSIS_TIMEOUT_SECONDS` setting) plus one
/// second per 50 MB, since verification reads every video packet of the file.
pub fn time_limit(base: Duration, size_bytes: u64) -> Duration {
    base + Duration::from_secs(size_bytes / 50_000_000)
}

/// The limits the node's media children run under (`MAX_PIXELS`,
/// `TRANSCODER_MEMORY_LIMIT_MB`), set once when the node starts; see `domain::limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildLimits {
    pub max_pixels: u64,
    /// The address space of every child in MiB; `None`: sized per child.
    pub memory_limit_mb: Option<u64>,
}

impl Default for ChildLimits {
    fn default() -> Self {
        ChildLimits { max_pixels: limits::DEFAULT_MAX_PIXELS, memory_limit_mb: None }
    }
}

static CHILD_LIMITS: OnceLock<ChildLimits> = OnceLock::new();

/// Sets this process's limits for its media children (once, at start; a second call keeps
/// the first).
pub fn set_child_limits(limits: ChildLimits) {
    if CHILD_LIMITS.set(limits).is_err() {
        tracing::debug!("the media children's limits were set already");
    }
}

/// The limits set at start, or the defaults.
pub fn child_limits() -> ChildLimits {
    CHILD_LIMITS.get().copied().unwrap_or_default()
}

/// In a child: a failure met while its address space stood near its limit (RLIMIT_AS) is
/// out of memory, whatever FFmpeg called it.
pub fn at_memory_limit(e: MediaError) -> MediaError {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    if e.code == FailureCode::OutOfMemory || unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0 {
        return e;
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return e;
    }
    let peak_kib = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        let line = status.lines().find(|l| l.starts_with("VmPeak:"))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    });
    match peak_kib {
        Some(kib) if limits::near_limit(kib.saturating_mul(1024), limit.rlim_cur) => MediaError::new(
            FailureCode::OutOfMemory,
            format!("{} (its address space peaked at {} MiB, at its limit)", e.message, kib / 1024),
        ),
        _ => e,
    }
}

/// The address space of a child that decodes a frame of `pixels` (the largest allowed
/// when not known yet) in `sessions` encoder sessions. A child that opens a GPU (`hardware`)
/// runs under a configured limit only: drivers such as CUDA reserve address ranges the
/// size of the machine's and the card's memory when they start, which no formula of the
/// frame foresees.
pub fn address_space(pixels: Option<u64>, sessions: u32, hardware: bool) -> u64 {
    let set = child_limits();
    if hardware && set.memory_limit_mb.is_none() {
        return u64::MAX;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
    limits::address_space_limit(set.memory_limit_mb, pixels.unwrap_or(set.max_pixels), sessions, cores)
}

/// A command for `binary <subcommand>` that dies with its parent (PR_SET_PDEATHSIG), is
/// killed when its handle is dropped, so no child outlives the node or its time limit, and
/// runs under `address_space` bytes (RLIMIT_AS), so a decoder that allocates without bound
/// fails its own child, never the machine's memory.
pub fn child_command(binary: &Path, subcommand: &str, address_space: u64) -> Command {
    let mut cmd = Command::new(binary);
    cmd.arg(subcommand).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    cmd.env(MAX_PIXELS_VAR, child_limits().max_pixels.to_string());
    let wanted = libc::rlim_t::try_from(address_space).unwrap_or(libc::RLIM_INFINITY);
    // SAFETY: prctl, getrlimit and setrlimit in the forked child before exec, all
    // async-signal-safe; nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::getrlimit(libc::RLIMIT_AS, &mut current) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Never above a hard limit someone set already (raising it is refused).
            let limit = wanted.min(current.rlim_max);
            let lowered = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_AS, &lowered) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Runs one request in a `condense-media media` child, killed after `limit`.
pub async fn run(binary: &Path, request: &Request, limit: Duration) -> Result<MediaInfo, MediaError> {
    run_timed(binary, request, limit, "").await.map(|(info, _)| info)
}

/// `run`, with the request's wall time and the child's CPU time as the job's phase `phase`.
async fn run_timed(
    binary: &Path,
    request: &Request,
    limit: Duration,
    phase: &str,
) -> Result<(MediaInfo, PhaseTime), MediaError> {
    let started = std::time::Instant::now();
    match exchange(binary, request, limit).await? {
        Answer::Ok { info, cpu_ms } => Ok((*info, PhaseTime::since(phase, started, cpu_ms.unwrap_or(0)))),
        Answer::Failed { code, message } => Err(MediaError::new(code, message)),
        Answer::Capabilities(_) | Answer::Health(_) => {
            Err(MediaError::misc(format!("the media child answered out of turn while {}", request.doing())))
        }
    }
}

/// What the FFmpeg of `binary` can run on this machine (asked once, when a node starts).
pub async fn capabilities(binary: &Path) -> Result<Capabilities, MediaError> {
    // Opening each hardware encoder and device can take seconds on a machine that has them.
    match exchange(binary, &Request::Capabilities, Duration::from_secs(120)).await? {
        Answer::Capabilities(capabilities) => Ok(capabilities),
        Answer::Failed { code, message } => Err(MediaError::new(code, message)),
        Answer::Ok { .. } | Answer::Health(_) => {
            Err(MediaError::misc("the media child answered out of turn while asking what FFmpeg can run"))
        }
    }
}

/// One request, its first answer (a child that ended without one: its exit and stderr's tail).
async fn exchange(binary: &Path, request: &Request, limit: Duration) -> Result<Answer, MediaError> {
    let doing = request.doing();
    let body = serde_json::to_vec(request).map_err(|e| MediaError::misc(format!("media request: {e}")))?;
    // Asking what FFmpeg can run opens every hardware encoder and device.
    let memory = address_space(None, 1, matches!(request, Request::Capabilities));
    let mut child = child_command(binary, "media", memory)
        .spawn()
        .map_err(|e| MediaError::from_io(&format!("starting the media check ({})", binary.display()), &e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&body).await.map_err(|e| MediaError::from_io("sending the media request", &e))?;
    }
    // Dropping the waiting future on time-out drops the child, which kills it.
    let output = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(MediaError::from_io("waiting for the media check", &e)),
        Err(_) => {
            tracing::warn!(path = %request.path().display(), seconds = limit.as_secs(), "media check timed out; killed");
            return Err(MediaError::new(
                FailureCode::Timeout,
                format!("{doing} took longer than {} s; the check was stopped", limit.as_secs()),
            ));
        }
    };
    let answer = String::from_utf8_lossy(&output.stdout);
    match answer.lines().find_map(|l| serde_json::from_str::<Answer>(l).ok()) {
        Some(answer @ (Answer::Ok { .. } | Answer::Capabilities(_) | Answer::Health(_))) if output.status.success() => {
            Ok(answer)
        }
        Some(Answer::Failed { code, message }) => {
            let e = MediaError::new(code, message).out_of_memory_in(memory);
            Ok(Answer::Failed { code: e.code, message: e.message })
        }
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(10).collect::<Vec<_>>().into_iter().rev().collect();
            let how = match std::os::unix::process::ExitStatusExt::signal(&output.status) {
                Some(sig) => format!("was killed by signal {sig}"),
                None => format!("exited with status {}", output.status.code().unwrap_or(-1)),
            };
            let tail = tail.join("\n");
            let tail = if tail.trim().is_empty() { String::new() } else { format!(": {}", tail.trim()) };
            let e =
                MediaError::new(FailureCode::TranscoderCrashed, format!("the media check {how} while {doing}{tail}"));
            Err(e.out_of_memory_in(memory))
        }
    }
}

/// What a batch probe learnt of one file: `None` where no child could say (it crashed or
/// hung on that file, or none could be started); the job's own validation then tells.
pub type Probed = Option<Result<MediaInfo, MediaError>>;

/// Probes many files in `condense-media` children, one child for the whole batch as long as
/// none crashes or hangs: one result per path, in order. A child that stops answering
/// within `per_file` on a file is killed; that file is left unknown and the rest of the
/// batch goes to a new child.
pub async fn probe_batch(binary: &Path, paths: &[PathBuf], per_file: Duration) -> Vec<Probed> {
    let mut results: Vec<Probed> = Vec::with_capacity(paths.len());
    let limits = vec![per_file; paths.len()];
    let request = |rest: &[PathBuf]| Request::Probe { paths: rest.to_vec() };
    let answer = |answer: Answer| match answer {
        Answer::Ok { info, .. } => Some(Ok(*info)),
        Answer::Failed { code, message } => Some(Err(MediaError::new(code, message))),
        Answer::Capabilities(_) | Answer::Health(_) => None,
    };
    // A file its child stopped on is left unknown: its job's own analysis tells.
    let stopped = batch(binary, paths, &limits, request, answer, &mut |_, probed| {
        results.push(match probed {
            Each::Answered(probed) => Some(probed),
            Each::Stopped(_) => None,
        });
    })
    .await;
    match stopped {
        Ok(()) => {}
        Err(BatchStop::OnFile(why)) => {
            let path = paths.get(results.len()).map(|p| p.display().to_string()).unwrap_or_default();
            tracing::warn!(path, why, "probe children keep failing; the rest is left to the jobs' own analysis");
        }
        Err(BatchStop::NoChild(why)) => {
            tracing::warn!(why, "no probe child could be started; the files are left to their jobs' own analysis");
        }
    }
    // A file a child stopped on, and every file after the batch was given up, is unknown.
    results.resize_with(paths.len(), || None);
    results
}

/// Health checks of many files (issue 38) in `condense-media` children, one child for the
/// batch as long as none crashes or hangs; `each` gets every file's result (its index in
/// `paths`) as soon as it is known, in order. Each file may take validation's time limit for
/// its size (`time_limit`). A file its child crashed or hung on is answered `Err` with the
/// reason (the node records it unreadable) and the rest of the batch goes to a new child;
/// where no child can be started (or three in a row answer nothing), every file left is
/// answered that error.
pub async fn health_batch(
    binary: &Path,
    paths: &[PathBuf],
    depth: Depth,
    base_limit: Duration,
    each: &mut (dyn FnMut(usize, Result<FileHealth, MediaError>) + Send),
) {
    let limits: Vec<Duration> =
        paths.iter().map(|p| time_limit(base_limit, std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))).collect();
    let request = |rest: &[PathBuf]| Request::HealthBatch { paths: rest.to_vec(), depth };
    let answer = |answer: Answer| match answer {
        Answer::Health(health) => Some(Ok(health)),
        Answer::Failed { code, message } => Some(Err(MediaError::new(code, message))),
        Answer::Ok { .. } | Answer::Capabilities(_) => None,
    };
    let mut done = 0;
    let stopped = batch(binary, paths, &limits, request, answer, &mut |i, result| {
        done = i + 1;
        each(
            i,
            match result {
                Each::Answered(result) => result,
                Each::Stopped(e) => Err(e),
            },
        );
    })
    .await;
    let why = match stopped {
        Ok(()) => return,
        Err(BatchStop::OnFile(why) | BatchStop::NoChild(why)) => why,
    };
    tracing::warn!(
        files = paths.len() - done,
        why,
        "health check children keep failing; the files left are unreadable"
    );
    for i in done..paths.len() {
        each(i, Err(MediaError::new(FailureCode::TranscoderCrashed, format!("the health check failed: {why}"))));
    }
}

/// One file's result in a batch.
enum Each<T> {
    /// What the child answered.
    Answered(Result<T, MediaError>),
    /// Its child crashed or hung on this file: why.
    Stopped(MediaError),
}

enum BatchStop {
    /// The child crashed, hung or answered nonsense on the next file.
    OnFile(String),
    /// No child to ask.
    NoChild(String),
}

/// Runs `paths` through as few children as it can: one child for the rest of the batch,
/// a new one after a child stops on a file (whose result is then `Each::Stopped` with the
/// reason, `TranscoderCrashed` or `Timeout`). `each` gets every result with its index, in order.
/// Stops early (`Err`) when no child starts, or three children in a row answer nothing: a
/// program that cannot work at all is not started once per file.
async fn batch<T>(
    binary: &Path,
    paths: &[PathBuf],
    limits: &[Duration],
    request: impl Fn(&[PathBuf]) -> Request,
    answer: impl Fn(Answer) -> Option<Result<T, MediaError>>,
    each: &mut (dyn FnMut(usize, Each<T>) + Send),
) -> Result<(), BatchStop> {
    let mut next = 0;
    let mut silent = 0;
    while next < paths.len() {
        let before = next;
        let rest = paths.get(next..).unwrap_or_default();
        let rest_limits = limits.get(next..).unwrap_or_default();
        let mut answered = |i, r| each(before + i, Each::Answered(r));
        let stop = match batch_child(binary, &request(rest), rest_limits, &answer, &mut answered, &mut next).await {
            Ok(()) => return Ok(()),
            Err(BatchStop::NoChild(why)) => return Err(BatchStop::NoChild(why)),
            Err(BatchStop::OnFile(why)) => why,
        };
        let path = paths.get(next).map(|p| p.display().to_string()).unwrap_or_default();
        tracing::warn!(path, why = stop, "a media child stopped on this file; the rest go to a new one");
        silent = if next == before { silent + 1 } else { 0 };
        if silent >= 3 {
            return Err(BatchStop::OnFile(stop));
        }
        let code =
            if stop.starts_with("no answer within") { FailureCode::Timeout } else { FailureCode::TranscoderCrashed };
        each(next, Each::Stopped(MediaError::new(code, format!("the media child stopped on this file: {stop}"))));
        next += 1;
    }
    Ok(())
}

/// One child for `request`'s paths: each answer handed to `each` (its index among them)
/// as it comes, `done` counting them (from the index the batch started at).
async fn batch_child<T>(
    binary: &Path,
    request: &Request,
    limits: &[Duration],
    answer: &impl Fn(Answer) -> Option<Result<T, MediaError>>,
    each: &mut (dyn FnMut(usize, Result<T, MediaError>) + Send),
    done: &mut usize,
) -> Result<(), BatchStop> {
    use tokio::io::AsyncBufReadExt;
    let body = serde_json::to_vec(request).map_err(|e| BatchStop::NoChild(e.to_string()))?;
    // FFmpeg's complaints about broken files are not read here: a full stderr pipe would
    // stall the child.
    let mut child = child_command(binary, "media", address_space(None, 1, false))
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| BatchStop::NoChild(format!("{}: {e}", binary.display())))?;
    let first = limits.first().copied().unwrap_or_default();
    // The child reads the whole request before it answers anything; one that never reads
    // it (a pipe's worth of paths) is a hang like any other.
    if let Some(mut stdin) = child.stdin.take() {
        match tokio::time::timeout(first, stdin.write_all(&body)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(BatchStop::OnFile(format!(
                    "the child {} before reading the paths ({e})",
                    ended(&mut child, first).await
                )))
            }
            Err(_) => return Err(BatchStop::OnFile(format!("the paths not read within {} s", first.as_secs()))),
        }
    }
    let stdout = child.stdout.take().ok_or_else(|| BatchStop::NoChild("no stdout".into()))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    for (i, limit) in limits.iter().enumerate() {
        let line = match tokio::time::timeout(*limit, lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => {
                return Err(BatchStop::OnFile(format!(
                    "the child {} without an answer",
                    ended(&mut child, *limit).await
                )))
            }
            Ok(Err(e)) => return Err(BatchStop::OnFile(e.to_string())),
            Err(_) => return Err(BatchStop::OnFile(format!("no answer within {} s", limit.as_secs()))),
        };
        let Some(result) = serde_json::from_str::<Answer>(&line).ok().and_then(answer) else {
            return Err(BatchStop::OnFile(format!("not an answer to {}: {line:.200}", request.doing())));
        };
        each(i, result);
        *done += 1;
    }
    let _ = child.wait().await;
    Ok(())
}

/// How a child that stopped talking ended: "was killed by signal 9", "exited with status 1"
/// (one that closed its pipes but runs on past `limit` is killed when dropped).
async fn ended(child: &mut tokio::process::Child, limit: Duration) -> String {
    match tokio::time::timeout(limit, child.wait()).await {
        Ok(Ok(status)) => match std::os::unix::process::ExitStatusExt::signal(&status) {
            Some(sig) => format!("was killed by signal {sig}"),
            None => format!("exited with status {}", status.code().unwrap_or(-1)),
        },
        Ok(Err(e)) => format!("ended unseen ({e})"),
        Err(_) => format!("closed its pipes and ran on past {} s", limit.as_secs()),
    }
}

/// Checks one file's health in a child (issue 38), under validation's time limit. A file
/// that cannot be read as media is a finding (`Verdict::Unreadable`), not an error; an error
/// is the check itself failing (the child crashed, ran out of time).
pub async fn check_health(
    binary: &Path,
    path: &Path,
    depth: Depth,
    base_limit: Duration,
) -> Result<FileHealth, MediaError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let request = Request::Health { path: path.to_path_buf(), depth };
    match exchange(binary, &request, time_limit(base_limit, size)).await? {
        Answer::Health(health) => Ok(health),
        Answer::Failed { code, message } => Err(MediaError::new(code, message)),
        Answer::Ok { .. } | Answer::Capabilities(_) => {
            Err(MediaError::misc("the media child answered out of turn while checking the file's health"))
        }
    }
}

/// Validates a source in a child: probes it and, unless `probe_only`, decodes it at
/// several points.
pub async fn validate(
    binary: &Path,
    path: &Path,
    growing: Option<&GrowingSource>,
    probe_only: bool,
    base_limit: Duration,
) -> Result<(MediaInfo, PhaseTime), MediaError> {
    let size = match growing {
        Some(growing) => growing.size,
        None => std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
    };
    let request = Request::Validate { path: path.to_path_buf(), growing: growing.cloned(), probe_only };
    run_timed(binary, &request, time_limit(base_limit, size), "validation").await
}

/// Verifies an output against its source (and its stream plan, where it has one) in a child.
pub async fn verify_output(
    binary: &Path,
    output: &Path,
    source_path: &Path,
    source: &MediaInfo,
    target_codec: &str,
    plan: Option<&StreamPlan>,
    base_limit: Duration,
) -> Result<(MediaInfo, PhaseTime), MediaError> {
    let size = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0).max(source.size_bytes);
    let request = Request::Verify {
        output: output.to_path_buf(),
        source_path: source_path.to_path_buf(),
        source: Box::new(source.clone()),
        target_codec: target_codec.to_string(),
        plan: plan.map(|p| Box::new(p.clone())),
    };
    run_timed(binary, &request, time_limit(base_limit, size), "verification").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_grows_with_the_file() {
        let base = Duration::from_secs(300);
        assert_eq!(time_limit(base, 0), base);
        assert_eq!(time_limit(base, 50_000_000_000), Duration::from_secs(1300));
    }

    #[test]
    fn requests_round_trip() {
        let r = Request::Validate { path: PathBuf::from("/m/a.mkv"), growing: None, probe_only: false };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, r#"{"op":"validate","path":"/m/a.mkv"}"#);
        assert!(matches!(serde_json::from_str(&json).unwrap(), Request::Validate { probe_only: false, .. }));
        let r = Request::Validate { path: PathBuf::from("/m/a.mkv"), growing: None, probe_only: true };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, r#"{"op":"validate","path":"/m/a.mkv","probeOnly":true}"#);
        assert!(matches!(serde_json::from_str(&json).unwrap(), Request::Validate { probe_only: true, .. }));
    }
}
