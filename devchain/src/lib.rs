//! `kya-devchain`: a local Base-Sepolia-like chain for development and tests.
//!
//! [`Anvil`] starts a real anvil node (chain id 84532) and stops it when dropped; [`Chain`] sends
//! transactions and reads revert reasons; [`deploy`] puts the forwarder and the registry on it;
//! [`seed`] fills the registry with deterministic demo data (and bulk data for benchmarks);
//! [`envfile`] writes what the edge API, the relayer and the tests need to find it all.

mod anvil;
mod chain;
pub mod deploy;
pub mod dev_accounts;
pub mod envfile;
pub mod seed;

pub use anvil::{Anvil, AnvilOptions};
pub use chain::{Chain, GAS_MARGIN_PERCENT, TxError};
pub use deploy::Deployment;
