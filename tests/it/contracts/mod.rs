//! The registry and forwarder contracts on a real anvil: every revert string of SPEC.md
//! section 7, the state rules of section 3, and ERC-2771 forwarding.

mod forwarder;
mod registry_reverts;
mod registry_state;

use std::fmt::Debug;

use alloy::primitives::{Address, B256, U256};
use kya_core::abi::AgentRegistry::{self, AgentRecord};
use kya_devchain::{
    TxError,
    dev_accounts::{self, Role},
};
use kya_tests::{TestChain, register_call};

/// Asserts that `result` is a revert whose reason is exactly `expected`.
#[track_caller]
fn assert_revert<T: Debug>(result: Result<T, TxError>, expected: &str) {
    match result {
        Err(TxError::Reverted(reason)) => assert_eq!(reason, expected, "revert reason"),
        other => panic!("expected a revert with {expected:?}, got {other:?}"),
    }
}

/// A fresh wallet address for agent number `n` of a test (no key needed).
fn wallet(n: u64) -> Address {
    dev_accounts::agent_wallet(1_000_000 + n).address()
}

/// Registers an agent for `wallet` under `parent` from `creator`; returns its id.
async fn register(t: &TestChain, creator: Role, wallet: Address, parent: u64) -> Result<u64, TxError> {
    let next = t.chain.view(t.registry(), &AgentRegistry::nextAgentIdCall {}).await?;
    t.chain.send(dev_accounts::address(creator), t.registry(), &register_call(wallet, parent)).await?;
    Ok(next.to())
}

async fn agent(t: &TestChain, agent_id: u64) -> AgentRecord {
    t.chain
        .view(t.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(agent_id) })
        .await
        .expect("agent exists")
}

async fn send_as<C: alloy::sol_types::SolCall>(t: &TestChain, role: Role, call: &C) -> Result<B256, TxError> {
    let receipt = t.chain.send(dev_accounts::address(role), t.registry(), call).await?;
    Ok(receipt.transaction_hash)
}

async fn block_timestamp(t: &TestChain) -> u64 {
    t.chain.latest_timestamp().await.expect("latest block")
}

fn id(agent_id: u64) -> U256 {
    U256::from(agent_id)
}
