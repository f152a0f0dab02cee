//! The registry index's record of its re-scanned window: which agents each block's logs touched,
//! and that block's hash, as earlier runs saw them. A run compares the logs it re-scans with it to
//! find what a reorganisation took away or replaced, or a lagging backend missed
//! ([`changed_in_window`]).
//!
//! Agent ids alone cannot tell a block from its replacement: a registration replaced at the same
//! height by another registration touches the same id, and so does an attestation replaced by a
//! suspension. So each block is recorded with its hash (every log carries it), and a block whose
//! hash changed has every agent of both versions read again. The record also keeps the hash of
//! the block just before the next run's re-scan, its anchor: a reorganisation that replaced the
//! anchor reached deeper than the window, and no re-scan can name what it changed.
//!
//! The record is one JSON value kept in a column of the index's state row, which every run that
//! writes saves anyway: keeping it costs no D1 row of its own, where a table of touches cost two
//! rows written per change (the touch inserted, and deleted once it left the window). So that the
//! row stays within D1's limits whatever the blocks hold, the record has a byte budget: past it,
//! the blocks touching the most agents are kept as a digest of their agents instead of the list.
//! A digested block whose logs differ when re-scanned cannot name the agents that are gone, so
//! the run reads every agent again ([`WindowChanges::unknown`]); such a block takes thousands of
//! writes in one block, in every block of the window, to arise.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::{B256, keccak256};
use serde::{Deserialize, Serialize};

use crate::index::logs::Touch;

/// Per block of the window, the agents its logs touched and its hash, with the window's anchor.
///
/// JSON: `{"blocks": {"<number>": {"hash": …, "agents": [ids] or "<digest>"}}, "anchor": …}`. A
/// record written before hashes were recorded (`{"<number>": [ids] or "<digest>"}`) still reads:
/// its blocks have no hash, and no anchor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StoredRecord")]
pub struct WindowTouches {
    blocks: BTreeMap<u64, BlockTouches>,
    /// The block just before the next run's re-scan, as the recording run saw it (`None`: the
    /// re-scan starts at the chain's first block, or the record predates anchors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    anchor: Option<Anchor>,
}

/// A block by number and hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub number: u64,
    pub hash: B256,
}

/// One block of the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockTouches {
    /// The block's hash as its logs named it (`None` in a record from before hashes were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hash: Option<B256>,
    agents: Agents,
}

/// The agents one block's logs touched, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum Agents {
    /// Their ids.
    Ids(BTreeSet<u64>),
    /// A digest of their ids ([`digest`]), for a block whose list did not fit the budget.
    Digest(String),
}

/// The shapes a stored record may have. Blocks are keyed by their number in decimal: read as
/// text, because serde's untagged enums buffer a map's keys as strings, which a `u64` key
/// refuses.
#[derive(Deserialize)]
#[serde(untagged)]
enum StoredRecord {
    Current {
        blocks: BTreeMap<String, BlockTouches>,
        #[serde(default)]
        anchor: Option<Anchor>,
    },
    /// Before hashes: the agents of each block alone.
    Unhashed(BTreeMap<String, Agents>),
}

impl TryFrom<StoredRecord> for WindowTouches {
    type Error = String;

    fn try_from(stored: StoredRecord) -> Result<Self, String> {
        let number = |key: String| key.parse::<u64>().map_err(|_| format!("a block number, not {key:?}"));
        Ok(match stored {
            StoredRecord::Current { blocks, anchor } => Self {
                blocks: blocks
                    .into_iter()
                    .map(|(key, touches)| Ok((number(key)?, touches)))
                    .collect::<Result<_, String>>()?,
                anchor,
            },
            StoredRecord::Unhashed(blocks) => Self {
                blocks: blocks
                    .into_iter()
                    .map(|(key, agents)| Ok((number(key)?, BlockTouches { hash: None, agents })))
                    .collect::<Result<_, String>>()?,
                anchor: None,
            },
        })
    }
}

impl Agents {
    /// The digest of the agents, whichever way they are recorded.
    fn digest(&self) -> String {
        match self {
            Self::Ids(agents) => digest(agents),
            Self::Digest(digest) => digest.clone(),
        }
    }

    /// Bytes of its JSON, about: the ids in decimal with their commas, or the digest's text.
    fn json_bytes(&self) -> usize {
        match self {
            Self::Ids(agents) => 2 + agents.iter().map(|id| decimal_len(*id) + 1).sum::<usize>(),
            Self::Digest(digest) => digest.len() + 2,
        }
    }
}

/// Bytes a block's hash and its object's keys add to its JSON: `{"hash":"0x…64…","agents":}`.
const BLOCK_OVERHEAD_BYTES: usize = 88;

/// keccak256 of the ids in order, eight bytes each, big-endian; as 0x-prefixed hex.
fn digest(agents: &BTreeSet<u64>) -> String {
    let bytes: Vec<u8> = agents.iter().flat_map(|id| id.to_be_bytes()).collect();
    format!("{:#x}", keccak256(bytes))
}

fn decimal_len(number: u64) -> usize {
    number.checked_ilog10().map_or(1, |log| log as usize + 1)
}

impl WindowTouches {
    /// `touches` (each with its block's hash) of blocks from `from` on, as recorded within about
    /// `budget` bytes of JSON: the blocks with the most agents are digested first until the rest
    /// fits. `anchor` is the block before the next run's re-scan.
    pub fn record(
        touches: impl IntoIterator<Item = (Touch, B256)>,
        from: u64,
        budget: usize,
        anchor: Option<Anchor>,
    ) -> Self {
        let mut blocks: BTreeMap<u64, (B256, BTreeSet<u64>)> = BTreeMap::new();
        for (touch, hash) in touches.into_iter().filter(|(touch, _)| touch.block >= from) {
            blocks.entry(touch.block).or_insert_with(|| (hash, BTreeSet::new())).1.insert(touch.agent_id);
        }
        let mut record: BTreeMap<u64, BlockTouches> = blocks
            .into_iter()
            .map(|(block, (hash, agents))| {
                (block, BlockTouches { hash: Some(hash), agents: Agents::Ids(agents) })
            })
            .collect();
        let entry_bytes = |block: u64, touches: &BlockTouches| {
            decimal_len(block) + 4 + BLOCK_OVERHEAD_BYTES + touches.agents.json_bytes()
        };
        let mut bytes: usize =
            2 + record.iter().map(|(block, touches)| entry_bytes(*block, touches)).sum::<usize>();
        if bytes > budget {
            let mut largest: Vec<(usize, u64)> =
                record.iter().map(|(block, touches)| (touches.agents.json_bytes(), *block)).collect();
            largest.sort_unstable_by(|a, b| b.cmp(a));
            for (_, block) in largest {
                if bytes <= budget {
                    break;
                }
                let touches = record.get_mut(&block).expect("a block of the record");
                let digested = Agents::Digest(touches.agents.digest());
                bytes = bytes - touches.agents.json_bytes() + digested.json_bytes();
                touches.agents = digested;
            }
        }
        Self { blocks: record, anchor }
    }

    /// The record's blocks from `from` on, with its anchor.
    pub fn since(&self, from: u64) -> Self {
        Self {
            blocks: self.blocks.range(from..).map(|(block, touches)| (*block, touches.clone())).collect(),
            anchor: self.anchor,
        }
    }

    /// The blocks recorded.
    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks.keys().copied()
    }

    /// Whether a block is recorded as a digest.
    pub fn digested(&self, block: u64) -> bool {
        matches!(self.blocks.get(&block), Some(BlockTouches { agents: Agents::Digest(_), .. }))
    }

    /// The block before the re-scan that the recording run saw, if it recorded one.
    pub const fn anchor(&self) -> Option<Anchor> {
        self.anchor
    }
}

/// How the re-scanned window differs from its record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowChanges {
    /// The agents whose logs in the window differ from the record: a touch that is gone was
    /// taken away by a reorganisation, one that is new was missed (a backend that lagged) or came
    /// with the other chain; and every agent of a block whose hash changed, in both versions.
    pub agents: BTreeSet<u64>,
    /// Blocks recorded as a digest whose logs now differ: the agents they no longer touch are
    /// not known, so every agent the index holds is to be read again.
    pub unknown: BTreeSet<u64>,
    /// Blocks whose logs name another hash than the record: replaced by a reorganisation.
    pub replaced: BTreeSet<u64>,
}

impl WindowChanges {
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty() && self.unknown.is_empty() && self.replaced.is_empty()
    }
}

/// How the logs re-scanned in the window (`rescanned`, each touch with its block's hash, blocks
/// up to `indexed`, which earlier runs already applied) differ from what those runs saw
/// (`recorded`, from the window's first block on). Only the agents found are read again; agents
/// whose logs are as recorded, in a block with the recorded hash, are not, so a window costs one
/// `eth_getLogs`, not a re-read of every agent it touched.
pub fn changed_in_window(
    recorded: &WindowTouches,
    rescanned: &[(Touch, B256)],
    indexed: u64,
) -> WindowChanges {
    let mut seen: BTreeMap<u64, (BTreeSet<B256>, BTreeSet<u64>)> = BTreeMap::new();
    for (touch, hash) in rescanned.iter().filter(|(touch, _)| touch.block <= indexed) {
        let block = seen.entry(touch.block).or_default();
        block.0.insert(*hash);
        block.1.insert(touch.agent_id);
    }
    let none = (BTreeSet::new(), BTreeSet::new());
    let blocks: BTreeSet<u64> =
        recorded.blocks.range(..=indexed).map(|(block, _)| *block).chain(seen.keys().copied()).collect();
    let mut changes = WindowChanges::default();
    for block in blocks {
        let (hashes, now) = seen.get(&block).unwrap_or(&none);
        let Some(then) = recorded.blocks.get(&block) else {
            changes.agents.extend(now);
            continue;
        };
        // Another hash at the height (or logs of two blocks at it: an answer pieced from two
        // chains): the block was replaced, and every agent of either version may have changed.
        let replaced = !hashes.is_empty() && then.hash.is_some_and(|hash| hashes != &BTreeSet::from([hash]));
        if replaced {
            changes.replaced.insert(block);
        }
        match &then.agents {
            Agents::Ids(then) if replaced => changes.agents.extend(then.union(now)),
            Agents::Ids(then) => changes.agents.extend(then.symmetric_difference(now)),
            Agents::Digest(then) => {
                if replaced || *then != digest(now) {
                    changes.agents.extend(now);
                    changes.unknown.insert(block);
                }
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{set, touches};

    /// `pairs` as touches of blocks whose hash ends in the block's number plus `fork`.
    fn hashed(pairs: &[(u64, u64)], fork: u8) -> Vec<(Touch, B256)> {
        touches(pairs)
            .into_iter()
            .map(|touch| (touch, B256::with_last_byte(touch.block as u8 + fork)))
            .collect()
    }

    #[test]
    fn only_agents_whose_window_logs_changed_are_read_again() {
        let recorded = WindowTouches::record(hashed(&[(8, 1), (9, 2), (10, 3)], 0), 0, 1_000, None);
        // As recorded, plus block 11 past the index: nothing in the window changed.
        let same = changed_in_window(&recorded, &hashed(&[(8, 1), (9, 2), (10, 3), (11, 4)], 0), 10);
        assert!(same.is_empty(), "{same:?}");
        // Block 8's log, missed by a lagging backend before, shows agent 6 too (same block).
        let now = hashed(&[(8, 1), (8, 6), (9, 2), (10, 3)], 0);
        assert_eq!(
            changed_in_window(&recorded, &now, 10),
            WindowChanges { agents: set(&[6]), unknown: set(&[]), replaced: set(&[]) }
        );
        // A reorganisation took block 10's write away and put agent 5's in block 9 (another
        // block 9, holding agent 2's write too).
        let mut now = hashed(&[(8, 1)], 0);
        now.extend(hashed(&[(9, 2), (9, 5)], 100));
        assert_eq!(
            changed_in_window(&recorded, &now, 10),
            WindowChanges { agents: set(&[2, 3, 5]), unknown: set(&[]), replaced: set(&[9]) }
        );
    }

    #[test]
    fn a_block_replaced_by_one_touching_the_same_agents_reads_them_again() {
        // Block 10 held agent 3's registration; the chain's block 10 now holds another
        // registration at the same id: the same touch, another hash.
        let recorded = WindowTouches::record(hashed(&[(9, 2), (10, 3)], 0), 0, 1_000, None);
        let mut now = hashed(&[(9, 2)], 0);
        now.extend(hashed(&[(10, 3)], 100));
        assert_eq!(
            changed_in_window(&recorded, &now, 10),
            WindowChanges { agents: set(&[3]), unknown: set(&[]), replaced: set(&[10]) }
        );
        // A record from before hashes cannot tell: as before, the touches alone.
        let unhashed: WindowTouches = serde_json::from_str(r#"{"9":[2],"10":[3]}"#).unwrap();
        assert!(changed_in_window(&unhashed, &now, 10).is_empty());
    }

    #[test]
    fn the_record_keeps_its_window_and_anchor_and_round_trips_through_json() {
        let anchor = Anchor { number: 7, hash: B256::repeat_byte(7) };
        let record =
            WindowTouches::record(hashed(&[(7, 9), (8, 1), (8, 12), (9, 2)], 0), 8, 1_000, Some(anchor));
        assert_eq!(record.blocks().collect::<Vec<_>>(), vec![8, 9], "blocks before the window are left out");
        assert_eq!(record.anchor(), Some(anchor));
        let text = serde_json::to_string(&record).unwrap();
        let hash = |byte: u8| format!("{:#x}", B256::with_last_byte(byte));
        assert_eq!(
            text,
            format!(
                r#"{{"blocks":{{"8":{{"hash":"{}","agents":[1,12]}},"9":{{"hash":"{}","agents":[2]}}}},"anchor":{{"number":7,"hash":"{:#x}"}}}}"#,
                hash(8),
                hash(9),
                B256::repeat_byte(7)
            )
        );
        assert_eq!(serde_json::from_str::<WindowTouches>(&text).unwrap(), record);
        // As a state row from before hashes holds it: ids in any order, no hash, no anchor.
        let unhashed: WindowTouches = serde_json::from_str(r#"{"9":[2],"8":[12,1]}"#).unwrap();
        assert_eq!(unhashed.blocks().collect::<Vec<_>>(), vec![8, 9]);
        assert_eq!(unhashed.anchor(), None);
        assert_eq!(record.since(9).blocks().collect::<Vec<_>>(), vec![9]);
        assert_eq!(record.since(9).anchor(), Some(anchor), "the anchor stays");
    }

    #[test]
    fn past_its_budget_the_largest_blocks_are_digested_and_their_changes_read_everything() {
        // Block 20 touches agents 1 to 500 (about 2 KB as a list); block 21 agent 7.
        let crowded: Vec<(u64, u64)> = (1..=500).map(|id| (20, id)).chain([(21, 7)]).collect();
        let record = WindowTouches::record(hashed(&crowded, 0), 0, 400, None);
        assert!(record.digested(20) && !record.digested(21), "{record:?}");
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.len() <= 400, "{text}");
        assert_eq!(serde_json::from_str::<WindowTouches>(&text).unwrap(), record, "a digest round-trips");
        // Re-scanned as recorded: nothing changed.
        assert!(changed_in_window(&record, &hashed(&crowded, 0), 21).is_empty());
        // Agent 500's log in block 20 gone, agent 7's in block 21 too: block 21 names its agent;
        // block 20 cannot name the one it lost.
        let now: Vec<(u64, u64)> = (1..500).map(|id| (20, id)).collect();
        let changes = changed_in_window(&record, &hashed(&now, 0), 21);
        assert_eq!(changes.unknown, set(&[20]));
        assert!(changes.agents.contains(&7) && changes.agents.contains(&1) && !changes.agents.contains(&500));
        // The same agents in another block 20: replaced, and unknown (the digest names nobody).
        let changes = changed_in_window(&record, &hashed(&crowded, 100), 21);
        assert_eq!((changes.unknown, changes.replaced), (set(&[20]), set(&[20, 21])));
    }
}
