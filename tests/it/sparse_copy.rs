//! A span's helper reading a sparse copy of its source (issue 39, item 4): the real
//! `condense-media helper` child against a copy that a thread standing in for the node fills
//! only where the child says it reads (`condense::media::sparse`, `domain::byte_ranges`).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use condense::domain::byte_ranges::{chunk_bytes, next_chunk};
use condense::domain::segments::Span;
use condense::media::event::Event;
use condense::media::layout::{span_record_file, PLAN_FILE};
use condense::media::plan::EncodePlan;
use condense::media::span_record::SpanRecord;
use condense::media::sparse::{wanted, Held, SparseSource, HELD_FILE, WANTS_FILE};
use condense::media::transcoder::{ChildEnd, GivenSpan, HelperRequest, Transcoder};

use crate::common::media as clips;
use crate::common::server::media_binary;

/// The presentation times of the video's keyframes, in its stream's time base, by ffprobe.
fn keyframes(path: &Path) -> Vec<i64> {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts,flags", "-of", "csv=p=0"])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut keys: Vec<i64> =
        text.lines().filter(|l| l.contains('K')).filter_map(|l| l.split(',').next()?.parse().ok()).collect();
    keys.sort_unstable();
    keys
}

/// The span the tests' helper encodes: the sixth of eight.
const SPAN: u32 = 5;

/// Runs the helper child on span `SPAN` of `plan` (cut at `boundaries`) in `dir`, to its
/// end; answers its record.
async fn help(plan: &EncodePlan, dir: &Path, boundaries: &[i64]) -> SpanRecord {
    let at = SPAN as usize;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(PLAN_FILE), serde_json::to_vec(plan).unwrap()).unwrap();
    let given = GivenSpan {
        piece: Span { from: Some(boundaries[at - 1]), to: Some(boundaries[at]) },
        boundaries: boundaries.to_vec(),
        first_free: 0,
    };
    let request = HelperRequest { partial_dir: dir.to_path_buf(), span: SPAN, threads: 1, given: Some(given) };
    let mut child = Transcoder::spawn_helper(media_binary(), &request).await.unwrap();
    let mut events = Vec::new();
    while let Some(e) = child.events.recv().await {
        events.push(e);
    }
    assert_eq!(child.wait().await, ChildEnd::Completed, "{events:?}");
    assert!(events.iter().any(|e| matches!(e, Event::Done { .. })), "{events:?}");
    serde_json::from_slice(&std::fs::read(dir.join(span_record_file(SPAN))).unwrap()).unwrap()
}

/// A 40 s MP4 written without "faststart" (its sample tables after the media, where a
/// demuxer reads first), cut in eight spans of 5 s at keyframes: the helper of the sixth,
/// reading a sparse copy that holds nothing at first, gets every byte it reads from the
/// "node" it asks, and writes the very segments it writes from the whole file, having moved
/// under half of the file: the header and the first seconds its probe reads, its span, the
/// chunks fetched ahead of where it stopped, the sample tables.
#[actix_web::test]
async fn a_span_read_from_a_sparse_copy_is_the_span_read_from_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("film.mp4");
    let video = "testsrc2=size=320x240:rate=25,noise=alls=6:allf=t";
    let x264 = ["-c:v", "libx264", "-preset", "ultrafast", "-qp", "26", "-g", "25"];
    clips::ffmpeg(&[&["-f", "lavfi", "-i", video, "-t", "40"], &x264[..], &[source.to_str().unwrap()]].concat());
    let whole = std::fs::read(&source).unwrap();
    let find = |atom: &[u8]| whole.windows(4).position(|w| w == atom).unwrap();
    assert!(find(b"moov") > find(b"mdat"), "the sample tables are not at the end");
    let keys = keyframes(&source);
    assert_eq!(keys.len(), 40, "{keys:?}");
    let boundaries: Vec<i64> = (1..8).map(|n| keys[n * 5]).collect();
    let info = condense_media::probe::probe(&source).unwrap();
    let profile = clips::profile("libx265", 30, "ultrafast");
    let plan = EncodePlan::new(&source, &info, &profile).unwrap();

    let from_whole = help(&plan, &dir.path().join("whole"), &boundaries).await;

    // The sparse copy and its map, as the node starts them; the node's stand-in fetches the
    // chunk the child reads and those after it (`next_chunk`), bytes before the map.
    let spans = dir.path().join("spans");
    let span_dir = spans.join("span-5");
    std::fs::create_dir_all(&span_dir).unwrap();
    let size = whole.len() as u64;
    let copy_path = spans.join("source.sparse");
    let copy = std::fs::File::create(&copy_path).unwrap();
    copy.set_len(size).unwrap();
    let held = Held { sha256: "a".repeat(64), size, ..Held::default() };
    held.write(&spans).unwrap();
    let sparse = SparseSource {
        path: copy_path.clone(),
        size,
        chunk: chunk_bytes(size),
        held: spans.join(HELD_FILE),
        wants: span_dir.join(WANTS_FILE),
        stop: span_dir.join("stop"),
    };
    let done = Arc::new(AtomicBool::new(false));
    let node = {
        let (done, wants, spans, chunk) = (done.clone(), sparse.wants.clone(), spans.clone(), sparse.chunk);
        let whole = whole.clone();
        std::thread::spawn(move || {
            let mut held = held;
            let mut asked: Vec<u64> = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let next = wanted(&wants).and_then(|pos| next_chunk(&held.ranges, pos, size, chunk));
                let Some((from, to)) = next else {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                };
                copy.write_all_at(&whole[from as usize..to as usize], from).unwrap();
                copy.sync_data().unwrap();
                held.ranges.add(from, to);
                held.write(&spans).unwrap();
                asked.push(from);
            }
            (held, asked)
        })
    };
    let mut on_copy: EncodePlan = plan.clone();
    on_copy.input = copy_path;
    on_copy.sparse = Some(sparse);
    let from_copy = help(&on_copy, &span_dir, &boundaries).await;
    done.store(true, Ordering::SeqCst);
    let (held, asked) = node.join().unwrap();

    assert_eq!(from_copy.segments, from_whole.segments);
    for segment in &from_whole.segments {
        let read = |d: PathBuf| std::fs::read(d.join(&segment.file)).unwrap();
        assert!(read(dir.path().join("whole")) == read(span_dir.clone()), "{} differs", segment.file);
    }
    // What it read: the header, the sample tables at the end, and its span.
    assert!(held.ranges.held_to(0).is_some(), "{:?}", held.ranges);
    assert!(held.ranges.held_to(size - 1).is_some(), "{:?}", held.ranges);
    assert!(held.ranges.bytes() < size / 2, "{} of {size} bytes fetched: {asked:?}", held.ranges.bytes());
    // Every byte held is the source's.
    let kept = std::fs::read(&on_copy.input).unwrap();
    for &(a, b) in held.ranges.as_slice() {
        assert!(kept[a as usize..b as usize] == whole[a as usize..b as usize], "bytes {a}-{b} differ");
    }
}
