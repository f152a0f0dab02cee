//! Where a key's sends spend their time, summed since the process started: waiting for the
//! key's lock, asking the node for the nonce, recording the transaction in the store under the
//! lease, and the node's answer to the submission. The last three are spent holding the lock,
//! so they bound one key's rate (`relayer_send_seconds_total{phase}` on `/metrics`; the
//! cluster benchmark reads them per relay).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

/// A phase of a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for the key's lock (other sends on the key ahead of this one).
    Waiting,
    /// Asking the node for the next nonce (only when the sender does not know it).
    Nonce,
    /// Recording the signed transaction in the store, under the key's lease.
    Recording,
    /// Submitting it: the node's answer.
    Submitting,
}

impl Phase {
    /// Every phase, in the order a send goes through them.
    pub(crate) const ALL: [Self; 4] = [Self::Waiting, Self::Nonce, Self::Recording, Self::Submitting];

    /// The `phase` label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Nonce => "nonce",
            Self::Recording => "recording",
            Self::Submitting => "submitting",
        }
    }
}

/// Microseconds spent in each [`Phase`], and the sends counted.
#[derive(Debug, Default)]
pub(crate) struct Timings {
    micros: [AtomicU64; 4],
    sends: AtomicU64,
}

impl Timings {
    /// Adds `spent` to `phase`.
    pub(crate) fn add(&self, phase: Phase, spent: Duration) {
        let micros = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
        self.micros[phase as usize].fetch_add(micros, Ordering::Relaxed);
    }

    /// Counts a first send (whatever its outcome).
    pub(crate) fn sent(&self) {
        self.sends.fetch_add(1, Ordering::Relaxed);
    }

    /// The sends counted, and the seconds spent in each phase (in [`Phase::ALL`]'s order).
    pub(crate) fn read(&self) -> (u64, [f64; 4]) {
        let seconds = std::array::from_fn(|i| self.micros[i].load(Ordering::Relaxed) as f64 / 1e6);
        (self.sends.load(Ordering::Relaxed), seconds)
    }
}
