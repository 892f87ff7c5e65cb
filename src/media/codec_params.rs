//! The encoder's stream parameters as the manifest keeps them (`CodecParams`): plain data
//! the node reads and compares without FFmpeg; `condense-media`'s `segment` reads them off an
//! encoder and turns them back into FFmpeg's stream parameters.

use serde::{Deserialize, Serialize};

/// The encoder's stream parameters, kept in the manifest so the final mux can describe the
/// video stream exactly (extradata holds the parameter sets: hvcC / av1C).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodecParams {
    pub codec_id: u32,
    pub width: i32,
    pub height: i32,
    pub format: i32,
    pub profile: i32,
    pub level: i32,
    pub color_range: u32,
    pub color_primaries: u32,
    pub color_trc: u32,
    pub color_space: u32,
    pub chroma_location: u32,
    pub sample_aspect_ratio: [i32; 2],
    pub video_delay: i32,
    pub extradata: String,
    /// Time base of the packets in the segments.
    pub time_base: [i32; 2],
}

impl CodecParams {
    /// Whether segments with these headers join those with `other`'s: the same codec and the
    /// same parameter sets (hvcC / av1C).
    pub fn joins(&self, other: &CodecParams) -> bool {
        self.codec_id == other.codec_id && self.extradata == other.extradata
    }

    /// The extradata's bytes, or None when the manifest's hex is bad.
    pub fn extradata_bytes(&self) -> Option<Vec<u8>> {
        unhex(&self.extradata)
    }
}

/// Bytes as lower-case hex, as the manifest keeps extradata.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len()).step_by(2).map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(&hex(&[0, 1, 254, 255])).unwrap(), [0, 1, 254, 255]);
        assert!(unhex("zz").is_none());
    }
}
