//! The changes of one agent over a run of the index, derived from the registry's logs in block
//! order, from time, and from the record the run read at its last block.
//!
//! The index reads a touched agent once, at the run's last block, so its rows show only where
//! the agent ended. The feed must show each write, in order, with the standing it left: an agent
//! suspended and reactivated within one run is two `agent.status_changed`. So a [`Walk`] starts
//! from what the index held before the run ([`Known`]), applies each log as the registry's rules
//! do (its kind says the new status; an attestation names its time; a registration is an Active
//! agent attested at its block's time), and notices on the way each moment an attestation
//! lapses. At the end ([`Walk::settle`]) it compares where the logs led with the record read: a
//! registry whose logs and records disagree (the registry deployed has no such path, but the
//! index follows what it is given) gets a correction, so the feed's last standing is always the
//! index's answer.
//!
//! Over 500 lines with its tests: the code is 275 lines; its tests and its property test make
//! up the rest.

use alloy_primitives::Address;

use crate::{
    Agent, AgentStatus, StandingClock,
    feed::{Change, Detail, EventBlock, EventLog, EventType, Standing},
};

/// What an agent's log says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// `AgentRegistered`, with its `agentWallet` topic.
    Registered {
        wallet: Address,
    },
    /// `ComplianceAttested`, with its `attestedAt`.
    Attested {
        at: u64,
    },
    RevenueReported,
    Suspended,
    Reactivated,
    Revoked,
    Terminated,
}

/// A registry log that changes an agent, with its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLog {
    pub agent_id: u64,
    pub block: EventBlock,
    pub log: EventLog,
    pub kind: LogKind,
}

/// What the feed knows of an agent between changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    pub wallet: Address,
    pub status: AgentStatus,
    pub last_attestation: u64,
}

impl Known {
    /// What a record says.
    pub const fn of(agent: &Agent) -> Self {
        Self { wallet: agent.agent_wallet, status: agent.status, last_attestation: agent.last_attestation }
    }

    /// Whether the attestation is current at `clock` (as [`crate::Compliance`] counts it).
    pub(crate) const fn attestation_current(&self, clock: StandingClock) -> bool {
        clock.attestation_current(self.last_attestation)
    }

    pub(crate) const fn standing(&self, clock: StandingClock) -> Standing {
        // Terminating frees the wallet on chain (`walletToAgent` is deleted): `/kya` finds no
        // agent for it, as for a wallet never registered.
        if matches!(self.status, AgentStatus::Terminated) {
            return Standing::UNREGISTERED;
        }
        Standing {
            is_registered: true,
            is_compliant: matches!(self.status, AgentStatus::Active) && self.attestation_current(clock),
            status: Some(self.status),
        }
    }
}

impl Standing {
    /// The standing `agent`'s record gives at `clock`, as `/kya/<wallet>` answers it.
    pub const fn of(agent: &Agent, clock: StandingClock) -> Self {
        Known::of(agent).standing(clock)
    }
}

/// One agent's way through a run: feed it the agent's logs in order, then [`Walk::settle`].
#[derive(Debug, Clone)]
pub struct Walk {
    agent_id: u64,
    known: Option<Known>,
    /// The standing last shown (or held before the run).
    standing: Standing,
    /// Whether the attestation was current when last looked at: an expiry is sent once.
    attestation_current: bool,
    /// The registry's grace period the walk judges every block by: the run's block's.
    grace_period: u64,
    changes: Vec<Change>,
}

impl Walk {
    /// Starts from what the index held before the run (`None`: no such agent), as the feed
    /// showed it at `shown_at` (the index's block then: its time and grace period), and judges
    /// what follows by `grace_period`, the registry's at the run's block. A grace the owner
    /// changed in between moves the agent's standing as time does: a shortened one lapses its
    /// attestation at the walk's first block, a lengthened one renews it.
    pub fn new(agent_id: u64, known: Option<Known>, shown_at: StandingClock, grace_period: u64) -> Self {
        let (standing, attestation_current) = match &known {
            Some(known) => (known.standing(shown_at), known.attestation_current(shown_at)),
            None => (Standing::UNREGISTERED, false),
        };
        Self { agent_id, known, standing, attestation_current, grace_period, changes: Vec::new() }
    }

    /// What the walk judges a block of time `time` by.
    const fn clock(&self, time: u64) -> StandingClock {
        StandingClock::new(time, self.grace_period)
    }

    /// Applies one of the agent's logs (in block and log order).
    pub fn log(&mut self, log: &AgentLog) {
        debug_assert_eq!(log.agent_id, self.agent_id, "a walk follows one agent");
        self.lapse(log.block);
        // A registration at an id the walk knows under another wallet: the other chain gave the
        // id to this one, and the registration followed so far is withdrawn first.
        if let (LogKind::Registered { wallet }, Some(known)) = (log.kind, self.known)
            && known.wallet != wallet
        {
            self.unregister(log.block);
        }
        let clock = self.clock(log.block.time);
        let (kind, detail) = match (log.kind, self.known.as_mut()) {
            (LogKind::Registered { wallet }, _) => {
                self.known =
                    Some(Known { wallet, status: AgentStatus::Active, last_attestation: log.block.time });
                self.attestation_current = true;
                (EventType::Registered, Detail::None {})
            }
            // A log of an agent the feed never saw registered (it was registered before the index
            // was complete): nothing to say it changed from. `settle` takes its record as known.
            (_, None) => return,
            (LogKind::Attested { at }, Some(known)) => {
                known.last_attestation = at;
                self.attestation_current = known.attestation_current(clock);
                (EventType::Attested, Detail::Attested { attested_at: at })
            }
            (LogKind::RevenueReported, Some(_)) => (EventType::RevenueReported, Detail::None {}),
            (LogKind::Suspended, Some(known)) => move_to(known, AgentStatus::Suspended),
            (LogKind::Reactivated, Some(known)) => move_to(known, AgentStatus::Active),
            (LogKind::Revoked, Some(known)) => move_to(known, AgentStatus::Revoked),
            (LogKind::Terminated, Some(known)) => move_to(known, AgentStatus::Terminated),
        };
        self.push(kind, log.block, Some(log.log), detail);
    }

    /// Ends the walk at the run's last block, whose record of the agent the run read (`None`:
    /// the registry has no such agent there), and gives the agent's changes in order.
    pub fn settle(mut self, read: Option<&Agent>, block: EventBlock) -> Vec<Change> {
        let clock = self.clock(block.time);
        self.lapse(block);
        // The registration the walk followed is not the chain's: gone, or its id is another
        // wallet's (a reorganisation the retractions did not cover, deeper than the finality
        // depth). The feed withdraws it, and shows the chain's as a registration of its own.
        if let Some(known) = self.known
            && read.is_none_or(|agent| agent.agent_wallet != known.wallet)
        {
            self.unregister(block);
            if let Some(agent) = read {
                self.known = Some(Known::of(agent));
                self.attestation_current = Known::of(agent).attestation_current(clock);
                self.push(EventType::Registered, block, None, Detail::None {});
            }
        }
        match (read, self.known) {
            (Some(agent), Some(known)) if agent.status != known.status => {
                self.known = Some(Known { status: agent.status, ..known });
                self.push(
                    EventType::StatusChanged,
                    block,
                    None,
                    Detail::Status { from: known.status, to: agent.status },
                );
            }
            // Registered before the index was complete: its record is the starting point.
            (Some(agent), None) => {
                let known = Known::of(agent);
                self.known = Some(known);
                self.standing = known.standing(clock);
            }
            _ => {}
        }
        if let (Some(agent), Some(known)) = (read, self.known.as_mut()) {
            // A last attestation the logs did not announce counts without an event of its own;
            // a compliance it flips is still shown.
            known.last_attestation = agent.last_attestation;
            known.wallet = agent.agent_wallet;
            self.attestation_current = known.attestation_current(clock);
            self.show_compliance(block, None);
        }
        self.changes
    }

    /// The registration followed so far is withdrawn at `block`: `agent.unregistered` for its
    /// wallet, then `agent.compliance_changed` if it was compliant.
    fn unregister(&mut self, block: EventBlock) {
        let Some(known) = self.known.take() else { return };
        let was_compliant = self.standing.is_compliant;
        self.standing = Standing::UNREGISTERED;
        self.attestation_current = false;
        let withdrawn = Change {
            kind: EventType::Unregistered,
            agent_id: self.agent_id,
            wallet: known.wallet,
            block,
            log: None,
            standing: Standing::UNREGISTERED,
            detail: Detail::None {},
        };
        self.changes.push(withdrawn);
        if was_compliant {
            self.changes.push(Change {
                kind: EventType::ComplianceChanged,
                detail: Detail::Compliance { from: true, to: false },
                ..withdrawn
            });
        }
    }

    /// The agent's attestation lapsed before `block`'s time: `agent.attestation_expired` (and
    /// the compliance it flips) at the first block the run saw past the moment. One the grace
    /// period's lengthening made current again is current from here on (the compliance it
    /// flips is shown with the walk's next change, or where it settles), so that it can lapse
    /// again.
    fn lapse(&mut self, block: EventBlock) {
        let Some(known) = self.known else { return };
        let clock = self.clock(block.time);
        let current = known.attestation_current(clock);
        if self.attestation_current && !current {
            self.attestation_current = false;
            let detail = Detail::Expired {
                last_attestation: known.last_attestation,
                valid_until: clock.valid_until(known.last_attestation),
            };
            self.push(EventType::AttestationExpired, block, None, detail);
        } else if current {
            self.attestation_current = true;
        }
    }

    /// Records a change with the standing it leaves, then the compliance flip it caused, if any.
    fn push(&mut self, kind: EventType, block: EventBlock, log: Option<EventLog>, detail: Detail) {
        let Some(known) = self.known else { return };
        let standing = known.standing(self.clock(block.time));
        self.changes.push(Change {
            kind,
            agent_id: self.agent_id,
            wallet: known.wallet,
            block,
            log,
            standing,
            detail,
        });
        self.show_compliance(block, log);
    }

    /// `agent.compliance_changed` if compliance differs from what was last shown.
    fn show_compliance(&mut self, block: EventBlock, log: Option<EventLog>) {
        let Some(known) = self.known else { return };
        let standing = known.standing(self.clock(block.time));
        let from = self.standing.is_compliant;
        self.standing = standing;
        if standing.is_compliant != from {
            self.changes.push(Change {
                kind: EventType::ComplianceChanged,
                agent_id: self.agent_id,
                wallet: known.wallet,
                block,
                log,
                standing,
                detail: Detail::Compliance { from, to: standing.is_compliant },
            });
        }
    }
}

fn move_to(known: &mut Known, to: AgentStatus) -> (EventType, Detail) {
    let from = known.status;
    known.status = to;
    (EventType::StatusChanged, Detail::Status { from, to })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KyaResult, test_support::sample_agent};
    use alloy_primitives::{B256, address};
    use proptest::prelude::*;

    const WALLET: Address = address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8");
    const DAY: u64 = 86_400;
    const T0: u64 = 1_700_000_000;
    const WEEK: u64 = crate::DEFAULT_GRACE_PERIOD_SECS;

    /// A clock of the registry's initial grace period.
    const fn week(time: u64) -> StandingClock {
        StandingClock::new(time, WEEK)
    }

    fn block(number: u64, time: u64) -> EventBlock {
        EventBlock { number, hash: B256::with_last_byte(number as u8), time }
    }

    fn log(number: u64, time: u64, index: u64, kind: LogKind) -> AgentLog {
        AgentLog {
            agent_id: 7,
            block: block(number, time),
            log: EventLog { transaction_hash: B256::with_last_byte(index as u8), log_index: index },
            kind,
        }
    }

    fn record(status: AgentStatus, last_attestation: u64) -> Agent {
        Agent { agent_wallet: WALLET, ..sample_agent(7, status, last_attestation, T0) }
    }

    /// (type, block, compliant after, detail) of each change.
    fn summary(changes: &[Change]) -> Vec<(EventType, u64, bool, Detail)> {
        changes
            .iter()
            .map(|change| (change.kind, change.block.number, change.standing.is_compliant, change.detail))
            .collect()
    }

    #[test]
    fn a_registration_is_registered_then_compliant() {
        let mut walk = Walk::new(7, None, week(T0 - 2), WEEK);
        walk.log(&log(10, T0, 0, LogKind::Registered { wallet: WALLET }));
        let changes = walk.settle(Some(&record(AgentStatus::Active, T0)), block(10, T0));
        assert_eq!(
            summary(&changes),
            vec![
                (EventType::Registered, 10, true, Detail::None {}),
                (EventType::ComplianceChanged, 10, true, Detail::Compliance { from: false, to: true }),
            ]
        );
        assert!(changes.iter().all(|change| change.wallet == WALLET && change.log.is_some()));
        assert_eq!(changes[0].standing.status, Some(AgentStatus::Active));
    }

    #[test]
    fn a_suspension_and_reactivation_in_one_run_are_two_changes_each_with_its_compliance() {
        let mut walk = Walk::new(7, Some(Known::of(&record(AgentStatus::Active, T0))), week(T0 + 5), WEEK);
        walk.log(&log(11, T0 + 10, 1, LogKind::Suspended));
        walk.log(&log(12, T0 + 12, 0, LogKind::RevenueReported));
        walk.log(&log(13, T0 + 14, 3, LogKind::Reactivated));
        let changes = walk.settle(Some(&record(AgentStatus::Active, T0)), block(13, T0 + 14));
        use AgentStatus::{Active, Suspended};
        assert_eq!(
            summary(&changes),
            vec![
                (EventType::StatusChanged, 11, false, Detail::Status { from: Active, to: Suspended }),
                (EventType::ComplianceChanged, 11, false, Detail::Compliance { from: true, to: false }),
                (EventType::RevenueReported, 12, false, Detail::None {}),
                (EventType::StatusChanged, 13, true, Detail::Status { from: Suspended, to: Active }),
                (EventType::ComplianceChanged, 13, true, Detail::Compliance { from: false, to: true }),
            ]
        );
        assert_eq!(changes[1].log, changes[0].log, "a flip names the log that caused it");
    }

    #[test]
    fn time_alone_expires_an_attestation_once_at_the_first_block_past_it() {
        let attested = T0;
        let edge = attested + WEEK;
        let known = Known::of(&record(AgentStatus::Active, attested));

        // Still current at its last second: nothing.
        let walk = Walk::new(7, Some(known), week(edge - 100), WEEK);
        assert_eq!(walk.settle(Some(&record(AgentStatus::Active, attested)), block(50, edge)), vec![]);

        // One second past: expired, and no longer compliant; a later run says nothing again.
        let changes = Walk::new(7, Some(known), week(edge - 100), WEEK)
            .settle(Some(&record(AgentStatus::Active, attested)), block(51, edge + 1));
        assert_eq!(
            summary(&changes),
            vec![
                (
                    EventType::AttestationExpired,
                    51,
                    false,
                    Detail::Expired { last_attestation: attested, valid_until: edge }
                ),
                (EventType::ComplianceChanged, 51, false, Detail::Compliance { from: true, to: false }),
            ]
        );
        assert!(changes.iter().all(|change| change.log.is_none()), "time has no log");
        assert_eq!(
            Walk::new(7, Some(known), week(edge + 1), WEEK)
                .settle(Some(&record(AgentStatus::Active, attested)), block(60, edge + DAY)),
            vec![]
        );
    }

    #[test]
    fn a_shortened_grace_expires_at_the_walks_first_block_and_a_lengthened_one_renews() {
        let attested = T0;
        let known = Known::of(&record(AgentStatus::Active, attested));
        let active = record(AgentStatus::Active, attested);
        // Shown compliant under the week; the owner shortened the grace to 120 s, and the run's
        // block is 300 s past the attestation: expired, its last current second the new grace's.
        let changes = Walk::new(7, Some(known), week(attested + 200), 120)
            .settle(Some(&active), block(9, attested + 300));
        assert_eq!(
            summary(&changes),
            vec![
                (
                    EventType::AttestationExpired,
                    9,
                    false,
                    Detail::Expired { last_attestation: attested, valid_until: attested + 120 }
                ),
                (EventType::ComplianceChanged, 9, false, Detail::Compliance { from: true, to: false }),
            ]
        );
        // Shown lapsed under 120 s; lengthened to a week: compliant again, and no expiry.
        let shown_lapsed = StandingClock::new(attested + 300, 120);
        let changes =
            Walk::new(7, Some(known), shown_lapsed, WEEK).settle(Some(&active), block(10, attested + 400));
        assert_eq!(
            summary(&changes),
            vec![(EventType::ComplianceChanged, 10, true, Detail::Compliance { from: false, to: true })]
        );
        // Renewed by the grace, it lapses again when the longer grace runs out.
        let mut walk = Walk::new(7, Some(known), shown_lapsed, 1_000);
        walk.log(&log(11, attested + 500, 0, LogKind::RevenueReported));
        let changes = walk.settle(Some(&active), block(12, attested + 1_001));
        assert_eq!(
            summary(&changes),
            vec![
                (EventType::RevenueReported, 11, true, Detail::None {}),
                (EventType::ComplianceChanged, 11, true, Detail::Compliance { from: false, to: true }),
                (
                    EventType::AttestationExpired,
                    12,
                    false,
                    Detail::Expired { last_attestation: attested, valid_until: attested + 1_000 }
                ),
                (EventType::ComplianceChanged, 12, false, Detail::Compliance { from: true, to: false }),
            ]
        );
    }

    #[test]
    fn a_lapse_before_a_renewal_in_the_same_run_is_shown_before_it() {
        let attested = T0;
        let renewed = attested + 8 * DAY;
        let mut walk =
            Walk::new(7, Some(Known::of(&record(AgentStatus::Active, attested))), week(attested + DAY), WEEK);
        walk.log(&log(90, renewed, 0, LogKind::Attested { at: renewed }));
        let changes = walk.settle(Some(&record(AgentStatus::Active, renewed)), block(90, renewed));
        assert_eq!(
            summary(&changes),
            vec![
                (
                    EventType::AttestationExpired,
                    90,
                    false,
                    Detail::Expired { last_attestation: attested, valid_until: attested + WEEK }
                ),
                (EventType::ComplianceChanged, 90, false, Detail::Compliance { from: true, to: false }),
                (EventType::Attested, 90, true, Detail::Attested { attested_at: renewed }),
                (EventType::ComplianceChanged, 90, true, Detail::Compliance { from: false, to: true }),
            ]
        );
    }

    #[test]
    fn a_suspended_agents_attestation_expires_without_a_compliance_change() {
        let known = Known::of(&record(AgentStatus::Suspended, T0));
        let later = T0 + WEEK + 1;
        let changes = Walk::new(7, Some(known), week(T0), WEEK)
            .settle(Some(&record(AgentStatus::Suspended, T0)), block(5, later));
        assert_eq!(
            summary(&changes),
            vec![(
                EventType::AttestationExpired,
                5,
                false,
                Detail::Expired { last_attestation: T0, valid_until: T0 + WEEK }
            )]
        );
    }

    #[test]
    fn a_record_the_logs_did_not_announce_is_corrected_at_the_runs_block() {
        // A registry (not ours) that revokes without a log.
        let changes = Walk::new(7, Some(Known::of(&record(AgentStatus::Active, T0))), week(T0), WEEK)
            .settle(Some(&record(AgentStatus::Revoked, T0)), block(8, T0 + 3));
        assert_eq!(
            summary(&changes),
            vec![
                (
                    EventType::StatusChanged,
                    8,
                    false,
                    Detail::Status { from: AgentStatus::Active, to: AgentStatus::Revoked }
                ),
                (EventType::ComplianceChanged, 8, false, Detail::Compliance { from: true, to: false }),
            ]
        );
        assert!(changes.iter().all(|change| change.log.is_none()));
    }

    #[test]
    fn an_agent_the_feed_never_saw_registered_starts_from_its_record_silently() {
        let mut walk = Walk::new(7, None, week(T0), WEEK);
        walk.log(&log(3, T0 + 1, 0, LogKind::Suspended));
        assert_eq!(walk.settle(Some(&record(AgentStatus::Suspended, T0)), block(3, T0 + 1)), vec![]);
    }

    #[test]
    fn a_registration_the_chain_no_longer_holds_is_withdrawn_for_its_wallet() {
        // Deeper than the finality depth, so no retraction covers it: the record is gone.
        let changes = Walk::new(7, Some(Known::of(&record(AgentStatus::Active, T0))), week(T0), WEEK)
            .settle(None, block(8, T0 + 3));
        assert_eq!(
            summary(&changes),
            vec![
                (EventType::Unregistered, 8, false, Detail::None {}),
                (EventType::ComplianceChanged, 8, false, Detail::Compliance { from: true, to: false }),
            ]
        );
        assert!(changes.iter().all(|change| change.wallet == WALLET && change.log.is_none()));
        assert!(changes.iter().all(|change| change.standing == Standing::UNREGISTERED));
        // A suspended agent was not compliant: no compliance change.
        let changes = Walk::new(7, Some(Known::of(&record(AgentStatus::Suspended, T0))), week(T0), WEEK)
            .settle(None, block(8, T0 + 3));
        assert_eq!(summary(&changes), vec![(EventType::Unregistered, 8, false, Detail::None {})]);
    }

    #[test]
    fn an_id_the_other_chain_gave_another_wallet_is_withdrawn_then_registered_anew() {
        let other = address!("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc");
        let theirs = Agent { agent_wallet: other, ..record(AgentStatus::Active, T0 + 2) };
        // Through the other chain's registration log.
        let mut walk = Walk::new(7, Some(Known::of(&record(AgentStatus::Active, T0))), week(T0), WEEK);
        walk.log(&log(8, T0 + 2, 0, LogKind::Registered { wallet: other }));
        // The old wallet withdrawn, then the new one registered; read from its log or not.
        let story = |from_log: bool| {
            vec![
                (EventType::Unregistered, WALLET, false),
                (EventType::ComplianceChanged, WALLET, false),
                (EventType::Registered, other, from_log),
                (EventType::ComplianceChanged, other, from_log),
            ]
        };
        let told = |changes: &[Change]| -> Vec<(EventType, Address, bool)> {
            changes.iter().map(|change| (change.kind, change.wallet, change.log.is_some())).collect()
        };
        assert_eq!(told(&walk.settle(Some(&theirs), block(8, T0 + 2))), story(true));
        // Without its log (below the logs followed): the same story, the registration a correction.
        let changes = Walk::new(7, Some(Known::of(&record(AgentStatus::Active, T0))), week(T0), WEEK)
            .settle(Some(&theirs), block(9, T0 + 3));
        assert_eq!(told(&changes), story(false));
        assert_eq!(changes[3].standing, Standing::of(&theirs, week(T0 + 3)));
    }

    /// A registry that follows its own rules, as a reference for the walk.
    #[derive(Debug, Clone, Copy)]
    enum Write {
        Attest,
        Report,
        Suspend,
        Reactivate,
        Revoke,
        Terminate,
    }

    fn writes() -> impl Strategy<Value = Vec<(Write, u64)>> {
        let write = prop_oneof![
            Just(Write::Attest),
            Just(Write::Report),
            Just(Write::Suspend),
            Just(Write::Reactivate),
            Just(Write::Revoke),
            Just(Write::Terminate),
        ];
        // Gaps of up to 10 days between writes, so attestations lapse now and then.
        prop::collection::vec((write, 0..10 * DAY), 0..12)
    }

    proptest! {
        /// Whatever the registry does, in whatever runs the index reads it: each change's
        /// compliance flip goes from the last shown to the new, and the last standing shown
        /// is `/kya`'s answer at the run's block.
        #[test]
        fn the_last_standing_is_the_kya_answer_and_flips_chain(
            writes in writes(), registered_in_run in any::<bool>(), tail in 0..10 * DAY,
        ) {
            let mut agent = record(AgentStatus::Active, T0);
            let mut time = T0;
            let mut logs = Vec::new();
            for (number, (write, gap)) in writes.iter().enumerate() {
                time += gap;
                let kind = match (write, agent.status) {
                    (Write::Attest, AgentStatus::Active) => { agent.last_attestation = time; LogKind::Attested { at: time } }
                    (Write::Report, AgentStatus::Active) => LogKind::RevenueReported,
                    (Write::Suspend, AgentStatus::Active) => { agent.status = AgentStatus::Suspended; LogKind::Suspended }
                    (Write::Reactivate, AgentStatus::Suspended) => { agent.status = AgentStatus::Active; LogKind::Reactivated }
                    (Write::Revoke, AgentStatus::Active | AgentStatus::Suspended) => { agent.status = AgentStatus::Revoked; LogKind::Revoked }
                    (Write::Terminate, AgentStatus::Active | AgentStatus::Suspended) => { agent.status = AgentStatus::Terminated; LogKind::Terminated }
                    _ => continue, // the registry refuses it
                };
                logs.push(log(number as u64 + 2, time, 0, kind));
            }
            let end = block(100, time + tail);
            let mut walk = if registered_in_run {
                let mut walk = Walk::new(7, None, week(T0 - 1), WEEK);
                walk.log(&log(1, T0, 0, LogKind::Registered { wallet: WALLET }));
                walk
            } else {
                Walk::new(7, Some(Known::of(&record(AgentStatus::Active, T0))), week(T0), WEEK)
            };
            for log in &logs {
                walk.log(log);
            }
            let changes = walk.settle(Some(&agent), end);

            let mut shown = !registered_in_run; // compliant at T0 when known before
            for (index, change) in changes.iter().enumerate() {
                if let Detail::Compliance { from, to } = change.detail {
                    prop_assert_eq!(from, shown);
                    prop_assert_ne!(from, to);
                    shown = to;
                    prop_assert_eq!(change.standing.is_compliant, to);
                } else {
                    // The standing after a change includes the flip it caused, shown next.
                    let flip = changes.get(index + 1).and_then(|next| match next.detail {
                        Detail::Compliance { to, .. } if next.block == change.block && next.log == change.log => Some(to),
                        _ => None,
                    });
                    prop_assert_eq!(change.standing.is_compliant, flip.unwrap_or(shown), "{:?}", change);
                }
            }
            prop_assert!(changes.windows(2).all(|pair| pair[0].block.number <= pair[1].block.number));
            prop_assert!(!changes.iter().any(|change| change.log.is_none() && change.kind == EventType::StatusChanged), "a registry that logs every write needs no correction");
            // `getAgentByWallet`, behind `/kya`, finds no agent for a terminated agent's wallet.
            let of_wallet = (agent.status != AgentStatus::Terminated).then_some(&agent);
            let kya = KyaResult::of(WALLET, of_wallet, week(end.time));
            prop_assert_eq!(shown, kya.is_compliant, "the last compliance shown is /kya's");
            if let Some(last) = changes.last() {
                prop_assert_eq!((last.standing.is_registered, last.standing.status), (kya.is_registered, of_wallet.map(|agent| agent.status)));
            }
            let expiries = changes.iter().filter(|change| change.kind == EventType::AttestationExpired).count();
            let attestations = changes.iter().filter(|change| change.kind == EventType::Attested).count();
            prop_assert!(expiries <= attestations + 1, "one expiry per attestation at most");
        }
    }
}
