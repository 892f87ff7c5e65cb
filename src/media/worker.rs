//! Analysis and verification run in a child process of the same binary (`condense media`),
//! as the encode does: a decoder that crashes or hangs on a hostile file ends that child,
//! never the node that holds the database and the secrets. The node sends one request on
//! the child's stdin, reads one JSON answer from its stdout, and kills it when it runs past
//! its time limit. FFmpeg's log goes to stderr, whose last lines explain a crash.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::probe::MediaInfo;
use super::verify::{validate_source, verify};
use super::MediaError;
use crate::domain::job::FailureCode;

/// What the node asks of a media child.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Request {
    /// Probe the source and decode it at several points (before any work).
    Validate { path: PathBuf },
    /// Check an encoded output against its source before it may replace anything.
    #[serde(rename_all = "camelCase")]
    Verify { output: PathBuf, source_path: PathBuf, source: Box<MediaInfo>, target_codec: String },
}

impl Request {
    fn doing(&self) -> &'static str {
        match self {
            Request::Validate { .. } => "validating the source",
            Request::Verify { .. } => "verifying the output",
        }
    }

    fn path(&self) -> &Path {
        match self {
            Request::Validate { path } => path,
            Request::Verify { output, .. } => output,
        }
    }
}

/// The child's one answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
enum Answer {
    Ok { info: Box<MediaInfo> },
    Failed { code: FailureCode, message: String },
}

/// How long a check may take: a base (the `ANALYSIS_TIMEOUT_SECONDS` setting) plus one
/// second per 50 MB, since verification reads every video packet of the file.
pub fn time_limit(base: Duration, size_bytes: u64) -> Duration {
    base + Duration::from_secs(size_bytes / 50_000_000)
}

/// `condense media`: the child's main.
pub fn child_main() -> ExitCode {
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    let answer = match serde_json::from_reader::<_, Request>(std::io::stdin()) {
        Ok(Request::Validate { path }) => validate_source(&path),
        Ok(Request::Verify { output, source_path, source, target_codec }) => {
            verify(&output, &source_path, &source, &target_codec)
        }
        Err(e) => Err(MediaError::misc(format!("bad request on stdin: {e}"))),
    };
    let (answer, code) = match answer {
        Ok(info) => (Answer::Ok { info: Box::new(info) }, ExitCode::SUCCESS),
        Err(e) => (Answer::Failed { code: e.code, message: e.message }, ExitCode::FAILURE),
    };
    let mut stdout = std::io::stdout();
    if let Ok(line) = serde_json::to_string(&answer) {
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
    code
}

/// A command for `binary <subcommand>` that dies with its parent (PR_SET_PDEATHSIG) and is
/// killed when its handle is dropped, so no child outlives the node or its time limit.
pub fn child_command(binary: &Path, subcommand: &str) -> Command {
    let mut cmd = Command::new(binary);
    cmd.arg(subcommand).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    // SAFETY: prctl in the forked child before exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Runs one request in a `condense media` child, killed after `limit`.
pub async fn run(binary: &Path, request: &Request, limit: Duration) -> Result<MediaInfo, MediaError> {
    let doing = request.doing();
    let body = serde_json::to_vec(request).map_err(|e| MediaError::misc(format!("media request: {e}")))?;
    let mut child =
        child_command(binary, "media").spawn().map_err(|e| MediaError::from_io("starting the media check", &e))?;
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
        Some(Answer::Ok { info }) if output.status.success() => Ok(*info),
        Some(Answer::Failed { code, message }) => Err(MediaError::new(code, message)),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(10).collect::<Vec<_>>().into_iter().rev().collect();
            let how = match std::os::unix::process::ExitStatusExt::signal(&output.status) {
                Some(sig) => format!("was killed by signal {sig}"),
                None => format!("exited with status {}", output.status.code().unwrap_or(-1)),
            };
            let tail = tail.join("\n");
            let tail = if tail.trim().is_empty() { String::new() } else { format!(": {}", tail.trim()) };
            Err(MediaError::new(FailureCode::TranscoderCrashed, format!("the media check {how} while {doing}{tail}")))
        }
    }
}

/// Validates a source in a child.
pub async fn validate(binary: &Path, path: &Path, base_limit: Duration) -> Result<MediaInfo, MediaError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    run(binary, &Request::Validate { path: path.to_path_buf() }, time_limit(base_limit, size)).await
}

/// Verifies an output against its source in a child.
pub async fn verify_output(
    binary: &Path,
    output: &Path,
    source_path: &Path,
    source: &MediaInfo,
    target_codec: &str,
    base_limit: Duration,
) -> Result<MediaInfo, MediaError> {
    let size = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0).max(source.size_bytes);
    let request = Request::Verify {
        output: output.to_path_buf(),
        source_path: source_path.to_path_buf(),
        source: Box::new(source.clone()),
        target_codec: target_codec.to_string(),
    };
    run(binary, &request, time_limit(base_limit, size)).await
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
        let r = Request::Validate { path: PathBuf::from("/m/a.mkv") };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, r#"{"op":"validate","path":"/m/a.mkv"}"#);
        assert!(matches!(serde_json::from_str(&json).unwrap(), Request::Validate { .. }));
    }
}
