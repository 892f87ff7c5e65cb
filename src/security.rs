//! Passwords (argon2id), API tokens (JWT HS256), generated secrets, and the JWT signing
//! secret kept in DATA_DIR.

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

/// A hash of a password nobody knows, made with `Argon2::default()`'s parameters. A login for
/// an unknown user is checked against it, so that it costs as much as a wrong password and
/// the answer time does not tell which usernames exist.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$sr5gJdW2JBD/WOdq+c7IvQ$tk8HTt7PREsguHEjQVap8gEQGg2k5gnYlKs7ivrucN4";

/// Spends the time of one password check and fails (login for a user that does not exist).
pub fn verify_dummy_password(password: &str) -> bool {
    verify_password(password, DUMMY_HASH);
    false
}

/// What an API token says: who (the user's id, and the name for people reading it), issued
/// when, valid until when (Unix seconds), the user's token version when it was issued, and
/// when the session it belongs to began (the login; refreshes keep it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claims {
    pub sub: String,
    /// The user's id: what the token is bound to. A user deleted and made again under the
    /// same name is another id, so the first one's tokens are refused. Tokens issued before
    /// it existed carry none and are refused (`http::auth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<i32>,
    pub iat: i64,
    pub exp: i64,
    /// Tokens issued before versions existed carry none: version 0, every user's first.
    #[serde(default)]
    pub ver: i32,
    /// OpenID Connect's name for the time of the login; absent in older tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_time: Option<i64>,
}

impl Claims {
    /// When the session began: the login, or for an older token its own issue.
    pub fn session_started(&self) -> i64 {
        self.auth_time.unwrap_or(self.iat)
    }
}

/// Whom a token is for: the user, their token version, and the start of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant<'a> {
    pub user_id: i32,
    pub username: &'a str,
    pub version: i32,
    /// Unix seconds of the login that began the session.
    pub session_started: i64,
}

/// Why a token was refused; the message tells the client what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token has expired; log in again (POST /auth/login)")]
    Expired,
    #[error("the token's signature is not valid: it was altered, or signed with another secret")]
    BadSignature,
    #[error("the token is not signed with HS256")]
    WrongAlgorithm,
    #[error("the token is malformed: expected a JWT (header.payload.signature) signed with HS256, with claims sub, iat and exp")]
    Malformed,
    #[error("the session has reached its maximum lifetime (SESSION_MAX_HOURS); log in again (POST /auth/login)")]
    SessionOver,
    #[error("could not sign the token: {0}")]
    Signing(String),
}

/// A signed token for `grant`, valid `ttl_hours` from `now` but never past `max_hours`
/// after the session began (`domain::session`), and its expiry.
pub fn issue_token(
    secret: &str,
    grant: &Grant<'_>,
    ttl_hours: u32,
    max_hours: u32,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(String, chrono::DateTime<chrono::Utc>), TokenError> {
    // Whole seconds, so the expiry reported equals the `exp` claim exactly.
    let iat = now.timestamp();
    let exp = crate::domain::session::token_expiry(iat, grant.session_started, ttl_hours, max_hours)
        .ok_or(TokenError::SessionOver)?;
    let expires_at =
        chrono::DateTime::from_timestamp(exp, 0).ok_or(TokenError::Signing("expiry out of range".into()))?;
    let claims = Claims {
        sub: grant.username.to_string(),
        uid: Some(grant.user_id),
        iat,
        exp,
        ver: grant.version,
        auth_time: Some(grant.session_started),
    };
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .map_err(|e| TokenError::Signing(e.to_string()))?;
    Ok((token, expires_at))
}

/// The claims of a token signed with `secret` by HS256 and not expired. The algorithm is
/// pinned: a token naming another one (`none` included) is refused whatever it carries.
pub fn verify_token(secret: &str, token: &str) -> Result<Claims, TokenError> {
    use jsonwebtoken::errors::ErrorKind;
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    // The same node issues and checks tokens: no clock skew to forgive.
    validation.leeway = 0;
    // `Claims` makes sub, iat and exp required as well: a token without them is malformed.
    validation.set_required_spec_claims(&["exp", "sub"]);
    jsonwebtoken::decode::<Claims>(token, &jsonwebtoken::DecodingKey::from_secret(secret.as_bytes()), &validation)
        .map(|data| data.claims)
        .map_err(|e| match e.into_kind() {
            ErrorKind::ExpiredSignature => TokenError::Expired,
            ErrorKind::InvalidSignature => TokenError::BadSignature,
            ErrorKind::InvalidAlgorithm => TokenError::WrongAlgorithm,
            _ => TokenError::Malformed,
        })
}

/// The stored form of a linked node's credential: SHA-256, hex. The credential is 48 random
/// alphanumeric characters (about 285 bits), so unlike a password nothing can be guessed from
/// its hash and a slow hash would only cost every link its time.
pub fn hash_secret(secret: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares without stopping at the first difference, so timing says nothing of the secret.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
    fn secrets_hash_to_sha256_and_compare_exactly() {
        // FIPS 180-2's test vector for "abc".
        assert_eq!(hash_secret("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }

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
    fn the_dummy_hash_costs_what_a_real_one_costs() {
        // Same algorithm and parameters as new hashes, so checking it takes as long.
        let dummy = PasswordHash::new(DUMMY_HASH).unwrap();
        let real = hash_password("whatever it is").unwrap();
        let real = PasswordHash::new(&real).unwrap();
        assert_eq!(dummy.algorithm, real.algorithm);
        assert_eq!(dummy.version, real.version);
        assert_eq!(dummy.params, real.params);
        assert!(!verify_dummy_password("anything"));
    }

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }

    #[test]
    fn a_token_verifies_with_its_secret_until_it_expires() {
        let secret = "0123456789abcdef0123456789abcdef";
        let at = now();
        let grant = Grant { user_id: 7, username: "ada", version: 3, session_started: at.timestamp() - 60 };
        let (token, expires_at) = issue_token(secret, &grant, 12, 720, at).unwrap();
        assert_eq!(expires_at.timestamp(), at.timestamp() + 12 * 3600);
        let claims = verify_token(secret, &token).unwrap();
        let expected = Claims {
            sub: "ada".into(),
            uid: Some(7),
            iat: at.timestamp(),
            exp: expires_at.timestamp(),
            ver: 3,
            auth_time: Some(at.timestamp() - 60),
        };
        assert_eq!(claims, expected);

        assert_eq!(verify_token("another secret, just as long", &token), Err(TokenError::BadSignature));
        let earlier = at - chrono::Duration::hours(2);
        let old_grant = Grant { session_started: earlier.timestamp(), ..grant };
        let (old, _) = issue_token(secret, &old_grant, 1, 720, earlier).unwrap();
        assert_eq!(verify_token(secret, &old), Err(TokenError::Expired));
        // A session past its maximum gets no new token.
        let long_ago = Grant { session_started: at.timestamp() - 721 * 3600, ..grant };
        assert_eq!(issue_token(secret, &long_ago, 12, 720, at), Err(TokenError::SessionOver));
    }

    #[test]
    fn tokens_with_another_algorithm_or_shape_are_refused() {
        #[derive(serde::Serialize)]
        struct NoSubject {
            iat: i64,
            exp: i64,
        }
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let secret = "0123456789abcdef0123456789abcdef";
        let exp = now().timestamp() + 3600;
        let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"ada","iat":1,"exp":{exp}}}"#));
        let none = format!("{}.{payload}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#));
        assert_eq!(verify_token(secret, &none), Err(TokenError::Malformed));

        let hs512 = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
            &Claims { sub: "ada".into(), uid: None, iat: 1, exp, ver: 0, auth_time: None },
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap();
        assert_eq!(verify_token(secret, &hs512), Err(TokenError::WrongAlgorithm));

        let no_sub = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &NoSubject { iat: 1, exp },
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap();
        assert_eq!(verify_token(secret, &no_sub), Err(TokenError::Malformed));
        for garbage in ["", "garbage", "a.b.c", "...."] {
            assert_eq!(verify_token(secret, garbage), Err(TokenError::Malformed), "{garbage:?}");
        }
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_password_strength("short").is_err());
        assert!(check_password_strength("long enough").is_ok());
    }
}
