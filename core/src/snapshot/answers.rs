//! The answers of the five endpoints the registry snapshot serves (`/stats`, `/stats/detailed`,
//! `/agents/compliance`, `/revenue/aggregate`, and every page of `/agents`), rendered once when
//! the snapshot is read and cached in a compact form that loads by slicing, not parsing: at
//! 10,000 agents the snapshot as JSON is 6 MB and takes milliseconds to parse, more than a
//! Workers Free request may spend.

use alloy_primitives::Address;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::{
    AgentStatus, BlockRef, Error, Result, Snapshot,
    api::{pagination::Page, query::AgentsQuery, view::AgentListItem},
    snapshot::stats,
};

/// First line of the encoded form; a cached entry of another layout is not read.
const MAGIC: &str = "kya-snapshot-answers 2";

/// The rendered answers of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotAnswers {
    /// The block the snapshot read.
    pub block: BlockRef,
    /// The registry's `attestationGracePeriod()` there, which the answers' compliance is judged by.
    pub grace_period: u64,
    /// `/stats`.
    pub stats: String,
    /// `/stats/detailed`.
    pub detailed: String,
    /// `/agents/compliance`.
    pub compliance: String,
    /// `/revenue/aggregate`.
    pub aggregate: String,
    /// Every agent's `/agents` item as JSON, ascending id, one per line, each led by its
    /// status's digit (the registry's enum value).
    items: String,
}

impl SnapshotAnswers {
    /// Renders the answers of `snapshot`; `registry` and `chain` are echoed by `/stats`.
    pub fn render(snapshot: &Snapshot, registry: &Address, chain: &str) -> Self {
        let basic = stats::stats(snapshot, registry, chain);
        let mut items = String::with_capacity(snapshot.agents.len() * 140);
        for agent in &snapshot.agents {
            items.push(char::from(b'0' + agent.status as u8));
            items.push_str(&json(&AgentListItem::from(agent)));
            items.push('\n');
        }
        Self {
            block: snapshot.block,
            grace_period: snapshot.grace_period,
            stats: json(&basic),
            detailed: json(&stats::detailed(snapshot, basic)),
            compliance: json(&stats::compliance_list(snapshot)),
            aggregate: json(&stats::registry_revenue(snapshot)),
            items,
        }
    }

    /// The `/agents` answer for `query`: the page of the agents with its status (all when none),
    /// by ascending id; the same JSON as [`stats::agents_page`].
    pub fn agents_page(&self, query: &AgentsQuery) -> String {
        let digit = query.status.map(|status| char::from(b'0' + status as u8));
        let limit = query.limit.max(1);
        let start = query.page.max(1).saturating_sub(1).saturating_mul(limit);
        // Count every match, but embed only the page's items (each checked as JSON once more).
        let mut total = 0u64;
        let mut data: Vec<&RawValue> = Vec::new();
        for line in self.items.lines().filter(|line| digit.is_none_or(|digit| line.starts_with(digit))) {
            if total >= start && total - start < limit {
                data.push(raw(&line[1..]));
            }
            total += 1;
        }
        json(&Page { total, page: query.page, limit, total_pages: total.div_ceil(limit), data })
    }

    /// The compact form: a header line, a line of lengths, then the bodies and the items as
    /// they are. [`SnapshotAnswers::decode`] reads it back by slicing.
    pub fn encode(&self) -> String {
        let bodies = [&self.stats, &self.detailed, &self.compliance, &self.aggregate];
        let lengths: Vec<String> = bodies.iter().map(|body| body.len().to_string()).collect();
        let mut text = String::with_capacity(
            bodies.iter().map(|body| body.len()).sum::<usize>() + self.items.len() + 96,
        );
        text.push_str(&format!(
            "{MAGIC}\n{} {} {}\n{}\n",
            self.block.number,
            self.block.timestamp,
            self.grace_period,
            lengths.join(" ")
        ));
        for body in bodies {
            text.push_str(body);
        }
        text.push_str(&self.items);
        text
    }

    /// The answers from [`SnapshotAnswers::encode`]'s form.
    pub fn decode(text: &str) -> Result<Self> {
        let malformed = |what: &str| Error::Decode(format!("cached snapshot answers: {what}"));
        let mut lines = text.splitn(4, '\n');
        if lines.next() != Some(MAGIC) {
            return Err(malformed("another layout"));
        }
        fn numbers<T: core::str::FromStr>(
            line: Option<&str>,
            malformed: impl Fn(&str) -> Error,
        ) -> Result<Vec<T>> {
            line.ok_or_else(|| malformed("truncated"))?
                .split(' ')
                .map(|number| number.parse().map_err(|_| malformed("a number is not one")))
                .collect()
        }
        // The block's numbers and the grace period as u64 (a grace may pass a wasm32 usize).
        let block: Vec<u64> = numbers(lines.next(), malformed)?;
        let lengths: Vec<usize> = numbers(lines.next(), malformed)?;
        let (&[number, timestamp, grace_period], &[stats, detailed, compliance, aggregate]) =
            (block.as_slice(), lengths.as_slice())
        else {
            return Err(malformed("header"));
        };
        let mut rest = lines.next().unwrap_or_default();
        let mut take = |length: usize| -> Result<String> {
            let body = rest.get(..length).ok_or_else(|| malformed("shorter than its lengths"))?;
            rest = &rest[length..];
            Ok(body.to_owned())
        };
        Ok(Self {
            block: BlockRef { number, timestamp },
            grace_period,
            stats: take(stats)?,
            detailed: take(detailed)?,
            compliance: take(compliance)?,
            aggregate: take(aggregate)?,
            items: rest.to_owned(),
        })
    }

    /// Bytes held, for memory budgets.
    pub fn size(&self) -> usize {
        self.stats.len()
            + self.detailed.len()
            + self.compliance.len()
            + self.aggregate.len()
            + self.items.len()
    }
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("answers serialise")
}

/// A list item rendered by [`SnapshotAnswers::render`], embedded as it is.
fn raw(item: &str) -> &RawValue {
    serde_json::from_str(item).expect("items are JSON rendered by render")
}

/// The registry's enum value of each status fits one digit.
const _: () = assert!((AgentStatus::Terminated as u8) < 10);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Agent, Revenue, api::pagination::AGENTS_MAX_LIMIT};
    use alloy_primitives::U256;
    use proptest::prelude::*;

    fn snapshot(agents: u64) -> Snapshot {
        let statuses =
            [AgentStatus::Active, AgentStatus::Suspended, AgentStatus::Revoked, AgentStatus::Terminated];
        let agents: Vec<Agent> = (1..=agents)
            .map(|id| Agent {
                operational_scope: format!("scope \"{id}\" ünïcode"),
                generation: u64::from(id >= 3),
                ..crate::test_support::sample_agent(
                    id,
                    statuses[(id % 7 % 4) as usize],
                    1_700_000_000 + id * 1_000,
                    1_700_000_000 + id,
                )
            })
            .collect();
        let revenue = vec![Revenue {
            agent_id: 1,
            amount: U256::from(1234),
            currency: "€UR".into(),
            category: "api".into(),
            period_start: 1,
            period_end: 2,
            reported_at: 3,
        }];
        Snapshot {
            block: BlockRef { number: 9, timestamp: 1_700_100_000 },
            grace_period: crate::DEFAULT_GRACE_PERIOD_SECS,
            agents,
            revenue,
            revenue_unreadable: Vec::new(),
        }
    }

    #[test]
    fn bodies_are_the_endpoints_own_and_survive_encoding() {
        let snapshot = snapshot(30);
        let registry = Address::with_last_byte(0xaa);
        let answers = SnapshotAnswers::render(&snapshot, &registry, "http://node");
        let basic = stats::stats(&snapshot, &registry, "http://node");
        assert_eq!(answers.stats, json(&basic));
        assert_eq!(answers.detailed, json(&stats::detailed(&snapshot, basic)));
        assert_eq!(answers.compliance, json(&stats::compliance_list(&snapshot)));
        assert_eq!(answers.aggregate, json(&stats::registry_revenue(&snapshot)));
        assert_eq!(SnapshotAnswers::decode(&answers.encode()), Ok(answers.clone()));
        assert!(SnapshotAnswers::decode("kya-snapshot-answers 0\n").is_err());
        assert!(SnapshotAnswers::decode(&answers.encode()[..60]).is_err());
    }

    proptest! {
        /// Every page of every filter equals the page rendered from the snapshot itself.
        #[test]
        fn pages_equal_the_snapshots_own(
            agents in 0u64..60,
            page in 1u64..8,
            limit in 1u64..=AGENTS_MAX_LIMIT,
            status in proptest::option::of(0u8..4),
        ) {
            let snapshot = snapshot(agents);
            let answers = SnapshotAnswers::decode(
                &SnapshotAnswers::render(&snapshot, &Address::ZERO, "x").encode(),
            ).unwrap();
            let query = AgentsQuery { page, limit, status: status.map(|s| AgentStatus::try_from(s).unwrap()) };
            prop_assert_eq!(answers.agents_page(&query), json(&stats::agents_page(&snapshot, &query)));
        }
    }
}
