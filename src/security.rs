//! Passwords (argon2id), generated secrets, and the JWT signing secret kept in DATA_DIR.

use std::io::Write;
use std::path::Path;

use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use rand::distributions::{Alphanumeric, DistString};

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("could not hash the password: {0}")]
    Hash(String),
    #[error("{path}: {source}")]
    SecretFile { path: String, source: std::io::Error },
    #[error("{0}")]
    WeakPassword(String),
}

pub const MIN_PASSWORD_LEN: usize = 8;

pub fn check_password_strength(password: &str) -> Result<(), SecurityError> {
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(SecurityError::WeakPassword(format!("a password needs at least {MIN_PASSWORD_LEN} characters")));
    }
    Ok(())
}

pub fn hash_password(password: &str) -> Result<String, SecurityError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| SecurityError::Hash(e.to_string()))
}

/// Constant-time check of a password against a stored PHC hash; a malformed hash fails.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
}

/// A random alphanumeric string from the OS's generator.
pub fn generate_secret(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rngs::OsRng, len)
}

/// Reads DATA_DIR/jwt-secret, creating it (mode 0600) with a new random secret the first time.
pub fn load_or_create_jwt_secret(data_dir: &Path) -> Result<String, SecurityError> {
    let path = data_dir.join("jwt-secret");
    let err = |source| SecurityError::SecretFile { path: path.display().to_string(), source };
    match std::fs::read_to_string(&path) {
        Ok(secret) if secret.trim().len() >= 32 => return Ok(secret.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let secret = generate_secret(64);
    let tmp = data_dir.join("jwt-secret.tmp");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp).map_err(err)?;
        file.write_all(secret.as_bytes()).map_err(err)?;
        file.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, &path).map_err(err)?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_verifies_only_the_same_password() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct horsE", &hash));
        assert!(!verify_password("correct horse", "not a hash"));
    }

    #[test]
    fn generated_secrets_differ() {
        let a = generate_secret(24);
        assert_eq!(a.len(), 24);
        assert_ne!(a, generate_secret(24));
    }

    #[test]
    fn jwt_secret_is_created_once_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create_jwt_secret(dir.path()).unwrap();
        let second = load_or_create_jwt_secret(dir.path()).unwrap();
        assert_eq!(first, second);
        let mode = std::fs::metadata(dir.path().join("jwt-secret")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_password_strength("short").is_err());
        assert!(check_password_strength("long enough").is_ok());
    }
}
