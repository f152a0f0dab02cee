//! The HTTP surface: one route table, thin handlers, JSON errors `{"error": …}` with the status
//! chosen by [`status_of`], and graceful shutdown.

use std::{convert::Infallible, future::Future, net::IpAddr, sync::Arc};

use kya_core::api::client_ip::TrustedProxies;
use serde_json::json;
use tokio::net::TcpListener;
use warp::{
    Filter, Rejection, Reply,
    http::{HeaderValue, Method, StatusCode, header},
    reply::Response,
};

use crate::{
    error::Error,
    http::{read_limit::ReadLimiter, status::status_of},
    relayer::Relayer,
};

/// Largest `POST /relay` body: a registration's calldata is well under 2 KiB.
const MAX_BODY_BYTES: u64 = 64 * 1024;

/// Request headers a cross-origin caller may send: `POST /relay`'s JSON body needs
/// `Content-Type`, which is what makes a browser send a preflight first.
pub(crate) const ALLOWED_HEADERS: &str = "Content-Type";

/// Seconds a browser may keep a preflight's answer.
pub(crate) const PREFLIGHT_MAX_AGE: &str = "86400";

/// The methods a path some route has serves (`Allow` of its 405s, and its preflight's
/// `Access-Control-Allow-Methods`): `/relay` takes relays, every other path is read. Warp's
/// routes match a path with one trailing slash too, so `/relay/` takes relays as well.
pub(crate) fn methods_of(path: &str) -> &'static str {
    if path.strip_suffix('/').unwrap_or(path) == "/relay" { "POST, OPTIONS" } else { "GET, HEAD, OPTIONS" }
}

/// Serves the relayer on `listener`, and `/metrics` on `metrics` (an operator's listener,
/// loopback by default, as Prometheus exporters do: the public one does not serve it), until
/// `shutdown` completes; then stops accepting, finishes in-flight requests, and waits for
/// background relays and settlements.
pub async fn run(
    listener: TcpListener,
    metrics: TcpListener,
    relayer: Arc<Relayer>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    for (listener, what) in [(&listener, "relayer listening"), (&metrics, "metrics listening")] {
        if let Ok(address) = listener.local_addr() {
            tracing::info!(%address, "{what}");
        }
    }
    let stopping = tokio_util::sync::CancellationToken::new();
    let metrics = tokio::spawn(
        warp::serve(metrics_routes(Arc::clone(&relayer)))
            .incoming(metrics)
            .graceful(stopping.clone().cancelled_owned())
            .run(),
    );
    warp::serve(routes(Arc::clone(&relayer))).incoming(listener).graceful(shutdown).run().await;
    stopping.cancel();
    let _ = metrics.await;
    tracing::info!("no more requests; waiting for relays in flight");
    relayer.drain().await;
    tracing::info!("relayer stopped");
}

/// The metrics listener's routes: `GET /metrics` (and HEAD); anything else is a 404. No limit:
/// a scrape reads the store and a cached balance, never the chain.
pub fn metrics_routes(
    relayer: Arc<Relayer>,
) -> impl Filter<Extract = (impl Reply,), Error = Infallible> + Clone + Send + Sync + 'static {
    warp::path!("metrics")
        .and(read())
        .and(warp::any().map(move || Arc::clone(&relayer)))
        .then(|relayer: Arc<Relayer>| async move {
            match relayer.metrics().await {
                Ok(text) => {
                    warp::reply::with_header(text, "content-type", "text/plain; version=0.0.4; charset=utf-8")
                        .into_response()
                }
                Err(error) => error_response(&error),
            }
        })
        .recover(|rejection: Rejection| async move { Ok::<_, Infallible>(rejected(&rejection)) })
        .unify()
}

/// The route table.
pub fn routes(
    relayer: Arc<Relayer>,
) -> impl Filter<Extract = (impl Reply,), Error = Infallible> + Clone + Send + Sync + 'static {
    let limiter = Arc::new(ReadLimiter::new(relayer.read_rate_limit_per_minute()));
    let proxies = Arc::new(relayer.trusted_proxies().clone());
    let with = move || {
        let relayer = Arc::clone(&relayer);
        warp::any().map(move || Arc::clone(&relayer))
    };
    let relay = warp::path!("relay")
        .and(warp::post())
        .and(warp::body::content_length_limit(MAX_BODY_BYTES))
        .and(warp::body::bytes())
        .and(client(Arc::clone(&proxies)))
        .and(with())
        .then(|body: warp::hyper::body::Bytes, client: IpAddr, relayer: Arc<Relayer>| async move {
            match relayer.relay(body.to_vec(), client).await {
                Ok(relayed) => {
                    let status = if relayed.sent { StatusCode::OK } else { StatusCode::ACCEPTED };
                    warp::reply::with_status(warp::reply::json(&relayed.body), status).into_response()
                }
                Err(error) => error_response(&error),
            }
        });
    // The read endpoints below each cost the node RPC calls: limited per IP, in memory.
    let read_allowed = client(proxies)
        .and_then(move |client: IpAddr| {
            let limiter = Arc::clone(&limiter);
            async move { limiter.check(client).map_err(|error| warp::reject::custom(Refused(error))) }
        })
        .untuple_one();
    let status = warp::path!("status")
        .and(read())
        .and(read_allowed.clone())
        .and(with())
        .then(|relayer: Arc<Relayer>| async move { respond(relayer.status().await) });
    let nonce =
        warp::path!("nonce" / String).and(read()).and(read_allowed.clone()).and(with()).then(
            |address: String, relayer: Arc<Relayer>| async move { respond(relayer.nonce(&address).await) },
        );
    let relay_by_id = warp::path!("relay" / String)
        .and(read())
        .and(read_allowed.clone())
        .and(with())
        .then(|id: String, relayer: Arc<Relayer>| async move { respond(relayer.relay_by_id(&id).await) });
    let relay_by_hash =
        warp::path!("relay" / "tx" / String).and(read()).and(read_allowed.clone()).and(with()).then(
            |hash: String, relayer: Arc<Relayer>| async move { respond(relayer.relay_by_hash(&hash).await) },
        );
    let relay_by_request = warp::path!("relay" / "signer" / String / String)
        .and(read())
        .and(read_allowed.clone())
        .and(with())
        .then(|address: String, nonce: String, relayer: Arc<Relayer>| async move {
            respond(relayer.relay_by_request(&address, &nonce).await)
        });
    let domain = warp::path!("domain")
        .and(read())
        .and(read_allowed)
        .and(with())
        .then(|relayer: Arc<Relayer>| async move { respond(relayer.domain().await) });
    let openapi = warp::path!("openapi.json").and(read()).map(|| {
        warp::reply::with_header(crate::http::openapi::DOCUMENT, "content-type", "application/json")
            .into_response()
    });
    // The API reference (`/docs`) and the files it loads. The path first: another method on any
    // other path stays a 404, not a 405.
    let reference = warp::path::full()
        .and_then(|path: warp::path::FullPath| async move {
            crate::http::reference::file(path.as_str()).ok_or_else(warp::reject::not_found)
        })
        .and(read())
        .map(crate::http::reference::response);
    let health = warp::path!("health")
        .and(read())
        .map(|| warp::reply::json(&json!({ "status": "ok" })).into_response());
    // Each route boxed: chained unboxed, their nested types overflow the compiler's recursion
    // limit in a release build.
    let routes = relay
        .boxed()
        .or(relay_by_id.boxed())
        .unify()
        .or(relay_by_hash.boxed())
        .unify()
        .or(relay_by_request.boxed())
        .unify()
        .or(status.boxed())
        .unify()
        .or(nonce.boxed())
        .unify()
        .or(domain.boxed())
        .unify()
        .or(health.boxed())
        .unify()
        .or(openapi.boxed())
        .unify()
        .or(reference.boxed())
        .unify()
        .recover(|rejection: Rejection| async move { Ok::<_, Infallible>(rejected(&rejection)) })
        .unify();
    warp::method()
        .and(warp::path::full())
        .and(routes)
        .map(|method: Method, path: warp::path::FullPath, response: Response| {
            finish(&method, path.as_str(), response)
        })
        .with(warp::trace::request())
}

/// GET, or HEAD: the same answer, whose body hyper leaves out.
fn read() -> impl Filter<Extract = (), Error = Rejection> + Copy {
    warp::get().or(warp::head()).unify()
}

/// What every response gets on its way out: `nosniff`, and any origin may read it: nothing here depends on
/// cookies or credentials (a relay is authorised by its signature alone), and an agent's page
/// must be able to relay. Warp refuses a method with 405 only on a path some route has (404
/// elsewhere); there, OPTIONS, which no route takes, is the CORS preflight, and any other
/// method's 405 names the methods its path serves (RFC 9110, section 15.5.6).
fn finish(method: &Method, path: &str, mut response: Response) -> Response {
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        let methods = methods_of(path);
        if method == Method::OPTIONS {
            response = preflight(methods);
        } else {
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(methods));
        }
    }
    response.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    // Every answer is JSON or plain text: a browser must never sniff it into something it runs.
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The answer to a CORS preflight on a path that serves `methods`: 204, no body, and no read
/// quota used (the routes refused it before their limits).
fn preflight(methods: &'static str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(methods));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(PREFLIGHT_MAX_AGE));
    response
}

/// The client's address: the TCP peer, or behind a trusted reverse proxy the right-most
/// untrusted `X-Forwarded-For` hop ([`TrustedProxies::client`]). Each limit then counts it by its
/// own network (reads by /64, relays by /48).
fn client(
    proxies: Arc<TrustedProxies>,
) -> impl Filter<Extract = (IpAddr,), Error = Infallible> + Clone + Send + Sync + 'static {
    warp::addr::remote().and(warp::header::headers_cloned()).map(
        move |remote: Option<std::net::SocketAddr>, headers: warp::http::HeaderMap| {
            let peer = remote.map_or(IpAddr::from([0, 0, 0, 0]), |remote| remote.ip());
            if proxies.is_empty() {
                return peer;
            }
            let forwarded = headers.get_all("x-forwarded-for").iter().filter_map(|value| value.to_str().ok());
            proxies.client(peer, forwarded)
        },
    )
}

fn respond<T: serde::Serialize>(result: crate::error::Result<T>) -> Response {
    match result {
        Ok(value) => warp::reply::json(&value).into_response(),
        Err(error) => error_response(&error),
    }
}

fn error_response(error: &Error) -> Response {
    let status = status_of(error);
    if status == StatusCode::INTERNAL_SERVER_ERROR || matches!(error, Error::StoreUnavailable(_)) {
        tracing::warn!(error = %error.detail(), "request failed");
    }
    let mut response = warp::reply::with_status(warp::reply::json(&error.body()), status).into_response();
    if let Some(secs) = error.retry_after_secs() {
        response.headers_mut().insert(warp::http::header::RETRY_AFTER, secs.into());
    }
    response
}

/// A refusal of ours inside a filter chain (the read limit), answered as its [`Error`].
#[derive(Debug)]
struct Refused(Error);

impl warp::reject::Reject for Refused {}

/// Warp's own refusals (unknown path, wrong method, oversized body) and ours as JSON errors.
fn rejected(rejection: &Rejection) -> Response {
    if let Some(Refused(error)) = rejection.find::<Refused>() {
        return error_response(error);
    }
    if rejection.is_not_found() {
        return error_response(&Error::NotFound);
    }
    if rejection.find::<warp::reject::MethodNotAllowed>().is_some() {
        return error_response(&Error::MethodNotAllowed);
    }
    if rejection.find::<warp::reject::PayloadTooLarge>().is_some() {
        return error_response(&Error::BadRequest(format!(
            "Body too large (at most {MAX_BODY_BYTES} bytes)"
        )));
    }
    if rejection.find::<warp::reject::LengthRequired>().is_some() {
        return error_response(&Error::LengthRequired);
    }
    // The rest (a body that could not be read, a broken header) is the client's doing; warp's
    // own `Debug` of it would only leak internals into the answer.
    tracing::debug!(?rejection, "request rejected");
    error_response(&Error::BadRequest("Bad request: the request could not be read".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_slash_serves_the_same_methods() {
        assert_eq!(methods_of("/relay"), "POST, OPTIONS");
        assert_eq!(methods_of("/relay/"), "POST, OPTIONS");
        assert_eq!(methods_of("/relay/0123456789abcdef0123456789abcdef"), "GET, HEAD, OPTIONS");
        assert_eq!(methods_of("/status/"), "GET, HEAD, OPTIONS");
    }
}
