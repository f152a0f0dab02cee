//! The relayer end to end: the real daemon (in-process on port 0, or the real binary) against a
//! real anvil with the real contracts, fed requests signed by eth-account and by kya-core.
//!
//! Every suite that touches the store runs on both engines: each test is written once, as an
//! `async fn(engine)`, and [`on_both_stores!`] makes it `<suite>::sqlite::<test>` and
//! `<suite>::postgres::<test>` (a database of its own on the PostgreSQL test server).

/// The listed tests (`name` or `name(<tokio::test arguments>)`) as `sqlite::name` and
/// `postgres::name`.
macro_rules! on_both_stores {
    ($($name:ident $(($($flavor:tt)*))?),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test$(($($flavor)*))?]
            async fn $name() {
                super::$name(kya_tests::relayer_fixture::Engine::Sqlite).await;
            })*
        }
        mod postgres {
            $(#[tokio::test$(($($flavor)*))?]
            async fn $name() {
                super::$name(kya_tests::relayer_fixture::Engine::Postgres).await;
            })*
        }
    };
}
use on_both_stores;

mod abuse;
mod cluster;
mod concurrency;
mod database;
mod errors;
mod evicted;
mod flows;
mod freeze;
mod handoffs;
mod lanes;
mod lifecycle;
mod methods;
mod op_stack;
mod pacing;
mod prefilter;
mod providers;
mod reads;
mod reconcile;
mod reference;
mod registry_rules;
mod replay;
mod restart;
mod round_trips;
mod secrets;
mod startup;
mod stuck;
mod tls;
mod webhooks;

use alloy::{
    primitives::{Address, B256, U256},
    providers::Provider,
    rpc::types::TransactionReceipt,
    signers::local::PrivateKeySigner,
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::dev_accounts;
use kya_tests::{
    TestChain, register_call,
    relayer_fixture::{Engine, InProcessRelayer, TestStore},
};
use serde_json::Value;

/// Calls one of anvil's own methods (mining controls, fees, time).
async fn anvil(t: &TestChain, method: &'static str, params: Value) {
    let _: Value = t.chain.provider().raw_request(method.into(), params).await.expect(method);
}

/// The transaction hash `value` holds (a relay's `txHash`).
fn hash_of(value: &Value) -> B256 {
    value.as_str().and_then(|hash| hash.parse().ok()).unwrap_or_else(|| panic!("a hash: {value}"))
}

/// The transaction `hash` once the node has it: the relayer records a transaction (a relay's
/// `txHash`, its status `replaced`) before it submits it, so the store can show one the node
/// does not have yet.
async fn pending(t: &TestChain, hash: B256) -> alloy::rpc::types::Transaction {
    for _ in 0..600 {
        if let Some(tx) = t.chain.provider().get_transaction_by_hash(hash).await.unwrap() {
            return tx;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the node never got {hash}");
}

/// The address of the fixture's one relayer key (anvil's account 9): the lane of a relay a test
/// writes into the store itself.
fn relayer_address() -> Address {
    dev_accounts::address(dev_accounts::Role::Relayer)
}

/// A fresh agent wallet with a key and no ETH: it can only act through the relayer.
fn agent_key(n: u64) -> PrivateKeySigner {
    dev_accounts::agent_wallet(3_000_000 + n)
}

/// A chain, a store on `engine` and an in-process relayer with `overrides` on top of the
/// defaults.
async fn start(engine: Engine, overrides: &[(&str, &str)]) -> (TestChain, TestStore, InProcessRelayer) {
    let t = TestChain::start().await;
    let (db, relayer) = start_on(&t, engine, overrides).await;
    (t, db, relayer)
}

/// A store on `engine` and an in-process relayer on the chain `t`, for settings that depend on
/// it.
async fn start_on(
    t: &TestChain,
    engine: Engine,
    overrides: &[(&str, &str)],
) -> (TestStore, InProcessRelayer) {
    let db = TestStore::new(engine);
    let mut settings = kya_tests::relayer_fixture::settings(t, &db);
    for (name, value) in overrides {
        kya_tests::relayer_fixture::set(&mut settings, name, *value);
    }
    let relayer = InProcessRelayer::start(&settings).await;
    (db, relayer)
}

/// The regulator suspends agent `agent_id` in the next block, ahead of whatever waits in the
/// pool (mining paused: it pays far more), and that block is mined: a relayed call on the agent
/// that waits behind it then fails on chain after its simulation passed.
async fn suspend_ahead_of_the_pool(t: &TestChain, agent_id: U256) {
    use alloy::{network::TransactionBuilder, rpc::types::TransactionRequest, sol_types::SolCall};
    let suspend = TransactionRequest::default()
        .with_from(t.deployment.regulator)
        .with_to(t.registry())
        .with_input(AgentRegistry::suspendAgentCall { agentId: agent_id }.abi_encode())
        .with_gas_limit(200_000)
        .with_max_fee_per_gas(200_000_000_000)
        .with_max_priority_fee_per_gas(100_000_000_000);
    t.chain.submit(suspend).await.expect("the regulator's suspension is taken");
    anvil(t, "evm_mine", serde_json::json!([])).await;
}

/// The receipt of a relayed transaction (anvil mines on submission).
async fn receipt(t: &TestChain, answer: &Value) -> TransactionReceipt {
    let hash: B256 = answer["txHash"].as_str().and_then(|hash| hash.parse().ok()).expect("a txHash");
    t.chain.receipt(hash).await.expect("the relayed transaction is mined")
}

/// What a receipt cost the relayer.
fn cost(receipt: &TransactionReceipt) -> u128 {
    u128::from(receipt.gas_used) * receipt.effective_gas_price
}

async fn balance(t: &TestChain, account: Address) -> U256 {
    t.chain.provider().get_balance(account).await.expect("a balance")
}

async fn forwarder_nonce(t: &TestChain, account: Address) -> u64 {
    t.chain
        .view(t.forwarder(), &kya_core::chain::abi::Forwarder::getNonceCall { from: account })
        .await
        .expect("getNonce")
        .to()
}

async fn agent_of(t: &TestChain, wallet: Address) -> u64 {
    t.chain.view(t.registry(), &AgentRegistry::walletToAgentCall(wallet)).await.expect("walletToAgent").to()
}
