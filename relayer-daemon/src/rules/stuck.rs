//! What to do with a relay whose transaction is not mined: pure, from the relay's latest
//! transaction, the chain's head and the fee suggestion. A relay waiting longer than the
//! configured blocks or seconds is sent again at the same relayer nonce with fees raised by at
//! least the bump nodes require (geth's `txpool.pricebump`, 10%), up to the fee cap; past the
//! request's deadline, or with the cap reached, its nonce is cancelled by a zero-value
//! self-transfer instead, so later relays are not blocked behind it. Cancellations have a cap of
//! their own: past it, the relay waits (for the fees to fall, or the transaction to be mined).

use super::fees::Fees;

/// The smallest fee rise nodes accept for a replacement (geth's default `txpool.pricebump`).
pub(crate) const MIN_BUMP_PERCENT: u64 = 10;

/// The operator's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    /// A transaction not mined this many blocks after it was sent is stuck.
    pub(crate) after_blocks: u64,
    /// …or this many seconds after.
    pub(crate) after_secs: u64,
    /// Fee rise per replacement, in percent (at least [`MIN_BUMP_PERCENT`]).
    pub(crate) bump_percent: u64,
    /// The highest max fee per gas a replacement may pay.
    pub(crate) max_fee_wei: u128,
    /// The highest max fee per gas a cancellation may pay.
    pub(crate) max_cancel_fee_wei: u128,
}

/// The relay's latest transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Latest {
    /// Its fees.
    pub(crate) fees: Fees,
    /// The chain's head when it was sent (unknown for records of earlier versions).
    pub(crate) sent_block: Option<u64>,
    /// When it was sent (Unix seconds).
    pub(crate) sent_at: u64,
    /// It is already the cancellation.
    pub(crate) is_cancel: bool,
}

/// What to do with a stuck relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Send the relay again with these fees.
    Replace(Fees),
    /// Cancel its nonce with a self-transfer paying these fees.
    Cancel(Fees),
    /// Nothing within the caps outbids what holds the nonce: wait.
    Wait,
}

impl Policy {
    /// Whether `latest` has waited too long at head `block` and wall-clock time `now`.
    pub(crate) fn is_stuck(&self, latest: &Latest, block: u64, now: u64) -> bool {
        let by_blocks = latest.sent_block.is_some_and(|sent| block >= sent.saturating_add(self.after_blocks));
        by_blocks || now >= latest.sent_at.saturating_add(self.after_secs)
    }

    /// The plan for a stuck relay. `deadline` is the request's (0: none), `block_time` the
    /// earliest timestamp the next block can have, `suggested` the node's fee suggestion.
    pub(crate) fn plan(&self, latest: &Latest, deadline: u64, block_time: u64, suggested: Fees) -> Plan {
        let bumped = bump(latest.fees, self.bump_percent.max(MIN_BUMP_PERCENT));
        let wanted = higher(bumped, suggested);
        let expired = deadline != 0 && block_time > deadline;
        if latest.is_cancel || expired {
            return self.cancel(bumped, wanted);
        }
        if wanted.max_fee_per_gas <= self.max_fee_wei {
            return Plan::Replace(wanted);
        }
        if bumped.max_fee_per_gas <= self.max_fee_wei {
            // The node suggests more than the cap; the cap still outbids the stuck transaction.
            let cap = self.max_fee_wei;
            return Plan::Replace(Fees {
                max_fee_per_gas: cap,
                max_priority_fee_per_gas: wanted.max_priority_fee_per_gas.min(cap),
            });
        }
        self.cancel(bumped, wanted)
    }

    /// A cancellation paying `wanted`, or its cap when that still outbids the stuck transaction
    /// (`bumped`): it uses 21,000 gas, not the relay's limit, so its cap may sit above the
    /// relays' (the default is twice it), but uncapped, one stuck relay could spend anything.
    fn cancel(&self, bumped: Fees, wanted: Fees) -> Plan {
        let cap = self.max_cancel_fee_wei;
        if wanted.max_fee_per_gas <= cap {
            Plan::Cancel(wanted)
        } else if bumped.max_fee_per_gas <= cap {
            Plan::Cancel(Fees {
                max_fee_per_gas: cap,
                max_priority_fee_per_gas: wanted.max_priority_fee_per_gas.min(cap),
            })
        } else {
            Plan::Wait
        }
    }
}

/// `fees` raised by `percent`, rounded up, and by at least 1 wei each.
fn bump(fees: Fees, percent: u64) -> Fees {
    let raise = |fee: u128| {
        let raised = fee.saturating_mul(100 + u128::from(percent)).div_ceil(100);
        raised.max(fee.saturating_add(1))
    };
    Fees {
        max_fee_per_gas: raise(fees.max_fee_per_gas),
        max_priority_fee_per_gas: raise(fees.max_priority_fee_per_gas),
    }
}

/// The higher of each fee, with the tip never above the max fee.
fn higher(a: Fees, b: Fees) -> Fees {
    let max_fee_per_gas = a.max_fee_per_gas.max(b.max_fee_per_gas);
    Fees {
        max_fee_per_gas,
        max_priority_fee_per_gas: a
            .max_priority_fee_per_gas
            .max(b.max_priority_fee_per_gas)
            .min(max_fee_per_gas),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy {
        after_blocks: 3,
        after_secs: 60,
        bump_percent: 10,
        max_fee_wei: 1_000,
        max_cancel_fee_wei: 2_000,
    };

    fn fees(max_fee_per_gas: u128, max_priority_fee_per_gas: u128) -> Fees {
        Fees { max_fee_per_gas, max_priority_fee_per_gas }
    }

    fn latest(max_fee: u128, tip: u128) -> Latest {
        Latest { fees: fees(max_fee, tip), sent_block: Some(10), sent_at: 1_000, is_cancel: false }
    }

    #[test]
    fn stuck_after_the_blocks_or_the_seconds() {
        let sent = latest(100, 10);
        assert!(!POLICY.is_stuck(&sent, 12, 1_059));
        assert!(POLICY.is_stuck(&sent, 13, 1_000), "three blocks");
        assert!(POLICY.is_stuck(&sent, 10, 1_060), "a minute without a block");
        let unknown_block = Latest { sent_block: None, ..sent };
        assert!(!POLICY.is_stuck(&unknown_block, 99, 1_059));
    }

    #[test]
    fn a_replacement_pays_at_least_ten_percent_more_or_the_suggestion() {
        assert_eq!(POLICY.plan(&latest(100, 10), 0, 0, fees(50, 1)), Plan::Replace(fees(110, 11)));
        assert_eq!(POLICY.plan(&latest(100, 10), 0, 0, fees(300, 2)), Plan::Replace(fees(300, 11)));
        // Rounded up, and at least one wei more, so tiny fees still rise.
        assert_eq!(POLICY.plan(&latest(101, 1), 0, 0, fees(0, 0)), Plan::Replace(fees(112, 2)));
        let generous = Policy { bump_percent: 5, ..POLICY };
        assert_eq!(
            generous.plan(&latest(100, 10), 0, 0, fees(0, 0)),
            Plan::Replace(fees(110, 11)),
            "10% at least"
        );
    }

    #[test]
    fn the_cap_bounds_replacements_and_then_the_nonce_is_cancelled() {
        assert_eq!(POLICY.plan(&latest(900, 10), 0, 0, fees(2_000, 5)), Plan::Replace(fees(1_000, 11)));
        assert_eq!(POLICY.plan(&latest(950, 10), 0, 0, fees(0, 0)), Plan::Cancel(fees(1_045, 11)));
    }

    #[test]
    fn past_the_deadline_the_nonce_is_cancelled() {
        assert_eq!(POLICY.plan(&latest(100, 10), 500, 500, fees(0, 0)), Plan::Replace(fees(110, 11)));
        assert_eq!(POLICY.plan(&latest(100, 10), 500, 501, fees(120, 1)), Plan::Cancel(fees(120, 11)));
        let cancelling = Latest { is_cancel: true, ..latest(120, 11) };
        assert_eq!(
            POLICY.plan(&cancelling, 0, 0, fees(0, 0)),
            Plan::Cancel(fees(132, 13)),
            "a stuck cancel rises too"
        );
    }

    #[test]
    fn cancellations_stop_at_their_own_cap() {
        // The node suggests more than the cap: the cap, which still outbids the stuck one.
        assert_eq!(POLICY.plan(&latest(100, 10), 500, 501, fees(5_000, 1)), Plan::Cancel(fees(2_000, 11)));
        let cancelling = |max_fee| Latest { is_cancel: true, ..latest(max_fee, 11) };
        assert_eq!(POLICY.plan(&cancelling(1_800), 0, 0, fees(0, 0)), Plan::Cancel(fees(1_980, 13)));
        // A cancellation that a 10% rise would take past the cap cannot be outbid within it.
        assert_eq!(POLICY.plan(&cancelling(1_900), 0, 0, fees(0, 0)), Plan::Wait);
        assert_eq!(POLICY.plan(&cancelling(2_000), 0, 0, fees(0, 0)), Plan::Wait);
        assert_eq!(POLICY.plan(&latest(1_900, 10), 500, 501, fees(0, 0)), Plan::Wait);
    }
}
