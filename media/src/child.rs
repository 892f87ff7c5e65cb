//! The child's side of every process a node starts from `condense-media`: `transcode` (a
//! job's run), `helper` (one span of a running job) and `media` (probe, validation,
//! verification, health checks and capabilities on request). The node's side of them is
//! `condense::media::transcoder` and `condense::media::worker`. A SIGTERM asks for a graceful
//! stop (the segment in progress is finished and kept). The child dies with its parent
//! (PR_SET_PDEATHSIG), so no orphaned encoder keeps writing after a node crash.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use condense::domain::job::FailureCode;
use condense::media::event::{Event, RunEnd};
use condense::media::info::MediaInfo;
use condense::media::plan::EncodePlan;
use condense::media::transcoder::{HelperRequest, EXIT_BUSY, EXIT_NOTHING, EXIT_NOT_SMALLER, EXIT_PAUSED};
use condense::media::worker::{at_memory_limit, Answer, Capabilities, Request};
use condense::media::MediaError;

use crate::helper::{self, HelperEnd};
use crate::transcode::transcode;
use crate::verify::{validate_source, verify_planned};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn child_setup() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, request_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, request_stop as *const () as libc::sighandler_t);
        rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32);
    }
}

fn emit_line(event: Event) {
    let mut stdout = std::io::stdout();
    if let Ok(line) = serde_json::to_string(&event) {
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
}

/// `condense-media helper`: a helper's main (see `media::helper`).
pub fn helper_main() -> ExitCode {
    child_setup();
    let mut emit = emit_line;
    let request: HelperRequest = match serde_json::from_reader(std::io::stdin()) {
        Ok(r) => r,
        Err(e) => {
            emit(Event::Error { code: FailureCode::Miscellaneous, message: format!("bad request on stdin: {e}") });
            return ExitCode::FAILURE;
        }
    };
    match helper::run(&request, &STOP, &mut emit) {
        Ok(HelperEnd::Finished) => ExitCode::SUCCESS,
        Ok(HelperEnd::Paused) => ExitCode::from(EXIT_PAUSED),
        Ok(HelperEnd::Nothing) => ExitCode::from(EXIT_NOTHING),
        Err(e) => {
            let e = at_memory_limit(e);
            emit(Event::Error { code: e.code, message: e.message });
            ExitCode::FAILURE
        }
    }
}

/// `condense-media transcode`: the child's main.
pub fn child_main() -> ExitCode {
    child_setup();
    let mut emit = emit_line;
    let plan: EncodePlan = match serde_json::from_reader(std::io::stdin()) {
        Ok(p) => p,
        Err(e) => {
            emit(Event::Error { code: FailureCode::Miscellaneous, message: format!("bad plan on stdin: {e}") });
            return ExitCode::FAILURE;
        }
    };
    match transcode(&plan, &STOP, &mut emit) {
        Ok(RunEnd::Completed) => ExitCode::SUCCESS,
        Ok(RunEnd::Paused) => ExitCode::from(EXIT_PAUSED),
        Ok(RunEnd::Busy) => ExitCode::from(EXIT_BUSY),
        Ok(RunEnd::NotSmaller) => ExitCode::from(EXIT_NOT_SMALLER),
        Err(e) => {
            let e = at_memory_limit(e);
            emit(Event::Error { code: e.code, message: e.message });
            ExitCode::FAILURE
        }
    }
}

fn answer_of(result: Result<MediaInfo, MediaError>) -> Answer {
    match result.map_err(at_memory_limit) {
        Ok(info) => Answer::Ok { info: Box::new(info), cpu_ms: None },
        Err(e) => Answer::Failed { code: e.code, message: e.message },
    }
}

/// The answer of a child's one request, with the CPU time the child took for it (the
/// node records it in the job's phase times).
fn with_cpu_time(answer: Answer) -> Answer {
    match answer {
        Answer::Ok { info, .. } => Answer::Ok { info, cpu_ms: Some(condense::media::event::cpu_time_ms()) },
        other => other,
    }
}

fn write_answer(answer: &Answer) {
    let mut stdout = std::io::stdout().lock();
    if let Ok(line) = serde_json::to_string(answer) {
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
}

/// `condense-media media`: probe, validate, verify or say what FFmpeg can run, as asked on
/// stdin (`condense::media::worker::Request`).
pub fn media_main() -> ExitCode {
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    let answer = match serde_json::from_reader::<_, Request>(std::io::stdin()) {
        Ok(Request::Validate { path, growing, probe_only }) => {
            if let Some(growing) = &growing {
                crate::growing::expect(growing);
            }
            with_cpu_time(answer_of(validate_source(&path, !probe_only)))
        }
        Ok(Request::Verify { output, source_path, source, target_codec, plan }) => {
            with_cpu_time(answer_of(verify_planned(&output, &source_path, &source, &target_codec, plan.as_deref())))
        }
        Ok(Request::Probe { paths }) => {
            for path in &paths {
                write_answer(&answer_of(crate::probe::probe(path)));
            }
            return ExitCode::SUCCESS;
        }
        Ok(Request::Capabilities) => Answer::Capabilities(Capabilities {
            ffmpeg: crate::ffmpeg_release(),
            encoders: crate::encoders::available(),
            decoders: crate::device::decoders(),
        }),
        Ok(Request::Health { path, depth }) => Answer::Health(crate::health::check(&path, depth)),
        Ok(Request::HealthBatch { paths, depth }) => {
            for path in &paths {
                write_answer(&Answer::Health(crate::health::check(path, depth)));
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => Answer::Failed { code: FailureCode::Miscellaneous, message: format!("bad request on stdin: {e}") },
    };
    write_answer(&answer);
    match answer {
        Answer::Failed { .. } => ExitCode::FAILURE,
        Answer::Ok { .. } | Answer::Capabilities(_) | Answer::Health(_) => ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_helper_is_started_by_its_name_or_by_its_old_one() {
        use clap::Parser;
        use condense::config::{Cli, Command};
        // A node built before helpers were called so everywhere starts `assist`.
        for name in ["helper", "assist"] {
            let cli = Cli::try_parse_from(["condense-media", name]).unwrap();
            assert!(matches!(cli.command, Command::Helper), "{name}");
        }
    }
}
