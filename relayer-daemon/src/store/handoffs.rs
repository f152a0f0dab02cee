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

use alloy::primitives::Address;
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

impl Store {
    /// Hands the accepted relay `id`, reserved on `lane`, to the lane's holder, and wakes it.
    pub fn hand_off(&self, id: i64, lane: Address, now: u64) -> Result<()> {
        self.with(|connection| {
            let postgres = matches!(connection, Connection::Postgres(_));
            let mut tx = connection.transaction(&[Lock::Rows])?;
            tx.execute(
                "INSERT INTO handoffs (relay, lane, at) VALUES (?1, ?2, ?3) ON CONFLICT (relay) DO NOTHING",
                args![id, lane.text(), now as i64],
            )?;
            if postgres {
                // Delivered at commit, to every daemon listening.
                tx.execute("SELECT pg_notify(?1, ?2)", args![CHANNEL, lane.text()])?;
            }
            tx.commit()
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
