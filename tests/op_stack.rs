//! A loopback stand-in for an OP Stack node (Base, OP Mainnet), in front of a real anvil, for
//! what anvil cannot show: anvil's `--network optimism` has no `GasPriceOracle` code, puts no
//! `l1Fee` in receipts and charges no L1 data fee. The stand-in, a policy for [`rpc_proxy`]:
//!
//! - answers `eth_getCode` of the `GasPriceOracle` predeploy with code, and `eth_call`s of its
//!   `getL1Fee(bytes)` with Ecotone's formula ([`quote`]: 4 L1 gas per zero byte, 16 per other
//!   byte, plus 68 × 16 for the signature the unsigned bytes lack, priced by [`l1_fee_for_gas`]);
//! - charges each transaction sent through it (`eth_sendRawTransaction`) the L1 data fee of its
//!   signed bytes ([`charge`]) for real once it is mined, by `anvil_setBalance(from, balance −
//!   fee)`, under a lock that sends also hold until anvil has mined them, so no other
//!   transaction's gas lands between reading the balance and setting it;
//! - adds `l1Fee`, `l1GasPrice`, `l1GasUsed` and Ecotone's scalars to the receipts of those
//!   transactions, as OP Stack nodes do.
//!
//! With automine on, a send is charged as soon as anvil has mined it. With automine off (a test
//! that orders a block itself), it is charged when its receipt is first read through the
//! stand-in, before that receipt is answered; a transaction that is never mined (replaced, say)
//! is never charged, as on a real chain. Single requests only: batches pass through unchanged.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy::{
    primitives::{Address, B256, U256, hex},
    sol_types::SolCall,
};
use kya_core::chain::abi::{GAS_PRICE_ORACLE, GasPriceOracle};
use serde_json::{Value, json};

use crate::rpc_proxy::{self, Later, RpcAction};

/// The L1 base fee the stand-in prices L1 gas at (30 gwei, an Ethereum mainnet fee on a busy
/// day): with the scalars below, a relay's L1 data fee is about as large as its gas on anvil, so
/// books that leave it out are off by far more than any rounding.
pub const L1_BASE_FEE: u128 = 30_000_000_000;
/// Ecotone's `baseFeeScalar` (millionths).
pub const BASE_FEE_SCALAR: u128 = 1_368_000;
/// The L1 blob base fee.
pub const BLOB_BASE_FEE: u128 = 1_000_000_007;
/// Ecotone's `blobBaseFeeScalar` (millionths).
pub const BLOB_BASE_FEE_SCALAR: u128 = 659_851;
/// The bytes `getL1Fee` adds for the signature an unsigned transaction lacks.
const SIGNATURE_BYTES: u128 = 68;

/// Ecotone's L1 gas of `bytes`: 4 per zero byte, 16 per other byte.
pub fn data_gas(bytes: &[u8]) -> u128 {
    bytes.iter().map(|&byte| if byte == 0 { 4 } else { 16 }).sum()
}

/// Ecotone's L1 data fee of `gas` L1 gas: `gas × (16 × baseFeeScalar × l1BaseFee +
/// blobBaseFeeScalar × blobBaseFee) / (16 × 10⁶)`, rounded down.
pub fn l1_fee_for_gas(gas: u128) -> u128 {
    gas * (16 * BASE_FEE_SCALAR * L1_BASE_FEE + BLOB_BASE_FEE_SCALAR * BLOB_BASE_FEE) / 16_000_000
}

/// What `GasPriceOracle.getL1Fee(unsigned)` answers: the fee of the unsigned transaction's
/// bytes plus a signature's.
pub fn quote(unsigned: &[u8]) -> u128 {
    l1_fee_for_gas(data_gas(unsigned) + SIGNATURE_BYTES * 16)
}

/// The L1 data fee the chain charges for a signed transaction, `raw` as sent.
pub fn charge(raw: &[u8]) -> u128 {
    l1_fee_for_gas(data_gas(raw))
}

/// One transaction sent through the stand-in.
#[derive(Debug, Clone, Copy)]
struct Sent {
    /// Its L1 gas.
    l1_gas: u128,
    /// Its L1 data fee.
    fee: u128,
    /// Whether its sender has paid it.
    charged: bool,
}

/// What the stand-in answered and charged.
#[derive(Debug, Default)]
struct Ledger {
    quotes: Vec<u128>,
    sent: HashMap<B256, Sent>,
}

/// A running stand-in.
#[derive(Debug, Clone)]
pub struct OpStackNode {
    /// Its JSON-RPC URL.
    pub url: String,
    ledger: Arc<Mutex<Ledger>>,
}

impl OpStackNode {
    /// Starts the stand-in in front of anvil at `upstream`.
    pub async fn start(upstream: &str) -> Self {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let node = Node {
            upstream: upstream.to_owned(),
            http: crate::http_client(),
            ledger: Arc::clone(&ledger),
            chain: Arc::new(tokio::sync::Mutex::new(())),
        };
        let policy = move |body: &str| node.answer(body);
        Self { url: rpc_proxy::start(Some(upstream.to_owned()), Arc::new(policy)).await, ledger }
    }

    /// Every `getL1Fee` quote answered, oldest first.
    pub fn quotes(&self) -> Vec<u128> {
        self.ledger.lock().unwrap().quotes.clone()
    }

    /// The L1 data fee charged for the transaction `hash`, once its sender has paid it.
    pub fn charged(&self, hash: B256) -> Option<u128> {
        self.ledger.lock().unwrap().sent.get(&hash).filter(|sent| sent.charged).map(|sent| sent.fee)
    }
}

/// The policy's state.
#[derive(Clone)]
struct Node {
    upstream: String,
    http: reqwest::Client,
    ledger: Arc<Mutex<Ledger>>,
    /// Held while a send is forwarded and mined, and while a sender is charged.
    chain: Arc<tokio::sync::Mutex<()>>,
}

impl Node {
    fn answer(&self, body: &str) -> RpcAction {
        let Ok(request) = serde_json::from_str::<Value>(body) else {
            return RpcAction::Forward(body.to_owned());
        };
        let method = request["method"].as_str().unwrap_or_default();
        let to_oracle = |value: &Value| {
            value.as_str().and_then(|address| address.parse::<Address>().ok()) == Some(GAS_PRICE_ORACLE)
        };
        match method {
            "eth_getCode" if to_oracle(&request["params"][0]) => {
                // Any code will do: the relayer only asks whether there is some.
                RpcAction::Answer(json!("0x6080604052348015600f57600080fd5b50").to_string())
            }
            "eth_call" if to_oracle(&request["params"][0]["to"]) => self.get_l1_fee(&request),
            "eth_sendRawTransaction" => {
                let node = self.clone();
                let body = body.to_owned();
                RpcAction::Later(Later(Box::pin(async move { node.send(body, &request).await })))
            }
            "eth_getTransactionReceipt" => {
                let node = self.clone();
                let body = body.to_owned();
                RpcAction::Later(Later(Box::pin(async move { node.receipt(body, &request).await })))
            }
            _ => RpcAction::Forward(body.to_owned()),
        }
    }

    /// `getL1Fee(bytes)`, answered from the bytes and recorded.
    fn get_l1_fee(&self, request: &Value) -> RpcAction {
        let call = &request["params"][0];
        let input = call["input"].as_str().or_else(|| call["data"].as_str()).unwrap_or_default();
        let decoded =
            hex::decode(input).ok().and_then(|input| GasPriceOracle::getL1FeeCall::abi_decode(&input).ok());
        let Some(decoded) = decoded else {
            return RpcAction::Raw(
                json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": 3, "message": "execution reverted"}})
                    .to_string(),
            );
        };
        let fee = quote(&decoded._data);
        self.ledger.lock().unwrap().quotes.push(fee);
        let returned = GasPriceOracle::getL1FeeCall::abi_encode_returns(&U256::from(fee));
        RpcAction::Answer(json!(hex::encode_prefixed(returned)).to_string())
    }

    /// Forwards a send; if anvil takes it, records its L1 data fee and, with automine on, waits
    /// until it is mined and charges its sender, all under the lock.
    async fn send(&self, body: String, request: &Value) -> String {
        let _chain = self.chain.lock().await;
        let answer = rpc_proxy::post(&self.http, &self.upstream, body).await;
        let taken = serde_json::from_str::<Value>(&answer)
            .ok()
            .and_then(|answer| answer["result"].as_str().and_then(|hash| hash.parse::<B256>().ok()));
        let Some(hash) = taken else { return answer };
        let raw = hex::decode(request["params"][0].as_str().expect("a raw transaction")).expect("hex");
        let sent = Sent { l1_gas: data_gas(&raw), fee: charge(&raw), charged: false };
        self.ledger.lock().unwrap().sent.entry(hash).or_insert(sent);
        if self.call("anvil_getAutomine", json!([])).await == json!(true) {
            let receipt = self.mined(hash).await;
            self.charge_once(hash, &receipt).await;
        }
        answer
    }

    /// A receipt, with the L1 fields added for a transaction sent through the stand-in (its
    /// sender charged first, if it was not yet).
    async fn receipt(&self, body: String, request: &Value) -> String {
        let hash = request["params"][0].as_str().and_then(|hash| hash.parse::<B256>().ok());
        let Some(sent) = hash.and_then(|hash| self.ledger.lock().unwrap().sent.get(&hash).copied()) else {
            return rpc_proxy::post(&self.http, &self.upstream, body).await;
        };
        let hash = hash.expect("parsed above");
        let _chain = self.chain.lock().await;
        let mut answer: Value =
            serde_json::from_str(&rpc_proxy::post(&self.http, &self.upstream, body).await).expect("JSON");
        if answer["result"].is_object() {
            self.charge_once(hash, &answer["result"]).await;
            let quantity = |value: u128| json!(format!("{value:#x}"));
            let receipt = answer["result"].as_object_mut().expect("a receipt");
            receipt.insert("l1Fee".into(), quantity(sent.fee));
            receipt.insert("l1GasPrice".into(), quantity(L1_BASE_FEE));
            receipt.insert("l1GasUsed".into(), quantity(sent.l1_gas));
            receipt.insert("l1BaseFeeScalar".into(), quantity(BASE_FEE_SCALAR));
            receipt.insert("l1BlobBaseFee".into(), quantity(BLOB_BASE_FEE));
            receipt.insert("l1BlobBaseFeeScalar".into(), quantity(BLOB_BASE_FEE_SCALAR));
        }
        answer.to_string()
    }

    /// Takes the L1 data fee of the mined transaction `hash` from its sender (the receipt's
    /// `from`), unless it was taken already. The caller holds the lock.
    async fn charge_once(&self, hash: B256, receipt: &Value) {
        let Some(sent) = self.ledger.lock().unwrap().sent.get(&hash).copied() else { return };
        if sent.charged {
            return;
        }
        let from = &receipt["from"];
        let balance: U256 =
            serde_json::from_value(self.call("eth_getBalance", json!([from, "latest"])).await)
                .expect("a balance");
        let paid = balance.checked_sub(U256::from(sent.fee)).expect("the sender can pay its L1 fee");
        self.call("anvil_setBalance", json!([from, paid])).await;
        self.ledger.lock().unwrap().sent.get_mut(&hash).expect("recorded").charged = true;
    }

    /// The receipt of `hash`, once anvil has mined it (automine mines right after the send).
    async fn mined(&self, hash: B256) -> Value {
        for _ in 0..1_200 {
            let receipt = self.call("eth_getTransactionReceipt", json!([hash])).await;
            if receipt.is_object() {
                return receipt;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("anvil never mined {hash} with automine on");
    }

    /// One JSON-RPC call to anvil; its result.
    async fn call(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let mut answer: Value =
            serde_json::from_str(&rpc_proxy::post(&self.http, &self.upstream, body).await).expect("JSON");
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ecotone's arithmetic, worked by hand: 3 zero bytes and 2 others are 44 L1 gas; each L1
    /// gas costs (16 × 1.368 × 30 gwei + 0.659851 × 1.000000007 gwei) / 16.
    #[test]
    fn fees_follow_ecotones_formula() {
        assert_eq!(data_gas(&[0, 1, 0, 0xff, 0]), 44);
        let per_gas_times_16m = 16 * 1_368_000 * 30_000_000_000u128 + 659_851 * 1_000_000_007;
        assert_eq!(l1_fee_for_gas(44), 44 * per_gas_times_16m / 16_000_000);
        assert_eq!(charge(&[0, 1, 0, 0xff, 0]), l1_fee_for_gas(44));
        assert_eq!(quote(&[0, 1, 0, 0xff, 0]), l1_fee_for_gas(44 + 68 * 16));
    }
}
