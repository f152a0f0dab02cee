#![doc = include_str!("../README.md")]

mod anvil;
mod chain;
pub mod consent;
pub mod deploy;
pub mod dev_accounts;
pub mod envfile;
pub mod pass_keys;
pub mod seed;

pub use anvil::{Anvil, AnvilOptions};
pub use chain::{Chain, GAS_MARGIN_PERCENT, TxError};
pub use deploy::Deployment;
