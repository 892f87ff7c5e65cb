//! Text subtitles converted in the mux's one pass (issue 37): MP4 cannot hold SubRip or ASS,
//! so a plan to MP4 converts them to `mov_text`, as the ffmpeg program does: each event
//! decoded to its text and encoded again, at the same time and for as long.

use std::ffi::CString;

use rsmpeg::avcodec::{AVCodec, AVCodecContext, AVCodecParameters, AVPacket};
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use crate::error::from_rsmpeg;
use condense::media::MediaError;

/// Room for one encoded event; FFmpeg's own program uses the same.
const EVENT_BYTES: usize = 1 << 20;

/// A text subtitle track decoded and encoded again to `codec`.
pub struct SubtitleEncode {
    decoder: AVCodecContext,
    encoder: AVCodecContext,
}

impl SubtitleEncode {
    pub fn open(par: &AVCodecParameters, source_tb: ffi::AVRational, codec: &str) -> Result<Self, MediaError> {
        let dec =
            AVCodec::find_decoder(par.codec_id).ok_or_else(|| MediaError::invalid("no decoder for the subtitles"))?;
        let mut decoder = crate::context::codec_context(&dec)?;
        decoder.apply_codecpar(par).map_err(|e| from_rsmpeg("subtitle decoder parameters", &e))?;
        // SAFETY: a plain field write before opening.
        unsafe { decoder.deref_mut().pkt_timebase = source_tb };
        decoder.open(None).map_err(|e| from_rsmpeg("opening the subtitle decoder", &e))?;
        let name = CString::new(codec).map_err(|_| MediaError::misc("NUL in a codec name"))?;
        let enc = AVCodec::find_encoder_by_name(&name)
            .ok_or_else(|| MediaError::invalid(format!("FFmpeg has no {codec} subtitle encoder")))?;
        let mut encoder = crate::context::codec_context(&enc)?;
        // SAFETY: the encoder takes the decoder's ASS header (a copy it frees with the
        // context, allocated with av_malloc); field writes before opening.
        unsafe {
            let raw = encoder.deref_mut();
            raw.time_base = source_tb;
            let header = decoder.subtitle_header;
            let size = usize::try_from(decoder.subtitle_header_size).unwrap_or(0);
            if !header.is_null() && size > 0 {
                let copy = ffi::av_mallocz(size + 1).cast::<u8>();
                if copy.is_null() {
                    return Err(MediaError::misc("out of memory"));
                }
                std::ptr::copy_nonoverlapping(header, copy, size);
                raw.subtitle_header = copy;
                raw.subtitle_header_size = decoder.subtitle_header_size;
            }
        }
        encoder.open(None).map_err(|e| from_rsmpeg("opening the subtitle encoder", &e))?;
        Ok(SubtitleEncode { decoder, encoder })
    }

    pub fn codecpar(&self) -> AVCodecParameters {
        self.encoder.extract_codecpar()
    }

    pub fn time_base(&self) -> ffi::AVRational {
        self.encoder.time_base
    }

    /// Takes one source packet; answers the converted event, if it holds one.
    pub fn push(&mut self, packet: &AVPacket) -> Result<Option<AVPacket>, MediaError> {
        let tb = self.encoder.time_base;
        // SAFETY: the subtitle is zeroed, filled by the decoder and freed below; the buffer
        // is ours, sized EVENT_BYTES, and its bytes copied into the packet.
        unsafe {
            let mut sub: ffi::AVSubtitle = std::mem::zeroed();
            let mut got = 0;
            let ret =
                ffi::avcodec_decode_subtitle2(self.decoder.as_mut_ptr(), &mut sub, &mut got, packet.as_ptr() as *mut _);
            if ret < 0 || got == 0 {
                return Ok(None);
            }
            // As the ffmpeg program: the event starts at its pts, for its display time.
            let ms = ffi::AVRational { num: 1, den: 1000 };
            let start = if sub.pts != ffi::AV_NOPTS_VALUE {
                sub.pts + ffi::av_rescale_q(i64::from(sub.start_display_time), ms, ffi::AV_TIME_BASE_Q)
            } else {
                ffi::av_rescale_q(packet.pts, tb, ffi::AV_TIME_BASE_Q)
            };
            let shown = i64::from(sub.end_display_time.saturating_sub(sub.start_display_time));
            sub.end_display_time -= sub.start_display_time;
            sub.start_display_time = 0;
            let mut buf = vec![0u8; EVENT_BYTES];
            let size =
                ffi::avcodec_encode_subtitle(self.encoder.as_mut_ptr(), buf.as_mut_ptr(), EVENT_BYTES as i32, &sub);
            ffi::avsubtitle_free(&mut sub);
            if size < 0 {
                return Err(MediaError::misc("cannot convert a subtitle event"));
            }
            buf.truncate(usize::try_from(size).unwrap_or(0));
            let mut out = AVPacket::new();
            if ffi::av_new_packet(out.as_mut_ptr(), size) < 0 {
                return Err(MediaError::misc("out of memory"));
            }
            std::ptr::copy_nonoverlapping(buf.as_ptr(), out.data, buf.len());
            let pts = ffi::av_rescale_q(start, ffi::AV_TIME_BASE_Q, tb);
            out.set_pts(pts);
            out.set_dts(pts);
            out.set_duration(if shown > 0 { ffi::av_rescale_q(shown, ms, tb) } else { packet.duration });
            Ok(Some(out))
        }
    }
}
