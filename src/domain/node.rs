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

/// The library paths a node's status counts against it (`node_status`): those it does not
/// see, unless it takes their files by transfer (`takes_transfers`, issue 39), where not
/// seeing a library is how it works rather than a fault. A node that takes only files it
/// sees (`SHARED_STORAGE=required`) stays DEGRADED for them.
pub fn degrading_paths(missing: &[String], takes_transfers: bool) -> &[String] {
    if takes_transfers {
        &[]
    } else {
        missing
    }
}

/// Whether a node sees a library whose roots are `roots`, from its last report: the paths it
/// checked (`None` from the main node itself, which checks each root when the library is
/// saved, and from linked nodes older than that report) and those of them it found missing.
/// `Some(false)` when a root is missing; `None` while a root was not among the paths it
/// checked (a library created or moved since its last report: not known yet, so not seen);
/// else `Some(true)`. A node is given jobs of a library only on `Some(true)`.
pub fn sees_library(roots: &[String], checked: Option<&[String]>, missing: &[String]) -> Option<bool> {
    if roots.iter().any(|root| missing.contains(root)) {
        return Some(false);
    }
    match checked {
        Some(checked) if !roots.iter().all(|root| checked.contains(root)) => None,
        _ => Some(true),
    }
}

/// The longest a linked node waits between two tries of its link: its backoff doubles from
/// 1 s while the main node cannot be reached, up to this.
pub const MAX_LINK_BACKOFF: std::time::Duration = std::time::Duration::from_secs(30);

/// How long, after the main node's start, a linked node has to link again before the jobs
/// it held go back to the queue: the heartbeats' `timeout`, plus the longest the node may
/// wait before its next try (its backoff grew while the main node was away).
pub fn relink_grace(timeout: std::time::Duration) -> std::time::Duration {
    timeout.saturating_add(MAX_LINK_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;
    use std::time::Duration;

    #[test]
    fn a_node_has_its_timeout_and_its_longest_backoff_to_link_again_after_a_main_node_restart() {
        assert_eq!(relink_grace(Duration::from_secs(4)), Duration::from_secs(34));
        assert_eq!(relink_grace(Duration::from_secs(30)), Duration::from_secs(60));
        assert_eq!(relink_grace(Duration::MAX), Duration::MAX);
    }

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
    fn a_node_taking_transfers_is_not_degraded_for_the_libraries_it_does_not_see() {
        let missing = vec!["/media/x".to_string()];
        assert_eq!(degrading_paths(&missing, false), &missing[..]);
        assert!(degrading_paths(&missing, true).is_empty());
        assert!(degrading_paths(&[], false).is_empty());
        assert!(degrading_paths(&[], true).is_empty());
        // As the status reads it: DEGRADED only for the node that needs to see the path.
        let status = |transfer| node_status(0, 30, 0.5, 0, degrading_paths(&missing, transfer)).0;
        assert_eq!(status(false), NodeStatus::Degraded);
        assert_eq!(status(true), NodeStatus::Online);
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

    #[test]
    fn a_library_is_seen_only_once_every_root_was_checked_and_found() {
        // (roots, checked, missing, sees)
        type Row<'a> = (&'a [&'a str], Option<&'a [&'a str]>, &'a [&'a str], Option<bool>);
        let s = |v: &[&str]| v.iter().map(std::string::ToString::to_string).collect::<Vec<_>>();
        let table: &[Row] = &[
            // The main node, and linked nodes from before the report of checked paths.
            (&["/a"], None, &[], Some(true)),
            (&["/a"], None, &["/a"], Some(false)),
            (&["/a", "/b"], None, &["/b"], Some(false)),
            // Checked and found.
            (&["/a"], Some(&["/a", "/c"]), &[], Some(true)),
            (&["/a", "/b"], Some(&["/a", "/b"]), &[], Some(true)),
            // Checked and missing.
            (&["/a"], Some(&["/a"]), &["/a"], Some(false)),
            (&["/a", "/b"], Some(&["/a", "/b"]), &["/b"], Some(false)),
            // Not checked yet (a new library, or a root moved): not known, not seen.
            (&["/a"], Some(&[]), &[], None),
            (&["/a", "/b"], Some(&["/a"]), &[], None),
            // Missing wins over unknown.
            (&["/a", "/b"], Some(&["/a"]), &["/a"], Some(false)),
            // A library without roots asks nothing of the node.
            (&[], Some(&[]), &[], Some(true)),
        ];
        for (roots, checked, missing, sees) in table {
            let checked = checked.map(s);
            assert_eq!(
                sees_library(&s(roots), checked.as_deref(), &s(missing)),
                *sees,
                "{roots:?}, checked {checked:?}, missing {missing:?}"
            );
        }
    }
}
