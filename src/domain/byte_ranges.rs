//! The byte ranges of a source that a node without the share holds for a job's spans
//! (issue 39, item 4): its copy is a sparse file of the source's size, filled in aligned
//! chunks as the span's demuxer asks for them (the container's own index says where:
//! Matroska's cues, MP4's sample tables), with a few chunks fetched ahead of where it reads.
//! A span then moves the bytes of its span, its container's header and index, not the
//! whole file. No I/O here.

use serde::{Deserialize, Serialize};

/// The most bytes the main node answers for one range: it reads them into memory to hash
/// them before it answers.
pub const RANGE_MOST: u64 = 16 << 20;

/// Chunks fetched ahead of the one a span's demuxer reads: its next reads find them held.
pub const CHUNKS_AHEAD: u64 = 4;

/// The chunk a source of `size` bytes is fetched by: a 64th of it, in whole 64 KiB, from
/// 64 KiB to 4 MiB. Small enough that a span of a large file moves little more than its own
/// bytes, large enough that a request's round trip is small beside its bytes.
pub fn chunk_bytes(size: u64) -> u64 {
    const UNIT: u64 = 64 << 10;
    (size / 64).div_ceil(UNIT).saturating_mul(UNIT).clamp(UNIT, 4 << 20)
}

/// Disjoint, sorted, half-open byte ranges `[from, to)`, merged where they touch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    /// Adds `[from, to)` (nothing when empty).
    pub fn add(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let (mut from, mut to) = (from, to);
        let mut kept = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b < from || a > to {
                kept.push((a, b));
            } else {
                (from, to) = (from.min(a), to.max(b));
            }
        }
        let at = kept.partition_point(|&(a, _)| a < from);
        kept.insert(at, (from, to));
        self.0 = kept;
    }

    /// The end of the held run that holds byte `pos`; `None` when `pos` is not held.
    pub fn held_to(&self, pos: u64) -> Option<u64> {
        let at = self.0.partition_point(|&(a, _)| a <= pos);
        let &(_, to) = self.0.get(at.checked_sub(1)?)?;
        (pos < to).then_some(to)
    }

    /// Whether all of `[from, to)` is held.
    pub fn holds(&self, from: u64, to: u64) -> bool {
        from >= to || self.held_to(from).is_some_and(|end| end >= to)
    }

    /// Bytes held in all.
    pub fn bytes(&self) -> u64 {
        self.0.iter().map(|&(a, b)| b - a).sum()
    }

    pub fn as_slice(&self) -> &[(u64, u64)] {
        &self.0
    }
}

/// The next chunk to fetch of a source of `size` bytes, fetched by `chunk` bytes, for a
/// demuxer that reads at `pos`: the chunk that holds `pos` when it is missing, else the
/// first missing one of the `CHUNKS_AHEAD` after it. `None` when all of them are held (or
/// `pos` is past the end).
pub fn next_chunk(held: &Ranges, pos: u64, size: u64, chunk: u64) -> Option<(u64, u64)> {
    if pos >= size || chunk == 0 {
        return None;
    }
    let first = pos / chunk;
    (first..=first + CHUNKS_AHEAD)
        .map(|n| (n.saturating_mul(chunk), n.saturating_add(1).saturating_mul(chunk).min(size)))
        .take_while(|&(from, _)| from < size)
        .find(|&(from, to)| !held.holds(from, to))
}

/// A request's `Range: bytes=FIRST-LAST` of a source of `size` bytes, as `[from, to)`: one
/// range that starts within the source, cut at its end (as HTTP cuts one), of at most
/// `RANGE_MOST` bytes. The reason otherwise.
pub fn asked_range(header: &str, size: u64) -> Result<(u64, u64), String> {
    let malformed = || format!("Range is one range of bytes, as bytes=FIRST-LAST: {header:?}");
    let spec = header.trim().strip_prefix("bytes=").ok_or_else(malformed)?;
    let (first, last) = spec.split_once('-').ok_or_else(malformed)?;
    let (first, last) = (first.trim().parse::<u64>(), last.trim().parse::<u64>());
    let (Ok(first), Ok(last)) = (first, last) else { return Err(malformed()) };
    if first > last || first >= size {
        return Err(format!("bytes {first}-{last} do not start within the source's {size} bytes"));
    }
    let last = last.min(size - 1);
    let len = last - first + 1;
    if len > RANGE_MOST {
        return Err(format!("a range is at most {RANGE_MOST} bytes; {len} were asked for"));
    }
    Ok((first, last + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(list: &[(u64, u64)]) -> Ranges {
        let mut r = Ranges::default();
        for &(a, b) in list {
            r.add(a, b);
        }
        r
    }

    #[test]
    fn ranges_merge_where_they_touch_or_overlap_and_stay_sorted() {
        assert_eq!(ranges(&[(10, 20), (0, 5)]).as_slice(), [(0, 5), (10, 20)]);
        assert_eq!(ranges(&[(10, 20), (20, 30)]).as_slice(), [(10, 30)]);
        assert_eq!(ranges(&[(10, 20), (5, 12)]).as_slice(), [(5, 20)]);
        assert_eq!(ranges(&[(0, 5), (10, 20), (30, 40), (4, 31)]).as_slice(), [(0, 40)]);
        assert_eq!(ranges(&[(0, 5), (10, 20), (7, 8)]).as_slice(), [(0, 5), (7, 8), (10, 20)]);
        assert_eq!(ranges(&[(3, 3), (5, 2)]).as_slice(), []);
        assert_eq!(ranges(&[(0, 5), (10, 20), (12, 15)]).bytes(), 15);
    }

    #[test]
    fn a_byte_is_held_inside_a_run_and_not_at_its_end() {
        let r = ranges(&[(0, 5), (10, 20)]);
        assert_eq!(r.held_to(0), Some(5));
        assert_eq!(r.held_to(4), Some(5));
        assert_eq!(r.held_to(5), None);
        assert_eq!(r.held_to(9), None);
        assert_eq!(r.held_to(10), Some(20));
        assert_eq!(r.held_to(19), Some(20));
        assert_eq!(r.held_to(20), None);
        assert_eq!(Ranges::default().held_to(0), None);
        assert!(r.holds(10, 20) && r.holds(12, 13) && r.holds(7, 7));
        assert!(!r.holds(4, 6) && !r.holds(9, 11) && !r.holds(15, 21));
    }

    #[test]
    fn a_chunk_is_a_64th_in_whole_64_kib_within_bounds() {
        const K: u64 = 64 << 10;
        assert_eq!(chunk_bytes(0), K);
        assert_eq!(chunk_bytes(1_000_000), K);
        assert_eq!(chunk_bytes(64 * K + 64), 2 * K);
        assert_eq!(chunk_bytes(640 << 20), 4 << 20);
        assert_eq!(chunk_bytes(200 << 20), 3200 << 10);
        assert_eq!(chunk_bytes(100 << 20), 1600 << 10);
        assert_eq!(chunk_bytes(u64::MAX), 4 << 20);
    }

    #[test]
    fn the_next_chunk_is_the_one_read_then_those_ahead_of_it() {
        let size = 1000;
        let none = Ranges::default();
        assert_eq!(next_chunk(&none, 250, size, 100), Some((200, 300)));
        let r = ranges(&[(200, 300)]);
        assert_eq!(next_chunk(&r, 250, size, 100), Some((300, 400)));
        let r = ranges(&[(200, 400), (500, 700)]);
        assert_eq!(next_chunk(&r, 250, size, 100), Some((400, 500)));
        // All of the chunk read and the four after it held: nothing.
        let r = ranges(&[(200, 700)]);
        assert_eq!(next_chunk(&r, 299, size, 100), None);
        // Nothing ahead past the end; the last chunk is cut at it.
        let r = ranges(&[(0, 950)]);
        assert_eq!(next_chunk(&r, 900, size, 100), Some((900, 1000)));
        let r = ranges(&[(0, 1000)]);
        assert_eq!(next_chunk(&r, 900, size, 100), None);
        assert_eq!(next_chunk(&none, 1000, size, 100), None);
        assert_eq!(next_chunk(&none, 0, size, 0), None);
        // A chunk partly held (the end of another's fetch) is fetched whole.
        let r = ranges(&[(200, 250)]);
        assert_eq!(next_chunk(&r, 210, size, 100), Some((200, 300)));
    }

    #[test]
    fn a_range_asked_is_one_within_the_source_and_not_too_long() {
        assert_eq!(asked_range("bytes=0-99", 1000), Ok((0, 100)));
        assert_eq!(asked_range(" bytes=900-999 ", 1000), Ok((900, 1000)));
        assert_eq!(asked_range("bytes=5-5", 1000), Ok((5, 6)));
        assert_eq!(asked_range("bytes=0-65535", 1000), Ok((0, 1000)));
        for bad in ["bytes=1000-1000", "bytes=10-5", "bytes=-100", "bytes=100-", "bytes=0-1,5-6", "items=0-1", ""] {
            assert!(asked_range(bad, 1000).is_err(), "{bad}");
        }
        let big = 1 << 40;
        assert_eq!(asked_range(&format!("bytes=0-{}", RANGE_MOST - 1), big), Ok((0, RANGE_MOST)));
        let why = asked_range(&format!("bytes=0-{RANGE_MOST}"), big).unwrap_err();
        assert!(why.contains("at most"), "{why}");
    }
}
