//! Response building: JSON bodies, error bodies, 304s, and the headers every response carries
//! (CORS, `X-RateLimit-Remaining` and `X-Content-Type-Options`).

use kya_core::BlockRef;
use wasm_bindgen::{JsValue, prelude::wasm_bindgen};
use worker::{Headers, Response, ResponseBody, ResponseBuilder, worker_sys::web_sys};

use crate::{Error, Result};

#[wasm_bindgen(inline_js = "export function set_headers(headers, flat) {
  const parts = flat.split('\\n');
  for (let i = 0; i + 1 < parts.length; i += 2) headers.set(parts[i], parts[i + 1]);
}
export function finish_bytes(status, headers, flat, bytes) {
  set_headers(headers, flat);
  return new Response(bytes.slice(), { status, headers });
}
export function finish_body(status, headers, flat, body) {
  set_headers(headers, flat);
  return new Response(body, { status, headers });
}")]
extern "C" {
    #[wasm_bindgen(catch, js_name = set_headers)]
    fn set_headers_in_javascript(headers: &JsValue, flat: &str) -> std::result::Result<(), JsValue>;

    /// The runtime's `Response` of `status`, `headers` with the pairs of `flat` set (as
    /// `set_headers`), and `bytes`, copied there: wasm-bindgen hands over a view of wasm's
    /// memory, and workerd keeps a body's bytes without copying them.
    #[wasm_bindgen(catch, js_name = finish_bytes)]
    fn finish_bytes_in_javascript(
        status: u16,
        headers: &JsValue,
        flat: &str,
        bytes: &[u8],
    ) -> std::result::Result<web_sys::Response, JsValue>;

    /// As `finish_bytes`, with `body` a stream, or null.
    #[wasm_bindgen(catch, js_name = finish_body)]
    fn finish_body_in_javascript(
        status: u16,
        headers: &JsValue,
        flat: &str,
        body: &JsValue,
    ) -> std::result::Result<web_sys::Response, JsValue>;
}

/// Sets each header of `pairs` (name, value) on `headers`, in order, with one call into
/// JavaScript: a response carries ten to fifteen headers, and each `Headers.set` from wasm is a
/// call across the boundary with its two strings decoded apart (docs/bench/point-answers-*.md:
/// the glue was a quarter of a point answer's CPU). A name or value with a line break (never a
/// valid header) is set alone, for the runtime to refuse as it would.
pub(crate) fn set_all<N: AsRef<str>, V: AsRef<str>>(headers: &Headers, pairs: &[(N, V)]) -> Result<()> {
    let breaks = |text: &str| text.contains('\n');
    if pairs.iter().any(|(name, value)| breaks(name.as_ref()) || breaks(value.as_ref())) {
        for (name, value) in pairs {
            headers.set(name.as_ref(), value.as_ref())?;
        }
        return Ok(());
    }
    set_headers_in_javascript(headers.0.as_ref(), &joined(pairs)).map_err(worker::Error::from)?;
    Ok(())
}

/// `response` with the headers `pairs` set on the `Headers` it was built with, as [`set_all`]
/// sets them (a workers-rs response always makes one: a new one for it would be a second).
pub(crate) fn with_pairs<N: AsRef<str>, V: AsRef<str>>(
    response: Response,
    pairs: &[(N, V)],
) -> Result<Response> {
    set_all(response.headers(), pairs)?;
    Ok(response)
}

/// `pairs` as `set_headers` takes them: name and value on lines of their own.
fn joined<N: AsRef<str>, V: AsRef<str>>(pairs: &[(N, V)]) -> String {
    let mut flat = String::with_capacity(
        pairs.iter().map(|(name, value)| name.as_ref().len() + value.as_ref().len() + 2).sum(),
    );
    for (name, value) in pairs {
        if !flat.is_empty() {
            flat.push('\n');
        }
        flat.push_str(name.as_ref());
        flat.push('\n');
        flat.push_str(value.as_ref());
    }
    flat
}

/// A successful answer's JSON body and the block it was read at (sent, and cached, as
/// `X-Block-Number` and `X-Block-Timestamp`, so clients can evaluate it at the chain's time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) body: String,
    pub(crate) block: BlockRef,
    /// The registry's `attestationGracePeriod()` at `block`, for an answer that states
    /// compliance (sent, and cached, as `X-Attestation-Grace-Period`).
    pub(crate) grace_period: Option<u64>,
    /// When (Unix seconds, wall clock) its chain data was read: the start of its TTL.
    pub(crate) read_at: u64,
    /// Where a registry-wide answer came from (sent, and cached, as `X-Index-*` headers).
    pub(crate) source: Source,
}

/// Where an answer came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Source {
    /// The chain, for this answer (point reads).
    #[default]
    Chain,
    /// The registry index, `lag_blocks` behind the chain's head when its last run (at `run_at`,
    /// Unix seconds) began.
    Index { lag_blocks: u64, run_at: u64 },
    /// The chain, read whole because the index could not answer, for the reason given.
    Fallback(String),
}

/// `X-Index-Lag-Blocks`: how many blocks the index was behind the chain's head at its last run.
pub(crate) const INDEX_LAG_BLOCKS: &str = "x-index-lag-blocks";
/// `X-Index-Run-At`: when (Unix seconds) that run began.
pub(crate) const INDEX_RUN_AT: &str = "x-index-run-at";
/// `X-Index-Fallback`: why a registry-wide answer was read from the chain, not the index.
pub(crate) const INDEX_FALLBACK: &str = "x-index-fallback";

impl Source {
    /// The source an answer's headers name.
    pub(crate) fn from_headers(headers: &Headers) -> Self {
        let header = |name: &str| headers.get(name).ok().flatten();
        let number = |name: &str| header(name).and_then(|text| text.parse::<u64>().ok());
        if let Some(reason) = header(INDEX_FALLBACK) {
            return Self::Fallback(reason);
        }
        match (number(INDEX_LAG_BLOCKS), number(INDEX_RUN_AT)) {
            (Some(lag_blocks), Some(run_at)) => Self::Index { lag_blocks, run_at },
            _ => Self::Chain,
        }
    }

    /// Seconds the answer may be cached: an endpoint's `ttl`, but an answer from the index only
    /// `index_ttl` (`INDEX_ANSWER_TTL_SECS`), until the next runs may have changed it.
    pub(crate) fn ttl(&self, ttl: u64, index_ttl: u64) -> u64 {
        match self {
            Self::Index { .. } => ttl.min(index_ttl),
            _ => ttl,
        }
    }

    /// The headers naming this source, appended to `pairs`.
    pub(crate) fn push_headers(&self, pairs: &mut Vec<(&'static str, String)>) {
        match self {
            Self::Chain => {}
            Self::Index { lag_blocks, run_at } => {
                pairs.push((INDEX_LAG_BLOCKS, lag_blocks.to_string()));
                pairs.push((INDEX_RUN_AT, run_at.to_string()));
            }
            Self::Fallback(reason) => pairs.push((INDEX_FALLBACK, reason.clone())),
        }
    }
}

/// The methods every path of the API serves: `Allow` of a 405 and the preflight's
/// `Access-Control-Allow-Methods` (the OpenAPI document's operations are held to it).
pub(crate) const METHODS: &str = "GET, HEAD, OPTIONS";

/// The methods of the paths that take a body: `POST /api/v1/kya/verify` and `/api/v1/kya/batch`.
pub(crate) const POST_METHODS: &str = "POST, OPTIONS";

/// Request headers a cross-origin caller may send (a JSON body's type, `If-None-Match` for a
/// 304, the stream's `Last-Event-ID`, and the D1 session's `X-D1-Bookmark` of a point answer).
pub(crate) const ALLOWED_HEADERS: &str = "Content-Type, If-None-Match, Last-Event-ID, X-D1-Bookmark";

/// Seconds a browser may keep a preflight's answer.
pub(crate) const PREFLIGHT_MAX_AGE: &str = "86400";

/// Headers a browser may read from a cross-origin response.
pub(crate) const EXPOSED_HEADERS: &str = "X-RateLimit-Remaining, ETag, Retry-After, Cache-Control, X-Cache, X-Cache-Tier, \
                               X-Expires-At, X-Block-Number, X-Block-Timestamp, X-Attestation-Grace-Period, \
                               X-Index-Lag-Blocks, X-Index-Run-At, X-Index-Fallback, X-D1-Bookmark";

/// `X-Content-Type-Options` of every answer.
pub(crate) const NOSNIFF: &str = "nosniff";

/// A JSON response with `status` and a `Cache-Control` header.
pub(crate) fn json(status: u16, body: &str, cache_control: &str) -> Result<Response> {
    json_with(status, body, vec![("cache-control", cache_control.to_owned())])
}

/// A JSON body's content type.
pub(crate) const JSON: &str = "application/json; charset=utf-8";

/// [`json`] with the headers `pairs` (its `Cache-Control` among them) set at once.
pub(crate) fn json_with(status: u16, body: &str, mut pairs: Vec<(&'static str, String)>) -> Result<Response> {
    pairs.insert(0, ("content-type", JSON.to_owned()));
    with_pairs(ResponseBuilder::new().with_status(status).fixed(body.as_bytes().to_vec()), &pairs)
}

/// A 200 answer read from the chain: its JSON body, and the pinned block as `X-Block-Number` and
/// `X-Block-Timestamp` (Unix seconds), so that a client computes compliance at the chain's time.
pub(crate) fn answer(answer: &Answer, cache_control: &str) -> Result<Response> {
    answer_with(answer, cache_control, Vec::new())
}

/// [`answer`] with the headers `extra` too, all set at once.
pub(crate) fn answer_with(
    answer: &Answer,
    cache_control: &str,
    extra: Vec<(&'static str, String)>,
) -> Result<Response> {
    let mut pairs = vec![("cache-control", cache_control.to_owned())];
    push_block(&mut pairs, answer.block, answer.grace_period);
    answer.source.push_headers(&mut pairs);
    pairs.extend(extra);
    json_with(200, &answer.body, pairs)
}

/// `X-Attestation-Grace-Period`: the registry's `attestationGracePeriod()` (seconds) at the
/// answer's block, which its compliance was judged by, so that a client judges the records it
/// holds the same way (the browser package's `evaluateCompliance`).
pub(crate) const GRACE_PERIOD: &str = "x-attestation-grace-period";

/// `X-Block-Number` and `X-Block-Timestamp` of `block`, and for an answer that states
/// compliance the `X-Attestation-Grace-Period` that judged it there, appended to `pairs`.
pub(crate) fn push_block(
    pairs: &mut Vec<(&'static str, String)>,
    block: BlockRef,
    grace_period: Option<u64>,
) {
    pairs.push(("x-block-number", block.number.to_string()));
    pairs.push(("x-block-timestamp", block.timestamp.to_string()));
    if let Some(seconds) = grace_period {
        pairs.push((GRACE_PERIOD, seconds.to_string()));
    }
}

/// `{"error": message}` with the error's status; never cacheable.
pub(crate) fn error(error: &Error) -> Result<Response> {
    let body = serde_json::json!({ "error": error.to_string() }).to_string();
    let response = json(error.status(), &body, "no-store")?;
    match error {
        Error::RateLimited { retry_after }
        | Error::ProviderUnavailable { retry_after: Some(retry_after), .. } => {
            response.headers().set("retry-after", &retry_after.to_string())?
        }
        Error::MethodNotAllowed(_) => response.headers().set("allow", METHODS)?,
        Error::PostOnly { .. } => response.headers().set("allow", POST_METHODS)?,
        _ => {}
    }
    Ok(response)
}

/// 304 for a matching `If-None-Match`, with the validators of the full response.
pub(crate) fn not_modified(etag: &str, cache_control: &str) -> Result<Response> {
    not_modified_with(etag, cache_control, Vec::new())
}

/// [`not_modified`] with the headers `extra` too, all set at once.
pub(crate) fn not_modified_with(
    etag: &str,
    cache_control: &str,
    extra: Vec<(&'static str, String)>,
) -> Result<Response> {
    let mut pairs = vec![("etag", etag.to_owned()), ("cache-control", cache_control.to_owned())];
    pairs.extend(extra);
    with_pairs(Response::empty()?.with_status(304), &pairs)
}

/// The answer to a CORS preflight (an OPTIONS request on a path the API serves) for a path
/// served with `methods`.
pub(crate) fn preflight(methods: &str) -> Result<Response> {
    with_pairs(
        Response::empty()?.with_status(204),
        &[
            ("access-control-allow-methods", methods),
            ("access-control-allow-headers", ALLOWED_HEADERS),
            ("access-control-max-age", PREFLIGHT_MAX_AGE),
        ],
    )
}

/// The runtime's response of `response`, with CORS and rate-limit headers, and
/// `X-Content-Type-Options: nosniff` (a browser takes an answer for the JSON it says it is, never
/// for a script or a page). Every response here is built by this Worker (cached answers are
/// rebuilt from their tier's copy), so its headers can be set in place. The explorer's and
/// `/docs`' files get theirs from `edge-api/public/_headers`.
///
/// One call into JavaScript sets those headers and builds the response, where workers-rs's
/// conversion makes six (a body array made and filled, an init object and its two fields, the
/// constructor) and the headers one more.
pub(crate) fn finish(response: Response, remaining: u64) -> Result<web_sys::Response> {
    let remaining = remaining.to_string();
    let pairs = [
        ("x-content-type-options", NOSNIFF),
        ("access-control-allow-origin", "*"),
        ("access-control-expose-headers", EXPOSED_HEADERS),
        ("x-ratelimit-remaining", remaining.as_str()),
    ];
    let (status, headers, flat) = (response.status_code(), response.headers().0.as_ref(), joined(&pairs));
    let finished = match response.body() {
        ResponseBody::Body(bytes) => finish_bytes_in_javascript(status, headers, &flat, bytes),
        ResponseBody::Stream(stream) => finish_body_in_javascript(status, headers, &flat, stream),
        ResponseBody::Empty => finish_body_in_javascript(status, headers, &flat, &JsValue::NULL),
    };
    Ok(finished.map_err(worker::Error::from)?)
}

/// True when `If-None-Match` (a list, possibly weak validators, or `*`) matches `etag`.
pub(crate) fn etag_matches(if_none_match: &str, etag: &str) -> bool {
    let bare = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    if_none_match.split(',').any(|candidate| candidate.trim() == "*" || bare(candidate) == bare(etag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_forms() {
        assert!(etag_matches("\"abc\"", "\"abc\""));
        assert!(etag_matches("W/\"abc\", \"def\"", "\"abc\""));
        assert!(etag_matches("*", "\"abc\""));
        assert!(!etag_matches("\"abd\"", "\"abc\""));
        assert!(!etag_matches("", "\"abc\""));
    }
}
