//! `kya-client`: a typed async client of the KYA read API and the gasless relayer, built on
//! `kya-core`'s types, and (feature `cli`, on by default) the `kya` command line.
//!
//! - [`ApiClient`]: the read API (KYA checks, agents, lineage, pages, statistics).
//! - [`RelayerClient`]: the relayer (status, nonce, domain, submit, relay lookups).
//! - [`relay_write`]: a registry write in one call, signed by any alloy [`Signer`]
//!   (calldata → nonce → domain → EIP-712 signature → `POST /relay` → followed until it settles);
//!   [`direct_write`] sends it from the signer's own gas instead.
//! - [`Write`]: the writes and their calldata; [`constitution_hash`], [`capability_hash`] and
//!   [`cents`] derive their inputs.
//! - [`ChainPreset`]: chain ids, public RPCs and known deployments.
//!
//! [`Signer`]: alloy::signers::Signer

mod api;
mod chain;
mod checksum;
#[cfg(feature = "cli")]
pub mod cli;
mod error;
mod flow;
mod http;
mod outcome;
mod preset;
mod relayer;
mod write;

pub use api::{
    AgentDetails, AgentListItem, AgentPage, AgentRecord, ApiClient, DetailedStats, KyaAgent, KyaCheck,
    LineageNode, MAX_PAGE_SIZE, RecentRegistration,
};
pub use chain::Rpc;
pub use error::{Error, Result};
pub use flow::{Progress, SignedRequest, WriteOptions, direct_write, relay_write, sign_request};
pub use outcome::{Outcome, RegistryResult};
pub use preset::{ChainPreset, PresetSettings};
pub use relayer::{
    Contracts, Domain, GasBudget, RelayStatus, RelayView, RelayerClient, RelayerStatus, Submitted,
};
pub use write::{Registration, RevenueReport, Write, capability_hash, cents, constitution_hash};
