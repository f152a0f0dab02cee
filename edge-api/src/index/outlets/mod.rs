//! The feed's outlets: after each run, every outlet (the stream's shards, the webhooks' queue) is
//! handed the batches the feed gained since that outlet was last handed any.
//!
//! Each outlet keeps its own cursor, the newest batch it took: the webhooks' as a row of `state`
//! (key `outlet:webhooks`), written once its handoffs are queued; the stream's in the index's
//! state row (`streamThrough`), written by the next run that writes that row anyway, this
//! isolate remembering it meanwhile ([`super::stream::outlet`]). An outlet that fails keeps its
//! cursor, so the next run hands it the same batches again: what the feed holds reaches every
//! outlet, late rather than never. An outlet with no cursor yet starts at the oldest batch kept.
//!
//! Cost: one D1 query per outlet per run, reading the cursor's row and the new batches only
//! (none when the feed did not move), whatever the feed's length or the listeners' number.

use serde::Deserialize;
use worker::Env;

use super::{Store, limits::Param};
use crate::Result;

mod webhooks;

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
/// turn, each on its own cursor. A failure is logged and left for the next run. Their D1 reads
/// are logged when they handed anything out (not every 2 s of a quiet feed under the pacer).
pub(crate) async fn after_run(env: &Env, store: &Store) {
    let read = store.rows_read();
    let streamed = super::stream::outlet::hand(env, store).await.unwrap_or_else(|error| {
        worker::console_error!("feed stream: {error}; the batches wait for the next run");
        false
    });
    let hooked = webhooks::hand(env, store).await.unwrap_or_else(|error| {
        worker::console_error!("webhooks outlet: {error}; its batches wait for the next run");
        false
    });
    if streamed || hooked {
        worker::console_log!("feed outlets: {} D1 rows read", store.rows_read() - read);
    }
}

/// The batches after `outlet`'s cursor, oldest first, at most [`BATCHES_PER_RUN`].
pub(crate) async fn pending(store: &Store, outlet: &str) -> Result<Vec<FeedBatch>> {
    batches_after(store, "CAST(value AS INTEGER)", cursor_key(outlet), 0).await
}

/// The batches after the stream's cursor, oldest first, at most [`BATCHES_PER_RUN`]: the later
/// of the index's state row's `streamThrough` and `remembered`, what this isolate handed out
/// since that row was written.
pub(crate) async fn stream_pending(store: &Store, remembered: u64) -> Result<Vec<FeedBatch>> {
    batches_after(
        store,
        "json_extract(value, '$.streamThrough')",
        super::store::STATE_KEY.to_owned(),
        remembered,
    )
    .await
}

/// The batches after the later of the cursor `cursor` reads (an expression of the `state` row
/// `key`) and `remembered`, oldest first, at most [`BATCHES_PER_RUN`]: one D1 query.
async fn batches_after(store: &Store, cursor: &str, key: String, remembered: u64) -> Result<Vec<FeedBatch>> {
    let statement = store.statement(
        &format!(
            "SELECT batch, events FROM feed_batches WHERE batch > max(coalesce((SELECT {cursor} \
             FROM state WHERE key = ?1), 0), ?3) ORDER BY batch LIMIT ?2"
        ),
        vec![key.into(), Param::Number(BATCHES_PER_RUN), Param::Number(remembered)],
    )?;
    store.all(statement).await
}

/// Records that `outlet` took every batch through `batch`.
pub(crate) async fn handed(store: &Store, outlet: &str, batch: u64) -> Result<()> {
    store.commit(vec![store.state_put(&cursor_key(outlet), batch.to_string())?]).await
}

fn cursor_key(outlet: &str) -> String {
    format!("outlet:{outlet}")
}
