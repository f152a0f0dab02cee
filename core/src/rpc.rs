//! JSON-RPC plans and decoders for reading the registry at one pinned block; no I/O.
//!
//! A response is built in rounds: [`pin_block_request`] first (number and timestamp of the latest
//! block in one call), then [`CallPlan`]s of `eth_call`s at that block, each sent as JSON-RPC batch
//! bodies of a bounded size and decoded back in the order the calls were planned.

use alloy_json_rpc::{ErrorPayload, Id, Request, Response, ResponsePacket, ResponsePayload};
use alloy_primitives::{Address, Bytes, U64, hex};
use alloy_sol_types::{Revert, SolCall, SolError};
use serde::{Deserialize, Serialize};

use crate::{BlockRef, Error, Result};

/// The body asking for the latest block (header only): its number pins the block every later
/// call reads, its timestamp is "now" for compliance.
pub fn pin_block_request() -> String {
    let request = Request::new("eth_getBlockByNumber", Id::Number(0), ("latest", false));
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
    let header = header.ok_or_else(|| Error::Rpc("the node has no latest block".into()))?;
    Ok(BlockRef { number: header.number.to(), timestamp: header.timestamp.to() })
}

/// The outcome of one `eth_call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The call returned this data.
    Returned(Bytes),
    /// The call reverted with this `Error(string)` reason (empty when there was none).
    Reverted(String),
}

impl Outcome {
    /// Decodes the return data of `C`; a revert is an [`Error::Reverted`].
    pub fn decode<C: SolCall>(&self) -> Result<C::Return> {
        match self {
            Self::Returned(data) => C::abi_decode_returns(data)
                .map_err(|error| Error::Decode(format!("{}: {error}", C::SIGNATURE))),
            Self::Reverted(reason) => Err(Error::Reverted(reason.clone())),
        }
    }
}

/// `eth_call`s to one contract at one block, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPlan {
    to: Address,
    block: u64,
    calls: Vec<Bytes>,
}

#[derive(Debug, Clone, Serialize)]
struct CallObject<'a> {
    to: &'a Address,
    input: &'a Bytes,
}

impl CallPlan {
    /// An empty plan for calls to `to` at `block`.
    pub const fn new(to: Address, block: u64) -> Self {
        Self { to, block, calls: Vec::new() }
    }

    /// Adds a call; its outcome will be at the index this returns.
    pub fn push<C: SolCall>(&mut self, call: &C) -> usize {
        self.calls.push(call.abi_encode().into());
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

    /// The JSON-RPC batch bodies of at most `batch_size` calls each (ids are call indexes).
    pub fn bodies(&self, batch_size: usize) -> Vec<String> {
        let block = format!("{:#x}", self.block);
        let requests: Vec<_> = self
            .calls
            .iter()
            .enumerate()
            .map(|(index, input)| {
                let call = CallObject { to: &self.to, input };
                Request::new("eth_call", Id::Number(index as u64), (call, block.as_str()))
            })
            .collect();
        requests
            .chunks(batch_size.max(1))
            .map(|chunk| serde_json::to_string(chunk).expect("call requests serialise"))
            .collect()
    }

    /// The outcomes, in plan order, from the answers to [`CallPlan::bodies`] (any order of
    /// bodies and of responses within them). A JSON-RPC error other than a revert fails all.
    pub fn decode(&self, answers: &[String]) -> Result<Vec<Outcome>> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; self.calls.len()];
        for answer in answers {
            let packet: ResponsePacket = serde_json::from_str(answer).map_err(|error| {
                Error::Rpc(format!("not a JSON-RPC answer ({error}): {}", excerpt(answer)))
            })?;
            let responses = match packet {
                ResponsePacket::Single(response) => vec![response],
                ResponsePacket::Batch(responses) => responses,
            };
            for response in responses {
                let slot = match &response.id {
                    Id::Number(index) => {
                        usize::try_from(*index).ok().and_then(|index| outcomes.get_mut(index))
                    }
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
                *slot = Some(outcome(response)?);
            }
        }
        outcomes
            .into_iter()
            .enumerate()
            .map(|(index, outcome)| outcome.ok_or_else(|| Error::Rpc(format!("no answer to call {index}"))))
            .collect()
    }
}

fn outcome(response: Response) -> Result<Outcome> {
    match response.payload {
        ResponsePayload::Success(raw) => {
            let data: Bytes = serde_json::from_str(raw.get())
                .map_err(|error| Error::Decode(format!("eth_call result: {error}")))?;
            Ok(Outcome::Returned(data))
        }
        ResponsePayload::Failure(error) if error.message.contains("revert") => {
            let reason = error
                .as_revert_data()
                .and_then(|data| Revert::abi_decode(&data).ok())
                .map(|revert| revert.reason)
                .unwrap_or_default();
            Ok(Outcome::Reverted(reason))
        }
        ResponsePayload::Failure(error) => Err(rpc_error(&error)),
    }
}

fn rpc_error(error: &ErrorPayload) -> Error {
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
fn excerpt(body: &str) -> String {
    body.chars().take(120).collect()
}

/// `0x`-prefixed hex, for logging call data.
pub fn hex_data(data: &[u8]) -> String {
    hex::encode_prefixed(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::AgentRegistry;
    use alloy_primitives::U256;
    use alloy_sol_types::SolValue;
    use proptest::prelude::*;

    fn plan(calls: u64) -> CallPlan {
        let mut plan = CallPlan::new(Address::with_last_byte(0xaa), 0x1f);
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
    fn bodies_are_batches_at_the_pinned_block() {
        let bodies = plan(5).bodies(2);
        assert_eq!(bodies.len(), 3);
        let first: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
        assert_eq!(first[1]["id"], 1);
        assert_eq!(first[1]["method"], "eth_call");
        assert_eq!(first[1]["params"][1], "0x1f");
        assert_eq!(first[1]["params"][0]["to"], "0x00000000000000000000000000000000000000aa");
        let data = first[1]["params"][0]["input"].as_str().unwrap();
        let expected = AgentRegistry::getChildrenCall { agentId: U256::from(2) }.abi_encode();
        assert_eq!(data, hex_data(&expected));
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
        assert_eq!(outcomes[1], Outcome::Reverted(String::new()));
        assert_eq!(outcomes[2], Outcome::Reverted("Agent not found".into()));

        let missing = plan.decode(&answers[..1]).unwrap_err();
        assert_eq!(missing, Error::Rpc("no answer to call 1".into()));
        let refused = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}"#;
        assert_eq!(
            plan.decode(&[refused.to_owned()]),
            Err(Error::Rpc("batch too large (code -32600)".into()))
        );
    }

    proptest! {
        /// However the calls are chunked and the answers shuffled, outcomes come back in order.
        #[test]
        fn chunking_keeps_order(calls in 1u64..60, batch in 1usize..20, reverse in any::<bool>()) {
            let plan = plan(calls);
            let bodies = plan.bodies(batch);
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
}
