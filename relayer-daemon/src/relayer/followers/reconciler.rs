//! The reconciler: every `RECONCILE_INTERVAL_SECS`, the relays a crash or a lost answer left open
//! past `RECONCILE_GRACE_SECS` (none a handler or a follower of this process is working on). Its
//! I/O gathers the facts about each for the pure [`crate::rules::reconcile`] and applies its
//! decision: settled from a receipt, closed, sent again at its relayer nonce, dropped, or left
//! to a follower. It also prunes what the retention settings say is old enough.

use std::{
    collections::{HashMap, hash_map::Entry},
    sync::Arc,
};

use alloy::primitives::Address;

use crate::{
    chain::Receipt,
    error::Result,
    relayer::Relayer,
    rules::nonce::Resend,
    rules::reconcile::{self, Decision, Facts},
    store::{Pruned, RelayRecord, SentTx},
    time,
};

impl Relayer {
    /// Starts the reconciler: a pass now (ending what a previous run left), then one every
    /// `RECONCILE_INTERVAL_SECS`, until shutdown begins.
    pub(crate) fn spawn_reconciler(self: &Arc<Self>) {
        let relayer = Arc::clone(self);
        let interval = self.config.followers.reconcile_interval;
        self.shutdown.spawn_background(async move {
            loop {
                if let Err(error) = relayer.reconcile().await {
                    tracing::warn!(error = %error.detail(), "reconciling relays failed; retrying later");
                }
                if let Err(error) = relayer.prune().await {
                    tracing::warn!(error = %error.detail(), "pruning the store failed; retrying later");
                }
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    () = relayer.shutdown.begun() => return,
                }
            }
        });
    }

    /// Forgets what the retention settings say is old enough: the store stays the size of the
    /// retention window's traffic.
    async fn prune(&self) -> Result<()> {
        let now = time::now();
        let calldata_before = now.saturating_sub(self.config.store.calldata_retention_secs);
        let relays_before = now.saturating_sub(self.config.store.relay_retention_secs);
        let pruned = self.stores.db(move |store| store.prune(calldata_before, relays_before, now)).await?;
        if pruned != Pruned::default() {
            tracing::info!(calldata = pruned.calldata, relays = pruned.relays, "pruned finished relays");
        }
        Ok(())
    }

    /// One reconciler pass over the relays still open after the grace period, except those a
    /// handler or a replacement of this process is working on. One still pending gets a
    /// follower (after a restart, its stuck transaction is replaced like any other).
    async fn reconcile(self: &Arc<Self>) -> Result<()> {
        let horizon = time::now().saturating_sub(self.config.followers.reconcile_grace_secs);
        let open = self.stores.db(move |store| store.open_since(horizon)).await?;
        // Relays on a key another daemon holds are that daemon's: only it knows which it is
        // sending right now.
        let open: Vec<RelayRecord> = self
            .in_flight
            .idle(open, |record| (record.signer, record.forwarder_nonce))
            .into_iter()
            .filter(|record| self.looks_after(record))
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        // Each lane's mined nonce is read before any receipt of its relays below: a nonce seen
        // mined here is mined before those reads.
        let mut mined_nonces: HashMap<Address, u64> = HashMap::new();
        for record in &open {
            let lane = self.key_of(record);
            if let Entry::Vacant(entry) = mined_nonces.entry(lane) {
                entry.insert(self.chain.mined_nonce(lane).await?);
            }
        }
        for record in open {
            let id = record.id;
            let mined_nonce = mined_nonces[&self.key_of(&record)];
            let (facts, mined) = self.facts(&record, mined_nonce).await?;
            let decision = reconcile::decide(&facts);
            let now = time::now();
            match decision {
                Decision::Wait => {
                    self.follow(id);
                    continue;
                }
                // Its hand-off sender's, which sends it once the node answers.
                Decision::LeaveToHolder => continue,
                Decision::Settle { .. } => {
                    if let Some((tx, receipt)) = mined {
                        self.settle(&record, tx.hash, &receipt).await?;
                    }
                }
                Decision::Executed => {
                    let seen = record.clone();
                    self.stores.db(move |store| store.close_as_seen(&seen, true, "", now)).await?;
                }
                Decision::Resend => {
                    // The latest recorded transaction: every relay with a hash has one. None of
                    // its transactions is with the node, so nothing of the relay's is replaced:
                    // sent only while the nonce is free. A transaction the node holds there that
                    // is no relay's (the operator's, another tool's on the same key) would be
                    // knocked out by a higher fee; it is left to be mined, and the relay dropped.
                    if let Some(latest) = record.txs.last() {
                        let block = self.chain.block_number().await?;
                        let when = Resend::IfFree { held_by_another: facts.nonce_pending_for_another };
                        self.send_again_now(&record, latest, block, when).await?;
                    }
                    self.follow(id);
                }
                Decision::Drop { reason, resync } => {
                    if resync && let Some(sender) = self.lane_of(&record) {
                        sender.resync().await;
                    }
                    let seen = record.clone();
                    self.stores.db(move |store| store.close_as_seen(&seen, false, reason, now)).await?;
                }
            }
            tracing::info!(
                id,
                relay = %record.relay_id,
                lane = ?record.lane,
                signer = %record.signer,
                forwarder_nonce = %record.forwarder_nonce,
                tx = ?record.tx_hash,
                ?decision,
                "reconciled a relay"
            );
        }
        Ok(())
    }

    /// Gathers the facts about one unfinished relay, with the receipt that settles it if any.
    async fn facts(
        &self,
        record: &RelayRecord,
        mined_nonce: u64,
    ) -> Result<(Facts, Option<(SentTx, Receipt)>)> {
        let request_ran = self.chain.forwarder_nonce(record.signer).await? > record.forwarder_nonce;
        let mined = self.mined(record).await?;
        let receipt = mined.as_ref().map(|(_, receipt)| self.chain.settlement(receipt));
        // Any of its transactions will do: a replacement whose answer was lost may never have
        // reached the node while the transaction it was to replace still waits there.
        let node_knows_tx = if receipt.is_none() && !request_ran {
            let mut knows = false;
            for tx in record.txs.iter().rev() {
                if self.chain.knows_transaction(tx.hash).await? {
                    knows = true;
                    break;
                }
            }
            knows
        } else {
            true
        };
        let relayer_nonce_used = record.relayer_nonce.is_some_and(|nonce| mined_nonce > nonce);
        // Asked only of a relay with no transaction (one recorded is reconciled by its hash), on
        // a key this daemon holds (a key no longer configured has no hand-off sender: dropped).
        let held =
            record.lane.and_then(|lane| self.pool.lane(lane)).is_some_and(|sender| sender.lease().is_some());
        let handed_off = if record.txs.is_empty() && held {
            let id = record.id;
            self.stores.db(move |store| store.is_handed_off(id)).await?
        } else {
            false
        };
        let nonce_pending_for_another = if !node_knows_tx && !relayer_nonce_used {
            self.nonce_pending_for_another(record).await?
        } else {
            false
        };
        let facts = Facts {
            has_hash: !record.txs.is_empty(),
            receipt,
            request_ran,
            handed_off,
            relayer_nonce_used,
            node_knows_tx,
            nonce_pending_for_another,
        };
        Ok((facts, mined))
    }

    /// Whether the node has a transaction of another relay at `record`'s relayer nonce on its
    /// key (sent there after the node lost `record`'s).
    pub(super) async fn nonce_pending_for_another(&self, record: &RelayRecord) -> Result<bool> {
        let Some(nonce) = record.relayer_nonce else { return Ok(false) };
        let (id, lane) = (record.id, record.lane);
        let others = self.stores.db(move |store| store.in_the_pool_at(nonce)).await?;
        for other in others.iter().filter(|other| other.id != id && other.lane == lane) {
            for tx in other.txs.iter().rev() {
                if self.chain.knows_transaction(tx.hash).await? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}
