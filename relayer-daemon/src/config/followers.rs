//! What follows a relay once it is sent: when it counts as stuck and how its fees rise (the
//! [`Policy`] this part builds), and the reconciler's pace.

use super::reader::Settings;
use crate::{
    error::{Error, Result},
    rules::stuck::{MIN_BUMP_PERCENT, Policy},
};

/// Default pause between two passes of the reconciler over unfinished relays.
pub(crate) const DEFAULT_RECONCILE_INTERVAL_SECS: u64 = 30;
/// Default age below which the reconciler leaves an unfinished relay alone: long enough for a
/// sent transaction to reach every node behind a load-balanced RPC endpoint and be mined.
pub(crate) const DEFAULT_RECONCILE_GRACE_SECS: u64 = 120;
/// Default number of blocks a sent relay may wait before it is replaced (Base: 2 s blocks).
pub(crate) const DEFAULT_STUCK_AFTER_BLOCKS: u64 = 15;
/// Default seconds a sent relay may wait before it is replaced, should blocks stall.
pub(crate) const DEFAULT_STUCK_AFTER_SECS: u64 = 60;
/// Default fee rise per replacement, in percent (nodes require at least 10).
pub(crate) const DEFAULT_FEE_BUMP_PERCENT: u64 = 20;
/// Default cap on a replacement's max fee per gas: 50 gwei, far above Base's usual fees.
pub(crate) const DEFAULT_MAX_FEE_PER_GAS_WEI: u64 = 50_000_000_000;
/// Default cap on a cancellation's max fee per gas: twice the relay cap, so a cancellation can
/// still outbid (by the nodes' 10%) a relay stuck at the cap.
pub(crate) const DEFAULT_MAX_CANCEL_FEE_PER_GAS_WEI: u64 = 2 * DEFAULT_MAX_FEE_PER_GAS_WEI;

/// Stuck relays and the reconciler.
#[derive(Debug, Clone)]
pub struct FollowerConfig {
    /// Pause between reconciler passes (`RECONCILE_INTERVAL_SECS`, default 30, at least 1).
    pub reconcile_interval: std::time::Duration,
    /// Age before the reconciler looks at an unfinished relay (`RECONCILE_GRACE_SECS`,
    /// default 120).
    pub reconcile_grace_secs: u64,
    /// Blocks a sent relay may wait before it is replaced (`STUCK_AFTER_BLOCKS`, default 15).
    pub stuck_after_blocks: u64,
    /// Seconds a sent relay may wait before it is replaced (`STUCK_AFTER_SECS`, default 60).
    pub stuck_after_secs: u64,
    /// Fee rise per replacement in percent (`FEE_BUMP_PERCENT`, default 20, at least 10).
    pub fee_bump_percent: u64,
    /// Highest max fee per gas of a replacement, in wei (`MAX_FEE_PER_GAS_WEI`, default 50 gwei);
    /// a relay stuck at it is cancelled.
    pub max_fee_per_gas_wei: u128,
    /// Highest max fee per gas of a cancellation, in wei (`MAX_CANCEL_FEE_PER_GAS_WEI`, default
    /// 100 gwei).
    pub max_cancel_fee_per_gas_wei: u128,
}

impl FollowerConfig {
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Self> {
        Ok(Self {
            reconcile_interval: std::time::Duration::from_secs(
                settings.number("RECONCILE_INTERVAL_SECS", DEFAULT_RECONCILE_INTERVAL_SECS)?.max(1),
            ),
            reconcile_grace_secs: settings.number("RECONCILE_GRACE_SECS", DEFAULT_RECONCILE_GRACE_SECS)?,
            stuck_after_blocks: settings.number("STUCK_AFTER_BLOCKS", DEFAULT_STUCK_AFTER_BLOCKS)?.max(1),
            stuck_after_secs: settings.number("STUCK_AFTER_SECS", DEFAULT_STUCK_AFTER_SECS)?.max(1),
            fee_bump_percent: match settings.number("FEE_BUMP_PERCENT", DEFAULT_FEE_BUMP_PERCENT)? {
                percent if percent < MIN_BUMP_PERCENT => {
                    return Err(Error::Config(format!(
                        "FEE_BUMP_PERCENT must be at least {MIN_BUMP_PERCENT}: nodes refuse smaller replacements"
                    )));
                }
                percent => percent,
            },
            max_fee_per_gas_wei: u128::from(
                settings.number("MAX_FEE_PER_GAS_WEI", DEFAULT_MAX_FEE_PER_GAS_WEI)?,
            ),
            max_cancel_fee_per_gas_wei: u128::from(
                settings.number("MAX_CANCEL_FEE_PER_GAS_WEI", DEFAULT_MAX_CANCEL_FEE_PER_GAS_WEI)?,
            ),
        })
    }

    /// When a sent relay is stuck, and what its replacements and cancellation may pay.
    pub(crate) fn stuck_policy(&self) -> Policy {
        Policy {
            after_blocks: self.stuck_after_blocks,
            after_secs: self.stuck_after_secs,
            bump_percent: self.fee_bump_percent,
            max_fee_wei: self.max_fee_per_gas_wei,
            max_cancel_fee_wei: self.max_cancel_fee_per_gas_wei,
        }
    }
}
