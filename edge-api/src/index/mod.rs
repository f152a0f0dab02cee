//! The registry index in D1 (binding `INDEX`, tables in `edge-api/migrations/`): a versioned row
//! per agent, the agents recent blocks touched, and the indexer's state. The scheduled run
//! ([`run`]) keeps it current; the five registry-wide endpoints answer from it ([`serve`]);
//! `/health` reports it. A deployment without the binding has no index and answers as before.
//!
//! - `store`: the D1 statements, reads and writes.
//! - `limits`: D1's documented limits, checked on every statement before D1 sees it.
//! - `tally`: the totals kept by name (currencies, categories, generations) and the agents whose
//!   revenue history is unreadable, in their own table.
//! - `follow`: the registry's logs over a range of blocks, split as providers refuse.
//! - `run`: one bounded run of the indexer.
//! - `pace`: the Durable Object that runs it at the chain's pace, and the Cron Trigger's watchdog.
//! - `serve`: the answers from the index, and when it must not answer.
//! - `changes`: `GET /api/v1/changes`, pages of the change feed the runs append.
//! - `outlets`: after each run, the feed's new batches handed to the stream and the webhooks.
//! - `dead_letters`: the webhooks' dead letters, recorded where an operator reads them.

pub(crate) mod changes;
mod dead_letters;
mod follow;
mod limits;
pub(crate) mod outlets;
mod pace;
mod run;
mod serve;
mod store;
mod tally;

pub use pace::IndexPacer;
pub(crate) use pace::watch;
pub(crate) use run::run;
pub(crate) use serve::{Served, answer, answer_reads};
pub(crate) use store::Store;

use kya_core::{BlockRef, index::Totals, index_plan::Cursor};
use serde::{Deserialize, Serialize};

/// The indexer's state, one JSON row of fixed size (its totals by name and the agents whose
/// revenue is unreadable are in `tallies`; the maps and the set of [`Totals`] are empty here), written in the same D1 batch as the rows it describes, so
/// a run killed midway leaves both as the previous run left them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct State {
    /// The block the index reflects (its last run's); `None` before the first run.
    pub(crate) block: Option<BlockRef>,
    /// The chain's head when that run began: the index was `head - block` blocks behind.
    pub(crate) head: u64,
    /// Wall-clock time (Unix seconds) that run committed.
    pub(crate) updated_at: u64,
    /// The registry's `nextAgentId` at `block`.
    pub(crate) chain_next: u64,
    /// The fill's and the sweep's cursors, and the ids to read again.
    pub(crate) cursor: Cursor,
    /// The totals of every agent the index holds, at `block`, but those kept by name.
    pub(crate) totals: Totals,
    /// How many names the totals kept by name hold.
    #[serde(default)]
    pub(crate) names: tally::Names,
    /// How the last run ended.
    pub(crate) last_run: Option<RunOutcome>,
}

impl State {
    /// The block the index holds every agent of the registry at: `None` until the first fill
    /// has read them all (or while registrations wait for room in a run).
    pub(crate) fn complete_at(&self) -> Option<BlockRef> {
        self.block.filter(|_| self.cursor.complete(self.chain_next))
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
