//! Whether decoding can start cleanly at a keyframe, read from its packet's bytes: a span
//! cut at such a keyframe's presentation time decodes from its cut and drops no frame before
//! it (see `domain::segments::Keyframe` and docs/ARCHITECTURE.md, "Segments").

use crate::media::hdr_metadata::{nal_units, NalFormat};

/// H.264's IDR picture slice (ITU-T H.264, table 7-1).
const H264_IDR: u8 = 5;
/// HEVC's intra random access point pictures: BLA (16 to 18), IDR (19, 20) and CRA (21)
/// (ITU-T H.265, table 7-1).
const HEVC_IRAP: std::ops::RangeInclusive<u8> = 16..=21;

/// Whether decoding from the keyframe `packet` of a stream coded as `codec` (FFmpeg's codec
/// name) whose codec private data is `extradata` gives every frame shown at or after it, while
/// every frame before it in decode order is shown before it:
/// - H.264: an IDR. It empties the decoder's references, and every picture before it is
///   output before it. An I picture with a recovery point (x264's open GOP) is not: pictures
///   after it may be shown before it, or reference the GOP before it.
/// - HEVC: an IRAP picture (IDR, CRA, BLA). Pictures after it in decode order and shown after
///   it reference nothing before it, and pictures before it are shown before it; a CRA's
///   leading pictures are shown before it, so a span cut there does not hold them.
///
/// Anything else (other codecs, a packet that cannot be read) is not: its span decodes from
/// the keyframe before its cut, as every span did.
pub fn clean_start(codec: &str, extradata: &[u8], packet: &[u8]) -> bool {
    let nal_type = |nal: &[u8], hevc: bool| nal.first().map(|b| if hevc { (b >> 1) & 0x3F } else { b & 0x1F });
    match codec {
        "h264" => nal_units(packet, h264_format(extradata)).iter().any(|nal| nal_type(nal, false) == Some(H264_IDR)),
        "hevc" => {
            let format = NalFormat::of_extradata(extradata);
            nal_units(packet, format).iter().any(|nal| nal_type(nal, true).is_some_and(|t| HEVC_IRAP.contains(&t)))
        }
        _ => false,
    }
}

/// How an H.264 stream's packets frame their NAL units: an `avcC` record (version 1) names the
/// size of the lengths in its fifth byte (Matroska, MP4); anything else is start codes.
fn h264_format(extradata: &[u8]) -> NalFormat {
    match extradata {
        [1, _, _, _, sizes, ..] => NalFormat::Length(usize::from(sizes & 3) + 1),
        _ => NalFormat::AnnexB,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `avcC` record with 4-byte lengths, and one with 2-byte lengths.
    const AVCC4: [u8; 7] = [1, 0x64, 0, 0x1f, 0xff, 0xe1, 0];
    const AVCC2: [u8; 7] = [1, 0x64, 0, 0x1f, 0xfd, 0xe1, 0];

    /// A packet of NAL units, each after a length of `size` bytes.
    fn framed(size: usize, nals: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for nal in nals {
            out.extend_from_slice(&nal.len().to_be_bytes()[8 - size..]);
            out.extend_from_slice(nal);
        }
        out
    }

    /// An `hvcC` record (23 bytes and more) with 4-byte lengths.
    fn hvcc() -> Vec<u8> {
        let mut h = vec![0u8; 23];
        h[0] = 1;
        h[21] = 0x0f;
        h
    }

    /// An HEVC NAL unit of type `t`, two-byte header then a body.
    fn hevc_nal(t: u8) -> Vec<u8> {
        vec![t << 1, 1, 0xaf, 0x80]
    }

    #[test]
    fn an_h264_idr_is_a_clean_start_and_other_pictures_are_not() {
        // SEI (6) then an IDR slice (nal_ref_idc 3: 0x65), as x264 writes its keyframes.
        let idr = framed(4, &[&[0x06, 5, 1, 0], &[0x65, 0x88, 0x84]]);
        assert!(clean_start("h264", &AVCC4, &idr));
        // An I slice that is no IDR (type 1, x264's open-GOP keyframe with a recovery
        // point SEI), a P slice, and an empty packet.
        let open = framed(4, &[&[0x06, 6, 1, 0], &[0x41, 0x9a]]);
        assert!(!clean_start("h264", &AVCC4, &open));
        assert!(!clean_start("h264", &AVCC4, &framed(4, &[&[0x21, 0x9a]])));
        assert!(!clean_start("h264", &AVCC4, &[]));
        // 2-byte lengths, and start codes (no avcC: raw H.264 or MPEG-TS).
        assert!(clean_start("h264", &AVCC2, &framed(2, &[&[0x65, 0x88]])));
        assert!(clean_start("h264", &[], &[0, 0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x65, 0x88]));
        assert!(!clean_start("h264", &[], &[0, 0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x41, 0x9a]));
        // A length that runs past the packet reads no unit after it.
        assert!(!clean_start("h264", &AVCC4, &[0, 0, 0, 9, 0x65, 0x88]));
    }

    #[test]
    fn an_hevc_irap_is_a_clean_start_and_other_pictures_are_not() {
        let h = hvcc();
        for t in 0u8..64 {
            let packet = framed(4, &[&hevc_nal(35), &hevc_nal(39), &hevc_nal(t)]);
            assert_eq!(clean_start("hevc", &h, &packet), (16..=21).contains(&t), "NAL type {t}");
        }
        // Start codes (no hvcC).
        let mut annex_b = vec![0, 0, 0, 1];
        annex_b.extend(hevc_nal(19));
        assert!(clean_start("hevc", &[], &annex_b));
    }

    #[test]
    fn other_codecs_are_never_taken_for_clean() {
        for codec in ["mpeg2video", "vp9", "av1", "mpeg4", ""] {
            assert!(!clean_start(codec, &AVCC4, &framed(4, &[&[0x65, 0x88]])), "{codec}");
        }
    }
}
