//! The nonce store's share of a profile. Under `wrangler dev` the Durable Object runs in the
//! Worker's isolate, so V8's profile holds both; on Cloudflare the object's CPU is its own, not
//! under the Worker's limit. With the wasm's function names kept (`WASM_KEEP_NAMES=1` when
//! building the Worker) a sample is the object's when its stack holds:
//!
//! - the object's entry (`noncestore_fetch`, the wasm export of `NonceStore`, or a frame of the
//!   Rust type `kya_edge_api::verify::nonces::NonceStore`), or `worker::sql::SqlStorage` (only
//!   the object has SQL storage); or
//! - the poll of the object's future: each `future_to_promise` polls its future through its own
//!   monomorphised `AssertUnwindSafe<F>::poll`, which wasm-bindgen's task queue runs after every
//!   await, so the code after the object's first await sits under that poll and not under its
//!   entry. Which poll is the object's is learnt from the samples that hold a marker above.
//!
//! Garbage collection and the runtime's own frames stay the Worker's. So does the Worker's call
//! of the object's stub (`DurableObject::fetch_with_request`), told apart all the same: under
//! `wrangler dev` the object lives in the same process, and a call to an object never used before
//! creates it (its storage opened) inside that call, in the Worker's samples; on Cloudflare the
//! object runs elsewhere and the call is a subrequest.

use std::collections::HashSet;

use kya_tests::worker_profile::Profile;
use serde_json::Value;

/// The Worker's call of a Durable Object's stub.
const STUB_CALL: &str = "DurableObject::fetch_with_request";

/// The name every future's poll has, up to its hash.
const POLL: &str = "<core::panic::unwind_safe::AssertUnwindSafe<F> as core::future::future::Future>::poll";

/// One sample: its frames' names from the root, and the microseconds it stands for (as
/// [`Profile::cpu`] counts them; 0 for `(idle)`).
struct Sample {
    frames: Vec<String>,
    micros: u64,
}

/// The samples of one profile.
fn samples(profile: &Profile) -> Vec<Sample> {
    let raw = &profile.raw;
    let nodes = raw["nodes"].as_array().cloned().unwrap_or_default();
    let id = |node: &Value| node["id"].as_u64().unwrap_or(0);
    let name = |node: &Value| node["callFrame"]["functionName"].as_str().unwrap_or("").to_owned();
    let mut parent = std::collections::HashMap::new();
    for node in &nodes {
        for child in node["children"].as_array().into_iter().flatten().filter_map(Value::as_u64) {
            parent.insert(child, id(node));
        }
    }
    let by_id: std::collections::HashMap<u64, &Value> = nodes.iter().map(|node| (id(node), node)).collect();
    let numbers = |key: &str| -> Vec<i64> {
        raw[key].as_array().into_iter().flatten().filter_map(Value::as_i64).collect()
    };
    let (leaves, deltas) = (numbers("samples"), numbers("timeDeltas"));
    let mut spacings: Vec<u64> = deltas.iter().skip(1).map(|delta| (*delta).max(0) as u64).collect();
    spacings.sort_unstable();
    let median = spacings.get(spacings.len() / 2).copied().unwrap_or(0);
    leaves
        .iter()
        .enumerate()
        .map(|(index, leaf)| {
            let mut frames = Vec::new();
            let mut node = Some(*leaf as u64);
            while let Some(current) = node.and_then(|node| by_id.get(&node)) {
                frames.push(name(current));
                node = parent.get(&id(current)).copied();
            }
            frames.reverse();
            let idle = frames.last().is_some_and(|leaf| leaf == "(idle)");
            let next = deltas.get(index + 1).map_or(median, |delta| (*delta).max(0) as u64);
            Sample { frames, micros: if idle { 0 } else { next.min(median) } }
        })
        .collect()
}

fn is_marker(frame: &str) -> bool {
    frame.to_ascii_lowercase().contains("noncestore") || frame.starts_with("worker::sql::SqlStorage")
}

/// The object's polls, learnt from all the profiles of one build, and whether they had names.
pub(crate) struct Attribution {
    polls: HashSet<String>,
    named: bool,
}

impl Attribution {
    /// Learns which futures' polls are the object's from `profiles`.
    pub(crate) fn learn<'a>(profiles: impl IntoIterator<Item = &'a Profile>) -> Self {
        let mut polls = HashSet::new();
        let mut named = false;
        for profile in profiles {
            for sample in samples(profile) {
                named |= sample.frames.iter().any(|frame| frame.contains("kya_edge_api::"));
                if let Some(marker) = sample.frames.iter().position(|frame| is_marker(frame))
                    && let Some(poll) =
                        sample.frames[..marker].iter().rev().find(|frame| frame.starts_with(POLL))
                {
                    polls.insert(poll.clone());
                }
            }
        }
        Self { polls, named }
    }

    /// Whether the profiles named the wasm's functions (else nothing can be split).
    pub(crate) fn named(&self) -> bool {
        self.named
    }

    /// The object's CPU in `profile`, and the Worker's in its calls of the object's stub, in
    /// microseconds.
    pub(crate) fn object_and_stub_micros(&self, profile: &Profile) -> (u64, u64) {
        let (mut object, mut stub) = (0, 0);
        for sample in samples(profile) {
            if sample.frames.iter().any(|frame| is_marker(frame) || self.polls.contains(frame)) {
                object += sample.micros;
            } else if sample.frames.iter().any(|frame| frame.contains(STUB_CALL)) {
                stub += sample.micros;
            }
        }
        (object, stub)
    }
}
