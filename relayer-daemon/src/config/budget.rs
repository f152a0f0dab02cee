//! The gas budget: the day's total, one signer's and one client's shares, and the slices it
//! opens in. Builds the store's [`BudgetLimits`] and the [`Pacing`] the answers quote.

use std::num::NonZeroU64;

use super::reader::Settings;
use crate::{
    error::{Error, Result},
    rules::pacing::Pacing,
    store::{BUDGET_WINDOW_SECS, BudgetLimits},
};

/// Default daily gas budget in ETH (INTERFACE.md section 3).
pub(crate) const DEFAULT_DAILY_GAS_BUDGET: &str = "0.05";
/// Default share of the daily budget one signer may use, in percent.
pub(crate) const DEFAULT_SIGNER_BUDGET_SHARE_PERCENT: u64 = 5;
/// Default share of the daily budget one client (IPv4 address, IPv6 /48) may use, in percent:
/// at least ten clients are needed to close the relayer for the day.
pub(crate) const DEFAULT_CLIENT_BUDGET_SHARE_PERCENT: u64 = 10;
/// Default number of slices a budget window opens in: one an hour of the day, so that a crowd
/// of clients spending their shares at once closes the relayer for the rest of an hour at most.
pub(crate) const DEFAULT_BUDGET_SLICES: u64 = 24;

/// The budget and how it opens.
#[derive(Debug, Clone)]
pub struct BudgetConfig {
    /// Daily gas budget in wei (`DAILY_GAS_BUDGET` in ETH, default 0.05).
    pub daily_gas_budget_wei: u128,
    /// Percent of the daily budget one signer may use (`SIGNER_BUDGET_SHARE_PERCENT`, default 5).
    pub signer_share_percent: u64,
    /// Percent of the daily budget one client may use (`CLIENT_BUDGET_SHARE_PERCENT`, default 10).
    pub client_share_percent: u64,
    /// Equal slices the day's budget opens in, unspent ones carried over (`BUDGET_SLICES`,
    /// default 24, at least 1; 1 turns pacing off).
    pub slices: NonZeroU64,
    /// Seconds a budget window lasts after its first use (`BUDGET_WINDOW_SECS`, default 86,400:
    /// SPEC.md's day). Shorter for trials and tests that watch a window or its slices go by.
    pub window_secs: u64,
}

impl BudgetConfig {
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Self> {
        Ok(Self {
            daily_gas_budget_wei: settings.ether("DAILY_GAS_BUDGET", DEFAULT_DAILY_GAS_BUDGET)?,
            signer_share_percent: settings
                .percent("SIGNER_BUDGET_SHARE_PERCENT", DEFAULT_SIGNER_BUDGET_SHARE_PERCENT)?,
            client_share_percent: settings
                .percent("CLIENT_BUDGET_SHARE_PERCENT", DEFAULT_CLIENT_BUDGET_SHARE_PERCENT)?,
            slices: NonZeroU64::new(settings.number("BUDGET_SLICES", DEFAULT_BUDGET_SLICES)?)
                .ok_or_else(|| Error::Config("BUDGET_SLICES must be at least 1 (1: no pacing)".into()))?,
            window_secs: match settings.number("BUDGET_WINDOW_SECS", BUDGET_WINDOW_SECS)? {
                0 => return Err(Error::Config("BUDGET_WINDOW_SECS must be at least 1".into())),
                secs => secs,
            },
        })
    }

    /// The most one signer may spend in a budget window, in wei.
    pub fn signer_share_wei(&self) -> u128 {
        share(self.daily_gas_budget_wei, self.signer_share_percent)
    }

    /// The most one client may spend in a budget window, in wei.
    pub fn client_share_wei(&self) -> u128 {
        share(self.daily_gas_budget_wei, self.client_share_percent)
    }

    /// The budget and its shares, in wei, and the slices it opens in.
    pub fn limits(&self) -> BudgetLimits {
        BudgetLimits {
            total_wei: self.daily_gas_budget_wei,
            signer_wei: self.signer_share_wei(),
            client_wei: self.client_share_wei(),
            slices: self.slices,
        }
    }

    /// How the budget window opens: its length and its slices.
    pub fn pacing(&self) -> Pacing {
        Pacing { window_secs: self.window_secs, slices: self.slices }
    }
}

/// `percent` of `wei`, rounded down.
pub(super) fn share(wei: u128, percent: u64) -> u128 {
    wei / 100 * u128::from(percent) + wei % 100 * u128::from(percent) / 100
}
