//! Joins the encoded video segments with every other stream of the source (audio,
//! subtitles, attachments copied as they are), chapters and metadata, into the output file.
//! Packets from the two sides are written in timestamp order, so memory stays flat.

use std::ffi::CString;
use std::path::Path;

use rsmpeg::avcodec::AVPacket;
use rsmpeg::avformat::{AVFormatContextInput, AVFormatContextOutput};
use rsmpeg::avutil::AVDictionary;
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use super::encode::main_video_index;
use super::error::from_rsmpeg;
use super::manifest::Manifest;
use super::plan::EncodePlan;
use super::probe::{open_input, HdrKind, MediaInfo};
use super::segment::SegmentPackets;
use super::MediaError;

const fn mktag(a: u8, b: u8, c: u8, d: u8) -> u32 {
    (a as u32) | ((b as u32) << 8) | ((c as u32) << 16) | ((d as u32) << 24)
}

/// Reads the video packets of all segments in order.
struct SegmentReader<'a> {
    dir: &'a Path,
    manifest: &'a Manifest,
    next: usize,
    current: Option<SegmentPackets>,
    time_base: ffi::AVRational,
}

impl SegmentReader<'_> {
    /// Next packet and the time base it is in.
    fn next_packet(&mut self) -> Result<Option<(AVPacket, ffi::AVRational)>, MediaError> {
        loop {
            if self.current.is_none() {
                let Some(seg) = self.manifest.segments.get(self.next) else { return Ok(None) };
                self.next += 1;
                self.current = Some(SegmentPackets::open(&self.dir.join(&seg.file))?);
            }
            let Some(reader) = self.current.as_mut() else { return Ok(None) };
            match reader.next_packet()? {
                Some(p) => return Ok(Some((p, self.time_base))),
                None => self.current = None,
            }
        }
    }
}

fn ts_of(p: &AVPacket) -> i64 {
    if p.dts != ffi::AV_NOPTS_VALUE {
        p.dts
    } else {
        p.pts
    }
}

fn mastering_side_data(info: &MediaInfo) -> Option<(*mut u8, usize)> {
    let m = info.hdr.mastering_display?;
    // SAFETY: allocates a zeroed struct with av_malloc; ownership passes to the stream.
    unsafe {
        let md = ffi::av_mastering_display_metadata_alloc();
        if md.is_null() {
            return None;
        }
        let c = |v: f64| ffi::AVRational { num: (v * 50000.0).round() as i32, den: 50000 };
        let l = |v: f64| ffi::AVRational { num: (v * 10000.0).round() as i32, den: 10000 };
        (*md).display_primaries =
            [[c(m.red[0]), c(m.red[1])], [c(m.green[0]), c(m.green[1])], [c(m.blue[0]), c(m.blue[1])]];
        (*md).white_point = [c(m.white_point[0]), c(m.white_point[1])];
        (*md).min_luminance = l(m.min_luminance);
        (*md).max_luminance = l(m.max_luminance);
        (*md).has_primaries = 1;
        (*md).has_luminance = 1;
        Some((md.cast::<u8>(), std::mem::size_of::<ffi::AVMasteringDisplayMetadata>()))
    }
}

fn light_side_data(info: &MediaInfo) -> Option<(*mut u8, usize)> {
    let c = info.hdr.content_light?;
    let mut size: usize = 0;
    // SAFETY: as above.
    unsafe {
        let cl = ffi::av_content_light_metadata_alloc(&mut size);
        if cl.is_null() {
            return None;
        }
        (*cl).MaxCLL = c.max_cll;
        (*cl).MaxFALL = c.max_fall;
        Some((cl.cast::<u8>(), size))
    }
}

/// Copies chapters and global metadata from `input` to `output`.
fn copy_chapters_and_metadata(input: &AVFormatContextInput, output: &mut AVFormatContextOutput) {
    // SAFETY: chapters are allocated with av_mallocz and appended with av_dynarray_add,
    // as libavformat expects; avformat_free_context frees them with the context.
    unsafe {
        let out = output.deref_mut();
        ffi::av_dict_copy(&mut out.metadata, input.metadata, 0);
        for i in 0..input.nb_chapters as usize {
            let src = *input.chapters.add(i);
            let ch = ffi::av_mallocz(std::mem::size_of::<ffi::AVChapter>()).cast::<ffi::AVChapter>();
            if ch.is_null() {
                return;
            }
            (*ch).id = (*src).id;
            (*ch).time_base = (*src).time_base;
            (*ch).start = (*src).start;
            (*ch).end = (*src).end;
            ffi::av_dict_copy(&mut (*ch).metadata, (*src).metadata, 0);
            ffi::av_dynarray_add(
                (&mut out.chapters as *mut *mut *mut ffi::AVChapter).cast(),
                (&mut out.nb_chapters as *mut u32).cast(),
                ch.cast(),
            );
        }
    }
}

pub fn mux(plan: &EncodePlan, info: &MediaInfo, manifest: &Manifest, output_path: &Path) -> Result<(), MediaError> {
    let mut source = open_input(&plan.input)?;
    let vi = main_video_index(&source).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let params = manifest.video.as_ref().ok_or_else(|| MediaError::misc("no encoded segment"))?;
    let video_par = params.to_codecpar()?;

    let _ = std::fs::remove_file(output_path);
    let url = CString::new(output_path.to_string_lossy().as_bytes()).map_err(|_| MediaError::misc("NUL in path"))?;
    let mut output = AVFormatContextOutput::create(&url, None).map_err(|e| from_rsmpeg("creating the output", &e))?;
    let mp4_family = matches!(plan.output_extension.as_str(), "mp4" | "m4v" | "mov");

    // Map each source stream to an output stream (or None when it cannot be carried).
    let mut map: Vec<Option<usize>> = Vec::new();
    let mut source_tbs = Vec::new();
    for (i, stream) in source.streams().into_iter().enumerate() {
        source_tbs.push(stream.time_base);
        let par = stream.codecpar();
        let kind = par.codec_type;
        let carried = i == vi
            || kind == ffi::AVMediaType_AVMEDIA_TYPE_AUDIO
            || kind == ffi::AVMediaType_AVMEDIA_TYPE_SUBTITLE
            || kind == ffi::AVMediaType_AVMEDIA_TYPE_ATTACHMENT
            || (kind == ffi::AVMediaType_AVMEDIA_TYPE_VIDEO
                && stream.disposition & ffi::AV_DISPOSITION_ATTACHED_PIC as i32 != 0);
        if !carried {
            tracing::info!(stream = i, "data stream not carried to the output");
            map.push(None);
            continue;
        }
        let codec_id = if i == vi { video_par.codec_id } else { par.codec_id };
        // SAFETY: query on the output's static format description.
        let fits =
            unsafe { ffi::avformat_query_codec(output.oformat().as_ptr(), codec_id, ffi::FF_COMPLIANCE_NORMAL as i32) };
        if fits == 0 {
            // SAFETY: static name string.
            let name = unsafe { std::ffi::CStr::from_ptr(ffi::avcodec_get_name(codec_id)) }.to_string_lossy();
            return Err(MediaError::new(
                crate::domain::job::FailureCode::UnsupportedCodec,
                format!("stream {i} ({name}) cannot be stored in .{}", plan.output_extension),
            ));
        }
        let mut out_stream = output.new_stream();
        let mut new_par = if i == vi { video_par.clone() } else { par.clone() };
        // SAFETY: plain field writes on parameters we own.
        unsafe {
            let raw = new_par.deref_mut();
            raw.codec_tag = 0;
            if i == vi && mp4_family && raw.codec_id == ffi::AVCodecID_AV_CODEC_ID_HEVC {
                raw.codec_tag = mktag(b'h', b'v', b'c', b'1');
            }
        }
        out_stream.set_codecpar(new_par);
        out_stream.set_time_base(stream.time_base);
        // SAFETY: copying metadata and disposition into the stream we just created.
        unsafe {
            let raw = out_stream.deref_mut();
            ffi::av_dict_copy(&mut raw.metadata, stream.metadata, 0);
            raw.disposition = stream.disposition;
            raw.avg_frame_rate = stream.avg_frame_rate;
            raw.r_frame_rate = stream.r_frame_rate;
            if i == vi && matches!(plan.hdr, HdrKind::Hdr10 | HdrKind::Hdr10Plus) {
                for (kind, data) in [
                    (ffi::AVPacketSideDataType_AV_PKT_DATA_MASTERING_DISPLAY_METADATA, mastering_side_data(info)),
                    (ffi::AVPacketSideDataType_AV_PKT_DATA_CONTENT_LIGHT_LEVEL, light_side_data(info)),
                ] {
                    if let Some((ptr, size)) = data {
                        if ffi::av_stream_add_side_data(raw, kind, ptr, size) < 0 {
                            ffi::av_free(ptr.cast());
                        }
                    }
                }
            }
        }
        map.push(Some(out_stream.index as usize));
    }
    copy_chapters_and_metadata(&source, &mut output);

    let mut options = if mp4_family { Some(AVDictionary::new(c"movflags", c"+faststart", 0)) } else { None };
    output.write_header(&mut options).map_err(|e| from_rsmpeg("writing the output header", &e))?;
    let out_tbs: Vec<ffi::AVRational> = output.streams().into_iter().map(|s| s.time_base).collect();
    let video_out = map[vi].ok_or_else(|| MediaError::misc("video stream not mapped"))?;

    let mut segments =
        SegmentReader { dir: &plan.partial_dir, manifest, next: 0, current: None, time_base: params.time_base() };
    let mut next_video = segments.next_packet()?;
    let mut next_other: Option<AVPacket> = None;
    let mut source_done = false;
    let mut last_video_dts = i64::MIN;

    loop {
        if next_other.is_none() && !source_done {
            loop {
                match super::probe::read_packet(&mut source, "the source")? {
                    Some(p) => {
                        let idx = p.stream_index as usize;
                        if idx != vi && map.get(idx).copied().flatten().is_some() {
                            next_other = Some(p);
                            break;
                        }
                    }
                    None => {
                        source_done = true;
                        break;
                    }
                }
            }
        }
        let take_video = match (&next_video, &next_other) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((v, vtb)), Some(o)) => {
                let otb = source_tbs[o.stream_index as usize];
                // SAFETY: pure arithmetic on timestamps.
                unsafe { ffi::av_compare_ts(ts_of(v), *vtb, ts_of(o), otb) <= 0 }
            }
        };
        if take_video {
            if let Some((mut packet, tb)) = next_video.take() {
                packet.rescale_ts(tb, out_tbs[video_out]);
                packet.set_stream_index(video_out as i32);
                // Segments are separate encoder sessions: keep decode order strictly rising
                // across their joins.
                if packet.dts != ffi::AV_NOPTS_VALUE {
                    if packet.dts <= last_video_dts {
                        packet.set_dts(last_video_dts + 1);
                    }
                    if packet.pts != ffi::AV_NOPTS_VALUE && packet.pts < packet.dts {
                        packet.set_pts(packet.dts);
                    }
                    last_video_dts = packet.dts;
                }
                output.interleaved_write_frame(&mut packet).map_err(|e| from_rsmpeg("writing the output", &e))?;
            }
            next_video = segments.next_packet()?;
        } else if let Some(mut packet) = next_other.take() {
            let idx = packet.stream_index as usize;
            let Some(out_idx) = map[idx] else { continue };
            packet.rescale_ts(source_tbs[idx], out_tbs[out_idx]);
            packet.set_stream_index(out_idx as i32);
            packet.set_pos(-1);
            output.interleaved_write_frame(&mut packet).map_err(|e| from_rsmpeg("writing the output", &e))?;
        }
    }
    output.write_trailer().map_err(|e| from_rsmpeg("closing the output", &e))?;
    drop(output);
    std::fs::File::open(output_path)
        .and_then(|f| f.sync_all())
        .map_err(|e| MediaError::from_io("syncing the output", &e))?;
    Ok(())
}
