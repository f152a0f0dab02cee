//! One consistent read of the whole registry at a pinned block: every agent record and every
//! revenue report. It serves `/stats`, `/stats/detailed`, `/agents`, `/agents/compliance` and
//! `/revenue/aggregate`, and is cached as JSON (hence `Deserialize`).
//!
//! - `answers`: the five answers, rendered once and cached compactly ([`crate::SnapshotAnswers`]).
//! - [`stats`]: a snapshot's statistics, agent list, compliance list and revenue aggregates.

pub(crate) mod answers;
pub mod stats;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{Agent, Compliance, Revenue, StandingClock};

/// The block every call of one response reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    pub number: u64,
    /// Unix seconds: the "now" of compliance checks.
    pub timestamp: u64,
}

/// All agents (ascending id) and all revenue reports (by agent, then history order) at `block`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub block: BlockRef,
    /// The registry's `attestationGracePeriod()` at `block` (seconds, saturated at `u64::MAX`).
    pub grace_period: u64,
    pub agents: Vec<Agent>,
    pub revenue: Vec<Revenue>,
    /// Agents (ascending id) whose revenue history could not be read even alone: it needs more
    /// gas than the RPC provider's `eth_call` gas cap. They are in `agents`, their reports are
    /// not in `revenue`, and the revenue answers name them (`revenueUnreadable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revenue_unreadable: Vec<u64>,
}

impl Snapshot {
    /// Number of direct children per agent id, from the records' parent ids (the registry only
    /// ever appends children, so this equals `getChildren(id).length`).
    pub fn child_counts(&self) -> HashMap<u64, u64> {
        let mut counts = HashMap::new();
        for agent in &self.agents {
            if agent.parent_agent_id != 0 {
                *counts.entry(agent.parent_agent_id).or_default() += 1;
            }
        }
        counts
    }

    /// What standing is judged by at the snapshot's block.
    pub const fn clock(&self) -> StandingClock {
        StandingClock::new(self.block.timestamp, self.grace_period)
    }

    /// Every agent with its compliance at the snapshot's block.
    pub fn compliance(&self) -> Vec<(&Agent, Compliance)> {
        let counts = self.child_counts();
        self.agents
            .iter()
            .map(|agent| {
                let children = counts.get(&agent.agent_id).copied().unwrap_or(0);
                (agent, Compliance::of(agent, children, self.clock()))
            })
            .collect()
    }
}
