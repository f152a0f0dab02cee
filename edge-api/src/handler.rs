//! One request's way through the API: the CORS preflight, the rate limit (a batch weighed by its
//! wallets), then the answer of its route, with the settings read once and the chain's client
//! built from them. Errors become `{"error": ...}` bodies here; only building a response can
//! fail past this point (`lib.rs`'s fallback).

use std::cell::Cell;

use worker::{Context, Date, Env, Response, worker_sys::web_sys};

use crate::{
    Error, Result, answers, answers::Reply, apart, cache, cached, config::Config, deps::Deps, health, http,
    incoming::Incoming, incoming::Target, index, openapi, passes, rate_limit, routes, routes::Endpoint, rpc,
    rpc::Rpc, verify,
};

pub(crate) async fn respond(request: Incoming, env: Env, context: Context) -> Result<web_sys::Response> {
    let ip = rate_limit::client_of(|name| request.header(name));
    let now_ms = Date::now().as_millis();
    let now = now_ms / 1000;
    let target = request.target();
    let (method, path) = (request.method.as_str(), target.path);
    if method == "OPTIONS" {
        // Preflights are the browser's, not the caller's: they show the quota but do not use it.
        // A path the API does not serve has no CORS policy to tell: its 404, like any method's.
        let response = if path == verify::PATH || path == passes::batch::PATH {
            http::preflight(http::POST_METHODS)?
        } else if routes::serves(path) {
            http::preflight(http::METHODS)?
        } else {
            http::error(&Error::NoRoute(path.to_owned()))?
        };
        return http::finish(response, rate_limit::peek(&ip, now).remaining);
    }
    // A batch counts as one request per 10 wallets. It is counted as one before its body is
    // read, so a client over its limit makes the Worker read nothing of it, and as the rest once
    // its wallets are known (a body that cannot be read counts as the one).
    let is_batch = path == passes::batch::PATH && method == "POST";
    // The settings, read once per isolate for whichever answer this is.
    let config = Config::from_env(&env);
    let counters =
        rate_limit::Counters { env: &env, context: &context, log_writes: config.rate_limit_log_writes };
    let (remaining, outcome) = match rate_limit::admit(&counters, &ip, now_ms, 1) {
        Ok(quota) => {
            if is_batch {
                let bookmark = request.bookmark();
                let wallets = passes::batch::read(&mut request.to_request()).await;
                let rest = wallets.as_ref().map_or(0, |wallets| passes::batch::weight(wallets.len()) - 1);
                let quota = match rest {
                    0 => Ok(quota),
                    rest => rate_limit::admit(&counters, &ip, now_ms, rest),
                };
                match quota {
                    Ok(quota) => {
                        (quota.remaining, apart(serve_batch((wallets, bookmark), &env, &config, now)).await)
                    }
                    Err(limited) => (0, Err(limited)),
                }
            } else {
                (quota.remaining, serve(&request, &target, &env, &config, &context, now).await)
            }
        }
        Err(limited) => (0, Err(limited)),
    };
    let response = match outcome {
        Ok(response) => response,
        Err(error) => {
            if error.status() >= 500 {
                worker::console_error!("{method} {path}: {error}");
            }
            http::error(&error)?
        }
    };
    http::finish(response, remaining)
}

/// `POST /api/v1/kya/batch`, its body read (and counted) already, with the client's bookmark.
async fn serve_batch(
    (wallets, bookmark): (Result<Vec<alloy_primitives::Address>>, Result<Option<String>>),
    env: &Env,
    config: &Config,
    now: u64,
) -> Result<Response> {
    let bookmark = bookmark?;
    let bookmark = bookmark.as_deref();
    let wallets = wallets?;
    let budget = Cell::new(rpc::SUBREQUEST_BUDGET);
    let rpc = chain_rpc(config, &budget)?;
    passes::batch::answer(env, config, &rpc, &wallets, (now, bookmark)).await
}

/// The chain's client as `config` sets it, Multicall3 included, spending `budget`.
fn chain_rpc<'a>(config: &'a Config, budget: &'a Cell<u32>) -> Result<Rpc<'a>> {
    let multicall = config.multicall()?;
    Ok(Rpc { url: &config.rpc_url, batch_size: config.batch_size, multicall, budget, pinned: None })
}

/// Everything after the rate limit, at wall-clock time `now` (Unix seconds); errors become
/// `{"error": ...}` in [`respond`].
async fn serve(
    request: &Incoming,
    url: &Target<'_>,
    env: &Env,
    config: &Config,
    context: &Context,
    now: u64,
) -> Result<Response> {
    let method = request.method.as_str();
    for path in [verify::PATH, passes::batch::PATH] {
        if url.path == path && method != "POST" {
            return Err(Error::PostOnly { method: method.to_owned(), path });
        }
    }
    if url.path == verify::PATH {
        let budget = Cell::new(rpc::SUBREQUEST_BUDGET);
        let rpc = chain_rpc(config, &budget)?;
        let registry = config.registry()?;
        let issuer = passes::Issuer::of(env, config, &url.origin, registry)?;
        let bookmark = request.bookmark()?;
        let context = verify::Context {
            rpc: &rpc,
            config,
            bookmark: bookmark.as_deref(),
            registry,
            policy: &config.verify,
            issuer: issuer.as_ref(),
        };
        return apart(verify::answer(&mut request.to_request(), env, &context, now)).await;
    }
    if method != "GET" && method != "HEAD" {
        return Err(Error::MethodNotAllowed(method.to_owned()));
    }
    let query = url.query_pairs();
    let endpoint = routes::resolve(url.path, &query)?;
    let budget = Cell::new(rpc::SUBREQUEST_BUDGET);
    let rpc = Rpc {
        url: &config.rpc_url,
        batch_size: config.batch_size,
        multicall: None,
        budget: &budget,
        pinned: None,
    };
    match &endpoint {
        Endpoint::Health => return apart(health::answer(config, &rpc, crate::d1::Store::open(env))).await,
        Endpoint::OpenApi => return http::json(200, openapi::DOCUMENT, openapi::CACHE_CONTROL),
        Endpoint::Jwks => return passes::answer_jwks(env),
        Endpoint::KyaPass(wallet) => {
            let rpc = chain_rpc(config, &budget)?;
            let bookmark = request.bookmark()?;
            let read = passes::PassRead { wallet: *wallet, now, bookmark: bookmark.as_deref() };
            return apart(passes::answer_pass(env, config, &rpc, &url.origin, read)).await;
        }
        Endpoint::Changes(query) => return apart(index::changes::answer(env, query)).await,
        Endpoint::ChangesStream(query) => {
            let head = method == "HEAD";
            return apart(index::stream::answer(env, &request.headers(), query.clone(), head)).await;
        }
        _ => {}
    }
    let origin = &url.origin;
    // The chain's addresses are parsed only when the chain is read: a hit needs neither.
    let deps = || -> Result<Deps<'_>> {
        Ok(Deps {
            rpc: Rpc { multicall: config.multicall()?, ..rpc },
            registry: config.registry()?,
            origin,
            now,
            memory_budget: config.memory_cache_bytes,
            cache_tag: &config.cache_tag,
            env,
            index_max_age_secs: config.index.max_age_secs,
            index_answer_ttl_secs: config.index.answer_ttl_secs,
        })
    };

    // `/kya/:wallet`, `/agent/:id` and its lineage from the index beside the Worker, uncached: every request
    // reads it, so a change a run applied is never hidden behind a copy. Else from the chain,
    // with SPEC.md's TTLs, saying why.
    let bookmark = request.bookmark()?;
    let fallback = match apart(answers::from_index(&endpoint, env, config, now, bookmark.as_deref())).await? {
        Some(Ok((answer, bookmark))) => {
            // Fresh now, with its validator: a client asks again each time, and a 304 when the
            // index still says the same.
            let copy = cache::CachedAnswer { etag: cache::etag(&answer.body), expires_at: now, answer };
            let mut pairs = vec![("x-cache", "MISS".to_owned())];
            pairs.extend(bookmark.map(|bookmark| (index::point::BOOKMARK, bookmark)));
            return match request.header("if-none-match") {
                Some(candidates) if http::etag_matches(&candidates, &copy.etag) => {
                    http::not_modified_with(&copy.etag, &cache::cache_control(0), pairs)
                }
                _ => copy.response_with(now, pairs),
            };
        }
        Some(Err(reason)) => Some(reason),
        None => None,
    };
    let response = async {
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
        let key = cache::key(origin, &config.cache_tag, &policy.path);
        let index_ttl = config.index.answer_ttl_secs;
        // The registry-wide answers read up to every row of the index: refreshed one at a time per
        // data centre (`cached`), when they are cached at all.
        let lease = (endpoint.registry_wide() && index_ttl > 0)
            .then(|| {
                let colo = request.colo().unwrap_or_else(|| "local".to_owned());
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
            if_none_match: request.header("if-none-match"),
            context,
            lease,
        };
        cached::answer(&endpoint, deps, request).await
    }
    .await?;
    if let Some(reason) = fallback {
        response.headers().set(http::INDEX_FALLBACK, &reason)?;
    }
    Ok(response)
}
