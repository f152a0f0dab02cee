#![doc = include_str!("../README.md")]

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
