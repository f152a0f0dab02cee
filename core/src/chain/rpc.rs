//! JSON-RPC plans and decoders for reading the registry at one block; no I/O.
//!
//! A [`CallPlan`] lists `eth_call`s to one contract. It is read either through Multicall3
//! ([`crate::chain::multicall`]: the block comes back with the data, one round trip), or plainly:
//! [`pin_block_request`] first (number and timestamp of the latest block), then one request per
//! call at that block, sent as JSON-RPC [`batches`] and decoded back in plan order.
//!
//! Over 500 lines with its tests: the code is 470 lines (the plans and their decoders, one
//! job), and its tests, with the shapes of node software they decode, follow it.

use alloy_json_rpc::{ErrorPayload, Id, Request, Response, ResponsePacket, ResponsePayload};
use alloy_primitives::{Address, B256, Bytes, U64, hex};
use alloy_sol_types::SolCall;
use serde::{Deserialize, Serialize};

use crate::{BlockRef, Error, Result, chain::revert::RevertReason};

/// The body asking for the latest block (header only): its number pins the block every later
/// call reads, its timestamp is "now" for compliance.
pub fn pin_block_request() -> String {
    block_request(BlockTag::Latest)
}

/// The body asking for the header of the block `tag` names (decoded by [`decode_pinned_block`]).
pub fn block_request(tag: BlockTag) -> String {
    let request = Request::new("eth_getBlockByNumber", Id::Number(0), (tag.param(), false));
    serde_json::to_string(&request).expect("a request of strings serialises")
}

/// The pinned block from the answer to [`pin_block_request`].
pub fn decode_pinned_block(body: &str) -> Result<BlockRef> {
    #[derive(Deserialize)]
    struct Header {
        number: U64,
        timestamp: U64,
    }
    let header: Option<Header> = single_success(body)?;
    let header = header.ok_or_else(|| Error::Rpc("the node does not have the block".into()))?;
    Ok(BlockRef { number: header.number.to(), timestamp: header.timestamp.to() })
}

/// The bodies asking for the headers of blocks `numbers` (JSON-RPC ids `0..`, in order), sent
/// as one batch, for [`decode_headers`]: the change feed's block hashes and times.
pub fn header_requests(numbers: &[u64]) -> Vec<String> {
    numbers
        .iter()
        .enumerate()
        .map(|(index, number)| {
            let request = Request::new(
                "eth_getBlockByNumber",
                Id::Number(index as u64),
                (BlockTag::Number(*number).param(), false),
            );
            serde_json::to_string(&request).expect("a request of strings serialises")
        })
        .collect()
}

/// Each block [`header_requests`] asked for, with its hash, in the order asked: `None` where
/// the node has no such block (the chain is not that high, after a reorganisation).
pub fn decode_headers(answers: &[String], count: usize) -> Result<Vec<Option<(BlockRef, B256)>>> {
    #[derive(Deserialize)]
    struct Header {
        number: U64,
        timestamp: U64,
        hash: B256,
    }
    results_by_id(answers, count)?
        .into_iter()
        .map(|result| {
            let raw = result.map_err(|error| rpc_error(&error))?;
            let header: Option<Header> = serde_json::from_str(raw.get())
                .map_err(|error| Error::Decode(format!("a block header: {error}: {}", excerpt(raw.get()))))?;
            Ok(header.map(|header| {
                (BlockRef { number: header.number.to(), timestamp: header.timestamp.to() }, header.hash)
            }))
        })
        .collect()
}

/// The block a read runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockTag {
    /// The node's latest block (Multicall3 reports which one it was).
    Latest,
    /// A block by number: the later rounds of a response read the block its first round read.
    Number(u64),
    /// A block by hash (EIP-1898), canonical or refused: a read whose block's hash an answer
    /// states (a pass) reads that very block, whichever backend or fork answers.
    Hash(B256),
}

impl BlockTag {
    /// The JSON-RPC block parameter.
    pub fn param(self) -> serde_json::Value {
        match self {
            Self::Latest => "latest".into(),
            Self::Number(number) => format!("{number:#x}").into(),
            Self::Hash(hash) => serde_json::json!({ "blockHash": hash, "requireCanonical": true }),
        }
    }
}

/// The outcome of one `eth_call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The call returned this data.
    Returned(Bytes),
    /// The call reverted.
    Reverted(RevertReason),
    /// The call ran out of gas (the node's message), or failed without revert data inside an
    /// `aggregate3`, which is how a call starved by an earlier one looks there. Read alone with
    /// `eth_call` it is out of gas for good: more than the provider's `eth_call` gas cap allows.
    OutOfGas(String),
}

impl Outcome {
    /// Decodes the return data of `C`; a revert is an [`Error::Reverted`].
    pub fn decode<C: SolCall>(&self) -> Result<C::Return> {
        match self {
            Self::Returned(data) => C::abi_decode_returns(data)
                .map_err(|error| Error::Decode(format!("{}: {error}", C::SIGNATURE))),
            Self::Reverted(reason) => Err(Error::Reverted(reason.to_string())),
            Self::OutOfGas(message) => Err(Error::OutOfGas(format!("{} ({message})", C::SIGNATURE))),
        }
    }

    /// True when the call ran out of gas (or starved inside an `aggregate3`).
    pub const fn is_out_of_gas(&self) -> bool {
        matches!(self, Self::OutOfGas(_))
    }

    /// True when the node gave up on the call for time (geth's `RPCEVMTimeout`: `execution
    /// aborted (timeout = 5s)`) rather than for gas: a busy node may run it next time.
    pub fn timed_out(&self) -> bool {
        matches!(self, Self::OutOfGas(message) if mentions(message, &TIMEOUT_SHAPES))
    }

    /// True when the call reverted with the `require` message `reason`.
    pub fn reverted_with(&self, reason: &str) -> bool {
        matches!(self, Self::Reverted(revert) if revert.is(reason))
    }
}

/// `eth_call`s, in order: to one contract, the plan's, unless a call names another
/// ([`CallPlan::push_to`]), so that a read of the registry and of an account it names can share
/// one block and one round trip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPlan {
    to: Address,
    calls: Vec<Bytes>,
    /// Each call's contract, beside `calls`.
    targets: Vec<Address>,
}

/// An `eth_call` call object. The call data goes in both `input` (the execution API spec) and
/// `data` (older clients, and what ethers and viem send): every node reads one of them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CallObject<'a> {
    pub(crate) to: &'a Address,
    #[serde(serialize_with = "hex_at_once")]
    pub(crate) input: &'a Bytes,
    #[serde(serialize_with = "hex_at_once")]
    pub(crate) data: &'a Bytes,
}

/// `bytes` as `0x`-prefixed lowercase hex, as `Bytes` serialises itself, but encoded in one pass:
/// `Bytes` goes through `Display` a character at a time, which the profile of an index run of
/// 100 changed agents showed at 0.65 ms of the Worker's CPU for one `aggregate3`'s call data.
fn hex_at_once<S: serde::Serializer>(bytes: &&Bytes, serializer: S) -> core::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&hex::encode_prefixed(bytes))
}

impl<'a> CallObject<'a> {
    pub(crate) const fn new(to: &'a Address, input: &'a Bytes) -> Self {
        Self { to, input, data: input }
    }
}

/// One `eth_call` request of a batch.
pub(crate) fn eth_call_request(id: usize, call: CallObject<'_>, block: BlockTag) -> String {
    let request = Request::new("eth_call", Id::Number(id as u64), (call, block.param()));
    serde_json::to_string(&request).expect("call requests serialise")
}

/// Largest HTTP body of one batch: 1.5 MiB. geth refuses bodies over 5 MB (`rpc/http.go`), and
/// anvil (axum's 2 MB default) closed the connection on a 4 MB one; a snapshot of 10,000 agents
/// through Multicall3, with the call data in both `input` and `data`, is 18 MB of requests. So
/// batches stay under this size and are sent side by side; a provider with a lower limit
/// answers HTTP 413, and the batch is split.
pub const MAX_BATCH_BYTES: usize = 3 << 19;

/// Requests (each a JSON-RPC request object, owned or borrowed) grouped into batches of at most
/// `batch_size` requests and [`MAX_BATCH_BYTES`] (a single larger request goes alone). A reader
/// that may send a read again (a node behind the block it names: [`crate::chain::retry`]) groups
/// borrowed requests, and keeps them.
pub fn batches<S: AsRef<str>>(requests: Vec<S>, batch_size: usize) -> Vec<Vec<S>> {
    let mut batches: Vec<(Vec<S>, usize)> = Vec::new();
    for request in requests {
        let len = request.as_ref().len();
        match batches.last_mut() {
            Some((batch, bytes)) if batch.len() < batch_size.max(1) && *bytes + len < MAX_BATCH_BYTES => {
                *bytes += len + 1;
                batch.push(request);
            }
            _ => batches.push((vec![request], len + 2)),
        }
    }
    batches.into_iter().map(|(batch, _)| batch).collect()
}

/// The HTTP body of a batch: a JSON array of its requests (a lone request is sent as an array of
/// one, which every node answers as a batch).
pub fn batch_body<S: AsRef<str>>(requests: &[S]) -> String {
    let mut body =
        String::with_capacity(requests.iter().map(|request| request.as_ref().len() + 1).sum::<usize>() + 1);
    body.push('[');
    for (index, request) in requests.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        body.push_str(request.as_ref());
    }
    body.push(']');
    body
}

impl CallPlan {
    /// An empty plan for calls to `to`.
    pub const fn new(to: Address) -> Self {
        Self { to, calls: Vec::new(), targets: Vec::new() }
    }

    /// The contract call `index` goes to.
    pub fn target_of(&self, index: usize) -> Address {
        self.targets[index]
    }

    /// The encoded calls, in order.
    pub fn calls(&self) -> &[Bytes] {
        &self.calls
    }

    /// Adds a call; its outcome will be at the index this returns.
    pub fn push<C: SolCall>(&mut self, call: &C) -> usize {
        self.push_to(self.to, call)
    }

    /// Adds a call to another contract than the plan's; its outcome will be at the index this
    /// returns.
    pub fn push_to<C: SolCall>(&mut self, target: Address, call: &C) -> usize {
        self.calls.push(call.abi_encode().into());
        self.targets.push(target);
        self.calls.len() - 1
    }

    /// Number of calls planned.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// True when no call is planned.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// One `eth_call` request per call, at `block` (ids are call indexes): group them with
    /// [`batches`].
    pub fn requests(&self, block: BlockTag) -> Vec<String> {
        let calls = self.calls.iter().enumerate();
        calls
            .map(|(index, input)| {
                eth_call_request(index, CallObject::new(&self.targets[index], input), block)
            })
            .collect()
    }

    /// The outcomes, in plan order, from the answers to [`CallPlan::requests`] (any grouping
    /// into batches, any order). A JSON-RPC error other than a revert fails all.
    pub fn decode(&self, answers: &[String]) -> Result<Vec<Outcome>> {
        results_by_id(answers, self.calls.len())?.into_iter().map(call_outcome).collect()
    }
}

/// What a request's answer holds: its raw `result`, or its error.
pub(crate) type RawResult = Result<Box<serde_json::value::RawValue>, ErrorPayload>;

/// The result of each request `0..count` in `answers`, found by id.
pub(crate) fn results_by_id(answers: &[String], count: usize) -> Result<Vec<RawResult>> {
    let mut results: Vec<Option<RawResult>> = (0..count).map(|_| None).collect();
    for answer in answers {
        let packet: ResponsePacket = serde_json::from_str(answer)
            .map_err(|error| Error::Rpc(format!("not a JSON-RPC answer ({error}): {}", excerpt(answer))))?;
        let responses = match packet {
            ResponsePacket::Single(response) => vec![response],
            ResponsePacket::Batch(responses) => responses,
        };
        for response in responses {
            let slot = match &response.id {
                Id::Number(index) => usize::try_from(*index).ok().and_then(|index| results.get_mut(index)),
                _ => None,
            };
            let Some(slot) = slot else {
                // A batch the node refused as a whole comes back as one error without our id.
                return Err(match response.payload {
                    ResponsePayload::Failure(error) => rpc_error(&error),
                    ResponsePayload::Success(_) => {
                        Error::Rpc(format!("answer with unknown id {}", response.id))
                    }
                });
            };
            *slot = Some(match response.payload {
                ResponsePayload::Success(raw) => Ok(raw),
                ResponsePayload::Failure(error) => Err(error),
            });
        }
    }
    results
        .into_iter()
        .enumerate()
        .map(|(index, result)| result.ok_or_else(|| Error::Rpc(format!("no answer to call {index}"))))
        .collect()
}

/// One `eth_call`'s outcome: its data, its revert, or its running out of gas; any other error
/// fails the read.
pub(crate) fn call_outcome(result: RawResult) -> Result<Outcome> {
    match result {
        Ok(raw) => serde_json::from_str::<Bytes>(raw.get())
            .map(Outcome::Returned)
            .map_err(|error| Error::Decode(format!("eth_call result: {error}"))),
        Err(error) => match RevertReason::from_error(&error) {
            Some(reason) => Ok(Outcome::Reverted(reason)),
            None => {
                let data = data_text(&error);
                if !is_out_of_gas(error.code, &error.message, data.as_deref()) {
                    return Err(rpc_error(&error));
                }
                let detail = data.map(|data| format!(": {data}")).unwrap_or_default();
                Ok(Outcome::OutOfGas(format!("{}{detail} (code {})", error.message, error.code)))
            }
        },
    }
}

/// An error's `data` when it is a JSON string (Nethermind's detail), not ABI data's hex.
fn data_text(error: &ErrorPayload) -> Option<String> {
    let text: String = serde_json::from_str(error.data.as_ref()?.get()).ok()?;
    (!text.starts_with("0x")).then_some(text)
}

/// The error of an answer that refuses a whole batch: one error object where an array of answers
/// was due. `None` for anything else (answers are then decoded call by call).
pub fn whole_batch_error(answer: &str) -> Option<Error> {
    let trimmed = answer.trim_start();
    if !trimmed.starts_with('{') {
        return None;
    }
    let response: Response = serde_json::from_str(trimmed).ok()?;
    match response.payload {
        ResponsePayload::Failure(error) => Some(rpc_error(&error)),
        ResponsePayload::Success(_) => None,
    }
}

/// JSON-RPC error codes with which providers refuse a batch as a whole (PROVIDERS.md).
const BATCH_REFUSAL_CODES: [i64; 2] = [-32600, -32005];

/// True when a JSON-RPC error refuses a batch for its size ("batch too large", "limit exceeded"):
/// a smaller batch may pass. A rate limit (a `-32005` about request rates) is not one.
pub fn is_batch_refusal(code: i64, message: &str) -> bool {
    let text = message.to_ascii_lowercase();
    let about_rate = ["rate", "per second", "too many requests"].iter().any(|word| text.contains(word));
    BATCH_REFUSAL_CODES.contains(&code)
        && !about_rate
        && ["batch", "too large", "limit", "size"].iter().any(|word| text.contains(word))
}

/// True when a JSON-RPC error says the caller is sending too fast (retry later).
pub fn is_rate_limit(code: i64, message: &str) -> bool {
    let text = message.to_ascii_lowercase();
    code == 429
        || ((code == -32005 || code == -32029) && !is_batch_refusal(code, message))
        || text.contains("rate limit")
        || text.contains("too many requests")
}

/// True when a JSON-RPC error (that is not a revert: [`RevertReason::from_error`] first) says
/// the call ran out of gas or time, which a node's `eth_call` gas cap (geth's `RPCGasCap`, 50M by
/// default) or its EVM timeout (`RPCEVMTimeout`) causes: geth and reth `out of gas` (-32000),
/// `gas required exceeds allowance`, anvil `EVM error OutOfGas` (-32603), Nethermind `OutOfGas`
/// (-32015, -32003; recent releases say `VM execution error.` and put the detail in `data`),
/// geth `execution aborted (timeout = 5s)`. Fewer calls at once may pass. `data` is the error's
/// `data` when it is text.
pub fn is_out_of_gas(code: i64, message: &str, data: Option<&str>) -> bool {
    let says_so = |text: &str| mentions(text, &GAS_SHAPES) || mentions(text, &TIMEOUT_SHAPES);
    code != 3 && (says_so(message) || data.is_some_and(says_so))
}

/// True when a JSON-RPC error (that is not a revert) says the node has not seen the block the
/// request names: a load balancer's backend a block or two behind the head that another backend
/// pinned. Reading again after a short wait succeeds ([`crate::chain::retry`]). The wordings:
/// geth, op-geth and reth `header not found` (-32000; geth `header for hash not found` by
/// hash), as Infura, Alchemy and QuickNode relay them; recent Nethermind `header not found`
/// (-32001), older Nethermind `<number> could not be found` (-32001); Besu `Block not found`
/// (-32000) and `Unknown block` (-39001); Erigon `block not found` and `Unknown block`;
/// OpenEthereum and Hedera `Unknown block number`; reth `request beyond head block: requested
/// N, head M` (geth and reth `block range extends beyond current head block` for logs); anvil
/// `BlockOutOfRangeError: block height is N but requested was M` (-32602).
pub fn is_unseen_block(code: i64, message: &str) -> bool {
    // Older Nethermind names the block alone: `<number, hash or tag> could not be found`.
    let nethermind = || {
        let named = message.trim().strip_suffix("could not be found").map(str::trim);
        code == NETHERMIND_RESOURCE_NOT_FOUND
            && named.is_some_and(|block| !block.is_empty() && !block.contains(' '))
    };
    code != 3 && (mentions(message, &UNSEEN_BLOCK_SHAPES) || nethermind())
}

/// How nodes say they have not seen a block, lowercase without spaces or underscores.
const UNSEEN_BLOCK_SHAPES: [&str; 7] = [
    "headernotfound",
    "headerforhashnotfound",
    "blocknotfound",
    "unknownblock",
    "beyondhead",
    "beyondcurrenthead",
    "blockoutofrange",
];
/// Nethermind's code for a block (or anything else) it does not have.
const NETHERMIND_RESOURCE_NOT_FOUND: i64 = -32001;

/// How nodes say a call ran out of gas, lowercase without spaces or underscores ([`mentions`]).
const GAS_SHAPES: [&str; 2] = ["outofgas", "gasrequiredexceedsallowance"];
/// How nodes say they gave up on a call for time: geth's `execution aborted (timeout = 5s)`.
const TIMEOUT_SHAPES: [&str; 2] = ["executionaborted", "executiontimeout"];

/// True when `text`, lowercased and without spaces or underscores, holds one of `shapes`.
fn mentions(text: &str, shapes: &[&str]) -> bool {
    let text = text.to_ascii_lowercase().replace(['_', ' '], "");
    shapes.iter().any(|shape| text.contains(shape))
}

pub(crate) fn rpc_error(error: &ErrorPayload) -> Error {
    if is_batch_refusal(error.code, &error.message) {
        return Error::BatchRefused(format!("{} (code {})", error.message, error.code));
    }
    if is_rate_limit(error.code, &error.message) {
        return Error::RateLimitedByProvider(format!("{} (code {})", error.message, error.code));
    }
    if is_unseen_block(error.code, &error.message) {
        return Error::UnseenBlock(format!("{} (code {})", error.message, error.code));
    }
    Error::Rpc(format!("{} (code {})", error.message, error.code))
}

fn single_success<T: serde::de::DeserializeOwned>(body: &str) -> Result<T> {
    let response: Response = serde_json::from_str(body)
        .map_err(|error| Error::Rpc(format!("not a JSON-RPC answer ({error}): {}", excerpt(body))))?;
    match response.payload {
        ResponsePayload::Success(raw) => serde_json::from_str(raw.get())
            .map_err(|error| Error::Decode(format!("{error}: {}", excerpt(raw.get())))),
        ResponsePayload::Failure(error) => Err(rpc_error(&error)),
    }
}

/// The start of an unexpected body, for error messages (a proxy's HTML page can be long).
pub(crate) fn excerpt(body: &str) -> String {
    body.chars().take(120).collect()
}

/// `0x`-prefixed hex, for logging call data.
pub fn hex_data(data: &[u8]) -> String {
    hex::encode_prefixed(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::abi::AgentRegistry;
    use alloy_primitives::U256;
    use alloy_sol_types::{Revert, SolError, SolValue};
    use proptest::prelude::*;

    #[test]
    fn call_data_is_written_as_bytes_write_themselves() {
        let data = Bytes::from(vec![0x00, 0xab, 0xcd, 0xef, 0x10]);
        let to = Address::with_last_byte(7);
        let written = serde_json::to_value(CallObject::new(&to, &data)).unwrap();
        let expected = serde_json::to_value(&data).unwrap();
        assert_eq!(written["input"], expected);
        assert_eq!(written["data"], "0x00abcdef10");
        let empty = Bytes::new();
        assert_eq!(serde_json::to_value(CallObject::new(&to, &empty)).unwrap()["input"], "0x");
    }

    fn plan(calls: u64) -> CallPlan {
        let mut plan = CallPlan::new(Address::with_last_byte(0xaa));
        for id in 1..=calls {
            plan.push(&AgentRegistry::getChildrenCall { agentId: U256::from(id) });
        }
        plan
    }

    #[test]
    fn pinned_block() {
        let request: serde_json::Value = serde_json::from_str(&pin_block_request()).unwrap();
        assert_eq!(request["method"], "eth_getBlockByNumber");
        assert_eq!(request["params"], serde_json::json!(["latest", false]));
        let answer =
            r#"{"jsonrpc":"2.0","id":0,"result":{"number":"0x10","timestamp":"0x6553f100","hash":"0x00"}}"#;
        assert_eq!(decode_pinned_block(answer), Ok(BlockRef { number: 16, timestamp: 1_700_000_000 }));
        let failure = r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"down"}}"#;
        assert_eq!(decode_pinned_block(failure), Err(Error::Rpc("down (code -32000)".into())));
        assert!(matches!(decode_pinned_block("<html>bad gateway</html>"), Err(Error::Rpc(_))));
    }

    #[test]
    fn requests_are_batched_at_the_pinned_block_with_input_and_data() {
        let batches = batches(plan(5).requests(BlockTag::Number(0x1f)), 2);
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        let first: serde_json::Value = serde_json::from_str(&batch_body(&batches[0])).unwrap();
        assert_eq!(first[1]["id"], 1);
        assert_eq!(first[1]["method"], "eth_call");
        assert_eq!(first[1]["params"][1], "0x1f");
        assert_eq!(first[1]["params"][0]["to"], "0x00000000000000000000000000000000000000aa");
        let expected = hex_data(&AgentRegistry::getChildrenCall { agentId: U256::from(2) }.abi_encode());
        assert_eq!(first[1]["params"][0]["input"], expected.as_str());
        assert_eq!(
            first[1]["params"][0]["data"],
            expected.as_str(),
            "nodes that read only `data` get it too"
        );
        assert_eq!(BlockTag::Latest.param(), "latest");
    }

    #[test]
    fn batches_stay_under_the_body_limit() {
        let request = |id: usize| format!("{{\"id\":{id},\"pad\":\"{}\"}}", "x".repeat(600_000));
        let grouped = batches((0..7).map(request).collect(), 500);
        assert_eq!(grouped.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 2, 1]);
        assert!(grouped.iter().all(|batch| batch_body(batch).len() <= MAX_BATCH_BYTES));
        let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(MAX_BATCH_BYTES));
        assert_eq!(batches(vec![huge.clone(), huge], 500).len(), 2, "a larger request goes alone");
    }

    #[test]
    fn refusals_of_a_whole_batch() {
        let refused = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}"#;
        assert_eq!(
            whole_batch_error(refused),
            Some(Error::BatchRefused("batch too large (code -32600)".into()))
        );
        let moralis = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"Batch size limit exceeded: 20"}}"#;
        assert!(matches!(whole_batch_error(moralis), Some(Error::BatchRefused(_))));
        let throttled =
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"request rate exceeded"}}"#;
        assert!(matches!(whole_batch_error(throttled), Some(Error::RateLimitedByProvider(_))));
        assert_eq!(whole_batch_error(r#"[{"jsonrpc":"2.0","id":0,"result":"0x"}]"#), None);
        assert_eq!(whole_batch_error("<html>"), None);
        assert!(!is_batch_refusal(-32000, "batch too large"), "only the refusal codes");
    }

    #[test]
    fn decodes_results_reverts_and_errors() {
        let plan = plan(3);
        let children = vec![U256::from(4), U256::from(5)].abi_encode();
        let revert = Revert::from("Agent not found").abi_encode();
        let answers = vec![
            format!(
                r#"[{{"jsonrpc":"2.0","id":2,"error":{{"code":3,"message":"execution reverted: Agent not found","data":"{}"}}}},
                    {{"jsonrpc":"2.0","id":0,"result":"{}"}}]"#,
                hex_data(&revert),
                hex_data(&children)
            ),
            r#"[{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted"}}]"#.to_owned(),
        ];
        let outcomes = plan.decode(&answers).unwrap();
        assert_eq!(
            outcomes[0].decode::<AgentRegistry::getChildrenCall>(),
            Ok(vec![U256::from(4), U256::from(5)])
        );
        assert_eq!(outcomes[1], Outcome::Reverted(RevertReason::Empty));
        assert!(outcomes[2].reverted_with("Agent not found"));

        let missing = plan.decode(&answers[..1]).unwrap_err();
        assert_eq!(missing, Error::Rpc("no answer to call 1".into()));
        let refused = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}"#;
        assert_eq!(
            plan.decode(&[refused.to_owned()]),
            Err(Error::BatchRefused("batch too large (code -32600)".into()))
        );
    }

    /// What nodes answer when an `eth_call` runs out of gas or time (a gas cap, an EVM timeout)
    /// is out of gas, never a revert and never a failure of the whole read; reverts stay reverts.
    #[test]
    fn out_of_gas_shapes() {
        for (code, message) in [
            (-32000, "out of gas"),
            (-32000, "gas required exceeds allowance (50000000)"),
            (-32000, "out of gas: gas required exceeds: 50000000"),
            (-32603, "EVM error OutOfGas"),
            (-32015, "VM execution error: OutOfGas"),
            (-32003, "OutOfGas"),
            (-32000, "execution aborted (timeout = 5s)"),
        ] {
            assert!(is_out_of_gas(code, message, None), "{message}");
            let answer =
                format!(r#"[{{"jsonrpc":"2.0","id":0,"error":{{"code":{code},"message":"{message}"}}}}]"#);
            let outcomes = plan(1).decode(&[answer]).unwrap();
            assert_eq!(outcomes, [Outcome::OutOfGas(format!("{message} (code {code})"))]);
            let error = outcomes[0].decode::<AgentRegistry::getChildrenCall>().unwrap_err();
            assert!(matches!(&error, Error::OutOfGas(text) if text.starts_with("getChildren(uint256) (")));
            assert!(error.to_string().contains("eth_call gas cap"), "{error}");
        }
        for (code, message) in [
            (3, "execution reverted"),
            (-32000, "header not found"),
            (-32603, "internal error"),
            (-32005, "limit exceeded"),
        ] {
            assert!(!is_out_of_gas(code, message, None), "{message}");
        }
        // Recent Nethermind: the detail in `data`, as text. A revert's data stays a revert.
        let nethermind = concat!(
            r#"[{"jsonrpc":"2.0","id":0,"error":{"code":-32015,"message":"VM execution error.","#,
            r#""data":"err: OutOfGas (supplied gas 2000000)"}}]"#
        );
        assert_eq!(
            plan(1).decode(&[nethermind.to_owned()]).unwrap(),
            [Outcome::OutOfGas(
                "VM execution error.: err: OutOfGas (supplied gas 2000000) (code -32015)".into()
            )]
        );
        let nethermind_revert = concat!(
            r#"[{"jsonrpc":"2.0","id":0,"error":{"code":-32015,"message":"VM execution error.","#,
            r#""data":"revert: Agent not found"}}]"#
        );
        assert!(matches!(&plan(1).decode(&[nethermind_revert.to_owned()]).unwrap()[0], Outcome::Reverted(_)));
        assert!(!is_out_of_gas(-32015, "VM execution error.", Some("stack underflow")));
        let reverted =
            r#"[{"jsonrpc":"2.0","id":0,"error":{"code":3,"message":"execution reverted: out of gas"}}]"#;
        assert!(matches!(&plan(1).decode(&[reverted.to_owned()]).unwrap()[0], Outcome::Reverted(_)));
        let other = r#"[{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"header not found"}}]"#;
        assert!(plan(1).decode(&[other.to_owned()]).is_err());
    }

    /// A node behind the block a read names fails the read with its own error, worded as any RPC
    /// error, so a reader can tell it apart and read again ([`crate::chain::retry`]); in a batch, or as
    /// the error of a whole batch.
    #[test]
    fn unseen_blocks_fail_reads_apart() {
        let lagging = r#"[{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"header not found"}}]"#;
        let error = plan(1).decode(&[lagging.to_owned()]).unwrap_err();
        assert_eq!(error, Error::UnseenBlock("header not found (code -32000)".into()));
        assert_eq!(error.to_string(), "RPC error: header not found (code -32000)");
        let besu = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-39001,"message":"Unknown block"}}"#;
        assert!(matches!(whole_batch_error(besu), Some(Error::UnseenBlock(_))));
        assert!(is_unseen_block(-32001, "0x5c0f could not be found"));
        assert!(!is_unseen_block(-32001, "0x5c0f receipt could not be found"));
        assert!(!is_unseen_block(-32000, "could not be found"));
        assert!(!is_unseen_block(3, "execution reverted: Block not found"));
        let down = r#"[{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"missing trie node"}}]"#;
        assert!(matches!(plan(1).decode(&[down.to_owned()]), Err(Error::Rpc(_))));
    }

    proptest! {
        /// However the calls are chunked and the answers shuffled, outcomes come back in order.
        #[test]
        fn chunking_keeps_order(calls in 1u64..60, batch in 1usize..20, reverse in any::<bool>()) {
            let plan = plan(calls);
            let bodies: Vec<String> =
                batches(plan.requests(BlockTag::Number(1)), batch).iter().map(|batch| batch_body(batch)).collect();
            prop_assert_eq!(bodies.len(), (calls as usize).div_ceil(batch));
            let mut answers: Vec<String> = bodies.iter().map(|body| {
                let requests: Vec<serde_json::Value> = serde_json::from_str(body).unwrap();
                let mut responses: Vec<serde_json::Value> = requests.iter().map(|request| {
                    let id = request["id"].as_u64().unwrap();
                    serde_json::json!({"jsonrpc": "2.0", "id": id,
                        "result": hex_data(&vec![U256::from(id)].abi_encode())})
                }).collect();
                responses.reverse();
                serde_json::to_string(&responses).unwrap()
            }).collect();
            if reverse { answers.reverse(); }
            let outcomes = plan.decode(&answers).unwrap();
            prop_assert_eq!(outcomes.len(), calls as usize);
            for (index, outcome) in outcomes.iter().enumerate() {
                prop_assert_eq!(
                    outcome.decode::<AgentRegistry::getChildrenCall>().unwrap(),
                    vec![U256::from(index)]
                );
            }
        }
    }

    #[test]
    fn headers_are_asked_in_one_batch_and_read_back_by_id() {
        let requests = header_requests(&[0x10, 0x11]);
        let second: serde_json::Value = serde_json::from_str(&requests[1]).unwrap();
        assert_eq!(second["id"], 1);
        assert_eq!(second["params"], serde_json::json!(["0x11", false]));
        let hash = format!("0x{}", "ab".repeat(32));
        // Answered out of order, and the second block is missing.
        let answer = format!(
            r#"[{{"jsonrpc":"2.0","id":1,"result":null}},{{"jsonrpc":"2.0","id":0,"result":{{"number":"0x10","timestamp":"0x64","hash":"{hash}"}}}}]"#
        );
        assert_eq!(
            decode_headers(&[answer], 2).unwrap(),
            vec![Some((BlockRef { number: 16, timestamp: 100 }, B256::repeat_byte(0xab))), None]
        );
    }
}
