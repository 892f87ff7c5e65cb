//! Clips made at test time with the ffmpeg program (lavfi test sources): no media in git.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The encoding profile of a first attempt with this encoder, quality and preset.
pub fn profile(encoder: &str, quality: u32, preset: &str) -> condense::domain::encoding::EncodeProfile {
    use condense::domain::encoding::{EncodeProfile, RateControl, RetryProfile};
    EncodeProfile {
        encoder: encoder.parse().unwrap(),
        hardware_decode: false,
        ten_bit_allowed: true,
        preset: Some(preset.to_string()),
        quality,
        cautious: false,
        retry_profile: RetryProfile::AsConfigured,
        rate: RateControl::Crf,
    }
}

pub fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg").args(["-v", "error", "-y"]).args(args).output().expect("ffmpeg runs");
    assert!(out.status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// One second of `encoder`'s video in ASF written through a pipe: the muxer cannot seek
/// back to record the length, and ASF leaves FFmpeg no other way to learn it, so the file
/// is a whole container without a duration.
pub fn without_length(dir: &Path, name: &str, encoder: &str) -> PathBuf {
    let out = dir.join(name);
    let script = format!(
        "ffmpeg -v error -f lavfi -i testsrc2=size=320x240:rate=25 -t 1 -c:v {encoder} -f asf - | cat > '{}'",
        out.display()
    );
    let status = Command::new("sh").args(["-c", &script]).status().expect("sh runs");
    assert!(status.success(), "{script}");
    out
}

fn subtitles(dir: &Path) -> PathBuf {
    let path = dir.join("subs.srt");
    std::fs::write(&path, "1\n00:00:00,200 --> 00:00:01,000\nHello\n\n2\n00:00:01,200 --> 00:00:01,800\nWorld\n")
        .unwrap();
    path
}

/// H.264 (high bitrate, so any HEVC/AV1 encode is smaller) + AAC + SRT subtitles in MKV.
/// Like the clips below, a keyframe every second (as cameras and streaming encodes make
/// them), so the service cuts it into spans that sessions encode at once.
pub fn h264_with_audio_and_subs(dir: &Path, name: &str, size: &str, seconds: u32) -> PathBuf {
    let out = dir.join(name);
    let subs = subtitles(dir);
    let video = format!("testsrc2=size={size}:rate=25");
    let t = seconds.to_string();
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &video,
        "-f",
        "lavfi",
        "-i",
        "sine=frequency=440:sample_rate=48000",
        "-i",
        subs.to_str().unwrap(),
        "-t",
        &t,
        "-map",
        "0",
        "-map",
        "1",
        "-map",
        "2",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-qp",
        "12",
        "-g",
        "25",
        "-c:a",
        "aac",
        "-c:s",
        if name.ends_with(".mp4") { "mov_text" } else { "srt" },
        "-metadata:s:a:0",
        "language=eng",
        "-metadata:s:s:0",
        "language=fra",
        out.to_str().unwrap(),
    ]);
    out
}

/// A `testsrc2` clip of `size` and `seconds`, encoded with `encode` (whitespace-separated
/// ffmpeg arguments).
fn testsrc(dir: &Path, name: &str, size: &str, seconds: u32, encode: &str) -> PathBuf {
    let out = dir.join(name);
    let video = format!("testsrc2=size={size}:rate=25");
    let seconds = seconds.to_string();
    let mut args = vec!["-f", "lavfi", "-i", &video, "-t", &seconds];
    args.extend(encode.split_whitespace());
    args.push(out.to_str().unwrap());
    ffmpeg(&args);
    out
}

/// A 320x240 H.264 clip of heavy noise, `seconds` long, at `dir/name`: some MB that encode
/// to over a MB, so moving it under a rate cap takes seconds.
pub fn noisy_h264(dir: &Path, name: &str, seconds: u32) -> PathBuf {
    testsrc(dir, name, "320x240", seconds, "-vf noise=alls=60:allf=t -c:v libx264 -preset ultrafast -qp 12")
}

/// An already efficient H.264 clip at `path` (CRF 32, medium): a re-encode rarely beats it.
pub fn efficient(path: &Path, size: &str, seconds: u32) {
    let video = format!("testsrc2=size={size}:rate=25");
    let t = seconds.to_string();
    let out = path.to_str().unwrap();
    ffmpeg(&[
        "-f", "lavfi", "-i", &video, "-t", &t, "-c:v", "libx264", "-preset", "medium", "-crf", "32", "-g", "25", out,
    ]);
}

/// A plain H.264 clip without audio.
pub fn h264(dir: &Path, name: &str, size: &str, seconds: u32) -> PathBuf {
    testsrc(dir, name, size, seconds, "-c:v libx264 -preset ultrafast -qp 12 -g 25")
}

/// 10-bit H.264 SDR (BT.709).
pub fn h264_ten_bit(dir: &Path, name: &str) -> PathBuf {
    testsrc(dir, name, "320x240", 2, "-pix_fmt yuv420p10le -c:v libx264 -preset ultrafast -qp 10")
}

/// 10-bit 4:2:2 H.264 SDR (High 4:2:2), `seconds` long.
pub fn h264_422_ten_bit(dir: &Path, name: &str, seconds: u32) -> PathBuf {
    testsrc(dir, name, "320x240", seconds, "-pix_fmt yuv422p10le -c:v libx264 -preset ultrafast -qp 10 -g 25")
}

pub fn hevc(dir: &Path, name: &str) -> PathBuf {
    testsrc(dir, name, "320x240", 2, "-c:v libx265 -preset ultrafast -x265-params log-level=error")
}

pub const MASTER_DISPLAY: &str = "G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,50)";

const BT2020: &str = "-color_primaries bt2020 -colorspace bt2020nc -pix_fmt yuv420p10le";

/// 10-bit HEVC HDR10: PQ, BT.2020, mastering display and content light level.
pub fn hdr10(dir: &Path, name: &str) -> PathBuf {
    let params = format!(
        "log-level=error:hdr10=1:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc:master-display={MASTER_DISPLAY}:max-cll=1000,400"
    );
    let encode = format!("{BT2020} -color_trc smpte2084 -c:v libx265 -preset ultrafast -x265-params {params}");
    testsrc(dir, name, "320x240", 2, &encode)
}

/// 10-bit H.264 HLG (BT.2020, ARIB STD-B67 transfer).
pub fn hlg(dir: &Path, name: &str) -> PathBuf {
    let encode = format!("{BT2020} -color_trc arib-std-b67 -c:v libx264 -preset ultrafast -qp 10");
    testsrc(dir, name, "320x240", 2, &encode)
}

pub fn sha(path: &Path) -> Vec<u8> {
    // A byte-for-byte copy is the honest comparison for "unchanged".
    std::fs::read(path).unwrap()
}

/// The HDR10 clip's encode (`seconds` long, a keyframe every second, B-frames) in Matroska
/// with NAL units added to each access unit: `add(n)` gives, for the `n`th packet in decode
/// order, a unit to put first (a prefix SEI) and one to put last (an RPU), each with its
/// header. `dovi` is a Dolby Vision configuration record for the stream.
fn hdr10_rewritten(
    dir: &Path,
    name: &str,
    seconds: u32,
    dovi: Option<rsmpeg::ffi::AVDOVIDecoderConfigurationRecord>,
    add: &mut dyn FnMut(u32) -> (Option<Vec<u8>>, Option<Vec<u8>>),
) -> PathBuf {
    use rsmpeg::avcodec::AVPacket;
    use rsmpeg::avformat::{AVFormatContextInput, AVFormatContextOutput};
    use rsmpeg::ffi;
    use rsmpeg::UnsafeDerefMut;
    let params = format!(
        "log-level=error:hdr10=1:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc:master-display={MASTER_DISPLAY}:max-cll=1000,400:keyint=25:min-keyint=25"
    );
    let encode = format!("{BT2020} -color_trc smpte2084 -c:v libx265 -preset ultrafast -x265-params {params}");
    let plain = testsrc(dir, &format!("plain-{name}"), "320x240", seconds, &encode);
    let path = dir.join(name);
    let cpath = |p: &Path| std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let mut input = AVFormatContextInput::open(&cpath(&plain), None, &mut None).unwrap();
    let mut output = AVFormatContextOutput::create(&cpath(&path), None).unwrap();
    let in_tb = input.streams().get(0).unwrap().time_base;
    {
        let par = input.streams().get(0).unwrap().codecpar().clone();
        let mut stream = output.new_stream();
        stream.set_codecpar(par);
        stream.set_time_base(in_tb);
        if let Some(record) = dovi {
            unsafe {
                let mut size = 0usize;
                let r = ffi::av_dovi_alloc(&mut size);
                *r = record;
                assert!(
                    ffi::av_stream_add_side_data(
                        stream.as_mut_ptr(),
                        ffi::AVPacketSideDataType_AV_PKT_DATA_DOVI_CONF,
                        r.cast(),
                        size
                    ) >= 0
                );
            }
        }
    }
    output.write_header(&mut None).unwrap();
    let out_tb = output.streams().get(0).unwrap().time_base;
    let mut n = 0u32;
    // Matroska frames NAL units by 4-byte lengths (x265's hvcC).
    let framed = |nal: Vec<u8>| (nal.len() as u32).to_be_bytes().into_iter().chain(nal).collect::<Vec<u8>>();
    while let Some(packet) = input.read_packet().unwrap() {
        let (first, last) = add(n);
        n += 1;
        let mut data = first.map(framed).unwrap_or_default();
        data.extend_from_slice(unsafe { std::slice::from_raw_parts(packet.data, packet.size as usize) });
        data.extend(last.map(framed).unwrap_or_default());
        let mut out = AVPacket::new();
        unsafe {
            assert!(ffi::av_new_packet(out.as_mut_ptr(), data.len() as i32) >= 0);
            std::slice::from_raw_parts_mut(out.deref_mut().data, data.len()).copy_from_slice(&data);
        }
        out.set_pts(packet.pts);
        out.set_dts(packet.dts);
        out.set_duration(packet.duration);
        out.set_flags(packet.flags);
        out.set_stream_index(0);
        out.rescale_ts(in_tb, out_tb);
        output.interleaved_write_frame(&mut out).unwrap();
    }
    output.write_trailer().unwrap();
    assert_eq!(n, seconds * 25, "access units");
    std::fs::remove_file(&plain).unwrap();
    path
}

/// 10-bit HEVC HDR10+ in Matroska (see `hdr10_rewritten`): an HDR10+ SEI message first in
/// every access unit, written by the `hdr10plus` crate (not by condense), each frame's
/// values its own (scene maxima, average and percentiles follow the frame's number in
/// decode order, plus `first`).
pub fn hdr10plus(dir: &Path, name: &str, seconds: u32, first: u32) -> PathBuf {
    use hdr10plus::metadata::{DistributionMaxRgb, Hdr10PlusMetadata};
    hdr10_rewritten(dir, name, seconds, None, &mut |n| {
        let v = n + first;
        let meta = Hdr10PlusMetadata {
            itu_t_t35_country_code: 0xB5,
            itu_t_t35_terminal_provider_code: 0x3C,
            itu_t_t35_terminal_provider_oriented_code: 1,
            application_identifier: 4,
            application_version: 1,
            num_windows: 1,
            maxscl: [1000 + v * 37, 800 + v * 13, 600 + v * 7],
            average_maxrgb: 100 + v * 3,
            num_distribution_maxrgb_percentiles: 9,
            distribution_maxrgb: [1u8, 5, 10, 25, 50, 75, 90, 95, 99]
                .iter()
                .enumerate()
                .map(|(i, &percentage)| DistributionMaxRgb { percentage, percentile: v * 10 + i as u32 * 50 })
                .collect(),
            fraction_bright_pixels: (v % 1000) as u16,
            ..Default::default()
        };
        (Some(hdr10plus::hevc::encode_hdr10plus_nal(&meta, true).unwrap()), None)
    })
}

/// Dolby Vision profile 8.1 in Matroska (see `hdr10_rewritten`): the HDR10 clip as its base
/// layer, an RPU last in every access unit, generated by the `dolby_vision` crate, each
/// frame a shot of its own with its own L1 brightness (min, max, average follow its number
/// in decode order), and the stream's configuration record saying 8.1.
pub fn dolby_vision(dir: &Path, name: &str, seconds: u32) -> PathBuf {
    use dolby_vision::rpu::extension_metadata::blocks::{
        ExtMetadataBlock, ExtMetadataBlockLevel1, ExtMetadataBlockLevel6,
    };
    use dolby_vision::rpu::generate::{GenerateConfig, GenerateProfile, VideoShot};
    use dolby_vision::rpu::vdr_dm_data::CmVersion;
    let frames = (seconds * 25) as usize;
    let config = GenerateConfig {
        cm_version: CmVersion::V40,
        profile: GenerateProfile::Profile81,
        long_play_mode: false,
        length: frames,
        source_min_pq: None,
        source_max_pq: None,
        l1_avg_pq_cm_version: None,
        level5: Default::default(),
        level6: Some(ExtMetadataBlockLevel6 {
            max_display_mastering_luminance: 1000,
            min_display_mastering_luminance: 50,
            max_content_light_level: 1000,
            max_frame_average_light_level: 400,
        }),
        level254: None,
        default_metadata_blocks: Vec::new(),
        shots: (0..frames)
            .map(|i| VideoShot {
                start: i,
                duration: 1,
                metadata_blocks: vec![ExtMetadataBlock::Level1(ExtMetadataBlockLevel1::new(
                    (i % 100) as u16,
                    2000 + i as u16 * 7,
                    1000 + i as u16 * 3,
                ))],
                ..Default::default()
            })
            .collect(),
    };
    let rpus: Vec<Vec<u8>> =
        config.generate_rpu_list().unwrap().iter().map(|r| r.write_hevc_unspec62_nalu().unwrap()).collect();
    let record = rsmpeg::ffi::AVDOVIDecoderConfigurationRecord {
        dv_version_major: 1,
        dv_version_minor: 0,
        dv_profile: 8,
        dv_level: 1,
        rpu_present_flag: 1,
        el_present_flag: 0,
        bl_present_flag: 1,
        dv_bl_signal_compatibility_id: 1,
    };
    hdr10_rewritten(dir, name, seconds, Some(record), &mut |n| (None, rpus.get(n as usize).cloned()))
}

/// The average bitrate of the first video stream of `path`, in kbit/s: the bytes of its
/// packets over their summed durations, as the ffprobe program reads them (Matroska keeps
/// no per-stream bitrate).
pub fn video_kbps(path: &Path) -> f64 {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=size,duration_time", "-of", "json"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let number = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    let (mut bytes, mut seconds) = (0f64, 0f64);
    for packet in report["packets"].as_array().unwrap() {
        bytes += number(&packet["size"]);
        seconds += number(&packet["duration_time"]);
    }
    assert!(seconds > 0.0, "no video packets with durations in {}", path.display());
    bytes * 8.0 / seconds / 1000.0
}
