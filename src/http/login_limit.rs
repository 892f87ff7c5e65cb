//! Failed logins, in memory, per (client network, username) and per client network (IPv4:
//! the address; IPv6: its /64, `domain::net::client_network`, so a client cannot rotate
//! through the addresses of its own allocation): each failure past a few free ones doubles
//! the wait before the next attempt (1 s, 2 s, 4 s…, at most `MAX_WAIT`), so a password
//! cannot be guessed at speed. Per account, failures from every network together slow
//! down (`account_delay`, a delay, never a refusal) the attempts of clients that have
//! failed themselves: a client that has not failed logs in at once whatever is aimed at its
//! account, so nobody can keep an account locked out. The client address is the TCP peer,
//! or what a trusted proxy says it forwarded for (`client_address`, `TRUSTED_PROXIES`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures of one username from one address before attempts slow down.
pub const FREE_FAILURES: u32 = 3;
/// Failures from one address, whatever the usernames, before its attempts slow down: a
/// client trying many usernames (password spraying) is slowed as well.
pub const FREE_CLIENT_FAILURES: u32 = 20;
/// The wait after the first failure past the free ones; each further failure doubles it.
pub const FIRST_WAIT: Duration = Duration::from_secs(1);
pub const MAX_WAIT: Duration = Duration::from_secs(15 * 60);
/// A record whose last failure is this old is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(60 * 60);
/// Bounds the memory an attacker can make us spend by trying many names or addresses.
pub const MAX_ENTRIES: usize = 10_000;
/// Longer usernames cannot exist; a prefix is enough to count attempts on them.
const MAX_KEY_CHARS: usize = 128;

/// Failures on one account, from every network, before its attempts from clients that
/// have failed are delayed.
pub const FREE_ACCOUNT_FAILURES: u32 = 10;
/// The first such delay; each further failure doubles it, up to `MAX_ACCOUNT_DELAY`.
pub const FIRST_ACCOUNT_DELAY: Duration = Duration::from_millis(100);
pub const MAX_ACCOUNT_DELAY: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Pair(Option<IpAddr>, String),
    Client(Option<IpAddr>),
    Account(String),
}

impl Key {
    fn free(&self) -> u32 {
        match self {
            Key::Pair(..) => FREE_FAILURES,
            Key::Client(_) => FREE_CLIENT_FAILURES,
            Key::Account(_) => FREE_ACCOUNT_FAILURES,
        }
    }
}

/// The delay before checking a password for an account with `failures` recent failures,
/// asked by a client that has failed itself: none up to `FREE_ACCOUNT_FAILURES`, then
/// `FIRST_ACCOUNT_DELAY` doubled for each further one, at most `MAX_ACCOUNT_DELAY`.
pub fn account_delay(failures: u32) -> Duration {
    match failures.checked_sub(FREE_ACCOUNT_FAILURES) {
        None => Duration::ZERO,
        Some(excess) => {
            let factor = 1u32.checked_shl(excess).unwrap_or(u32::MAX);
            FIRST_ACCOUNT_DELAY.saturating_mul(factor).min(MAX_ACCOUNT_DELAY)
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last: Instant,
}

/// The wait after `failures` failures of which `free` cost nothing: zero until then, then
/// `FIRST_WAIT` doubled for each further one, at most `MAX_WAIT`.
pub fn wait_after(failures: u32, free: u32) -> Duration {
    match failures.checked_sub(free) {
        None => Duration::ZERO,
        Some(excess) => {
            let factor = 1u32.checked_shl(excess).unwrap_or(u32::MAX);
            FIRST_WAIT.saturating_mul(factor).min(MAX_WAIT)
        }
    }
}

#[derive(Debug, Default)]
pub struct LoginLimiter {
    entries: Mutex<HashMap<Key, Record>>,
}

impl LoginLimiter {
    /// Counts an attempt from `client` for `username` and answers how long to delay it
    /// (`account_delay`, for a client that has failed before), or refuses it with the time
    /// left until the next attempt may be made. The attempt counts as a failure until
    /// `succeeded` is called: parallel attempts cannot slip past the limit while their
    /// passwords are being checked.
    pub fn begin(&self, client: Option<IpAddr>, username: &str, now: Instant) -> Result<Duration, Duration> {
        let keys = [pair_key(client, username), client_key(client), account_key(username)];
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let recent = |entries: &HashMap<Key, Record>, key: &Key| {
            entries
                .get(key)
                .filter(|record| now.saturating_duration_since(record.last) < FORGET_AFTER)
                .map_or(0, |record| record.failures)
        };
        let mut wait = Duration::ZERO;
        // The account's own count never refuses: it only delays, below.
        for key in &keys[..2] {
            if let Some(record) = entries.get(key) {
                let since = now.saturating_duration_since(record.last);
                if since < FORGET_AFTER {
                    wait = wait.max(wait_after(record.failures, key.free()).saturating_sub(since));
                }
            }
        }
        if !wait.is_zero() {
            return Err(wait);
        }
        let has_failed = recent(&entries, &keys[1]) > 0;
        let delay = if has_failed { account_delay(recent(&entries, &keys[2])) } else { Duration::ZERO };
        for key in keys {
            if !entries.contains_key(&key) && entries.len() >= MAX_ENTRIES {
                make_room(&mut entries, now);
            }
            let record = entries.entry(key).or_insert(Record { failures: 0, last: now });
            if now.saturating_duration_since(record.last) >= FORGET_AFTER {
                record.failures = 0;
            }
            record.failures = record.failures.saturating_add(1);
            record.last = now;
        }
        Ok(delay)
    }

    /// The password was wrong, and the answer is going out now: the wait counts from here,
    /// not from when the check began, so a slow password check does not shorten it.
    pub fn failed(&self, client: Option<IpAddr>, username: &str, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for key in [pair_key(client, username), client_key(client), account_key(username)] {
            if let Some(record) = entries.get_mut(&key) {
                record.last = record.last.max(now);
            }
        }
    }

    /// The password was right: forget this user's failures from this client, and take back
    /// the attempt from the client's count (its other failures stay: logging in to one's
    /// own account must not reset a spraying client).
    pub fn succeeded(&self, client: Option<IpAddr>, username: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.remove(&pair_key(client, username));
        for key in [client_key(client), account_key(username)] {
            if let Some(record) = entries.get_mut(&key) {
                record.failures = record.failures.saturating_sub(1);
                if record.failures == 0 {
                    entries.remove(&key);
                }
            }
        }
    }

    /// The attempt was not made after all (no password check was free): it no longer
    /// counts, and nothing else is forgotten.
    pub fn withdraw(&self, client: Option<IpAddr>, username: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for key in [pair_key(client, username), client_key(client), account_key(username)] {
            if let Some(record) = entries.get_mut(&key) {
                record.failures = record.failures.saturating_sub(1);
                if record.failures == 0 {
                    entries.remove(&key);
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn pair_key(client: Option<IpAddr>, username: &str) -> Key {
    Key::Pair(client.map(client_network), username.chars().take(MAX_KEY_CHARS).collect())
}

fn client_key(client: Option<IpAddr>) -> Key {
    Key::Client(client.map(client_network))
}

fn account_key(username: &str) -> Key {
    Key::Account(username.chars().take(MAX_KEY_CHARS).collect())
}

/// Drops forgotten records; if none is, the one whose last failure is oldest.
fn make_room(entries: &mut HashMap<Key, Record>, now: Instant) {
    entries.retain(|_, record| now.saturating_duration_since(record.last) < FORGET_AFTER);
    if entries.len() >= MAX_ENTRIES {
        if let Some(oldest) = entries.iter().min_by_key(|(_, record)| record.last).map(|(key, _)| key.clone()) {
            entries.remove(&oldest);
        }
    }
}

use crate::domain::net::client_network;
pub use crate::domain::net::IpNet;

/// The client a request comes from: the TCP peer, unless the peer is a trusted proxy; then
/// the `X-Forwarded-For` chain is read from its right end (the hop the trusted proxy saw),
/// past every trusted proxy, to the first address that is not one. Anything left of that
/// is the client's to forge, and is never read.
pub fn client_address(peer: Option<IpAddr>, forwarded_for: &[&str], trusted: &[IpNet]) -> Option<IpAddr> {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut client = peer.map(|ip| ip.to_canonical());
    let mut hop = client?;
    if !is_trusted(hop) {
        return client;
    }
    let chain = forwarded_for.iter().flat_map(|value| value.split(',')).collect::<Vec<_>>();
    for entry in chain.iter().rev() {
        let Ok(ip) = entry.trim().parse::<IpAddr>() else { break };
        hop = ip.to_canonical();
        client = Some(hop);
        if !is_trusted(hop) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn the_wait_doubles_past_the_free_failures_up_to_the_maximum() {
        assert_eq!(wait_after(0, 3), Duration::ZERO);
        assert_eq!(wait_after(2, 3), Duration::ZERO);
        assert_eq!(wait_after(3, 3), Duration::from_secs(1));
        assert_eq!(wait_after(4, 3), Duration::from_secs(2));
        assert_eq!(wait_after(8, 3), Duration::from_secs(32));
        assert_eq!(wait_after(20, 3), MAX_WAIT);
        assert_eq!(wait_after(u32::MAX, 3), MAX_WAIT);
    }

    #[test]
    fn failures_slow_that_client_and_user_only() {
        let limiter = LoginLimiter::default();
        let start = Instant::now();
        for _ in 0..FREE_FAILURES {
            limiter.begin(ip(1), "ada", start).unwrap();
        }
        assert_eq!(limiter.begin(ip(1), "ada", start), Err(Duration::from_secs(1)));
        // The same user from another address, and another user from this one, go on.
        assert!(limiter.begin(ip(2), "ada", start).is_ok());
        assert!(limiter.begin(ip(1), "bob", start).is_ok());
        // After the wait, one more attempt; its failure doubles the next wait.
        let later = start + Duration::from_secs(1);
        assert!(limiter.begin(ip(1), "ada", later).is_ok());
        assert_eq!(limiter.begin(ip(1), "ada", later), Err(Duration::from_secs(2)));
        // Forgotten after an hour without failures.
        assert!(limiter.begin(ip(1), "ada", later + FORGET_AFTER).is_ok());
    }

    #[test]
    fn the_wait_counts_from_the_answer() {
        let limiter = LoginLimiter::default();
        let start = Instant::now();
        for _ in 0..FREE_FAILURES {
            limiter.begin(ip(1), "ada", start).unwrap();
        }
        // The last check took half a second.
        let answered = start + Duration::from_millis(500);
        limiter.failed(ip(1), "ada", answered);
        assert_eq!(limiter.begin(ip(1), "ada", start + Duration::from_secs(1)), Err(Duration::from_millis(500)));
    }

    #[test]
    fn a_client_trying_many_usernames_is_slowed_too() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for n in 0..FREE_CLIENT_FAILURES {
            limiter.begin(ip(1), &format!("user{n}"), now).unwrap();
        }
        assert!(limiter.begin(ip(1), "another", now).is_err());
        assert!(limiter.begin(ip(2), "another", now).is_ok());
    }

    #[test]
    fn a_success_clears_the_pair_and_takes_back_one_client_attempt() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for _ in 0..FREE_FAILURES - 1 {
            limiter.begin(ip(1), "ada", now).unwrap();
        }
        limiter.begin(ip(1), "ada", now).unwrap();
        limiter.succeeded(ip(1), "ada");
        for _ in 0..FREE_FAILURES {
            limiter.begin(ip(1), "ada", now).unwrap();
        }
        assert!(limiter.begin(ip(1), "ada", now).is_err());
        let entries = limiter.entries.lock().unwrap();
        assert_eq!(entries.get(&Key::Client(ip(1))).map(|r| r.failures), Some(2 * FREE_FAILURES - 1));
        assert_eq!(entries.get(&Key::Account("ada".into())).map(|r| r.failures), Some(2 * FREE_FAILURES - 1));
    }

    #[test]
    fn memory_stays_bounded() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for n in 0..MAX_ENTRIES as u32 + 50 {
            let _ = limiter.begin(Some(IpAddr::V4(Ipv4Addr::from(n))), &format!("user{n}"), now);
        }
        assert!(limiter.len() <= MAX_ENTRIES, "{}", limiter.len());
        let _ = limiter.begin(None, &"x".repeat(1 << 16), now);
        let longest = limiter
            .entries
            .lock()
            .unwrap()
            .keys()
            .map(|key| match key {
                Key::Pair(_, name) | Key::Account(name) => name.len(),
                Key::Client(_) => 0,
            })
            .max()
            .unwrap();
        assert!(longest <= MAX_KEY_CHARS);
    }

    #[test]
    fn the_account_delay_doubles_past_its_free_failures_up_to_its_maximum() {
        assert_eq!(account_delay(0), Duration::ZERO);
        assert_eq!(account_delay(FREE_ACCOUNT_FAILURES - 1), Duration::ZERO);
        assert_eq!(account_delay(FREE_ACCOUNT_FAILURES), FIRST_ACCOUNT_DELAY);
        assert_eq!(account_delay(FREE_ACCOUNT_FAILURES + 2), FIRST_ACCOUNT_DELAY * 4);
        assert_eq!(account_delay(FREE_ACCOUNT_FAILURES + 10), MAX_ACCOUNT_DELAY);
        assert_eq!(account_delay(u32::MAX), MAX_ACCOUNT_DELAY);
    }

    #[test]
    fn an_ipv6_64_is_one_client() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for n in 0..FREE_FAILURES {
            let addr = format!("2001:db8:1:2::{:x}", n + 1);
            limiter.begin(Some(addr.parse().unwrap()), "ada", now).unwrap();
        }
        assert!(limiter.begin(Some("2001:db8:1:2:ffff::9".parse().unwrap()), "ada", now).is_err());
        assert!(limiter.begin(Some("2001:db8:1:3::1".parse().unwrap()), "ada", now).is_ok());
    }

    /// Failures aimed at one account from many networks delay the clients that failed, and
    /// never a client that has not: the real user logs in at once.
    #[test]
    fn the_account_slows_only_clients_that_have_failed() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for n in 0..2 * FREE_ACCOUNT_FAILURES {
            let attacker = Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, n as u8)));
            limiter.begin(attacker, "ada", now).unwrap();
            limiter.failed(attacker, "ada", now);
        }
        let attacker = Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)));
        let delay = limiter.begin(attacker, "ada", now).unwrap();
        assert_eq!(delay, MAX_ACCOUNT_DELAY);
        assert_eq!(limiter.begin(ip(9), "ada", now), Ok(Duration::ZERO));
    }

    fn addr(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn forwarded_for_counts_only_behind_a_trusted_proxy() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        // An untrusted peer: its header is ignored.
        assert_eq!(client_address(addr("203.0.113.5"), &["198.51.100.1"], &trusted), addr("203.0.113.5"));
        // A trusted proxy: the last hop it saw.
        assert_eq!(client_address(addr("10.0.0.2"), &["198.51.100.1"], &trusted), addr("198.51.100.1"));
        // Forged entries left of the real client are never read; trusted hops are skipped.
        assert_eq!(
            client_address(addr("10.0.0.2"), &["1.1.1.1, 198.51.100.1, 10.0.0.3"], &trusted),
            addr("198.51.100.1")
        );
        assert_eq!(client_address(addr("10.0.0.2"), &["1.1.1.1", "198.51.100.1"], &trusted), addr("198.51.100.1"));
        // No header, or garbage at its end: the proxy itself.
        assert_eq!(client_address(addr("10.0.0.2"), &[], &trusted), addr("10.0.0.2"));
        assert_eq!(client_address(addr("10.0.0.2"), &["1.1.1.1, junk"], &trusted), addr("10.0.0.2"));
        // Nothing trusted: always the peer.
        assert_eq!(client_address(addr("10.0.0.2"), &["198.51.100.1"], &[]), addr("10.0.0.2"));
    }
}
