//! The L1 data fee of OP Stack chains (Base, where the relayer is meant to run): every
//! transaction pays it on top of its gas. Whether the chain charges one is learnt once, from the
//! `GasPriceOracle` predeploy's code; a relay's reservation holds the oracle's quote times
//! [`L1_FEE_HEADROOM`]. What a mined transaction really paid is its receipt's `l1Fee`
//! ([`crate::chain::Receipt`]), which settlement books.

use crate::{error::Result, keys::sender::Outgoing, relayer::Relayer, rules::fees::Fees};

/// How many times the oracle's quote a relay reserves for its L1 data fee. The quote is priced
/// at the L1 base fee of the pinned block; the fee charged is priced when the transaction is
/// included, and by then L1's base fee may have risen (by up to 12.5% a block under EIP-1559, so
/// doubling covers about six full L1 blocks, over a minute), the relay may have been replaced at
/// a later L1 price, and the signed bytes differ a little from the unsigned ones quoted (the
/// oracle counts 68 bytes for the signature). Settlement replaces the reservation by the
/// receipt's `l1Fee`, so the headroom only holds budget for the moments in between.
pub const L1_FEE_HEADROOM: u128 = 2;

impl Relayer {
    /// Whether the chain is an OP Stack chain. Learnt at start-up; if the node did not answer
    /// then, asked again (here, by the first relay) until it does.
    pub(crate) async fn op_stack(&self) -> Result<bool> {
        self.checks.op_stack.get_or_try_init(|| detect(self)).await.copied()
    }

    /// The L1 data fee part of a relay's reservation: zero unless the chain is OP Stack; there,
    /// the oracle's quote at block `at` for the transaction the relayer will send with
    /// `gas_limit`, `fees` and `input` (`execute`'s calldata), times [`L1_FEE_HEADROOM`].
    pub(crate) async fn l1_fee_reserve(
        &self,
        input: &[u8],
        gas_limit: u64,
        fees: Fees,
        at: u64,
    ) -> Result<u128> {
        if !self.op_stack().await? {
            return Ok(0);
        }
        let outgoing =
            Outgoing { to: self.config.chain.forwarder, gas_limit, fees, input: input.to_vec().into() };
        let quote = self.chain.l1_fee(self.pool.first().unsigned(&outgoing), at).await?;
        Ok(quote.saturating_mul(L1_FEE_HEADROOM))
    }
}

/// Asks the node whether the `GasPriceOracle` predeploy has code, and logs the answer.
async fn detect(relayer: &Relayer) -> Result<bool> {
    let op_stack = relayer.chain.is_op_stack().await?;
    if op_stack {
        tracing::info!(
            headroom = L1_FEE_HEADROOM as u64,
            "OP Stack chain (the GasPriceOracle predeploy has code): relays reserve the oracle's L1 data \
             fee quote times the headroom and book the receipts' l1Fee"
        );
    } else {
        tracing::info!("not an OP Stack chain (no GasPriceOracle predeploy): relays pay gas only");
    }
    Ok(op_stack)
}
