//! The decision a consumer takes from a KYA result (SPEC.md section 4, `/kya/:wallet`).

use serde::Serialize;

/// What an infrastructure provider does with an agent's wallet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub enum KyaDecision {
    /// Registered and compliant: serve the agent.
    #[serde(rename = "provision")]
    Provision,
    /// Registered but not compliant (lapsed attestation, or not Active): ask for a renewal.
    #[serde(rename = "renew attestation")]
    RenewAttestation,
    /// Not registered: refuse, or ask the agent to register.
    #[serde(rename = "deny or register")]
    DenyOrRegister,
}

impl KyaDecision {
    /// The decision for a KYA result's `isRegistered` and `isCompliant`.
    pub const fn of(is_registered: bool, is_compliant: bool) -> Self {
        match (is_registered, is_compliant) {
            (true, true) => Self::Provision,
            (true, false) => Self::RenewAttestation,
            // Compliance without registration cannot happen; refusing is the safe reading.
            (false, _) => Self::DenyOrRegister,
        }
    }

    /// The spec's wording of the decision.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Provision => "provision",
            Self::RenewAttestation => "renew attestation",
            Self::DenyOrRegister => "deny or register",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_specs_intended_use() {
        assert_eq!(KyaDecision::of(true, true), KyaDecision::Provision);
        assert_eq!(KyaDecision::of(true, false), KyaDecision::RenewAttestation);
        assert_eq!(KyaDecision::of(false, false), KyaDecision::DenyOrRegister);
        assert_eq!(KyaDecision::of(false, true), KyaDecision::DenyOrRegister);
        assert_eq!(serde_json::to_value(KyaDecision::RenewAttestation).unwrap(), "renew attestation");
        assert_eq!(KyaDecision::DenyOrRegister.as_str(), "deny or register");
    }
}
