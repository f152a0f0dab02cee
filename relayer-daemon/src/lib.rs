//! `kya-relayer`: the gasless relayer. It checks EIP-712 forward requests signed by agents
//! (SPEC.md sections 4, 5, 7 and 8; INTERFACE.md section 3) and sends them to the registry
//! through the forwarder, paying the gas from its own wallet within a daily budget.
//!
//! - [`Config`]: settings from the environment, the key included (never printed).
//! - [`Relayer`]: state and lifecycle; its stages are `relay` (the `POST /relay` checks),
//!   `settlement` (receipts, stuck transactions replaced or cancelled, the reconciler) and
//!   `queries` (the read endpoints and relay lookups); [`server::run`] serves them over HTTP.
//! - Pure parts with no I/O: `nonce` (the account nonce's state machine), `stuck` (when and
//!   how a stuck transaction is sent again), `reconcile` (how an unfinished relay ends).
//! - [`Store`]: budget, rate windows and relay records in SQLite, so they survive restarts.

mod chain;
mod config;
mod error;
mod metrics;
mod nonce;
mod queries;
mod read_limit;
mod reconcile;
mod relay;
mod relayer;
mod request;
mod sender;
pub mod server;
mod settlement;
mod store;
mod stuck;
mod time;

pub use config::Config;
pub use error::{Error, Result};
pub use relay::{GAS_MARGIN_PERCENT, Relayed};
pub use relayer::Relayer;
pub use request::RelayBody;
pub use store::{
    BUDGET_WINDOW_SECS, BudgetState, NewRelay, Outcome, RATE_WINDOW_SECS, RateKind, Refusal, RelayRecord,
    RelayStatus, Replacement, Reservation, SentTx, Settlement, SignerCount, Store, TxKind,
};
