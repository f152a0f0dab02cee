//! The feed's outlets: after each run, every outlet (the stream's shards, the webhooks' queue) is
//! handed the batches the feed gained since that outlet was last handed any.
//!
//! Each outlet keeps its own cursor, the newest batch it took, as a row of `state` (key
//! `outlet:<name>`). An outlet that fails keeps its cursor, so the next run hands it the same
//! batches again: what the feed holds reaches every outlet, late rather than never. An outlet
//! with no cursor yet starts at the oldest batch kept.
//!
//! Cost: one D1 query per outlet per run, reading the cursor's row and the new batches only
//! (none when the feed did not move), whatever the feed's length or the listeners' number.

use std::collections::BTreeMap;

use kya_core::feed::{Cursor, Event};
use serde::Deserialize;
use worker::Env;

use super::{Store, changes::decode_events, limits::Param};
use crate::{Error, Result, webhooks};

/// The most batches an outlet takes in one run; the rest wait for the next run.
pub(crate) const BATCHES_PER_RUN: u64 = 16;

/// One batch of the feed as the runs wrote it: its number and its events as a JSON array of
/// `kya_core::feed::Event` (decode with [`super::changes::decode_events`]).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FeedBatch {
    pub(crate) batch: u64,
    pub(crate) events: String,
}

/// The steps after each run of the index (the pacer's and the Cron Trigger's): each outlet in
/// turn, each on its own cursor. A failure is logged and left for the next run.
pub(crate) async fn after_run(env: &Env, store: &Store) {
    let read = store.rows_read();
    if let Err(error) = super::stream::outlet::hand(env, store).await {
        worker::console_error!("feed stream: {error}; the batches wait for the next run");
    }
    if let Err(error) = to_webhooks(env, store).await {
        worker::console_error!("webhooks outlet: {error}; its batches wait for the next run");
    }
    worker::console_log!("feed outlets: {} D1 rows read", store.rows_read() - read);
}

/// The webhooks' outlet: each receiver's events of the new batches, by its filter, put on the
/// webhooks' queue as handoffs chained from the last one it was sent
/// (`crate::webhooks::message`); then the chains, then the outlet's cursor. A failure before
/// either is written sends the same events again next run, which the senders take as copies
/// (what they accepted already, or the same place in a chain). Without receivers the outlet does nothing, not even a D1 query: receivers named
/// later start at the oldest batch kept.
async fn to_webhooks(env: &Env, store: &Store) -> Result<()> {
    let receivers = webhooks::receivers::from_env(env).map_err(Error::BadConfig)?;
    if receivers.is_empty() {
        return Ok(());
    }
    let batches = pending(store, WEBHOOKS).await?;
    let Some(through) = batches.last().map(|batch| batch.batch) else { return Ok(()) };
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
    let save_chains = store.statement(
        "INSERT INTO state (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
        vec![CHAINS_KEY.into(), chains.into()],
    )?;
    store.commit(vec![save_chains]).await?;
    handed(store, WEBHOOKS, through).await?;
    worker::console_log!(
        "webhooks outlet: batches through {through}, {} handoffs to {} receivers",
        handoffs.len(),
        receivers.len()
    );
    Ok(())
}

/// The webhooks' outlet's name (its cursor is `outlet:webhooks`).
const WEBHOOKS: &str = "webhooks";

/// The state row holding, per receiver, the last event it was sent: where its next handoff's
/// chain starts.
const CHAINS_KEY: &str = "webhooks:chains";

impl Store {
    /// Each receiver's last event sent (`webhooks:chains`), empty before the first.
    async fn webhook_chains(&self) -> Result<BTreeMap<String, Cursor>> {
        #[derive(Deserialize)]
        struct Row {
            value: String,
        }
        let rows: Vec<Row> = self
            .all(self.statement("SELECT value FROM state WHERE key = ?1", vec![CHAINS_KEY.into()])?)
            .await?;
        match rows.first() {
            None => Ok(BTreeMap::new()),
            Some(row) => serde_json::from_str(&row.value).map_err(|error| {
                Error::Runtime(worker::Error::RustError(format!("{CHAINS_KEY} does not decode: {error}")))
            }),
        }
    }
}

/// The batches after `outlet`'s cursor, oldest first, at most [`BATCHES_PER_RUN`].
pub(crate) async fn pending(store: &Store, outlet: &str) -> Result<Vec<FeedBatch>> {
    let statement = store.statement(
        "SELECT batch, events FROM feed_batches WHERE batch > coalesce((SELECT CAST(value AS INTEGER) \
         FROM state WHERE key = ?1), 0) ORDER BY batch LIMIT ?2",
        vec![cursor_key(outlet).into(), Param::Number(BATCHES_PER_RUN)],
    )?;
    store.all(statement).await
}

/// Records that `outlet` took every batch through `batch`.
pub(crate) async fn handed(store: &Store, outlet: &str, batch: u64) -> Result<()> {
    let statement = store.statement(
        "INSERT INTO state (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
        vec![cursor_key(outlet).into(), batch.to_string().into()],
    )?;
    store.commit(vec![statement]).await
}

fn cursor_key(outlet: &str) -> String {
    format!("outlet:{outlet}")
}
