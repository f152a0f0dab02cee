//! The chain: its endpoint, the contracts, and how long start-up waits for the node.

use alloy::primitives::Address;

use super::{reader::Settings, redacted::RedactedUrl};
use crate::error::Result;

/// Default RPC endpoint: the public Base Sepolia node.
pub(crate) const DEFAULT_RPC_URL: &str = "https://sepolia.base.org";
/// Default time the daemon keeps trying to reach the RPC endpoint at start.
pub(crate) const DEFAULT_STARTUP_RETRY_SECS: u64 = 300;

/// The chain's endpoint and the contracts.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    /// JSON-RPC endpoint of the chain (`RPC_URL`).
    pub rpc_url: RedactedUrl,
    /// The registry: the only contract requests may target (`REGISTRY_ADDRESS`).
    pub registry: Address,
    /// The forwarder the relayer calls (`FORWARDER_ADDRESS`).
    pub forwarder: Address,
    /// How long start-up keeps retrying an unreachable RPC endpoint (`STARTUP_RETRY_SECS`,
    /// default 300).
    pub startup_retry: std::time::Duration,
}

impl ChainConfig {
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Self> {
        Ok(Self {
            rpc_url: RedactedUrl::new(settings.text("RPC_URL").unwrap_or_else(|| DEFAULT_RPC_URL.to_owned())),
            registry: settings.address("REGISTRY_ADDRESS")?,
            forwarder: settings.address("FORWARDER_ADDRESS")?,
            startup_retry: settings.secs("STARTUP_RETRY_SECS", DEFAULT_STARTUP_RETRY_SECS)?,
        })
    }
}
