//! The chain of the run: the repository's [`TestChain`] (anvil with the contracts deployed),
//! switched to a block a second once deployed; the keys (relayer keys funded, signers not); and
//! what the checks read from it.

use alloy::{
    eips::BlockId,
    primitives::{Address, B256, U256, hex},
    providers::Provider,
    signers::local::PrivateKeySigner,
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::dev_accounts;
use kya_tests::TestChain;
use serde_json::{Value, json};

/// Seconds between two blocks, as anvil's `--block-time 1`.
pub(crate) const BLOCK_TIME_SECS: u64 = 1;

/// ETH each relayer key gets: far more than a burst spends at anvil's fees.
const KEY_FUNDS_WEI: &str = "0x21e19e0c9bab2400000"; // 10,000 ETH

/// Starts anvil, deploys the contracts (automine: quick), then lets anvil mine a block every
/// [`BLOCK_TIME_SECS`] instead (`evm_setIntervalMining`: what `--block-time` sets at start; the
/// fixture starts anvil without it).
pub(crate) async fn start() -> TestChain {
    let chain = TestChain::start().await;
    rpc(&chain, "evm_setIntervalMining", json!([BLOCK_TIME_SECS])).await;
    let automine = rpc(&chain, "anvil_getAutomine", json!([])).await;
    assert_eq!(automine, Value::Bool(false), "interval mining replaces automine");
    chain
}

/// The relayer keys of configuration number `index`: `count` keys of its own, derived like the
/// seeded agent wallets, so no configuration inherits another's nonces or pool.
pub(crate) fn relayer_keys(index: usize, count: usize) -> Vec<PrivateKeySigner> {
    (0..count).map(|key| dev_accounts::agent_wallet(60_000_000 + 100 * index as u64 + key as u64)).collect()
}

/// The signers of configuration number `index`: one fresh wallet per relay, never funded.
pub(crate) fn signers(index: usize, count: usize) -> Vec<PrivateKeySigner> {
    (0..count).map(|n| dev_accounts::agent_wallet(70_000_000 + 1_000_000 * index as u64 + n as u64)).collect()
}

/// `RELAYER_KEYS`: the keys in hex, comma-separated.
pub(crate) fn keys_setting(keys: &[PrivateKeySigner]) -> String {
    keys.iter().map(|key| hex::encode_prefixed(key.to_bytes())).collect::<Vec<_>>().join(",")
}

/// Gives every relayer key its ETH (`anvil_setBalance`).
pub(crate) async fn fund(chain: &TestChain, keys: &[PrivateKeySigner]) {
    for key in keys {
        rpc(chain, "anvil_setBalance", json!([key.address(), KEY_FUNDS_WEI])).await;
    }
}

/// The registry's `nextAgentId`: one more than the registrations so far.
pub(crate) async fn next_agent_id(chain: &TestChain) -> U256 {
    chain.chain.view(chain.registry(), &AgentRegistry::nextAgentIdCall {}).await.expect("nextAgentId")
}

/// Whether `wallet` is an agent's wallet.
pub(crate) async fn is_registered(chain: &TestChain, wallet: Address) -> bool {
    let agent = chain
        .chain
        .view(chain.registry(), &AgentRegistry::walletToAgentCall(wallet))
        .await
        .expect("walletToAgent");
    agent != U256::ZERO
}

/// A key's transaction count at the latest block and at the pending one (the node's pool).
pub(crate) async fn nonces(chain: &TestChain, key: Address) -> (u64, u64) {
    let provider = chain.chain.provider();
    let latest = provider.get_transaction_count(key).block_id(BlockId::latest()).await.expect("a nonce");
    let pending = provider.get_transaction_count(key).block_id(BlockId::pending()).await.expect("a nonce");
    (latest, pending)
}

/// The sender and nonce of a mined transaction.
pub(crate) async fn sender_and_nonce(chain: &TestChain, hash: B256) -> Option<(Address, u64)> {
    use alloy::{consensus::Transaction, network::TransactionResponse};
    let tx = chain.chain.provider().get_transaction_by_hash(hash).await.expect("eth_getTransactionByHash")?;
    tx.block_number?;
    Some((tx.from(), tx.nonce()))
}

/// A block's gas used and gas limit.
pub(crate) async fn block_gas(chain: &TestChain, number: u64) -> (u64, u64) {
    let block = chain
        .chain
        .provider()
        .get_block_by_number(number.into())
        .await
        .expect("eth_getBlockByNumber")
        .expect("a mined block");
    (block.header.gas_used, block.header.gas_limit)
}

async fn rpc(chain: &TestChain, method: &'static str, params: Value) -> Value {
    chain
        .chain
        .provider()
        .raw_request(method.into(), params)
        .await
        .unwrap_or_else(|error| panic!("{method}: {error}"))
}
