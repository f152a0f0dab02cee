//! The Worker's own CPU under `wrangler dev`, from V8's sampling profiler driven through the
//! inspector wrangler offers DevTools (`--inspector-port`, the Chrome DevTools Protocol's
//! `Profiler` domain).
//!
//! The kernel's count of the runtime thread's CPU (`tests/benches/index/cpu.rs`) is an upper
//! bound: that thread also runs local D1's SQLite, KV and the Cache API, which on Cloudflare are
//! other machines' work. V8 samples the isolate only while the isolate is entered (workerd
//! releases it while a request waits for I/O), so its samples cover the Worker's JavaScript,
//! wasm, the bindings' glue and garbage collection, not SQLite's work.
//!
//! A sample stands for the time to the next one, but no more than the sampler's tick: a gap
//! longer than that is time the isolate was not running (between two requests, or waiting for
//! D1), not time spent in the sample's function. `(idle)` samples count nothing.
//!
//! The tick is read from the profile ([`tick`]): the spacings of samples within one stretch of
//! the isolate's work cluster at it (about 180 µs here, for the 100 asked), the gaps between
//! stretches are longer. The median spacing, used until the index benchmark's rounds showed
//! otherwise, is the tick only while most spacings fall inside stretches: for requests under a
//! millisecond, a stretch holds two to five samples, and in about one profile in four most
//! spacings were gaps, the median 0.8 to 1.1 ms, and every sample counted five times its tick
//! (an endpoint's profile of 40 requests then read 1.25 to 1.48 ms a request where its others
//! read 0.5 to 0.7; capped at the tick, 0.33 to 0.39 against 0.34 to 0.54).

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream, connect_async,
    tungstenite::{Message, client::IntoClientRequest, http::HeaderValue},
};

/// The layer of the Worker a profiled function (as [`Profile::by_function`] names it) belongs
/// to: what a change to our code can cut (the Rust compiled to wasm, and the JavaScript glue
/// wasm-bindgen and workers-rs put around it in the bundle's `entry.js`), and what it can only
/// call less (the runtime's bindings, `cloudflare-internal:*`, such as D1's; V8's builtins and
/// the runtime's native APIs; the garbage collector).
pub fn layer(function: &str) -> &'static str {
    if function.starts_with("js-to-wasm")
        || function.starts_with("wasm-to-js")
        || function.contains("entry.js")
    {
        "the glue between JavaScript and wasm (wasm-bindgen, workers-rs)"
    } else if function.ends_with("(wasm)") {
        "Rust (wasm)"
    } else if function.contains("cloudflare-internal:") {
        "the runtime's bindings in JavaScript (D1, KV, ...)"
    } else if function == "(garbage collector)" {
        "the garbage collector"
    } else {
        "V8 and the runtime's native APIs (fetch, Headers, builtins, (program))"
    }
}

/// Microseconds between samples asked of V8 (it keeps to it only while the isolate runs).
const SAMPLING_INTERVAL_MICROS: u64 = 100;

/// A DevTools session with a Worker's isolate.
pub struct Profiler {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
}

impl Profiler {
    /// Connects to the inspector of the `wrangler dev` listening on `inspector_port` and enables
    /// the profiler. Wrangler's proxy takes one DevTools client at a time, from a local origin.
    pub async fn attach(inspector_port: u16) -> Self {
        let mut request = format!("ws://127.0.0.1:{inspector_port}/ws")
            .into_client_request()
            .expect("the inspector's address");
        request.headers_mut().insert("origin", HeaderValue::from_static("http://localhost"));
        let (socket, _) = connect_async(request).await.expect("wrangler's inspector accepts a client");
        let mut profiler = Self { socket, next_id: 0 };
        profiler.call("Profiler.enable", json!({})).await;
        profiler.call("Profiler.setSamplingInterval", json!({ "interval": SAMPLING_INTERVAL_MICROS })).await;
        profiler
    }

    /// Starts sampling.
    pub async fn start(&mut self) {
        self.call("Profiler.start", json!({})).await;
    }

    /// Stops sampling and returns what was sampled since [`Profiler::start`].
    pub async fn stop(&mut self) -> Profile {
        let result = self.call("Profiler.stop", json!({})).await;
        Profile::from_devtools(&result["profile"])
    }

    /// Sends `method` and waits for its answer, passing over the events that come meanwhile.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({ "id": id, "method": method, "params": params }).to_string();
        self.socket.send(Message::text(message)).await.expect("the inspector takes a message");
        loop {
            let message = self.socket.next().await.expect("the inspector answers").expect("a frame");
            let Message::Text(text) = message else { continue };
            let answer: Value = serde_json::from_str(&text).expect("the inspector speaks JSON");
            if answer["id"] != id {
                continue;
            }
            assert!(answer.get("error").is_none(), "{method}: {answer}");
            return answer["result"].clone();
        }
    }
}

/// A CPU profile: which node of the call tree each sample landed in, and the microseconds
/// before each sample.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Per sample: whether it is `(idle)`.
    idle: Vec<bool>,
    /// Per sample: the function it landed in (its call frame's name, and its script's file).
    functions: Vec<String>,
    /// Per sample: the functions of its stack, outermost first (the last is `functions`').
    stacks: Vec<Vec<String>>,
    /// Per sample: microseconds since the sample before (the first: since the start).
    deltas: Vec<u64>,
    /// The profile as DevTools gave it, for a `.cpuprofile` file.
    pub raw: Value,
}

impl Profile {
    /// A profile from DevTools' `Profiler.Profile` object.
    pub fn from_devtools(profile: &Value) -> Self {
        let idle_nodes: Vec<u64> = profile["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|node| node["callFrame"]["functionName"] == "(idle)")
            .filter_map(|node| node["id"].as_u64())
            .collect();
        let numbers = |key: &str| -> Vec<u64> {
            profile[key].as_array().into_iter().flatten().filter_map(Value::as_u64).collect()
        };
        let samples = numbers("samples");
        let idle = samples.iter().map(|node| idle_nodes.contains(node)).collect();
        let names: std::collections::HashMap<u64, String> = profile["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|node| Some((node["id"].as_u64()?, function_name(&node["callFrame"]))))
            .collect();
        let functions =
            samples.iter().map(|node| names.get(node).cloned().unwrap_or_else(|| "?".into())).collect();
        let parents: std::collections::HashMap<u64, u64> = profile["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|node| {
                let id = node["id"].as_u64().unwrap_or(0);
                node["children"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(move |child| Some((child.as_u64()?, id)))
            })
            .collect();
        let stacks = samples
            .iter()
            .map(|&node| {
                let mut stack: Vec<String> =
                    std::iter::successors(Some(node), |node| parents.get(node).copied())
                        .map(|node| names.get(&node).cloned().unwrap_or_else(|| "?".into()))
                        .collect();
                stack.reverse();
                stack
            })
            .collect();
        // Deltas are signed in the protocol; V8 gives them in order, so they are never below 0.
        let deltas = profile["timeDeltas"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|delta| delta.as_i64().unwrap_or(0).max(0) as u64)
            .collect();
        Self { idle, functions, stacks, deltas, raw: profile.clone() }
    }

    /// Writes the profile to `$KYA_PROFILE_DIR/<name>.cpuprofile` when that is set (DevTools
    /// opens it; `WASM_KEEP_NAMES=1` when building the Worker keeps the wasm functions' names in
    /// it): the benchmarks keep the profiles behind their figures this way.
    ///
    /// # Panics
    /// When the folder cannot be made or written.
    pub fn keep(&self, name: &str) {
        let Ok(folder) = std::env::var("KYA_PROFILE_DIR") else { return };
        std::fs::create_dir_all(&folder).expect("KYA_PROFILE_DIR");
        let path = std::path::Path::new(&folder).join(format!("{name}.cpuprofile"));
        std::fs::write(&path, self.raw.to_string()).expect("writing a profile");
    }

    /// The isolate's CPU time in the profile: each sample that is not `(idle)` counts the time
    /// to the next sample, at most the sampler's tick ([`tick`]; the last: the tick).
    pub fn cpu(&self) -> Duration {
        Duration::from_micros(self.weights().iter().sum())
    }

    /// [`Profile::cpu`] of the work requests left to run after their responses
    /// (`Context::wait_until`): the samples within a wasm-bindgen future (a `future_to_promise`
    /// closure, one per future type) whose calls never hold `request_frame` (a function of the
    /// fetch handler, such as `handler::respond`), and the samples outside every future whose
    /// stack holds a frame of `detached`: JavaScript that only such work runs on its own (a
    /// promise's reaction, a timer). For the point answers: the rate limiter's KV sync, whose
    /// read runs in `rate_limit_read` (edge-api/src/rate_limit.rs).
    pub fn cpu_after_response(&self, request_frame: &str, detached: &[&str]) -> Duration {
        let future = |frame: &str| frame.contains("future_to_promise::{{closure}}::{{closure}}");
        let mut requests = std::collections::HashSet::new();
        for stack in &self.stacks {
            if stack.iter().any(|frame| frame.contains(request_frame)) {
                requests.extend(stack.iter().filter(|frame| future(frame)));
            }
        }
        let after = |stack: &Vec<String>| match stack.iter().find(|frame| future(frame)) {
            Some(frame) => !requests.contains(frame),
            None => stack.iter().any(|frame| detached.iter().any(|detached| frame.contains(detached))),
        };
        let micros = self
            .stacks
            .iter()
            .zip(self.weights())
            .filter(|(stack, _)| after(stack))
            .map(|(_, micros)| micros);
        Duration::from_micros(micros.sum())
    }

    /// [`Profile::by_function`] summed by [`layer`], most first.
    pub fn by_layer(&self) -> Vec<(&'static str, Duration)> {
        let mut times = std::collections::BTreeMap::<&'static str, Duration>::new();
        for (function, time) in self.by_function() {
            *times.entry(layer(&function)).or_default() += time;
        }
        let mut times: Vec<_> = times.into_iter().collect();
        times.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        times
    }

    /// [`Profile::cpu`] by the function each sample landed in (its self time), most first.
    pub fn by_function(&self) -> Vec<(String, Duration)> {
        let mut times = std::collections::HashMap::<&str, u64>::new();
        for (function, micros) in self.functions.iter().zip(self.weights()) {
            if micros > 0 {
                *times.entry(function).or_default() += micros;
            }
        }
        let mut times: Vec<(String, Duration)> = times
            .into_iter()
            .map(|(function, micros)| (function.to_owned(), Duration::from_micros(micros)))
            .collect();
        times.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        times
    }

    /// Per sample, the microseconds it counts: to the next sample, at most the sampler's tick
    /// (the last: the tick); `(idle)` samples nothing.
    fn weights(&self) -> Vec<u64> {
        let Some(tick) = tick(self.deltas.iter().skip(1).copied().collect()) else {
            return vec![0; self.idle.len()];
        };
        (0..self.idle.len())
            .map(|sample| {
                if self.idle[sample] {
                    0
                } else {
                    self.deltas.get(sample + 1).copied().unwrap_or(tick).min(tick)
                }
            })
            .collect()
    }

    /// Samples taken.
    pub fn samples(&self) -> usize {
        self.idle.len()
    }
}

/// The sampler's tick, in microseconds, from the spacings of a profile's samples: the median
/// of those within 1.5 times the 10th percentile, the cluster of spacings inside stretches of
/// the isolate's work (the gaps between stretches are longer). Spacings under half the interval
/// asked of V8 are left out: V8 ticks no faster than asked, so those are two samples of one
/// tick. `None` for a profile without two samples a tick apart.
fn tick(mut spacings: Vec<u64>) -> Option<u64> {
    spacings.retain(|spacing| *spacing >= SAMPLING_INTERVAL_MICROS / 2);
    if spacings.is_empty() {
        return None;
    }
    spacings.sort_unstable();
    let bound = spacings[spacings.len() / 10].saturating_mul(3) / 2;
    let within: Vec<u64> = spacings.into_iter().take_while(|spacing| *spacing <= bound).collect();
    Some(within[within.len() / 2])
}

/// For two Workers profiled round by round (each round one after the other): the fewest of
/// `rounds` rounds that come out costlier on one than on the other by chance alone less than
/// one time in twenty, were the two alike (each round a fair coin), and that chance: of 10
/// rounds, 9 or more (1.1%; 8 or more is 5.5%).
pub fn costlier_by_chance_rarely(rounds: usize) -> (usize, f64) {
    let choose =
        |n: usize, k: usize| (0..k).fold(1.0, |product, i| product * (n - i) as f64 / (i + 1) as f64);
    let at_least = |k: usize| (k..=rounds).map(|j| choose(rounds, j)).sum::<f64>() / 2f64.powi(rounds as i32);
    (0..=rounds).find(|k| at_least(*k) < 0.05).map_or((rounds + 1, 0.0), |k| (k, at_least(k)))
}

/// A call frame as a profile's reader names it: the function, and its script's file name
/// (`wasm` for the Worker's Rust, whose names a build with `WASM_KEEP_NAMES=1` keeps), with the
/// line of an anonymous function.
fn function_name(frame: &Value) -> String {
    let name = frame["functionName"].as_str().filter(|name| !name.is_empty());
    let url = frame["url"].as_str().unwrap_or("");
    let mut file =
        if url.starts_with("wasm://") { "wasm" } else { url.rsplit('/').next().unwrap_or("") }.to_owned();
    if let (None, false, Some(line)) = (name, file.is_empty(), frame["lineNumber"].as_i64()) {
        // DevTools counts lines from 0.
        file = format!("{file}:{}", line + 1);
    }
    let name = name.unwrap_or("(anonymous)");
    if file.is_empty() { name.to_owned() } else { format!("{name} ({file})") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(samples: &[u64], deltas: &[i64]) -> Profile {
        Profile::from_devtools(&json!({
            "nodes": [
                {"id": 1, "callFrame": {"functionName": "(root)"}},
                {"id": 2, "callFrame": {"functionName": "(idle)"}},
                {"id": 3, "callFrame": {"functionName": "fetch"}},
            ],
            "samples": samples,
            "timeDeltas": deltas,
        }))
    }

    #[test]
    fn a_sample_counts_until_the_next_one_but_no_gap_longer_than_the_tick() {
        // Two bursts of 100 µs samples 40 ms apart: the gap is time the isolate was not
        // entered, counted as one spacing, not 40 ms.
        let busy = profile(&[3, 3, 3, 3, 3, 3], &[5_000, 100, 100, 40_000, 100, 100]);
        assert_eq!(busy.cpu(), Duration::from_micros(600));
        assert_eq!(busy.samples(), 6);
        // (idle) samples count nothing.
        let idle = profile(&[3, 2, 2, 3], &[0, 100, 100, 100]);
        assert_eq!(idle.cpu(), Duration::from_micros(200));
        assert_eq!(profile(&[], &[]).cpu(), Duration::ZERO);
        // The same time by function: `fetch` only, (idle) left out.
        assert_eq!(busy.by_function(), vec![("fetch".to_owned(), Duration::from_micros(600))]);
    }

    #[test]
    fn work_after_the_response_is_the_futures_that_never_run_the_handler() {
        let frame = |name: &str| json!({"functionName": name, "url": "wasm://x"});
        let future = |hash: &str| {
            frame(&format!("js_sys::futures::future_to_promise::{{{{closure}}}}::{{{{closure}}}}::{hash}"))
        };
        let profile = Profile::from_devtools(&json!({
            "nodes": [
                {"id": 1, "callFrame": {"functionName": "(root)"}, "children": [2, 5, 8]},
                {"id": 2, "callFrame": future("h1"), "children": [3, 4]},
                {"id": 3, "callFrame": frame("kya_edge_api::handler::respond::{{closure}}")},
                {"id": 4, "callFrame": frame("serde_json::to_string")},
                {"id": 5, "callFrame": future("h2"), "children": [6]},
                {"id": 6, "callFrame": frame("worker::kv::KvStore::get")},
                {"id": 7, "callFrame": {"functionName": "(idle)"}},
                {"id": 8, "callFrame": {"functionName": "rate_limit_read", "url": "entry.js"}, "children": [9]},
                {"id": 9, "callFrame": {"functionName": "get", "url": ""}},
            ],
            // The request: 3 samples (one in `respond`, two beside it in its future); after it,
            // 2 in a future that never runs it and 1 in the KV read's JavaScript; 1 idle.
            "samples": [3, 4, 4, 6, 6, 9, 7],
            "timeDeltas": [0, 100, 100, 100, 100, 100, 100],
        }));
        assert_eq!(profile.cpu(), Duration::from_micros(600));
        assert_eq!(
            profile.cpu_after_response("handler::respond", &["rate_limit_read"]),
            Duration::from_micros(300)
        );
        assert_eq!(
            profile.cpu_after_response("handler::respond", &[]),
            Duration::from_micros(200),
            "JavaScript outside the futures counts only when named"
        );
    }

    #[test]
    fn short_stretches_whose_gaps_are_most_spacings_count_a_tick_a_sample() {
        // Stretches of one or two samples a 200 µs tick apart, 2 ms between them: five of the
        // seven spacings are gaps, the median 2 ms. Each sample counts one tick, not 2 ms.
        let sparse = profile(&[3, 3, 3, 3, 3, 3, 3, 3], &[0, 200, 2_000, 2_000, 200, 2_000, 2_000, 2_000]);
        assert_eq!(sparse.cpu(), Duration::from_micros(8 * 200));
        // Jitter around the tick is kept (the spacing to the next sample, up to the cluster's
        // median), and two samples of one tick count their few microseconds.
        assert_eq!(tick(vec![180, 175, 190, 3, 2_000, 900, 185, 178, 181, 4_000]), Some(181));
        assert_eq!(tick(vec![3, 20]), None);
        let jittered = profile(&[3, 3, 3, 3], &[0, 170, 5, 2_000]);
        assert_eq!(jittered.cpu(), Duration::from_micros(170 + 5 + 170 + 170));
        assert_eq!(tick(vec![]), None);
    }

    #[test]
    fn rounds_costlier_by_chance_less_than_one_time_in_twenty() {
        // 10 fair coins: 9 or more heads is 11 in 1,024; 8 or more is 56 in 1,024 (5.5%).
        let (rounds, chance) = costlier_by_chance_rarely(10);
        assert_eq!(rounds, 9);
        assert!((chance - 11.0 / 1024.0).abs() < 1e-12);
        // 16: 12 or more is 2,517 in 65,536 (3.8%), 11 or more 10.5%.
        assert_eq!(costlier_by_chance_rarely(16).0, 12);
        // 4: even all four come once in 16 (6.25%): no count is that rare.
        assert_eq!(costlier_by_chance_rarely(4).0, 5);
    }
}
