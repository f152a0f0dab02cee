#![doc = include_str!("../README.md")]

mod answers;
mod apart;
mod cache;
mod cached;
mod config;
mod d1;
mod deps;
mod error;
mod handler;
mod health;
mod http;
mod incoming;
mod index;
mod openapi;
mod passes;
mod per_env;
mod rate_limit;
mod reads;
mod request_body;
mod routes;
mod rpc;
mod snapshot;
mod verify;
mod wallet_standing;
mod webhooks;

pub use cache::refresh::RefreshLease;
pub use index::{IndexPacer, StreamShard};
pub use verify::nonces::NonceStore;
pub use webhooks::sender::WebhookSender;

pub use config::{
    DEFAULT_BATCH_SIZE, DEFAULT_FEED_STREAM_BACKLOG_BYTES, DEFAULT_FEED_STREAM_CONNECTION_BYTES,
    DEFAULT_FEED_STREAM_CONNECTION_SECS, DEFAULT_FEED_STREAM_HEARTBEAT_SECS,
    DEFAULT_FEED_STREAM_MAX_LISTENERS, DEFAULT_FEED_STREAM_MAX_PER_CLIENT, DEFAULT_FEED_STREAM_SHARDS,
    DEFAULT_INDEX_AGENTS_PER_RUN, DEFAULT_INDEX_ANSWER_TTL_SECS, DEFAULT_INDEX_BLOCKS_PER_RUN,
    DEFAULT_INDEX_INTERVAL_SECS, DEFAULT_INDEX_MAX_AGE_SECS, DEFAULT_INDEX_REORG_WINDOW,
    DEFAULT_INDEX_SWEEP_PER_RUN, DEFAULT_MEMORY_CACHE_BYTES, DEFAULT_RPC_URL,
};
pub use error::{Error, Result};

use worker::{
    Context, Env, Headers, MessageBatch, Response, ScheduleContext, ScheduledEvent, event,
    worker_sys::web_sys,
};

pub(crate) use apart::apart;

/// The runtime's request as it comes (not workers-rs's `Request`, whose conversion reads what
/// most answers never use: `incoming.rs`).
#[event(fetch)]
async fn fetch(request: web_sys::Request, env: Env, context: Context) -> worker::Result<web_sys::Response> {
    // Only building a response can fail here (header plumbing). The fallback is still the API's
    // shape: a JSON error a browser may read.
    match handler::respond(incoming::Incoming::new(request), env, context).await {
        Ok(response) => Ok(response),
        Err(error) => {
            worker::console_error!("building a response failed: {error}");
            let headers = Headers::new();
            headers.set("content-type", "application/json; charset=utf-8")?;
            headers.set("cache-control", "no-store")?;
            headers.set("access-control-allow-origin", "*")?;
            headers.set("x-content-type-options", http::NOSNIFF)?;
            let body = serde_json::json!({ "error": error.to_string() }).to_string();
            Ok(Response::ok(body)?.with_status(500).with_headers(headers).into())
        }
    }
}

/// A Cron Trigger (`wrangler.toml`): the watchdog of the registry index's pacer, which runs the
/// index at the chain's pace (or, with the pacer off, one bounded step of the index).
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _context: ScheduleContext) {
    index::watch(&env).await;
}

/// The webhooks' queues (`wrangler.toml`): handoffs to the receivers' senders, and dead letters
/// to record.
#[event(queue)]
async fn queue(batch: MessageBatch<String>, env: Env, _context: Context) -> worker::Result<()> {
    webhooks::consume(batch, &env).await;
    Ok(())
}
