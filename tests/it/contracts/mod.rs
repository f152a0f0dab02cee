//! The registry and forwarder contracts on a real anvil: every revert string of SPEC.md
//! section 7, the state rules of section 3, ERC-2771 forwarding, and the consents of
//! INTERFACE.md section 5.

mod consent;
mod forwarder;
mod paths;
mod registry_reverts;
mod registry_state;

use std::fmt::Debug;

use alloy::{
    primitives::{Address, B256, U256},
    signers::local::PrivateKeySigner,
};
use kya_core::chain::abi::AgentRegistry::{self, AgentRecord};
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

/// The key of a fresh wallet for agent number `n` of a test: it holds no ETH, and consents to
/// its registration by signing.
fn wallet_key(n: u64) -> PrivateKeySigner {
    dev_accounts::agent_wallet(1_000_000 + n)
}

/// The address of [`wallet_key`]`(n)`.
fn wallet(n: u64) -> Address {
    wallet_key(n).address()
}

/// Registers an agent for `wallet` under `parent` from `creator`; returns its id. A root's
/// Haftungsperson is creator B, and the consents the registry asks for are given: the wallet's,
/// signed by its key, and creator B's unless creator B registers.
async fn register(
    t: &TestChain,
    creator: Role,
    wallet: &PrivateKeySigner,
    parent: u64,
) -> Result<u64, TxError> {
    register_from(t, dev_accounts::address(creator), wallet, parent).await
}

/// [`register`] from any account (an impersonated agent wallet, a forwarder's signer).
async fn register_from(
    t: &TestChain,
    creator: Address,
    wallet: &PrivateKeySigner,
    parent: u64,
) -> Result<u64, TxError> {
    let next = t.chain.view(t.registry(), &AgentRegistry::nextAgentIdCall {}).await?;
    t.chain.send(creator, t.registry(), &consented_call(t, creator, wallet, parent).await).await?;
    Ok(next.to())
}

/// The registration [`register_from`] sends: `registerAgentWithConsent` of `wallet` under
/// `parent` by `creator`, creator B a root's Haftungsperson, with the consents signed at the
/// signers' current nonces.
async fn consented_call(
    t: &TestChain,
    creator: Address,
    wallet: &PrivateKeySigner,
    parent: u64,
) -> AgentRegistry::registerAgentWithConsentCall {
    let mut registration = register_call(wallet.address(), parent);
    registration.haftungsperson = dev_accounts::address(Role::CreatorB);
    let liable = dev_accounts::signer(Role::CreatorB);
    kya_devchain::consent::consented(
        &t.chain,
        (t.chain_id(), t.registry()),
        registration,
        creator,
        &[wallet, &liable],
    )
    .await
    .expect("the consent nonces read")
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
