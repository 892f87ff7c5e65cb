//! One plan per file for every stream besides the encoded video (issue 37): each source
//! stream's fate and the rule that decided it, the streams added, the output's container and
//! video size. Made at analysis from the probe and the library's `StreamRules`
//! (`plan_streams`), shown by `GET /jobs/{id}/plan`, carried out by `condense-media`'s mux in
//! the one pass, and what verification checks the output against.

use serde::{Deserialize, Serialize};

use super::info::{MediaInfo, StreamKind};
use crate::domain::stream_rules::StreamRules;

/// What becomes of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Fate {
    /// Copied as it is.
    Copy,
    /// The video, re-encoded (and scaled where `video_size` says).
    Encode,
    /// Audio or subtitles converted to `codec`.
    Convert,
    /// Left out of the output.
    Drop,
    /// Made from another stream (`source_index`): a stereo downmix.
    Add,
}

/// One stream of the output, or one source stream that is dropped, in output order (dropped
/// ones where they stood in the source).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedStream {
    /// The source stream it comes from (for `add`, the one downmixed).
    pub source_index: usize,
    pub fate: Fate,
    pub kind: String,
    /// The codec it has in the output (the source's for `copy` and `drop`).
    pub codec: String,
    pub language: Option<String>,
    pub title: Option<String>,
    /// Disposition flags by FFmpeg's names ("default", "forced", "comment", ...).
    pub dispositions: Vec<String>,
    pub channels: Option<u32>,
    /// Bitrate of a converted or added audio track, bits per second.
    pub bit_rate: Option<u64>,
    /// The rule that decided the fate, in words (e.g. "audioLanguages keeps eng, deu").
    pub rule: String,
}

/// A video frame's size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VideoSize {
    pub width: u32,
    pub height: u32,
}

/// The plan of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamPlan {
    pub streams: Vec<PlannedStream>,
    /// The output's container extension ("mkv", "mp4", ...).
    pub container: String,
    /// The output video's size when it is scaled; None keeps the source's.
    pub video_size: Option<VideoSize>,
    /// Why the plan differs from what the rules ask (e.g. every audio track kept because no
    /// track matched `audioLanguages`).
    pub notes: Vec<String>,
}

impl StreamPlan {
    /// Whether the plan is today's default: every stream copied but the video, no size change.
    pub fn copies_everything(&self) -> bool {
        self.video_size.is_none() && self.streams.iter().all(|s| matches!(s.fate, Fate::Copy | Fate::Encode))
    }
}

/// The plan for `info` under `rules`, with `container` the output extension the job would
/// use without a container rule.
pub fn plan_streams(info: &MediaInfo, rules: &StreamRules, container: &str) -> StreamPlan {
    // Until the rules are carried out (issue 37), every stream is copied and the video
    // encoded, as before.
    let _ = rules;
    let video = info.video().map(|v| v.index);
    let streams = info
        .streams
        .iter()
        .map(|s| PlannedStream {
            source_index: s.index,
            fate: if Some(s.index) == video { Fate::Encode } else { Fate::Copy },
            kind: kind_name(s.kind).to_string(),
            codec: s.codec.clone(),
            language: s.language.clone(),
            title: s.title.clone(),
            dispositions: s.dispositions.clone(),
            channels: s.channels,
            bit_rate: None,
            rule: String::new(),
        })
        .collect();
    StreamPlan { streams, container: container.to_string(), video_size: None, notes: Vec::new() }
}

fn kind_name(kind: StreamKind) -> &'static str {
    match kind {
        StreamKind::Video => "video",
        StreamKind::Audio => "audio",
        StreamKind::Subtitle => "subtitle",
        StreamKind::Attachment => "attachment",
        StreamKind::Data => "data",
        StreamKind::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::info::{HdrInfo, HdrKind, StreamInfo};

    fn stream(index: usize, kind: StreamKind, codec: &str) -> StreamInfo {
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
            language: Some("eng".to_string()),
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

    #[test]
    fn default_rules_copy_every_stream_and_encode_the_video() {
        let info = MediaInfo {
            container: "matroska,webm".to_string(),
            duration_seconds: Some(1.0),
            size_bytes: 1,
            bit_rate: None,
            chapters: 0,
            streams: vec![stream(0, StreamKind::Video, "h264"), stream(1, StreamKind::Audio, "dts")],
            hdr: HdrInfo {
                kind: HdrKind::Sdr,
                dolby_vision: None,
                hdr10_plus: false,
                mastering_display: None,
                content_light: None,
            },
        };
        let plan = plan_streams(&info, &StreamRules::default(), "mkv");
        assert!(plan.copies_everything());
        assert_eq!(plan.streams.iter().map(|s| s.fate).collect::<Vec<_>>(), [Fate::Encode, Fate::Copy]);
        assert_eq!(plan.container, "mkv");
    }
}
