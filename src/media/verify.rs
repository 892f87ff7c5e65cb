//! Checks an encoded file before it may replace anything: it opens, its video is in the
//! target codec, its streams match the source's, its length matches, and it decodes at
//! several points. An exit code of 0 proves nothing.

use std::path::Path;

use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;

use super::encode::{main_video_index, open_decoder};
use super::probe::{open_input, probe, MediaInfo, StreamKind};
use super::MediaError;

/// Allowed difference of duration: 0.5 s or 1 %, whichever is larger.
pub fn duration_tolerance(source_seconds: f64) -> f64 {
    (source_seconds * 0.01).max(0.5)
}

pub fn verify(output: &Path, source: &MediaInfo, target_codec: &str) -> Result<MediaInfo, MediaError> {
    let fail = |what: String| MediaError::invalid(format!("output verification failed: {what}"));
    let info = probe(output).map_err(|e| fail(e.message))?;
    if info.size_bytes == 0 {
        return Err(fail("the output is empty".into()));
    }
    let video = info.video().ok_or_else(|| fail("no video stream".into()))?;
    if video.codec != target_codec {
        return Err(fail(format!("video is {}, expected {target_codec}", video.codec)));
    }
    for kind in [StreamKind::Audio, StreamKind::Subtitle, StreamKind::Attachment] {
        let (want, got) = (source.count(kind), info.count(kind));
        if want != got {
            return Err(fail(format!("{got} {kind:?} streams, the source has {want}")));
        }
    }
    match (source.duration_seconds, info.duration_seconds) {
        (Some(src), Some(out)) => {
            let tolerance = duration_tolerance(src);
            if (src - out).abs() > tolerance {
                return Err(fail(format!(
                    "duration {out:.2} s, the source has {src:.2} s (tolerance {tolerance:.2} s)"
                )));
            }
        }
        // An output whose length is unknown (e.g. a garbage timestamp carried over from a
        // damaged source) could be any length, and the decode check below would only look
        // at its start.
        (Some(src), None) => return Err(fail(format!("the output has no duration; the source has {src:.2} s"))),
        (None, _) => {}
    }
    decode_at_points(output, info.duration_seconds.unwrap_or(0.0)).map_err(|e| fail(e.message))?;
    Ok(info)
}

/// Decodes at least one video frame at the start, 25 %, 50 %, 75 % and near the end.
pub fn decode_at_points(path: &Path, duration: f64) -> Result<(), MediaError> {
    let mut input = open_input(path)?;
    let vi = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let mut decoder = open_decoder(&input, vi)?;
    let points = [0.0, 0.25, 0.5, 0.75, 0.95];
    for point in points {
        let target = (duration * point * f64::from(ffi::AV_TIME_BASE)) as i64;
        // SAFETY: seeking an input we own; -1 selects the default stream and AV_TIME_BASE units.
        let ret = unsafe {
            ffi::avformat_seek_file(input.as_mut_ptr(), -1, i64::MIN, target, target, ffi::AVSEEK_FLAG_BACKWARD as i32)
        };
        if ret < 0 && point > 0.0 {
            return Err(MediaError::invalid(format!("cannot seek to {:.0} %", point * 100.0)));
        }
        // SAFETY: resets the decoder after a seek.
        unsafe { ffi::avcodec_flush_buffers(decoder.as_mut_ptr()) };
        let mut decoded = false;
        let mut packets = 0;
        while !decoded && packets < 2000 {
            let packet = match input.read_packet() {
                Ok(Some(p)) => p,
                Ok(None) => {
                    let _ = decoder.send_packet(None);
                    decoded = decoder.receive_frame().is_ok();
                    break;
                }
                Err(e) => return Err(MediaError::invalid(format!("read error: {e}"))),
            };
            if packet.stream_index as usize != vi {
                continue;
            }
            packets += 1;
            decoder.send_packet(Some(&packet)).map_err(|e| MediaError::invalid(format!("decode error: {e}")))?;
            match decoder.receive_frame() {
                Ok(_) => decoded = true,
                Err(RsmpegError::DecoderDrainError) => {}
                Err(e) => return Err(MediaError::invalid(format!("decode error: {e}"))),
            }
        }
        if !decoded {
            return Err(MediaError::invalid(format!("no frame decodes at {:.0} %", point * 100.0)));
        }
    }
    Ok(())
}

/// Validation of a source before any work: it opens, has a video stream with a decoder,
/// and decodes at several points (this catches truncated files whose header promises more).
pub fn validate_source(path: &Path) -> Result<MediaInfo, MediaError> {
    let info = probe(path)?;
    if info.video().is_none() {
        return Err(MediaError::invalid("no video stream"));
    }
    // Without a duration nothing can be checked against it: random bytes that FFmpeg's
    // probing takes for a raw stream would be "encoded" and replace the file.
    let Some(duration) = info.duration_seconds.filter(|d| *d > 0.0) else {
        return Err(MediaError::invalid(format!(
            "its length cannot be determined (read as {}): not a complete media file",
            info.container
        )));
    };
    decode_at_points(path, duration)?;
    Ok(info)
}
