//! Node statuses and roles.

use super::named_enum;

named_enum!(
    /// SPEC: ONLINE healthy and accepting jobs; OFFLINE unreachable; DEGRADED high load or errors.
    NodeStatus, "node status" {
        Online => "ONLINE",
        Offline => "OFFLINE",
        Degraded => "DEGRADED",
    }
);

named_enum!(
    NodeRole, "node role" {
        Main => "main",
        Linked => "linked",
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn names_round_trip() {
        for s in NodeStatus::ALL {
            assert_eq!(NodeStatus::from_str(s.as_str()), Ok(*s));
        }
        for r in NodeRole::ALL {
            assert_eq!(NodeRole::from_str(r.as_str()), Ok(*r));
        }
        assert!(NodeStatus::from_str("UP").is_err());
    }
}
