//! A linked node's sparse copy of a job's source for the spans it encodes without the share
//! (issue 39, item 4; the rules are `domain::byte_ranges`, the files `media::sparse`): the
//! client fetches one range at a time under a span's lease, each checked against the main
//! node's SHA-256 of that range and of the whole source, and keeps it in the copy, the
//! bytes durable before the map that names them. A map of another source is started over.
//! One fetch at a time per job on this node (`TransferSetup::span_sources`): the slots
//! that encode spans of one job share its copy.

use std::os::unix::fs::FileExt;
use std::path::Path;

use super::client::{io, wait_for_cap, ClientError, Runs, TransferClient};
use crate::actors::cluster::span_transfer::SPAN_HEADER;
use crate::actors::cluster::transfer::{RANGE_SHA256_HEADER, SHA256_HEADER, SIZE_HEADER};
use crate::domain::byte_ranges::RANGE_MOST;
use crate::media::sparse::{Held, SPARSE_FILE};
use crate::media::transfer::hex;

/// How long one range may take to come whole (4 MiB at 1 Mbit/s takes 34 s).
const RANGE_WITHIN: std::time::Duration = std::time::Duration::from_secs(300);

/// One range of a source, checked.
#[derive(Debug)]
pub struct Range {
    pub from: u64,
    pub bytes: actix_web::web::Bytes,
    /// The whole source's SHA-256 and size, as the main node answered them.
    pub sha256: String,
    pub size: u64,
}

impl TransferClient {
    /// Fetches bytes `[from, to)` of job `job_id`'s source (cut at its end) under the lease of
    /// span `span`, checked against the main node's SHA-256 of them: a range that does not
    /// match is fetched once more, then given up. `Ok(None)` from a main node that serves no
    /// ranges (an older release: 404, 405). The rate cap paces each range as a whole.
    pub async fn fetch_range(
        &self,
        job_id: i32,
        span: u32,
        lease: &str,
        from: u64,
        to: u64,
    ) -> Result<Option<Range>, ClientError> {
        let mut runs = Runs::new(self);
        let url = self.url(job_id, "source/range");
        let last = to.saturating_sub(1).min(from.saturating_add(RANGE_MOST - 1));
        let get = || {
            self.request(awc::http::Method::GET, url.clone(), lease)
                .insert_header((SPAN_HEADER, span.to_string()))
                .insert_header(("Range", format!("bytes={from}-{last}")))
                .send()
        };
        let mut mismatched = 0;
        loop {
            let mut res = match self.answered(&mut runs, get).await? {
                Ok(res) => res,
                Err(ClientError::Refused { status: 404 | 405, .. }) => return Ok(None),
                Err(refused) => return Err(refused),
            };
            let head = |name: &str| res.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
            let (sha256, size) = (head(SHA256_HEADER), head(SIZE_HEADER).and_then(|s| s.parse::<u64>().ok()));
            let Some(((sha256, size), range_sha)) = sha256.zip(size).zip(head(RANGE_SHA256_HEADER)) else {
                return Err(ClientError::Io { what: "reading a range's answer", error: "no SHA-256 or size".into() });
            };
            // More than a range holds is refused by the body's limit.
            let limit = usize::try_from(RANGE_MOST).unwrap_or(usize::MAX);
            let body = tokio::time::timeout(RANGE_WITHIN, res.body().limit(limit)).await;
            let bytes = match body {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(e)) => {
                    runs.failed(e.to_string(), false);
                    continue;
                }
                Err(_) => {
                    runs.failed(format!("a range did not come whole in {} s", RANGE_WITHIN.as_secs()), false);
                    continue;
                }
            };
            let (pause, _) = runs.moved(bytes.len() as u64);
            wait_for_cap(pause).await;
            let got = hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes));
            let whole = bytes.len() as u64 == last.min(size.saturating_sub(1)).saturating_sub(from) + 1;
            if got == range_sha && whole {
                return Ok(Some(Range { from, bytes, sha256, size }));
            }
            mismatched += 1;
            let why = format!(
                "bytes {from}-{last} of the source came as {} bytes with SHA-256 {got}, the main node's {range_sha}",
                bytes.len()
            );
            if mismatched > 1 {
                return Err(ClientError::Checksum(format!("{why}; fetched twice, giving up")));
            }
            tracing::warn!(job_id, span, %why, "fetching the range again");
        }
    }
}

/// What the sparse copy in `dir` holds of the source whose SHA-256 is `sha256` and size
/// `size`: a copy of another source (or none) is started over, empty. Blocking.
pub fn sparse_copy(dir: &Path, sha256: &str, size: u64) -> Result<Held, ClientError> {
    if let Some(held) = Held::read(dir).filter(|h| h.sha256 == sha256 && h.size == size) {
        return Ok(held);
    }
    let what = "starting the copy of the source";
    // A new file, not the old one emptied: a helper of this job still reading the old copy
    // keeps its bytes (its map then names another source, and it fails at its next wait).
    match std::fs::remove_file(dir.join(SPARSE_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(what)(e)),
        _ => {}
    }
    let file = std::fs::File::create(dir.join(SPARSE_FILE)).map_err(io(what))?;
    file.set_len(size).map_err(io(what))?;
    file.sync_all().map_err(io(what))?;
    let held = Held { sha256: sha256.to_string(), size, ..Held::default() };
    held.write(dir).map_err(|e| ClientError::Io { what: "starting the copy of the source", error: e.message })?;
    Ok(held)
}

/// Keeps `range` in the sparse copy in `dir` and answers what it holds now: the bytes
/// made durable, then the map. A range of another source than the copy's is refused
/// (`SourceChanged`). Blocking.
pub fn keep_range(dir: &Path, range: &Range) -> Result<Held, ClientError> {
    let mut held = Held::read(dir)
        .ok_or_else(|| ClientError::Io { what: "keeping a range", error: "the copy's map is gone".into() })?;
    if held.sha256 != range.sha256 || held.size != range.size {
        return Err(ClientError::SourceChanged(format!(
            "the copy here is of a source with SHA-256 {}, the main node's is {} now",
            held.sha256, range.sha256
        )));
    }
    let what = "keeping a range of the source";
    let file = std::fs::OpenOptions::new().write(true).open(dir.join(SPARSE_FILE)).map_err(io(what))?;
    file.write_all_at(&range.bytes, range.from).map_err(io(what))?;
    file.sync_data().map_err(io(what))?;
    held.ranges.add(range.from, range.from + range.bytes.len() as u64);
    held.write(dir).map_err(|e| ClientError::Io { what: "keeping a range of the source", error: e.message })?;
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(from: u64, bytes: &[u8], sha: &str) -> Range {
        Range { from, bytes: actix_web::web::Bytes::copy_from_slice(bytes), sha256: sha.repeat(64), size: 10 }
    }

    /// Ranges kept land at their place, the map names them, a copy of another source is
    /// started over, and a range of another source is refused, the copy untouched.
    #[test]
    fn a_sparse_copy_keeps_ranges_of_one_source() {
        let dir = tempfile::tempdir().unwrap();
        let held = sparse_copy(dir.path(), &"a".repeat(64), 10).unwrap();
        assert_eq!(held.ranges.bytes(), 0);
        assert_eq!(std::fs::metadata(dir.path().join(SPARSE_FILE)).unwrap().len(), 10);
        keep_range(dir.path(), &range(6, b"6789", "a")).unwrap();
        let held = keep_range(dir.path(), &range(0, b"012", "a")).unwrap();
        assert_eq!(held.ranges.as_slice(), [(0, 3), (6, 10)]);
        assert_eq!(std::fs::read(dir.path().join(SPARSE_FILE)).unwrap(), b"012\x00\x00\x006789");
        // The same source again: as it was.
        assert_eq!(sparse_copy(dir.path(), &"a".repeat(64), 10).unwrap(), held);
        let refused = keep_range(dir.path(), &range(3, b"345", "b")).unwrap_err();
        assert!(matches!(refused, ClientError::SourceChanged(_)), "{refused}");
        assert_eq!(Held::read(dir.path()).unwrap(), held);
        // Another source: started over in a new file; a reader of the old one keeps its bytes.
        let reading = std::fs::File::open(dir.path().join(SPARSE_FILE)).unwrap();
        let other = sparse_copy(dir.path(), &"b".repeat(64), 10).unwrap();
        assert_eq!(other.ranges.bytes(), 0);
        assert_eq!(std::fs::read(dir.path().join(SPARSE_FILE)).unwrap(), [0u8; 10]);
        let mut old = [0u8; 3];
        reading.read_exact_at(&mut old, 0).unwrap();
        assert_eq!(&old, b"012");
    }
}
