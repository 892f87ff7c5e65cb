//! Login attempts per client IP and per username, in memory: after `MAX_FAILURES` failed
//! attempts within `WINDOW`, further attempts are refused until the window ends, so a
//! password cannot be guessed at speed. A successful login clears both counters.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const MAX_FAILURES: u32 = 5;
pub const WINDOW: Duration = Duration::from_secs(5 * 60);
/// Bounds the memory an attacker can make us spend by trying many names or addresses.
pub const MAX_ENTRIES: usize = 10_000;
/// Longer usernames cannot exist; a prefix is enough to count attempts on them.
const MAX_KEY_CHARS: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Ip(Option<IpAddr>),
    User(String),
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

#[derive(Debug, Default)]
pub struct LoginLimiter {
    entries: Mutex<HashMap<Key, Window>>,
}

impl LoginLimiter {
    /// Counts an attempt for `ip` and `username`, or refuses it with the time left until
    /// the lock ends. The attempt counts as a failure until `succeeded` is called: parallel
    /// attempts cannot slip past the limit while their passwords are being checked.
    pub fn begin(&self, ip: Option<IpAddr>, username: &str, now: Instant) -> Result<(), Duration> {
        let keys = [Key::Ip(ip), user_key(username)];
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut locked_for = Duration::ZERO;
        for key in &keys {
            if let Some(window) = entries.get(key) {
                let elapsed = now.saturating_duration_since(window.started);
                if elapsed < WINDOW && window.failures >= MAX_FAILURES {
                    locked_for = locked_for.max(WINDOW - elapsed);
                }
            }
        }
        if !locked_for.is_zero() {
            return Err(locked_for);
        }
        for key in keys {
            if !entries.contains_key(&key) && entries.len() >= MAX_ENTRIES {
                make_room(&mut entries, now);
            }
            let window = entries.entry(key).or_insert(Window { started: now, failures: 0 });
            if now.saturating_duration_since(window.started) >= WINDOW {
                *window = Window { started: now, failures: 0 };
            }
            window.failures += 1;
        }
        Ok(())
    }

    /// The password was right: forget the attempts of this address and this user.
    pub fn succeeded(&self, ip: Option<IpAddr>, username: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.remove(&Key::Ip(ip));
        entries.remove(&user_key(username));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn user_key(username: &str) -> Key {
    Key::User(username.chars().take(MAX_KEY_CHARS).collect())
}

/// Drops finished windows; if none has finished, the oldest one (its lock ends first).
fn make_room(entries: &mut HashMap<Key, Window>, now: Instant) {
    entries.retain(|_, window| now.saturating_duration_since(window.started) < WINDOW);
    if entries.len() >= MAX_ENTRIES {
        if let Some(oldest) = entries.iter().min_by_key(|(_, window)| window.started).map(|(key, _)| key.clone()) {
            entries.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn five_failures_lock_the_rest_of_the_window() {
        let limiter = LoginLimiter::default();
        let start = Instant::now();
        for _ in 0..MAX_FAILURES {
            limiter.begin(ip(1), "ada", start).unwrap();
        }
        let later = start + Duration::from_secs(60);
        assert_eq!(limiter.begin(ip(1), "ada", later), Err(WINDOW - Duration::from_secs(60)));
        // The username is locked from any address, and the address for any username.
        assert!(limiter.begin(ip(2), "ada", later).is_err());
        assert!(limiter.begin(ip(1), "bob", later).is_err());
        assert!(limiter.begin(ip(3), "bob", later).is_ok());
        // A new window starts once the old one is over.
        assert!(limiter.begin(ip(1), "ada", start + WINDOW).is_ok());
    }

    #[test]
    fn a_success_clears_the_counters() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for _ in 0..MAX_FAILURES - 1 {
            limiter.begin(ip(1), "ada", now).unwrap();
        }
        limiter.begin(ip(1), "ada", now).unwrap();
        limiter.succeeded(ip(1), "ada");
        for _ in 0..MAX_FAILURES {
            limiter.begin(ip(1), "ada", now).unwrap();
        }
        assert!(limiter.begin(ip(1), "ada", now).is_err());
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
                Key::User(name) => name.len(),
                Key::Ip(_) => 0,
            })
            .max()
            .unwrap();
        assert!(longest <= MAX_KEY_CHARS);
    }
}
