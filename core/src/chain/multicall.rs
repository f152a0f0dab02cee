//! Reads through Multicall3's `aggregate3`: a [`CallPlan`]'s calls go in chunks, one `eth_call`
//! each, and every chunk first reads `getBlockNumber` and `getCurrentBlockTimestamp`. So one
//! `eth_call` is one consistent answer that says which block it read, and one billed call for
//! hundreds of registry calls.
//!
//! Over 500 lines with its tests: the code is 266 lines; the tests of chunks, blocks and
//! starved calls planned again in pieces make up the rest.

use std::collections::BTreeSet;

use alloy_primitives::{Address, Bytes, address};
use alloy_sol_types::SolCall;

use crate::{
    BlockRef, Error, Result,
    chain::{
        abi::{
            IMulticall3::{Call3, Result as CallResult},
            Multicall3,
        },
        revert::RevertReason,
        rpc::{BlockTag, CallObject, CallPlan, Outcome, call_outcome, eth_call_request, results_by_id},
    },
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
    /// Every chunk ran out of gas as a whole: nothing was read, not even the block. Every call
    /// is to be read again in smaller pieces ([`starved_pieces`]) at a block pinned otherwise.
    Starved,
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
        let per_aggregate = per_aggregate.max(1);
        let chunks = (0..self.calls().len()).step_by(per_aggregate).enumerate();
        chunks
            .map(|(id, start)| {
                let end = (start + per_aggregate).min(self.calls().len());
                self.aggregate_request(id, multicall, start..end, block)
            })
            .collect()
    }

    /// One `eth_call` of `aggregate3` (id `id`): the block getters, then the calls at `indexes`,
    /// each to its contract.
    fn aggregate_request(
        &self,
        id: usize,
        multicall: Address,
        indexes: impl Iterator<Item = usize>,
        block: BlockTag,
    ) -> String {
        let mut call3s = vec![
            required(multicall, Multicall3::getBlockNumberCall {}.abi_encode()),
            required(multicall, Multicall3::getCurrentBlockTimestampCall {}.abi_encode()),
        ];
        call3s.extend(indexes.map(|index| Call3 {
            target: self.target_of(index),
            allowFailure: true,
            callData: self.calls()[index].clone(),
        }));
        let input: Bytes = Multicall3::aggregate3Call { calls: call3s }.abi_encode().into();
        eth_call_request(id, CallObject::new(&multicall, &input), block)
    }

    /// Requests reading `pieces` (from [`starved_pieces`], [`split_starved`]) again at `block`,
    /// one per piece (ids are piece indexes): a piece of several calls as one `aggregate3`, a
    /// lone call as a plain `eth_call`, whose error tells running out of gas from a revert.
    pub fn piece_requests(&self, multicall: Address, block: u64, pieces: &[Vec<usize>]) -> Vec<String> {
        let tag = BlockTag::Number(block);
        pieces
            .iter()
            .enumerate()
            .map(|(id, piece)| match piece.as_slice() {
                [single] => {
                    let target = self.target_of(*single);
                    eth_call_request(id, CallObject::new(&target, &self.calls()[*single]), tag)
                }
                _ => self.aggregate_request(id, multicall, piece.iter().copied(), tag),
            })
            .collect()
    }

    /// The outcomes of each piece, in piece order, from the answers to
    /// [`CallPlan::piece_requests`]; an `aggregate3` that read another block than `block` fails.
    pub fn decode_pieces(
        &self,
        pieces: &[Vec<usize>],
        block: u64,
        answers: &[String],
    ) -> Result<Vec<Vec<Outcome>>> {
        let results = results_by_id(answers, pieces.len())?;
        pieces
            .iter()
            .zip(results)
            .map(|(piece, result)| match (piece.len(), call_outcome(result)?) {
                (1, outcome) => Ok(vec![outcome]),
                (_, Outcome::OutOfGas(message)) => Ok(vec![Outcome::OutOfGas(message); piece.len()]),
                (_, Outcome::Returned(data)) if !data.is_empty() => {
                    let (read, outcomes) = decode_chunk(&data)?;
                    if read.number != block || outcomes.len() != piece.len() {
                        return Err(Error::Rpc(format!(
                            "aggregate3 asked for block {block} answered block {} with {} results",
                            read.number,
                            outcomes.len()
                        )));
                    }
                    Ok(outcomes)
                }
                _ => Err(Error::Rpc("Multicall3 failed on a smaller piece of a read".into())),
            })
            .collect()
    }

    /// The read from the answers to [`CallPlan::aggregate_requests`] (any grouping, any order).
    /// A chunk that ran out of gas as a whole gives [`Outcome::OutOfGas`] for each of its calls.
    pub fn decode_aggregates(&self, per_aggregate: usize, answers: &[String]) -> Result<Aggregated> {
        let per_aggregate = per_aggregate.max(1);
        let chunk_count = self.calls().len().div_ceil(per_aggregate);
        let mut block: Option<BlockRef> = None;
        let mut outcomes = Vec::with_capacity(self.calls().len());
        for (index, result) in results_by_id(answers, chunk_count)?.into_iter().enumerate() {
            let data = match call_outcome(result)? {
                // Multicall3's `aggregate3` with every call allowed to fail does not revert.
                Outcome::Returned(data) if data.is_empty() => return Ok(Aggregated::NoMulticall),
                Outcome::Reverted(_) => return Ok(Aggregated::NoMulticall),
                Outcome::OutOfGas(message) => {
                    let calls = per_aggregate.min(self.calls().len() - index * per_aggregate);
                    outcomes.extend(std::iter::repeat_n(Outcome::OutOfGas(message), calls));
                    continue;
                }
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
            None if chunk_count > 0 => Ok(Aggregated::Starved),
            None => Err(Error::Rpc("an empty plan has no block".into())),
        }
    }
}

/// The split plan after a read in `aggregate3`s of `per_aggregate` calls: the pieces (plan
/// indexes) to read again because they ran out of gas, from [`split_starved`] on each chunk.
pub fn starved_pieces(outcomes: &[Outcome], per_aggregate: usize) -> Vec<Vec<usize>> {
    let per_aggregate = per_aggregate.max(1);
    (0..outcomes.len())
        .step_by(per_aggregate)
        .flat_map(|start| {
            let chunk: Vec<usize> = (start..outcomes.len().min(start + per_aggregate)).collect();
            split_starved(&chunk, &outcomes[start..start + chunk.len()])
        })
        .collect()
}

/// The split plan of one piece (plan indexes) read together in one `aggregate3`, given its
/// outcomes: the pieces to read again. Within `aggregate3` a call gets 63/64 of the gas left,
/// so a call that needs more than the cap fails without revert data and starves every call
/// after it; the calls before it pass. So the first starved call goes alone, and the others in
/// halves; when nothing passed (the whole `eth_call` ran out, or the first call was the hog)
/// the piece is halved. A lone call is read as a plain `eth_call`, whose error tells out of gas
/// from a revert (`revert()` without a reason looks starved inside `aggregate3` too), and is
/// final: its piece is not split again. Every piece of several calls gives smaller pieces, so
/// reading again ends, after about log2(per_aggregate) rounds for any number of hogs.
pub fn split_starved(piece: &[usize], outcomes: &[Outcome]) -> Vec<Vec<usize>> {
    let starved: Vec<usize> =
        piece.iter().zip(outcomes).filter(|(_, outcome)| outcome.is_out_of_gas()).map(|(&i, _)| i).collect();
    if starved.is_empty() {
        return Vec::new();
    }
    if starved.len() == piece.len() {
        return halves(starved);
    }
    let mut pieces = vec![vec![starved[0]]];
    pieces.extend(halves(starved[1..].to_vec()).into_iter().filter(|piece| !piece.is_empty()));
    pieces
}

/// What to read again after a round of [`split_starved`]'s pieces: a piece of several calls is
/// split by [`split_starved`]; a lone call (read as a plain `eth_call`) is final, unless the node
/// gave up on it for time, not gas ([`Outcome::timed_out`]): that may be the node's load, so it
/// is read once more (`retried` remembers which were) when the caller `may_retry` (it has the
/// requests to spare). Reading again still ends.
pub fn read_again(
    piece: &[usize],
    outcomes: &[Outcome],
    retried: &mut BTreeSet<usize>,
    may_retry: bool,
) -> Vec<Vec<usize>> {
    match (piece, outcomes) {
        ([lone], [outcome]) if may_retry && outcome.timed_out() && retried.insert(*lone) => vec![vec![*lone]],
        ([_], _) => Vec::new(),
        _ => split_starved(piece, outcomes),
    }
}

fn halves(mut piece: Vec<usize>) -> Vec<Vec<usize>> {
    if piece.len() <= 1 {
        return vec![piece];
    }
    let second = piece.split_off(piece.len().div_ceil(2));
    vec![piece, second]
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
            // Out of gas leaves no revert data: read it again, in a smaller piece or alone.
            false if result.returnData.is_empty() => {
                Outcome::OutOfGas("failed without revert data inside aggregate3".into())
            }
            false => Outcome::Reverted(RevertReason::from_data(&result.returnData)),
        })
        .collect();
    Ok((block, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::abi::AgentRegistry;

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

    /// A call pushed to another contract goes there, inside `aggregate3`, read alone, and as a
    /// plain `eth_call`; the others go to the plan's contract.
    #[test]
    fn a_call_to_another_contract_keeps_its_target_everywhere() {
        let mut plan = plan(2);
        let account = Address::with_last_byte(0xbb);
        let elsewhere = plan.push_to(account, &AgentRegistry::getChildrenCall { agentId: U256::from(3) });
        assert_eq!(
            (elsewhere, plan.target_of(0), plan.target_of(elsewhere)),
            (2, Address::with_last_byte(0xaa), account)
        );
        let requests = plan.aggregate_requests(MULTICALL3_ADDRESS, BlockTag::Latest, 10);
        let request: serde_json::Value = serde_json::from_str(&requests[0]).unwrap();
        let input: Bytes = request["params"][0]["input"].as_str().unwrap().parse().unwrap();
        let targets: Vec<Address> = Multicall3::aggregate3Call::abi_decode(&input).unwrap().calls[2..]
            .iter()
            .map(|call| call.target)
            .collect();
        assert_eq!(targets, [Address::with_last_byte(0xaa), Address::with_last_byte(0xaa), account]);
        let pieces = plan.piece_requests(MULTICALL3_ADDRESS, 9, &[vec![2]]);
        let lone: serde_json::Value = serde_json::from_str(&pieces[0]).unwrap();
        assert_eq!(lone["params"][0]["to"], "0x00000000000000000000000000000000000000bb");
        let plain: serde_json::Value = serde_json::from_str(&plan.requests(BlockTag::Latest)[2]).unwrap();
        assert_eq!(plain["params"][0]["to"], "0x00000000000000000000000000000000000000bb");
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

    fn starved() -> Outcome {
        Outcome::OutOfGas("failed without revert data inside aggregate3".into())
    }

    fn returned() -> Outcome {
        Outcome::Returned(word(1))
    }

    #[test]
    fn a_starved_call_after_the_hog_and_a_chunk_out_of_gas_as_a_whole() {
        // Chunk 0: call 2 (id 3) is the hog, call 3 starves after it; chunk 1 ran out as a whole.
        let plan = plan(6);
        let requests = plan.aggregate_requests(MULTICALL3_ADDRESS, BlockTag::Latest, 4);
        let block = BlockRef { number: 9, timestamp: 90 };
        let mut results = vec![
            CallResult { success: true, returnData: word(block.number) },
            CallResult { success: true, returnData: word(block.timestamp) },
            CallResult {
                success: true,
                returnData: AgentRegistry::getChildrenCall::abi_encode_returns(&vec![U256::from(1)]).into(),
            },
            CallResult { success: false, returnData: Revert::from("Agent not found").abi_encode().into() },
        ];
        results.extend(vec![CallResult { success: false, returnData: Bytes::new() }; 2]);
        let first = format!(
            r#"{{"jsonrpc":"2.0","id":0,"result":"{}"}}"#,
            hex::encode_prefixed(Multicall3::aggregate3Call::abi_encode_returns(&results))
        );
        let second = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"out of gas"}}"#.to_owned();
        assert_eq!(requests.len(), 2);
        let Ok(Aggregated::Read(read, outcomes)) = plan.decode_aggregates(4, &[first, second.clone()]) else {
            panic!("a read with starved calls");
        };
        assert_eq!(read, block);
        assert!(outcomes[1].reverted_with("Agent not found"), "a revert with data is the answer");
        assert_eq!(outcomes[2..4], [starved(), starved()]);
        assert_eq!(outcomes[4..], vec![Outcome::OutOfGas("out of gas (code -32000)".into()); 2]);
        // The hog alone, the call it starved in a piece; the chunk that ran out whole in halves.
        assert_eq!(starved_pieces(&outcomes, 4), [vec![2], vec![3], vec![4], vec![5]]);
        // A plan whose every chunk ran out has not even a block.
        assert_eq!(
            super::tests::plan(2).decode_aggregates(4, &[second.replace("\"id\":1", "\"id\":0")]),
            Ok(Aggregated::Starved)
        );
    }

    #[test]
    fn the_split_plan() {
        let piece: Vec<usize> = (10..20).collect();
        // Nothing starved: nothing to read again. A lone call starved in an aggregate3: alone,
        // as a plain eth_call (which is final).
        assert!(split_starved(&piece, &vec![returned(); 10]).is_empty());
        assert_eq!(split_starved(&[7], &[starved()]), [vec![7]]);
        // The hog at 13 starved 14..20: it alone, the rest in halves.
        let mut outcomes = vec![returned(); 3];
        outcomes.extend(vec![starved(); 7]);
        assert_eq!(split_starved(&piece, &outcomes), [vec![13], vec![14, 15, 16], vec![17, 18, 19]]);
        // Nothing passed: halves.
        assert_eq!(
            split_starved(&piece, &vec![starved(); 10]),
            [(10..15).collect::<Vec<_>>(), (15..20).collect()]
        );
        assert_eq!(split_starved(&[1, 2], &[starved(), starved()]), [vec![1], vec![2]]);
        assert_eq!(split_starved(&[1, 2], &[returned(), starved()]), [vec![2]]);
    }

    proptest::proptest! {
        /// Whatever calls are hogs, reading again by the split plan (a hog starves every call
        /// after it in its piece; a piece with a hog may also run out as a whole) ends with
        /// every call read, only the hogs out of gas, in fewer than 2 * log2 rounds per hog.
        #[test]
        fn reading_again_isolates_exactly_the_hogs(
            hogs in proptest::collection::btree_set(0usize..40, 0..4),
            whole in proptest::bool::ANY,
        ) {
            let read = |piece: &[usize]| -> Vec<Outcome> {
                if piece.len() > 1 && whole && piece.iter().any(|index| hogs.contains(index)) {
                    return vec![starved(); piece.len()];
                }
                let first_hog = piece.iter().position(|index| hogs.contains(index));
                (0..piece.len()).map(|at| match first_hog {
                    Some(hog) if at >= hog => starved(),
                    _ => returned(),
                }).collect()
            };
            let chunks: Vec<Vec<usize>> = (0..40).collect::<Vec<_>>().chunks(16).map(<[usize]>::to_vec).collect();
            let mut outcomes: Vec<Outcome> = chunks.iter().flat_map(|chunk| read(chunk)).collect();
            let mut pieces = starved_pieces(&outcomes, 16);
            let mut rounds = 0;
            while !pieces.is_empty() {
                rounds += 1;
                proptest::prop_assert!(rounds <= 12, "too many rounds");
                let mut next = Vec::new();
                for piece in &pieces {
                    let got = read(piece);
                    for (&index, outcome) in piece.iter().zip(&got) {
                        outcomes[index] = outcome.clone();
                    }
                    if piece.len() > 1 {
                        next.extend(split_starved(piece, &got));
                    }
                }
                pieces = next;
            }
            for (index, outcome) in outcomes.iter().enumerate() {
                proptest::prop_assert_eq!(outcome.is_out_of_gas(), hogs.contains(&index), "call {}", index);
            }
        }
    }

    #[test]
    fn pieces_are_read_again_at_the_block_alone_or_together() {
        let plan = plan(5);
        let pieces = vec![vec![1], vec![2, 4]];
        let requests = plan.piece_requests(MULTICALL3_ADDRESS, 9, &pieces);
        let lone: serde_json::Value = serde_json::from_str(&requests[0]).unwrap();
        assert_eq!((&lone["id"], &lone["params"][1]), (&serde_json::json!(0), &serde_json::json!("0x9")));
        assert_eq!(lone["params"][0]["to"], "0x00000000000000000000000000000000000000aa", "a plain eth_call");
        let together: serde_json::Value = serde_json::from_str(&requests[1]).unwrap();
        let input: Bytes = together["params"][0]["input"].as_str().unwrap().parse().unwrap();
        let call = Multicall3::aggregate3Call::abi_decode(&input).unwrap();
        let ids: Vec<U256> = call.calls[2..]
            .iter()
            .map(|call| AgentRegistry::getChildrenCall::abi_decode(&call.callData).unwrap().agentId)
            .collect();
        assert_eq!(ids, [U256::from(3), U256::from(5)]);

        let block = BlockRef { number: 9, timestamp: 90 };
        let answers = vec![
            r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"EVM error OutOfGas"}}"#.to_owned(),
            answer(1, &requests[1], block),
        ];
        let outcomes = plan.decode_pieces(&pieces, 9, &answers).unwrap();
        assert_eq!(outcomes[0], [Outcome::OutOfGas("EVM error OutOfGas (code -32603)".into())]);
        assert_eq!(outcomes[1][1].decode::<AgentRegistry::getChildrenCall>().unwrap(), vec![U256::from(5)]);
        let moved = vec![answers[0].clone(), answer(1, &requests[1], BlockRef { number: 10, timestamp: 91 })];
        assert!(plan.decode_pieces(&pieces, 9, &moved).is_err(), "another block than the read's");
    }

    /// A lone call the node gave up on for time is read once more, if the caller has requests
    /// to spare; one out of gas, or one that timed out twice, is final; a piece of several calls
    /// is split as before.
    #[test]
    fn a_lone_timeout_is_read_once_more_and_out_of_gas_is_final() {
        let timeout = Outcome::OutOfGas("execution aborted (timeout = 5s) (code -32000)".into());
        let gas = Outcome::OutOfGas("out of gas (code -32000)".into());
        assert!(timeout.timed_out() && !gas.timed_out());
        assert!(!Outcome::Returned(Bytes::new()).timed_out());
        let (mut retried, none) = (BTreeSet::new(), Vec::<Vec<usize>>::new());
        assert_eq!(
            read_again(&[6], std::slice::from_ref(&timeout), &mut retried, false),
            none,
            "none to spare"
        );
        assert_eq!(read_again(&[7], std::slice::from_ref(&timeout), &mut retried, true), vec![vec![7]]);
        assert_eq!(read_again(&[7], std::slice::from_ref(&timeout), &mut retried, true), none);
        assert_eq!(read_again(&[8], std::slice::from_ref(&gas), &mut retried, true), none);
        assert_eq!(read_again(&[9], &[Outcome::Returned(Bytes::new())], &mut retried, true), none);
        let piece = [1, 2, 3, 4];
        let outcomes = [Outcome::Returned(Bytes::new()), gas.clone(), timeout.clone(), gas];
        assert_eq!(read_again(&piece, &outcomes, &mut retried, false), split_starved(&piece, &outcomes));
        assert_eq!(retried, BTreeSet::from([7]));
    }
}
