//! The administrative subcommands: migrate, user management, version, the OpenAPI document.

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

/// `condense version` (run by `condense-media`): this release and the FFmpeg it links.
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
        Ok(info) => print_json(&info),
        Err(e) => {
            eprintln!("condense: {} ({})", e.message, e.code.as_str());
            std::process::ExitCode::FAILURE
        }
    }
}

/// `condense vmaf REFERENCE DISTORTED`: the score as JSON on stdout; a clear error and exit 1
/// otherwise. libvmaf gets every core this process may use.
pub fn vmaf(reference: &std::path::Path, distorted: &std::path::Path) -> std::process::ExitCode {
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    let threads = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1));
    match crate::media::vmaf::compare(reference, distorted, threads) {
        Ok(score) => print_json(&score),
        Err(e) => {
            eprintln!("condense: {} ({})", e.message, e.code.as_str());
            std::process::ExitCode::FAILURE
        }
    }
}

/// `condense crf-search FILE ...`: the search's result as JSON on stdout (with the seconds it
/// took); a clear error and exit 1 otherwise.
pub fn crf_search(command: &crate::config::Command) -> std::process::ExitCode {
    let crate::config::Command::CrfSearch { file, encoder, preset, target, start, max_size_percent, fixed } = command
    else {
        return std::process::ExitCode::FAILURE;
    };
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    let fail = |message: String| {
        eprintln!("condense: {message}");
        std::process::ExitCode::FAILURE
    };
    let Ok(encoder) = encoder.parse::<crate::domain::encoding::Encoder>() else {
        return fail(format!("unknown encoder {encoder:?}"));
    };
    if !(crate::domain::quality::TARGET_VMAF_MIN..=crate::domain::quality::TARGET_VMAF_MAX).contains(target) {
        return fail(format!("--target must be 80 to 99, not {target}"));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1));
    let sessions = crate::domain::segments::sessions(crate::domain::segments::Parallelism::Auto, cores, 1, false);
    let asked = crate::media::plan::QualitySearch { target_vmaf: *target, max_size_percent: *max_size_percent };
    let started = std::time::Instant::now();
    let request = crate::media::search::FileSearch {
        encoder,
        preset: preset.clone(),
        start: *start,
        fixed: *fixed,
        asked,
        sessions,
    };
    match crate::media::search::search_file(file, request, &std::env::temp_dir()) {
        Ok(result) => {
            let seconds = started.elapsed().as_secs_f64();
            print_json(&serde_json::json!({ "result": result, "tooLarge": result.too_large(), "seconds": seconds }))
        }
        Err(e) => fail(format!("{} ({})", e.message, e.code.as_str())),
    }
}

/// `value` as JSON on stdout.
fn print_json(value: &impl serde::Serialize) -> std::process::ExitCode {
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
    match crate::http::api().to_pretty_json() {
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
