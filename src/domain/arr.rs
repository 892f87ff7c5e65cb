//! Sonarr and Radarr in: which file a webhook names, and where condense sees it. Their
//! webhooks (Settings > Connect > Webhook, "On Import" and "On Upgrade") send JSON with
//! `eventType` (`Download` for an import or an upgrade, `Test` for the button), the series or
//! movie, and the imported file (`episodeFile` / `movieFile`, with `path` and
//! `relativePath`). Only the fields read here are named; everything else is ignored.

use serde::{Deserialize, Serialize};

/// Jobs run highest priority first; the range a user may set.
pub const PRIORITIES: std::ops::RangeInclusive<i32> = -10..=10;
/// An *arr import comes in ahead of the library's backlog.
pub const IMPORT_PRIORITY: i32 = 5;

/// The part of a Sonarr or Radarr webhook condense reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArrWebhook {
    /// `Download` (an import or upgrade), `Test`, or another event (ignored).
    pub event_type: String,
    #[serde(default, deserialize_with = "object_or_null")]
    pub series: Option<ArrFolder>,
    #[serde(default, deserialize_with = "object_or_null")]
    pub movie: Option<ArrFolder>,
    #[serde(default, deserialize_with = "object_or_null")]
    pub episode_file: Option<ArrFile>,
    #[serde(default, deserialize_with = "object_or_null")]
    pub movie_file: Option<ArrFile>,
}

/// A part of a webhook that is an object, or null. serde would also read the struct from an
/// array of its fields in order (`[null, null]`), which no sender means.
fn object_or_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    match Option::<serde_json::Value>::deserialize(deserializer)? {
        None => Ok(None),
        Some(value @ serde_json::Value::Object(_)) => {
            serde_json::from_value(value).map(Some).map_err(serde::de::Error::custom)
        }
        Some(other) => {
            Err(serde::de::Error::invalid_type(serde::de::Unexpected::Other(&other.to_string()), &"an object or null"))
        }
    }
}

/// A series (`path`) or a movie (`folderPath`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArrFolder {
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub folder_path: Option<String>,
}

/// The imported file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArrFile {
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub relative_path: Option<String>,
}

/// What a webhook asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArrEvent {
    /// The connection test.
    Test,
    /// A file was imported (or upgraded) at this path, as the *arr sees it.
    Imported(String),
    /// Anything else (grab, rename, delete, health…): nothing to do.
    Ignored(String),
}

/// A path prefix as the *arr sees it, and the same folder as condense sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PathMapping {
    /// An absolute folder (`check_mappings`).
    #[schema(pattern = "^/")]
    pub from: String,
    /// An absolute folder (`check_mappings`).
    #[schema(pattern = "^/")]
    pub to: String,
}

impl ArrWebhook {
    /// What the webhook asks for. An import without a path it can name is an error.
    pub fn event(&self) -> Result<ArrEvent, String> {
        match self.event_type.as_str() {
            "Test" => Ok(ArrEvent::Test),
            // Radarr has also been seen to name an upgrade "Upgrade".
            "Download" | "Upgrade" => {
                let (file, folder) = match (&self.episode_file, &self.movie_file) {
                    (Some(file), _) => (file, self.series.as_ref().and_then(|s| s.path.clone())),
                    (None, Some(file)) => {
                        (file, self.movie.as_ref().and_then(|m| m.folder_path.clone().or(m.path.clone())))
                    }
                    (None, None) => return Err("an import without episodeFile or movieFile".into()),
                };
                match (&file.path, &file.relative_path, folder) {
                    (Some(path), _, _) if !path.is_empty() => Ok(ArrEvent::Imported(path.clone())),
                    (_, Some(relative), Some(folder)) if !relative.is_empty() => Ok(ArrEvent::Imported(format!(
                        "{}/{}",
                        folder.trim_end_matches('/'),
                        relative.trim_start_matches('/')
                    ))),
                    _ => Err("the imported file has neither a path nor a relativePath under a known folder".into()),
                }
            }
            other => Ok(ArrEvent::Ignored(other.to_string())),
        }
    }
}

/// `path` as condense sees it: the longest mapping whose `from` is a whole-component prefix
/// of it is replaced by its `to`; without one, the path as it is.
pub fn map_path(mappings: &[PathMapping], path: &str) -> String {
    let under = |prefix: &str| {
        let prefix = prefix.trim_end_matches('/');
        path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
    };
    mappings
        .iter()
        .filter(|m| !m.from.trim_end_matches('/').is_empty() && under(&m.from))
        .max_by_key(|m| m.from.trim_end_matches('/').len())
        .map_or_else(
            || path.to_string(),
            |m| format!("{}{}", m.to.trim_end_matches('/'), &path[m.from.trim_end_matches('/').len()..]),
        )
}

/// Mappings as a user may set them: absolute folders on both sides.
pub fn check_mappings(mappings: &[PathMapping]) -> Result<(), String> {
    for (i, m) in mappings.iter().enumerate() {
        if !m.from.starts_with('/') || !m.to.starts_with('/') {
            return Err(format!(
                "pathMappings[{i}]: from and to must be absolute folders, not {:?} -> {:?}",
                m.from, m.to
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(json: serde_json::Value) -> ArrWebhook {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_sonarr_import_names_its_episode_file() {
        // As Sonarr v3/v4 send it (trimmed; unknown fields are ignored).
        let sonarr = hook(serde_json::json!({
            "eventType": "Download",
            "instanceName": "Sonarr",
            "series": {"id": 1, "title": "Show", "path": "/tv/Show", "tvdbId": 1},
            "episodes": [{"id": 11, "episodeNumber": 1, "seasonNumber": 1}],
            "episodeFile": {"id": 7, "relativePath": "Season 1/Show - S01E01.mkv", "path": "/tv/Show/Season 1/Show - S01E01.mkv"},
            "isUpgrade": false
        }));
        assert_eq!(sonarr.event(), Ok(ArrEvent::Imported("/tv/Show/Season 1/Show - S01E01.mkv".into())));
        // Without the absolute path: the series folder and the relative one.
        let relative = hook(serde_json::json!({
            "eventType": "Download",
            "series": {"path": "/tv/Show/"},
            "episodeFile": {"relativePath": "Season 1/e1.mkv"}
        }));
        assert_eq!(relative.event(), Ok(ArrEvent::Imported("/tv/Show/Season 1/e1.mkv".into())));
    }

    #[test]
    fn a_radarr_import_or_upgrade_names_its_movie_file() {
        for event in ["Download", "Upgrade"] {
            let radarr = hook(serde_json::json!({
                "eventType": event,
                "movie": {"id": 3, "title": "Film", "folderPath": "/movies/Film (2020)"},
                "movieFile": {"id": 9, "relativePath": "Film (2020).mkv", "path": "/movies/Film (2020)/Film (2020).mkv"},
                "isUpgrade": event == "Upgrade"
            }));
            assert_eq!(radarr.event(), Ok(ArrEvent::Imported("/movies/Film (2020)/Film (2020).mkv".into())));
        }
        let relative = hook(serde_json::json!({
            "eventType": "Download", "movie": {"folderPath": "/movies/F"}, "movieFile": {"relativePath": "F.mkv"}
        }));
        assert_eq!(relative.event(), Ok(ArrEvent::Imported("/movies/F/F.mkv".into())));
    }

    #[test]
    fn tests_and_other_events_ask_for_nothing_and_a_pathless_import_is_an_error() {
        assert_eq!(
            hook(serde_json::json!({"eventType": "Test", "series": {"path": "/tv/x"}})).event(),
            Ok(ArrEvent::Test)
        );
        assert_eq!(hook(serde_json::json!({"eventType": "Grab"})).event(), Ok(ArrEvent::Ignored("Grab".into())));
        assert!(hook(serde_json::json!({"eventType": "Download"})).event().is_err());
        assert!(hook(serde_json::json!({"eventType": "Download", "episodeFile": {"relativePath": "a.mkv"}}))
            .event()
            .is_err());
    }

    #[test]
    fn paths_map_by_the_longest_whole_component_prefix() {
        let mappings = vec![
            PathMapping { from: "/tv".into(), to: "/media/tv".into() },
            PathMapping { from: "/tv/anime/".into(), to: "/mnt/anime".into() },
        ];
        assert_eq!(map_path(&mappings, "/tv/Show/e1.mkv"), "/media/tv/Show/e1.mkv");
        assert_eq!(map_path(&mappings, "/tv/anime/x/e1.mkv"), "/mnt/anime/x/e1.mkv");
        // "/tvshows" is not under "/tv".
        assert_eq!(map_path(&mappings, "/tvshows/e1.mkv"), "/tvshows/e1.mkv");
        assert_eq!(map_path(&[], "/tv/e1.mkv"), "/tv/e1.mkv");
        assert!(check_mappings(&mappings).is_ok());
        assert!(check_mappings(&[PathMapping { from: "tv".into(), to: "/x".into() }]).is_err());
    }
}
