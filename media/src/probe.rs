//! In-process probe of a media file: container, streams, colour and HDR facts.
//! Runs FFmpeg's demuxer only (plus one decoded frame for HDR candidates), so it is cheap
//! enough to run for every file of a large library.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use condense::domain::job::FailureCode;
use condense::media::info::{
    ContentLight, DolbyVision, HdrInfo, HdrKind, MasteringDisplay, MediaInfo, StreamInfo, StreamKind, MAX_PIXELS_VAR,
};
use condense::media::MediaError;
use rsmpeg::avformat::{AVFormatContextInput, AVStreamRef};
use rsmpeg::avutil::AVDictionary;
use rsmpeg::ffi;

use crate::growing::{self, Input};

fn q2d(r: ffi::AVRational) -> f64 {
    if r.den == 0 {
        0.0
    } else {
        f64::from(r.num) / f64::from(r.den)
    }
}

fn cstr_opt(ptr: *const std::ffi::c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: FFmpeg's name functions return static NUL-terminated strings.
    let s = unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned();
    (!s.is_empty() && s != "unknown" && s != "unspecified" && s != "reserved").then_some(s)
}

/// The demuxers a source may be read with: real containers only, by FFmpeg's names (a
/// demuxer's name lists its aliases, e.g. "matroska,webm"; one listed alias admits it).
/// Playlists and scripts (hls, concat, dash, image sequences, subtitles, tty…) open other
/// files named inside them, so a `.mkv` that is really one could pull any file the service
/// can read into an output; raw elementary streams have no container facts to verify
/// against. Anything else is refused before its demuxer reads past the file's first bytes.
pub const CONTAINER_DEMUXERS: &[&str] = &["matroska", "webm", "mov", "mp4", "avi", "mpegts", "mpeg", "flv", "asf"];

/// Bytes read for the format check: FFmpeg's own probe limit (`av_probe_input_buffer2`).
const PROBE_LIMIT: usize = 1 << 20;

/// The score above which FFmpeg stops reading more bytes to probe (`AVPROBE_SCORE_RETRY`,
/// a macro bindgen does not carry over).
const PROBE_SCORE_RETRY: i32 = 25;

/// Opens a media file for reading with the container demuxers only (`CONTAINER_DEMUXERS`)
/// and the `file` protocol only.
pub fn open_input(path: &Path) -> Result<Input, MediaError> {
    open_input_allowing(path, CONTAINER_DEMUXERS)
}

/// Opens a media file for reading with the given demuxers and the `file` protocol only.
/// The format is first probed from the file's own bytes, as FFmpeg probes it, and refused
/// by name when not allowed; `format_whitelist` then binds the open itself to the same
/// list, so no demuxer outside it ever runs (a playlist's would open the files it names).
/// A copy still being downloaded (`growing`) is read as it arrives.
pub fn open_input_allowing(path: &Path, demuxers: &[&str]) -> Result<Input, MediaError> {
    let growing = growing::of(path);
    let sparse = crate::sparse::of(path);
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => MediaError::invalid(format!("{}: no such file", path.display())),
        _ => MediaError::from_io(&path.display().to_string(), &e),
    })?;
    if !meta.is_file() {
        return Err(MediaError::invalid(format!("{}: not a regular file", path.display())));
    }
    if meta.len() == 0 && growing.is_none() {
        return Err(MediaError::invalid(format!("{}: file is empty", path.display())));
    }
    let mut url = b"file:".to_vec();
    url.extend_from_slice(path.as_os_str().as_bytes());
    let url = CString::new(url).map_err(|_| MediaError::invalid("path contains a NUL byte"))?;
    if let Some((name, score)) = probe_format_name(path, &url)? {
        if !allowed(&name, demuxers) && score <= PROBE_SCORE_RETRY {
            // A weak guess from bytes that fit no demuxer well: damage, not a playlist.
            return Err(MediaError::invalid(format!("{}: not a recognisable media container", path.display())));
        }
        if !allowed(&name, demuxers) {
            return Err(MediaError::new(
                FailureCode::UnsupportedContainer,
                format!(
                    "{}: the format is {name}, which is not a media container condense reads (allowed: {})",
                    path.display(),
                    demuxers.join(", ")
                ),
            ));
        }
    }
    let whitelist =
        CString::new(demuxers.join(",")).map_err(|_| MediaError::misc("a demuxer name contains a NUL byte"))?;
    let options = AVDictionary::new(c"protocol_whitelist", c"file", 0).set(c"format_whitelist", &whitelist, 0);
    let opened = |code: i32| {
        if code == -libc::EACCES || code == -libc::EPERM {
            MediaError::new(FailureCode::PermissionDenied, format!("{}: permission denied", path.display()))
        } else if code == -libc::ENOMEM {
            crate::error::from_av(&format!("{}: opening", path.display()), code)
        } else {
            MediaError::invalid(format!(
                "{}: not a readable media file ({})",
                path.display(),
                crate::error::av_error_text(code)
            ))
        }
    };
    // Opened in two steps, as `AVFormatContextInput::open` does, with the frame size checked
    // between them: the container's header gives it, and `avformat_find_stream_info` is the
    // first to decode (a 16k x 16k frame is gigabytes).
    let mut io = match (growing, sparse) {
        (Some(growing), _) => Some(growing::io_context(growing)?),
        (None, Some(sparse)) => Some(crate::sparse::io_context(sparse)?),
        (None, None) => None,
    };
    let mut raw = match io.as_mut() {
        None => std::ptr::null_mut(),
        // SAFETY: a new context (null only when out of memory), given the growing copy's
        // reader as its I/O: FFmpeg then marks it custom and never closes it; `Input` frees
        // it after the context.
        Some(io) => unsafe {
            let raw = ffi::avformat_alloc_context();
            if raw.is_null() {
                return Err(MediaError::misc("out of memory opening the copy"));
            }
            (*raw).pb = io.as_mut_ptr();
            raw
        },
    };
    let mut options = options.into_raw().as_ptr();
    // SAFETY: `url` and `options` are valid; avformat_open_input frees what it does not use
    // of `options` into a new dictionary, freed right after, and frees the context itself
    // on failure.
    let code = unsafe { ffi::avformat_open_input(&mut raw, url.as_ptr(), std::ptr::null(), &mut options) };
    // SAFETY: `options` is null or the dictionary of unused options, ours to free.
    unsafe { ffi::av_dict_free(&mut options) };
    let raw = match std::ptr::NonNull::new(raw) {
        Some(raw) if code >= 0 => raw,
        _ => return Err(opened(code)),
    };
    // SAFETY: an open input context, owned from here on (closed on drop).
    let mut input = Input::new(unsafe { AVFormatContextInput::from_raw(raw) }, io);
    check_frame_sizes(&input)?;
    // SAFETY: the context is open; no per-stream options.
    let code = unsafe { ffi::avformat_find_stream_info(input.as_mut_ptr(), std::ptr::null_mut()) };
    if code < 0 {
        return Err(opened(code));
    }
    // Containers that do not say the size in their header are known now.
    check_frame_sizes(&input)?;
    Ok(input)
}

/// The frame-size cap a media child runs under (`MAX_PIXELS_VAR`, set by the node).
pub fn max_pixels() -> u64 {
    std::env::var(MAX_PIXELS_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(condense::domain::limits::DEFAULT_MAX_PIXELS)
}

/// Refuses an input with a video frame over `max_pixels` (`domain::limits`), before a
/// decoder allocates one.
fn check_frame_sizes(input: &AVFormatContextInput) -> Result<(), MediaError> {
    // Containers without a header (MPEG-PS, raw-ish AVI) have no streams before the probe,
    // and rsmpeg's `streams()` panics on their null array.
    if input.nb_streams == 0 || input.streams.is_null() {
        return Ok(());
    }
    let max = max_pixels();
    for stream in input.streams() {
        let par = stream.codecpar();
        if par.codec_type != ffi::AVMediaType_AVMEDIA_TYPE_VIDEO {
            continue;
        }
        let (width, height) = (u64::try_from(par.width).unwrap_or(0), u64::try_from(par.height).unwrap_or(0));
        if let Some(refusal) = condense::domain::limits::check_frame(width, height, max).refusal() {
            return Err(MediaError::new(FailureCode::UnsupportedStream, refusal));
        }
    }
    Ok(())
}

/// True when one of the demuxer's comma-separated names is in the list.
fn allowed(demuxer: &str, list: &[&str]) -> bool {
    demuxer.split(',').any(|alias| list.contains(&alias))
}

/// The demuxer FFmpeg would pick for the file, judged from its first bytes the way
/// `av_probe_input_buffer2` does (2 KiB, doubling, until a confident match or 1 MiB), under
/// the same name (`url`), since some demuxers weigh the extension.
/// Reads nothing but the file itself. The demuxer's name and its score (FFmpeg's 1 to
/// 100); `None` when no demuxer recognises it.
fn probe_format_name(path: &Path, url: &CStr) -> Result<Option<(String, i32)>, MediaError> {
    use std::io::Read;
    let context = path.display().to_string();
    let mut file: Box<dyn Read> = match (growing::of(path), crate::sparse::of(path)) {
        (Some(source), _) => Box::new(growing::Reader::open(source)?),
        (None, Some(source)) => Box::new(crate::sparse::Reader::open(source)?),
        (None, None) => Box::new(std::fs::File::open(path).map_err(|e| MediaError::from_io(&context, &e))?),
    };
    let mut head = Vec::new();
    let mut size = 2048usize;
    loop {
        // Only what this round needs, as FFmpeg reads: most containers are known from their
        // first 2 KiB, and a read of a network share is not free.
        let want = size.min(PROBE_LIMIT).saturating_sub(head.len());
        (&mut file).take(want as u64).read_to_end(&mut head).map_err(|e| MediaError::from_io(&context, &e))?;
        let last = head.len() < size || size >= PROBE_LIMIT;
        let take = head.len();
        // Probes may read past the data into the padding, which FFmpeg requires zeroed.
        let mut buf = head.clone();
        buf.resize(take + ffi::AVPROBE_PADDING_SIZE as usize, 0);
        let data = ffi::AVProbeData {
            filename: url.as_ptr(),
            buf: buf.as_mut_ptr(),
            buf_size: i32::try_from(take).unwrap_or(i32::MAX),
            mime_type: std::ptr::null(),
        };
        let mut score = 0;
        // SAFETY: `data` points at `buf`, which holds buf_size bytes plus zeroed padding, and
        // at `url`; both outlive the call. The result is null or a static demuxer.
        let format = unsafe { ffi::av_probe_input_format3(&data, 1, &mut score) };
        if !format.is_null() && (score > PROBE_SCORE_RETRY || last) {
            // SAFETY: a demuxer's name is a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr((*format).name) }.to_string_lossy().into_owned();
            return Ok(Some((name, score)));
        }
        if last {
            return Ok(None);
        }
        size = size.saturating_mul(2);
    }
}

fn fourcc(tag: u32) -> Option<String> {
    let bytes = tag.to_le_bytes();
    (tag != 0 && bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' '))
        .then(|| String::from_utf8_lossy(&bytes).into_owned())
}

fn stream_kind(t: ffi::AVMediaType) -> StreamKind {
    match t {
        ffi::AVMediaType_AVMEDIA_TYPE_VIDEO => StreamKind::Video,
        ffi::AVMediaType_AVMEDIA_TYPE_AUDIO => StreamKind::Audio,
        ffi::AVMediaType_AVMEDIA_TYPE_SUBTITLE => StreamKind::Subtitle,
        ffi::AVMediaType_AVMEDIA_TYPE_ATTACHMENT => StreamKind::Attachment,
        ffi::AVMediaType_AVMEDIA_TYPE_DATA => StreamKind::Data,
        _ => StreamKind::Unknown,
    }
}

/// Bit depth of a pixel format's first component.
pub fn pix_fmt_depth(fmt: i32) -> Option<u32> {
    // SAFETY: av_pix_fmt_desc_get returns null or a pointer to a static descriptor.
    unsafe {
        let desc = ffi::av_pix_fmt_desc_get(fmt);
        if desc.is_null() {
            None
        } else {
            u32::try_from((*desc).comp[0].depth).ok()
        }
    }
}

pub fn pix_fmt_name(fmt: i32) -> Option<String> {
    // SAFETY: returns null or a static string.
    cstr_opt(unsafe { ffi::av_get_pix_fmt_name(fmt) })
}

fn stream_info(index: usize, stream: &AVStreamRef) -> StreamInfo {
    let par = stream.codecpar();
    let kind = stream_kind(par.codec_type);
    // SAFETY: the name functions take plain enum values and return static strings.
    let (codec, profile) = unsafe {
        (
            cstr_opt(ffi::avcodec_get_name(par.codec_id)).unwrap_or_else(|| "none".into()),
            cstr_opt(ffi::avcodec_profile_name(par.codec_id, par.profile)),
        )
    };
    let language =
        stream.metadata().and_then(|m| m.get(c"language", None, 0).map(|e| e.value().to_string_lossy().into_owned()));
    let video = kind == StreamKind::Video;
    let rate = stream.avg_frame_rate;
    let rate = if rate.num > 0 && rate.den > 0 { Some(q2d(rate)) } else { stream.guess_framerate().map(q2d) };
    let duration = (stream.duration > 0).then(|| stream.duration as f64 * q2d(stream.time_base));
    // SAFETY: as above.
    let colors = unsafe {
        (
            cstr_opt(ffi::av_color_primaries_name(par.color_primaries)),
            cstr_opt(ffi::av_color_transfer_name(par.color_trc)),
            cstr_opt(ffi::av_color_space_name(par.color_space)),
            cstr_opt(ffi::av_color_range_name(par.color_range)),
        )
    };
    StreamInfo {
        index,
        kind,
        codec,
        codec_tag: fourcc(par.codec_tag),
        profile,
        width: video.then(|| u32::try_from(par.width).ok()).flatten(),
        height: video.then(|| u32::try_from(par.height).ok()).flatten(),
        frame_rate: if video { rate.filter(|r| r.is_finite() && *r > 0.0) } else { None },
        pix_fmt: if video { pix_fmt_name(par.format) } else { None },
        bit_depth: if video {
            pix_fmt_depth(par.format).or_else(|| u32::try_from(par.bits_per_raw_sample).ok().filter(|d| *d > 0))
        } else {
            None
        },
        color_primaries: if video { colors.0 } else { None },
        color_transfer: if video { colors.1 } else { None },
        color_space: if video { colors.2 } else { None },
        color_range: if video { colors.3 } else { None },
        language,
        sample_rate: (kind == StreamKind::Audio).then(|| u32::try_from(par.sample_rate).ok()).flatten(),
        channels: (kind == StreamKind::Audio).then(|| u32::try_from(par.ch_layout.nb_channels).ok()).flatten(),
        attached_picture: stream.disposition & ffi::AV_DISPOSITION_ATTACHED_PIC as i32 != 0,
        duration_seconds: duration,
        title: stream
            .metadata()
            .and_then(|m| m.get(c"title", None, 0).map(|e| e.value().to_string_lossy().into_owned())),
        dispositions: disposition_names(stream.disposition),
        side_data: side_data_of(stream).iter().map(|(kind, _)| side_data_name(*kind)).collect(),
        rotation: stream_side_data(stream, ffi::AVPacketSideDataType_AV_PKT_DATA_DISPLAYMATRIX)
            .filter(|d| d.len() >= 36)
            // SAFETY: a display matrix is nine 32-bit integers.
            .map(|d| unsafe { ffi::av_display_rotation_get(d.as_ptr().cast::<i32>()) })
            .filter(|r| r.is_finite()),
        field_order: if video { field_order_name(par.field_order) } else { None },
    }
}

/// FFmpeg's names of the disposition flags set in `disposition`.
pub fn disposition_names(disposition: i32) -> Vec<String> {
    (0..31)
        .map(|bit| 1i32 << bit)
        .filter(|flag| disposition & flag != 0)
        // SAFETY: returns null or a static string.
        .map(|flag| cstr_opt(unsafe { ffi::av_disposition_to_string(flag) }).unwrap_or_else(|| format!("0x{flag:x}")))
        .collect()
}

fn side_data_name(kind: ffi::AVPacketSideDataType) -> String {
    // SAFETY: returns null or a static string.
    cstr_opt(unsafe { ffi::av_packet_side_data_name(kind) }).unwrap_or_else(|| format!("side data {kind}"))
}

pub fn field_order_name(order: ffi::AVFieldOrder) -> Option<String> {
    match order {
        ffi::AVFieldOrder_AV_FIELD_PROGRESSIVE => Some("progressive"),
        ffi::AVFieldOrder_AV_FIELD_TT => Some("tt"),
        ffi::AVFieldOrder_AV_FIELD_BB => Some("bb"),
        ffi::AVFieldOrder_AV_FIELD_TB => Some("tb"),
        ffi::AVFieldOrder_AV_FIELD_BT => Some("bt"),
        _ => None,
    }
    .map(str::to_string)
}

/// Every stream-level side data of a stream: its type and a copy of its bytes.
pub fn side_data_of(stream: &AVStreamRef) -> Vec<(ffi::AVPacketSideDataType, Vec<u8>)> {
    let mut found = Vec::new();
    // SAFETY: FFmpeg 5.1 keeps stream side data in an array of `nb_side_data` entries, each
    // with `size` readable bytes at `data`; copied before the context is dropped.
    unsafe {
        let raw = stream.as_ptr();
        let n = usize::try_from((*raw).nb_side_data).unwrap_or(0);
        for i in 0..n {
            let sd = &*(*raw).side_data.add(i);
            let bytes = if sd.data.is_null() || sd.size == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(sd.data, sd.size).to_vec()
            };
            found.push((sd.type_, bytes));
        }
    }
    found
}

/// Stream-level side data of one type (FFmpeg 5.1 keeps it on the stream).
fn stream_side_data(stream: &AVStreamRef, kind: ffi::AVPacketSideDataType) -> Option<&'static [u8]> {
    let mut size: usize = 0;
    // SAFETY: returns a pointer into the stream's own side data, valid while the context
    // lives; callers copy what they need before the context is dropped.
    let ptr = unsafe { ffi::av_stream_get_side_data(stream.as_ptr(), kind, &mut size) };
    if ptr.is_null() || size == 0 {
        None
    } else {
        // SAFETY: FFmpeg reports `size` readable bytes at `ptr`.
        Some(unsafe { std::slice::from_raw_parts(ptr, size) })
    }
}

pub fn mastering_from_raw(m: &ffi::AVMasteringDisplayMetadata) -> Option<MasteringDisplay> {
    if m.has_primaries == 0 && m.has_luminance == 0 {
        return None;
    }
    let xy = |p: [ffi::AVRational; 2]| [q2d(p[0]), q2d(p[1])];
    Some(MasteringDisplay {
        red: xy(m.display_primaries[0]),
        green: xy(m.display_primaries[1]),
        blue: xy(m.display_primaries[2]),
        white_point: xy(m.white_point),
        min_luminance: q2d(m.min_luminance),
        max_luminance: q2d(m.max_luminance),
    })
}

fn read_struct<T: Copy>(bytes: &[u8]) -> Option<T> {
    (bytes.len() >= std::mem::size_of::<T>())
        // SAFETY: the buffer holds at least one T as written by FFmpeg; unaligned read.
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Side data found on the first decoded frame (in-band SEI / OBU metadata).
#[derive(Default)]
struct FrameHdr {
    mastering: Option<MasteringDisplay>,
    content_light: Option<ContentLight>,
    hdr10_plus: bool,
}

fn first_frame_hdr(input: &mut AVFormatContextInput, stream_index: usize) -> FrameHdr {
    use rsmpeg::avcodec::AVCodec;
    let mut found = FrameHdr::default();
    let mut ctx = {
        let Some(stream) = input.streams().get(stream_index) else { return found };
        let par = stream.codecpar();
        let Some(decoder) = AVCodec::find_decoder(par.codec_id) else { return found };
        let Ok(mut ctx) = crate::context::codec_context(&decoder) else { return found };
        if ctx.apply_codecpar(&par).is_err() || ctx.open(None).is_err() {
            return found;
        }
        ctx
    };
    for _ in 0..200 {
        let packet = match input.read_packet() {
            Ok(Some(p)) => p,
            _ => break,
        };
        if packet.stream_index as usize != stream_index {
            continue;
        }
        if ctx.send_packet(Some(&packet)).is_err() {
            break;
        }
        if let Ok(frame) = ctx.receive_frame() {
            // SAFETY: side data pointers belong to `frame`, read before it is dropped.
            unsafe {
                let sd = ffi::av_frame_get_side_data(
                    frame.as_ptr(),
                    ffi::AVFrameSideDataType_AV_FRAME_DATA_MASTERING_DISPLAY_METADATA,
                );
                if !sd.is_null() {
                    found.mastering = mastering_from_raw(&*((*sd).data as *const ffi::AVMasteringDisplayMetadata));
                }
                let sd = ffi::av_frame_get_side_data(
                    frame.as_ptr(),
                    ffi::AVFrameSideDataType_AV_FRAME_DATA_CONTENT_LIGHT_LEVEL,
                );
                if !sd.is_null() {
                    let c = &*((*sd).data as *const ffi::AVContentLightMetadata);
                    found.content_light = Some(ContentLight { max_cll: c.MaxCLL, max_fall: c.MaxFALL });
                }
                found.hdr10_plus = !ffi::av_frame_get_side_data(
                    frame.as_ptr(),
                    ffi::AVFrameSideDataType_AV_FRAME_DATA_DYNAMIC_HDR_PLUS,
                )
                .is_null();
            }
            break;
        }
    }
    found
}

/// Probes a file. Decodes one frame only when the video is an HDR candidate (PQ or HLG
/// transfer), to find in-band mastering, light level and HDR10+ metadata.
pub fn probe(path: &Path) -> Result<MediaInfo, MediaError> {
    probe_allowing(path, CONTAINER_DEMUXERS)
}

/// `probe` with the given demuxers allowed instead of the containers (a raw elementary
/// stream's facts, for one).
pub fn probe_allowing(path: &Path, demuxers: &[&str]) -> Result<MediaInfo, MediaError> {
    let mut input = open_input_allowing(path, demuxers)?;
    let size_bytes = match (growing::of(path), crate::sparse::of(path)) {
        (Some(source), _) => source.size,
        (None, Some(source)) => source.size,
        (None, None) => std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
    };
    let container = cstr_opt(input.iformat().name).unwrap_or_default();
    let duration_seconds = (input.duration > 0).then(|| input.duration as f64 / f64::from(ffi::AV_TIME_BASE));
    let bit_rate = (input.bit_rate > 0).then_some(input.bit_rate);
    let chapters = input.nb_chapters;
    let streams: Vec<StreamInfo> = input.streams().into_iter().enumerate().map(|(i, s)| stream_info(i, &s)).collect();

    let mut hdr = HdrInfo {
        kind: HdrKind::Sdr,
        dolby_vision: None,
        hdr10_plus: false,
        mastering_display: None,
        content_light: None,
    };
    let video_index = streams.iter().find(|s| s.kind == StreamKind::Video && !s.attached_picture).map(|s| s.index);
    if let Some(vi) = video_index {
        if let Some(stream) = input.streams().get(vi) {
            hdr.dolby_vision = stream_side_data(&stream, ffi::AVPacketSideDataType_AV_PKT_DATA_DOVI_CONF)
                .and_then(read_struct::<ffi::AVDOVIDecoderConfigurationRecord>)
                .map(|r| DolbyVision {
                    profile: r.dv_profile,
                    level: r.dv_level,
                    bl_compatibility_id: r.dv_bl_signal_compatibility_id,
                    rpu_present: r.rpu_present_flag != 0,
                    el_present: r.el_present_flag != 0,
                });
            hdr.mastering_display =
                stream_side_data(&stream, ffi::AVPacketSideDataType_AV_PKT_DATA_MASTERING_DISPLAY_METADATA)
                    .and_then(read_struct::<ffi::AVMasteringDisplayMetadata>)
                    .and_then(|m| mastering_from_raw(&m));
            hdr.content_light = stream_side_data(&stream, ffi::AVPacketSideDataType_AV_PKT_DATA_CONTENT_LIGHT_LEVEL)
                .and_then(read_struct::<ffi::AVContentLightMetadata>)
                .map(|c| ContentLight { max_cll: c.MaxCLL, max_fall: c.MaxFALL });
        }
        let transfer = streams.get(vi).and_then(|s| s.color_transfer.clone()).unwrap_or_default();
        let pq = transfer == "smpte2084";
        let hlg = transfer == "arib-std-b67";
        if pq || hlg || hdr.dolby_vision.is_some() {
            let frame = first_frame_hdr(&mut input, vi);
            hdr.mastering_display = hdr.mastering_display.or(frame.mastering);
            hdr.content_light = hdr.content_light.or(frame.content_light);
            hdr.hdr10_plus = frame.hdr10_plus;
        }
        hdr.kind = if hdr.dolby_vision.is_some() {
            HdrKind::DolbyVision
        } else if hdr.hdr10_plus && pq {
            HdrKind::Hdr10Plus
        } else if pq {
            HdrKind::Hdr10
        } else if hlg {
            HdrKind::Hlg
        } else {
            HdrKind::Sdr
        };
    }
    Ok(MediaInfo { container, duration_seconds, size_bytes, bit_rate, chapters, streams, hdr })
}

/// The I/O error the input's reader met, if any. FFmpeg's demuxers often report a failed
/// read() as the end of the file, and some resynchronise past it; the reader's error is sticky,
/// so it tells a short read from a real end.
pub fn io_error(input: &AVFormatContextInput) -> Option<i32> {
    let pb = input.pb;
    if pb.is_null() {
        return None;
    }
    // SAFETY: `pb` belongs to the open input and lives as long as it.
    let err = unsafe { (*pb).error };
    (err < 0 && err != ffi::AVERROR_EOF).then_some(err)
}

/// Seeks stream `video` of `input` to its keyframe before presentation time `pts` (strictly
/// before, so the frames at `pts` itself, decoded after that keyframe, come out); answers
/// FFmpeg's code (negative: the seek failed and the input is where it was).
pub fn seek_before(input: &mut AVFormatContextInput, video: usize, pts: i64) -> i32 {
    // SAFETY: seeking an open input context the caller owns.
    unsafe {
        ffi::av_seek_frame(
            input.as_mut_ptr(),
            i32::try_from(video).unwrap_or(0),
            pts.saturating_sub(1),
            ffi::AVSEEK_FLAG_BACKWARD as i32,
        )
    }
}

/// The next packet of a source, or None at its real end. A read error, or a demuxer error
/// anywhere but at the end of the file, is an error: treating it as the end would cut the
/// video short while other streams (read again later) stay whole.
pub fn read_packet(
    input: &mut AVFormatContextInput,
    what: &str,
) -> Result<Option<rsmpeg::avcodec::AVPacket>, MediaError> {
    let read = input.read_packet();
    if let Some(code) = io_error(input) {
        return Err(crate::error::from_av(&format!("reading {what}"), code));
    }
    match read {
        Ok(packet) => Ok(packet),
        Err(e) => {
            // SAFETY: `pb` belongs to the open input (checked for null first).
            let at_end = !input.pb.is_null() && unsafe { ffi::avio_feof(input.pb) } != 0;
            if at_end {
                // A last packet cut short: the file ends there.
                tracing::warn!(error = %e, what, "damaged packet at the end of the file; treating it as the end");
                Ok(None)
            } else {
                Err(crate::error::from_rsmpeg(&format!("reading {what} (not at its end)"), &e))
            }
        }
    }
}
