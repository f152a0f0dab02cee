//! `kya-relayer`: the gasless relayer. It checks EIP-712 forward requests signed by agents
//! (SPEC.md sections 4, 5, 7 and 8; INTERFACE.md section 3) and sends them to the registry
//! through the forwarder, paying the gas from its own wallet within a daily budget.
//!
//! - [`Config`]: settings from the environment, the key included (never printed).
//! - [`Relayer`]: the relay pipeline and the queries; [`server::run`] serves them over HTTP.
//! - [`Store`]: budget, rate windows and relay records in SQLite, so they survive restarts.

mod chain;
mod config;
mod error;
mod metrics;
mod read_limit;
mod reconcile;
mod relayer;
mod request;
mod sender;
pub mod server;
mod store;
mod tasks;
mod time;

pub use config::Config;
pub use error::{Error, Result};
pub use relayer::{GAS_MARGIN_PERCENT, Relayer};
pub use request::RelayBody;
pub use store::{
    BUDGET_WINDOW_SECS, BudgetState, NewRelay, RATE_WINDOW_SECS, RateKind, RelayRecord, SignerCount, Store,
};
