//! A relay's life in the store: the reservation against the budget, its transactions (the
//! first, replacements, the cancellation), and how it ends (settled, released, executed,
//! dropped).

mod finish;
mod lanes;
mod reserve;
mod send;

/// Gas of a plain transfer: what a cancellation (a zero-value self-transfer) uses.
pub(crate) const TRANSFER_GAS: u64 = 21_000;
