//! Dynamic HDR metadata through an HEVC encode, at the byte level: HDR10+ (SMPTE ST 2094-40)
//! SEI messages and Dolby Vision RPUs.
//!
//! Debian's libx265 is built without HDR10+, FFmpeg 5.1's encoders drop frame side data, and
//! no encoder writes Dolby Vision RPUs, so the transcoder carries both itself: each source
//! access unit's HDR10+ payload and RPU are read from the source packet, kept with the
//! frame's presentation time, and written into the encoded access unit of the same time
//! (the SEI before its first slice, the RPU last, where each belongs). The bytes are copied,
//! never decoded and written again, so nothing in them can change on the way; only a
//! profile 7 RPU is rewritten, as profile 8.1 (the `dolby_vision` crate), since the output
//! has no enhancement layer. See docs/ARCHITECTURE.md, "Dynamic HDR metadata".

use dolby_vision::rpu::dovi_rpu::DoviRpu;
use dolby_vision::rpu::ConversionMode;

use super::info::{HdrKind, MediaInfo};

/// HEVC NAL unit type of a prefix SEI.
const NAL_PREFIX_SEI: u8 = 39;
/// HEVC NAL unit type 62 (unspecified by HEVC), which Dolby Vision uses for its RPU.
const NAL_RPU: u8 = 62;
/// SEI payload type `user_data_registered_itu_t_t35`.
const SEI_T35: u32 = 4;
/// The start of an HDR10+ T.35 payload: country code (United States), terminal provider
/// code (Samsung), provider oriented code, application identifier 4 (ST 2094-40). FFmpeg's
/// HEVC decoder recognises it by these bytes too.
const HDR10PLUS_HEAD: [u8; 6] = [0xB5, 0x00, 0x3C, 0x00, 0x01, 0x04];

/// Whether a video encoded to `target_codec` can keep the source's HDR10+ metadata and Dolby
/// Vision RPUs: HEVC only (for AV1 they would be metadata OBUs, not written yet; the output
/// keeps HDR10).
pub fn carried(target_codec: &str) -> bool {
    target_codec == "hevc"
}

/// What an encode carries from its source's access units into its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Carry {
    pub hdr10plus: bool,
    pub rpu: Option<RpuMode>,
}

/// How a Dolby Vision RPU goes into the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpuMode {
    /// As it is (profile 8.1).
    Copy,
    /// Rewritten as profile 8.1 (a profile 7 source, whose enhancement layer is not kept).
    ToProfile81,
}

impl Carry {
    /// What a plan keeping `kept` of a source described by `info` carries: HDR10+ wherever
    /// the output is PQ in HEVC (whether or not the probe saw it on the first frame: a
    /// source whose metadata starts later keeps it too, and one without has nothing to
    /// copy), RPUs where the plan keeps Dolby Vision. None: nothing.
    pub fn of(kept: HdrKind, info: &MediaInfo, target_codec: &str) -> Option<Carry> {
        if !carried(target_codec) {
            return None;
        }
        let carry =
            Carry { hdr10plus: kept.has_hdr10_base(), rpu: (kept == HdrKind::DolbyVision).then(|| rpu_mode(info)) };
        (carry != Carry::default()).then_some(carry)
    }
}

/// How a source's RPUs go into an output that keeps Dolby Vision.
pub fn rpu_mode(info: &MediaInfo) -> RpuMode {
    match info.hdr.dolby_vision.map(|d| d.profile) {
        Some(7) => RpuMode::ToProfile81,
        _ => RpuMode::Copy,
    }
}

/// One frame's dynamic metadata: the HDR10+ T.35 payload (from its country code on) and the
/// RPU NAL unit (header included, as it goes into the output).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FrameMetadata {
    pub hdr10plus: Option<Vec<u8>>,
    pub rpu: Option<Vec<u8>>,
}

impl FrameMetadata {
    pub fn is_empty(&self) -> bool {
        self.hdr10plus.is_none() && self.rpu.is_none()
    }
}

/// What one source access unit carries, as `carry` asks. An RPU that cannot be converted
/// is left out (verification then refuses the output; the original stays).
pub fn read(packet: &[u8], format: NalFormat, carry: Carry) -> FrameMetadata {
    if carry == Carry::default() {
        return FrameMetadata::default();
    }
    let nals = nal_units(packet, format);
    FrameMetadata {
        hdr10plus: if carry.hdr10plus { hdr10plus_of(&nals) } else { None },
        rpu: carry.rpu.and_then(|mode| {
            let nal = rpu_of(&nals)?;
            match mode {
                RpuMode::Copy => Some(nal.to_vec()),
                RpuMode::ToProfile81 => to_profile81(nal),
            }
        }),
    }
}

/// A profile 7 RPU NAL unit rewritten as profile 8.1.
fn to_profile81(nal: &[u8]) -> Option<Vec<u8>> {
    let converted = DoviRpu::parse_unspec62_nalu(nal).and_then(|mut rpu| {
        rpu.convert_with_mode(ConversionMode::To81)?;
        rpu.write_hevc_unspec62_nalu()
    });
    match converted {
        Ok(nal) => Some(nal),
        Err(e) => {
            tracing::warn!(error = %e, "a Dolby Vision RPU could not be converted to profile 8.1");
            None
        }
    }
}

/// An encoded access unit (start codes, as the encoders emit) with `meta` written in: the
/// HDR10+ SEI before its first slice, where a prefix SEI belongs, and the RPU at its end.
/// None when the packet has no slice or is not in start codes: the caller keeps it
/// unchanged, and verification, which compares every frame's metadata with the source's,
/// refuses the output.
pub fn write(packet: &[u8], meta: &FrameMetadata) -> Option<Vec<u8>> {
    let mut out = match &meta.hdr10plus {
        Some(p) => with_payload(packet, p)?,
        None => {
            let starts = start_codes(packet);
            (starts.first().map(|s| s.0) == Some(0)).then(|| packet.to_vec())?
        }
    };
    if let Some(rpu) = &meta.rpu {
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend_from_slice(rpu);
    }
    Some(out)
}

/// The RPU NAL unit among an access unit's NAL units, if it has one.
fn rpu_of<'a>(nals: &[&'a [u8]]) -> Option<&'a [u8]> {
    nals.iter().copied().find(|nal| nal_type(nal) == Some(NAL_RPU))
}

/// How a stream's packets frame their NAL units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NalFormat {
    /// Start codes (raw streams, MPEG-TS, what the encoders emit).
    AnnexB,
    /// Each NAL unit after its big-endian length of this many bytes (Matroska and MP4,
    /// whose codec private data is an `hvcC` record).
    Length(usize),
}

impl NalFormat {
    /// The framing a stream's codec private data announces: an `hvcC` record (version 1)
    /// names the size of the lengths; anything else is start codes.
    pub fn of_extradata(extradata: &[u8]) -> NalFormat {
        match extradata {
            [1, ..] if extradata.len() >= 23 => {
                NalFormat::Length(usize::from(extradata.get(21).copied().unwrap_or(3) & 3) + 1)
            }
            _ => NalFormat::AnnexB,
        }
    }
}

/// The NAL units of one packet (each with its two-byte header), in order. A length that
/// runs past the packet ends the list there.
pub(crate) fn nal_units(data: &[u8], format: NalFormat) -> Vec<&[u8]> {
    match format {
        NalFormat::Length(size) => {
            let mut out = Vec::new();
            let mut at = 0usize;
            while let Some(prefix) = data.get(at..at + size) {
                let len = prefix.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
                at += size;
                let Some(nal) = data.get(at..at + len) else { break };
                out.push(nal);
                at += len;
            }
            out
        }
        NalFormat::AnnexB => {
            let starts = start_codes(data);
            starts
                .iter()
                .enumerate()
                .filter_map(|(i, &(_, body))| {
                    let end = starts.get(i + 1).map_or(data.len(), |&(next, _)| next);
                    data.get(body..end.max(body))
                })
                .collect()
        }
    }
}

/// Positions of the start codes of an Annex B packet: where each one begins (a zero byte
/// before `00 00 01` belongs to it) and where its NAL unit begins.
fn start_codes(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while let Some(three) = data.get(i..i + 3) {
        if three == [0, 0, 1] {
            let begin = if i > 0 && data.get(i - 1) == Some(&0) { i - 1 } else { i };
            out.push((begin, i + 3));
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}

fn nal_type(nal: &[u8]) -> Option<u8> {
    nal.first().map(|b| (b >> 1) & 0x3F)
}

/// The RBSP of a NAL unit's body: emulation prevention bytes (`00 00 03`) removed.
fn unescape(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut zeros = 0;
    for &b in body {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

/// A NAL unit's body from its RBSP: an emulation prevention byte wherever two zero bytes
/// would be followed by a byte of 3 or less.
fn escape(rbsp: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rbsp.len() + 8);
    let mut zeros = 0;
    for &b in rbsp {
        if zeros >= 2 && b <= 3 {
            out.push(3);
            zeros = 0;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

/// The messages of an SEI RBSP: (payload type, payload).
fn sei_messages(rbsp: &[u8]) -> Vec<(u32, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0usize;
    // more_rbsp_data: anything left before the trailing bits (0x80).
    while rbsp.get(at..).is_some_and(|rest| !rest.is_empty() && rest != [0x80]) {
        let mut read_value = || {
            let mut value = 0u32;
            while let Some(&b) = rbsp.get(at) {
                at += 1;
                value = value.saturating_add(u32::from(b));
                if b != 0xFF {
                    return Some(value);
                }
            }
            None
        };
        let (Some(kind), Some(size)) = (read_value(), read_value()) else { break };
        let Some(payload) = rbsp.get(at..at + size as usize) else { break };
        out.push((kind, payload));
        at += size as usize;
    }
    out
}

/// The HDR10+ T.35 payload (from its country code on) among an access unit's NAL units, if
/// it has one.
fn hdr10plus_of(nals: &[&[u8]]) -> Option<Vec<u8>> {
    nals.iter().filter(|nal| nal_type(nal) == Some(NAL_PREFIX_SEI)).find_map(|nal| {
        let rbsp = unescape(nal.get(2..)?);
        sei_messages(&rbsp)
            .into_iter()
            .find(|(kind, p)| *kind == SEI_T35 && p.starts_with(&HDR10PLUS_HEAD))
            .map(|(_, p)| p.to_vec())
    })
}

/// A prefix SEI NAL unit (header included, no start code) holding one T.35 message.
fn sei_nal(payload: &[u8]) -> Vec<u8> {
    let mut rbsp = vec![SEI_T35 as u8];
    let mut size = payload.len();
    while size >= 0xFF {
        rbsp.push(0xFF);
        size -= 0xFF;
    }
    rbsp.push(size as u8);
    rbsp.extend_from_slice(payload);
    rbsp.push(0x80);
    // Header: forbidden bit 0, type 39, layer 0, temporal id plus one 1.
    let mut nal = vec![NAL_PREFIX_SEI << 1, 1];
    nal.extend(escape(&rbsp));
    nal
}

/// An encoded access unit with the payload's SEI put before its first slice (see `write`).
fn with_payload(packet: &[u8], payload: &[u8]) -> Option<Vec<u8>> {
    let starts = start_codes(packet);
    if starts.first().map(|s| s.0) != Some(0) {
        return None;
    }
    let &(at, _) = starts.iter().find(|&&(_, body)| packet.get(body).is_some_and(|b| (b >> 1) & 0x3F < 32))?;
    let nal = sei_nal(payload);
    let mut out = Vec::with_capacity(packet.len() + nal.len() + 4);
    let (before, after) = packet.split_at_checked(at)?;
    out.extend_from_slice(before);
    out.extend_from_slice(&[0, 0, 0, 1]);
    out.extend_from_slice(&nal);
    out.extend_from_slice(after);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(packet: &[u8], format: NalFormat) -> Option<Vec<u8>> {
        hdr10plus_of(&nal_units(packet, format))
    }

    /// An HDR10+ payload with a run of zeros (as a real one has in its unused fields), so
    /// emulation prevention is exercised.
    fn sample(n: u8) -> Vec<u8> {
        let mut p = HDR10PLUS_HEAD.to_vec();
        p.extend_from_slice(&[1, 0x40 | n, 0, 0, 0, 1, 0, 0, 2, n, 0xFF, 0x80]);
        p
    }

    fn annexb(nals: &[Vec<u8>]) -> Vec<u8> {
        nals.iter().flat_map(|n| [0, 0, 0, 1].iter().copied().chain(n.iter().copied())).collect()
    }

    const SLICE: [u8; 5] = [0x02, 0x01, 0xD0, 0x00, 0x11]; // type 1 (TRAIL_R)
    const AUD: [u8; 3] = [0x46, 0x01, 0x50]; // type 35

    #[test]
    fn a_payload_written_into_an_access_unit_reads_back_the_same_before_its_first_slice() {
        let unit = annexb(&[AUD.to_vec(), SLICE.to_vec(), SLICE.to_vec()]);
        assert_eq!(payload(&unit, NalFormat::AnnexB), None);
        let p = sample(7);
        let with = with_payload(&unit, &p).unwrap();
        assert_eq!(payload(&with, NalFormat::AnnexB), Some(p.clone()));
        let types: Vec<u8> = nal_units(&with, NalFormat::AnnexB).iter().filter_map(|n| nal_type(n)).collect();
        assert_eq!(types, vec![35, 39, 1, 1]);
        // The same units framed by lengths, as Matroska and MP4 hold them.
        let framed: Vec<u8> = nal_units(&with, NalFormat::AnnexB)
            .iter()
            .flat_map(|n| (n.len() as u32).to_be_bytes().into_iter().chain(n.iter().copied()))
            .collect();
        assert_eq!(payload(&framed, NalFormat::Length(4)), Some(p));
    }

    #[test]
    fn emulation_prevention_is_added_and_removed() {
        let rbsp = [0u8, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 4];
        let body = escape(&rbsp);
        assert_eq!(body, [0, 0, 3, 0, 0, 3, 0, 1, 0, 0, 3, 2, 0, 0, 3, 3, 0, 0, 4]);
        assert_eq!(unescape(&body), rbsp);
        let p = sample(0);
        let nal = sei_nal(&p);
        assert!(!nal.windows(3).any(|w| w[0] == 0 && w[1] == 0 && w[2] <= 2), "{nal:?}");
    }

    #[test]
    fn long_payloads_and_other_messages_are_read_past() {
        // A payload of 300 bytes needs a size coded over two bytes (255 + 45).
        let mut long = HDR10PLUS_HEAD.to_vec();
        long.resize(300, 0x55);
        let nal = sei_nal(&long);
        assert_eq!(&nal[2..5], &[4, 0xFF, 45]);
        // Another message first (a user data unregistered one, type 5), then ours.
        let mut rbsp = vec![5, 3, 9, 9, 9];
        rbsp.extend_from_slice(&unescape(&nal[2..]));
        let mut both = vec![NAL_PREFIX_SEI << 1, 1];
        both.extend(escape(&rbsp));
        assert_eq!(payload(&annexb(&[both, SLICE.to_vec()]), NalFormat::AnnexB), Some(long));
        // A T.35 message of another provider is not HDR10+.
        let mut other = sample(1);
        other[2] = 0x31;
        assert_eq!(payload(&annexb(&[sei_nal(&other), SLICE.to_vec()]), NalFormat::AnnexB), None);
    }

    #[test]
    fn packets_without_start_codes_or_slices_are_left_alone_and_bad_lengths_stop_reading() {
        assert_eq!(with_payload(&[0x02, 0x01, 0xD0], &sample(1)), None);
        assert_eq!(with_payload(&annexb(&[AUD.to_vec()]), &sample(1)), None);
        // A length past the end of the packet.
        let framed = [0u8, 0, 0, 9, 0x4E, 0x01];
        assert_eq!(nal_units(&framed, NalFormat::Length(4)).len(), 0);
        assert_eq!(payload(&[], NalFormat::AnnexB), None);
    }

    #[test]
    fn the_framing_comes_from_the_codec_private_data() {
        let mut hvcc = vec![0u8; 23];
        hvcc[0] = 1;
        hvcc[21] = 0xFF; // lengthSizeMinusOne = 3 in the two low bits
        assert_eq!(NalFormat::of_extradata(&hvcc), NalFormat::Length(4));
        hvcc[21] = 0xFD;
        assert_eq!(NalFormat::of_extradata(&hvcc), NalFormat::Length(2));
        assert_eq!(NalFormat::of_extradata(&[0, 0, 0, 1, 0x40]), NalFormat::AnnexB);
        assert_eq!(NalFormat::of_extradata(&[]), NalFormat::AnnexB);
        assert!(carried("hevc") && !carried("av1"));
    }

    /// A generated profile 8.1 RPU NAL unit (the `dolby_vision` crate's generator) whose L1
    /// average brightness is `avg`.
    fn rpu_nal(avg: u16) -> Vec<u8> {
        use dolby_vision::rpu::extension_metadata::blocks::{ExtMetadataBlock, ExtMetadataBlockLevel1};
        use dolby_vision::rpu::generate::{GenerateConfig, GenerateProfile, VideoShot};
        use dolby_vision::rpu::vdr_dm_data::CmVersion;
        let config = GenerateConfig {
            cm_version: CmVersion::V40,
            profile: GenerateProfile::Profile81,
            long_play_mode: false,
            length: 1,
            source_min_pq: None,
            source_max_pq: None,
            l1_avg_pq_cm_version: None,
            level5: Default::default(),
            level6: None,
            level254: None,
            default_metadata_blocks: Vec::new(),
            shots: vec![VideoShot {
                duration: 1,
                metadata_blocks: vec![ExtMetadataBlock::Level1(ExtMetadataBlockLevel1::new(0, 3000, avg))],
                ..Default::default()
            }],
        };
        config.generate_rpu_list().unwrap()[0].write_hevc_unspec62_nalu().unwrap()
    }

    fn l1_avg(nal: &[u8]) -> (u8, Option<u16>) {
        use dolby_vision::rpu::extension_metadata::blocks::ExtMetadataBlock;
        let rpu = DoviRpu::parse_unspec62_nalu(nal).unwrap();
        let avg = rpu.vdr_dm_data.as_ref().and_then(|d| match d.get_block(1) {
            Some(ExtMetadataBlock::Level1(l1)) => Some(l1.avg_pq),
            _ => None,
        });
        (rpu.dovi_profile, avg)
    }

    #[test]
    fn an_rpu_goes_last_in_the_access_unit_beside_the_sei_and_reads_back_the_same() {
        let unit = annexb(&[AUD.to_vec(), SLICE.to_vec()]);
        let meta = FrameMetadata { hdr10plus: Some(sample(3)), rpu: Some(rpu_nal(1200)) };
        let with = write(&unit, &meta).unwrap();
        let types: Vec<u8> = nal_units(&with, NalFormat::AnnexB).iter().filter_map(|n| nal_type(n)).collect();
        assert_eq!(types, vec![35, 39, 1, 62]);
        let both = Carry { hdr10plus: true, rpu: Some(RpuMode::Copy) };
        assert_eq!(read(&with, NalFormat::AnnexB, both), meta);
        // Only what the plan carries is read.
        assert_eq!(read(&with, NalFormat::AnnexB, Carry::default()), FrameMetadata::default());
        let rpu_only = Carry { hdr10plus: false, rpu: Some(RpuMode::Copy) };
        assert_eq!(read(&with, NalFormat::AnnexB, rpu_only).hdr10plus, None);
        // An RPU alone, and nothing at all, leave the slice where it was.
        let rpu_alone = write(&unit, &FrameMetadata { hdr10plus: None, rpu: meta.rpu.clone() }).unwrap();
        assert!(rpu_alone.starts_with(&unit));
        assert_eq!(write(&unit, &FrameMetadata::default()).unwrap(), unit);
        assert_eq!(write(&SLICE, &meta), None, "not start codes");
    }

    #[test]
    fn a_rewritten_rpu_is_profile_8_1_with_the_same_brightness() {
        let nal = rpu_nal(1500);
        assert_eq!(l1_avg(&nal), (8, Some(1500)));
        let unit = annexb(&[SLICE.to_vec(), nal]);
        let rewritten = read(&unit, NalFormat::AnnexB, Carry { hdr10plus: false, rpu: Some(RpuMode::ToProfile81) });
        assert_eq!(l1_avg(&rewritten.rpu.unwrap()), (8, Some(1500)));
        // Bytes that are no RPU are dropped (verification then refuses the output).
        assert_eq!(to_profile81(&[0x7C, 0x01, 0x19, 0x08, 0x09, 0x00]), None);
    }

    #[test]
    fn what_an_encode_carries_follows_the_kind_it_keeps_and_the_target() {
        use crate::media::info::{DolbyVision, HdrInfo};
        let info = |hdr10_plus: bool, dv_profile: Option<u8>| MediaInfo {
            container: "matroska,webm".into(),
            duration_seconds: None,
            size_bytes: 0,
            bit_rate: None,
            chapters: 0,
            streams: Vec::new(),
            hdr: HdrInfo {
                kind: if dv_profile.is_some() { HdrKind::DolbyVision } else { HdrKind::Hdr10Plus },
                dolby_vision: dv_profile.map(|profile| DolbyVision {
                    profile,
                    level: 6,
                    bl_compatibility_id: if profile == 7 { 6 } else { 1 },
                    rpu_present: true,
                    el_present: profile == 7,
                }),
                hdr10_plus,
                mastering_display: None,
                content_light: None,
            },
        };
        let plus = Carry { hdr10plus: true, rpu: None };
        assert_eq!(Carry::of(HdrKind::Hdr10Plus, &info(true, None), "hevc"), Some(plus));
        assert_eq!(Carry::of(HdrKind::Hdr10, &info(true, None), "av1"), None);
        // HDR10 (the probe saw no HDR10+ on the first frame): what comes later is kept.
        assert_eq!(Carry::of(HdrKind::Hdr10, &info(false, None), "hevc"), Some(plus));
        assert_eq!(Carry::of(HdrKind::Sdr, &info(false, None), "hevc"), None);
        // Dolby Vision kept: its RPUs (a profile 7 one rewritten), and any HDR10+ beside
        // them; converted to HDR10: HDR10+ only.
        let copy = Carry { hdr10plus: true, rpu: Some(RpuMode::Copy) };
        assert_eq!(Carry::of(HdrKind::DolbyVision, &info(false, Some(8)), "hevc"), Some(copy));
        let seven = Carry { hdr10plus: true, rpu: Some(RpuMode::ToProfile81) };
        assert_eq!(Carry::of(HdrKind::DolbyVision, &info(true, Some(7)), "hevc"), Some(seven));
        assert_eq!(Carry::of(HdrKind::Hdr10, &info(true, Some(8)), "hevc"), Some(plus));
        assert_eq!(Carry::of(HdrKind::Hdr10, &info(false, Some(8)), "hevc"), Some(plus));
        assert_eq!(Carry::of(HdrKind::Hlg, &info(true, Some(8)), "hevc"), None);
    }
}
