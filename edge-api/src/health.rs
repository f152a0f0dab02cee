//! `/health`: `ok` when the RPC endpoint answers with a block, `degraded` (503) when not. It
//! answers without `REGISTRY_ADDRESS` too, naming what is configured, and reports the registry
//! index (`index`: `null` without the `INDEX` binding or before its first run).

use serde_json::{Value, json};
use worker::Response;

use crate::{
    Result,
    config::Config,
    http,
    index::{State, Store},
    rpc::Rpc,
};

pub(crate) async fn answer(config: &Config, rpc: &Rpc<'_>, index: Option<Store>) -> Result<Response> {
    let registry = match config.registry() {
        Ok(address) => serde_json::Value::from(address.to_checksum(None)),
        Err(_) if config.registry_text().is_empty() => serde_json::Value::Null,
        Err(_) => serde_json::Value::from(config.registry_text()),
    };
    let shown_rpc = kya_core::redact::url(rpc.url);
    let state = match index {
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
    let (status, body) = match rpc.pin().await {
        Ok(block) => (
            200,
            json!({"status": "ok", "registry": registry, "rpc": shown_rpc, "block": block.number,
                "index": state.as_ref().map_or(Value::Null, |state| report(state, Some(block.number)))}),
        ),
        Err(error) => (
            503,
            json!({"status": "degraded", "registry": registry, "rpc": shown_rpc, "error": error.to_string(),
                "index": state.as_ref().map_or(Value::Null, |state| report(state, None))}),
        ),
    };
    http::json(status, &body.to_string(), "no-store")
}

/// The index as `/health` reports it: the block it is complete at (`null` while the first sweep
/// runs) and how many blocks behind `head` that is, the agents indexed, a sweep under way, and
/// the last run's outcome.
fn report(state: &State, head: Option<u64>) -> Value {
    let run = state.last_run.as_ref().map(|run| json!({"at": run.at, "ok": run.ok, "message": run.message}));
    json!({
        "block": state.block.map(|block| block.number),
        "blockTimestamp": state.block.map(|block| block.timestamp),
        "lagBlocks": state.block.zip(head).map(|(block, head)| head.saturating_sub(block.number)),
        "agents": state.totals.agents,
        "sweep": state.sweep.map(|sweep| json!({"block": sweep.block.number, "nextId": sweep.next_id, "agents": sweep.agents})),
        "lastRun": run,
    })
}
