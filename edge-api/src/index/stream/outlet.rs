//! The stream's outlet: after each index run, each shard ([`super::shard`]) is handed the batches
//! the feed gained since that shard was last handed any.
//!
//! Cost per run: the outlet's one D1 query ([`crate::index::outlets::pending::stream_pending`])
//! and, when the feed moved, one Durable Object request per shard, whatever the number of
//! listeners. Each shard has its own cursor: a shard that cannot be reached keeps its cursor and
//! is handed the same batches again by the next run, the others only what is new to them. One
//! that falls more than [`MOST_BEHIND`] batches behind the shard furthest ahead is given up on
//! (it finds the gap and its listeners resume from D1), so it holds no other back.
//!
//! The common cursor costs no row written of its own (it cost one per run that added batches): the
//! isolate remembers how far it handed the feed out ([`handed_through`]), and the next run
//! that writes the index's state row carries it there (`streamThrough`). An isolate that goes
//! before that run leaves the row's cursor behind what was handed, so some batches are handed
//! again; the listeners' positions drop them, as after a shard that could not be reached.

use std::collections::BTreeMap;

use futures::future::join_all;
use worker::{Env, Method, RequestInit};

use super::shard;
use crate::{Error, Result, config::Config, d1::Store, index::outlets::pending};

thread_local! {
    /// Per shard, the last batch this isolate handed it (absent: none since the isolate began),
    /// until a run's state row carries their common cursor.
    static HANDED: std::cell::RefCell<BTreeMap<u64, u64>> = std::cell::RefCell::default();
}

/// How far behind the shard furthest ahead a shard that keeps failing may fall before it is given
/// up on: it is then handed only what the others get, finds the gap, and drops its listeners,
/// who resume from D1. So one shard that cannot take a hand-over (out of memory, restarting)
/// never holds back the listeners of the others.
const MOST_BEHIND: u64 = pending::BATCHES_PER_RUN / 2;

/// The batch every shard was handed through (`None`: none), for the next state row written: each
/// shard's own, or the row's for a shard this isolate handed nothing.
pub(crate) fn handed_through() -> Option<u64> {
    HANDED.with(|handed| slowest_kept(&handed.borrow())).filter(|&batch| batch > 0)
}

/// The cursor of the slowest shard in `handed` that is not given up on: no further behind the
/// one furthest ahead than [`MOST_BEHIND`] (`None`: no shard handed anything).
fn slowest_kept(handed: &BTreeMap<u64, u64>) -> Option<u64> {
    let ahead = handed.values().max().copied().unwrap_or(0);
    handed.values().min().map(|slowest| (*slowest).max(ahead.saturating_sub(MOST_BEHIND)))
}

/// Where the outlet reads from for `shards` shards: past the batch every shard this isolate
/// handed anything took (0 when one has no record here: the state row's cursor then rules, in the
/// query), but no further behind the shard furthest ahead than [`MOST_BEHIND`].
fn read_from(shards: u64, handed: &BTreeMap<u64, u64>) -> u64 {
    if (0..shards).all(|shard| handed.contains_key(&shard)) {
        slowest_kept(handed).unwrap_or(0)
    } else {
        handed.values().max().copied().unwrap_or(0).saturating_sub(MOST_BEHIND)
    }
}

/// Each shard's cursor, given the batches read (the first is `first`): its record here, else
/// everything before `first` (the state row's cursor the query applied), never further behind
/// than `from`.
fn cursors(shards: u64, handed: &BTreeMap<u64, u64>, from: u64, first: u64) -> BTreeMap<u64, u64> {
    (0..shards)
        .map(|shard| (shard, handed.get(&shard).copied().unwrap_or(first.saturating_sub(1)).max(from)))
        .collect()
}

/// Hands every shard the feed's batches past its own cursor (none without the shards' binding);
/// whether there were any. A shard that fails keeps its cursor and is handed them again by the
/// next run; the shards that took them are not.
pub(crate) async fn hand(env: &Env, store: &Store) -> Result<bool> {
    let Ok(namespace) = env.durable_object(shard::BINDING) else { return Ok(false) };
    let shards = Config::from_env(env).stream.shards.max(1);
    let handed = HANDED.with(|handed| handed.borrow().clone());
    let from = read_from(shards, &handed);
    let batches = pending::stream_pending(store, from).await?;
    let (Some(first), Some(last)) = (batches.first(), batches.last()) else { return Ok(false) };
    let (first, last) = (first.batch, last.batch);
    let cursors = cursors(shards, &handed, from, first);
    let sent = join_all(cursors.iter().map(|(&shard, &cursor)| {
        // The batches' events as the run stored them: the JSON is not parsed here.
        let body = format!(
            "[{}]",
            batches
                .iter()
                .filter(|batch| batch.batch > cursor)
                .map(|batch| format!("{{\"batch\":{},\"events\":{}}}", batch.batch, batch.events))
                .collect::<Vec<_>>()
                .join(",")
        );
        let namespace = &namespace;
        async move {
            if cursor >= last {
                return (shard, Ok(0));
            }
            let handed = async {
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
            };
            (shard, handed.await)
        }
    }))
    .await;
    let mut listeners = 0;
    let mut failed = 0;
    // Each shard's listeners, in shard order ("-" for one that failed): how evenly the keyed
    // hash of the clients spreads them (`placement`).
    let mut by_shard = vec!["-".to_owned(); shards as usize];
    HANDED.with(|handed| {
        let mut handed = handed.borrow_mut();
        for (shard, result) in sent {
            match result {
                Ok(held) => {
                    listeners += held;
                    if let Some(count) = by_shard.get_mut(shard as usize) {
                        *count = held.to_string();
                    }
                    handed.insert(shard, last);
                }
                Err(error) => {
                    worker::console_error!(
                        "feed stream: {error}; this shard is handed its batches again next run"
                    );
                    handed.insert(shard, cursors[&shard]);
                    failed += 1;
                }
            }
        }
    });
    worker::console_log!(
        "feed stream: handed batches up to {last} to {} of {shards} shards holding {listeners} listeners \
         (by shard: {})",
        shards - failed,
        by_shard.join(", ")
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shard_moves_on_its_own_and_one_that_keeps_failing_holds_no_other_back() {
        // A fresh isolate: the state row's cursor rules (read from 0, cursors before the first).
        let none = BTreeMap::new();
        assert_eq!(read_from(3, &none), 0);
        assert_eq!(cursors(3, &none, 0, 11), BTreeMap::from([(0, 10), (1, 10), (2, 10)]));
        // Shard 1 failed the last hand-over: read from its cursor, the others past theirs.
        let handed = BTreeMap::from([(0, 14), (1, 12), (2, 14)]);
        assert_eq!(read_from(3, &handed), 12);
        assert_eq!(cursors(3, &handed, 12, 13), handed);
        // Shard 1 keeps failing while the feed moves on: past MOST_BEHIND it is given up on, and
        // read from where the others need.
        let handed = BTreeMap::from([(0, 40), (1, 12), (2, 40)]);
        let from = read_from(3, &handed);
        assert_eq!(from, 40 - MOST_BEHIND);
        assert_eq!(cursors(3, &handed, from, from + 1)[&1], from, "handed only what the others get");
        // A shard this isolate never handed anything: the state row's cursor rules.
        let partial = BTreeMap::from([(0, 20)]);
        assert_eq!(read_from(2, &partial), 20 - MOST_BEHIND);
        assert_eq!(cursors(2, &partial, 20 - MOST_BEHIND, 18)[&1], 17, "everything before the first read");
    }
}
