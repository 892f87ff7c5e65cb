//! No stream is dropped: every stream of a source reaches the output (or the file is refused
//! with a reason naming the stream), with its tags, dispositions, side data and field order.
//! Clips are made with the ffmpeg program (and remuxed here where it cannot add some side
//! data), encoded through the real transcoder child, and checked with the ffprobe program.

use std::path::{Path, PathBuf};

use condense::domain::job::FailureCode;
use condense::media::plan::EncodePlan;
use condense::media::transcoder::{ChildEnd, Transcoder};
use condense_media::probe::probe;
use condense_media::verify::verify;
use rsmpeg::ffi;
use serde_json::Value;

use crate::common::media as clips;
use crate::common::server::media_binary;
use crate::common::streams::{
    angles_clip, copy_packets, copy_streams, facts, mpeg_ps_clip, open_pair, path_arg, remux_with_side_data,
    rotated_clip, stream_starts, timecode_clip, MPEG_PS_AUDIO_OFFSET,
};

/// Encodes `src` through the transcoder child and our verification; answers the output.
async fn encode(src: &Path, codec: &str, encoder: &str, preset: &str) -> Result<PathBuf, condense::media::MediaError> {
    let info = probe(src).unwrap();
    let plan = EncodePlan::new(src, &info, &clips::profile(encoder, 30, preset)).unwrap();
    assert_eq!(plan.target_codec, codec);
    let mut child = Transcoder::spawn(media_binary(), &plan).await.unwrap();
    while child.events.recv().await.is_some() {}
    match child.wait().await {
        ChildEnd::Completed => {}
        ChildEnd::Failed(e) => return Err(e),
        other => panic!("{other:?}"),
    }
    let output = plan.output_path();
    verify(&output, src, &info, codec).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    Ok(output)
}

fn assert_kept(src: &Path, out: &Path, codec: &str) -> Vec<Value> {
    let want = facts(src, Some(codec));
    let got = facts(out, None);
    assert_eq!(got, want, "{} lost something of {}", out.display(), src.display());
    got
}

#[actix_web::test]
async fn a_second_video_stream_and_tagged_dispositioned_audio_and_subtitles_are_all_kept() {
    let dir = tempfile::tempdir().unwrap();
    let src = angles_clip(dir.path(), "angles.mkv");
    for (codec, encoder, preset) in [("hevc", "libx265", "ultrafast"), ("av1", "libsvtav1", "12")] {
        let out = encode(&src, codec, encoder, preset).await.unwrap();
        let got = assert_kept(&src, &out, codec);
        assert_eq!(got.len(), 6, "{got:#?}");
        assert_eq!(got[1]["codec"], "h264", "the second angle is copied");
        assert_eq!(got[1]["title"], "Second angle");
        assert_eq!(got[3]["disposition"]["comment"], 1);
        assert_eq!(got[4]["disposition"]["forced"], 1);
        assert_eq!(got[5]["disposition"]["hearing_impaired"], 1);
        std::fs::remove_dir_all(out.parent().unwrap()).unwrap();
    }
}

/// A camera's MOV with a timecode track (`tmcd`, a data stream): kept in MOV; refused, with a
/// reason naming it, where the output must be Matroska (AV1 in MOV), which cannot hold it.
#[actix_web::test]
async fn a_mov_timecode_track_is_kept_or_the_file_refused_never_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let src = timecode_clip(dir.path(), "camera.mov");
    let before = facts(&src, None);
    assert!(before.iter().any(|f| f["type"] == "data" && f["tag"] == "tmcd"), "{before:#?}");
    let out = encode(&src, "hevc", "libx265", "ultrafast").await.unwrap();
    assert_eq!(out.extension().unwrap(), "mov");
    let got = assert_kept(&src, &out, "hevc");
    assert!(got.iter().any(|f| f["type"] == "data" && f["tag"] == "tmcd" && f["timecode"] == "01:00:00:00"));
    std::fs::remove_dir_all(out.parent().unwrap()).unwrap();

    let err = encode(&src, "av1", "libsvtav1", "12").await.expect_err("a stream was dropped");
    assert_eq!(err.code, FailureCode::UnsupportedStream, "{err}");
    assert!(err.message.contains("tmcd") && err.message.contains("mkv"), "{err}");
}

fn stereo_top_bottom() -> Vec<u8> {
    unsafe {
        let st = ffi::av_stereo3d_alloc();
        (*st).type_ = ffi::AVStereo3DType_AV_STEREO3D_TOPBOTTOM;
        let bytes = std::slice::from_raw_parts(st.cast::<u8>(), std::mem::size_of::<ffi::AVStereo3D>()).to_vec();
        ffi::av_free(st.cast());
        bytes
    }
}

fn spherical_equirectangular() -> Vec<u8> {
    unsafe {
        let mut size = 0usize;
        let sp = ffi::av_spherical_alloc(&mut size);
        (*sp).projection = ffi::AVSphericalProjection_AV_SPHERICAL_EQUIRECTANGULAR;
        (*sp).yaw = 90 << 16;
        let bytes = std::slice::from_raw_parts(sp.cast::<u8>(), size).to_vec();
        ffi::av_free(sp.cast());
        bytes
    }
}

/// A phone's video: MP4 with a display matrix that turns it 90 degrees. Without the matrix
/// the encoded file plays sideways.
#[actix_web::test]
async fn a_rotated_phone_video_keeps_its_display_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let src = rotated_clip(dir.path(), "phone.mp4");
    let rotation = |path: &Path| probe(path).unwrap().video().unwrap().rotation.map(f64::abs);
    assert_eq!(rotation(&src), Some(90.0));
    let out = encode(&src, "hevc", "libx265", "ultrafast").await.unwrap();
    let got = assert_kept(&src, &out, "hevc");
    assert_eq!(got[0]["side_data"][0]["rotation"].as_f64().map(f64::abs), Some(90.0), "{got:#?}");
    assert_eq!(rotation(&out), Some(90.0));
}

/// Stereo 3D and spherical (360°) video keep their side data in Matroska and in MP4.
#[actix_web::test]
async fn stereo_3d_and_spherical_video_keep_their_side_data() {
    let dir = tempfile::tempdir().unwrap();
    let plain = clips::h264(dir.path(), "plain.mkv", "320x240", 2);
    let side_data = [
        (ffi::AVPacketSideDataType_AV_PKT_DATA_STEREO3D, stereo_top_bottom()),
        (ffi::AVPacketSideDataType_AV_PKT_DATA_SPHERICAL, spherical_equirectangular()),
    ];
    for name in ["vr.mkv", "vr.mp4"] {
        let src = dir.path().join(name);
        remux_with_side_data(&plain, &src, &side_data);
        let kinds = probe(&src).unwrap().video().unwrap().side_data.clone();
        assert_eq!(kinds, ["Stereo 3D", "Spherical Mapping"], "{name}");
        let out = encode(&src, "hevc", "libx265", "ultrafast").await.unwrap();
        let got = assert_kept(&src, &out, "hevc");
        assert_eq!(got[0]["side_data"].as_array().map(Vec::len), Some(2), "{name}: {got:#?}");
    }
}

/// Interlaced video keeps its field order (the container says how to show the frames), in
/// Matroska and in MP4.
#[actix_web::test]
async fn interlaced_video_keeps_its_field_order() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["tv.mkv", "tv.mp4"] {
        let src = dir.path().join(name);
        #[rustfmt::skip]
        clips::ffmpeg(&[
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
            "-t", "2", "-vf", "setfield=tff", "-c:v", "libx264", "-preset", "ultrafast", "-qp", "12",
            "-flags", "+ildct+ilme", "-field_order", "tt",
            path_arg(&src),
        ]);
        assert_eq!(probe(&src).unwrap().video().unwrap().field_order.as_deref(), Some("tt"), "{name}");
        let out = encode(&src, "hevc", "libx265", "ultrafast").await.unwrap();
        let got = assert_kept(&src, &out, "hevc");
        assert_eq!(got[0]["field_order"], "tt", "{name}");
    }
}

/// Copies `src` (an MP4) into `dst` with a GoPro metadata track added: a data stream tagged
/// `gpmd`, one sample a second.
fn with_gopro_metadata(src: &Path, dst: &Path) {
    use rsmpeg::avcodec::AVPacket;
    use rsmpeg::UnsafeDerefMut;
    let (mut input, mut output) = open_pair(src, dst);
    let tbs = copy_streams(&input, &mut output);
    let gpmd = {
        let mut par = rsmpeg::avcodec::AVCodecParameters::new();
        unsafe {
            let raw = par.deref_mut();
            raw.codec_type = ffi::AVMediaType_AVMEDIA_TYPE_DATA;
            raw.codec_id = ffi::AVCodecID_AV_CODEC_ID_BIN_DATA;
            raw.codec_tag = u32::from_le_bytes(*b"gpmd");
        }
        let mut out = output.new_stream();
        out.set_codecpar(par);
        out.set_time_base(ffi::AVRational { num: 1, den: 1000 });
        out.index as usize
    };
    output.write_header(&mut None).unwrap();
    let out_tbs: Vec<_> = output.streams().into_iter().map(|s| s.time_base).collect();
    for second in 0..2i64 {
        let payload = b"DEVC\x00\x00\x00\x00GoPro metadata sample";
        let mut packet = AVPacket::new();
        unsafe {
            assert_eq!(ffi::av_new_packet(packet.as_mut_ptr(), payload.len() as i32), 0);
            std::ptr::copy_nonoverlapping(payload.as_ptr(), packet.deref_mut().data, payload.len());
        }
        packet.set_stream_index(gpmd as i32);
        packet.set_pts(second * 1000);
        packet.set_dts(second * 1000);
        packet.set_duration(1000);
        packet.rescale_ts(ffi::AVRational { num: 1, den: 1000 }, out_tbs[gpmd]);
        output.interleaved_write_frame(&mut packet).unwrap();
    }
    copy_packets(&mut input, &mut output, &tbs);
}

/// A GoPro's MP4 carries its sensor data (`gpmd`) in a data stream: it is copied.
#[actix_web::test]
async fn a_gopro_metadata_track_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let plain = clips::h264_with_audio_and_subs(dir.path(), "plain.mp4", "320x240", 2);
    let src = dir.path().join("gopro.mp4");
    with_gopro_metadata(&plain, &src);
    let before = facts(&src, None);
    assert!(before.iter().any(|f| f["type"] == "data" && f["tag"] == "gpmd"), "{before:#?}");
    let out = encode(&src, "hevc", "libx265", "ultrafast").await.unwrap();
    let got = assert_kept(&src, &out, "hevc");
    assert!(got.iter().any(|f| f["type"] == "data" && f["tag"] == "gpmd"), "{got:#?}");
}

/// An interlaced MPEG program stream starts at about 0.5 s: the output starts at 0 (players
/// would otherwise count the half second into its length), every stream moved back alike,
/// so the audio still starts as long after the video as in the source (a known offset,
/// measured with ffprobe on both), and the fields keep their order.
#[actix_web::test]
async fn a_late_starting_mpeg_program_stream_starts_at_zero_with_its_av_offset_kept() {
    let dir = tempfile::tempdir().unwrap();
    let src = mpeg_ps_clip(dir.path(), "tv.mpg");
    let frame = 1.0 / 25.0;
    let before = stream_starts(&src);
    let offset_before = before[1] - before[0];
    assert!(before[0] > 0.4, "{before:?}");
    assert!((offset_before - MPEG_PS_AUDIO_OFFSET).abs() <= frame, "the clip's A/V offset is {offset_before}");
    let out = encode(&src, "hevc", "libx265", "ultrafast").await.unwrap();
    let after = stream_starts(&out);
    assert_eq!(after[0], 0.0, "the video starts at 0: {after:?}");
    let offset_after = after[1] - after[0];
    assert!((offset_after - MPEG_PS_AUDIO_OFFSET).abs() <= frame, "A/V offset {offset_after}");
    // Matroska keeps milliseconds.
    assert!((offset_after - offset_before).abs() <= 0.0015, "A/V offset {offset_before} became {offset_after}");
    assert_eq!(facts(&out, None)[0]["field_order"], "tt", "{:#?}", facts(&out, None));
    std::fs::remove_dir_all(out.parent().unwrap()).unwrap();
}
