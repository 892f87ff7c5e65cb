//! The folders of a linked node's transfers in WORK_DIR (issue 39): one per job it takes
//! by transfer (`WORK_DIR/<job id>/`, the copy of the source, its hash, the partial output)
//! and one per job whose spans it encodes (`WORK_DIR/<job id>-spans/<span>/`). condense's
//! own folders: made, listed, emptied and removed through handles that never follow a link
//! (`media::handle::Folder`); a name that is no job id is never taken for one.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::media::handle::Folder;

/// The downloaded source's name in the node's folder for the job.
pub const SOURCE_FILE: &str = "source";
/// The SHA-256 the main node gave for the bytes in `SOURCE_FILE`: a resumed download whose
/// source has another hash now starts over.
pub const SOURCE_HASH_FILE: &str = "source.sha256";

/// The source's last bytes, fetched before the rest while the copy is read as it arrives
/// (issue 39, "download ahead"); removed once the download is whole.
pub const TAIL_FILE: &str = "source.tail";

/// Makes (or opens) job `job_id`'s folder in WORK_DIR: condense's own folder, never
/// reached through a link. Blocking.
pub fn make_job_dir(work_dir: &Path, job_id: i32) -> Result<PathBuf, String> {
    let work = match Folder::open_resolved(work_dir, "WORK_DIR") {
        Ok(Ok(work)) => work,
        Ok(Err(foreign)) => return Err(foreign.to_string()),
        Err(e) => return Err(format!("WORK_DIR ({}) cannot be opened: {e}", work_dir.display())),
    };
    let name = job_id.to_string();
    match work.own_folder(OsStr::new(&name), true, "the job's folder in WORK_DIR") {
        Ok(Ok(Some(_))) => Ok(work_dir.join(name)),
        Ok(Ok(None)) => Err(format!("the job's folder in WORK_DIR ({}) could not be made", work_dir.display())),
        Ok(Err(foreign)) => Err(foreign.to_string()),
        Err(e) => Err(format!("the job's folder in WORK_DIR ({}) cannot be made: {e}", work_dir.display())),
    }
}

/// Removes job `job_id`'s folder from WORK_DIR with all in it, each level opened without
/// following links (`Folder::remove_entry`). Blocking.
pub fn remove_job_dir(work_dir: &Path, job_id: i32) -> std::io::Result<()> {
    match Folder::open_resolved(work_dir, "WORK_DIR")? {
        Ok(work) => {
            work.remove_entry(OsStr::new(&job_id.to_string()))?;
            work.remove_entry(OsStr::new(&spans_dir_name(job_id)))
        }
        Err(foreign) => Err(std::io::Error::other(foreign.to_string())),
    }
}

/// The job id a name in WORK_DIR stands for: only the names condense gives job folders
/// (a job id as `make_job_dir` writes it: positive, no sign, no leading zero); anything
/// else there is not condense's and is left alone.
fn job_id_of(name: &OsStr) -> Option<i32> {
    let name = name.to_str()?;
    name.parse::<i32>().ok().filter(|id| *id > 0 && id.to_string() == name)
}

/// The name of the folder in WORK_DIR where this node encodes spans of job `job_id` that
/// it helps with by transfer: the copy of the source, a folder per span. Apart from the
/// job's own folder, which says the node may continue the whole job (`kept_jobs`).
fn spans_dir_name(job_id: i32) -> String {
    format!("{job_id}{SPANS_SUFFIX}")
}

const SPANS_SUFFIX: &str = "-spans";

/// The job id of a job's folder or of its spans' folder (`spans_dir_name`).
fn any_job_id_of(name: &OsStr) -> Option<i32> {
    let spans = name.to_str().and_then(|n| n.strip_suffix(SPANS_SUFFIX)).map(OsStr::new);
    job_id_of(spans.unwrap_or(name))
}

/// Makes (or opens) the folder of job `job_id`'s spans in WORK_DIR, and in it span
/// `span`'s folder, emptied of what an earlier try left: condense's own folders, never
/// reached through a link. Answers both. Blocking.
pub fn make_span_dir(work_dir: &Path, job_id: i32, span: u32) -> Result<(PathBuf, PathBuf), String> {
    let work = match Folder::open_resolved(work_dir, "WORK_DIR") {
        Ok(Ok(work)) => work,
        Ok(Err(foreign)) => return Err(foreign.to_string()),
        Err(e) => return Err(format!("WORK_DIR ({}) cannot be opened: {e}", work_dir.display())),
    };
    let (name, inner) = (spans_dir_name(job_id), format!("span-{span}"));
    let what = "the folder of a job's spans in WORK_DIR";
    let spans = match work.own_folder(OsStr::new(&name), true, what) {
        Ok(Ok(Some(folder))) => folder,
        Ok(Ok(None)) => return Err(format!("{what} ({}) could not be made", work_dir.display())),
        Ok(Err(foreign)) => return Err(foreign.to_string()),
        Err(e) => return Err(format!("{what} ({}) cannot be made: {e}", work_dir.display())),
    };
    spans.remove_entry(OsStr::new(&inner)).map_err(|e| format!("{what}: {e}"))?;
    match spans.own_folder(OsStr::new(&inner), true, what) {
        Ok(Ok(Some(_))) => Ok((work_dir.join(&name), work_dir.join(&name).join(inner))),
        Ok(Ok(None)) => Err(format!("{what} ({}) could not be made", work_dir.display())),
        Ok(Err(foreign)) => Err(foreign.to_string()),
        Err(e) => Err(format!("{what} ({}) cannot be made: {e}", work_dir.display())),
    }
}

/// Removes span `span`'s folder from job `job_id`'s spans' folder (the copy of the source
/// stays for the job's next span here, until the job ends: `actors::work_dir`). Blocking.
pub fn remove_span_dir(work_dir: &Path, job_id: i32, span: u32) -> std::io::Result<()> {
    let work = open_work_dir(work_dir)?;
    match work.own_folder(OsStr::new(&spans_dir_name(job_id)), false, "the folder of a job's spans in WORK_DIR")? {
        Ok(Some(spans)) => spans.remove_entry(OsStr::new(&format!("span-{span}"))),
        Ok(None) => Ok(()),
        Err(foreign) => Err(std::io::Error::other(foreign.to_string())),
    }
}

fn open_work_dir(work_dir: &Path) -> std::io::Result<Folder> {
    match Folder::open_resolved(work_dir, "WORK_DIR")? {
        Ok(work) => Ok(work),
        Err(foreign) => Err(std::io::Error::other(foreign.to_string())),
    }
}

/// The job folders in WORK_DIR (names that are job ids, and the folders of jobs' spans),
/// each with how long ago it was
/// last written: the latest modification time of the folder and of what is in it, the
/// partial folder's own (each finished segment changes it) among them, none followed. An
/// entry of that name that is not condense's own folder (a link, a file, another user's)
/// is reported as written `Duration::MAX` ago: it holds nothing to keep. Blocking.
pub fn job_dirs(work_dir: &Path) -> std::io::Result<Vec<(i32, Duration)>> {
    let work = open_work_dir(work_dir)?;
    let now = std::time::SystemTime::now();
    let mut found = Vec::new();
    for name in work.names()? {
        let Some(id) = any_job_id_of(&name) else { continue };
        let written = match work.own_folder(&name, false, "a job's folder in WORK_DIR") {
            Ok(Ok(Some(folder))) => {
                let mut latest = work.entry(&name)?.map_or(i64::MIN, |s| s.st_mtime);
                for inner in folder.names()? {
                    if let Some(stat) = folder.entry(&inner)? {
                        latest = latest.max(stat.st_mtime);
                    }
                }
                u64::try_from(latest).ok().map(|secs| std::time::UNIX_EPOCH + Duration::from_secs(secs))
            }
            Ok(Ok(None)) => continue,
            Ok(Err(_)) | Err(_) => None,
        };
        // A time ahead of the clock counts as now.
        let idle = written.map_or(Duration::MAX, |t| now.duration_since(t).unwrap_or(Duration::ZERO));
        found.push((id, idle));
    }
    // A job's own folder and its spans' folder: the one written last counts.
    found.sort_unstable();
    found.dedup_by_key(|(id, _)| *id);
    Ok(found)
}

/// The ids of the job folders in WORK_DIR, for the node's heartbeat (`kept_jobs`): empty
/// where WORK_DIR cannot be read. Blocking.
pub fn job_dir_ids(work_dir: &Path) -> Vec<i32> {
    let names = open_work_dir(work_dir).and_then(|work| work.names());
    let mut ids: Vec<i32> = names.unwrap_or_default().iter().filter_map(|n| job_id_of(n)).collect();
    ids.sort_unstable();
    ids
}

/// Whether WORK_DIR holds the folder of a job's spans (`make_span_dir`); `false` where it
/// cannot be read. Blocking.
pub fn has_spans_dirs(work_dir: &Path) -> bool {
    let names = open_work_dir(work_dir).and_then(|work| work.names()).unwrap_or_default();
    names.iter().any(|n| any_job_id_of(n).is_some() && job_id_of(n).is_none())
}

/// Removes every job folder in WORK_DIR (a node that takes no file by transfer, at its
/// start: none of those jobs comes back to it this way). Answers how many went. Blocking.
pub fn clear_job_dirs(work_dir: &Path) -> std::io::Result<usize> {
    let work = open_work_dir(work_dir)?;
    let mut removed = 0;
    for name in work.names()? {
        if any_job_id_of(&name).is_some() {
            work.remove_entry(&name)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// A job's folder kept from an earlier attempt, made ready for the download to continue
/// from: the copy that attempt completed (`copy`, the source checked and renamed) takes the
/// download's name again, so the download checks it against the SHA-256 the main node has
/// now, whole, before anything is encoded from it (a copy cut short by the kill is still
/// under the download's name and continues from its bytes). Answers the SHA-256 the kept
/// bytes were read under (`SOURCE_HASH_FILE`), `None` when the folder holds none. Nothing
/// is followed. Blocking.
pub fn reopen_copy(work_dir: &Path, job_id: i32, copy: &str) -> std::io::Result<Option<String>> {
    let work = open_work_dir(work_dir)?;
    let folder = match work.own_folder(OsStr::new(&job_id.to_string()), false, "the job's folder in WORK_DIR")? {
        Ok(Some(folder)) => folder,
        Ok(None) => return Ok(None),
        Err(foreign) => return Err(std::io::Error::other(foreign.to_string())),
    };
    let regular = |name: &str| -> std::io::Result<bool> {
        Ok(folder
            .entry(OsStr::new(name))?
            .is_some_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::RegularFile))
    };
    // A copy read as it arrived (`actors::job::ahead`) is a second name of the download's
    // file, and its end fetched first lies beside it: the download's name alone stays.
    let (copy_entry, download_entry) = (folder.entry(OsStr::new(copy))?, folder.entry(OsStr::new(SOURCE_FILE))?);
    let one_file = copy_entry.zip(download_entry).is_some_and(|(a, b)| (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino));
    if copy != SOURCE_FILE && one_file {
        folder.remove_entry(OsStr::new(copy))?;
        folder.sync()?;
    } else if copy != SOURCE_FILE && regular(copy)? {
        folder.rename(OsStr::new(copy), OsStr::new(SOURCE_FILE))?;
        folder.sync()?;
    }
    folder.remove_entry(OsStr::new(TAIL_FILE))?;
    if !regular(SOURCE_HASH_FILE)? {
        return Ok(None);
    }
    let mut text = String::new();
    let file = folder.open_file(OsStr::new(SOURCE_HASH_FILE), rustix::fs::OFlags::RDONLY, 0)?;
    std::io::Read::read_to_string(&mut std::io::Read::take(file, 256), &mut text)?;
    Ok(Some(text.trim().to_string()))
}

/// Removes from job `job_id`'s folder everything but `keep` (names in it): what an earlier
/// attempt made from a copy that is not the source the main node has now. Blocking.
pub fn keep_only(work_dir: &Path, job_id: i32, keep: &[&str]) -> std::io::Result<()> {
    let work = open_work_dir(work_dir)?;
    match work.own_folder(OsStr::new(&job_id.to_string()), false, "the job's folder in WORK_DIR")? {
        Ok(Some(folder)) => folder.clear(&keep.iter().map(OsStr::new).collect::<Vec<_>>()),
        Ok(None) => Ok(()),
        Err(foreign) => Err(std::io::Error::other(foreign.to_string())),
    }
}

/// Whether WORK_DIR has the room for `needed` bytes in the folder `dir` (a job's, or a job's
/// spans'), less what the copy of the source there already holds (a download continues
/// from it): `Ok(Some(why))` when it has not (`domain::transfer::short_of_room`), an error
/// when its free space cannot be read.
pub async fn short_of_room_in(work_dir: &Path, dir: &Path, needed: u64) -> Result<Option<String>, String> {
    let (w, copy) = (work_dir.to_path_buf(), dir.join(SOURCE_FILE));
    let room = tokio::task::spawn_blocking(move || {
        let have = std::fs::metadata(copy).map(|m| m.len()).unwrap_or(0);
        crate::host::disk::space(&w).map(|s| (have, s.free))
    })
    .await;
    match room {
        Ok(Ok((have, free))) => Ok(crate::domain::transfer::short_of_room(needed.saturating_sub(have), free)),
        Ok(Err(e)) => Err(format!("WORK_DIR's free space cannot be read: {e}")),
        Err(e) => Err(format!("WORK_DIR's free space cannot be read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_web::test]
    async fn the_room_asked_of_work_dir_counts_what_the_copy_already_holds() {
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("7");
        std::fs::create_dir(&dir).unwrap();
        // More than any disk: short, and the reason says so.
        let why = short_of_room_in(work.path(), &dir, u64::MAX).await.unwrap().unwrap();
        assert!(why.contains("WORK_DIR is full"), "{why}");
        // A copy that holds all that is needed: nothing more is asked of the disk.
        std::fs::write(dir.join(SOURCE_FILE), vec![0u8; 1 << 20]).unwrap();
        assert_eq!(short_of_room_in(work.path(), &dir, 1 << 20).await, Ok(None));
        // A WORK_DIR whose space cannot be read is an error, not room.
        let gone = work.path().join("gone");
        assert!(short_of_room_in(&gone, &gone, 1).await.unwrap_err().contains("cannot be read"));
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn only_job_id_names_are_job_folders_and_links_are_never_followed() {
        let work = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("precious"), b"not condense's").unwrap();
        for name in ["7", "12", "notes", "007", "-3", "+4"] {
            std::fs::create_dir(work.path().join(name)).unwrap();
        }
        std::fs::write(work.path().join("12/input.mkv"), b"copy").unwrap();
        std::fs::write(work.path().join("9"), b"a file").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), work.path().join("8")).unwrap();
        let found = job_dirs(work.path()).unwrap();
        let ids: Vec<i32> = found.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [7, 8, 9, 12]);
        // Condense's folders were written a moment ago; a link or a file holds nothing to keep.
        for (id, idle) in &found {
            let own = matches!(id, 7 | 12);
            assert_eq!(*idle < Duration::from_secs(60), own, "{id}: {idle:?}");
            assert_eq!(*idle == Duration::MAX, !own, "{id}: {idle:?}");
        }
        assert_eq!(job_dir_ids(work.path()), [7, 8, 9, 12]);
        // Removing them removes the link itself, never what it points to.
        for id in [8, 9, 12] {
            remove_job_dir(work.path(), id).unwrap();
        }
        assert_eq!(names(work.path()), ["+4", "-3", "007", "7", "notes"]);
        assert_eq!(names(elsewhere.path()), ["precious"]);
        assert_eq!(clear_job_dirs(work.path()).unwrap(), 1);
        assert_eq!(names(work.path()), ["+4", "-3", "007", "notes"]);
    }

    #[test]
    fn a_kept_copy_takes_the_downloads_name_again_and_a_changed_source_empties_the_folder() {
        let work = tempfile::tempdir().unwrap();
        // Nothing kept: no hash.
        assert_eq!(reopen_copy(work.path(), 5, "input.mkv").unwrap(), None);
        let dir = make_job_dir(work.path(), 5).unwrap();
        assert_eq!(reopen_copy(work.path(), 5, "input.mkv").unwrap(), None);
        // A completed copy, its hash, and segments beside it.
        std::fs::write(dir.join("input.mkv"), b"the whole source").unwrap();
        std::fs::write(dir.join(SOURCE_HASH_FILE), "ab12\n").unwrap();
        std::fs::create_dir(dir.join(".input.mkv.condense-partial")).unwrap();
        assert_eq!(reopen_copy(work.path(), 5, "input.mkv").unwrap().as_deref(), Some("ab12"));
        assert_eq!(names(&dir), [".input.mkv.condense-partial", SOURCE_FILE, SOURCE_HASH_FILE]);
        assert_eq!(std::fs::read(dir.join(SOURCE_FILE)).unwrap(), b"the whole source");
        // A download cut short (no copy yet) stays as it is.
        assert_eq!(reopen_copy(work.path(), 5, "input.mkv").unwrap().as_deref(), Some("ab12"));
        assert_eq!(std::fs::read(dir.join(SOURCE_FILE)).unwrap(), b"the whole source");
        // Another source now: everything but the download goes.
        keep_only(work.path(), 5, &[SOURCE_FILE, SOURCE_HASH_FILE]).unwrap();
        assert_eq!(names(&dir), [SOURCE_FILE, SOURCE_HASH_FILE]);
        // A link where the copy or the hash should be is not followed.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("h"), "ffff").unwrap();
        std::fs::remove_file(dir.join(SOURCE_HASH_FILE)).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("h"), dir.join(SOURCE_HASH_FILE)).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("h"), dir.join("input.mkv")).unwrap();
        assert_eq!(reopen_copy(work.path(), 5, "input.mkv").unwrap(), None);
        assert_eq!(std::fs::read(dir.join(SOURCE_FILE)).unwrap(), b"the whole source");
        assert_eq!(std::fs::read(elsewhere.path().join("h")).unwrap(), b"ffff");
    }

    /// A folder a kill left mid-download-ahead: the copy a second name of the download's
    /// file, the source's end beside it. The download's name alone stays, with its bytes.
    #[test]
    fn a_copy_read_as_it_arrived_keeps_only_the_downloads_name() {
        let work = tempfile::tempdir().unwrap();
        let dir = make_job_dir(work.path(), 6).unwrap();
        std::fs::write(dir.join(SOURCE_FILE), b"half of the sou").unwrap();
        std::fs::hard_link(dir.join(SOURCE_FILE), dir.join("input.mkv")).unwrap();
        std::fs::write(dir.join(TAIL_FILE), b"rce").unwrap();
        std::fs::write(dir.join(SOURCE_HASH_FILE), "cd34").unwrap();
        assert_eq!(reopen_copy(work.path(), 6, "input.mkv").unwrap().as_deref(), Some("cd34"));
        assert_eq!(names(&dir), [SOURCE_FILE, SOURCE_HASH_FILE]);
        assert_eq!(std::fs::read(dir.join(SOURCE_FILE)).unwrap(), b"half of the sou");
    }
}
