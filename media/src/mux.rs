//! Joins the encoded video segments with every other stream of the source (audio,
//! subtitles, attachments copied as they are), chapters and metadata, into the output file.
//! Packets from the two sides are written in timestamp order, so memory stays flat.
//! Converted and added audio comes from the file the run encoded beside the video
//! (`audio_ahead`), a third side merged by time the same way; where that file is missing,
//! not whole or made for another plan, the mux encodes the audio itself, as the source's
//! packets come.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rsmpeg::avcodec::AVPacket;
use rsmpeg::avformat::{AVFormatContextInput, AVFormatContextOutput};
use rsmpeg::avutil::AVDictionary;
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use crate::audio::AudioEncode;
use crate::audio_ahead;
use crate::decode::main_video_index;
use crate::error::from_rsmpeg;
use crate::probe::{open_input, side_data_of};
use crate::segment::CodecParamsExt;
use crate::segment::SegmentPackets;
use crate::subtitle::SubtitleEncode;
use crate::verify::KEPT_SIDE_DATA;
use condense::domain::job::FailureCode;
use condense::media::info::{HdrKind, MediaInfo};
use condense::media::manifest::Manifest;
use condense::media::plan::EncodePlan;
use condense::media::stream_plan::{Fate, PlannedStream, StreamPlan};
use condense::media::MediaError;

const fn mktag(a: u8, b: u8, c: u8, d: u8) -> u32 {
    (a as u32) | ((b as u32) << 8) | ((c as u32) << 16) | ((d as u32) << 24)
}

/// Reads the video packets of all segments in the order of their spans.
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
                if seg.file.is_empty() {
                    continue;
                }
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

/// The Dolby Vision configuration record of an output that keeps Dolby Vision: profile 8.1
/// (RPU and an HDR10 base layer, no enhancement layer) at the source's level. Matroska
/// writes it as a block addition mapping, MP4 as a `dvcC` box.
fn dovi_side_data(plan: &EncodePlan, info: &MediaInfo) -> Option<(*mut u8, usize)> {
    if plan.hdr != HdrKind::DolbyVision {
        return None;
    }
    let level = info.hdr.dolby_vision?.level;
    let mut size: usize = 0;
    // SAFETY: allocates a zeroed record with av_malloc; ownership passes to the stream.
    unsafe {
        let r = ffi::av_dovi_alloc(&mut size);
        if r.is_null() {
            return None;
        }
        (*r).dv_version_major = 1;
        (*r).dv_version_minor = 0;
        (*r).dv_profile = 8;
        (*r).dv_level = level;
        (*r).rpu_present_flag = 1;
        (*r).el_present_flag = 0;
        (*r).bl_present_flag = 1;
        (*r).dv_bl_signal_compatibility_id = 1;
        Some((r.cast::<u8>(), size))
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

/// How far the output's timeline is moved back, in `AV_TIME_BASE` units: the source's start
/// (its earliest stream's first timestamp) where that is later than 0, as the ffmpeg program
/// does, so that the output starts at 0 (an MPEG program stream starts at about 0.5 s, and
/// players would count that into its length). Every stream moves by the same amount, so the
/// streams keep their offsets to each other; HDR10+ metadata and RPUs ride in the video
/// packets and move with them. A start at or before 0 is kept as it is.
pub fn start_shift(source: &AVFormatContextInput) -> i64 {
    let start = source.start_time;
    if start != ffi::AV_NOPTS_VALUE && start > 0 {
        start
    } else {
        0
    }
}

/// Copies chapters and global metadata from `input` to `output`, the chapters moved back by
/// `shift` (`AV_TIME_BASE` units) as the streams are.
fn copy_chapters_and_metadata(input: &AVFormatContextInput, output: &mut AVFormatContextOutput, shift: i64) {
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
            let by = ffi::av_rescale_q(shift, ffi::AV_TIME_BASE_Q, (*src).time_base);
            (*ch).start = (*src).start - by;
            (*ch).end = (*src).end - by;
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
    let url = CString::new(output_path.as_os_str().as_bytes()).map_err(|_| MediaError::misc("NUL in path"))?;
    let mut output = AVFormatContextOutput::create(&url, None).map_err(|e| from_rsmpeg("creating the output", &e))?;
    let mp4_family = matches!(plan.output_extension.as_str(), "mp4" | "m4v" | "mov");

    if let Some(streams) = plan.streams.as_ref().filter(|s| s.container != plan.output_extension) {
        return Err(MediaError::invalid(format!(
            "the stream plan's container .{} is not the output's .{}",
            streams.container, plan.output_extension
        )));
    }
    let carry = carry_plan(&source, vi, video_par.codec_id, &plan.output_extension, plan.streams.as_ref())?;
    let side_data_boxes = source.streams().into_iter().any(|s| {
        side_data_of(&s).iter().any(|(k, _)| {
            matches!(
                *k,
                ffi::AVPacketSideDataType_AV_PKT_DATA_STEREO3D | ffi::AVPacketSideDataType_AV_PKT_DATA_SPHERICAL
            )
        })
    });
    if mp4_family && side_data_boxes {
        // The MP4 muxer writes the stereo 3D and spherical boxes only when allowed to write
        // boxes outside the ISO standard (they are Google's spatial media boxes).
        // SAFETY: a plain field write on the context we own, before the header.
        unsafe { output.deref_mut().strict_std_compliance = ffi::FF_COMPLIANCE_UNOFFICIAL };
    }

    let oformat = output.oformat().as_ptr();
    let source_tbs: Vec<ffi::AVRational> = source.streams().into_iter().map(|s| s.time_base).collect();
    // Without a stream plan every source stream has an output stream, in the same order;
    // with one, the planned streams in the planned order.
    let outputs = planned_outputs(plan, &carry, source_tbs.len());
    let mut routes: Vec<Vec<Route>> = vec![Vec::new(); source_tbs.len()];
    let mut audio: Vec<AudioEncode> = Vec::new();
    // The audio encoded ahead, if whole and made for this plan: its k-th stream is the k-th
    // `Made::Audio` output.
    let audio_outputs = audio_ahead::audio_outputs(plan);
    let mut ahead = if audio_outputs.is_empty() {
        None
    } else {
        audio_ahead::open_valid(&plan.partial_dir, &audio_ahead::key(plan, &audio_outputs))
    };
    let ahead_tbs: Vec<ffi::AVRational> =
        ahead.as_ref().map(|a| a.streams.iter().map(|s| s.1).collect()).unwrap_or_default();
    let mut ahead_out: Vec<usize> = Vec::new();
    let mut subtitles: Vec<SubtitleEncode> = Vec::new();
    let mut video_out = None;
    for (i, made, planned) in outputs {
        let Some(stream) = source.streams().get(i) else {
            return Err(MediaError::invalid(format!("the stream plan names stream {i}, which the source has not")));
        };
        let par = stream.codecpar();
        let encoded = made == Made::Encode;
        let mut out_stream = output.new_stream();
        let route = match &made {
            Made::Audio { .. } if ahead.is_some() => {
                ahead_out.push(out_stream.index as usize);
                Route::Ahead(ahead_out.len() - 1, out_stream.index as usize)
            }
            Made::Audio { codec, bit_rate, stereo } => {
                let job = AudioEncode::open(&par, stream.time_base, codec, *bit_rate, *stereo)?;
                audio.push(job);
                Route::Audio(audio.len() - 1, out_stream.index as usize)
            }
            Made::Subtitle { codec } => {
                subtitles.push(SubtitleEncode::open(&par, stream.time_base, codec)?);
                Route::Subtitle(subtitles.len() - 1, out_stream.index as usize)
            }
            _ => Route::Copy(out_stream.index as usize),
        };
        if let Some(r) = routes.get_mut(i) {
            // Audio encoded ahead needs nothing of the source's packets.
            if !encoded && !matches!(route, Route::Ahead(..)) {
                r.push(route);
            }
        }
        let converted = match route {
            Route::Audio(k, _) => audio.get(k).map(AudioEncode::codecpar),
            Route::Subtitle(k, _) => subtitles.get(k).map(SubtitleEncode::codecpar),
            Route::Ahead(k, _) => ahead.as_ref().and_then(|a| a.streams.get(k)).map(|s| s.0.clone()),
            Route::Copy(_) => None,
        };
        let mut new_par = match (&converted, encoded) {
            (Some(c), _) => c.clone(),
            (None, true) => video_par.clone(),
            (None, false) => par.clone(),
        };
        // SAFETY: plain field writes on parameters we own; the output format is static.
        unsafe {
            let raw = new_par.deref_mut();
            raw.codec_tag = if encoded || converted.is_some() { 0 } else { kept_codec_tag(oformat, &par) };
            if encoded {
                if mp4_family && raw.codec_id == ffi::AVCodecID_AV_CODEC_ID_HEVC {
                    raw.codec_tag = mktag(b'h', b'v', b'c', b'1');
                }
                // The encoder makes progressive frames of the fields as they are: the
                // container tells players how they were shot.
                raw.field_order = par.field_order;
            }
        }
        out_stream.set_codecpar(new_par);
        out_stream.set_time_base(match route {
            Route::Audio(k, _) => audio.get(k).map_or(stream.time_base, AudioEncode::time_base),
            Route::Subtitle(k, _) => subtitles.get(k).map_or(stream.time_base, SubtitleEncode::time_base),
            Route::Ahead(k, _) => ahead_tbs.get(k).copied().unwrap_or(stream.time_base),
            Route::Copy(_) => stream.time_base,
        });
        // SAFETY: copying metadata, disposition and side data into the stream we just created.
        unsafe {
            let raw = out_stream.deref_mut();
            ffi::av_dict_copy(&mut raw.metadata, stream.metadata, 0);
            raw.disposition = stream.disposition;
            raw.avg_frame_rate = stream.avg_frame_rate;
            raw.r_frame_rate = stream.r_frame_rate;
            for (kind, bytes) in side_data_of(&stream) {
                // A copied stream keeps all of it; the encoded video what describes the
                // picture (its coding facts are the encoder's, HDR metadata is added below).
                if (encoded && !KEPT_SIDE_DATA.contains(&kind)) || converted.is_some() {
                    continue;
                }
                let buf = ffi::av_malloc(bytes.len().max(1)).cast::<u8>();
                if buf.is_null() {
                    return Err(MediaError::misc("out of memory"));
                }
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len());
                if ffi::av_stream_add_side_data(raw, kind, buf, bytes.len()) < 0 {
                    ffi::av_free(buf.cast());
                    return Err(MediaError::misc(format!("cannot copy the side data of stream {i}")));
                }
            }
            if encoded && plan.hdr.has_hdr10_base() {
                for (kind, data) in [
                    (ffi::AVPacketSideDataType_AV_PKT_DATA_MASTERING_DISPLAY_METADATA, mastering_side_data(info)),
                    (ffi::AVPacketSideDataType_AV_PKT_DATA_CONTENT_LIGHT_LEVEL, light_side_data(info)),
                    (ffi::AVPacketSideDataType_AV_PKT_DATA_DOVI_CONF, dovi_side_data(plan, info)),
                ] {
                    if let Some((ptr, size)) = data {
                        if ffi::av_stream_add_side_data(raw, kind, ptr, size) < 0 {
                            ffi::av_free(ptr.cast());
                        }
                    }
                }
            }
            if let Some(p) = planned {
                apply_planned_tags(raw, p, &made);
            }
        }
        if encoded {
            video_out = Some(out_stream.index as usize);
        }
    }
    let shift = start_shift(&source);
    copy_chapters_and_metadata(&source, &mut output, shift);
    // The muxer adds this to every packet's timestamps, of every stream alike.
    // SAFETY: a plain field write on the context we own, before the header.
    unsafe { output.deref_mut().output_ts_offset = -shift };

    let mut options = if mp4_family {
        Some(AVDictionary::new(c"movflags", c"+faststart", 0))
    } else if matches!(plan.output_extension.as_str(), "mkv" | "webm") {
        // Write each stream's default flag as the source has it; the muxer would otherwise
        // mark a stream of each kind default where the source marks none.
        Some(AVDictionary::new(c"default_mode", c"passthrough", 0))
    } else {
        None
    };
    output.write_header(&mut options).map_err(|e| from_rsmpeg("writing the output header", &e))?;
    let out_tbs: Vec<ffi::AVRational> = output.streams().into_iter().map(|s| s.time_base).collect();
    let video_out = video_out.ok_or_else(|| MediaError::misc("video stream not mapped"))?;
    let video_out_tb = *out_tbs.get(video_out).ok_or_else(|| MediaError::misc("video stream not in the output"))?;

    let mut segments =
        SegmentReader { dir: &plan.partial_dir, manifest, next: 0, current: None, time_base: params.time_base() };
    if ahead.as_ref().is_some_and(|a| a.streams.len() != ahead_out.len()) {
        return Err(MediaError::misc("the audio encoded ahead does not match the planned audio outputs"));
    }
    let mut next_video = segments.next_packet()?;
    let mut next_ahead = match ahead.as_mut() {
        Some(a) => a.next_packet()?,
        None => None,
    };
    let mut next_other: Option<AVPacket> = None;
    let mut source_done = false;
    let mut last_video_dts = i64::MIN;

    loop {
        if next_other.is_none() && !source_done {
            loop {
                match crate::probe::read_packet(&mut source, "the source")? {
                    Some(p) => {
                        let idx = p.stream_index as usize;
                        if routes.get(idx).is_some_and(|r| !r.is_empty()) {
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
        // The earliest of the three sides; on a tie, the video, then the source's packets.
        let mut earliest: Option<(Side, i64, ffi::AVRational)> = None;
        let mut consider = |side: Side, ts: i64, tb: ffi::AVRational| {
            // SAFETY: pure arithmetic on timestamps.
            let before = earliest.is_none_or(|(_, t, b)| unsafe { ffi::av_compare_ts(ts, tb, t, b) } < 0);
            if before {
                earliest = Some((side, ts, tb));
            }
        };
        if let Some((v, vtb)) = &next_video {
            consider(Side::Video, ts_of(v), *vtb);
        }
        if let Some(o) = &next_other {
            let otb = *source_tbs
                .get(o.stream_index as usize)
                .ok_or_else(|| MediaError::misc("a packet of a stream the source does not have"))?;
            consider(Side::Source, ts_of(o), otb);
        }
        if let Some((k, a)) = &next_ahead {
            let atb = *ahead_tbs.get(*k).ok_or_else(|| MediaError::misc("a packet of an audio stream not planned"))?;
            consider(Side::Ahead, ts_of(a), atb);
        }
        let Some((side, _, _)) = earliest else { break };
        if side == Side::Ahead {
            if let Some((k, mut packet)) = next_ahead.take() {
                let out_idx =
                    *ahead_out.get(k).ok_or_else(|| MediaError::misc("a packet of an audio stream not planned"))?;
                let tb =
                    *ahead_tbs.get(k).ok_or_else(|| MediaError::misc("a packet of an audio stream not planned"))?;
                write_as(&mut output, &mut packet, tb, &out_tbs, out_idx)?;
            }
            next_ahead = match ahead.as_mut() {
                Some(a) => a.next_packet()?,
                None => None,
            };
        } else if side == Side::Video {
            if let Some((mut packet, tb)) = next_video.take() {
                packet.rescale_ts(tb, video_out_tb);
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
        } else if let Some(packet) = next_other.take() {
            let idx = packet.stream_index as usize;
            let in_tb = *source_tbs
                .get(idx)
                .ok_or_else(|| MediaError::misc("a packet of a stream the source does not have"))?;
            for route in routes.get(idx).map(Vec::as_slice).unwrap_or_default() {
                match *route {
                    Route::Copy(out_idx) => {
                        let mut copy = packet_ref(&packet)?;
                        write_as(&mut output, &mut copy, in_tb, &out_tbs, out_idx)?;
                    }
                    Route::Subtitle(k, out_idx) => {
                        let Some(job) = subtitles.get_mut(k) else { continue };
                        let tb = job.time_base();
                        if let Some(mut p) = job.push(&packet)? {
                            write_as(&mut output, &mut p, tb, &out_tbs, out_idx)?;
                        }
                    }
                    Route::Audio(k, out_idx) => {
                        let Some(job) = audio.get_mut(k) else { continue };
                        let tb = job.time_base();
                        for mut p in job.push(&packet)? {
                            write_as(&mut output, &mut p, tb, &out_tbs, out_idx)?;
                        }
                    }
                    // Never routed: its packets come from the file.
                    Route::Ahead(..) => {}
                }
            }
        }
    }
    // What the audio encoders still hold, written at the end (the muxer orders it).
    for route in routes.iter().flatten() {
        if let Route::Audio(k, out_idx) = *route {
            let Some(job) = audio.get_mut(k) else { continue };
            let tb = job.time_base();
            for mut p in job.finish()? {
                write_as(&mut output, &mut p, tb, &out_tbs, out_idx)?;
            }
        }
    }
    output.write_trailer().map_err(|e| from_rsmpeg("closing the output", &e))?;
    drop(output);
    std::fs::File::open(output_path)
        .and_then(|f| f.sync_all())
        .map_err(|e| MediaError::from_io("syncing the output", &e))?;
    Ok(())
}

/// A new reference to `packet`'s data (no copy of the bytes).
fn packet_ref(packet: &AVPacket) -> Result<AVPacket, MediaError> {
    // SAFETY: av_packet_clone makes a packet we own, freed by AVPacket's drop.
    let raw = unsafe { ffi::av_packet_clone(packet.as_ptr()) };
    let raw = std::ptr::NonNull::new(raw).ok_or_else(|| MediaError::misc("out of memory"))?;
    // SAFETY: a packet from av_packet_alloc/av_packet_clone, owned by no one else.
    Ok(unsafe { AVPacket::from_raw(raw) })
}

/// Writes `packet` (timestamps in `in_tb`) as a packet of output stream `out_idx`.
fn write_as(
    output: &mut AVFormatContextOutput,
    packet: &mut AVPacket,
    in_tb: ffi::AVRational,
    out_tbs: &[ffi::AVRational],
    out_idx: usize,
) -> Result<(), MediaError> {
    let out_tb =
        *out_tbs.get(out_idx).ok_or_else(|| MediaError::misc("a packet of a stream the mux did not plan for"))?;
    packet.rescale_ts(in_tb, out_tb);
    packet.set_stream_index(out_idx as i32);
    packet.set_pos(-1);
    output.interleaved_write_frame(packet).map_err(|e| from_rsmpeg("writing the output", &e))
}

/// What an output stream is made of.
#[derive(Debug, Clone, PartialEq)]
enum Made {
    /// The encoded video segments.
    Encode,
    /// The source stream's packets.
    Copy,
    /// The source track decoded and encoded again (`stereo`: downmixed).
    Audio { codec: String, bit_rate: Option<u64>, stereo: bool },
    /// The source's text subtitles decoded and encoded again (to `mov_text` for MP4).
    Subtitle { codec: String },
}

/// Where a source stream's packets go: copied into an output stream, or into an audio
/// encode (by its place in the list) whose packets go to an output stream. `Ahead`: an
/// output whose packets come from the audio encoded ahead (its stream there, the output's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Copy(usize),
    Audio(usize, usize),
    Subtitle(usize, usize),
    Ahead(usize, usize),
}

/// The three sides the mux merges by time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Video,
    Source,
    Ahead,
}

/// The output streams, in order: each one's source stream, what it is made of, and its
/// planned stream (whose tags and dispositions it takes). Without a stream plan, every
/// source stream as `carry` says; with one, the plan's streams but those dropped.
fn planned_outputs<'a>(
    plan: &'a EncodePlan,
    carry: &[Carry],
    count: usize,
) -> Vec<(usize, Made, Option<&'a PlannedStream>)> {
    let Some(streams) = &plan.streams else {
        return (0..count)
            .map(|i| (i, if carry.get(i) == Some(&Carry::Encode) { Made::Encode } else { Made::Copy }, None))
            .collect();
    };
    streams
        .streams
        .iter()
        .filter_map(|p| {
            let made = match p.fate {
                Fate::Drop => return None,
                Fate::Encode => Made::Encode,
                Fate::Copy => Made::Copy,
                Fate::Convert | Fate::Add if p.kind == "audio" => {
                    Made::Audio { codec: p.codec.clone(), bit_rate: p.bit_rate, stereo: p.fate == Fate::Add }
                }
                Fate::Convert if p.kind == "subtitle" => Made::Subtitle { codec: p.codec.clone() },
                // Nothing else is made: copied, which verification then refuses.
                Fate::Convert | Fate::Add => Made::Copy,
            };
            Some((p.source_index, made, Some(p)))
        })
        .collect()
}

/// Sets a stream's language, title and dispositions as planned. An added stereo track is
/// never the default one.
///
/// # Safety
/// `stream` must be a stream of an output context not yet past its header.
unsafe fn apply_planned_tags(stream: &mut ffi::AVStream, planned: &PlannedStream, made: &Made) {
    let set = |dict: &mut *mut ffi::AVDictionary, key: &std::ffi::CStr, value: Option<&str>| {
        let value = value.and_then(|v| CString::new(v).ok());
        // SAFETY: av_dict_set copies both strings; a null value removes the key.
        unsafe { ffi::av_dict_set(dict, key.as_ptr(), value.as_ref().map_or(std::ptr::null(), |v| v.as_ptr()), 0) };
    };
    set(&mut stream.metadata, c"language", planned.language.as_deref());
    set(&mut stream.metadata, c"title", planned.title.as_deref());
    let stereo_added = matches!(made, Made::Audio { stereo: true, .. });
    let mut disposition = 0;
    for name in &planned.dispositions {
        if stereo_added && name == "default" {
            continue;
        }
        if let Ok(n) = CString::new(name.as_str()) {
            let flag = ffi::av_disposition_from_string(n.as_ptr());
            if flag > 0 {
                disposition |= flag;
            }
        }
    }
    stream.disposition = disposition;
}

/// How a source stream reaches the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carry {
    /// The main video: encoded.
    Encode,
    /// Every other stream: copied as it is.
    Copy,
}

/// Data streams the MP4/MOV muxer writes back as they came: timecode and GoPro metadata.
const MOV_DATA_TAGS: [u32; 2] = [mktag(b't', b'm', b'c', b'd'), mktag(b'g', b'p', b'm', b'd')];

/// The output format FFmpeg picks for an extension.
fn output_format(ext: &str) -> Result<*const ffi::AVOutputFormat, MediaError> {
    let name = CString::new(format!("output.{ext}")).map_err(|_| MediaError::misc("NUL in the extension"))?;
    // SAFETY: looks the name up in FFmpeg's static table of muxers.
    let format = unsafe { ffi::av_guess_format(std::ptr::null(), name.as_ptr(), std::ptr::null()) };
    if format.is_null() {
        return Err(MediaError::misc(format!("no muxer for .{ext}")));
    }
    Ok(format)
}

/// How every stream of `source` is carried into a `.{ext}` output whose main video (stream
/// `vi`) is encoded to `target`. Nothing is dropped: a stream the container cannot hold, or
/// whose picture facts it cannot store, refuses the file with a reason naming the stream.
pub fn carry_plan(
    source: &AVFormatContextInput,
    vi: usize,
    target: ffi::AVCodecID,
    ext: &str,
    streams: Option<&StreamPlan>,
) -> Result<Vec<Carry>, MediaError> {
    let format = output_format(ext)?;
    let mov_family = matches!(ext, "mp4" | "m4v" | "mov");
    let refuse = |what: String| {
        MediaError::new(
            FailureCode::UnsupportedStream,
            format!("{what}; nothing is dropped, so the file is left as it is"),
        )
    };
    let mut plan = Vec::new();
    for (i, stream) in source.streams().into_iter().enumerate() {
        let par = stream.codecpar();
        let encoded = i == vi;
        // A stream a plan drops or converts is not stored as it is: the encoders' output
        // is what the container must hold.
        if !encoded && streams.is_some_and(|p| !p.streams.iter().any(|s| s.source_index == i && s.fate == Fate::Copy)) {
            plan.push(Carry::Copy);
            continue;
        }
        let codec_id = if encoded { target } else { par.codec_id };
        // SAFETY: static name strings.
        let codec = unsafe { std::ffi::CStr::from_ptr(ffi::avcodec_get_name(codec_id)) }.to_string_lossy().into_owned();
        let tag = par.codec_tag;
        let tag_text =
            tag.to_le_bytes().iter().map(|b| if b.is_ascii_graphic() { *b as char } else { '?' }).collect::<String>();
        let kind = match par.codec_type {
            ffi::AVMediaType_AVMEDIA_TYPE_VIDEO => "video",
            ffi::AVMediaType_AVMEDIA_TYPE_AUDIO => "audio",
            ffi::AVMediaType_AVMEDIA_TYPE_SUBTITLE => "subtitle",
            ffi::AVMediaType_AVMEDIA_TYPE_ATTACHMENT => "attachment",
            ffi::AVMediaType_AVMEDIA_TYPE_DATA => "data",
            _ => return Err(refuse(format!("stream {i} is of an unknown kind"))),
        };
        if kind == "data" {
            // Matroska has no data tracks in FFmpeg's muxer; MP4/MOV take the known ones.
            if !(mov_family && MOV_DATA_TAGS.contains(&tag)) {
                return Err(refuse(format!("stream {i} (data, {tag_text}) cannot be stored in .{ext}")));
            }
        } else {
            // SAFETY: a query on FFmpeg's static muxer description.
            let fits = unsafe { ffi::avformat_query_codec(format, codec_id, ffi::FF_COMPLIANCE_NORMAL as i32) };
            if fits == 0 {
                return Err(refuse(format!("stream {i} ({kind}, {codec}) cannot be stored in .{ext}")));
            }
        }
        let rotated =
            side_data_of(&stream).iter().any(|(k, _)| *k == ffi::AVPacketSideDataType_AV_PKT_DATA_DISPLAYMATRIX);
        if rotated && !mov_family {
            // FFmpeg 5.1's Matroska muxer has no place for a display matrix: the video
            // would play turned.
            return Err(refuse(format!(
                "stream {i} ({kind}) has a display matrix (rotation) that .{ext} cannot store"
            )));
        }
        plan.push(if encoded { Carry::Encode } else { Carry::Copy });
    }
    Ok(plan)
}

/// Checks, before any work, that every stream of the plan's source can be carried.
pub fn check_streams(plan: &EncodePlan) -> Result<(), MediaError> {
    let source = open_input(&plan.input)?;
    let vi = main_video_index(&source).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let name = CString::new(plan.target_codec.clone()).map_err(|_| MediaError::misc("NUL in the codec"))?;
    // SAFETY: looks a name up in FFmpeg's static codec descriptors.
    let descriptor = unsafe { ffi::avcodec_descriptor_get_by_name(name.as_ptr()) };
    if descriptor.is_null() {
        return Err(MediaError::new(FailureCode::UnsupportedCodec, format!("unknown codec {}", plan.target_codec)));
    }
    // SAFETY: a non-null static descriptor.
    let target = unsafe { (*descriptor).id };
    carry_plan(&source, vi, target, &plan.output_extension, plan.streams.as_ref()).map(|_| ())
}

/// The codec tag a copied stream keeps: the source's, where the output format has no tag
/// table, maps the tag to the same codec, or has no tag of its own for the codec (as the
/// ffmpeg program does). A timecode track needs its `tmcd`.
///
/// # Safety
/// `format` must be a valid output format.
unsafe fn kept_codec_tag(format: *const ffi::AVOutputFormat, par: &ffi::AVCodecParameters) -> u32 {
    let tags = (*format).codec_tag;
    if tags.is_null() {
        return par.codec_tag;
    }
    let mut own = 0u32;
    if ffi::av_codec_get_id(tags, par.codec_tag) == par.codec_id
        || ffi::av_codec_get_tag2(tags, par.codec_id, &mut own) == 0
    {
        par.codec_tag
    } else {
        0
    }
}
