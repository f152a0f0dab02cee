//! The reconciler's decision for one relay left `reserved` or `sent`: pure, from what the chain
//! says about it. The relayer gathers the facts (in an order that keeps them consistent: the
//! relayer's mined nonce first, the receipt before asking whether the node knows the
//! transaction) and applies the decision to the store.
//!
//! Cases it ends: a process killed between reserving and sending; a send that timed out where
//! the node never took the transaction; a transaction that is never mined. A recorded
//! transaction is never dropped while its nonce is open: it is sent again at that nonce. A relay
//! a standby handed off and nobody sent yet is not abandoned but waiting: it is left to the
//! key's holder's hand-off sender, however long its node was away.

use super::status::Outcome;

/// What the chain says about one unfinished relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The relay has a transaction hash (it was, or may have been, sent).
    pub(crate) has_hash: bool,
    /// The receipt of that hash: `gasUsed × effectiveGasPrice` plus any L1 data fee, and how the
    /// relay ended.
    pub(crate) receipt: Option<(u128, Outcome)>,
    /// The signer's forwarder nonce is above the request's: the request ran (by us or not).
    pub(crate) request_ran: bool,
    /// The relay is handed off (a standby accepted it, or its transaction was withheld) and
    /// waits for its key's holder to send it.
    pub(crate) handed_off: bool,
    /// The relayer account's mined nonce is above the transaction's: its nonce is used up.
    pub(crate) relayer_nonce_used: bool,
    /// The node has the transaction (pending or mined).
    pub(crate) node_knows_tx: bool,
    /// The node has another relay's transaction at the same relayer nonce on the same key (a
    /// relay sent there after the node lost this one): this one is not sent again over it.
    pub(crate) nonce_pending_for_another: bool,
}

/// What to do with the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Mined: settle with the receipt's cost.
    Settle {
        /// Wei paid.
        cost_wei: u128,
        /// How it ended.
        outcome: Outcome,
    },
    /// The request ran without a receipt of ours: keep the worst case charged, keep the slot.
    Executed,
    /// It will never be mined: release the reservation and free the request.
    Drop {
        /// Why, for the record.
        reason: &'static str,
        /// The sender's local nonce may point past a gap: re-read it from the node.
        resync: bool,
    },
    /// Recorded, but no transaction of it is with the node and its relayer nonce is still
    /// unused: send it again at that nonce (a fee replacement, or the cancellation the stuck
    /// policy picks). Not dropped: the daemon that recorded it (this one, or a stalled one that
    /// lost the key between its lease check and its submit) may still submit the recorded
    /// transaction, which the nonce would then take with nothing booked for it. Sent again, the
    /// nonce goes to one of the relay's own transactions, whichever is mined, so the books
    /// count it; or to another transaction, and then the relay is dropped ([`Decision::Drop`]).
    /// Not over another relay's transaction the node holds at that nonce, which it would knock
    /// out: then it waits for whichever is mined. Nor over one that is no relay's (the key used
    /// by hand or by another tool): sent only while the node's counts show the nonce free
    /// ([`crate::rules::nonce::Resend::IfFree`]).
    Resend,
    /// Still pending: look again next pass.
    Wait,
    /// Handed off and not sent: its key's holder sends it when it can (its hand-off sender),
    /// so it is not dropped; its client was answered 202 with its id.
    LeaveToHolder,
}

/// The decision for a relay with these facts.
pub(crate) fn decide(facts: &Facts) -> Decision {
    if let Some((cost_wei, outcome)) = facts.receipt {
        return Decision::Settle { cost_wei, outcome };
    }
    if facts.request_ran {
        return Decision::Executed;
    }
    if !facts.has_hash && facts.handed_off {
        return Decision::LeaveToHolder;
    }
    if !facts.has_hash {
        return Decision::Drop { reason: "never sent (the relayer stopped before sending)", resync: false };
    }
    if facts.relayer_nonce_used {
        return Decision::Drop { reason: "its relayer nonce was used by another transaction", resync: false };
    }
    if !facts.node_knows_tx && !facts.nonce_pending_for_another {
        return Decision::Resend;
    }
    Decision::Wait
}

#[cfg(test)]
mod tests {
    use super::*;

    const PENDING: Facts = Facts {
        has_hash: true,
        receipt: None,
        request_ran: false,
        handed_off: false,
        relayer_nonce_used: false,
        node_knows_tx: true,
        nonce_pending_for_another: false,
    };

    #[test]
    fn each_case_ends_the_right_way() {
        assert_eq!(decide(&PENDING), Decision::Wait);
        assert_eq!(
            decide(&Facts { receipt: Some((7, Outcome::Reverted)), request_ran: true, ..PENDING }),
            Decision::Settle { cost_wei: 7, outcome: Outcome::Reverted },
            "a receipt wins"
        );
        assert_eq!(decide(&Facts { request_ran: true, node_knows_tx: false, ..PENDING }), Decision::Executed);
        assert_eq!(
            decide(&Facts { has_hash: false, request_ran: true, node_knows_tx: false, ..PENDING }),
            Decision::Executed,
            "killed after sending, before recording the hash: the request ran"
        );
        assert!(matches!(
            decide(&Facts { has_hash: false, node_knows_tx: false, ..PENDING }),
            Decision::Drop { resync: false, .. }
        ));
        assert_eq!(
            decide(&Facts { has_hash: false, node_knows_tx: false, handed_off: true, ..PENDING }),
            Decision::LeaveToHolder,
            "handed off and not sent yet: waiting for its key's holder, not abandoned"
        );
        assert_eq!(
            decide(&Facts {
                has_hash: false,
                node_knows_tx: false,
                handed_off: true,
                request_ran: true,
                ..PENDING
            }),
            Decision::Executed,
            "a hand-off whose request ran elsewhere is closed as before"
        );
        assert!(matches!(
            decide(&Facts { relayer_nonce_used: true, ..PENDING }),
            Decision::Drop { resync: false, .. }
        ));
        assert_eq!(
            decide(&Facts { node_knows_tx: false, ..PENDING }),
            Decision::Resend,
            "its nonce still open: the recorded transaction may yet be submitted"
        );
        assert_eq!(
            decide(&Facts { node_knows_tx: false, nonce_pending_for_another: true, ..PENDING }),
            Decision::Wait,
            "another relay's transaction at its nonce is with the node: not knocked out"
        );
        assert!(
            matches!(
                decide(&Facts { node_knows_tx: false, relayer_nonce_used: true, ..PENDING }),
                Decision::Drop { resync: false, .. }
            ),
            "its nonce taken by another transaction: it can never be mined"
        );
    }
}
