//! `/health`: `ok` when the RPC endpoint answers with a block, `degraded` (503) when not. It
//! answers without `REGISTRY_ADDRESS` too, naming what is configured, and reports the registry
//! index (`index`: `null` without the `INDEX` binding or before its first run) and the webhooks'
//! dead letters per receiver (`deadLetters`: `null` without the binding).

use serde_json::{Value, json};
use worker::Response;

use crate::{Result, config::Config, d1::Store, http, index::State, rpc::Rpc};

pub(crate) async fn answer(config: &Config, rpc: &Rpc<'_>, index: Option<Store>) -> Result<Response> {
    let registry = match config.registry() {
        Ok(address) => serde_json::Value::from(address.to_checksum(None)),
        Err(_) if config.registry_text().is_empty() => serde_json::Value::Null,
        Err(_) => serde_json::Value::from(config.registry_text()),
    };
    let shown_rpc = kya_core::chain::redact::url(rpc.url);
    let state = match &index {
        None => None,
        Some(store) => match store.state().await {
            Ok(state) if state.last_run.is_some() => Some(state),
            Ok(_) => None,
            Err(error) => {
                // No tables yet (migrations not applied): no index to report.
                worker::console_warn!("reading the index's state failed: {error}");
                None
            }
        },
    };
    let dead_letters = match &index {
        None => Value::Null,
        Some(store) => dead_letters(store).await,
    };
    let (status, body) = match rpc.pin().await {
        Ok(block) => (
            200,
            json!({"status": "ok", "registry": registry, "rpc": shown_rpc, "block": block.number,
                "index": state.as_ref().map_or(Value::Null, |state| report(state, Some(block.number))),
                "deadLetters": dead_letters}),
        ),
        Err(error) => (
            503,
            json!({"status": "degraded", "registry": registry, "rpc": shown_rpc, "error": error.to_string(),
                "index": state.as_ref().map_or(Value::Null, |state| report(state, None)),
                "deadLetters": dead_letters}),
        ),
    };
    http::json(status, &body.to_string(), "no-store")
}

/// The webhooks' dead letters kept in D1, per receiver that has any (`[]`: none), from the
/// counts the triggers of migration 0009 keep: a row read per receiver, not per dead letter.
/// `null` when they cannot be read (the migration not applied).
async fn dead_letters(store: &Store) -> Value {
    match store.dead_letter_counts().await {
        Ok(counts) => counts
            .iter()
            .map(|count| json!({"receiver": count.receiver, "events": count.events, "newestAt": count.newest_at}))
            .collect(),
        Err(error) => {
            worker::console_warn!("reading the webhooks' dead letter counts failed: {error}");
            Value::Null
        }
    }
}

/// The index as `/health` reports it: the block it reflects and how many blocks behind `head`
/// that is, whether it holds every agent (`complete`: only then do answers come from it), the
/// agents it holds and the registry's count at its block, the fill's and the sweep's cursors and
/// the agents to read again,
/// when it was last written, the last run's outcome, and the answers this isolate read from it.
fn report(state: &State, head: Option<u64>) -> Value {
    let run = state.last_run.as_ref().map(|run| json!({"at": run.at, "ok": run.ok, "message": run.message}));
    json!({
        "block": state.block.map(|block| block.number),
        "blockTimestamp": state.block.map(|block| block.timestamp),
        "blockHash": state.block_hash,
        // The chain fell below the index's block and no longer holds it: no answers from the
        // index until a run moves it on.
        "orphaned": state.block_orphaned,
        "lagBlocks": state.block.zip(head).map(|(block, head)| head.saturating_sub(block.number)),
        "complete": state.complete_at().is_some(),
        "agents": state.totals.agents,
        "registryAgents": state.chain_next.saturating_sub(1),
        "fillNextId": state.cursor.filled,
        "sweepNextId": state.cursor.sweep,
        // Agents held but to read again (a block touched more than a run reads, or its logs
        // were refused whole): `null` when none.
        "reread": (!state.cursor.reread().is_empty()).then(|| json!({
            "nextId": state.cursor.reread().start, "endId": state.cursor.reread().end})),
        "updatedAt": state.block.map(|_| state.updated_at),
        "lastRun": run,
        // Answers this isolate read from the index (not served from a cache) since it started.
        "answerReads": crate::index::answer_reads(),
    })
}
