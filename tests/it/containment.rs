//! Nothing but its own files (issue 34): an attacker with write access to a library folder,
//! or holding an integration key, cannot make condense create, change or delete anything
//! outside that library and its own files. Each test plants what the attack plants, through
//! the real server, with real clips, and compares a sentinel tree outside the library byte
//! for byte.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use condense::media::layout::{backup_path_for, numbered_backup_path, partial_dir_for};
use serde_json::json;

use crate::common::api::{failure_message, TestServer};
use crate::common::db::TestDb;
use crate::common::media as clips;

/// Everything under `root`, not following links: each entry's kind, mode, and its bytes
/// (a file) or target (a link).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let mode = meta.mode();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, ("link".into(), mode, target.into_os_string().into_encoded_bytes()));
            } else if meta.is_dir() {
                out.insert(rel, ("dir".into(), mode, Vec::new()));
                stack.push(path);
            } else {
                out.insert(rel, ("file".into(), mode, std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// A tree outside every library that no job may touch.
fn sentinel(base: &Path) -> PathBuf {
    let root = base.join("sentinel");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("precious.txt"), b"the only copy").unwrap();
    std::fs::write(root.join("sub/deeper.txt"), b"also the only copy").unwrap();
    std::fs::write(root.join("wedding.mkv"), b"not a video, and not condense's").unwrap();
    root
}

/// Scans and answers the job ids by file name.
async fn scan(server: &TestServer, token: &str, library: i64) -> BTreeMap<String, i64> {
    server.scan(token, library).await.into_iter().collect()
}

/// A library folder (resolved, as libraries are stored) and a sentinel beside it.
fn places() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let lib = base.join("media/films");
    std::fs::create_dir_all(&lib).unwrap();
    let sentinel = sentinel(&base);
    (tmp, lib, sentinel)
}

#[actix_web::test]
async fn a_link_planted_where_the_partial_output_goes_fails_the_job_and_empties_nothing() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let (_tmp, lib, sentinel) = places();
    let clip = clips::h264(&lib, "clip.mkv", "160x120", 1);
    std::fs::write(lib.join("junk.mkv"), vec![0x5a; 50_000]).unwrap();
    let before = snapshot(&sentinel);
    let (clip_bytes, junk_bytes) = (std::fs::read(&clip).unwrap(), std::fs::read(lib.join("junk.mkv")).unwrap());
    std::os::unix::fs::symlink(&sentinel, partial_dir_for(&clip)).unwrap();
    std::os::unix::fs::symlink(&sentinel, partial_dir_for(&lib.join("junk.mkv"))).unwrap();

    let id = server.library(&token, &lib).await;
    let jobs = scan(&server, &token, id).await;
    for name in ["clip.mkv", "junk.mkv"] {
        let ended = server.wait_for(&token, jobs[name], &["COMPLETED", "FAILED", "SKIPPED"]).await;
        assert_eq!(ended["status"], "FAILED", "{name}: {ended}");
        let message = failure_message(&ended);
        assert!(message.contains("a symlink stands where the partial output would go"), "{name}: {message}");
    }
    assert_eq!(snapshot(&sentinel), before, "the sentinel changed");
    assert_eq!(std::fs::read(&clip).unwrap(), clip_bytes);
    assert_eq!(std::fs::read(lib.join("junk.mkv")).unwrap(), junk_bytes);
    assert!(std::fs::symlink_metadata(partial_dir_for(&clip)).unwrap().file_type().is_symlink(), "the link is left");
    server.finish().await;
}

#[actix_web::test]
async fn a_link_put_in_place_of_the_partial_folder_while_the_job_runs_leads_nowhere() {
    // 40 ms a frame: a 4 s clip takes about 4 s to encode, time to swap the folder.
    let server = TestServer::start_throttled(TestDb::sqlite().await, 40).await;
    let token = server.login().await;
    let (_tmp, lib, sentinel) = places();
    let clip = clips::h264(&lib, "clip.mkv", "160x120", 4);
    let (before, original) = (snapshot(&sentinel), std::fs::read(&clip).unwrap());
    let id = server.library(&token, &lib).await;
    let jobs = scan(&server, &token, id).await;
    let partial = partial_dir_for(&clip);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !partial.join("manifest.json").exists() {
        assert!(Instant::now() < deadline, "the encode never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // What someone with write access to the folder can do to condense's own folder: move it
    // away and put a link in its place.
    std::fs::rename(&partial, lib.join(".moved-away")).unwrap();
    std::os::unix::fs::symlink(&sentinel, &partial).unwrap();
    let ended = server.wait_for(&token, jobs["clip.mkv"], &["COMPLETED", "FAILED", "SKIPPED"]).await;
    assert_eq!(ended["status"], "FAILED", "{ended}");
    assert!(failure_message(&ended).contains("a symlink stands where the partial output would go"), "{ended}");
    assert_eq!(snapshot(&sentinel), before, "the sentinel changed");
    assert_eq!(std::fs::read(&clip).unwrap(), original, "the original changed");
    server.finish().await;
}

#[actix_web::test]
async fn the_arr_webhook_takes_no_path_that_resolves_outside_the_libraries() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let (tmp, lib, sentinel) = places();
    let base = tmp.path().canonicalize().unwrap();
    std::fs::create_dir_all(lib.join("Show")).unwrap();
    clips::h264(&lib.join("Show"), "e1.mkv", "160x120", 1);
    std::os::unix::fs::symlink(&sentinel, lib.join("Show/Season 02")).unwrap();
    let before = snapshot(&sentinel);
    // Scanned before the webhooks: the scan a new library starts runs in the background.
    let library = server.library(&token, &lib).await;
    server.scan(&token, library).await;
    let (_, key) = server.post("/api-keys", Some(&token), &json!({"name": "sonarr", "scope": "integration"})).await;
    let key = key["key"].as_str().unwrap().to_string();
    let import = |path: String| {
        let (server, key) = (&server, key.clone());
        async move {
            let body = json!({"eventType": "Download", "episodeFile": {"id": 1, "relativePath": "x", "path": path}});
            server.post(&format!("/integrations/arr?apikey={key}"), None, &body).await
        }
    };
    let wording = |path: &str| {
        format!("{path} is not a media file in any library (as condense sees it: check the *arr path mappings, PUT /settings/arr)")
    };
    let refused = [
        // `..` out of the library, to a file that exists and to one that does not.
        format!("{}/Show/../../../sentinel/wedding.mkv", lib.display()),
        format!("{}/Show/../../../sentinel/missing.mkv", lib.display()),
        // A folder inside the library that is a link leading out.
        format!("{}/Show/Season 02/wedding.mkv", lib.display()),
        // Outside, plainly; and nowhere at all.
        format!("{}/wedding.mkv", sentinel.display()),
        format!("{}/nowhere/x.mkv", base.display()),
    ];
    for path in refused {
        let (status, body) = import(path.clone()).await;
        assert_eq!(status, 422, "{path}: {body}");
        assert_eq!(body["error"]["message"], wording(&path), "{path}: one wording, whatever exists");
    }
    // The library's own scan found e1.mkv; nothing else was ever a job.
    let (_, page) = server.get("/jobs", Some(&token)).await;
    let paths: Vec<&str> = page["items"].as_array().unwrap().iter().map(|j| j["filePath"].as_str().unwrap()).collect();
    assert_eq!(paths, [lib.join("Show/e1.mkv").display().to_string()], "{page}");
    // A path with `..` that stays inside is taken in under its resolved name.
    let (status, answer) = import(format!("{}/Show/../Show/e1.mkv", lib.display())).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["job"]["filePath"], lib.join("Show/e1.mkv").display().to_string(), "{answer}");
    assert_eq!(snapshot(&sentinel), before);
    server.finish().await;
}

#[actix_web::test]
async fn a_replaced_file_keeps_the_originals_mode_owner_and_when_asked_its_time() {
    let server = TestServer::start_throttled(TestDb::sqlite().await, 0).await;
    let token = server.login().await;
    let (_tmp, lib, _sentinel) = places();
    let clip = clips::h264(&lib, "private.mkv", "320x240", 1);
    let original = std::fs::read(&clip).unwrap();
    std::fs::set_permissions(&clip, std::fs::Permissions::from_mode(0o640)).unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        std::os::unix::fs::chown(&clip, Some(1234), Some(2345)).unwrap();
    }
    let stamp = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options().write(true).open(&clip).unwrap().set_modified(stamp).unwrap();
    let id = server.library_with(&token, &lib, json!({"keepModifiedTime": true})).await;
    let jobs = scan(&server, &token, id).await;
    let done = server.wait_for(&token, jobs["private.mkv"], &["COMPLETED", "FAILED", "SKIPPED"]).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    let meta = std::fs::metadata(&clip).unwrap();
    assert_ne!(std::fs::read(&clip).unwrap(), original, "the file was replaced");
    assert_eq!(meta.mode() & 0o7777, 0o640, "the mode");
    if root {
        assert_eq!((meta.uid(), meta.gid()), (1234, 2345), "the owner and group");
    }
    assert_eq!(meta.modified().unwrap(), stamp, "keepModifiedTime");
    let (status, library) = server.get(&format!("/libraries/{id}"), Some(&token)).await;
    assert_eq!((status, &library["keepModifiedTime"]), (200, &json!(true)), "{library}");
    server.finish().await;
}

/// What an attacker can plant at a name condense uses beside a source.
#[derive(Debug, Clone, Copy)]
enum Plant {
    ToSentinelFolder,
    ToSentinelFile,
    ToParent,
    Loop,
    Dangling,
}

/// Names condense uses beside `source` (`numbered` picks a kept original's number).
fn condense_names(source: &Path, final_name: &Path) -> Vec<PathBuf> {
    vec![partial_dir_for(source), backup_path_for(source), numbered_backup_path(source, 2), final_name.to_path_buf()]
}

fn plant(kind: Plant, at: &Path, sentinel: &Path) {
    let _ = std::fs::remove_file(at);
    match kind {
        Plant::ToSentinelFolder => std::os::unix::fs::symlink(sentinel, at).unwrap(),
        Plant::ToSentinelFile => std::os::unix::fs::symlink(sentinel.join("precious.txt"), at).unwrap(),
        Plant::ToParent => std::os::unix::fs::symlink("..", at).unwrap(),
        Plant::Loop => std::os::unix::fs::symlink(at.file_name().unwrap(), at).unwrap(),
        Plant::Dangling => std::os::unix::fs::symlink(sentinel.join("not-there"), at).unwrap(),
    }
}

/// A small deterministic generator (xorshift), so a failing case can be replayed from the
/// seed the test prints.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The property: whatever links are planted at whichever names condense uses, before a job
/// or while it runs, the sentinel outside the library is unchanged byte for byte, and every
/// original is either untouched or replaced by a whole output.
#[actix_web::test]
async fn random_links_at_every_name_condense_uses_never_reach_outside_the_library() {
    let seed = std::env::var("CONDENSE_CONTAINMENT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    eprintln!("containment property: CONDENSE_CONTAINMENT_SEED={seed}");
    let mut rng = Rng(seed);
    let server = TestServer::start_throttled(TestDb::sqlite().await, 10).await;
    let token = server.login().await;
    let (_tmp, lib, sentinel) = places();
    let before = snapshot(&sentinel);
    let id = server.library(&token, &lib).await;
    let kinds = [Plant::ToSentinelFolder, Plant::ToSentinelFile, Plant::ToParent, Plant::Loop, Plant::Dangling];
    // Every kind at every name before the job starts, and every kind in place of the
    // partial folder while the job runs; in an order and with sources the seed picks.
    let mut cases: Vec<(Plant, usize, bool)> = Vec::new();
    for kind in kinds {
        cases.extend((0..4).map(|name| (kind, name, false)));
        cases.push((kind, 0, true));
    }
    for i in (1..cases.len()).rev() {
        cases.swap(i, rng.below(i + 1));
    }
    for (round, (kind, name_index, during)) in cases.into_iter().enumerate() {
        // Some sources change container (an .avi becomes .mkv), so the final name is new;
        // a plant at the final name always gets one.
        let avi = name_index == 3 || rng.below(3) == 0;
        let name = if avi { format!("r{round}.avi") } else { format!("r{round}.mkv") };
        let source = clips::h264(&lib, &name, "160x120", 2);
        let original = std::fs::read(&source).unwrap();
        let final_name = source.with_extension("mkv");
        let names = condense_names(&source, &final_name);
        let at = names[name_index].clone();
        let case = format!(
            "round {round} (seed {seed}): {kind:?} at {} {}",
            at.display(),
            if during { "during" } else { "before" }
        );
        if !during {
            plant(kind, &at, &sentinel);
        }
        let jobs = scan(&server, &token, id).await;
        if during {
            // Until the encode has started, or the job ended first.
            let deadline = Instant::now() + Duration::from_secs(60);
            for polls in 0u32.. {
                if at.join("manifest.json").exists() || Instant::now() > deadline {
                    break;
                }
                if polls % 20 == 0 {
                    let status = server.job(&token, jobs[&name]).await["status"].clone();
                    if ["COMPLETED", "FAILED", "SKIPPED"].iter().any(|s| status == *s) {
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
                std::fs::rename(&at, lib.join(format!(".moved-{round}"))).unwrap();
            }
            plant(kind, &at, &sentinel);
        }
        let ended = server.wait_for(&token, jobs[&name], &["COMPLETED", "FAILED", "SKIPPED"]).await;
        assert_eq!(snapshot(&sentinel), before, "{case}: the sentinel changed; job {ended}");
        match ended["status"].as_str() {
            Some("COMPLETED") => {
                let out = PathBuf::from(ended["filePath"].as_str().unwrap());
                let meta = std::fs::symlink_metadata(&out)
                    .unwrap_or_else(|e| panic!("{case}: COMPLETED without its output: {e}: {ended}"));
                assert!(meta.is_file() && meta.len() > 0, "{case}: the output is a whole file");
                clips::ffmpeg(&["-i", out.to_str().unwrap(), "-f", "null", "-"]);
            }
            _ => {
                let still = std::fs::read(&source).unwrap_or_default();
                assert_eq!(still, original, "{case}: a job that did not complete changed its original: {ended}");
            }
        }
        // The next round starts clean: the plant and whatever condense left.
        for n in &names {
            if std::fs::symlink_metadata(n).is_ok_and(|m| m.file_type().is_symlink()) {
                std::fs::remove_file(n).unwrap();
            }
        }
    }
    assert_eq!(snapshot(&sentinel), before);
    server.finish().await;
}

/// DATA_DIR holds Plex tokens, SMTP passwords and the signing secret: it is made 0700 and
/// everything in it is its user's alone, as created; one left open by an older version is
/// closed.
#[actix_web::test]
async fn data_dir_and_everything_in_it_are_private_to_condense() {
    use crate::common::server::{command, ServerProcess};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = ServerProcess::start(command(&data));
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    let check = |data: &Path| {
        let mut seen = 0;
        let mut stack = vec![data.to_path_buf()];
        assert_eq!(std::fs::metadata(data).unwrap().mode() & 0o777, 0o700, "DATA_DIR");
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let meta = entry.metadata().unwrap();
                assert_eq!(meta.mode() & 0o077, 0, "{} is open to others: {:o}", entry.path().display(), meta.mode());
                if meta.is_dir() {
                    stack.push(entry.path());
                }
                seen += 1;
            }
        }
        seen
    };
    let seen = check(&data);
    assert!(data.join("condense.db").is_file() && data.join("jwt-secret").is_file() && seen >= 4, "{seen}");
    // Made before this rule, open to all: closed at the next start.
    let old = dir.path().join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut server = ServerProcess::start(command(&old));
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    check(&old);
}
