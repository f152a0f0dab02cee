//! The chain: its endpoint, the contracts, and how long start-up waits for the node.

use alloy::primitives::Address;

use super::reader::Settings;
use crate::error::Result;

/// Default RPC endpoint: the public Base Sepolia node.
pub(crate) const DEFAULT_RPC_URL: &str = "https://sepolia.base.org";
/// Default time the daemon keeps trying to reach the RPC endpoint at start.
pub(crate) const DEFAULT_STARTUP_RETRY_SECS: u64 = 300;

/// The chain's endpoint and the contracts.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    /// JSON-RPC endpoint of the chain (`RPC_URL`).
    pub rpc_url: RpcUrl,
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
            rpc_url: RpcUrl(settings.text("RPC_URL").unwrap_or_else(|| DEFAULT_RPC_URL.to_owned())),
            registry: settings.address("REGISTRY_ADDRESS")?,
            forwarder: settings.address("FORWARDER_ADDRESS")?,
            startup_retry: settings.secs("STARTUP_RETRY_SECS", DEFAULT_STARTUP_RETRY_SECS)?,
        })
    }
}

/// An RPC endpoint's URL. Hosted nodes put API keys in its path, query or user info, so its
/// `Debug` shows only the scheme, host and port.
#[derive(Clone, PartialEq, Eq)]
pub struct RpcUrl(String);

impl RpcUrl {
    /// The whole URL, to connect to (never to a log).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RpcUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RpcUrl({})", kya_core::redact::url(&self.0))
    }
}
