//! Notifications through the real server: a completed job and a failed one reach a webhook
//! (its signature checked here with an HMAC of our own), Discord, ntfy, Gotify, Apprise and an
//! SMTP server, each a real server on loopback that records what it got and answers as the
//! service documents; a receiver that is down gets its message once it is back, across a
//! restart of condense, exactly once. A replace is told to Plex, Jellyfin, Emby, Sonarr and
//! Radarr (servers here that answer as their APIs document), by the mapped path of its new
//! name; a health change reaches the outbox as `health.changed`. A library path the node
//! cannot read is checked again on its own (`HEALTH_RECHECK_MINUTES` later, on an injected
//! clock) and on demand, and each change reaches a webhook as `health.changed`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpRequest, HttpResponse};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::api_test_on_both_databases;
use crate::common::api::{serve, TestServer};
use crate::common::media as clips;
use crate::common::server::{command, ServerProcess};

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Answers as each service documents: Discord's webhook 204, Gotify's /message the created
/// message, ntfy the published message, Apprise 200, a webhook 200.
async fn record(req: HttpRequest, body: web::Bytes, log: web::Data<Log>) -> HttpResponse {
    let path = req.path().to_string();
    let headers =
        req.headers().iter().map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
    let (method, query) = (req.method().to_string(), req.query_string().to_string());
    log.lock().unwrap().push(Seen { method, path: path.clone(), query, headers, body: body.to_vec() });
    // An internal service's error page: what a port scanner would like to read back.
    if path.starts_with("/fail") {
        return HttpResponse::InternalServerError().body("stack trace: db password=hunter2 at 10.0.0.5:5432");
    }
    // The media stack: Plex's sections (JSON, as with Accept: application/json), the *arrs'
    // series and movies, and their command answers (201 with the queued command).
    if path == "/plex/library/sections" {
        return HttpResponse::Ok().json(json!({"MediaContainer": {"size": 2, "allowSync": false, "Directory": [
            {"key": "1", "type": "show", "title": "TV", "Location": [{"id": 1, "path": "/data/tv"}]},
            {"key": "4", "type": "movie", "title": "Films", "Location": [{"id": 7, "path": "/data/films"}]},
        ]}}));
    }
    if path == "/sonarr/api/v3/series" {
        return HttpResponse::Ok().json(json!([
            {"id": 2, "title": "Other", "path": "/data/films/Other"},
            {"id": 11, "title": "Film", "path": "/data/films/Film (2020)"},
        ]));
    }
    if path == "/radarr/api/v3/movie" {
        return HttpResponse::Ok()
            .json(json!([{"id": 5, "title": "Film", "year": 2020, "path": "/data/films/Film (2020)"}]));
    }
    if path.ends_with("/api/v3/command") {
        let mut command = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
        command["id"] = json!(1);
        command["status"] = json!("queued");
        return HttpResponse::Created().json(command);
    }
    if path.ends_with("/Library/Media/Updated") {
        return HttpResponse::NoContent().finish();
    }
    if path.starts_with("/discord/") {
        HttpResponse::NoContent().finish()
    } else if path == "/gotify/message" {
        HttpResponse::Ok().json(
            json!({"id": 1, "appid": 1, "message": "m", "title": "t", "priority": 5, "date": "2026-11-25T20:00:00Z"}),
        )
    } else if path.starts_with("/ntfy/") {
        HttpResponse::Ok().json(json!({"id": "a1", "time": 1, "event": "message", "topic": "films", "message": "m"}))
    } else {
        HttpResponse::Ok().finish()
    }
}

struct Receiver {
    base: String,
    log: Log,
    handle: ServerHandle,
}

impl Receiver {
    fn start(listener: std::net::TcpListener) -> Receiver {
        let base = format!("http://{}", listener.local_addr().unwrap());
        let log: Log = Arc::default();
        let data = web::Data::new(log.clone());
        let handle = serve(listener, move || App::new().app_data(data.clone()).default_service(web::to(record)));
        Receiver { base, log, handle }
    }

    fn seen(&self, path_prefix: &str) -> Vec<Seen> {
        self.log.lock().unwrap().iter().filter(|s| s.path.starts_with(path_prefix)).cloned().collect()
    }
}

/// One mail an SMTP session delivered: the envelope and the message.
#[derive(Debug, Clone, Default)]
struct Mail {
    from: String,
    to: Vec<String>,
    data: String,
}

/// A plain SMTP server (RFC 5321's dialogue, no extensions) that keeps what it is sent.
async fn smtp_server() -> (u16, Arc<Mutex<Vec<Mail>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mails: Arc<Mutex<Vec<Mail>>> = Arc::default();
    let kept = mails.clone();
    actix_web::rt::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let kept = kept.clone();
            actix_web::rt::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                let mut mail = Mail::default();
                write.write_all(b"220 test ESMTP\r\n").await.unwrap();
                while let Ok(Some(line)) = lines.next_line().await {
                    let upper = line.to_ascii_uppercase();
                    let answer: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                        b"250 test\r\n"
                    } else if upper.starts_with("MAIL FROM:") {
                        mail.from = line[10..].trim().trim_matches(['<', '>']).to_string();
                        b"250 OK\r\n"
                    } else if upper.starts_with("RCPT TO:") {
                        mail.to.push(line[8..].trim().trim_matches(['<', '>']).to_string());
                        b"250 OK\r\n"
                    } else if upper == "DATA" {
                        write.write_all(b"354 go ahead\r\n").await.unwrap();
                        while let Ok(Some(data)) = lines.next_line().await {
                            if data == "." {
                                break;
                            }
                            mail.data.push_str(&data);
                            mail.data.push('\n');
                        }
                        kept.lock().unwrap().push(std::mem::take(&mut mail));
                        b"250 queued\r\n"
                    } else if upper == "QUIT" {
                        write.write_all(b"221 bye\r\n").await.unwrap();
                        break;
                    } else {
                        b"250 OK\r\n"
                    };
                    write.write_all(answer).await.unwrap();
                }
            });
        }
    });
    (port, mails)
}

fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "waited in vain for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn every_kind_of_target_hears_of_a_completed_and_a_failed_job() {
    let receiver = Receiver::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let (smtp_port, mails) = smtp_server().await;
    // One job slot, no pause between frames: the two jobs run for real.
    let server = TestServer::start_throttled(crate::common::db::TestDb::sqlite().await, 0).await;
    let admin = server.login().await;
    let base = receiver.base.clone();
    let jobs = json!(["job.completed", "job.failed"]);
    let targets = [
        json!({"name": "hook", "kind": "webhook", "url": format!("{base}/hook"), "secret": "s3cret",
               "headers": {"X-Team": "media"}, "events": ["job.completed", "job.failed", "queue.drained"]}),
        json!({"name": "discord", "kind": "discord", "url": format!("{base}/discord/api/webhooks/1/tok"), "events": jobs}),
        json!({"name": "ntfy", "kind": "ntfy", "url": format!("{base}/ntfy/films"), "secret": "tk_1", "events": jobs}),
        json!({"name": "gotify", "kind": "gotify", "url": format!("{base}/gotify"), "secret": "AppTok", "events": jobs}),
        json!({"name": "apprise", "kind": "apprise", "url": format!("{base}/apprise/notify/condense"), "events": jobs}),
        json!({"name": "mail", "kind": "email",
               "url": format!("smtp://127.0.0.1:{smtp_port}?from=condense@example.org&to=me@example.org"), "events": jobs}),
    ];
    let mut ids = Vec::new();
    for target in &targets {
        let (status, made) = server.post("/notifications", Some(&admin), target).await;
        assert_eq!(status, 201, "{made}");
        assert!(made.get("secret").is_none(), "the secret was served: {made}");
        ids.push(made["id"].as_i64().unwrap());
    }
    let (status, refused) = server
        .post(
            "/notifications",
            Some(&admin),
            &json!({"name": "g", "kind": "gotify", "url": "http://g", "events": jobs}),
        )
        .await;
    assert_eq!((status, refused["error"]["code"].as_str()), (422, Some("validation_failed")), "{refused}");

    let dir = tempfile::tempdir().unwrap();
    clips::h264(dir.path(), "a.mkv", "320x240", 1);
    std::fs::write(dir.path().join("b.mkv"), vec![0x1a; 50_000]).unwrap();
    let library = server.library(&admin, dir.path()).await;
    server.post(&format!("/libraries/{library}/scan"), Some(&admin), &json!({})).await;

    let each = ["/hook", "/discord/", "/ntfy/", "/gotify/", "/apprise/"];
    let deadline = Instant::now() + Duration::from_secs(240);
    while !(each.iter().all(|p| receiver.seen(p).len() >= 2)
        && receiver.seen("/hook").len() >= 3
        && mails.lock().unwrap().len() >= 2)
    {
        if Instant::now() > deadline {
            let (_, listed) = server.get("/notifications", Some(&admin)).await;
            let (_, jobs) = server.get("/jobs", Some(&admin)).await;
            let got: Vec<String> = receiver.log.lock().unwrap().iter().map(|s| s.path.clone()).collect();
            let mails = mails.lock().unwrap().clone();
            panic!("not every receiver heard of both jobs: got {got:?}, mails {mails:?}\ntargets {listed:#}\njobs {jobs:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The webhook: the envelope, signed with the secret, with its own header.
    let hooks = receiver.seen("/hook");
    for seen in &hooks {
        assert_eq!(
            seen.header("X-Condense-Signature"),
            Some(format!("sha256={}", hmac_hex("s3cret", &seen.body)).as_str())
        );
        assert_eq!(seen.header("X-Team"), Some("media"));
        assert_eq!(seen.header("Content-Type"), Some("application/json"));
    }
    let events: Vec<Value> = hooks.iter().map(Seen::json).collect();
    let completed = events.iter().find(|e| e["event"] == "job.completed").unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(completed["job"]["fileName"], "a.mkv");
    assert_eq!(completed["job"]["status"], "COMPLETED");
    assert!(completed["job"]["bytesSaved"].as_i64().unwrap() > 0, "{completed}");
    assert!(completed["at"].as_str().is_some(), "{completed}");
    let failed = events.iter().find(|e| e["event"] == "job.failed").unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(
        (failed["job"]["fileName"].as_str(), failed["job"]["failureReason"].as_str()),
        (Some("b.mkv"), Some("file validation failed"))
    );
    assert_eq!(events.last().unwrap()["event"], "queue.drained", "{events:?}");

    let words = |texts: Vec<String>| {
        assert!(texts.iter().any(|t| t.contains("a.mkv") && t.contains("saved")), "{texts:?}");
        assert!(texts.iter().any(|t| t.contains("b.mkv") && t.contains("file validation failed")), "{texts:?}");
    };
    let discord = receiver.seen("/discord/api/webhooks/1/tok");
    assert!(discord.iter().all(|s| s.json()["username"] == "condense"));
    words(discord.iter().map(|s| s.json()["content"].as_str().unwrap_or("").to_string()).collect());

    let ntfy = receiver.seen("/ntfy/films");
    assert!(ntfy.iter().all(|s| s.header("Authorization") == Some("Bearer tk_1")), "{ntfy:?}");
    assert!(ntfy.iter().any(|s| s.header("Title") == Some("condense: job completed")), "{ntfy:?}");
    words(ntfy.iter().map(Seen::text).collect());

    let gotify = receiver.seen("/gotify/message");
    assert_eq!(gotify.len(), 2, "{gotify:?}");
    assert!(gotify.iter().all(|s| s.header("X-Gotify-Key") == Some("AppTok") && s.json()["priority"].is_i64()));
    words(gotify.iter().map(|s| format!("{} {}", s.json()["title"], s.json()["message"])).collect());

    let apprise = receiver.seen("/apprise/notify/condense");
    let kinds: Vec<String> = apprise.iter().map(|s| s.json()["type"].as_str().unwrap_or("").to_string()).collect();
    assert!(kinds.contains(&"success".to_string()) && kinds.contains(&"failure".to_string()), "{kinds:?}");
    words(apprise.iter().map(|s| s.json()["body"].as_str().unwrap_or("").to_string()).collect());

    let mails = mails.lock().unwrap().clone();
    assert!(mails.iter().all(|m| m.from == "condense@example.org" && m.to == ["me@example.org"]), "{mails:?}");
    assert!(mails.iter().any(|m| m.data.contains("Subject: condense: job completed")), "{mails:?}");
    words(mails.iter().map(|m| m.data.clone()).collect());

    // Every target shows its delivery and has nothing waiting.
    let (_, listed) = server.get("/notifications", Some(&admin)).await;
    for target in listed.as_array().unwrap() {
        assert!(target["lastDeliveredAt"].is_string() && target["waiting"] == 0, "{target}");
        assert_eq!(
            target["hasSecret"],
            target["name"] == "hook" || target["name"] == "ntfy" || target["name"] == "gotify"
        );
    }

    // The test action: sent at once, and it says so.
    let (status, tested) = server.post(&format!("/notifications/{}/test", ids[0]), Some(&admin), &json!({})).await;
    assert_eq!((status, &tested["delivered"]), (200, &json!(true)), "{tested}");
    assert_eq!(receiver.seen("/hook").last().unwrap().json()["event"], "test");
    receiver.handle.stop(false).await;
    server.finish().await;
}

#[actix_web::test]
async fn a_receiver_that_is_down_gets_its_message_once_back_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (db, source) = crate::common::server::library_with_clip(dir.path(), 1).await;
    // A port nobody listens on, until the receiver starts there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let target = condense::repo::notifications::create(
        &db,
        condense::repo::notifications::NewTarget {
            name: "hook".into(),
            kind: condense::domain::notify::TargetKind::Webhook,
            url: format!("http://127.0.0.1:{port}/hook"),
            secret: None,
            headers: vec![],
            events: vec![condense::domain::notify::NotifyEvent::JobCompleted],
            enabled: true,
        },
    )
    .await
    .unwrap();

    let mut server = ServerProcess::start(command(&data));
    let deadline = Instant::now() + Duration::from_secs(120);
    let failed_once = loop {
        let listed = condense::repo::notifications::list(&db).await.unwrap();
        let (t, waiting) = listed.into_iter().find(|(t, _)| t.id == target.id).unwrap();
        if waiting == 1 && t.last_error.is_some() {
            break t;
        }
        assert!(Instant::now() < deadline, "no failed delivery was recorded: {t:?}\n{:#?}", server.output());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(failed_once.last_delivered_at.is_none());
    let job = condense::repo::jobs::find_by_path(&db, source.to_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(job.status, condense::domain::job::JobStatus::Completed);
    assert!(server.signal_and_wait(libc::SIGTERM).success());

    let receiver = Receiver::start(std::net::TcpListener::bind(("127.0.0.1", port)).unwrap());
    let mut server = ServerProcess::start(command(&data));
    wait_until("the message after the restart", Duration::from_secs(60), || !receiver.seen("/hook").is_empty()).await;
    let got = receiver.seen("/hook");
    let body = got[0].json();
    assert_eq!((body["event"].as_str(), body["job"]["id"].as_i64()), (Some("job.completed"), Some(i64::from(job.id))));
    // Delivered once, and nothing waits any more.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = condense::repo::notifications::list(&db).await.unwrap();
        let (t, waiting) = listed.into_iter().find(|(t, _)| t.id == target.id).unwrap();
        if waiting == 0 && t.last_delivered_at.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the delivery was not recorded: {t:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.seen("/hook").len(), 1, "delivered more than once");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    receiver.handle.stop(false).await;
}

#[actix_web::test]
async fn a_library_on_a_disk_above_90_percent_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let media = dir.path().join("media");
    let room: u64 = 4 << 20;
    let Some(_mount) = crate::common::tmpfs::Tmpfs::mount(&media, room) else {
        println!("SKIPPED notify::a_library_on_a_disk_above_90_percent_is_reported: cannot mount a tmpfs here");
        return;
    };
    std::fs::write(media.join("filler.bin"), vec![0u8; usize::try_from(room * 95 / 100).unwrap()]).unwrap();
    let data = dir.path().join("data");
    let db = crate::common::server::migrated(&data).await;
    condense::repo::libraries::create(&db, crate::common::runtime::library(&media, false)).await.unwrap();
    let receiver = Receiver::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    condense::repo::notifications::create(
        &db,
        condense::repo::notifications::NewTarget {
            name: "hook".into(),
            kind: condense::domain::notify::TargetKind::Webhook,
            url: format!("{}/hook", receiver.base),
            secret: None,
            headers: vec![],
            events: vec![condense::domain::notify::NotifyEvent::DiskAtRisk],
            enabled: true,
        },
    )
    .await
    .unwrap();

    let mut server = ServerProcess::start(command(&data));
    wait_until("disk.at_risk", Duration::from_secs(60), || !receiver.seen("/hook").is_empty()).await;
    let body = receiver.seen("/hook")[0].json();
    assert_eq!(
        (body["event"].as_str(), body["disk"]["path"].as_str()),
        (Some("disk.at_risk"), media.to_str()),
        "{body}"
    );
    assert!(body["disk"]["usedPercent"].as_f64().unwrap() > 90.0, "{body}");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    receiver.handle.stop(false).await;
}

#[actix_web::test]
async fn a_replace_is_told_to_plex_jellyfin_emby_sonarr_and_radarr_by_the_mapped_new_name() {
    let receiver = Receiver::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let server = TestServer::start_throttled(crate::common::db::TestDb::sqlite().await, 0).await;
    let admin = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("Film (2020)");
    std::fs::create_dir(&folder).unwrap();
    // An AVI: the output is Matroska, so the replace gives the file a new name.
    clips::h264(&folder, "film.avi", "320x240", 1);
    let mappings = json!([{"from": dir.path(), "to": "/data/films"}]);
    let base = receiver.base.clone();
    for (kind, key) in
        [("plex", "PlexTok"), ("jellyfin", "JfKey"), ("emby", "EmbyKey"), ("sonarr", "SonKey"), ("radarr", "RadKey")]
    {
        let body = json!({"name": kind, "kind": kind, "url": format!("{base}/{kind}/"), "apiKey": key, "pathMappings": mappings});
        let (status, made) = server.post("/connections", Some(&admin), &body).await;
        assert_eq!(status, 201, "{made}");
        assert!(made.get("apiKey").is_none() && made["hasApiKey"] == true, "the key was served: {made}");
    }
    let (status, refused) = server
        .post(
            "/connections",
            Some(&admin),
            &json!({"name": "p", "kind": "plex", "url": "http://plex:32400", "pathMappings": [{"from": "media", "to": "/x"}], "apiKey": "k"}),
        )
        .await;
    assert_eq!((status, refused["error"]["code"].as_str()), (422, Some("validation_failed")), "{refused}");
    // Connections are not notification targets, nor the other way round.
    let (_, targets) = server.get("/notifications", Some(&admin)).await;
    assert_eq!(targets, json!([]));

    let library = server.library(&admin, dir.path()).await;
    server.post(&format!("/libraries/{library}/scan"), Some(&admin), &json!({})).await;

    let told = |prefix: &str, path: &str| receiver.seen(prefix).iter().any(|s| s.path == path);
    let deadline = Instant::now() + Duration::from_secs(240);
    while !(told("/plex/", "/plex/library/sections/4/refresh")
        && told("/jellyfin/", "/jellyfin/Library/Media/Updated")
        && told("/emby/", "/emby/Library/Media/Updated")
        && told("/sonarr/", "/sonarr/api/v3/command")
        && told("/radarr/", "/radarr/api/v3/command"))
    {
        if Instant::now() > deadline {
            let (_, listed) = server.get("/connections", Some(&admin)).await;
            let (_, jobs) = server.get("/jobs", Some(&admin)).await;
            let got: Vec<String> =
                receiver.log.lock().unwrap().iter().map(|s| format!("{} {}", s.method, s.path)).collect();
            panic!("not every connection was told: got {got:?}\nconnections {listed:#}\njobs {jobs:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(folder.join("film.mkv").exists() && !folder.join("film.avi").exists());

    // Plex: the sections, then a scan of the file's folder in the section that holds it.
    let plex = receiver.seen("/plex/");
    assert_eq!(
        plex.iter().map(|s| format!("{} {}", s.method, s.path)).collect::<Vec<_>>(),
        ["GET /plex/library/sections", "GET /plex/library/sections/4/refresh"]
    );
    assert!(plex.iter().all(|s| s.header("X-Plex-Token") == Some("PlexTok")), "{plex:?}");
    assert_eq!(plex[1].query, "path=%2Fdata%2Ffilms%2FFilm%20%282020%29");

    // Jellyfin and Emby: the old name gone, the new one there, each with its own key header.
    let updates = json!({"Updates": [
        {"Path": "/data/films/Film (2020)/film.avi", "UpdateType": "Deleted"},
        {"Path": "/data/films/Film (2020)/film.mkv", "UpdateType": "Created"},
    ]});
    let jellyfin = receiver.seen("/jellyfin/");
    assert_eq!((jellyfin.len(), jellyfin[0].method.as_str()), (1, "POST"), "{jellyfin:?}");
    assert_eq!(jellyfin[0].header("Authorization"), Some("MediaBrowser Token=\"JfKey\""));
    assert_eq!(jellyfin[0].json(), updates);
    let emby = receiver.seen("/emby/");
    assert_eq!((emby.len(), emby[0].header("X-Emby-Token")), (1, Some("EmbyKey")), "{emby:?}");
    assert_eq!(emby[0].json(), updates);

    // Sonarr and Radarr: their lists, then a rescan of the series or movie that owns the file.
    let sonarr = receiver.seen("/sonarr/");
    assert_eq!(
        sonarr.iter().map(|s| format!("{} {}", s.method, s.path)).collect::<Vec<_>>(),
        ["GET /sonarr/api/v3/series", "POST /sonarr/api/v3/command"]
    );
    assert!(sonarr.iter().all(|s| s.header("X-Api-Key") == Some("SonKey")), "{sonarr:?}");
    assert_eq!(sonarr[1].json(), json!({"name": "RescanSeries", "seriesId": 11}));
    let radarr = receiver.seen("/radarr/");
    assert_eq!(radarr.len(), 2, "{radarr:?}");
    assert!(radarr.iter().all(|s| s.header("X-Api-Key") == Some("RadKey")), "{radarr:?}");
    assert_eq!(radarr[1].json(), json!({"name": "RescanMovie", "movieId": 5}));

    // Each shows its refresh and has nothing waiting; the test asks something harmless.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, listed) = server.get("/connections", Some(&admin)).await;
        let listed = listed.as_array().unwrap().clone();
        if listed.len() == 5 && listed.iter().all(|c| c["lastDeliveredAt"].is_string() && c["waiting"] == 0) {
            assert_eq!(listed[0]["pathMappings"], json!([{"from": dir.path(), "to": "/data/films"}]));
            break;
        }
        assert!(Instant::now() < deadline, "the refreshes were not recorded: {listed:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, listed) = server.get("/connections", Some(&admin)).await;
    let radarr_id = listed.as_array().unwrap().iter().find(|c| c["kind"] == "radarr").unwrap()["id"].clone();
    let (status, tested) = server.post(&format!("/connections/{radarr_id}/test"), Some(&admin), &json!({})).await;
    assert_eq!((status, &tested["delivered"]), (200, &json!(true)), "{tested}");
    let last = receiver.seen("/radarr/").last().unwrap().clone();
    assert_eq!((last.method.as_str(), last.path.as_str()), ("GET", "/radarr/api/v3/system/status"));
    // A connection is not reachable as a notification target.
    let (status, _) = server.get(&format!("/notifications/{radarr_id}"), Some(&admin)).await;
    assert_eq!(status, 404);
    receiver.handle.stop(false).await;
    server.finish().await;
}

#[actix_web::test]
async fn a_change_of_health_is_written_once_it_holds() {
    use condense::actors::notifier::{look_at_health, HostReading};
    use condense::domain::node::{NodeRole, NodeStatus};
    let test_db = crate::common::db::TestDb::sqlite().await;
    let db = test_db.db.clone();
    condense::repo::notifications::create(
        &db,
        condense::repo::notifications::NewTarget {
            name: "hook".into(),
            kind: condense::domain::notify::TargetKind::Webhook,
            url: "http://127.0.0.1:9/hook".into(),
            secret: None,
            headers: vec![],
            events: vec![condense::domain::notify::NotifyEvent::HealthChanged],
            enabled: true,
        },
    )
    .await
    .unwrap();
    // The machine's side is given: a calm machine, so only the nodes can change the level.
    let calm = HostReading { load1: 0.1, cores: 2, memory_percent: 20.0 };
    let mut watch = condense::domain::notify::HealthWatch::default();
    assert!(!look_at_health(&db, &mut watch, calm).await.unwrap());
    let facts = |name: &str, role: NodeRole| condense::repo::nodes::NodeFacts {
        memory_total: 8 << 30,
        ..crate::common::rows::node(name, role)
    };
    condense::repo::nodes::upsert(&db, facts("main", NodeRole::Main)).await.unwrap();
    let far = condense::repo::nodes::upsert(&db, facts("far", NodeRole::Linked)).await.unwrap();
    condense::repo::nodes::set_status(&db, far.id, NodeStatus::Offline, Some("no heartbeat".into())).await.unwrap();
    assert!(!look_at_health(&db, &mut watch, calm).await.unwrap(), "one look is not news");
    assert!(condense::repo::notifications::due(&db, chrono::Utc::now(), 100).await.unwrap().is_empty());
    assert!(look_at_health(&db, &mut watch, calm).await.unwrap());
    assert!(!look_at_health(&db, &mut watch, calm).await.unwrap(), "told once");
    let rows = condense::repo::notifications::due(&db, chrono::Utc::now(), 100).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let body = &rows[0].0.body;
    assert_eq!(
        (body["event"].as_str(), body["health"]["previous"].as_str(), body["health"]["overall"].as_str()),
        (Some("health.changed"), Some("HEALTHY"), Some("WARNING")),
        "{body}"
    );
    let nodes = body["health"]["checks"].as_array().unwrap().iter().find(|c| c["name"] == "nodes").unwrap().clone();
    assert_eq!((nodes["level"].as_str(), nodes["message"].as_str()), (Some("WARNING"), Some("1 of 2 nodes offline")));
}

/// A secret goes only to the host it was given for: a webhook target's signing key and a
/// Sonarr connection's API key are cleared when the URL moves to another port without them
/// (the answer says so), and the receiver there never sees them. A test of a closed port or
/// of a server answering 500 with a body tells the status or a fixed phrase, never the
/// body nor the system's error.
#[actix_web::test]
async fn a_secret_stays_with_its_host_and_failures_tell_only_a_status() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let first = Receiver::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let second = Receiver::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let hook = |base: &str| json!({"name": "hook", "kind": "webhook", "url": format!("{base}/hook"), "events": ["job.completed"]});

    let mut signed = hook(&first.base);
    signed["secret"] = json!("the signing key");
    let (status, target) = server.post("/notifications", Some(&token), &signed).await;
    assert_eq!(status, 201, "{target}");
    let id = target["id"].as_i64().unwrap();
    let (_, tried) = server.post(&format!("/notifications/{id}/test"), Some(&token), &json!({})).await;
    assert_eq!(tried["delivered"], true, "{tried}");
    assert!(first.seen("/hook")[0].header("x-condense-signature").is_some());
    // Moved to another port, no secret given: cleared, and said so.
    let (status, moved) = server.put(&format!("/notifications/{id}"), Some(&token), &hook(&second.base)).await;
    assert_eq!((status, &moved["secretCleared"], &moved["hasSecret"]), (200, &json!(true), &json!(false)), "{moved}");
    let (_, tried) = server.post(&format!("/notifications/{id}/test"), Some(&token), &json!({})).await;
    assert_eq!(tried["delivered"], true, "{tried}");
    let arrived = second.seen("/hook");
    assert_eq!(arrived.len(), 1);
    assert!(arrived[0].header("x-condense-signature").is_none(), "{:?}", arrived[0].headers);

    let sonarr = |base: &str| json!({"name": "sonarr", "kind": "sonarr", "url": format!("{base}/sonarr")});
    let mut keyed = sonarr(&first.base);
    keyed["apiKey"] = json!("the sonarr key");
    let (status, connection) = server.post("/connections", Some(&token), &keyed).await;
    assert_eq!(status, 201, "{connection}");
    let id = connection["id"].as_i64().unwrap();
    let (_, tried) = server.post(&format!("/connections/{id}/test"), Some(&token), &json!({})).await;
    assert_eq!(tried["delivered"], true, "{tried}");
    assert!(first.seen("/sonarr").iter().any(|seen| seen.header("x-api-key") == Some("the sonarr key")));
    let (status, moved) = server.put(&format!("/connections/{id}"), Some(&token), &sonarr(&second.base)).await;
    assert_eq!((status, &moved["apiKeyCleared"], &moved["hasApiKey"]), (200, &json!(true), &json!(false)), "{moved}");
    server.post(&format!("/connections/{id}/test"), Some(&token), &json!({})).await;
    let arrived = second.seen("/sonarr");
    assert!(!arrived.is_empty());
    for seen in &arrived {
        assert!(seen.headers.iter().all(|(_, value)| !value.contains("the sonarr key")), "{:?}", seen.headers);
        assert!(!seen.query.contains("the sonarr key"), "{}", seen.query);
    }

    // A closed port: no OS error in the answer.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut at_closed = sonarr(&format!("http://127.0.0.1:{closed}"));
    at_closed["apiKey"] = json!("another key");
    assert_eq!(server.put(&format!("/connections/{id}"), Some(&token), &at_closed).await.0, 200);
    let (_, tried) = server.post(&format!("/connections/{id}/test"), Some(&token), &json!({})).await;
    assert_eq!(
        (&tried["delivered"], &tried["error"]),
        (&json!(false), &json!("could not connect to the target")),
        "{tried}"
    );
    // A 500 with a body: the status only, in the answer and in the stored last error.
    let mut failing = json!({"name": "sonarr", "kind": "sonarr", "url": format!("{}/fail", first.base)});
    failing["apiKey"] = json!("another key");
    assert_eq!(server.put(&format!("/connections/{id}"), Some(&token), &failing).await.0, 200);
    let (_, tried) = server.post(&format!("/connections/{id}/test"), Some(&token), &json!({})).await;
    assert_eq!(tried["error"], "answered 500 Internal Server Error", "{tried}");
    let (_, listed) = server.get("/connections", Some(&token)).await;
    assert_eq!(listed[0]["lastError"], "answered 500 Internal Server Error", "{listed}");
    let (status, target) = server
        .post("/notifications", Some(&token), &json!({"name": "failing", "kind": "webhook", "url": format!("{}/fail", first.base), "events": ["job.completed"]}))
        .await;
    assert_eq!(status, 201, "{target}");
    let (_, tried) = server.post(&format!("/notifications/{}/test", target["id"]), Some(&token), &json!({})).await;
    assert_eq!(tried["error"], "answered 500 Internal Server Error", "{tried}");
    for answer in [tried.to_string(), listed.to_string()] {
        assert!(!answer.contains("hunter2") && !answer.to_lowercase().contains("refused"), "{answer}");
    }
    server.finish().await;
}

/// The level of the check of the library path `path` among `checks` (a report's, or a
/// `health.changed` body's); judged alone, since the disk under the test's folder may well be
/// at risk on a build machine.
fn path_level(checks: &Value, path: &str) -> Option<String> {
    checks.as_array()?.iter().find(|c| c["kind"] == "libraryPath" && c["subject"] == path)?["level"]
        .as_str()
        .map(str::to_string)
}

/// The main node's own checks as `GET /health/recheck` last answered them, and its status
/// reason as `GET /nodes` shows it.
async fn node_health(server: &TestServer, token: &str) -> (Value, Option<String>) {
    let (status, report) = server.get("/health/recheck", Some(token)).await;
    assert_eq!(status, 200, "{report}");
    let (status, nodes) = server.get("/nodes", Some(token)).await;
    assert_eq!(status, 200, "{nodes}");
    let main = nodes.as_array().unwrap().iter().find(|n| n["name"] == "main").unwrap().clone();
    (report, main["statusReason"].as_str().map(str::to_string))
}

/// A library path the node cannot read fails its check and makes the node DEGRADED; put
/// back, it passes again at the next run `HEALTH_RECHECK_MINUTES` (60) later on the injected
/// clock, with nothing else done, and not before. Each change reaches a webhook as
/// `health.changed`. `POST /health/recheck` runs the checks at once. (The path is moved
/// away rather than made mode 000: the tests may run as root, who reads it anyway.)
/// On SQLite and on PostgreSQL (the re-check's reads and its record of the node).
async fn a_failed_health_check_is_tried_again_on_its_own_and_on_demand(server: &TestServer) {
    let start = chrono::DateTime::parse_from_rfc3339("2026-11-25T09:00:00Z").unwrap().with_timezone(&chrono::Utc);
    let clock = &server.state.clock;
    let receiver = Receiver::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let admin = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    let (films, away) = (dir.path().join("films"), dir.path().join("away"));
    std::fs::create_dir(&films).unwrap();
    server.library(&admin, &films).await;
    let hook = json!({"name": "hook", "kind": "webhook", "url": format!("{}/hook", receiver.base), "events": ["health.changed"]});
    let (status, made) = server.post("/notifications", Some(&admin), &hook).await;
    assert_eq!(status, 201, "{made}");
    let path = films.to_str().unwrap().to_string();
    let cannot_see = format!("cannot see {path}");
    // What the re-check told of the path, in order (its messages name the node; the health
    // panel's own watch, which a loaded machine may set off, does not).
    let told = || -> Vec<String> {
        receiver
            .seen("/hook")
            .iter()
            .map(Seen::json)
            .filter(|b| b["event"] == "health.changed" && b["health"]["node"] == "main")
            .filter_map(|b| path_level(&b["health"]["checks"], &path))
            .collect()
    };
    let told_last = |levels: &[&str]| told().ends_with(&levels.iter().map(ToString::to_string).collect::<Vec<_>>());

    // On demand: the path is there.
    let (status, report) = server.post("/health/recheck", Some(&admin), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(path_level(&report["checks"], &path).as_deref(), Some("HEALTHY"), "{report}");
    let checked_at = report["checkedAt"].clone();
    assert_eq!(report["nextAt"], "2026-11-25T10:00:00Z", "{report}");

    // Gone: nothing is checked until the interval has passed on the clock.
    std::fs::rename(&films, &away).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (report, reason) = node_health(server, &admin).await;
    assert_eq!(report["checkedAt"], checked_at, "{report}");
    assert!(!reason.unwrap_or_default().contains(&cannot_see));
    clock.set(start + chrono::Duration::minutes(60));
    wait_until("the hourly run to find the path gone", Duration::from_secs(30), || told_last(&["WARNING"])).await;
    let (report, reason) = node_health(server, &admin).await;
    assert_eq!(path_level(&report["checks"], &path).as_deref(), Some("WARNING"), "{report}");
    assert_eq!(report["overall"], "WARNING", "{report}");
    assert!(reason.as_deref().unwrap_or_default().contains(&cannot_see), "{reason:?}");
    let body = receiver.seen("/hook").iter().map(Seen::json).rfind(|b| b["health"]["node"] == "main").unwrap();
    assert_eq!(body["health"]["overall"], "WARNING", "{body}");
    let failing =
        body["health"]["checks"].as_array().unwrap().iter().find(|c| c["kind"] == "libraryPath").unwrap().clone();
    assert!(failing["message"].as_str().unwrap().starts_with(&format!("cannot read {path}: ")), "{failing}");

    // Back: the next run, an hour on, passes with nothing else done.
    std::fs::rename(&away, &films).unwrap();
    clock.set(start + chrono::Duration::minutes(120));
    wait_until("the hourly run to find the path back", Duration::from_secs(30), || told_last(&["WARNING", "HEALTHY"]))
        .await;
    let (report, reason) = node_health(server, &admin).await;
    assert_eq!(path_level(&report["checks"], &path).as_deref(), Some("HEALTHY"), "{report}");
    assert!(!reason.unwrap_or_default().contains(&cannot_see));

    // On demand, at once, with the clock standing still.
    std::fs::rename(&films, &away).unwrap();
    let (status, report) = server.post("/health/recheck", Some(&admin), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!((path_level(&report["checks"], &path).as_deref(), &report["changed"]), (Some("WARNING"), &json!(true)));
    let (_, reason) = node_health(server, &admin).await;
    assert!(reason.as_deref().unwrap_or_default().contains(&cannot_see), "{reason:?}");
    std::fs::rename(&away, &films).unwrap();
    let (_, report) = server.post("/health/recheck", Some(&admin), &json!({})).await;
    assert_eq!((path_level(&report["checks"], &path).as_deref(), &report["changed"]), (Some("HEALTHY"), &json!(true)));
    let (_, report) = server.post("/health/recheck", Some(&admin), &json!({})).await;
    assert_eq!(report["changed"], false, "the same again is no news: {report}");
    wait_until("both changes told", Duration::from_secs(30), || {
        told_last(&["WARNING", "HEALTHY", "WARNING", "HEALTHY"])
    })
    .await;
    receiver.handle.stop(false).await;
}
api_test_on_both_databases!(
    a_failed_health_check_is_tried_again_on_its_own_and_on_demand,
    clock = "2026-11-25T09:00:00Z"
);

/// An encoder a library uses that opens on no node that is up (here: as if libx265 had
/// failed to open when the node started) is a failed check; its re-check asks the node's
/// `condense-media` again, finds that it opens now, and records it on the node.
async fn an_encoder_that_did_not_open_is_asked_for_again_at_the_recheck(server: &TestServer) {
    use condense::domain::node::NodeRole;
    let admin = server.login().await;
    let dir = tempfile::tempdir().unwrap();
    server.library(&admin, dir.path()).await;
    let opened_nothing =
        condense::repo::nodes::NodeFacts { encoders: vec![], ..crate::common::rows::node("main", NodeRole::Main) };
    condense::repo::nodes::upsert(server.db(), opened_nothing).await.unwrap();
    let encoders_of_main = || async {
        let (_, nodes) = server.get("/nodes", Some(&admin)).await;
        nodes.as_array().unwrap().iter().find(|n| n["name"] == "main").unwrap()["encoders"].clone()
    };
    assert_eq!(encoders_of_main().await, json!([]));

    let (status, report) = server.post("/health/recheck", Some(&admin), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    let check = report["checks"].as_array().unwrap().iter().find(|c| c["kind"] == "encoder").unwrap().clone();
    assert_eq!(
        (check["subject"].as_str(), check["level"].as_str(), check["message"].as_str()),
        (Some("libx265"), Some("HEALTHY"), Some("libx265 opens on main")),
        "{report}"
    );
    let encoders = encoders_of_main().await;
    assert!(encoders.as_array().unwrap().iter().any(|e| e == "libx265"), "{encoders}");
}
api_test_on_both_databases!(an_encoder_that_did_not_open_is_asked_for_again_at_the_recheck);
