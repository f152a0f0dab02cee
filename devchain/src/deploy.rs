//! Deployment of the forwarder and the registry (wired to it as trusted forwarder), and of
//! Multicall3 at the address it has on public chains.

use alloy::{
    primitives::{Address, Bytes},
    sol_types::SolValue,
};
use kya_core::chain::{
    abi::{AgentRegistry, Forwarder, Multicall3},
    multicall::MULTICALL3_ADDRESS,
};

use crate::{
    Chain, TxError,
    dev_accounts::{self, Role},
};

/// Addresses of a deployment and the accounts that administer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployment {
    /// The registry contract.
    pub registry: Address,
    /// The ERC-2771 forwarder the registry trusts.
    pub forwarder: Address,
    /// The registry's owner (the deployer).
    pub owner: Address,
    /// The regulator added after deployment.
    pub regulator: Address,
}

/// Deploys the forwarder, then the registry trusting it, from the owner account, and adds the
/// regulator account. Multicall3 goes in first, as on Base and most chains the registry runs on.
pub async fn deploy(chain: &Chain) -> Result<Deployment, TxError> {
    install_multicall3(chain).await?;
    let owner = dev_accounts::address(Role::Owner);
    let regulator = dev_accounts::address(Role::Regulator);

    let forwarder = chain.deploy(owner, Forwarder::BYTECODE.clone()).await?;
    let mut registry_init = AgentRegistry::BYTECODE.to_vec();
    registry_init.extend_from_slice(&forwarder.abi_encode());
    let registry = chain.deploy(owner, Bytes::from(registry_init)).await?;

    chain.send(owner, registry, &AgentRegistry::addRegulatorCall { regulator }).await?;
    Ok(Deployment { registry, forwarder, owner, regulator })
}

/// Puts Multicall3's runtime code at its canonical address (anvil has none). The creation code
/// is the one viem ships (`contracts/artifacts/Multicall3.json`); the node runs it to get the
/// runtime code, so no bytes are copied by hand.
pub async fn install_multicall3(chain: &Chain) -> Result<(), TxError> {
    let runtime = chain.runtime_code(Multicall3::BYTECODE.clone()).await?;
    chain.set_code(MULTICALL3_ADDRESS, &runtime).await
}
