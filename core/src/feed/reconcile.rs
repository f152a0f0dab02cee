//! The feed's promise, checked at the end of every run: replayed in order, its entries give for
//! every wallet they name the standing `/kya` gives at the run's block.
//!
//! A run tells the feed its retractions, then each agent's changes as [`super::Walk`] derives
//! them. The walk starts from what the index held, or after a reorganisation from the agent at
//! the block before the fork, and so relies on that starting point being what the feed last
//! said. A reorganisation deeper than the logs the run followed breaks that: the new chain's
//! writes below them are in the starting point the run read, and the walk has nothing to say of
//! them. [`corrections`] compares, for every wallet of every agent the run read that the feed
//! has spoken of, the standing the replay gives with the chain's, and adds the corrections
//! (`log: null`, at the run's block) that bring the two together.
//!
//! Replaying the feed: a `provisional` entry or a `retracted` one sets its wallet's standing to
//! the entry's `standing`; a `final` entry repeats a change already counted, and sets nothing.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::Address;

use crate::{
    Agent, StandingClock,
    feed::{Change, Detail, EventBlock, EventType, Known, Standing},
};

/// What a run knows of the agents it read, for [`corrections`].
pub struct Told<'a> {
    /// What the run appends before the corrections, in order: its retractions (agent id, wallet,
    /// standing), then its changes.
    pub said: Vec<(u64, Address, Standing)>,
    /// Each agent the run read, as the index held it before the run (`None`: not held): by the
    /// induction every run keeps, what the feed last said of its wallet, at `from`.
    pub before: &'a BTreeMap<u64, Option<Known>>,
    /// Each agent the run read, as read at its block (`None`: no such agent there).
    pub after: &'a BTreeMap<u64, Option<&'a Agent>>,
    /// The index's block's clock before the run (its time, the grace period there).
    pub from: StandingClock,
    /// The registry's grace period at the run's block.
    pub grace_period: u64,
}

/// The corrections that make the replay of the run's entries equal the chain at `end` for every
/// wallet of an agent the run read whose id the feed has spoken of (held before, or named by the
/// run's entries): agents the index fills without a word of the feed stay unnamed.
pub fn corrections(told: &Told<'_>, end: EventBlock) -> Vec<Change> {
    // The chain's answer for each wallet the run read.
    let truth: BTreeMap<Address, (u64, Standing)> = told
        .after
        .iter()
        .filter_map(|(id, agent)| {
            agent.map(|agent| {
                (
                    agent.agent_wallet,
                    (*id, Standing::of(agent, StandingClock::new(end.time, told.grace_period))),
                )
            })
        })
        .collect();
    // What the replay gives each wallet: the last the run said of it, else the feed's before.
    let mut shown: BTreeMap<Address, Standing> =
        told.before.values().flatten().map(|known| (known.wallet, known.standing(told.from))).collect();
    let mut spoken: BTreeSet<u64> =
        told.before.iter().filter(|(_, known)| known.is_some()).map(|(id, _)| *id).collect();
    let mut wallets: BTreeMap<Address, u64> =
        told.before.iter().filter_map(|(id, known)| known.map(|known| (known.wallet, *id))).collect();
    for (id, wallet, standing) in &told.said {
        shown.insert(*wallet, *standing);
        if told.after.contains_key(id) {
            spoken.insert(*id);
            wallets.entry(*wallet).or_insert(*id);
        }
    }
    for (id, agent) in told.after {
        if let (Some(agent), true) = (agent, spoken.contains(id)) {
            wallets.insert(agent.agent_wallet, *id);
        }
    }

    let mut corrections = Vec::new();
    for (wallet, id) in wallets {
        let is = shown.get(&wallet).copied().unwrap_or(Standing::UNREGISTERED);
        let (id, should) = truth.get(&wallet).copied().unwrap_or((id, Standing::UNREGISTERED));
        if is == should {
            continue;
        }
        let change = |kind, detail| Change {
            kind,
            agent_id: id,
            wallet,
            block: end,
            log: None,
            standing: should,
            detail,
        };
        match (is.status, should.status) {
            (Some(_), None) => corrections.push(change(EventType::Unregistered, Detail::None {})),
            (None, Some(_)) => corrections.push(change(EventType::Registered, Detail::None {})),
            (Some(from), Some(to)) if from != to => {
                corrections.push(change(EventType::StatusChanged, Detail::Status { from, to }));
            }
            _ => {}
        }
        if is.is_compliant != should.is_compliant {
            let detail = Detail::Compliance { from: is.is_compliant, to: should.is_compliant };
            corrections.push(change(EventType::ComplianceChanged, detail));
        }
    }
    corrections
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentStatus, test_support::sample_agent};
    use alloy_primitives::B256;

    const T0: u64 = 1_700_000_000;
    const WEEK: u64 = crate::DEFAULT_GRACE_PERIOD_SECS;

    const fn week(time: u64) -> StandingClock {
        StandingClock::new(time, WEEK)
    }

    fn end() -> EventBlock {
        EventBlock { number: 20, hash: B256::repeat_byte(20), time: T0 + 100 }
    }

    /// Each wallet's standing once the feed before the run, the run's entries and `corrections`
    /// are replayed in order (the last entry naming a wallet wins).
    fn replayed(told: &Told<'_>, corrections: &[Change]) -> BTreeMap<Address, Standing> {
        let start = told.before.values().flatten().map(|known| (known.wallet, known.standing(told.from)));
        let said = told.said.iter().map(|(_, wallet, standing)| (*wallet, *standing));
        start.chain(said).chain(corrections.iter().map(|change| (change.wallet, change.standing))).collect()
    }

    #[test]
    fn a_run_whose_entries_end_at_the_chain_needs_no_correction() {
        let agent = sample_agent(1, AgentStatus::Active, T0, T0);
        let before = BTreeMap::from([(1, Some(Known::of(&agent)))]);
        let after = BTreeMap::from([(1, Some(&agent))]);
        let told =
            Told { said: Vec::new(), before: &before, after: &after, from: week(T0), grace_period: WEEK };
        assert_eq!(corrections(&told, end()), vec![]);
        // Nor an agent the index fills, never named by the feed.
        let before = BTreeMap::from([(1, None)]);
        let told =
            Told { said: Vec::new(), before: &before, after: &after, from: week(T0), grace_period: WEEK };
        assert_eq!(corrections(&told, end()), vec![]);
    }

    #[test]
    fn a_registration_below_the_logs_followed_is_shown_and_the_replaced_wallet_withdrawn() {
        // The index held agent 1 as wallet A; the other chain gave id 1 to wallet B below the
        // logs the run followed. The run retracted A's registration, standing unregistered, and
        // its walk, started from the other chain's agent, said nothing of B.
        let a = sample_agent(1, AgentStatus::Active, T0, T0);
        let b = crate::Agent {
            agent_wallet: Address::repeat_byte(0xbb),
            ..sample_agent(1, AgentStatus::Active, T0 + 50, T0 + 50)
        };
        let before = BTreeMap::from([(1, Some(Known::of(&a)))]);
        let after = BTreeMap::from([(1, Some(&b))]);
        let told = Told {
            said: vec![(1, a.agent_wallet, Standing::UNREGISTERED)],
            before: &before,
            after: &after,
            from: week(T0),
            grace_period: WEEK,
        };
        let found = corrections(&told, end());
        let kinds: Vec<(EventType, Address)> =
            found.iter().map(|change| (change.kind, change.wallet)).collect();
        assert_eq!(
            kinds,
            vec![(EventType::Registered, b.agent_wallet), (EventType::ComplianceChanged, b.agent_wallet)]
        );
        assert!(
            found.iter().all(|change| change.log.is_none() && change.block == end() && change.agent_id == 1)
        );
        let standings = replayed(&told, &found);
        assert_eq!(standings[&b.agent_wallet], Standing::of(&b, week(end().time)));
        assert_eq!(standings[&a.agent_wallet], Standing::UNREGISTERED);

        // Without the retraction (the entries were final): A is withdrawn as well (wallets in
        // order: A's address is the lower).
        let told = Told { said: Vec::new(), ..told };
        let found = corrections(&told, end());
        let kinds: Vec<(EventType, Address)> =
            found.iter().map(|change| (change.kind, change.wallet)).collect();
        assert_eq!(
            kinds,
            vec![
                (EventType::Unregistered, a.agent_wallet),
                (EventType::ComplianceChanged, a.agent_wallet),
                (EventType::Registered, b.agent_wallet),
                (EventType::ComplianceChanged, b.agent_wallet),
            ]
        );
        let standings = replayed(&told, &found);
        assert_eq!(standings[&a.agent_wallet], Standing::UNREGISTERED);
        assert_eq!(standings[&b.agent_wallet], Standing::of(&b, week(end().time)));
    }

    #[test]
    fn a_status_the_walk_missed_is_corrected_with_its_compliance() {
        let held = sample_agent(2, AgentStatus::Active, T0, T0);
        let now = crate::Agent { status: AgentStatus::Suspended, ..held.clone() };
        let before = BTreeMap::from([(2, Some(Known::of(&held)))]);
        let after = BTreeMap::from([(2, Some(&now))]);
        let told =
            Told { said: Vec::new(), before: &before, after: &after, from: week(T0), grace_period: WEEK };
        let found = corrections(&told, end());
        assert_eq!(
            found.iter().map(|change| (change.kind, change.detail)).collect::<Vec<_>>(),
            vec![
                (
                    EventType::StatusChanged,
                    Detail::Status { from: AgentStatus::Active, to: AgentStatus::Suspended }
                ),
                (EventType::ComplianceChanged, Detail::Compliance { from: true, to: false }),
            ]
        );
        assert_eq!(replayed(&told, &found)[&held.agent_wallet], Standing::of(&now, week(end().time)));
    }
}
