//! [`seed_bulk`]: N agents registered quickly for benchmarks, with the demo's mix of shapes, in
//! few large blocks.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256},
    rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use kya_core::chain::abi::AgentRegistry;

use super::{TIME_TRAVEL, next_agent_id, register_call};
use crate::{
    Chain, Deployment, TxError,
    consent::{ConsentNonces, consent_deadline, sign_consents},
    dev_accounts::{self, Role},
};

/// Registers `count` agents for benchmarks: groups of ten (a root and nine descendants up to
/// generation 3), every fiftieth agent suspended, revoked or terminated, a quarter lapsed and a
/// third with a revenue report. Transactions are not individually timed, so this returns only
/// the number of agents on chain.
pub async fn seed_bulk(chain: &Chain, deployment: &Deployment, count: u64) -> Result<u64, TxError> {
    let first_id = next_agent_id(chain, deployment.registry).await?;
    // Few, large blocks: anvil's work per block grows with the whole state (an empty block
    // takes about 2.5 s over 100,000 agents), so at 70 transactions a block (30 M gas over 400 k
    // each) the seed's 3,000 blocks were far slower. The gas limit is raised for the seed and
    // put back after it.
    let gas_limit = chain.block_gas_limit().await?;
    chain.set_block_gas_limit(gas_limit.max(BULK_PER_BLOCK as u64 * BULK_GAS_LIMIT)).await?;
    let sent = send_bulk(chain, deployment, first_id, count).await;
    chain.set_block_gas_limit(gas_limit).await?;
    sent?;

    let total = next_agent_id(chain, deployment.registry).await? - 1;
    if total != first_id - 1 + count {
        return Err(TxError::Reverted(format!(
            "bulk seed registered {} of {count} agents",
            total + 1 - first_id
        )));
    }
    Ok(total)
}

/// Transactions in a block of [`seed_bulk`]: 2,000 seeded 100,000 agents in about 8 minutes
/// (700: 12). Not many more: anvil's `eth_getBlockReceipts` takes time in the square of a
/// block's transactions (0.13 s for 700, 1.1 s for 2,000, 15 s for 5,000).
const BULK_PER_BLOCK: usize = 2_000;

/// [`seed_bulk`]'s transactions: registrations, the time travel, attestations, revenue reports,
/// status changes.
async fn send_bulk(chain: &Chain, deployment: &Deployment, first_id: u64, count: u64) -> Result<(), TxError> {
    let registry = deployment.registry;
    let regulator = deployment.regulator;
    let creators = [Role::CreatorA, Role::CreatorB, Role::CreatorC].map(dev_accounts::address);
    // One creator per group of ten: it registered the group's parents, so it may register their
    // children.
    let creator_of = |id: u64| creators[usize::try_from((id - first_id) / 10 % 3).expect("0..3")];
    let ids = first_id..first_id + count;

    let chain_id = chain.chain_id().await?;
    let deadline = consent_deadline(chain).await?;
    // Each agent wallet is fresh, so its consent names nonce 0; the creator is its own
    // Haftungsperson, so only the wallet signs.
    let registrations = ids.clone().map(|id| {
        let group_root = id - (id - first_id) % 10;
        let parent = if id == group_root { 0 } else { group_root + (id - group_root - 1) / 3 };
        let scope = format!("bulk agent {id}");
        let wallet = dev_accounts::agent_wallet(id);
        let call = register_call(creator_of(id), wallet.address(), &scope, parent, false);
        let nonces = ConsentNonces::default();
        let call = sign_consents(call, creator_of(id), (chain_id, registry), nonces, &[&wallet], deadline);
        tx(creator_of(id), registry, &call)
    });
    chain.send_in_blocks(registrations, BULK_PER_BLOCK).await?;
    chain.increase_time(TIME_TRAVEL).await?;

    let attestations = ids.clone().filter(|id| id % 4 != 0).map(|id| {
        tx(creator_of(id), registry, &AgentRegistry::attestComplianceCall { agentId: U256::from(id) })
    });
    chain.send_in_blocks(attestations, BULK_PER_BLOCK).await?;

    let currencies = ["USD", "EUR", "GBP", "JPY"];
    let categories = ["compute", "data", "api-calls", "consulting"];
    let reports = ids.clone().filter(|id| id % 3 == 0).map(|id| {
        let pick = usize::try_from(id % 4).expect("0..4");
        let call = AgentRegistry::reportRevenueCall {
            agentId: U256::from(id),
            amount: U256::from(1_000 + id % 97 * 100),
            currency: currencies[pick].to_owned(),
            category: categories[(pick + 1) % 4].to_owned(),
            periodStart: 0,
            periodEnd: 0,
        };
        tx(creator_of(id), registry, &call)
    });
    chain.send_in_blocks(reports, BULK_PER_BLOCK).await?;

    let status_changes = ids.filter_map(|id| {
        let agent_id = U256::from(id);
        match id % 50 {
            7 => Some(tx(regulator, registry, &AgentRegistry::suspendAgentCall { agentId: agent_id })),
            13 => Some(tx(regulator, registry, &AgentRegistry::revokeAgentCall { agentId: agent_id })),
            29 => Some(tx(creator_of(id), registry, &AgentRegistry::terminateSelfCall { agentId: agent_id })),
            _ => None,
        }
    });
    chain.send_in_blocks(status_changes, BULK_PER_BLOCK).await?;
    Ok(())
}

/// The gas limit of each [`seed_bulk`] transaction (a registration uses about 320 k).
const BULK_GAS_LIMIT: u64 = 400_000;

/// A bulk-seeding transaction with a fixed gas limit, so no estimate round trip per
/// transaction; [`Chain::send_in_blocks`] checks every receipt.
fn tx<C: SolCall>(from: Address, to: Address, call: &C) -> TransactionRequest {
    TransactionRequest::default()
        .with_from(from)
        .with_to(to)
        .with_input(call.abi_encode())
        .with_gas_limit(BULK_GAS_LIMIT)
}
