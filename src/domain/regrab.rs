//! "Get a new copy" of a damaged file (issue 38): the Sonarr or Radarr that holds it deletes
//! its record of the file and searches for the episodes (the movie) again; the file itself
//! is removed by that app alone. Pure: the calls, from each product's documented API v3,
//! and what to read from their answers; `actors::regrab` makes them in order.
//!
//! - Sonarr: `GET /api/v3/series` (the series whose folder holds the file), `GET
//!   /api/v3/episodefile?seriesId=` (the file's record, by its path), `GET
//!   /api/v3/episode?episodeFileId=` (its episodes, read before the record goes), `DELETE
//!   /api/v3/episodefile/{id}`, then `POST /api/v3/command` with
//!   `{"name":"EpisodeSearch","episodeIds":[…]}`.
//! - Radarr: `GET /api/v3/movie`, `GET /api/v3/moviefile?movieId=`, `DELETE
//!   /api/v3/moviefile/{id}`, then `POST /api/v3/command` with
//!   `{"name":"MoviesSearch","movieIds":[id]}`.
//!
//! `X-Api-Key` on every call; the path is mapped with the connection's `pathMappings` first.

use super::arr::map_path;
use super::connect::{self, base, get, holds, key_headers, owner, parse, Call, Connection, ConnectionKind, Method};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegrabError {
    /// The connection is not a Sonarr or Radarr one.
    #[error("a {0} connection cannot get a new copy (Sonarr and Radarr can)")]
    NotAnArr(ConnectionKind),
    /// Nothing the app knows holds the file: nothing was asked of it.
    #[error("{0}")]
    NotHeld(String),
    #[error("its answer could not be read: {0}")]
    Answer(String),
}

impl From<connect::ConnectError> for RegrabError {
    fn from(e: connect::ConnectError) -> Self {
        RegrabError::Answer(e.to_string())
    }
}

fn arr(conn: &Connection) -> Result<(), RegrabError> {
    match conn.kind {
        ConnectionKind::Sonarr | ConnectionKind::Radarr => Ok(()),
        other => Err(RegrabError::NotAnArr(other)),
    }
}

/// Before anything is asked: whether `conn` is a Sonarr or Radarr connection that may hold
/// the file at `path` (condense's), so that the dashboard offers "get a new copy" from it.
/// One with path mappings holds only what a mapping's `from` folder holds; one without sees
/// condense's paths as they are, so any file may be its, and only its series (movie)
/// folders, read by `owners` when asked, tell.
pub fn may_hold(conn: &Connection, path: &str) -> bool {
    arr(conn).is_ok() && (conn.mappings.is_empty() || conn.mappings.iter().any(|m| holds(&m.from, path)))
}

/// The file's path as the app sees it.
pub fn app_path(conn: &Connection, path: &str) -> String {
    map_path(&conn.mappings, path)
}

/// The first call: every series (movie), to find the one whose folder holds the file.
pub fn owners(conn: &Connection) -> Result<Call, RegrabError> {
    arr(conn)?;
    Ok(match conn.kind {
        ConnectionKind::Sonarr => get(conn, "/api/v3/series"),
        _ => get(conn, "/api/v3/movie"),
    })
}

/// The series (movie) id whose folder holds `path` (condense's), from the answer to `owners`.
pub fn owner_of(conn: &Connection, path: &str, answer: &[u8]) -> Result<i64, RegrabError> {
    let path = app_path(conn, path);
    let what = if conn.kind == ConnectionKind::Sonarr { "series" } else { "movie" };
    let list = parse(answer)?;
    let items = list.as_array().ok_or_else(|| RegrabError::Answer(format!("the {what} list is not a list")))?;
    let folders: Vec<(i64, String)> =
        items.iter().filter_map(|i| Some((i.get("id")?.as_i64()?, i.get("path")?.as_str()?.to_string()))).collect();
    owner(&folders, &path).ok_or_else(|| RegrabError::NotHeld(format!("no {what} in {} holds {path}", conn.kind)))
}

/// The second call: the owner's file records.
pub fn files(conn: &Connection, owner: i64) -> Result<Call, RegrabError> {
    arr(conn)?;
    Ok(match conn.kind {
        ConnectionKind::Sonarr => get(conn, &format!("/api/v3/episodefile?seriesId={owner}")),
        _ => get(conn, &format!("/api/v3/moviefile?movieId={owner}")),
    })
}

/// The record of the file at `path` (condense's), from the answer to `files`.
pub fn file_of(conn: &Connection, path: &str, answer: &[u8]) -> Result<i64, RegrabError> {
    let path = app_path(conn, path);
    let list = parse(answer)?;
    let items = list.as_array().ok_or_else(|| RegrabError::Answer("the file list is not a list".into()))?;
    items
        .iter()
        .find(|f| f.get("path").and_then(serde_json::Value::as_str) == Some(path.as_str()))
        .and_then(|f| f.get("id")?.as_i64())
        .ok_or_else(|| RegrabError::NotHeld(format!("{} has no record of {path}", conn.kind)))
}

/// Sonarr only: the episodes the record holds, read before the record goes (its episodes
/// then hold no file id any more).
pub fn episodes(conn: &Connection, file: i64) -> Option<Call> {
    (conn.kind == ConnectionKind::Sonarr).then(|| get(conn, &format!("/api/v3/episode?episodeFileId={file}")))
}

/// The episode ids from the answer to `episodes`.
pub fn episode_ids(answer: &[u8]) -> Result<Vec<i64>, RegrabError> {
    let list = parse(answer)?;
    let items = list.as_array().ok_or_else(|| RegrabError::Answer("the episode list is not a list".into()))?;
    let ids: Vec<i64> = items.iter().filter_map(|e| e.get("id")?.as_i64()).collect();
    if ids.is_empty() {
        return Err(RegrabError::NotHeld("Sonarr lists no episode in that file".into()));
    }
    Ok(ids)
}

/// The record's deletion (the app removes the file itself).
pub fn delete(conn: &Connection, file: i64) -> Result<Call, RegrabError> {
    arr(conn)?;
    let path = match conn.kind {
        ConnectionKind::Sonarr => format!("/api/v3/episodefile/{file}"),
        _ => format!("/api/v3/moviefile/{file}"),
    };
    Ok(Call {
        method: Method::Delete,
        url: format!("{}{path}", base(conn)),
        headers: key_headers(conn),
        body: Vec::new(),
    })
}

/// The search for a new copy: Sonarr's `EpisodeSearch` of `episode_ids`, Radarr's
/// `MoviesSearch` of the movie.
pub fn search(conn: &Connection, owner: i64, episode_ids: &[i64]) -> Result<Call, RegrabError> {
    arr(conn)?;
    let body = match conn.kind {
        ConnectionKind::Sonarr => serde_json::json!({ "name": "EpisodeSearch", "episodeIds": episode_ids }),
        _ => serde_json::json!({ "name": "MoviesSearch", "movieIds": [owner] }),
    };
    Ok(connect::post_json(conn, "/api/v3/command", &body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::arr::PathMapping;

    fn conn(kind: ConnectionKind) -> Connection {
        Connection {
            kind,
            url: "http://arr.lan:8989/".into(),
            api_key: "k3y".into(),
            mappings: vec![PathMapping { from: "/srv/media".into(), to: "/data".into() }],
        }
    }

    fn key(call: &Call) -> Option<&str> {
        call.headers.iter().find(|(n, _)| n == "X-Api-Key").map(|(_, v)| v.as_str())
    }

    #[test]
    fn sonarr_finds_the_series_the_record_and_its_episodes_then_deletes_and_searches() {
        let c = conn(ConnectionKind::Sonarr);
        let first = owners(&c).unwrap();
        assert_eq!(
            (first.method, first.url.as_str(), key(&first)),
            (Method::Get, "http://arr.lan:8989/api/v3/series", Some("k3y"))
        );
        let series = br#"[{"id":3,"path":"/data/tv/Other"},{"id":7,"path":"/data/tv/Show"}]"#;
        let file = "/srv/media/tv/Show/S01/e1.mkv";
        assert_eq!(owner_of(&c, file, series).unwrap(), 7);
        assert_eq!(files(&c, 7).unwrap().url, "http://arr.lan:8989/api/v3/episodefile?seriesId=7");
        let records = br#"[{"id":40,"path":"/data/tv/Show/S01/e2.mkv"},{"id":41,"path":"/data/tv/Show/S01/e1.mkv"}]"#;
        assert_eq!(file_of(&c, file, records).unwrap(), 41);
        let eps = episodes(&c, 41).unwrap();
        assert_eq!(eps.url, "http://arr.lan:8989/api/v3/episode?episodeFileId=41");
        assert_eq!(episode_ids(br#"[{"id":100},{"id":101}]"#).unwrap(), [100, 101]);
        let del = delete(&c, 41).unwrap();
        assert_eq!(
            (del.method, del.url.as_str(), key(&del)),
            (Method::Delete, "http://arr.lan:8989/api/v3/episodefile/41", Some("k3y"))
        );
        let cmd = search(&c, 7, &[100, 101]).unwrap();
        assert_eq!((cmd.method, cmd.url.as_str()), (Method::Post, "http://arr.lan:8989/api/v3/command"));
        let body: serde_json::Value = serde_json::from_slice(&cmd.body).unwrap();
        assert_eq!(body, serde_json::json!({"name": "EpisodeSearch", "episodeIds": [100, 101]}));
    }

    #[test]
    fn radarr_finds_the_movie_and_its_file_then_deletes_and_searches() {
        let c = conn(ConnectionKind::Radarr);
        assert_eq!(owners(&c).unwrap().url, "http://arr.lan:8989/api/v3/movie");
        let file = "/srv/media/films/Heat (1995)/heat.mkv";
        assert_eq!(owner_of(&c, file, br#"[{"id":12,"path":"/data/films/Heat (1995)"}]"#).unwrap(), 12);
        assert_eq!(files(&c, 12).unwrap().url, "http://arr.lan:8989/api/v3/moviefile?movieId=12");
        assert_eq!(file_of(&c, file, br#"[{"id":5,"path":"/data/films/Heat (1995)/heat.mkv"}]"#).unwrap(), 5);
        assert!(episodes(&c, 5).is_none());
        assert_eq!(delete(&c, 5).unwrap().url, "http://arr.lan:8989/api/v3/moviefile/5");
        let body: serde_json::Value = serde_json::from_slice(&search(&c, 12, &[]).unwrap().body).unwrap();
        assert_eq!(body, serde_json::json!({"name": "MoviesSearch", "movieIds": [12]}));
    }

    #[test]
    fn an_arr_may_hold_what_its_mappings_hold_or_anything_without_mappings() {
        let mapped = conn(ConnectionKind::Sonarr);
        assert!(may_hold(&mapped, "/srv/media/tv/Show/S01/e1.mkv"));
        assert!(!may_hold(&mapped, "/srv/mediaplus/e1.mkv"), "a whole folder, not a prefix of a name");
        assert!(!may_hold(&mapped, "/elsewhere/e1.mkv"));
        let plain = Connection { mappings: Vec::new(), ..conn(ConnectionKind::Radarr) };
        assert!(may_hold(&plain, "/anywhere/at/all.mkv"));
        let plex = Connection { mappings: Vec::new(), ..conn(ConnectionKind::Plex) };
        assert!(!may_hold(&plex, "/srv/media/tv/Show/S01/e1.mkv"), "Plex cannot get a new copy");
    }

    #[test]
    fn a_file_nothing_holds_is_not_asked_about() {
        let c = conn(ConnectionKind::Radarr);
        assert!(matches!(
            owner_of(&c, "/srv/media/x/y.mkv", br#"[{"id":1,"path":"/data/films/A"}]"#),
            Err(RegrabError::NotHeld(_))
        ));
        assert!(matches!(file_of(&c, "/srv/media/x/y.mkv", b"[]"), Err(RegrabError::NotHeld(_))));
        assert!(matches!(owner_of(&c, "/x", b"{"), Err(RegrabError::Answer(_))));
        assert!(matches!(episode_ids(b"[]"), Err(RegrabError::NotHeld(_))));
        assert!(matches!(owners(&conn(ConnectionKind::Plex)), Err(RegrabError::NotAnArr(ConnectionKind::Plex))));
    }
}
