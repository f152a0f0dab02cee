#![doc = include_str!("../README.md")]

mod api;
mod chain;
#[cfg(feature = "cli")]
pub mod cli;
mod consent;
mod erc8128;
mod error;
mod feed;
mod flow;
mod http;
mod outcome;
mod pass;
mod pass_gate;
mod preset;
mod relayer;
mod stream;
mod write;

pub use api::{ApiClient, MAX_PAGE_SIZE};
pub use chain::Rpc;
pub use consent::{ConsentNonces, ConsentPlan, PlannedConsent, Recovered, sign_consents};
pub use erc8128::{
    ReceivedRequest, RequestSignature, RequestSigner, SignedBy, Verdict, Verifier, fresh_nonce,
};
pub use error::{Error, Result};
pub use feed::ChangeFollower;
pub use flow::{Progress, RELAY_POLL, SignedRequest, WriteOptions, direct_write, relay_write, sign_request};
/// ERC-8128's request, headers and refusals are `kya-core`'s, where signing and verifying are done.
pub use kya_core::erc8128::{Reason, Refusal, RequestToSign, SignedHeaders, content_digest};
/// The read API's answers are `kya-core`'s own types, the ones the Worker serialises: re-exported
/// here so a client needs no direct dependency on `kya-core` to name them.
pub use kya_core::{
    self, AgentStatus, Cents, Compliance, KyaAgent, KyaDecision, KyaResult,
    api::{
        pagination::Page,
        view::{AgentDetails, AgentListItem, AgentView, RecentRegistration},
    },
    registry::lineage::LineageNode,
    snapshot::stats::{DetailedStats, StatusDistribution},
};
pub use kya_native_http::install_crypto_provider;
pub use outcome::{Outcome, RegistryResult};
pub use pass::PassVerifier;
pub use pass_gate::{Admitted, PassGate, Turned};
pub use preset::{ChainPreset, PresetSettings};
pub use relayer::{
    Contracts, Domain, GasBudget, LaneStatus, NonceView, RelayStatus, RelayView, Relayed, RelayerClient,
    RelayerStatus, SentTransaction, Submitted,
};
pub use stream::{ChangeStream, server_sent_events};
pub use write::{
    GAS_PER_CONSENT, Registration, RevenueReport, Write, capability_hash, cents, constitution_hash,
};
