//! Configuration from the Worker's environment (`wrangler.toml` vars, or `--var` under `wrangler dev`).

use alloy_primitives::Address;
use worker::Env;

use crate::{Error, Result};

/// The public test-network RPC endpoint used when `RPC_URL` is not set (INTERFACE.md section 1).
pub const DEFAULT_RPC_URL: &str = "https://sepolia.base.org";
/// `eth_call`s per JSON-RPC batch when `RPC_BATCH_SIZE` is not set. Public endpoints cap batch
/// sizes (often at 100 to 1,000); a node of our own takes far more.
pub const DEFAULT_BATCH_SIZE: usize = 500;

/// What the Worker reads from its environment on every request (vars are free to read).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The JSON-RPC endpoint.
    pub(crate) rpc_url: String,
    /// `REGISTRY_ADDRESS` as given; checked by [`Config::registry`] so `/health` works without it.
    registry: String,
    /// Largest number of calls in one JSON-RPC batch.
    pub(crate) batch_size: usize,
}

impl Config {
    /// Reads `RPC_URL`, `REGISTRY_ADDRESS` and `RPC_BATCH_SIZE`; empty values count as unset.
    pub(crate) fn from_env(env: &Env) -> Self {
        let var = |name: &str| {
            env.var(name)
                .map(|value| value.to_string().trim().to_owned())
                .ok()
                .filter(|value| !value.is_empty())
        };
        Self {
            rpc_url: var("RPC_URL").unwrap_or_else(|| DEFAULT_RPC_URL.to_owned()),
            registry: var("REGISTRY_ADDRESS").unwrap_or_default(),
            batch_size: var("RPC_BATCH_SIZE")
                .and_then(|size| size.parse().ok())
                .filter(|size| *size > 0)
                .unwrap_or(DEFAULT_BATCH_SIZE),
        }
    }

    /// The registry's address, or the configuration error every `/api/v1` endpoint reports.
    pub(crate) fn registry(&self) -> Result<Address> {
        if self.registry.is_empty() {
            return Err(Error::RegistryNotConfigured);
        }
        self.registry.parse().map_err(|_| {
            Error::BadConfig(format!("REGISTRY_ADDRESS is not a valid address: {}", self.registry))
        })
    }

    /// `REGISTRY_ADDRESS` as configured (for `/health`, which also answers without it).
    pub(crate) fn registry_text(&self) -> &str {
        &self.registry
    }
}
