//! Every daemon accepts: one that holds no key that can pay (a standby, with more daemons than
//! keys) reserves the relay on a key another daemon holds and hands it off through the shared
//! store; that key's holder sends it. The standby answers as if it had sent it once the holder
//! has (200, with the transaction's hash), or 202 with the relay's id past the hand-off wait
//! (`RELAYER_HANDOFF_WAIT_SECS`), as a retry of a relay not sent yet is answered. The holder is
//! woken by PostgreSQL's `NOTIFY`, and looks every [`HANDOFF_POLL`] for one it missed.

use std::{sync::Arc, time::Duration};

use crate::{
    error::{Error, Result},
    keys::sender::Outgoing,
    relayer::Relayer,
    relayer::relayed::Relayed,
    rules::fees::Fees,
    store::{RelayRecord, RelayStatus, Reservation},
    time,
};

/// How often a holder looks for relays handed off to it without being woken.
const HANDOFF_POLL: Duration = Duration::from_secs(1);

/// Why a relay handed off is dropped unsent: it waited past its request's deadline.
const PAST_DEADLINE: &str = "its request's deadline passed while it waited for its key's holder";

impl Relayer {
    /// Stage 13 on a standby: hands `reservation` (on a key another daemon holds) to that
    /// key's holder, and answers once it is sent, or with 202 past the configured
    /// hand-off wait.
    pub(crate) async fn hand_off(&self, reservation: &Reservation) -> Result<Relayed> {
        let (id, lane, now) = (reservation.id, reservation.lane, time::now());
        self.stores.db(move |store| store.hand_off(id, lane, now)).await?;
        tracing::info!(relay = %reservation.relay_id, %lane, "relay handed off to the key's holder");
        self.await_holder(id).await
    }

    /// Waits for the holder of relay `id`'s key to send it (handed off): its answer once the
    /// node has the transaction, the holder's refusal once it failed, or, past the configured
    /// hand-off wait, 202 with its id while the node is not known to have it (not sent, or
    /// recorded and still handed off: the holder forgets the hand-off once the node took it).
    pub(crate) async fn await_holder(&self, id: i64) -> Result<Relayed> {
        let waited_until = tokio::time::Instant::now() + self.config.keys.handoff_wait;
        let mut pause = Duration::from_millis(20);
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
            let (record, handed_off) =
                self.stores.db(move |store| Ok((store.relay(id)?, store.is_handed_off(id)?))).await?;
            let record = record.ok_or(Error::RelayNotFound)?;
            let waiting = tokio::time::Instant::now() < waited_until;
            match record.status {
                RelayStatus::Failed => return Err(unsent(&record)),
                // Closed unsent by the key's holder (its deadline passed while it waited): the
                // request is free again, and a retry is checked afresh.
                RelayStatus::Dropped => return Err(Error::NoFreeLane),
                RelayStatus::Accepted if waiting => {}
                // Recorded, and perhaps not submitted yet (or submitted and its answer lost):
                // the node may still refuse it (the relay then fails, and that refusal is the
                // answer). Past the wait it is answered as not sent yet, never as sent: the
                // client reads what became of it by its id.
                RelayStatus::Sent if handed_off && waiting => {}
                RelayStatus::Sent if handed_off => return Ok(Relayed::not_sent_yet(&record)),
                _ => return Ok(Relayed::of(&record)),
            }
        }
    }

    /// Starts the task that sends the relays handed off to the keys this daemon holds, until
    /// shutdown begins.
    pub(crate) fn spawn_handoff_sender(self: &Arc<Self>) {
        let wake = Arc::new(tokio::sync::Notify::new());
        self.stores.requests().listen_for_handoffs(&wake);
        let relayer = Arc::clone(self);
        self.shutdown.spawn_background(async move {
            loop {
                tokio::select! {
                    () = wake.notified() => {}
                    () = tokio::time::sleep(HANDOFF_POLL) => {}
                    () = relayer.shutdown.begun() => return,
                }
                if let Err(error) = relayer.send_handed_off().await {
                    tracing::warn!(error = %error.detail(), "sending the relays handed off failed; retrying");
                }
            }
        });
    }

    /// One look: each relay handed off on a key this daemon holds, not already being sent here,
    /// is sent by a task of its own (a relay handler's, which shutdown waits for).
    async fn send_handed_off(self: &Arc<Self>) -> Result<()> {
        let held = self.pool.held_lanes();
        if held.is_empty() {
            return Ok(());
        }
        for record in self.stores.db(move |store| store.handed_off(&held)).await? {
            // Held from here: a later look, and the reconciler, leave it to this task. One a
            // handler or an earlier look holds is theirs.
            let Some(guard) = self.in_flight.hold_if_free((record.signer, record.forwarder_nonce)) else {
                continue;
            };
            let relayer = Arc::clone(self);
            self.shutdown.spawn_handler(async move {
                let _in_flight = guard;
                let (id, relay_id) = (record.id, record.relay_id.clone());
                match relayer.send_one_handed_off(record).await {
                    Ok(()) => {
                        if let Err(error) = relayer.stores.db(move |store| store.handed_over(id)).await {
                            tracing::warn!(relay = %relay_id, error = %error.detail(), "forgetting a hand-off failed; retention sweeps it");
                        }
                    }
                    // A relay still unsent (the store or the node failed before its send) stays
                    // handed off, and the next look tries again; one the send closed (released,
                    // or sent by another daemon) is listed no more, and retention forgets it.
                    Err(error) => {
                        tracing::info!(relay = %relay_id, error = %error.detail(), "a relay handed off was not sent");
                    }
                }
            });
        }
        Ok(())
    }

    /// Sends one relay handed off (read again now: another daemon may have sent it, or moved it
    /// to a key this one does not hold, since it was listed).
    async fn send_one_handed_off(self: &Arc<Self>, listed: RelayRecord) -> Result<()> {
        let id = listed.id;
        let Some(record) = self.stores.db(move |store| store.relay(id)).await? else { return Ok(()) };
        let Some(lane) =
            record.lane.filter(|lane| self.pool.lane(*lane).is_some_and(|s| s.lease().is_some()))
        else {
            return Ok(());
        };
        if record.status != RelayStatus::Accepted {
            return Ok(());
        }
        let Some(input) = record.input.clone() else {
            return Err(Error::Internal(format!(
                "relay {} was handed off without its calldata",
                record.relay_id
            )));
        };
        let outgoing = Outgoing {
            to: self.config.chain.forwarder,
            gas_limit: record.gas_limit,
            fees: Fees {
                max_fee_per_gas: record.max_fee_wei,
                max_priority_fee_per_gas: record.priority_fee_wei,
            },
            input,
        };
        let (at, head_time) = self.chain.head().await?;
        // A hand-off waits for its holder however long its node is away (the reconciler leaves
        // it alone), so its request may have expired meanwhile: sent, the forwarder would only
        // revert it, at the relayer's cost. Dropped instead, unless it changed since it was read.
        if record.deadline != 0 && head_time >= record.deadline {
            let (seen, now) = (record.clone(), time::now());
            self.stores.db(move |store| store.close_as_seen(&seen, false, PAST_DEADLINE, now)).await?;
            tracing::info!(relay = %record.relay_id, deadline = record.deadline, head_time, "a relay handed off expired unsent; dropped");
            return Ok(());
        }
        let (sent, lane) = self.send_reserved(id, &record.relay_id, lane, &outgoing, at, true).await?;
        tracing::info!(
            signer = %record.signer,
            forwarder_nonce = %record.forwarder_nonce,
            relay = %record.relay_id,
            %lane,
            tx = %sent.hash,
            relayer_nonce = sent.nonce,
            gas_limit = record.gas_limit,
            reserved_wei = %record.reserved_wei,
            "relay sent (handed off by another daemon)"
        );
        Ok(())
    }
}

/// The answer for a relay handed off that its holder could not send (it was released): what the
/// holder's own client would have got for the same failure (a key that is no longer free, a key
/// the node says cannot pay, a store that did not answer, a failed RPC call), the same status
/// and words.
fn unsent(record: &RelayRecord) -> Error {
    Error::of_released(record.error.as_deref().unwrap_or_default())
}
