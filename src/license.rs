//! Licence keys: Ed25519-signed tokens checked offline.
//!
//! Format: `CONDENSE1.<payload>.<signature>`, both parts base64url without padding. The
//! payload is JSON `{"tier":"PRO","licensee":"…","issuedAt":"…","expiresAt":"…"|null}` with
//! RFC 3339 times; the signature covers the text `CONDENSE1.<payload>`, version included.
//! Private and public keys are the 32 raw Ed25519 key bytes, base64url without padding.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::domain::license::{effective_tier, Tier};

/// The first part of every key; a new format gets a new version.
pub const KEY_PREFIX: &str = "CONDENSE1";

/// The public key condense checks licence keys against unless a setting overrides it.
pub const BUILTIN_PUBLIC_KEY: &str = "ERJ9VbhQeG9YTkHVtxlGF8cmXpOHrkMjLxgTWSLRkxw";

/// What a licence key grants.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LicensePayload {
    pub tier: Tier,
    pub licensee: String,
    pub issued_at: DateTime<Utc>,
    /// `None`: never expires.
    pub expires_at: Option<DateTime<Utc>>,
}

impl LicensePayload {
    /// The tier in force at `now`: FREE once the key has expired.
    pub fn effective_tier(&self, now: DateTime<Utc>) -> Tier {
        effective_tier(self.tier, self.expires_at, now)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LicenseError {
    #[error("licence key is malformed: {0}")]
    Malformed(&'static str),
    #[error("licence key is not a {KEY_PREFIX} key; it may be for another version of condense")]
    UnknownVersion,
    #[error("licence key signature is not valid: the key was altered, or issued for another public key")]
    BadSignature,
    #[error("licence key content is not valid: {0}")]
    InvalidPayload(String),
    #[error("licence public key is invalid: {0}")]
    InvalidPublicKey(&'static str),
    #[error("licence private key is invalid: {0}")]
    InvalidPrivateKey(&'static str),
}

impl LicenseError {
    /// A stable machine-readable code for error responses.
    pub fn code(&self) -> &'static str {
        match self {
            LicenseError::Malformed(_) => "license_malformed",
            LicenseError::UnknownVersion => "license_unknown_version",
            LicenseError::BadSignature => "license_bad_signature",
            LicenseError::InvalidPayload(_) => "license_invalid_payload",
            LicenseError::InvalidPublicKey(_) => "license_invalid_public_key",
            LicenseError::InvalidPrivateKey(_) => "license_invalid_private_key",
        }
    }
}

/// A fresh key pair: (private key, public key), both base64url. Keep the private key secret;
/// whoever holds it can issue licences.
pub fn generate_keypair() -> (String, String) {
    let signing_key = SigningKey::generate(&mut rand::rngs::OsRng);
    (URL_SAFE_NO_PAD.encode(signing_key.to_bytes()), URL_SAFE_NO_PAD.encode(signing_key.verifying_key().to_bytes()))
}

/// A signed licence key carrying `payload`.
pub fn issue(private_key_b64: &str, payload: &LicensePayload) -> Result<String, LicenseError> {
    let seed = decode_32_bytes(private_key_b64).map_err(LicenseError::InvalidPrivateKey)?;
    let signing_key = SigningKey::from_bytes(&seed);
    let json = serde_json::to_vec(payload).map_err(|error| LicenseError::InvalidPayload(error.to_string()))?;
    let signed_text = format!("{KEY_PREFIX}.{}", URL_SAFE_NO_PAD.encode(json));
    let signature = signing_key.sign(signed_text.as_bytes());
    Ok(format!("{signed_text}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes())))
}

/// The payload of `key` if `public_key_b64`'s owner signed it. Does not look at expiry: an
/// expired key is genuine, and `LicensePayload::effective_tier` decides what it still grants.
pub fn verify(key: &str, public_key_b64: &str) -> Result<LicensePayload, LicenseError> {
    let public_key = decode_32_bytes(public_key_b64).map_err(LicenseError::InvalidPublicKey)?;
    let verifying_key = VerifyingKey::from_bytes(&public_key)
        .map_err(|_| LicenseError::InvalidPublicKey("not a valid Ed25519 public key"))?;

    // Keys are pasted by hand; stray whitespace around them is not an error.
    let key = key.trim();
    let parts: Vec<&str> = key.split('.').collect();
    let [prefix, payload_b64, signature_b64] = parts[..] else {
        return Err(LicenseError::Malformed("expected three parts separated by dots"));
    };
    if prefix != KEY_PREFIX {
        return Err(LicenseError::UnknownVersion);
    }
    let payload_json =
        URL_SAFE_NO_PAD.decode(payload_b64).map_err(|_| LicenseError::Malformed("the content is not base64url"))?;
    let signature_bytes: [u8; 64] = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .map_err(|_| LicenseError::Malformed("the signature is not base64url"))?
        .try_into()
        .map_err(|_| LicenseError::Malformed("the signature is not 64 bytes long"))?;

    let signed_text = &key[..prefix.len() + 1 + payload_b64.len()];
    verifying_key
        .verify_strict(signed_text.as_bytes(), &Signature::from_bytes(&signature_bytes))
        .map_err(|_| LicenseError::BadSignature)?;

    serde_json::from_slice(&payload_json).map_err(|error| LicenseError::InvalidPayload(error.to_string()))
}

/// Checks that `public_key_b64` is a usable Ed25519 public key (for settings).
pub fn check_public_key(public_key_b64: &str) -> Result<(), LicenseError> {
    let bytes = decode_32_bytes(public_key_b64).map_err(LicenseError::InvalidPublicKey)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| LicenseError::InvalidPublicKey("not a valid Ed25519 public key"))?;
    Ok(())
}

fn decode_32_bytes(key_b64: &str) -> Result<[u8; 32], &'static str> {
    URL_SAFE_NO_PAD.decode(key_b64.trim()).map_err(|_| "not base64url")?.try_into().map_err(|_| "not 32 bytes long")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn payload(tier: Tier, expires_at: Option<DateTime<Utc>>) -> LicensePayload {
        LicensePayload {
            tier,
            licensee: "Ada Lovelace <ada@example.org>".to_string(),
            issued_at: Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap(),
            expires_at,
        }
    }

    fn parts(key: &str) -> Vec<String> {
        key.split('.').map(str::to_string).collect()
    }

    #[test]
    fn an_issued_key_verifies_to_its_payload() {
        let (private_key, public_key) = generate_keypair();
        for expires_at in [None, Some(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap())] {
            let payload = payload(Tier::Pro, expires_at);
            let key = issue(&private_key, &payload).unwrap();
            assert!(key.starts_with("CONDENSE1."), "{key}");
            assert_eq!(verify(&key, &public_key), Ok(payload.clone()));
            assert_eq!(verify(&format!("  {key}\n"), &public_key), Ok(payload));
        }
    }

    #[test]
    fn the_payload_is_the_documented_json() {
        let (private_key, _) = generate_keypair();
        let key = issue(&private_key, &payload(Tier::Supporter, None)).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts(&key)[1]).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "tier": "SUPPORTER",
                "licensee": "Ada Lovelace <ada@example.org>",
                "issuedAt": "2025-01-02T03:04:05Z",
                "expiresAt": null,
            })
        );
    }

    #[test]
    fn a_tampered_key_is_refused() {
        let (private_key, public_key) = generate_keypair();
        let key = issue(&private_key, &payload(Tier::Free, None)).unwrap();
        let [prefix, _, signature] = &parts(&key)[..] else { panic!("{key}") };

        let upgraded = serde_json::to_vec(&payload(Tier::Pro, None)).unwrap();
        let tampered = format!("{prefix}.{}.{signature}", URL_SAFE_NO_PAD.encode(upgraded));
        assert_eq!(verify(&tampered, &public_key), Err(LicenseError::BadSignature));

        let mut bytes = URL_SAFE_NO_PAD.decode(signature).unwrap();
        bytes[0] ^= 1;
        let forged = format!("{}.{}", key.rsplit_once('.').unwrap().0, URL_SAFE_NO_PAD.encode(bytes));
        assert_eq!(verify(&forged, &public_key), Err(LicenseError::BadSignature));
    }

    #[test]
    fn a_key_issued_with_another_private_key_is_refused() {
        let (private_key, _) = generate_keypair();
        let (_, other_public_key) = generate_keypair();
        let key = issue(&private_key, &payload(Tier::Pro, None)).unwrap();
        assert_eq!(verify(&key, &other_public_key), Err(LicenseError::BadSignature));
        assert_eq!(verify(&key, BUILTIN_PUBLIC_KEY), Err(LicenseError::BadSignature));
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let (_, public_key) = generate_keypair();
        let a_signature = URL_SAFE_NO_PAD.encode([7u8; 64]);
        let table = [
            (String::new(), LicenseError::Malformed("expected three parts separated by dots")),
            ("garbage".to_string(), LicenseError::Malformed("expected three parts separated by dots")),
            ("CONDENSE1.e30".to_string(), LicenseError::Malformed("expected three parts separated by dots")),
            ("CONDENSE1.e30.a.b".to_string(), LicenseError::Malformed("expected three parts separated by dots")),
            (format!("CONDENSE2.e30.{a_signature}"), LicenseError::UnknownVersion),
            (format!("CONDENSE1.%%%.{a_signature}"), LicenseError::Malformed("the content is not base64url")),
            ("CONDENSE1.e30.***".to_string(), LicenseError::Malformed("the signature is not base64url")),
            ("CONDENSE1.e30.AAAA".to_string(), LicenseError::Malformed("the signature is not 64 bytes long")),
            (format!("CONDENSE1.e30.{a_signature}"), LicenseError::BadSignature),
        ];
        for (key, error) in table {
            assert_eq!(verify(&key, &public_key), Err(error), "{key:?}");
        }
    }

    #[test]
    fn a_signed_but_unreadable_payload_is_refused() {
        let (private_key, public_key) = generate_keypair();
        let seed: [u8; 32] = URL_SAFE_NO_PAD.decode(&private_key).unwrap().try_into().unwrap();
        let signed_text = format!("CONDENSE1.{}", URL_SAFE_NO_PAD.encode(br#"{"tier":"GOLD"}"#));
        let signature = SigningKey::from_bytes(&seed).sign(signed_text.as_bytes());
        let key = format!("{signed_text}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()));
        let error = verify(&key, &public_key).unwrap_err();
        assert!(matches!(error, LicenseError::InvalidPayload(_)), "{error:?}");
        assert_eq!(error.code(), "license_invalid_payload");
    }

    #[test]
    fn bad_keys_are_refused() {
        let (private_key, public_key) = generate_keypair();
        let key = issue(&private_key, &payload(Tier::Pro, None)).unwrap();
        assert_eq!(verify(&key, "not a key"), Err(LicenseError::InvalidPublicKey("not base64url")));
        assert_eq!(verify(&key, "AAAA"), Err(LicenseError::InvalidPublicKey("not 32 bytes long")));
        assert_eq!(
            issue(&public_key[..20], &payload(Tier::Pro, None)),
            Err(LicenseError::InvalidPrivateKey("not 32 bytes long"))
        );
        assert_eq!(
            LicenseError::InvalidPublicKey("not 32 bytes long").to_string(),
            "licence public key is invalid: not 32 bytes long"
        );
    }

    #[test]
    fn an_expired_key_is_genuine_but_grants_free() {
        let (private_key, public_key) = generate_keypair();
        let expiry = Utc.with_ymd_and_hms(2025, 1, 16, 0, 0, 0).unwrap();
        let key = issue(&private_key, &payload(Tier::Pro, Some(expiry))).unwrap();
        let payload = verify(&key, &public_key).unwrap();
        assert_eq!(payload.effective_tier(expiry - Duration::seconds(1)), Tier::Pro);
        assert_eq!(payload.effective_tier(expiry), Tier::Free);
        assert_eq!(payload.effective_tier(expiry + Duration::days(30)), Tier::Free);
    }

    #[test]
    fn the_builtin_public_key_is_a_valid_key() {
        let bytes = decode_32_bytes(BUILTIN_PUBLIC_KEY).unwrap();
        assert!(VerifyingKey::from_bytes(&bytes).is_ok());
        assert_eq!(check_public_key(BUILTIN_PUBLIC_KEY), Ok(()));
        assert_eq!(check_public_key("AAAA"), Err(LicenseError::InvalidPublicKey("not 32 bytes long")));
    }
}
