//! The linked node's client of a transfer (issue 39), for a job whose library it does not
//! see: it downloads the source from the main node into a folder of its own, resuming after
//! a drop or a restart from the bytes it already has and checking the whole against the
//! SHA-256 the main node computed; it uploads the output the same way, asking the main node
//! how many bytes are durable before each run of parts, then finishes with the checksums.
//! A checksum mismatch starts over once, then fails with the reason. `TRANSFER_MBPS` caps
//! the rate; each part reports the bytes and rate for the job's TRANSFERRING stage. The main
//! node's side is `actors::cluster::transfer` and `http::transfer`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix_web::web::Bytes;
use futures_util::StreamExt;
use serde::Serialize;
use tokio::io::AsyncWriteExt;

use crate::actors::cluster::transfer::{Finish, LEASE_HEADER, SHA256_HEADER, SIZE_HEADER};
use crate::domain::transfer::{gives_up, pace, part_bytes, retry_after};
use crate::media::handle::Folder;
use crate::media::transfer::sha256_of;

/// The downloaded source's name in the node's folder for the job.
pub const SOURCE_FILE: &str = "source";
/// The SHA-256 the main node gave for the bytes in `SOURCE_FILE`: a resumed download whose
/// source has another hash now starts over.
pub const SOURCE_HASH_FILE: &str = "source.sha256";

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

fn io(what: &'static str) -> impl Fn(std::io::Error) -> ClientError {
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

/// What a linked node's jobs taken by transfer share (`actors::job::by_transfer`): where
/// the main node is, the credential to present there, the rate cap and WORK_DIR.
pub struct TransferSetup {
    pub main_url: String,
    pub bearer: Bearer,
    /// `TRANSFER_MBPS`, 0 for no cap.
    pub mbps: u32,
    /// WORK_DIR: each job's files in a folder named by its id.
    pub work_dir: PathBuf,
}

impl TransferSetup {
    /// A client presenting the node's credential as the link has it now; `None` before the
    /// node has one (not enrolled yet).
    pub fn client(&self) -> Option<TransferClient> {
        Some(TransferClient::new(&self.main_url, &self.bearer.get()?, self.mbps))
    }

    /// The folder of job `job_id` in WORK_DIR.
    pub fn job_dir(&self, job_id: i32) -> PathBuf {
        self.work_dir.join(job_id.to_string())
    }
}

/// The node's `identity.credential` as its link presents it, set by the agent once it has
/// both (at its start from DATA_DIR, or at the enrollment).
#[derive(Clone, Default)]
pub struct Bearer(Arc<Mutex<Option<String>>>);

/// Never the secret itself in a log.
impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.0.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        f.debug_struct("Bearer").field("set", &set).finish()
    }
}

impl Bearer {
    pub fn set(&self, bearer: Option<String>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = bearer;
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

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
        Ok(work) => work.remove_entry(OsStr::new(&job_id.to_string())),
        Err(foreign) => Err(std::io::Error::other(foreign.to_string())),
    }
}

/// At a node's start: removes every job folder in WORK_DIR (a name that is a job id). A
/// node that starts holds no lease, so these are what a crash or a kill left; the job went
/// back to the queue on the main node meanwhile. Anything else there is left alone.
/// Answers how many went. Blocking.
pub fn clear_stale_job_dirs(work_dir: &Path) -> std::io::Result<usize> {
    let work = match Folder::open_resolved(work_dir, "WORK_DIR")? {
        Ok(work) => work,
        Err(foreign) => return Err(std::io::Error::other(foreign.to_string())),
    };
    let mut removed = 0;
    for name in work.names()? {
        if name.to_str().is_some_and(|n| n.parse::<i32>().is_ok_and(|id| id.to_string() == n)) {
            work.remove_entry(&name)?;
            removed += 1;
        }
    }
    Ok(removed)
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

    fn url(&self, job_id: i32, what: &str) -> String {
        format!("{}/cluster/jobs/{job_id}/{what}", self.base)
    }

    fn request(&self, method: awc::http::Method, url: String, lease: &str) -> awc::ClientRequest {
        self.client.request(method, url).bearer_auth(&self.bearer).insert_header((LEASE_HEADER, lease))
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
        tokio::fs::create_dir_all(dir).await.map_err(io("making the download's folder"))?;
        let (data, hash_file) = (dir.join(SOURCE_FILE), dir.join(SOURCE_HASH_FILE));
        let mut started = Instant::now();
        let (mut moved, mut failed, mut restarts, mut last) = (0u64, 0u32, 0u32, String::new());
        let mut stalled_since = Instant::now();
        loop {
            if gives_up(failed, self.tries, stalled_since.elapsed(), self.patience) {
                return Err(ClientError::Link { tries: failed, last });
            }
            if failed > 0 {
                tokio::time::sleep(retry_after(failed)).await;
                // The cap paces each run from its own start: the time the main node was
                // away is no credit to spend at full speed.
                (started, moved) = (Instant::now(), 0);
            }
            let have = tokio::fs::metadata(&data).await.map(|m| m.len()).unwrap_or(0);
            let known = tokio::fs::read_to_string(&hash_file).await.ok();
            let mut req = self.request(awc::http::Method::GET, self.url(job_id, "source"), lease);
            if have > 0 && known.is_some() {
                req = req.insert_header(("Range", format!("bytes={have}-")));
            }
            let mut res = match req.send().await {
                Ok(res) => res,
                Err(e) => {
                    (failed, last) = (failed + 1, e.to_string());
                    continue;
                }
            };
            let status = res.status().as_u16();
            let head = |name: &str| res.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
            let (sha, total) = (head(SHA256_HEADER), head(SIZE_HEADER).and_then(|s| s.parse::<u64>().ok()));
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
                    (at, moved, unsynced) = (at + n, moved + n, unsynced + n);
                    if unsynced >= SYNC_EVERY {
                        file_at.flush().await.map_err(io("writing the download"))?;
                        file_at.get_ref().sync_data().await.map_err(io("syncing the download"))?;
                        unsynced = 0;
                    }
                    let (pause, rate) = pace(self.mbps, moved, started.elapsed());
                    on_progress(Progress { direction: Direction::Download, bytes: at, total, rate });
                    tokio::time::sleep(pause).await;
                }
                file_at.flush().await.map_err(io("writing the download"))?;
            }
            file.sync_all().await.map_err(io("syncing the download"))?;
            drop(file);
            if at > before {
                stalled_since = Instant::now();
            }
            if let Some(e) = broke {
                failed = if at > before { 1 } else { failed + 1 };
                last = e;
                continue;
            }
            if at < total {
                (failed, last) = (failed + 1, format!("the answer ended at byte {at} of {total}"));
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
            restarts += 1;
            let why =
                format!("the downloaded source's SHA-256 is {got}, the main node's {sha} ({at} of {total} bytes)");
            if restarts > 1 {
                return Err(ClientError::Checksum(format!("{why}; downloaded twice, giving up")));
            }
            tracing::warn!(job_id, %why, "downloading the source again");
            tokio::fs::write(&data, b"").await.map_err(io("starting the download over"))?;
            let _ = tokio::fs::remove_file(&hash_file).await;
        }
    }

    /// The upload's durable length on the main node.
    async fn durable(&self, job_id: i32, lease: &str) -> Result<Result<u64, String>, ClientError> {
        let mut res = match self.request(awc::http::Method::GET, self.url(job_id, "output"), lease).send().await {
            Ok(res) => res,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if res.status().as_u16() == 409 {
            return Ok(Err("the main node's upload is busy".into()));
        }
        if !res.status().is_success() {
            return Err(refusal(res.status().as_u16(), &mut res).await);
        }
        match res.json::<Length>().await {
            Ok(v) => Ok(Ok(v.length)),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// Uploads `file` as job `job_id`'s output and finishes it: `extension` is the output's,
    /// `source_sha256` the hash of the source it was encoded from. Resumes from the main
    /// node's durable length after any drop; a checksum mismatch uploads once more.
    pub async fn upload(
        &self,
        job_id: i32,
        lease: &str,
        file: &Path,
        extension: &str,
        source_sha256: &str,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<u64, ClientError> {
        self.upload_with(job_id, lease, file, extension, source_sha256, None, on_progress).await
    }

    /// `upload`, telling the main node the encode's CPU and wall time (`run_stats`, in
    /// milliseconds) with the finish, for the job's figures.
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_with(
        &self,
        job_id: i32,
        lease: &str,
        file: &Path,
        extension: &str,
        source_sha256: &str,
        run_stats: Option<(u64, u64)>,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<u64, ClientError> {
        let path = file.to_path_buf();
        let (source, size, sha256) = tokio::task::spawn_blocking(move || {
            let f = std::fs::File::open(&path)?;
            let size = f.metadata()?.len();
            let sha = sha256_of(&f, size)?;
            Ok::<_, std::io::Error>((f, size, sha))
        })
        .await
        .map_err(|e| ClientError::Io { what: "hashing the output", error: e.to_string() })?
        .map_err(io("hashing the output"))?;
        let source = Arc::new(source);
        let mut started = Instant::now();
        let (mut moved, mut failed, mut restarts, mut last) = (0u64, 0u32, 0u32, String::new());
        let mut stalled_since = Instant::now();
        loop {
            if gives_up(failed, self.tries, stalled_since.elapsed(), self.patience) {
                return Err(ClientError::Link { tries: failed, last });
            }
            if failed > 0 {
                tokio::time::sleep(retry_after(failed)).await;
                // The cap paces each run from its own start: the time the main node was
                // away is no credit to spend at full speed.
                (started, moved) = (Instant::now(), 0);
            }
            let mut at = match self.durable(job_id, lease).await? {
                Ok(at) => at,
                Err(e) => {
                    (failed, last) = (failed + 1, e);
                    continue;
                }
            };
            if at > 0 {
                tracing::info!(job_id, from = at, total = size, "resuming the upload of the output");
            }
            let mut progressed = false;
            while at < size {
                let end = size.min(at + self.part_bytes.max(1));
                let (reader, from) = (source.clone(), at);
                let part = tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0u8; usize::try_from(end - from).unwrap_or(0)];
                    std::os::unix::fs::FileExt::read_exact_at(reader.as_ref(), &mut buf, from).map(|()| buf)
                })
                .await
                .map_err(|e| ClientError::Io { what: "reading the output", error: e.to_string() })?
                .map_err(io("reading the output"))?;
                let sent = self
                    .request(awc::http::Method::PUT, self.url(job_id, "output"), lease)
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
                if status == 409 || status == 400 {
                    // Busy, or another length than this client thought: asked again.
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
                moved += now.saturating_sub(at);
                progressed |= now > at;
                at = now;
                let (pause, rate) = pace(self.mbps, moved, started.elapsed());
                on_progress(Progress { direction: Direction::Upload, bytes: at, total: size, rate });
                tokio::time::sleep(pause).await;
            }
            if progressed {
                stalled_since = Instant::now();
            }
            if at < size {
                failed = if progressed { 1 } else { failed + 1 };
                continue;
            }
            let finish = Finish {
                sha256: sha256.clone(),
                size,
                extension: extension.to_string(),
                source_sha256: source_sha256.to_string(),
                cpu_ms: run_stats.map(|(cpu, _)| cpu),
                wall_ms: run_stats.map(|(_, wall)| wall),
            };
            let mut res = match self
                .request(awc::http::Method::POST, self.url(job_id, "output/finish"), lease)
                .send_json(&finish)
                .await
            {
                Ok(res) => res,
                Err(e) => {
                    (failed, last) = (failed + 1, e.to_string());
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
                    restarts += 1;
                    if restarts > 1 {
                        return Err(ClientError::Checksum(format!("{message}; uploaded twice, giving up")));
                    }
                    tracing::warn!(job_id, %message, "uploading the output again");
                }
                ClientError::Refused { code, message, .. } if code == "busy" => (failed, last) = (failed + 1, message),
                refused => return Err(refused),
            }
        }
    }
}

/// The main node's refusal, from its JSON error body.
async fn refusal<S>(status: u16, res: &mut awc::ClientResponse<S>) -> ClientError
where
    S: futures_util::Stream<Item = Result<Bytes, awc::error::PayloadError>> + Unpin,
{
    let body: ErrorBody = res.json().await.unwrap_or_default();
    ClientError::Refused { status, code: body.error.code, message: body.error.message }
}

/// The main node's answer with an upload's durable length.
#[derive(serde::Deserialize)]
struct Length {
    length: u64,
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
