//! After the checks: stage 12, the reservation of the relay's worst case on the least busy key
//! it may use, and the send under that key's lock (or the hand-off to the key's holder), which
//! hand-offs from standbys reach too ([`Relayer::send_reserved`]).

use std::sync::Arc;

use alloy::{
    primitives::{Address, B256},
    sol_types::SolCall,
};
use kya_core::{api::relayer_view, chain::abi::Forwarder};

use super::pipeline::Checked;
use crate::{
    error::{Error, Result},
    keys::sender::{Outgoing, Sent},
    relayer::{Relayer, relayed::Relayed},
    rules::fees::Fees,
    rules::lanes::least_busy,
    store::{Lease, NewRelay, Refusal, RelayStatus, Reservation, Sending},
    time,
};

impl Relayer {
    /// Stage 12, reserve the worst case (limit × max fee, plus on OP Stack chains the L1 data fee
    /// quoted at block `at` with its headroom) atomically, on the least busy of `lanes`. A copy
    /// of this request reserved meanwhile is answered with its relay (`Err`); another request
    /// with the same nonce is refused.
    pub(super) async fn reserve(
        &self,
        checked: &Checked,
        client: &str,
        lanes: Vec<Address>,
        gas_limit: u64,
        fees: Fees,
        at: u64,
    ) -> Result<std::result::Result<Reservation, Relayed>> {
        let input = Forwarder::executeCall {
            req: checked.body.request.clone(),
            signature: checked.body.signature.clone(),
        }
        .abi_encode();
        let l1_fee_wei = self.l1_fee_reserve(&input, gas_limit, fees, at).await?;
        let new_relay = NewRelay {
            signer: checked.signer(),
            forwarder_nonce: checked.nonce(),
            digest: checked.digest,
            signature: checked.body.signature.clone(),
            deadline: checked.body.request.deadline.to(),
            input: input.into(),
            client_ip: client.to_owned(),
            gas_limit,
            max_fee_wei: fees.max_fee_per_gas,
            priority_fee_wei: fees.max_priority_fee_per_gas,
            l1_fee_wei,
            lanes,
        };
        let (limits, now) = (self.config.budget.limits(), time::now());
        let reserved = self.stores.db(move |store| {
            let reserved = store.reserve(&new_relay, &limits, now)?;
            if let Ok(reservation) = &reserved {
                hand_off_if_late(store, reservation, now);
            }
            Ok(reserved)
        });
        match reserved.await? {
            Ok(reservation) => Ok(Ok(reservation)),
            Err(Refusal::Budget) => Err(Error::BudgetExhausted),
            Err(Refusal::Slice { opens_at }) => Err(Error::slice_spent(opens_at, now)),
            Err(Refusal::SignerShare) => {
                Err(Error::SignerShareExhausted(self.config.budget.signer_share_percent))
            }
            Err(Refusal::ClientShare) => {
                Err(Error::ClientShareExhausted(self.config.budget.client_share_percent))
            }
            Err(Refusal::Duplicate) => self.held(checked).await?.map(Err).ok_or(Error::InvalidSignature),
        }
    }

    /// Moves the accepted relay `id` off `lost` to the least busy key this daemon still holds.
    /// `None` when it holds no other, or the relay is no longer waiting to be sent.
    async fn another_lane(&self, id: i64, lost: Address) -> Result<Option<Address>> {
        let held: Vec<Address> = self.pool.held_lanes().into_iter().filter(|lane| *lane != lost).collect();
        let now = time::now();
        self.stores
            .db(move |store| {
                let Some(next) = least_busy(&held, &store.lane_depths()?) else { return Ok(None) };
                Ok(store.move_to_lane(id, next, now)?.then_some(next))
            })
            .await
    }

    /// Stage 13, send. The signed transaction's hash is on disk before the node can see it: after a
    /// crash or a lost answer, the follower and the reconciler find it by that hash.
    pub(super) async fn send(
        self: &Arc<Self>,
        checked: &Checked,
        reservation: &Reservation,
        gas_limit: u64,
        fees: Fees,
        at: u64,
    ) -> Result<Relayed> {
        let input = Forwarder::executeCall {
            req: checked.body.request.clone(),
            signature: checked.body.signature.clone(),
        }
        .abi_encode();
        let outgoing = Outgoing { to: self.config.chain.forwarder, gas_limit, fees, input: input.into() };
        let (sent, lane) = self
            .send_reserved(reservation.id, &reservation.relay_id, reservation.lane, &outgoing, at, false)
            .await?;
        let hash: B256 = sent.hash;
        tracing::info!(
            function = checked.function,
            signer = %checked.signer(),
            forwarder_nonce = %checked.nonce(),
            relay = %reservation.relay_id,
            %lane,
            tx = %hash,
            relayer_nonce = sent.nonce,
            gas_limit,
            reserved_wei = %reservation.reserved_wei,
            "relay sent"
        );
        Ok(Relayed {
            body: relayer_view::Relayed {
                tx_hash: Some(hash),
                from: checked.body.request.from,
                nonce: checked.body.request.nonce,
                relay_id: Some(reservation.relay_id.clone()),
                status: Some(RelayStatus::Sent.public()),
            },
            sent: true,
        })
    }

    /// Sends the reserved relay `id` on `lane` (on another key this daemon holds, should the
    /// lane's lease go before anything was recorded), recording each signed transaction before
    /// the node sees it, then follows it. A send that fails releases the reservation (a relay
    /// another daemon sent meanwhile is left as it is). `handed_off`: a relay a standby accepted,
    /// whose first record must find it unsent ([`crate::store::Sending::handed_off_first`]).
    /// Returns what was sent, and on which lane.
    pub(crate) async fn send_reserved(
        self: &Arc<Self>,
        id: i64,
        relay_id: &str,
        mut lane: Address,
        outgoing: &Outgoing,
        at: u64,
        handed_off: bool,
    ) -> Result<(Sent, Address)> {
        let relayer = Arc::clone(self);
        let first = Arc::new(std::sync::atomic::AtomicBool::new(handed_off));
        let record = move |signed: Sent, lease: Lease| {
            let relayer = Arc::clone(&relayer);
            let first = first.swap(false, std::sync::atomic::Ordering::SeqCst);
            async move {
                relayer
                    .stores
                    .send_db(move |store| {
                        let sending = Sending {
                            id,
                            relayer_nonce: signed.nonce,
                            tx_hash: signed.hash,
                            block: at,
                            now: time::now(),
                            handed_off_first: first,
                        };
                        store.mark_sent(&sending, &lease)
                    })
                    .await
            }
        };
        let sent = loop {
            let sender = self
                .pool
                .lane(lane)
                .ok_or_else(|| Error::Internal(format!("lane {lane} is not one of this relayer's keys")))?;
            match sender.send(outgoing, &record).await {
                Ok(sent) => break sent,
                Err(Error::Withheld { tx_hash, nonce }) => {
                    // Never submitted: the record is taken back and the relay handed to its key's
                    // holder (it is on the books as accepted again), unless the key's next holder
                    // closed it meanwhile (the request is then free for the client's retry).
                    let now = time::now();
                    let withdrawn = self.stores.db(move |store| store.withdraw(id, tx_hash, now)).await?;
                    tracing::warn!(relay = %relay_id, tx = %tx_hash, relayer_nonce = nonce, withdrawn, "not submitted past the lease's margin; the relay goes to its key's holder");
                    return Err(if withdrawn {
                        Error::Withheld { tx_hash, nonce }
                    } else {
                        Error::NoFreeLane
                    });
                }
                Err(error @ Error::Unconfirmed { .. }) => {
                    // Kept on the books as sent: its follower finds the receipt if the node did
                    // take it, and until then the worst case stays reserved; the reconciler drops
                    // it if the node never had it.
                    self.follow_sent(id, at);
                    return Err(error);
                }
                // The key's lease went (to another daemon, or given back), or the relay is no
                // longer this lane's to send, before anything was recorded on it: nothing was
                // sent, so the relay moves to a key still held, or is released when there is
                // none (unless another daemon, holding its lane now, sent it meanwhile).
                Err(Error::LaneLost(lost)) => match self.another_lane(id, lost).await? {
                    Some(next) => {
                        tracing::info!(relay = %relay_id, from = %lost, to = %next, "the key's lease was lost before sending; moved the relay");
                        lane = next;
                    }
                    None => {
                        let error = Error::NoFreeLane;
                        let reason = error.to_string();
                        self.stores.db(move |store| store.release_unsent(id, &reason, time::now())).await?;
                        return Err(error);
                    }
                },
                Err(error) => {
                    let reason = error.to_string();
                    self.stores.db(move |store| store.release(id, &reason, time::now())).await?;
                    return Err(error);
                }
            }
        };
        self.metrics.accepted();
        self.balances_changed();
        self.follow_sent(id, at);
        Ok((sent, lane))
    }
}

/// On the blocking thread, after `reservation` committed: a reservation whose call passed its
/// deadline (its client answered 503) but committed when the server resumed goes to its key's
/// holder, which sends it ([`crate::store::Store::hand_off_late_reservation`]).
fn hand_off_if_late(store: &crate::store::Store, reservation: &Reservation, now: u64) {
    match store.hand_off_late_reservation(reservation.id, reservation.lane, now) {
        Ok(false) => {}
        Ok(true) => tracing::warn!(
            relay = %reservation.relay_id,
            lane = %reservation.lane,
            "a reservation committed after its call's deadline (the client was answered 503); handed to its key's holder"
        ),
        Err(error) => tracing::warn!(
            relay = %reservation.relay_id,
            error = %error.detail(),
            "a reservation committed after its call's deadline and could not be handed off; the reconciler drops it"
        ),
    }
}
