//! What a quality search settles on and what a VMAF measure gives, as plain data: the node
//! keeps, forecasts and shows them without FFmpeg; `condense-media`'s `search` and `vmaf`
//! make them.

use serde::{Deserialize, Serialize};

use super::plan::QualitySearch;
use crate::domain::quality::Probe;

/// What a search settled on, as kept in the partial folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    /// The plan searched for (before its quality was set) and what was asked: a result for
    /// another plan or target is searched again.
    pub plan_digest: String,
    pub asked: QualitySearch,
    pub quality: u32,
    /// Whether `quality` reaches the target (else it is the best quality in range).
    pub met: bool,
    pub vmaf: VmafScore,
    /// Encoded size of the samples at `quality`, in percent of their source bytes.
    pub percent: f64,
    pub predicted_size: u64,
    /// Seconds the whole video would take to encode here, at the speed its samples took.
    pub predicted_seconds: f64,
    pub probes: Vec<Probe>,
    pub samples: Vec<Window>,
}

impl SearchResult {
    /// Whether the predicted size is past what the library keeps.
    pub fn too_large(&self) -> bool {
        self.percent > f64::from(self.asked.max_size_percent)
    }
}

/// A score over a run of frames: the mean and the 5th percentile of the per-frame scores
/// (how bad the worst stretches are, which a mean hides).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VmafScore {
    pub mean: f64,
    pub p5: f64,
    pub frames: u32,
}

impl VmafScore {
    /// The score of frames scored in parts (samples), each part weighted by its frames; the
    /// 5th percentile of the whole is taken as the lowest of the parts' (conservative).
    pub fn combine(parts: &[VmafScore]) -> Option<VmafScore> {
        let frames: u32 = parts.iter().map(|p| p.frames).sum();
        if frames == 0 {
            return None;
        }
        let mean = parts.iter().map(|p| p.mean * f64::from(p.frames)).sum::<f64>() / f64::from(frames);
        let p5 = parts.iter().map(|p| p.p5).fold(f64::INFINITY, f64::min);
        Some(VmafScore { mean, p5, frames })
    }
}

/// The 5th percentile of `scores` (nearest rank), or None when there are none.
pub fn percentile_5(scores: &[f64]) -> Option<f64> {
    let mut sorted = scores.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (sorted.len() as f64 * 0.05).ceil() as usize;
    sorted.get(rank.saturating_sub(1)).copied()
}

/// A stretch of a video: `start` and `length` in seconds from its video stream's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start: f64,
    pub length: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_5th_percentile_is_the_nearest_rank() {
        let scores: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_5(&scores), Some(5.0));
        assert_eq!(percentile_5(&[90.0, 10.0]), Some(10.0));
        assert_eq!(percentile_5(&[]), None);
    }

    #[test]
    fn parts_combine_weighted_by_frames_with_the_lowest_percentile() {
        let a = VmafScore { mean: 90.0, p5: 80.0, frames: 30 };
        let b = VmafScore { mean: 100.0, p5: 95.0, frames: 10 };
        assert_eq!(VmafScore::combine(&[a, b]), Some(VmafScore { mean: 92.5, p5: 80.0, frames: 40 }));
        assert_eq!(VmafScore::combine(&[]), None);
    }
}
