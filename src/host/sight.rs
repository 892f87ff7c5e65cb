//! Which library folders this machine sees: a folder at the library's path is not enough, as
//! a share that is not mounted leaves the empty folder it would be mounted over, which would
//! pass for the library (and its jobs, given here, find no file). The main node says which
//! of the paths hold something there; a node that finds such a path empty does not see it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Whether `path` is a folder with at least one entry (an unreadable folder holds nothing
/// this machine can use). Blocking: a share that does not answer can hang.
pub fn holds_anything(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_some())
}

/// The paths of `told` that this machine does not see: no folder there, or an empty one
/// where the main node finds something (`not_empty`). Blocking, as `holds_anything`.
pub fn unseen(told: &[String], not_empty: &[String]) -> Vec<String> {
    told.iter()
        .filter(|path| {
            let at = Path::new(path.as_str());
            !at.is_dir() || (not_empty.contains(path) && !holds_anything(at))
        })
        .cloned()
        .collect()
}

/// How long a file a job did not find here keeps its library unseen, unless it comes back.
pub const NOT_HERE_FOR: Duration = Duration::from_secs(600);

/// The files jobs given to this linked node did not find at their paths, though their
/// library's folder is here and holds something (a stale share, another disk mounted
/// there): the node counts such a library as not seen while the file is missing, for
/// `NOT_HERE_FOR`, so the main node stops giving it that library's jobs as to a node that
/// sees them. Shared by the node's jobs, which add, and its link, which reports each second.
#[derive(Debug, Clone, Default)]
pub struct NotHere(Arc<Mutex<NotHereFiles>>);

#[derive(Debug, Default)]
struct NotHereFiles {
    files: Vec<(PathBuf, Instant)>,
}

impl NotHere {
    fn lock(&self) -> std::sync::MutexGuard<'_, NotHereFiles> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `file` is not at its path here.
    pub fn add(&self, file: PathBuf) {
        let mut state = self.lock();
        state.files.retain(|(f, _)| *f != file);
        state.files.push((file, Instant::now()));
    }

    /// The paths of `told` under which a file recorded here is still missing; files that
    /// came back, or were recorded more than `NOT_HERE_FOR` ago, are forgotten. Blocking:
    /// looks at each file.
    pub fn libraries(&self, told: &[String]) -> Vec<String> {
        let files: Vec<PathBuf> = {
            let mut state = self.lock();
            state.files.retain(|(_, at)| at.elapsed() < NOT_HERE_FOR);
            state.files.iter().map(|(f, _)| f.clone()).collect()
        };
        let missing: Vec<PathBuf> = files.into_iter().filter(|f| !f.is_file()).collect();
        self.lock().files.retain(|(f, _)| missing.contains(f));
        told.iter().filter(|p| missing.iter().any(|f| f.starts_with(Path::new(p.as_str())))).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_folder_is_unseen_only_where_the_main_node_finds_something_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let (empty, full) = (dir.path().join("empty"), dir.path().join("full"));
        std::fs::create_dir(&empty).unwrap();
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("a.mkv"), b"x").unwrap();
        let name = |p: &Path| p.to_str().unwrap().to_string();
        let absent = name(&dir.path().join("absent"));
        let told = vec![name(&empty), name(&full), absent.clone()];
        // An empty library on the main node too: the empty folder is the library.
        assert_eq!(unseen(&told, &[]), vec![absent.clone()]);
        // The main node finds files there: this empty folder is a mount point, not the share.
        assert_eq!(unseen(&told, &[name(&empty), name(&full)]), vec![name(&empty), absent]);
        assert!(holds_anything(&full) && !holds_anything(&empty) && !holds_anything(&dir.path().join("absent")));
    }

    #[test]
    fn a_library_holding_a_file_not_found_here_is_unseen_until_the_file_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let name = |p: &Path| p.to_str().unwrap().to_string();
        let told = vec![name(&a), name(&b)];
        let not_here = NotHere::default();
        assert!(not_here.libraries(&told).is_empty());
        not_here.add(a.join("show/e1.mkv"));
        assert_eq!(not_here.libraries(&told), vec![name(&a)]);
        // The file is there again (the share mounted): the library is seen, the file forgotten.
        std::fs::create_dir(a.join("show")).unwrap();
        std::fs::write(a.join("show/e1.mkv"), b"x").unwrap();
        assert!(not_here.libraries(&told).is_empty());
        std::fs::remove_file(a.join("show/e1.mkv")).unwrap();
        assert!(not_here.libraries(&told).is_empty());
    }
}
