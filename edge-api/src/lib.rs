//! `kya-edge-api`: the KYA read API as a Cloudflare Worker.
//!
//! Foundation only: `/health` reports the configured registry and RPC endpoint. The `/api/v1`
//! endpoints arrive with the read-API issue.

use worker::{Context, Env, Request, Response, Result, event};

/// The public test-network RPC endpoint used when `RPC_URL` is not set (INTERFACE.md section 1).
pub const DEFAULT_RPC_URL: &str = "https://sepolia.base.org";

#[event(fetch)]
async fn fetch(request: Request, env: Env, _context: Context) -> Result<Response> {
    let rpc = env
        .var("RPC_URL")
        .map(|var| var.to_string())
        .unwrap_or_else(|_| DEFAULT_RPC_URL.to_owned());
    let registry = env
        .var("REGISTRY_ADDRESS")
        .map(|var| var.to_string())
        .unwrap_or_default();
    match request.path().as_str() {
        "/health" => Response::from_json(
            &serde_json::json!({ "status": "ok", "registry": registry, "rpc": rpc }),
        ),
        _ => {
            Ok(Response::from_json(&serde_json::json!({ "error": "Not found" }))?.with_status(404))
        }
    }
}
