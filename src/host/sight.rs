//! Which library folders this machine sees: a folder at the library's path is not enough, as
//! a share that is not mounted leaves the empty folder it would be mounted over, which would
//! pass for the library (and its jobs, given here, find no file). The main node says which
//! of the paths hold something there; a node that finds such a path empty does not see it.

use std::path::Path;

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
}
