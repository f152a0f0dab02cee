//! Background work that must finish before the process exits (relays whose client went away,
//! receipt settlements): a counter of running tasks that shutdown waits on.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::sync::Notify;

/// Tracks spawned tasks.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    running: AtomicUsize,
    idle: Notify,
}

impl Tasks {
    /// Spawns `future` on the runtime and tracks it until it ends.
    pub(crate) fn spawn<F>(self: &Arc<Self>, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.running.fetch_add(1, Ordering::SeqCst);
        let tasks = Arc::clone(self);
        tokio::spawn(async move {
            let output = future.await;
            if tasks.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                tasks.idle.notify_waiters();
            }
            output
        })
    }

    /// Number of tasks still running.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Waits until no tracked task is running.
    pub(crate) async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            if self.running() == 0 {
                return;
            }
            idle.await;
        }
    }
}
