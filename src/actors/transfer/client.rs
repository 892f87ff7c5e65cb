//! The linked node's client of a transfer (issue 39), for a job whose library it does not
//! see: it downloads the source from the main node into a folder of its own, resuming after
//! a drop or a restart from the bytes it already has and checking the whole against the
//! SHA-256 the main node computed; it uploads the output the same way, asking the main node
//! how many bytes are durable before each run of parts, then finishes with the checksums.
//! A checksum mismatch starts over once, then fails with the reason. A 5xx answer (a proxy
//! in front of a main node that restarts) is a failed run like a drop, asked again; a
//! finish whose answer was lost is not followed by the upload again when the main node says
//! it took it (`GET .../output` answers `committing`). `TRANSFER_MBPS` caps
//! the rate; each part reports the bytes and rate for the job's TRANSFERRING stage. The main
//! node's side is `actors::cluster::transfer` and `http::transfer`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::web::Bytes;
use futures_util::StreamExt;
use serde::Serialize;
use tokio::io::AsyncWriteExt;

use super::folders::{SOURCE_FILE, SOURCE_HASH_FILE};
use crate::actors::cluster::span_transfer::SPAN_HEADER;
use crate::actors::cluster::transfer::{Finish, NodeRun, LEASE_HEADER, SHA256_HEADER, SIZE_HEADER};
use crate::domain::transfer::{gives_up, pace, part_bytes, retry_after};
use crate::media::event::{PhaseTime, RunStats};
use crate::media::transfer::sha256_of;

/// Which way the bytes go.
pub use crate::domain::transfer::TransferDirection as Direction;

/// How far a transfer is: bytes done of `total`, and the rate (bytes per second) of this run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Progress {
    pub direction: Direction,
    pub bytes: u64,
    pub total: u64,
    pub rate: f64,
}

impl From<Progress> for crate::domain::transfer::LiveTransfer {
    fn from(p: Progress) -> Self {
        crate::domain::transfer::LiveTransfer {
            direction: p.direction,
            bytes: p.bytes,
            total: p.total,
            rate_bytes_per_second: p.rate,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the main node refused the transfer ({status} {code}): {message}")]
    Refused { status: u16, code: String, message: String },
    #[error("{0}")]
    Checksum(String),
    #[error("the source changed on the main node since it was downloaded: {0}")]
    SourceChanged(String),
    #[error("the link to the main node failed {tries} times in a row without progress: {last}")]
    Link { tries: u32, last: String },
    #[error("{what}: {error}")]
    Io { what: &'static str, error: String },
    /// The disk under WORK_DIR is full (or the user's quota spent): the attempt fails for
    /// want of room, not of the file or the link.
    #[error("{what}: {error}")]
    Full { what: &'static str, error: String },
}

pub(super) fn io(what: &'static str) -> impl Fn(std::io::Error) -> ClientError {
    move |e| match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
            ClientError::Full { what, error: e.to_string() }
        }
        _ => ClientError::Io { what, error: e.to_string() },
    }
}

/// A downloaded source.
#[derive(Debug, Clone)]
pub struct Downloaded {
    pub path: PathBuf,
    pub sha256: String,
    pub size: u64,
}

/// The last bytes of a source, fetched before the rest (`TransferClient::download_tail`).
#[derive(Debug, Clone)]
pub struct Tail {
    /// The SHA-256 the main node gave for the source they end.
    pub sha256: String,
    /// The source's whole size.
    pub size: u64,
    /// Where they start in the source.
    pub from: u64,
}

/// One node's client of the main node's transfer endpoints.
pub struct TransferClient {
    client: awc::Client,
    base: String,
    bearer: String,
    /// Megabits per second, 0 for no cap (`TRANSFER_MBPS`).
    pub mbps: u32,
    /// Bytes per uploaded part: each is durable on the main node once answered
    /// (`domain::transfer::part_bytes`).
    pub part_bytes: u64,
    /// Tries in a row that move no byte before a transfer gives up (once `patience` passed
    /// too).
    pub tries: u32,
    /// How long a transfer that moves no byte keeps trying (once `tries` failed too).
    pub patience: Duration,
}

/// Waits the pause a rate cap asks for after some bytes moved. None asked (no cap, or the
/// transfer under it): no wait at all. A zero sleep still waits for the timer's next tick
/// (about 1 ms), which after every chunk of a download held an uncapped loopback link to
/// about 25 MB/s (BENCHMARKS.md, "A node without the share").
pub(super) async fn wait_for_cap(pause: Duration) {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
}

/// How long a transfer keeps trying without moving a byte before it gives up
/// (`domain::transfer::gives_up`): long enough for the main node to restart (its graceful
/// stop alone may take 10 s) and for the node's link to find it again.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Bytes between syncs of a download: what a crash of the node may cost it.
const SYNC_EVERY: u64 = 8 << 20;
/// How long a download waits for its next bytes before it takes the link for dropped.
const IDLE: Duration = Duration::from_secs(60);

impl TransferClient {
    /// A client of the main node at `base` (`http(s)://host:port`), presenting the node's
    /// `identity.credential`.
    pub fn new(base: &str, bearer: &str, mbps: u32) -> TransferClient {
        // The first request of a source waits while the main node hashes it.
        let builder = awc::Client::builder().timeout(Duration::from_secs(600)).disable_redirects();
        let client = match crate::actors::notifier::tls_config() {
            Ok(config) => builder.connector(awc::Connector::new().rustls_0_23(Arc::new(config))).finish(),
            Err(e) => {
                tracing::warn!(error = %e, "no TLS for transfers; an https main node will fail");
                builder.finish()
            }
        };
        TransferClient {
            client,
            base: base.trim_end_matches('/').to_string(),
            bearer: bearer.to_string(),
            mbps,
            part_bytes: part_bytes(mbps),
            tries: 8,
            patience: PATIENCE,
        }
    }

    pub(super) fn url(&self, job_id: i32, what: &str) -> String {
        format!("{}/cluster/jobs/{job_id}/{what}", self.base)
    }

    pub(super) fn request(&self, method: awc::http::Method, url: String, lease: &str) -> awc::ClientRequest {
        self.client.request(method, url).bearer_auth(&self.bearer).insert_header((LEASE_HEADER, lease))
    }

    /// A request under `grant`: the job's lease, or a span's (`SPAN_HEADER` names it).
    fn granted(&self, method: awc::http::Method, url: String, grant: Grant<'_>) -> awc::ClientRequest {
        let req = self.request(method, url, grant.lease);
        match grant.span {
            Some(span) => req.insert_header((SPAN_HEADER, span.to_string())),
            None => req,
        }
    }

    /// Downloads job `job_id`'s source into `dir` (made when missing) as `SOURCE_FILE`,
    /// continuing from the bytes already there when the main node's hash is the one they
    /// were read under.
    pub async fn download(
        &self,
        job_id: i32,
        lease: &str,
        dir: &Path,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<Downloaded, ClientError> {
        self.fetch(job_id, Grant { lease, span: None }, dir, on_progress).await
    }

    /// Fetches the last `want` bytes of job `job_id`'s source into `path`, before the rest
    /// (issue 39, "download ahead": `domain::transfer::tail_bytes`), in one request under
    /// the rate cap. Failing is no harm: the download then runs without them, whole
    /// before the encode.
    pub async fn download_tail(
        &self,
        job_id: i32,
        lease: &str,
        path: &Path,
        want: u64,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<Tail, ClientError> {
        let mut runs = Runs::new(self);
        let req = self.request(awc::http::Method::GET, self.url(job_id, "source"), lease);
        let mut res = req
            .insert_header(("Range", format!("bytes=-{want}")))
            .send()
            .await
            .map_err(|e| ClientError::Link { tries: 1, last: e.to_string() })?;
        let status = res.status().as_u16();
        if !matches!(status, 200 | 206) {
            return Err(refusal(status, &mut res).await);
        }
        let head = |name: &str| res.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let (sha, size) = (head(SHA256_HEADER), head(SIZE_HEADER).and_then(|s| s.parse::<u64>().ok()));
        // `bytes FIRST-LAST/SIZE`; a 200 is the whole file.
        let from = match status {
            206 => head("Content-Range").and_then(|r| r.strip_prefix("bytes ")?.split('-').next()?.parse::<u64>().ok()),
            _ => Some(0),
        };
        let (Some(sha256), Some(size), Some(from)) = (sha, size, from) else {
            return Err(ClientError::Io {
                what: "reading the tail's answer",
                error: "no SHA-256, size or range".into(),
            });
        };
        let mut file = tokio::fs::File::create(path).await.map_err(io("writing the source's tail"))?;
        let mut at = from;
        while let Some(chunk) = tokio::time::timeout(IDLE, res.next())
            .await
            .map_err(|_| ClientError::Link { tries: 1, last: format!("no byte came for {} s", IDLE.as_secs()) })?
        {
            let chunk = chunk.map_err(|e| ClientError::Link { tries: 1, last: e.to_string() })?;
            file.write_all(&chunk).await.map_err(io("writing the source's tail"))?;
            at += chunk.len() as u64;
            let (pause, rate) = runs.moved(chunk.len() as u64);
            on_progress(Progress { direction: Direction::Download, bytes: at - from, total: size, rate });
            wait_for_cap(pause).await;
        }
        if at != size {
            return Err(ClientError::Link {
                tries: 1,
                last: format!("the tail's answer ended at byte {at} of {size}"),
            });
        }
        file.sync_all().await.map_err(io("syncing the source's tail"))?;
        Ok(Tail { sha256, size, from })
    }

    /// `download`, under the lease of span `span` of the job (a helper without the share).
    pub async fn download_for_span(
        &self,
        job_id: i32,
        span: u32,
        lease: &str,
        dir: &Path,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<Downloaded, ClientError> {
        self.fetch(job_id, Grant { lease, span: Some(span) }, dir, on_progress).await
    }

    async fn fetch(
        &self,
        job_id: i32,
        grant: Grant<'_>,
        dir: &Path,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<Downloaded, ClientError> {
        tokio::fs::create_dir_all(dir).await.map_err(io("making the download's folder"))?;
        let (data, hash_file) = (dir.join(SOURCE_FILE), dir.join(SOURCE_HASH_FILE));
        let mut runs = Runs::new(self);
        loop {
            runs.next().await?;
            let have = tokio::fs::metadata(&data).await.map(|m| m.len()).unwrap_or(0);
            let known = tokio::fs::read_to_string(&hash_file).await.ok();
            let mut req = self.granted(awc::http::Method::GET, self.url(job_id, "source"), grant);
            if have > 0 && known.is_some() {
                req = req.insert_header(("Range", format!("bytes={have}-")));
            }
            let mut res = match req.send().await {
                Ok(res) => res,
                Err(e) => {
                    runs.failed(e.to_string(), false);
                    continue;
                }
            };
            let status = res.status().as_u16();
            let head = |name: &str| res.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
            let (sha, total) = (head(SHA256_HEADER), head(SIZE_HEADER).and_then(|s| s.parse::<u64>().ok()));
            if status >= 500 {
                // A proxy in front of a main node that restarts answers 502 or 503 meanwhile.
                let refused = refusal(status, &mut res).await;
                runs.failed(refused.to_string(), false);
                continue;
            }
            if !matches!(status, 200 | 206 | 416) {
                return Err(refusal(status, &mut res).await);
            }
            let (Some(sha), Some(total)) = (sha, total) else {
                return Err(ClientError::Io {
                    what: "reading the source's answer",
                    error: "no SHA-256 or size".into(),
                });
            };
            if known.as_deref() != Some(sha.as_str()) || status == 200 {
                // Another source than the bytes kept were read from (or none kept): from zero.
                // Said before the bytes go, as a progress of none (a reader of the copy as
                // it arrives stops first, `actors::job::ahead`).
                if have > 0 {
                    on_progress(Progress { direction: Direction::Download, bytes: 0, total, rate: 0.0 });
                }
                tokio::fs::write(&hash_file, &sha).await.map_err(io("keeping the source's hash"))?;
                if status != 200 {
                    tokio::fs::write(&data, b"").await.map_err(io("starting the download over"))?;
                    continue;
                }
            }
            if status == 206 {
                tracing::info!(job_id, from = have, total, "resuming the download of the source");
            }
            let mut file = tokio::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(status == 200)
                .open(&data)
                .await
                .map_err(io("opening the download"))?;
            let mut at = if status == 200 { 0 } else { have };
            let before = at;
            let (mut unsynced, mut broke) = (0u64, None);
            if status != 416 {
                file.set_len(at).await.map_err(io("opening the download"))?;
                let mut file_at = tokio::io::BufWriter::with_capacity(1 << 20, &mut file);
                tokio::io::AsyncSeekExt::seek(&mut file_at, std::io::SeekFrom::Start(at))
                    .await
                    .map_err(io("opening the download"))?;
                loop {
                    // A link that goes silent without closing (Wi-Fi gone) is a drop too.
                    let chunk = match tokio::time::timeout(IDLE, res.next()).await {
                        Ok(None) => break,
                        Ok(Some(Ok(chunk))) => chunk,
                        Ok(Some(Err(e))) => {
                            broke = Some(e.to_string());
                            break;
                        }
                        Err(_) => {
                            broke = Some(format!("no byte came for {} s", IDLE.as_secs()));
                            break;
                        }
                    };
                    file_at.write_all(&chunk).await.map_err(io("writing the download"))?;
                    let n = chunk.len() as u64;
                    (at, unsynced) = (at + n, unsynced + n);
                    if unsynced >= SYNC_EVERY {
                        file_at.flush().await.map_err(io("writing the download"))?;
                        file_at.get_ref().sync_data().await.map_err(io("syncing the download"))?;
                        unsynced = 0;
                    }
                    let (pause, rate) = runs.moved(n);
                    on_progress(Progress { direction: Direction::Download, bytes: at, total, rate });
                    wait_for_cap(pause).await;
                }
                file_at.flush().await.map_err(io("writing the download"))?;
            }
            file.sync_all().await.map_err(io("syncing the download"))?;
            drop(file);
            if let Some(e) = broke {
                runs.failed(e, at > before);
                continue;
            }
            if at < total {
                runs.failed(format!("the answer ended at byte {at} of {total}"), at > before);
                continue;
            }
            let path = data.clone();
            let got =
                tokio::task::spawn_blocking(move || std::fs::File::open(&path).and_then(|f| sha256_of(&f, total)))
                    .await
                    .map_err(|e| ClientError::Io { what: "hashing the download", error: e.to_string() })?
                    .map_err(io("hashing the download"))?;
            if at == total && got == sha {
                return Ok(Downloaded { path: data, sha256: sha, size: total });
            }
            let why =
                format!("the downloaded source's SHA-256 is {got}, the main node's {sha} ({at} of {total} bytes)");
            if !runs.restart() {
                return Err(ClientError::Checksum(format!("{why}; downloaded twice, giving up")));
            }
            tracing::warn!(job_id, %why, "downloading the source again");
            on_progress(Progress { direction: Direction::Download, bytes: 0, total, rate: 0.0 });
            tokio::fs::write(&data, b"").await.map_err(io("starting the download over"))?;
            let _ = tokio::fs::remove_file(&hash_file).await;
        }
    }

    /// What the main node holds of the upload; `Ok(Err(why))` for an answer worth asking
    /// again for.
    async fn durable(&self, job_id: i32, lease: &str) -> Result<Result<Durable, String>, ClientError> {
        let mut res = match self.request(awc::http::Method::GET, self.url(job_id, "output"), lease).send().await {
            Ok(res) => res,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let status = res.status().as_u16();
        if status == 409 {
            return Ok(Err("the main node's upload is busy".into()));
        }
        if status >= 500 {
            return Ok(Err(refusal(status, &mut res).await.to_string()));
        }
        if !res.status().is_success() {
            return Err(refusal(status, &mut res).await);
        }
        match res.json::<Length>().await {
            Ok(Length { committing: true, .. }) => Ok(Ok(Durable::Committing)),
            Ok(Length { length, .. }) => Ok(Ok(Durable::Length(length))),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// Uploads `file` as job `job_id`'s output and finishes it: `extension` is the output's,
    /// `source_sha256` the hash of the source it was encoded from. Resumes from the main
    /// node's durable length after any drop; a checksum mismatch uploads once more. The
    /// finish tells the main node the encode's CPU and wall time and its phases (`run_stats`,
    /// in milliseconds), for the job's figures; the upload's own wall time, up to the finish,
    /// is its last phase (`upload`). `Ok` once the main node took the finish, or once the job
    /// left `lease` after a finish whose answer was lost (its commit ended).
    #[allow(clippy::too_many_arguments)]
    pub async fn upload(
        &self,
        job_id: i32,
        lease: &str,
        file: &Path,
        extension: &str,
        source_sha256: &str,
        run_stats: Option<RunStats>,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<u64, ClientError> {
        let started = Instant::now();
        let (source, size, sha256) = hashed(file, "hashing the output").await?;
        let mut runs = Runs::new(self);
        // Whether a finish went out: its answer may have been lost on the way back, and the
        // main node then commits (or has committed) the output this loop would send again.
        let mut finish_sent = false;
        loop {
            runs.next().await?;
            let mut at = match self.durable(job_id, lease).await {
                Ok(Ok(Durable::Length(at))) => at,
                Ok(Ok(Durable::Committing)) => {
                    tracing::info!(
                        job_id,
                        "the main node took the finish whose answer was lost; it commits the output"
                    );
                    return Ok(size);
                }
                Ok(Err(e)) => {
                    runs.failed(e, false);
                    continue;
                }
                // The job is no longer under this lease after a finish: its commit ended (or
                // the lease ran out); either way nothing of it is this node's to send again,
                // and the attempt follows the job as after an answered finish.
                Err(ClientError::Refused { status: 403 | 404, message, .. }) if finish_sent => {
                    tracing::info!(job_id, %message, "the job left this lease after its finish; not uploading again");
                    return Ok(size);
                }
                Err(e) => return Err(e),
            };
            if at > 0 {
                tracing::info!(job_id, from = at, total = size, "resuming the upload of the output");
            }
            let before = at;
            let url = self.url(job_id, "output");
            let mut report = |at: u64, rate: f64| {
                on_progress(Progress { direction: Direction::Upload, bytes: at, total: size, rate })
            };
            let (sent, last) = self.send_from(&url, lease, &source, size, at, &mut runs, &mut report).await?;
            at = sent;
            if at < size {
                runs.failed(last, at > before);
                continue;
            }
            let mut phases = run_stats.as_ref().map(|s| s.phases.clone()).unwrap_or_default();
            phases.push(PhaseTime::since("upload", started, 0));
            let finish = Finish {
                sha256: sha256.clone(),
                size,
                extension: extension.to_string(),
                source_sha256: source_sha256.to_string(),
                run: NodeRun::of(run_stats.as_ref(), phases),
            };
            finish_sent = true;
            let mut res = match self
                .request(awc::http::Method::POST, self.url(job_id, "output/finish"), lease)
                .send_json(&finish)
                .await
            {
                Ok(res) => res,
                Err(e) => {
                    runs.failed(e.to_string(), false);
                    continue;
                }
            };
            let status = res.status().as_u16();
            if res.status().is_success() {
                let _ = res.body().await;
                return Ok(size);
            }
            match refusal(status, &mut res).await {
                ClientError::Refused { code, message, .. } if code == "source_changed" => {
                    return Err(ClientError::SourceChanged(message))
                }
                ClientError::Refused { code, message, .. } if code == "checksum_mismatch" => {
                    if !runs.restart() {
                        return Err(ClientError::Checksum(format!("{message}; uploaded twice, giving up")));
                    }
                    tracing::warn!(job_id, %message, "uploading the output again");
                }
                ClientError::Refused { code, message, .. } if code == "busy" => runs.failed(message, false),
                refused if status >= 500 => runs.failed(refused.to_string(), false),
                refused => return Err(refused),
            }
        }
    }
}

impl TransferClient {
    /// Sends the bytes of `source` from `at` to `size` to `url`, in parts of `part_bytes`,
    /// each appended at the main node's durable length and reported (`report`: the durable
    /// length and the run's rate) before the cap's pause. How far it came, and why it
    /// stopped short of `size` (for `runs`); a refusal other than a busy folder, a length
    /// this client did not expect or a proxy's 5xx is an error.
    #[allow(clippy::too_many_arguments, reason = "one run of one upload's parts")]
    pub(super) async fn send_from(
        &self,
        url: &str,
        lease: &str,
        source: &Arc<std::fs::File>,
        size: u64,
        mut at: u64,
        runs: &mut Runs,
        report: &mut dyn FnMut(u64, f64),
    ) -> Result<(u64, String), ClientError> {
        let mut last = String::new();
        while at < size {
            let end = size.min(at + self.part_bytes.max(1));
            let (reader, from) = (source.clone(), at);
            let part = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; usize::try_from(end - from).unwrap_or(0)];
                std::os::unix::fs::FileExt::read_exact_at(reader.as_ref(), &mut buf, from).map(|()| buf)
            })
            .await
            .map_err(|e| ClientError::Io { what: "reading a file to upload", error: e.to_string() })?
            .map_err(io("reading a file to upload"))?;
            let sent = self
                .request(awc::http::Method::PUT, url.to_string(), lease)
                .insert_header(("Content-Range", format!("bytes {at}-{}/{size}", end - 1)))
                .send_body(Bytes::from(part))
                .await;
            let mut res = match sent {
                Ok(res) => res,
                Err(e) => {
                    last = e.to_string();
                    break;
                }
            };
            let status = res.status().as_u16();
            if status == 409 || status == 400 || status >= 500 {
                // Busy, another length than this client thought, or a proxy's answer
                // while the main node restarts: the durable length asked again.
                let _ = res.body().await;
                last = format!("the main node answered {status} to the part at byte {at}");
                break;
            }
            if !res.status().is_success() {
                return Err(refusal(status, &mut res).await);
            }
            let now = match res.json::<Length>().await {
                Ok(v) => v.length,
                Err(e) => {
                    last = e.to_string();
                    break;
                }
            };
            let (pause, rate) = runs.moved(now.saturating_sub(at));
            at = now;
            report(at, rate);
            wait_for_cap(pause).await;
        }
        Ok((at, last))
    }
}

/// The file at `path` to upload, open, with its size and SHA-256 (`what` names the work in
/// an error).
pub(super) async fn hashed(path: &Path, what: &'static str) -> Result<(Arc<std::fs::File>, u64, String), ClientError> {
    let path = path.to_path_buf();
    let (file, size, sha256) = tokio::task::spawn_blocking(move || {
        let f = std::fs::File::open(&path)?;
        let size = f.metadata()?.len();
        let sha = sha256_of(&f, size)?;
        Ok::<_, std::io::Error>((f, size, sha))
    })
    .await
    .map_err(|e| ClientError::Io { what, error: e.to_string() })?
    .map_err(io(what))?;
    Ok((Arc::new(file), size, sha256))
}

/// The lease a request is made under: a job's, or (`span`) one span's of it.
#[derive(Debug, Clone, Copy)]
struct Grant<'a> {
    lease: &'a str,
    span: Option<u32>,
}

impl TransferClient {
    /// Sends what `make` makes until the main node answers: a request that fails on the
    /// link, or an answer of 5xx, is tried again as `runs` allows. `Ok(Ok(answer))`: a
    /// success; `Ok(Err(refused))`: the main node refused it.
    pub(super) async fn answered<F, S>(
        &self,
        runs: &mut Runs,
        make: impl Fn() -> F,
    ) -> Result<Result<awc::ClientResponse<S>, ClientError>, ClientError>
    where
        F: std::future::Future<Output = Result<awc::ClientResponse<S>, awc::error::SendRequestError>>,
        S: futures_util::Stream<Item = Result<Bytes, awc::error::PayloadError>> + Unpin,
    {
        loop {
            runs.next().await?;
            let mut res = match make().await {
                Ok(res) => res,
                Err(e) => {
                    runs.failed(e.to_string(), false);
                    continue;
                }
            };
            let status = res.status().as_u16();
            if res.status().is_success() {
                return Ok(Ok(res));
            }
            match refusal(status, &mut res).await {
                refused if status >= 500 => runs.failed(refused.to_string(), false),
                refused => return Ok(Err(refused)),
            }
        }
    }
}

/// The runs of one transfer: each starts where the last left off, and the transfer gives up
/// after `tries` runs in a row that moved nothing, or when nothing moved for `patience`.
pub(super) struct Runs {
    tries: u32,
    patience: Duration,
    mbps: u32,
    /// Runs in a row that moved nothing (a run that moved bytes before it broke counts one).
    failed: u32,
    /// Why the last run failed, for the error given up with.
    last: String,
    stalled_since: Instant,
    /// The current run's start and bytes, which the rate cap paces.
    started: Instant,
    moved: u64,
    /// Whole transfers begun again after a checksum mismatch.
    restarts: u32,
}

impl Runs {
    pub(super) fn new(client: &TransferClient) -> Self {
        let now = Instant::now();
        Runs {
            tries: client.tries,
            patience: client.patience,
            mbps: client.mbps,
            failed: 0,
            last: String::new(),
            stalled_since: now,
            started: now,
            moved: 0,
            restarts: 0,
        }
    }

    /// Before a run: gives up, or after a failed run waits its backoff.
    pub(super) async fn next(&mut self) -> Result<(), ClientError> {
        if gives_up(self.failed, self.tries, self.stalled_since.elapsed(), self.patience) {
            return Err(ClientError::Link { tries: self.failed, last: std::mem::take(&mut self.last) });
        }
        if self.failed > 0 {
            tokio::time::sleep(retry_after(self.failed)).await;
            // The cap paces each run from its own start: the time the main node was away
            // is no credit to spend at full speed.
            (self.started, self.moved) = (Instant::now(), 0);
        }
        Ok(())
    }

    /// `n` more bytes moved in this run: the pause the cap asks for, and the run's rate.
    pub(super) fn moved(&mut self, n: u64) -> (Duration, f64) {
        if n > 0 {
            self.stalled_since = Instant::now();
        }
        self.moved += n;
        pace(self.mbps, self.moved, self.started.elapsed())
    }

    /// The run ended short, for `why`; `progressed` when it moved bytes first.
    pub(super) fn failed(&mut self, why: String, progressed: bool) {
        self.failed = if progressed { 1 } else { self.failed + 1 };
        self.last = why;
    }

    /// Whether the whole may be moved once more after a checksum mismatch (once).
    pub(super) fn restart(&mut self) -> bool {
        self.restarts += 1;
        self.restarts <= 1
    }
}

/// The main node's refusal, from its JSON error body.
pub(super) async fn refusal<S>(status: u16, res: &mut awc::ClientResponse<S>) -> ClientError
where
    S: futures_util::Stream<Item = Result<Bytes, awc::error::PayloadError>> + Unpin,
{
    let body: ErrorBody = res.json().await.unwrap_or_default();
    ClientError::Refused { status, code: body.error.code, message: body.error.message }
}

/// The main node's answer with an upload's durable length (`committing` while a finish's
/// commit runs).
#[derive(serde::Deserialize)]
pub(super) struct Length {
    pub(super) length: u64,
    #[serde(default)]
    committing: bool,
}

/// What the main node holds of an upload.
enum Durable {
    /// Its durable bytes.
    Length(u64),
    /// A finish took it: the main node commits it.
    Committing,
}

/// The main node's error body, `{"error":{"code","message"}}`.
#[derive(Default, serde::Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Default, serde::Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[actix_web::test]
    async fn no_pause_asked_is_no_wait_and_a_pause_is_one() {
        // Ready at its first poll: nothing waits for the timer (a zero `sleep` is not: its
        // deadline is rounded up to the timer's next millisecond).
        assert!(wait_for_cap(Duration::ZERO).now_or_never().is_some());
        assert!(wait_for_cap(Duration::from_millis(5)).now_or_never().is_none());
    }
}
