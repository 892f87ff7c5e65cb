//! Where libraries may be (`DATA_DIR`, `LIBRARY_ROOTS`): the places a library's folders are
//! checked against when one is created or changed (`http::libraries`). Part of the API's
//! configuration (`http::state::ApiConfig`).

use std::path::{Path, PathBuf};

/// Folders no library may be, nor be inside, nor contain: the system's own. `/` is refused
/// by containing them.
const SYSTEM_FOLDERS: &[&str] =
    &["/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/dev", "/proc", "/sys", "/var/lib"];

/// Where libraries may be: never a system folder or condense's DATA_DIR (nor inside or
/// above one), and, when LIBRARY_ROOTS is set, only one of its folders or inside one.
#[derive(Debug, Clone, Default)]
pub struct LibraryPlaces {
    pub data_dir: Option<PathBuf>,
    /// LIBRARY_ROOTS; empty: no restriction beyond the refused folders.
    pub roots: Vec<PathBuf>,
}

/// The folder as the filesystem resolves it now (a link to it, `/bin` on a merged /usr),
/// or as written when it cannot be resolved.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl LibraryPlaces {
    /// Why the canonical `path` may not be a library, if it may not.
    pub fn refusal(&self, path: &Path) -> Option<String> {
        let refused = SYSTEM_FOLDERS
            .iter()
            .map(|f| (Path::new(f).to_path_buf(), "a system folder"))
            .chain(self.data_dir.iter().map(|d| (d.clone(), "condense's DATA_DIR")));
        for (folder, what) in refused {
            for folder in [resolved(&folder), folder] {
                if path.starts_with(&folder) {
                    return Some(format!("is inside {}, {what}", folder.display()));
                }
                if folder.starts_with(path) {
                    return Some(format!("contains {}, {what}", folder.display()));
                }
            }
        }
        let roots: Vec<PathBuf> = self.roots.iter().map(|r| resolved(r)).collect();
        if !roots.is_empty() && !roots.iter().any(|root| path.starts_with(root)) {
            let list = self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ");
            return Some(format!("is outside LIBRARY_ROOTS ({list}); a library must be one of them or inside one"));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_folders_and_the_data_dir_are_refused_and_roots_bound_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (data, media, elsewhere) = (base.join("data"), base.join("media"), base.join("elsewhere"));
        let open = LibraryPlaces { data_dir: Some(data.clone()), roots: Vec::new() };
        assert!(open.refusal(Path::new("/etc/ssl")).unwrap().contains("a system folder"));
        assert!(open.refusal(Path::new("/")).unwrap().contains("contains"));
        assert!(open.refusal(&data.join("x")).unwrap().contains("DATA_DIR"));
        assert!(open.refusal(&base).unwrap().contains("contains"));
        assert_eq!(open.refusal(&media), None);
        let rooted = LibraryPlaces { roots: vec![media.clone()], ..open };
        assert_eq!(rooted.refusal(&media.join("films")), None);
        assert!(rooted.refusal(&elsewhere).unwrap().contains("outside LIBRARY_ROOTS"));
    }
}
