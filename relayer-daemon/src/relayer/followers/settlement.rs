//! After the send: a follower per sent relay reads the receipts of its transactions once per new
//! block, settles the budget with what the mined one cost, and sends a stuck one again (higher
//! fees at the same relayer nonce, or a cancellation: [`crate::rules::stuck`] decides). What a
//! crash or a lost answer left open is the reconciler's ([`super::reconciler`]), which settles
//! and sends again through the same steps.

use std::{sync::Arc, time::Instant};

use alloy::primitives::{Address, B256, Bytes};

use crate::{
    chain::Receipt,
    concurrency::fresh::HEAD_FRESH,
    error::Result,
    keys::sender::{Outgoing, Sender},
    relayer::Relayer,
    rules::follow::{self, LastLook},
    rules::nonce::{AfterReplace, Resend},
    rules::stuck::{Latest, Plan},
    store::{
        Lease, Outcome, RelayRecord, ReplaceRefusal, Replacement, SentTx, Settlement, TRANSFER_GAS, TxKind,
    },
    time,
};

/// What one look at a followed relay found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Look {
    /// It is settled or otherwise closed: stop following.
    Closed,
    /// Still waiting.
    Waiting,
    /// A transaction was just sent again: it is looked for from the next block on.
    Resent,
}

/// Removes a relay from the followed set when its follower ends.
struct Followed<'a> {
    relayer: &'a Relayer,
    id: i64,
}

impl Drop for Followed<'_> {
    fn drop(&mut self) {
        self.relayer.followers.stop_following(self.id);
    }
}

impl Relayer {
    /// Follows the relay `id` in the background until it is closed (or shutdown ends), unless
    /// a follower already does; its first look is at once.
    pub(crate) fn follow(self: &Arc<Self>, id: i64) {
        self.follow_from(id, None);
    }

    /// [`Relayer::follow`] for a relay whose transaction was just sent after the checks read
    /// block `block`: it cannot be in that block or an earlier one, so the first look waits for
    /// a later head.
    pub(crate) fn follow_sent(self: &Arc<Self>, id: i64, block: u64) {
        self.follow_from(id, Some(block));
    }

    fn follow_from(self: &Arc<Self>, id: i64, not_before: Option<u64>) {
        if !self.followers.start_following(id) {
            return;
        }
        let relayer = Arc::clone(self);
        self.shutdown.spawn_follower(async move {
            let _followed = Followed { relayer: &relayer, id };
            relayer.follow_until_closed(id, not_before).await;
        });
    }

    /// Looks at the relay at every new head (the daemon's head is read once for every follower:
    /// [`Self::head`]), or after [`follow::FOLLOW_MAX_PAUSE`] at the latest, until it
    /// is closed.
    async fn follow_until_closed(&self, id: i64, not_before: Option<u64>) {
        let mut last = not_before.map(|block| (Some(block), Instant::now()));
        let mut unknown = None;
        loop {
            let head = match last {
                None => self.head().await,
                Some((then, at)) => self.next_head(then, at).await,
            };
            match self.look(id, head, &mut unknown).await {
                Ok(Look::Closed) => return,
                Ok(Look::Waiting | Look::Resent) => {}
                Err(error) => {
                    tracing::warn!(id, error = %error.detail(), "following a relay failed; retrying")
                }
            }
            last = Some((head, Instant::now()));
        }
    }

    /// The chain's head as this daemon last read it, `None` if the node did not answer.
    async fn head(&self) -> Option<u64> {
        match self.followers.head.get(|| self.chain.block_number()).await {
            Ok(head) => Some(head),
            Err(error) => {
                tracing::debug!(error = %error.detail(), "reading the chain's head failed");
                None
            }
        }
    }

    /// Waits until a follower whose last look saw head `then` at `at` looks again
    /// ([`follow::look_again`]); returns the head then.
    async fn next_head(&self, then: Option<u64>, at: Instant) -> Option<u64> {
        loop {
            tokio::time::sleep(HEAD_FRESH).await;
            let head = self.head().await;
            if follow::look_again(LastLook { head: then, ago: at.elapsed() }, head) {
                return head;
            }
        }
    }

    /// One look, with the chain's head at `head` (`None`: read it now): a receipt of any of its
    /// transactions settles it; a stuck one is sent again. `unknown` is the hash of its latest
    /// transaction if the node did not know it at the look before.
    async fn look(&self, id: i64, head: Option<u64>, unknown: &mut Option<B256>) -> Result<Look> {
        let Some(record) = self.stores.db(move |store| store.relay(id)).await? else {
            return Ok(Look::Closed);
        };
        if !record.status.is_open() {
            return Ok(Look::Closed);
        }
        if !self.looks_after(&record) {
            // Its key's lease went to another daemon, which follows the key's relays from now on.
            return Ok(Look::Closed);
        }
        if let Some((tx, receipt)) = self.mined(&record).await? {
            self.settle(&record, tx.hash, &receipt).await?;
            return Ok(Look::Closed);
        }
        let Some(latest) = record.txs.last() else { return Ok(Look::Waiting) };
        if self.shutdown.has_begun() {
            return Ok(Look::Waiting);
        }
        let block = match head {
            Some(head) => head,
            None => self.chain.block_number().await?,
        };
        let waiting = latest_of(latest);
        if !self.followers.stuck.is_stuck(&waiting, block, time::now()) {
            return Ok(Look::Waiting);
        }
        if !self.chain.knows_transaction(latest.hash).await? {
            if record.txs.len() == 1 {
                // The relay's first transaction, which the node no longer has: dropped from its
                // pool (evicted under load). Sent again now, as a stuck one the node has would
                // be, but only while its nonce is free: it may have gone to another relay since
                // (a send after the sender re-read the node's pending count), whose transaction
                // this would knock out. Nothing is taken from the relay's history, so whichever
                // of its transactions is mined (the first may yet reach the node, from a node
                // behind a load balancer or a daemon frozen before its submit) is settled by its
                // receipt. Left waiting, it fell to the reconciler, whose grace is minutes.
                *unknown = None;
                let held_by_another = self.nonce_pending_for_another(&record).await?;
                let when = Resend::IfFree { held_by_another };
                return self.send_again_now(&record, latest, block, when).await;
            }
            // A replacement whose answer was lost and that never reached the node: the relay is
            // again on the transaction before it, replaced afresh next time. One answer is no
            // proof: a node behind a provider's load balancer may not yet have what another of
            // its nodes took, and a transaction dropped from the history while a node has it
            // would be mined with no receipt of ours to show (the relay closed as `executed`,
            // charged its worst case). So it is taken back only when the node still does not
            // know it at the next look, a head or `FOLLOW_MAX_PAUSE` later.
            if unknown.replace(latest.hash) == Some(latest.hash) {
                let (hash, now) = (latest.hash, time::now());
                self.stores.db(move |store| store.unreplace(id, hash, now)).await?;
                *unknown = None;
            }
            return Ok(Look::Waiting);
        }
        *unknown = None;
        self.send_again_now(&record, latest, block, Resend::Always).await
    }

    /// Sends `record` again at its relayer nonce, after its `latest` transaction, as the stuck
    /// policy plans: fees raised, or the cancellation; `when` says whether only while the nonce
    /// is free.
    pub(super) async fn send_again_now(
        &self,
        record: &RelayRecord,
        latest: &SentTx,
        block: u64,
        when: Resend,
    ) -> Result<Look> {
        // The next block is stamped no earlier than the head nor (on a live chain) than now: a
        // request past its deadline by either clock would only revert, at the relayer's cost.
        let (_, block_time) = self.chain.head().await?;
        let suggested = self.chain.fees().await?;
        let plan = self.followers.stuck.plan(
            &latest_of(latest),
            record.deadline,
            block_time.max(time::now()),
            suggested,
        );
        self.send_again(record, plan, block, when).await
    }

    /// The first of the relay's transactions (newest first: a replacement is the likelier one)
    /// with a receipt.
    pub(super) async fn mined(&self, record: &RelayRecord) -> Result<Option<(SentTx, Receipt)>> {
        for tx in record.txs.iter().rev() {
            if let Some(receipt) = self.chain.receipt(tx.hash).await? {
                return Ok(Some((tx.clone(), receipt)));
            }
        }
        Ok(None)
    }

    /// Sends the relay's transaction again per `plan`, at its relayer nonce. A fee replacement
    /// the budget or a share cannot cover becomes a cancellation; a cancellation they cannot
    /// cover waits (its fees are capped, and the relay may still be mined as it is).
    async fn send_again(&self, record: &RelayRecord, plan: Plan, block: u64, when: Resend) -> Result<Look> {
        let (mut kind, fees) = match plan {
            Plan::Replace(fees) if record.input.is_some() => (TxKind::Relay, fees),
            // A record of an earlier version has no calldata to send again: cancel it.
            Plan::Replace(fees) | Plan::Cancel(fees) => (TxKind::Cancel, fees),
            Plan::Wait => {
                tracing::debug!(relay = %record.relay_id, "stuck at the cancellation fee cap; waiting");
                return Ok(Look::Waiting);
            }
        };
        let Some(nonce) = record.relayer_nonce else { return Ok(Look::Waiting) };
        let Some(sender) = self.lane_of(record) else {
            // Its key left the configuration: it can still be settled, not sent again.
            tracing::warn!(relay = %record.relay_id, lane = ?record.lane, "stuck on a key this relayer no longer has");
            return Ok(Look::Waiting);
        };
        // The reconciler leaves the record alone while its new hash is recorded and submitted.
        let _in_flight = self.in_flight.hold((record.signer, record.forwarder_nonce));
        loop {
            let outgoing = self.outgoing(record, sender.address(), kind, fees);
            let (id, limits) = (record.id, self.config.budget.limits());
            let recorded = |hash: B256, lease: Lease| {
                let replacement = Replacement {
                    tx_hash: hash,
                    kind,
                    max_fee_wei: fees.max_fee_per_gas,
                    priority_fee_wei: fees.max_priority_fee_per_gas,
                    sent_block: block,
                };
                async move {
                    let now = time::now();
                    let recorded = self
                        .stores
                        .db(move |store| store.replace(id, &replacement, &limits, now, &lease))
                        .await?;
                    Ok(recorded.map(|_| ()))
                }
            };
            let (hash, step) = match sender.replace(&outgoing, nonce, when, recorded).await? {
                (_, Err(ReplaceRefusal::Closed)) => return Ok(Look::Waiting),
                (_, Err(refused)) if kind == TxKind::Relay => {
                    tracing::warn!(relay = %record.relay_id, ?refused, "the budget or a share cannot cover higher fees; cancelling instead");
                    kind = TxKind::Cancel;
                    continue;
                }
                (_, Err(refused)) => {
                    tracing::warn!(relay = %record.relay_id, ?refused, "the budget or a share cannot cover the cancellation; waiting");
                    return Ok(Look::Waiting);
                }
                // Nothing recorded: the relay waits on its transaction, settled by its receipt
                // or, its nonce taken by another, dropped by the reconciler.
                (_, Ok(AfterReplace::NotFree)) => return Ok(Look::Waiting),
                (hash, Ok(step)) => (hash, step),
            };
            if matches!(
                step,
                AfterReplace::NonceMined
                    | AfterReplace::Underpriced
                    | AfterReplace::Refused
                    | AfterReplace::Withheld
            ) {
                // Not in the node (or, withheld, never submitted): the relay's current
                // transaction is again the one before.
                let now = time::now();
                self.stores.db(move |store| store.unreplace(id, hash, now)).await?;
                return Ok(Look::Waiting);
            }
            if step == AfterReplace::Sent {
                match kind {
                    TxKind::Relay => self.metrics.replaced(),
                    TxKind::Cancel => self.metrics.cancelled(),
                }
                tracing::info!(
                    relay = %record.relay_id,
                    tx = %hash,
                    lane = %sender.address(),
                    relayer_nonce = nonce,
                    max_fee_wei = fees.max_fee_per_gas,
                    ?kind,
                    dropped_by_the_node = matches!(when, Resend::IfFree { .. }),
                    "stuck relay sent again"
                );
            }
            return Ok(Look::Resent);
        }
    }

    /// The key of `record`: its lane (a record written before lanes is the first key's).
    pub(crate) fn key_of(&self, record: &RelayRecord) -> Address {
        record.lane.unwrap_or_else(|| self.address())
    }

    /// The sender of `record`'s transactions; `None` if its key is no longer configured.
    pub(crate) fn lane_of(&self, record: &RelayRecord) -> Option<&Sender> {
        self.pool.lane(self.key_of(record))
    }

    /// Whether this daemon follows and reconciles `record`: see [`crate::keys::lanes::Pool::looks_after`].
    pub(crate) fn looks_after(&self, record: &RelayRecord) -> bool {
        self.pool.looks_after(self.key_of(record))
    }

    /// The transaction that sends `record` again as `kind` with `fees`, from `lane` (a
    /// cancellation is `lane`'s self-transfer at the relay's nonce).
    fn outgoing(
        &self,
        record: &RelayRecord,
        lane: Address,
        kind: TxKind,
        fees: crate::rules::fees::Fees,
    ) -> Outgoing {
        match kind {
            TxKind::Relay => Outgoing {
                to: self.config.chain.forwarder,
                gas_limit: record.gas_limit,
                fees,
                input: record.input.clone().unwrap_or_default(),
            },
            TxKind::Cancel => Outgoing { to: lane, gas_limit: TRANSFER_GAS, fees, input: Bytes::new() },
        }
    }

    /// Settles the relay from the receipt of its transaction `hash`: the real cost (gas and any
    /// L1 data fee) replaces the reservation; a failed registry call gets its reason.
    pub(crate) async fn settle(&self, record: &RelayRecord, hash: B256, receipt: &Receipt) -> Result<()> {
        // A mined transaction paid: the cached balances are out of date.
        self.balances_changed();
        let (cost_wei, outcome) = self.chain.settlement(receipt);
        let block_number = receipt.inner.block_number;
        let revert_reason = match (outcome, &record.input, block_number) {
            (Outcome::CallFailed, Some(input), Some(block)) => {
                self.chain.call_failure(input, block).await.unwrap_or_else(|error| {
                    tracing::warn!(error = %error.detail(), "reading a failed call's reason");
                    None
                })
            }
            _ => None,
        };
        let settlement = Settlement {
            tx_hash: hash,
            cost_wei,
            outcome,
            block_number,
            gas_used: Some(receipt.inner.gas_used),
            revert_reason,
        };
        let (id, now) = (record.id, time::now());
        self.stores.db(move |store| store.settle(id, &settlement, now)).await?;
        if matches!(outcome, Outcome::Mined | Outcome::CallFailed) {
            self.metrics.mined_after(now.saturating_sub(record.created_at));
        }
        tracing::info!(
            relay = %record.relay_id,
            tx = %hash,
            cost_wei = %cost_wei,
            l1_fee_wei = %receipt.l1_fee_wei,
            ?outcome,
            "relay settled"
        );
        Ok(())
    }
}

/// What the stuck policy needs of a relay's latest transaction.
fn latest_of(tx: &SentTx) -> Latest {
    Latest {
        fees: crate::rules::fees::Fees {
            max_fee_per_gas: tx.max_fee_wei,
            max_priority_fee_per_gas: tx.priority_fee_wei,
        },
        sent_block: tx.sent_block,
        sent_at: tx.sent_at,
        is_cancel: tx.kind == TxKind::Cancel,
    }
}
