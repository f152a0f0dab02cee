//! Timing one GET to the Worker: to its head, its first body byte and its last, read as bytes
//! (no JSON parsing or schema check inside the timed span), and medians.

use std::time::{Duration, Instant};

/// One timed answer.
#[derive(Debug, Clone)]
pub(crate) struct Timed {
    pub(crate) status: u16,
    /// Until the first byte of the body (the head's, for an empty body).
    pub(crate) first_byte: Duration,
    /// Until the last byte.
    pub(crate) last_byte: Duration,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Timed {
    /// A header's value, if present.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// GETs `base` + `path` as client `ip`, timing it. A client sends at most 60 requests a minute
/// (the rate limit); a returning one costs no rate-limit write to KV with each request, which
/// under `wrangler dev` would be CPU of the same process.
pub(crate) async fn get(http: &reqwest::Client, base: &str, path: &str, ip: &str) -> Timed {
    let started = Instant::now();
    let mut response = http
        .get(format!("{base}{path}"))
        .header("cf-connecting-ip", ip)
        .send()
        .await
        .unwrap_or_else(|error| panic!("{path}: {error}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = Vec::new();
    let mut first_byte = None;
    while let Some(chunk) = response.chunk().await.unwrap_or_else(|error| panic!("{path}: {error}")) {
        first_byte.get_or_insert_with(|| started.elapsed());
        body.extend_from_slice(&chunk);
    }
    let last_byte = started.elapsed();
    Timed { status, first_byte: first_byte.unwrap_or(last_byte), last_byte, headers, body }
}

pub(crate) fn median(mut times: Vec<Duration>) -> Duration {
    assert!(!times.is_empty(), "a median of nothing");
    times.sort();
    times[times.len() / 2]
}

pub(crate) fn ms(time: Duration) -> String {
    let ms = time.as_secs_f64() * 1e3;
    if ms < 10.0 { format!("{ms:.2} ms") } else { format!("{ms:.1} ms") }
}
