//! Runs over a whole library that go one at a time per library (a forecast, a health
//! check), each with the signal that cancels it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// The runs in progress, by library id.
#[derive(Clone, Default)]
pub struct LibraryRuns {
    running: Arc<Mutex<HashMap<i32, Arc<Notify>>>>,
}

impl LibraryRuns {
    /// Takes `library`'s place and answers the signal that cancels its run; None while
    /// another run of it holds the place.
    pub fn enter(&self, library: i32) -> Option<Arc<Notify>> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.contains_key(&library) {
            return None;
        }
        let cancel = Arc::new(Notify::new());
        running.insert(library, cancel.clone());
        Some(cancel)
    }

    /// Takes `library`'s place (`busy()` while another run holds it) and records the run's
    /// start with `record`; the place is given back when the record fails. Answers the
    /// record and the run's cancel signal.
    pub async fn enter_recorded<T, E>(
        &self,
        library: i32,
        busy: impl FnOnce() -> E,
        record: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<(T, Arc<Notify>), E> {
        let cancel = self.enter(library).ok_or_else(busy)?;
        match record.await {
            Ok(recorded) => Ok((recorded, cancel)),
            Err(e) => {
                self.leave(library);
                Err(e)
            }
        }
    }

    /// Gives `library`'s place back; its run ended (or never started).
    pub fn leave(&self, library: i32) {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).remove(&library);
    }

    /// Signals `library`'s run to stop; false when none runs.
    pub fn cancel(&self, library: i32) -> bool {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        match running.get(&library) {
            Some(cancel) => {
                // A permit: the run sees it at its next wait even when not waiting now.
                cancel.notify_one();
                true
            }
            None => false,
        }
    }

    /// Whether a run of `library` is in progress.
    pub fn is_running(&self, library: i32) -> bool {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).contains_key(&library)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_run_a_library_cancelled_by_its_signal_until_it_leaves() {
        let runs = LibraryRuns::default();
        assert!(!runs.cancel(1));
        let cancel = runs.enter(1).unwrap();
        assert!(runs.enter(1).is_none(), "a second run of the same library");
        let other = runs.enter(2).unwrap();
        assert!(runs.is_running(1) && runs.is_running(2));
        assert!(runs.cancel(1));
        // The signal waits for its run; the other library's is not signalled.
        tokio::time::timeout(std::time::Duration::from_secs(1), cancel.notified()).await.unwrap();
        assert!(tokio::time::timeout(std::time::Duration::from_millis(20), other.notified()).await.is_err());
        runs.leave(1);
        assert!(!runs.is_running(1) && !runs.cancel(1));
        assert!(runs.enter(1).is_some(), "free again once left");
    }

    #[tokio::test]
    async fn a_start_that_could_not_be_recorded_gives_the_place_back() {
        let runs = LibraryRuns::default();
        let failed = runs.enter_recorded(1, || "busy", async { Err::<(), _>("no database") }).await;
        assert_eq!(failed.err(), Some("no database"));
        assert!(!runs.is_running(1));
        let (row, _cancel) = runs.enter_recorded(1, || "busy", async { Ok::<_, &str>(7) }).await.unwrap();
        assert_eq!(row, 7);
        assert!(runs.is_running(1));
        let again = runs.enter_recorded(1, || "busy", async { Ok::<_, &str>(8) }).await;
        assert_eq!(again.err(), Some("busy"));
        assert!(runs.is_running(1), "the run that holds the place keeps it");
    }
}
