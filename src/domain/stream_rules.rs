//! What a library asks of each file besides its video codec (issue 37): which audio and
//! subtitle tracks stay, which audio is converted and to what, a stereo track added, a
//! height cap, the output's container, and which files are left alone. Plain data and its
//! validation; `media::stream_plan` turns rules and a probe into one plan per file.

use serde::{Deserialize, Serialize};

/// The audio codec converted tracks get (`copy`: none is converted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AudioCodec {
    #[default]
    Copy,
    Aac,
    Opus,
    Eac3,
}

impl AudioCodec {
    /// FFmpeg's codec name; None for `copy`.
    pub fn codec_name(self) -> Option<&'static str> {
        match self {
            AudioCodec::Copy => None,
            AudioCodec::Aac => Some("aac"),
            AudioCodec::Opus => Some("opus"),
            AudioCodec::Eac3 => Some("eac3"),
        }
    }

    /// Bitrate per channel in kb/s when the library sets none: 96 for Opus, 128 otherwise.
    pub fn default_kbps_per_channel(self) -> u32 {
        match self {
            AudioCodec::Opus => 96,
            AudioCodec::Copy | AudioCodec::Aac | AudioCodec::Eac3 => 128,
        }
    }
}

/// The output's container: the source's own where the target codec fits it (`keep`), or
/// always Matroska or MP4.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContainerRule {
    #[default]
    Keep,
    Mkv,
    Mp4,
}

/// The codecs converted by default: lossless or bulky ones (`pcm` matches every `pcm_*`).
pub const DEFAULT_AUDIO_TRANSCODE: &[&str] = &["dts", "truehd", "flac", "pcm"];

/// A library's stream rules. The defaults keep today's behaviour: every stream copied, the
/// container kept, no file filtered out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamRules {
    /// ISO 639-2 codes of the audio tracks to keep; empty keeps all.
    pub audio_languages: Vec<String>,
    /// Drop tracks tagged `und` or untagged when `audio_languages` is set.
    pub drop_undetermined: bool,
    /// Drop commentary and described tracks (disposition or title).
    pub drop_commentary: bool,
    pub audio_codec: AudioCodec,
    /// Source codecs converted to `audio_codec` (a `pcm` entry matches every `pcm_*`).
    pub audio_transcode: Vec<String>,
    /// Bitrate per channel of converted audio; None: the codec's default.
    pub audio_bitrate_kbps: Option<u32>,
    /// Keep the source track beside its converted one.
    pub keep_original_audio: bool,
    /// Add a stereo downmix for each kept language whose tracks all have more than 2 channels.
    pub add_stereo: bool,
    /// ISO 639-2 codes of the subtitle tracks to keep; empty keeps all.
    pub subtitle_languages: Vec<String>,
    /// Drop image subtitles (PGS, VobSub, DVB).
    pub drop_image_subtitles: bool,
    /// Scale taller video down to this height; None keeps the size.
    pub max_height: Option<u32>,
    pub container: ContainerRule,
    /// Files smaller than this are SKIPPED at analysis.
    pub min_size_mb: Option<u64>,
    /// Files whose video bitrate, scaled to 1080p's pixel rate, is below this are SKIPPED.
    pub min_bitrate_kbps: Option<u32>,
    /// Glob patterns, relative to the library's root, of files left alone.
    pub skip_paths: Vec<String>,
}

impl Default for StreamRules {
    fn default() -> Self {
        StreamRules {
            audio_languages: Vec::new(),
            drop_undetermined: false,
            drop_commentary: false,
            audio_codec: AudioCodec::Copy,
            audio_transcode: DEFAULT_AUDIO_TRANSCODE.iter().map(|s| (*s).to_string()).collect(),
            audio_bitrate_kbps: None,
            keep_original_audio: false,
            add_stereo: false,
            subtitle_languages: Vec::new(),
            drop_image_subtitles: false,
            max_height: None,
            container: ContainerRule::Keep,
            min_size_mb: None,
            min_bitrate_kbps: None,
            skip_paths: Vec::new(),
        }
    }
}
