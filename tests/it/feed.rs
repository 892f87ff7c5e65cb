//! The WebSocket feed under load, against a real server and real WebSocket clients: status
//! messages are never lost (a client that read nothing for a while gets every one, or a
//! resync and a snapshot that shows the current statuses), a fast client loses nothing,
//! and progress is coalesced to the latest per job.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use awc::ws::{Frame, Message};
use condense::actors::bus::{JobUpdate, Publish, Unsubscribe};
use condense::domain::job::JobStatus;
use condense::repo;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;

use crate::common::api::TestServer;

type Socket = actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>;

const JOBS: usize = 20;

/// Jobs in ENCODING, as the snapshot shows them.
async fn encoding_jobs(server: &TestServer) -> Vec<entities::job::Model> {
    let mut jobs = Vec::new();
    for n in 0..JOBS {
        let job = repo::jobs::insert(
            server.db(),
            repo::jobs::NewJob {
                library_id: None,
                file_path: format!("/media/feed-{n:02}.mkv"),
                file_name: format!("feed-{n:02}.mkv"),
                status: JobStatus::Encoding,
                target_codec: "hevc".into(),
                source_size: 1000,
                source_mtime_ns: None,
                source_inode: None,
                forced: false,
            },
        )
        .await
        .unwrap();
        jobs.push(job);
    }
    jobs
}

async fn connect(server: &TestServer, token: &str) -> Socket {
    let (_, socket) = awc::Client::new().ws(server.url("/ws")).bearer_auth(token).connect().await.unwrap();
    socket
}

/// The next text message as JSON, answering pings on the way (as browsers do); None once
/// nothing came for `quiet` or the server closed (the close code is returned then).
async fn next_message(socket: &mut Socket, quiet: Duration) -> Result<Option<Value>, Option<u16>> {
    // One deadline for the whole wait: the server's pings must not keep it open forever.
    let deadline = tokio::time::Instant::now() + quiet;
    loop {
        let frame = match tokio::time::timeout_at(deadline, socket.next()).await {
            Err(_) => return Ok(None),
            Ok(None) => return Err(None),
            Ok(Some(frame)) => frame.unwrap(),
        };
        match frame {
            Frame::Text(bytes) => return Ok(Some(serde_json::from_slice(&bytes).unwrap())),
            Frame::Ping(bytes) => socket.send(Message::Pong(bytes)).await.unwrap(),
            Frame::Close(reason) => return Err(reason.map(|r| u16::from(r.code))),
            _ => {}
        }
    }
}

/// A status message numbered `seq` (in `etaSeconds`), for one of the jobs; the padding in
/// the file name makes a few thousand of them more than the socket buffers hold.
fn numbered(job: &entities::job::Model, seq: i64) -> JobUpdate {
    let mut update = JobUpdate::of("status", job);
    update.eta_seconds = Some(seq);
    update.file_name = format!("{}-{}", job.file_name, "x".repeat(1500));
    update
}

/// What a client knows of the active jobs, built from the messages it read.
#[derive(Default)]
struct View {
    jobs: HashMap<i64, (String, f64)>,
    /// Sequence numbers of the status messages read, each run after a resync on its own.
    runs: Vec<Vec<i64>>,
    resyncs: usize,
    progress: HashMap<i64, Vec<f64>>,
}

impl View {
    fn apply(&mut self, msg: &Value) {
        let job = msg["jobId"].as_i64().unwrap_or_default();
        let entry = || (msg["status"].as_str().unwrap().to_string(), msg["progress"].as_f64().unwrap());
        match msg["type"].as_str().unwrap() {
            "resync" => {
                if self.runs.is_empty() {
                    self.runs.push(Vec::new());
                }
                self.jobs.clear();
                self.resyncs += 1;
                self.runs.push(Vec::new());
            }
            "snapshot" => {
                assert!(self.runs.last().is_none_or(Vec::is_empty), "a snapshot after live messages: {msg}");
                self.jobs.insert(job, entry());
            }
            "status" => {
                if self.runs.is_empty() {
                    self.runs.push(Vec::new());
                }
                if let Some(seq) = msg["etaSeconds"].as_i64() {
                    self.runs.last_mut().unwrap().push(seq);
                }
                let (status, progress) = entry();
                if status == "ENCODING" || status == "ANALYZING" {
                    self.jobs.insert(job, (status, progress));
                } else {
                    self.jobs.remove(&job);
                }
            }
            "progress" => {
                self.progress.entry(job).or_default().push(msg["progress"].as_f64().unwrap());
                if let Some(known) = self.jobs.get_mut(&job) {
                    known.1 = msg["progress"].as_f64().unwrap();
                }
            }
            other => panic!("unexpected message type {other}: {msg}"),
        }
    }
}

/// The active jobs as the database has them now.
async fn current(server: &TestServer) -> HashMap<i64, (String, f64)> {
    repo::jobs::in_statuses(server.db(), &[JobStatus::Analyzing, JobStatus::Encoding])
        .await
        .unwrap()
        .iter()
        .map(|job| (i64::from(job.id), (JobStatus::from(job.status).to_string(), job.progress)))
        .collect()
}

#[actix_web::test]
async fn a_client_that_stops_reading_gets_every_status_or_a_resync_and_a_fast_one_loses_nothing() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let jobs = encoding_jobs(&server).await;
    let bus = server.state.runtime.bus.clone();

    let mut slow = connect(&server, &token).await;
    // The snapshot on connect, then nothing is read from `slow` until every message is out.
    let mut slow_view = View::default();
    for _ in 0..JOBS {
        let msg = next_message(&mut slow, Duration::from_secs(30)).await.unwrap().expect("a snapshot");
        slow_view.apply(&msg);
    }

    // The fast client reads all the time, on its own task.
    let mut fast = connect(&server, &token).await;
    let fast_view = Rc::new(RefCell::new(View::default()));
    let reader = {
        let fast_view = fast_view.clone();
        actix_web::rt::spawn(async move {
            loop {
                match next_message(&mut fast, Duration::from_secs(60)).await {
                    Ok(Some(msg)) => fast_view.borrow_mut().apply(&msg),
                    Ok(None) | Err(_) => return,
                }
            }
        })
    };
    while fast_view.borrow().jobs.len() < JOBS {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Rounds of one status message per job; the next round goes out once the fast client
    // read this one, so it never holds more than a round (the slow one holds everything).
    let rounds = 1_000;
    let mut seq = 0i64;
    for round in 0..rounds {
        let last_round = round == rounds - 1;
        for (n, job) in jobs.iter().enumerate() {
            let job = if last_round {
                // The last word on each job is persisted first, as every real change is:
                // some end, the others move on.
                let status = if n % 4 == 0 { entities::sea_orm_active_enums::JobStatus::Completed } else { job.status };
                let set = entities::job::ActiveModel {
                    id: sea_orm::Set(job.id),
                    status: sea_orm::Set(status),
                    progress: sea_orm::Set(if n % 4 == 0 { 100.0 } else { 42.0 }),
                    ..Default::default()
                };
                sea_orm::ActiveModelTrait::update(set, server.db()).await.unwrap()
            } else {
                job.clone()
            };
            bus.do_send(Publish(numbered(&job, seq)));
            seq += 1;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let read = fast_view.borrow().runs.iter().map(Vec::len).sum::<usize>();
            if read == seq as usize {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the fast client read {read} of {seq} status messages (round {round})"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let total = seq;

    // The fast client got every status message, in order, and no resync.
    {
        let fast_view = fast_view.borrow();
        assert_eq!(fast_view.resyncs, 0);
        let all: Vec<i64> = fast_view.runs.concat();
        assert_eq!(all, (0..total).collect::<Vec<_>>(), "the fast client lost or reordered messages");
    }

    // Now the slow client reads: every status message in order, except where a resync
    // (then a snapshot) stands for those it missed.
    loop {
        match next_message(&mut slow, Duration::from_secs(2)).await {
            Ok(Some(msg)) => slow_view.apply(&msg),
            Ok(None) => break,
            Err(code) => panic!("the slow client was closed ({code:?}) after reading everything it was sent"),
        }
        if slow_view.runs.last().and_then(|run| run.last()) == Some(&(total - 1)) {
            // The last message; anything after it would be a bug the quiet read below shows.
            let after = next_message(&mut slow, Duration::from_millis(500)).await;
            assert!(matches!(after, Ok(None)), "a message after the last one: {after:?}");
            break;
        }
    }
    let runs = &slow_view.runs;
    assert_eq!(runs.iter().flatten().last(), Some(&(total - 1)), "the last status message never came");
    for (i, run) in runs.iter().enumerate() {
        assert!(run.windows(2).all(|w| w[1] == w[0] + 1), "messages lost without a resync in run {i}");
        if i == 0 {
            assert_eq!(run.first().copied().unwrap_or(0), 0, "the first messages were lost");
        }
    }
    assert_eq!(slow_view.resyncs + 1, runs.len().max(1));
    // What the slow client shows is what the database holds.
    let now = current(&server).await;
    assert_eq!(slow_view.jobs, now, "the slow client's view after {} resyncs", slow_view.resyncs);
    assert_eq!(fast_view.borrow().jobs, now);
    eprintln!("slow client: {} resync(s), {} status messages of {total} read", slow_view.resyncs, runs.concat().len());
    drop(slow);
    reader.abort();
    server.finish().await;
}

#[actix_web::test]
async fn progress_is_coalesced_to_the_latest_per_job_and_never_overtakes_a_status() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let jobs = encoding_jobs(&server).await;
    let bus = server.state.runtime.bus.clone();
    let mut client = connect(&server, &token).await;
    let mut view = View::default();
    for _ in 0..JOBS {
        view.apply(&next_message(&mut client, Duration::from_secs(30)).await.unwrap().expect("a snapshot"));
    }

    // A burst of progress for every job while the client reads nothing, then one status each.
    let steps = 200;
    for step in 1..=steps {
        for job in &jobs {
            let mut update = JobUpdate::of("progress", job);
            update.progress = f64::from(step) / 2.0;
            bus.do_send(Publish(update));
        }
    }
    for (seq, job) in jobs.iter().enumerate() {
        let mut update = JobUpdate::of("status", job);
        update.progress = f64::from(steps) / 2.0;
        update.eta_seconds = Some(seq as i64);
        bus.do_send(Publish(update));
    }

    let mut order = Vec::new();
    while let Ok(Some(msg)) = next_message(&mut client, Duration::from_secs(2)).await {
        order.push((
            msg["type"].as_str().unwrap().to_string(),
            msg["jobId"].as_i64().unwrap(),
            msg["progress"].clone(),
        ));
        view.apply(&msg);
    }
    assert_eq!(view.resyncs, 0);
    assert_eq!(view.runs.concat(), (0..JOBS as i64).collect::<Vec<_>>(), "status messages lost");
    for job in &jobs {
        let id = i64::from(job.id);
        let seen = view.progress.get(&id).cloned().unwrap_or_default();
        assert!(seen.len() < steps as usize / 2, "job {id}: {} progress messages, not coalesced", seen.len());
        assert!(seen.windows(2).all(|w| w[1] >= w[0]), "job {id}: progress went back: {seen:?}");
        // The latest progress was sent, and before the job's status message.
        let last_progress = order.iter().rposition(|(kind, j, _)| kind == "progress" && *j == id);
        let status = order.iter().position(|(kind, j, _)| kind == "status" && *j == id).unwrap();
        let last_progress = last_progress.unwrap_or_else(|| panic!("job {id}: no progress at all"));
        assert!(last_progress < status, "job {id}: progress after its status: {order:?}");
        assert_eq!(order[last_progress].2, serde_json::json!(f64::from(steps) / 2.0), "job {id}: {seen:?}");
    }
    server.finish().await;
}

#[actix_web::test]
async fn a_client_that_falls_behind_again_before_reading_its_resync_is_closed_with_4008_and_resyncs_on_reconnect() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let jobs = encoding_jobs(&server).await;
    let bus = server.state.runtime.bus.clone();
    let mut client = connect(&server, &token).await;
    for _ in 0..JOBS {
        next_message(&mut client, Duration::from_secs(30)).await.unwrap().expect("a snapshot");
    }
    // Enough for the socket buffers and the bound, twice over.
    let burst = |from: i64| {
        for seq in from..from + 20_000 {
            let job = &jobs[seq as usize % JOBS];
            bus.do_send(Publish(numbered(job, seq)));
        }
    };

    // The bus has handled everything sent before this (one mailbox, in order).
    let handled = || bus.send(Unsubscribe(u64::MAX));

    // It reads nothing: it falls behind and is owed a resync.
    burst(0);
    handled().await.unwrap();
    // It reads up to the resync, then stops again (before the snapshot and the ping after it).
    loop {
        let msg = next_message(&mut client, Duration::from_secs(30)).await.unwrap().expect("a resync");
        if msg["type"] == "resync" {
            break;
        }
    }
    burst(20_000);
    // A job ends meanwhile, as the reconnect's snapshot must show.
    let ended = entities::job::ActiveModel {
        id: sea_orm::Set(jobs[0].id),
        status: sea_orm::Set(entities::sea_orm_active_enums::JobStatus::Completed),
        ..Default::default()
    };
    let ended = sea_orm::ActiveModelTrait::update(ended, server.db()).await.unwrap();
    bus.do_send(Publish(JobUpdate::of("status", &ended)));
    handled().await.unwrap();

    // Now it reads: what was already on its way, then the close.
    let code = loop {
        match next_message(&mut client, Duration::from_secs(30)).await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("neither closed nor caught up"),
            Err(code) => break code,
        }
    };
    assert_eq!(code, Some(4008));

    // Reconnecting resyncs it: the snapshot shows the jobs as they are.
    let mut again = connect(&server, &token).await;
    let mut view = View::default();
    while let Ok(Some(msg)) = next_message(&mut again, Duration::from_secs(1)).await {
        view.apply(&msg);
    }
    assert_eq!(view.jobs, current(&server).await);
    assert!(!view.jobs.contains_key(&i64::from(jobs[0].id)));
    server.finish().await;
}

/// A job's segments as a segments update carries them (one span, encoding).
fn one_segment() -> Vec<condense::repo::segments::SegmentView> {
    vec![condense::repo::segments::SegmentView {
        index: 0,
        from: None,
        to: None,
        status: condense::repo::segments::SegmentState::Encoding,
        node_id: None,
        node_name: Some("w1".into()),
        helper: true,
        frames: 10,
        bytes: 100,
        fps: 5.0,
    }]
}

#[actix_web::test]
async fn a_segments_update_carries_the_live_progress_and_none_follows_the_jobs_end() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let job = encoding_jobs(&server).await.remove(0);
    let bus = server.state.runtime.bus.clone();
    let mut client = connect(&server, &token).await;
    while let Ok(Some(_snapshot)) = next_message(&mut client, Duration::from_millis(500)).await {}

    // The run publishes 92 %; a segments update read from the row (written at 73.5 %) follows.
    let mut live = JobUpdate::of("progress", &job);
    live.progress = 92.0;
    bus.do_send(Publish(live));
    let mut from_row = JobUpdate::of("progress", &job);
    from_row.progress = 73.5;
    from_row.segments = Some(one_segment());
    bus.do_send(Publish(from_row));
    let mut seen = Vec::new();
    while let Ok(Some(msg)) = next_message(&mut client, Duration::from_millis(500)).await {
        seen.push(msg);
    }
    let last = seen.last().expect("no message");
    assert_eq!(last["segments"][0]["nodeName"], "w1", "{seen:?}");
    assert!(seen.iter().all(|m| m["progress"] == 92.0), "progress went back: {seen:?}");

    // The job completes; a segments update read just before its end comes after it.
    let mut ended = job.clone();
    ended.status = entities::sea_orm_active_enums::JobStatus::Completed;
    ended.progress = 100.0;
    bus.do_send(Publish(JobUpdate::of("status", &ended)));
    let mut late = JobUpdate::of("progress", &job);
    late.segments = Some(one_segment());
    bus.do_send(Publish(late));
    let mut after = Vec::new();
    while let Ok(Some(msg)) = next_message(&mut client, Duration::from_millis(500)).await {
        after.push(msg);
    }
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!((&after[0]["type"], &after[0]["status"]), (&"status".into(), &"COMPLETED".into()), "{after:?}");
    server.finish().await;
}
