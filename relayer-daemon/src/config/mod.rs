//! Configuration from the environment (INTERFACE.md section 3), with SPEC.md's limits as
//! defaults: one part per subsystem, each read through the typed [`reader::Settings`] and
//! building its own policy values ([`FollowerConfig::stuck_policy`], [`BudgetConfig::limits`]).
//!
//! Secrets sit in newtypes whose `Debug` redacts them ([`RedactedUrl`], [`Signers`],
//! [`WebhookSecret`], the store's `DatabaseUrl`), so every `Debug` here is derived: a setting
//! added later shows in the start-up log without a hand-written formatter to forget.

mod budget;
mod chain;
mod followers;
mod keys;
mod reader;
mod redacted;
mod relay;
mod server;
mod store;
#[cfg(test)]
mod tests;
mod webhook;

pub use budget::BudgetConfig;
pub use chain::ChainConfig;
pub use followers::FollowerConfig;
pub use keys::{KeyConfig, Signers};
pub use redacted::RedactedUrl;
pub use relay::RelayConfig;
pub use server::ServerConfig;
pub use store::StoreConfig;
pub use webhook::{WebhookConfig, WebhookSecret};

use crate::error::Result;

/// Everything the relayer needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The chain's endpoint and the contracts.
    pub chain: ChainConfig,
    /// The keys, and this daemon's name and leases in a cluster.
    pub keys: KeyConfig,
    /// The listeners and the read limit.
    pub server: ServerConfig,
    /// The checks of `POST /relay` that settings tune.
    pub relay: RelayConfig,
    /// The gas budget, its shares and its slices.
    pub budget: BudgetConfig,
    /// Stuck relays and the reconciler.
    pub followers: FollowerConfig,
    /// Where the store is and what it keeps.
    pub store: StoreConfig,
    /// Where and how relay events are delivered (`WEBHOOK_URL` and `WEBHOOK_SECRET`); `None`:
    /// no webhooks.
    pub webhook: Option<WebhookConfig>,
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
    }

    /// Reads settings through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let settings = reader::Settings::new(lookup);
        Ok(Self {
            chain: ChainConfig::read(&settings)?,
            keys: KeyConfig::read(&settings)?,
            server: ServerConfig::read(&settings)?,
            relay: RelayConfig::read(&settings)?,
            budget: BudgetConfig::read(&settings)?,
            followers: FollowerConfig::read(&settings)?,
            store: StoreConfig::read(&settings)?,
            webhook: WebhookConfig::read(&settings)?,
        })
    }
}
