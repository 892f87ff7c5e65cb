//! "Get a new copy" of a damaged file (issue 38): the calls `domain::regrab` builds, made in
//! order against the first enabled Sonarr or Radarr connection whose series (movie) holds
//! the file, of those whose path mappings may hold it (`domain::regrab::may_hold`). The app deletes its record of the file (and the file) and searches again;
//! condense itself removes nothing.

use std::path::Path;

use sea_orm::DatabaseConnection;

use super::notifier::{Sender, ANSWER_LIMIT, LOOKUP_LIMIT};
use crate::domain::connect::{Connection, ConnectionKind};
use crate::domain::path_bytes;
use crate::domain::regrab::{self, RegrabError};
use crate::repo;

#[derive(Debug, thiserror::Error)]
pub enum NewCopyError {
    /// No Sonarr or Radarr connection holds the file: nothing was asked of any.
    #[error("no Sonarr or Radarr connection holds {0}; nothing was asked and the file is as it was")]
    NotHeld(String),
    /// A call failed before the record was deleted.
    #[error("{kind} could not be asked for a new copy of {path} ({why}); the file and its record are as they were")]
    Before { kind: ConnectionKind, path: String, why: String },
    /// The record was deleted, the search was not started.
    #[error("{kind} deleted its record of {path} (and the file), but the search for a new copy was not started ({why}); start it in {kind}")]
    SearchNotStarted { kind: ConnectionKind, path: String, why: String },
    #[error("the connections could not be read: {0}")]
    Repo(#[from] repo::RepoError),
}

/// Asks the Sonarr or Radarr that holds `path` for a new copy; answers what was done.
pub async fn new_copy(db: &DatabaseConnection, path: &Path) -> Result<String, NewCopyError> {
    let text = path_bytes::readable(path.as_os_str()).into_owned();
    let sender = Sender::new();
    for (model, _) in repo::connections::list(db).await? {
        if !model.enabled {
            continue;
        }
        let Some(conn) = repo::connections::connection_of(&model) else { continue };
        // The same choice the dashboard shows as the file's `newCopyFrom`.
        if !regrab::may_hold(&conn, &text) {
            continue;
        }
        match ask(&sender, &conn, &text).await {
            Ok(done) => return Ok(done),
            Err(Step::NotHeld) => continue,
            Err(Step::Before(why)) => return Err(NewCopyError::Before { kind: conn.kind, path: text, why }),
            Err(Step::After(why)) => return Err(NewCopyError::SearchNotStarted { kind: conn.kind, path: text, why }),
        }
    }
    Err(NewCopyError::NotHeld(text))
}

/// How far one connection got.
enum Step {
    NotHeld,
    Before(String),
    After(String),
}

fn before(e: RegrabError) -> Step {
    match e {
        RegrabError::NotHeld(_) | RegrabError::NotAnArr(_) => Step::NotHeld,
        RegrabError::Answer(why) => Step::Before(why),
    }
}

async fn ask(sender: &Sender, conn: &Connection, path: &str) -> Result<String, Step> {
    let owners = sender.call(regrab::owners(conn).map_err(before)?, LOOKUP_LIMIT).await.map_err(Step::Before)?;
    let owner = regrab::owner_of(conn, path, &owners).map_err(before)?;
    let files = sender.call(regrab::files(conn, owner).map_err(before)?, LOOKUP_LIMIT).await.map_err(Step::Before)?;
    // A file the app has no record of: the series holds it, but nothing can be deleted.
    let file = regrab::file_of(conn, path, &files).map_err(|e| Step::Before(e.to_string()))?;
    let episodes = match regrab::episodes(conn, file) {
        Some(call) => {
            let answer = sender.call(call, LOOKUP_LIMIT).await.map_err(Step::Before)?;
            regrab::episode_ids(&answer).map_err(|e| Step::Before(e.to_string()))?
        }
        None => Vec::new(),
    };
    sender.call(regrab::delete(conn, file).map_err(before)?, ANSWER_LIMIT).await.map_err(Step::Before)?;
    let search = regrab::search(conn, owner, &episodes).map_err(|e| Step::After(e.to_string()))?;
    sender.call(search, ANSWER_LIMIT).await.map_err(Step::After)?;
    tracing::info!(kind = %conn.kind, path, "asked for a new copy of a damaged file");
    Ok(format!("{} deleted its record of the file and searches for a new copy", conn.kind))
}
