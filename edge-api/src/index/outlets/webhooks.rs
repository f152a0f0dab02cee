//! The webhooks' outlet: after each run, each receiver's events of the feed's new batches, by its
//! filter, put on the webhooks' queue (`crate::webhooks`), chained so its sender restores order.

use std::collections::BTreeMap;

use kya_core::feed::{Cursor, Event};
use worker::Env;

use super::pending::{handed, pending};
use crate::{Error, Result, d1::Store, index::changes::decode_events, webhooks};

/// The webhooks' outlet: each receiver's events of the new batches, by its filter, put on the
/// webhooks' queue as handoffs chained from the last one it was sent
/// (`crate::webhooks::message`); then the chains, then the outlet's cursor. A failure before
/// either is written sends the same events again next run, which the senders take as copies
/// (what they accepted already, or the same place in a chain). Without receivers the outlet does nothing, not even a D1 query: receivers named
/// later start at the oldest batch kept. Whether there were new batches.
pub(super) async fn hand(env: &Env, store: &Store) -> Result<bool> {
    let receivers = webhooks::receivers::from_env(env).map_err(Error::BadConfig)?;
    if receivers.is_empty() {
        return Ok(false);
    }
    let batches = pending(store, WEBHOOKS).await?;
    let Some(through) = batches.last().map(|batch| batch.batch) else { return Ok(false) };
    let mut events: Vec<Event> = Vec::new();
    for batch in &batches {
        events.extend(decode_events(batch.batch, &batch.events)?);
    }
    let mut chains = store.webhook_chains().await?;
    let mut handoffs = Vec::new();
    for receiver in &receivers {
        let selected: Vec<Event> =
            events.iter().filter(|event| receiver.filter.matches(event)).copied().collect();
        let after = chains.get(&receiver.name).copied();
        handoffs.extend(webhooks::message::handoffs(&receiver.name, after, &selected));
        if let Some(last) = selected.last() {
            chains.insert(receiver.name.clone(), last.id);
        }
    }
    webhooks::enqueue(env, &handoffs).await?;
    let chains = serde_json::to_string(&chains).map_err(|error| {
        Error::Runtime(worker::Error::RustError(format!("the chains serialise: {error}")))
    })?;
    store.commit(vec![store.state_put(CHAINS_KEY, chains)?]).await?;
    handed(store, WEBHOOKS, through).await?;
    worker::console_log!(
        "webhooks outlet: batches through {through}, {} handoffs to {} receivers",
        handoffs.len(),
        receivers.len()
    );
    Ok(true)
}

/// The webhooks' outlet's name (its cursor is `outlet:webhooks`).
const WEBHOOKS: &str = "webhooks";

/// The state row holding, per receiver, the last event it was sent: where its next handoff's
/// chain starts.
const CHAINS_KEY: &str = "webhooks:chains";

impl Store {
    /// Each receiver's last event sent (`webhooks:chains`), empty before the first.
    async fn webhook_chains(&self) -> Result<BTreeMap<String, Cursor>> {
        match self.state_value(CHAINS_KEY).await? {
            None => Ok(BTreeMap::new()),
            Some(value) => serde_json::from_str(&value).map_err(|error| {
                Error::Runtime(worker::Error::RustError(format!("{CHAINS_KEY} does not decode: {error}")))
            }),
        }
    }
}
