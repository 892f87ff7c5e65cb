//! How long a login lasts: each token lives `TOKEN_TTL_HOURS`, and refreshing cannot carry
//! a session past `SESSION_MAX_HOURS` from the login that started it, so a stolen token that
//! is refreshed for ever still dies.

/// The expiry (Unix seconds) of a token issued at `now` for a session that started at
/// `started`: `ttl_hours` from now, cut at `max_hours` after the start. `None` when the
/// session has already reached its end.
pub fn token_expiry(now: i64, started: i64, ttl_hours: u32, max_hours: u32) -> Option<i64> {
    let by_ttl = now.saturating_add(i64::from(ttl_hours) * 3600);
    let by_session = started.saturating_add(i64::from(max_hours) * 3600);
    let exp = by_ttl.min(by_session);
    (exp > now).then_some(exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3600;

    #[test]
    fn a_token_lives_its_ttl_until_the_session_end_cuts_it() {
        // A fresh login: the TTL.
        assert_eq!(token_expiry(1000, 1000, 12, 720), Some(1000 + 12 * H));
        // A refresh well inside the session: the TTL from now.
        assert_eq!(token_expiry(1000 + 100 * H, 1000, 12, 720), Some(1000 + 112 * H));
        // Near the end: cut at the session's end.
        assert_eq!(token_expiry(1000 + 715 * H, 1000, 12, 720), Some(1000 + 720 * H));
        // At and past the end: no token.
        assert_eq!(token_expiry(1000 + 720 * H, 1000, 12, 720), None);
        assert_eq!(token_expiry(1000 + 9000 * H, 1000, 12, 720), None);
        // A maximum shorter than the TTL wins from the login on.
        assert_eq!(token_expiry(1000, 1000, 12, 1), Some(1000 + H));
    }
}
