//! The partial output's manifest: which segments are complete. It is rewritten atomically
//! (temp file, fsync, rename, fsync of the folder) after each segment, so after a crash it
//! names only segments that were fully written.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::layout::MANIFEST_FILE;
use super::plan::{EncodePlan, SourceIdentity};
use super::MediaError;

pub const MANIFEST_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    pub index: u32,
    pub file: String,
    /// First and last source presentation timestamps encoded, in the source stream's time base.
    pub first_pts: i64,
    pub last_pts: i64,
    pub frames: u64,
    pub bytes: u64,
}

/// One run of the transcoder over this partial output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// Source frames encoded by this run (kept segments only).
    pub frames_encoded: u64,
    /// Frames decoded and thrown away to reach the resume point.
    pub frames_skipped: u64,
    pub ended: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: u32,
    pub plan_digest: String,
    pub source: SourceIdentity,
    pub segments: Vec<Segment>,
    /// The encoder's stream parameters, from the first segment.
    pub video: Option<super::segment::CodecParams>,
    pub video_complete: bool,
    pub runs: Vec<Run>,
    /// The lease of the run that owns this partial output: a run whose lease is no longer
    /// the one here was replaced by another and must not write.
    #[serde(default)]
    pub epoch: String,
}

/// What a job finds where its partial output should be.
#[derive(Debug, Clone, PartialEq)]
pub enum PartialState {
    Missing,
    Valid(Manifest),
    Corrupt(String),
}

impl Manifest {
    pub fn new(plan: &EncodePlan) -> Self {
        Manifest {
            version: MANIFEST_VERSION,
            plan_digest: plan.digest(),
            source: plan.source,
            segments: Vec::new(),
            video: None,
            video_complete: false,
            runs: Vec::new(),
            epoch: plan.epoch.clone(),
        }
    }

    pub fn path(dir: &Path) -> PathBuf {
        dir.join(MANIFEST_FILE)
    }

    pub fn frames_done(&self) -> u64 {
        self.segments.iter().map(|s| s.frames).sum()
    }

    /// Makes this run the owner of the partial output: its epoch goes into the manifest,
    /// whatever epoch was there.
    pub fn claim(&mut self, epoch: &str, dir: &Path) -> Result<(), MediaError> {
        self.epoch = epoch.to_string();
        self.write(dir)
    }

    /// Writes the manifest durably, unless another run has claimed the partial output
    /// since this one did (its epoch is in the manifest on disk): then nothing is written.
    pub fn save(&self, dir: &Path) -> Result<(), MediaError> {
        if let Some(owner) = epoch_on_disk(dir) {
            if owner != self.epoch {
                return Err(MediaError::misc(
                    "another run took over the partial output (its lease is in the manifest); this one stopped without writing",
                ));
            }
        }
        self.write(dir)
    }

    /// Writes the manifest durably: a crash leaves the old or the new one, never a mix.
    fn write(&self, dir: &Path) -> Result<(), MediaError> {
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        let body = serde_json::to_vec_pretty(self).map_err(|e| MediaError::misc(format!("manifest: {e}")))?;
        let io = |e: std::io::Error| MediaError::from_io("writing the manifest", &e);
        let mut file = std::fs::File::create(&tmp).map_err(io)?;
        file.write_all(&body).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, Self::path(dir)).map_err(io)?;
        sync_dir(dir).map_err(io)
    }
}

/// The epoch of the manifest in `dir`, if there is a readable one.
fn epoch_on_disk(dir: &Path) -> Option<String> {
    #[derive(Deserialize)]
    struct Owner {
        #[serde(default)]
        epoch: String,
    }
    let text = std::fs::read(Manifest::path(dir)).ok()?;
    serde_json::from_slice::<Owner>(&text).ok().map(|o| o.epoch)
}

pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Reads the partial output of `plan` and says whether it can be continued.
pub fn inspect(plan: &EncodePlan) -> PartialState {
    let dir = &plan.partial_dir;
    if !dir.exists() {
        return PartialState::Missing;
    }
    let path = Manifest::path(dir);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A folder without a manifest holds nothing worth keeping.
            return PartialState::Missing;
        }
        Err(e) => return PartialState::Corrupt(format!("manifest unreadable: {e}")),
    };
    let manifest: Manifest = match serde_json::from_slice(&text) {
        Ok(m) => m,
        Err(e) => return PartialState::Corrupt(format!("manifest unparsable: {e}")),
    };
    if manifest.version != MANIFEST_VERSION {
        return PartialState::Corrupt(format!("manifest version {}", manifest.version));
    }
    if manifest.plan_digest != plan.digest() {
        return PartialState::Corrupt("encoding settings changed since the partial output was made".into());
    }
    if manifest.source != plan.source {
        return PartialState::Corrupt("the source file changed since the partial output was made".into());
    }
    for (i, seg) in manifest.segments.iter().enumerate() {
        if seg.index as usize != i {
            return PartialState::Corrupt(format!("segment {i} is out of order"));
        }
        match std::fs::metadata(dir.join(&seg.file)) {
            Ok(m) if m.len() == seg.bytes => {}
            Ok(m) => {
                return PartialState::Corrupt(format!("{} has {} bytes, expected {}", seg.file, m.len(), seg.bytes))
            }
            Err(_) => return PartialState::Corrupt(format!("{} is missing", seg.file)),
        }
    }
    PartialState::Valid(manifest)
}

/// A quick look at a paused job's partial output, without its plan: whether there is one,
/// and whether its manifest and listed segments are intact. The transcoder checks the
/// rest (settings, source identity) when it continues.
pub fn quick_state(dir: &Path) -> crate::domain::job::PartialOutput {
    use crate::domain::job::PartialOutput;
    let Ok(text) = std::fs::read(Manifest::path(dir)) else { return PartialOutput::Missing };
    let Ok(manifest) = serde_json::from_slice::<Manifest>(&text) else { return PartialOutput::Corrupt };
    let intact =
        manifest.segments.iter().all(|s| std::fs::metadata(dir.join(&s.file)).is_ok_and(|m| m.len() == s.bytes));
    if intact {
        PartialOutput::Valid
    } else {
        PartialOutput::Corrupt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            plan_digest: "digest".into(),
            source: SourceIdentity { size: 1, mtime_ns: 2, inode: 3 },
            segments: Vec::new(),
            video: None,
            video_complete: false,
            runs: Vec::new(),
            epoch: String::new(),
        }
    }

    #[test]
    fn a_run_whose_epoch_was_taken_over_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = manifest();
        first.claim("lease-1", dir.path()).unwrap();
        first.save(dir.path()).unwrap();
        let mut second = manifest();
        second.claim("lease-2", dir.path()).unwrap();
        first.video_complete = true;
        let err = first.save(dir.path()).unwrap_err();
        assert!(err.message.contains("another run"), "{err}");
        let on_disk: Manifest = serde_json::from_slice(&std::fs::read(Manifest::path(dir.path())).unwrap()).unwrap();
        assert_eq!((on_disk.epoch.as_str(), on_disk.video_complete), ("lease-2", false));
        second.save(dir.path()).unwrap();
    }
}
