//! Every name a library holds works: a name as long as a name may be (its partial folder
//! and backups would pass 255 bytes) and a name that is not UTF-8 (Latin-1, from an old NAS
//! share) are encoded and replaced through the real server, the bytes of the name kept.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use condense::repo;
use serde_json::{json, Value};

use crate::common::api::TestServer;
use crate::common::db::TestDb;
use crate::common::media as clips;

/// `caf\xE9 cr\xE8me.mkv` in Latin-1: not UTF-8.
const LATIN1: &[u8] = b"caf\xe9 cr\xe8me.mkv";

/// A 251-byte UTF-8 name, with two-byte characters where its partial folder's name would be
/// cut.
fn long_name() -> String {
    let mut name = String::from("\u{c9}pisode ");
    while name.len() < 200 {
        name.push('x');
    }
    while name.len() < 245 {
        name.push('\u{e9}');
    }
    while name.len() < 247 {
        name.push('y');
    }
    name.push_str(".mkv");
    assert_eq!(name.len(), 251);
    name
}

fn codec_of(path: &Path) -> String {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name", "-of", "csv=p=0"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn names_in(dir: &Path) -> Vec<OsString> {
    let mut names: Vec<OsString> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    names
}

async fn wait_ended(server: &TestServer, token: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let jobs = server.jobs(token).await;
        let ended = jobs
            .iter()
            .all(|j| ["COMPLETED", "FAILED", "SKIPPED", "CANCELLED"].contains(&j["status"].as_str().unwrap_or("")));
        if jobs.len() == n && ended {
            return jobs;
        }
        assert!(Instant::now() < deadline, "jobs did not end: {jobs:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn long_and_latin1_names_are_encoded_and_replaced(test_db: TestDb) {
    let server = TestServer::start_throttled(test_db, 0).await;
    let token = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join(long_name());
    let latin1 = dir.path().join(OsStr::from_bytes(LATIN1));
    for (path, seed) in [(&long, "a.mkv"), (&latin1, "b.mkv")] {
        let made = clips::h264(dir.path(), seed, "320x240", 2);
        std::fs::rename(made, path).unwrap();
        assert_eq!(codec_of(path), "h264");
    }
    let sizes: Vec<u64> = [&long, &latin1].iter().map(|p| std::fs::metadata(p).unwrap().len()).collect();
    let library = server.library_with(&token, dir.path(), json!({"watch": true})).await;
    let (status, report) = server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;
    assert_eq!(status, 200, "{report}");

    let ended = wait_ended(&server, &token, 2).await;
    for job in &ended {
        assert_eq!(job["status"], "COMPLETED", "{job:#}");
    }
    // Both replaced in place, under their own names, byte for byte; nothing else left.
    for (path, size) in [(&long, sizes[0]), (&latin1, sizes[1])] {
        assert_eq!(codec_of(path), "hevc", "{}", path.display());
        assert!(std::fs::metadata(path).unwrap().len() < size, "{} not smaller", path.display());
    }
    let mut expected = vec![OsString::from(long_name()), OsString::from_vec(LATIN1.to_vec())];
    expected.sort();
    assert_eq!(names_in(dir.path()), expected, "a partial folder, a backup or a mangled name was left");

    // The API shows the readable form; the database keeps the bytes.
    let shown: Vec<(&str, &str)> =
        ended.iter().map(|j| (j["fileName"].as_str().unwrap(), j["filePath"].as_str().unwrap())).collect();
    let folder = dir.path().to_str().unwrap();
    let readable_latin1 = format!("{folder}/caf\\xE9 cr\\xE8me.mkv");
    let readable_long = format!("{folder}/{}", long_name());
    assert!(shown.contains(&("caf\\xE9 cr\\xE8me.mkv", readable_latin1.as_str())), "{shown:?}");
    assert!(shown.contains(&(long_name().as_str(), readable_long.as_str())), "{shown:?}");
    let row = repo::jobs::find_by_path(server.db(), &latin1).await.unwrap().unwrap();
    assert_eq!(row.file_path, readable_latin1);
    assert_eq!(row.file_path_raw.as_deref(), Some(latin1.as_os_str().as_bytes()));
    assert_eq!(repo::jobs::source_path(&row), latin1);
    let row = repo::jobs::find_by_path(server.db(), &long).await.unwrap().unwrap();
    assert_eq!((row.file_path.as_str(), row.file_path_raw), (readable_long.as_str(), None));
    // The readable form names no file: it finds no job.
    assert!(repo::jobs::find_by_path(server.db(), PathBuf::from(&readable_latin1)).await.unwrap().is_none());

    // A rescan knows both files by their bytes: no new job, nothing queued.
    let (status, report) = server.post(&format!("/libraries/{library}/scan"), Some(&token), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!((report["found"].as_u64(), report["queued"].as_u64()), (Some(2), Some(0)), "{report}");
    assert_eq!(server.jobs(&token).await.len(), 2);
    server.finish().await;
}

mod long_and_latin1_names_complete_as_hevc {
    #[actix_web::test]
    async fn sqlite() {
        super::long_and_latin1_names_are_encoded_and_replaced(crate::common::db::TestDb::sqlite().await).await;
    }

    #[actix_web::test]
    async fn postgres() {
        let name = concat!(module_path!(), "::postgres");
        let Some(test_db) = crate::common::db::TestDb::postgres(name).await else { return };
        super::long_and_latin1_names_are_encoded_and_replaced(test_db).await;
    }
}

/// A partial folder whose name was shortened cannot be read back into its source's name:
/// the scan's orphan sweep finds its owner among the jobs of its folder. A live job's folder
/// stays; one nobody owns goes, as a folder with a name kept whole always did.
mod a_shortened_partial_folder_belongs_to_its_live_job {
    use std::time::Duration;

    use condense::media::layout::{partial_dir_for, source_of_partial};
    use condense::repo;
    use sea_orm::DatabaseConnection;

    use super::long_name;
    use crate::both_backends;
    use crate::common::runtime::library;

    both_backends!(by_the_sweep, |db: DatabaseConnection| async move {
        // LIKE's wildcards in the folder's name match nothing they should not.
        let root = tempfile::tempdir().unwrap();
        let (dir, lookalike) = (root.path().join("a_b%"), root.path().join("aXbYZ"));
        for folder in [&dir, &lookalike] {
            std::fs::create_dir(folder).unwrap();
        }
        let live = dir.join(long_name());
        std::fs::write(&live, b"not decoded by a scan").unwrap();
        let gone = dir.join(long_name().replacen('x', "z", 1));
        let elsewhere = lookalike.join(long_name());
        for source in [&live, &gone, &elsewhere] {
            std::fs::create_dir(partial_dir_for(source)).unwrap();
            assert_eq!(source_of_partial(&partial_dir_for(source)), None);
        }
        let mut films = library(root.path(), false);
        films.paths = vec![dir.to_string_lossy().into_owned()];
        let films = repo::libraries::create(&db, films).await.unwrap();
        condense::actors::library::scan(&db, films.id, Duration::ZERO).await.unwrap();

        let owners = repo::jobs::live_under(&db, &dir).await.unwrap();
        assert_eq!(owners.iter().map(repo::jobs::source_path).collect::<Vec<_>>(), std::slice::from_ref(&live));
        assert!(partial_dir_for(&live).is_dir(), "the live job's partial output was removed");
        assert!(!partial_dir_for(&gone).exists(), "a partial output nobody owns was left");
        assert!(partial_dir_for(&elsewhere).is_dir(), "a folder outside the library was swept");
        assert!(repo::jobs::live_under(&db, &lookalike).await.unwrap().is_empty());
    });
}
