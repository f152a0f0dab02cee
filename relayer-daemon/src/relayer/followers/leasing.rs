//! This daemon's leases on the keys: taken at start, then kept by a background task that every
//! third of a lease (at most 5 s) says the daemon is alive, renews what it holds, stops at once on a key whose
//! lease another daemon took, gives back keys beyond its fair share, and takes free or expired
//! ones up to it. A key taken over is followed from its open relays, as after a restart. At
//! shutdown the keys are given back, so another daemon takes them at once. The rules of the
//! leases themselves (fences, margins) are the store's (`store/leases.rs`).

use std::{sync::Arc, time::Duration};

use alloy::primitives::Address;

use crate::{
    error::{Error, Result},
    relayer::Relayer,
    rules::lanes::fair_share,
    store::{Lease, Taking},
    time,
};

/// How often the keeper runs: every third of a lease (so a renewal can fail twice before the
/// lease's margin is reached), and at least every 5 s, so that keys given back at another
/// daemon's shutdown, and a new daemon's share, are taken within seconds whatever the lease.
fn keeper_pause(lease_secs: u64) -> Duration {
    Duration::from_secs((lease_secs / 3).clamp(1, 5))
}

impl Relayer {
    /// Takes this daemon's share of the keys at start, before anything is followed or sent:
    /// keys free or expired, and those its own previous run (same `RELAYER_ID`) still holds.
    pub(crate) async fn take_lanes_at_start(self: &Arc<Self>) -> Result<()> {
        self.keep_leases(Taking::AtStart).await
    }

    /// Starts the task that keeps the leases, until shutdown begins.
    pub(crate) fn spawn_lease_keeper(self: &Arc<Self>) {
        let relayer = Arc::clone(self);
        let pause = keeper_pause(self.config.keys.lease_secs);
        self.shutdown.spawn_background(async move {
            let mut taking = Taking::Free;
            loop {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = relayer.shutdown.begun() => return,
                }
                match relayer.keep_leases(taking).await {
                    Ok(()) => taking = Taking::Free,
                    Err(error @ Error::StoreTimedOut(_)) => {
                        relayer.lose_every_lease(&error);
                        // Its own keys taken back at once when the database answers again
                        // (a renewal or take that landed late named this daemon: nobody else
                        // holds them), each under a new fence.
                        taking = Taking::AtStart;
                    }
                    // A lease not renewed runs out; sends stop on their own once less than its
                    // margin is left (the store refuses to record them).
                    Err(error) => {
                        tracing::warn!(error = %error.detail(), "keeping the key leases failed; retrying");
                    }
                }
            }
        });
    }

    /// A round of the keeper passed its store deadline: its renewal (or take) may still commit
    /// when the server resumes, or may never have; this daemon cannot tell which keys it holds,
    /// so it holds none and stops sending on every key at once. Two daemons never both send on
    /// a key: the store records a transaction only under the current fence with the lease's
    /// margin left, and a renewal that lands late extends the lease only to its own round's
    /// time plus a lease (the round's clock, read before the call), under the fence it had.
    fn lose_every_lease(&self, error: &Error) {
        let lost: Vec<Address> = self
            .pool
            .senders()
            .iter()
            .filter(|sender| sender.lease().is_some())
            .map(|sender| {
                sender.lose();
                sender.address()
            })
            .collect();
        tracing::warn!(
            error = %error.detail(),
            ?lost,
            "keeping the key leases passed the store's deadline; this daemon holds no key until the database answers"
        );
    }

    /// One round: heartbeat, renew, stop on lost keys, give back or take keys to the fair share.
    async fn keep_leases(self: &Arc<Self>, taking: Taking) -> Result<()> {
        let (id, lease_secs, now) =
            (self.config.keys.relayer_id.clone(), self.config.keys.lease_secs, time::now());
        let alive = self
            .stores
            .lease_db(move |store| store.heartbeat(&id, now, now.saturating_sub(lease_secs)))
            .await?;
        let held = self.pool.held();
        let renewing = held.clone();
        let lost = self.stores.lease_db(move |store| store.renew_lanes(&renewing, now, lease_secs)).await?;
        for lease in &lost {
            if let Some(sender) = self.pool.lane(lease.lane) {
                sender.lose();
            }
            tracing::warn!(
                lane = %lease.lane,
                relayer_id = %self.config.keys.relayer_id,
                "the lease on this key was taken by another daemon (this one stalled, or another runs with the same RELAYER_ID); sending on it stopped"
            );
        }
        let held: Vec<Lease> = held.into_iter().filter(|lease| !lost.contains(lease)).collect();
        let share = fair_share(self.pool.senders().len(), alive);
        if held.len() > share {
            self.give_back(&held[share..]).await?;
        } else if held.len() < share {
            self.take(share - held.len(), taking).await?;
        }
        Ok(())
    }

    /// Gives `leases` back to the cluster once their sends under way are done.
    async fn give_back(&self, leases: &[Lease]) -> Result<()> {
        let mut given = Vec::with_capacity(leases.len());
        for lease in leases {
            if let Some(sender) = self.pool.lane(lease.lane)
                && let Some(lease) = sender.give_up().await
            {
                given.push(lease);
            }
        }
        let lanes: Vec<Address> = given.iter().map(|lease| lease.lane).collect();
        self.stores.lease_db(move |store| store.release_lanes(&given)).await?;
        if !lanes.is_empty() {
            tracing::info!(?lanes, "gave back keys beyond this daemon's share");
        }
        Ok(())
    }

    /// Takes up to `wanted` keys of the pool this daemon does not hold, and follows their open
    /// relays (a previous holder's: sent, not yet mined).
    async fn take(self: &Arc<Self>, wanted: usize, taking: Taking) -> Result<()> {
        let free: Vec<Address> = self
            .pool
            .senders()
            .iter()
            .filter(|sender| sender.lease().is_none())
            .map(|sender| sender.address())
            .collect();
        let (id, lease_secs, now) =
            (self.config.keys.relayer_id.clone(), self.config.keys.lease_secs, time::now());
        let taken = self
            .stores
            .lease_db(move |store| store.take_lanes(&id, &free, wanted, taking, now, lease_secs))
            .await?;
        for lease in &taken {
            if let Some(sender) = self.pool.lane(lease.lane) {
                sender.hold(*lease).await;
            }
            tracing::info!(lane = %lease.lane, fence = lease.fence, "took the lease on a key");
        }
        if !taken.is_empty() {
            for record in self.stores.lease_db(|store| store.in_the_pool()).await? {
                if record.lane.is_some_and(|lane| taken.iter().any(|lease| lease.lane == lane)) {
                    self.follow(record.id);
                }
            }
        }
        Ok(())
    }

    /// Gives every lease back and says goodbye (shutdown, after the work in hand is done).
    pub(crate) async fn release_lanes(&self) {
        let mut leases = Vec::new();
        for sender in self.pool.senders() {
            if let Some(lease) = sender.give_up().await {
                leases.push(lease);
            }
        }
        let id = self.config.keys.relayer_id.clone();
        let released = self
            .stores
            .db(move |store| {
                store.release_lanes(&leases)?;
                store.farewell(&id)
            })
            .await;
        if let Err(error) = released {
            tracing::warn!(error = %error.detail(), "giving back the key leases failed; they run out on their own");
        }
    }
}
