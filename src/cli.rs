//! The administrative subcommands: migrate, user management, version.

use crate::config::{CommonArgs, UserCommand};
use crate::repo;
use crate::security;
use crate::serve::{open_database, ServeError};

pub async fn migrate(common: &CommonArgs) -> Result<(), ServeError> {
    let db = open_database(common).await?;
    println!("database migrated ({})", repo::backend_name(&db));
    db.close().await.map_err(repo::RepoError::from)?;
    Ok(())
}

pub async fn user(common: &CommonArgs, command: UserCommand) -> Result<(), ServeError> {
    let db = open_database(common).await?;
    let (username, password, create) = match command {
        UserCommand::Create { username, password } => (username, password, true),
        UserCommand::ResetPassword { username, password } => (username, password, false),
    };
    let weak = |e: security::SecurityError| crate::config::ConfigError {
        variable: "CONDENSE_PASSWORD",
        message: e.to_string(),
    };
    let (password, generated) = match password {
        Some(p) => {
            security::check_password_strength(&p).map_err(weak)?;
            (p, false)
        }
        None => (security::generate_secret(20), true),
    };
    let hash = security::hash_password(&password)?;
    if create {
        repo::users::create(&db, &username, &hash).await?;
        println!("created user {username:?}");
    } else {
        repo::users::set_password_hash(&db, &username, &hash).await?;
        println!("password of {username:?} changed");
    }
    if generated {
        println!("password: {password}");
    }
    db.close().await.map_err(repo::RepoError::from)?;
    Ok(())
}

pub fn version() {
    println!("condense {}", env!("CARGO_PKG_VERSION"));
    println!("FFmpeg {}", crate::media::ffmpeg_release());
    for lib in crate::media::ffmpeg_versions() {
        println!("  {lib}");
    }
}

/// `condense probe FILE`: the probe as JSON on stdout; a clear error and exit 1 otherwise.
pub fn probe(file: &std::path::Path) -> std::process::ExitCode {
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    match crate::media::probe::probe(file) {
        Ok(info) => match serde_json::to_string_pretty(&info) {
            Ok(text) => {
                use std::io::Write;
                // A closed pipe (`| head`) is not an error worth a panic.
                let _ = writeln!(std::io::stdout(), "{text}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("condense: {e}");
                std::process::ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("condense: {} ({})", e.message, e.code.as_str());
            std::process::ExitCode::FAILURE
        }
    }
}
