//! The small typed reader every part of the configuration reads its settings through: each
//! refusal names its variable, and none quotes a secret (only plain values are quoted).

use std::net::IpAddr;

use alloy::primitives::{Address, utils::parse_ether};

use crate::error::{Error, Result};

/// Settings read through a lookup (the environment, or a map in tests).
pub(crate) struct Settings<F> {
    lookup: F,
}

impl<F: Fn(&str) -> Option<String>> Settings<F> {
    pub(crate) fn new(lookup: F) -> Self {
        Self { lookup }
    }

    /// The raw text of `name`, if set.
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
    }

    /// A required contract address.
    pub(crate) fn address(&self, name: &str) -> Result<Address> {
        let value = self.text(name).ok_or_else(|| Error::Config(format!("{name} is not set")))?;
        value.trim().parse().map_err(|_| Error::Config(format!("{name} is not an address: {value:?}")))
    }

    /// A whole number, `default` when unset.
    pub(crate) fn number(&self, name: &str, default: u64) -> Result<u64> {
        self.text(name).map_or(Ok(default), |value| {
            value
                .trim()
                .parse()
                .map_err(|_| Error::Config(format!("{name} is not a whole number: {value:?}")))
        })
    }

    /// Seconds, `default` when unset.
    pub(crate) fn secs(&self, name: &str, default: u64) -> Result<std::time::Duration> {
        self.number(name, default).map(std::time::Duration::from_secs)
    }

    /// An amount of ETH, in wei.
    pub(crate) fn ether(&self, name: &str, default: &str) -> Result<u128> {
        let value = self.text(name).unwrap_or_else(|| default.to_owned());
        parse_ether(value.trim())
            .ok()
            .and_then(|wei| u128::try_from(wei).ok())
            .ok_or_else(|| Error::Config(format!("{name} is not an amount of ETH: {value:?}")))
    }

    /// A whole percent from 1 to 100.
    pub(crate) fn percent(&self, name: &str, default: u64) -> Result<u64> {
        match self.number(name, default)? {
            percent @ 1..=100 => Ok(percent),
            _ => Err(Error::Config(format!("{name} must be a whole percent from 1 to 100"))),
        }
    }

    /// A count that fits a `u32`.
    pub(crate) fn limit(&self, name: &str, default: u32) -> Result<u32> {
        u32::try_from(self.number(name, u64::from(default))?)
            .map_err(|_| Error::Config(format!("{name} is too large")))
    }

    /// An IP address to listen on.
    pub(crate) fn ip(&self, name: &str, default: IpAddr) -> Result<IpAddr> {
        self.text(name)
            .map_or(Ok(default), |host| host.trim().parse())
            .map_err(|_| Error::Config(format!("{name} is not an IP address")))
    }

    /// A TCP port.
    pub(crate) fn port(&self, name: &str, default: u16) -> Result<u16> {
        u16::try_from(self.number(name, u64::from(default))?)
            .map_err(|_| Error::Config(format!("{name} is not a port")))
    }
}
