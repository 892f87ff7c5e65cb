//! Encoders, target codecs, and the retry ladder: each automatic retry gives up one more
//! thing that commonly makes an encode fail.

use super::named_enum;

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
    }
);

impl Encoder {
    /// Runs on a GPU or a media engine rather than the CPU.
    pub fn is_hardware(self) -> bool {
        matches!(self, Encoder::HevcNvenc | Encoder::HevcQsv | Encoder::HevcVaapi)
    }

    pub fn codec(self) -> TargetCodec {
        match self {
            Encoder::Libx265 | Encoder::HevcNvenc | Encoder::HevcQsv | Encoder::HevcVaapi => TargetCodec::Hevc,
            Encoder::Libsvtav1 | Encoder::LibaomAv1 => TargetCodec::Av1,
        }
    }

    /// The CPU encoder to fall back to for the same codec. libaom-av1 runs on the CPU too,
    /// but SVT-AV1 is the sturdier and much faster of the two.
    pub fn cpu_fallback(self) -> Encoder {
        match self.codec() {
            TargetCodec::Hevc => Encoder::Libx265,
            TargetCodec::Av1 => Encoder::Libsvtav1,
        }
    }

    /// A middle-of-the-road preset known to work, for the encoders the ladder falls back to;
    /// `None` leaves the encoder's own default.
    pub fn safe_preset(self) -> Option<&'static str> {
        match self {
            Encoder::Libx265 => Some("medium"),
            Encoder::Libsvtav1 => Some("8"),
            Encoder::HevcNvenc | Encoder::HevcQsv | Encoder::HevcVaapi | Encoder::LibaomAv1 => None,
        }
    }
}

/// Runs on a GPU or a media engine rather than the CPU.
pub fn is_hardware(encoder: Encoder) -> bool {
    encoder.is_hardware()
}

/// The codec an encoder produces.
pub fn codec_of(encoder: Encoder) -> TargetCodec {
    encoder.codec()
}

/// What a library asks for, plus what analysis found out about the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeSettings {
    pub encoder: Encoder,
    pub hardware_decode: bool,
    pub ten_bit_allowed: bool,
    /// `None`: the encoder's default.
    pub preset: Option<String>,
    /// CRF or constant quality; `None`: the encoder's default. Kept on every rung, since the
    /// fallback encoders share the scale of the ones they replace.
    pub quality: Option<u32>,
    /// The source is 10-bit HDR, which must stay 10-bit to stay HDR.
    pub source_is_ten_bit_hdr: bool,
}

/// What one attempt actually runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeProfile {
    pub encoder: Encoder,
    pub hardware_decode: bool,
    pub ten_bit_allowed: bool,
    pub preset: Option<String>,
    pub quality: Option<u32>,
    /// The rung this profile came from, for logs and the job's history.
    pub retry_profile: RetryProfile,
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

    pub fn apply(self, requested: &EncodeSettings) -> EncodeProfile {
        let as_configured = EncodeProfile {
            encoder: requested.encoder,
            hardware_decode: requested.hardware_decode,
            ten_bit_allowed: requested.ten_bit_allowed,
            preset: requested.preset.clone(),
            quality: requested.quality,
            retry_profile: self,
        };
        let cpu_encoder = requested.encoder.cpu_fallback();
        match self {
            RetryProfile::AsConfigured => as_configured,
            // Hardware decoders reject more damaged or unusual streams than FFmpeg's own.
            RetryProfile::SoftwareDecode => EncodeProfile { hardware_decode: false, ..as_configured },
            RetryProfile::CpuEncoder => {
                // A hardware encoder's preset means nothing to a CPU encoder.
                let preset = if cpu_encoder == requested.encoder {
                    requested.preset.clone()
                } else {
                    cpu_encoder.safe_preset().map(str::to_string)
                };
                EncodeProfile { encoder: cpu_encoder, hardware_decode: false, preset, ..as_configured }
            }
            RetryProfile::Conservative => EncodeProfile {
                encoder: cpu_encoder,
                hardware_decode: false,
                ten_bit_allowed: requested.source_is_ten_bit_hdr,
                preset: cpu_encoder.safe_preset().map(str::to_string),
                ..as_configured
            },
        }
    }
}

/// The settings for the attempt after `retry_count` automatic retries.
pub fn profile_for_attempt(requested: &EncodeSettings, retry_count: u32) -> EncodeProfile {
    RetryProfile::for_retry_count(retry_count).apply(requested)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;
    use Encoder::*;

    #[test]
    fn encoders_know_their_codec_hardware_and_fallback() {
        // (encoder, codec, hardware, CPU fallback, safe preset)
        let table = [
            (Libx265, TargetCodec::Hevc, false, Libx265, Some("medium")),
            (HevcNvenc, TargetCodec::Hevc, true, Libx265, None),
            (HevcQsv, TargetCodec::Hevc, true, Libx265, None),
            (HevcVaapi, TargetCodec::Hevc, true, Libx265, None),
            (Libsvtav1, TargetCodec::Av1, false, Libsvtav1, Some("8")),
            (LibaomAv1, TargetCodec::Av1, false, Libsvtav1, None),
        ];
        assert_eq!(table.len(), Encoder::ALL.len());
        for (encoder, codec, hardware, fallback, preset) in table {
            assert_eq!(codec_of(encoder), codec, "{encoder}");
            assert_eq!(is_hardware(encoder), hardware, "{encoder}");
            assert_eq!(encoder.cpu_fallback(), fallback, "{encoder}");
            assert!(!fallback.is_hardware(), "{encoder}");
            assert_eq!(fallback.codec(), codec, "{encoder}");
            assert_eq!(encoder.safe_preset(), preset, "{encoder}");
        }
    }

    #[test]
    fn names_are_ffmpegs() {
        assert_eq!(Encoder::from_str("libaom-av1"), Ok(LibaomAv1));
        assert_eq!(Encoder::from_str("hevc_nvenc"), Ok(HevcNvenc));
        assert!(Encoder::from_str("h264_nvenc").is_err());
        assert_eq!(TargetCodec::from_str("AV1"), Ok(TargetCodec::Av1));
        assert_eq!(serde_json::to_string(&TargetCodec::Hevc).unwrap(), "\"hevc\"");
        for profile in RetryProfile::ALL {
            assert_eq!(RetryProfile::from_str(profile.as_str()), Ok(*profile));
        }
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

    fn requested(encoder: Encoder, source_is_ten_bit_hdr: bool) -> EncodeSettings {
        EncodeSettings {
            encoder,
            hardware_decode: true,
            ten_bit_allowed: true,
            preset: Some("p6".to_string()),
            quality: Some(24),
            source_is_ten_bit_hdr,
        }
    }

    fn profile(
        encoder: Encoder,
        hardware_decode: bool,
        ten_bit_allowed: bool,
        preset: Option<&str>,
        retry_profile: RetryProfile,
    ) -> EncodeProfile {
        EncodeProfile {
            encoder,
            hardware_decode,
            ten_bit_allowed,
            preset: preset.map(str::to_string),
            quality: Some(24),
            retry_profile,
        }
    }

    #[test]
    fn every_encoder_climbs_the_ladder() {
        use RetryProfile::*;
        // Per requested encoder: the CPU rung's encoder and preset, and the conservative preset.
        let table = [
            (Libx265, Libx265, Some("p6"), Some("medium")),
            (HevcNvenc, Libx265, Some("medium"), Some("medium")),
            (HevcQsv, Libx265, Some("medium"), Some("medium")),
            (HevcVaapi, Libx265, Some("medium"), Some("medium")),
            (Libsvtav1, Libsvtav1, Some("p6"), Some("8")),
            (LibaomAv1, Libsvtav1, Some("8"), Some("8")),
        ];
        assert_eq!(table.len(), Encoder::ALL.len());
        for (encoder, cpu, cpu_preset, conservative_preset) in table {
            for hdr in [false, true] {
                let settings = requested(encoder, hdr);
                let rungs = [
                    profile(encoder, true, true, Some("p6"), AsConfigured),
                    profile(encoder, false, true, Some("p6"), SoftwareDecode),
                    profile(cpu, false, true, cpu_preset, CpuEncoder),
                    profile(cpu, false, hdr, conservative_preset, Conservative),
                    profile(cpu, false, hdr, conservative_preset, Conservative),
                ];
                for (retry_count, expected) in (0..).zip(rungs) {
                    assert_eq!(
                        profile_for_attempt(&settings, retry_count),
                        expected,
                        "{encoder} hdr={hdr} retry {retry_count}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_conservative_rung_keeps_ten_bit_for_hdr_even_when_the_library_said_eight() {
        let settings = EncodeSettings { ten_bit_allowed: false, ..requested(HevcNvenc, true) };
        assert!(!profile_for_attempt(&settings, 2).ten_bit_allowed);
        assert!(profile_for_attempt(&settings, 3).ten_bit_allowed);
    }

    #[test]
    fn an_unset_preset_and_software_decode_stay_as_configured() {
        let settings = EncodeSettings {
            encoder: Libx265,
            hardware_decode: false,
            ten_bit_allowed: false,
            preset: None,
            quality: None,
            source_is_ten_bit_hdr: false,
        };
        let expected = EncodeProfile {
            encoder: Libx265,
            hardware_decode: false,
            ten_bit_allowed: false,
            preset: None,
            quality: None,
            retry_profile: RetryProfile::CpuEncoder,
        };
        assert_eq!(profile_for_attempt(&settings, 2), expected);
    }
}
