//! Audio made for a stream plan (issue 37, `condense::media::stream_plan`), beside the video
//! (`audio_ahead`) or in the mux's pass where that file is missing: a source
//! track decoded and encoded again with FFmpeg's own encoder (`convert`, its channel layout
//! kept: 5.1 stays 5.1), or a stereo downmix of it (`add`, by libswresample). Packets come
//! out in the encoder's time base (1 / sample rate), timed from the source's first frame on,
//! so the track keeps its place against the video.

use std::ffi::CString;

use rsmpeg::avcodec::{AVCodec, AVCodecContext, AVCodecParameters, AVPacket};
use rsmpeg::avutil::AVFrame;
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use crate::error::from_rsmpeg;
use condense::media::MediaError;

/// FFmpeg's encoder for a planned audio codec: its own AAC and E-AC-3 encoders, libopus for
/// Opus (FFmpeg 5.1's native `opus` encoder is experimental and stereo only; libopus writes
/// the channel mapping family MP4 and Matroska need for more than two channels).
fn encoder_name(codec: &str) -> Result<&'static str, MediaError> {
    match codec {
        "aac" => Ok("aac"),
        "opus" | "libopus" => Ok("libopus"),
        "eac3" => Ok("eac3"),
        other => Err(MediaError::invalid(format!("no audio encoder for {other}"))),
    }
}

/// A source audio track decoded, resampled to what the encoder takes, and encoded.
pub struct AudioEncode {
    decoder: AVCodecContext,
    encoder: AVCodecContext,
    resampler: *mut ffi::SwrContext,
    fifo: *mut ffi::AVAudioFifo,
    /// The source stream's time base.
    source_tb: ffi::AVRational,
    /// The next frame's pts, in the encoder's time base; set by the first decoded frame.
    next_pts: Option<i64>,
}

impl Drop for AudioEncode {
    fn drop(&mut self) {
        // SAFETY: both were allocated by FFmpeg in `open` and are freed once, here.
        unsafe {
            ffi::swr_free(&mut self.resampler);
            if !self.fifo.is_null() {
                ffi::av_audio_fifo_free(self.fifo);
            }
        }
    }
}

impl AudioEncode {
    /// The encoder for `codec` at `bit_rate` (bits per second) over the source stream with
    /// parameters `par` and time base `source_tb`; `stereo` downmixes to two channels.
    pub fn open(
        par: &AVCodecParameters,
        source_tb: ffi::AVRational,
        codec: &str,
        bit_rate: Option<u64>,
        stereo: bool,
    ) -> Result<Self, MediaError> {
        let err = |what: &str, e: &RsmpegError| from_rsmpeg(what, e);
        let dec = AVCodec::find_decoder(par.codec_id).ok_or_else(|| MediaError::invalid("no decoder for the audio"))?;
        let mut decoder = crate::context::codec_context(&dec)?;
        decoder.apply_codecpar(par).map_err(|e| err("audio decoder parameters", &e))?;
        // SAFETY: a plain field write before opening.
        unsafe { decoder.deref_mut().pkt_timebase = source_tb };
        decoder.open(None).map_err(|e| err("opening the audio decoder", &e))?;

        let name = CString::new(encoder_name(codec)?).map_err(|_| MediaError::misc("NUL in a codec name"))?;
        let enc = AVCodec::find_encoder_by_name(&name)
            .ok_or_else(|| MediaError::invalid(format!("FFmpeg has no {codec} encoder")))?;
        let mut encoder = crate::context::codec_context(&enc)?;
        let sample_fmt =
            enc.sample_fmts().and_then(|f| f.first().copied()).unwrap_or(ffi::AVSampleFormat_AV_SAMPLE_FMT_FLTP);
        let source_rate = if par.sample_rate > 0 { par.sample_rate } else { 48000 };
        let sample_rate = match enc.supported_samplerates() {
            Some(rates) if !rates.contains(&source_rate) => {
                if rates.contains(&48000) {
                    48000
                } else {
                    rates.first().copied().unwrap_or(48000)
                }
            }
            _ => source_rate,
        };
        // SAFETY: channel layouts are plain structs FFmpeg copies and frees; the encoder's
        // list is static and ends with a zeroed entry; field writes on contexts we own.
        let resampler = unsafe {
            let mut source_layout: ffi::AVChannelLayout = std::mem::zeroed();
            ffi::av_channel_layout_copy(&mut source_layout, &decoder.ch_layout);
            if source_layout.order == ffi::AVChannelOrder_AV_CHANNEL_ORDER_UNSPEC {
                let n = source_layout.nb_channels;
                ffi::av_channel_layout_uninit(&mut source_layout);
                ffi::av_channel_layout_default(&mut source_layout, n);
            }
            let mut out_layout: ffi::AVChannelLayout = std::mem::zeroed();
            if stereo {
                ffi::av_channel_layout_default(&mut out_layout, 2);
            } else {
                ffi::av_channel_layout_copy(&mut out_layout, &source_layout);
            }
            // The encoder's own layout with as many channels where it does not take this one
            // (FFmpeg's AAC encoder writes 5.1 with back, not side, surrounds).
            let mut offered = (*enc.as_ptr()).ch_layouts;
            if !offered.is_null() {
                let mut same_count = None;
                let mut exact = false;
                while (*offered).nb_channels != 0 {
                    if ffi::av_channel_layout_compare(offered, &out_layout) == 0 {
                        exact = true;
                        break;
                    }
                    if same_count.is_none() && (*offered).nb_channels == out_layout.nb_channels {
                        same_count = Some(offered);
                    }
                    offered = offered.add(1);
                }
                match (exact, same_count) {
                    (false, Some(l)) => {
                        ffi::av_channel_layout_uninit(&mut out_layout);
                        ffi::av_channel_layout_copy(&mut out_layout, l);
                    }
                    (false, None) => {
                        ffi::av_channel_layout_uninit(&mut out_layout);
                        ffi::av_channel_layout_uninit(&mut source_layout);
                        return Err(MediaError::invalid(format!(
                            "the {codec} encoder cannot write {} channels",
                            decoder.ch_layout.nb_channels
                        )));
                    }
                    _ => {}
                }
            }
            let raw = encoder.deref_mut();
            ffi::av_channel_layout_copy(&mut raw.ch_layout, &out_layout);
            raw.sample_fmt = sample_fmt;
            raw.sample_rate = sample_rate;
            raw.time_base = ffi::AVRational { num: 1, den: sample_rate };
            let channels = u64::try_from(out_layout.nb_channels.max(1)).unwrap_or(2);
            raw.bit_rate = i64::try_from(bit_rate.unwrap_or(channels * 128_000)).unwrap_or(i64::MAX);
            // Headers in the codec parameters, as MP4 and Matroska keep them.
            raw.flags |= ffi::AV_CODEC_FLAG_GLOBAL_HEADER as i32;
            let mut swr: *mut ffi::SwrContext = std::ptr::null_mut();
            let ret = ffi::swr_alloc_set_opts2(
                &mut swr,
                &mut out_layout,
                sample_fmt,
                sample_rate,
                &mut source_layout,
                decoder.sample_fmt,
                decoder.sample_rate,
                0,
                std::ptr::null_mut(),
            );
            ffi::av_channel_layout_uninit(&mut out_layout);
            ffi::av_channel_layout_uninit(&mut source_layout);
            if ret < 0 || swr.is_null() || ffi::swr_init(swr) < 0 {
                ffi::swr_free(&mut swr);
                return Err(MediaError::misc("cannot set up the audio resampler"));
            }
            swr
        };
        let mut this =
            AudioEncode { decoder, encoder, resampler, fifo: std::ptr::null_mut(), source_tb, next_pts: None };
        this.encoder.open(None).map_err(|e| err("opening the audio encoder", &e))?;
        // SAFETY: allocates a FIFO of the encoder's sample format and channels.
        this.fifo =
            unsafe { ffi::av_audio_fifo_alloc(this.encoder.sample_fmt, this.encoder.ch_layout.nb_channels, 4096) };
        if this.fifo.is_null() {
            return Err(MediaError::misc("out of memory"));
        }
        Ok(this)
    }

    /// The output stream's parameters.
    pub fn codecpar(&self) -> AVCodecParameters {
        self.encoder.extract_codecpar()
    }

    /// The time base of the packets `push` and `finish` answer.
    pub fn time_base(&self) -> ffi::AVRational {
        self.encoder.time_base
    }

    /// Takes one source packet; answers the encoded packets it completes.
    pub fn push(&mut self, packet: &AVPacket) -> Result<Vec<AVPacket>, MediaError> {
        match self.decoder.send_packet(Some(packet)) {
            Ok(()) | Err(RsmpegError::DecoderFullError) => {}
            // A damaged packet is skipped, as a player would.
            Err(RsmpegError::SendPacketError(ffi::AVERROR_INVALIDDATA)) => return Ok(Vec::new()),
            Err(e) => return Err(from_rsmpeg("decoding the audio", &e)),
        }
        let mut out = Vec::new();
        self.drain_decoder(&mut out)?;
        Ok(out)
    }

    /// Ends the track: what the decoder, resampler and encoder still hold.
    pub fn finish(&mut self) -> Result<Vec<AVPacket>, MediaError> {
        let mut out = Vec::new();
        let _ = self.decoder.send_packet(None);
        self.drain_decoder(&mut out)?;
        self.resample(None)?;
        self.encode_fifo(true, &mut out)?;
        match self.encoder.send_frame(None) {
            Ok(()) | Err(RsmpegError::EncoderFlushedError) => {}
            Err(e) => return Err(from_rsmpeg("ending the audio", &e)),
        }
        self.drain_encoder(&mut out)?;
        Ok(out)
    }

    fn drain_decoder(&mut self, out: &mut Vec<AVPacket>) -> Result<(), MediaError> {
        loop {
            match self.decoder.receive_frame() {
                Ok(frame) => {
                    if self.next_pts.is_none() {
                        let ts = frame.best_effort_timestamp;
                        let at = if ts == ffi::AV_NOPTS_VALUE { 0 } else { ts };
                        // SAFETY: pure arithmetic.
                        self.next_pts = Some(unsafe { ffi::av_rescale_q(at, self.source_tb, self.encoder.time_base) });
                    }
                    self.resample(Some(&frame))?;
                    self.encode_fifo(false, out)?;
                }
                Err(RsmpegError::DecoderDrainError | RsmpegError::DecoderFlushedError) => return Ok(()),
                Err(RsmpegError::ReceiveFrameError(ffi::AVERROR_INVALIDDATA)) => continue,
                Err(e) => return Err(from_rsmpeg("decoding the audio", &e)),
            }
        }
    }

    /// Converts `frame` (None: what the resampler still holds) into the FIFO.
    fn resample(&mut self, frame: Option<&AVFrame>) -> Result<(), MediaError> {
        // SAFETY: the resampler and FIFO are ours; the output buffer is sized by
        // swr_get_out_samples and freed at the end of the block.
        unsafe {
            let in_samples = frame.map_or(0, |f| f.nb_samples);
            let room = ffi::swr_get_out_samples(self.resampler, in_samples);
            if room <= 0 {
                return Ok(());
            }
            let channels = self.encoder.ch_layout.nb_channels;
            let mut data: *mut *mut u8 = std::ptr::null_mut();
            if ffi::av_samples_alloc_array_and_samples(
                &mut data,
                std::ptr::null_mut(),
                channels,
                room,
                self.encoder.sample_fmt,
                0,
            ) < 0
            {
                return Err(MediaError::misc("out of memory"));
            }
            let (input, count) = match frame {
                Some(f) => (f.extended_data as *mut *const u8, f.nb_samples),
                None => (std::ptr::null_mut(), 0),
            };
            let made = ffi::swr_convert(self.resampler, data, room, input, count);
            let written = if made > 0 { ffi::av_audio_fifo_write(self.fifo, data.cast(), made) } else { 0 };
            ffi::av_freep(data.cast());
            ffi::av_freep((&mut data as *mut *mut *mut u8).cast());
            if made < 0 || written < made {
                return Err(MediaError::misc("cannot resample the audio"));
            }
        }
        Ok(())
    }

    /// Encodes whole frames from the FIFO (and the last, shorter one when `last`).
    fn encode_fifo(&mut self, last: bool, out: &mut Vec<AVPacket>) -> Result<(), MediaError> {
        let frame_size = if self.encoder.frame_size > 0 { self.encoder.frame_size } else { 1024 };
        let small_last = (self.encoder.codec().capabilities & ffi::AV_CODEC_CAP_SMALL_LAST_FRAME as i32) != 0;
        loop {
            // SAFETY: a query on our FIFO.
            let held = unsafe { ffi::av_audio_fifo_size(self.fifo) };
            if held <= 0 || (held < frame_size && !last) {
                return Ok(());
            }
            let take = held.min(frame_size);
            // Encoders without a short last frame get it padded with silence.
            let size = if small_last { take } else { frame_size };
            let mut frame = AVFrame::new();
            frame.set_format(self.encoder.sample_fmt);
            frame.set_nb_samples(size);
            frame.set_sample_rate(self.encoder.sample_rate);
            // SAFETY: the frame's buffers are sized for `size` samples of the encoder's format
            // and channels; the FIFO reads at most `take` <= `size` samples into them.
            unsafe {
                let raw = frame.deref_mut();
                ffi::av_channel_layout_copy(&mut raw.ch_layout, &self.encoder.ch_layout);
                if ffi::av_frame_get_buffer(raw, 0) < 0 {
                    return Err(MediaError::misc("out of memory"));
                }
                if size > take {
                    ffi::av_samples_set_silence(
                        raw.extended_data,
                        0,
                        size,
                        raw.ch_layout.nb_channels,
                        self.encoder.sample_fmt,
                    );
                }
                if ffi::av_audio_fifo_read(self.fifo, raw.extended_data.cast(), take) < take {
                    return Err(MediaError::misc("cannot read the audio buffer"));
                }
            }
            let pts = self.next_pts.unwrap_or(0);
            frame.set_pts(pts);
            self.next_pts = Some(pts + i64::from(take));
            self.encoder.send_frame(Some(&frame)).map_err(|e| from_rsmpeg("encoding the audio", &e))?;
            self.drain_encoder(out)?;
        }
    }

    fn drain_encoder(&mut self, out: &mut Vec<AVPacket>) -> Result<(), MediaError> {
        loop {
            match self.encoder.receive_packet() {
                Ok(p) => out.push(p),
                Err(RsmpegError::EncoderDrainError | RsmpegError::EncoderFlushedError) => return Ok(()),
                Err(e) => return Err(from_rsmpeg("encoding the audio", &e)),
            }
        }
    }
}
