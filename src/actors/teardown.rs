//! Database work that a stopping thread can drop safely. An actix thread (the main system
//! and every HTTP worker) owns a `LocalSet` beside its Tokio runtime, and drops the set
//! first, outside the runtime's context. A database future dropped there hands its
//! connection back to the pool with `tokio::spawn` (sqlx's `PoolConnection::drop`), finds no
//! runtime and panics "this functionality requires a Tokio context" (a main node stopped
//! while a linked node's heartbeat was being recorded once exited with SIGABRT after it).
//! Two ways out: actors living on HTTP workers (a linked node's link, a feed) wrap such work
//! in `dropped_in_runtime`, which enters the runtime (still alive then) before it drops what
//! it holds; the main system is dropped inside its runtime's context (`block_on_system`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// `work`, dropped (finished or not) inside the Tokio runtime of the thread it was made on.
pub fn dropped_in_runtime<F: Future>(work: F) -> DroppedInRuntime<F> {
    DroppedInRuntime { runtime: tokio::runtime::Handle::current(), work: Some(Box::pin(work)) }
}

/// See `dropped_in_runtime`.
pub struct DroppedInRuntime<F> {
    runtime: tokio::runtime::Handle,
    work: Option<Pin<Box<F>>>,
}

impl<F: Future> Future for DroppedInRuntime<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // `work` is None only inside `drop`.
        self.work.as_mut().map_or(Poll::Pending, |work| work.as_mut().poll(cx))
    }
}

impl<F> Drop for DroppedInRuntime<F> {
    fn drop(&mut self) {
        let _inside = self.runtime.enter();
        self.work = None;
    }
}

/// Runs `main` on a new actix system, then drops the system (its actors, and the futures
/// they left unfinished) inside its runtime's context.
pub fn block_on_system<T>(main: impl Future<Output = T>) -> T {
    let system = actix::System::new();
    let out = system.block_on(main);
    drop_system(system);
    out
}

fn drop_system(system: actix::SystemRunner) {
    let runtime = system.runtime().tokio_runtime().handle().clone();
    let _inside = runtime.enter();
    drop(system);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sea_orm::TransactionTrait;

    use super::*;

    thread_local! {
        /// Panics on this thread for want of a Tokio context. Tokio catches a panic in a
        /// task's drop, so the drop itself does not fail: the panic hook counts them.
        static WITHOUT_RUNTIME: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Starts a system whose actor thread holds a database connection in a future that
    /// never ends (wrapped in `dropped_in_runtime` or not), and drops it as a worker thread
    /// does (plainly) or through `drop_system`; true when dropping it panicked for want of a
    /// Tokio context.
    fn teardown_panics(wrapped: bool, dropped_in_context: bool) -> bool {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.to_string().contains("requires a Tokio context") {
                WITHOUT_RUNTIME.with(|n| n.set(n.get() + 1));
            }
            hook(info);
        }));
        let before = WITHOUT_RUNTIME.with(std::cell::Cell::get);
        let system = actix::System::new();
        system.block_on(async move {
            let db = crate::repo::connect("sqlite::memory:").await.expect("database");
            let hold = async move {
                let _tx = db.begin().await.expect("transaction");
                std::future::pending::<()>().await;
            };
            if wrapped {
                actix::spawn(dropped_in_runtime(hold));
            } else {
                actix::spawn(hold);
            }
            // Long enough for the connection to be taken.
            tokio::time::sleep(Duration::from_millis(200)).await;
        });
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if dropped_in_context {
                drop_system(system);
            } else {
                drop(system);
            }
        }))
        .is_err();
        panicked || WITHOUT_RUNTIME.with(std::cell::Cell::get) > before
    }

    #[test]
    fn a_connection_left_in_an_actor_thread_panics_when_the_thread_drops_it() {
        // What the two remedies below are for: without either, the drop panics.
        assert!(teardown_panics(false, false));
    }

    #[test]
    fn a_connection_held_by_a_wrapped_future_is_dropped_without_a_panic() {
        assert!(!teardown_panics(true, false));
    }

    #[test]
    fn a_system_dropped_inside_its_runtime_drops_a_held_connection_without_a_panic() {
        assert!(!teardown_panics(false, true));
    }

    #[test]
    fn a_wrapped_future_answers_as_the_future_does() {
        let system = actix::System::new();
        assert_eq!(system.block_on(async { dropped_in_runtime(async { 7 }).await }), 7);
    }
}
