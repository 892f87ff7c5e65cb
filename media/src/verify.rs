//! Checks an encoded file before it may replace anything: it opens, its video is in the
//! target codec at the planned size, its streams are the source's one for one (kind, codec, tags, dispositions,
//! side data, field order), every stream has as many frames as the source's, and it decodes
//! at several points. An exit code of 0 proves nothing.

use std::hash::{Hash, Hasher};
use std::path::Path;

use rsmpeg::avformat::AVFormatContextInput;
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;

use crate::decode::{main_video_index, open_decoder, stream_nal_format};
use crate::probe::{open_input, probe, read_packet};
use crate::segment::packet_data;
use condense::media::hdr_metadata::{self, NalFormat, RpuMode};
use condense::media::info::{MediaInfo, StreamInfo, StreamKind};
use condense::media::stream_plan::{Fate, PlannedStream, StreamPlan};
use condense::media::MediaError;

/// Allowed difference of duration: 0.5 s or 1 %, whichever is larger.
pub fn duration_tolerance(source_seconds: f64) -> f64 {
    (source_seconds * 0.01).max(0.5)
}

pub fn verify(
    output: &Path,
    source: &Path,
    source_info: &MediaInfo,
    target_codec: &str,
) -> Result<MediaInfo, MediaError> {
    verify_planned(output, source, source_info, target_codec, None)
}

/// `verify` against the job's stream plan (`plan`): the output holds exactly the planned
/// streams (see `planned_streams`), copied and encoded streams counted as without a plan,
/// converted and added audio as long as its source track. None: every stream carried.
pub fn verify_planned(
    output: &Path,
    source: &Path,
    source_info: &MediaInfo,
    target_codec: &str,
    plan: Option<&StreamPlan>,
) -> Result<MediaInfo, MediaError> {
    let fail = |what: String| MediaError::invalid(format!("output verification failed: {what}"));
    let info = probe(output).map_err(|e| fail(e.message))?;
    if info.size_bytes == 0 {
        return Err(fail("the output is empty".into()));
    }
    let video = info.video().ok_or_else(|| fail("no video stream".into()))?;
    if video.codec != target_codec {
        return Err(fail(format!("video is {}, expected {target_codec}", video.codec)));
    }
    video_size(source_info, video, plan).map_err(fail)?;
    let main = source_info.video().map(|v| v.index);
    // For each output stream: its source stream and fate.
    let pairs: Vec<(usize, Fate)> = match plan {
        None => {
            same_streams(source_info, &info, target_codec).map_err(fail)?;
            (0..source_info.streams.len())
                .map(|i| (i, if Some(i) == main { Fate::Encode } else { Fate::Copy }))
                .collect()
        }
        Some(p) => planned_streams(source_info, &info, p, target_codec).map_err(fail)?,
    };
    // An output whose length is unknown (e.g. a garbage timestamp carried over from a damaged
    // source) could be any length, and the decode check below would only look at its start.
    if let (Some(src), None) = (source_info.duration_seconds, info.duration_seconds) {
        return Err(fail(format!("the output has no duration; the source has {src:.2} s")));
    }
    // The container's duration is its longest stream's: a video cut short next to whole
    // audio passes it. Every stream is counted instead, by a demux-only pass over both files
    // (cheap: no decoding). Copied streams carry the source's packets one for one. The
    // encoded video has one packet per frame (x265, SVT-AV1 and the hardware encoders emit
    // one access unit or temporal unit per frame), and the source's frames are its video
    // packets less those the demuxer marks to be discarded (edit lists) or that are empty,
    // which the decoder does not turn into frames either. So the counts must be equal, not
    // close: a tolerance would let a short read near the end pass.
    // The source's RPUs as an output keeping its Dolby Vision holds them (profile 7 ones
    // rewritten as 8.1); read only where the output says it keeps it.
    let source_rpu =
        info.hdr.dolby_vision.and(source_info.hdr.dolby_vision).map(|_| hdr_metadata::rpu_mode(source_info));
    let want = tally(source, source_rpu)?;
    let got = tally(output, Some(RpuMode::Copy)).map_err(|e| fail(e.message))?;
    let mut main_out = None;
    for (i, (src, fate)) in pairs.iter().copied().enumerate() {
        let (Some(w), Some(g)) = (want.get(src), got.get(i)) else {
            return Err(fail(format!("stream {i} of the output or {src} of the source was not read")));
        };
        let kind = source_info.streams.get(src).map(|s| format!("{:?}", s.kind).to_lowercase()).unwrap_or_default();
        let is_main = Some(src) == main && fate == Fate::Encode;
        if is_main {
            main_out = Some(i);
        }
        let audio = source_info.streams.get(src).is_some_and(|s| s.kind == StreamKind::Audio);
        if matches!(fate, Fate::Convert | Fate::Add) && audio {
            // Audio encoded again has packets of its own: it must last as long as its source
            // track, within one of its frames, plus the encoder's priming samples (at most a
            // frame, in its first packet).
            if let (Some(a), Some(b)) = (w.span_seconds(), g.span_seconds()) {
                let frame = b / g.packets.max(1) as f64;
                if (a - b).abs() > 2.0 * frame {
                    return Err(fail(format!(
                        "stream {i} ({kind}, converted from source stream {src}) lasts {b:.3} s, the source's {a:.3} s"
                    )));
                }
            }
            continue;
        }
        let expected = if is_main { w.frames } else { w.packets };
        // A converted subtitle track keeps every event; MP4 adds empty samples for the gaps
        // between them (`mov_text` has no other way to show nothing), so it may hold more.
        let converted_subtitles = fate == Fate::Convert && g.packets > expected;
        if g.packets != expected && !converted_subtitles {
            let unit = if is_main { "frames" } else { "packets" };
            return Err(fail(format!(
                "stream {i} ({kind}) has {} {unit}, the source has {expected}: frames lost",
                g.packets
            )));
        }
        // Each stream's own length, from its first timestamp to its end: containers differ
        // on whether a late start counts into the file's duration (MPEG program streams
        // start at 0.5 s; Matroska counts that in, MPEG does not).
        if let (Some(a), Some(b)) = (w.span_seconds(), g.span_seconds()) {
            let tolerance = duration_tolerance(a);
            if (a - b).abs() > tolerance {
                return Err(fail(format!(
                    "stream {i} ({kind}) lasts {b:.2} s, the source's {a:.2} s (tolerance {tolerance:.2} s)"
                )));
            }
        }
        if g.side_data != w.side_data {
            return Err(fail(format!(
                "stream {i} ({kind}) carries side data {:?}, the source {:?}",
                side_data_names(&g.side_data),
                side_data_names(&w.side_data)
            )));
        }
    }
    if hdr_metadata::carried(target_codec) {
        if let (Some(w), Some(g)) = (main.and_then(|i| want.get(i)), main_out.and_then(|i| got.get(i))) {
            same_dynamic_hdr(w, g, &info).map_err(fail)?;
        }
    }
    let span = main.and_then(|i| want.get(i)).and_then(StreamTally::span_seconds).or(source_info.duration_seconds);
    decode_at_points(output, span.unwrap_or(0.0)).map_err(|e| fail(e.message))?;
    Ok(info)
}

/// The output's video has the plan's size (`video_size`, maxHeight), or the source's where
/// nothing scales it: a scale that did not happen, or happened unplanned, is refused.
fn video_size(source: &MediaInfo, output: &StreamInfo, plan: Option<&StreamPlan>) -> Result<(), String> {
    let source_size = source.video().and_then(|v| v.width.zip(v.height));
    let (want, whose) = match plan.and_then(|p| p.video_size) {
        Some(size) => (Some((size.width, size.height)), "the plan's"),
        None => (source_size, "the source's"),
    };
    match (want, output.width.zip(output.height)) {
        (Some((w, h)), Some((ow, oh))) if (w, h) != (ow, oh) => {
            Err(format!("the video is {ow}x{oh}, {whose} size is {w}x{h}"))
        }
        (Some((w, h)), None) => Err(format!("the video has no size, {whose} is {w}x{h}")),
        _ => Ok(()),
    }
}

/// A digest of some bytes (0: none), to compare frames' metadata without keeping it.
fn digest(bytes: Option<&[u8]>) -> u64 {
    bytes.map_or(0, |b| {
        let mut h = std::hash::DefaultHasher::new();
        b.hash(&mut h);
        h.finish().max(1)
    })
}

/// Every output frame carries the HDR10+ metadata of its source frame, and the Dolby Vision
/// RPU when the output says it is Dolby Vision (profile 8.1, the one kind written), in
/// presentation order (frame counts are checked before). An output that does not say so
/// carries no RPU.
fn same_dynamic_hdr(source: &StreamTally, output: &StreamTally, output_info: &MediaInfo) -> Result<(), String> {
    let in_order = |t: &StreamTally| {
        let mut frames = t.dynamic_hdr.clone();
        frames.sort_by_key(|(pts, _, _)| *pts);
        frames
    };
    let (want, got) = (in_order(source), in_order(output));
    let says_dolby_vision = output_info.hdr.dolby_vision;
    if says_dolby_vision.is_none() && want.iter().all(|f| f.1 == 0) {
        // Nothing to carry (the source may not even be HEVC): only no stray RPU.
        return if got.iter().any(|f| f.2 != 0) {
            Err("the video carries Dolby Vision RPUs but the output does not say it is Dolby Vision".into())
        } else {
            Ok(())
        };
    }
    if want.len() != got.len() {
        return Err(format!("the video has {} frames, the source {}", got.len(), want.len()));
    }
    let compare = |what: &str, pick: fn(&(i64, u64, u64)) -> u64| -> Result<(), String> {
        match want.iter().zip(&got).position(|(w, g)| pick(w) != pick(g)) {
            Some(i) if got.get(i).map(pick) == Some(0) => Err(format!("frame {i} lost its {what}")),
            Some(i) if want.get(i).map(pick) == Some(0) => {
                Err(format!("frame {i} carries a {what} its source frame has not"))
            }
            Some(i) => Err(format!("frame {i} carries {what} other than its source frame's")),
            None => Ok(()),
        }
    };
    if want.iter().any(|f| f.1 != 0) {
        compare("HDR10+ metadata", |f| f.1)?;
    }
    match says_dolby_vision {
        Some(d) if (d.profile, d.bl_compatibility_id) != (8, 1) => {
            Err(format!("the output says Dolby Vision profile {}.{}, not 8.1", d.profile, d.bl_compatibility_id))
        }
        Some(_) => compare("Dolby Vision RPU", |f| f.2),
        None if got.iter().any(|f| f.2 != 0) => {
            Err("the video carries Dolby Vision RPUs but the output does not say it is Dolby Vision".into())
        }
        None => Ok(()),
    }
}

/// The output's streams are the source's, one for one and in order: same kind, codec (the
/// main video's is the target), tags, dispositions and field order.
fn same_streams(source: &MediaInfo, output: &MediaInfo, target_codec: &str) -> Result<(), String> {
    let describe = |info: &MediaInfo| {
        info.streams.iter().map(|s| format!("{:?} {}", s.kind, s.codec).to_lowercase()).collect::<Vec<_>>().join(", ")
    };
    if source.streams.len() != output.streams.len() {
        return Err(format!(
            "{} streams ({}), the source has {} ({})",
            output.streams.len(),
            describe(output),
            source.streams.len(),
            describe(source)
        ));
    }
    let main = source.video().map(|v| v.index);
    for (i, (s, o)) in source.streams.iter().zip(output.streams.iter()).enumerate() {
        let codec = if Some(i) == main { target_codec } else { s.codec.as_str() };
        let what = format!("stream {i} ({:?} {})", s.kind, s.codec).to_lowercase();
        if o.kind != s.kind || o.codec != codec || o.attached_picture != s.attached_picture {
            return Err(format!("{what} became {:?} {}", o.kind, o.codec).to_lowercase());
        }
        if o.language != s.language || o.title != s.title {
            return Err(format!(
                "{what} has language {:?} and title {:?}, the source {:?} and {:?}",
                o.language, o.title, s.language, s.title
            ));
        }
        if o.dispositions != s.dispositions {
            return Err(format!("{what} has dispositions {:?}, the source {:?}", o.dispositions, s.dispositions));
        }
        let interlaced = |f: &Option<String>| f.as_deref().is_some_and(|f| f != "progressive");
        if interlaced(&s.field_order) != interlaced(&o.field_order)
            || (interlaced(&s.field_order) && s.field_order != o.field_order)
        {
            return Err(format!("{what} has field order {:?}, the source {:?}", o.field_order, s.field_order));
        }
    }
    Ok(())
}

/// With a stream plan, the output's streams are the planned ones but those dropped, in the
/// planned order, each of the planned kind, codec (the encoded video's the target, a copied
/// stream's the source's), language, title, dispositions and channels. Answers, for each
/// output stream, its source stream and fate.
fn planned_streams(
    source: &MediaInfo,
    output: &MediaInfo,
    plan: &StreamPlan,
    target_codec: &str,
) -> Result<Vec<(usize, Fate)>, String> {
    let kept: Vec<&PlannedStream> = plan.streams.iter().filter(|p| p.fate != Fate::Drop).collect();
    let describe = |info: &MediaInfo| {
        info.streams.iter().map(|s| format!("{:?} {}", s.kind, s.codec).to_lowercase()).collect::<Vec<_>>().join(", ")
    };
    if kept.len() != output.streams.len() {
        let planned = kept.iter().map(|p| format!("{} {}", p.kind, p.codec)).collect::<Vec<_>>().join(", ");
        return Err(format!(
            "{} streams ({}), the plan has {} ({planned})",
            output.streams.len(),
            describe(output),
            kept.len()
        ));
    }
    let language = |l: Option<&str>| l.filter(|l| *l != "und").map(str::to_string);
    // FFmpeg's MP4 muxer enables the first track of each kind where none of that kind is
    // default, and an enabled track reads back as `default`: the container's doing, not a
    // change of the plan.
    let mp4_family = matches!(plan.container.as_str(), "mp4" | "m4v" | "mov");
    let planned_default = |kind: &str| {
        kept.iter().any(|p| p.kind == kind && p.fate != Fate::Add && p.dispositions.iter().any(|d| d == "default"))
    };
    let mut kinds_seen: Vec<&str> = Vec::new();
    let mut pairs = Vec::new();
    for (i, (p, o)) in kept.iter().zip(&output.streams).enumerate() {
        let s = source
            .streams
            .get(p.source_index)
            .ok_or_else(|| format!("the plan names source stream {}", p.source_index))?;
        let codec = match p.fate {
            Fate::Encode => target_codec,
            Fate::Copy => s.codec.as_str(),
            _ => p.codec.as_str(),
        };
        let kind = format!("{:?}", o.kind).to_lowercase();
        let what =
            format!("stream {i} ({} {codec}, {:?} of source stream {})", p.kind, p.fate, p.source_index).to_lowercase();
        if kind != p.kind || o.codec != codec {
            return Err(format!("{what} is {kind} {}", o.codec));
        }
        // FFmpeg's MP4 muxer stores no track titles (only the handler's name): a title the
        // plan gives is lost there, never changed.
        let title_kept = o.title == p.title || (mp4_family && o.title.is_none());
        if language(o.language.as_deref()) != language(p.language.as_deref()) || !title_kept {
            return Err(format!(
                "{what} has language {:?} and title {:?}, the plan {:?} and {:?}",
                o.language, o.title, p.language, p.title
            ));
        }
        let mut want: Vec<&str> =
            p.dispositions.iter().map(String::as_str).filter(|d| !(p.fate == Fate::Add && *d == "default")).collect();
        let mut have: Vec<&str> = o.dispositions.iter().map(String::as_str).collect();
        let first_of_kind = !kinds_seen.contains(&p.kind.as_str());
        kinds_seen.push(p.kind.as_str());
        if mp4_family && first_of_kind && !planned_default(&p.kind) {
            have.retain(|d| *d != "default");
        }
        want.sort_unstable();
        have.sort_unstable();
        if want != have {
            return Err(format!("{what} has dispositions {have:?}, the plan {want:?}"));
        }
        if o.kind == StreamKind::Audio {
            let channels = match p.fate {
                Fate::Add => Some(2),
                Fate::Convert => p.channels.or(s.channels),
                _ => s.channels,
            };
            if o.channels != channels {
                return Err(format!("{what} has {:?} channels, the plan {channels:?}", o.channels));
            }
        }
        pairs.push((p.source_index, p.fate));
    }
    Ok(pairs)
}

/// Side data a stream must keep: what shapes the picture (rotation, stereo layout,
/// projection). Other kinds describe an encoding (buffer sizes, HDR metadata handled apart).
pub const KEPT_SIDE_DATA: [ffi::AVPacketSideDataType; 3] = [
    ffi::AVPacketSideDataType_AV_PKT_DATA_DISPLAYMATRIX,
    ffi::AVPacketSideDataType_AV_PKT_DATA_STEREO3D,
    ffi::AVPacketSideDataType_AV_PKT_DATA_SPHERICAL,
];

fn side_data_names(list: &[(ffi::AVPacketSideDataType, Vec<u8>)]) -> Vec<String> {
    list.iter()
        // SAFETY: returns null or a static string.
        .map(|(kind, _)| unsafe { ffi::av_packet_side_data_name(*kind) })
        .map(|p| {
            if p.is_null() {
                "?".into()
            } else {
                unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        })
        .collect()
}

/// One stream of a file as a demux-only pass sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamTally {
    /// Every packet.
    pub packets: u64,
    /// Packets that make a frame: neither empty nor marked to be discarded.
    pub frames: u64,
    /// Earliest timestamp and end (timestamp plus duration), in `time_base`.
    pub first: Option<i64>,
    pub end: Option<i64>,
    pub time_base: (i32, i32),
    /// The side data of `KEPT_SIDE_DATA`, with its bytes.
    pub side_data: Vec<(ffi::AVPacketSideDataType, Vec<u8>)>,
    /// HEVC only: each frame's presentation time and digests of its HDR10+ payload and of
    /// its Dolby Vision RPU (0: none), in file order.
    pub dynamic_hdr: Vec<(i64, u64, u64)>,
}

impl StreamTally {
    /// Length of the stream from its first timestamp to its end.
    pub fn span_seconds(&self) -> Option<f64> {
        let (first, end) = (self.first?, self.end?);
        let (num, den) = self.time_base;
        (den != 0 && end > first).then(|| (end - first) as f64 * f64::from(num) / f64::from(den))
    }
}

/// Counts every stream's packets by reading the whole file without decoding. A read error
/// is an error, never a short count.
/// `rpu` is how the RPUs are read (None: not at all).
pub fn tally(path: &Path, rpu: Option<RpuMode>) -> Result<Vec<StreamTally>, MediaError> {
    let mut input = open_input(path)?;
    let hevc: Vec<Option<NalFormat>> = input
        .streams()
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s.codecpar().codec_id == ffi::AVCodecID_AV_CODEC_ID_HEVC).then(|| stream_nal_format(&input, i)))
        .collect();
    let mut streams: Vec<StreamTally> = input
        .streams()
        .into_iter()
        .map(|s| StreamTally {
            time_base: (s.time_base.num, s.time_base.den),
            side_data: crate::probe::side_data_of(&s).into_iter().filter(|(k, _)| KEPT_SIDE_DATA.contains(k)).collect(),
            ..Default::default()
        })
        .collect();
    let what = path.display().to_string();
    while let Some(packet) = read_packet(&mut input, &what)? {
        let Some(s) = streams.get_mut(packet.stream_index as usize) else { continue };
        s.packets += 1;
        if packet.flags & ffi::AV_PKT_FLAG_DISCARD as i32 == 0 && packet.size > 0 {
            s.frames += 1;
            if let Some(format) = hevc.get(packet.stream_index as usize).copied().flatten() {
                let carry = hdr_metadata::Carry { hdr10plus: true, rpu };
                let meta = hdr_metadata::read(packet_data(&packet), format, carry);
                s.dynamic_hdr.push((packet.pts, digest(meta.hdr10plus.as_deref()), digest(meta.rpu.as_deref())));
            }
        }
        let ts = if packet.pts != ffi::AV_NOPTS_VALUE { packet.pts } else { packet.dts };
        if ts != ffi::AV_NOPTS_VALUE {
            s.first = Some(s.first.map_or(ts, |f| f.min(ts)));
            let end = ts.saturating_add(packet.duration.max(0));
            s.end = Some(s.end.map_or(end, |e| e.max(end)));
        }
    }
    Ok(streams)
}

/// Decodes the main video at its start, 25 %, 50 %, 75 % and 95 % of `duration` seconds
/// (from the file's start). Each check must reach a frame within two frames of its point:
/// seeking lands on a keyframe at or before the point and decoding goes on from there, so a
/// video that ends early runs out of frames instead of passing on its last one.
pub fn decode_at_points(path: &Path, duration: f64) -> Result<(), MediaError> {
    decode_at_points_counted(path, duration).map(|_| ())
}

/// `decode_at_points`, answering the frames it decoded. Where the keyframe a point's seek
/// would land on is no later than the last frame decoded (points within one group of
/// pictures: a source with x264's default keyframe interval has one in 10 s), decoding goes
/// on forward from there instead: the same frames up to the point, without decoding the
/// group again from its keyframe for every point.
pub fn decode_at_points_counted(path: &Path, duration: f64) -> Result<u64, MediaError> {
    let mut decoded = 0u64;
    let mut input = open_input(path)?;
    let vi = main_video_index(&input).ok_or_else(|| MediaError::invalid("no video stream"))?;
    let mut decoder = open_decoder(&input, vi)?;
    let points = Points::of(&input, vi, duration)?;
    let slack = points.slack;
    // The timestamp of the last frame decoded, while decoding can go on forward from it.
    let mut position: Option<i64> = None;
    for point in POINTS {
        let (target, target_us) = points.at(point);
        let onward =
            position.is_some_and(|at| at < target && keyframe_before(&input, vi, target).is_some_and(|k| k <= at));
        if !onward {
            // SAFETY: seeking an input we own, in the video stream's time base, to a keyframe
            // at or before the target.
            let ret = unsafe {
                ffi::avformat_seek_file(input.as_mut_ptr(), i32::try_from(vi).unwrap_or(0), i64::MIN, target, target, 0)
            };
            if ret < 0 && point > 0.0 {
                return Err(MediaError::invalid(format!("cannot seek to {:.0} %", point * 100.0)));
            }
            // SAFETY: resets the decoder after a seek.
            unsafe { ffi::avcodec_flush_buffers(decoder.as_mut_ptr()) };
        }
        let landed = |ts: i64| ts == ffi::AV_NOPTS_VALUE || ts >= target.saturating_sub(slack) || point == 0.0;
        let mut reached = false;
        let mut last_seen = None;
        let mut packets = 0;
        let mut ended = false;
        while !reached && !ended && packets < 10_000 {
            match read_packet(&mut input, "the output")? {
                Some(packet) => {
                    if packet.stream_index as usize != vi {
                        continue;
                    }
                    packets += 1;
                    decoder
                        .send_packet(Some(&packet))
                        .map_err(|e| MediaError::invalid(format!("decode error: {e}")))?;
                }
                None => {
                    ended = true;
                    let _ = decoder.send_packet(None);
                }
            }
            loop {
                match decoder.receive_frame() {
                    Ok(f) => {
                        decoded += 1;
                        last_seen = Some(f.best_effort_timestamp);
                        if landed(f.best_effort_timestamp) {
                            reached = true;
                            break;
                        }
                    }
                    Err(RsmpegError::DecoderDrainError | RsmpegError::DecoderFlushedError) => break,
                    Err(e) => return Err(MediaError::invalid(format!("decode error: {e}"))),
                }
            }
        }
        // A decoder drained at the end cannot go on; one that stopped at its point can.
        position = last_seen.filter(|t| reached && !ended && *t != ffi::AV_NOPTS_VALUE);
        if !reached {
            return Err(points.missed(point, target_us, last_seen));
        }
    }
    Ok(decoded)
}

/// Where `decode_at_points` looks: the start, 25 %, 50 %, 75 % and 95 % of the length.
const POINTS: [f64; 5] = [0.0, 0.25, 0.5, 0.75, LAST_POINT];
/// The last of them, which a decode of every frame to the end must have reached.
const LAST_POINT: f64 = 0.95;

/// The points of a video of `length` seconds in its stream's time base, each reached by a
/// frame within two frames of it (`slack`).
pub struct Points {
    start_us: i64,
    length: f64,
    time_base: ffi::AVRational,
    slack: i64,
}

impl Points {
    pub fn of(input: &AVFormatContextInput, vi: usize, length: f64) -> Result<Points, MediaError> {
        let stream = input.streams().get(vi).ok_or_else(|| MediaError::invalid("no video stream"))?;
        let rate = [stream.avg_frame_rate, stream.r_frame_rate]
            .into_iter()
            .find(|r| r.num > 0 && r.den > 0)
            .unwrap_or(ffi::AVRational { num: 25, den: 1 });
        let frame = ffi::AVRational { num: rate.den, den: rate.num };
        // SAFETY: pure arithmetic.
        let slack = unsafe { ffi::av_rescale_q(2, frame, stream.time_base) }.max(1);
        let start_us = if input.start_time != ffi::AV_NOPTS_VALUE { input.start_time } else { 0 };
        Ok(Points { start_us, length, time_base: stream.time_base, slack })
    }

    /// The point at `fraction` of the length: in the stream's time base, and in
    /// microseconds from the file's start.
    fn at(&self, fraction: f64) -> (i64, i64) {
        let target_us = self.start_us + (self.length * fraction * f64::from(ffi::AV_TIME_BASE)) as i64;
        let av_time_base = ffi::AVRational { num: 1, den: ffi::AV_TIME_BASE as i32 };
        // SAFETY: pure arithmetic.
        (unsafe { ffi::av_rescale_q(target_us, av_time_base, self.time_base) }, target_us)
    }

    /// Whether a decode that went on to the end of the file and whose last frame was at
    /// `last_decoded` reached every point: the check of `decode_at_points`, made of an
    /// encode's decode of every frame (the encode of a source validated by probing alone).
    pub fn reached_by(&self, last_decoded: Option<i64>) -> Result<(), MediaError> {
        let (target, target_us) = self.at(LAST_POINT);
        match last_decoded.filter(|t| *t != ffi::AV_NOPTS_VALUE) {
            Some(t) if t >= target.saturating_sub(self.slack) => Ok(()),
            seen => Err(self.missed(LAST_POINT, target_us, seen)),
        }
    }

    fn missed(&self, point: f64, target_us: i64, last_seen: Option<i64>) -> MediaError {
        let tb = f64::from(self.time_base.num) / f64::from(self.time_base.den);
        let seen = last_seen
            .filter(|t| *t != ffi::AV_NOPTS_VALUE)
            .map(|t| format!("; the last frame decoded is at {:.2} s", t as f64 * tb))
            .unwrap_or_default();
        MediaError::invalid(format!(
            "no frame decodes at {:.0} % ({:.2} s){seen}",
            point * 100.0,
            target_us as f64 / f64::from(ffi::AV_TIME_BASE)
        ))
    }
}

/// The length `validate_source` checks a source's video over: the video stream's own where
/// the container knows it (other streams may run on past the picture), within the file's.
pub fn video_length(info: &MediaInfo) -> Option<f64> {
    let duration = info.duration_seconds.filter(|d| *d > 0.0)?;
    let video = info.video().and_then(|v| v.duration_seconds).filter(|d| *d > 0.0).unwrap_or(duration);
    Some(video.min(duration))
}

/// The timestamp of the keyframe a seek to `target` (the stream's time base) lands on, by
/// the stream's index; `None` where the index has none at or before it.
fn keyframe_before(input: &AVFormatContextInput, vi: usize, target: i64) -> Option<i64> {
    let stream = input.streams().get(vi)?;
    let raw = stream.as_ptr().cast_mut();
    // SAFETY: reads the index of a stream of an input we hold open (the stream lives as long
    // as the input); FFmpeg answers a negative position when no entry fits, and null for an
    // entry out of range.
    unsafe {
        let at = ffi::av_index_search_timestamp(raw, target, ffi::AVSEEK_FLAG_BACKWARD as i32);
        if at < 0 {
            return None;
        }
        ffi::avformat_index_get_entry(raw, at).as_ref().map(|e| e.timestamp)
    }
}

/// Validation of a source before any work: it opens, has a video stream with a decoder,
/// and, with `points`, decodes at several points (this catches truncated files whose header
/// promises more). Without them a source about to be encoded is checked by its encode,
/// which decodes every frame (`Points::reached_by`).
pub fn validate_source(path: &Path, points: bool) -> Result<MediaInfo, MediaError> {
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
    // A copy still downloading (issue 39) is only probed: the points would wait for most
    // of it; the encode decodes every frame of it, and the main node validates the
    // original before it verifies the output.
    if points && crate::growing::of(path).is_none() {
        decode_at_points(path, video_length(&info).unwrap_or(duration))?;
    }
    Ok(info)
}
