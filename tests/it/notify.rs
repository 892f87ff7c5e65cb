//! Notifications through the real server: a completed job and a failed one reach a webhook
//! (its signature checked here with an HMAC of our own), Discord, ntfy, Gotify, Apprise and an
//! SMTP server, each a real server on loopback that records what it got and answers as the
//! service documents; a receiver that is down gets its message once it is back, across a
//! restart of condense, exactly once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::api::TestServer;
use crate::common::media as clips;
use crate::common::server::{command, ServerProcess};

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
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
    log.lock().unwrap().push(Seen { path: path.clone(), headers, body: body.to_vec() });
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
        let server = HttpServer::new(move || App::new().app_data(data.clone()).default_service(web::to(record)))
            .workers(1)
            .disable_signals()
            .shutdown_timeout(1)
            .listen(listener)
            .unwrap()
            .run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
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
    let body = json!({"name": "films", "paths": [dir.path()], "encoder": "libx265", "quality": 30, "preset": "ultrafast", "watch": false});
    let (status, library) = server.post("/libraries", Some(&admin), &body).await;
    assert_eq!(status, 201, "{library}");
    server.post(&format!("/libraries/{}/scan", library["id"]), Some(&admin), &json!({})).await;

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
    let (db, source) = crate::isolation::library_with_clip(dir.path(), 1).await;
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
    let Some(_mount) = crate::faults::Tmpfs::mount(&media, room) else {
        println!("SKIPPED notify::a_library_on_a_disk_above_90_percent_is_reported: cannot mount a tmpfs here");
        return;
    };
    std::fs::write(media.join("filler.bin"), vec![0u8; usize::try_from(room * 95 / 100).unwrap()]).unwrap();
    let data = dir.path().join("data");
    assert!(command(&data).arg("migrate").status().unwrap().success());
    let db =
        condense::repo::connect(&format!("sqlite://{}?mode=rw", data.join("condense.db").display())).await.unwrap();
    condense::repo::libraries::create(&db, crate::lifecycle::library(&media, false)).await.unwrap();
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
