//! Connections: after a replace (or a container change, which gives the file a new name),
//! the media servers and *arrs that know the file are told, so they show the new one. Pure:
//! what to ask each product, from its documented API; `actors::notifier` makes the calls,
//! from rows of the outbox (`repo::notifications`), and retries them as it does
//! notifications. docs/ARCHITECTURE.md has the flow.
//!
//! - Plex: `GET /library/sections` (JSON) finds the library section whose folder holds the
//!   file, then `GET /library/sections/{key}/refresh?path=<the file's folder>` scans just
//!   that folder; `X-Plex-Token` on both.
//! - Jellyfin and Emby: `POST /Library/Media/Updated` with `{"Updates":[{"Path","UpdateType"}]}`
//!   (`Modified`, or for a new name `Deleted` for the old one and `Created` for the new);
//!   Jellyfin's key as `Authorization: MediaBrowser Token="…"`, Emby's as `X-Emby-Token`.
//! - Sonarr and Radarr (API v3): `GET /api/v3/series` (`/api/v3/movie`) finds the series
//!   (movie) whose folder holds the file, then `POST /api/v3/command` with
//!   `{"name":"RescanSeries","seriesId"}` (`{"name":"RescanMovie","movieId"}`);
//!   `X-Api-Key` on both.
//!
//! Paths are condense's in the outbox and mapped at delivery (`pathMappings`, `from` as
//! condense sees a folder, `to` as the other product does), so a changed mapping applies to
//! what still waits.

use serde::{Deserialize, Serialize};

use super::arr::{check_mappings, map_path, PathMapping};
use super::named_enum;
use super::notify::percent_encode;

named_enum! {
    /// What condense tells of a replaced file.
    ConnectionKind, "connection kind" {
        Plex => "plex",
        Jellyfin => "jellyfin",
        Emby => "emby",
        Sonarr => "sonarr",
        Radarr => "radarr",
    }
}

/// A connection as the notifier needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    pub kind: ConnectionKind,
    /// The product's base URL (`http://plex:32400`, `http://sonarr:8989`…).
    pub url: String,
    pub api_key: String,
    pub mappings: Vec<PathMapping>,
}

/// A file a replace changed, as condense sees it: where it is now and, when the replace
/// gave it a new name (a container change), where it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replaced {
    pub path: String,
    pub previous_path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    /// Only "get a new copy" deletes (`domain::regrab`): the *arr's record of a file.
    Delete,
}

/// One HTTP call to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What to do once the lookup (if any) answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refresh {
    /// Make these calls, in order.
    Calls(Vec<Call>),
    /// Nothing the product knows holds the file (a movie in a Sonarr connection, a folder no
    /// Plex library scans): nothing to tell it, and nothing to try again.
    NotHeld(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Invalid(String),
    #[error("its answer could not be read: {0}")]
    Answer(String),
}

pub(super) fn base(conn: &Connection) -> &str {
    conn.url.trim_end_matches('/')
}

pub(super) fn key_headers(conn: &Connection) -> Vec<(String, String)> {
    match conn.kind {
        ConnectionKind::Plex => vec![("X-Plex-Token".into(), conn.api_key.clone())],
        ConnectionKind::Jellyfin => {
            vec![("Authorization".into(), format!("MediaBrowser Token=\"{}\"", conn.api_key))]
        }
        ConnectionKind::Emby => vec![("X-Emby-Token".into(), conn.api_key.clone())],
        ConnectionKind::Sonarr | ConnectionKind::Radarr => vec![("X-Api-Key".into(), conn.api_key.clone())],
    }
}

pub(super) fn get(conn: &Connection, path: &str) -> Call {
    let mut headers = key_headers(conn);
    headers.push(("Accept".into(), "application/json".into()));
    Call { method: Method::Get, url: format!("{}{path}", base(conn)), headers, body: Vec::new() }
}

pub(super) fn post_json(conn: &Connection, path: &str, body: &serde_json::Value) -> Call {
    let mut headers = key_headers(conn);
    headers.push(("Content-Type".into(), "application/json".into()));
    Call {
        method: Method::Post,
        url: format!("{}{path}", base(conn)),
        headers,
        body: serde_json::to_vec(body).unwrap_or_default(),
    }
}

/// The first call, whose answer `refresh` needs: the list of Plex's sections, or of the
/// *arr's series or movies. `None` for Jellyfin and Emby, which are told the path at once.
pub fn lookup(conn: &Connection) -> Option<Call> {
    match conn.kind {
        ConnectionKind::Plex => Some(get(conn, "/library/sections")),
        ConnectionKind::Sonarr => Some(get(conn, "/api/v3/series")),
        ConnectionKind::Radarr => Some(get(conn, "/api/v3/movie")),
        ConnectionKind::Jellyfin | ConnectionKind::Emby => None,
    }
}

/// A call that proves the URL and key work and changes nothing, for the "test" action:
/// Plex's section list, the *arr's system status, Jellyfin's or Emby's system information.
pub fn probe(conn: &Connection) -> Call {
    match conn.kind {
        ConnectionKind::Plex => get(conn, "/library/sections"),
        ConnectionKind::Sonarr | ConnectionKind::Radarr => get(conn, "/api/v3/system/status"),
        ConnectionKind::Jellyfin | ConnectionKind::Emby => get(conn, "/System/Info"),
    }
}

/// `folder` holds `path`: equal, or a whole-component prefix.
pub(super) fn holds(folder: &str, path: &str) -> bool {
    let folder = folder.trim_end_matches('/');
    !folder.is_empty() && (path == folder || path.strip_prefix(folder).is_some_and(|rest| rest.starts_with('/')))
}

/// The folder a path is in.
fn parent(path: &str) -> &str {
    match path.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((dir, _)) => dir,
        None => path,
    }
}

/// Of `(id, folder)` pairs, the one whose folder holds `path` most closely.
pub(super) fn owner<T: Clone>(candidates: &[(T, String)], path: &str) -> Option<T> {
    candidates
        .iter()
        .filter(|(_, folder)| holds(folder, path))
        .max_by_key(|(_, folder)| folder.trim_end_matches('/').len())
        .map(|(id, _)| id.clone())
}

pub(super) fn parse(answer: &[u8]) -> Result<serde_json::Value, ConnectError> {
    serde_json::from_slice(answer).map_err(|e| ConnectError::Answer(e.to_string()))
}

/// An id as the products write it: a number, or (Plex's section keys) a string of one.
fn id_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// What to tell `conn` of `file`, given what `lookup` answered (`None` where there is no
/// lookup).
pub fn refresh(conn: &Connection, file: &Replaced, looked_up: Option<&[u8]>) -> Result<Refresh, ConnectError> {
    let path = map_path(&conn.mappings, &file.path);
    let previous = file.previous_path.as_deref().map(|p| map_path(&conn.mappings, p));
    let answer = match (lookup(conn), looked_up) {
        (Some(_), Some(answer)) => Some(parse(answer)?),
        (Some(_), None) => return Err(ConnectError::Invalid("the lookup's answer is missing".into())),
        (None, _) => None,
    };
    Ok(match (conn.kind, answer) {
        (ConnectionKind::Jellyfin | ConnectionKind::Emby, _) => {
            let updates = match previous.filter(|p| *p != path) {
                Some(previous) => serde_json::json!([
                    { "Path": previous, "UpdateType": "Deleted" },
                    { "Path": path, "UpdateType": "Created" },
                ]),
                None => serde_json::json!([{ "Path": path, "UpdateType": "Modified" }]),
            };
            Refresh::Calls(vec![post_json(conn, "/Library/Media/Updated", &serde_json::json!({ "Updates": updates }))])
        }
        (ConnectionKind::Plex, Some(answer)) => {
            let sections = answer
                .pointer("/MediaContainer/Directory")
                .and_then(serde_json::Value::as_array)
                .ok_or_else(|| ConnectError::Answer("no MediaContainer.Directory in the sections".into()))?;
            let folders: Vec<(String, String)> = sections
                .iter()
                .filter_map(|s| Some((id_text(s.get("key")?)?, s.get("Location")?.as_array()?)))
                .flat_map(|(key, locations)| {
                    locations
                        .iter()
                        .filter_map(|l| l.get("path").and_then(serde_json::Value::as_str))
                        .map(move |folder| (key.clone(), folder.to_string()))
                })
                .collect();
            let folder = parent(&path);
            match owner(&folders, folder) {
                Some(key) => Refresh::Calls(vec![get(
                    conn,
                    &format!("/library/sections/{key}/refresh?path={}", percent_encode(folder)),
                )]),
                None => Refresh::NotHeld(format!("no Plex library holds {folder}")),
            }
        }
        (ConnectionKind::Sonarr | ConnectionKind::Radarr, Some(answer)) => {
            let (what, command, id_field) = match conn.kind {
                ConnectionKind::Sonarr => ("series", "RescanSeries", "seriesId"),
                _ => ("movie", "RescanMovie", "movieId"),
            };
            let items =
                answer.as_array().ok_or_else(|| ConnectError::Answer(format!("the {what} list is not a list")))?;
            let folders: Vec<(i64, String)> = items
                .iter()
                .filter_map(|i| Some((i.get("id")?.as_i64()?, i.get("path")?.as_str()?.to_string())))
                .collect();
            match owner(&folders, &path) {
                Some(id) => Refresh::Calls(vec![post_json(
                    conn,
                    "/api/v3/command",
                    &serde_json::json!({ "name": command, id_field: id }),
                )]),
                None => Refresh::NotHeld(format!("no {what} in {} holds {path}", conn.kind)),
            }
        }
        (ConnectionKind::Plex | ConnectionKind::Sonarr | ConnectionKind::Radarr, None) => {
            return Err(ConnectError::Invalid("the lookup's answer is missing".into()))
        }
    })
}

/// Checks a connection as a user enters it.
pub fn validate(url: &str, api_key: Option<&str>, mappings: &[PathMapping]) -> Result<(), ConnectError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
        return Err(ConnectError::Invalid("a connection's URL starts with http:// or https://".into()));
    }
    if !super::net::valid_authority(url) {
        return Err(ConnectError::Invalid("a connection's URL names no host a request can go to".into()));
    }
    if api_key.is_none_or(|k| k.trim().is_empty()) {
        return Err(ConnectError::Invalid("a connection needs the product's API key (Plex: its token)".into()));
    }
    check_mappings(mappings).map_err(ConnectError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(kind: ConnectionKind) -> Connection {
        Connection {
            kind,
            url: "http://media.lan:1234/".into(),
            api_key: "K3y".into(),
            mappings: vec![PathMapping { from: "/media".into(), to: "/data".into() }],
        }
    }

    fn file(path: &str, previous: Option<&str>) -> Replaced {
        Replaced { path: path.into(), previous_path: previous.map(String::from) }
    }

    fn calls(refresh: Refresh) -> Vec<Call> {
        match refresh {
            Refresh::Calls(calls) => calls,
            other => panic!("expected calls, got {other:?}"),
        }
    }

    fn header<'a>(call: &'a Call, name: &str) -> Option<&'a str> {
        call.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(call: &Call) -> serde_json::Value {
        serde_json::from_slice(&call.body).unwrap()
    }

    #[test]
    fn jellyfin_and_emby_are_told_the_mapped_path_with_their_own_key_header() {
        let c = conn(ConnectionKind::Jellyfin);
        assert_eq!(lookup(&c), None);
        let call = calls(refresh(&c, &file("/media/tv/Show/e1.mkv", None), None).unwrap()).remove(0);
        assert_eq!((call.method, call.url.as_str()), (Method::Post, "http://media.lan:1234/Library/Media/Updated"));
        assert_eq!(header(&call, "Authorization"), Some("MediaBrowser Token=\"K3y\""));
        assert_eq!(
            json(&call),
            serde_json::json!({"Updates": [{"Path": "/data/tv/Show/e1.mkv", "UpdateType": "Modified"}]})
        );

        let emby =
            calls(refresh(&conn(ConnectionKind::Emby), &file("/media/a.mkv", Some("/media/a.mp4")), None).unwrap())
                .remove(0);
        assert_eq!(header(&emby, "X-Emby-Token"), Some("K3y"));
        assert_eq!(
            json(&emby),
            serde_json::json!({"Updates": [
                {"Path": "/data/a.mp4", "UpdateType": "Deleted"},
                {"Path": "/data/a.mkv", "UpdateType": "Created"},
            ]})
        );
    }

    #[test]
    fn plex_scans_the_files_folder_in_the_section_that_holds_it() {
        let c = conn(ConnectionKind::Plex);
        let first = lookup(&c).unwrap();
        assert_eq!((first.method, first.url.as_str()), (Method::Get, "http://media.lan:1234/library/sections"));
        assert_eq!(header(&first, "X-Plex-Token"), Some("K3y"));
        assert_eq!(header(&first, "Accept"), Some("application/json"));
        let sections = serde_json::json!({"MediaContainer": {"size": 3, "Directory": [
            {"key": "1", "type": "movie", "title": "Movies", "Location": [{"id": 1, "path": "/data/movies"}]},
            {"key": "2", "type": "show", "title": "TV", "Location": [{"id": 2, "path": "/data/tv"}, {"id": 3, "path": "/data/tv2"}]},
            {"key": "3", "type": "show", "title": "Anime", "Location": [{"id": 4, "path": "/data/tv/anime"}]},
        ]}});
        let answer = serde_json::to_vec(&sections).unwrap();
        let call = calls(refresh(&c, &file("/media/tv/Show Name/S01E01.mkv", None), Some(answer.as_slice())).unwrap())
            .remove(0);
        assert_eq!(
            (call.method, call.url.as_str()),
            (Method::Get, "http://media.lan:1234/library/sections/2/refresh?path=%2Fdata%2Ftv%2FShow%20Name")
        );
        assert_eq!(header(&call, "X-Plex-Token"), Some("K3y"));
        // The closest folder wins; a folder nobody scans is nothing to tell.
        let anime =
            calls(refresh(&c, &file("/media/tv/anime/x/e1.mkv", None), Some(answer.as_slice())).unwrap()).remove(0);
        assert!(anime.url.contains("/library/sections/3/refresh?"), "{}", anime.url);
        assert_eq!(
            refresh(&c, &file("/media/music/a.mkv", None), Some(answer.as_slice())).unwrap(),
            Refresh::NotHeld("no Plex library holds /data/music".into())
        );
        assert!(matches!(
            refresh(&c, &file("/media/a.mkv", None), Some(b"<xml/>".as_slice())),
            Err(ConnectError::Answer(_))
        ));
    }

    #[test]
    fn sonarr_and_radarr_rescan_the_series_or_movie_that_owns_the_file() {
        let series = serde_json::to_vec(&serde_json::json!([
            {"id": 7, "title": "Show", "path": "/data/tv/Show"},
            {"id": 8, "title": "Show 2", "path": "/data/tv/Show 2"},
        ]))
        .unwrap();
        let c = conn(ConnectionKind::Sonarr);
        let first = lookup(&c).unwrap();
        assert_eq!(
            (first.url.as_str(), header(&first, "X-Api-Key")),
            ("http://media.lan:1234/api/v3/series", Some("K3y"))
        );
        let call =
            calls(refresh(&c, &file("/media/tv/Show 2/S01E01.mkv", None), Some(series.as_slice())).unwrap()).remove(0);
        assert_eq!((call.method, call.url.as_str()), (Method::Post, "http://media.lan:1234/api/v3/command"));
        assert_eq!(json(&call), serde_json::json!({"name": "RescanSeries", "seriesId": 8}));
        assert!(matches!(
            refresh(&c, &file("/media/movies/Film/film.mkv", None), Some(series.as_slice())).unwrap(),
            Refresh::NotHeld(_)
        ));

        let movies =
            serde_json::to_vec(&serde_json::json!([{"id": 3, "title": "Film", "path": "/data/movies/Film (2020)"}]))
                .unwrap();
        let r = conn(ConnectionKind::Radarr);
        assert_eq!(lookup(&r).unwrap().url, "http://media.lan:1234/api/v3/movie");
        let call = calls(
            refresh(
                &r,
                &file("/media/movies/Film (2020)/film.mkv", Some("/media/movies/Film (2020)/film.mp4")),
                Some(movies.as_slice()),
            )
            .unwrap(),
        )
        .remove(0);
        assert_eq!(json(&call), serde_json::json!({"name": "RescanMovie", "movieId": 3}));
        assert!(matches!(refresh(&r, &file("/media/a.mkv", None), None), Err(ConnectError::Invalid(_))));
    }

    #[test]
    fn the_test_asks_something_that_changes_nothing() {
        let urls: Vec<String> = ConnectionKind::ALL.iter().map(|k| probe(&conn(*k)).url).collect();
        assert_eq!(
            urls,
            [
                "http://media.lan:1234/library/sections",
                "http://media.lan:1234/System/Info",
                "http://media.lan:1234/System/Info",
                "http://media.lan:1234/api/v3/system/status",
                "http://media.lan:1234/api/v3/system/status",
            ]
        );
        assert!(ConnectionKind::ALL.iter().all(|k| probe(&conn(*k)).method == Method::Get));
        assert_eq!(header(&probe(&conn(ConnectionKind::Radarr)), "X-Api-Key"), Some("K3y"));
    }

    #[test]
    fn connections_are_checked_as_entered() {
        let m = vec![PathMapping { from: "/media".into(), to: "/data".into() }];
        assert!(validate("http://plex:32400", Some("tok"), &m).is_ok());
        assert!(validate("plex:32400", Some("tok"), &m).is_err());
        assert!(validate("http://plex]:32400", Some("tok"), &m).is_err());
        assert!(validate("http://plex:32400", None, &m).is_err());
        assert!(validate("http://plex:32400", Some("  "), &m).is_err());
        assert!(validate("http://plex:32400", Some("tok"), &[PathMapping { from: "media".into(), to: "/d".into() }])
            .is_err());
    }

    #[test]
    fn a_folder_holds_what_is_under_it_by_whole_components() {
        assert!(holds("/data/tv", "/data/tv/a.mkv"));
        assert!(holds("/data/tv/", "/data/tv"));
        assert!(!holds("/data/tv", "/data/tv2/a.mkv"));
        assert!(!holds("", "/a"));
        assert_eq!(parent("/a/b/c.mkv"), "/a/b");
        assert_eq!(parent("/c.mkv"), "/");
    }
}
