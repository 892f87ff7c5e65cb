//! Structured logging: human-readable lines on stdout and, for a serving node, daily files
//! under DATA_DIR/logs kept for 30 days.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{Builder, Rotation};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

use crate::config::ConfigError;

pub const LOG_FILES_KEPT: usize = 30;
/// Log lines waiting for the file writer's thread, at most (see `init`).
const LOG_LINES_BUFFERED: usize = 8_192;

/// Keeps the file writer flushing until dropped at exit.
pub struct LogGuard(#[allow(dead_code)] Option<WorkerGuard>);

pub fn init(level: &str, log_dir: Option<&Path>) -> Result<LogGuard, ConfigError> {
    let filter = |level: &str| {
        EnvFilter::try_new(level).map_err(|e| ConfigError { variable: "LOG_LEVEL", message: e.to_string() })
    };
    let stdout = fmt::layer()
        .with_target(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_filter(filter(level)?);
    let (file_layer, guard) = match log_dir {
        Some(dir) => {
            let appender = Builder::new()
                .rotation(Rotation::DAILY)
                .filename_prefix("condense")
                .filename_suffix("log")
                .max_log_files(LOG_FILES_KEPT)
                .build(dir)
                .map_err(|e| ConfigError { variable: "DATA_DIR", message: format!("log folder: {e}") })?;
            // The default buffer of 128,000 lines is allocated and written through at once:
            // 4 MiB of every node's memory (a crossbeam array of 32-byte slots). 8,192 lines
            // absorb any burst the writer thread cannot keep up with for a moment; past them
            // a log call waits for it (lossy off) rather than drop a line.
            let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
                .buffered_lines_limit(LOG_LINES_BUFFERED)
                .lossy(false)
                .finish(appender);
            let layer = fmt::layer().with_ansi(false).with_writer(writer).with_filter(filter(level)?);
            (Some(layer), Some(guard))
        }
        None => (None, None),
    };
    // A second init (tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry().with(stdout).with(file_layer).try_init();
    Ok(LogGuard(guard))
}
