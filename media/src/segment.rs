//! The segment file: the encoder's packets exactly as produced (pts, dts, duration, flags,
//! data), with no container in between. Containers rebuild decode timestamps their own way;
//! segments of separate encoder sessions only join cleanly with the encoder's own.
//! Layout: the magic line, then records of
//! `pts i64 | dts i64 | duration i64 | flags i32 | size u32 | data`, little-endian.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use condense::media::codec_params::{hex, CodecParams};
use condense::media::MediaError;
use rsmpeg::avcodec::{AVCodecContext, AVCodecParameters, AVPacket};
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

const MAGIC: &[u8; 8] = b"CNDSEG1\n";

pub struct SegmentFile {
    writer: BufWriter<std::fs::File>,
}

impl SegmentFile {
    pub fn create(path: &Path) -> Result<Self, MediaError> {
        let file = std::fs::File::create(path).map_err(|e| MediaError::from_io("creating a segment", &e))?;
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        writer.write_all(MAGIC).map_err(|e| MediaError::from_io("writing a segment", &e))?;
        Ok(SegmentFile { writer })
    }

    pub fn write(&mut self, packet: &AVPacket) -> Result<(), MediaError> {
        self.write_with(packet, packet_data(packet))
    }

    /// Writes the packet's timing and flags with `data` in place of its own bytes.
    pub fn write_with(&mut self, packet: &AVPacket, data: &[u8]) -> Result<(), MediaError> {
        let io = |e: std::io::Error| MediaError::from_io("writing a segment", &e);
        let w = &mut self.writer;
        w.write_all(&packet.pts.to_le_bytes()).map_err(io)?;
        w.write_all(&packet.dts.to_le_bytes()).map_err(io)?;
        w.write_all(&packet.duration.to_le_bytes()).map_err(io)?;
        w.write_all(&packet.flags.to_le_bytes()).map_err(io)?;
        w.write_all(&(data.len() as u32).to_le_bytes()).map_err(io)?;
        w.write_all(data).map_err(io)
    }

    /// Flushes and fsyncs the file.
    pub fn finish(self) -> Result<(), MediaError> {
        let io = |e: std::io::Error| MediaError::from_io("closing a segment", &e);
        let file = self.writer.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)
    }
}

/// The bytes a packet holds.
pub fn packet_data(packet: &AVPacket) -> &[u8] {
    // SAFETY: the packet's data pointer holds `size` bytes while the packet lives.
    unsafe {
        if packet.data.is_null() || packet.size <= 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(packet.data, packet.size as usize)
        }
    }
}

pub struct SegmentPackets {
    reader: BufReader<std::fs::File>,
}

impl SegmentPackets {
    pub fn open(path: &Path) -> Result<Self, MediaError> {
        let file = std::fs::File::open(path).map_err(|e| MediaError::from_io("opening a segment", &e))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut magic = [0u8; 8];
        reader.read_exact(&mut magic).map_err(|_| MediaError::misc(format!("{} is not a segment", path.display())))?;
        if &magic != MAGIC {
            return Err(MediaError::misc(format!("{} is not a segment", path.display())));
        }
        Ok(SegmentPackets { reader })
    }

    /// The next packet, or None at the end of the file.
    pub fn next_packet(&mut self) -> Result<Option<AVPacket>, MediaError> {
        let mut head = [0u8; 32];
        match self.reader.read_exact(&mut head[..1]) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(MediaError::from_io("reading a segment", &e)),
        }
        let bad = |_| MediaError::misc("a segment ends in the middle of a packet");
        self.reader.read_exact(&mut head[1..]).map_err(bad)?;
        let i64_at = |o: usize| head.get(o..o + 8).and_then(|b| b.try_into().ok()).map_or(0, i64::from_le_bytes);
        let flags = i32::from_le_bytes(head[24..28].try_into().unwrap_or([0; 4]));
        let size = u32::from_le_bytes(head[28..32].try_into().unwrap_or([0; 4]));
        let mut packet = AVPacket::new();
        // SAFETY: av_new_packet allocates `size` bytes (plus padding) owned by the packet.
        unsafe {
            if ffi::av_new_packet(packet.as_mut_ptr(), size as i32) < 0 {
                return Err(MediaError::misc("out of memory reading a segment"));
            }
            let data = std::slice::from_raw_parts_mut(packet.deref_mut().data, size as usize);
            self.reader.read_exact(data).map_err(bad)?;
        }
        packet.set_pts(i64_at(0));
        packet.set_dts(i64_at(8));
        packet.set_duration(i64_at(16));
        packet.set_flags(flags);
        Ok(Some(packet))
    }
}

/// FFmpeg's side of `CodecParams`: read off an open encoder, turned back into stream
/// parameters for the mux.
pub trait CodecParamsExt {
    fn of(encoder: &AVCodecContext) -> Self;
    fn time_base(&self) -> ffi::AVRational;
    fn to_codecpar(&self) -> Result<AVCodecParameters, MediaError>;
}

impl CodecParamsExt for CodecParams {
    fn of(encoder: &AVCodecContext) -> Self {
        let p = encoder.extract_codecpar();
        // SAFETY: extradata holds extradata_size bytes when not null.
        let extradata = unsafe {
            if p.extradata.is_null() || p.extradata_size <= 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p.extradata, p.extradata_size as usize).to_vec()
            }
        };
        CodecParams {
            codec_id: p.codec_id,
            width: p.width,
            height: p.height,
            format: p.format,
            profile: p.profile,
            level: p.level,
            color_range: p.color_range,
            color_primaries: p.color_primaries,
            color_trc: p.color_trc,
            color_space: p.color_space,
            chroma_location: p.chroma_location,
            sample_aspect_ratio: [p.sample_aspect_ratio.num, p.sample_aspect_ratio.den],
            video_delay: p.video_delay,
            extradata: hex(&extradata),
            time_base: [encoder.time_base.num, encoder.time_base.den],
        }
    }

    fn time_base(&self) -> ffi::AVRational {
        ffi::AVRational { num: self.time_base[0], den: self.time_base[1] }
    }

    fn to_codecpar(&self) -> Result<AVCodecParameters, MediaError> {
        let extradata = self.extradata_bytes().ok_or_else(|| MediaError::misc("bad extradata in the manifest"))?;
        let mut par = AVCodecParameters::new();
        // SAFETY: field writes on parameters we own; extradata is allocated with av_mallocz
        // plus FFmpeg's padding and freed by avcodec_parameters_free.
        unsafe {
            let raw = par.deref_mut();
            raw.codec_type = ffi::AVMediaType_AVMEDIA_TYPE_VIDEO;
            raw.codec_id = self.codec_id;
            raw.width = self.width;
            raw.height = self.height;
            raw.format = self.format;
            raw.profile = self.profile;
            raw.level = self.level;
            raw.color_range = self.color_range;
            raw.color_primaries = self.color_primaries;
            raw.color_trc = self.color_trc;
            raw.color_space = self.color_space;
            raw.chroma_location = self.chroma_location;
            raw.sample_aspect_ratio =
                ffi::AVRational { num: self.sample_aspect_ratio[0], den: self.sample_aspect_ratio[1] };
            raw.video_delay = self.video_delay;
            if !extradata.is_empty() {
                let buf = ffi::av_mallocz(extradata.len() + ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize).cast::<u8>();
                if buf.is_null() {
                    return Err(MediaError::misc("out of memory"));
                }
                std::ptr::copy_nonoverlapping(extradata.as_ptr(), buf, extradata.len());
                raw.extradata = buf;
                raw.extradata_size = extradata.len() as i32;
            }
        }
        Ok(par)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_round_trip_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.seg");
        let mut file = SegmentFile::create(&path).unwrap();
        for (i, payload) in [&b"abc"[..], &b""[..], &[7u8; 5000][..]].iter().enumerate() {
            let mut p = AVPacket::new();
            unsafe {
                assert_eq!(ffi::av_new_packet(p.as_mut_ptr(), payload.len() as i32), 0);
                std::ptr::copy_nonoverlapping(payload.as_ptr(), p.deref_mut().data, payload.len());
            }
            p.set_pts(100 + i as i64);
            p.set_dts(-2 + i as i64);
            p.set_duration(40);
            p.set_flags(i as i32 % 2);
            file.write(&p).unwrap();
        }
        file.finish().unwrap();
        let mut reader = SegmentPackets::open(&path).unwrap();
        let mut seen = Vec::new();
        while let Some(p) = reader.next_packet().unwrap() {
            let data = unsafe { std::slice::from_raw_parts(p.data, p.size as usize).to_vec() };
            seen.push((p.pts, p.dts, p.duration, p.flags, data.len(), data.first().copied()));
        }
        assert_eq!(seen, [(100, -2, 40, 0, 3, Some(b'a')), (101, -1, 40, 1, 0, None), (102, 0, 40, 0, 5000, Some(7))]);
    }

    #[test]
    fn a_cut_segment_is_an_error_not_a_short_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.seg");
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[1u8; 20]);
        std::fs::write(&path, bytes).unwrap();
        let mut reader = SegmentPackets::open(&path).unwrap();
        assert!(reader.next_packet().is_err());
        std::fs::write(&path, b"garbage!").unwrap();
        assert!(SegmentPackets::open(&path).is_err());
    }
}
