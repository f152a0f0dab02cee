//! The feed's batches an outlet has not taken yet, and each outlet's cursor: what the outlets
//! ([`super::webhooks`], [`crate::index::stream::outlet`]) read and write, below both.

use serde::Deserialize;

use crate::{
    Result,
    d1::{Param, Store},
};

/// The most batches an outlet takes in one run; the rest wait for the next run.
pub(crate) const BATCHES_PER_RUN: u64 = 16;

/// One batch of the feed as the runs wrote it: its number and its events as a JSON array of
/// `kya_core::feed::Event` (decode with [`crate::index::changes::decode_events`]).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FeedBatch {
    pub(crate) batch: u64,
    pub(crate) events: String,
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
        crate::index::store::STATE_KEY.to_owned(),
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
