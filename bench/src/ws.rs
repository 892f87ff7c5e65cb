//! WebSocket fan-out: many subscribers on `/ws` of a real server, job updates published on
//! the event bus at a fixed rate, delivery latency measured in each subscriber.
//!
//! The server is condense's own `create_app` on an actix-web `HttpServer` over a node started
//! by `actors::start_node` (as `condense serve` and the integration tests start theirs), run
//! by this benchmark binary in a child process (`condense-bench ws-server DIR`) so that its
//! RSS is the server's alone; the benchmark tells it when to publish through its stdin. Each
//! update carries its send time (microseconds since the epoch, one clock for both processes)
//! in `fileName`; a subscriber subtracts it from the time it reads the message.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix_web::{web, HttpServer};
use condense::actors::bus::{JobUpdate, Publish};
use condense::actors::{HostFacts, MainConfig, Node, NodeConfig, RoleConfig};
use condense::http::state::ApiConfig;
use condense::repo;
use condense::{create_app, AppState};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::http::login;
use crate::report::Report;
use crate::util::{now_micros, percentile, thousands, Ctx, Mem, Res, TempDir, PASSWORD};
use crate::{command, Config};

const JWT_SECRET: &str = "benchmark-jwt-secret-0123456789abcdef";
/// HTTP_WORKERS' default.
const WORKERS: usize = 2;

/// `condense-bench ws-server DIR`: serves the API on 127.0.0.1 (prints `LISTENING ADDR`),
/// then obeys `PUBLISH KIND RATE COUNT FIRST_JOB_ID` (answers `PUBLISHED COUNT`) and `QUIT`.
pub fn server_main(args: &[String]) -> Res<()> {
    let [dir] = args else { return Err("usage: ws-server DIR".into()) };
    // As `condense serve` does.
    condense::serve::fix_allocator_thresholds();
    actix_web::rt::System::new().block_on(serve(PathBuf::from(dir)))
}

async fn serve(dir: PathBuf) -> Res<()> {
    let url = format!("sqlite://{}?mode=rwc", dir.join("ws.db").display());
    let db = repo::connect(&url).await.ctx("connecting")?;
    repo::migrate(&db).await.ctx("migrating")?;
    let hash = condense::security::hash_password(PASSWORD).ctx("hashing")?;
    repo::users::create(&db, "admin", &hash, condense::domain::access::UserRole::Admin)
        .await
        .ctx("creating the user")?;
    let (_, public_key) = condense::license::generate_keypair();
    let config = NodeConfig {
        name: "bench".into(),
        host: HostFacts { address: "127.0.0.1".into(), cores: 2, memory_total: 1 << 30, ..Default::default() },
        max_jobs: 0,
        transcoder: std::env::current_exe().ctx("this executable")?,
        segment_seconds: 20.0,
        parallel_segments: condense::domain::segments::Parallelism::Auto,
        throttle_ms_per_frame: 0,
        analysis_timeout: Duration::from_secs(300),
        role: RoleConfig::Main(MainConfig {
            db: db.clone(),
            settle: Duration::from_secs(10),
            previous_run_crashed: false,
            own_heartbeat: None,
            heartbeat: Duration::from_secs(5),
            node_timeout: Duration::from_secs(30),
            license_public_key: public_key,
            clock: condense::host::clock::Clock::system(),
            health_recheck: Duration::from_secs(3600),
        }),
    };
    let Node::Main(node) = condense::actors::start_node(config).await.ctx("starting the node")? else {
        return Err("a main node's config started a linked node".into());
    };
    let bus = node.runtime.bus.clone();
    let state = web::Data::new(AppState::new(
        &node,
        ApiConfig {
            jwt_secret: JWT_SECRET.into(),
            token_ttl_hours: 12,
            session_max_hours: 720,
            trusted_proxies: Vec::new(),
            cluster_token: None,
            library_places: Default::default(),
        },
    ));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").ctx("binding")?;
    let addr = listener.local_addr().ctx("local address")?;
    let app_state = state.clone();
    let server = HttpServer::new(move || create_app(app_state.clone()))
        .workers(WORKERS)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)
        .ctx("listening")?
        .run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    println!("LISTENING {addr}");

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.ctx("reading commands")? {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["PUBLISH", kind, rate, count, first] => {
                let kind: &'static str = if *kind == "status" { "status" } else { "progress" };
                let rate: f64 = rate.parse().ctx("rate")?;
                let count: i32 = count.parse().ctx("count")?;
                let first: i32 = first.parse().ctx("first job id")?;
                let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                for i in 0..count {
                    tick.tick().await;
                    bus.do_send(Publish(JobUpdate {
                        kind,
                        job_id: first + i,
                        progress: 50.0,
                        status: "ENCODING".into(),
                        stage: Some("ENCODING".into()),
                        fps: 25.0,
                        eta_seconds: Some(60),
                        node: Some("bench".into()),
                        stalled: false,
                        file_name: now_micros().to_string(),
                        retry_count: 0,
                        failure_reason: None,
                        actions: condense::domain::job::allowed_actions(condense::domain::job::JobStatus::Encoding),
                        segments: None,
                        transfer: None,
                    }));
                }
                println!("PUBLISHED {count}");
            }
            ["QUIT"] => break,
            _ => eprintln!("ws-server: unknown command {line:?}"),
        }
    }
    handle.stop(false).await;
    let _ = db.close().await;
    Ok(())
}

/// The send time a message carries in `fileName`.
fn sent_at(text: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"fileName\":\"";
    let start = text.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let end = text[start..].iter().position(|b| *b == b'"')? + start;
    std::str::from_utf8(&text[start..end]).ok()?.parse().ok()
}

#[derive(Default)]
struct Received {
    latencies_us: Vec<u64>,
    other: u64,
    /// `{"type":"resync"}` messages: a subscriber fell behind and was sent a snapshot.
    resyncs: u64,
}

struct Shared {
    received: RefCell<Received>,
    connected: Cell<usize>,
    failed: Cell<usize>,
    /// Subscribers the server closed with 4008 (fell behind twice).
    closed_behind: Cell<usize>,
    first_error: RefCell<Option<String>>,
}

async fn subscriber(client: awc::Client, url: String, shared: Rc<Shared>) {
    let mut framed = match client.ws(url).connect().await {
        Ok((_, framed)) => framed,
        Err(e) => {
            shared.failed.set(shared.failed.get() + 1);
            shared.first_error.borrow_mut().get_or_insert_with(|| e.to_string());
            return;
        }
    };
    shared.connected.set(shared.connected.get() + 1);
    while let Some(frame) = framed.next().await {
        match frame {
            Ok(awc::ws::Frame::Text(bytes)) => {
                let now = now_micros();
                let mut r = shared.received.borrow_mut();
                match sent_at(&bytes) {
                    Some(sent) => r.latencies_us.push(now.saturating_sub(sent)),
                    None if bytes.windows(8).any(|w| w == b"\"resync\"") => r.resyncs += 1,
                    None => r.other += 1,
                }
            }
            Ok(awc::ws::Frame::Ping(bytes)) => {
                let _ = framed.send(awc::ws::Message::Pong(bytes)).await;
            }
            Ok(awc::ws::Frame::Close(reason)) => {
                if reason.is_some_and(|r| u16::from(r.code) == condense::domain::feed::CLOSE_TOO_SLOW) {
                    shared.closed_behind.set(shared.closed_behind.get() + 1);
                }
                break;
            }
            Err(_) => break,
            Ok(_) => {}
        }
    }
}

struct PhaseResult {
    kind: &'static str,
    sent: u64,
    delivered: u64,
    sorted_us: Vec<u64>,
    resyncs: u64,
    mem_after: Mem,
}

impl PhaseResult {
    fn ms(&self, p: f64) -> f64 {
        percentile(&self.sorted_us, p) as f64 / 1000.0
    }
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "ws")?;
    let exe = std::env::current_exe().ctx("this executable")?;
    let mut child = tokio::process::Command::new(exe)
        .arg("ws-server")
        .arg(tmp.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .ctx("starting the ws server")?;
    let pid = child.id().ctx("ws server pid")?;
    let mut stdin = child.stdin.take().ctx("ws server stdin")?;
    let mut out = BufReader::new(child.stdout.take().ctx("ws server stdout")?).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .ctx("the ws server did not start in 60 s")?
        .ctx("reading the ws server")?
        .ctx("the ws server ended")?;
    let addr = first.strip_prefix("LISTENING ").ctx("no LISTENING line")?.to_string();
    let token = login(&addr).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mem_start = Mem::of_pid(pid)?;

    let shared = Rc::new(Shared {
        received: RefCell::new(Received::default()),
        connected: Cell::new(0),
        failed: Cell::new(0),
        closed_behind: Cell::new(0),
        first_error: RefCell::new(None),
    });
    let client =
        awc::Client::builder().connector(awc::Connector::new().limit(0)).timeout(Duration::from_secs(30)).finish();
    let url = format!("ws://{addr}/ws?token={token}");
    let started = Instant::now();
    let n = cfg.ws_subscribers;
    let mut spawned = 0;
    while spawned < n {
        let batch_end = (spawned + 50).min(n);
        for _ in spawned..batch_end {
            actix_web::rt::spawn(subscriber(client.clone(), url.clone(), shared.clone()));
        }
        spawned = batch_end;
        let deadline = Instant::now() + Duration::from_secs(60);
        while shared.connected.get() + shared.failed.get() < spawned {
            if Instant::now() > deadline {
                return Err(format!("subscribers did not connect: {} of {spawned}", shared.connected.get()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let connect_seconds = started.elapsed().as_secs_f64();
    let connected = shared.connected.get();
    if connected == 0 {
        return Err(format!("no subscriber connected: {:?}", shared.first_error.borrow()));
    }
    // Sessions subscribe to the bus just after the upgrade: give the last ones a moment.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mem_connected = Mem::of_pid(pid)?;

    let count = u64::from(cfg.ws_rate) * u64::from(cfg.ws_seconds);
    let mut phases = Vec::new();
    for (kind, first_id, drain) in [("status", 1, 1000), ("progress", 1_000_001, 1500), ("progress", 2_000_001, 1500)] {
        *shared.received.borrow_mut() = Received::default();
        stdin
            .write_all(format!("PUBLISH {kind} {} {count} {first_id}\n", cfg.ws_rate).as_bytes())
            .await
            .ctx("commanding the ws server")?;
        stdin.flush().await.ctx("commanding the ws server")?;
        let answer = tokio::time::timeout(Duration::from_secs(u64::from(cfg.ws_seconds) * 10 + 30), out.next_line())
            .await
            .ctx("the ws server did not finish publishing")?
            .ctx("reading the ws server")?
            .ctx("the ws server ended")?;
        if !answer.starts_with("PUBLISHED") {
            return Err(format!("ws server: {answer}"));
        }
        tokio::time::sleep(Duration::from_millis(drain)).await;
        let mut received = std::mem::take(&mut *shared.received.borrow_mut());
        received.latencies_us.sort_unstable();
        phases.push(PhaseResult {
            kind,
            sent: count,
            delivered: received.latencies_us.len() as u64,
            sorted_us: received.latencies_us,
            resyncs: received.resyncs,
            mem_after: Mem::of_pid(pid)?,
        });
    }
    let _ = stdin.write_all(b"QUIT\n").await;
    let _ = stdin.flush().await;
    if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }

    let cmd = command("ws");
    let mut table = String::from(
        "| messages | published | delivered / expected | resyncs | p50 | p99 | max | server RSS after |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (i, p) in phases.iter().enumerate() {
        let expected = p.sent * connected as u64;
        let what = match (p.kind, i) {
            ("status", _) => "status (sent at once)",
            (_, 1) => "progress (coalesced, 250 ms)",
            _ => "progress, again",
        };
        report.row(
            format!("WebSocket {what}, {} subscribers, {}/s", thousands(connected as u64), cfg.ws_rate),
            format!("p50 {:.1} ms, p99 {:.1} ms", p.ms(50.0), p.ms(99.0)),
            // The goal is for status messages; progress waits for the session's
            // 250 ms flush by design (at most four a second per job).
            if p.kind == "status" { "p99 < 50 ms" } else { "p99 <= 250 ms (coalesced)" },
            &cmd,
        );
        if p.delivered != expected {
            report.row(
                format!("WebSocket {what}: delivered / expected"),
                format!("{} / {expected}", p.delivered),
                "all",
                &cmd,
            );
        }
        table.push_str(&format!(
            "| {what} | {} | {} / {expected} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {} |\n",
            p.sent,
            p.delivered,
            p.resyncs,
            p.ms(50.0),
            p.ms(99.0),
            p.ms(100.0),
            p.mem_after.describe()
        ));
    }
    let last = phases.last().map(|p| p.mem_after).unwrap_or_default();
    let mib = |m: &Mem| m.rss_kb as f64 / 1024.0;
    let after: Vec<String> = phases.iter().map(|p| format!("{:.1}", mib(&p.mem_after))).collect();
    report.row(
        format!("WebSocket server RSS, {} subscribers: connected / after each run", thousands(connected as u64)),
        format!("{:.1} / {} MiB", mib(&mem_connected), after.join(" / ")),
        "flat",
        &cmd,
    );
    let failed = shared.failed.get();
    let closed_behind = shared.closed_behind.get();
    if closed_behind > 0 {
        report.row(
            format!(
                "WebSocket subscribers closed with 4008 (fell behind twice), {} subscribers",
                thousands(connected as u64)
            ),
            thousands(closed_behind as u64),
            "0",
            &cmd,
        );
    }
    report.section(
        "WebSocket fan-out",
        format!(
            "{connected} subscribers{failed_note} on `ws://ADDR/ws?token=…` (awc clients, one thread, in the \
             benchmark process; connected in {connect_seconds:.1} s, 50 at a time) of a server running \
             condense's `create_app` with its actors on an actix-web `HttpServer` with {WORKERS} workers \
             (`HTTP_WORKERS`' default), SQLite, in a child process of the benchmark (`condense-bench ws-server \
             DIR`, the same code as `tests/it/common/api.rs` uses, so its RSS is the server's alone). The \
             server publishes `condense::actors::bus::Publish(JobUpdate {{ … }})` {rate} times a second for \
             {secs} s, each update for a job id of its own (so the coalescing of progress cannot merge any) and \
             with its send time in `fileName`; each subscriber takes the receive time minus the send time. Three \
             runs: `type: \"status\"` updates, which a session sends at once (the fan-out path itself), and \
             `type: \"progress\"` updates, which a session holds and sends at its next 250 ms flush (at most 4 \
             messages a second per job, by design): their latency includes that wait, 125 ms on average; the \
             progress run is made twice, so that memory still growing after the first would show. A subscriber \
             that falls behind gets `{{\"type\":\"resync\"}}` and a snapshot instead of what it missed (counted \
             under resyncs), or is closed with 4008 ({closed_behind} were).\n\n\
             {table}\n\
             Server RSS: {start} before any subscriber, {connected_mem} with {connected} subscribers, {end} \
             after the last run.",
            failed_note = if failed > 0 { format!(" ({failed} failed to connect)") } else { String::new() },
            rate = cfg.ws_rate,
            secs = cfg.ws_seconds,
            start = mem_start.describe(),
            connected_mem = mem_connected.describe(),
            end = last.describe(),
        ),
    );
    Ok(())
}
