//! `/health`: `ok` when the RPC endpoint answers with a block, `degraded` (503) when not. It
//! answers without `REGISTRY_ADDRESS` too, naming what is configured.

use worker::Response;

use crate::{Result, config::Config, http, rpc::Rpc};

pub(crate) async fn answer(config: &Config, rpc: &Rpc<'_>) -> Result<Response> {
    let registry = match config.registry() {
        Ok(address) => serde_json::Value::from(address.to_checksum(None)),
        Err(_) if config.registry_text().is_empty() => serde_json::Value::Null,
        Err(_) => serde_json::Value::from(config.registry_text()),
    };
    let shown_rpc = kya_core::redact::url(rpc.url);
    let (status, body) = match rpc.pin().await {
        Ok(block) => (
            200,
            serde_json::json!({"status": "ok", "registry": registry, "rpc": shown_rpc, "block": block.number}),
        ),
        Err(error) => (
            503,
            serde_json::json!({"status": "degraded", "registry": registry, "rpc": shown_rpc, "error": error.to_string()}),
        ),
    };
    http::json(status, &body.to_string(), "no-store")
}
