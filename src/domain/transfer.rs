//! The rules of a transfer between the main node and a node that does not see the library
//! (issue 39): the byte ranges an upload names, the extensions an output may have, how a
//! capped rate paces the bytes sent. No I/O here.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// An upload's `Content-Range: bytes N-M/*` (or `/TOTAL`): the first and last byte it
/// carries. `None` for anything else, or a range that ends before it starts.
pub fn upload_range(header: &str) -> Option<(u64, u64)> {
    let rest = header.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    if total != "*" && total.parse::<u64>().is_err() {
        return None;
    }
    let (first, last) = range.split_once('-')?;
    let (first, last) = (first.parse::<u64>().ok()?, last.parse::<u64>().ok()?);
    (first <= last).then_some((first, last))
}

/// Whether `ext` may name an output (`output.<ext>` in the partial folder): 1 to 8 lowercase
/// letters or digits, so it can never carry a path.
pub fn valid_extension(ext: &str) -> bool {
    (1..=8).contains(&ext.len()) && ext.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Whether `hash` reads as a SHA-256 in lowercase hex.
pub fn valid_sha256(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// How long to wait before sending more, once `sent` bytes went in `elapsed`, so the rate
/// stays under `mbps` megabits per second (0: no cap).
pub fn pause_for(mbps: u32, sent: u64, elapsed: Duration) -> Duration {
    if mbps == 0 {
        return Duration::ZERO;
    }
    let bytes_per_second = f64::from(mbps) * 125_000.0;
    let due = Duration::from_secs_f64(sent as f64 / bytes_per_second);
    due.saturating_sub(elapsed)
}

/// What a capped transfer does after `sent` bytes in `elapsed`: the pause before it sends
/// more (`pause_for`), and the rate to report, over the time including that pause. A rate
/// taken before the pause would report what one burst took (a part sent at loopback speed),
/// not the pace the cap keeps.
pub fn pace(mbps: u32, sent: u64, elapsed: Duration) -> (Duration, f64) {
    let pause = pause_for(mbps, sent, elapsed);
    (pause, rate(sent, elapsed.saturating_add(pause)))
}

/// Bytes per uploaded part: 8 MiB uncapped; under a cap of `mbps`, one second of it (at
/// least 64 KiB). A part goes at the link's full speed and the cap's pause comes after it,
/// so a part of 8 MiB under a cap of a few Mbit/s was a burst the cap is there to prevent
/// (a Wi-Fi link shared with others), then many seconds with no progress to show.
pub fn part_bytes(mbps: u32) -> u64 {
    const MOST: u64 = 8 << 20;
    match mbps {
        0 => MOST,
        mbps => (u64::from(mbps) * 125_000).clamp(64 << 10, MOST),
    }
}

/// Bytes of a source's end a linked node fetches before the rest, to start on its copy
/// while the rest arrives (issue 39, "download ahead"): where Matroska keeps its cues and
/// tags and an MP4 written without "faststart" its sample tables (about 12 bytes a frame
/// and track: some MB for a film), so that opening the copy and finding its keyframes
/// wait for nothing else. A 64th of the file, from 1 MiB to 32 MiB; the whole of a smaller
/// one. A demuxer that reads further back than this waits for the download instead.
pub fn tail_bytes(size: u64) -> u64 {
    (size / 64).clamp(1 << 20, 32 << 20).min(size)
}

/// Whether a transfer that failed `failed` times in a row, its last byte moved `stalled`
/// ago, gives up: only once it used `tries` tries and waited `patience` both, so neither a
/// flaky link (many quick failures) nor a main node that restarts (a few slow ones, its
/// port closed meanwhile) ends it, and a main node that is gone for good does in the end.
pub fn gives_up(failed: u32, tries: u32, stalled: Duration, patience: Duration) -> bool {
    failed >= tries && stalled >= patience
}

/// The wait before the next try of a transfer whose last `failed` tries failed in a row:
/// 200 ms more each time, at most 2 s.
pub fn retry_after(failed: u32) -> Duration {
    Duration::from_millis(200 * u64::from(failed.min(10)))
}

/// Bytes per second over `elapsed` (0 before any time passed).
pub fn rate(bytes: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 / secs
    } else {
        0.0
    }
}

/// The name a node gives its copy of a source it took by transfer, in the job's folder in
/// WORK_DIR: `input.<ext>` with the original's extension lowercased when it is one an output
/// may have (the container the output gets follows from it, as on the main node), else
/// `input`. Nothing else of the original's name is used: it came from another machine.
pub fn copy_name(original: &std::path::Path) -> String {
    let ext = original.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.filter(|e| valid_extension(e)) {
        Some(ext) => format!("input.{ext}"),
        None => "input".to_string(),
    }
}

/// Why a node cannot take a download of `needed` bytes into a WORK_DIR with `free` bytes
/// free (`None`: it can). `needed` is the source, the expected output and a tenth more
/// (`placement::JobNeeds::work_dir_bytes`), less what the job's folder holds already.
pub fn short_of_room(needed: u64, free: u64) -> Option<String> {
    (free < needed).then(|| {
        let shown = |b: u64| super::notify::human_bytes(i64::try_from(b).unwrap_or(i64::MAX));
        format!("WORK_DIR is full: the transfer needs {} there, {} are free", shown(needed), shown(free))
    })
}

/// Which way a transfer's bytes go: `download` (the source to the node), `upload` (the
/// output to the main node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransferDirection {
    Download,
    Upload,
}

/// A job's transfer while its node moves its file: in stage TRANSFERRING, or a download
/// beside the encode of a copy read as it arrives (ENCODING). Which way, the bytes moved of
/// the total and the rate of this run. A linked node sends it with its progress (`Call::Progress`),
/// the main node keeps the last one in memory (`lifecycle::LiveTransfers`): the API shows
/// it as the job's `transfer`, no column holds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveTransfer {
    pub direction: TransferDirection,
    /// Bytes moved so far, counting those an earlier run of the transfer moved.
    pub bytes: u64,
    /// The file's size in bytes.
    pub total: u64,
    /// Bytes per second of this run of the transfer.
    pub rate_bytes_per_second: f64,
}

/// Why a download stopped when WORK_DIR filled up under it: where, how far it came, the
/// room it still needed and what is free.
pub fn full_while_downloading(work_dir: &str, have: u64, total: u64, free: u64, cause: &str) -> String {
    let shown = |b: u64| super::notify::human_bytes(i64::try_from(b).unwrap_or(i64::MAX));
    format!(
        "WORK_DIR ({work_dir}) is full: the download of the source stopped at {} of {} ({cause}); it needs {} more there, {} are free",
        shown(have),
        shown(total),
        shown(total.saturating_sub(have)),
        shown(free)
    )
}

/// How long a job's folder in a node's WORK_DIR is kept unwritten (its copy of the source,
/// its finished segments) for the job to come back to the node after the node stopped or
/// was killed. Three days: a node down over a weekend still continues its work when it
/// returns, while a folder of a job that stays queued or paused longer is not kept for
/// ever on the node's disk (the job then starts over wherever it goes).
pub const KEPT_FOR: Duration = Duration::from_secs(3 * 24 * 3600);

/// How long a node that starts (or links again) tries to ask the main node about each
/// job folder it found in WORK_DIR. A folder it could not ask about by then is removed:
/// a node cut off from its main node does not hold disk for jobs it cannot know the fate of.
pub const ASK_WITHIN: Duration = Duration::from_secs(120);

/// What the main node answered about a job whose folder a node found in its WORK_DIR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// The job, in this status.
    Status(super::job::JobStatus),
    /// The main node answered, without the job: it does not exist (deleted, or another
    /// main node's database).
    NoSuchJob,
    /// No answer within `ASK_WITHIN` (the link is down, the main node does not answer).
    Unanswered,
}

/// Whether a node keeps a job's folder it found in WORK_DIR, last written `idle` ago: only
/// for a job that may still come back to it (not ended: queued, paused, or running
/// elsewhere, which can be given back), and only for `KEPT_FOR`.
pub fn keeps_job_dir(asked: Asked, idle: Duration) -> bool {
    idle <= KEPT_FOR && matches!(asked, Asked::Status(status) if !status.is_terminal())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_fetched_first_is_a_64th_within_bounds() {
        assert_eq!(tail_bytes(0), 0);
        assert_eq!(tail_bytes(500_000), 500_000);
        assert_eq!(tail_bytes(61_056_001), 1 << 20);
        assert_eq!(tail_bytes(640 << 20), 10 << 20);
        assert_eq!(tail_bytes(50 << 30), 32 << 20);
    }

    #[test]
    fn a_download_stopped_by_a_full_work_dir_says_where_and_the_room_it_lacks() {
        let why = full_while_downloading("/data/work", 3_000_000, 10_000_000, 0, "No space left on device");
        assert!(why.starts_with("WORK_DIR (/data/work) is full"), "{why}");
        assert!(why.contains("stopped at 3.0 MB of 10.0 MB"), "{why}");
        assert!(why.contains("it needs 7.0 MB more there, 0 B are free"), "{why}");
        assert!(why.contains("No space left on device"), "{why}");
    }

    #[test]
    fn a_copy_keeps_only_an_extension_an_output_may_have() {
        use std::path::Path;
        assert_eq!(copy_name(Path::new("/media/films/Movie (2020).MKV")), "input.mkv");
        assert_eq!(copy_name(Path::new("/m/a.mp4")), "input.mp4");
        assert_eq!(copy_name(Path::new("/m/no-extension")), "input");
        assert_eq!(copy_name(Path::new("/m/odd.ext-with/dash")), "input");
        assert_eq!(copy_name(Path::new("/m/a.averylongext")), "input");
        assert_eq!(copy_name(Path::new("/m/a.m\u{e9}")), "input");
        assert_eq!(copy_name(Path::new("/m/.hidden")), "input");
    }

    #[test]
    fn a_download_needs_its_room_and_says_what_is_free() {
        assert_eq!(short_of_room(10, 10), None);
        assert_eq!(short_of_room(0, 0), None);
        assert_eq!(short_of_room(10, u64::MAX), None);
        assert_eq!(
            short_of_room(6_600_000_000, 4_100_000_000).as_deref(),
            Some("WORK_DIR is full: the transfer needs 6.6 GB there, 4.1 GB are free")
        );
        assert_eq!(
            short_of_room(u64::MAX, 0).as_deref(),
            Some("WORK_DIR is full: the transfer needs 9223372.0 TB there, 0 B are free")
        );
    }

    #[test]
    fn an_upload_names_its_first_and_last_byte() {
        assert_eq!(upload_range("bytes 0-99/*"), Some((0, 99)));
        assert_eq!(upload_range("bytes 100-100/200"), Some((100, 100)));
        for bad in ["bytes 5-4/*", "bytes 0-/*", "bytes -5/*", "items 0-1/*", "bytes 0-1", "bytes 0-1/x", "bytes a-b/*"]
        {
            assert_eq!(upload_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_extension_never_carries_a_path() {
        for ok in ["mkv", "mp4", "m4v", "webm"] {
            assert!(valid_extension(ok), "{ok}");
        }
        for bad in ["", "../mkv", "mk/v", "MKV", "mkv\0", "a.b", "toolongext"] {
            assert!(!valid_extension(bad), "{bad:?}");
        }
        assert!(valid_sha256(&"ab".repeat(32)));
        assert!(!valid_sha256(&"AB".repeat(32)));
        assert!(!valid_sha256("abc"));
    }

    #[test]
    fn a_capped_upload_sends_parts_of_one_second_of_its_cap() {
        assert_eq!(part_bytes(0), 8 << 20);
        assert_eq!(part_bytes(4), 500_000);
        assert_eq!(part_bytes(1), 125_000);
        assert_eq!(part_bytes(1000), 8 << 20);
        assert_eq!(part_bytes(u32::MAX), 8 << 20);
    }

    #[test]
    fn a_transfer_gives_up_only_after_its_tries_and_its_patience() {
        let (tries, patience) = (8, Duration::from_secs(120));
        let cases = [
            (0, Duration::ZERO, false),
            (7, Duration::from_secs(600), false),
            // Eight quick failures: a main node restarting has not had its time yet.
            (8, Duration::from_secs(5), false),
            (100, Duration::from_secs(119), false),
            (8, Duration::from_secs(120), true),
            (9, Duration::from_secs(121), true),
        ];
        for (failed, stalled, expected) in cases {
            assert_eq!(gives_up(failed, tries, stalled, patience), expected, "{failed} tries, {stalled:?}");
        }
    }

    #[test]
    fn a_transfer_waits_longer_after_each_failure_up_to_two_seconds() {
        let waits: Vec<u128> = [0, 1, 2, 5, 10, 11, 1000].into_iter().map(|f| retry_after(f).as_millis()).collect();
        assert_eq!(waits, [0, 200, 400, 1000, 2000, 2000, 2000]);
    }

    #[test]
    fn a_capped_rate_paces_what_was_sent() {
        assert_eq!(pause_for(0, 1 << 30, Duration::ZERO), Duration::ZERO);
        // 8 Mbit/s is 1 MB/s: 2 MB after half a second waits one and a half more.
        assert_eq!(pause_for(8, 2_000_000, Duration::from_millis(500)), Duration::from_millis(1500));
        assert_eq!(pause_for(8, 1_000_000, Duration::from_secs(2)), Duration::ZERO);
        assert_eq!(rate(1000, Duration::from_secs(2)), 500.0);
        assert_eq!(rate(1000, Duration::ZERO), 0.0);
        // 4 Mbit/s is 500 kB/s: 5 MB sent in a tenth of a second waits 9.9 s, and the rate
        // reported is the cap's, not the burst's 50 MB/s.
        let (pause, paced) = pace(4, 5_000_000, Duration::from_millis(100));
        assert_eq!(pause, Duration::from_millis(9900));
        assert!((paced - 500_000.0).abs() < 1.0, "{paced}");
        // Uncapped, or slower than the cap: no pause, the rate as measured.
        assert_eq!(pace(0, 5_000_000, Duration::from_millis(100)), (Duration::ZERO, 50_000_000.0));
        assert_eq!(pace(4, 1_000_000, Duration::from_secs(4)), (Duration::ZERO, 250_000.0));
    }

    #[test]
    fn a_job_folder_is_kept_while_its_job_may_come_back_and_for_a_bounded_time() {
        use super::super::job::JobStatus;
        let fresh = Duration::from_secs(60);
        for status in JobStatus::ALL {
            let live =
                !matches!(status, JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled | JobStatus::Skipped);
            assert_eq!(keeps_job_dir(Asked::Status(*status), fresh), live, "{status}");
            // Past the bound, whatever the job.
            assert!(!keeps_job_dir(Asked::Status(*status), KEPT_FOR + Duration::from_secs(1)), "{status}");
            assert_eq!(keeps_job_dir(Asked::Status(*status), KEPT_FOR), live, "{status}");
        }
        // No such job, or no answer: removed, however fresh.
        assert!(!keeps_job_dir(Asked::NoSuchJob, Duration::ZERO));
        assert!(!keeps_job_dir(Asked::Unanswered, Duration::ZERO));
        assert!(ASK_WITHIN < KEPT_FOR);
    }
}
