//! The agent status enum of the registry (`uint8` on chain) and its JSON names.

use core::{fmt, str::FromStr};

use crate::{Error, Result};

/// Lifecycle state of an agent. The discriminants are the on-chain `uint8` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub enum AgentStatus {
    /// May act; the only state in which agent-level writes succeed.
    Active = 0,
    /// Paused by a regulator; the only state that can be reactivated.
    Suspended = 1,
    /// Permanently removed by a regulator.
    Revoked = 2,
    /// Permanently ended by the agent's own side.
    Terminated = 3,
}

impl AgentStatus {
    /// All states, in on-chain order.
    pub const ALL: [Self; 4] = [Self::Active, Self::Suspended, Self::Revoked, Self::Terminated];

    /// The name used in JSON responses and query parameters.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "Active",
            Self::Suspended => "Suspended",
            Self::Revoked => "Revoked",
            Self::Terminated => "Terminated",
        }
    }
}

impl TryFrom<u8> for AgentStatus {
    type Error = Error;

    fn try_from(value: u8) -> Result<Self> {
        Self::ALL.get(usize::from(value)).copied().ok_or(Error::UnknownStatus(value))
    }
}

impl FromStr for AgentStatus {
    type Err = Error;

    /// Exact, case-sensitive names: the spec lists them capitalised.
    fn from_str(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == name)
            .ok_or_else(|| Error::InvalidStatusName(name.to_owned()))
    }
}

impl fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for AgentStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Parsed by name, so cached snapshots (JSON) read back what [`serde::Serialize`] wrote. Owned,
/// not borrowed: deserializers that cannot lend a `&str` (JavaScript values) read it too.
impl<'de> serde::Deserialize<'de> for AgentStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_and_name_round_trip() {
        for (byte, status) in AgentStatus::ALL.into_iter().enumerate() {
            let byte = u8::try_from(byte).unwrap();
            assert_eq!(AgentStatus::try_from(byte), Ok(status));
            assert_eq!(status as u8, byte);
            assert_eq!(status.as_str().parse::<AgentStatus>(), Ok(status));
        }
        assert_eq!(AgentStatus::try_from(4), Err(Error::UnknownStatus(4)));
        assert!(matches!("active".parse::<AgentStatus>(), Err(Error::InvalidStatusName(_))));
    }
}
