//! A library's rate control: a constant quality (CRF/CQ) or two passes to a target bitrate,
//! and how an encoder runs two passes. Which encoders do, and the rule a library's choice
//! must meet, are in the encoder table (`domain::encoding::rate_control`).

use serde::Serialize;

use super::named_enum;

named_enum!(
    /// How a library spends bits: at a constant quality (`crf`: the CRF/CQ of `quality`) or
    /// at a target bitrate over two passes (`twoPass`, with `targetBitrateKbps`).
    RateControlMode, "rate control" {
        Crf => "crf",
        TwoPass => "twoPass",
    }
);

/// `targetBitrateKbps`: the bounds the API checks and its schema states.
pub const TARGET_BITRATE_KBPS_MIN: u32 = 50;
pub const TARGET_BITRATE_KBPS_MAX: u32 = 200_000;

/// What an encoder that runs two passes takes, as `GET /encoders` serves it: the bounds of
/// `targetBitrateKbps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TwoPassRange {
    pub min_kbps: u32,
    pub max_kbps: u32,
}

/// How an encoder runs two passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TwoPassKind {
    /// Two encodes: the first writes statistics (x265 `pass=1:stats=`), the second spends the
    /// bitrate by them (`media::transcode`, docs/ARCHITECTURE.md "Two-pass encoding").
    Stats,
    /// Inside one encode (NVENC's `multipass`): nothing for the transcoder to run twice.
    Multipass,
}

/// The rate control one attempt runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateControl {
    /// The profile's quality (CRF/CQ).
    #[default]
    Crf,
    /// Two passes to an average bitrate, in kbit/s.
    TwoPass { bitrate_kbps: u32 },
}
