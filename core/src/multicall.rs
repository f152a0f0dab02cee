//! Reads through Multicall3's `aggregate3`: a [`CallPlan`]'s calls go in chunks, one `eth_call`
//! each, and every chunk first reads `getBlockNumber` and `getCurrentBlockTimestamp`. So one
//! `eth_call` is one consistent answer that says which block it read, and one billed call for
//! hundreds of registry calls.

use alloy_primitives::{Address, Bytes, address};
use alloy_sol_types::SolCall;

use crate::{
    BlockRef, Error, Result,
    abi::{
        IMulticall3::{Call3, Result as CallResult},
        Multicall3,
    },
    revert::RevertReason,
    rpc::{BlockTag, CallObject, CallPlan, Outcome, call_outcome, eth_call_request, results_by_id},
};

/// Multicall3's address on Base, Base Sepolia and most EVM chains (mds1/multicall3).
pub const MULTICALL3_ADDRESS: Address = address!("0xcA11bde05977b3631167028862bE2a173976CA11");

/// Registry calls per `aggregate3`. A `getAgent` costs about 31,000 gas and 690 bytes of return
/// data (PROVIDERS.md), a short revenue history less: 400 calls stay near 10M gas, a fifth of
/// geth's 50M `eth_call` cap, and a few hundred KB, far below response-size caps.
pub const CALLS_PER_AGGREGATE: usize = 400;

/// What the answers to [`CallPlan::aggregate_requests`] hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aggregated {
    /// Every chunk read `block`: the outcomes, in plan order.
    Read(BlockRef, Vec<Outcome>),
    /// Chunks sent at `latest` read different blocks (one was mined between them): read again
    /// at the first chunk's block.
    BlockMoved(BlockRef),
    /// Multicall3 is not at the address: no code there (an `eth_call` to an account without
    /// code returns nothing), or code that reverts `aggregate3`. Read without it.
    NoMulticall,
}

impl CallPlan {
    /// One `eth_call` of `aggregate3` at `multicall` per chunk of at most `per_aggregate` calls,
    /// at `block` (ids are chunk indexes).
    pub fn aggregate_requests(
        &self,
        multicall: Address,
        block: BlockTag,
        per_aggregate: usize,
    ) -> Vec<String> {
        let target = self.target();
        let chunks = self.calls().chunks(per_aggregate.max(1)).enumerate();
        chunks
            .map(|(index, chunk)| {
                let mut calls = vec![
                    required(multicall, Multicall3::getBlockNumberCall {}.abi_encode()),
                    required(multicall, Multicall3::getCurrentBlockTimestampCall {}.abi_encode()),
                ];
                calls.extend(chunk.iter().map(|data| Call3 {
                    target,
                    allowFailure: true,
                    callData: data.clone(),
                }));
                let input: Bytes = Multicall3::aggregate3Call { calls }.abi_encode().into();
                eth_call_request(index, CallObject::new(&multicall, &input), block)
            })
            .collect()
    }

    /// The read from the answers to [`CallPlan::aggregate_requests`] (any grouping, any order).
    pub fn decode_aggregates(&self, per_aggregate: usize, answers: &[String]) -> Result<Aggregated> {
        let chunk_count = self.calls().len().div_ceil(per_aggregate.max(1));
        let mut block: Option<BlockRef> = None;
        let mut outcomes = Vec::with_capacity(self.calls().len());
        for result in results_by_id(answers, chunk_count)? {
            let data = match call_outcome(result)? {
                // Multicall3's `aggregate3` with every call allowed to fail does not revert.
                Outcome::Returned(data) if data.is_empty() => return Ok(Aggregated::NoMulticall),
                Outcome::Reverted(_) => return Ok(Aggregated::NoMulticall),
                Outcome::Returned(data) => data,
            };
            let (chunk_block, chunk_outcomes) = decode_chunk(&data)?;
            match block {
                Some(first) if first != chunk_block => return Ok(Aggregated::BlockMoved(first)),
                _ => block = Some(chunk_block),
            }
            outcomes.extend(chunk_outcomes);
        }
        match block {
            Some(block) => Ok(Aggregated::Read(block, outcomes)),
            None => Err(Error::Rpc("an empty plan has no block".into())),
        }
    }
}

/// A call of Multicall3 to itself that must succeed.
fn required(multicall: Address, data: Vec<u8>) -> Call3 {
    Call3 { target: multicall, allowFailure: false, callData: data.into() }
}

/// The block and the outcomes of one `aggregate3` answer.
fn decode_chunk(data: &[u8]) -> Result<(BlockRef, Vec<Outcome>)> {
    let results = Multicall3::aggregate3Call::abi_decode_returns(data)
        .map_err(|error| Error::Decode(format!("aggregate3: {error}")))?;
    let [number, timestamp, calls @ ..] = results.as_slice() else {
        return Err(Error::Decode("aggregate3 answered fewer results than it was asked".into()));
    };
    let word = |result: &CallResult, what: &str| -> Result<u64> {
        let value = Multicall3::getBlockNumberCall::abi_decode_returns(&result.returnData)
            .map_err(|error| Error::Decode(format!("{what}: {error}")))?;
        u64::try_from(value).map_err(|_| Error::Decode(format!("{what} {value} exceeds 64 bits")))
    };
    let block =
        BlockRef { number: word(number, "block number")?, timestamp: word(timestamp, "block timestamp")? };
    let outcomes = calls
        .iter()
        .map(|result| match result.success {
            true => Outcome::Returned(result.returnData.clone()),
            false => Outcome::Reverted(RevertReason::from_data(&result.returnData)),
        })
        .collect();
    Ok((block, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::AgentRegistry;
    use alloy_primitives::{U256, hex};
    use alloy_sol_types::{Revert, SolError};

    /// A `uint256` word, as Multicall3's block getters return it.
    fn word(value: u64) -> Bytes {
        alloy_sol_types::SolValue::abi_encode(&U256::from(value)).into()
    }

    fn plan(calls: u64) -> CallPlan {
        let mut plan = CallPlan::new(Address::with_last_byte(0xaa));
        for id in 1..=calls {
            plan.push(&AgentRegistry::getChildrenCall { agentId: U256::from(id) });
        }
        plan
    }

    /// The answer a node gives to chunk `id` of `plan`, read at `block`.
    fn answer(id: usize, request: &str, block: BlockRef) -> String {
        let request: serde_json::Value = serde_json::from_str(request).unwrap();
        let input: Bytes = request["params"][0]["input"].as_str().unwrap().parse().unwrap();
        assert_eq!(request["params"][0]["data"], request["params"][0]["input"], "call data in both fields");
        let call = Multicall3::aggregate3Call::abi_decode(&input).unwrap();
        let mut results = vec![
            CallResult { success: true, returnData: word(block.number) },
            CallResult { success: true, returnData: word(block.timestamp) },
        ];
        for call in &call.calls[2..] {
            let child = AgentRegistry::getChildrenCall::abi_decode(&call.callData).unwrap().agentId;
            results.push(if child == U256::from(2) {
                CallResult { success: false, returnData: Revert::from("Agent not found").abi_encode().into() }
            } else {
                let children = AgentRegistry::getChildrenCall::abi_encode_returns(&vec![child]);
                CallResult { success: true, returnData: children.into() }
            });
        }
        let data = Multicall3::aggregate3Call::abi_encode_returns(&results);
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"{}"}}"#, hex::encode_prefixed(data))
    }

    #[test]
    fn chunks_read_the_block_with_the_data() {
        let plan = plan(5);
        let requests = plan.aggregate_requests(MULTICALL3_ADDRESS, BlockTag::Latest, 2);
        assert_eq!(requests.len(), 3);
        let block = BlockRef { number: 9, timestamp: 1_700_000_000 };
        let answers: Vec<String> =
            requests.iter().enumerate().rev().map(|(id, request)| answer(id, request, block)).collect();
        let Aggregated::Read(read_block, outcomes) = plan.decode_aggregates(2, &answers).unwrap() else {
            panic!("a consistent read");
        };
        assert_eq!(read_block, block);
        assert_eq!(outcomes.len(), 5);
        assert!(outcomes[1].reverted_with("Agent not found"));
        assert_eq!(outcomes[4].decode::<AgentRegistry::getChildrenCall>().unwrap(), vec![U256::from(5)]);
    }

    #[test]
    fn chunks_at_different_blocks_and_missing_code() {
        let plan = plan(4);
        let requests = plan.aggregate_requests(MULTICALL3_ADDRESS, BlockTag::Number(7), 2);
        let request: serde_json::Value = serde_json::from_str(&requests[0]).unwrap();
        assert_eq!(request["params"][1], "0x7");
        let first = BlockRef { number: 7, timestamp: 70 };
        let answers = vec![
            answer(0, &requests[0], first),
            answer(1, &requests[1], BlockRef { number: 8, timestamp: 80 }),
        ];
        assert_eq!(plan.decode_aggregates(2, &answers), Ok(Aggregated::BlockMoved(first)));

        let empty = [r#"{"jsonrpc":"2.0","id":0,"result":"0x"}"#.to_owned(), answer(1, &requests[1], first)];
        assert_eq!(plan.decode_aggregates(2, &empty), Ok(Aggregated::NoMulticall));
    }
}
