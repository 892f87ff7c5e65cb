//! What each encoder is given: the pixel format it encodes in, its options (the plan's
//! quality, preset and fixed options, threads, and HDR10's static metadata in the form each
//! encoder takes it), and the one safe way to open it with them.

use std::ffi::CString;

use rsmpeg::avcodec::{AVCodec, AVCodecContext};
use rsmpeg::avutil::AVDictionary;
use rsmpeg::error::RsmpegError;
use rsmpeg::ffi;

use crate::probe;
use condense::domain::encoding::Encoder;
use condense::media::info::MediaInfo;
use condense::media::plan::EncodePlan;
use condense::media::MediaError;

/// Whether a pixel format halves its chroma both ways (4:2:0).
fn is_420(fmt: i32) -> bool {
    // SAFETY: av_pix_fmt_desc_get returns null or a pointer to a static descriptor.
    match unsafe { ffi::av_pix_fmt_desc_get(fmt).as_ref() } {
        Some(desc) => desc.log2_chroma_w == 1 && desc.log2_chroma_h == 1,
        None => false,
    }
}

/// The pixel format to encode: the source's when the encoder takes it at the plan's bit
/// depth (and it is 4:2:0, when `only_420`: a cautious rung), else 4:2:0 at that depth
/// (10-bit sources stay 10-bit unless the plan says 8).
pub(crate) fn choose_pix_fmt(encoder: &AVCodec, src: i32, bit_depth: u8, only_420: bool) -> i32 {
    let supported = encoder.pix_fmts().unwrap_or(&[]);
    let deep = bit_depth > 8;
    let src_deep = probe::pix_fmt_depth(src).unwrap_or(8) > 8;
    if supported.contains(&src) && src_deep == deep && (!only_420 || is_420(src)) {
        return src;
    }
    let wanted: &[i32] = if deep {
        &[ffi::AVPixelFormat_AV_PIX_FMT_YUV420P10LE, ffi::AVPixelFormat_AV_PIX_FMT_P010LE]
    } else {
        &[ffi::AVPixelFormat_AV_PIX_FMT_YUV420P, ffi::AVPixelFormat_AV_PIX_FMT_NV12]
    };
    wanted.iter().copied().find(|f| supported.contains(f)).or_else(|| supported.first().copied()).unwrap_or(src)
}

fn x265_mastering(info: &MediaInfo) -> Option<String> {
    let m = info.hdr.mastering_display?;
    let c = |v: f64| (v * 50000.0).round() as i64;
    let l = |v: f64| (v * 10000.0).round() as i64;
    Some(format!(
        "G({},{})B({},{})R({},{})WP({},{})L({},{})",
        c(m.green[0]),
        c(m.green[1]),
        c(m.blue[0]),
        c(m.blue[1]),
        c(m.red[0]),
        c(m.red[1]),
        c(m.white_point[0]),
        c(m.white_point[1]),
        l(m.max_luminance),
        l(m.min_luminance)
    ))
}

fn svt_mastering(info: &MediaInfo) -> Option<String> {
    let m = info.hdr.mastering_display?;
    Some(format!(
        "G({:.4},{:.4})B({:.4},{:.4})R({:.4},{:.4})WP({:.4},{:.4})L({:.4},{:.4})",
        m.green[0],
        m.green[1],
        m.blue[0],
        m.blue[1],
        m.red[0],
        m.red[1],
        m.white_point[0],
        m.white_point[1],
        m.max_luminance,
        m.min_luminance
    ))
}

/// The encoder's options: the plan's (quality, preset, fixed options) and, for HDR10, the
/// static metadata in the form each encoder takes it.
pub(crate) fn encoder_options(plan: &EncodePlan, info: &MediaInfo) -> Result<AVDictionary, MediaError> {
    let c = |s: &str| CString::new(s).map_err(|_| MediaError::misc("NUL in an encoder option"));
    let options = option_list(plan, info);
    let mut options = options.iter();
    let (key, value) = options.next().ok_or_else(|| MediaError::misc("the plan sets no encoder option"))?;
    let mut dict = AVDictionary::new(&c(key)?, &c(value)?, 0);
    for (key, value) in options {
        dict = dict.set(&c(key)?, &c(value)?, 0);
    }
    Ok(dict)
}

/// The options `encoder_options` gives the encoder, as (name, value) pairs.
fn option_list(plan: &EncodePlan, info: &MediaInfo) -> Vec<(String, String)> {
    let hdr10 = plan.hdr.has_hdr10_base();
    let threads = plan.sessions.threads;
    let mut options = plan.encoder_options.clone();
    match plan.encoder {
        Encoder::Libx265 => {
            // `info=0`: x265 writes its options (threads included) into the stream headers,
            // and the segments of one output must share their headers; sessions of another
            // size (a retry, another node) would otherwise write different ones and could
            // not be joined (the fault suite's kill-transcoder saw the retry fail so).
            let mut params = vec!["log-level=error".to_string(), "info=0".to_string()];
            if threads > 0 {
                // The session's share of the cores: its own thread pool of that size.
                params.push(format!("pools={threads}"));
            }
            if let Some(run) = &plan.pass {
                // Two passes: the span's statistics, written by the first and read by the
                // second (the path is the partial folder's handle, `/proc/self/fd/N/...`,
                // so it holds no `:` that would split these parameters).
                params.push(format!("pass={}", run.pass));
                params.push(format!("stats={}", run.stats.to_string_lossy()));
            }
            if hdr10 {
                params.push("hdr10=1".into());
                // Its per-block QP tuning for HDR is an optimisation, not signalling: the
                // cautious rungs leave it out (docs/how-it-works.md says why).
                if !plan.cautious {
                    params.push("hdr10-opt=1".into());
                }
                if let Some(m) = x265_mastering(info) {
                    params.push(format!("master-display={m}"));
                }
                if let Some(l) = info.hdr.content_light {
                    params.push(format!("max-cll={},{}", l.max_cll, l.max_fall));
                }
            }
            options.push(("x265-params".into(), params.join(":")));
        }
        Encoder::Libsvtav1 => {
            let mut params = Vec::new();
            if threads > 0 {
                params.push(format!("lp={threads}"));
            }
            if let Some(m) = svt_mastering(info).filter(|_| hdr10) {
                params.push(format!("mastering-display={m}"));
            }
            if let Some(l) = info.hdr.content_light.filter(|_| hdr10) {
                params.push(format!("content-light={},{}", l.max_cll, l.max_fall));
            }
            if plan.cautious {
                // No film grain synthesis and no temporal filtering: the two stages that hold
                // the most frames in memory (docs/how-it-works.md says why these).
                params.push("film-grain=0".into());
                params.push("enable-tf=0".into());
            }
            if !params.is_empty() {
                options.push(("svtav1-params".into(), params.join(":")));
            }
        }
        // The hardware encoders take the plan's options as they are (their quality option,
        // preset and rate control come from the encoder table); their threads are the
        // device's.
        Encoder::HevcNvenc
        | Encoder::HevcQsv
        | Encoder::HevcVaapi
        | Encoder::LibaomAv1
        | Encoder::Av1Nvenc
        | Encoder::Av1Qsv
        | Encoder::Av1Vaapi => {}
    }
    options
}

/// Opens an encoder with its options. rsmpeg's `AVCodecContext::open` frees the options
/// twice when opening fails (FFmpeg has already replaced them), which crashed the
/// transcoder on an encoder that is present but cannot run here (NVENC without a driver);
/// here the dictionary FFmpeg leaves is freed once, whatever the outcome.
pub(crate) fn open_with_options(encoder: &mut AVCodecContext, options: AVDictionary) -> Result<(), RsmpegError> {
    let mut options = options.into_raw().as_ptr();
    // SAFETY: avcodec_open2 takes the dictionary we own, frees it and puts the options it
    // did not use in its place, on success and on failure alike; we free that.
    let ret = unsafe { ffi::avcodec_open2(encoder.as_mut_ptr(), std::ptr::null(), &mut options) };
    // SAFETY: `options` is null or a dictionary FFmpeg made for us.
    unsafe { ffi::av_dict_free(&mut options) };
    if ret < 0 {
        return Err(RsmpegError::CodecOpenError(ret));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense::media::info::{ContentLight, HdrInfo, HdrKind};

    /// An HDR10 source with its content light level and no streams (8 bits).
    /// A plan of `settings` at `rung` for an HDR10 source (`hdr10_info`); the folder holds
    /// the source file the plan names, so it lives as long as the plan is used.
    fn hdr10_plan(settings: &condense::domain::encoding::EncodeSettings, rung: u32) -> (tempfile::TempDir, EncodePlan) {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.mkv");
        std::fs::write(&input, b"source").unwrap();
        let profile = condense::domain::encoding::profile_for_attempt(settings, rung);
        let plan = EncodePlan::new(&input, &hdr10_info(), &profile).unwrap();
        (dir, plan)
    }

    /// The value of option `key` in an option list.
    fn option(list: &[(String, String)], key: &str) -> Option<String> {
        list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn hdr10_info() -> MediaInfo {
        MediaInfo {
            container: "matroska,webm".into(),
            duration_seconds: Some(10.0),
            size_bytes: 6,
            bit_rate: None,
            chapters: 0,
            streams: Vec::new(),
            hdr: HdrInfo {
                kind: HdrKind::Hdr10,
                dolby_vision: None,
                hdr10_plus: false,
                mastering_display: None,
                content_light: Some(ContentLight { max_cll: 1000, max_fall: 400 }),
            },
        }
    }

    #[test]
    fn the_output_pixel_format_follows_the_plans_bit_depth() {
        let x265 = AVCodec::find_encoder_by_name(c"libx265").unwrap();
        let (p8, p10) = (ffi::AVPixelFormat_AV_PIX_FMT_YUV420P, ffi::AVPixelFormat_AV_PIX_FMT_YUV420P10LE);
        for only_420 in [false, true] {
            assert_eq!(choose_pix_fmt(&x265, p8, 8, only_420), p8);
            assert_eq!(choose_pix_fmt(&x265, p10, 10, only_420), p10);
            // The cautious rungs encode a 10-bit SDR source in 8 bits.
            assert_eq!(choose_pix_fmt(&x265, p10, 8, only_420), p8);
            // A format the encoder does not take becomes 4:2:0 at the plan's depth.
            assert_eq!(choose_pix_fmt(&x265, ffi::AVPixelFormat_AV_PIX_FMT_NV12, 8, only_420), p8);
            assert_eq!(choose_pix_fmt(&x265, ffi::AVPixelFormat_AV_PIX_FMT_P010LE, 10, only_420), p10);
        }
        // x265 takes 4:2:2 and 4:4:4 as they are, except on a cautious rung.
        let (p422, p444) = (ffi::AVPixelFormat_AV_PIX_FMT_YUV422P10LE, ffi::AVPixelFormat_AV_PIX_FMT_YUV444P);
        assert_eq!(choose_pix_fmt(&x265, p422, 10, false), p422);
        assert_eq!(choose_pix_fmt(&x265, p444, 8, false), p444);
        assert_eq!(choose_pix_fmt(&x265, p422, 10, true), p10);
        assert_eq!(choose_pix_fmt(&x265, p444, 8, true), p8);
    }

    /// What each rung of a CPU encoder's ladder has the transcoder set: a faster preset on
    /// rung 1; on the cautious rungs x265 without `hdr10-opt` (HDR10 still signalled) and
    /// SVT-AV1 without film grain or temporal filtering.
    #[test]
    fn the_cautious_rungs_turn_off_what_the_ladder_says_and_keep_hdr10() {
        use condense::domain::encoding::EncodeSettings;
        let info = hdr10_info();
        let params = |encoder: Encoder, preset: &str, rung: u32, key: &str| -> (Option<String>, Vec<String>) {
            let settings = EncodeSettings::for_library(encoder.codec(), Some(encoder), Some(preset), None, true);
            let (_dir, plan) = hdr10_plan(&settings, rung);
            let list = option_list(&plan, &info);
            let params = option(&list, key).map(|p| p.split(':').map(str::to_string).collect()).unwrap_or_default();
            (option(&list, encoder.profile().preset_option), params)
        };
        // (rung, preset, hdr10-opt present)
        for (rung, preset, opt) in [(0, "slow", true), (1, "medium", true), (2, "medium", false), (3, "fast", false)] {
            let (got, x265) = params(Encoder::Libx265, "slow", rung, "x265-params");
            assert_eq!(got.as_deref(), Some(preset), "x265 rung {rung}");
            assert_eq!(x265.iter().any(|p| p == "hdr10-opt=1"), opt, "x265 rung {rung}: {x265:?}");
            for kept in ["hdr10=1", "max-cll=1000,400", "info=0"] {
                assert!(x265.iter().any(|p| p == kept), "x265 rung {rung}: {x265:?}");
            }
        }
        for (rung, preset, cautious) in [(0, "10", false), (1, "11", false), (2, "11", true), (3, "12", true)] {
            let (got, svt) = params(Encoder::Libsvtav1, "10", rung, "svtav1-params");
            assert_eq!(got.as_deref(), Some(preset), "svt rung {rung}");
            for off in ["film-grain=0", "enable-tf=0"] {
                assert_eq!(svt.iter().any(|p| p == off), cautious, "svt rung {rung}: {svt:?}");
            }
            assert!(svt.iter().any(|p| p == "content-light=1000,400"), "svt rung {rung}: {svt:?}");
        }
        // libaom: one step of cpu-used (higher is faster), then SVT-AV1.
        assert_eq!(params(Encoder::LibaomAv1, "4", 1, "").0.as_deref(), Some("5"));
    }

    #[test]
    fn every_encoder_gets_its_quality_preset_threads_and_hdr_options() {
        use condense::domain::encoding::{EncodeSettings, TargetCodec};
        use condense::domain::segments::Sessions;
        let info = hdr10_info();
        let get = option;
        for encoder in
            [TargetCodec::Hevc, TargetCodec::Av1].into_iter().flat_map(TargetCodec::encoders).map(|p| p.encoder)
        {
            let profile = encoder.profile();
            let settings = EncodeSettings::for_library(profile.codec, Some(encoder), None, Some(23), true);
            let (_dir, mut plan) = hdr10_plan(&settings, 0);
            plan.sessions = Sessions { sessions: 2, threads: 3 };
            let list = option_list(&plan, &info);
            // The quality in the encoder's own option, its default preset in its own.
            assert_eq!(get(&list, profile.quality_option).as_deref(), Some("23"), "{encoder}: {list:?}");
            if let Some(preset) = profile.default_preset {
                assert_eq!(get(&list, profile.preset_option).as_deref(), Some(preset), "{encoder}: {list:?}");
            }
            for (key, value) in profile.options {
                assert_eq!(get(&list, key).as_deref(), Some(*value), "{encoder}: {list:?}");
            }
            match encoder {
                Encoder::Libx265 => {
                    let params = get(&list, "x265-params").unwrap();
                    for p in ["info=0", "pools=3", "hdr10=1", "max-cll=1000,400"] {
                        assert!(params.split(':').any(|x| x == p), "{params}");
                    }
                }
                Encoder::Libsvtav1 => {
                    let params = get(&list, "svtav1-params").unwrap();
                    assert_eq!(params, "lp=3:content-light=1000,400");
                }
                Encoder::HevcNvenc
                | Encoder::HevcQsv
                | Encoder::HevcVaapi
                | Encoder::LibaomAv1
                | Encoder::Av1Nvenc
                | Encoder::Av1Qsv
                | Encoder::Av1Vaapi => {
                    assert!(get(&list, "x265-params").is_none() && get(&list, "svtav1-params").is_none());
                }
            }
        }
    }

    /// A two-pass session tells x265 its pass and statistics file; the bitrate comes from
    /// the plan's options (`b`), with no CRF beside it.
    #[test]
    fn a_two_pass_session_gives_x265_its_pass_and_statistics() {
        use condense::domain::encoding::{EncodeSettings, RateControl};
        use condense::media::plan::PassRun;
        let info = hdr10_info();
        let mut settings =
            EncodeSettings::for_library(Encoder::Libx265.codec(), Some(Encoder::Libx265), None, None, true);
        settings.rate = RateControl::TwoPass { bitrate_kbps: 1200 };
        let (_dir, mut plan) = hdr10_plan(&settings, 0);
        assert!(plan.two_pass);
        let get = option;
        for pass in [1u8, 2] {
            plan.pass = Some(PassRun { pass, stats: "/proc/self/fd/7/pass-00003.log".into() });
            let list = option_list(&plan, &info);
            assert_eq!(get(&list, "b").as_deref(), Some("1200k"));
            assert_eq!(get(&list, "crf"), None);
            let params = get(&list, "x265-params").unwrap();
            let params: Vec<&str> = params.split(':').collect();
            assert!(params.contains(&format!("pass={pass}").as_str()), "{params:?}");
            assert!(params.contains(&"stats=/proc/self/fd/7/pass-00003.log"), "{params:?}");
        }
        plan.pass = None;
        assert!(!get(&option_list(&plan, &info), "x265-params").unwrap().contains("pass="));
    }
}
