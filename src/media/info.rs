//! What a probe finds in a media file: container, streams, colour and HDR facts. Plain data,
//! without FFmpeg: the node keeps, plans and shows it; `condense-media`'s `probe` fills it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaInfo {
    pub container: String,
    pub duration_seconds: Option<f64>,
    pub size_bytes: u64,
    pub bit_rate: Option<i64>,
    pub chapters: u32,
    pub streams: Vec<StreamInfo>,
    /// HDR facts of the main video stream.
    pub hdr: HdrInfo,
}

impl MediaInfo {
    /// The main video stream (not a cover picture).
    pub fn video(&self) -> Option<&StreamInfo> {
        self.streams.iter().find(|s| s.kind == StreamKind::Video && !s.attached_picture)
    }

    pub fn count(&self, kind: StreamKind) -> usize {
        self.streams.iter().filter(|s| s.kind == kind && !s.attached_picture).count()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    Video,
    Audio,
    Subtitle,
    Attachment,
    Data,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamInfo {
    pub index: usize,
    pub kind: StreamKind,
    pub codec: String,
    /// The container's codec tag as four characters (e.g. "hvc1"), when set.
    pub codec_tag: Option<String>,
    pub profile: Option<String>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub frame_rate: Option<f64>,
    pub pix_fmt: Option<String>,
    pub bit_depth: Option<u32>,
    pub color_primaries: Option<String>,
    pub color_transfer: Option<String>,
    pub color_space: Option<String>,
    pub color_range: Option<String>,
    pub language: Option<String>,
    pub sample_rate: Option<u32>,
    pub channels: Option<u32>,
    pub attached_picture: bool,
    pub duration_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Disposition flags by FFmpeg's names ("default", "forced", "hearing_impaired", ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dispositions: Vec<String>,
    /// Stream-level side data by FFmpeg's names ("Display Matrix", "Stereo 3D", ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side_data: Vec<String>,
    /// Rotation of the display matrix in degrees, counterclockwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<f64>,
    /// "progressive", "tt", "bb", "tb" or "bt" where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_order: Option<String>,
}

#[cfg(test)]
impl StreamInfo {
    /// Stream `index` of `kind` in `codec`, nothing else known: what a test fills in.
    pub fn bare(index: usize, kind: StreamKind, codec: &str) -> StreamInfo {
        StreamInfo {
            index,
            kind,
            codec: codec.to_string(),
            codec_tag: None,
            profile: None,
            width: None,
            height: None,
            frame_rate: None,
            pix_fmt: None,
            bit_depth: None,
            color_primaries: None,
            color_transfer: None,
            color_space: None,
            color_range: None,
            language: None,
            sample_rate: None,
            channels: None,
            attached_picture: false,
            duration_seconds: None,
            title: None,
            dispositions: Vec::new(),
            side_data: Vec::new(),
            rotation: None,
            field_order: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HdrKind {
    #[serde(rename = "SDR")]
    Sdr,
    #[serde(rename = "HDR10")]
    Hdr10,
    #[serde(rename = "HLG")]
    Hlg,
    #[serde(rename = "HDR10+")]
    Hdr10Plus,
    #[serde(rename = "DOLBY_VISION")]
    DolbyVision,
}

impl HdrKind {
    /// Whether an output of this kind is PQ with HDR10's static metadata: HDR10, HDR10+ and
    /// the Dolby Vision an output keeps (profile 8.1, whose base layer is HDR10).
    pub fn has_hdr10_base(self) -> bool {
        matches!(self, HdrKind::Hdr10 | HdrKind::Hdr10Plus | HdrKind::DolbyVision)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HdrKind::Sdr => "SDR",
            HdrKind::Hdr10 => "HDR10",
            HdrKind::Hlg => "HLG",
            HdrKind::Hdr10Plus => "HDR10+",
            HdrKind::DolbyVision => "DOLBY_VISION",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HdrInfo {
    pub kind: HdrKind,
    pub dolby_vision: Option<DolbyVision>,
    pub hdr10_plus: bool,
    pub mastering_display: Option<MasteringDisplay>,
    pub content_light: Option<ContentLight>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DolbyVision {
    pub profile: u8,
    pub level: u8,
    pub bl_compatibility_id: u8,
    pub rpu_present: bool,
    pub el_present: bool,
}

/// SMPTE ST 2086 mastering display, chromaticities as CIE 1931 xy, luminance in cd/m².
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MasteringDisplay {
    pub red: [f64; 2],
    pub green: [f64; 2],
    pub blue: [f64; 2],
    pub white_point: [f64; 2],
    pub min_luminance: f64,
    pub max_luminance: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentLight {
    pub max_cll: u32,
    pub max_fall: u32,
}

/// The environment variable that tells a media child the frame-size cap it checks here
/// (set by the node's `worker::child_command`).
pub const MAX_PIXELS_VAR: &str = "CONDENSE_MAX_PIXELS";
