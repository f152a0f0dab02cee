//! What a relay must pass before it is sent: the per-IP and per-signer rates, the keys' balance,
//! the request's gas and the room its deadline leaves.

use super::reader::Settings;
use crate::error::Result;

/// Default minimum relayer balance in ETH (SPEC.md section 8).
pub(crate) const DEFAULT_MIN_BALANCE: &str = "0.001";
/// Default cap on `request.gas`: far above what any registry write needs, low enough that one
/// request cannot take a large bite of the budget.
pub(crate) const DEFAULT_MAX_REQUEST_GAS: u64 = 1_000_000;
/// Default room a request's deadline must leave after the head block's time, in seconds: 60
/// blocks of Base's 2 s, time to be mined and, if stuck, replaced. Less, and a request can pass
/// every check at the head and revert on inclusion, at the relayer's cost.
pub(crate) const DEFAULT_DEADLINE_MARGIN_SECS: u64 = 120;

/// The checks of `POST /relay` that settings tune.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Requests per IP per hour (`RATE_LIMIT_PER_IP`, default 20).
    pub rate_limit_per_ip: u32,
    /// Requests per signer per hour (`RATE_LIMIT_PER_SIGNER`, default 10).
    pub rate_limit_per_signer: u32,
    /// Minimum wallet balance in wei to relay (`MIN_BALANCE` in ETH, default 0.001).
    pub min_balance_wei: u128,
    /// Largest `request.gas` accepted (`MAX_REQUEST_GAS`, default 1,000,000).
    pub max_request_gas: u64,
    /// Seconds a request's deadline must leave after the head block's time
    /// (`DEADLINE_MARGIN_SECS`, default 120).
    pub deadline_margin_secs: u64,
}

impl RelayConfig {
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Self> {
        Ok(Self {
            rate_limit_per_ip: settings.limit("RATE_LIMIT_PER_IP", 20)?,
            rate_limit_per_signer: settings.limit("RATE_LIMIT_PER_SIGNER", 10)?,
            min_balance_wei: settings.ether("MIN_BALANCE", DEFAULT_MIN_BALANCE)?,
            max_request_gas: settings.number("MAX_REQUEST_GAS", DEFAULT_MAX_REQUEST_GAS)?,
            deadline_margin_secs: settings.number("DEADLINE_MARGIN_SECS", DEFAULT_DEADLINE_MARGIN_SECS)?,
        })
    }
}
