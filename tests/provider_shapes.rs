//! Loopback stand-ins for node software and hosted providers other than anvil, one per row of
//! `../shared/PROVIDERS.md` that anvil cannot show: a policy for [`rpc_proxy`] in front of a real
//! anvil that rewrites what anvil says into that node's wording, or refuses as that provider does.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use kya_core::chain::revert::RevertReason;
use serde_json::{Value, json};

use crate::rpc_proxy::{self, RpcAction};

/// A way real node software or a provider answers that anvil does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderShape {
    /// Hosted providers and proxies: a revert's reason only in `message`, no `data`.
    ReasonInMessageOnly,
    /// Older Nethermind: code -32015, `VM execution error.`, the reason as text in `data`.
    OlderNethermind,
    /// A node that reads the call data from `data` only (the proxy drops `input`).
    ReadsDataOnly,
    /// Moralis: batches of more than 20 refused with a JSON-RPC error.
    BatchCap20,
    /// A provider that answers a batch of more than 100 with HTTP 413.
    BatchCap100Http413,
    /// A provider that rate-limits: HTTP 429 with `Retry-After: 1` on the first request and
    /// every fourth after it.
    RateLimited,
    /// A provider that refuses every third HTTP request (the 3rd, 6th, …) with 429 and
    /// `Retry-After: 1`.
    RateLimitedEveryThird,
    /// A load balancer whose backends lag the head: a read at a block number (`eth_call`,
    /// `eth_estimateGas`, balances, nonces, code, storage) fails as geth fails it, `header not
    /// found` (-32000), until [`LAGGING_CATCH_UP`] after the first request that named that
    /// block, as a backend two blocks behind does until it catches up. Reads at `latest` pass.
    LaggingBackend,
}

/// How long after the first request naming a block [`ProviderShape::LaggingBackend`] has seen
/// it: a read there fails at once, again half a second later, and passes after a second more.
pub const LAGGING_CATCH_UP: Duration = Duration::from_millis(700);

impl ProviderShape {
    /// Every shape.
    pub const ALL: [Self; 8] = [
        Self::ReasonInMessageOnly,
        Self::OlderNethermind,
        Self::ReadsDataOnly,
        Self::BatchCap20,
        Self::BatchCap100Http413,
        Self::RateLimited,
        Self::RateLimitedEveryThird,
        Self::LaggingBackend,
    ];

    /// The shapes of a revert's error object.
    pub const ERROR_SHAPES: [Self; 2] = [Self::ReasonInMessageOnly, Self::OlderNethermind];
}

/// Starts a loopback JSON-RPC server in front of `upstream` answering as `shape` does. Returns
/// its URL and the number of requests it has refused so far (batches, 429s, reads at a block
/// its backend had not seen).
pub async fn start(upstream: &str, shape: ProviderShape) -> (String, Arc<AtomicUsize>) {
    let refused = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicUsize::new(0));
    let blocks = Backend::default();
    let counted = Arc::clone(&refused);
    let policy = move |body: &str| -> RpcAction {
        let batch_len =
            serde_json::from_str::<Value>(body).ok().and_then(|value| value.as_array().map(Vec::len));
        let refuse = |action: RpcAction| {
            counted.fetch_add(1, Ordering::SeqCst);
            action
        };
        match shape {
            ProviderShape::ReasonInMessageOnly => RpcAction::Rewrite(body.to_owned(), reason_in_message_only),
            ProviderShape::OlderNethermind => RpcAction::Rewrite(body.to_owned(), older_nethermind),
            ProviderShape::ReadsDataOnly => RpcAction::Forward(without_input(body)),
            ProviderShape::BatchCap20 if batch_len.is_some_and(|len| len > 20) => refuse(RpcAction::Raw(
                json!({"jsonrpc": "2.0", "id": null,
                       "error": {"code": -32005, "message": "Batch size limit exceeded: at most 20 requests"}})
                .to_string(),
            )),
            ProviderShape::BatchCap100Http413 if batch_len.is_some_and(|len| len > 100) => {
                refuse(RpcAction::Http { status: 413, headers: vec![], body: "Request Entity Too Large".into() })
            }
            ProviderShape::RateLimited if seen.fetch_add(1, Ordering::SeqCst).is_multiple_of(4) => {
                refuse(too_many_requests())
            }
            ProviderShape::RateLimitedEveryThird if seen.fetch_add(1, Ordering::SeqCst) % 3 == 2 => {
                refuse(too_many_requests())
            }
            ProviderShape::LaggingBackend => blocks.answer(body, &counted),
            _ => RpcAction::Forward(body.to_owned()),
        }
    };
    (rpc_proxy::start(Some(upstream.to_owned()), Arc::new(policy)).await, refused)
}

/// HTTP 429 with `Retry-After: 1` and a JSON-RPC error body, as hosted providers refuse.
fn too_many_requests() -> RpcAction {
    RpcAction::Http {
        status: 429,
        headers: vec![("retry-after".into(), "1".into())],
        body: json!({"jsonrpc": "2.0", "id": null, "error": {"code": 429, "message": "Too Many Requests"}})
            .to_string(),
    }
}

/// The backends of [`ProviderShape::LaggingBackend`]: when each block number was first named.
#[derive(Debug, Clone, Default)]
struct Backend {
    first_named: Arc<Mutex<HashMap<u64, Instant>>>,
}

impl Backend {
    /// What the load balancer does with `body`: reads at a block its backend has not seen are
    /// answered `header not found` here (counted in `refused`), the rest go to the node.
    fn answer(&self, body: &str, refused: &AtomicUsize) -> RpcAction {
        let Ok(value) = serde_json::from_str::<Value>(body) else {
            return RpcAction::Forward(body.to_owned());
        };
        let header_not_found = |request: &Value| {
            json!({"jsonrpc": "2.0", "id": request["id"],
                   "error": {"code": -32000, "message": "header not found"}})
        };
        match value {
            Value::Array(requests) => {
                let (unseen, seen): (Vec<Value>, Vec<Value>) =
                    requests.into_iter().partition(|request| self.unseen(request));
                if unseen.is_empty() {
                    return RpcAction::Forward(body.to_owned());
                }
                refused.fetch_add(1, Ordering::SeqCst);
                RpcAction::Partly(
                    Value::Array(seen).to_string(),
                    unseen.iter().map(header_not_found).collect(),
                )
            }
            request if self.unseen(&request) => {
                refused.fetch_add(1, Ordering::SeqCst);
                RpcAction::Raw(header_not_found(&request).to_string())
            }
            _ => RpcAction::Forward(body.to_owned()),
        }
    }

    /// True when `request` reads at a block number the backend has not seen yet: one first named
    /// less than [`LAGGING_CATCH_UP`] ago (now, if never before).
    fn unseen(&self, request: &Value) -> bool {
        let at = match request["method"].as_str() {
            Some(
                "eth_call" | "eth_estimateGas" | "eth_getBalance" | "eth_getTransactionCount" | "eth_getCode",
            ) => 1,
            Some("eth_getStorageAt") => 2,
            _ => return false,
        };
        let number = request["params"][at]
            .as_str()
            .and_then(|tag| tag.strip_prefix("0x"))
            .and_then(|hex| u64::from_str_radix(hex, 16).ok());
        let Some(number) = number else { return false };
        let mut first_named = self.first_named.lock().expect("not poisoned");
        first_named.entry(number).or_insert_with(Instant::now).elapsed() < LAGGING_CATCH_UP
    }
}

/// Each error object of an answer (one, or a batch's), rewritten by `rewrite` when it is a revert.
fn rewrite_reverts(answer: &str, rewrite: fn(&RevertReason) -> Value) -> String {
    let mut value: Value = serde_json::from_str(answer).expect("the node answers JSON");
    let responses: Vec<&mut Value> = match &mut value {
        Value::Array(responses) => responses.iter_mut().collect(),
        single => vec![single],
    };
    for response in responses {
        let Some(error) = response.get("error") else { continue };
        let payload = serde_json::from_value(error.clone()).expect("an error object");
        if let Some(reason) = RevertReason::from_error(&payload) {
            response["error"] = rewrite(&reason);
        }
    }
    value.to_string()
}

fn reason_in_message_only(answer: &str) -> String {
    rewrite_reverts(answer, |reason| match reason.to_string() {
        text if text.is_empty() => json!({"code": -32000, "message": "execution reverted"}),
        text => json!({"code": -32000, "message": format!("execution reverted: {text}")}),
    })
}

fn older_nethermind(answer: &str) -> String {
    rewrite_reverts(
        answer,
        |reason| json!({"code": -32015, "message": "VM execution error.", "data": format!("revert: {reason}")}),
    )
}

/// The request with `input` removed from every call object, as a node that reads only `data`
/// would see it.
fn without_input(body: &str) -> String {
    let Ok(mut value) = serde_json::from_str::<Value>(body) else { return body.to_owned() };
    let requests: Vec<&mut Value> = match &mut value {
        Value::Array(requests) => requests.iter_mut().collect(),
        single => vec![single],
    };
    for request in requests {
        if let Some(call) = request.pointer_mut("/params/0").and_then(Value::as_object_mut) {
            call.remove("input");
        }
    }
    value.to_string()
}

/// Starts a loopback JSON-RPC server in front of `upstream` with an `eth_call` gas cap, as geth's
/// `RPCGasCap` (50M by default) and every hosted provider's own cap: each `eth_call` is
/// forwarded with its `gas` at most `cap` (set to `cap` when absent). Returns its URL.
pub async fn start_gas_capped(upstream: &str, cap: u64) -> String {
    let policy = move |body: &str| -> RpcAction {
        let Ok(mut value) = serde_json::from_str::<Value>(body) else {
            return RpcAction::Forward(body.to_owned());
        };
        let requests: Vec<&mut Value> = match &mut value {
            Value::Array(requests) => requests.iter_mut().collect(),
            single => vec![single],
        };
        for request in requests {
            if request["method"] != "eth_call" {
                continue;
            }
            if let Some(call) = request.pointer_mut("/params/0").and_then(Value::as_object_mut) {
                let asked = call
                    .get("gas")
                    .and_then(Value::as_str)
                    .and_then(|gas| u64::from_str_radix(gas.trim_start_matches("0x"), 16).ok());
                call.insert("gas".into(), json!(format!("{:#x}", asked.unwrap_or(cap).min(cap))));
            }
        }
        RpcAction::Forward(value.to_string())
    };
    rpc_proxy::start(Some(upstream.to_owned()), Arc::new(policy)).await
}

/// The most logs [`start_log_capped`]'s stand-in answers, as Infura's `eth_getLogs`.
pub const LOG_RESULT_CAP: usize = 10_000;

/// An Infura `eth_getLogs` answer: the node's logs, or, past [`LOG_RESULT_CAP`] of them, the
/// refusal Infura gives (`-32005`, "query returned more than 10000 results"; PROVIDERS.md).
fn cap_log_results(answer: &str) -> String {
    let parsed: Value = serde_json::from_str(answer).expect("the node answers JSON");
    match parsed["result"].as_array() {
        Some(logs) if logs.len() > LOG_RESULT_CAP => json!({"jsonrpc": "2.0", "id": parsed["id"], "error": {
            "code": -32005, "message": format!("query returned more than {LOG_RESULT_CAP} results. \
             Try with this block range [{}, {}].", parsed["result"][0]["blockNumber"].as_str().unwrap_or("0x0"),
             parsed["result"][0]["blockNumber"].as_str().unwrap_or("0x0"))}})
        .to_string(),
        _ => answer.to_owned(),
    }
}

/// Starts a loopback JSON-RPC server in front of `upstream` that caps `eth_getLogs` results as
/// Infura does ([`LOG_RESULT_CAP`]; a node's `--rpc.logs-limit` is alike): a range with more
/// logs is refused whole, however narrow, so a block holding more is refused even alone. Returns
/// its URL and the count of `eth_getLogs` requests it saw.
pub async fn start_log_capped(upstream: &str) -> (String, Arc<AtomicUsize>) {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let policy = move |body: &str| -> RpcAction {
        let method = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|value| value["method"].as_str().map(str::to_owned));
        if method.as_deref() == Some("eth_getLogs") {
            counted.fetch_add(1, Ordering::SeqCst);
            return RpcAction::Rewrite(body.to_owned(), cap_log_results);
        }
        RpcAction::Forward(body.to_owned())
    };
    (rpc_proxy::start(Some(upstream.to_owned()), Arc::new(policy)).await, requests)
}

/// How many times [`start_timing_out`]'s stand-in has timed out its call so far.
#[derive(Debug, Clone, Default)]
pub struct Timeouts {
    /// Inside an `aggregate3` (Multicall3).
    pub inside: Arc<AtomicUsize>,
    /// Read alone, as a plain `eth_call`.
    pub alone: Arc<AtomicUsize>,
}

/// Starts a loopback JSON-RPC server in front of `upstream` that gives up on one call for time as
/// a busy geth does (`execution aborted (timeout = 5s)`, its `RPCEVMTimeout`): the call whose
/// data is `call_data` (0x hex). Every `aggregate3` holding it times out, so the reader splits
/// it off until it reads it alone; read alone (a plain `eth_call` of exactly that data), it
/// times out the first `alone` times. Returns its URL and the timeouts answered.
pub async fn start_timing_out(upstream: &str, call_data: &str, alone: usize) -> (String, Timeouts) {
    let timeouts = Timeouts::default();
    let counts = timeouts.clone();
    let needle = call_data.trim_start_matches("0x").to_ascii_lowercase();
    let policy = move |body: &str| -> RpcAction {
        let Ok(Value::Array(requests)) = serde_json::from_str::<Value>(body) else {
            return RpcAction::Forward(body.to_owned());
        };
        let (mut forwarded, mut answered) = (Vec::new(), Vec::new());
        for request in requests {
            let data = request.pointer("/params/0/input").or_else(|| request.pointer("/params/0/data"));
            let data = data
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim_start_matches("0x")
                .to_ascii_lowercase();
            let times_out = request["method"] == "eth_call"
                && data.contains(&needle)
                && if data == needle {
                    counts.alone.fetch_add(1, Ordering::SeqCst) < alone
                } else {
                    counts.inside.fetch_add(1, Ordering::SeqCst);
                    true
                };
            if times_out {
                answered.push(json!({
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": { "code": -32000, "message": "execution aborted (timeout = 5s)" },
                }));
            } else {
                forwarded.push(request);
            }
        }
        RpcAction::Partly(Value::Array(forwarded).to_string(), answered)
    };
    (rpc_proxy::start(Some(upstream.to_owned()), Arc::new(policy)).await, timeouts)
}
