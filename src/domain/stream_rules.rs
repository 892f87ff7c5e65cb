//! What a library asks of each file besides its video codec (issue 37): which audio and
//! subtitle tracks stay, which audio is converted and to what, a stereo track added, a
//! height cap, the output's container, and which files are left alone. Plain data and its
//! validation; `media::stream_plan` turns rules and a probe into one plan per file.

use serde::{Deserialize, Serialize};

/// The audio codec converted tracks get (`copy`: none is converted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AudioCodec {
    #[default]
    Copy,
    Aac,
    Opus,
    Eac3,
}

impl AudioCodec {
    /// FFmpeg's codec name; None for `copy`.
    pub fn codec_name(self) -> Option<&'static str> {
        match self {
            AudioCodec::Copy => None,
            AudioCodec::Aac => Some("aac"),
            AudioCodec::Opus => Some("opus"),
            AudioCodec::Eac3 => Some("eac3"),
        }
    }

    /// Bitrate per channel in kb/s when the library sets none: 96 for Opus, 128 otherwise.
    pub fn default_kbps_per_channel(self) -> u32 {
        match self {
            AudioCodec::Opus => 96,
            AudioCodec::Copy | AudioCodec::Aac | AudioCodec::Eac3 => 128,
        }
    }
}

/// The output's container: the source's own where the target codec fits it (`keep`), or
/// always Matroska or MP4.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContainerRule {
    #[default]
    Keep,
    Mkv,
    Mp4,
}

/// The codecs converted by default: lossless or bulky ones (`pcm` matches every `pcm_*`).
pub const DEFAULT_AUDIO_TRANSCODE: &[&str] = &["dts", "truehd", "flac", "pcm"];

/// A library's stream rules. The defaults keep today's behaviour: every stream copied, the
/// container kept, no file filtered out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamRules {
    /// ISO 639-2 codes (three lower-case letters) of the audio tracks to keep; empty keeps all.
    #[schema(schema_with = language_list)]
    pub audio_languages: Vec<String>,
    /// Drop tracks tagged `und` or untagged when `audio_languages` is set.
    pub drop_undetermined: bool,
    /// Drop commentary and described tracks (disposition or title).
    pub drop_commentary: bool,
    pub audio_codec: AudioCodec,
    /// Source codecs converted to `audio_codec` (a `pcm` entry matches every `pcm_*`).
    #[schema(schema_with = codec_list)]
    pub audio_transcode: Vec<String>,
    /// Bitrate per channel of converted audio, 16 to 512 kb/s; None: the codec's default.
    #[schema(minimum = 16, maximum = 512)]
    pub audio_bitrate_kbps: Option<u32>,
    /// Keep the source track beside its converted one.
    pub keep_original_audio: bool,
    /// Add a stereo downmix for each kept language whose tracks all have more than 2 channels.
    pub add_stereo: bool,
    /// ISO 639-2 codes of the subtitle tracks to keep; empty keeps all.
    #[schema(schema_with = language_list)]
    pub subtitle_languages: Vec<String>,
    /// Drop image subtitles (PGS, VobSub, DVB).
    pub drop_image_subtitles: bool,
    /// Scale taller video down to this height, 144 to 4320; None keeps the size.
    #[schema(minimum = 144, maximum = 4320)]
    pub max_height: Option<u32>,
    pub container: ContainerRule,
    /// Files smaller than this many MB (10^6 bytes) are SKIPPED at analysis; 0 to 10^7.
    #[schema(minimum = 0, maximum = 10_000_000)]
    pub min_size_mb: Option<u64>,
    /// Files whose bitrate, scaled to 1080p's pixel rate, is below this are SKIPPED; 0 to
    /// 1000000 kb/s.
    #[schema(minimum = 0, maximum = 1_000_000)]
    pub min_bitrate_kbps: Option<u32>,
    /// Glob patterns (`*`, `?`, `[...]`, `**`), relative to the library's root, of files
    /// left alone.
    #[schema(schema_with = glob_list)]
    pub skip_paths: Vec<String>,
}

impl Default for StreamRules {
    fn default() -> Self {
        StreamRules {
            audio_languages: Vec::new(),
            drop_undetermined: false,
            drop_commentary: false,
            audio_codec: AudioCodec::Copy,
            audio_transcode: DEFAULT_AUDIO_TRANSCODE.iter().map(|s| (*s).to_string()).collect(),
            audio_bitrate_kbps: None,
            keep_original_audio: false,
            add_stereo: false,
            subtitle_languages: Vec::new(),
            drop_image_subtitles: false,
            max_height: None,
            container: ContainerRule::Keep,
            min_size_mb: None,
            min_bitrate_kbps: None,
            skip_paths: Vec::new(),
        }
    }
}

/// Bounds of the rules, checked by `StreamRules::check` and stated in the API's schema.
pub const MAX_LIST_ITEMS: usize = 64;
pub const AUDIO_KBPS_MIN: u32 = 16;
pub const AUDIO_KBPS_MAX: u32 = 512;
pub const MAX_HEIGHT_MIN: u32 = 144;
pub const MAX_HEIGHT_MAX: u32 = 4320;
pub const MIN_SIZE_MB_MAX: u64 = 10_000_000;
pub const MIN_BITRATE_KBPS_MAX: u32 = 1_000_000;
pub const SKIP_PATH_MAX_CHARS: usize = 512;

// The API's schema of the lists, with the bounds `StreamRules::check` enforces.
fn string_list(item: utoipa::openapi::schema::ObjectBuilder, description: &str) -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, Type};
    ArrayBuilder::new()
        .items(item.schema_type(Type::String))
        .max_items(Some(MAX_LIST_ITEMS))
        .description(Some(description))
        .build()
}

fn language_list() -> utoipa::openapi::schema::Array {
    let item = utoipa::openapi::schema::ObjectBuilder::new().pattern(Some("^[a-z]{3}$"));
    string_list(item, "ISO 639-2 codes (three lower-case letters); empty keeps all.")
}

fn codec_list() -> utoipa::openapi::schema::Array {
    let item = utoipa::openapi::schema::ObjectBuilder::new().pattern(Some("^[a-z0-9_]{1,32}$"));
    string_list(item, "FFmpeg codec names converted to audioCodec; `pcm` matches every `pcm_*`.")
}

fn glob_list() -> utoipa::openapi::schema::Array {
    let item = utoipa::openapi::schema::ObjectBuilder::new()
        .min_length(Some(1))
        .max_length(Some(SKIP_PATH_MAX_CHARS))
        .pattern(Some("^[^/\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$"));
    string_list(item, "Glob patterns relative to the library's root (`*` within a folder, `**` across).")
}

/// Rules that cannot be applied; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    #[error("streamRules.{field}: {message}")]
    Invalid { field: String, message: String },
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> RulesError {
    RulesError::Invalid { field: field.into(), message: message.into() }
}

impl StreamRules {
    /// Checks every rule against its bounds; the error names the first field that fails.
    pub fn check(&self) -> Result<(), RulesError> {
        check_languages("audioLanguages", &self.audio_languages)?;
        check_languages("subtitleLanguages", &self.subtitle_languages)?;
        if self.audio_transcode.len() > MAX_LIST_ITEMS {
            return Err(invalid("audioTranscode", format!("at most {MAX_LIST_ITEMS} codecs")));
        }
        for (i, codec) in self.audio_transcode.iter().enumerate() {
            let ok = (1..=32).contains(&codec.len())
                && codec.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !ok {
                return Err(invalid(
                    format!("audioTranscode[{i}]"),
                    format!("{codec:?} is not an FFmpeg codec name (1 to 32 of a-z, 0-9, _)"),
                ));
            }
        }
        if let Some(kbps) = self.audio_bitrate_kbps {
            if !(AUDIO_KBPS_MIN..=AUDIO_KBPS_MAX).contains(&kbps) {
                return Err(invalid(
                    "audioBitrateKbps",
                    format!("must be {AUDIO_KBPS_MIN} to {AUDIO_KBPS_MAX} kb/s per channel, not {kbps}"),
                ));
            }
        }
        if let Some(height) = self.max_height {
            if !(MAX_HEIGHT_MIN..=MAX_HEIGHT_MAX).contains(&height) {
                return Err(invalid(
                    "maxHeight",
                    format!("must be {MAX_HEIGHT_MIN} to {MAX_HEIGHT_MAX}, not {height}"),
                ));
            }
        }
        if self.min_size_mb.is_some_and(|mb| mb > MIN_SIZE_MB_MAX) {
            return Err(invalid("minSizeMb", format!("must be 0 to {MIN_SIZE_MB_MAX}")));
        }
        if self.min_bitrate_kbps.is_some_and(|kbps| kbps > MIN_BITRATE_KBPS_MAX) {
            return Err(invalid("minBitrateKbps", format!("must be 0 to {MIN_BITRATE_KBPS_MAX}")));
        }
        if self.skip_paths.len() > MAX_LIST_ITEMS {
            return Err(invalid("skipPaths", format!("at most {MAX_LIST_ITEMS} patterns")));
        }
        for (i, pattern) in self.skip_paths.iter().enumerate() {
            check_glob(pattern).map_err(|message| invalid(format!("skipPaths[{i}]"), message))?;
        }
        Ok(())
    }

    /// Whether these are the default rules: every file and stream as before rules existed.
    pub fn is_default(&self) -> bool {
        *self == StreamRules::default()
    }

    /// The first `skipPaths` pattern matching `relative` (a path under the library's root).
    pub fn skipped_by(&self, relative: &std::path::Path) -> Option<&str> {
        // `*` stays within one folder; `**` crosses folders.
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        self.skip_paths
            .iter()
            .find(|p| glob::Pattern::new(p).is_ok_and(|g| g.matches_path_with(relative, options)))
            .map(String::as_str)
    }
}

fn check_languages(field: &str, list: &[String]) -> Result<(), RulesError> {
    if list.len() > MAX_LIST_ITEMS {
        return Err(invalid(field, format!("at most {MAX_LIST_ITEMS} languages")));
    }
    for (i, code) in list.iter().enumerate() {
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(invalid(
                format!("{field}[{i}]"),
                format!("{code:?} is not an ISO 639-2 code (three lower-case letters, e.g. eng)"),
            ));
        }
    }
    Ok(())
}

/// A `skipPaths` pattern: relative to the library's root, within bounds, valid glob syntax.
fn check_glob(pattern: &str) -> Result<(), String> {
    let chars = pattern.chars().count();
    if chars == 0 || chars > SKIP_PATH_MAX_CHARS {
        return Err(format!("must be 1 to {SKIP_PATH_MAX_CHARS} characters"));
    }
    if pattern.starts_with('/') {
        return Err(format!("{pattern:?} must be relative to the library's root (no leading /)"));
    }
    if pattern.chars().any(char::is_control) {
        return Err("must not contain control characters".to_string());
    }
    glob::Pattern::new(pattern).map(|_| ()).map_err(|e| format!("{pattern:?} is not a valid glob: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn field_of(rules: &StreamRules) -> String {
        match rules.check() {
            Err(RulesError::Invalid { field, .. }) => field,
            Ok(()) => "ok".to_string(),
        }
    }

    #[test]
    fn defaults_are_valid_and_default() {
        assert_eq!(StreamRules::default().check(), Ok(()));
        assert!(StreamRules::default().is_default());
        let parsed: StreamRules = serde_json::from_str("{}").unwrap();
        assert!(parsed.is_default());
    }

    #[test]
    fn every_bound_is_checked_and_names_its_field() {
        let base = StreamRules::default();
        let cases = [
            (StreamRules { audio_languages: vec!["en".into()], ..base.clone() }, "audioLanguages[0]"),
            (StreamRules { audio_languages: vec!["eng".into(), "ENG".into()], ..base.clone() }, "audioLanguages[1]"),
            (StreamRules { subtitle_languages: vec!["fr1".into()], ..base.clone() }, "subtitleLanguages[0]"),
            (StreamRules { audio_languages: vec!["eng".into(); 65], ..base.clone() }, "audioLanguages"),
            (StreamRules { audio_transcode: vec!["DTS".into()], ..base.clone() }, "audioTranscode[0]"),
            (StreamRules { audio_transcode: vec![String::new()], ..base.clone() }, "audioTranscode[0]"),
            (StreamRules { audio_bitrate_kbps: Some(15), ..base.clone() }, "audioBitrateKbps"),
            (StreamRules { audio_bitrate_kbps: Some(513), ..base.clone() }, "audioBitrateKbps"),
            (StreamRules { max_height: Some(143), ..base.clone() }, "maxHeight"),
            (StreamRules { max_height: Some(4321), ..base.clone() }, "maxHeight"),
            (StreamRules { min_size_mb: Some(10_000_001), ..base.clone() }, "minSizeMb"),
            (StreamRules { min_bitrate_kbps: Some(1_000_001), ..base.clone() }, "minBitrateKbps"),
            (StreamRules { skip_paths: vec!["ok/**".into(), "[a-".into()], ..base.clone() }, "skipPaths[1]"),
            (StreamRules { skip_paths: vec!["/abs/*".into()], ..base.clone() }, "skipPaths[0]"),
            (StreamRules { skip_paths: vec![String::new()], ..base.clone() }, "skipPaths[0]"),
            (StreamRules { skip_paths: vec!["a\nb".into()], ..base.clone() }, "skipPaths[0]"),
        ];
        for (rules, field) in cases {
            assert_eq!(field_of(&rules), field, "{rules:?}");
        }
        let edges = StreamRules {
            audio_languages: vec!["eng".into(), "deu".into()],
            audio_bitrate_kbps: Some(16),
            max_height: Some(4320),
            min_size_mb: Some(0),
            min_bitrate_kbps: Some(1_000_000),
            skip_paths: vec!["Extras/**".into(), "**/*sample*".into()],
            ..base
        };
        assert_eq!(edges.check(), Ok(()));
    }

    #[test]
    fn skip_paths_match_relative_paths() {
        let rules = StreamRules {
            skip_paths: vec!["Extras/**".into(), "**/*.sample.mkv".into(), "*.avi".into()],
            ..StreamRules::default()
        };
        assert_eq!(rules.skipped_by(Path::new("Extras/a/b.mkv")), Some("Extras/**"));
        assert_eq!(rules.skipped_by(Path::new("Show/S01/x.sample.mkv")), Some("**/*.sample.mkv"));
        assert_eq!(rules.skipped_by(Path::new("top.avi")), Some("*.avi"));
        // `*` does not cross folders.
        assert_eq!(rules.skipped_by(Path::new("Show/top.avi")), None);
        assert_eq!(rules.skipped_by(Path::new("Movies/extras/a.mkv")), None);
    }
}
