//! A small filesystem of its own for a test: a tmpfs of a given size.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test, unmounted when dropped.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// A tmpfs of `bytes` mounted at `path` (made if missing), or None where mounting is not
    /// allowed.
    pub fn mount(path: &Path, bytes: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).ok()?;
        let size = format!("size={}k", bytes.div_ceil(1024));
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
            .arg(path)
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| Tmpfs { path: path.to_path_buf() })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).output();
    }
}
