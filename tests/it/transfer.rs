//! Transfers for a linked node that does not see the library (issue 39), over real HTTP on
//! loopback: the main node's endpoints in a `TestServer`, the node's own client
//! (`actors::transfer::TransferClient`), and a TCP proxy of the test's between them that
//! cuts a connection after a number of bytes or flips one, and keeps every byte the client
//! sent, so a test reads which ranges and offsets the main node was asked for.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use awc::http::Method;
use condense::actors::transfer::{ClientError, Direction, Progress, TransferClient};
use condense::domain::job::JobStatus;
use condense::domain::node::{NodeRole, NodeStatus};
use condense::media::event::{PhaseTime, RunStats};
use condense::media::layout::partial_dir_for;
use condense::media::plan::{EncodePlan, RunScope};
use condense::repo;
use entities::job;
use sea_orm::{ActiveModelTrait, Set};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::api::{code, TestServer};
use crate::common::rows::{new_job, node};

const LEASE: &str = "the far node's lease";

/// `len` bytes that do not repeat in any way a checksum could miss.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn sha(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

struct Far {
    server: TestServer,
    lib: tempfile::TempDir,
    /// The linked node's `identity.credential`.
    bearer: String,
    node_id: i32,
}

/// A main node with a library, and a linked node enrolled with its own credential, OFFLINE
/// so nothing takes its jobs away while a test runs.
async fn far_node() -> Far {
    far_node_on(TestServer::sqlite().await).await
}

async fn far_node_on(server: TestServer) -> Far {
    let token = server.login().await;
    let lib = tempfile::tempdir().unwrap();
    let library = server.library(&token, &lib.path().canonicalize().unwrap()).await;
    // The library's first scan runs as it starts: a file a test writes before that scan has
    // walked the folder would be registered by it too, and the test's own job for the same
    // path refused as a duplicate (seen once under load in a whole `make test`).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, row) = server.get(&format!("/libraries/{library}"), Some(&token)).await;
        if !row["lastScanAt"].is_null() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the library's first scan did not finish: {row}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (bearer, node_id) = enroll(&server, "far").await;
    Far { server, lib, bearer, node_id }
}

async fn enroll(server: &TestServer, name: &str) -> (String, i32) {
    let (identity, credential) = (format!("{name}-identity"), format!("{name}-credential-0123456789"));
    let hash = condense::security::hash_secret(&credential);
    let row = repo::nodes::register_linked(server.db(), None, node(name, NodeRole::Linked), &identity, Some(&hash))
        .await
        .unwrap();
    repo::nodes::set_status(server.db(), row.id, NodeStatus::Offline, None).await.unwrap();
    (format!("{identity}.{credential}"), row.id)
}

impl Far {
    fn root(&self) -> PathBuf {
        self.lib.path().canonicalize().unwrap()
    }

    /// A job for the file at `path` (stored as given), ENCODING on the far node under `LEASE`.
    async fn job(&self, path: &str) -> i32 {
        let library = repo::libraries::list(self.server.db()).await.unwrap()[0].id;
        let job =
            repo::jobs::insert(self.server.db(), new_job(Some(library), path, JobStatus::Encoding)).await.unwrap();
        job::ActiveModel {
            id: Set(job.id),
            node_id: Set(Some(self.node_id)),
            node_name: Set(Some("far".into())),
            lease_id: Set(Some(LEASE.into())),
            lease_expires_at: Set(Some(chrono::Utc::now() + chrono::Duration::hours(1))),
            ..Default::default()
        }
        .update(self.server.db())
        .await
        .unwrap();
        job.id
    }

    /// A source of `len` bytes in the library and its job.
    async fn source(&self, name: &str, len: usize) -> (PathBuf, Vec<u8>, i32) {
        let path = self.root().join(name);
        let data = bytes(len, len as u64);
        std::fs::write(&path, &data).unwrap();
        let id = self.job(path.to_str().unwrap()).await;
        (path, data, id)
    }

    fn client(&self, base: &str) -> TransferClient {
        let mut client = TransferClient::new(base, &self.bearer, 0);
        client.part_bytes = 1 << 20;
        client
    }

    /// A request as the far node (or with `bearer`) under `lease`: status, headers, body.
    async fn raw(
        &self,
        method: Method,
        path: &str,
        bearer: &str,
        lease: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> (u16, awc::http::header::HeaderMap, Vec<u8>) {
        let mut req = awc::Client::default()
            .request(method, self.server.url(path))
            .insert_header(("Authorization", format!("Bearer {bearer}")))
            .insert_header(("X-Condense-Lease", lease));
        for (name, value) in headers {
            req = req.insert_header((*name, value.as_str()));
        }
        let mut res = req.send_body(body).await.unwrap();
        let status = res.status().as_u16();
        (status, res.headers().clone(), res.body().limit(64 << 20).await.unwrap().to_vec())
    }
}

/// What the proxy does: to the first connection it carries (the cuts and the flip), or to
/// the first request whose bytes hold one of the strings given, on whichever connection.
#[derive(Clone, Copy)]
enum Fault {
    /// Closes both ways once the server sent this many bytes.
    CutDown(usize),
    /// Closes both ways once the client sent this many bytes.
    CutUp(usize),
    /// Flips the client's byte at this offset.
    FlipUp(usize),
    /// Flips the server's byte at this offset.
    FlipDown(usize),
    /// Answers `502 Bad Gateway` itself, as a reverse proxy does while the main node
    /// restarts, to the first request holding each of these (it never reaches the server).
    BadGateway(&'static [&'static str]),
    /// Carries the first request holding this to the server, then closes the connection
    /// before the answer comes back.
    LoseAnswer(&'static str),
}

/// A proxy's answer standing in for the main node's.
const BAD_GATEWAY: &[u8] = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// A loopback TCP proxy to `upstream`: `fault` on the first connection, the others carried
/// as they are; every byte each client sent kept, per connection.
struct Proxy {
    base: String,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Proxy {
    async fn start(upstream: &str, fault: Fault) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let kept = sent.clone();
        // The strings of `BadGateway` and `LoseAnswer` not yet met.
        let waiting: Arc<Mutex<Vec<&'static str>>> = Arc::new(Mutex::new(match fault {
            Fault::BadGateway(all) => all.to_vec(),
            Fault::LoseAnswer(one) => vec![one],
            _ => Vec::new(),
        }));
        actix_web::rt::spawn(async move {
            let mut fault = Some(fault);
            loop {
                let (client, _) = listener.accept().await.unwrap();
                let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let index = {
                    let mut all = kept.lock().unwrap();
                    all.push(Vec::new());
                    all.len() - 1
                };
                // A fault by request stays for every connection until its requests came.
                let fault = match fault {
                    Some(f @ (Fault::BadGateway(_) | Fault::LoseAnswer(_))) => Some(f),
                    _ => fault.take(),
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = kept.clone();
                let limit_up = match fault {
                    Some(Fault::CutUp(n)) => n,
                    _ => usize::MAX,
                };
                let flip = match fault {
                    Some(Fault::FlipUp(n)) => Some(n),
                    _ => None,
                };
                let limit_down = match fault {
                    Some(Fault::CutDown(n)) => n,
                    _ => usize::MAX,
                };
                let flip_down = match fault {
                    Some(Fault::FlipDown(n)) => Some(n),
                    _ => None,
                };
                let stop = Arc::new(tokio::sync::Notify::new());
                let (stop_up, stop_down) = (stop.clone(), stop.clone());
                // Set by the client's side for the server's: answer 502 / drop the answer.
                let (bad_gateway, lose_answer) =
                    (Arc::new(tokio::sync::Notify::new()), Arc::new(AtomicBool::new(false)));
                let (gateway_up, lose_up, waiting) = (bad_gateway.clone(), lose_answer.clone(), waiting.clone());
                let by_request = matches!(fault, Some(Fault::BadGateway(_) | Fault::LoseAnswer(_)));
                let lost = matches!(fault, Some(Fault::LoseAnswer(_)));
                actix_web::rt::spawn(async move {
                    let mut buf = vec![0u8; 64 << 10];
                    let mut done = 0usize;
                    // After a 502: the rest of the request is read and dropped, as a proxy
                    // does, so the client reads the answer once it has sent its body.
                    let mut draining = false;
                    loop {
                        let n = tokio::select! {
                            n = cr.read(&mut buf) => n.unwrap_or(0),
                            _ = stop_up.notified(), if !draining => 0,
                        };
                        let n = n.min(limit_up - done);
                        if n == 0 {
                            break;
                        }
                        let chunk = &mut buf[..n];
                        if let Some(at) = flip.filter(|at| (done..done + n).contains(at)) {
                            chunk[at - done] ^= 0xff;
                        }
                        up.lock().unwrap()[index].extend_from_slice(chunk);
                        if draining {
                            continue;
                        }
                        if by_request {
                            let text = String::from_utf8_lossy(chunk).into_owned();
                            let mut waiting = waiting.lock().unwrap();
                            if let Some(i) = waiting.iter().position(|w| text.contains(w)) {
                                waiting.remove(i);
                                if lost {
                                    lose_up.store(true, Ordering::SeqCst);
                                } else {
                                    draining = true;
                                    gateway_up.notify_one();
                                    continue;
                                }
                            }
                        }
                        if sw.write_all(chunk).await.is_err() {
                            break;
                        }
                        done += n;
                    }
                    let _ = sw.shutdown().await;
                    stop_up.notify_one();
                });
                actix_web::rt::spawn(async move {
                    let mut buf = vec![0u8; 64 << 10];
                    let mut done = 0usize;
                    loop {
                        let n = tokio::select! {
                            n = sr.read(&mut buf) => n.unwrap_or(0),
                            _ = stop_down.notified() => 0,
                            _ = bad_gateway.notified() => {
                                let _ = cw.write_all(BAD_GATEWAY).await;
                                0
                            }
                        };
                        let n = n.min(limit_down - done);
                        if lose_answer.load(Ordering::SeqCst) {
                            break;
                        }
                        if let Some(at) = flip_down.filter(|at| (done..done + n).contains(at)) {
                            buf[at - done] ^= 0xff;
                        }
                        if n == 0 || cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        done += n;
                    }
                    let _ = cw.shutdown().await;
                    stop_down.notify_one();
                });
            }
        });
        Proxy { base, sent }
    }

    /// Every request line and range header the clients sent, in order.
    fn asked(&self) -> Vec<String> {
        let pattern = regex::Regex::new(
            r"(?i)((?:GET|PUT|POST) /\S+ HTTP/1\.1|content-range: bytes \d+-\d+/\d+|range: bytes=\d+-)",
        )
        .unwrap();
        let sent = self.sent.lock().unwrap();
        sent.iter()
            .flat_map(|conn| {
                let text = String::from_utf8_lossy(conn).into_owned();
                pattern.find_iter(&text).map(|m| m.as_str().to_ascii_lowercase()).collect::<Vec<_>>()
            })
            .collect()
    }

    /// The first bytes of every upload part after the first.
    fn put_offsets(&self) -> Vec<u64> {
        let asked = self.asked();
        asked
            .iter()
            .filter_map(|a| a.strip_prefix("content-range: bytes "))
            .map(|r| r.split('-').next().unwrap().parse().unwrap())
            .collect()
    }
}

fn progress(seen: &Arc<Mutex<Vec<Progress>>>) -> impl FnMut(Progress) {
    let seen = seen.clone();
    move |p| seen.lock().unwrap().push(p)
}

fn output_of(source: &Path, name: &str) -> PathBuf {
    partial_dir_for(source).join(name)
}

/// The job once the main node's commit of its finished upload ended (it leaves ENCODING:
/// COMPLETED, or failed and back in the queue or FAILED).
async fn committed(far: &Far, job: i32) -> job::Model {
    for _ in 0..1200 {
        let row = repo::jobs::get(far.server.db(), job).await.unwrap();
        if row.status != JobStatus::Encoding {
            return row;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the commit of job {job}'s upload never ended");
}

#[actix_web::test]
async fn a_source_goes_down_and_its_output_up_checked_whole() {
    round_trip(far_node().await).await;
}

/// The same on PostgreSQL (the kept hashes are rows of `transfer_sources`).
#[actix_web::test]
async fn a_round_trip_on_postgres() {
    let Some(server) = TestServer::postgres("transfer_round_trip").await else { return };
    round_trip(far_node_on(server).await).await;
}

async fn round_trip(far: Far) {
    let (source, data, job) = far.source("film.mkv", 3 * (1 << 20) + 12_345).await;
    let work = tempfile::tempdir().unwrap();
    let client = far.client(&far.server.base);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let got = client.download(job, LEASE, work.path(), &mut progress(&seen)).await.unwrap();
    assert_eq!(std::fs::read(&got.path).unwrap(), data);
    assert_eq!((got.sha256.as_str(), got.size), (sha(&data).as_str(), data.len() as u64));
    let last = *seen.lock().unwrap().last().unwrap();
    assert_eq!((last.direction, last.bytes, last.total), (Direction::Download, data.len() as u64, data.len() as u64));

    // Asked again with everything there: nothing more to read, the same file.
    let again = client.download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    assert_eq!(again.sha256, sha(&data));

    // A range past the end is not satisfiable; one inside answers only its bytes.
    let past = [("Range", format!("bytes={}-", data.len()))];
    let (status, _, _) =
        far.raw(Method::GET, &format!("/cluster/jobs/{job}/source"), &far.bearer, LEASE, &past, vec![]).await;
    assert_eq!(status, 416);
    let inside = [("Range", "bytes=10-19".to_string())];
    let (status, headers, body) =
        far.raw(Method::GET, &format!("/cluster/jobs/{job}/source"), &far.bearer, LEASE, &inside, vec![]).await;
    assert_eq!(status, 206);
    assert_eq!(body, data[10..20]);
    assert_eq!(headers.get("content-range").unwrap().to_str().unwrap(), format!("bytes 10-19/{}", data.len()));
    assert_eq!(headers.get("x-condense-sha256").unwrap().to_str().unwrap(), sha(&data));
    assert_eq!(headers.get("x-condense-size").unwrap().to_str().unwrap(), data.len().to_string());

    let output = bytes(2 * (1 << 20) + 777, 99);
    let encoded = work.path().join("output.mkv");
    std::fs::write(&encoded, &output).unwrap();
    seen.lock().unwrap().clear();
    let size = client.upload(job, LEASE, &encoded, "mkv", &got.sha256, None, &mut progress(&seen)).await.unwrap();
    assert_eq!(size, output.len() as u64);
    // Checked whole (its SHA-256) and handed to the commit, which refuses bytes that are no
    // video: the job fails, the original as it was and the upload gone with the attempt.
    let ended = committed(&far, job).await;
    assert_ne!(ended.status, JobStatus::Completed);
    assert_eq!(std::fs::read(&source).unwrap(), data, "the original is as it was");
    assert!(!partial_dir_for(&source).exists(), "the failed attempt's upload is removed");
    let ups: Vec<_> = seen.lock().unwrap().iter().map(|p| (p.direction, p.bytes)).collect();
    assert_eq!(ups.last(), Some(&(Direction::Upload, output.len() as u64)));
    assert_eq!(ups.len(), 3, "one report per part of 1 MiB: {ups:?}");

    far.server.finish().await;
}

#[actix_web::test]
async fn a_download_cut_off_resumes_where_it_stopped() {
    let far = far_node().await;
    let (_, data, job) = far.source("film.mkv", 3 * (1 << 20)).await;
    let proxy = Proxy::start(&far.server.base, Fault::CutDown(1 << 20)).await;
    let work = tempfile::tempdir().unwrap();
    let got = far.client(&proxy.base).download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    assert_eq!(std::fs::read(&got.path).unwrap(), data);
    let ranges: Vec<u64> = proxy
        .asked()
        .iter()
        .filter_map(|a| a.strip_prefix("range: bytes="))
        .map(|r| r.trim_end_matches('-').parse().unwrap())
        .collect();
    assert_eq!(ranges.len(), 1, "one resumption: {:?}", proxy.asked());
    assert!(ranges[0] > (1 << 19) && ranges[0] < (1 << 20), "resumed from the bytes it had: {ranges:?}");

    // A restart of the node: the bytes it kept are asked for no more.
    let kept = std::fs::read(&got.path).unwrap();
    std::fs::write(&got.path, &kept[..2_000_000]).unwrap();
    let proxy = Proxy::start(&far.server.base, Fault::CutUp(usize::MAX)).await;
    far.client(&proxy.base).download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    assert!(proxy.asked().contains(&"range: bytes=2000000-".to_string()), "{:?}", proxy.asked());
    assert_eq!(std::fs::read(&got.path).unwrap(), data);
    far.server.finish().await;
}

#[actix_web::test]
async fn an_upload_cut_off_resumes_from_the_durable_bytes() {
    let far = far_node().await;
    let (source, data, job) = far.source("film.mkv", 1000).await;
    let output = bytes(3 * (1 << 20) + 5, 7);
    let work = tempfile::tempdir().unwrap();
    let encoded = work.path().join("out.mkv");
    std::fs::write(&encoded, &output).unwrap();
    // The first part (1 MiB) goes through, the second is cut half way.
    let proxy = Proxy::start(&far.server.base, Fault::CutUp((1 << 20) + (1 << 19))).await;
    // Done: the main node found the whole upload's SHA-256 the node's.
    far.client(&proxy.base).upload(job, LEASE, &encoded, "mkv", &sha(&data), None, &mut |_| {}).await.unwrap();
    committed(&far, job).await;
    assert_eq!(std::fs::read(&source).unwrap(), data);
    let offsets = proxy.put_offsets();
    assert_eq!(offsets[..2], [0, 1 << 20], "{:?}", proxy.asked());
    let resumed = offsets[2];
    assert!(resumed > (1 << 20) && resumed < (1 << 20) + (1 << 19), "resumed inside the cut part: {offsets:?}");
    assert!(!offsets[2..].contains(&0), "never from zero again: {offsets:?}");
    far.server.finish().await;
}

#[actix_web::test]
async fn a_finish_whose_answer_was_lost_is_not_followed_by_the_upload_again() {
    let far = far_node().await;
    let (source, data, job) = far.source("film.mkv", 1000).await;
    let output = bytes(3 * (1 << 20) + 5, 8);
    let work = tempfile::tempdir().unwrap();
    let encoded = work.path().join("out.mkv");
    std::fs::write(&encoded, &output).unwrap();
    // The main node takes the finish and commits; its answer never reaches the node, which
    // asks again and learns the finish was taken (or, its commit over, that the job left
    // its lease): it neither uploads the output again nor fails the job it no longer holds.
    let proxy = Proxy::start(&far.server.base, Fault::LoseAnswer("/output/finish")).await;
    let sent = far.client(&proxy.base).upload(job, LEASE, &encoded, "mkv", &sha(&data), None, &mut |_| {}).await;
    assert_eq!(sent.unwrap(), output.len() as u64, "{:?}", proxy.asked());
    assert_eq!(proxy.put_offsets(), [0, 1 << 20, 2 << 20, 3 << 20], "uploaded once: {:?}", proxy.asked());
    let finishes = proxy.asked().iter().filter(|a| a.ends_with("/output/finish http/1.1")).count();
    assert_eq!(finishes, 1, "{:?}", proxy.asked());
    // Not an encode of the source (random bytes): the commit refuses it, the original stays.
    committed(&far, job).await;
    assert_eq!(std::fs::read(&source).unwrap(), data);
    far.server.finish().await;
}

#[actix_web::test]
async fn a_proxy_answering_502_while_the_main_node_restarts_is_asked_again() {
    let far = far_node().await;
    let (_, data, job) = far.source("film.mkv", (2 << 20) + 3).await;
    let work = tempfile::tempdir().unwrap();
    // A reverse proxy in front of the main node answers 502 to the download's first request,
    // to an upload's part and to the finish: each is asked again, none fails the transfer.
    let proxy = Proxy::start(&far.server.base, Fault::BadGateway(&["/source"])).await;
    let got = far.client(&proxy.base).download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    assert_eq!(std::fs::read(&got.path).unwrap(), data);
    let sources = proxy.asked().iter().filter(|a| a.contains("/source http/1.1")).count();
    assert_eq!(sources, 2, "asked again after the 502: {:?}", proxy.asked());

    let output = bytes(3 * (1 << 20) + 5, 9);
    let encoded = work.path().join("out.mkv");
    std::fs::write(&encoded, &output).unwrap();
    let proxy = Proxy::start(&far.server.base, Fault::BadGateway(&["PUT /cluster/", "/output/finish"])).await;
    let sent = far.client(&proxy.base).upload(job, LEASE, &encoded, "mkv", &got.sha256, None, &mut |_| {}).await;
    assert_eq!(sent.unwrap(), output.len() as u64, "{:?}", proxy.asked());
    let asked = proxy.asked();
    assert_eq!(asked.iter().filter(|a| a.ends_with("/output/finish http/1.1")).count(), 2, "{asked:?}");
    // The part answered 502 never reached the main node: the upload starts from zero, once.
    assert_eq!(proxy.put_offsets(), [0, 0, 1 << 20, 2 << 20, 3 << 20], "{asked:?}");
    committed(&far, job).await;
    far.server.finish().await;
}

/// A node without the share that reaches the main node through `proxy` (one of the examples
/// in docker/): the source comes down whole and the output goes up, in the node's usual parts
/// (8 MiB), over the example as it is.
async fn through_the_example(far: &Far, proxy: &crate::common::proxies::Proxy) {
    let (source, data, job) = far.source("film.mkv", (3 << 20) + 3).await;
    let mut client = TransferClient::new(&proxy.base, &far.bearer, 0);
    // A proxy that sends these requests elsewhere fails them at once, each time.
    (client.tries, client.patience) = (3, std::time::Duration::from_secs(3));
    let work = tempfile::tempdir().unwrap();
    let got = client.download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    assert_eq!(std::fs::read(&got.path).unwrap(), data);
    let output = bytes((9 << 20) + 5, 10);
    let encoded = work.path().join("out.mkv");
    std::fs::write(&encoded, &output).unwrap();
    let sent = client.upload(job, LEASE, &encoded, "mkv", &got.sha256, None, &mut |_| {}).await;
    assert_eq!(sent.unwrap(), output.len() as u64);
    // Random bytes, not an encode: the main node's commit refuses them; the original stays.
    committed(far, job).await;
    assert_eq!(std::fs::read(&source).unwrap(), data);
}

#[actix_web::test]
async fn the_nginx_example_carries_a_node_without_the_share() {
    let far = far_node().await;
    let proxy = crate::common::proxies::Proxy::nginx(far.server.base.trim_start_matches("http://"));
    through_the_example(&far, &proxy).await;
    far.server.finish().await;
}

#[actix_web::test]
async fn the_caddy_example_carries_a_node_without_the_share() {
    let far = far_node().await;
    let proxy = crate::common::proxies::Proxy::caddy(far.server.base.trim_start_matches("http://"));
    through_the_example(&far, &proxy).await;
    far.server.finish().await;
}

#[actix_web::test]
async fn a_corrupted_upload_is_refused_by_its_checksum_and_sent_again() {
    let far = far_node().await;
    let (source, data, job) = far.source("film.mkv", 1000).await;
    let url = format!("/cluster/jobs/{job}/output");
    // By hand: bytes that are not the ones the finish names are discarded.
    let part = [("Content-Range", "bytes 0-9/*".to_string())];
    let (status, _, body) = far.raw(Method::PUT, &url, &far.bearer, LEASE, &part, b"0123456789".to_vec()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let again = [("Content-Range", "bytes 0-9/*".to_string())];
    let (status, _, body) = far.raw(Method::PUT, &url, &far.bearer, LEASE, &again, b"0123456789".to_vec()).await;
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, code(&body)), (409, "offset_mismatch"), "{body}");
    let finish =
        serde_json::json!({"sha256": sha(b"0123456789x"), "size": 10, "extension": "mkv", "sourceSha256": sha(&data)});
    let json = [("Content-Type", "application/json".to_string())];
    let (status, _, body) = far
        .raw(Method::POST, &format!("{url}/finish"), &far.bearer, LEASE, &json, serde_json::to_vec(&finish).unwrap())
        .await;
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, code(&body)), (409, "checksum_mismatch"), "{body}");
    let (status, _, body) = far.raw(Method::GET, &url, &far.bearer, LEASE, &[], vec![]).await;
    assert_eq!(
        (status, serde_json::from_slice::<serde_json::Value>(&body).unwrap()["length"].as_u64()),
        (200, Some(0))
    );

    // Through the client: a byte flipped on the way is caught and the output sent again.
    let output = bytes(1 << 20, 3);
    let work = tempfile::tempdir().unwrap();
    let encoded = work.path().join("out.mkv");
    std::fs::write(&encoded, &output).unwrap();
    let proxy = Proxy::start(&far.server.base, Fault::FlipUp(4000)).await;
    let mut client = far.client(&proxy.base);
    client.part_bytes = 256 << 10;
    client.upload(job, LEASE, &encoded, "mkv", &sha(&data), None, &mut |_| {}).await.unwrap();
    committed(&far, job).await;
    assert_eq!(std::fs::read(&source).unwrap(), data);
    let finishes = proxy.asked().iter().filter(|a| a.starts_with("post ")).count();
    assert_eq!(finishes, 2, "{:?}", proxy.asked());
    far.server.finish().await;
}

#[actix_web::test]
async fn an_output_of_a_source_changed_since_is_refused() {
    let far = far_node().await;
    let (source, _, job) = far.source("film.mkv", 100_000).await;
    let work = tempfile::tempdir().unwrap();
    let client = far.client(&far.server.base);
    let got = client.download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    // Replaced on the main node (a better release arrived) while the node encodes.
    let newer = bytes(100_001, 5);
    std::fs::write(&source, &newer).unwrap();
    let encoded = work.path().join("out.mkv");
    std::fs::write(&encoded, bytes(5000, 1)).unwrap();
    let refused = client.upload(job, LEASE, &encoded, "mkv", &got.sha256, None, &mut |_| {}).await.unwrap_err();
    assert!(matches!(refused, ClientError::SourceChanged(_)), "{refused}");
    assert!(refused.to_string().contains(&sha(&newer)), "{refused}");
    assert!(!output_of(&source, "upload.part").exists(), "the upload was discarded");
    assert!(!output_of(&source, "output.mkv").exists());
    assert_eq!(std::fs::read(&source).unwrap(), newer);
    // A download now starts over from the new file.
    let fresh = client.download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    assert_eq!(std::fs::read(&fresh.path).unwrap(), newer);
    far.server.finish().await;
}

#[actix_web::test]
async fn only_the_node_holding_the_lease_transfers() {
    let far = far_node().await;
    let (_, _, job) = far.source("film.mkv", 1000).await;
    let (other, _) = enroll(&far.server, "other").await;
    let url = format!("/cluster/jobs/{job}/source");
    for (bearer, lease, status) in [
        (other.as_str(), LEASE, 403),
        (far.bearer.as_str(), "an old lease", 403),
        (crate::common::api::CLUSTER_TOKEN, LEASE, 403),
        ("far-identity.a-wrong-credential", LEASE, 401),
    ] {
        for (method, path) in [(Method::GET, url.clone()), (Method::GET, format!("/cluster/jobs/{job}/output"))] {
            let (got, _, body) = far.raw(method, &path, bearer, lease, &[], vec![]).await;
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(got, status, "{bearer} {lease} {path}: {body}");
            assert!(body["error"]["message"].is_string(), "{body}");
        }
    }
    let part = [("Content-Range", "bytes 0-2/*".to_string())];
    let (status, _, _) =
        far.raw(Method::PUT, &format!("/cluster/jobs/{job}/output"), &other, LEASE, &part, b"abc".to_vec()).await;
    assert_eq!(status, 403);
    let client = TransferClient::new(&far.server.base, &other, 0);
    let refused = client.download(job, LEASE, tempfile::tempdir().unwrap().path(), &mut |_| {}).await.unwrap_err();
    assert!(matches!(refused, ClientError::Refused { status: 403, .. }), "{refused}");
    far.server.finish().await;
}

#[actix_web::test]
async fn a_job_path_through_dot_dot_or_a_link_is_refused() {
    let far = far_node().await;
    let root = far.root();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().canonicalize().unwrap().join("secret.mkv");
    std::fs::write(&secret, b"not the library's").unwrap();
    std::fs::create_dir(root.join("Show")).unwrap();
    std::fs::write(root.join("a.mkv"), b"a").unwrap();
    std::os::unix::fs::symlink(&secret, root.join("Show/linked.mkv")).unwrap();
    let dotted = far.job(&format!("{}/Show/../a.mkv", root.display())).await;
    let escaping = far.job(&format!("{}/../{}", root.display(), secret.strip_prefix("/").unwrap().display())).await;
    let linked = far.job(root.join("Show/linked.mkv").to_str().unwrap()).await;
    for job in [dotted, escaping, linked] {
        let (status, _, body) =
            far.raw(Method::GET, &format!("/cluster/jobs/{job}/source"), &far.bearer, LEASE, &[], vec![]).await;
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((status, code(&body)), (409, "source_refused"), "{body}");
        assert!(!body.to_string().contains("not the library's"));
    }
    far.server.finish().await;
}

/// A source's hash is kept by a task of its own: the request that asked for it may be dropped
/// (the node's client gave up waiting on a large file) and the hash is still kept for the
/// node's next try, which then answers at once. Dropped with its request, the hash was begun
/// again by every try and never kept.
#[actix_web::test]
async fn a_hash_whose_request_went_away_is_still_kept() {
    let far = far_node().await;
    let (path, data, job) = far.source("big.mkv", 3 << 20).await;
    let db = far.server.db().clone();
    let mtime_ns = std::fs::metadata(&path).unwrap().modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap();
    let mtime_ns = i64::try_from(mtime_ns.as_nanos()).unwrap();
    let reader = std::fs::File::open(&path).unwrap();
    // Asked for, and its answer never awaited.
    drop(condense::actors::cluster::transfer::hash_and_keep(db.clone(), job, data.len() as u64, mtime_ns, reader));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let kept = loop {
        if let Some(kept) = repo::transfers::hash_of(&db, job, data.len() as i64, mtime_ns).await.unwrap() {
            break kept;
        }
        assert!(std::time::Instant::now() < deadline, "the hash was not kept");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(kept, sha(&data));
    // The node's download is answered with the same hash.
    let work = tempfile::tempdir().unwrap();
    let got = far.client(&far.server.base).download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    assert_eq!(got.sha256, kept);
    far.server.finish().await;
}

/// A job of `source` on `far`, encoded there for real: the far node's download of it into a
/// folder of its own (kept with it), and the plan the transcoder child ran on the copy
/// (one-second segments, x265 ultrafast, `scope`).
async fn encoded_by_far(
    far: &Far,
    source: &Path,
    scope: RunScope,
) -> (i32, tempfile::TempDir, condense::actors::transfer::Downloaded, EncodePlan) {
    let job = far.job(source.to_str().unwrap()).await;
    let work = tempfile::tempdir().unwrap();
    let got = far.client(&far.server.base).download(job, LEASE, work.path(), &mut |_| {}).await.unwrap();
    let info = condense_media::probe::probe(&got.path).unwrap();
    let profile = crate::common::media::profile("libx265", 30, "ultrafast");
    let mut plan = EncodePlan::new(&got.path, &info, &profile).unwrap();
    plan.segment_seconds = 1.0;
    plan.scope = scope;
    let (end, events) = crate::common::transcoder::run(&plan).await;
    assert_eq!(end, condense::media::transcoder::ChildEnd::Completed, "{events:?}");
    (job, work, got, plan)
}

/// The main node's end of a job by transfer: an output the far node encoded for real (the
/// transcoder child on its downloaded copy), uploaded and finished, is verified against the
/// source on the main node and replaces it; the job COMPLETED in the far node's name, with
/// nothing left of the upload. The original stays as it was until then.
#[actix_web::test]
async fn an_uploaded_output_is_verified_and_then_replaces_the_original() {
    let far = far_node().await;
    let source = crate::common::media::h264(&far.root(), "film.mkv", "320x240", 2);
    let (original, frames) = (std::fs::read(&source).unwrap(), crate::common::shim::video_frames(&source));
    let (job, _work, got, plan) = encoded_by_far(&far, &source, RunScope::Whole).await;
    let client = far.client(&far.server.base);
    assert_eq!(std::fs::read(&source).unwrap(), original, "nothing touched the original before the upload");

    // What the node says of its run goes with the finish: its phases, the upload's added.
    let ran = RunStats {
        cpu_ms: 900,
        wall_ms: 700,
        phases: vec![PhaseTime::new("download", 40, 0), PhaseTime::new("video", 600, 880)],
        alone_ms: 30,
    };
    let output = plan.output_path();
    let size =
        client.upload(job, LEASE, &output, &plan.output_extension, &got.sha256, Some(ran), &mut |_| {}).await.unwrap();
    // The finish asked again (its answer lost on the way) while the commit analyses the
    // source: the same answer, no second commit, and the upload not asked for again. Once
    // the commit has ended the lease is gone (403); never a refusal of the upload (409).
    let finish = serde_json::json!({
        "sha256": sha(&std::fs::read(plan.output_path()).unwrap()),
        "size": size,
        "extension": plan.output_extension,
        "sourceSha256": got.sha256,
    });
    let json = [("Content-Type", "application/json".to_string())];
    let url = format!("/cluster/jobs/{job}/output/finish");
    let (status, _, body) =
        far.raw(Method::POST, &url, &far.bearer, LEASE, &json, serde_json::to_vec(&finish).unwrap()).await;
    assert!(status == 202 || status == 403, "{status}: {}", String::from_utf8_lossy(&body));
    let done = committed(&far, job).await;
    assert_eq!(done.status, JobStatus::Completed, "{:?}", done.failure_reason);
    assert_eq!(done.node_name.as_deref(), Some("far"));
    let replaced = condense::media::plan::final_path_with(&source, &plan.output_extension);
    assert_eq!(replaced, source, "HEVC stays in Matroska");
    assert_ne!(std::fs::read(&replaced).unwrap(), original, "the original was replaced");
    assert_eq!(condense_media::probe::probe(&replaced).unwrap().video().unwrap().codec, "hevc");
    assert_eq!(crate::common::shim::video_frames(&replaced), frames, "every frame is there");
    assert_eq!(done.output_size, Some(std::fs::metadata(&replaced).unwrap().len() as i64));
    assert!(!partial_dir_for(&source).exists(), "nothing is left of the upload");
    // Where the job's time went, in the order it ran: the node's phases in its name, then
    // the main node's checks and replace.
    assert_eq!((done.cpu_time_ms, done.wall_time_ms), (Some(900), Some(700)));
    let completed = repo::events::list(far.server.db(), job).await.unwrap();
    let completed = completed.iter().rev().find(|e| e.kind == "completed").unwrap();
    let detail = completed.detail.clone().unwrap();
    let phases: Vec<PhaseTime> = serde_json::from_value(detail["phases"].clone()).unwrap();
    let named: Vec<(&str, Option<&str>)> = phases.iter().map(|p| (p.phase.as_str(), p.node.as_deref())).collect();
    assert_eq!(
        named,
        [
            ("download", Some("far")),
            ("video", Some("far")),
            ("upload", Some("far")),
            ("validation", None),
            ("verification", None),
            ("replace", None)
        ],
        "{detail}"
    );
    assert_eq!((phases[1].wall_ms, phases[1].cpu_ms), (600, 880));
    assert!(phases[3].cpu_ms > 0 && phases[4].cpu_ms > 0, "{phases:?}");
    assert_eq!(detail["aloneMs"], 30);
    far.server.finish().await;
}

/// Issue 39, "upload while encoding": a part cut off mid-way resumes from the bytes the
/// main node holds of it (never from zero again), and lands whole under its name in the
/// partial folder beside the original; asked again once held whole, nothing is sent. A name
/// that is not a part a node's run makes, and a node without the job's lease, are refused.
#[actix_web::test]
async fn a_part_cut_off_resumes_from_its_durable_bytes_and_one_held_whole_is_not_sent_again() {
    use condense::actors::transfer::parts::Held;
    use condense::media::layout::AUDIO_FILE;
    use condense::media::parts::Part;
    let far = far_node().await;
    let (source, _, job) = far.source("film.mkv", 1000).await;
    let data = bytes(3 * (1 << 20) + 5, 11);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join(AUDIO_FILE);
    std::fs::write(&file, &data).unwrap();
    // The first piece (1 MiB) goes through, the second is cut half way.
    let proxy = Proxy::start(&far.server.base, Fault::CutUp((1 << 20) + (1 << 19))).await;
    let client = far.client(&proxy.base);
    let mut reports = Vec::new();
    let part = client.upload_part(job, LEASE, AUDIO_FILE, &file, &mut |at, _| reports.push(at)).await.unwrap();
    assert_eq!(part, Part { name: AUDIO_FILE.into(), size: data.len() as u64, sha256: sha(&data) });
    assert_eq!(std::fs::read(partial_dir_for(&source).join(AUDIO_FILE)).unwrap(), data);
    let offsets = proxy.put_offsets();
    assert_eq!(offsets[..2], [0, 1 << 20], "{:?}", proxy.asked());
    let resumed = offsets[2];
    assert!(resumed > (1 << 20) && resumed < (1 << 20) + (1 << 19), "resumed inside the cut piece: {offsets:?}");
    assert!(!offsets[2..].contains(&0), "never from zero again: {offsets:?}");
    assert_eq!(reports.last(), Some(&(data.len() as u64)));

    // Held whole: nothing is sent again, and the listing names it.
    let sent = proxy.put_offsets().len();
    assert_eq!(client.upload_part(job, LEASE, AUDIO_FILE, &file, &mut |_, _| {}).await.unwrap(), part);
    assert_eq!(proxy.put_offsets().len(), sent);
    match client.parts_held(job, LEASE).await.unwrap() {
        Some(Held::Parts(held)) => assert_eq!((held.parts, held.arriving), (vec![part], vec![])),
        other => panic!("{other:?}"),
    }

    let range = [("Content-Range", "bytes 0-1/*".to_string())];
    let url = format!("/cluster/jobs/{job}/parts/manifest.json");
    let (status, _, body) = far.raw(Method::PUT, &url, &far.bearer, LEASE, &range, b"{}".to_vec()).await;
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(!partial_dir_for(&source).join("manifest.json.upload").exists());
    let url = format!("/cluster/jobs/{job}/parts");
    let (status, _, _) = far.raw(Method::GET, &url, &far.bearer, "another lease", &[], vec![]).await;
    assert_eq!(status, 403);
    far.server.finish().await;
}

/// Issue 39, "upload while encoding": a part with a byte flipped on the way is refused by
/// its checksum (discarded on the main node) and sent again whole; what the main node then
/// holds under the part's name is the node's file, byte for byte.
#[actix_web::test]
async fn a_corrupted_part_is_refused_by_its_checksum_and_sent_again() {
    use condense::media::layout::segment_file;
    let far = far_node().await;
    let (source, _, job) = far.source("film.mkv", 1000).await;
    let data = bytes(1 << 20, 5);
    let work = tempfile::tempdir().unwrap();
    let name = segment_file(0);
    let file = work.path().join(&name);
    std::fs::write(&file, &data).unwrap();
    let proxy = Proxy::start(&far.server.base, Fault::FlipUp(4000)).await;
    let mut client = far.client(&proxy.base);
    client.part_bytes = 256 << 10;
    let part = client.upload_part(job, LEASE, &name, &file, &mut |_, _| {}).await.unwrap();
    assert_eq!(part.sha256, sha(&data));
    assert_eq!(std::fs::read(partial_dir_for(&source).join(&name)).unwrap(), data);
    let taken = proxy.asked().iter().filter(|a| a.starts_with("post ") && a.contains("/done")).count();
    assert_eq!(taken, 2, "refused once, then taken: {:?}", proxy.asked());
    far.server.finish().await;
}

/// Issue 39, "upload while encoding": a node's run that stops before the mux
/// (`RunScope::Encode`) leaves no output; its segments go to the main node as parts, then
/// the finish with its manifest and plan. A finish whose manifest names a segment the main
/// node does not hold is refused (the node sends it, then finishes again); the main node
/// then muxes the output from the original and the parts, verifies it and replaces the
/// original with every frame; the job's phases name the mux on the main node.
#[actix_web::test]
async fn an_encode_sent_in_parts_is_muxed_on_the_main_node_and_replaces_the_original() {
    use condense::actors::cluster::parts::PartsFinish;
    use condense::actors::transfer::parts::Finished;
    use condense::media::manifest::Manifest;
    let far = far_node().await;
    let source = crate::common::media::h264(&far.root(), "film.mkv", "320x240", 3);
    let (original, frames) = (std::fs::read(&source).unwrap(), crate::common::shim::video_frames(&source));
    let (job, _work, got, plan) = encoded_by_far(&far, &source, RunScope::Encode).await;
    let client = far.client(&far.server.base);
    assert!(!plan.output_path().exists(), "the run stopped before the mux");
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(plan.partial_dir.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest.video_complete && manifest.segments.len() >= 2, "{manifest:?}");

    let mut parts = Vec::new();
    for segment in manifest.segments.iter().filter(|s| !s.file.is_empty()) {
        let path = plan.partial_dir.join(&segment.file);
        parts.push(client.upload_part(job, LEASE, &segment.file, &path, &mut |_, _| {}).await.unwrap());
    }
    assert_eq!(std::fs::read(&source).unwrap(), original, "nothing touched the original before the finish");
    let finish = |parts: &[condense::media::parts::Part]| PartsFinish {
        extension: plan.output_extension.clone(),
        source_sha256: got.sha256.clone(),
        plan: plan.clone(),
        manifest: manifest.clone(),
        parts: parts.to_vec(),
        run: Default::default(),
    };
    // The last segment held back: the manifest names a part the main node does not hold.
    let last = parts.pop().unwrap();
    std::fs::remove_file(partial_dir_for(&source).join(&last.name)).unwrap();
    match client.finish_parts(job, LEASE, &finish(&parts)).await.unwrap() {
        Finished::Missing(why) => assert!(why.contains(&last.name), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(&source).unwrap(), original);
    let path = plan.partial_dir.join(&last.name);
    parts.push(client.upload_part(job, LEASE, &last.name, &path, &mut |_, _| {}).await.unwrap());
    assert_eq!(client.finish_parts(job, LEASE, &finish(&parts)).await.unwrap(), Finished::Committing);

    let done = committed(&far, job).await;
    assert_eq!(done.status, JobStatus::Completed, "{:?}", done.failure_detail);
    assert_eq!(condense_media::probe::probe(&source).unwrap().video().unwrap().codec, "hevc");
    assert_eq!(crate::common::shim::video_frames(&source), frames, "every frame is there");
    assert!(!partial_dir_for(&source).exists(), "nothing is left of the parts");
    let completed = repo::events::list(far.server.db(), job).await.unwrap();
    let completed = completed.iter().rev().find(|e| e.kind == "completed").unwrap();
    let phases: Vec<PhaseTime> = serde_json::from_value(completed.detail.clone().unwrap()["phases"].clone()).unwrap();
    let named: Vec<(&str, Option<&str>)> = phases.iter().map(|p| (p.phase.as_str(), p.node.as_deref())).collect();
    assert!(named.contains(&("mux", None)), "{named:?}");
    assert!(named.ends_with(&[("verification", None), ("replace", None)]), "{named:?}");
    far.server.finish().await;
}

/// Issue 39, "upload while encoding": the main node's mux child (`RunScope::Mux`) joins
/// what a node uploaded or refuses it; it never encodes. Over segments made under another
/// plan (another quality: another digest), or a folder without a manifest, it fails with
/// the reason and leaves the folder as it found it: no segment made, none removed, no
/// output.
#[actix_web::test]
async fn a_mux_only_run_refuses_segments_of_another_plan_and_encodes_nothing() {
    let far = far_node().await;
    let source = crate::common::media::h264(&far.root(), "film.mkv", "320x240", 2);
    let (_job, _work, _got, plan) = encoded_by_far(&far, &source, RunScope::Encode).await;
    let names = |dir: &Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    };
    let before = names(&plan.partial_dir);
    assert!(before.iter().any(|n| n.starts_with("seg-")), "{before:?}");

    let other = EncodePlan { scope: RunScope::Mux, ..plan.with_quality(plan.quality() + 2) };
    let (end, events) = crate::common::transcoder::run(&other).await;
    match end {
        condense::media::transcoder::ChildEnd::Failed(e) => assert!(e.message.contains("not whole"), "{e:?}"),
        other => panic!("{other:?}: {events:?}"),
    }
    assert_eq!(names(&plan.partial_dir), before, "the folder as it was");

    std::fs::remove_file(plan.partial_dir.join("manifest.json")).unwrap();
    let before = names(&plan.partial_dir);
    let (end, events) = crate::common::transcoder::run(&EncodePlan { scope: RunScope::Mux, ..plan.clone() }).await;
    assert!(matches!(end, condense::media::transcoder::ChildEnd::Failed(_)), "{end:?}: {events:?}");
    assert_eq!(names(&plan.partial_dir), before, "nothing encoded over a folder without a manifest");
    far.server.finish().await;
}

/// A job of a `seconds` s clip `film.mkv` on `far`, whose output, made by ffmpeg with
/// `args` as `out.<extension>`, is uploaded under that extension: the source, its bytes and
/// the job as the main node ended it.
async fn uploaded_as(far: &Far, seconds: u32, args: &[&str], extension: &str) -> (PathBuf, Vec<u8>, job::Model) {
    let source = crate::common::media::h264(&far.root(), "film.mkv", "320x240", seconds);
    let original = std::fs::read(&source).unwrap();
    let job = far.job(source.to_str().unwrap()).await;
    let work = tempfile::tempdir().unwrap();
    let encoded = work.path().join(format!("out.{extension}"));
    let (from, to) = (source.to_str().unwrap(), encoded.to_str().unwrap());
    crate::common::media::ffmpeg(&[&["-i", from], args, &[to]].concat());
    far.client(&far.server.base)
        .upload(job, LEASE, &encoded, extension, &sha(&original), None, &mut |_| {})
        .await
        .unwrap();
    (source, original, committed(far, job).await)
}

/// The node does not choose the container: an output uploaded under another extension
/// than the library's rules give the source fails the job, the original as it was.
#[actix_web::test]
async fn an_upload_in_another_container_than_planned_is_not_committed() {
    let far = far_node().await;
    let hevc = ["-c:v", "libx265", "-preset", "ultrafast", "-tag:v", "hvc1"];
    let (source, original, ended) = uploaded_as(&far, 1, &hevc, "mp4").await;
    assert_ne!(ended.status, JobStatus::Completed);
    let why = ended.failure_detail.unwrap_or_default();
    assert!(why.contains("uploaded a .mp4 output where this file's output is .mkv"), "{why}");
    assert_eq!(std::fs::read(&source).unwrap(), original, "the original is as it was");
    assert!(!source.with_extension("mp4").exists());
    far.server.finish().await;
}

/// The main node's verification stands between an upload and the original: an output that
/// lacks a second of the source (a whole, playable HEVC file, checked whole by its SHA-256
/// on the way) fails the job, and the original stays as it was.
#[actix_web::test]
async fn an_uploaded_output_short_of_frames_never_replaces_the_original() {
    let far = far_node().await;
    let (source, original, ended) =
        uploaded_as(&far, 2, &["-t", "1", "-c:v", "libx265", "-preset", "ultrafast"], "mkv").await;
    assert_eq!(ended.failure_reason.as_deref(), Some("file validation failed"), "{:?}", ended.failure_detail);
    assert_eq!(std::fs::read(&source).unwrap(), original, "the original is as it was");
    assert!(!partial_dir_for(&source).exists(), "the refused output is removed");
    far.server.finish().await;
}

/// The source replaced on the main node after the node's upload was checked against its
/// SHA-256 and before the commit (a better release of the same length arriving then): the
/// output of the old version never takes the new file's place, though it would pass the
/// verification (same frames); the job fails for another try, the new file as it is.
#[actix_web::test]
async fn a_source_replaced_after_the_finish_is_not_overwritten_by_the_old_encode() {
    use condense::actors::cluster::transfer::{finish, Finish, Finished};
    let far = far_node().await;
    let source = crate::common::media::h264(&far.root(), "film.mkv", "320x240", 2);
    let original = std::fs::read(&source).unwrap();
    let job = far.job(source.to_str().unwrap()).await;
    let work = tempfile::tempdir().unwrap();
    let encoded = work.path().join("out.mkv");
    let (from, to) = (source.to_str().unwrap(), encoded.to_str().unwrap());
    crate::common::media::ffmpeg(&["-i", from, "-c:v", "libx265", "-preset", "ultrafast", to]);
    let output = std::fs::read(&encoded).unwrap();
    let part = [("Content-Range", format!("bytes 0-{}/*", output.len() - 1))];
    let url = format!("/cluster/jobs/{job}/output");
    let (status, _, body) = far.raw(Method::PUT, &url, &far.bearer, LEASE, &part, output.clone()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // The finish's checks, as the endpoint runs them, then the new release, then the commit.
    let row = repo::jobs::get(far.server.db(), job).await.unwrap();
    let done = Finish {
        sha256: sha(&output),
        size: output.len() as u64,
        extension: "mkv".into(),
        source_sha256: sha(&original),
        run: Default::default(),
    };
    let Finished { lock, source: encoded_from, .. } = finish(far.server.db(), &row, done).await.unwrap();
    drop(lock);
    let newer = work.path().join("newer.mkv");
    let video = "smptebars=size=320x240:rate=25";
    crate::common::media::ffmpeg(&["-f", "lavfi", "-i", video, "-t", "2", "-c:v", "libx264", newer.to_str().unwrap()]);
    let newer_bytes = std::fs::read(&newer).unwrap();
    std::fs::rename(&newer, &source).unwrap();
    let env = far.server.state.runtime.jobs.clone();
    condense::actors::job::remote::commit_remote(
        &env,
        job,
        LEASE.into(),
        Some("far".into()),
        condense::actors::job::remote::Uploaded::Output { extension: "mkv".into() },
        encoded_from,
        None,
    )
    .await
    .unwrap();
    let ended = repo::jobs::get(far.server.db(), job).await.unwrap();
    assert_ne!(ended.status, JobStatus::Completed);
    let why = ended.failure_detail.unwrap_or_default();
    assert!(why.contains("the source changed since"), "{why}");
    assert_eq!(std::fs::read(&source).unwrap(), newer_bytes, "the new release is as it arrived");
    far.server.finish().await;
}

const SPAN_LEASE: &str = "the far node's lease on span 2";

/// A job's partial folder as its run leaves it for helpers: the plan of a 3 s clip, a
/// manifest cutting it in three spans (none finished), and span 2 leased to the far node.
async fn span_for_far(far: &Far) -> (PathBuf, PathBuf, i32) {
    use condense::media::manifest::Manifest;
    let source = crate::common::media::h264(&far.root(), "film.mkv", "320x240", 3);
    let job = far.job(source.to_str().unwrap()).await;
    let info = condense_media::probe::probe(&source).unwrap();
    let mut plan = condense::media::plan::EncodePlan::new(
        &source,
        &info,
        &crate::common::media::profile("libx265", 30, "ultrafast"),
    )
    .unwrap();
    let dir = partial_dir_for(&source);
    drop(condense::media::partial::lock_run(&dir).unwrap().unwrap());
    plan.partial_dir = dir.clone();
    let mut manifest = Manifest::new(&plan);
    manifest.boundaries = Some(vec![1000, 2000]);
    std::fs::write(Manifest::path(&dir), serde_json::to_vec(&manifest).unwrap()).unwrap();
    std::fs::write(dir.join(condense::media::layout::PLAN_FILE), serde_json::to_vec(&plan).unwrap()).unwrap();
    entities::job_segment::ActiveModel {
        job_id: Set(job),
        span: Set(2),
        span_from: Set(Some(2000)),
        span_to: Set(None),
        status: Set(entities::sea_orm_active_enums::SegmentStatus::Encoding),
        node_id: Set(Some(far.node_id)),
        node_name: Set(Some("far".into())),
        lease_id: Set(Some(SPAN_LEASE.into())),
        lease_expires_at: Set(Some(chrono::Utc::now() + chrono::Duration::hours(1))),
        frames: Set(0),
        bytes: Set(0),
        fps: Set(0.0),
        updated_at: Set(chrono::Utc::now()),
    }
    .insert(far.server.db())
    .await
    .unwrap();
    (source, dir, job)
}

/// A record of span 2 (`span_for_far`) with one segment file of `bytes`.
fn record_of_span_2(
    plan: &condense::media::plan::EncodePlan,
    file: &str,
    bytes: u64,
) -> condense::media::span_record::SpanRecord {
    let segment = condense::media::manifest::Segment {
        index: 0,
        span: condense::domain::segments::Span { from: Some(2000), to: None },
        file: file.to_string(),
        first_pts: 2000,
        last_pts: 2960,
        frames: 25,
        bytes,
    };
    condense::media::span_record::SpanRecord {
        plan_digest: plan.digest(),
        span: 2,
        segments: vec![segment],
        video: None,
    }
}

/// Issue 39, item 4, over real HTTP: the main node claims a span for the node holding its
/// lease (and no other) and says what is left of it; a segment file is written only under a
/// helper's name of that span, whole and checked (a corrupted one is removed); the record
/// is written only when every file it names arrived whole, and then the claim goes, for
/// the job's run to take the span in.
#[actix_web::test]
async fn a_span_for_a_node_without_the_share_is_claimed_checked_and_recorded() {
    use condense::media::layout::{helper_segment_file, span_record_file};
    use condense::media::partial::span_held;
    let far = far_node().await;
    let (source, dir, job) = span_for_far(&far).await;
    let client = far.client(&far.server.base);
    // Under the job's lease, or another node's credential: no span.
    let (other, _) = enroll(&far.server, "other").await;
    for (bearer, lease) in [(far.bearer.as_str(), LEASE), (other.as_str(), SPAN_LEASE)] {
        let (status, _, _) =
            far.raw(Method::GET, &format!("/cluster/jobs/{job}/spans/2"), bearer, lease, &[], vec![]).await;
        assert_eq!(status, 403, "{bearer} {lease}");
    }
    assert!(!span_held(&dir, 2));
    let task = client.span_task(job, 2, SPAN_LEASE).await.unwrap().unwrap();
    assert_eq!((task.given.piece.from, task.given.piece.to), (Some(2000), None));
    assert_eq!((task.given.boundaries.clone(), task.given.first_free), (vec![1000, 2000], 0));
    assert!(span_held(&dir, 2), "the main node holds the span's claim for the node");
    // The source, under the span's lease.
    let copy = tempfile::tempdir().unwrap();
    let downloaded = client.download_for_span(job, 2, SPAN_LEASE, copy.path(), &mut |_| {}).await.unwrap();
    assert_eq!(std::fs::read(&downloaded.path).unwrap(), std::fs::read(&source).unwrap());

    let body = bytes(5000, 9);
    let far_ref = &far;
    let put = move |name: String, sha: String, data: Vec<u8>| {
        let headers = [("X-Condense-Size", data.len().to_string()), ("X-Condense-Sha256", sha)];
        let path = format!("/cluster/jobs/{job}/spans/2/files/{name}");
        async move { far_ref.raw(Method::PUT, &path, &far_ref.bearer, SPAN_LEASE, &headers, data).await }
    };
    // Names condense did not give this span's files: refused, nothing written.
    for name in ["..%2Fescaped.seg", "span-00001-000.seg", "span-00002-0.seg", "manifest.json", "span-00002.json"] {
        let (status, _, answer) = put(name.into(), sha(&body), body.clone()).await;
        assert!(matches!(status, 400 | 404), "{name}: {status} {}", String::from_utf8_lossy(&answer));
    }
    assert!(!dir.parent().unwrap().join("escaped.seg").exists());
    // Not what was sent: refused, removed.
    let name = helper_segment_file(2, 0);
    let (status, _, answer) = put(name.clone(), sha(b"something else"), body.clone()).await;
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!((status, code(&answer)), (409, "checksum_mismatch"), "{answer}");
    assert!(!dir.join(&name).exists());
    // A record naming a file not uploaded whole is refused.
    let record = record_of_span_2(&task.plan, &name, 5000);
    let finish = serde_json::json!({"record": record, "sourceSha256": downloaded.sha256});
    let path = format!("/cluster/jobs/{job}/spans/2/finish");
    let json = [("Content-Type", "application/json".to_string())];
    let finish_span =
        || far.raw(Method::POST, &path, &far.bearer, SPAN_LEASE, &json, serde_json::to_vec(&finish).unwrap());
    let (status, _, answer) = finish_span().await;
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&answer));
    assert!(!dir.join(span_record_file(2)).exists());
    assert!(!span_held(&dir, 2), "a refused finish lets the claim go");

    // Asked again: claimed again, the segment written whole, the record written.
    client.span_task(job, 2, SPAN_LEASE).await.unwrap().unwrap();
    let (status, _, _) = put(name.clone(), sha(&body), body.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(std::fs::read(dir.join(&name)).unwrap(), body);
    // The same name again under the claim (a try whose answer was lost) is written over.
    let (status, _, _) = put(name.clone(), sha(&body), body.clone()).await;
    assert_eq!(status, 200);
    let (status, _, answer) = finish_span().await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let written: condense::media::span_record::SpanRecord =
        serde_json::from_slice(&std::fs::read(dir.join(span_record_file(2))).unwrap()).unwrap();
    assert_eq!(written, record);
    assert!(!span_held(&dir, 2), "the claim goes with the record");
    // The finish asked again (its answer lost on the way): the record in place is its
    // answer; another record under the same lease is not, and changes nothing.
    let (status, _, answer) = finish_span().await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let other =
        serde_json::json!({"record": record_of_span_2(&task.plan, &name, 4999), "sourceSha256": downloaded.sha256});
    let (status, _, _) =
        far.raw(Method::POST, &path, &far.bearer, SPAN_LEASE, &json, serde_json::to_vec(&other).unwrap()).await;
    assert_eq!(status, 400);
    let kept: condense::media::span_record::SpanRecord =
        serde_json::from_slice(&std::fs::read(dir.join(span_record_file(2))).unwrap()).unwrap();
    assert_eq!(kept, record);
    // The span is taken in now: a node asking again finds nothing to do.
    let nothing = client.span_task(job, 2, SPAN_LEASE).await.unwrap().unwrap_err();
    assert!(nothing.contains("record"), "{nothing}");
    far.server.finish().await;
}

/// Issue 39, item 4: a range of the source, under the lease of the span asking (and no
/// other), comes with its own SHA-256 and the whole source's; one past the source's end is
/// cut at it, one that starts past it refused; a range that comes corrupted is refused by
/// its SHA-256 and fetched again.
#[actix_web::test]
async fn a_range_of_the_source_comes_checked_under_the_span_lease_only() {
    let far = far_node().await;
    let (source, _dir, job) = span_for_far(&far).await;
    let whole = std::fs::read(&source).unwrap();
    let size = whole.len() as u64;
    let client = far.client(&far.server.base);
    let range = client.fetch_range(job, 2, SPAN_LEASE, 100, 5100).await.unwrap().unwrap();
    assert_eq!((range.from, &range.bytes[..]), (100, &whole[100..5100]));
    assert_eq!((range.sha256.as_str(), range.size), (sha(&whole).as_str(), size));
    let end = client.fetch_range(job, 2, SPAN_LEASE, size - 10, size + 1000).await.unwrap().unwrap();
    assert_eq!(end.bytes, whole[whole.len() - 10..]);
    let path = format!("/cluster/jobs/{job}/source/range");
    let (other, _) = enroll(&far.server, "other").await;
    let asked = |range: String| [("X-Condense-Span", "2".to_string()), ("Range", range)];
    for (bearer, lease) in [(far.bearer.as_str(), LEASE), (other.as_str(), SPAN_LEASE)] {
        let (status, _, _) = far.raw(Method::GET, &path, bearer, lease, &asked("bytes=0-9".into()), vec![]).await;
        assert_eq!(status, 403, "{bearer} {lease}");
    }
    for bad in [format!("bytes={size}-{}", size + 5), "bytes=-10".into(), "bytes=0-1,5-9".into(), String::new()] {
        let (status, _, answer) =
            far.raw(Method::GET, &path, &far.bearer, SPAN_LEASE, &asked(bad.clone()), vec![]).await;
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(status, 400, "{bad}: {answer}");
    }
    // A byte flipped on the way: the range is fetched again, whole.
    let proxy = Proxy::start(&far.server.base, Fault::FlipDown(3000)).await;
    let through = far.client(&proxy.base);
    let range = through.fetch_range(job, 2, SPAN_LEASE, 0, 20_000).await.unwrap().unwrap();
    assert_eq!(range.bytes, whole[..20_000]);
    let ranges = proxy.asked().iter().filter(|a| a.contains("/source/range")).count();
    assert_eq!(ranges, 2, "{:?}", proxy.asked());
    far.server.finish().await;
}

/// A span's finish whose answer never reached the node: asked again, it is answered as the
/// first was, and the node's upload of the span ends done.
#[actix_web::test]
async fn a_span_whose_finish_answer_was_lost_is_done() {
    use condense::media::layout::{helper_segment_file, span_record_file};
    let far = far_node().await;
    let (source, dir, job) = span_for_far(&far).await;
    let proxy = Proxy::start(&far.server.base, Fault::LoseAnswer("/spans/2/finish")).await;
    let client = far.client(&proxy.base);
    let task = client.span_task(job, 2, SPAN_LEASE).await.unwrap().unwrap();
    let work = tempfile::tempdir().unwrap();
    let name = helper_segment_file(2, 0);
    let body = bytes(5000, 11);
    std::fs::write(work.path().join(&name), &body).unwrap();
    let record = record_of_span_2(&task.plan, &name, 5000);
    let source_sha = sha(&std::fs::read(&source).unwrap());
    let sent = client.upload_span(job, 2, SPAN_LEASE, work.path(), &record, &source_sha, &mut |_| {}).await;
    assert_eq!(sent.unwrap(), 5000, "{:?}", proxy.asked());
    let finishes = proxy.asked().iter().filter(|a| a.ends_with("/spans/2/finish http/1.1")).count();
    assert_eq!(finishes, 2, "asked again after the lost answer: {:?}", proxy.asked());
    let written: condense::media::span_record::SpanRecord =
        serde_json::from_slice(&std::fs::read(dir.join(span_record_file(2))).unwrap()).unwrap();
    assert_eq!(written, record);
    assert_eq!(std::fs::read(dir.join(&name)).unwrap(), body);
    far.server.finish().await;
}

/// A span encoded from a source that changed on the main node since is refused.
#[actix_web::test]
async fn a_span_of_a_source_changed_since_is_refused() {
    use condense::media::layout::{helper_segment_file, span_record_file};
    let far = far_node().await;
    let (source, dir, job) = span_for_far(&far).await;
    let client = far.client(&far.server.base);
    let task = client.span_task(job, 2, SPAN_LEASE).await.unwrap().unwrap();
    let work = tempfile::tempdir().unwrap();
    let name = helper_segment_file(2, 0);
    std::fs::write(work.path().join(&name), bytes(3000, 4)).unwrap();
    let record = record_of_span_2(&task.plan, &name, 3000);
    let old = sha(&std::fs::read(&source).unwrap());
    let mut more = std::fs::OpenOptions::new().append(true).open(&source).unwrap();
    std::io::Write::write_all(&mut more, b"a new release's tail").unwrap();
    drop(more);
    let refused = client.upload_span(job, 2, SPAN_LEASE, work.path(), &record, &old, &mut |_| {}).await.unwrap_err();
    assert!(matches!(refused, ClientError::SourceChanged(_)), "{refused}");
    assert!(!dir.join(span_record_file(2)).exists());
    far.server.finish().await;
}
