//! The binary as users run it: `serve`, `migrate`, `user`, settings errors, signals.

use std::process::Stdio;
use std::time::Duration;

use condense::domain::job::JobStatus;

use crate::common::cluster::{self, call};
use crate::common::db::{drop_schema, TestDb};
use crate::common::server::{command, ServerProcess};

fn password_lines(lines: &[String]) -> Vec<&String> {
    lines.iter().filter(|l| l.contains("with password:")).collect()
}

#[actix_web::test]
async fn first_start_on_sqlite_serves_health_and_prints_the_password_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = ServerProcess::start(command(&data));

    let (status, body) = call("GET", &format!("{}/healthz", server.api), None, None).await;
    assert_eq!(status, 200, "{body}");
    // Without a token, the status alone: no version, node name or database to map.
    assert_eq!(body, serde_json::json!({"status": "ok"}));
    let (status, _) = call("GET", &format!("{}/api/healthz", server.api), None, None).await;
    assert_eq!(status, 200);
    let (status, body) = call("GET", &format!("{}/no/such/route", server.api), None, None).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found");
    // The web interface listener answers too, with the API under /api.
    let (status, _) = call("GET", &format!("{}/api/healthz", server.ui), None, None).await;
    assert_eq!(status, 200);
    let mut page = awc::Client::default().get(&server.ui).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(String::from_utf8_lossy(&page.body().await.unwrap()).contains("condense"));

    assert!(data.join("condense.db").is_file(), "no SQLite file under DATA_DIR");
    assert!(data.join("jwt-secret").is_file());

    let status = server.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "SIGTERM should stop gracefully, got {status}");
    let lines = server.output();
    let printed = password_lines(&lines);
    assert_eq!(printed.len(), 1, "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("SIGTERM")), "{lines:#?}");
    // The password goes to the terminal, never to the log files.
    let password = printed[0].rsplit(' ').next().unwrap().to_string();
    let logs: Vec<_> = std::fs::read_dir(data.join("logs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!logs.is_empty(), "no log file under DATA_DIR/logs");
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("listening"), "{}", log.display());
        assert!(!text.contains(&password), "password written to {}", log.display());
    }

    // Second start: same database, no new password.
    let mut again = ServerProcess::start(command(&data));
    let (status, _) = call("GET", &format!("{}/healthz", again.api), None, None).await;
    assert_eq!(status, 200);
    assert!(again.signal_and_wait(libc::SIGINT).success());
    assert!(password_lines(&again.output()).is_empty(), "{:#?}", again.output());
}

async fn get_bytes(url: &str) -> (u16, String, Vec<u8>) {
    let mut response = awc::Client::default().get(url).send().await.unwrap();
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, content_type, response.body().limit(64 << 20).await.unwrap().to_vec())
}

/// The dashboard comes with the binary: started in a folder that holds no frontend/dist, it
/// serves the files it was built with (index.html for the app's own routes), or says it was
/// built without them.
#[actix_web::test]
async fn the_dashboard_is_served_from_any_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command(&dir.path().join("data"));
    cmd.current_dir(dir.path());
    let server = ServerProcess::start(cmd);
    let embedded = condense::http::ui::embedded_files();
    let (status, content_type, page) = get_bytes(&server.ui).await;
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let page = String::from_utf8(page).unwrap();
    if embedded.is_empty() {
        // Built before the dashboard (a bare `cargo build`): the page says what to do.
        assert!(page.contains("The dashboard has not been built"), "{page}");
        eprintln!("NOTE frontend/dist was not built when condense was: only the placeholder page was checked");
        return;
    }
    // What the binary holds is frontend/dist as it was built (read from there by a debug build).
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("frontend/dist");
    assert_eq!(page, std::fs::read_to_string(dist.join("index.html")).unwrap());
    let (status, _, route) = get_bytes(&format!("{}/jobs/42", server.ui)).await;
    assert_eq!((status, route), (200, page.clone().into_bytes()), "an app route answers index.html");
    let script = embedded.iter().find(|f| f.starts_with("assets/") && f.ends_with(".js")).expect("a script bundle");
    assert!(page.contains(script.as_str()), "index.html names {script}");
    let (status, content_type, bytes) = get_bytes(&format!("{}/{script}", server.ui)).await;
    assert_eq!(status, 200);
    assert!(content_type.contains("javascript"), "{content_type}");
    assert_eq!(bytes, std::fs::read(dist.join(script)).unwrap());
}

/// FRONTEND_DIR replaces the dashboard built into the binary with a folder of its own.
#[actix_web::test]
async fn frontend_dir_overrides_the_built_in_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    std::fs::create_dir_all(dist.join("assets")).unwrap();
    std::fs::write(dist.join("index.html"), "<!doctype html><title>own dashboard</title>").unwrap();
    std::fs::write(dist.join("assets/app.js"), "console.log('own');").unwrap();
    let mut cmd = command(&dir.path().join("data"));
    cmd.current_dir(dir.path()).env("FRONTEND_DIR", "dist");
    let server = ServerProcess::start(cmd);
    for path in ["/", "/jobs/42"] {
        let (status, _, page) = get_bytes(&format!("{}{path}", server.ui)).await;
        assert_eq!((status, page.as_slice()), (200, b"<!doctype html><title>own dashboard</title>".as_slice()));
    }
    let (status, content_type, script) = get_bytes(&format!("{}/assets/app.js", server.ui)).await;
    assert_eq!((status, script.as_slice()), (200, b"console.log('own');".as_slice()));
    assert!(content_type.contains("javascript"), "{content_type}");
    // The API is still under /api on the same listener.
    let (status, _) = call("GET", &format!("{}/api/healthz", server.ui), None, None).await;
    assert_eq!(status, 200);
}

/// Both listeners send a Content-Security-Policy and the frame and content-type
/// protections: the dashboard's policy allows only its own origin, the API's nothing. The
/// browser tests (frontend/e2e) fail on any violation the dashboard causes under it.
#[actix_web::test]
async fn both_listeners_send_the_security_headers() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(command(&dir.path().join("data")));
    let headers_of = |url: String| async move {
        let response = awc::Client::default().get(&url).send().await.unwrap();
        let header = |name: &str| {
            response.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_else(|| {
                panic!("{url} has no {name} header");
            })
        };
        (header("content-security-policy"), header("x-frame-options"), header("x-content-type-options"))
    };
    for url in [format!("{}/", server.ui), format!("{}/jobs/42", server.ui), format!("{}/api/healthz", server.ui)] {
        let (policy, frames, sniffing) = headers_of(url.clone()).await;
        assert_eq!(policy, condense::http::headers::DASHBOARD_POLICY, "{url}");
        assert!(policy.contains("script-src 'self';") && policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"), "{policy}");
        assert_eq!((frames.as_str(), sniffing.as_str()), ("DENY", "nosniff"), "{url}");
    }
    for url in
        [format!("{}/healthz", server.api), format!("{}/api/jobs", server.api), format!("{}/nowhere", server.api)]
    {
        let (policy, frames, sniffing) = headers_of(url.clone()).await;
        assert_eq!(policy, "default-src 'none'; frame-ancestors 'none'", "{url}");
        assert_eq!((frames.as_str(), sniffing.as_str()), ("DENY", "nosniff"), "{url}");
    }
}

#[test]
fn bogus_role_exits_non_zero_naming_role() {
    let dir = tempfile::tempdir().unwrap();
    let output = command(dir.path()).env("ROLE", "bogus").arg("serve").stdin(Stdio::null()).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ROLE"), "{stderr}");
    assert!(stderr.contains("bogus"), "{stderr}");
}

#[test]
fn invalid_settings_name_their_variable() {
    let dir = tempfile::tempdir().unwrap();
    for (var, value) in [("PORT", "http"), ("DATABASE_URL", "mysql://x"), ("LOG_LEVEL", "[[[")] {
        let output = command(dir.path()).env(var, value).arg("serve").output().unwrap();
        assert!(!output.status.success(), "{var}={value} was accepted");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stderr), String::from_utf8_lossy(&output.stdout));
        assert!(text.contains(var), "{var}: {text}");
    }
    let output = command(dir.path()).env("ROLE", "linked").arg("serve").output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("MAIN_NODE_URL"));
}

/// Issue 39: a linked node's WORK_DIR (where files taken by transfer lie) must be a folder
/// of its own: a link to one stops the start, naming WORK_DIR, before the node links; so
/// does a SHARED_STORAGE that is neither `auto` nor `required`.
#[test]
fn a_linked_node_refuses_a_work_dir_that_is_a_link_and_a_bad_shared_storage() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    let link = dir.path().join("work");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let linked = || {
        let mut cmd = command(&dir.path().join("data"));
        cmd.env("ROLE", "linked")
            .env("MAIN_NODE_URL", "http://127.0.0.1:9")
            .env("CLUSTER_TOKEN", "0123456789abcdef")
            .arg("serve")
            .stdin(Stdio::null());
        cmd
    };
    let output = linked().env("WORK_DIR", &link).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("WORK_DIR") && stderr.contains("is a link"), "{stderr}");
    let output = linked().env("SHARED_STORAGE", "sometimes").output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("SHARED_STORAGE") && stderr.contains("sometimes"), "{stderr}");
}

#[test]
fn a_taken_port_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let output = command(dir.path()).env("PORT", &port).arg("serve").output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("PORT") && stderr.contains(&port), "{stderr}");
}

#[actix_web::test]
async fn serves_on_postgres() {
    let Some((schema, admin, url)) = TestDb::postgres_schema("process::serves_on_postgres").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command(dir.path());
    cmd.env("DATABASE_URL", &url).env("ADMIN_PASSWORD", cluster::PASSWORD);
    let mut server = ServerProcess::start(cmd);
    let (status, body) = call("GET", &format!("{}/healthz", server.api), None, None).await;
    assert_eq!(status, 200, "{body}");
    // The main node keeps its own facts fresh, as linked nodes do with heartbeats.
    let token = cluster::login(&server).await;
    // With a token, the details.
    let (_, health) = call("GET", &format!("{}/healthz", server.api), Some(&token), None).await;
    assert_eq!((&health["database"], &health["role"]), (&serde_json::json!("postgres"), &serde_json::json!("main")));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, nodes) = call("GET", &format!("{}/api/nodes", server.api), Some(&token), None).await;
        // ONLINE or, on a loaded machine, DEGRADED: either way a status from a fresh reading.
        let fresh = matches!(nodes[0]["status"].as_str(), Some("ONLINE" | "DEGRADED"));
        if nodes[0]["memoryUsed"].as_i64().unwrap_or(0) > 0 && fresh {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the main node's facts never refreshed: {nodes}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    assert!(!dir.path().join("condense.db").exists(), "PostgreSQL mode must not create a SQLite file");
    // The migrations ran in PostgreSQL: the admin user is there.
    let db = condense::repo::connect(&url).await.unwrap();
    let user = condense::repo::users::find(&db, "admin").await.unwrap().unwrap();
    assert!(condense::security::verify_password(cluster::PASSWORD, &user.password_hash));
    db.close().await.unwrap();
    drop_schema(&admin, &schema).await;
}

#[actix_web::test]
async fn user_commands_create_and_reset_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], password: Option<&str>| {
        let mut cmd = command(dir.path());
        if let Some(p) = password {
            cmd.env("CONDENSE_PASSWORD", p);
        }
        cmd.args(args).output().unwrap()
    };
    let out = run(&["migrate"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["user", "create", "alice"], Some("first password"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["user", "create", "alice"], Some("first password"));
    assert!(!out.status.success(), "a second alice was created");
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists"));
    let out = run(&["user", "create", "bob"], Some("short"));
    assert!(!out.status.success(), "a short password was accepted");
    let out = run(&["user", "reset-password", "alice"], None);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let generated = stdout.lines().find_map(|l| l.strip_prefix("password: ")).unwrap().to_string();
    let out = run(&["user", "reset-password", "nobody"], Some("whatever long"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));

    let db = crate::common::server::database_of(dir.path()).await;
    let alice = condense::repo::users::find(&db, "alice").await.unwrap().unwrap();
    assert!(condense::security::verify_password(&generated, &alice.password_hash));
    assert!(!condense::security::verify_password("first password", &alice.password_hash));
    assert!(condense::repo::users::find(&db, "bob").await.unwrap().is_none());
}

/// Processes running `condense-media transcode` for the node whose DATA_DIR is `data` (other
/// tests run at the same time).
fn transcoder_children(data: &std::path::Path) -> usize {
    crate::common::server::media_children(data, crate::common::server::Nodes::At, b"transcode").len()
}

#[actix_web::test]
async fn kill_9_of_the_server_mid_encode_then_restart_completes_the_job() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (db, source) = crate::common::server::library_with_clip(dir.path(), 8).await;
    let original = std::fs::read(&source).unwrap();

    // Watch the original's path for the whole test: it must never be missing.
    let stop = Arc::new(AtomicBool::new(false));
    let missing = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, missing, path) = (stop.clone(), missing.clone(), source.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if !path.exists() {
                    missing.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let slow = |cmd: &mut std::process::Command| {
        cmd.env("SEGMENT_SECONDS", "1")
            .env("CONDENSE_THROTTLE_MS_PER_FRAME", "30")
            .env("ADMIN_PASSWORD", "a long password");
    };
    let mut first = command(&data);
    slow(&mut first);
    let mut server = ServerProcess::start(first);
    let partial = condense::media::layout::partial_dir_for(&source);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let manifest = std::fs::read(partial.join("manifest.json")).ok();
        let segments = manifest
            .and_then(|m| serde_json::from_slice::<serde_json::Value>(&m).ok())
            .map(|m| m["segments"].as_array().map(std::vec::Vec::len).unwrap_or(0))
            .unwrap_or(0);
        if segments >= 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the encode never got going: {:#?}", server.output());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(transcoder_children(&data), 1, "the encode's transcoder should be running");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(transcoder_children(&data), 0, "a transcoder outlived its node");
    assert_eq!(std::fs::read(&source).unwrap(), original, "the original changed");
    let job = condense::repo::jobs::find_by_path(&db, source.to_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Encoding, "the crash left the job as it was");

    let mut second = command(&data);
    slow(&mut second);
    second.env("CONDENSE_THROTTLE_MS_PER_FRAME", "0");
    let mut server = ServerProcess::start(second);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let job = loop {
        let job = condense::repo::jobs::find_by_path(&db, source.to_str().unwrap()).await.unwrap().unwrap();
        if job.status == JobStatus::Completed || job.status == JobStatus::Failed {
            break job;
        }
        assert!(std::time::Instant::now() < deadline, "job stuck in {:?}: {:#?}", job.status, server.output());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    assert_eq!(job.status, JobStatus::Completed, "{:?}", job.failure_detail);
    assert!(!missing.load(Ordering::SeqCst), "the original's path was empty at some moment");
    let kinds: Vec<String> =
        condense::repo::events::list(&db, job.id).await.unwrap().into_iter().map(|e| e.kind).collect();
    let orphaned = kinds.iter().position(|k| k == "orphaned").expect("an orphaned event");
    assert_eq!(&kinds[orphaned..orphaned + 2], ["orphaned", "started"], "{kinds:?}");
    let info = condense_media::probe::probe(&source).unwrap();
    assert_eq!(info.video().unwrap().codec, "hevc");
    assert!((info.duration_seconds.unwrap() - 8.0).abs() < 0.5);
}

#[test]
fn license_keygen_and_issue_make_a_key_that_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let out = command(dir.path()).args(["license", "keygen"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).unwrap().trim().to_string();
    let (private, public) = (field("private:"), field("public:"));
    let out = command(dir.path())
        .env("CONDENSE_LICENSE_PRIVATE_KEY", &private)
        .args(["license", "issue", "--tier", "SUPPORTER", "--licensee", "Ada", "--expires", "2030-01-01T00:00:00Z"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let key = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let payload = condense::license::verify(&key, &public).unwrap();
    assert_eq!((payload.tier.as_str(), payload.licensee.as_str()), ("SUPPORTER", "Ada"));
    assert_eq!(payload.expires_at.unwrap().to_rfc3339(), "2030-01-01T00:00:00+00:00");
    // Another key pair's public key does not accept it.
    let (_, other) = condense::license::generate_keypair();
    assert!(condense::license::verify(&key, &other).is_err());
    let out = command(dir.path())
        .env("CONDENSE_LICENSE_PRIVATE_KEY", &private)
        .args(["license", "issue", "--tier", "GOLD", "--licensee", "Ada"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tier"));
}

/// `readelf -d` of a binary: the shared libraries it needs.
fn needed_libraries(binary: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("readelf").arg("-d").arg(binary).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next().map(str::to_string))
        .collect()
}

/// The node process neither links nor maps FFmpeg: `condense-media` does (and the node asks
/// it what this machine can encode), so a node's memory holds none of FFmpeg's libraries.
#[actix_web::test]
async fn the_server_binary_does_not_link_ffmpeg() {
    use crate::common::server::{binary, media_binary};
    let ffmpeg = |libs: &[String]| libs.iter().filter(|l| l.starts_with("libav") || l.starts_with("libsw")).count();
    let server_libs = needed_libraries(std::path::Path::new(binary()));
    assert_eq!(ffmpeg(&server_libs), 0, "condense needs {server_libs:?}");
    let media_libs = needed_libraries(media_binary());
    assert!(media_libs.iter().any(|l| l.starts_with("libavcodec")), "condense-media needs {media_libs:?}");

    let dir = tempfile::tempdir().unwrap();
    let mut server = ServerProcess::start(command(&dir.path().join("data")));
    let (status, _) = call("GET", &format!("{}/healthz", server.api), None, None).await;
    assert_eq!(status, 200);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", server.child.id())).unwrap();
    for lib in ["libavcodec", "libavformat", "libavutil", "libswscale", "libx265"] {
        assert!(!maps.contains(lib), "the server maps {lib}");
    }
    // What the media program found was taken in: the CPU encoders open on any machine.
    let lines = server.output();
    let encoders = lines.iter().find(|l| l.contains("encoders that open on this node")).cloned().unwrap_or_default();
    assert!(encoders.contains("libx265") && encoders.contains("libsvtav1"), "{lines:#?}");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}

/// A node whose `condense-media` is missing says so and does not start.
#[test]
fn a_server_without_its_media_binary_says_so() {
    use crate::common::server::{binary, media_binary};
    let dir = tempfile::tempdir().unwrap();
    let lonely = dir.path().join("condense");
    std::fs::copy(binary(), &lonely).unwrap();
    assert!(media_binary().is_file());
    let out = std::process::Command::new(&lonely)
        .arg("serve")
        .env_remove("DATABASE_URL")
        .env_remove("ROLE")
        .env("DATA_DIR", dir.path().join("data"))
        .env("BIND", "127.0.0.1")
        .env("PORT", "0")
        .env("UI_PORT", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("condense-media"), "{stderr}");
    let out = std::process::Command::new(&lonely).arg("probe").arg("/nothing.mkv").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("condense-media"));
}
