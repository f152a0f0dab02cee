//! `kya-edge-api`: the KYA read API as a Cloudflare Worker (SPEC.md sections 1, 2, 4, 7, 8).
//!
//! Every request: CORS preflight or rate limit (KV), route, validate, then the Cache API, and
//! only on a miss the chain: `eth_call`s through Multicall3, each one consistent read that names
//! its block (or, without Multicall3, a pinned block and then batches of calls at it).
//! The logic lives in `kya_core`; the modules here are the Workers plumbing around it.

mod cache;
mod config;
mod endpoints;
mod error;
mod http;
mod rate_limit;
mod reads;
mod routes;
mod rpc;

pub use config::{DEFAULT_BATCH_SIZE, DEFAULT_RPC_URL};
pub use error::{Error, Result};

use std::cell::Cell;

use worker::{Context, Date, Env, Headers, Method, Request, Response, event};

use crate::{
    config::Config,
    endpoints::{Deps, Endpoint},
    routes::Route,
    rpc::Rpc,
};

#[event(fetch)]
async fn fetch(request: Request, env: Env, _context: Context) -> worker::Result<Response> {
    // Only building a response can fail here (header plumbing). The fallback is still the API's
    // shape: a JSON error a browser may read.
    match respond(request, env).await {
        Ok(response) => Ok(response),
        Err(error) => {
            worker::console_error!("building a response failed: {error}");
            let headers = Headers::new();
            headers.set("content-type", "application/json; charset=utf-8")?;
            headers.set("cache-control", "no-store")?;
            headers.set("access-control-allow-origin", "*")?;
            let body = serde_json::json!({ "error": error.to_string() }).to_string();
            Ok(Response::ok(body)?.with_status(500).with_headers(headers))
        }
    }
}

async fn respond(request: Request, env: Env) -> Result<Response> {
    let ip = rate_limit::client_ip(request.headers());
    let now = Date::now().as_millis() / 1000;
    if request.method() == Method::Options {
        // Preflights are the browser's, not the caller's: they show the quota but do not use it.
        let quota = rate_limit::peek(&env, &ip, now).await;
        return http::finish(http::preflight()?, quota.remaining);
    }
    let (remaining, outcome) = match rate_limit::consume(&env, &ip, now).await {
        Ok(quota) => (quota.remaining, handle(&request, &env, now).await),
        Err(limited) => (0, Err(limited)),
    };
    let response = match outcome {
        Ok(response) => response,
        Err(error) => {
            if error.status() >= 500 {
                worker::console_error!("{} {}: {error}", request.method(), request.path());
            }
            http::error(&error)?
        }
    };
    http::finish(response, remaining)
}

/// Everything after the rate limit, at wall-clock time `now` (Unix seconds); errors become
/// `{"error": ...}` in [`respond`].
async fn handle(request: &Request, env: &Env, now: u64) -> Result<Response> {
    if request.method() != Method::Get && request.method() != Method::Head {
        return Err(Error::MethodNotAllowed(request.method().to_string()));
    }
    let path = request.path();
    let route = routes::route(&path).ok_or_else(|| Error::NoRoute(path.clone()))?;
    let config = Config::from_env(env);
    let budget = Cell::new(rpc::SUBREQUEST_BUDGET);
    let mut rpc =
        Rpc { url: &config.rpc_url, batch_size: config.batch_size, multicall: None, budget: &budget };
    if route == Route::Health {
        return health(&config, &rpc).await;
    }
    rpc.multicall = config.multicall()?;
    let registry = config.registry()?;
    let url = request.url()?;
    let endpoint = Endpoint::parse(route, &url)?;
    let origin = url.origin().ascii_serialization();
    let deps = Deps { rpc, registry, origin: &origin, now };
    let if_none_match = request.headers().get("if-none-match")?;

    let Some((cache_path, ttl)) = endpoint.cache() else {
        return http::answer(&endpoint.answer(&deps).await?, "no-store");
    };
    let key = deps.cache_key(&cache_path);
    let (response, hit) = match cache::lookup(&key, now).await? {
        Some(cached) => (cached, "HIT"),
        None => (cache::store(&key, &endpoint.answer(&deps).await?, ttl, now).await?, "MISS"),
    };
    let etag = response.headers().get("etag")?.unwrap_or_default();
    let response = match if_none_match {
        Some(candidates) if http::etag_matches(&candidates, &etag) => {
            let cache_control = response.headers().get("cache-control")?.unwrap_or_default();
            http::not_modified(&etag, &cache_control)?
        }
        _ => response,
    };
    // Diagnostics for operators and tests: whether the chain was read for this answer.
    http::with_header(response, "x-cache", hit)
}

/// `/health`: `ok` when the RPC endpoint answers with a block, `degraded` (503) when not.
async fn health(config: &Config, rpc: &Rpc<'_>) -> Result<Response> {
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
