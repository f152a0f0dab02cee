#![doc = include_str!("../README.md")]

// Leaves first: pure rules, then what performs I/O (the chain, the store, the keys), the
// pipeline that uses them, and the HTTP surface on top.
mod chain;
mod concurrency;
mod config;
mod error;
mod http;
mod keys;
mod relayer;
mod rules;
mod store;
mod time;

pub use config::{
    BudgetConfig, ChainConfig, Config, FollowerConfig, KeyConfig, RedactedUrl, RelayConfig, ServerConfig,
    Signers, StoreConfig, WebhookConfig, WebhookSecret,
};
pub use error::{Error, Result};
pub use http::{openapi, server};
pub use relayer::Relayer;
pub use relayer::checks::l1_fee::L1_FEE_HEADROOM;
pub use relayer::checks::pipeline::GAS_MARGIN_PERCENT;
pub use relayer::relayed::Relayed;
pub use rules::{pacing::Pacing, request::RelayBody};
pub use store::{
    BUDGET_WINDOW_SECS, BudgetLimits, BudgetState, DatabaseTimeouts, DatabaseUrl, DueEvent, LaneHolder,
    Lease, Location, NewRelay, OutboxEvent, Outcome, Pruned, RATE_WINDOW_SECS, RateKind, Refusal,
    RelayRecord, RelayStatus, ReplaceRefusal, Replacement, Reservation, Sending, SentTx, Settlement,
    SignerCount, Store, Taking, TxKind,
};
