//! A marker in DATA_DIR that says the node's last run stopped cleanly (a signal, drained
//! listeners, encodes asked to stop). Its absence at start-up means the last run crashed or
//! was killed, so the jobs it left running count a crash (see `domain::job::MAX_CRASHES`).

use std::path::{Path, PathBuf};

const FILE: &str = "clean-stop";

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// Written as the last step of a clean stop.
pub fn mark(data_dir: &Path) {
    if let Err(e) = std::fs::write(path(data_dir), b"") {
        tracing::warn!(error = %e, "could not mark the stop as clean");
    }
}

/// At start-up: whether the last run stopped cleanly. The marker is removed, so a crash of
/// this run is seen by the next.
pub fn take(data_dir: &Path) -> bool {
    std::fs::remove_file(path(data_dir)).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_mark_is_seen_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!super::take(dir.path()));
        super::mark(dir.path());
        assert!(super::take(dir.path()));
        assert!(!super::take(dir.path()));
    }
}
