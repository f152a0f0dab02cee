#![doc = include_str!("../README.md")]

pub mod abi;
mod amount;
mod badge;
#[cfg(feature = "browser")]
pub mod browser;
pub mod checksum;
pub mod client_ip;
mod compliance;
pub mod consent;
pub mod erc8128;
mod error;
pub mod feed;
pub mod forward_request;
pub mod index;
pub mod index_plan;
mod kya;
pub mod lineage;
pub mod logs;
pub mod multicall;
pub mod pagination;
pub mod pass;
pub mod query;
pub mod record;
pub mod redact;
pub mod registry_call;
pub mod registry_reverts;
pub mod relayer_view;
pub mod retry;
pub mod revert;
pub mod rpc;
mod snapshot;
mod snapshot_answers;
pub mod standard_webhooks;
pub mod stats;
mod status;
#[cfg(test)]
mod test_support;
pub mod time;
pub mod view;
pub mod window_touches;

pub use amount::Cents;
pub use badge::ComplianceBadge;
pub use compliance::{ATTESTATION_VALIDITY_SECS, Compliance};
pub use error::{Error, Result};
pub use kya::{KyaAgent, KyaBatch, KyaDecision, KyaResult};
pub use record::{Agent, Revenue};
pub use snapshot::{BlockRef, Snapshot};
pub use snapshot_answers::SnapshotAnswers;
pub use status::AgentStatus;
