//! The one owner of shutdown: the relayer's tasks are spawned through it, each by what it is
//! (a relay handler, a background task, a follower), and shutdown runs in named phases, so no
//! task picks a token or a tracker by hand.
//!
//! 1. [`Shutdown::begun`]: shutdown began. New relays are no longer served; the reconciler, the
//!    lease keeper and the hand-off sender stop, followers start no replacement, the webhook
//!    task claims no more events. Relay handlers run to their end (a relay that reserved budget
//!    is recorded, even if its client hung up).
//! 2. The grace: background tasks get [`Shutdown::drain`]'s `grace` to finish (followers to see
//!    their receipts, webhook attempts to be answered).
//! 3. [`Shutdown::grace_over`]: followers and webhook attempts stop; the next start resumes them.

use std::{future::Future, time::Duration};

use tokio_util::{
    sync::{CancellationToken, WaitForCancellationFuture},
    task::TaskTracker,
};

/// The relayer's tasks and the phases of its shutdown.
#[derive(Debug)]
pub(crate) struct Shutdown {
    /// Relay handlers: shutdown waits for every one.
    handlers: TaskTracker,
    /// Followers of sent relays, the reconciler, the lease keeper, the hand-off sender and the
    /// webhook delivery task.
    background: TaskTracker,
    /// Cancelled when shutdown begins; a child of `grace_over`, so that cancels both.
    begun: CancellationToken,
    /// Cancelled when shutdown's grace is over.
    grace_over: CancellationToken,
}

impl Shutdown {
    pub(crate) fn new() -> Self {
        let grace_over = CancellationToken::new();
        Self {
            handlers: TaskTracker::new(),
            background: TaskTracker::new(),
            begun: grace_over.child_token(),
            grace_over,
        }
    }

    /// Runs a relay handler, which shutdown waits for to the end.
    pub(crate) fn spawn_handler<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handlers.spawn(task)
    }

    /// Runs a background task, which watches the phases itself ([`Shutdown::begun`],
    /// [`Shutdown::grace_over`]) and which shutdown waits for after the handlers.
    pub(crate) fn spawn_background(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.background.spawn(task);
    }

    /// Runs a follower: until it ends, or until shutdown's grace is over (the next start
    /// resumes what it left).
    pub(crate) fn spawn_follower(&self, task: impl Future<Output = ()> + Send + 'static) {
        let grace_over = self.grace_over.clone();
        self.background.spawn(async move {
            tokio::select! {
                () = task => {}
                () = grace_over.cancelled() => {}
            }
        });
    }

    /// Completes once shutdown has begun.
    pub(crate) fn begun(&self) -> WaitForCancellationFuture<'_> {
        self.begun.cancelled()
    }

    /// Whether shutdown has begun.
    pub(crate) fn has_begun(&self) -> bool {
        self.begun.is_cancelled()
    }

    /// Completes once shutdown's grace is over.
    pub(crate) fn grace_over(&self) -> WaitForCancellationFuture<'_> {
        self.grace_over.cancelled()
    }

    /// Runs the phases: begins, waits for every relay handler, gives background tasks `grace`,
    /// then ends the grace and waits for them to stop.
    pub(crate) async fn drain(&self, grace: Duration) {
        self.begun.cancel();
        self.handlers.close();
        self.handlers.wait().await;
        self.background.close();
        if tokio::time::timeout(grace, self.background.wait()).await.is_err() {
            self.grace_over.cancel();
            self.background.wait().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    };

    use super::*;

    #[tokio::test]
    async fn handlers_finish_and_followers_stop_when_the_grace_is_over() {
        let shutdown = Arc::new(Shutdown::new());
        let handled = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&handled);
        let _handler = shutdown.spawn_handler(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            done.store(true, Ordering::SeqCst);
        });
        // A follower that would never end by itself, and a background task that ends at the
        // start of shutdown.
        shutdown.spawn_follower(std::future::pending());
        let watcher = Arc::clone(&shutdown);
        let saw_begin = Arc::new(AtomicBool::new(false));
        let saw = Arc::clone(&saw_begin);
        shutdown.spawn_background(async move {
            watcher.begun().await;
            saw.store(watcher.has_begun(), Ordering::SeqCst);
        });
        assert!(!shutdown.has_begun());
        shutdown.drain(Duration::from_millis(50)).await;
        assert!(handled.load(Ordering::SeqCst), "the handler ran to its end");
        assert!(saw_begin.load(Ordering::SeqCst), "the background task saw shutdown begin");
        assert!(shutdown.grace_over.is_cancelled(), "the follower used up the grace");
    }

    #[tokio::test]
    async fn background_tasks_that_end_in_the_grace_end_it_early() {
        let shutdown = Shutdown::new();
        shutdown.spawn_follower(tokio::time::sleep(Duration::from_millis(10)));
        shutdown.drain(Duration::from_secs(60)).await;
        assert!(shutdown.has_begun());
        assert!(!shutdown.grace_over.is_cancelled(), "the grace did not run out");
    }
}
