//! The compliance object of an agent at a given time (the pinned block's timestamp).

use serde::{Deserialize, Serialize};

use crate::{Agent, AgentStatus};

/// An attestation is current while it is at most this old (SPEC.md section 8: 7 days).
pub const ATTESTATION_VALIDITY_SECS: u64 = 7 * 24 * 60 * 60;

/// SPEC.md section 2's compliance object (read back from the API's JSON too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct Compliance {
    pub is_active: bool,
    pub attestation_current: bool,
    pub seconds_since_attestation: u64,
    pub child_count: u64,
    pub status: AgentStatus,
}

impl Compliance {
    /// The compliance of `agent` at `now` (Unix seconds); `child_count` is its direct children.
    /// An attestation "in the future" (a clock behind the chain's) counts as 0 seconds old.
    pub fn of(agent: &Agent, child_count: u64, now: u64) -> Self {
        Self::at(agent.status, agent.last_attestation, child_count, now)
    }

    /// The compliance of an agent known only by its status and last attestation (Unix seconds),
    /// as a browser holding an API record knows it.
    pub fn at(status: AgentStatus, last_attestation: u64, child_count: u64, now: u64) -> Self {
        let seconds_since_attestation = now.saturating_sub(last_attestation);
        Self {
            is_active: status == AgentStatus::Active,
            attestation_current: seconds_since_attestation <= ATTESTATION_VALIDITY_SECS,
            seconds_since_attestation,
            child_count,
            status,
        }
    }

    /// Compliant: Active and attested within the validity period.
    pub const fn is_compliant(&self) -> bool {
        self.is_active && self.attestation_current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn agent(status: AgentStatus, last_attestation: u64) -> Agent {
        crate::test_support::sample_agent(1, status, last_attestation, last_attestation)
    }

    #[test]
    fn boundary_is_inclusive() {
        let attested = 1_000_000;
        let at =
            Compliance::of(&agent(AgentStatus::Active, attested), 2, attested + ATTESTATION_VALIDITY_SECS);
        assert!(at.attestation_current && at.is_compliant());
        assert_eq!(at.seconds_since_attestation, ATTESTATION_VALIDITY_SECS);
        assert_eq!(at.child_count, 2);
        let past = Compliance::of(
            &agent(AgentStatus::Active, attested),
            0,
            attested + ATTESTATION_VALIDITY_SECS + 1,
        );
        assert!(!past.attestation_current && !past.is_compliant());
    }

    proptest! {
        #[test]
        fn compliant_iff_active_and_recent(status in 0u8..4, attested in 0u64..1 << 40, age in 0u64..1 << 30) {
            let status = AgentStatus::try_from(status).unwrap();
            let compliance = Compliance::of(&agent(status, attested), 0, attested + age);
            prop_assert_eq!(compliance.seconds_since_attestation, age);
            prop_assert_eq!(
                compliance.is_compliant(),
                status == AgentStatus::Active && age <= ATTESTATION_VALIDITY_SECS
            );
        }
    }
}
