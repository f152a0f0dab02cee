//! The followers: what runs after a relay's send and in the background. A follower per sent
//! relay reads its receipts, settles it and replaces a stuck transaction ([`settlement`]), and
//! the reconciler ends what a crash left open ([`reconciler`]); the hand-offs' sender sends what
//! standbys handed to this daemon's keys ([`handoff`]); the lease keeper takes and keeps the
//! keys ([`leasing`]); the webhooks' sender delivers the outbox ([`webhooks`]).

pub(crate) mod handoff;
pub(crate) mod leasing;
pub(crate) mod reconciler;
pub(crate) mod settlement;
pub(crate) mod webhooks;

use std::{collections::HashSet, sync::Mutex};

use crate::{
    concurrency::{
        fresh::{self, Fresh},
        lock,
    },
    rules::stuck::Policy,
};

/// The followers' own state.
#[derive(Debug)]
pub(crate) struct Followers {
    /// When a transaction is stuck, and what replaces it.
    stuck: Policy,
    /// Relays (row ids) a follower of this process watches.
    followed: Mutex<HashSet<i64>>,
    /// The chain's head, read once for every follower ([`fresh::HEAD_FRESH`]).
    head: Fresh<u64>,
}

impl Followers {
    pub(crate) fn new(stuck: Policy) -> Self {
        Self { stuck, followed: Mutex::default(), head: Fresh::new(fresh::HEAD_FRESH) }
    }

    /// Marks relay `id` followed; false if a follower already watches it.
    fn start_following(&self, id: i64) -> bool {
        lock(&self.followed).insert(id)
    }

    /// Its follower ended.
    fn stop_following(&self, id: i64) {
        lock(&self.followed).remove(&id);
    }
}
