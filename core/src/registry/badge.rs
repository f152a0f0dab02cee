//! The one-word compliance badge of an agent (`compliant`, `lapsed`, or its status), as the
//! explorer shows it: one rule for pages, the API's tests and Rust users.

use core::fmt;

use serde::{Deserialize, Serialize};

use crate::{AgentStatus, Compliance};

/// What a badge says about an agent at a given time. Only an Active agent can be compliant; an
/// Active one whose attestation is older than the registry's grace period at that time has
/// lapsed; any other agent is named by its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "lowercase")]
pub enum ComplianceBadge {
    /// Active and attested within the grace period.
    Compliant,
    /// Active, but the last attestation is too old (or there never was one).
    Lapsed,
    /// Paused by a regulator.
    Suspended,
    /// Permanently removed by a regulator.
    Revoked,
    /// Permanently ended by the agent's own side.
    Terminated,
}

impl ComplianceBadge {
    /// Every badge, the compliant one first.
    pub const ALL: [Self; 5] =
        [Self::Compliant, Self::Lapsed, Self::Suspended, Self::Revoked, Self::Terminated];

    /// The badge of an agent with this compliance object.
    pub const fn of(compliance: &Compliance) -> Self {
        match compliance.status {
            AgentStatus::Active if compliance.attestation_current => Self::Compliant,
            AgentStatus::Active => Self::Lapsed,
            AgentStatus::Suspended => Self::Suspended,
            AgentStatus::Revoked => Self::Revoked,
            AgentStatus::Terminated => Self::Terminated,
        }
    }

    /// The badge's word, as in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Compliant => "compliant",
            Self::Lapsed => "lapsed",
            Self::Suspended => "suspended",
            Self::Revoked => "revoked",
            Self::Terminated => "terminated",
        }
    }
}

impl fmt::Display for ComplianceBadge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_GRACE_PERIOD_SECS as WEEK, StandingClock};
    use proptest::prelude::*;

    const ATTESTED: u64 = 1_700_000_000;

    fn badge(status: AgentStatus, age: u64) -> ComplianceBadge {
        ComplianceBadge::of(&Compliance::at(status, ATTESTED, 0, StandingClock::new(ATTESTED + age, WEEK)))
    }

    #[test]
    fn active_agents_are_compliant_until_the_attestation_lapses() {
        assert_eq!(badge(AgentStatus::Active, 0), ComplianceBadge::Compliant);
        assert_eq!(badge(AgentStatus::Active, WEEK), ComplianceBadge::Compliant);
        assert_eq!(badge(AgentStatus::Active, WEEK + 1), ComplianceBadge::Lapsed);
        // Never attested (0 on chain): lapsed from the first second of the chain on.
        let never = Compliance::at(AgentStatus::Active, 0, 0, StandingClock::new(ATTESTED, WEEK));
        assert_eq!(ComplianceBadge::of(&never), ComplianceBadge::Lapsed);
    }

    #[test]
    fn other_agents_are_named_by_their_status_whatever_their_attestation() {
        for age in [0, WEEK + 1] {
            assert_eq!(badge(AgentStatus::Suspended, age), ComplianceBadge::Suspended);
            assert_eq!(badge(AgentStatus::Revoked, age), ComplianceBadge::Revoked);
            assert_eq!(badge(AgentStatus::Terminated, age), ComplianceBadge::Terminated);
        }
    }

    #[test]
    fn words_are_the_lowercase_names_in_json_and_text() {
        let words: Vec<String> = ComplianceBadge::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(words, ["compliant", "lapsed", "suspended", "revoked", "terminated"]);
        for badge in ComplianceBadge::ALL {
            let json = serde_json::to_value(badge).unwrap();
            assert_eq!(json, badge.as_str());
            assert_eq!(serde_json::from_value::<ComplianceBadge>(json).unwrap(), badge);
        }
    }

    proptest! {
        #[test]
        fn compliant_exactly_when_the_compliance_object_says_so(status in 0u8..4, age in 0u64..1 << 30) {
            let status = AgentStatus::try_from(status).unwrap();
            let compliance = Compliance::at(status, ATTESTED, 0, StandingClock::new(ATTESTED + age, WEEK));
            let badge = ComplianceBadge::of(&compliance);
            prop_assert_eq!(badge == ComplianceBadge::Compliant, compliance.is_compliant());
            if status != AgentStatus::Active {
                prop_assert_eq!(badge.as_str(), status.as_str().to_ascii_lowercase());
            }
        }
    }
}
