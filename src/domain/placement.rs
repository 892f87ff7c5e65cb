//! Which node a queued job goes to: one that sees the file's library takes it as it is;
//! where none of those has a free slot, a node that can fetch the file by transfer
//! (`SHARED_STORAGE=auto`, issue 39) and has the room in its WORK_DIR takes it that way.
//! Before either, a job goes back to a node that keeps its folder from an earlier attempt
//! (the copy of the source and the segments it finished), when that node has a free slot.

use super::job::FailureCode;
use super::named_enum;
use super::notify::human_bytes;

named_enum!(
    /// `SHARED_STORAGE`: `auto`, a node that does not see a library may take its jobs by
    /// transfer; `required`, it never does (it takes only files it sees).
    SharedStorage, "shared storage setting" {
        Auto => "auto",
        Required => "required",
    }
);

/// Whether this build carries the transfer flow (issue 39: fetching a source over the
/// node's link, encoding it in WORK_DIR, uploading the output; `actors::job::by_transfer`).
/// A build without it offers to take no file by transfer, whatever `SHARED_STORAGE` says,
/// and its main node gives none. The one place that fact lives.
pub const TRANSFER_FLOW: bool = true;

/// Whether a node with this `SHARED_STORAGE` can take jobs of libraries it does not see.
pub fn takes_transfers(shared: SharedStorage) -> bool {
    TRANSFER_FLOW && shared == SharedStorage::Auto
}

/// Head room a transferred job needs in WORK_DIR over the source and its output, in percent
/// of both.
pub const WORK_DIR_MARGIN_PERCENT: u64 = 10;

/// What a queued job asks of the node that takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobNeeds<'a> {
    /// The folders of the job's library (none for a job outside a library).
    pub roots: &'a [String],
    pub source_bytes: u64,
    /// The output's expected size (a forecast's or a quality search's prediction); the
    /// source's size when unknown.
    pub output_bytes: Option<u64>,
}

impl JobNeeds<'_> {
    /// Bytes a node needs free in WORK_DIR to take the job by transfer: the source, the
    /// expected output, and 10 % over both.
    pub fn work_dir_bytes(&self) -> u64 {
        let both = self.source_bytes.saturating_add(self.output_bytes.unwrap_or(self.source_bytes));
        both.saturating_add((both.saturating_mul(WORK_DIR_MARGIN_PERCENT)).div_ceil(100))
    }

    /// Bytes a node needs free in WORK_DIR to encode one of the job's spans from a sparse
    /// copy (`domain::byte_ranges`), the job cut at `cuts` places: twice the span's share of
    /// `work_dir_bytes` (spans are not of one size, and a demuxer reads some of its
    /// neighbours), and the chunks fetched ahead of it; never more than the whole job's.
    pub fn span_work_dir_bytes(&self, cuts: usize) -> u64 {
        use super::byte_ranges::{chunk_bytes, CHUNKS_AHEAD};
        let spans = u64::try_from(cuts).unwrap_or(u64::MAX).saturating_add(1);
        let ahead = chunk_bytes(self.source_bytes).saturating_mul(CHUNKS_AHEAD + 1);
        (self.work_dir_bytes() / spans).saturating_mul(2).saturating_add(ahead).min(self.work_dir_bytes())
    }
}

/// The free space in a node's WORK_DIR the scheduler counts on once an attempt of the node
/// failed with `code`: after `insufficient_disk_space`, none, until the node's next
/// heartbeat measures it again. Without this, the retry could be given straight back to the
/// node that just ran out of room, on the figure it reported before it filled up, and fail
/// there again; with it, the job goes to another node with room, or waits for one.
pub fn work_dir_free_after_failure(code: FailureCode, reported: Option<u64>) -> Option<u64> {
    match code {
        FailureCode::InsufficientDiskSpace => Some(0),
        _ => reported,
    }
}

/// A node as one scheduling round sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeOffer {
    /// Whether it sees the job's library (`domain::node::sees_library`): `None` until it
    /// reported on the library's folders.
    pub sees: Option<bool>,
    /// It can take files by transfer (`takes_transfers`, as it reported).
    pub transfer: bool,
    /// Free bytes in its WORK_DIR, as it last reported (`None`: not reported).
    pub work_dir_free: Option<u64>,
    pub free_slots: u64,
    /// It reported that it keeps this job's folder in its WORK_DIR: an earlier attempt's
    /// copy of the source and finished segments, which it continues from.
    pub keeps: bool,
}

/// Whether a node takes a job, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// It sees the file: it encodes it where it lies.
    Take,
    /// It does not see the file: it fetches it into WORK_DIR and sends the output back.
    TakeByTransfer,
    /// Not this node, and why.
    No(String),
}

/// Whether `node` takes `job`. A node that sees the file takes it while it has a free slot.
/// One that does not takes it by transfer only when it can (`NodeOffer::transfer`), no node
/// that sees the file has a free slot (`seeing_node_free`: it would otherwise be idle
/// while the queue is not empty), and its WORK_DIR has the room (`JobNeeds::work_dir_bytes`).
/// A node that has not reported on the library yet takes nothing of it: its report comes
/// at once.
pub fn place(job: &JobNeeds, node: &NodeOffer, seeing_node_free: bool) -> Placement {
    if node.free_slots == 0 {
        return Placement::No("has no free slot".into());
    }
    let roots = job.roots.join(", ");
    match node.sees {
        Some(true) => return Placement::Take,
        None => return Placement::No(format!("has not reported yet whether it sees {roots}")),
        Some(false) => {}
    }
    if !node.transfer {
        return Placement::No(format!("does not see {roots} and cannot take files by transfer"));
    }
    if seeing_node_free {
        return Placement::No(format!("does not see {roots}, and a node that sees it has a free slot"));
    }
    let needed = job.work_dir_bytes();
    match node.work_dir_free {
        None => Placement::No(format!("does not see {roots} and has not reported its WORK_DIR's free space")),
        Some(free) if free < needed => Placement::No(format!(
            "needs {} in WORK_DIR, has {}",
            human_bytes(i64::try_from(needed).unwrap_or(i64::MAX)),
            human_bytes(i64::try_from(free).unwrap_or(i64::MAX))
        )),
        Some(_) => Placement::TakeByTransfer,
    }
}

/// The node `job` goes to among `nodes`, and how: a node that sees the file first (the one
/// with the most free slots, the first of equals), else, when `by_transfer` allows it, a
/// node that takes it by transfer (the same way). `None`: no node takes it now.
///
/// Before either: a node that keeps the job's folder (`NodeOffer::keeps`) and has a free
/// slot takes it back, the way it can (it sees the file, or takes files by transfer),
/// whatever `by_transfer` says and whoever else is free: it continues from what it kept
/// instead of another node starting over. Its WORK_DIR's room is not weighed: the copy
/// it needs lies there already, and the node checks the room itself before any download.
pub fn choose(job: &JobNeeds, nodes: &[NodeOffer], by_transfer: bool) -> Option<(usize, Placement)> {
    let back = nodes.iter().enumerate().find_map(|(i, n)| match (n.keeps && n.free_slots > 0, n.sees) {
        (true, Some(true)) => Some((i, Placement::Take)),
        (true, Some(false)) if n.transfer => Some((i, Placement::TakeByTransfer)),
        _ => None,
    });
    if back.is_some() {
        return back;
    }
    let seeing_node_free = nodes.iter().any(|n| n.free_slots > 0 && n.sees == Some(true));
    let best = |wanted: Placement| {
        nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| place(job, n, seeing_node_free) == wanted)
            // `max_by_key` keeps the last of equals; reversed, the first.
            .rev()
            .max_by_key(|(_, n)| n.free_slots)
            .map(|(i, _)| (i, wanted.clone()))
    };
    best(Placement::Take).or_else(|| if by_transfer { best(Placement::TakeByTransfer) } else { None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    const GB: u64 = 1_000_000_000;

    fn roots() -> Vec<String> {
        vec!["/media/films".to_string()]
    }

    fn offer(sees: Option<bool>, transfer: bool, free: Option<u64>, slots: u64) -> NodeOffer {
        NodeOffer { sees, transfer, work_dir_free: free, free_slots: slots, keeps: false }
    }

    #[test]
    fn settings_round_trip_and_only_auto_with_the_flow_takes_transfers() {
        for s in SharedStorage::ALL {
            assert_eq!(SharedStorage::from_str(s.as_str()), Ok(*s));
        }
        assert!(SharedStorage::from_str("sometimes").is_err());
        assert!(TRANSFER_FLOW && takes_transfers(SharedStorage::Auto));
        assert!(!takes_transfers(SharedStorage::Required));
    }

    #[test]
    fn work_dir_needs_source_output_and_a_tenth_more() {
        let r = roots();
        let needs =
            |source, output| JobNeeds { roots: &r, source_bytes: source, output_bytes: output }.work_dir_bytes();
        // 4 GB source, 2 GB output: 6.6 GB.
        assert_eq!(needs(4 * GB, Some(2 * GB)), 6_600_000_000);
        // Output unknown: counted as large as the source.
        assert_eq!(needs(4 * GB, None), 8_800_000_000);
        // The tenth rounds up: never a byte short.
        assert_eq!(needs(5, Some(4)), 10);
        assert_eq!(needs(0, None), 0);
        assert_eq!(needs(u64::MAX, None), u64::MAX);
    }

    #[test]
    fn a_span_from_a_sparse_copy_needs_twice_its_share_and_the_chunks_ahead() {
        let r = roots();
        let span = |source, cuts| {
            JobNeeds { roots: &r, source_bytes: source, output_bytes: Some(source) }.span_work_dir_bytes(cuts)
        };
        // 4 GB source and output (8.8 GB), 9 cuts: 2 x 880 MB and 5 chunks of 4 MiB.
        assert_eq!(span(4 * GB, 9), 1_760_000_000 + 5 * (4 << 20));
        // One span (no cut): the whole job's, not more.
        assert_eq!(span(4 * GB, 0), 8_800_000_000);
        assert_eq!(span(1000, 1), 2200);
        assert_eq!(span(u64::MAX, 3), u64::MAX / 4 * 2 + 5 * (4 << 20));
        assert_eq!(span(u64::MAX, usize::MAX), 2 + 5 * (4 << 20));
    }

    #[test]
    fn every_node_state_gets_its_answer() {
        // (sees, transfer, work-dir free, free slots, a seeing node free, answer)
        type Row = (Option<bool>, bool, Option<u64>, u64, bool, Placement);
        let r = roots();
        // 4 GB source, 2 GB output: 6.6 GB needed.
        let job = JobNeeds { roots: &r, source_bytes: 4 * GB, output_bytes: Some(2 * GB) };
        let no = |s: &str| Placement::No(s.to_string());
        let unseen_no_transfer = "does not see /media/films and cannot take files by transfer";
        let seeing_free = "does not see /media/films, and a node that sees it has a free slot";
        let unreported = "has not reported yet whether it sees /media/films";
        let no_space = "needs 6.6 GB in WORK_DIR, has 4.1 GB";
        let space_unknown = "does not see /media/films and has not reported its WORK_DIR's free space";
        let enough = Some(6_600_000_000);
        let short = Some(4_100_000_000);
        let table: Vec<Row> = vec![
            // Sees the file: takes it whatever else holds, while it has a slot.
            (Some(true), false, None, 1, false, Placement::Take),
            (Some(true), false, None, 1, true, Placement::Take),
            (Some(true), true, Some(0), 2, true, Placement::Take),
            (Some(true), true, enough, 0, false, no("has no free slot")),
            // No slot: nothing else matters.
            (Some(false), true, enough, 0, false, no("has no free slot")),
            (None, true, enough, 0, false, no("has no free slot")),
            // Not reported yet: waits for the report, by transfer or not.
            (None, false, None, 1, false, no(unreported)),
            (None, true, enough, 1, false, no(unreported)),
            (None, true, enough, 1, true, no(unreported)),
            // Does not see it and cannot transfer (SHARED_STORAGE=required, or no flow).
            (Some(false), false, enough, 1, false, no(unseen_no_transfer)),
            (Some(false), false, None, 1, true, no(unseen_no_transfer)),
            // Can transfer, but a node that sees the file is free: that one takes it.
            (Some(false), true, enough, 1, true, no(seeing_free)),
            (Some(false), true, short, 1, true, no(seeing_free)),
            // Can transfer, nobody that sees it is free: the room in WORK_DIR decides.
            (Some(false), true, enough, 1, false, Placement::TakeByTransfer),
            (Some(false), true, Some(u64::MAX), 3, false, Placement::TakeByTransfer),
            (Some(false), true, Some(6_599_999_999), 1, false, no("needs 6.6 GB in WORK_DIR, has 6.6 GB")),
            (Some(false), true, short, 1, false, no(no_space)),
            (Some(false), true, Some(0), 1, false, no("needs 6.6 GB in WORK_DIR, has 0 B")),
            (Some(false), true, None, 1, false, no(space_unknown)),
        ];
        for (sees, transfer, free, slots, seeing_node_free, answer) in table {
            let node = offer(sees, transfer, free, slots);
            assert_eq!(place(&job, &node, seeing_node_free), answer, "{node:?}, seeing node free: {seeing_node_free}");
        }
    }

    #[test]
    fn the_reason_names_every_root_and_the_unknown_output_counts_as_the_source() {
        let r = vec!["/media/films".to_string(), "/media/shows".to_string()];
        let job = JobNeeds { roots: &r, source_bytes: 3 * GB, output_bytes: None };
        assert_eq!(
            place(&job, &offer(Some(false), false, None, 1), false),
            Placement::No("does not see /media/films, /media/shows and cannot take files by transfer".into())
        );
        // 3 + 3 GB + 10 %.
        assert_eq!(
            place(&job, &offer(Some(false), true, Some(6 * GB), 1), false),
            Placement::No("needs 6.6 GB in WORK_DIR, has 6.0 GB".into())
        );
        assert_eq!(place(&job, &offer(Some(false), true, Some(7 * GB), 1), false), Placement::TakeByTransfer);
    }

    #[test]
    fn a_keeping_node_then_nodes_that_see_the_file_then_those_that_take_it_by_transfer() {
        // (nodes, transfers allowed, answer)
        type Row = (Vec<NodeOffer>, bool, Option<(usize, Placement)>);
        let r = roots();
        let job = JobNeeds { roots: &r, source_bytes: GB, output_bytes: Some(GB) };
        let room = Some(10 * GB);
        let seeing = |slots| offer(Some(true), false, None, slots);
        let blind = |slots| offer(Some(false), true, room, slots);
        let keeping = |node: NodeOffer| NodeOffer { keeps: true, ..node };
        let table: Vec<Row> = vec![
            (vec![], true, None),
            // Both idle: the one that sees the file, even with fewer slots.
            (vec![blind(4), seeing(1)], true, Some((1, Placement::Take))),
            (vec![seeing(1), blind(4)], true, Some((0, Placement::Take))),
            // Among seeing nodes, the most free slots; the first of equals.
            (vec![seeing(1), seeing(3), seeing(3)], true, Some((1, Placement::Take))),
            (vec![seeing(2), seeing(2)], false, Some((0, Placement::Take))),
            // The seeing nodes are full: a blind one takes it by transfer, if allowed.
            (vec![seeing(0), blind(1)], true, Some((1, Placement::TakeByTransfer))),
            (vec![seeing(0), blind(1)], false, None),
            (vec![blind(1), blind(2), blind(2)], true, Some((1, Placement::TakeByTransfer))),
            // Blind nodes that cannot: nobody.
            (vec![seeing(0), offer(Some(false), false, room, 2)], true, None),
            // Not enough room, or not reported yet: skipped for one that can.
            (
                vec![offer(Some(false), true, Some(GB), 3), offer(None, true, room, 3), blind(1)],
                true,
                Some((2, Placement::TakeByTransfer)),
            ),
            (vec![offer(Some(false), true, Some(GB), 3)], true, None),
            // A node that keeps the job's folder takes it back first when it has a slot.
            // Back to the blind node that keeps it, before a seeing node with more slots,
            // in the round that gives only files nodes see too.
            (vec![seeing(4), keeping(blind(1))], false, Some((1, Placement::TakeByTransfer))),
            (vec![seeing(4), keeping(blind(1))], true, Some((1, Placement::TakeByTransfer))),
            (vec![blind(3), keeping(blind(1))], true, Some((1, Placement::TakeByTransfer))),
            // Its room is not weighed: the copy is there already.
            (
                vec![seeing(1), keeping(offer(Some(false), true, Some(0), 1))],
                false,
                Some((1, Placement::TakeByTransfer)),
            ),
            (vec![seeing(1), keeping(offer(Some(false), true, None, 1))], false, Some((1, Placement::TakeByTransfer))),
            // A keeping node that sees the file takes it as it is.
            (vec![seeing(4), keeping(seeing(1))], false, Some((1, Placement::Take))),
            // No free slot: the usual order, as if it kept nothing.
            (vec![seeing(1), keeping(blind(0))], true, Some((0, Placement::Take))),
            (vec![seeing(0), keeping(blind(0)), blind(1)], true, Some((2, Placement::TakeByTransfer))),
            (vec![keeping(blind(0))], true, None),
            // One that cannot take it at all (no transfers now, or not reported yet): neither.
            (vec![seeing(1), keeping(offer(Some(false), false, room, 1))], true, Some((0, Placement::Take))),
            (vec![seeing(1), keeping(offer(None, true, room, 1))], true, Some((0, Placement::Take))),
            (vec![keeping(offer(Some(false), false, room, 1))], true, None),
            // Two keep it (a folder left on each): the first with a free slot.
            (vec![keeping(blind(0)), keeping(blind(1)), keeping(blind(2))], true, Some((1, Placement::TakeByTransfer))),
        ];
        for (nodes, by_transfer, answer) in table {
            assert_eq!(choose(&job, &nodes, by_transfer), answer, "{nodes:?}, by transfer: {by_transfer}");
        }
    }

    #[test]
    fn a_node_that_ran_out_of_room_gets_no_transfer_until_it_reports_again() {
        for code in FailureCode::ALL.iter().copied() {
            let after = work_dir_free_after_failure(code, Some(50 * GB));
            let expected = if code == FailureCode::InsufficientDiskSpace { Some(0) } else { Some(50 * GB) };
            assert_eq!(after, expected, "{code:?}");
            let unreported = work_dir_free_after_failure(code, None);
            assert_eq!(unreported, expected.filter(|_| code == FailureCode::InsufficientDiskSpace), "{code:?}");
        }
        // The retry of the job it failed goes to the other blind node, the one with room.
        let r = roots();
        let job = JobNeeds { roots: &r, source_bytes: GB, output_bytes: Some(GB) };
        let full = work_dir_free_after_failure(FailureCode::InsufficientDiskSpace, Some(50 * GB));
        let nodes = [offer(Some(false), true, full, 2), offer(Some(false), true, Some(50 * GB), 1)];
        assert_eq!(choose(&job, &nodes, true), Some((1, Placement::TakeByTransfer)));
        // Alone, it waits: nobody takes the job until a report shows room.
        assert_eq!(choose(&job, &nodes[..1], true), None);
    }
}
