//! The stream's outlet: after each index run, the batches the feed gained since the stream was
//! last handed any, sent once to every shard ([`super::shard`]).
//!
//! Cost per run: the outlet's one D1 query ([`crate::index::outlets::stream_pending`]) and, when
//! the feed moved, one Durable Object request per shard, whatever the number of listeners. A
//! shard that cannot be reached keeps the cursor where it was: the next run hands every shard
//! the same batches again, and each listener's position drops what it was already sent.
//!
//! The cursor costs no row written of its own (it cost one per run that added batches): the
//! isolate remembers how far it handed the feed out ([`handed_through`]), and the next run
//! that writes the index's state row carries it there (`streamThrough`). An isolate that goes
//! before that run leaves the row's cursor behind what was handed, so some batches are handed
//! again; the listeners' positions drop them, as after a shard that could not be reached.

use futures::future::join_all;
use worker::{Env, Method, RequestInit};

use super::shard;
use crate::{
    Error, Result,
    config::Config,
    index::{Store, outlets},
};

thread_local! {
    /// The last batch this isolate handed to every shard (0: none), until a run's state row
    /// carries it.
    static HANDED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The last batch this isolate handed to every shard (`None`: none), for the next state row
/// written.
pub(crate) fn handed_through() -> Option<u64> {
    Some(HANDED.with(std::cell::Cell::get)).filter(|&batch| batch > 0)
}

/// Hands the feed's new batches to every shard (none without the shards' binding); whether there
/// were any.
pub(crate) async fn hand(env: &Env, store: &Store) -> Result<bool> {
    let Ok(namespace) = env.durable_object(shard::BINDING) else { return Ok(false) };
    let batches = outlets::stream_pending(store, HANDED.with(std::cell::Cell::get)).await?;
    let Some(last) = batches.last().map(|batch| batch.batch) else { return Ok(false) };
    // The batches' events as the run stored them: the JSON is not parsed here.
    let body = format!(
        "[{}]",
        batches
            .iter()
            .map(|batch| format!("{{\"batch\":{},\"events\":{}}}", batch.batch, batch.events))
            .collect::<Vec<_>>()
            .join(",")
    );
    let shards = Config::from_env(env).stream.shards;
    let sent = join_all((0..shards).map(|shard| {
        let body = body.clone();
        let namespace = &namespace;
        async move {
            let stub = namespace.id_from_name(&shard::name(shard))?.get_stub()?;
            let mut init = RequestInit::new();
            init.with_method(Method::Post).with_body(Some(body.into()));
            let mut response =
                stub.fetch_with_request(worker::Request::new_with_init(shard::NOTIFY, &init)?).await?;
            let text = response.text().await.unwrap_or_default();
            match response.status_code() {
                200 => Ok(text.parse::<u64>().unwrap_or(0)),
                status => Err(Error::Runtime(worker::Error::RustError(format!(
                    "stream shard {shard} answered {status}: {text}"
                )))),
            }
        }
    }))
    .await;
    let mut listeners = 0;
    for result in sent {
        listeners += result?;
    }
    HANDED.with(|handed| handed.set(handed.get().max(last)));
    worker::console_log!(
        "feed stream: handed batches {}..={last} to {shards} shards holding {listeners} listeners",
        batches[0].batch
    );
    Ok(true)
}
