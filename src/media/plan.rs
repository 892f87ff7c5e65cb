//! What to do with a file: skip or encode, into which container, with which settings.
//! The plan is handed to the transcoder child, which encodes exactly what it says.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::hdr_metadata;
use super::info::{HdrKind, MediaInfo};
use super::layout::{self, partial_dir_for};
use super::stream_plan::StreamPlan;
use super::MediaError;
use crate::domain::encoding::{EncodeProfile, Encoder, RetryProfile};
use crate::domain::job::FailureCode;
use crate::domain::path_bytes;
use crate::domain::segments::Sessions;

/// Containers (by extension) condense takes as input; FFmpeg may decode more.
pub const INPUT_EXTENSIONS: &[&str] = &["mp4", "m4v", "mkv", "avi", "mov", "webm", "mpg", "mpeg", "flv", "wmv"];

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Already in the target codec.
    Skip {
        reason: String,
    },
    Encode,
}

/// Skip a file already in the target codec unless forced; refuse what cannot be converted
/// correctly (Dolby Vision without an HDR10, HLG or SDR base layer).
pub fn decide(info: &MediaInfo, target_codec: &str, forced: bool) -> Result<Decision, MediaError> {
    let video = info.video().ok_or_else(|| MediaError::invalid("no video stream"))?;
    if let Some(dv) = info.hdr.dolby_vision {
        // Profile 5 (and any profile without a compatible base layer) carries IPTPQc2
        // colour that only the RPU can turn into HDR10: encoding it would give wrong colours.
        let compatible = matches!(dv.bl_compatibility_id, 1 | 2 | 4) && dv.profile != 5;
        if !compatible {
            return Err(MediaError::new(
                FailureCode::UnsupportedCodec,
                format!(
                    "Dolby Vision profile {} (base layer compatibility {}) has no HDR10, HLG or SDR base layer; \
                     converting it would give wrong colours",
                    dv.profile, dv.bl_compatibility_id
                ),
            ));
        }
    }
    if video.codec == target_codec && !forced {
        return Ok(Decision::Skip { reason: format!("video is already {target_codec}") });
    }
    Ok(Decision::Encode)
}

/// Extension of the output: the source's container where the target codec fits it,
/// else Matroska.
pub fn output_extension(source: &Path, target_codec: &str) -> &'static str {
    let ext = source.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).unwrap_or_default();
    match (ext.as_str(), target_codec) {
        ("mp4", _) => "mp4",
        ("m4v", _) => "m4v",
        ("mov", "hevc") => "mov",
        ("webm", "av1") => "webm",
        _ => "mkv",
    }
}

/// The final path of the encoded file: the source's own path when the container stays.
pub fn final_path(source: &Path, target_codec: &str) -> PathBuf {
    final_path_with(source, output_extension(source, target_codec))
}

/// The final path of an output with extension `ext` (a plan's `output_extension`, which a
/// library's `container` rule may change): the source's own path when the container stays.
pub fn final_path_with(source: &Path, ext: &str) -> PathBuf {
    let same = source.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case(ext));
    if same {
        source.to_path_buf()
    } else {
        source.with_extension(ext)
    }
}

/// Every path the replace may give the job's output: `final_path`, or the Matroska or MP4
/// one a library's `container` rule asks for (the rule may have changed since the attempt
/// ran, so all are candidates wherever an output is recognised by its path).
pub fn final_paths(source: &Path, target_codec: &str) -> Vec<PathBuf> {
    let mut paths = vec![final_path(source, target_codec)];
    for ext in ["mkv", "mp4"] {
        let path = final_path_with(source, ext);
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// What identifies the source as the one the job started on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceIdentity {
    pub size: u64,
    pub mtime_ns: i64,
    pub inode: u64,
}

impl SourceIdentity {
    pub fn of(path: &Path) -> std::io::Result<SourceIdentity> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(SourceIdentity { size: m.len(), mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(), inode: m.ino() })
    }

    /// The identity of what a `stat` (not followed, see `media::handle`) found.
    pub fn of_stat(st: &rustix::fs::Stat) -> SourceIdentity {
        SourceIdentity {
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime_ns: st.st_mtime * 1_000_000_000 + i64::try_from(st.st_mtime_nsec).unwrap_or(0),
            inode: st.st_ino,
        }
    }
}

/// Everything the transcoder child needs, handed to it as JSON: the source, where the
/// partial output goes, and the whole encoding profile of this attempt (encoder, its
/// options, decoding on hardware or not, output bit depth), so that each rung of the retry
/// ladder changes what really runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EncodePlan {
    // Any bytes: a path that is not UTF-8 travels as its bytes (`domain::path_bytes`).
    #[serde(with = "path_bytes::lossless")]
    pub input: PathBuf,
    #[serde(with = "path_bytes::lossless")]
    pub partial_dir: PathBuf,
    pub target_codec: String,
    pub encoder: Encoder,
    /// The encoder's FFmpeg options: quality and preset under the names it gives them, and
    /// its fixed options (see `domain::encoding`). HDR metadata is added by the transcoder.
    pub encoder_options: Vec<(String, String)>,
    /// Decode on the encoder's hardware (NVDEC, Quick Sync, VAAPI) when it has one.
    pub hardware_decode: bool,
    /// Bits per sample of the encoded video: 10 only for a 10-bit source, where the
    /// profile allows it and the encoder writes it.
    pub bit_depth: u8,
    /// The rung of the retry ladder this plan came from, for logs.
    pub retry_profile: RetryProfile,
    /// The cautious rungs of a CPU encoder's ladder: 4:2:0 chroma whatever the source's, and
    /// the encoder's features most often behind its failures turned off (`media::
    /// encoder_options`; HDR10's signalling stays). Absent in a plan from an older node.
    #[serde(default)]
    pub cautious: bool,
    /// Length of a resumable segment of video, in seconds of source time; also the length
    /// of a span encoded on its own (cut at the first source keyframe past it).
    pub segment_seconds: f64,
    /// Encoder sessions that encode spans at once, and each one's threads (not part of the
    /// digest: segments from any number of sessions join the same way).
    #[serde(default)]
    pub sessions: Sessions,
    /// Cut the video into spans even for one session: idle slots of other nodes may take
    /// spans of it (`media::helper`). Not part of the digest either.
    #[serde(default)]
    pub shared_spans: bool,
    pub output_extension: String,
    pub source: SourceIdentity,
    /// Free bytes the partial folder's filesystem must have before starting.
    pub min_free_bytes: u64,
    /// The early abort (`domain::quality::projected_over`): the encode stops once its output,
    /// projected, would pass this many bytes (the source's size: an output that is not
    /// smaller is never kept). None: never stopped for its size.
    #[serde(default)]
    pub size_limit: Option<u64>,
    /// VMAF mode: before encoding, search the quality (CRF/CQ) on samples of the video
    /// (`media::search`); the encoder options' quality is where the search starts.
    #[serde(default)]
    pub search: Option<QualitySearch>,
    /// HDR kind the output keeps (Dolby Vision becomes HDR10, HLG or SDR of its base layer).
    pub hdr: HdrKind,
    /// Pause after each frame, in milliseconds: lets tests and benchmarks stop an encode at
    /// a chosen point without racing it. 0 in production.
    #[serde(default)]
    pub throttle_ms_per_frame: u64,
    /// The lease of the job's attempt, written into the manifest as the partial output's
    /// epoch (not part of the digest: a new attempt continues the old one's segments).
    #[serde(default)]
    pub epoch: String,
    /// Pixels of the source's frame, which size the child's address space
    /// (`domain::limits`; not part of the digest).
    #[serde(default)]
    pub frame_pixels: Option<u64>,
    /// What becomes of every stream besides the video (the library's stream rules, see
    /// `media::stream_plan`). None: every stream copied and the container kept, as before
    /// stream rules existed (and in a plan from an older node).
    #[serde(default)]
    pub streams: Option<StreamPlan>,
    /// Two passes (x265): a first pass over every span writes its statistics, then the
    /// encode reads them (`media::transcode`; the bitrate is in `encoder_options`).
    #[serde(default)]
    pub two_pass: bool,
    /// Which pass a session of a two-pass run encodes, and its span's statistics file: set
    /// by the transcoder per span, never sent.
    #[serde(skip)]
    pub pass: Option<PassRun>,
    /// The source is this node's copy still being downloaded (issue 39's download ahead):
    /// the child reads it as it arrives (not part of the digest; absent from an older node).
    #[serde(default)]
    pub growing: Option<GrowingSource>,
    /// The source is this node's sparse copy, filled as a span's demuxer reads it (issue
    /// 39, item 4; not part of the digest; absent from an older node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<crate::media::sparse::SparseSource>,
    /// How much of the work this run does (issue 39, "upload while encoding"): all of it,
    /// or only the video and audio that a node without the share uploads as they finish, or
    /// only the mux of what such a node uploaded (not part of the digest; absent from an
    /// older node: all of it).
    #[serde(default, skip_serializing_if = "RunScope::is_whole")]
    pub scope: RunScope,
}

/// How much of a job's work one transcoder run does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RunScope {
    /// Encode what is left, then mux the output.
    #[default]
    Whole,
    /// Encode what is left (video segments, the planned audio) and stop before the mux: a
    /// node without the share uploads these files as they finish, and the main node muxes.
    Encode,
    /// Mux only: every segment must be in the partial folder already, made under this plan
    /// (and a VMAF search's result too); nothing is encoded or searched, and a folder that
    /// does not hold all of it is an error, never started over.
    Mux,
}

impl RunScope {
    pub fn is_whole(&self) -> bool {
        *self == RunScope::Whole
    }
}

/// A linked node's copy of a source that is still arriving when a child starts to read it
/// (issue 39, "download ahead"): it grows from its first byte, and its last bytes, where
/// Matroska keeps its cues and tags and an MP4 often its sample tables, were fetched first
/// into a file of their own, so that opening it and finding its keyframes wait for nothing
/// else. The child reads it through `condense-media`'s `growing` reader, which waits for
/// bytes not there yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrowingSource {
    /// The copy, as the child opens it.
    #[serde(with = "path_bytes::lossless")]
    pub path: PathBuf,
    /// Its whole size, once downloaded.
    pub size: u64,
    /// The file holding its bytes from `tail_from` to its end.
    #[serde(with = "path_bytes::lossless")]
    pub tail: PathBuf,
    pub tail_from: u64,
}

/// One encoder session of a two-pass encode: the pass, and the statistics file the first
/// writes and the second reads (in the partial folder, reached through its handle).
#[derive(Debug, Clone, PartialEq)]
pub struct PassRun {
    pub pass: u8,
    pub stats: PathBuf,
}

/// What a VMAF-mode library asks of the search (see `domain::quality`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QualitySearch {
    pub target_vmaf: f64,
    pub max_size_percent: u32,
}

impl EncodePlan {
    pub fn new(input: &Path, info: &MediaInfo, profile: &EncodeProfile) -> Result<Self, MediaError> {
        let source = SourceIdentity::of(input).map_err(|e| MediaError::from_io("source", &e))?;
        let target_codec = profile.encoder.codec().as_str();
        let source_depth = info.video().and_then(|v| v.bit_depth).unwrap_or(8);
        let ten_bit = source_depth > 8 && profile.ten_bit_allowed && profile.encoder.profile().ten_bit;
        Ok(EncodePlan {
            input: input.to_path_buf(),
            partial_dir: partial_dir_for(input),
            target_codec: target_codec.to_string(),
            encoder: profile.encoder,
            encoder_options: profile.options(),
            hardware_decode: profile.hardware_decode,
            bit_depth: if ten_bit { 10 } else { 8 },
            retry_profile: profile.retry_profile,
            cautious: profile.cautious,
            segment_seconds: 20.0,
            sessions: Sessions::ONE,
            shared_spans: false,
            output_extension: output_extension(input, target_codec).to_string(),
            source,
            // Segments plus the final file peak near the output's size twice over; outputs
            // are smaller than sources, so the source's size plus a margin is enough.
            min_free_bytes: source.size + 64 * 1024 * 1024,
            size_limit: Some(source.size),
            search: None,
            hdr: match info.hdr.kind {
                HdrKind::DolbyVision => match info.hdr.dolby_vision.map(|d| d.bl_compatibility_id) {
                    Some(4) => HdrKind::Hlg,
                    Some(2) => HdrKind::Sdr,
                    _ => HdrKind::Hdr10,
                },
                // The transcoder carries HDR10+ into HEVC itself (`media::hdr_metadata`); other
                // targets keep the static HDR10 metadata (correct colours, no per-scene
                // tone mapping).
                HdrKind::Hdr10Plus if !hdr_metadata::carried(target_codec) => HdrKind::Hdr10,
                other => other,
            },
            throttle_ms_per_frame: 0,
            epoch: String::new(),
            frame_pixels: info
                .video()
                .and_then(|v| Some(u64::from(v.width?).saturating_mul(u64::from(v.height?))))
                .filter(|p| *p > 0),
            streams: None,
            two_pass: profile.runs_two_passes(),
            pass: None,
            growing: None,
            sparse: None,
            scope: RunScope::Whole,
        })
    }

    /// The plan of a copy of the source (a linked node's, issue 39): the source is the
    /// original as the main node recorded it, whose size bounds the output and the room the
    /// encode needs, whatever the copy holds yet (a copy still downloading is shorter).
    pub fn of_original(&mut self, source: SourceIdentity) {
        self.source = source;
        self.min_free_bytes = source.size + 64 * 1024 * 1024;
        self.size_limit = Some(source.size);
    }

    /// A library's `keepDolbyVision`: the output keeps the source's Dolby Vision as profile
    /// 8.1 (its RPUs carried frame by frame, see `media::hdr_metadata`) where the target is HEVC
    /// and the base layer is HDR10 (profiles 7 and 8.1). Otherwise nothing changes: the
    /// output is its base layer's kind, the RPU dropped. Answers whether it is kept.
    pub fn keep_dolby_vision(&mut self, info: &MediaInfo) -> bool {
        let hdr10_base =
            info.hdr.dolby_vision.is_some_and(|d| d.profile == 7 || (d.profile == 8 && d.bl_compatibility_id == 1));
        let keep = hdr10_base && hdr_metadata::carried(&self.target_codec);
        if keep {
            self.hdr = HdrKind::DolbyVision;
        }
        keep
    }

    pub fn output_path(&self) -> PathBuf {
        layout::output_path(&self.partial_dir, &self.output_extension)
    }

    /// The output's name inside the partial folder.
    pub fn output_file_name(&self) -> String {
        layout::output_file_name(&self.output_extension)
    }

    /// The plan with the encoder's quality option (CRF/CQ) set to `quality`.
    pub fn with_quality(&self, quality: u32) -> EncodePlan {
        let name = self.encoder.profile().quality_option;
        let mut plan = self.clone();
        match plan.encoder_options.iter_mut().find(|(k, _)| k == name) {
            Some((_, value)) => *value = quality.to_string(),
            None => plan.encoder_options.push((name.to_string(), quality.to_string())),
        }
        plan
    }

    /// The quality (CRF/CQ) the plan sets, or the encoder's default.
    pub fn quality(&self) -> u32 {
        let profile = self.encoder.profile();
        self.encoder_option(profile.quality_option).and_then(|q| q.parse().ok()).unwrap_or(profile.quality.default)
    }

    /// The value of one of the encoder's options, if the plan sets it.
    pub fn encoder_option(&self, name: &str) -> Option<&str> {
        self.encoder_options.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The plan this node muxes the segments a node without the share uploaded by
    /// (`RunScope::Mux`): this plan (its paths, the library's stream rules, the container),
    /// with how `node` encoded the video (the encoder, its options and the digest's other
    /// settings), so that the node's segments are this plan's (`digest`). Nothing else of the
    /// node's plan, and none of its paths, is used.
    pub fn to_mux(&self, node: &EncodePlan) -> EncodePlan {
        EncodePlan {
            encoder: node.encoder,
            encoder_options: node.encoder_options.clone(),
            hardware_decode: false,
            bit_depth: node.bit_depth,
            retry_profile: node.retry_profile,
            cautious: node.cautious,
            segment_seconds: node.segment_seconds,
            two_pass: node.two_pass,
            scope: RunScope::Mux,
            ..self.clone()
        }
    }

    /// A digest of what shapes the encoded bits: segments made under another plan cannot
    /// be joined with new ones. Hardware decoding is left out: H.264, HEVC and the other
    /// standard decoders are bit-exact, so a retry that only moves decoding to the CPU
    /// continues the segments the failed attempt finished.
    pub fn digest(&self) -> String {
        let options: Vec<String> = self.encoder_options.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let digest = format!(
            "{}|{}|{}|{}-bit|{}|{}",
            self.target_codec,
            self.encoder,
            options.join(":"),
            self.bit_depth,
            self.segment_seconds,
            self.hdr.as_str()
        );
        // Appended only when set, so the segments of a plan from before the field existed
        // keep their digest and are continued.
        let digest = if self.cautious { digest + "|cautious" } else { digest };
        let digest = if self.two_pass { digest + "|two-pass" } else { digest };
        // The output size shapes every frame: a resume never joins segments of two sizes.
        match self.streams.as_ref().and_then(|s| s.video_size) {
            Some(size) => format!("{digest}|{}x{}", size.width, size.height),
            None => digest,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mux_plan_takes_the_nodes_encode_and_none_of_its_paths() {
        let info = info_with("h264", None);
        let profile = EncodeProfile {
            encoder: Encoder::Libx265,
            hardware_decode: false,
            ten_bit_allowed: true,
            preset: Some("medium".into()),
            quality: 28,
            cautious: false,
            retry_profile: RetryProfile::AsConfigured,
            rate: crate::domain::encoding::RateControl::Crf,
        };
        let library = tempfile::tempdir().unwrap();
        let source = library.path().join("a.mkv");
        std::fs::write(&source, b"source").unwrap();
        let own = EncodePlan::new(&source, &info, &profile).unwrap();
        let node = EncodePlan {
            input: PathBuf::from("/etc/passwd"),
            partial_dir: PathBuf::from("/"),
            encoder_options: vec![("crf".into(), "26".into()), ("preset".into(), "fast".into())],
            cautious: true,
            output_extension: "mp4".into(),
            epoch: "the node's".into(),
            scope: RunScope::Encode,
            ..own.clone()
        };
        let plan = own.to_mux(&node);
        assert_eq!((&plan.input, &plan.partial_dir), (&own.input, &own.partial_dir));
        assert_eq!((&plan.output_extension, &plan.epoch), (&own.output_extension, &own.epoch));
        assert_eq!(plan.digest(), node.digest(), "the node's segments are the plan's");
        assert_ne!(plan.digest(), own.digest());
        assert_eq!(plan.scope, RunScope::Mux);
    }
    use crate::media::info::{DolbyVision, HdrInfo, StreamInfo, StreamKind};

    fn info_with(codec: &str, dolby_vision: Option<DolbyVision>) -> MediaInfo {
        let video = StreamInfo {
            width: Some(1920),
            height: Some(1080),
            frame_rate: Some(24.0),
            pix_fmt: Some("yuv420p10le".into()),
            bit_depth: Some(10),
            color_primaries: Some("bt2020".into()),
            color_transfer: Some("smpte2084".into()),
            color_space: Some("bt2020nc".into()),
            ..StreamInfo::bare(0, StreamKind::Video, codec)
        };
        MediaInfo {
            container: "matroska,webm".into(),
            duration_seconds: Some(10.0),
            size_bytes: 1,
            bit_rate: None,
            chapters: 0,
            streams: vec![video],
            hdr: HdrInfo {
                kind: if dolby_vision.is_some() { HdrKind::DolbyVision } else { HdrKind::Hdr10 },
                dolby_vision,
                hdr10_plus: false,
                mastering_display: None,
                content_light: None,
            },
        }
    }

    fn dv(profile: u8, compat: u8) -> Option<DolbyVision> {
        Some(DolbyVision { profile, level: 6, bl_compatibility_id: compat, rpu_present: true, el_present: false })
    }

    #[test]
    fn dolby_vision_without_a_compatible_base_layer_is_refused() {
        let err = decide(&info_with("hevc", dv(5, 0)), "av1", false).unwrap_err();
        assert_eq!(err.code, FailureCode::UnsupportedCodec);
        assert!(err.message.contains("profile 5"), "{}", err.message);
        // Forcing does not make wrong colours acceptable.
        assert!(decide(&info_with("hevc", dv(5, 0)), "hevc", true).is_err());
        // Profile 8.1 (HDR10 base layer) and 8.4 (HLG) convert.
        assert_eq!(decide(&info_with("hevc", dv(8, 1)), "av1", false).unwrap(), Decision::Encode);
        assert_eq!(decide(&info_with("hevc", dv(8, 4)), "av1", false).unwrap(), Decision::Encode);
        assert!(matches!(decide(&info_with("hevc", dv(8, 1)), "hevc", false).unwrap(), Decision::Skip { .. }));
    }

    #[test]
    fn containers_follow_the_target_codec() {
        assert_eq!(output_extension(Path::new("/a/b.mp4"), "hevc"), "mp4");
        assert_eq!(output_extension(Path::new("/a/b.MOV"), "hevc"), "mov");
        assert_eq!(output_extension(Path::new("/a/b.mov"), "av1"), "mkv");
        assert_eq!(output_extension(Path::new("/a/b.webm"), "hevc"), "mkv");
        assert_eq!(output_extension(Path::new("/a/b.webm"), "av1"), "webm");
        for ext in ["avi", "mpg", "mpeg", "flv", "wmv", "mkv", "ts"] {
            assert_eq!(output_extension(Path::new(&format!("/a/b.{ext}")), "hevc"), "mkv", "{ext}");
        }
        assert_eq!(final_path(Path::new("/a/b.mp4"), "hevc"), Path::new("/a/b.mp4"));
        assert_eq!(final_path(Path::new("/a/b.avi"), "hevc"), Path::new("/a/b.mkv"));
    }

    #[test]
    fn a_container_rule_names_the_output_by_its_extension() {
        assert_eq!(final_path_with(Path::new("/a/b.mkv"), "mp4"), Path::new("/a/b.mp4"));
        assert_eq!(final_path_with(Path::new("/a/b.MKV"), "mkv"), Path::new("/a/b.MKV"));
        assert_eq!(final_paths(Path::new("/a/b.avi"), "hevc"), [Path::new("/a/b.mkv"), Path::new("/a/b.mp4")]);
        assert_eq!(
            final_paths(Path::new("/a/b.m4v"), "hevc"),
            [Path::new("/a/b.m4v"), Path::new("/a/b.mkv"), Path::new("/a/b.mp4")]
        );
    }

    /// The names of the plan's fields that differ between `a` and `b`.
    fn changed(a: &EncodePlan, b: &EncodePlan) -> Vec<String> {
        let (a, b) = (serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap());
        let mut names: Vec<String> = a
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, v)| *k != "retryProfile" && b[k.as_str()] != **v)
            .map(|(k, _)| k.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn each_rung_of_the_retry_ladder_changes_the_plan_as_it_says() {
        use crate::domain::encoding::{profile_for_attempt, EncodeSettings};
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.mkv");
        std::fs::write(&input, b"source").unwrap();
        let mut sdr_ten_bit = info_with("h264", None);
        sdr_ten_bit.hdr.kind = HdrKind::Sdr;
        let hdr_ten_bit = info_with("h264", None);
        let plans = |info: &MediaInfo, encoder: Encoder, preset: &str| -> Vec<EncodePlan> {
            let hdr = info.hdr.kind != HdrKind::Sdr;
            let settings = EncodeSettings::for_library(encoder.codec(), Some(encoder), Some(preset), Some(22), hdr);
            (0..4).map(|n| EncodePlan::new(&input, info, &profile_for_attempt(&settings, n)).unwrap()).collect()
        };
        let opts = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };

        // (source, requested encoder and preset, per rung after the first: the fields it changes)
        let table: [(&MediaInfo, Encoder, &str, [&[&str]; 3]); 5] = [
            // A hardware encoder: decoding moves to the CPU, then the encoder, then 10-bit goes.
            (
                &sdr_ten_bit,
                Encoder::HevcNvenc,
                "p7",
                [&["hardwareDecode"], &["encoder", "encoderOptions"], &["bitDepth"]],
            ),
            // A CPU encoder already decodes in software: the first retry takes a faster
            // preset, the second goes 8-bit and cautious, the last a faster preset again.
            (
                &sdr_ten_bit,
                Encoder::Libx265,
                "slow",
                [&["encoderOptions"], &["bitDepth", "cautious"], &["encoderOptions"]],
            ),
            // HDR stays 10-bit on every rung.
            (&hdr_ten_bit, Encoder::Libx265, "slow", [&["encoderOptions"], &["cautious"], &["encoderOptions"]]),
            (
                &sdr_ten_bit,
                Encoder::Libsvtav1,
                "10",
                [&["encoderOptions"], &["bitDepth", "cautious"], &["encoderOptions"]],
            ),
            // libaom hands over to SVT-AV1 on the cautious rung.
            (
                &sdr_ten_bit,
                Encoder::LibaomAv1,
                "4",
                [&["encoderOptions"], &["bitDepth", "cautious", "encoder", "encoderOptions"], &["encoderOptions"]],
            ),
        ];
        for (info, encoder, preset, expected) in table {
            let plans = plans(info, encoder, preset);
            let what = format!("{encoder} {preset} {}", info.hdr.kind.as_str());
            for (rung, fields) in expected.iter().enumerate() {
                assert_eq!(changed(&plans[rung], &plans[rung + 1]), *fields, "{what}: rung {}", rung + 1);
                // Only what changes the encoded bits changes the digest.
                let bits_changed = fields.iter().any(|f| *f != "hardwareDecode");
                assert_eq!(plans[rung].digest() != plans[rung + 1].digest(), bits_changed, "{what}: rung {}", rung + 1);
            }
            assert_eq!(plans[0].bit_depth, 10, "{what}");
        }

        let nvenc = plans(&sdr_ten_bit, Encoder::HevcNvenc, "p7");
        assert_eq!((nvenc[0].encoder, nvenc[0].hardware_decode), (Encoder::HevcNvenc, true));
        assert_eq!(nvenc[0].encoder_options, opts(&[("rc", "vbr"), ("cq", "22"), ("preset", "p7")]));
        assert!(!nvenc[1].hardware_decode);
        assert_eq!((nvenc[2].encoder, nvenc[2].bit_depth), (Encoder::Libx265, 10));
        assert_eq!(nvenc[2].encoder_options, opts(&[("crf", "22"), ("preset", "medium")]));
        assert_eq!(nvenc[3].bit_depth, 8);
        assert_eq!(nvenc[3].encoder_option("crf"), Some("22"));
        let x265 = plans(&sdr_ten_bit, Encoder::Libx265, "slow");
        let presets: Vec<Option<&str>> = x265.iter().map(|p| p.encoder_option("preset")).collect();
        assert_eq!(presets, [Some("slow"), Some("medium"), Some("medium"), Some("fast")]);
        let bits: Vec<(u8, bool)> = x265.iter().map(|p| (p.bit_depth, p.cautious)).collect();
        assert_eq!(bits, [(10, false), (10, false), (8, true), (8, true)]);
        // SVT-AV1's numbers run the other way: higher is faster.
        let svt = plans(&sdr_ten_bit, Encoder::Libsvtav1, "10");
        let presets: Vec<Option<&str>> = svt.iter().map(|p| p.encoder_option("preset")).collect();
        assert_eq!(presets, [Some("10"), Some("11"), Some("11"), Some("12")]);
        let aom = plans(&sdr_ten_bit, Encoder::LibaomAv1, "4");
        assert_eq!((aom[1].encoder, aom[1].encoder_option("cpu-used")), (Encoder::LibaomAv1, Some("5")));
        assert_eq!((aom[2].encoder, aom[2].encoder_option("preset")), (Encoder::Libsvtav1, Some("8")));
    }

    #[test]
    fn an_eight_bit_source_stays_eight_bit_and_the_plan_survives_json() {
        use crate::domain::encoding::{profile_for_attempt, EncodeSettings, TargetCodec};
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.mp4");
        std::fs::write(&input, b"source").unwrap();
        let mut info = info_with("h264", None);
        info.streams[0].bit_depth = Some(8);
        info.hdr.kind = HdrKind::Sdr;
        let settings =
            EncodeSettings::for_library(TargetCodec::Av1, Some(Encoder::LibaomAv1), Some("4"), Some(40), false);
        let plan = EncodePlan::new(&input, &info, &profile_for_attempt(&settings, 0)).unwrap();
        assert_eq!((plan.target_codec.as_str(), plan.bit_depth, plan.hardware_decode), ("av1", 8, false));
        assert_eq!(plan.encoder_option("cpu-used"), Some("4"));
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains("\"encoder\":\"libaom-av1\""), "{json}");
        assert_eq!(serde_json::from_str::<EncodePlan>(&json).unwrap(), plan);
        // A cautious plan says so, and one from a node that predates the field parses as
        // not cautious, with the digest it had then.
        let cautious = EncodePlan::new(&input, &info, &profile_for_attempt(&settings, 2)).unwrap();
        assert!(cautious.cautious);
        let json = serde_json::to_value(&cautious).unwrap();
        assert_eq!(json["cautious"], serde_json::json!(true));
        assert_eq!(serde_json::from_value::<EncodePlan>(json.clone()).unwrap(), cautious);
        let mut older = json;
        older.as_object_mut().unwrap().remove("cautious");
        let older: EncodePlan = serde_json::from_value(older).unwrap();
        assert_eq!(older, EncodePlan { cautious: false, ..cautious.clone() });
        assert!(!older.digest().contains("cautious") && cautious.digest().ends_with("|cautious"));
        // A plan that scales the video names the size; one that does not keeps its digest.
        let mut scaled = cautious.clone();
        let mut streams = crate::media::stream_plan::plan_streams(&info, &Default::default(), "mkv");
        scaled.streams = Some(streams.clone());
        assert_eq!(scaled.digest(), cautious.digest());
        streams.video_size = Some(crate::media::stream_plan::VideoSize { width: 1280, height: 720 });
        scaled.streams = Some(streams);
        assert_eq!(scaled.digest(), format!("{}|1280x720", cautious.digest()));
    }

    #[test]
    fn hdr10plus_is_kept_by_every_hevc_encoder_and_becomes_hdr10_elsewhere() {
        use crate::domain::encoding::{profile_for_attempt, EncodeSettings, TargetCodec};
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.mkv");
        std::fs::write(&input, b"source").unwrap();
        let mut info = info_with("hevc", None);
        info.hdr.kind = HdrKind::Hdr10Plus;
        info.hdr.hdr10_plus = true;
        for encoder in
            [TargetCodec::Hevc, TargetCodec::Av1].into_iter().flat_map(TargetCodec::encoders).map(|p| p.encoder)
        {
            let codec = encoder.codec();
            let settings = EncodeSettings::for_library(codec, Some(encoder), None, None, true);
            let plan = EncodePlan::new(&input, &info, &profile_for_attempt(&settings, 0)).unwrap();
            let want = if codec == TargetCodec::Hevc { HdrKind::Hdr10Plus } else { HdrKind::Hdr10 };
            assert_eq!(plan.hdr, want, "{encoder}");
        }
    }
}
