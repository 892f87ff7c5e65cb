//! Every name condense gives a file or folder on disk, in one place. Next to a source
//! `<dir>/NAME` it writes only hidden names that contain `.condense-`, which scanners and
//! the watcher ignore:
//!
//! - `<dir>/.NAME.condense-partial/`: the job's partial output, one writer at a time (the
//!   OFD lock on its `.lock` file, see `media::partial`), holding `manifest.json` (the
//!   segments finished so far), the segments `seg-00000.seg`, …, the muxed
//!   `output.<ext>`, and during a replace its intent `replace.json`;
//! - `<dir>/.NAME.condense-original`, `.NAME.condense-original.2`, …: hard links that keep
//!   the original reachable while it is replaced, and afterwards when originals are kept.
//!
//! docs/ARCHITECTURE.md describes how the replace protocol uses them.

use std::path::{Path, PathBuf};

/// What every name condense writes next to a source contains.
pub const SERVICE_MARKER: &str = ".condense-";
/// Suffix of the hidden folder, next to the source, that holds a job's partial output.
pub const PARTIAL_SUFFIX: &str = ".condense-partial";
/// Suffix of the hidden hard link that keeps the original reachable while it is replaced.
pub const BACKUP_SUFFIX: &str = ".condense-original";

/// The lock file inside a partial folder.
pub const LOCK_FILE: &str = ".lock";
/// The list of finished segments inside a partial folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// A replace's intent inside a partial folder: what recovery after a crash must finish or undo.
pub const INTENT_FILE: &str = "replace.json";

/// True for names condense itself writes (partial folders, backups), which scanners ignore.
pub fn is_service_file(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains(SERVICE_MARKER))
}

/// `<dir>/.<file name>.condense-partial`
pub fn partial_dir_for(source: &Path) -> PathBuf {
    sibling(source, PARTIAL_SUFFIX)
}

/// The source a partial output folder (`.NAME.condense-partial`) belongs to.
pub fn source_of_partial(dir: &Path) -> Option<PathBuf> {
    let name = dir.file_name()?.to_str()?;
    let source = name.strip_prefix('.')?.strip_suffix(PARTIAL_SUFFIX)?;
    Some(dir.with_file_name(source))
}

/// `<dir>/.<file name>.condense-original`
pub fn backup_path_for(source: &Path) -> PathBuf {
    sibling(source, BACKUP_SUFFIX)
}

/// The name of a source's `n`-th kept original: `.NAME.condense-original` for the first,
/// `.NAME.condense-original.N` after it.
pub fn numbered_backup_path(source: &Path, n: u32) -> PathBuf {
    let first = backup_path_for(source);
    if n <= 1 {
        return first;
    }
    let mut name = first.into_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The `index`-th segment's file name inside a partial folder.
pub fn segment_file(index: u32) -> String {
    format!("seg-{index:05}.seg")
}

/// The `n`-th segment file a helper writes for planned span `span` (see `media::assist`):
/// named by the span, so helpers never need a number from the run that owns the manifest.
pub fn assist_segment_file(span: u32, n: u32) -> String {
    format!("span-{span:05}-{n:03}.seg")
}

/// The planned span a helper's file (a segment, its record, a record being written)
/// belongs to.
pub fn assist_span_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("span-")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest.get(..digits).filter(|d| !d.is_empty())?.parse().ok()
}

/// A helper's record of the segments it finished for planned span `span`, for the run that
/// owns the manifest to take in.
pub fn span_record_file(span: u32) -> String {
    format!("span-{span:05}.json")
}

/// The plan of the run that owns the partial folder, which helpers encode spans by.
pub const PLAN_FILE: &str = "plan.json";
/// A VMAF-mode run's quality search result (`media::search`).
pub const SEARCH_FILE: &str = "search.json";

/// The muxed output inside a partial folder.
pub fn output_path(partial_dir: &Path, extension: &str) -> PathBuf {
    partial_dir.join(output_file_name(extension))
}

/// The muxed output's name inside a partial folder.
pub fn output_file_name(extension: &str) -> String {
    format!("output.{extension}")
}

/// Files of a partial folder that are not segments or outputs: what a transcoder's clean-up
/// of strays must leave alone.
pub fn is_bookkeeping(name: &str) -> bool {
    name == MANIFEST_FILE || name == LOCK_FILE || name == INTENT_FILE || name == PLAN_FILE || name == SEARCH_FILE
}

fn sibling(source: &Path, suffix: &str) -> PathBuf {
    let name = source.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    source.with_file_name(format!(".{name}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_next_to_a_source() {
        let src = Path::new("/m/Movie (2020).mkv");
        let partial = partial_dir_for(src);
        assert_eq!(partial, Path::new("/m/.Movie (2020).mkv.condense-partial"));
        assert_eq!(source_of_partial(&partial).as_deref(), Some(src));
        assert_eq!(source_of_partial(Path::new("/m/.x.mkv.condense-original")), None);
        assert_eq!(backup_path_for(src), Path::new("/m/.Movie (2020).mkv.condense-original"));
        assert_eq!(numbered_backup_path(src, 1), backup_path_for(src));
        assert_eq!(numbered_backup_path(src, 2), Path::new("/m/.Movie (2020).mkv.condense-original.2"));
        assert_eq!(segment_file(7), "seg-00007.seg");
        assert_eq!(output_path(&partial, "mp4"), partial.join("output.mp4"));
    }

    #[test]
    fn every_name_written_next_to_a_source_is_a_service_file() {
        let src = Path::new("/m/a.mkv");
        for path in [partial_dir_for(src), backup_path_for(src), numbered_backup_path(src, 3)] {
            assert!(is_service_file(&path), "{}", path.display());
        }
        assert!(!is_service_file(src));
        assert!(!is_service_file(Path::new("/m/condense.mkv")));
    }
}
