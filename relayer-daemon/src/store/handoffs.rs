//! Hand-offs: a daemon that holds no free key (a standby) still accepts a relay. It reserves it
//! on a lane another daemon holds, then hands it off here; that lane's holder sends it. On
//! PostgreSQL the hand-off is announced with `NOTIFY`, which wakes the holders at once
//! ([`Store::listen_for_handoffs`]); they also look every second, for an announcement missed
//! while reconnecting. A hand-off row lives until its holder has sent the relay (or the relay
//! closed; retention sweeps those).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use alloy::primitives::{Address, B256};
use postgres::fallible_iterator::FallibleIterator;

use super::{
    Location, Store,
    codec::Text,
    records::{RelayRecord, read_records},
    sql::{Connection, Lock, Sql, args},
};
use crate::error::Result;

/// PostgreSQL's channel of hand-offs; the payload is the lane.
const CHANNEL: &str = "kya_handoffs";

/// Hands relay `id` to `lane`'s holder inside `tx`, announced at its commit on PostgreSQL.
fn hand_off_in(tx: &mut impl Sql, postgres: bool, id: i64, lane: &str, now: u64) -> Result<()> {
    tx.execute(
        "INSERT INTO handoffs (relay, lane, at) VALUES (?1, ?2, ?3) ON CONFLICT (relay) DO NOTHING",
        args![id, lane, now as i64],
    )?;
    if postgres {
        // Delivered at commit, to every daemon listening.
        tx.execute("SELECT pg_notify(?1, ?2)", args![CHANNEL, lane])?;
    }
    Ok(())
}

impl Store {
    /// Hands the accepted relay `id`, reserved on `lane`, to the lane's holder, and wakes it.
    pub fn hand_off(&self, id: i64, lane: Address, now: u64) -> Result<()> {
        self.with(|connection| {
            let postgres = matches!(connection, Connection::Postgres(_));
            let mut tx = connection.transaction(&[Lock::Rows])?;
            hand_off_in(&mut tx, postgres, id, &lane.text(), now)?;
            tx.commit()
        })
    }

    /// After a reservation (relay `id` on `lane`) committed: if its call had been abandoned
    /// meanwhile (its `COMMIT` was on its way when the server hung, and landed when it resumed,
    /// after the client was answered 503), nobody is sending the relay, so it is handed to its
    /// key's holder, which sends it as any hand-off (a retry of the same signed request is
    /// answered with it meanwhile). Returns whether it was; a hand-off that fails leaves the
    /// relay to the reconciler, which drops it after `RECONCILE_GRACE_SECS` (the request free
    /// again).
    pub fn hand_off_late_reservation(&self, id: i64, lane: Address, now: u64) -> Result<bool> {
        if !super::current_abandoned() {
            return Ok(false);
        }
        super::detached(|| self.hand_off(id, lane, now))?;
        Ok(true)
    }

    /// Takes back the first record of relay `id`, the transaction `tx_hash` that was recorded but
    /// never submitted (its daemon stalled past the lease's margin while recording it: see
    /// `Sender::record_then_submit`), and hands the relay to its lane's holder, as a standby
    /// hands off: it is `accepted` again, with no transaction, and the key's holder (this daemon
    /// again, or the one that took the key) sends it. Nobody else has the withheld transaction's
    /// bytes, so it can never be mined. `false`, changing nothing, unless the relay is still on
    /// that record alone (its key's next holder may have dropped it since, freeing the request).
    pub fn withdraw(&self, id: i64, tx_hash: B256, now: u64) -> Result<bool> {
        self.with(|connection| {
            let postgres = matches!(connection, Connection::Postgres(_));
            let mut tx = connection.transaction(&[Lock::Relay(id)])?;
            let before = self.seen(&mut tx, id)?;
            let lane: Option<String> = tx
                .query_opt(
                    "UPDATE relays SET status = 'accepted', relayer_nonce = NULL, tx_hash = NULL,
                         sent_at = NULL, updated_at = ?3
                     WHERE id = ?1 AND status = 'sent' AND tx_hash = ?2 AND lane IS NOT NULL
                     RETURNING lane",
                    args![id, tx_hash.text(), now as i64],
                )?
                .map(|row| row.get(0))
                .transpose()?;
            let Some(lane) = lane else { return Ok(false) };
            tx.execute("DELETE FROM relay_txs WHERE relay = ?1", args![id])?;
            hand_off_in(&mut tx, postgres, id, &lane, now)?;
            let wrote = self.record_change(&mut tx, id, &before, now)?;
            tx.commit()?;
            self.written(wrote);
            Ok(true)
        })
    }

    /// The relays handed off on `lanes` and not sent yet, oldest first.
    pub fn handed_off(&self, lanes: &[Address]) -> Result<Vec<RelayRecord>> {
        let records = self.with(|connection| {
            read_records(connection, "status = 'accepted' AND id IN (SELECT relay FROM handoffs)", &[])
        })?;
        Ok(records
            .into_iter()
            .filter(|record| record.lane.is_some_and(|lane| lanes.contains(&lane)))
            .collect())
    }

    /// Whether relay `id` is still handed off: its holder has not finished sending it. A relay
    /// recorded as sent while its hand-off stands may yet be refused by the node (the record
    /// comes before the submission); the holder forgets the hand-off once the node has it.
    pub fn is_handed_off(&self, id: i64) -> Result<bool> {
        self.with(|connection| {
            Ok(connection.query_opt("SELECT 1 FROM handoffs WHERE relay = ?1", args![id])?.is_some())
        })
    }

    /// The hand-off of relay `id` is dealt with (sent, or failed and released).
    pub fn handed_over(&self, id: i64) -> Result<()> {
        self.with(|connection| {
            connection.execute("DELETE FROM handoffs WHERE relay = ?1", args![id])?;
            Ok(())
        })
    }

    /// On PostgreSQL, starts a thread that listens for hand-offs on a connection of its own and
    /// wakes `wake` at each, until `wake` is dropped (the daemon ended); it connects again after
    /// a lost connection. `false` on SQLite: one daemon, nothing to listen for.
    pub fn listen_for_handoffs(&self, wake: &Arc<tokio::sync::Notify>) -> bool {
        let Location::Postgres(url) = &self.location else { return false };
        let (url, wake) = (url.clone(), Arc::downgrade(wake));
        let spawned = std::thread::Builder::new()
            .name("handoff-listener".into())
            .spawn(move || {
                while wake.strong_count() > 0 {
                    if let Err(error) = listen(&url, &wake) {
                        tracing::warn!(error = %error.detail(), "listening for hand-offs failed; connecting again in 1 s");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
            });
        if let Err(error) = &spawned {
            tracing::warn!(%error, "no hand-off listener thread; hand-offs are seen within a second");
        }
        spawned.is_ok()
    }
}

/// Listens on one connection until it fails or `wake` is gone.
fn listen(url: &super::DatabaseUrl, wake: &Weak<tokio::sync::Notify>) -> Result<()> {
    let mut connection = url.connect()?;
    let client = connection.client();
    client.batch_execute(&format!("LISTEN {CHANNEL}"))?;
    loop {
        // Woken at least every second to see whether the daemon is still there.
        let next = client.notifications().timeout_iter(Duration::from_secs(1)).next();
        let Some(wake) = wake.upgrade() else { return Ok(()) };
        if next?.is_some() {
            wake.notify_one();
        }
    }
}
