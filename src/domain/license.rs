//! Licence tiers and their limits, and the trial of a paid tier. Keys and signatures live in
//! `crate::license`.

use chrono::{DateTime, Duration, Utc};

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

/// How long a trial of a paid tier lasts.
pub const TRIAL_DAYS: i64 = 14;

named_enum!(
    /// The tiers a trial may be of: FREE needs none.
    TrialTier, "trial tier" {
        Supporter => "SUPPORTER",
        Pro => "PRO",
    }
);

impl From<TrialTier> for Tier {
    fn from(tier: TrialTier) -> Tier {
        match tier {
            TrialTier::Supporter => Tier::Supporter,
            TrialTier::Pro => Tier::Pro,
        }
    }
}

/// This installation's trial: started once, kept for good, in force until `ends_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trial {
    pub tier: Tier,
    pub started_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
}

/// Why a trial cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrialRefusal {
    #[error(
        "this installation's trial was used: {tier} from {started_at} to {ends_at}; a licence key is needed to go on"
    )]
    Used { tier: Tier, started_at: DateTime<Utc>, ends_at: DateTime<Utc> },
    #[error(
        "a {0} licence key is in force, and it outranks a trial: the trial was not started and is still available"
    )]
    KeyInForce(Tier),
}

impl TrialRefusal {
    /// A stable machine-readable code for error responses.
    pub fn code(&self) -> &'static str {
        match self {
            TrialRefusal::Used { .. } => "trial_used",
            TrialRefusal::KeyInForce(_) => "license_key_in_force",
        }
    }
}

impl Trial {
    /// The trial of `tier` starting `now`, for an installation whose trial so far is
    /// `previous` and whose key grants `key` (FREE without one, or once expired). One trial
    /// per installation, whether it ended or not; and none while a paid key is in force,
    /// since the key would outrank it and the trial would be spent for nothing.
    pub fn start(
        tier: TrialTier,
        previous: Option<&Trial>,
        key: Tier,
        now: DateTime<Utc>,
    ) -> Result<Trial, TrialRefusal> {
        if let Some(used) = previous {
            return Err(TrialRefusal::Used { tier: used.tier, started_at: used.started_at, ends_at: used.ends_at });
        }
        if key != Tier::Free {
            return Err(TrialRefusal::KeyInForce(key));
        }
        Ok(Trial { tier: tier.into(), started_at: now, ends_at: now + Duration::days(TRIAL_DAYS) })
    }

    /// Whether the trial grants its tier at `now`: until `ends_at`, not from that instant on.
    pub fn is_running(&self, now: DateTime<Utc>) -> bool {
        now < self.ends_at
    }

    /// Days left at `now`, a day begun counting whole: `TRIAL_DAYS` at the start, 1 on the
    /// last day, 0 once ended.
    pub fn days_left(&self, now: DateTime<Utc>) -> u32 {
        const DAY_MS: u64 = 86_400_000;
        // Negative once ended: no days left.
        let left_ms = u64::try_from((self.ends_at - now).num_milliseconds()).unwrap_or(0);
        let days = left_ms.div_ceil(DAY_MS).min(TRIAL_DAYS.unsigned_abs());
        u32::try_from(days).unwrap_or(0)
    }
}

/// The tier in force at `now`, given what the installed key grants (`key`: FREE without a
/// key or once it expired) and the installation's trial. A paid key outranks the trial,
/// whichever tier is higher; a running trial outranks FREE. When the trial ends the tier
/// falls back at once, and, as for an expired key, running work is not stopped: only work
/// that starts next sees the lower limits.
pub fn tier_in_force(key: Tier, trial: Option<&Trial>, now: DateTime<Utc>) -> Tier {
    match (key, trial) {
        (Tier::Free, Some(trial)) if trial.is_running(now) => trial.tier,
        (key, _) => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
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
    fn start() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap()
    }

    fn trial(tier: Tier) -> Trial {
        Trial { tier, started_at: start(), ends_at: start() + Duration::days(TRIAL_DAYS) }
    }

    #[test]
    fn a_trial_lasts_fourteen_days_of_its_tier() {
        for (asked, tier) in [(TrialTier::Supporter, Tier::Supporter), (TrialTier::Pro, Tier::Pro)] {
            assert_eq!(Trial::start(asked, None, Tier::Free, start()), Ok(trial(tier)));
            assert_eq!(Tier::from(asked), tier);
            assert_eq!(TrialTier::from_str(asked.as_str()), Ok(asked));
        }
        assert!(TrialTier::from_str("FREE").is_err());
    }

    #[test]
    fn one_trial_per_installation_and_none_under_a_paid_key() {
        let used = trial(Tier::Pro);
        let refused = TrialRefusal::Used { tier: Tier::Pro, started_at: used.started_at, ends_at: used.ends_at };
        // Running or ended, with or without a key: a second trial is refused as used.
        for now in [start(), start() + Duration::days(30)] {
            for key in Tier::ALL.iter().copied() {
                for asked in TrialTier::ALL.iter().copied() {
                    assert_eq!(Trial::start(asked, Some(&used), key, now), Err(refused.clone()), "{asked} {key} {now}");
                }
            }
        }
        assert_eq!(refused.code(), "trial_used");
        for key in [Tier::Supporter, Tier::Pro] {
            assert_eq!(Trial::start(TrialTier::Pro, None, key, start()), Err(TrialRefusal::KeyInForce(key)));
        }
        assert_eq!(TrialRefusal::KeyInForce(Tier::Pro).code(), "license_key_in_force");
        // An expired key grants FREE, so it leaves the trial available.
        assert!(Trial::start(TrialTier::Supporter, None, Tier::Free, start()).is_ok());
    }

    #[test]
    fn days_left_count_a_begun_day_whole() {
        let trial = trial(Tier::Supporter);
        let ms = Duration::milliseconds(1);
        let table = [
            (start() - Duration::days(1), 14),
            (start(), 14),
            (start() + ms, 14),
            (start() + Duration::days(1) - ms, 14),
            (start() + Duration::days(1), 13),
            (start() + Duration::days(13), 1),
            (trial.ends_at - ms, 1),
            (trial.ends_at, 0),
            (trial.ends_at + Duration::days(400), 0),
        ];
        for (now, days) in table {
            assert_eq!(trial.days_left(now), days, "{now}");
            assert_eq!(trial.is_running(now), days > 0, "{now}");
        }
    }

    #[test]
    fn a_paid_key_outranks_the_trial_and_the_trial_outranks_free() {
        let during = start() + Duration::days(3);
        let after = start() + Duration::days(TRIAL_DAYS);
        let (supporter, pro) = (trial(Tier::Supporter), trial(Tier::Pro));
        let table = [
            (Tier::Free, None, during, Tier::Free),
            (Tier::Free, Some(&pro), during, Tier::Pro),
            (Tier::Free, Some(&supporter), during, Tier::Supporter),
            (Tier::Free, Some(&pro), after - Duration::seconds(1), Tier::Pro),
            (Tier::Free, Some(&pro), after, Tier::Free),
            (Tier::Supporter, Some(&pro), during, Tier::Supporter),
            (Tier::Pro, Some(&supporter), during, Tier::Pro),
            (Tier::Supporter, Some(&pro), after, Tier::Supporter),
            (Tier::Pro, None, after, Tier::Pro),
        ];
        for (key, trial, now, in_force) in table {
            assert_eq!(tier_in_force(key, trial, now), in_force, "key {key}, trial {trial:?}, at {now}");
        }
    }
}
