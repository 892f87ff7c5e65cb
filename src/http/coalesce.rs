//! One database read for many identical requests that wait at the same time.
//!
//! Why: every open dashboard polls `/system/dashboard`, the first page of `/jobs` and
//! `/queue/stats`, and every request carries a token whose user is read to check that it
//! was not revoked. At 64 concurrent requests the statements themselves were cheap (SQLite
//! spends under 2 % of the time in its engine); what cost was the per-statement hand-off
//! between the HTTP workers and the database driver's threads and the per-row decoding
//! (docs/ARCHITECTURE.md, "Reads under load"). Requests for the same thing that wait
//! together now share one read and, for the bodies, one serialization.
//!
//! Freshness is what it was without sharing: a request never receives the result of a read
//! that began before it arrived. While a read runs, newcomers gather for the next one,
//! which starts when the running one ends; so a client that wrote and then reads sees its
//! write, and a revoked token is refused from the first request after the revocation.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use actix_web::http::header::ContentType;
use actix_web::web::Bytes;
use actix_web::HttpResponse;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::error::AppError;

/// The reads the API shares, one set per node (both listeners).
#[derive(Default)]
pub struct SharedReads {
    /// A token's user by id: its role and token version decide every request.
    pub users: Coalesced<i32, Result<Option<entities::user::Model>, AppError>>,
    /// `GET /jobs` bodies by query string.
    pub job_pages: Coalesced<String, Result<Bytes, AppError>>,
    /// The `GET /queue/stats` body.
    pub queue_stats: Coalesced<(), Result<Bytes, AppError>>,
    /// The `GET /system/dashboard` body.
    pub dashboard: Coalesced<(), Result<Bytes, AppError>>,
}

/// The JSON answer of `read`, shared by the requests for `key` that wait together: one read
/// and one serialization for all of them.
pub async fn shared_json<K, T, F, Fut>(
    reads: &Coalesced<K, Result<Bytes, AppError>>,
    key: K,
    read: F,
) -> Result<HttpResponse, AppError>
where
    K: Eq + Hash + Clone + Send + 'static,
    T: Serialize,
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, AppError>> + Send + 'static,
{
    let body = reads
        .get(key, move || {
            let value = read();
            async move {
                serde_json::to_vec(&value.await?)
                    .map(Bytes::from)
                    .map_err(|e| AppError::Internal(format!("serializing a response: {e}")))
            }
        })
        .await??;
    Ok(HttpResponse::Ok().content_type(ContentType::json()).body(body))
}

/// Shared reads keyed by what they read (`K`), each giving a `V` to every request it serves.
pub struct Coalesced<K, V> {
    /// A key is present while a read of it runs; its list holds the requests that arrived
    /// since that read began, which the next read serves.
    running: Arc<Mutex<HashMap<K, Vec<oneshot::Sender<V>>>>>,
}

impl<K, V> Default for Coalesced<K, V> {
    fn default() -> Self {
        Coalesced { running: Arc::new(Mutex::new(HashMap::new())) }
    }
}

/// The read's task ended without a result (it panicked, or its runtime stopped).
#[derive(Debug, thiserror::Error)]
#[error("the shared read ended without a result")]
pub struct ReadLost;

impl From<ReadLost> for AppError {
    fn from(lost: ReadLost) -> Self {
        AppError::Internal(lost.to_string())
    }
}

impl<K, V> Coalesced<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// `read`'s result, from a read that began after this call: this call's own, or one
    /// shared with the calls for the same key that arrived while the previous read ran.
    pub async fn get<F, Fut>(&self, key: K, read: F) -> Result<V, ReadLost>
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = V> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let lead = {
            let mut running = self.running.lock().map_err(|_| ReadLost)?;
            match running.get_mut(&key) {
                Some(next) => {
                    next.push(tx);
                    None
                }
                None => {
                    running.insert(key.clone(), Vec::new());
                    Some(tx)
                }
            }
        };
        if let Some(tx) = lead {
            // A task of its own, so the read and the hand-over to the next group go on when
            // the client that started it goes away.
            tokio::spawn(reads(Arc::clone(&self.running), key, read, vec![tx]));
        }
        rx.await.map_err(|_| ReadLost)
    }

    /// Keys with a read running now.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.running.lock().map(|running| running.len()).unwrap_or(0)
    }
}

/// Reads for `waiting`, then for whoever gathered meanwhile, until nobody waits.
async fn reads<K, V, F, Fut>(
    running: Arc<Mutex<HashMap<K, Vec<oneshot::Sender<V>>>>>,
    key: K,
    read: F,
    mut waiting: Vec<oneshot::Sender<V>>,
) where
    K: Eq + Hash,
    V: Clone,
    F: Fn() -> Fut,
    Fut: Future<Output = V>,
{
    // Whatever ends this task early (a panic in `read`, the runtime dropping it), the key is
    // released and its waiters' channels dropped, so they get ReadLost instead of waiting
    // forever and the next request starts a read again.
    let mut release = Release { running, key, armed: true };
    loop {
        let value = read().await;
        for tx in waiting.drain(..) {
            // A receiver that is gone was a request whose client left.
            let _ = tx.send(value.clone());
        }
        let Ok(mut map) = release.running.lock() else { return };
        match map.get_mut(&release.key) {
            Some(next) if !next.is_empty() => waiting = std::mem::take(next),
            _ => {
                // Under the same lock that found nobody waiting: a request arriving after
                // this starts a read of its own.
                map.remove(&release.key);
                drop(map);
                release.armed = false;
                return;
            }
        }
    }
}

struct Release<K: Eq + Hash, V> {
    running: Arc<Mutex<HashMap<K, Vec<oneshot::Sender<V>>>>>,
    key: K,
    armed: bool,
}

impl<K: Eq + Hash, V> Drop for Release<K, V> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut map = match self.running.lock() {
            Ok(map) => map,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A read that records when it began (as a sequence number) and takes a while.
    fn counter() -> (Arc<AtomicUsize>, impl Fn() -> std::pin::Pin<Box<dyn Future<Output = usize> + Send>> + Clone) {
        let begun = Arc::new(AtomicUsize::new(0));
        let reads = Arc::clone(&begun);
        let read = move || {
            let reads = Arc::clone(&reads);
            Box::pin(async move {
                let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(Duration::from_millis(30)).await;
                n
            }) as std::pin::Pin<Box<dyn Future<Output = usize> + Send>>
        };
        (begun, read)
    }

    #[tokio::test]
    async fn requests_waiting_together_share_one_read() {
        let shared = Arc::new(Coalesced::<&str, usize>::default());
        let (begun, read) = counter();
        // The first starts a read; the 99 that arrive while it runs share the next one.
        let first = {
            let (shared, read) = (Arc::clone(&shared), read.clone());
            tokio::spawn(async move { shared.get("page 1", read).await.unwrap() })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        let rest: Vec<_> = (0..99)
            .map(|_| {
                let (shared, read) = (Arc::clone(&shared), read.clone());
                tokio::spawn(async move { shared.get("page 1", read).await.unwrap() })
            })
            .collect();
        assert_eq!(first.await.unwrap(), 1);
        for request in rest {
            assert_eq!(request.await.unwrap(), 2, "each waiter is served by the read after the one running");
        }
        assert_eq!(begun.load(Ordering::SeqCst), 2);
        assert_eq!(shared.in_flight(), 0, "the key is released when nobody waits");
    }

    #[tokio::test]
    async fn no_request_gets_a_read_that_began_before_it_arrived() {
        let shared = Arc::new(Coalesced::<u8, usize>::default());
        let (begun, read) = counter();
        let mut requests = Vec::new();
        for i in 0..60u64 {
            let (shared, read, begun) = (Arc::clone(&shared), read.clone(), Arc::clone(&begun));
            requests.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(i * 3)).await;
                // Every read numbered up to here began before this request.
                let begun_before = begun.load(Ordering::SeqCst);
                let got = shared.get(7, read).await.unwrap();
                (begun_before, got)
            }));
        }
        for request in requests {
            let (begun_before, got) = request.await.unwrap();
            assert!(got > begun_before, "served by read {got}, but reads up to {begun_before} began before it asked");
        }
        let reads = begun.load(Ordering::SeqCst);
        assert!(reads < 60, "{reads} reads for 60 overlapping requests");
    }

    #[tokio::test]
    async fn different_keys_do_not_share() {
        let shared = Arc::new(Coalesced::<u8, u8>::default());
        let slow = |v: u8| {
            move || async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                v
            }
        };
        let (a, b) = tokio::join!(shared.get(1, slow(1)), shared.get(2, slow(2)));
        assert_eq!((a.unwrap(), b.unwrap()), (1, 2));
    }

    #[tokio::test]
    async fn a_read_that_panics_fails_its_waiters_and_frees_the_key() {
        let shared = Arc::new(Coalesced::<u8, u8>::default());
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    shared
                        .get(1, || async {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            panic!("the read failed")
                        })
                        .await
                })
            })
            .collect();
        for waiter in waiters {
            assert!(waiter.await.unwrap().is_err());
        }
        assert_eq!(shared.in_flight(), 0);
        assert_eq!(shared.get(1, || async { 9 }).await.unwrap(), 9, "the next request reads again");
    }

    #[tokio::test]
    async fn the_read_goes_on_when_the_request_that_began_it_leaves() {
        let shared = Arc::new(Coalesced::<u8, usize>::default());
        let (begun, read) = counter();
        let leaver = {
            let (shared, read) = (Arc::clone(&shared), read.clone());
            tokio::spawn(async move { shared.get(1, read).await })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        let stayer = {
            let (shared, read) = (Arc::clone(&shared), read.clone());
            tokio::spawn(async move { shared.get(1, read).await.unwrap() })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        leaver.abort();
        assert_eq!(stayer.await.unwrap(), 2);
        assert_eq!(begun.load(Ordering::SeqCst), 2);
    }
}
