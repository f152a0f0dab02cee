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

use worker::Env;

use crate::d1::Store;

pub(crate) mod pending;
mod webhooks;

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
