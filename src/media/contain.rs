//! One containment check for every path that comes from outside (an *arr webhook, a scan or
//! a watch, a job's stored path before it is encoded or replaced, a linked node): made
//! absolute without `..`, resolved by the filesystem (links followed), and inside one of the
//! library's resolved roots. What passes is the resolved path; what does not is refused with
//! one wording, so a caller learns nothing about files outside the libraries.

use std::path::{Component, Path, PathBuf};

/// Why a path is not one condense may work on. The text names only what the caller gave.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Outside {
    /// Outside every library, missing, or not a file: one answer for all, so nothing is
    /// revealed about what exists outside the libraries.
    #[error("{0} is not a file in any library")]
    NotInLibrary(String),
    /// The stored path now leads through a link (planted since the file was found).
    #[error("{path} now leads through a symlink (to {resolved}); condense works only on the file it found")]
    Moved { path: String, resolved: String },
}

/// `path` made absolute-and-normal without touching the filesystem: `.` dropped, `..` taken
/// back one component (never above `/`). `None` for a relative path.
pub fn normalized(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(out)
}

/// The resolved form of `path` when it is a file inside one of `roots` (themselves
/// resolved here: a root that cannot be resolved holds nothing).
pub fn resolve_inside(path: &Path, roots: &[PathBuf]) -> Result<PathBuf, Outside> {
    let refused = || Outside::NotInLibrary(path.display().to_string());
    let lexical = normalized(path).ok_or_else(refused)?;
    let resolved = std::fs::canonicalize(&lexical).map_err(|_| refused())?;
    let inside = roots
        .iter()
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .any(|root| resolved.starts_with(&root) && resolved != root);
    let is_file = std::fs::metadata(&resolved).is_ok_and(|m| m.is_file());
    if inside && is_file {
        Ok(resolved)
    } else {
        Err(refused())
    }
}

/// A job's stored path (resolved when it was found) checked again right before it is
/// opened or replaced: still inside the roots, and still resolving to itself (a link put
/// anywhere on its way since is refused, wherever it leads).
pub fn still_inside(path: &Path, roots: &[PathBuf]) -> Result<(), Outside> {
    let resolved = resolve_inside(path, roots)?;
    if resolved != path {
        return Err(Outside::Moved { path: path.display().to_string(), resolved: resolved.display().to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_is_taken_back_before_anything_is_resolved() {
        let n = |p: &str| normalized(Path::new(p)).map(|p| p.display().to_string());
        assert_eq!(n("/media/tv/Show/../../home/alice/w.mkv").as_deref(), Some("/media/home/alice/w.mkv"));
        assert_eq!(n("/../../etc/passwd").as_deref(), Some("/etc/passwd"));
        assert_eq!(n("/a/./b//c").as_deref(), Some("/a/b/c"));
        assert_eq!(n("relative/x.mkv"), None);
    }

    #[test]
    fn only_files_resolving_inside_a_root_pass_and_every_refusal_reads_the_same() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (lib, home) = (base.join("media/tv"), base.join("home/alice"));
        std::fs::create_dir_all(lib.join("Show")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(lib.join("Show/a.mkv"), b"a").unwrap();
        std::fs::write(home.join("w.mkv"), b"w").unwrap();
        std::os::unix::fs::symlink(&home, lib.join("Show/Season 02")).unwrap();
        std::os::unix::fs::symlink(home.join("w.mkv"), lib.join("Show/linked.mkv")).unwrap();
        let roots = [lib.clone()];
        assert_eq!(resolve_inside(&lib.join("Show/a.mkv"), &roots).unwrap(), lib.join("Show/a.mkv"));
        let refusals = [
            lib.join("Show/../../../home/alice/w.mkv"),
            lib.join("Show/Season 02/w.mkv"),
            lib.join("Show/linked.mkv"),
            lib.join("Show/missing.mkv"),
            home.join("w.mkv"),
            home.join("missing.mkv"),
            lib.join("Show"),
            PathBuf::from("Show/a.mkv"),
        ];
        for path in refusals {
            let e = resolve_inside(&path, &roots).unwrap_err();
            assert_eq!(e.to_string(), format!("{} is not a file in any library", path.display()));
        }
        // A link inside the library to a file inside it resolves to that file.
        std::os::unix::fs::symlink(lib.join("Show/a.mkv"), lib.join("b.mkv")).unwrap();
        assert_eq!(resolve_inside(&lib.join("b.mkv"), &roots).unwrap(), lib.join("Show/a.mkv"));
        assert!(matches!(still_inside(&lib.join("b.mkv"), &roots), Err(Outside::Moved { .. })));
        still_inside(&lib.join("Show/a.mkv"), &roots).unwrap();
    }
}
