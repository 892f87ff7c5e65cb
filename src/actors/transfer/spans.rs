//! A linked node's client of the spans it encodes without the share (issue 39, item 4):
//! asking the main node for a span, which it claims for this node, and uploading the span's
//! segment files, each whole and checked, then its record. The main node's side is
//! `actors::cluster::span_transfer`; the source's ranges a span reads come through
//! `ranges`.

use std::path::Path;

use actix_web::web::Bytes;

use super::client::{io, wait_for_cap, ClientError, Direction, Progress, Runs, TransferClient};
use crate::actors::cluster::span_transfer::SpanFinish;
use crate::actors::cluster::transfer::{SHA256_HEADER, SIZE_HEADER};
use crate::media::span_record::SpanRecord;
use crate::media::span_transfer::SpanTask;
use crate::media::transfer::sha256_of;

impl TransferClient {
    /// Asks the main node for span `span` of job `job_id`, which this node's helper holds
    /// under `lease`: the main node claims it for this node and answers what is left of it
    /// (`Ok(Ok(task))`), or why there is nothing to do (`Ok(Err(why))`).
    pub async fn span_task(
        &self,
        job_id: i32,
        span: u32,
        lease: &str,
    ) -> Result<Result<SpanTask, String>, ClientError> {
        let url = self.url(job_id, &format!("spans/{span}"));
        let mut runs = Runs::new(self);
        let get = || self.request(awc::http::Method::GET, url.clone(), lease).send();
        match self.answered(&mut runs, get).await? {
            // A plan is small; the default limit of 2 MB holds it.
            Ok(mut res) => match res.json::<SpanTask>().await {
                Ok(task) => Ok(Ok(task)),
                Err(e) => Err(ClientError::Io { what: "reading the span's task", error: e.to_string() }),
            },
            Err(ClientError::Refused { code, message, .. }) if code == "nothing_to_do" => Ok(Err(message)),
            Err(refused) => Err(refused),
        }
    }

    /// Uploads the segment files `record` names from `dir`, each whole and checked, then
    /// the record with the SHA-256 of the source they were encoded from; the main node
    /// writes it for the job's run to take in. A file the main node found not to be what
    /// was sent is sent once more.
    #[allow(clippy::too_many_arguments, reason = "one upload's parts, each used once")]
    pub async fn upload_span(
        &self,
        job_id: i32,
        span: u32,
        lease: &str,
        dir: &Path,
        record: &SpanRecord,
        source_sha256: &str,
        on_progress: &mut dyn FnMut(Progress),
    ) -> Result<u64, ClientError> {
        let files: Vec<&str> = record.segments.iter().map(|s| s.file.as_str()).filter(|f| !f.is_empty()).collect();
        let total: u64 = record.segments.iter().map(|s| s.bytes).sum();
        let mut sent = 0u64;
        let mut runs = Runs::new(self);
        for name in files {
            let path = dir.join(name);
            let read = tokio::task::spawn_blocking(move || {
                let body = std::fs::read(&path)?;
                let file = std::fs::File::open(&path)?;
                let sha = sha256_of(&file, body.len() as u64)?;
                Ok::<_, std::io::Error>((body, sha))
            })
            .await
            .map_err(|e| ClientError::Io { what: "reading a span's segment", error: e.to_string() })?
            .map_err(io("reading a span's segment"))?;
            let (body, sha) = (Bytes::from(read.0), read.1);
            let url = self.url(job_id, &format!("spans/{span}/files/{name}"));
            let put = || {
                self.request(awc::http::Method::PUT, url.clone(), lease)
                    .insert_header((SIZE_HEADER, body.len().to_string()))
                    .insert_header((SHA256_HEADER, sha.as_str()))
                    .send_body(body.clone())
            };
            loop {
                match self.answered(&mut runs, put).await? {
                    Ok(mut res) => {
                        let _ = res.body().await;
                        break;
                    }
                    Err(ClientError::Refused { code, message, .. }) if code == "checksum_mismatch" => {
                        if !runs.restart() {
                            return Err(ClientError::Checksum(format!("{message}; uploaded twice, giving up")));
                        }
                        tracing::warn!(job_id, span, %message, "uploading a span's segment again");
                    }
                    Err(refused) => return Err(refused),
                }
            }
            let (pause, rate) = runs.moved(body.len() as u64);
            sent += body.len() as u64;
            on_progress(Progress { direction: Direction::Upload, bytes: sent, total, rate });
            wait_for_cap(pause).await;
        }
        let finish = SpanFinish { record: record.clone(), source_sha256: source_sha256.to_string() };
        let url = self.url(job_id, &format!("spans/{span}/finish"));
        let post = || self.request(awc::http::Method::POST, url.clone(), lease).send_json(&finish);
        match self.answered(&mut runs, post).await? {
            Ok(mut res) => {
                let _ = res.body().await;
                Ok(sent)
            }
            Err(ClientError::Refused { code, message, .. }) if code == "source_changed" => {
                Err(ClientError::SourceChanged(message))
            }
            Err(refused) => Err(refused),
        }
    }
}
