#![doc = include_str!("../README.md")]

mod chain;
mod config;
mod error;
mod handoff;
mod l1_fee;
mod lane_rules;
mod lanes;
mod leasing;
mod metrics;
mod nonce;
pub mod openapi;
mod pacing;
mod prefilter;
mod queries;
mod read_limit;
mod reconcile;
mod reference;
mod relay;
mod relayer;
mod request;
mod sender;
pub mod server;
mod settlement;
mod store;
mod stuck;
mod time;
mod transport;
mod webhooks;

pub use config::{
    BudgetConfig, ChainConfig, Config, FollowerConfig, KeyConfig, RelayConfig, RpcUrl, ServerConfig, Signers,
    StoreConfig, WebhookConfig, WebhookSecret, WebhookUrl,
};
pub use error::{Error, Result};
pub use l1_fee::L1_FEE_HEADROOM;
pub use pacing::Pacing;
pub use relay::{GAS_MARGIN_PERCENT, Relayed};
pub use relayer::Relayer;
pub use request::RelayBody;
pub use store::{
    BUDGET_WINDOW_SECS, BudgetLimits, BudgetState, DatabaseTimeouts, DatabaseUrl, DueEvent, LaneHolder,
    Lease, Location, NewRelay, OutboxEvent, Outcome, Pruned, RATE_WINDOW_SECS, RateKind, Refusal,
    RelayRecord, RelayStatus, ReplaceRefusal, Replacement, Reservation, Sending, SentTx, Settlement,
    SignerCount, Store, Taking, TxKind,
};
