//! The registry index in D1 (binding `INDEX`, tables in `edge-api/migrations/`): one row per
//! agent and the indexer's state, written by the scheduled run ([`run`]) and reported by
//! `/health`. A deployment without the binding has no index and answers as before.

mod run;

pub(crate) use run::run;

use kya_core::{
    BlockRef,
    index::{IndexedAgent, Totals, list_item},
};
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Env};

use crate::{Error, Result};

/// The D1 binding of the index.
const BINDING: &str = "INDEX";
/// The `state` row holding [`State`].
const STATE_KEY: &str = "index";

/// The indexer's state, one JSON row, written in the same D1 batch as the rows it describes, so a
/// run killed midway leaves both as the previous run left them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct State {
    /// The block the index is complete at; `None` until the first sweep has read every agent.
    pub(crate) block: Option<BlockRef>,
    /// The totals of every agent in the `agents` table.
    pub(crate) totals: Totals,
    /// A sweep under way.
    pub(crate) sweep: Option<Sweep>,
    /// How the last run ended.
    pub(crate) last_run: Option<RunOutcome>,
}

/// A sweep of every agent by id, read at one pinned block, spanning runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Sweep {
    /// The block every read of the sweep pins.
    pub(crate) block: BlockRef,
    /// Agents in the registry at that block.
    pub(crate) agents: u64,
    /// The next id to read.
    pub(crate) next_id: u64,
}

/// How a run ended, for `/health`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunOutcome {
    /// Wall-clock time the run ended, Unix seconds.
    pub(crate) at: u64,
    pub(crate) ok: bool,
    /// What it did, or why it failed.
    pub(crate) message: String,
}

/// The index's D1 database.
pub(crate) struct Store {
    db: D1Database,
}

impl Store {
    /// The index, or `None` without the `INDEX` binding.
    pub(crate) fn open(env: &Env) -> Option<Self> {
        env.d1(BINDING).ok().map(|db| Self { db })
    }

    /// The indexer's state (the default before the first run).
    pub(crate) async fn state(&self) -> Result<State> {
        let text: Option<String> = self
            .db
            .prepare("SELECT value FROM state WHERE key = ?1")
            .bind(&[STATE_KEY.into()])?
            .first(Some("value"))
            .await?;
        match text {
            None => Ok(State::default()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|error| Error::BadConfig(format!("the index's state does not decode: {error}"))),
        }
    }

    /// The statement storing `state`.
    fn save_state(&self, state: &State) -> Result<D1PreparedStatement> {
        let text = serde_json::to_string(state).map_err(|error| Error::Runtime(error.into()))?;
        Ok(self
            .db
            .prepare(
                "INSERT INTO state (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
            )
            .bind(&[STATE_KEY.into(), text.into()])?)
    }

    /// The statement storing `agent`'s row (its child count kept).
    fn upsert(&self, agent: &IndexedAgent) -> Result<D1PreparedStatement> {
        let record = &agent.record;
        let indexed = serde_json::to_string(agent).map_err(|error| Error::Runtime(error.into()))?;
        Ok(self
            .db
            .prepare(
                "INSERT INTO agents (id, status, parent, registered_at, last_attestation, creator, item, indexed) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO UPDATE SET status = ?2, parent = ?3, \
                 registered_at = ?4, last_attestation = ?5, creator = ?6, item = ?7, indexed = ?8",
            )
            .bind(&[
                number(record.agent_id),
                number(record.status as u64),
                number(record.parent_agent_id),
                number(record.registered_at),
                number(record.last_attestation),
                record.creator.to_checksum(None).into(),
                list_item(record).into(),
                indexed.into(),
            ])?)
    }

    /// The statement adding `change` to `parent`'s child count.
    fn add_children(&self, parent: u64, change: i64) -> Result<D1PreparedStatement> {
        Ok(self
            .db
            .prepare("UPDATE agents SET child_count = child_count + ?2 WHERE id = ?1")
            .bind(&[number(parent), JsValue::from_f64(change as f64)])?)
    }

    /// Runs `statements` as one transaction.
    async fn commit(&self, statements: Vec<D1PreparedStatement>) -> Result<()> {
        self.db.batch(statements).await?;
        Ok(())
    }

    /// Records how the run ended, keeping the rest of the state.
    pub(crate) async fn record_run(&self, outcome: RunOutcome) -> Result<()> {
        let mut state = self.state().await?;
        state.last_run = Some(outcome);
        self.save_state(&state)?.run().await?;
        Ok(())
    }
}

/// A whole number for D1 (a JavaScript number: exact up to 2^53, which ids, counts and times
/// stay far below).
fn number(value: u64) -> JsValue {
    JsValue::from_f64(value as f64)
}
