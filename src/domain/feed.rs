//! The live feed's rule for one subscriber: what is kept for it while it cannot be written
//! to, and what it is owed when that was too much.
//!
//! Every message that is not progress (`status`, and any kind added later) is kept, in
//! order. Progress is coalesced: the latest progress of a job replaces an unsent older one.
//! What is kept is bounded ([`OUTBOX_BOUND`]); past the bound everything kept is discarded
//! and the subscriber is owed a `resync` (then a fresh snapshot of the active jobs). One that
//! falls behind again before it has read its resync is closed with [`CLOSE_TOO_SLOW`]; the
//! client reconnects and gets the snapshot sent on connect.
//!
//! Discarding at the bound loses nothing a client needs: every change is persisted before
//! it is published, so a snapshot read after the discard reflects every discarded message,
//! and the messages kept after the discard are newer than it (each carries the job's whole
//! live state, so replaying one the snapshot already shows is harmless).

use std::collections::{HashMap, VecDeque};

/// Unsent messages one subscriber may hold (messages in order plus one progress per job)
/// before it is owed a resync instead. A message is shared by every subscriber that holds
/// it, so this bounds references, not copies.
pub const OUTBOX_BOUND: usize = 1024;

/// WebSocket close code for a subscriber that fell behind again before it had read its
/// resync (private range 4000-4999; 4008 as HTTP's 408). The dashboard reconnects with
/// backoff and resyncs.
pub const CLOSE_TOO_SLOW: u16 = 4008;

/// Where a subscriber stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedState {
    /// Every message published since it subscribed is sent or kept.
    Live,
    /// Messages were discarded: it is owed a resync and a fresh snapshot.
    Behind,
    /// The resync was sent; it has not yet shown it read it (the session asks with a ping
    /// sent right after the resync and snapshot, and the pong ends this state).
    Resyncing,
    /// It fell behind again while resyncing: it is to be closed; nothing more is kept.
    Closed,
}

/// What a session does next with its outbox.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<T> {
    /// Send these, in this order.
    Send(Vec<T>),
    /// Send a `resync` message, a fresh snapshot, a ping whose pong means it was read, then
    /// take again.
    Resync,
    /// Close the connection with [`CLOSE_TOO_SLOW`].
    Close,
}

#[derive(Debug)]
struct Entry<T> {
    seq: u64,
    job_id: i32,
    message: T,
}

/// One subscriber's unsent messages, filled by the publisher and emptied by the session.
#[derive(Debug)]
pub struct Outbox<T> {
    bound: usize,
    next_seq: u64,
    /// Every message that is not progress, in publish order.
    ordered: VecDeque<Entry<T>>,
    /// The latest unsent progress per job.
    progress: HashMap<i32, Entry<T>>,
    state: FeedState,
    /// The session was told to take and has not taken since, so telling it again is useless.
    wake_pending: bool,
}

impl<T> Default for Outbox<T> {
    fn default() -> Self {
        Outbox::with_bound(OUTBOX_BOUND)
    }
}

impl<T> Outbox<T> {
    pub fn with_bound(bound: usize) -> Self {
        Outbox {
            bound: bound.max(1),
            next_seq: 0,
            ordered: VecDeque::new(),
            progress: HashMap::new(),
            state: FeedState::Live,
            wake_pending: false,
        }
    }

    pub fn state(&self) -> FeedState {
        self.state
    }

    /// Messages held now (never more than the bound).
    pub fn len(&self) -> usize {
        self.ordered.len() + self.progress.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps a published message. Returns whether the session must be woken to take (a
    /// message in order, or a change of state, with no wake already pending); progress
    /// waits for the session's own flush.
    pub fn push(&mut self, job_id: i32, is_progress: bool, message: T) -> bool {
        if self.state == FeedState::Closed {
            return false;
        }
        let mut urgent = !is_progress;
        let replaces = is_progress && self.progress.contains_key(&job_id);
        if !replaces && self.len() >= self.bound {
            // Everything kept so far is reflected in the snapshot the resync will read; the
            // new message is newer than that read, so it is kept (the last word on a job is
            // always delivered to a subscriber that is not closed).
            self.ordered = VecDeque::new();
            self.progress = HashMap::new();
            self.state = match self.state {
                FeedState::Live | FeedState::Behind => FeedState::Behind,
                FeedState::Resyncing | FeedState::Closed => FeedState::Closed,
            };
            urgent = true;
        }
        if self.state != FeedState::Closed {
            self.next_seq += 1;
            let entry = Entry { seq: self.next_seq, job_id, message };
            if is_progress {
                self.progress.insert(job_id, entry);
            } else {
                self.ordered.push_back(entry);
            }
        }
        self.wake(urgent)
    }

    fn wake(&mut self, urgent: bool) -> bool {
        if urgent && !self.wake_pending {
            self.wake_pending = true;
            true
        } else {
            false
        }
    }

    /// What the session sends now: the messages in order, each preceded by an unsent
    /// progress of its job that is older than it (a client must not see a status change
    /// overtaken by progress from before it); or the resync it is owed; or its end.
    pub fn take(&mut self) -> Next<T> {
        self.wake_pending = false;
        match self.state {
            FeedState::Closed => Next::Close,
            FeedState::Behind => {
                self.state = FeedState::Resyncing;
                Next::Resync
            }
            FeedState::Live | FeedState::Resyncing => {
                let mut out = Vec::with_capacity(self.ordered.len());
                for entry in std::mem::take(&mut self.ordered) {
                    if self.progress.get(&entry.job_id).is_some_and(|p| p.seq < entry.seq) {
                        if let Some(older) = self.progress.remove(&entry.job_id) {
                            out.push(older.message);
                        }
                    }
                    out.push(entry.message);
                }
                Next::Send(out)
            }
        }
    }

    /// The coalesced progress, oldest first, for the session's periodic flush.
    pub fn take_progress(&mut self) -> Vec<T> {
        if self.state == FeedState::Closed {
            return Vec::new();
        }
        let mut entries: Vec<Entry<T>> = self.progress.drain().map(|(_, entry)| entry).collect();
        entries.sort_by_key(|entry| entry.seq);
        entries.into_iter().map(|entry| entry.message).collect()
    }

    /// The subscriber showed it read its resync: it is live again.
    pub fn caught_up(&mut self) {
        if self.state == FeedState::Resyncing {
            self.state = FeedState::Live;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [FeedState; 4] = [FeedState::Live, FeedState::Behind, FeedState::Resyncing, FeedState::Closed];

    fn outbox_in(state: FeedState, bound: usize) -> Outbox<u32> {
        let mut outbox = Outbox::with_bound(bound);
        outbox.state = state;
        outbox
    }

    #[test]
    fn messages_in_order_are_all_kept_and_progress_is_coalesced() {
        let mut outbox = Outbox::with_bound(10);
        assert!(!outbox.push(1, true, 10), "progress waits for the flush");
        assert!(!outbox.push(1, true, 11));
        assert!(outbox.push(1, false, 12));
        assert!(!outbox.push(2, false, 20), "a wake is already pending");
        assert!(!outbox.push(1, true, 13));
        assert_eq!(outbox.len(), 3);
        // 13 replaced 11, and is newer than the status messages: it waits for the flush.
        assert_eq!(outbox.take(), Next::Send(vec![12, 20]));
        assert_eq!(outbox.take_progress(), vec![13]);
        assert!(outbox.is_empty());
        assert_eq!(outbox.state(), FeedState::Live);
    }

    #[test]
    fn progress_newer_than_a_status_is_not_sent_before_it() {
        let mut outbox = Outbox::with_bound(10);
        outbox.push(1, false, 1);
        outbox.push(1, true, 2);
        outbox.push(2, true, 3);
        outbox.push(2, false, 4);
        assert_eq!(outbox.take(), Next::Send(vec![1, 3, 4]));
        assert_eq!(outbox.take_progress(), vec![2]);
    }

    #[test]
    fn progress_flushes_oldest_first() {
        let mut outbox = Outbox::with_bound(10);
        for (job, value) in [(3, 1), (1, 2), (2, 3), (3, 4)] {
            outbox.push(job, true, value);
        }
        assert_eq!(outbox.take_progress(), vec![2, 3, 4]);
    }

    #[test]
    fn a_wake_is_asked_again_once_taken() {
        let mut outbox = Outbox::with_bound(10);
        assert!(outbox.push(1, false, 1));
        assert!(!outbox.push(1, false, 2));
        assert_eq!(outbox.take(), Next::Send(vec![1, 2]));
        assert!(outbox.push(1, false, 3));
    }

    /// Every state against every event: push within the bound, push past it (message in
    /// order and progress), take, take_progress, caught_up.
    #[test]
    fn every_state_against_every_event() {
        for state in ALL {
            // A push within the bound.
            let mut outbox = outbox_in(state, 2);
            let woke = outbox.push(1, false, 1);
            assert_eq!(woke, state != FeedState::Closed, "{state:?}");
            assert_eq!(outbox.state(), state);
            assert_eq!(outbox.len(), usize::from(state != FeedState::Closed));

            // Pushes past the bound, in order or progress.
            for progress in [false, true] {
                let mut outbox = outbox_in(state, 2);
                let mut woke = false;
                for job in 0..3 {
                    woke |= outbox.push(job, progress, 1);
                }
                let expected = match state {
                    FeedState::Live | FeedState::Behind => FeedState::Behind,
                    FeedState::Resyncing | FeedState::Closed => FeedState::Closed,
                };
                assert_eq!(outbox.state(), expected, "{state:?} progress {progress}");
                // The message that found the outbox full is kept, unless closed.
                assert_eq!(outbox.len(), usize::from(expected != FeedState::Closed), "{state:?}");
                assert_eq!(woke, state != FeedState::Closed, "{state:?} progress {progress}");
                // So are those after it.
                outbox.push(7, false, 2);
                assert_eq!(outbox.len(), 2 * usize::from(expected != FeedState::Closed));
            }

            // take
            let mut outbox = outbox_in(state, 4);
            outbox.ordered.push_back(Entry { seq: 1, job_id: 1, message: 5 });
            let next = outbox.take();
            match state {
                FeedState::Live | FeedState::Resyncing => {
                    assert_eq!(next, Next::Send(vec![5]));
                    assert_eq!(outbox.state(), state);
                }
                FeedState::Behind => {
                    assert_eq!(next, Next::Resync);
                    assert_eq!(outbox.state(), FeedState::Resyncing);
                    // What came after the discard follows the resync.
                    assert_eq!(outbox.take(), Next::Send(vec![5]));
                }
                FeedState::Closed => assert_eq!(next, Next::Close),
            }

            // take_progress
            let mut outbox = outbox_in(state, 4);
            outbox.progress.insert(1, Entry { seq: 1, job_id: 1, message: 6 });
            let flushed = outbox.take_progress();
            assert_eq!(flushed.is_empty(), state == FeedState::Closed, "{state:?}");
            assert_eq!(outbox.state(), state);

            // caught_up
            let mut outbox = outbox_in(state, 4);
            outbox.caught_up();
            let expected = if state == FeedState::Resyncing { FeedState::Live } else { state };
            assert_eq!(outbox.state(), expected);
        }
    }

    #[test]
    fn a_slow_reader_is_resynced_once_then_closed_if_it_falls_behind_again_before_reading_it() {
        let mut outbox = Outbox::with_bound(3);
        for n in 0..100 {
            outbox.push(n % 5, false, n);
        }
        assert_eq!(outbox.state(), FeedState::Behind, "a long stall is one resync, not a close");
        assert!(outbox.len() <= 3);
        assert_eq!(outbox.take(), Next::Resync);
        // The last message published is among those kept.
        assert_eq!(outbox.take(), Next::Send(vec![99]));
        for n in 0..3 {
            outbox.push(n, false, n);
        }
        assert_eq!(outbox.state(), FeedState::Resyncing, "within the bound");
        outbox.push(3, false, 3);
        assert_eq!(outbox.state(), FeedState::Closed);
        assert_eq!(outbox.take(), Next::Close);
        assert!(!outbox.push(1, false, 1));
        assert!(outbox.is_empty());
    }

    #[test]
    fn one_that_read_its_resync_gets_another_chance() {
        let mut outbox = Outbox::with_bound(3);
        for n in 0..4 {
            outbox.push(n, false, n);
        }
        assert_eq!(outbox.take(), Next::Resync);
        outbox.caught_up();
        for n in 0..4 {
            outbox.push(n, false, n);
        }
        assert_eq!(outbox.take(), Next::Resync);
    }
}
