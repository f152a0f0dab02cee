//! Shared fixtures of the end-to-end tests (the tests themselves are in `it/`).

use alloy::primitives::Address;
use kya_devchain::{Anvil, AnvilOptions, Chain, Deployment, deploy};

pub mod edge_fixture;
pub mod relayer_fixture;

/// A fresh anvil with the forwarder and the registry deployed; anvil stops when this drops.
#[derive(Debug)]
pub struct TestChain {
    /// Client for the chain.
    pub chain: Chain,
    /// Addresses of the deployed contracts and their administrators.
    pub deployment: Deployment,
    anvil: Anvil,
}

impl TestChain {
    /// Starts anvil on a free port and deploys the contracts.
    pub async fn start() -> Self {
        let anvil = Anvil::start(&AnvilOptions::default()).expect("anvil starts");
        let chain = Chain::connect(&anvil.rpc_url()).expect("anvil's URL parses");
        let deployment = deploy::deploy(&chain).await.expect("contracts deploy");
        Self { chain, deployment, anvil }
    }

    /// The registry's address.
    pub fn registry(&self) -> Address {
        self.deployment.registry
    }

    /// The forwarder's address.
    pub fn forwarder(&self) -> Address {
        self.deployment.forwarder
    }

    /// The chain id anvil runs with.
    pub fn chain_id(&self) -> u64 {
        self.anvil.chain_id()
    }

    /// The JSON-RPC endpoint.
    pub fn rpc_url(&self) -> String {
        self.anvil.rpc_url()
    }
}
