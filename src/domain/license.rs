//! Licence tiers and their limits. Keys and signatures live in `crate::license`.

use chrono::{DateTime, Utc};

use super::named_enum;

named_enum!(
    Tier, "licence tier" {
        Free => "FREE",
        Supporter => "SUPPORTER",
        Pro => "PRO",
    }
);

impl Tier {
    /// `None`: unlimited.
    pub fn max_nodes(self) -> Option<u32> {
        match self {
            Tier::Free => Some(1),
            Tier::Supporter => Some(3),
            Tier::Pro => None,
        }
    }

    /// `None`: unlimited.
    pub fn max_concurrent_jobs(self) -> Option<u32> {
        match self {
            Tier::Free => Some(1),
            Tier::Supporter => Some(5),
            Tier::Pro => None,
        }
    }
}

/// The tier in force: the claimed one until `expires_at`, FREE from that instant on. Running
/// work is not stopped by the fall; only new work sees the lower limits.
pub fn effective_tier(claimed: Tier, expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Tier {
    match expires_at {
        Some(expiry) if now >= expiry => Tier::Free,
        _ => claimed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};
    use std::str::FromStr;

    #[test]
    fn limits_per_tier() {
        let table = [(Tier::Free, Some(1), Some(1)), (Tier::Supporter, Some(3), Some(5)), (Tier::Pro, None, None)];
        assert_eq!(table.len(), Tier::ALL.len());
        for (tier, nodes, jobs) in table {
            assert_eq!((tier.max_nodes(), tier.max_concurrent_jobs()), (nodes, jobs), "{tier}");
            assert_eq!(Tier::from_str(tier.as_str()), Ok(tier));
        }
    }

    #[test]
    fn an_expired_tier_falls_back_to_free() {
        let now = Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap();
        let second = Duration::seconds(1);
        let table = [
            (Tier::Pro, None, Tier::Pro),
            (Tier::Pro, Some(now + second), Tier::Pro),
            (Tier::Pro, Some(now), Tier::Free),
            (Tier::Supporter, Some(now - second), Tier::Free),
            (Tier::Free, Some(now - second), Tier::Free),
            (Tier::Free, None, Tier::Free),
        ];
        for (claimed, expires_at, effective) in table {
            assert_eq!(effective_tier(claimed, expires_at, now), effective, "{claimed} until {expires_at:?}");
        }
    }
}
