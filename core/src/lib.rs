#![doc = include_str!("../README.md")]

pub mod api;
#[cfg(feature = "browser")]
pub mod browser;
pub mod chain;
pub mod ecdsa;
pub mod erc8128;
mod error;
pub mod feed;
pub mod index;
pub mod pass;
pub mod registry;
pub mod snapshot;
pub mod standard_webhooks;
#[cfg(test)]
mod test_support;

pub use api::kya::{KyaAgent, KyaBatch, KyaDecision, KyaResult};
pub use error::{Error, Result};
pub use registry::amount::Cents;
pub use registry::badge::ComplianceBadge;
pub use registry::compliance::{Compliance, DEFAULT_GRACE_PERIOD_SECS, StandingClock};
pub use registry::record::{Agent, Revenue};
pub use registry::status::AgentStatus;
pub use snapshot::answers::SnapshotAnswers;
pub use snapshot::{BlockRef, Snapshot};
