#![doc = include_str!("../README.md")]

mod answers;
mod cache;
mod cached;
mod config;
mod deps;
mod error;
mod health;
mod http;
mod index;
mod openapi;
mod passes;
mod rate_limit;
mod reads;
mod request_body;
mod routes;
mod rpc;
mod snapshot;
mod verify;
mod webhooks;

pub use cache::refresh::RefreshLease;
pub use index::{IndexPacer, StreamShard};
pub use verify::nonces::NonceStore;
pub use webhooks::sender::WebhookSender;

pub use config::{
    DEFAULT_BATCH_SIZE, DEFAULT_FEED_STREAM_BACKLOG_BYTES, DEFAULT_FEED_STREAM_HEARTBEAT_SECS,
    DEFAULT_FEED_STREAM_MAX_LISTENERS, DEFAULT_FEED_STREAM_MAX_PER_CLIENT, DEFAULT_FEED_STREAM_SHARDS,
    DEFAULT_INDEX_AGENTS_PER_RUN, DEFAULT_INDEX_ANSWER_TTL_SECS, DEFAULT_INDEX_BLOCKS_PER_RUN,
    DEFAULT_INDEX_INTERVAL_SECS, DEFAULT_INDEX_MAX_AGE_SECS, DEFAULT_INDEX_REORG_WINDOW,
    DEFAULT_INDEX_SWEEP_PER_RUN, DEFAULT_MEMORY_CACHE_BYTES, DEFAULT_RPC_URL,
};
pub use error::{Error, Result};

use std::{cell::Cell, future::Future, pin::Pin};

use worker::{
    Context, Date, Env, Headers, MessageBatch, Method, Request, Response, ScheduleContext, ScheduledEvent,
    event,
};

use crate::{answers::Reply, config::Config, deps::Deps, routes::Endpoint, rpc::Rpc};

#[event(fetch)]
async fn fetch(request: Request, env: Env, context: Context) -> worker::Result<Response> {
    // Only building a response can fail here (header plumbing). The fallback is still the API's
    // shape: a JSON error a browser may read.
    match respond(request, env, context).await {
        Ok(response) => Ok(response),
        Err(error) => {
            worker::console_error!("building a response failed: {error}");
            let headers = Headers::new();
            headers.set("content-type", "application/json; charset=utf-8")?;
            headers.set("cache-control", "no-store")?;
            headers.set("access-control-allow-origin", "*")?;
            headers.set("x-content-type-options", http::NOSNIFF)?;
            let body = serde_json::json!({ "error": error.to_string() }).to_string();
            Ok(Response::ok(body)?.with_status(500).with_headers(headers))
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

async fn respond(mut request: Request, env: Env, context: Context) -> Result<Response> {
    let ip = rate_limit::client_ip(request.headers());
    let now_ms = Date::now().as_millis();
    let now = now_ms / 1000;
    if request.method() == Method::Options {
        // Preflights are the browser's, not the caller's: they show the quota but do not use it.
        // A path the API does not serve has no CORS policy to tell: its 404, like any method's.
        let path = request.path();
        let response = if path == verify::PATH || path == passes::batch::PATH {
            http::preflight(http::POST_METHODS)?
        } else if routes::serves(&path) {
            http::preflight(http::METHODS)?
        } else {
            http::error(&Error::NoRoute(path))?
        };
        return http::finish(response, rate_limit::peek(&ip, now).remaining);
    }
    // A batch counts as one request per 10 wallets, so its body is read before it is counted
    // (a body that cannot be read counts as one).
    let batch = if request.path() == passes::batch::PATH && request.inner().method() == "POST" {
        Some(passes::batch::read(&mut request).await)
    } else {
        None
    };
    let weight = match &batch {
        Some(Ok(wallets)) => passes::batch::weight(wallets.len()),
        _ => 1,
    };
    let (remaining, outcome) = match rate_limit::admit(&env, &context, &ip, now_ms, weight) {
        Ok(quota) => {
            let outcome = match batch {
                Some(wallets) => apart(serve_batch(wallets, &env)).await,
                None => serve(&mut request, &env, &context, now).await,
            };
            (quota.remaining, outcome)
        }
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

/// `future` behind a pointer and a virtual call: its state machine is compiled as a function of
/// its own instead of being inlined into its caller's. A restarted Worker compiles each function
/// of the wasm when a request first runs it, so an answer kept apart costs its compile only to
/// the requests that give it: the rare arms of [`serve`] stay out of the fetch handler's future,
/// and each registry-wide answer out of the others' (`docs/bench/index-cold.md`).
pub(crate) fn apart<'a, T>(future: impl Future<Output = T> + 'a) -> Pin<Box<dyn Future<Output = T> + 'a>> {
    Box::pin(future)
}

/// `POST /api/v1/kya/batch`, its body read (and counted) already.
async fn serve_batch(wallets: Result<Vec<alloy_primitives::Address>>, env: &Env) -> Result<Response> {
    let wallets = wallets?;
    let config = Config::from_env(env);
    let budget = Cell::new(rpc::SUBREQUEST_BUDGET);
    let rpc = chain_rpc(&config, &budget)?;
    passes::batch::answer(&rpc, config.registry()?, &wallets).await
}

/// The chain's client as `config` sets it, Multicall3 included, spending `budget`.
fn chain_rpc<'a>(config: &'a Config, budget: &'a Cell<u32>) -> Result<Rpc<'a>> {
    let multicall = config.multicall()?;
    Ok(Rpc { url: &config.rpc_url, batch_size: config.batch_size, multicall, budget })
}

/// Everything after the rate limit, at wall-clock time `now` (Unix seconds); errors become
/// `{"error": ...}` in [`respond`].
async fn serve(request: &mut Request, env: &Env, context: &Context, now: u64) -> Result<Response> {
    // By name: workers-rs reads a method it has no variant for (QUERY, PROPFIND, ...) as GET.
    let method = request.inner().method();
    let url = request.url()?;
    for path in [verify::PATH, passes::batch::PATH] {
        if url.path() == path && method != "POST" {
            return Err(Error::PostOnly { method, path });
        }
    }
    if url.path() == verify::PATH {
        let config = Config::from_env(env);
        let budget = Cell::new(rpc::SUBREQUEST_BUDGET);
        let rpc = chain_rpc(&config, &budget)?;
        let origin = url.origin().ascii_serialization();
        let registry = config.registry()?;
        let issuer = passes::Issuer::of(env, &config, &origin, registry)?;
        let context =
            verify::Context { rpc: &rpc, registry, policy: &config.verify, issuer: issuer.as_ref() };
        return apart(verify::answer(request, env, &context, now)).await;
    }
    if method != "GET" && method != "HEAD" {
        return Err(Error::MethodNotAllowed(method));
    }
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let endpoint = routes::resolve(url.path(), &query)?;
    let config = Config::from_env(env);
    let budget = Cell::new(rpc::SUBREQUEST_BUDGET);
    let rpc = Rpc { url: &config.rpc_url, batch_size: config.batch_size, multicall: None, budget: &budget };
    match &endpoint {
        Endpoint::Health => return apart(health::answer(&config, &rpc, index::Store::open(env))).await,
        Endpoint::OpenApi => return http::json(200, openapi::DOCUMENT, openapi::CACHE_CONTROL),
        Endpoint::Jwks => return passes::answer_jwks(env),
        Endpoint::KyaPass(wallet) => {
            let rpc = chain_rpc(&config, &budget)?;
            let origin = url.origin().ascii_serialization();
            return apart(passes::answer_pass(env, &config, &rpc, &origin, *wallet, now)).await;
        }
        Endpoint::Changes(query) => return apart(index::changes::answer(env, query)).await,
        Endpoint::ChangesStream(query) => {
            let head = method == "HEAD";
            return apart(index::stream::answer(env, request.headers(), query.clone(), head)).await;
        }
        _ => {}
    }
    let origin = url.origin().ascii_serialization();
    // The chain's addresses are parsed only when the chain is read: a hit needs neither.
    let deps = || -> Result<Deps<'_>> {
        Ok(Deps {
            rpc: Rpc { multicall: config.multicall()?, ..rpc },
            registry: config.registry()?,
            origin: &origin,
            now,
            memory_budget: config.memory_cache_bytes,
            cache_tag: &config.cache_tag,
            env,
            index_max_age_secs: config.index.max_age_secs,
            index_answer_ttl_secs: config.index.answer_ttl_secs,
        })
    };

    let Some(policy) = endpoint.cache_policy() else {
        let deps = deps()?;
        return apart(async {
            match answers::answer(&endpoint, &deps).await? {
                Reply::Answer(answer) => http::answer(&answer, "no-store"),
                Reply::Stream(response) => Ok(response),
            }
        })
        .await;
    };
    let key = cache::key(&origin, &config.cache_tag, &policy.path);
    let index_ttl = config.index.answer_ttl_secs;
    // The registry-wide answers read up to every row of the index: refreshed one at a time per
    // data centre (`cached`), when they are cached at all.
    let lease = (endpoint.registry_wide() && index_ttl > 0)
        .then(|| {
            let colo = request.cf().map_or_else(|| "local".to_owned(), |cf| cf.colo());
            cache::refresh::Lease::of(env, &colo, &key)
        })
        .flatten();
    // With `INDEX_ANSWER_TTL_SECS=0` no registry-wide answer is cached (nor its fallback, which
    // reads the registry's snapshot, itself cached): each reads the index at once, without a
    // Cache API lookup that could only miss, a round trip on every request.
    let uncached = endpoint.registry_wide() && index_ttl == 0;
    let request = cached::Request {
        key,
        ttl: if uncached { 0 } else { policy.ttl },
        look_up: !uncached,
        index_ttl,
        now,
        memory_budget: config.memory_cache_bytes,
        if_none_match: request.headers().get("if-none-match")?,
        context,
        lease,
    };
    cached::answer(&endpoint, deps, request).await
}
