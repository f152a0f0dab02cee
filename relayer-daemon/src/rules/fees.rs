//! A transaction's EIP-1559 fees: the value the chain suggests and the stuck policy raises.

/// Suggested EIP-1559 fees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fees {
    /// Max fee per gas: the worst-case price the budget reserves at.
    pub(crate) max_fee_per_gas: u128,
    /// Priority fee per gas.
    pub(crate) max_priority_fee_per_gas: u128,
}
