//! The one table of what condense encodes with: target codecs, the encoders that produce
//! them (their presets, quality scales, defaults and fixed options), and the retry ladder
//! that each automatic retry climbs. The library API validates against it, the job
//! supervisor plans from it, nodes detect encoders from it and `GET /encoders` serves it
//! to the dashboard; nothing else repeats it.
//!
//! Defaults: CRF 28 for HEVC and 35 for AV1, the encoders' own defaults (x265's `crf` and
//! SVT-AV1's `crf`), which keep visible quality on typical film and TV sources while
//! saving storage; a lower number keeps more detail in larger files.

use serde::Serialize;

use super::named_enum;
pub use super::rate::{
    RateControl, RateControlMode, TwoPassKind, TwoPassRange, TARGET_BITRATE_KBPS_MAX, TARGET_BITRATE_KBPS_MIN,
};

named_enum!(
    /// The codec a library re-encodes to.
    TargetCodec, "target codec" {
        Hevc => "hevc",
        Av1 => "av1",
    }
);

named_enum!(
    /// The encoders condense drives, named as FFmpeg names them.
    Encoder, "encoder" {
        Libx265 => "libx265",
        HevcNvenc => "hevc_nvenc",
        HevcQsv => "hevc_qsv",
        HevcVaapi => "hevc_vaapi",
        Libsvtav1 => "libsvtav1",
        LibaomAv1 => "libaom-av1",
        Av1Nvenc => "av1_nvenc",
        Av1Qsv => "av1_qsv",
        Av1Vaapi => "av1_vaapi",
    }
);

named_enum!(
    /// Where an encoder runs, and so which hardware decoder can feed it.
    Hardware, "hardware" {
        Cpu => "cpu",
        Nvidia => "nvidia",
        IntelQsv => "intel_qsv",
        Vaapi => "vaapi",
    }
);

/// A CRF or constant-quality scale: lower keeps more detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QualityRange {
    pub min: u32,
    pub max: u32,
    pub default: u32,
}

impl QualityRange {
    pub fn contains(self, quality: u32) -> bool {
        (self.min..=self.max).contains(&quality)
    }

    pub fn clamp(self, quality: u32) -> u32 {
        quality.clamp(self.min, self.max)
    }

    /// `quality` on this scale, carried to `other` at the same relative place: the hardware
    /// AV1 encoders count on scales of their own, and a retry on the CPU encoder should keep
    /// about the quality asked for, not a clamped end of its scale.
    pub fn carry_to(self, quality: u32, other: QualityRange) -> u32 {
        if (self.min, self.max) == (other.min, other.max) {
            return other.clamp(quality);
        }
        let span = u64::from(self.max.saturating_sub(self.min)).max(1);
        let offset = u64::from(self.clamp(quality) - self.min);
        let other_span = u64::from(other.max - other.min);
        let carried = (offset * other_span + span / 2) / span;
        other.clamp(other.min.saturating_add(u32::try_from(carried).unwrap_or(u32::MAX)))
    }
}

/// Everything condense knows about one encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderProfile {
    pub encoder: Encoder,
    pub codec: TargetCodec,
    /// For people: what the encoder is and what it runs on.
    pub label: &'static str,
    pub hardware: Hardware,
    /// The presets it takes, in the order `preset_order` says; empty: it takes none.
    pub presets: &'static [&'static str],
    /// Which way `presets` runs. Said here for each encoder, never guessed from the list: a
    /// retry steps to a faster preset, and the names do not say which way that is.
    pub preset_order: PresetOrder,
    /// Each encoder's own middle ground; `None` when it takes no preset.
    pub default_preset: Option<&'static str>,
    /// The FFmpeg option the preset goes into (libaom-av1 calls it `cpu-used`).
    pub preset_option: &'static str,
    pub quality: QualityRange,
    /// The FFmpeg option the quality goes into (CRF, CQ, global quality or QP).
    pub quality_option: &'static str,
    /// Options set on every encode: constant-quality rate control where the encoder would
    /// otherwise target a bitrate, row multithreading for libaom.
    pub options: &'static [(&'static str, &'static str)],
    /// Whether it writes 10-bit output (Main 10 / AV1 10-bit).
    pub ten_bit: bool,
    /// How it runs a library's `twoPass` rate control; `None`: it cannot (see
    /// `rate_control`).
    pub two_pass: Option<TwoPassKind>,
}

/// Which way an encoder's list of presets runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresetOrder {
    /// Fastest first: x265's names (`ultrafast` … `veryslow`), NVENC's `p1` … `p7`, Quick
    /// Sync's `veryfast` … `veryslow`.
    FastestFirst,
    /// Slowest first: numbers that mean faster when higher (SVT-AV1's preset 0 … 13,
    /// libaom's `cpu-used` 0 … 8).
    SlowestFirst,
}

const X265_PRESETS: &[&str] =
    &["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"];
const HEVC_QUALITY: QualityRange = QualityRange { min: 0, max: 51, default: 28 };
const AV1_QUALITY: QualityRange = QualityRange { min: 0, max: 63, default: 35 };

/// The table, in the order encoders are offered (per codec: the CPU encoder first).
pub const ENCODERS: &[EncoderProfile] =
    &[LIBX265, HEVC_NVENC, HEVC_QSV, HEVC_VAAPI, LIBSVTAV1, LIBAOM_AV1, AV1_NVENC, AV1_QSV, AV1_VAAPI];

const LIBX265: EncoderProfile = EncoderProfile {
    encoder: Encoder::Libx265,
    codec: TargetCodec::Hevc,
    label: "libx265 (CPU)",
    hardware: Hardware::Cpu,
    presets: X265_PRESETS,
    preset_order: PresetOrder::FastestFirst,
    default_preset: Some("medium"),
    preset_option: "preset",
    quality: HEVC_QUALITY,
    quality_option: "crf",
    options: &[],
    ten_bit: true,
    two_pass: Some(TwoPassKind::Stats),
};

const HEVC_NVENC: EncoderProfile = EncoderProfile {
    encoder: Encoder::HevcNvenc,
    codec: TargetCodec::Hevc,
    label: "hevc_nvenc (NVIDIA)",
    hardware: Hardware::Nvidia,
    presets: &["p1", "p2", "p3", "p4", "p5", "p6", "p7"],
    preset_order: PresetOrder::FastestFirst,
    default_preset: Some("p5"),
    preset_option: "preset",
    quality: HEVC_QUALITY,
    quality_option: "cq",
    options: &[("rc", "vbr")],
    ten_bit: true,
    two_pass: Some(TwoPassKind::Multipass),
};

const HEVC_QSV: EncoderProfile = EncoderProfile {
    encoder: Encoder::HevcQsv,
    codec: TargetCodec::Hevc,
    label: "hevc_qsv (Intel Quick Sync)",
    hardware: Hardware::IntelQsv,
    presets: &["veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"],
    preset_order: PresetOrder::FastestFirst,
    default_preset: Some("medium"),
    preset_option: "preset",
    quality: HEVC_QUALITY,
    quality_option: "global_quality",
    options: &[],
    ten_bit: true,
    two_pass: None,
};

const HEVC_VAAPI: EncoderProfile = EncoderProfile {
    encoder: Encoder::HevcVaapi,
    codec: TargetCodec::Hevc,
    label: "hevc_vaapi (VAAPI: AMD, Intel)",
    hardware: Hardware::Vaapi,
    presets: &[],
    preset_order: PresetOrder::FastestFirst,
    default_preset: None,
    preset_option: "",
    quality: HEVC_QUALITY,
    quality_option: "qp",
    options: &[],
    ten_bit: true,
    two_pass: None,
};

const LIBSVTAV1: EncoderProfile = EncoderProfile {
    encoder: Encoder::Libsvtav1,
    codec: TargetCodec::Av1,
    label: "libsvtav1 (CPU)",
    hardware: Hardware::Cpu,
    presets: &["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13"],
    preset_order: PresetOrder::SlowestFirst,
    default_preset: Some("8"),
    preset_option: "preset",
    quality: AV1_QUALITY,
    quality_option: "crf",
    options: &[],
    ten_bit: true,
    two_pass: None,
};

const LIBAOM_AV1: EncoderProfile = EncoderProfile {
    encoder: Encoder::LibaomAv1,
    codec: TargetCodec::Av1,
    label: "libaom-av1 (CPU)",
    hardware: Hardware::Cpu,
    presets: &["0", "1", "2", "3", "4", "5", "6", "7", "8"],
    preset_order: PresetOrder::SlowestFirst,
    default_preset: Some("6"),
    preset_option: "cpu-used",
    quality: AV1_QUALITY,
    quality_option: "crf",
    // b=0 makes crf a constant-quality target instead of a bitrate cap.
    options: &[("row-mt", "1"), ("b", "0")],
    ten_bit: true,
    two_pass: None,
};

// The hardware AV1 encoders take their HEVC siblings' options: NVENC's constant quality
// (`cq`, 0-51 on every codec) under VBR, Quick Sync's ICQ (`global_quality`, 1-51), and
// VAAPI's constant QP, which for AV1 is a quantizer index of 0-255. Their defaults sit where
// the same encoder's HEVC default lands on its scale (HEVC's 28 of 51 is about 140 of 255).
// All three write 10-bit AV1 (Main profile) from P010 pictures.
const AV1_NVENC: EncoderProfile = EncoderProfile {
    encoder: Encoder::Av1Nvenc,
    codec: TargetCodec::Av1,
    label: "av1_nvenc (NVIDIA, RTX 40 and later)",
    hardware: Hardware::Nvidia,
    presets: &["p1", "p2", "p3", "p4", "p5", "p6", "p7"],
    preset_order: PresetOrder::FastestFirst,
    default_preset: Some("p5"),
    preset_option: "preset",
    quality: QualityRange { min: 0, max: 51, default: 30 },
    quality_option: "cq",
    options: &[("rc", "vbr")],
    ten_bit: true,
    two_pass: None,
};

const AV1_QSV: EncoderProfile = EncoderProfile {
    encoder: Encoder::Av1Qsv,
    codec: TargetCodec::Av1,
    label: "av1_qsv (Intel Quick Sync, Arc and later)",
    hardware: Hardware::IntelQsv,
    presets: &["veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"],
    preset_order: PresetOrder::FastestFirst,
    default_preset: Some("medium"),
    preset_option: "preset",
    quality: QualityRange { min: 1, max: 51, default: 30 },
    quality_option: "global_quality",
    options: &[],
    ten_bit: true,
    two_pass: None,
};

const AV1_VAAPI: EncoderProfile = EncoderProfile {
    encoder: Encoder::Av1Vaapi,
    codec: TargetCodec::Av1,
    label: "av1_vaapi (VAAPI: AMD RDNA3, Intel Arc)",
    hardware: Hardware::Vaapi,
    presets: &[],
    preset_order: PresetOrder::FastestFirst,
    default_preset: None,
    preset_option: "",
    quality: QualityRange { min: 0, max: 255, default: 140 },
    quality_option: "qp",
    options: &[],
    ten_bit: true,
    two_pass: None,
};

impl TargetCodec {
    /// For people, as the dashboard names it.
    pub fn label(self) -> &'static str {
        match self {
            TargetCodec::Hevc => "HEVC (H.265)",
            TargetCodec::Av1 => "AV1",
        }
    }

    /// The encoder a library of this codec gets when it names none: the sturdy CPU one.
    pub fn default_encoder(self) -> Encoder {
        match self {
            TargetCodec::Hevc => Encoder::Libx265,
            TargetCodec::Av1 => Encoder::Libsvtav1,
        }
    }

    /// The encoders that produce this codec, in the table's order.
    pub fn encoders(self) -> impl Iterator<Item = &'static EncoderProfile> {
        ENCODERS.iter().filter(move |p| p.codec == self)
    }
}

/// How an encoder takes its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameInput {
    /// Pictures in system memory (the CPU encoders; NVENC uploads them itself).
    System,
    /// Pictures on the device (Quick Sync, VAAPI): the transcoder converts each decoded
    /// picture to `upload_format` and uploads it into a frames pool on the device.
    Device { hardware: Hardware, upload_format: &'static str },
}

impl Hardware {
    /// Why an encoder on this hardware is not offered when no node that is up runs it.
    pub fn missing(self) -> &'static str {
        match self {
            Hardware::Cpu => "this build of FFmpeg does not have it",
            Hardware::Nvidia => "it needs an NVIDIA GPU whose driver opens NVENC",
            Hardware::IntelQsv => "it needs an Intel GPU with Quick Sync (oneVPL or Media SDK runtime)",
            Hardware::Vaapi => "it needs a VAAPI device (an AMD or Intel GPU under /dev/dri with its VA driver)",
        }
    }
}

impl EncoderProfile {
    /// Where `preset` stands by speed: 0 is the slowest. `None`: not one of its presets.
    fn speed_rank(&self, preset: &str) -> Option<usize> {
        let at = self.presets.iter().position(|p| *p == preset)?;
        Some(match self.preset_order {
            PresetOrder::FastestFirst => self.presets.len().saturating_sub(1).saturating_sub(at),
            PresetOrder::SlowestFirst => at,
        })
    }

    /// The preset of speed rank `rank` (0 the slowest), or the fastest past the end.
    fn preset_of_rank(&self, rank: usize) -> Option<&'static str> {
        let last = self.presets.len().checked_sub(1)?;
        let rank = rank.min(last);
        let at = match self.preset_order {
            PresetOrder::FastestFirst => last - rank,
            PresetOrder::SlowestFirst => rank,
        };
        self.presets.get(at).copied()
    }

    /// The preset `steps` faster than `preset`, stopping at the fastest. `None`: the
    /// encoder does not take `preset` (or takes no preset at all).
    pub fn faster_preset(&self, preset: &str, steps: usize) -> Option<&'static str> {
        self.preset_of_rank(self.speed_rank(preset)?.saturating_add(steps))
    }

    /// The faster of two of its presets (`a` where either is not one of them).
    fn faster_of<'a>(&self, a: &'a str, b: &'a str) -> &'a str {
        match (self.speed_rank(a), self.speed_rank(b)) {
            (Some(ra), Some(rb)) if rb > ra => b,
            _ => a,
        }
    }

    /// What the cautious rungs of the retry ladder turn off in this encoder, for people
    /// (the job's history). `media::encoder_options` carries them out, and
    /// docs/how-it-works.md says why these.
    pub fn cautious_changes(&self) -> &'static [&'static str] {
        match self.encoder {
            Encoder::Libx265 => &["4:2:0 chroma", "no hdr10-opt"],
            Encoder::Libsvtav1 => &["4:2:0 chroma", "no film grain", "no temporal filtering"],
            Encoder::LibaomAv1 => &["4:2:0 chroma"],
            Encoder::HevcNvenc
            | Encoder::HevcQsv
            | Encoder::HevcVaapi
            | Encoder::Av1Nvenc
            | Encoder::Av1Qsv
            | Encoder::Av1Vaapi => &[],
        }
    }

    /// How this encoder takes frames of a `bit_depth`-bit output: Quick Sync and VAAPI
    /// encode pictures on their device, NV12 for 8 bits and P010 for 10, the formats both
    /// take for HEVC Main and Main 10.
    pub fn frame_input(&self, bit_depth: u8) -> FrameInput {
        match self.hardware {
            Hardware::IntelQsv | Hardware::Vaapi => FrameInput::Device {
                hardware: self.hardware,
                upload_format: if bit_depth > 8 { "p010le" } else { "nv12" },
            },
            Hardware::Cpu | Hardware::Nvidia => FrameInput::System,
        }
    }
}

impl Encoder {
    pub fn profile(self) -> &'static EncoderProfile {
        match self {
            Encoder::Libx265 => &LIBX265,
            Encoder::HevcNvenc => &HEVC_NVENC,
            Encoder::HevcQsv => &HEVC_QSV,
            Encoder::HevcVaapi => &HEVC_VAAPI,
            Encoder::Libsvtav1 => &LIBSVTAV1,
            Encoder::LibaomAv1 => &LIBAOM_AV1,
            Encoder::Av1Nvenc => &AV1_NVENC,
            Encoder::Av1Qsv => &AV1_QSV,
            Encoder::Av1Vaapi => &AV1_VAAPI,
        }
    }

    /// Runs on a GPU or a media engine rather than the CPU.
    pub fn is_hardware(self) -> bool {
        self.profile().hardware != Hardware::Cpu
    }

    pub fn codec(self) -> TargetCodec {
        self.profile().codec
    }

    /// The CPU encoder to fall back to for the same codec. libaom-av1 runs on the CPU too,
    /// but SVT-AV1 is the sturdier and much faster of the two.
    pub fn cpu_fallback(self) -> Encoder {
        self.codec().default_encoder()
    }

    /// The preset this encoder uses when none fits: its default, or none at all.
    pub fn default_preset(self) -> Option<&'static str> {
        self.profile().default_preset
    }

    /// Whether the encoder takes this preset. An encoder without presets takes none.
    pub fn takes_preset(self, preset: &str) -> bool {
        self.profile().presets.contains(&preset)
    }
}

/// What a library asks for, plus what analysis found out about the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeSettings {
    pub encoder: Encoder,
    /// Decode on the encoder's hardware (the first attempt does where it has hardware).
    pub hardware_decode: bool,
    /// 10-bit sources may stay 10-bit.
    pub ten_bit_allowed: bool,
    /// `None`: the encoder takes no preset.
    pub preset: Option<String>,
    /// CRF or constant quality, on the encoder's scale.
    pub quality: u32,
    /// The source is 10-bit HDR, which must stay 10-bit to stay HDR.
    pub source_is_ten_bit_hdr: bool,
    /// The library's rate control (`for_library` gives CRF; the caller sets two passes).
    pub rate: RateControl,
}

impl EncodeSettings {
    /// The settings of a library for `codec`: its encoder, preset and quality, each
    /// replaced by the table's default where it no longer fits (a job queued for another
    /// codec than the library's encoder now makes, a preset the encoder does not take, a
    /// quality outside its scale). Hardware encoders decode on their hardware too.
    pub fn for_library(
        codec: TargetCodec,
        encoder: Option<Encoder>,
        preset: Option<&str>,
        quality: Option<i64>,
        source_is_ten_bit_hdr: bool,
    ) -> EncodeSettings {
        let encoder = encoder.filter(|e| e.codec() == codec).unwrap_or_else(|| codec.default_encoder());
        let profile = encoder.profile();
        let preset = match preset {
            Some(p) if encoder.takes_preset(p) => Some(p.to_string()),
            _ => profile.default_preset.map(str::to_string),
        };
        let quality = quality
            .and_then(|q| u32::try_from(q).ok())
            .filter(|q| profile.quality.contains(*q))
            .unwrap_or(profile.quality.default);
        EncodeSettings {
            encoder,
            hardware_decode: encoder.is_hardware(),
            ten_bit_allowed: true,
            preset,
            quality,
            source_is_ten_bit_hdr,
            rate: RateControl::Crf,
        }
    }
}

impl EncoderProfile {
    /// The bitrates of a two-pass library of this encoder; none where it runs no two passes.
    pub fn two_pass_range(&self) -> Option<TwoPassRange> {
        self.two_pass.map(|_| TwoPassRange { min_kbps: TARGET_BITRATE_KBPS_MIN, max_kbps: TARGET_BITRATE_KBPS_MAX })
    }
}

/// Why a library's rate control is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateControlError {
    #[error("targetBitrateKbps is required when rateControl is twoPass")]
    MissingBitrate,
    #[error("targetBitrateKbps must be {min} to {max}, not {0}", min = TARGET_BITRATE_KBPS_MIN, max = TARGET_BITRATE_KBPS_MAX)]
    BitrateOutOfRange(i64),
    #[error(
        "rateControl twoPass is not offered for {0}: two passes run on libx265 (statistics of a first pass) and \
         hevc_nvenc (NVENC's multipass); FFmpeg 5.1's libsvtav1 and the other encoders have no two-pass mode here"
    )]
    NotOffered(Encoder),
    #[error("rateControl twoPass targets a bitrate and qualityMode vmaf searches a CRF: choose one (qualityMode crf)")]
    WithVmaf,
}

/// A library's rate control as it would be stored: `twoPass` needs a bitrate within the
/// bounds, an encoder that runs two passes, and the CRF quality mode (the VMAF search
/// chooses a CRF). `crf` keeps whatever bitrate was given (it is used once `twoPass` is
/// chosen again).
pub fn rate_control(
    mode: RateControlMode,
    bitrate_kbps: Option<i64>,
    encoder: Encoder,
    vmaf_mode: bool,
) -> Result<RateControl, RateControlError> {
    let bitrate = match bitrate_kbps {
        Some(kbps) => Some(
            u32::try_from(kbps)
                .ok()
                .filter(|k| (TARGET_BITRATE_KBPS_MIN..=TARGET_BITRATE_KBPS_MAX).contains(k))
                .ok_or(RateControlError::BitrateOutOfRange(kbps))?,
        ),
        None => None,
    };
    match mode {
        RateControlMode::Crf => Ok(RateControl::Crf),
        RateControlMode::TwoPass => {
            let bitrate_kbps = bitrate.ok_or(RateControlError::MissingBitrate)?;
            if encoder.profile().two_pass.is_none() {
                return Err(RateControlError::NotOffered(encoder));
            }
            if vmaf_mode {
                return Err(RateControlError::WithVmaf);
            }
            Ok(RateControl::TwoPass { bitrate_kbps })
        }
    }
}

/// What one attempt actually runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeProfile {
    pub encoder: Encoder,
    pub hardware_decode: bool,
    pub ten_bit_allowed: bool,
    pub preset: Option<String>,
    pub quality: u32,
    /// Turn off the encoder's features most often behind its failures and encode 4:2:0
    /// (`EncoderProfile::cautious_changes`): the CPU ladder's last rungs.
    pub cautious: bool,
    /// The rung this profile came from, for logs and the job's history.
    pub retry_profile: RetryProfile,
    /// CRF, or two passes to a bitrate; every rung keeps it (the CPU fallback of a
    /// two-pass hardware encoder, libx265, runs two passes too).
    pub rate: RateControl,
}

impl EncodeProfile {
    /// Whether the transcoder runs the video twice: a first pass writing statistics, then
    /// the encode by them. NVENC's multipass happens inside one encode.
    pub fn runs_two_passes(&self) -> bool {
        matches!(self.rate, RateControl::TwoPass { .. }) && self.encoder.profile().two_pass == Some(TwoPassKind::Stats)
    }

    /// The encoder's FFmpeg options for this profile: its fixed options, then quality and
    /// preset under the names the encoder gives them. HDR metadata is added by the
    /// transcoder, which reads it from the source.
    pub fn options(&self) -> Vec<(String, String)> {
        let profile = self.encoder.profile();
        let mut options: Vec<(String, String)> =
            profile.options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        match self.rate {
            RateControl::Crf => options.push((profile.quality_option.to_string(), self.quality.to_string())),
            // No CRF/CQ: FFmpeg's libx265 takes the bitrate (`b`) only without one, and
            // NVENC's VBR with a CQ would aim at the quality instead.
            RateControl::TwoPass { bitrate_kbps } => {
                options.push(("b".to_string(), format!("{bitrate_kbps}k")));
                if profile.two_pass == Some(TwoPassKind::Multipass) {
                    options.push(("multipass".to_string(), "fullres".to_string()));
                }
            }
        }
        if let Some(preset) = &self.preset {
            if !profile.preset_option.is_empty() {
                options.push((profile.preset_option.to_string(), preset.clone()));
            }
        }
        options
    }
}

named_enum!(
    /// The rungs of the retry ladder, one per automatic retry; each keeps what the rung below gave up.
    RetryProfile, "retry profile" {
        AsConfigured => "as_configured",
        SoftwareDecode => "software_decode",
        CpuEncoder => "cpu_encoder",
        Conservative => "conservative",
    }
);

impl RetryProfile {
    /// Counters past the last rung stay on it.
    pub fn for_retry_count(retry_count: u32) -> RetryProfile {
        match retry_count {
            0 => RetryProfile::AsConfigured,
            1 => RetryProfile::SoftwareDecode,
            2 => RetryProfile::CpuEncoder,
            _ => RetryProfile::Conservative,
        }
    }

    /// The rung's place on the ladder: 0 for the first attempt.
    pub fn rung(self) -> u32 {
        match self {
            RetryProfile::AsConfigured => 0,
            RetryProfile::SoftwareDecode => 1,
            RetryProfile::CpuEncoder => 2,
            RetryProfile::Conservative => 3,
        }
    }

    /// Whether the attempt runs one encoder session (one decoder from the first frame,
    /// cuts by frame count, no spans for helpers): every retry does, the conservative
    /// path for a source whose index or seeking misled the first attempt.
    pub fn one_session(self) -> bool {
        self != RetryProfile::AsConfigured
    }

    /// What this rung runs for `requested`. A hardware encoder's ladder moves decoding to
    /// the CPU, then encoding, then gives up 10 bits; a CPU encoder already decodes and
    /// encodes there, so its rungs change the preset and the features instead.
    pub fn apply(self, requested: &EncodeSettings) -> EncodeProfile {
        let as_configured = EncodeProfile {
            encoder: requested.encoder,
            hardware_decode: requested.hardware_decode,
            ten_bit_allowed: requested.ten_bit_allowed,
            preset: requested.preset.clone(),
            quality: requested.quality,
            cautious: false,
            retry_profile: self,
            rate: requested.rate,
        };
        if requested.encoder.is_hardware() {
            self.on_hardware(requested, as_configured)
        } else {
            self.on_cpu(requested, as_configured)
        }
    }

    fn on_hardware(self, requested: &EncodeSettings, as_configured: EncodeProfile) -> EncodeProfile {
        let cpu_encoder = requested.encoder.cpu_fallback();
        let cpu_quality =
            requested.encoder.profile().quality.carry_to(requested.quality, cpu_encoder.profile().quality);
        // A hardware encoder's preset means nothing to a CPU encoder.
        let cpu_default_preset = cpu_encoder.default_preset().map(str::to_string);
        match self {
            RetryProfile::AsConfigured => as_configured,
            // Hardware decoders reject more damaged or unusual streams than FFmpeg's own.
            RetryProfile::SoftwareDecode => EncodeProfile { hardware_decode: false, ..as_configured },
            RetryProfile::CpuEncoder => EncodeProfile {
                encoder: cpu_encoder,
                hardware_decode: false,
                preset: cpu_default_preset,
                quality: cpu_quality,
                ..as_configured
            },
            // The encoder's own middle ground, and 8-bit unless HDR needs 10.
            RetryProfile::Conservative => EncodeProfile {
                encoder: cpu_encoder,
                hardware_decode: false,
                ten_bit_allowed: requested.source_is_ten_bit_hdr,
                preset: cpu_default_preset,
                quality: cpu_quality,
                ..as_configured
            },
        }
    }

    /// The CPU encoders' ladder. Rung 1: one preset faster (less time and memory per frame,
    /// for a failure that was a time limit or the memory limit) in one session. Rung 2:
    /// also 8-bit unless the source is HDR, 4:2:0, and the encoder's riskier features off;
    /// libaom hands over to SVT-AV1 here, its sturdier sibling. Rung 3: one preset faster
    /// again, and never slower than the encoder's default.
    fn on_cpu(self, requested: &EncodeSettings, as_configured: EncodeProfile) -> EncodeProfile {
        let encoder = requested.encoder;
        let cpu_encoder = encoder.cpu_fallback();
        let table = cpu_encoder.profile();
        let faster = |preset: Option<&str>, steps: usize| -> Option<String> {
            let preset = preset?;
            Some(table.faster_preset(preset, steps).unwrap_or(preset).to_string())
        };
        // On the same encoder the rungs step from the library's preset; on another (libaom
        // to SVT-AV1) from that encoder's default.
        let cautious_preset = if cpu_encoder == encoder {
            faster(requested.preset.as_deref(), 1)
        } else {
            cpu_encoder.default_preset().map(str::to_string)
        };
        let cautious = EncodeProfile {
            encoder: cpu_encoder,
            hardware_decode: false,
            ten_bit_allowed: requested.source_is_ten_bit_hdr,
            preset: cautious_preset.clone(),
            quality: encoder.profile().quality.carry_to(requested.quality, table.quality),
            cautious: true,
            ..as_configured.clone()
        };
        match self {
            RetryProfile::AsConfigured => as_configured,
            RetryProfile::SoftwareDecode => {
                let preset =
                    requested.preset.as_deref().map(|p| encoder.profile().faster_preset(p, 1).unwrap_or(p).to_string());
                EncodeProfile { hardware_decode: false, preset, ..as_configured }
            }
            RetryProfile::CpuEncoder => cautious,
            RetryProfile::Conservative => {
                let preset = faster(cautious_preset.as_deref(), 1).map(|p| match table.default_preset {
                    Some(default) => table.faster_of(&p, default).to_string(),
                    None => p,
                });
                EncodeProfile { preset, ..cautious }
            }
        }
    }

    /// What this rung runs for `requested`, and what it changed from the first attempt's
    /// settings, as the job's history records it.
    pub fn record(self, requested: &EncodeSettings) -> RungRecord {
        let first = RetryProfile::AsConfigured.apply(requested);
        let this = self.apply(requested);
        let mut changes = Vec::new();
        if this.encoder != first.encoder {
            changes.push(format!("encoder {} instead of {}", this.encoder, first.encoder));
        }
        if first.hardware_decode && !this.hardware_decode {
            changes.push("decoding on the CPU".to_string());
        }
        if this.preset != first.preset {
            match (&this.preset, &first.preset) {
                (Some(now), Some(was)) => changes.push(format!("preset {now} instead of {was}")),
                (Some(now), None) => changes.push(format!("preset {now}")),
                (None, _) => changes.push("no preset".to_string()),
            }
        }
        if this.quality != first.quality {
            changes.push(format!("quality {} on {}'s scale", this.quality, this.encoder));
        }
        if first.ten_bit_allowed && !this.ten_bit_allowed {
            changes.push("8-bit output".to_string());
        }
        if this.cautious {
            changes.extend(this.encoder.profile().cautious_changes().iter().map(ToString::to_string));
        }
        if self.one_session() {
            changes.push("one session".to_string());
        }
        RungRecord {
            rung: self.rung(),
            retry_profile: self,
            encoder: this.encoder,
            preset: this.preset,
            ten_bit_allowed: this.ten_bit_allowed,
            cautious: this.cautious,
            changes,
        }
    }
}

/// Which rung of the retry ladder an attempt ran and what it changed, as its job's history
/// shows it (the detail of the `encoding` event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RungRecord {
    pub rung: u32,
    pub retry_profile: RetryProfile,
    pub encoder: Encoder,
    pub preset: Option<String>,
    pub ten_bit_allowed: bool,
    pub cautious: bool,
    /// For people: each change from the first attempt's settings.
    pub changes: Vec<String>,
}

/// The settings for the attempt after `retry_count` automatic retries.
pub fn profile_for_attempt(requested: &EncodeSettings, retry_count: u32) -> EncodeProfile {
    RetryProfile::for_retry_count(retry_count).apply(requested)
}

#[cfg(test)]
mod tests {
    #[test]
    fn quick_sync_and_vaapi_take_frames_on_their_device_and_the_rest_in_system_memory() {
        for profile in ENCODERS {
            for depth in [8u8, 10] {
                let want = match profile.encoder {
                    Encoder::HevcQsv | Encoder::HevcVaapi | Encoder::Av1Qsv | Encoder::Av1Vaapi => FrameInput::Device {
                        hardware: profile.hardware,
                        upload_format: if depth == 10 { "p010le" } else { "nv12" },
                    },
                    Encoder::Libx265
                    | Encoder::HevcNvenc
                    | Encoder::Libsvtav1
                    | Encoder::LibaomAv1
                    | Encoder::Av1Nvenc => FrameInput::System,
                };
                assert_eq!(profile.frame_input(depth), want, "{} at {depth} bits", profile.encoder);
            }
            assert!(!profile.hardware.missing().is_empty());
        }
        assert!(Hardware::Vaapi.missing().contains("/dev/dri"));
    }

    use super::*;
    use std::str::FromStr;
    use Encoder::*;

    #[test]
    fn every_encoder_has_one_row_and_its_defaults_fit_it() {
        for encoder in Encoder::ALL {
            let rows: Vec<_> = ENCODERS.iter().filter(|p| p.encoder == *encoder).collect();
            assert_eq!(rows.len(), 1, "{encoder}");
            let p = rows[0];
            assert_eq!(p.encoder.profile(), p);
            assert!(p.quality.contains(p.quality.default), "{encoder}");
            match p.default_preset {
                Some(preset) => assert!(p.presets.contains(&preset) && !p.preset_option.is_empty(), "{encoder}"),
                None => assert!(p.presets.is_empty(), "{encoder}"),
            }
        }
        for codec in TargetCodec::ALL {
            let default = codec.default_encoder();
            assert_eq!(default.codec(), *codec);
            assert!(!default.is_hardware(), "{codec}");
            assert_eq!(codec.encoders().next().map(|p| p.encoder), Some(default), "{codec}");
        }
        // One set of defaults: CRF 28 for HEVC, 35 for AV1. The hardware AV1 encoders count
        // on scales of their own; their defaults land within 2 of 35 on SVT-AV1's.
        for p in ENCODERS {
            let cpu = p.codec.default_encoder().profile().quality;
            match (p.codec, p.hardware) {
                (TargetCodec::Av1, hardware) if hardware != Hardware::Cpu => {
                    let carried = p.quality.carry_to(p.quality.default, cpu);
                    assert!(carried.abs_diff(35) <= 2, "{}: {carried}", p.encoder);
                }
                (TargetCodec::Hevc, _) => assert_eq!((p.quality.max, p.quality.default), (51, 28), "{}", p.encoder),
                (TargetCodec::Av1, _) => assert_eq!((p.quality.max, p.quality.default), (63, 35), "{}", p.encoder),
            }
        }
    }

    #[test]
    fn encoders_know_their_codec_hardware_and_fallback() {
        // (encoder, codec, hardware, CPU fallback, default preset)
        let table = [
            (Libx265, TargetCodec::Hevc, Hardware::Cpu, Libx265, Some("medium")),
            (HevcNvenc, TargetCodec::Hevc, Hardware::Nvidia, Libx265, Some("p5")),
            (HevcQsv, TargetCodec::Hevc, Hardware::IntelQsv, Libx265, Some("medium")),
            (HevcVaapi, TargetCodec::Hevc, Hardware::Vaapi, Libx265, None),
            (Libsvtav1, TargetCodec::Av1, Hardware::Cpu, Libsvtav1, Some("8")),
            (LibaomAv1, TargetCodec::Av1, Hardware::Cpu, Libsvtav1, Some("6")),
            (Av1Nvenc, TargetCodec::Av1, Hardware::Nvidia, Libsvtav1, Some("p5")),
            (Av1Qsv, TargetCodec::Av1, Hardware::IntelQsv, Libsvtav1, Some("medium")),
            (Av1Vaapi, TargetCodec::Av1, Hardware::Vaapi, Libsvtav1, None),
        ];
        assert_eq!(table.len(), Encoder::ALL.len());
        for (encoder, codec, hardware, fallback, preset) in table {
            assert_eq!(encoder.codec(), codec, "{encoder}");
            assert_eq!(encoder.profile().hardware, hardware, "{encoder}");
            assert_eq!(encoder.is_hardware(), hardware != Hardware::Cpu, "{encoder}");
            assert_eq!(encoder.cpu_fallback(), fallback, "{encoder}");
            assert!(!fallback.is_hardware(), "{encoder}");
            assert_eq!(fallback.codec(), codec, "{encoder}");
            assert_eq!(encoder.default_preset(), preset, "{encoder}");
        }
    }

    #[test]
    fn names_are_ffmpegs() {
        assert_eq!(Encoder::from_str("libaom-av1"), Ok(LibaomAv1));
        assert_eq!(Encoder::from_str("hevc_nvenc"), Ok(HevcNvenc));
        assert_eq!(Encoder::from_str("av1_nvenc"), Ok(Av1Nvenc));
        assert_eq!(Encoder::from_str("av1_qsv"), Ok(Av1Qsv));
        assert_eq!(Encoder::from_str("av1_vaapi"), Ok(Av1Vaapi));
        assert!(Encoder::from_str("h264_nvenc").is_err());
        assert_eq!(TargetCodec::from_str("AV1"), Ok(TargetCodec::Av1));
        assert_eq!(serde_json::to_string(&TargetCodec::Hevc).unwrap(), "\"hevc\"");
        for profile in RetryProfile::ALL {
            assert_eq!(RetryProfile::from_str(profile.as_str()), Ok(*profile));
        }
    }

    #[test]
    fn options_name_quality_and_preset_as_each_encoder_does() {
        let profile = |encoder: Encoder, preset: Option<&str>| EncodeProfile {
            encoder,
            hardware_decode: false,
            ten_bit_allowed: true,
            preset: preset.map(str::to_string),
            quality: 30,
            cautious: false,
            retry_profile: RetryProfile::AsConfigured,
            rate: RateControl::Crf,
        };
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let table = [
            (Libx265, Some("slow"), pairs(&[("crf", "30"), ("preset", "slow")])),
            (HevcNvenc, Some("p6"), pairs(&[("rc", "vbr"), ("cq", "30"), ("preset", "p6")])),
            (HevcQsv, Some("fast"), pairs(&[("global_quality", "30"), ("preset", "fast")])),
            (HevcVaapi, None, pairs(&[("qp", "30")])),
            (Libsvtav1, Some("10"), pairs(&[("crf", "30"), ("preset", "10")])),
            (LibaomAv1, Some("4"), pairs(&[("row-mt", "1"), ("b", "0"), ("crf", "30"), ("cpu-used", "4")])),
            (Av1Nvenc, Some("p6"), pairs(&[("rc", "vbr"), ("cq", "30"), ("preset", "p6")])),
            (Av1Qsv, Some("fast"), pairs(&[("global_quality", "30"), ("preset", "fast")])),
            (Av1Vaapi, None, pairs(&[("qp", "30")])),
        ];
        for (encoder, preset, expected) in table {
            assert_eq!(profile(encoder, preset).options(), expected, "{encoder}");
        }
    }

    #[test]
    fn library_settings_fall_back_to_the_table_where_they_do_not_fit() {
        let settings = EncodeSettings::for_library(TargetCodec::Hevc, Some(HevcNvenc), Some("p7"), Some(20), false);
        assert_eq!(
            (settings.encoder, settings.hardware_decode, settings.preset.as_deref(), settings.quality),
            (HevcNvenc, true, Some("p7"), 20)
        );
        // A job queued for AV1 while the library now names an HEVC encoder.
        let settings = EncodeSettings::for_library(TargetCodec::Av1, Some(HevcNvenc), Some("p7"), Some(20), false);
        assert_eq!(
            (settings.encoder, settings.hardware_decode, settings.preset.as_deref(), settings.quality),
            (Libsvtav1, false, Some("8"), 20)
        );
        let settings = EncodeSettings::for_library(TargetCodec::Hevc, None, Some("p7"), Some(99), true);
        assert_eq!(
            (settings.encoder, settings.preset.as_deref(), settings.quality, settings.source_is_ten_bit_hdr),
            (Libx265, Some("medium"), 28, true)
        );
        let settings = EncodeSettings::for_library(TargetCodec::Hevc, Some(HevcVaapi), Some("medium"), None, false);
        assert_eq!((settings.preset, settings.quality), (None, 28));
    }

    #[test]
    fn retry_counts_map_to_rungs() {
        let table = [
            (0, RetryProfile::AsConfigured),
            (1, RetryProfile::SoftwareDecode),
            (2, RetryProfile::CpuEncoder),
            (3, RetryProfile::Conservative),
            (4, RetryProfile::Conservative),
            (u32::MAX, RetryProfile::Conservative),
        ];
        for (retry_count, profile) in table {
            assert_eq!(RetryProfile::for_retry_count(retry_count), profile, "{retry_count}");
        }
    }

    #[test]
    fn a_quality_is_carried_to_the_cpu_encoders_scale_at_the_same_place() {
        let svt = Libsvtav1.profile().quality;
        // Same scale: kept as it is.
        assert_eq!(LibaomAv1.profile().quality.carry_to(24, svt), 24);
        assert_eq!(HevcNvenc.profile().quality.carry_to(24, Libx265.profile().quality), 24);
        // NVENC's cq of 0-51 and VAAPI's quantizer index of 0-255 onto SVT-AV1's 0-63.
        assert_eq!(Av1Nvenc.profile().quality.carry_to(24, svt), 30);
        assert_eq!(Av1Nvenc.profile().quality.carry_to(51, svt), 63);
        assert_eq!(Av1Vaapi.profile().quality.carry_to(0, svt), 0);
        assert_eq!(Av1Vaapi.profile().quality.carry_to(140, svt), 35);
        assert_eq!(Av1Vaapi.profile().quality.carry_to(255, svt), 63);
        // Quick Sync's ICQ starts at 1.
        assert_eq!(Av1Qsv.profile().quality.carry_to(1, svt), 0);
        assert_eq!(Av1Qsv.profile().quality.carry_to(999, svt), 63);
    }

    /// A library's settings as the ladder gets them: hardware encoders decode on their
    /// hardware, CPU encoders on the CPU (as `EncodeSettings::for_library` says).
    fn requested(encoder: Encoder, preset: Option<&str>, source_is_ten_bit_hdr: bool) -> EncodeSettings {
        EncodeSettings {
            encoder,
            hardware_decode: encoder.is_hardware(),
            ten_bit_allowed: true,
            preset: preset.map(str::to_string),
            quality: 24,
            source_is_ten_bit_hdr,
            rate: RateControl::Crf,
        }
    }

    /// One rung's expected profile: (encoder, hardware decode, 10-bit allowed, preset,
    /// cautious).
    type Rung = (Encoder, bool, bool, Option<&'static str>, bool);

    #[test]
    fn presets_step_faster_in_the_direction_the_table_says() {
        // (encoder, preset, one step faster, two steps faster)
        let table = [
            (Libx265, "medium", "fast", "faster"),
            (Libx265, "slow", "medium", "fast"),
            (Libx265, "superfast", "ultrafast", "ultrafast"),
            (Libx265, "ultrafast", "ultrafast", "ultrafast"),
            (HevcNvenc, "p5", "p4", "p3"),
            (HevcNvenc, "p1", "p1", "p1"),
            (HevcQsv, "medium", "fast", "faster"),
            (Av1Nvenc, "p2", "p1", "p1"),
            (Av1Qsv, "faster", "veryfast", "veryfast"),
            // SVT-AV1's and libaom's numbers: higher is faster.
            (Libsvtav1, "8", "9", "10"),
            (Libsvtav1, "12", "13", "13"),
            (Libsvtav1, "13", "13", "13"),
            (LibaomAv1, "6", "7", "8"),
            (LibaomAv1, "8", "8", "8"),
        ];
        for (encoder, preset, one, two) in table {
            let p = encoder.profile();
            assert_eq!(p.faster_preset(preset, 0), Some(preset), "{encoder} {preset}");
            assert_eq!(p.faster_preset(preset, 1), Some(one), "{encoder} {preset}");
            assert_eq!(p.faster_preset(preset, 2), Some(two), "{encoder} {preset}");
        }
        for encoder in [HevcVaapi, Av1Vaapi] {
            assert_eq!(encoder.profile().faster_preset("medium", 1), None, "{encoder}");
        }
        assert_eq!(Libx265.profile().faster_preset("p5", 1), None);
        // Every preset of every encoder: a step never goes slower, and only the fastest stays.
        for p in ENCODERS {
            let fastest = match p.preset_order {
                PresetOrder::FastestFirst => p.presets.first(),
                PresetOrder::SlowestFirst => p.presets.last(),
            };
            for preset in p.presets {
                let next = p.faster_preset(preset, 1).unwrap();
                assert_eq!(next == *preset, Some(preset) == fastest, "{} {preset}", p.encoder);
                assert_eq!(p.faster_of(preset, next), next, "{} {preset}", p.encoder);
            }
        }
    }

    /// Every encoder, every rung (and past the last), HDR or not, against a table written
    /// out by hand.
    #[test]
    fn every_encoder_climbs_the_ladder() {
        // (encoder, library preset, per rung: (encoder, hardware decode, preset, cautious));
        // 10 bits are allowed on rungs 0 and 1 always, on rung 2 only where the ladder
        // has not gone cautious, and on the cautious rungs only for HDR.
        #[allow(clippy::type_complexity)]
        let table: [(Encoder, Option<&str>, [(Encoder, bool, Option<&str>, bool); 4]); 9] = [
            (
                Libx265,
                Some("slow"),
                [
                    (Libx265, false, Some("slow"), false),
                    (Libx265, false, Some("medium"), false),
                    (Libx265, false, Some("medium"), true),
                    (Libx265, false, Some("fast"), true),
                ],
            ),
            (
                HevcNvenc,
                Some("p6"),
                [
                    (HevcNvenc, true, Some("p6"), false),
                    (HevcNvenc, false, Some("p6"), false),
                    (Libx265, false, Some("medium"), false),
                    (Libx265, false, Some("medium"), false),
                ],
            ),
            (
                HevcQsv,
                Some("slow"),
                [
                    (HevcQsv, true, Some("slow"), false),
                    (HevcQsv, false, Some("slow"), false),
                    (Libx265, false, Some("medium"), false),
                    (Libx265, false, Some("medium"), false),
                ],
            ),
            (
                HevcVaapi,
                None,
                [
                    (HevcVaapi, true, None, false),
                    (HevcVaapi, false, None, false),
                    (Libx265, false, Some("medium"), false),
                    (Libx265, false, Some("medium"), false),
                ],
            ),
            (
                Libsvtav1,
                Some("5"),
                [
                    (Libsvtav1, false, Some("5"), false),
                    (Libsvtav1, false, Some("6"), false),
                    (Libsvtav1, false, Some("6"), true),
                    // One faster is 7, slower than the default 8.
                    (Libsvtav1, false, Some("8"), true),
                ],
            ),
            (
                LibaomAv1,
                Some("4"),
                [
                    (LibaomAv1, false, Some("4"), false),
                    (LibaomAv1, false, Some("5"), false),
                    (Libsvtav1, false, Some("8"), true),
                    (Libsvtav1, false, Some("9"), true),
                ],
            ),
            (
                Av1Nvenc,
                Some("p6"),
                [
                    (Av1Nvenc, true, Some("p6"), false),
                    (Av1Nvenc, false, Some("p6"), false),
                    (Libsvtav1, false, Some("8"), false),
                    (Libsvtav1, false, Some("8"), false),
                ],
            ),
            (
                Av1Qsv,
                Some("fast"),
                [
                    (Av1Qsv, true, Some("fast"), false),
                    (Av1Qsv, false, Some("fast"), false),
                    (Libsvtav1, false, Some("8"), false),
                    (Libsvtav1, false, Some("8"), false),
                ],
            ),
            (
                Av1Vaapi,
                None,
                [
                    (Av1Vaapi, true, None, false),
                    (Av1Vaapi, false, None, false),
                    (Libsvtav1, false, Some("8"), false),
                    (Libsvtav1, false, Some("8"), false),
                ],
            ),
        ];
        assert_eq!(table.len(), Encoder::ALL.len());
        for (encoder, preset, rungs) in table {
            for hdr in [false, true] {
                let settings = requested(encoder, preset, hdr);
                for retry_count in 0..6u32 {
                    let rung = RetryProfile::for_retry_count(retry_count);
                    let index = usize::try_from(rung.rung()).unwrap();
                    let (want_encoder, hardware_decode, want_preset, cautious) = rungs[index];
                    let ten_bit_allowed = match rung {
                        RetryProfile::AsConfigured | RetryProfile::SoftwareDecode => true,
                        RetryProfile::CpuEncoder if !cautious => true,
                        RetryProfile::CpuEncoder | RetryProfile::Conservative => hdr,
                    };
                    // The CPU encoder's rungs keep the quality where it stands on its scale.
                    let quality = encoder.profile().quality.carry_to(24, want_encoder.profile().quality);
                    let want: Rung = (want_encoder, hardware_decode, ten_bit_allowed, want_preset, cautious);
                    let got = profile_for_attempt(&settings, retry_count);
                    assert_eq!(
                        (got.encoder, got.hardware_decode, got.ten_bit_allowed, got.preset.as_deref(), got.cautious),
                        want,
                        "{encoder} hdr={hdr} retry {retry_count}"
                    );
                    assert_eq!((got.quality, got.retry_profile), (quality, rung), "{encoder} hdr={hdr} {retry_count}");
                    assert_eq!(rung.one_session(), retry_count > 0);
                }
            }
        }
    }

    /// Each rung runs something the rung below did not, on every encoder, for a library on
    /// the encoder's default preset (the fastest preset leaves rung 1 nothing faster).
    #[test]
    fn on_every_encoder_each_retry_changes_what_runs() {
        for encoder in Encoder::ALL.iter().copied() {
            for hdr in [false, true] {
                let settings = requested(encoder, encoder.default_preset(), hdr);
                let rungs: Vec<EncodeProfile> = (0..3).map(|n| profile_for_attempt(&settings, n)).collect();
                let what =
                    |p: &EncodeProfile| (p.encoder, p.hardware_decode, p.ten_bit_allowed, p.preset.clone(), p.cautious);
                assert_ne!(what(&rungs[0]), what(&rungs[1]), "{encoder} hdr={hdr}: rung 1");
                assert_ne!(what(&rungs[1]), what(&rungs[2]), "{encoder} hdr={hdr}: rung 2");
                if !encoder.is_hardware() {
                    // A CPU encoder's rungs: faster, then cautious (8-bit unless HDR).
                    let speed = |p: &EncodeProfile| encoder.profile().speed_rank(p.preset.as_deref().unwrap());
                    assert!(speed(&rungs[1]) > speed(&rungs[0]), "{encoder}");
                    assert!(rungs[2].cautious && rungs[2].ten_bit_allowed == hdr, "{encoder} hdr={hdr}");
                }
            }
        }
    }

    #[test]
    fn the_conservative_rung_keeps_ten_bit_for_hdr_even_when_the_library_said_eight() {
        let settings = EncodeSettings { ten_bit_allowed: false, ..requested(HevcNvenc, Some("p6"), true) };
        assert!(!profile_for_attempt(&settings, 2).ten_bit_allowed);
        assert!(profile_for_attempt(&settings, 3).ten_bit_allowed);
    }

    #[test]
    fn the_history_says_which_rung_ran_and_what_it_changed() {
        let x265 = requested(Libx265, Some("veryfast"), false);
        let record = |settings: &EncodeSettings, n: u32| RetryProfile::for_retry_count(n).record(settings);
        let first = record(&x265, 0);
        assert_eq!((first.rung, first.retry_profile, first.changes.len()), (0, RetryProfile::AsConfigured, 0));
        let one = record(&x265, 1);
        assert_eq!((one.rung, one.preset.as_deref()), (1, Some("superfast")));
        assert_eq!(one.changes, ["preset superfast instead of veryfast", "one session"]);
        let two = record(&x265, 2);
        assert_eq!(
            two.changes,
            ["preset superfast instead of veryfast", "8-bit output", "4:2:0 chroma", "no hdr10-opt", "one session"]
        );
        assert!(two.cautious && !two.ten_bit_allowed);
        // HDR keeps its 10 bits.
        let hdr = record(&requested(Libx265, Some("veryfast"), true), 3);
        assert_eq!(hdr.rung, 3);
        assert!(hdr.ten_bit_allowed && !hdr.changes.iter().any(|c| c == "8-bit output"), "{hdr:?}");
        let svt = record(&requested(LibaomAv1, Some("6"), false), 2);
        assert_eq!(svt.changes[..2], ["encoder libsvtav1 instead of libaom-av1", "preset 8 instead of 6"]);
        assert!(svt.changes.iter().any(|c| c == "no film grain"), "{svt:?}");
        let nvenc = record(&requested(Av1Nvenc, Some("p6"), false), 2);
        assert_eq!(
            nvenc.changes,
            [
                "encoder libsvtav1 instead of av1_nvenc",
                "decoding on the CPU",
                "preset 8 instead of p6",
                "quality 30 on libsvtav1's scale",
                "one session"
            ]
        );
        let json = serde_json::to_value(&two).unwrap();
        assert_eq!((json["rung"].as_u64(), json["retryProfile"].as_str()), (Some(2), Some("cpu_encoder")));
        assert_eq!((json["encoder"].as_str(), json["preset"].as_str()), (Some("libx265"), Some("superfast")));
    }

    /// Every mode against every encoder, with and without a bitrate, in and out of bounds,
    /// in either quality mode.
    #[test]
    fn two_passes_need_a_bitrate_in_bounds_an_encoder_that_runs_them_and_crf_mode() {
        let (lo, hi) = (i64::from(TARGET_BITRATE_KBPS_MIN), i64::from(TARGET_BITRATE_KBPS_MAX));
        for &encoder in Encoder::ALL {
            let offered = matches!(encoder, Libx265 | HevcNvenc);
            for vmaf in [false, true] {
                for bitrate in [None, Some(lo - 1), Some(lo), Some(2500), Some(hi), Some(hi + 1), Some(-5)] {
                    let in_bounds = bitrate.map(|b| (lo..=hi).contains(&b));
                    let crf = rate_control(RateControlMode::Crf, bitrate, encoder, vmaf);
                    let two = rate_control(RateControlMode::TwoPass, bitrate, encoder, vmaf);
                    match (bitrate, in_bounds) {
                        (Some(b), Some(false)) => {
                            assert_eq!(crf, Err(RateControlError::BitrateOutOfRange(b)));
                            assert_eq!(two, Err(RateControlError::BitrateOutOfRange(b)));
                        }
                        (None, _) => {
                            assert_eq!(crf, Ok(RateControl::Crf));
                            assert_eq!(two, Err(RateControlError::MissingBitrate));
                        }
                        (Some(b), _) => {
                            assert_eq!(crf, Ok(RateControl::Crf));
                            let want = if !offered {
                                Err(RateControlError::NotOffered(encoder))
                            } else if vmaf {
                                Err(RateControlError::WithVmaf)
                            } else {
                                Ok(RateControl::TwoPass { bitrate_kbps: u32::try_from(b).unwrap() })
                            };
                            assert_eq!(two, want, "{encoder} {b} vmaf={vmaf}");
                        }
                    }
                }
            }
        }
        assert!(RateControlError::NotOffered(Libsvtav1).to_string().contains("libsvtav1"));
    }

    /// Two passes replace the CRF/CQ with the bitrate on every rung; x265 (and the CPU
    /// fallback of NVENC) runs two encodes, NVENC its multipass inside one.
    #[test]
    fn two_passes_set_the_bitrate_on_every_rung_and_only_x265_runs_two_encodes() {
        for encoder in [Libx265, HevcNvenc] {
            let mut settings = EncodeSettings::for_library(TargetCodec::Hevc, Some(encoder), None, Some(22), false);
            settings.rate = RateControl::TwoPass { bitrate_kbps: 800 };
            for rung in 0..4 {
                let profile = profile_for_attempt(&settings, rung);
                let options = profile.options();
                let get = |k: &str| options.iter().find(|(name, _)| name == k).map(|(_, v)| v.as_str());
                assert_eq!(get("b"), Some("800k"), "{encoder} rung {rung}");
                let quality_option = profile.encoder.profile().quality_option;
                assert_eq!(get(quality_option), None, "{encoder} rung {rung}: {options:?}");
                assert_eq!(profile.runs_two_passes(), profile.encoder == Libx265, "{encoder} rung {rung}");
                let multipass = profile.encoder == HevcNvenc;
                assert_eq!(get("multipass"), multipass.then_some("fullres"), "{encoder} rung {rung}");
            }
            settings.rate = RateControl::Crf;
            let profile = profile_for_attempt(&settings, 0);
            assert!(!profile.runs_two_passes());
            assert_eq!(profile.options().iter().find(|(k, _)| k == "b"), None);
        }
    }
}
