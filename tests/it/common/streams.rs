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

/// MPEG-PS (`.mpg`): MPEG-2 video (B-frames) and MP2 audio, 2 s. The muxer starts the
/// streams at about 0.5 s, as such files have; the audio starts 0.3 s after the video.
pub fn mpeg_ps_clip(dir: &Path, name: &str) -> PathBuf {
    let src = dir.join(name);
    #[rustfmt::skip]
    super::media::ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
        "-itsoffset", "0.3", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
        "-t", "2", "-map", "0", "-map", "1",
        "-c:v", "mpeg2video", "-bf", "2", "-c:a", "mp2", "-f", "mpeg",
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
    let srt = dir.join(format!("{name}.srt"));
    std::fs::write(&srt, "1\n00:00:00,200 --> 00:00:01,000\nHello\n\n").unwrap();
    let src = dir.join(name);
    #[rustfmt::skip]
    super::media::ffmpeg(&[
        "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25",
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000,aformat=channel_layouts=5.1(side)",
        "-f", "lavfi", "-i", "sine=frequency=550:sample_rate=48000",
        "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000",
        "-f", "lavfi", "-i", "sine=frequency=770:sample_rate=48000",
        "-i", path_arg(&srt), "-i", path_arg(&srt), "-t", "2",
        "-map", "0", "-map", "1", "-map", "2", "-map", "3", "-map", "4", "-map", "5", "-map", "6",
        "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-c:a:0", "dca", "-strict", "-2",
        "-c:s", "srt",
        "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=deu",
        "-metadata:s:a:2", "language=fra", "-metadata:s:a:3", "language=eng",
        "-metadata:s:a:3", "title=Commentary", "-disposition:a:0", "default",
        "-disposition:a:3", "comment",
        "-metadata:s:s:0", "language=eng", "-metadata:s:s:1", "language=fra",
        path_arg(&src),
    ]);
    std::fs::remove_file(&srt).unwrap();
    src
}

/// The streams of `path` as the ffprobe program reports them, as a list.
pub fn ffprobe_streams(path: &Path) -> Vec<Value> {
    ffprobe(path)["streams"].as_array().unwrap().clone()
}

/// One DVD (VobSub) subtitle: a 2x2 picture shown from 0.2 s for about half a second. FFmpeg
/// cannot draw text into an image subtitle, so the packet is written here: the sub-picture's
/// size, the offset of its control sequences, the two fields' run-length lines (two pixels of
/// colour 1 each), then "show" with palette, contrast, area and field offsets, and "hide".
const DVD_SUBTITLE: [u8; 36] = [
    0x00, 0x24, 0x00, 0x06, // size 36, control sequences at 6
    0x90, 0x90, // top and bottom field: a run of 2 pixels of colour 1
    0x00, 0x00, 0x00, 0x1e, // at once; next sequence at 30
    0x01, // start display
    0x03, 0x32, 0x10, // palette
    0x04, 0xff, 0xf0, // contrast
    0x05, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, // x 0 to 1, y 0 to 1
    0x06, 0x00, 0x04, 0x00, 0x05, // field offsets
    0xff, // end of sequence
    0x00, 0x32, 0x00, 0x1e, // 50 ticks later; the last sequence
    0x02, // stop display
    0xff,
];

/// Copies `src` into `dst` (Matroska) with an image subtitle (`dvd_subtitle`) in `language`
/// after its streams (their tags are not copied).
pub fn with_image_subtitle(src: &Path, dst: &Path, language: &str) {
    use rsmpeg::avcodec::{AVCodecParameters, AVPacket};
    use rsmpeg::avutil::AVDictionary;
    use rsmpeg::UnsafeDerefMut;
    let (mut input, mut output) = open_pair(src, dst);
    let mut tbs = Vec::new();
    for stream in input.streams() {
        let mut par = stream.codecpar().clone();
        unsafe { par.deref_mut().codec_tag = 0 };
        let mut out = output.new_stream();
        out.set_codecpar(par);
        out.set_time_base(stream.time_base);
        tbs.push(stream.time_base);
    }
    let subtitle = tbs.len();
    {
        let mut par = AVCodecParameters::new();
        unsafe {
            par.deref_mut().codec_type = ffi::AVMediaType_AVMEDIA_TYPE_SUBTITLE;
            par.deref_mut().codec_id = ffi::AVCodecID_AV_CODEC_ID_DVD_SUBTITLE;
        }
        let mut out = output.new_stream();
        out.set_codecpar(par);
        out.set_time_base(ffi::AVRational { num: 1, den: 1000 });
        let language = CString::new(language).unwrap();
        out.set_metadata(Some(AVDictionary::new(c"language", &language, 0)));
    }
    output.write_header(&mut None).unwrap();
    let tb = output.streams().into_iter().nth(subtitle).unwrap().time_base;
    let mut packet = AVPacket::new();
    unsafe {
        let raw = packet.as_mut_ptr();
        assert!(ffi::av_new_packet(raw, DVD_SUBTITLE.len() as i32) >= 0);
        std::ptr::copy_nonoverlapping(DVD_SUBTITLE.as_ptr(), (*raw).data, DVD_SUBTITLE.len());
        (*raw).stream_index = subtitle as i32;
        (*raw).pts = 200 * i64::from(tb.den) / (1000 * i64::from(tb.num));
        (*raw).dts = (*raw).pts;
        (*raw).duration = 500 * i64::from(tb.den) / (1000 * i64::from(tb.num));
    }
    output.interleaved_write_frame(&mut packet).unwrap();
    copy_packets(&mut input, &mut output, &tbs);
}
