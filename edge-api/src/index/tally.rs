//! The totals the index keeps by name, in a table of their own (`tallies`), not in the state
//! row: revenue reports and their sum per currency and per category, agents per generation, and
//! the agents whose revenue history is unreadable (named in `revenueUnreadable`).
//! Their number and their names' lengths are the registrants' choice (a registry with a million
//! currencies, or one currency of 200 KB), so the state row, read by every answer and every
//! run, holds only fixed-size counts of them ([`Names`]).
//!
//! A run loads the tallies of the keys its changed agents count under into the totals (keyed by
//! [`kya_core::index::name_key`], as the agents are stored), applies the changes as before
//! (`Totals::apply`), and writes back the tallies that moved: a key new to the index with its
//! name, a key no agent counts under any more deleted.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::U512;
use kya_core::index::{AgentRevenue, IndexedAgent, Totals};
use serde::{Deserialize, Serialize};

use crate::d1::Store;
use crate::{Error, Result};

/// What a tally counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TallyKind {
    Currency = 0,
    Category = 1,
    Generation = 2,
    /// An agent whose revenue history is unreadable (key: its id in decimal; count 1).
    Unreadable = 3,
}

impl TryFrom<u8> for TallyKind {
    type Error = ();

    fn try_from(kind: u8) -> Result<Self, ()> {
        match kind {
            0 => Ok(Self::Currency),
            1 => Ok(Self::Category),
            2 => Ok(Self::Generation),
            3 => Ok(Self::Unreadable),
            _ => Err(()),
        }
    }
}

/// A tally's key: a name's [`kya_core::index::name_key`], or a generation in decimal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TallyKey {
    pub(crate) kind: TallyKind,
    pub(crate) key: String,
}

/// A tally as stored.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    pub(crate) key: TallyKey,
    /// The name (read by answers only).
    pub(crate) name: Option<String>,
    /// The name's length in bytes when stored (`None`: a generation, or a name too long to
    /// store).
    pub(crate) name_bytes: Option<u64>,
    /// Reports (revenue) or agents (generation).
    pub(crate) count: u64,
    /// The reports' sum (0 for a generation).
    pub(crate) total: U512,
}

/// The most names (currencies and categories) and the most bytes of them an answer renders:
/// `/revenue/aggregate` and `/stats/detailed` past them answer 507, naming why, instead of
/// reading a million rows into one body.
pub(crate) const ANSWER_NAMES: (u64, u64) = (100_000, 8_000_000);

/// The longest name stored: a longer one (more than a block's gas allows today) is counted
/// with its sums, and the answers that would show it say so instead of passing D1's limit on
/// strings.
pub(crate) const MAX_NAME_BYTES: usize = 900_000;

/// How many names the tallies hold and their bytes, kept in the state row (fixed-size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Names {
    pub(crate) count: u64,
    pub(crate) bytes: u64,
    /// Names longer than [`MAX_NAME_BYTES`]: counted, not stored.
    pub(crate) unstored: u64,
}

impl Names {
    /// Whether an answer showing every name can be rendered, and if not, why.
    pub(crate) fn fits(&self) -> Result<()> {
        let (most, most_bytes) = ANSWER_NAMES;
        if self.unstored > 0 {
            return Err(Error::AnswerTooLarge(format!(
                "the registry's revenue names {} currency or category longer than the index stores \
                 ({MAX_NAME_BYTES} bytes): each agent's reports are at /api/v1/agent/:id/revenue",
                self.unstored
            )));
        }
        if self.count > most || self.bytes > most_bytes {
            return Err(Error::AnswerTooLarge(format!(
                "the registry's revenue names {} currencies and categories ({} bytes): more than one answer \
                 renders ({most} names, {most_bytes} bytes); each agent's reports are at /api/v1/agent/:id/revenue",
                self.count, self.bytes
            )));
        }
        Ok(())
    }
}

/// The keys `agent` (as stored) counts under.
fn keys_of(agent: &IndexedAgent) -> impl Iterator<Item = TallyKey> + '_ {
    let (sums, unreadable) = match &agent.revenue {
        AgentRevenue::Read(sums) => (Some(sums), None),
        AgentRevenue::Unreadable => {
            (None, Some(TallyKey { kind: TallyKind::Unreadable, key: agent.record.agent_id.to_string() }))
        }
    };
    let revenue = sums.into_iter().flat_map(|sums| {
        let currencies =
            sums.by_currency.keys().map(|key| TallyKey { kind: TallyKind::Currency, key: key.clone() });
        let categories =
            sums.by_category.keys().map(|key| TallyKey { kind: TallyKind::Category, key: key.clone() });
        currencies.chain(categories)
    });
    std::iter::once(TallyKey { kind: TallyKind::Generation, key: agent.record.generation.to_string() })
        .chain(revenue)
        .chain(unreadable)
}

/// The tallies a run loaded: each key its agents count under, and what the index held for it.
#[derive(Default)]
pub(super) struct Loaded {
    keys: BTreeSet<TallyKey>,
    held: BTreeMap<TallyKey, Tally>,
}

/// Loads into `totals` (whose maps the state row leaves empty) the tallies of every key
/// `agents` count under, so that `Totals::apply` moves them.
pub(super) async fn load<'a>(
    store: &Store,
    totals: &mut Totals,
    agents: impl Iterator<Item = &'a IndexedAgent>,
) -> Result<Loaded> {
    let keys: BTreeSet<TallyKey> = agents.flat_map(keys_of).collect();
    let mut loaded = Loaded { keys, held: BTreeMap::new() };
    if loaded.keys.is_empty() {
        return Ok(loaded);
    }
    for tally in store.tallies(&loaded.keys).await? {
        let entry = (tally.count, tally.total);
        match tally.key.kind {
            TallyKind::Currency => totals.revenue.by_currency.insert(tally.key.key.clone(), entry),
            TallyKind::Category => totals.revenue.by_category.insert(tally.key.key.clone(), entry),
            TallyKind::Generation => {
                let generation = generation_of(&tally.key)?;
                totals.generations.insert(generation, tally.count).map(|count| (count, U512::ZERO))
            }
            TallyKind::Unreadable => {
                totals.unreadable.insert(number_of(&tally.key)?);
                None
            }
        };
        loaded.held.insert(tally.key.clone(), tally);
    }
    Ok(loaded)
}

/// Tallies to write (each with its name when new to the index), and keys to delete.
pub(super) type Moved<'a> = (Vec<(Tally, Option<&'a str>)>, Vec<TallyKey>);

/// What the run writes back: each loaded key's tally that moved (with its name when new to the
/// index: `names` maps keys to the names the run read), and the keys no agent counts under
/// any more. `counts` follows the names added and removed.
pub(super) fn moved<'a>(
    totals: &Totals,
    loaded: &Loaded,
    names: &'a BTreeMap<String, String>,
    counts: &mut Names,
) -> Result<Moved<'a>> {
    let mut written = Vec::new();
    let mut gone = Vec::new();
    for key in &loaded.keys {
        let now = match key.kind {
            TallyKind::Currency => totals.revenue.by_currency.get(&key.key).copied(),
            TallyKind::Category => totals.revenue.by_category.get(&key.key).copied(),
            TallyKind::Generation => key
                .key
                .parse()
                .ok()
                .and_then(|generation: u64| totals.generations.get(&generation))
                .map(|&count| (count, U512::ZERO)),
            TallyKind::Unreadable => totals.unreadable.contains(&number_of(key)?).then_some((1, U512::ZERO)),
        };
        let held = loaded.held.get(key);
        let named = matches!(key.kind, TallyKind::Currency | TallyKind::Category);
        match (held, now) {
            (Some(held), Some((count, total))) if (held.count, held.total) == (count, total) => {}
            (Some(_), Some((count, total))) => {
                written.push((Tally { key: key.clone(), name: None, name_bytes: None, count, total }, None))
            }
            (None, Some((count, total))) => {
                let name = if named {
                    let name = names.get(&key.key).ok_or_else(|| {
                        Error::BadConfig(format!("a revenue key {} new to the index has no name", key.key))
                    })?;
                    if name.len() > MAX_NAME_BYTES {
                        counts.unstored += 1;
                        None
                    } else {
                        counts.count += 1;
                        counts.bytes += name.len() as u64;
                        Some(name.as_str())
                    }
                } else {
                    None
                };
                written.push((Tally { key: key.clone(), name: None, name_bytes: None, count, total }, name));
            }
            (Some(held), None) => {
                if named {
                    match held.name_bytes {
                        Some(bytes) => {
                            counts.count = counts.count.saturating_sub(1);
                            counts.bytes = counts.bytes.saturating_sub(bytes);
                        }
                        None => counts.unstored = counts.unstored.saturating_sub(1),
                    }
                }
                gone.push(key.clone());
            }
            (None, None) => {}
        }
    }
    Ok((written, gone))
}

/// The generation a generation tally's key names.
fn generation_of(key: &TallyKey) -> Result<u64> {
    number_of(key)
}

/// The number a generation's or an unreadable agent's key names.
fn number_of(key: &TallyKey) -> Result<u64> {
    key.key.parse().map_err(|_| {
        Error::BadConfig(format!("the index's tally {} of kind {:?} is not a number", key.key, key.kind))
    })
}

/// Fills `totals`' maps, by name, from every tally the index holds (for an answer).
pub(super) fn fill(totals: &mut Totals, tallies: Vec<Tally>) -> Result<()> {
    for tally in tallies {
        match tally.key.kind {
            TallyKind::Generation => {
                let generation = generation_of(&tally.key)?;
                totals.generations.insert(generation, tally.count);
            }
            TallyKind::Unreadable => {
                totals.unreadable.insert(number_of(&tally.key)?);
            }
            kind => {
                let name = tally.name.ok_or_else(|| {
                    Error::BadConfig(format!("the index's tally {} has no name", tally.key.key))
                })?;
                let map = if kind == TallyKind::Currency {
                    &mut totals.revenue.by_currency
                } else {
                    &mut totals.revenue.by_category
                };
                map.insert(name, (tally.count, tally.total));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_past_the_names_one_renders_say_why() {
        assert!(Names { count: 100_000, bytes: 8_000_000, unstored: 0 }.fits().is_ok());
        let million = Names { count: 1_000_000, bytes: 9_000_000, unstored: 0 }.fits().unwrap_err();
        assert_eq!(million.status(), 507);
        assert!(
            million.to_string().starts_with(
                "the registry's revenue names 1000000 currencies and categories (9000000 bytes): more than one \
                 answer renders (100000 names, 8000000 bytes)"
            ),
            "{million}"
        );
        let long = Names { count: 1, bytes: 3, unstored: 1 }.fits().unwrap_err();
        assert!(long.to_string().contains("longer than the index stores (900000 bytes)"), "{long}");
    }
}
