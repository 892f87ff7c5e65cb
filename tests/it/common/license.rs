//! Licence keys for tests: signed with a fresh key pair (for a node started with its public
//! half), or with the private half a `TestServer` holds.

use chrono::{DateTime, Utc};
use condense::domain::license::Tier;
use condense::license::LicensePayload;

/// The licensee every test key names.
pub const LICENSEE: &str = "Ada Lovelace";

/// A key of `tier` signed with `private_key`, expiring at `expires_at` (never when None).
pub fn key(private_key: &str, tier: Tier, expires_at: Option<DateTime<Utc>>) -> String {
    let payload = LicensePayload { tier, licensee: LICENSEE.into(), issued_at: Utc::now(), expires_at };
    condense::license::issue(private_key, &payload).unwrap()
}

/// A key of `tier` that never expires, signed with a fresh key pair: the key and the public
/// key that verifies it (`LICENSE_KEY` and `LICENSE_PUBLIC_KEY` of a node).
pub fn key_of(tier: Tier) -> (String, String) {
    let (private, public) = condense::license::generate_keypair();
    (key(&private, tier, None), public)
}

/// A PRO key and its public key: no limit on nodes or concurrent jobs.
pub fn pro_key() -> (String, String) {
    key_of(Tier::Pro)
}
