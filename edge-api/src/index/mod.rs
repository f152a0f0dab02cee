//! The registry index in D1 (binding `INDEX`, tables in `edge-api/migrations/`): a versioned row
//! per agent, the agents recent blocks touched, and the indexer's state. The scheduled run
//! ([`run()`]) keeps it current; the five registry-wide endpoints answer from it ([`serve`]);
//! `/health` reports it. A deployment without the binding has no index and answers as before.
//!
//! - `store`: the index's tables: its statements, reads and writes, through the D1 layer
//!   (`crate::d1`: statements, batches and D1's limits, below every feature that keeps rows).
//! - `tally`: the totals kept by name (currencies, categories, generations) and the agents whose
//!   revenue history is unreadable, in their own table.
//! - `follow`: the registry's logs over a range of blocks, split as providers refuse.
//! - `headers`: the block headers a run asks for, each once.
//! - `run`: one bounded run of the indexer.
//! - `pace`: the Durable Object that runs it at the chain's pace, and the Cron Trigger's watchdog.
//! - `serve`: the answers from the index, and when it must not answer.
//! - `feed`: a run's part of the change feed: the changes it derives, the settlements of
//!   earlier entries, and the batches it appends with its rows.
//! - `changes`: `GET /api/v1/changes`, pages of the change feed the runs append.
//! - `outlets`: after each run, the feed's new batches handed to the stream and the webhooks.
//! - `stream`: `GET /api/v1/changes/stream`, the feed as Server-Sent Events from Durable Object
//!   shards of listeners.

pub(crate) mod changes;
mod feed;
mod follow;
mod headers;
pub(crate) mod outlets;
mod pace;
pub(crate) mod point;
mod run;
mod serve;
mod store;
pub(crate) mod stream;
mod tally;

pub use pace::IndexPacer;
pub(crate) use pace::watch;
pub(crate) use run::run;
pub(crate) use serve::{Served, answer, answer_reads};
pub use stream::StreamShard;

use alloy_primitives::B256;
use kya_core::{
    BlockRef, StandingClock,
    index::{Totals, plan::Cursor},
};
use serde::{Deserialize, Serialize};

/// The indexer's state, one JSON row of fixed size (its totals by name and the agents whose
/// revenue is unreadable are in `tallies`; the maps and the set of [`Totals`] are empty here), written in the same D1 batch as the rows it describes, so
/// a run killed midway leaves both as the previous run left them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct State {
    /// The block the index reflects (its last run's); `None` before the first run.
    pub(crate) block: Option<BlockRef>,
    /// That block's hash: a run that finds another at its height knows the chain reorganised
    /// (`None` in a state from before hashes were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) block_hash: Option<B256>,
    /// The chain's head fell below `block` and no longer holds it (a reorganisation shortened
    /// the chain): the index does not answer until a run moves it to a block the chain holds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) block_orphaned: bool,
    /// The chain's head when that run began: the index was `head - block` blocks behind.
    pub(crate) head: u64,
    /// Wall-clock time (Unix seconds) that run committed.
    pub(crate) updated_at: u64,
    /// The registry's `nextAgentId` at `block`.
    pub(crate) chain_next: u64,
    /// The registry's `attestationGracePeriod()` at `block`, read with `chain_next`: what the
    /// totals' compliant count, the feed's lapses and every answer's compliance are judged by.
    /// A state from before it was read counted with the contract's initial week, so that is what
    /// its totals hold until the first run reads the parameter and moves them.
    #[serde(default = "default_grace_period")]
    pub(crate) grace_period: u64,
    /// The fill's and the sweep's cursors, and the ids to read again.
    pub(crate) cursor: Cursor,
    /// The totals of every agent the index holds, at `block`, but those kept by name.
    pub(crate) totals: Totals,
    /// How many names the totals kept by name hold.
    #[serde(default)]
    pub(crate) names: tally::Names,
    /// How the last run ended.
    pub(crate) last_run: Option<RunOutcome>,
    /// The number the change feed's next batch takes (from 1).
    #[serde(default = "first_batch")]
    pub(crate) feed_next_batch: u64,
    /// Every provisional entry of the feed up to here is confirmed or retracted: a run reads
    /// the feed after it for the entries still waiting (`None`: from the start).
    #[serde(default)]
    pub(crate) settled_through: Option<kya_core::feed::Cursor>,
    /// The feed's last entry (`None`: none yet): when it is `settled_through`, nothing waits
    /// and a run reads no batch.
    #[serde(default)]
    pub(crate) feed_last: Option<kya_core::feed::Cursor>,
    /// Where the feed's search for lapsed attestations resumes: the (`lastAttestation`, id) of
    /// the first agent not walked yet (`None`: from the index's block time).
    #[serde(default)]
    pub(crate) lapses_from: Option<(u64, u64)>,
    /// The feed's renewals still to walk after the owner lengthened the grace period: the agents
    /// from `lapses_from` up to this (`lastAttestation`, id), exclusive, were shown lapsed and
    /// are current again; those at or above it were shown renewed (`None`: nothing waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) renewing_below: Option<(u64, u64)>,
    /// Agents (`lastAttestation`, id) a run read and walked with their logs before the feed's
    /// lapse or renewal search reached them: the walk said their lapse or renewal, so the search
    /// skips them (`index::feed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) walked_ahead: Vec<(u64, u64)>,
    /// The stream outlet's cursor: every batch of the feed through this one was handed to the
    /// stream's shards (`None`: none yet). It rides in this row, written by the next run that
    /// writes (`stream::outlet`); until then the isolate that handed later batches remembers
    /// them.
    #[serde(default)]
    pub(crate) stream_through: Option<u64>,
    /// Agents whose logs a run followed but did not read, for the runs that read them to walk
    /// (`kya_core::feed::put_off`).
    #[serde(default, skip_serializing_if = "kya_core::feed::put_off::PutOff::is_empty")]
    pub(crate) put_off: kya_core::feed::put_off::PutOff,
    /// Where the backfill of operational scopes looks next (`index::run::scope_backfill`):
    /// `None` when every agent held has its scope kept. Written as `null` then, because a state
    /// without the field is one from before scopes were kept, whose agents are looked at from 1.
    #[serde(default = "scopes_from_the_first_agent")]
    pub(crate) scopes_from: Option<u64>,
}

const fn first_batch() -> u64 {
    1
}

const fn scopes_from_the_first_agent() -> Option<u64> {
    Some(1)
}

const fn default_grace_period() -> u64 {
    kya_core::DEFAULT_GRACE_PERIOD_SECS
}

impl Default for State {
    fn default() -> Self {
        Self {
            block: None,
            block_hash: None,
            block_orphaned: false,
            head: 0,
            updated_at: 0,
            chain_next: 0,
            grace_period: default_grace_period(),
            cursor: Cursor::default(),
            totals: Totals::default(),
            names: tally::Names::default(),
            last_run: None,
            feed_next_batch: first_batch(),
            settled_through: None,
            feed_last: None,
            lapses_from: None,
            renewing_below: None,
            walked_ahead: Vec::new(),
            stream_through: None,
            put_off: kya_core::feed::put_off::PutOff::default(),
            // A new index writes each agent's scope with its registration.
            scopes_from: None,
        }
    }
}

impl State {
    /// What standing at `block` (the index's) is judged by: its time, the grace period there.
    pub(crate) const fn clock_at(&self, block: BlockRef) -> StandingClock {
        StandingClock::new(block.timestamp, self.grace_period)
    }

    /// The block the index holds every agent of the registry at: `None` until the first fill
    /// has read them all (or while registrations wait for room in a run).
    pub(crate) fn complete_at(&self) -> Option<BlockRef> {
        PointState::from(self).complete_at()
    }
}

/// The fields of [`State`] a point answer reads (`index::point`), decoded from the same row with
/// the rest skipped: the totals and the feed's and outlets' cursors are no part of an answer
/// about one wallet or agent, and building them was most of decoding the row.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PointState {
    pub(crate) block: Option<BlockRef>,
    #[serde(default)]
    pub(crate) block_hash: Option<B256>,
    #[serde(default)]
    pub(crate) block_orphaned: bool,
    pub(crate) head: u64,
    pub(crate) updated_at: u64,
    pub(crate) chain_next: u64,
    #[serde(default = "default_grace_period")]
    pub(crate) grace_period: u64,
    pub(crate) cursor: Cursor,
}

impl PointState {
    /// [`State::clock_at`].
    pub(crate) const fn clock_at(&self, block: BlockRef) -> StandingClock {
        StandingClock::new(block.timestamp, self.grace_period)
    }

    /// [`State::complete_at`].
    pub(crate) fn complete_at(&self) -> Option<BlockRef> {
        self.block.filter(|_| self.cursor.complete(self.chain_next) && !self.block_orphaned)
    }
}

impl From<&State> for PointState {
    fn from(state: &State) -> Self {
        Self {
            block: state.block,
            block_hash: state.block_hash,
            block_orphaned: state.block_orphaned,
            head: state.head,
            updated_at: state.updated_at,
            chain_next: state.chain_next,
            grace_period: state.grace_period,
            cursor: state.cursor,
        }
    }
}

/// How a run ended, for `/health`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunOutcome {
    /// Wall-clock time the run ended, Unix seconds.
    pub(crate) at: u64,
    pub(crate) ok: bool,
    /// What it did, or why it failed (at most [`RunOutcome::MAX_MESSAGE`] bytes).
    pub(crate) message: String,
}

impl RunOutcome {
    /// The longest message kept: the state row stays small whatever an error says.
    const MAX_MESSAGE: usize = 1_000;

    pub(crate) fn new(at: u64, ok: bool, mut message: String) -> Self {
        if message.len() > Self::MAX_MESSAGE {
            let mut end = Self::MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        Self { at, ok, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state row decoded for a point answer says what the whole state says.
    #[test]
    fn a_point_state_decodes_from_the_whole_row() {
        let block = BlockRef { number: 90, timestamp: 1_700_000_000 };
        let mut state = State {
            block: Some(block),
            block_hash: Some(B256::repeat_byte(7)),
            head: 91,
            updated_at: 1_700_000_005,
            chain_next: 12,
            grace_period: 120,
            cursor: Cursor { filled: 12, sweep: 3, reread_from: 0, reread_to: 0 },
            walked_ahead: vec![(1, 2)],
            ..State::default()
        };
        state.totals.agents = 11;
        state.totals.generations.insert(0, 11);
        for state in [state.clone(), State { block_orphaned: true, ..state.clone() }, State::default()] {
            let row = serde_json::to_string(&state).unwrap();
            let point: PointState = serde_json::from_str(&row).unwrap();
            assert_eq!(format!("{point:?}"), format!("{:?}", PointState::from(&state)));
            assert_eq!(point.complete_at(), state.complete_at());
            assert_eq!(point.clock_at(block), state.clock_at(block));
        }
        assert_eq!(State::default().complete_at(), None);
    }
}
