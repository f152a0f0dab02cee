//! The checks stage: what every `POST /relay` passes through, from its body to its send
//! ([`pipeline`], then [`sending`]: the reservation and the send), and the state the requests
//! checked at once share: the per-IP limit's refusals answered from memory ([`prefilter`]), the
//! turns at the checks on chain, the chain reads they share, and whether the chain charges an
//! L1 data fee ([`l1_fee`]).

pub(crate) mod l1_fee;
pub(crate) mod pipeline;
pub(crate) mod prefilter;
pub(crate) mod sending;

use crate::concurrency::{shared_read::ChecksReads, turns::Turns};
use prefilter::PreFilter;

/// The checks stage's own state.
#[derive(Debug)]
pub(crate) struct Checks {
    /// The per-IP limit's certain refusals, answered from memory before any store access.
    prefilter: PreFilter,
    /// Turns at the checks on chain, as many as the keys held can take, in arrival order.
    turns: Turns,
    /// The reads that relays checked at once share: one call to the node each.
    reads: ChecksReads,
    /// Whether the chain charges an OP Stack L1 data fee, once known.
    op_stack: tokio::sync::OnceCell<bool>,
}

impl Default for Checks {
    fn default() -> Self {
        Self {
            prefilter: PreFilter::default(),
            // Matched to the keys held at each request; none are held yet.
            turns: Turns::new(0),
            reads: ChecksReads::default(),
            op_stack: tokio::sync::OnceCell::new(),
        }
    }
}
