//! The replace protocol: the verified output takes the original's place without a moment
//! where neither exists, and every step is safe to repeat after a crash.
//!
//! Same file name: the original gets a second name (a hard link, `.NAME.condense-original`),
//! then the output is renamed over the original's path. `rename(2)` replaces atomically, so
//! the path always holds a complete file: the original before, the output after.
//! Different name (container change): the output is renamed to its new name, then the
//! original is removed. Folders are fsynced after each step.
//!
//! Right before the swap, an `Intent` is written durably into the partial output's folder.
//! A crash after the swap but before the job is marked complete leaves it there, and
//! `roll_forward` then finishes the job instead of taking its output for a source that is
//! already in the target codec.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::manifest::sync_dir;
use super::plan::{backup_path_for, partial_dir_for, SourceIdentity};
use super::MediaError;

/// File name of the intent, in the partial output's folder.
pub const INTENT_FILE: &str = "replace.json";

/// A step of the protocol, for the job's event history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    SourceChecked,
    BackupLinked,
    OutputInPlace,
    OriginalRemoved,
    BackupKept,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::SourceChecked => "replace_source_checked",
            Step::BackupLinked => "replace_backup_linked",
            Step::OutputInPlace => "replace_output_in_place",
            Step::OriginalRemoved => "replace_original_removed",
            Step::BackupKept => "replace_backup_kept",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Replace<'a> {
    pub source: &'a Path,
    pub identity: SourceIdentity,
    pub output: &'a Path,
    pub final_path: &'a Path,
    pub keep_original: bool,
}

fn io(context: &str) -> impl Fn(std::io::Error) -> MediaError + '_ {
    move |e| MediaError::from_io(context, &e)
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("."))
}

/// Replaces the original with the verified output. `still_mine` is asked right before the
/// swap: a node that lost its lease on the job must not touch the file.
pub fn replace(
    r: &Replace,
    still_mine: &dyn Fn() -> bool,
    record: &mut dyn FnMut(Step),
) -> Result<PathBuf, MediaError> {
    let now = SourceIdentity::of(r.source).map_err(io("reading the source"))?;
    if now != r.identity {
        return Err(MediaError::misc("the source changed while it was being encoded; it was left as it is"));
    }
    if !still_mine() {
        return Err(MediaError::misc("this node no longer holds the job; the source was left as it is"));
    }
    std::fs::File::open(r.output).and_then(|f| f.sync_all()).map_err(io("syncing the output"))?;
    record(Step::SourceChecked);
    let dir = parent(r.source);
    let backup = backup_path_for(r.source);
    if r.final_path == r.source {
        let _ = std::fs::remove_file(&backup);
        std::fs::hard_link(r.source, &backup).map_err(io("linking the original"))?;
        sync_dir(dir).map_err(io("syncing the folder"))?;
        record(Step::BackupLinked);
        std::fs::rename(r.output, r.final_path).map_err(io("moving the output in place"))?;
        sync_dir(dir).map_err(io("syncing the folder"))?;
        record(Step::OutputInPlace);
        if r.keep_original {
            record(Step::BackupKept);
        } else {
            std::fs::remove_file(&backup).map_err(io("removing the original"))?;
            sync_dir(dir).map_err(io("syncing the folder"))?;
            record(Step::OriginalRemoved);
        }
    } else {
        if r.final_path.exists() {
            return Err(MediaError::misc(format!("{} exists already; nothing was replaced", r.final_path.display())));
        }
        std::fs::rename(r.output, r.final_path).map_err(io("moving the output in place"))?;
        sync_dir(dir).map_err(io("syncing the folder"))?;
        record(Step::OutputInPlace);
        if r.keep_original {
            std::fs::rename(r.source, &backup).map_err(io("keeping the original"))?;
            record(Step::BackupKept);
        } else {
            std::fs::remove_file(r.source).map_err(io("removing the original"))?;
            record(Step::OriginalRemoved);
        }
        sync_dir(dir).map_err(io("syncing the folder"))?;
    }
    Ok(r.final_path.to_path_buf())
}

/// What a replace is about to do, written before the swap so a restart can tell whether the
/// file at the final path is the job's output (a rename keeps the inode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Intent {
    pub output_inode: u64,
    pub output_size: u64,
    pub final_path: PathBuf,
    /// The original the job started on.
    pub source: SourceIdentity,
}

impl Intent {
    pub fn of(r: &Replace) -> Result<Intent, MediaError> {
        use std::os::unix::fs::MetadataExt;
        let output = std::fs::metadata(r.output).map_err(io("reading the output"))?;
        Ok(Intent {
            output_inode: output.ino(),
            output_size: output.len(),
            final_path: r.final_path.to_path_buf(),
            source: r.identity,
        })
    }

    /// Writes the intent durably into `dir` (the partial output's folder).
    pub fn write(&self, dir: &Path) -> Result<(), MediaError> {
        use std::io::Write;
        let body = serde_json::to_vec(self).map_err(|e| MediaError::misc(format!("replace intent: {e}")))?;
        let tmp = dir.join(format!("{INTENT_FILE}.tmp"));
        let mut file = std::fs::File::create(&tmp).map_err(io("writing the replace intent"))?;
        file.write_all(&body).map_err(io("writing the replace intent"))?;
        file.sync_all().map_err(io("writing the replace intent"))?;
        std::fs::rename(&tmp, dir.join(INTENT_FILE)).map_err(io("writing the replace intent"))?;
        sync_dir(dir).map_err(io("syncing the folder"))
    }

    pub fn read(dir: &Path) -> Option<Intent> {
        serde_json::from_slice(&std::fs::read(dir.join(INTENT_FILE)).ok()?).ok()
    }
}

/// A replace a crash interrupted after its swap: the output is in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swapped {
    pub final_path: PathBuf,
    pub output_size: u64,
}

/// After a crash, for a job whose replace wrote its intent: when the swap had happened,
/// finishes the protocol (a container change removes, or keeps, the original) and answers
/// what the job needs to complete; otherwise drops the stale intent and answers None.
/// Runs after `recover`, which has dealt with a same-name backup link.
pub fn roll_forward(source: &Path, keep_original: bool) -> Result<Option<Swapped>, MediaError> {
    use std::os::unix::fs::MetadataExt;
    let dir = partial_dir_for(source);
    let Some(intent) = Intent::read(&dir) else { return Ok(None) };
    let swapped = std::fs::metadata(&intent.final_path).is_ok_and(|m| m.ino() == intent.output_inode);
    if !swapped {
        let _ = std::fs::remove_file(dir.join(INTENT_FILE));
        return Ok(None);
    }
    // A container change: the original goes, unless it changed since (then it stays).
    if intent.final_path != source && SourceIdentity::of(source).ok() == Some(intent.source) {
        if keep_original {
            std::fs::rename(source, backup_path_for(source)).map_err(io("keeping the original"))?;
        } else {
            std::fs::remove_file(source).map_err(io("removing the original"))?;
        }
        sync_dir(parent(source)).map_err(io("syncing the folder"))?;
    }
    Ok(Some(Swapped { final_path: intent.final_path, output_size: intent.output_size }))
}

/// What start-up recovery found for a source path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    /// No replace was under way.
    Nothing,
    /// The swap had not happened: the stray backup link was removed, the original is in place.
    RolledBack,
    /// The output was in place: the backup was removed (or kept, by setting).
    RolledForward,
}

/// Finishes or undoes a replace interrupted by a crash, from the files alone.
pub fn recover(source: &Path, keep_original: bool) -> Result<Recovered, MediaError> {
    use std::os::unix::fs::MetadataExt;
    let backup = backup_path_for(source);
    let Ok(b) = std::fs::metadata(&backup) else { return Ok(Recovered::Nothing) };
    let dir = parent(source);
    match std::fs::metadata(source) {
        Ok(s) if s.ino() == b.ino() && s.dev() == b.dev() => {
            // Only the link was made: the original is still at its path.
            std::fs::remove_file(&backup).map_err(io("removing a stray link"))?;
            sync_dir(dir).map_err(io("syncing the folder"))?;
            Ok(Recovered::RolledBack)
        }
        Ok(_) => {
            if !keep_original {
                std::fs::remove_file(&backup).map_err(io("removing the original"))?;
                sync_dir(dir).map_err(io("syncing the folder"))?;
            }
            Ok(Recovered::RolledForward)
        }
        Err(_) => {
            // Never left this way by `replace`, but if the path is empty, put the original back.
            std::fs::rename(&backup, source).map_err(io("restoring the original"))?;
            sync_dir(dir).map_err(io("syncing the folder"))?;
            Ok(Recovered::RolledBack)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("movie.mkv");
        std::fs::write(&source, b"original bytes").unwrap();
        let output = dir.path().join("new.mkv");
        std::fs::write(&output, b"new").unwrap();
        (dir, source, output)
    }

    #[test]
    fn same_name_replace_records_every_step_and_removes_the_backup() {
        let (_dir, source, output) = setup();
        let identity = SourceIdentity::of(&source).unwrap();
        let mut steps = Vec::new();
        let r = Replace { source: &source, identity, output: &output, final_path: &source, keep_original: false };
        replace(&r, &|| true, &mut |s| steps.push(s)).unwrap();
        assert_eq!(std::fs::read(&source).unwrap(), b"new");
        assert!(!backup_path_for(&source).exists());
        assert_eq!(steps, [Step::SourceChecked, Step::BackupLinked, Step::OutputInPlace, Step::OriginalRemoved]);
    }

    #[test]
    fn keep_original_leaves_the_backup() {
        let (_dir, source, output) = setup();
        let identity = SourceIdentity::of(&source).unwrap();
        let r = Replace { source: &source, identity, output: &output, final_path: &source, keep_original: true };
        replace(&r, &|| true, &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(backup_path_for(&source)).unwrap(), b"original bytes");
    }

    #[test]
    fn container_change_writes_the_new_name_then_removes_the_old() {
        let (dir, source, output) = setup();
        let avi = dir.path().join("clip.avi");
        std::fs::rename(&source, &avi).unwrap();
        let identity = SourceIdentity::of(&avi).unwrap();
        let target = dir.path().join("clip.mkv");
        let r = Replace { source: &avi, identity, output: &output, final_path: &target, keep_original: false };
        replace(&r, &|| true, &mut |_| {}).unwrap();
        assert!(!avi.exists());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_changed_source_or_a_lost_lease_touches_nothing() {
        let (_dir, source, output) = setup();
        let identity = SourceIdentity::of(&source).unwrap();
        let r = Replace { source: &source, identity, output: &output, final_path: &source, keep_original: false };
        assert!(replace(&r, &|| false, &mut |_| {}).is_err());
        assert_eq!(std::fs::read(&source).unwrap(), b"original bytes");
        std::fs::write(&source, b"edited by the user").unwrap();
        assert!(replace(&r, &|| true, &mut |_| {}).is_err());
        assert_eq!(std::fs::read(&source).unwrap(), b"edited by the user");
        assert!(output.exists());
    }

    #[test]
    fn recovery_rolls_back_a_link_and_forward_a_swap() {
        let (_dir, source, output) = setup();
        let backup = backup_path_for(&source);
        // Crash after the link, before the rename.
        std::fs::hard_link(&source, &backup).unwrap();
        assert_eq!(recover(&source, false).unwrap(), Recovered::RolledBack);
        assert!(!backup.exists());
        assert_eq!(std::fs::read(&source).unwrap(), b"original bytes");
        // Crash after the rename, before the backup was removed.
        std::fs::hard_link(&source, &backup).unwrap();
        std::fs::rename(&output, &source).unwrap();
        assert_eq!(recover(&source, false).unwrap(), Recovered::RolledForward);
        assert!(!backup.exists());
        assert_eq!(std::fs::read(&source).unwrap(), b"new");
        assert_eq!(recover(&source, false).unwrap(), Recovered::Nothing);
    }

    /// Sets up a source with its partial folder, an output in it and the intent written.
    fn with_intent(final_name: &str, source_name: &str) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join(source_name);
        std::fs::write(&source, b"original bytes").unwrap();
        let partial = partial_dir_for(&source);
        std::fs::create_dir(&partial).unwrap();
        let output = partial.join("output.mkv");
        std::fs::write(&output, b"new").unwrap();
        let target = dir.path().join(final_name);
        let identity = SourceIdentity::of(&source).unwrap();
        let r = Replace { source: &source, identity, output: &output, final_path: &target, keep_original: false };
        Intent::of(&r).unwrap().write(&partial).unwrap();
        (dir, source, output, target)
    }

    #[test]
    fn roll_forward_finishes_a_swap_and_drops_an_intent_whose_swap_never_happened() {
        // Crash before the swap: the intent goes, the original stays.
        let (_dir, source, _output, _) = with_intent("movie.mkv", "movie.mkv");
        assert_eq!(roll_forward(&source, false).unwrap(), None);
        assert!(!partial_dir_for(&source).join(INTENT_FILE).exists());
        assert_eq!(std::fs::read(&source).unwrap(), b"original bytes");

        // Crash after the swap (same name): the job completes with the output in place.
        let (_dir, source, output, _) = with_intent("movie.mkv", "movie.mkv");
        std::fs::rename(&output, &source).unwrap();
        let swapped = roll_forward(&source, false).unwrap().unwrap();
        assert_eq!(swapped, Swapped { final_path: source.clone(), output_size: 3 });

        // Crash after the swap of a container change: the original goes, or is kept.
        for keep in [false, true] {
            let (_dir, source, output, target) = with_intent("clip.mkv", "clip.avi");
            std::fs::rename(&output, &target).unwrap();
            let swapped = roll_forward(&source, keep).unwrap().unwrap();
            assert_eq!(swapped.final_path, target);
            assert!(!source.exists());
            assert_eq!(backup_path_for(&source).exists(), keep);
            assert_eq!(std::fs::read(&target).unwrap(), b"new");
        }
        // No intent: nothing to do.
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(roll_forward(&dir.path().join("x.mkv"), false).unwrap(), None);
    }
}
