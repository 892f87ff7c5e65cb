//! Clips with many kinds of streams (angles, commentary, forced subtitles, a timecode
//! track, a display matrix), made at test time with the ffmpeg program and remuxed here
//! where it cannot add some side data; and what of each stream must survive an encode, as
//! the ffprobe program reports it.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use rsmpeg::avformat::{AVFormatContextInput, AVFormatContextOutput};
use rsmpeg::ffi;
use serde_json::{json, Value};

/// The streams of `path` as the ffprobe program reports them.
fn ffprobe(path: &Path) -> Value {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-show_streams", "-of", "json"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What must survive of each stream, as ffprobe reports it. The main video's codec is the
/// target's; every other fact is the source's.
pub fn facts(path: &Path, main_video_codec: Option<&str>) -> Vec<Value> {
    let probe = ffprobe(path);
    let mut main_seen = false;
    probe["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let kind = s["codec_type"].as_str().unwrap_or("");
            let mut codec = s["codec_name"].clone();
            if kind == "video" && !main_seen && s["disposition"]["attached_pic"] == 0 {
                main_seen = true;
                if let Some(c) = main_video_codec {
                    codec = json!(c);
                }
            }
            json!({
                "type": kind,
                "codec": codec,
                "tag": if kind == "data" { s["codec_tag_string"].clone() } else { Value::Null },
                "language": s["tags"]["language"],
                "title": s["tags"]["title"],
                "timecode": s["tags"]["timecode"],
                "disposition": s["disposition"],
                "side_data": s["side_data_list"],
                // "progressive" and unknown both say "not interlaced": a container that has no
                // field for it (MP4) leaves an encoder's progressive output unknown.
                "field_order": match s["field_order"].as_str() {
                    Some(order) if kind == "video" && order != "progressive" => json!(order),
                    _ => Value::Null,
                },
            })
        })
        .collect()
}

/// The path as the ffmpeg program's argument.
pub fn path_arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// MKV: two video streams (the second an extra angle with a title), two audio streams (one a
/// titled commentary), two subtitle streams (forced; hearing impaired), 2 s.
pub fn angles_clip(dir: &Path, name: &str) -> PathBuf {
    let srt = dir.join("subs.srt");
    std::fs::write(&srt, "1\n00:00:00,200 --> 00:00:01,000\nHello\n\n2\n00:00:01,200 --> 00:00:01,800\nWorld\n")
        .unwrap();
    let src = dir.join(name);
    #[rustfmt::skip]
    super::media::ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
        "-f", "lavfi", "-i", "smptebars=size=160x120:rate=25",
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
        "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000",
        "-i", path_arg(&srt), "-i", path_arg(&srt),
        "-t", "2",
        "-map", "0", "-map", "1", "-map", "2", "-map", "3", "-map", "4", "-map", "5",
        "-c:v", "libx264", "-preset", "ultrafast", "-qp", "12", "-c:a", "aac", "-c:s", "srt",
        "-metadata:s:v:1", "title=Second angle",
        "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=fra",
        "-metadata:s:a:1", "title=Commentary",
        "-metadata:s:s:0", "language=eng", "-metadata:s:s:1", "language=eng",
        "-metadata:s:s:1", "title=SDH",
        "-disposition:v:0", "default", "-disposition:v:1", "0",
        "-disposition:a:0", "default", "-disposition:a:1", "comment",
        "-disposition:s:0", "forced", "-disposition:s:1", "hearing_impaired",
        path_arg(&src),
    ]);
    src
}

/// MOV with a timecode track (`tmcd`), H.264 and AAC, 2 s.
pub fn timecode_clip(dir: &Path, name: &str) -> PathBuf {
    let src = dir.join(name);
    #[rustfmt::skip]
    super::media::ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
        "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-qp", "12", "-c:a", "aac",
        "-timecode", "01:00:00:00",
        path_arg(&src),
    ]);
    src
}

/// A phone's MP4 turned 90 degrees by its display matrix, with audio and subtitles, 2 s.
pub fn rotated_clip(dir: &Path, name: &str) -> PathBuf {
    let plain = super::media::h264_with_audio_and_subs(dir, &format!("plain-{name}"), "320x240", 2);
    let src = dir.join(name);
    remux_with_side_data(&plain, &src, &[(ffi::AVPacketSideDataType_AV_PKT_DATA_DISPLAYMATRIX, display_matrix(90.0))]);
    std::fs::remove_file(&plain).unwrap();
    src
}

/// Copies `src` into `dst`, adding stream side data to its first video stream.
pub fn remux_with_side_data(src: &Path, dst: &Path, side_data: &[(ffi::AVPacketSideDataType, Vec<u8>)]) {
    use rsmpeg::UnsafeDerefMut;
    let (mut input, mut output) = open_pair(src, dst);
    let mut tbs = Vec::new();
    for stream in input.streams() {
        let mut par = stream.codecpar().clone();
        unsafe { par.deref_mut().codec_tag = 0 };
        let video = par.codec_type == ffi::AVMediaType_AVMEDIA_TYPE_VIDEO;
        let mut out = output.new_stream();
        out.set_codecpar(par);
        out.set_time_base(stream.time_base);
        if video {
            for (kind, bytes) in side_data {
                unsafe {
                    let buf = ffi::av_malloc(bytes.len()).cast::<u8>();
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len());
                    assert!(ffi::av_stream_add_side_data(out.deref_mut(), *kind, buf, bytes.len()) >= 0);
                }
            }
        }
        tbs.push(stream.time_base);
    }
    // The MP4 muxer writes stereo 3D and spherical boxes only when asked for unofficial ones.
    unsafe { output.deref_mut().strict_std_compliance = ffi::FF_COMPLIANCE_UNOFFICIAL };
    output.write_header(&mut None).unwrap();
    copy_packets(&mut input, &mut output, &tbs);
}

/// `src` opened for reading and `dst` for writing.
pub fn open_pair(src: &Path, dst: &Path) -> (AVFormatContextInput, AVFormatContextOutput) {
    let input = AVFormatContextInput::open(&CString::new(path_arg(src)).unwrap(), None, &mut None).unwrap();
    let output = AVFormatContextOutput::create(&CString::new(path_arg(dst)).unwrap(), None).unwrap();
    (input, output)
}

/// Copies the rest of `input`'s packets into `output` (stream i into stream i, from the
/// time bases `tbs` to the output's), then ends the file. The header is written already.
pub fn copy_packets(input: &mut AVFormatContextInput, output: &mut AVFormatContextOutput, tbs: &[ffi::AVRational]) {
    let out_tbs: Vec<_> = output.streams().into_iter().map(|s| s.time_base).collect();
    while let Some(mut packet) = input.read_packet().unwrap() {
        let i = packet.stream_index as usize;
        packet.rescale_ts(tbs[i], out_tbs[i]);
        packet.set_pos(-1);
        output.interleaved_write_frame(&mut packet).unwrap();
    }
    output.write_trailer().unwrap();
}

/// A display matrix that turns the picture by `degrees`, as stream side data.
pub fn display_matrix(degrees: f64) -> Vec<u8> {
    let mut m = [0i32; 9];
    unsafe { ffi::av_display_rotation_set(m.as_mut_ptr(), degrees) };
    m.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// The audio of `mpeg_ps_clip` starts this many seconds after its video.
pub const MPEG_PS_AUDIO_OFFSET: f64 = 0.3;

/// MPEG-PS (`.mpg`): interlaced MPEG-2 video (top field first, B-frames) and MP2 audio, 2 s,
/// as a TV recording is. The muxer starts the streams at about 0.5 s, as such files have;
/// the audio starts `MPEG_PS_AUDIO_OFFSET` after the video.
pub fn mpeg_ps_clip(dir: &Path, name: &str) -> PathBuf {
    let src = dir.join(name);
    let offset = MPEG_PS_AUDIO_OFFSET.to_string();
    #[rustfmt::skip]
    super::media::ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
        "-itsoffset", &offset, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
        "-t", "2", "-map", "0", "-map", "1",
        "-c:v", "mpeg2video", "-bf", "2", "-flags", "+ildct+ilme", "-top", "1",
        "-c:a", "mp2", "-f", "mpeg",
        path_arg(&src),
    ]);
    src
}

/// Each stream's start (its first presentation time) in seconds, as ffprobe reports it.
pub fn stream_starts(path: &Path) -> Vec<f64> {
    ffprobe(path)["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["start_time"].as_str().unwrap().parse::<f64>().unwrap())
        .collect()
}

/// Video, English DTS 5.1, German, French and English commentary AAC, English and French
/// SRT, 2 s in MKV.
pub fn acceptance_clip(dir: &Path, name: &str) -> PathBuf {
    streams_clip(dir, name, "640x360", &[])
}

/// `acceptance_clip`'s streams with video of `size` (`WxH`) encoded with `video_args` added
/// to libx264's.
pub fn streams_clip(dir: &Path, name: &str, size: &str, video_args: &[&str]) -> PathBuf {
    let srt = dir.join(format!("{name}.srt"));
    std::fs::write(&srt, "1\n00:00:00,200 --> 00:00:01,000\nHello\n\n").unwrap();
    let src = dir.join(name);
    let video = format!("testsrc2=size={size}:rate=25");
    #[rustfmt::skip]
    let mut args = vec![
        "-f", "lavfi", "-i", &video,
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000,aformat=channel_layouts=5.1(side)",
        "-f", "lavfi", "-i", "sine=frequency=550:sample_rate=48000",
        "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000",
        "-f", "lavfi", "-i", "sine=frequency=770:sample_rate=48000",
        "-i", path_arg(&srt), "-i", path_arg(&srt), "-t", "2",
        "-map", "0", "-map", "1", "-map", "2", "-map", "3", "-map", "4", "-map", "5", "-map", "6",
        "-c:v", "libx264", "-preset", "ultrafast",
    ];
    args.extend_from_slice(video_args);
    #[rustfmt::skip]
    args.extend_from_slice(&[
        "-c:a", "aac", "-c:a:0", "dca", "-strict", "-2",
        "-c:s", "srt",
        "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=deu",
        "-metadata:s:a:2", "language=fra", "-metadata:s:a:3", "language=eng",
        "-metadata:s:a:3", "title=Commentary", "-disposition:a:0", "default",
        "-disposition:a:3", "comment",
        "-metadata:s:s:0", "language=eng", "-metadata:s:s:1", "language=fra",
        path_arg(&src),
    ]);
    super::media::ffmpeg(&args);
    std::fs::remove_file(&srt).unwrap();
    src
}

/// The streams of `path` as the ffprobe program reports them, as a list.
pub fn ffprobe_streams(path: &Path) -> Vec<Value> {
    ffprobe(path)["streams"].as_array().unwrap().clone()
}

/// Adds to `output` a stream like each of `input`'s (parameters without the codec tag, time
/// base, tags, dispositions), for `copy_packets`; their time bases, in order.
pub fn copy_streams(input: &AVFormatContextInput, output: &mut AVFormatContextOutput) -> Vec<ffi::AVRational> {
    use rsmpeg::UnsafeDerefMut;
    let mut tbs = Vec::new();
    for stream in input.streams() {
        let mut par = stream.codecpar().clone();
        unsafe { par.deref_mut().codec_tag = 0 };
        let mut out = output.new_stream();
        out.set_codecpar(par);
        out.set_time_base(stream.time_base);
        unsafe {
            let raw = out.deref_mut();
            assert!(ffi::av_dict_copy(&mut raw.metadata, stream.metadata, 0) >= 0);
            raw.disposition = stream.disposition;
        }
        tbs.push(stream.time_base);
    }
    tbs
}

/// Copies `src` into `dst` (every stream with its tags and dispositions) with a DVD (VobSub)
/// image subtitle added after its streams, tagged `language`: one picture shown from 0.2 s
/// to 1.0 s. FFmpeg encodes bitmap subtitles only from bitmap subtitles and generates none,
/// so the subtitle's one packet (an SPU: a 2x4 picture, run-length coded, and its display
/// commands) is written here.
pub fn with_image_subtitle(src: &Path, dst: &Path, language: &str) {
    use rsmpeg::avcodec::{AVCodecParameters, AVPacket};
    use rsmpeg::UnsafeDerefMut;
    let (mut input, mut output) = open_pair(src, dst);
    let mut tbs = copy_streams(&input, &mut output);
    let index = tbs.len();
    let mut par = AVCodecParameters::new();
    // The Matroska track's private data: the picture size and palette, as VobSub's .idx has.
    let idx = "size: 720x480\npalette: 000000, ffffff, 808080, 000000, 000000, 000000, 000000, 000000, \
               000000, 000000, 000000, 000000, 000000, 000000, 000000, 000000\n";
    unsafe {
        let raw = par.deref_mut();
        raw.codec_type = ffi::AVMediaType_AVMEDIA_TYPE_SUBTITLE;
        raw.codec_id = ffi::AVCodecID_AV_CODEC_ID_DVD_SUBTITLE;
        raw.width = 720;
        raw.height = 480;
        let buf = ffi::av_mallocz(idx.len() + ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize).cast::<u8>();
        std::ptr::copy_nonoverlapping(idx.as_ptr(), buf, idx.len());
        raw.extradata = buf;
        raw.extradata_size = idx.len() as i32;
    }
    let ms = ffi::AVRational { num: 1, den: 1000 };
    {
        let mut out = output.new_stream();
        out.set_codecpar(par);
        out.set_time_base(ms);
        let key = CString::new("language").unwrap();
        let value = CString::new(language).unwrap();
        unsafe { assert!(ffi::av_dict_set(&mut out.deref_mut().metadata, key.as_ptr(), value.as_ptr(), 0) >= 0) };
    }
    tbs.push(ms);
    output.write_header(&mut None).unwrap();
    #[rustfmt::skip]
    let spu: [u8; 42] = [
        0, 42, 0, 12,                 // packet size, offset of the first command sequence
        0, 0, 0, 0,                   // top field: two lines, each "colour 0 to the line's end"
        0, 0, 0, 0,                   // bottom field: the same
        0, 0, 0, 36,                  // sequence 1: at once; the next at 36
        0x03, 0x01, 0x23,             // palette
        0x04, 0xff, 0xf0,             // contrast
        0x05, 0x00, 0x00, 0x01, 0x00, 0x00, 0x03, // x 0..1, y 0..3
        0x06, 0x00, 0x04, 0x00, 0x08, // fields' offsets
        0x01, 0xff,                   // show; end
        0, 70, 0, 36,                 // sequence 2: after 70 x 1024/90000 s (0.8 s); the last
        0x02, 0xff,                   // hide; end
    ];
    let mut packet = AVPacket::new();
    unsafe {
        let raw = packet.deref_mut();
        assert!(ffi::av_new_packet(raw, spu.len() as i32) >= 0);
        std::ptr::copy_nonoverlapping(spu.as_ptr(), raw.data, spu.len());
        raw.flags |= ffi::AV_PKT_FLAG_KEY as i32;
    }
    packet.set_stream_index(index as i32);
    packet.set_pts(200);
    packet.set_dts(200);
    packet.set_duration(800);
    let out_tb = output.streams().get(index).unwrap().time_base;
    packet.rescale_ts(ms, out_tb);
    output.interleaved_write_frame(&mut packet).unwrap();
    copy_packets(&mut input, &mut output, &tbs);
}
