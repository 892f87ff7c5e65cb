//! The transcoder child (`condense-media transcode`, and a helper beside it) started from
//! the test's process on a plan, its events collected.

use condense::media::event::Event;
use condense::media::plan::EncodePlan;
use condense::media::transcoder::{ChildEnd, Transcoder};

use super::server::media_binary;

/// Runs the transcoder child to its end, collecting its events.
pub async fn run(plan: &EncodePlan) -> (ChildEnd, Vec<Event>) {
    let mut child = Transcoder::spawn(media_binary(), plan).await.unwrap();
    let mut events = Vec::new();
    while let Some(e) = child.events.recv().await {
        events.push(e);
    }
    (child.wait().await, events)
}

/// Runs the transcoder child until it sends an event `pause_at` picks, pauses it there and
/// waits for it to end paused; the events up to that one.
pub async fn run_until_paused(plan: &EncodePlan, pause_at: impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut child = Transcoder::spawn(media_binary(), plan).await.unwrap();
    let mut events = Vec::new();
    while let Some(e) = child.events.recv().await {
        let now = pause_at(&e);
        events.push(e);
        if now {
            child.pause();
            break;
        }
    }
    while child.events.recv().await.is_some() {}
    assert_eq!(child.wait().await, ChildEnd::Paused, "{events:?}");
    events
}

/// Starts the run and waits until it has planned its four spans (and published its plan).
pub async fn start_run(plan: &EncodePlan) -> (Transcoder, Vec<Event>) {
    let mut owner = Transcoder::spawn(media_binary(), plan).await.unwrap();
    let mut events = Vec::new();
    while let Some(e) = owner.events.recv().await {
        let planned = matches!(&e, Event::Spans { spans } if spans.len() == 4);
        events.push(e);
        if planned {
            return (owner, events);
        }
    }
    panic!("the run never planned its spans: {events:?}");
}

/// What a helper is asked to encode: span `span` of the run of `plan`, on one thread.
fn helper_request(plan: &EncodePlan, span: u32) -> condense::media::transcoder::HelperRequest {
    condense::media::transcoder::HelperRequest { partial_dir: plan.partial_dir.clone(), span, threads: 1, given: None }
}

/// A helper started on span `span` of the run of `plan`, on one thread.
pub async fn spawn_helper(plan: &EncodePlan, span: u32) -> Transcoder {
    Transcoder::spawn_helper(media_binary(), &helper_request(plan, span)).await.unwrap()
}

/// Collects the child's events until it ends, and answers how it ended.
pub async fn drain(child: &mut Transcoder, events: &mut Vec<Event>) -> ChildEnd {
    while let Some(e) = child.events.recv().await {
        events.push(e);
    }
    child.wait().await
}

/// The frames a run encoded and skipped (taken as done from its partial output), from its
/// Done event.
pub fn done_counts(events: &[Event]) -> (u64, u64) {
    events
        .iter()
        .find_map(|e| match e {
            Event::Done { frames_encoded_this_run, frames_skipped_this_run, .. } => {
                Some((*frames_encoded_this_run, *frames_skipped_this_run))
            }
            _ => None,
        })
        .expect("a done event")
}

/// The most sessions a run's progress reported encoding at once.
pub fn most_sessions(events: &[Event]) -> u32 {
    events
        .iter()
        .filter_map(|e| if let Event::Progress { sessions, .. } = e { Some(*sessions) } else { None })
        .max()
        .unwrap_or(0)
}
