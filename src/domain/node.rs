//! Node statuses and roles, and how a node's status follows from what is observed of it.

use super::named_enum;

/// Load per core above which a node is DEGRADED. The health panel's CPU check calls the
/// same load critical (`health::cpu_level`), so both read this one value.
pub const CPU_CRITICAL_RATIO: f64 = 2.0;

named_enum!(
    /// ONLINE healthy and accepting jobs; OFFLINE unreachable; DEGRADED high load or errors.
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

/// A node's status from its last heartbeat and what that heartbeat reported. OFFLINE when
/// the heartbeat is older than the timeout (exactly the timeout is still in time); DEGRADED
/// when the load ratio is above the critical CPU ratio (2.0), or errors happened recently, or
/// library paths are missing; else ONLINE. The reason says why, for every status but ONLINE;
/// several DEGRADED causes are joined with "; ".
pub fn node_status(
    seconds_since_heartbeat: u64,
    heartbeat_timeout_secs: u64,
    load_ratio: f64,
    recent_errors: u32,
    missing_library_paths: &[String],
) -> (NodeStatus, Option<String>) {
    if seconds_since_heartbeat > heartbeat_timeout_secs {
        let reason = format!("no heartbeat for {seconds_since_heartbeat} s (timeout {heartbeat_timeout_secs} s)");
        return (NodeStatus::Offline, Some(reason));
    }

    let mut causes = Vec::new();
    if load_ratio > CPU_CRITICAL_RATIO {
        causes.push(format!("load {load_ratio:.2} per core is above {CPU_CRITICAL_RATIO:.1}"));
    }
    match recent_errors {
        0 => {}
        1 => causes.push("1 recent error".to_string()),
        n => causes.push(format!("{n} recent errors")),
    }
    if !missing_library_paths.is_empty() {
        causes.push(format!("cannot see {}", missing_library_paths.join(", ")));
    }

    if causes.is_empty() {
        (NodeStatus::Online, None)
    } else {
        (NodeStatus::Degraded, Some(causes.join("; ")))
    }
}

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

    #[test]
    fn status_follows_from_observations() {
        // (seconds since heartbeat, timeout, load ratio, recent errors, missing paths, status, reason)
        type Row = (u64, u64, f64, u32, &'static [&'static str], NodeStatus, Option<&'static str>);
        let none: &[&str] = &[];
        let table: &[Row] = &[
            (0, 30, 0.5, 0, none, NodeStatus::Online, None),
            (30, 30, 0.5, 0, none, NodeStatus::Online, None),
            (31, 30, 0.5, 0, none, NodeStatus::Offline, Some("no heartbeat for 31 s (timeout 30 s)")),
            // Offline wins over everything the stale heartbeat said.
            (120, 30, 9.0, 4, &["/media/x"], NodeStatus::Offline, Some("no heartbeat for 120 s (timeout 30 s)")),
            (5, 30, 2.0, 0, none, NodeStatus::Online, None),
            (5, 30, 2.01, 0, none, NodeStatus::Degraded, Some("load 2.01 per core is above 2.0")),
            (5, 30, 0.5, 1, none, NodeStatus::Degraded, Some("1 recent error")),
            (5, 30, 0.5, 3, none, NodeStatus::Degraded, Some("3 recent errors")),
            (5, 30, 0.5, 0, &["/media/x"], NodeStatus::Degraded, Some("cannot see /media/x")),
            (5, 30, 0.5, 0, &["/media/x", "/media/y"], NodeStatus::Degraded, Some("cannot see /media/x, /media/y")),
            (
                5,
                30,
                3.0,
                2,
                &["/media/x"],
                NodeStatus::Degraded,
                Some("load 3.00 per core is above 2.0; 2 recent errors; cannot see /media/x"),
            ),
        ];
        for (since, timeout, load, errors, missing, status, reason) in table {
            let missing: Vec<String> = missing.iter().map(std::string::ToString::to_string).collect();
            assert_eq!(
                node_status(*since, *timeout, *load, *errors, &missing),
                (*status, reason.map(str::to_string)),
                "{since}/{timeout} s, load {load}, {errors} errors, {missing:?}"
            );
        }
    }
}
