//! Library health (issue 38), the rules: which files a run reads, when a check may take a
//! slot, when a library's scheduled check is due, what a run's status is, and when a file's
//! last finding keeps it from being encoded. `actors::health` carries them out; the check of
//! one file is `media::worker::check_health`.

use chrono::{DateTime, Duration, Utc};

use super::named_enum;
use crate::media::health::Verdict;

named_enum! {
    /// How often a library is checked on its own (a quick check, inside the encoding
    /// windows).
    HealthSchedule, "health schedule" {
        Off => "off",
        Weekly => "weekly",
        Monthly => "monthly",
    }
}

named_enum! {
    /// What a scheduled check does about a file it finds damaged: tell (`file.damaged`) or
    /// ask the Sonarr or Radarr that holds it for a new copy (and tell).
    HealthAction, "health action" {
        Notify => "notify",
        Regrab => "regrab",
    }
}

named_enum! {
    /// Where a library's latest health run stands.
    RunStatus, "health run status" {
        Running => "RUNNING",
        Done => "DONE",
        Cancelled => "CANCELLED",
        Interrupted => "INTERRUPTED",
    }
}

/// What is kept of a file's last check, as these rules need it (and as a linked node's
/// attempt reads it over its link).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastCheck {
    pub verdict: Verdict,
    pub size: i64,
    pub mtime_ns: i64,
    pub ignored: bool,
    pub message: Option<String>,
    pub first_error_seconds: Option<f64>,
}

impl LastCheck {
    /// Whether the file on disk is the one this check read.
    pub fn same_file(&self, size: i64, mtime_ns: i64) -> bool {
        self.size == size && self.mtime_ns == mtime_ns
    }
}

/// Whether a run reads a file: every file when asked for `all`; otherwise every file but
/// those unchanged since a check found them `ok`.
pub fn needs_check(last: Option<&LastCheck>, size: i64, mtime_ns: i64, all: bool) -> bool {
    all || !last.is_some_and(|l| l.verdict == Verdict::Ok && l.same_file(size, mtime_ns))
}

/// Whether a check may start on this node now: a free slot, and no encode waiting for one
/// (an encode always goes first; `takes_jobs` is false on a main node that encodes nothing,
/// whose queue waits for other nodes, not for its slots).
pub fn may_start_check(free_slots: usize, queued_jobs: u64, takes_jobs: bool) -> bool {
    free_slots > 0 && !(takes_jobs && queued_jobs > 0)
}

/// Whether a library's scheduled check is due at `now`: never for `off`; otherwise when no
/// scheduled check ran yet, or the last one started a week (a month: 30 days) ago or more.
pub fn scheduled_due(
    schedule: HealthSchedule,
    last_scheduled_start: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    let every = match schedule {
        HealthSchedule::Off => return false,
        HealthSchedule::Weekly => Duration::days(7),
        HealthSchedule::Monthly => Duration::days(30),
    };
    last_scheduled_start.is_none_or(|at| now - at >= every)
}

/// Why a file is not encoded: its last check found it damaged or unreadable, it has not
/// changed since, nobody ignored the finding, and the job is not forced. `None`: encode.
pub fn skip_reason(last: Option<&LastCheck>, size: i64, mtime_ns: i64, forced: bool) -> Option<String> {
    let last = last?;
    if forced || last.ignored || last.verdict == Verdict::Ok || !last.same_file(size, mtime_ns) {
        return None;
    }
    let what = last.message.as_deref().unwrap_or(match last.verdict {
        Verdict::Unreadable => "the file cannot be read as media",
        _ => "errors while reading the file",
    });
    Some(match last.first_error_seconds {
        Some(at) => format!("damaged: {what} (at {at:.1} s)"),
        None => format!("damaged: {what}"),
    })
}

/// Whether a finding calls for action (a notification, a new copy): damaged or unreadable,
/// and not ignored.
pub fn is_finding(verdict: Verdict, ignored: bool) -> bool {
    verdict != Verdict::Ok && !ignored
}

/// Files one child checks at quick depth, at most: enough that starting the child and
/// loading FFmpeg (most of a small file's check when alone) is paid once per batch.
pub const QUICK_BATCH_FILES: usize = 64;
/// Bytes one child checks at quick depth, at most (a file larger goes alone): quick reads
/// every packet, so this bounds a batch to a few seconds of work, and the slot it holds
/// comes back to an encode soon.
pub const QUICK_BATCH_BYTES: u64 = 2_000_000_000;

/// How a run's files (their sizes, in order) are cut into batches, one child and one slot
/// each: consecutive runs of at most `max_files` files and `max_bytes` bytes, a file larger
/// than `max_bytes` alone; every file in exactly one batch, in order.
pub fn batches(sizes: &[u64], max_files: usize, max_bytes: u64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, &size) in sizes.iter().enumerate() {
        let full = i - start >= max_files.max(1) || bytes.saturating_add(size) > max_bytes;
        if i > start && full {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes = bytes.saturating_add(size);
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

/// A node as a health run sees it when it deals out the next batch (`deal`): the main
/// node's own slots, or a linked node's as its link reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOffer {
    /// Idle job slots.
    pub free: usize,
    /// It is known to see every root of the library (`domain::node::sees_library`).
    pub sees: bool,
    /// The scheduler gives it jobs (false: a main node with MAX_JOBS=0, which only
    /// coordinates, or a linked node with no slots).
    pub takes_jobs: bool,
    /// The main node itself (its checks run in its own process).
    pub main: bool,
}

/// Which node checks a run's next batch, by its index in `offers`; `None`: none now (ask
/// again later). A node that sees the library and may start a check (`may_start_check`: an
/// idle slot, no encode waiting for one); among them the one with the most idle slots, the
/// first listed on a tie. A main node that takes no jobs checks only while no linked node
/// that takes jobs sees the library: the checks go to the nodes that have job slots, and a
/// main node alone still checks its libraries.
pub fn deal(offers: &[CheckOffer], queued_jobs: u64) -> Option<usize> {
    let encoders_see = offers.iter().any(|o| !o.main && o.sees && o.takes_jobs);
    offers
        .iter()
        .enumerate()
        .filter(|(_, o)| o.sees && may_start_check(o.free, queued_jobs, o.takes_jobs))
        .filter(|(_, o)| !(o.main && !o.takes_jobs && encoders_see))
        .fold(None, |best: Option<(usize, usize)>, (i, o)| match best {
            Some((_, free)) if free >= o.free => best,
            _ => Some((i, o.free)),
        })
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(verdict: Verdict) -> LastCheck {
        LastCheck {
            verdict,
            size: 100,
            mtime_ns: 7,
            ignored: false,
            message: Some("invalid NAL unit size".into()),
            first_error_seconds: Some(3.25),
        }
    }

    #[test]
    fn a_run_reads_every_file_but_those_unchanged_since_their_ok() {
        for verdict in &[Verdict::Ok, Verdict::Damaged, Verdict::Unreadable] {
            for (size, mtime) in [(100, 7), (101, 7), (100, 8)] {
                for all in [false, true] {
                    let unchanged_ok = *verdict == Verdict::Ok && size == 100 && mtime == 7;
                    assert_eq!(needs_check(Some(&last(*verdict)), size, mtime, all), all || !unchanged_ok);
                }
            }
        }
        assert!(needs_check(None, 1, 1, false));
    }

    #[test]
    fn a_check_waits_for_a_free_slot_and_for_every_waiting_encode() {
        assert!(may_start_check(1, 0, true));
        assert!(!may_start_check(0, 0, true));
        assert!(!may_start_check(2, 1, true));
        // A node that encodes nothing: the queue waits for other nodes.
        assert!(may_start_check(1, 5, false));
        assert!(!may_start_check(0, 5, false));
    }

    #[test]
    fn a_schedule_is_due_after_its_period() {
        let now = DateTime::parse_from_rfc3339("2026-11-28T12:00:00Z").unwrap().with_timezone(&Utc);
        assert!(!scheduled_due(HealthSchedule::Off, None, now));
        assert!(scheduled_due(HealthSchedule::Weekly, None, now));
        assert!(scheduled_due(HealthSchedule::Monthly, None, now));
        let days = |d: i64| Some(now - Duration::days(d));
        assert!(!scheduled_due(HealthSchedule::Weekly, days(6), now));
        assert!(scheduled_due(HealthSchedule::Weekly, days(7), now));
        assert!(!scheduled_due(HealthSchedule::Monthly, days(29), now));
        assert!(scheduled_due(HealthSchedule::Monthly, days(30), now));
        assert!(!scheduled_due(HealthSchedule::Off, days(365), now));
    }

    #[test]
    fn a_damaged_file_is_skipped_until_it_changes_is_ignored_or_is_forced() {
        let damaged = last(Verdict::Damaged);
        assert_eq!(
            skip_reason(Some(&damaged), 100, 7, false).as_deref(),
            Some("damaged: invalid NAL unit size (at 3.2 s)")
        );
        assert_eq!(skip_reason(Some(&damaged), 100, 7, true), None);
        assert_eq!(skip_reason(Some(&damaged), 101, 7, false), None);
        assert_eq!(skip_reason(Some(&damaged), 100, 8, false), None);
        assert_eq!(skip_reason(Some(&LastCheck { ignored: true, ..damaged.clone() }), 100, 7, false), None);
        assert_eq!(skip_reason(Some(&last(Verdict::Ok)), 100, 7, false), None);
        assert_eq!(skip_reason(None, 100, 7, false), None);
        let unreadable = LastCheck { message: None, first_error_seconds: None, ..last(Verdict::Unreadable) };
        assert_eq!(
            skip_reason(Some(&unreadable), 100, 7, false).as_deref(),
            Some("damaged: the file cannot be read as media")
        );
    }

    #[test]
    fn only_a_damaged_or_unreadable_file_not_ignored_is_a_finding() {
        assert!(!is_finding(Verdict::Ok, false));
        assert!(is_finding(Verdict::Damaged, false));
        assert!(is_finding(Verdict::Unreadable, false));
        assert!(!is_finding(Verdict::Damaged, true));
    }

    #[test]
    fn names_read_back() {
        for s in HealthSchedule::ALL {
            assert_eq!(s.as_str().parse::<HealthSchedule>().unwrap(), *s);
        }
        for a in HealthAction::ALL {
            assert_eq!(a.as_str().parse::<HealthAction>().unwrap(), *a);
        }
        assert!("daily".parse::<HealthSchedule>().is_err());
    }
    #[test]
    fn batches_hold_every_file_once_in_order_within_their_bounds() {
        assert!(batches(&[], 64, 100).is_empty());
        assert_eq!(batches(&[1; 5], 2, 100), vec![0..2, 2..4, 4..5]);
        assert_eq!(batches(&[40, 40, 40, 10], 64, 100), vec![0..2, 2..4]);
        // A file over the bound goes alone; so does a batch of one when max_files is 0.
        assert_eq!(batches(&[10, 500, 10], 64, 100), vec![0..1, 1..2, 2..3]);
        assert_eq!(batches(&[1, 1], 0, 100), vec![0..1, 1..2]);
        assert_eq!(batches(&[u64::MAX, u64::MAX], 64, 100), vec![0..1, 1..2]);
        for sizes in [vec![3u64; 200], (0..300).map(|i| i * 7 % 90).collect()] {
            let cut = batches(&sizes, 64, 100);
            assert_eq!(cut.first().map(|r| r.start), Some(0));
            assert_eq!(cut.last().map(|r| r.end), Some(sizes.len()));
            for pair in cut.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
            }
            for r in &cut {
                assert!(r.len() <= 64 && (r.len() == 1 || sizes[r.clone()].iter().sum::<u64>() <= 100), "{r:?}");
            }
        }
    }

    fn offer(free: usize, sees: bool, takes_jobs: bool, main: bool) -> CheckOffer {
        CheckOffer { free, sees, takes_jobs, main }
    }

    #[test]
    fn a_batch_goes_to_a_node_that_sees_the_library_with_the_most_idle_slots() {
        let main = offer(1, true, true, true);
        let linked = |free, sees| offer(free, sees, true, false);
        assert_eq!(deal(&[], 0), None);
        // Only a node that sees the library and has an idle slot.
        assert_eq!(deal(&[main, linked(3, true)], 0), Some(1));
        assert_eq!(deal(&[main, linked(3, false)], 0), Some(0));
        assert_eq!(deal(&[offer(0, true, true, true), linked(0, true)], 0), None);
        assert_eq!(deal(&[offer(0, true, true, true), linked(1, true), linked(2, true)], 0), Some(2));
        // A tie: the first listed (the main node's own first).
        assert_eq!(deal(&[main, linked(1, true)], 0), Some(0));
        assert_eq!(deal(&[offer(0, true, true, true), linked(1, true), linked(1, true)], 0), Some(1));
        // An encode waiting: no node that takes jobs starts a check.
        assert_eq!(deal(&[main, linked(3, true)], 1), None);
    }

    #[test]
    fn a_main_node_that_takes_no_jobs_checks_only_while_no_encoding_node_sees_the_library() {
        let coordinator = offer(1, true, false, true);
        // Alone, or beside nodes that do not see the library or take no jobs: it checks,
        // whatever waits in the queue (the queue waits for other nodes, not for it).
        assert_eq!(deal(&[coordinator], 0), Some(0));
        assert_eq!(deal(&[coordinator], 4), Some(0));
        assert_eq!(deal(&[coordinator, offer(2, false, true, false)], 0), Some(0));
        assert_eq!(deal(&[coordinator, offer(0, true, false, false)], 0), Some(0));
        // A linked node that encodes sees it: the checks wait for that node's idle slots.
        assert_eq!(deal(&[coordinator, offer(1, true, true, false)], 0), Some(1));
        assert_eq!(deal(&[coordinator, offer(0, true, true, false)], 0), None);
        assert_eq!(deal(&[coordinator, offer(1, true, true, false)], 2), None);
    }
}
