//! Chain presets: the chain id, a public RPC endpoint and, where we know them, the contracts
//! and services of a deployment.

use core::{fmt, str::FromStr};

use alloy::primitives::{Address, address};

use crate::Error;

/// A known chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainPreset {
    /// Base Sepolia, where the public registry runs (INTERFACE.md section 1).
    BaseSepolia,
    /// Base mainnet: no public registry yet, so its address must be given.
    Base,
    /// The local system of `scripts/up.sh` (anvil with chain id 84532, the API on port 3000, the
    /// relayer on 3001); contracts from `.devchain/env`.
    Localhost,
}

/// What a preset fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresetSettings {
    pub chain_id: u64,
    pub rpc_url: &'static str,
    pub registry: Option<Address>,
    pub forwarder: Option<Address>,
    pub api_url: Option<&'static str>,
    pub relayer_url: Option<&'static str>,
}

impl ChainPreset {
    /// Every preset, in the order `--help` lists them.
    pub const ALL: [Self; 3] = [Self::BaseSepolia, Self::Base, Self::Localhost];

    /// The name used by `--chain` and `REGISTRY_CHAIN`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::BaseSepolia => "base_sepolia",
            Self::Base => "base",
            Self::Localhost => "localhost",
        }
    }

    /// The preset's settings.
    pub const fn settings(self) -> PresetSettings {
        match self {
            Self::BaseSepolia => PresetSettings {
                chain_id: 84532,
                rpc_url: "https://sepolia.base.org",
                registry: Some(address!("0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23")),
                forwarder: Some(address!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5")),
                api_url: None,
                relayer_url: None,
            },
            Self::Base => PresetSettings {
                chain_id: 8453,
                rpc_url: "https://mainnet.base.org",
                registry: None,
                forwarder: None,
                api_url: None,
                relayer_url: None,
            },
            Self::Localhost => PresetSettings {
                chain_id: 84532,
                rpc_url: "http://127.0.0.1:8545",
                registry: None,
                forwarder: None,
                api_url: Some("http://127.0.0.1:3000"),
                relayer_url: Some("http://127.0.0.1:3001"),
            },
        }
    }
}

impl FromStr for ChainPreset {
    type Err = Error;

    /// The names, also with `-` for `_` (`base-sepolia`).
    fn from_str(name: &str) -> Result<Self, Error> {
        let wanted = name.trim().replace('-', "_");
        Self::ALL.into_iter().find(|preset| preset.name() == wanted).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|preset| preset.name()).collect();
            Error::Invalid(format!("unknown chain {name:?}: one of {}", names.join(", ")))
        })
    }
}

impl fmt::Display for ChainPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for preset in ChainPreset::ALL {
            assert_eq!(preset.name().parse::<ChainPreset>().unwrap(), preset);
        }
        assert_eq!("base-sepolia".parse::<ChainPreset>().unwrap(), ChainPreset::BaseSepolia);
        let error = "mainnet".parse::<ChainPreset>().unwrap_err().to_string();
        assert_eq!(error, r#"unknown chain "mainnet": one of base_sepolia, base, localhost"#);
    }

    #[test]
    fn base_sepolia_is_the_public_deployment() {
        let settings = ChainPreset::BaseSepolia.settings();
        assert_eq!(settings.chain_id, kya_core::registry::forward_request::BASE_SEPOLIA_CHAIN_ID);
        assert_eq!(settings.registry, Some(address!("0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23")));
    }
}
