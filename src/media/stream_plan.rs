//! One plan per file for every stream besides the encoded video (issue 37): each source
//! stream's fate and the rule that decided it, the streams added, the output's container and
//! video size. Made at analysis from the probe and the library's `StreamRules`
//! (`plan_streams`), shown by `GET /jobs/{id}/plan`, carried out by `condense-media`'s mux in
//! the one pass, and what verification checks the output against. The rules' semantics are
//! described in docs/configuration.md ("Stream rules").

use serde::{Deserialize, Serialize};

use super::info::{MediaInfo, StreamInfo, StreamKind};
use crate::domain::stream_rules::{AudioCodec, ContainerRule, StreamRules};

/// What becomes of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Fate {
    /// Copied as it is.
    Copy,
    /// The video, re-encoded (and scaled where `video_size` says).
    Encode,
    /// Audio or subtitles converted to `codec`.
    Convert,
    /// Left out of the output.
    Drop,
    /// Made from another stream (`source_index`): a stereo downmix.
    Add,
}

/// One stream of the output, or one source stream that is dropped, in output order (dropped
/// ones where they stood in the source).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedStream {
    /// The source stream it comes from (for `add`, the one downmixed).
    pub source_index: usize,
    pub fate: Fate,
    pub kind: String,
    /// The codec it has in the output (the source's for `copy` and `drop`).
    pub codec: String,
    pub language: Option<String>,
    pub title: Option<String>,
    /// Disposition flags by FFmpeg's names ("default", "forced", "comment", ...).
    pub dispositions: Vec<String>,
    pub channels: Option<u32>,
    /// Bitrate of a converted or added audio track, bits per second.
    pub bit_rate: Option<u64>,
    /// The rule that decided the fate, in words (e.g. "audioLanguages keeps eng, deu").
    pub rule: String,
}

/// A video frame's size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VideoSize {
    pub width: u32,
    pub height: u32,
}

/// The plan of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamPlan {
    pub streams: Vec<PlannedStream>,
    /// The output's container extension ("mkv", "mp4", ...).
    pub container: String,
    /// The output video's size when it is scaled; None keeps the source's.
    pub video_size: Option<VideoSize>,
    /// Why the plan differs from what the rules ask (e.g. every audio track kept because no
    /// track matched `audioLanguages`).
    pub notes: Vec<String>,
    /// Why the file cannot be made under these rules (an image subtitle into MP4); the job
    /// is then SKIPPED with this reason. None: the plan can be carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl StreamPlan {
    /// Whether the plan is today's default: every stream copied but the video, no size change.
    pub fn copies_everything(&self) -> bool {
        self.video_size.is_none() && self.streams.iter().all(|s| matches!(s.fate, Fate::Copy | Fate::Encode))
    }
}

/// Subtitle codecs drawn as pictures (PGS, VobSub, DVB): `dropImageSubtitles` drops them and
/// MP4 cannot take them as text.
pub const IMAGE_SUBTITLES: &[&str] = &["hdmv_pgs_subtitle", "dvd_subtitle", "dvb_subtitle"];

/// Text subtitle codecs that become `mov_text` in MP4.
pub const TEXT_SUBTITLES: &[&str] = &["subrip", "ass", "ssa", "webvtt", "mov_text", "text"];

/// Dispositions that mark a commentary or described track (`dropCommentary`).
const COMMENTARY_DISPOSITIONS: &[&str] = &["comment", "visual_impaired", "hearing_impaired"];

/// Whether `ext` is a container of the MP4 family, which holds only `mov_text` subtitles.
fn is_mp4_family(ext: &str) -> bool {
    matches!(ext, "mp4" | "m4v" | "mov")
}

/// A track's language, lower-cased; None for `und` or untagged.
fn language_of(s: &StreamInfo) -> Option<String> {
    s.language.as_deref().map(str::to_ascii_lowercase).filter(|l| !l.is_empty() && l != "und")
}

fn is_commentary(s: &StreamInfo) -> bool {
    s.dispositions.iter().any(|d| COMMENTARY_DISPOSITIONS.contains(&d.as_str()))
        || s.title.as_deref().is_some_and(|t| t.to_ascii_lowercase().contains("commentary"))
}

/// Whether `codec` is listed in `audioTranscode`: by name, or by prefix (`pcm` matches
/// `pcm_s16le`, `pcm_s24le`, ...).
fn listed_for_transcode(codec: &str, list: &[String]) -> bool {
    list.iter().any(|e| {
        let e = e.to_ascii_lowercase();
        codec == e || codec.strip_prefix(e.as_str()).is_some_and(|rest| rest.starts_with('_'))
    })
}

/// Whether a language list keeps a track of `language` (None: `und` or untagged).
fn language_kept(language: Option<&str>, list: &[String], drop_undetermined: bool) -> bool {
    match language {
        _ if list.is_empty() => true,
        None => !drop_undetermined,
        Some(l) => list.iter().any(|k| k.eq_ignore_ascii_case(l)),
    }
}

fn list_words(list: &[String]) -> String {
    list.join(", ")
}

/// The scaled size of a `width` x `height` frame under `max_height`: None where it is not
/// taller. The width keeps the aspect and is rounded to even (4:2:0 needs even sizes).
pub fn scaled_size(width: u32, height: u32, max_height: u32) -> Option<VideoSize> {
    if height <= max_height || height == 0 || max_height == 0 {
        return None;
    }
    let new_height = max_height - max_height % 2;
    let exact = f64::from(width) * f64::from(new_height) / f64::from(height);
    // Round to the nearest even number, at least 2.
    let even = ((exact / 2.0).round() as u32).max(1) * 2;
    Some(VideoSize { width: even, height: new_height.max(2) })
}

/// The plan for `info` under `rules`, with `container` the output extension the job would
/// use without a container rule.
pub fn plan_streams(info: &MediaInfo, rules: &StreamRules, container: &str) -> StreamPlan {
    let output = match rules.container {
        ContainerRule::Keep => container,
        ContainerRule::Mkv => "mkv",
        ContainerRule::Mp4 => "mp4",
    };
    // A source already in the MP4 family holds only what MP4 can: nothing to convert.
    let source_mp4 = info.container.split(',').any(|c| matches!(c, "mp4" | "mov"));
    let to_mp4 = is_mp4_family(output) && !source_mp4;
    let mut notes = Vec::new();
    let mut refused = None;
    let video_index = info.video().map(|v| v.index);
    let video_size = match (rules.max_height, info.video()) {
        (Some(max), Some(v)) => v.width.zip(v.height).and_then(|(w, h)| scaled_size(w, h, max)),
        _ => None,
    };

    let audio_rules = audio_decisions(info, rules, &mut notes);
    let mut out = Vec::new();
    for s in &info.streams {
        let base = planned(s);
        match s.kind {
            StreamKind::Video if Some(s.index) == video_index => {
                let rule = match (video_size, rules.max_height) {
                    (Some(size), Some(max)) => {
                        format!("encoded, scaled to {}x{} by maxHeight {max}", size.width, size.height)
                    }
                    _ => "encoded to the library's codec".to_string(),
                };
                out.push(PlannedStream { fate: Fate::Encode, rule, ..base });
            }
            StreamKind::Audio => {
                let (keep, rule) = audio_rules.iter().find(|(i, _)| *i == s.index).map_or_else(
                    || (true, "copied: no rule applies".to_string()),
                    |(_, r)| r.clone().map_or_else(|drop| (false, drop), |keep| (true, keep)),
                );
                if !keep {
                    out.push(PlannedStream { fate: Fate::Drop, rule, ..base });
                } else {
                    plan_kept_audio(s, rules, rule, base, &mut out);
                }
            }
            StreamKind::Subtitle => {
                let image = IMAGE_SUBTITLES.contains(&s.codec.as_str());
                let language = language_of(s);
                if image && rules.drop_image_subtitles {
                    out.push(PlannedStream { fate: Fate::Drop, rule: "dropImageSubtitles".to_string(), ..base });
                } else if !language_kept(language.as_deref(), &rules.subtitle_languages, rules.drop_undetermined) {
                    let rule = language_rule("subtitleLanguages", &rules.subtitle_languages, language.as_deref());
                    out.push(PlannedStream { fate: Fate::Drop, rule, ..base });
                } else if to_mp4 && s.codec != "mov_text" {
                    if TEXT_SUBTITLES.contains(&s.codec.as_str()) {
                        let rule = format!("container mp4: {} becomes mov_text", s.codec);
                        out.push(PlannedStream { fate: Fate::Convert, codec: "mov_text".to_string(), rule, ..base });
                    } else {
                        let reason = format!(
                            "container mp4 cannot hold {} subtitles (stream {}): drop them with \
                             dropImageSubtitles or keep the container",
                            s.codec, s.index
                        );
                        refused.get_or_insert(reason.clone());
                        out.push(PlannedStream { fate: Fate::Copy, rule: reason, ..base });
                    }
                } else {
                    let rule = if rules.subtitle_languages.is_empty() {
                        "copied: no rule applies".to_string()
                    } else {
                        format!("subtitleLanguages keeps {}", list_words(&rules.subtitle_languages))
                    };
                    out.push(PlannedStream { fate: Fate::Copy, rule, ..base });
                }
            }
            StreamKind::Attachment | StreamKind::Data | StreamKind::Unknown if to_mp4 => {
                let rule = format!("container mp4 cannot hold {} streams", base.kind);
                out.push(PlannedStream { fate: Fate::Drop, rule, ..base });
            }
            _ => {
                let rule = if s.attached_picture { "copied: cover picture" } else { "copied: no rule applies" };
                out.push(PlannedStream { fate: Fate::Copy, rule: rule.to_string(), ..base });
            }
        }
    }
    if rules.add_stereo {
        add_stereo(rules, &mut out);
    }
    if is_mp4_family(output) {
        mark_mp4_defaults(&mut out);
        // MP4 keeps no track titles (a title is Matroska's): the plan promises none.
        out.iter_mut().filter(|s| s.fate != Fate::Drop).for_each(|s| s.title = None);
    }
    StreamPlan { streams: out, container: output.to_string(), video_size, notes, refused }
}

/// MP4 enables the first track of each kind where none is marked default, and readers take
/// "enabled" for the `default` disposition: the plan says so, so that the output is checked
/// against what MP4 holds (an MKV source's video without the flag came back flagged).
fn mark_mp4_defaults(out: &mut [PlannedStream]) {
    for kind in ["video", "audio", "subtitle"] {
        let kept = |s: &PlannedStream| s.kind == kind && s.fate != Fate::Drop;
        if out.iter().filter(|s| kept(s)).any(|s| s.dispositions.iter().any(|d| d == "default")) {
            continue;
        }
        if let Some(first) = out.iter_mut().find(|s| kept(s)) {
            first.dispositions.push("default".to_string());
        }
    }
}

/// Each audio track's verdict by `dropCommentary` and `audioLanguages`: Ok(rule) kept,
/// Err(rule) dropped. A file never loses all its audio: where no track would remain, every
/// track is kept and a note says why.
fn audio_decisions(
    info: &MediaInfo,
    rules: &StreamRules,
    notes: &mut Vec<String>,
) -> Vec<(usize, Result<String, String>)> {
    let audio: Vec<&StreamInfo> = info.streams.iter().filter(|s| s.kind == StreamKind::Audio).collect();
    let verdicts: Vec<(usize, Result<String, String>)> = audio
        .iter()
        .map(|s| {
            let language = language_of(s);
            let verdict = if rules.drop_commentary && is_commentary(s) {
                Err("dropCommentary: commentary or described track".to_string())
            } else if !language_kept(language.as_deref(), &rules.audio_languages, rules.drop_undetermined) {
                Err(language_rule("audioLanguages", &rules.audio_languages, language.as_deref()))
            } else if rules.audio_languages.is_empty() {
                Ok("copied: no rule applies".to_string())
            } else if language.is_none() {
                Ok("audioLanguages keeps und and untagged tracks (dropUndetermined is off)".to_string())
            } else {
                Ok(format!("audioLanguages keeps {}", list_words(&rules.audio_languages)))
            };
            (s.index, verdict)
        })
        .collect();
    if !verdicts.is_empty() && verdicts.iter().all(|(_, v)| v.is_err()) {
        notes.push(
            "every audio track kept: the audio rules would have left none, and a file never loses all its audio"
                .to_string(),
        );
        return verdicts
            .into_iter()
            .map(|(i, _)| (i, Ok("kept: the audio rules would have left no audio track".to_string())))
            .collect();
    }
    verdicts
}

/// The rule that drops a track of `language` under a language list, in words.
fn language_rule(field: &str, list: &[String], language: Option<&str>) -> String {
    match language {
        None => format!("dropUndetermined: und or untagged, {field} keeps {}", list_words(list)),
        Some(l) => format!("{field} keeps {}, not {l}", list_words(list)),
    }
}

/// A kept audio track: copied, or converted (with its original beside it under
/// `keepOriginalAudio`).
fn plan_kept_audio(
    s: &StreamInfo,
    rules: &StreamRules,
    rule: String,
    base: PlannedStream,
    out: &mut Vec<PlannedStream>,
) {
    let target = rules.audio_codec.codec_name();
    let convert = target.filter(|t| *t != s.codec && listed_for_transcode(&s.codec, &rules.audio_transcode));
    let Some(target) = convert else {
        out.push(PlannedStream { fate: Fate::Copy, rule, ..base });
        return;
    };
    let kbps = rules.audio_bitrate_kbps.unwrap_or_else(|| rules.audio_codec.default_kbps_per_channel());
    let channels = s.channels.unwrap_or(2).max(1);
    let converted = PlannedStream {
        fate: Fate::Convert,
        codec: target.to_string(),
        bit_rate: Some(u64::from(kbps) * u64::from(channels) * 1000),
        rule: format!("audioTranscode: {} to {target} at {kbps} kb/s per channel", s.codec),
        ..base.clone()
    };
    out.push(converted);
    if rules.keep_original_audio {
        // Two default tracks of one kind confuse players: the converted one stays default.
        let dispositions = base.dispositions.iter().filter(|d| *d != "default").cloned().collect();
        out.push(PlannedStream {
            fate: Fate::Copy,
            dispositions,
            rule: "keepOriginalAudio: the source beside its converted track".to_string(),
            ..base
        });
    }
}

/// `addStereo`: for each kept language whose kept tracks (commentary aside) all have more
/// than 2 channels, a stereo downmix of its first track, right after it. Commentary is left
/// out of the count: a stereo commentary is no stereo mix of the film.
fn add_stereo(rules: &StreamRules, out: &mut Vec<PlannedStream>) {
    let codec = rules.audio_codec.codec_name().unwrap_or("aac");
    let per_channel = rules.audio_bitrate_kbps.unwrap_or_else(|| match rules.audio_codec {
        AudioCodec::Copy => AudioCodec::Aac.default_kbps_per_channel(),
        other => other.default_kbps_per_channel(),
    });
    let main = |p: &PlannedStream| {
        p.kind == "audio"
            && matches!(p.fate, Fate::Copy | Fate::Convert)
            && !p.dispositions.iter().any(|d| COMMENTARY_DISPOSITIONS.contains(&d.as_str()))
            && !p.title.as_deref().is_some_and(|t| t.to_ascii_lowercase().contains("commentary"))
    };
    let key = |p: &PlannedStream| p.language.as_deref().map(str::to_ascii_lowercase).filter(|l| l != "und");
    let mut languages: Vec<Option<String>> = Vec::new();
    for p in out.iter().filter(|p| main(p)) {
        if !languages.contains(&key(p)) {
            languages.push(key(p));
        }
    }
    let mut inserts = Vec::new();
    for language in languages {
        let tracks: Vec<(usize, &PlannedStream)> =
            out.iter().enumerate().filter(|(_, p)| main(p) && key(p) == language).collect();
        if !tracks.iter().all(|(_, p)| p.channels.is_some_and(|c| c > 2)) {
            continue;
        }
        let Some(&(first, source)) = tracks.first() else { continue };
        let words = language.as_deref().unwrap_or("und");
        inserts.push((
            first + 1,
            PlannedStream {
                source_index: source.source_index,
                fate: Fate::Add,
                kind: "audio".to_string(),
                codec: codec.to_string(),
                language: source.language.clone(),
                title: Some("Stereo".to_string()),
                dispositions: Vec::new(),
                channels: Some(2),
                bit_rate: Some(u64::from(per_channel) * 2 * 1000),
                rule: format!("addStereo: stereo downmix of the first {words} track"),
            },
        ));
    }
    for (at, stream) in inserts.into_iter().rev() {
        out.insert(at, stream);
    }
}

/// Why a file is left alone under the library's filters (`skipPaths`, `minSizeMb`,
/// `minBitrateKbps`), naming the rule; None: it is encoded. `relative` is its path under the
/// library's root.
pub fn filtered_out(info: &MediaInfo, rules: &StreamRules, relative: &std::path::Path) -> Option<String> {
    if let Some(pattern) = rules.skipped_by(relative) {
        return Some(format!("skipPaths: {} matches {pattern:?}", relative.display()));
    }
    if let Some(min) = rules.min_size_mb {
        if info.size_bytes < min.saturating_mul(1_000_000) {
            let mb = info.size_bytes as f64 / 1e6;
            return Some(format!("minSizeMb: {mb:.1} MB is under {min} MB"));
        }
    }
    if let (Some(min), Some(kbps)) = (rules.min_bitrate_kbps, equivalent_kbps(info)) {
        if kbps < f64::from(min) {
            return Some(format!("minBitrateKbps: {kbps:.0} kb/s at 1080p's pixel rate is under {min} kb/s"));
        }
    }
    None
}

/// The file's bitrate scaled to a 1920x1080 frame (a 720p file at 1000 kb/s counts as
/// 2250): the container's bitrate, else its size over its duration. None where unknown.
fn equivalent_kbps(info: &MediaInfo) -> Option<f64> {
    let video = info.video()?;
    let pixels = f64::from(video.width?) * f64::from(video.height?);
    let bits_per_second = match info.bit_rate.filter(|b| *b > 0) {
        Some(b) => b as f64,
        None => info.size_bytes as f64 * 8.0 / info.duration_seconds.filter(|d| *d > 0.0)?,
    };
    (pixels > 0.0).then(|| bits_per_second / 1000.0 * (1920.0 * 1080.0) / pixels)
}

/// A stream as the source has it (fate and rule set by the caller).
fn planned(s: &StreamInfo) -> PlannedStream {
    PlannedStream {
        source_index: s.index,
        fate: Fate::Copy,
        kind: kind_name(s.kind).to_string(),
        codec: s.codec.clone(),
        language: s.language.clone(),
        title: s.title.clone(),
        dispositions: s.dispositions.clone(),
        channels: s.channels,
        bit_rate: None,
        rule: String::new(),
    }
}

fn kind_name(kind: StreamKind) -> &'static str {
    match kind {
        StreamKind::Video => "video",
        StreamKind::Audio => "audio",
        StreamKind::Subtitle => "subtitle",
        StreamKind::Attachment => "attachment",
        StreamKind::Data => "data",
        StreamKind::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::info::{HdrInfo, HdrKind};

    fn stream(index: usize, kind: StreamKind, codec: &str) -> StreamInfo {
        StreamInfo { language: Some("eng".to_string()), ..StreamInfo::bare(index, kind, codec) }
    }

    fn video(index: usize, width: u32, height: u32) -> StreamInfo {
        StreamInfo { width: Some(width), height: Some(height), ..stream(index, StreamKind::Video, "h264") }
    }

    fn audio(index: usize, codec: &str, language: Option<&str>, channels: u32) -> StreamInfo {
        StreamInfo {
            language: language.map(str::to_string),
            channels: Some(channels),
            ..stream(index, StreamKind::Audio, codec)
        }
    }

    fn subtitle(index: usize, codec: &str, language: Option<&str>) -> StreamInfo {
        StreamInfo { language: language.map(str::to_string), ..stream(index, StreamKind::Subtitle, codec) }
    }

    fn file(streams: Vec<StreamInfo>) -> MediaInfo {
        MediaInfo {
            container: "matroska,webm".to_string(),
            duration_seconds: Some(1.0),
            size_bytes: 1,
            bit_rate: None,
            chapters: 0,
            streams,
            hdr: HdrInfo {
                kind: HdrKind::Sdr,
                dolby_vision: None,
                hdr10_plus: false,
                mastering_display: None,
                content_light: None,
            },
        }
    }

    /// The issue's acceptance file: video, English DTS 5.1, German AAC, French AAC, English
    /// commentary, English and French SRT, a PGS subtitle.
    fn acceptance_file() -> MediaInfo {
        let mut commentary = audio(4, "aac", Some("eng"), 2);
        commentary.dispositions = vec!["comment".to_string()];
        commentary.title = Some("Director's commentary".to_string());
        let mut dts = audio(1, "dts", Some("eng"), 6);
        dts.dispositions = vec!["default".to_string()];
        file(vec![
            video(0, 1920, 1080),
            dts,
            audio(2, "aac", Some("deu"), 2),
            audio(3, "aac", Some("fra"), 2),
            commentary,
            subtitle(5, "subrip", Some("eng")),
            subtitle(6, "subrip", Some("fra")),
            subtitle(7, "hdmv_pgs_subtitle", Some("eng")),
        ])
    }

    fn acceptance_rules() -> StreamRules {
        StreamRules {
            audio_languages: vec!["eng".to_string(), "deu".to_string()],
            drop_commentary: true,
            audio_codec: AudioCodec::Aac,
            add_stereo: true,
            subtitle_languages: vec!["eng".to_string()],
            drop_image_subtitles: true,
            max_height: Some(720),
            ..StreamRules::default()
        }
    }

    fn fates(plan: &StreamPlan) -> Vec<(usize, Fate, &str)> {
        plan.streams.iter().map(|s| (s.source_index, s.fate, s.codec.as_str())).collect()
    }

    #[test]
    fn default_rules_copy_every_stream_and_encode_the_video() {
        let plan = plan_streams(&acceptance_file(), &StreamRules::default(), "mkv");
        assert!(plan.copies_everything());
        assert_eq!(plan.streams.len(), 8);
        assert_eq!(plan.streams[0].fate, Fate::Encode);
        assert!(plan.streams[1..].iter().all(|s| s.fate == Fate::Copy && s.rule == "copied: no rule applies"));
        assert_eq!(plan.container, "mkv");
        assert_eq!(plan.refused, None);
        assert!(plan.notes.is_empty());
    }

    #[test]
    fn the_acceptance_library_gives_exactly_the_issues_output() {
        let plan = plan_streams(&acceptance_file(), &acceptance_rules(), "mkv");
        assert_eq!(
            fates(&plan),
            [
                (0, Fate::Encode, "h264"),
                (1, Fate::Convert, "aac"),
                (1, Fate::Add, "aac"),
                (2, Fate::Copy, "aac"),
                (3, Fate::Drop, "aac"),
                (4, Fate::Drop, "aac"),
                (5, Fate::Copy, "subrip"),
                (6, Fate::Drop, "subrip"),
                (7, Fate::Drop, "hdmv_pgs_subtitle"),
            ]
        );
        assert_eq!(plan.video_size, Some(VideoSize { width: 1280, height: 720 }));
        let dts = &plan.streams[1];
        assert_eq!((dts.channels, dts.bit_rate), (Some(6), Some(6 * 128_000)));
        assert_eq!(dts.dispositions, ["default"]);
        assert_eq!(dts.rule, "audioTranscode: dts to aac at 128 kb/s per channel");
        let stereo = &plan.streams[2];
        assert_eq!((stereo.channels, stereo.bit_rate), (Some(2), Some(256_000)));
        assert_eq!(stereo.language.as_deref(), Some("eng"));
        assert!(stereo.dispositions.is_empty());
        assert_eq!(plan.streams[3].rule, "audioLanguages keeps eng, deu");
        assert_eq!(plan.streams[4].rule, "audioLanguages keeps eng, deu, not fra");
        assert_eq!(plan.streams[5].rule, "dropCommentary: commentary or described track");
        assert_eq!(plan.streams[6].rule, "subtitleLanguages keeps eng");
        assert_eq!(plan.streams[7].rule, "subtitleLanguages keeps eng, not fra");
        assert_eq!(plan.streams[8].rule, "dropImageSubtitles");
        assert_eq!(plan.streams[0].rule, "encoded, scaled to 1280x720 by maxHeight 720");
        assert!(plan.streams.iter().all(|s| !s.rule.is_empty()));
        assert!(!plan.copies_everything());
    }

    #[test]
    fn the_acceptance_library_into_mp4_converts_text_subtitles() {
        let rules = StreamRules { container: ContainerRule::Mp4, ..acceptance_rules() };
        let plan = plan_streams(&acceptance_file(), &rules, "mkv");
        assert_eq!(plan.container, "mp4");
        assert_eq!(plan.refused, None);
        let subs: Vec<_> =
            plan.streams.iter().filter(|s| s.kind == "subtitle").map(|s| (s.fate, s.codec.as_str())).collect();
        assert_eq!(subs, [(Fate::Convert, "mov_text"), (Fate::Drop, "subrip"), (Fate::Drop, "hdmv_pgs_subtitle")]);
        assert_eq!(plan.streams[6].rule, "container mp4: subrip becomes mov_text");
    }

    #[test]
    fn mp4_marks_the_first_kept_track_of_each_kind_default_and_holds_no_titles() {
        let kept_defaults = |plan: &StreamPlan| -> Vec<(String, usize, Fate)> {
            plan.streams
                .iter()
                .filter(|s| s.dispositions.iter().any(|d| d == "default"))
                .map(|s| (s.kind.clone(), s.source_index, s.fate))
                .collect()
        };
        let rules = StreamRules { container: ContainerRule::Mp4, ..acceptance_rules() };
        let plan = plan_streams(&acceptance_file(), &rules, "mkv");
        // The video and the English subtitles get the flag; the audio keeps the DTS track's.
        let want = |k: &str, i: usize, f: Fate| (k.to_string(), i, f);
        assert_eq!(
            kept_defaults(&plan),
            [want("video", 0, Fate::Encode), want("audio", 1, Fate::Convert), want("subtitle", 5, Fate::Convert)]
        );
        // MP4 holds no titles: the stereo track's is left out there.
        assert!(plan.streams.iter().filter(|s| s.fate != Fate::Drop).all(|s| s.title.is_none()), "{plan:?}");
        // Into Matroska nothing is added, and titles stay.
        let plan = plan_streams(&acceptance_file(), &acceptance_rules(), "mkv");
        assert_eq!(kept_defaults(&plan), [want("audio", 1, Fate::Convert)]);
        assert!(plan.streams.iter().any(|s| s.fate == Fate::Add && s.title.as_deref() == Some("Stereo")));
        // A dropped track is never the one flagged.
        let mut info = acceptance_file();
        info.streams[1].dispositions.clear();
        let rules = StreamRules { audio_languages: vec!["deu".to_string()], ..rules };
        let plan = plan_streams(&info, &rules, "mkv");
        assert!(kept_defaults(&plan).contains(&want("audio", 2, Fate::Copy)), "{plan:?}");
    }

    #[test]
    fn an_image_subtitle_into_mp4_refuses_the_plan() {
        let rules = StreamRules { container: ContainerRule::Mp4, ..StreamRules::default() };
        let plan = plan_streams(&acceptance_file(), &rules, "mkv");
        let reason = plan.refused.expect("refused");
        assert!(reason.contains("hdmv_pgs_subtitle") && reason.contains("stream 7"), "{reason}");
        // Every text subtitle is still converted in the refused plan, for the record.
        assert_eq!(plan.streams[5].codec, "mov_text");
        for codec in ["dvd_subtitle", "dvb_subtitle"] {
            let info = file(vec![video(0, 640, 360), subtitle(1, codec, Some("eng"))]);
            assert!(plan_streams(&info, &rules, "mkv").refused.is_some(), "{codec}");
        }
    }

    #[test]
    fn every_text_subtitle_becomes_mov_text_and_attachments_are_dropped_for_mp4() {
        let rules = StreamRules { container: ContainerRule::Mp4, ..StreamRules::default() };
        let mut streams = vec![video(0, 640, 360)];
        for (i, codec) in ["subrip", "ass", "ssa", "webvtt"].iter().enumerate() {
            streams.push(subtitle(i + 1, codec, Some("eng")));
        }
        streams.push(stream(5, StreamKind::Attachment, "ttf"));
        let plan = plan_streams(&file(streams), &rules, "mkv");
        assert!(plan.streams[1..5].iter().all(|s| s.fate == Fate::Convert && s.codec == "mov_text"));
        assert_eq!(plan.streams[5].fate, Fate::Drop);
        assert_eq!(plan.streams[5].rule, "container mp4 cannot hold attachment streams");
    }

    #[test]
    fn an_mp4_source_kept_as_mp4_is_not_converted() {
        let mut info = file(vec![video(0, 640, 360), subtitle(1, "mov_text", Some("eng"))]);
        info.container = "mov,mp4,m4a,3gp,3g2,mj2".to_string();
        let plan = plan_streams(&info, &StreamRules::default(), "mp4");
        assert!(plan.copies_everything());
        assert_eq!(plan.refused, None);
        assert_eq!(plan.container, "mp4");
    }

    #[test]
    fn the_container_rule_names_the_output() {
        let info = file(vec![video(0, 640, 360)]);
        let mkv = StreamRules { container: ContainerRule::Mkv, ..StreamRules::default() };
        assert_eq!(plan_streams(&info, &mkv, "mp4").container, "mkv");
        assert_eq!(plan_streams(&info, &StreamRules::default(), "mov").container, "mov");
    }

    #[test]
    fn a_file_with_only_other_languages_keeps_all_its_audio_with_a_note() {
        let info = file(vec![video(0, 640, 360), audio(1, "aac", Some("fra"), 2)]);
        let plan = plan_streams(&info, &acceptance_rules(), "mkv");
        assert_eq!(plan.streams[1].fate, Fate::Copy);
        assert_eq!(plan.streams[1].rule, "kept: the audio rules would have left no audio track");
        assert_eq!(plan.notes.len(), 1);
        assert!(plan.notes[0].contains("never loses all its audio"));
        // Only commentary left: kept too.
        let mut commentary = audio(1, "aac", Some("eng"), 2);
        commentary.title = Some("Commentary".to_string());
        let plan = plan_streams(&file(vec![video(0, 640, 360), commentary]), &acceptance_rules(), "mkv");
        assert_eq!(plan.streams[1].fate, Fate::Copy);
        // A file without audio gets no note.
        let plan = plan_streams(&file(vec![video(0, 640, 360)]), &acceptance_rules(), "mkv");
        assert!(plan.notes.is_empty());
    }

    #[test]
    fn undetermined_tracks_are_kept_unless_drop_undetermined() {
        let info = file(vec![
            video(0, 640, 360),
            audio(1, "aac", Some("eng"), 2),
            audio(2, "aac", Some("und"), 2),
            audio(3, "aac", None, 2),
            subtitle(4, "subrip", None),
        ]);
        let mut rules = StreamRules {
            audio_languages: vec!["eng".to_string()],
            subtitle_languages: vec!["eng".to_string()],
            ..StreamRules::default()
        };
        let plan = plan_streams(&info, &rules, "mkv");
        assert_eq!(plan.streams.iter().filter(|s| s.fate == Fate::Drop).count(), 0);
        assert!(plan.streams[2].rule.contains("dropUndetermined is off"));
        rules.drop_undetermined = true;
        let plan = plan_streams(&info, &rules, "mkv");
        let dropped: Vec<usize> =
            plan.streams.iter().filter(|s| s.fate == Fate::Drop).map(|s| s.source_index).collect();
        assert_eq!(dropped, [2, 3, 4]);
        assert!(plan.streams[2].rule.starts_with("dropUndetermined"));
    }

    #[test]
    fn languages_match_regardless_of_case() {
        let info = file(vec![video(0, 640, 360), audio(1, "aac", Some("ENG"), 2), audio(2, "aac", Some("deu"), 2)]);
        let rules = StreamRules { audio_languages: vec!["eng".to_string()], ..StreamRules::default() };
        assert_eq!(fates(&plan_streams(&info, &rules, "mkv"))[1..], [(1, Fate::Copy, "aac"), (2, Fate::Drop, "aac")]);
    }

    #[test]
    fn commentary_is_found_by_disposition_or_title() {
        let mut streams = vec![video(0, 640, 360), audio(1, "aac", Some("eng"), 2)];
        for (i, d) in ["comment", "visual_impaired", "hearing_impaired"].iter().enumerate() {
            let mut s = audio(i + 2, "aac", Some("eng"), 2);
            s.dispositions = vec![(*d).to_string()];
            streams.push(s);
        }
        let mut titled = audio(5, "aac", Some("eng"), 2);
        titled.title = Some("Audio COMMENTARY with the cast".to_string());
        streams.push(titled);
        let mut forced = audio(6, "aac", Some("eng"), 2);
        forced.dispositions = vec!["forced".to_string()];
        streams.push(forced);
        let rules = StreamRules { drop_commentary: true, ..StreamRules::default() };
        let plan = plan_streams(&file(streams.clone()), &rules, "mkv");
        let dropped: Vec<usize> =
            plan.streams.iter().filter(|s| s.fate == Fate::Drop).map(|s| s.source_index).collect();
        assert_eq!(dropped, [2, 3, 4, 5]);
        // Off by default.
        assert!(plan_streams(&file(streams), &StreamRules::default(), "mkv").copies_everything());
    }

    #[test]
    fn audio_transcode_matches_names_and_the_pcm_prefix() {
        let info = file(vec![
            video(0, 640, 360),
            audio(1, "pcm_s24le", Some("eng"), 2),
            audio(2, "truehd", Some("eng"), 8),
            audio(3, "flac", Some("eng"), 1),
            audio(4, "ac3", Some("eng"), 6),
            audio(5, "pcmx", Some("eng"), 2),
            audio(6, "opus", Some("eng"), 2),
        ]);
        let rules = StreamRules { audio_codec: AudioCodec::Opus, ..StreamRules::default() };
        let plan = plan_streams(&info, &rules, "mkv");
        let got: Vec<(Fate, Option<u64>)> = plan.streams[1..].iter().map(|s| (s.fate, s.bit_rate)).collect();
        assert_eq!(
            got,
            [
                (Fate::Convert, Some(192_000)),
                (Fate::Convert, Some(768_000)),
                (Fate::Convert, Some(96_000)),
                (Fate::Copy, None),
                (Fate::Copy, None),
                (Fate::Copy, None),
            ]
        );
        assert_eq!(plan.streams[2].channels, Some(8), "the layout is kept");
        // A listed codec already in the target is copied; an explicit bitrate wins.
        let rules = StreamRules {
            audio_codec: AudioCodec::Eac3,
            audio_transcode: vec!["ac3".to_string(), "eac3".to_string()],
            audio_bitrate_kbps: Some(64),
            ..StreamRules::default()
        };
        let info = file(vec![video(0, 640, 360), audio(1, "ac3", None, 6), audio(2, "eac3", None, 6)]);
        let plan = plan_streams(&info, &rules, "mkv");
        assert_eq!(fates(&plan)[1..], [(1, Fate::Convert, "eac3"), (2, Fate::Copy, "eac3")]);
        assert_eq!(plan.streams[1].bit_rate, Some(384_000));
        // audioCodec copy converts nothing.
        let copy = StreamRules { audio_transcode: vec!["ac3".to_string()], ..StreamRules::default() };
        assert!(plan_streams(&info, &copy, "mkv").copies_everything());
    }

    #[test]
    fn keep_original_audio_places_the_source_beside_its_converted_track() {
        let mut dts = audio(1, "dts", Some("eng"), 6);
        dts.dispositions = vec!["default".to_string()];
        let info = file(vec![video(0, 640, 360), dts, audio(2, "aac", Some("eng"), 2)]);
        let rules = StreamRules { audio_codec: AudioCodec::Aac, keep_original_audio: true, ..StreamRules::default() };
        let plan = plan_streams(&info, &rules, "mkv");
        assert_eq!(fates(&plan)[1..], [(1, Fate::Convert, "aac"), (1, Fate::Copy, "dts"), (2, Fate::Copy, "aac")]);
        assert_eq!(plan.streams[1].dispositions, ["default"]);
        assert!(plan.streams[2].dispositions.is_empty(), "one default track");
        assert!(plan.streams[2].rule.starts_with("keepOriginalAudio"));
    }

    #[test]
    fn add_stereo_only_where_every_kept_track_of_the_language_is_multichannel() {
        let info = file(vec![
            video(0, 640, 360),
            audio(1, "ac3", Some("eng"), 6),
            audio(2, "ac3", Some("eng"), 8),
            audio(3, "ac3", Some("deu"), 6),
            audio(4, "aac", Some("deu"), 2),
            audio(5, "ac3", None, 6),
        ]);
        let rules = StreamRules { add_stereo: true, ..StreamRules::default() };
        let plan = plan_streams(&info, &rules, "mkv");
        assert_eq!(
            fates(&plan)[1..],
            [
                (1, Fate::Copy, "ac3"),
                (1, Fate::Add, "aac"),
                (2, Fate::Copy, "ac3"),
                (3, Fate::Copy, "ac3"),
                (4, Fate::Copy, "aac"),
                (5, Fate::Copy, "ac3"),
                (5, Fate::Add, "aac"),
            ]
        );
        assert_eq!(plan.streams[2].rule, "addStereo: stereo downmix of the first eng track");
        assert_eq!(plan.streams[7].rule, "addStereo: stereo downmix of the first und track");
        assert_eq!(plan.streams[7].language, None);
        // The stereo track takes the library's codec and bitrate where it converts.
        let opus = StreamRules { audio_codec: AudioCodec::Opus, ..rules.clone() };
        let plan = plan_streams(&info, &opus, "mkv");
        assert_eq!((plan.streams[2].codec.as_str(), plan.streams[2].bit_rate), ("opus", Some(192_000)));
        // A stereo commentary does not count as the language's stereo.
        let mut commentary = audio(2, "aac", Some("eng"), 2);
        commentary.dispositions = vec!["comment".to_string()];
        let info = file(vec![video(0, 640, 360), audio(1, "ac3", Some("eng"), 6), commentary]);
        assert_eq!(plan_streams(&info, &rules, "mkv").streams[2].fate, Fate::Add);
    }

    #[test]
    fn dropped_languages_get_no_stereo() {
        let info = file(vec![video(0, 640, 360), audio(1, "ac3", Some("eng"), 6), audio(2, "ac3", Some("fra"), 6)]);
        let rules =
            StreamRules { add_stereo: true, audio_languages: vec!["fra".to_string()], ..StreamRules::default() };
        assert_eq!(
            fates(&plan_streams(&info, &rules, "mkv"))[1..],
            [(1, Fate::Drop, "ac3"), (2, Fate::Copy, "ac3"), (2, Fate::Add, "aac")]
        );
    }

    #[test]
    fn image_subtitles_are_dropped_only_when_asked() {
        let info = file(vec![
            video(0, 640, 360),
            subtitle(1, "hdmv_pgs_subtitle", Some("eng")),
            subtitle(2, "dvd_subtitle", Some("eng")),
            subtitle(3, "dvb_subtitle", Some("eng")),
            subtitle(4, "ass", Some("eng")),
        ]);
        assert!(plan_streams(&info, &StreamRules::default(), "mkv").copies_everything());
        let rules = StreamRules { drop_image_subtitles: true, ..StreamRules::default() };
        let fates: Vec<Fate> = plan_streams(&info, &rules, "mkv").streams.iter().map(|s| s.fate).collect();
        assert_eq!(fates, [Fate::Encode, Fate::Drop, Fate::Drop, Fate::Drop, Fate::Copy]);
    }

    #[test]
    fn filters_name_the_rule_that_leaves_a_file_alone() {
        let mut info = file(vec![video(0, 1280, 720)]);
        info.size_bytes = 40_000_000;
        info.bit_rate = Some(1_000_000);
        let path = std::path::Path::new("Show/S01/e1.mkv");
        assert_eq!(filtered_out(&info, &StreamRules::default(), path), None);
        let rules = StreamRules { skip_paths: vec!["Show/**".into()], ..StreamRules::default() };
        assert_eq!(
            filtered_out(&info, &rules, path).as_deref(),
            Some("skipPaths: Show/S01/e1.mkv matches \"Show/**\"")
        );
        let rules = StreamRules { min_size_mb: Some(50), ..StreamRules::default() };
        assert_eq!(filtered_out(&info, &rules, path).as_deref(), Some("minSizeMb: 40.0 MB is under 50 MB"));
        assert_eq!(filtered_out(&info, &StreamRules { min_size_mb: Some(40), ..rules }, path), None);
        // 1000 kb/s at 720p is 2250 kb/s at 1080p's pixel rate.
        let rules = StreamRules { min_bitrate_kbps: Some(2300), ..StreamRules::default() };
        assert_eq!(
            filtered_out(&info, &rules, path).as_deref(),
            Some("minBitrateKbps: 2250 kb/s at 1080p's pixel rate is under 2300 kb/s")
        );
        assert_eq!(filtered_out(&info, &StreamRules { min_bitrate_kbps: Some(2250), ..rules.clone() }, path), None);
        // Without a container bitrate, size over duration.
        info.bit_rate = None;
        info.duration_seconds = Some(320.0);
        assert!(filtered_out(&info, &rules, path).is_some_and(|r| r.starts_with("minBitrateKbps: 2250")));
        info.duration_seconds = None;
        assert_eq!(filtered_out(&info, &rules, path), None, "unknown bitrate: not filtered");
    }

    #[test]
    fn max_height_scales_taller_video_keeping_the_aspect_with_an_even_width() {
        assert_eq!(scaled_size(1920, 1080, 720), Some(VideoSize { width: 1280, height: 720 }));
        assert_eq!(scaled_size(3840, 2160, 1080), Some(VideoSize { width: 1920, height: 1080 }));
        // 1998x1080 (flat) to 720: 1332 exactly; 2048x858 to 720: 1718.6 -> 1718.
        assert_eq!(scaled_size(1998, 1080, 720), Some(VideoSize { width: 1332, height: 720 }));
        assert_eq!(scaled_size(2048, 858, 720), Some(VideoSize { width: 1718, height: 720 }));
        assert_eq!(scaled_size(1440, 1080, 481), Some(VideoSize { width: 640, height: 480 }));
        assert_eq!(scaled_size(1280, 720, 720), None);
        assert_eq!(scaled_size(640, 360, 1080), None);
        let rules = StreamRules { max_height: Some(1080), ..StreamRules::default() };
        let plan = plan_streams(&file(vec![video(0, 1280, 720)]), &rules, "mkv");
        assert_eq!(plan.video_size, None);
        assert_eq!(plan.streams[0].rule, "encoded to the library's codec");
    }
}
