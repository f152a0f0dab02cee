//! The relayer's generic concurrency helpers, apart from what it does with them: each knows
//! nothing of relays, keys or the store.
//!
//! - `fresh`: a read that may be a little old, made at most once per its freshness however many
//!   ask (the chain's head for the followers, the keys' balances).
//! - `shared_read`: a read that everyone asking at once shares, never older than the asking.
//! - `turns`: how many requests one daemon checks against the node at once, resized with the
//!   keys it holds.
//! - `shutdown`: the one owner of the relayer's tasks and of their shutdown, in named phases.

pub(crate) mod fresh;
pub(crate) mod shared_read;
pub(crate) mod shutdown;
pub(crate) mod turns;

use std::sync::Mutex;

/// Locks `mutex`, reusing it if a panic poisoned it: the data behind these locks (sets of ids)
/// stays consistent whatever a panicking holder was doing.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
