//! The linked node's client of a job's output in parts (issue 39, "upload while encoding"):
//! each finished file of its run goes to the main node as a part, resumed from the main
//! node's durable length after a drop or a restart and checked whole against its SHA-256,
//! then the finish with the node's manifest and plan. A main node without these endpoints
//! (an older release) answers the listing 404: the node then muxes the output and uploads
//! it whole (`TransferClient::upload`). The main node's side is `actors::cluster::parts`.

use std::path::Path;

use super::client::{hashed, refusal, ClientError, Runs, TransferClient};
use crate::actors::cluster::parts::PartsFinish;
use crate::media::parts::{Part, Uploaded};

/// What the main node answers of a job's parts.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// The parts it holds and those under way.
    Parts(Uploaded),
    /// A finish took them: it commits the output.
    Committing,
}

#[derive(serde::Deserialize)]
struct Listing {
    #[serde(default)]
    committing: bool,
    #[serde(default)]
    parts: Vec<Part>,
    #[serde(default)]
    arriving: Vec<crate::media::parts::Arriving>,
}

/// How a finish of parts was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Finished {
    /// The main node took it and commits the output (or had, and the job has left this
    /// lease since: its commit ended).
    Committing,
    /// A part it names is not on the main node whole (it is sent again).
    Missing(String),
}

impl TransferClient {
    /// What the main node holds of job `job_id`'s parts; `Ok(None)` from a main node that
    /// takes no parts (404, 405). Asked again while the link fails, as a transfer is.
    pub async fn parts_held(&self, job_id: i32, lease: &str) -> Result<Option<Held>, ClientError> {
        let mut runs = Runs::new(self);
        self.held_in(job_id, lease, &mut runs).await
    }

    async fn held_in(&self, job_id: i32, lease: &str, runs: &mut Runs) -> Result<Option<Held>, ClientError> {
        let url = self.url(job_id, "parts");
        let get = || self.request(awc::http::Method::GET, url.clone(), lease).send();
        loop {
            match self.answered(runs, get).await? {
                Ok(mut res) => match res.json::<Listing>().await {
                    Ok(Listing { committing: true, .. }) => return Ok(Some(Held::Committing)),
                    Ok(Listing { parts, arriving, .. }) => return Ok(Some(Held::Parts(Uploaded { parts, arriving }))),
                    Err(e) => runs.failed(e.to_string(), false),
                },
                Err(ClientError::Refused { status: 404 | 405, .. }) => return Ok(None),
                // The folder busy: asked again.
                Err(ClientError::Refused { status: 409, message, .. }) => runs.failed(message, false),
                Err(refused) => return Err(refused),
            }
        }
    }

    /// Uploads the file at `path` as part `name` of job `job_id`, from the bytes the main
    /// node holds of it, and has it taken whole; `report` gets the part's durable bytes and
    /// the rate. A part found not to be what was sent is sent once more from its first byte.
    pub async fn upload_part(
        &self,
        job_id: i32,
        lease: &str,
        name: &str,
        path: &Path,
        report: &mut dyn FnMut(u64, f64),
    ) -> Result<Part, ClientError> {
        let (source, size, sha256) = hashed(path, "hashing a part").await?;
        let part = Part { name: name.to_string(), size, sha256 };
        let url = self.url(job_id, &format!("parts/{name}"));
        let mut runs = Runs::new(self);
        loop {
            let at = match self.held_in(job_id, lease, &mut runs).await? {
                Some(Held::Parts(held)) if held.parts.contains(&part) => return Ok(part),
                Some(Held::Parts(held)) => held.arriving.iter().find(|a| a.name == name).map_or(0, |a| a.length),
                Some(Held::Committing) | None => {
                    return Err(ClientError::Refused {
                        status: 409,
                        code: "not_taking_parts".into(),
                        message: "the main node takes no more parts of this job".into(),
                    })
                }
            };
            // More than the file holds: what arrived is of another file of that name, found
            // out and discarded by the check below.
            let (sent, last) = if at <= size {
                self.send_from(&url, lease, &source, size, at, &mut runs, report).await?
            } else {
                (size, String::new())
            };
            if sent < size {
                // The listing asked next waits the run's backoff first.
                runs.failed(last, sent > at);
                continue;
            }
            let done = serde_json::json!({ "size": size, "sha256": part.sha256 });
            let url = self.url(job_id, &format!("parts/{name}/done"));
            let post = || self.request(awc::http::Method::POST, url.clone(), lease).send_json(&done);
            match self.answered(&mut runs, post).await? {
                Ok(mut res) => {
                    let _ = res.body().await;
                    return Ok(part);
                }
                Err(ClientError::Refused { code, message, .. }) if code == "checksum_mismatch" => {
                    if !runs.restart() {
                        return Err(ClientError::Checksum(format!("{message}; uploaded twice, giving up")));
                    }
                    tracing::warn!(job_id, name, %message, "uploading a part again");
                }
                Err(ClientError::Refused { status: 409, message, .. }) => runs.failed(message, false),
                Err(refused) => return Err(refused),
            }
        }
    }

    /// Finishes job `job_id`'s parts: the main node muxes, verifies and commits the output.
    /// A finish whose answer was lost is asked again; one that finds the job gone from
    /// `lease` after it went out was taken (its commit ended).
    pub async fn finish_parts(&self, job_id: i32, lease: &str, finish: &PartsFinish) -> Result<Finished, ClientError> {
        let url = self.url(job_id, "parts/finish");
        let mut runs = Runs::new(self);
        let mut sent = false;
        loop {
            runs.next().await?;
            let res = self.request(awc::http::Method::POST, url.clone(), lease).send_json(finish).await;
            let mut res = match res {
                Ok(res) => res,
                Err(e) => {
                    sent = true;
                    runs.failed(e.to_string(), false);
                    continue;
                }
            };
            let status = res.status().as_u16();
            if res.status().is_success() {
                let _ = res.body().await;
                return Ok(Finished::Committing);
            }
            match refusal(status, &mut res).await {
                ClientError::Refused { status: 403 | 404, message, .. } if sent => {
                    tracing::info!(job_id, %message, "the job left this lease after its finish");
                    return Ok(Finished::Committing);
                }
                ClientError::Refused { code, message, .. } if code == "source_changed" => {
                    return Err(ClientError::SourceChanged(message))
                }
                ClientError::Refused { code, message, .. } if code == "checksum_mismatch" => {
                    return Ok(Finished::Missing(message))
                }
                ClientError::Refused { code, message, .. } if code == "busy" => runs.failed(message, false),
                refused if status >= 500 => {
                    sent = true;
                    runs.failed(refused.to_string(), false)
                }
                refused => return Err(refused),
            }
        }
    }
}
