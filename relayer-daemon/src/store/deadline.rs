//! A store call's deadline, as the blocking thread running it sees it. The daemon waits for a
//! call on PostgreSQL at most `DATABASE_CALL_TIMEOUT_MS` (`Stores::db`), then answers without
//! it; but a thread blocked on a server cannot be stopped, and when the server resumes it carries
//! on. So a call the daemon stopped waiting for is *abandoned*: from then on its connection sends
//! nothing more (no statement, no `COMMIT`: its transaction rolls back), and the connection
//! leaves the pool when given back (`pool::Manager::has_broken`), so one whose server hung is
//! never handed out again. A `COMMIT` already sent when the server hung may still land: what
//! each operation does about such a late commit is in docs/relayer.md ("A store call past its
//! deadline").
//!
//! SQLite's calls have no deadline: they wait on no server, a file lock wait is bounded by its
//! busy timeout, and its one connection behind a mutex could not be handed back early anyway.

use std::{
    cell::RefCell,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use crate::error::Error;

/// What a call holds that its abandonment gives back at once, while its thread may stay blocked
/// on a server for good: the pool's slot (`pool::Slot`), so a hung backend costs the pool one
/// slot for one deadline, not for as long as it hangs.
pub(super) trait GivenBack: Send + Sync {
    /// Gives it back; once, however often it is called.
    fn give_back(&self);
}

/// One store call: abandoned once the side waiting for it stopped waiting.
#[derive(Clone, Default)]
pub(crate) struct Call(Arc<CallState>);

#[derive(Default)]
struct CallState {
    abandoned: AtomicBool,
    held: Mutex<Vec<Arc<dyn GivenBack>>>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").field("abandoned", &self.is_abandoned()).finish_non_exhaustive()
    }
}

impl Call {
    /// The waiting side stopped waiting: nothing more is sent for this call, and what it holds
    /// is given back.
    pub(crate) fn abandon(&self) {
        self.0.abandoned.store(true, Ordering::SeqCst);
        let held = std::mem::take(&mut *self.0.held.lock().unwrap_or_else(PoisonError::into_inner));
        held.iter().for_each(|held| held.give_back());
    }

    /// Whether the call was abandoned.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.0.abandoned.load(Ordering::SeqCst)
    }

    /// `held` is given back when this call is abandoned (at once if it was already).
    pub(super) fn hold(&self, held: Arc<dyn GivenBack>) {
        let mut all = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked under the lock `abandon` takes after setting the flag: either it sees `held`
        // in the list, or this sees the flag.
        if self.is_abandoned() {
            drop(all);
            held.give_back();
        } else {
            all.push(held);
        }
    }

    /// The error a round trip of an abandoned call fails with (nobody waits for it: it is logged
    /// at most).
    pub(super) fn refused() -> Error {
        Error::StoreTimedOut("the call was abandoned past its deadline: nothing more is sent for it".into())
    }
}

thread_local! {
    /// The call this thread runs, while it runs one ([`serving`]).
    static CURRENT: RefCell<Option<Call>> = const { RefCell::new(None) };
}

/// Puts the thread's previous call back when a job ends, even by a panic.
struct Restore(Option<Call>);

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.set(self.0.take());
    }
}

/// Runs `job` as `call` (`None`: as a call nobody abandons): the connections the store takes for
/// it serve `call`.
pub(super) fn serving<T>(call: Option<Call>, job: impl FnOnce() -> T) -> T {
    let _restore = Restore(CURRENT.replace(call));
    job()
}

/// The call this thread runs (a fresh one, never abandoned, outside [`serving`]).
pub(super) fn current() -> Call {
    CURRENT.with_borrow(|call| call.clone().unwrap_or_default())
}

/// Whether the call this thread runs was abandoned: a store operation that finished after its
/// caller stopped waiting (its commit landed late).
pub(crate) fn current_abandoned() -> bool {
    CURRENT.with_borrow(|call| call.as_ref().is_some_and(Call::is_abandoned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_sees_its_call_and_the_thread_forgets_it_after() {
        let call = Call::default();
        assert!(!current_abandoned());
        serving(Some(call.clone()), || {
            assert!(!current_abandoned());
            call.abandon();
            assert!(current_abandoned() && current().is_abandoned());
            serving(None, || assert!(!current_abandoned(), "a detached job is nobody's"));
            assert!(current_abandoned(), "restored after the detached job");
        });
        assert!(!current_abandoned() && !current().is_abandoned());
    }

    #[derive(Default)]
    struct Counted(std::sync::atomic::AtomicU32);

    impl GivenBack for Counted {
        fn give_back(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn what_a_call_holds_is_given_back_when_it_is_abandoned_or_at_once_after() {
        let (call, held) = (Call::default(), Arc::new(Counted::default()));
        call.hold(held.clone());
        assert_eq!(held.0.load(Ordering::SeqCst), 0, "held while the call runs");
        call.abandon();
        assert_eq!(held.0.load(Ordering::SeqCst), 1, "given back on abandonment");
        call.abandon();
        assert_eq!(held.0.load(Ordering::SeqCst), 1, "once");
        let late = Arc::new(Counted::default());
        call.hold(late.clone());
        assert_eq!(late.0.load(Ordering::SeqCst), 1, "held after abandonment: given back at once");
    }
}
