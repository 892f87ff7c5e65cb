//! The administrative subcommands: migrate, user management, licence keys, the OpenAPI document.

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
        repo::users::create(&db, &username, &hash, crate::domain::access::UserRole::Admin).await?;
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

/// Runs `condense-media` (beside this binary) in this process's place, with the same
/// arguments: what needs FFmpeg is done there.
pub fn hand_to_media_binary() -> std::process::ExitCode {
    use std::os::unix::process::CommandExt;
    let binary = match crate::media::worker::binary() {
        Ok(binary) => binary,
        Err(e) => {
            eprintln!("condense: this executable's path is unknown: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let e = std::process::Command::new(&binary).args(std::env::args_os().skip(1)).exec();
    eprintln!("condense: cannot run {} (it is installed beside condense): {e}", binary.display());
    std::process::ExitCode::FAILURE
}

/// `value` as JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> std::process::ExitCode {
    match serde_json::to_string_pretty(value) {
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
    }
}

/// `condense openapi`: the API's OpenAPI document on stdout, without starting anything.
pub fn openapi() -> std::process::ExitCode {
    match serde_json::to_string_pretty(crate::http::api()) {
        Ok(text) => {
            use std::io::Write;
            match writeln!(std::io::stdout(), "{text}") {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("condense: {e}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("condense: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `condense license keygen|issue`.
pub fn license(command: crate::config::LicenseCommand) -> Result<(), ServeError> {
    use crate::config::LicenseCommand;
    match command {
        LicenseCommand::Keygen => {
            let (private, public) = crate::license::generate_keypair();
            println!("private: {private}");
            println!("public:  {public}");
            println!("Keep the private key secret; give the public key to nodes as LICENSE_PUBLIC_KEY.");
        }
        LicenseCommand::Issue { private_key, tier, licensee, expires } => {
            let invalid = |variable: &'static str, message: String| crate::config::ConfigError { variable, message };
            let tier = tier.parse().map_err(|e: crate::domain::UnknownName| invalid("--tier", e.to_string()))?;
            let payload =
                crate::license::LicensePayload { tier, licensee, issued_at: chrono::Utc::now(), expires_at: expires };
            let key = crate::license::issue(&private_key, &payload)
                .map_err(|e| invalid("CONDENSE_LICENSE_PRIVATE_KEY", e.to_string()))?;
            println!("{key}");
        }
    }
    Ok(())
}
