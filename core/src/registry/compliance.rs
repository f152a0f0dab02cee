//! The compliance object of an agent at a given time (the pinned block's timestamp), judged by
//! the registry's `attestationGracePeriod` at that block.

use serde::{Deserialize, Serialize};

use crate::{Agent, AgentStatus};

/// The registry's `attestationGracePeriod` when it is deployed (SPEC.md section 8: 7 days). The
/// owner may change it (`setAttestationGracePeriod`), so no answer derives compliance from this
/// value: they read the parameter at the block they name ([`StandingClock`]). It is the
/// contract's initial value, and the grace an index state from before the parameter was read
/// had counted with.
pub const DEFAULT_GRACE_PERIOD_SECS: u64 = 7 * 24 * 60 * 60;

/// What standing is judged by at one block: the block's time, and the registry's
/// `attestationGracePeriod()` read at that same block. An attestation is current while it is at
/// most `grace_period` seconds old, as the registry's `complianceStatus` and
/// `isRegisteredAndCompliant` count it (`block.timestamp - lastAttestation <= grace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct StandingClock {
    /// Unix seconds: the block's timestamp.
    pub time: u64,
    /// Seconds; a `uint256` on chain, saturated at `u64::MAX` (every attestation current).
    pub grace_period: u64,
}

impl StandingClock {
    pub const fn new(time: u64, grace_period: u64) -> Self {
        Self { time, grace_period }
    }

    /// The same grace period at another time.
    pub const fn at(self, time: u64) -> Self {
        Self { time, ..self }
    }

    /// Whether an attestation made at `last_attestation` is current. One "in the future" (a
    /// clock behind the chain's) counts as 0 seconds old.
    pub const fn attestation_current(&self, last_attestation: u64) -> bool {
        self.time.saturating_sub(last_attestation) <= self.grace_period
    }

    /// The lowest `lastAttestation` that is current: the attestations at or above it are.
    pub const fn current_from(&self) -> u64 {
        self.time.saturating_sub(self.grace_period)
    }

    /// The last second an attestation made at `last_attestation` is current.
    pub const fn valid_until(&self, last_attestation: u64) -> u64 {
        last_attestation.saturating_add(self.grace_period)
    }
}

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
    /// The compliance of `agent` at `clock`; `child_count` is its direct children.
    pub fn of(agent: &Agent, child_count: u64, clock: StandingClock) -> Self {
        Self::at(agent.status, agent.last_attestation, child_count, clock)
    }

    /// The compliance of an agent known only by its status and last attestation (Unix seconds),
    /// as a browser holding an API record knows it.
    pub fn at(status: AgentStatus, last_attestation: u64, child_count: u64, clock: StandingClock) -> Self {
        Self {
            is_active: status == AgentStatus::Active,
            attestation_current: clock.attestation_current(last_attestation),
            seconds_since_attestation: clock.time.saturating_sub(last_attestation),
            child_count,
            status,
        }
    }

    /// Compliant: Active and attested within the grace period.
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

    const WEEK: u64 = DEFAULT_GRACE_PERIOD_SECS;

    #[test]
    fn boundary_is_inclusive() {
        let attested = 1_000_000;
        let at = Compliance::of(
            &agent(AgentStatus::Active, attested),
            2,
            StandingClock::new(attested + WEEK, WEEK),
        );
        assert!(at.attestation_current && at.is_compliant());
        assert_eq!(at.seconds_since_attestation, WEEK);
        assert_eq!(at.child_count, 2);
        let past = Compliance::of(
            &agent(AgentStatus::Active, attested),
            0,
            StandingClock::new(attested + WEEK + 1, WEEK),
        );
        assert!(!past.attestation_current && !past.is_compliant());
    }

    #[test]
    fn the_grace_period_is_the_registrys_not_a_week() {
        // The scenario of issue 63: the owner shortens the grace to 120 s, 300 s pass.
        let attested = 1_000_000;
        let shortened = StandingClock::new(attested + 300, 120);
        let compliance = Compliance::of(&agent(AgentStatus::Active, attested), 0, shortened);
        assert!(!compliance.attestation_current && !compliance.is_compliant());
        assert_eq!(compliance.seconds_since_attestation, 300);
        assert_eq!(shortened.valid_until(attested), attested + 120);
        assert_eq!(shortened.current_from(), attested + 180);
        // Lengthened past the age: current again.
        let lengthened = StandingClock::new(attested + WEEK * 2, WEEK * 3);
        assert!(Compliance::of(&agent(AgentStatus::Active, attested), 0, lengthened).is_compliant());
        // A grace of 0 keeps an attestation current for its own second only; one saturated at
        // u64::MAX (a uint256 the owner set past it) keeps every attestation current.
        assert!(StandingClock::new(attested, 0).attestation_current(attested));
        assert!(!StandingClock::new(attested + 1, 0).attestation_current(attested));
        assert!(StandingClock::new(u64::MAX, u64::MAX).attestation_current(0));
        assert_eq!(StandingClock::new(5, u64::MAX).valid_until(attested), u64::MAX);
    }

    proptest! {
        #[test]
        fn compliant_iff_active_and_within_the_grace(
            status in 0u8..4, attested in 0u64..1 << 40, age in 0u64..1 << 30, grace in 0u64..1 << 30,
        ) {
            let status = AgentStatus::try_from(status).unwrap();
            let clock = StandingClock::new(attested + age, grace);
            let compliance = Compliance::of(&agent(status, attested), 0, clock);
            prop_assert_eq!(compliance.seconds_since_attestation, age);
            prop_assert_eq!(compliance.is_compliant(), status == AgentStatus::Active && age <= grace);
            prop_assert_eq!(compliance.attestation_current, attested >= clock.current_from());
            prop_assert_eq!(compliance.attestation_current, clock.time <= clock.valid_until(attested));
        }
    }
}
