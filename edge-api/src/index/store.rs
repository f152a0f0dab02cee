//! The index's D1 statements. Rows are versioned by index block (`since`, `until`): the run
//! supersedes an agent's current row and inserts the new one; an answer reads the rows that held
//! at its state's block. Lists of ids and rows go to D1 as one JSON parameter each
//! (`json_each`), so a statement's size does not depend on how many agents a run changed, and
//! D1's limit on bound parameters is never reached.

use std::{
    collections::{BTreeMap, BTreeSet},
    ops::Range,
};

use kya_core::{
    AgentStatus,
    index::{
        BucketMoves, COMPLIANCE_SEPARATOR, IndexedAgent, STATUS_BUCKET_IDS, compliance_item_sql, list_item,
    },
    logs::Touch,
};
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Env};

use super::State;
use crate::{Error, Result};

/// The D1 binding of the index.
const BINDING: &str = "INDEX";
/// The `state` row holding [`State`].
const STATE_KEY: &str = "index";
/// The rows that held at index block `?1`.
const HELD_AT: &str = "since <= ?1 AND (until IS NULL OR until > ?1)";
/// Pairs of numbers from the JSON array of arrays in parameter `?1`, as a row-value list.
const PAIRS_OF_PARAM_1: &str =
    "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1)";

/// An agent as the index holds it now, with its child count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) agent: IndexedAgent,
    pub(crate) child_count: u64,
}

/// A row as the run writes it (the JSON `json_each` reads).
#[derive(Serialize)]
struct NewRow<'a> {
    id: u64,
    status: u8,
    parent: u64,
    registered_at: u64,
    last_attestation: u64,
    creator: String,
    child_count: u64,
    item: String,
    indexed: &'a str,
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
    pub(super) fn save_state(&self, state: &State) -> Result<D1PreparedStatement> {
        let text = serde_json::to_string(state).map_err(|error| Error::Runtime(error.into()))?;
        Ok(self
            .db
            .prepare(
                "INSERT INTO state (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
            )
            .bind(&[STATE_KEY.into(), text.into()])?)
    }

    /// Records how the run ended, keeping the rest of the state.
    pub(crate) async fn record_run(&self, outcome: super::RunOutcome) -> Result<()> {
        let mut state = self.state().await?;
        state.last_run = Some(outcome);
        self.save_state(&state)?.run().await?;
        Ok(())
    }

    /// The current rows of `ids` (those the index holds).
    pub(super) async fn held(&self, ids: &BTreeSet<u64>) -> Result<BTreeMap<u64, Held>> {
        #[derive(Deserialize)]
        struct Row {
            child_count: u64,
            indexed: String,
        }
        let rows: Vec<Row> = self
            .db
            .prepare(
                "SELECT child_count, indexed FROM agents \
                 WHERE until IS NULL AND id IN (SELECT value FROM json_each(?1))",
            )
            .bind(&[json_param(ids)?])?
            .all()
            .await?
            .results()?;
        rows.into_iter()
            .map(|row| {
                let agent: IndexedAgent = serde_json::from_str(&row.indexed)
                    .map_err(|error| Error::BadConfig(format!("an index row does not decode: {error}")))?;
                Ok((agent.record.agent_id, Held { agent, child_count: row.child_count }))
            })
            .collect()
    }

    /// Active agents the index holds whose `lastAttestation` lies in `range`: those whose
    /// compliance changes as the index's time moves across the range's week-old edge.
    pub(super) async fn active_attested_in(&self, range: &Range<u64>) -> Result<u64> {
        if range.is_empty() {
            return Ok(0);
        }
        let count: Option<u64> = self
            .db
            .prepare(
                "SELECT count(*) AS n FROM agents WHERE until IS NULL AND status = ?1 \
                 AND last_attestation >= ?2 AND last_attestation < ?3",
            )
            .bind(&[number(AgentStatus::Active as u64), number(range.start), number(range.end)])?
            .first(Some("n"))
            .await?;
        Ok(count.unwrap_or(0))
    }

    /// The touches earlier runs recorded at or after `block`.
    pub(super) async fn touches_since(&self, block: u64) -> Result<BTreeSet<Touch>> {
        #[derive(Deserialize)]
        struct Row {
            block: u64,
            agent_id: u64,
        }
        let rows: Vec<Row> = self
            .db
            .prepare("SELECT block, agent_id FROM touches WHERE block >= ?1")
            .bind(&[number(block)])?
            .all()
            .await?
            .results()?;
        Ok(rows.into_iter().map(|row| Touch { block: row.block, agent_id: row.agent_id }).collect())
    }

    /// The statements bringing the recorded touches up to date: `gone` deleted, `new` inserted,
    /// and those before `keep_from` forgotten. Only what changed is written: the window's
    /// touches that the logs still show stay as they are.
    pub(super) fn update_touches(
        &self,
        gone: &[Touch],
        new: &[Touch],
        keep_from: u64,
    ) -> Result<Vec<D1PreparedStatement>> {
        let pairs = |touches: &[Touch]| -> Vec<(u64, u64)> {
            touches
                .iter()
                .filter(|touch| touch.block >= keep_from)
                .map(|touch| (touch.block, touch.agent_id))
                .collect()
        };
        let mut statements =
            vec![self.db.prepare("DELETE FROM touches WHERE block < ?1").bind(&[number(keep_from)])?];
        if !gone.is_empty() {
            statements.push(
                self.db
                    .prepare(format!("DELETE FROM touches WHERE (block, agent_id) IN ({PAIRS_OF_PARAM_1})"))
                    .bind(&[json_param(&pairs(gone))?])?,
            );
        }
        if !new.is_empty() {
            statements.push(
                self.db
                    .prepare(format!("INSERT OR IGNORE INTO touches (block, agent_id) {PAIRS_OF_PARAM_1}"))
                    .bind(&[json_param(&pairs(new))?])?,
            );
        }
        Ok(statements)
    }

    /// The statements that end the current rows of `ids` at index block `block` (wall-clock
    /// `now`) and insert `rows` as holding from it. A row already written at `block` (a run at
    /// the same block as the last) is replaced.
    pub(super) fn write_versions(
        &self,
        ids: &BTreeSet<u64>,
        rows: &[(&IndexedAgent, u64)],
        block: u64,
        now: u64,
    ) -> Result<Vec<D1PreparedStatement>> {
        let texts: Vec<String> = rows
            .iter()
            .map(|(agent, _)| serde_json::to_string(agent).map_err(|error| Error::Runtime(error.into())))
            .collect::<Result<_>>()?;
        let new_rows: Vec<NewRow<'_>> = rows
            .iter()
            .zip(&texts)
            .map(|((agent, child_count), indexed)| {
                let record = &agent.record;
                NewRow {
                    id: record.agent_id,
                    status: record.status as u8,
                    parent: record.parent_agent_id,
                    registered_at: record.registered_at,
                    last_attestation: record.last_attestation,
                    creator: record.creator.to_checksum(None),
                    child_count: *child_count,
                    item: list_item(record),
                    indexed,
                }
            })
            .collect();
        Ok(vec![
            self.db
                .prepare(
                    "UPDATE agents SET until = ?2, superseded_at = ?3 WHERE until IS NULL AND since < ?2 \
                     AND id IN (SELECT value FROM json_each(?1))",
                )
                .bind(&[json_param(ids)?, number(block), number(now)])?,
            self.db
                .prepare(
                    "INSERT OR REPLACE INTO agents (id, since, until, superseded_at, status, parent, registered_at, \
                     last_attestation, creator, child_count, item, indexed) \
                     SELECT json_extract(value, '$.id'), ?2, NULL, NULL, json_extract(value, '$.status'), \
                     json_extract(value, '$.parent'), json_extract(value, '$.registered_at'), \
                     json_extract(value, '$.last_attestation'), json_extract(value, '$.creator'), \
                     json_extract(value, '$.child_count'), json_extract(value, '$.item'), \
                     json_extract(value, '$.indexed') FROM json_each(?1)",
                )
                .bind(&[json_param(&new_rows)?, number(block)])?,
            // A row replaced at the same block leaves no current row behind for a removed agent.
            self.db
                .prepare(
                    "DELETE FROM agents WHERE until IS NULL AND since = ?2 \
                     AND id IN (SELECT value FROM json_each(?1))",
                )
                .bind(&[json_param(&removed(ids, rows))?, number(block)])?,
        ])
    }

    /// The statements moving the status counts per bucket of ids by `moves` at index block
    /// `block` (wall-clock `now`): each moved count gets a new version, from the current one
    /// (or none: a bucket's first agent of the status), and the current one ends. A version
    /// written at `block` (a run at the same block as the last) is replaced.
    pub(super) fn write_bucket_moves(
        &self,
        moves: &BucketMoves,
        block: u64,
        now: u64,
    ) -> Result<Vec<D1PreparedStatement>> {
        if moves.is_empty() {
            return Ok(Vec::new());
        }
        let changes: Vec<(u8, u64, i64)> =
            moves.moves().map(|(status, bucket, change)| (status as u8, bucket, change)).collect();
        let keys: Vec<(u8, u64)> = changes.iter().map(|&(status, bucket, _)| (status, bucket)).collect();
        Ok(vec![
            // First: the new version reads the current one, which the next statement ends.
            self.db
                .prepare(
                    "INSERT OR REPLACE INTO status_buckets (status, bucket, since, until, superseded_at, agents) \
                     SELECT moved.status, moved.bucket, ?2, NULL, NULL, moved.change + coalesce((SELECT held.agents \
                     FROM status_buckets AS held WHERE held.status = moved.status AND held.bucket = moved.bucket \
                     AND held.until IS NULL), 0) FROM (SELECT json_extract(value, '$[0]') AS status, \
                     json_extract(value, '$[1]') AS bucket, json_extract(value, '$[2]') AS change \
                     FROM json_each(?1)) AS moved",
                )
                .bind(&[json_param(&changes)?, number(block)])?,
            self.db
                .prepare(format!(
                    "UPDATE status_buckets SET until = ?2, superseded_at = ?3 WHERE until IS NULL AND since < ?2 \
                     AND (status, bucket) IN ({PAIRS_OF_PARAM_1})"
                ))
                .bind(&[json_param(&keys)?, number(block), number(now)])?,
        ])
    }

    /// The statements deleting rows superseded before `before` (wall clock): no answer still
    /// reads a block that old.
    pub(super) fn collect_garbage(&self, before: u64) -> Result<Vec<D1PreparedStatement>> {
        ["agents", "status_buckets"]
            .into_iter()
            .map(|table| {
                Ok(self
                    .db
                    .prepare(format!("DELETE FROM {table} WHERE superseded_at < ?1"))
                    .bind(&[number(before)])?)
            })
            .collect()
    }

    /// Runs `statements` as one transaction.
    pub(super) async fn commit(&self, statements: Vec<D1PreparedStatement>) -> Result<()> {
        self.db.batch(statements).await?;
        Ok(())
    }

    /// The [`crate::routes`] answers' reads, at index block `block`.
    ///
    /// The newest registrations (by `registeredAt`, then id, descending), `limit` of them.
    pub(super) async fn recent(&self, block: u64, limit: u64) -> Result<Vec<kya_core::Agent>> {
        #[derive(Deserialize)]
        struct Row {
            indexed: String,
        }
        let rows: Vec<Row> = self
            .db
            .prepare(format!(
                "SELECT indexed FROM agents WHERE {HELD_AT} ORDER BY registered_at DESC, id DESC LIMIT ?2"
            ))
            .bind(&[number(block), number(limit)])?
            .all()
            .await?
            .results()?;
        rows.iter()
            .map(|row| {
                serde_json::from_str::<IndexedAgent>(&row.indexed)
                    .map(|agent| agent.record)
                    .map_err(|error| Error::BadConfig(format!("an index row does not decode: {error}")))
            })
            .collect()
    }

    /// The `/agents` items of ids in `ids`, by id.
    pub(super) async fn items_by_id(&self, block: u64, ids: &Range<u64>) -> Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.items(
            format!("SELECT item FROM agents WHERE {HELD_AT} AND id >= ?2 AND id < ?3 ORDER BY id"),
            &[number(block), number(ids.start), number(ids.end)],
        )
        .await
    }

    /// The `/agents` items of agents with `status`, by id, `limit` from the `offset`th.
    ///
    /// One query, whose reads do not grow with the page's depth: a running sum over the
    /// status's counts per bucket of ids finds the bucket holding the `offset`th agent and how
    /// many of the status come before it there; the page is read from that bucket's first id,
    /// skipping those (fewer than [`STATUS_BUCKET_IDS`]). It reads one small row per bucket
    /// and at most a bucket's rows before the page, where `OFFSET` alone read every row before
    /// it.
    pub(super) async fn items_with_status(
        &self,
        block: u64,
        status: AgentStatus,
        limit: u64,
        offset: u64,
    ) -> Result<Vec<String>> {
        self.items(
            format!(
                "WITH counted AS (SELECT bucket, agents, sum(agents) OVER (ORDER BY bucket) AS through \
                 FROM status_buckets WHERE status = ?2 AND {HELD_AT}), \
                 start AS (SELECT bucket * {STATUS_BUCKET_IDS} AS first_id, ?4 - (through - agents) AS skip \
                 FROM counted WHERE through > ?4 ORDER BY bucket LIMIT 1) \
                 SELECT item FROM agents WHERE status = ?2 AND {HELD_AT} AND id >= (SELECT first_id FROM start) \
                 ORDER BY id LIMIT ?3 OFFSET coalesce((SELECT skip FROM start), 0)"
            ),
            &[number(block), number(status as u64), number(limit), number(offset)],
        )
        .await
    }

    async fn items(&self, query: String, params: &[JsValue]) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct Row {
            item: String,
        }
        let rows: Vec<Row> = self.db.prepare(query).bind(params)?.all().await?.results()?;
        Ok(rows.into_iter().map(|row| row.item).collect())
    }

    /// Up to `limit` items of `/agents/compliance` after `after` (`lastAttestation`, id), in that
    /// order, at time `now`: rendered by D1 ([`compliance_item_sql`]) and handed over in groups
    /// of [`COMPLIANCE_ITEMS_PER_GROUP`], so the Worker takes a few long strings instead of
    /// decoding every row's values (which cost about 2.5 µs an agent).
    pub(super) async fn compliance_items(
        &self,
        block: u64,
        now: u64,
        after: (i64, u64),
        limit: u64,
    ) -> Result<Vec<RenderedItems>> {
        #[derive(Deserialize)]
        struct Group {
            items: String,
            last_attestation: i64,
            id: u64,
        }
        // `max(position)` makes the bare `last_attestation` and `id` the group's last row's
        // (SQLite's rule for a lone min() or max()); `ORDER BY` inside `group_concat` keeps the
        // items in the list's order whatever way the grouping runs.
        let query = format!(
            "SELECT group_concat(item, '{COMPLIANCE_SEPARATOR}' ORDER BY position) AS items, \
             max(position) AS last_position, last_attestation, id FROM ( \
               SELECT {item} AS item, row_number() OVER (ORDER BY last_attestation, id) AS position, \
                 last_attestation, id \
               FROM agents WHERE {HELD_AT} AND (last_attestation, id) > (?2, ?3) \
               ORDER BY last_attestation, id LIMIT ?4) \
             GROUP BY (position - 1) / {COMPLIANCE_ITEMS_PER_GROUP} ORDER BY last_position",
            item = compliance_item_sql("?5"),
        );
        let groups: Vec<Group> = self
            .db
            .prepare(query)
            .bind(&[
                number(block),
                JsValue::from_f64(after.0 as f64),
                number(after.1),
                number(limit),
                number(now),
            ])?
            .all()
            .await?
            .results()?;
        Ok(groups
            .into_iter()
            .map(|group| RenderedItems { items: group.items, last: (group.last_attestation, group.id) })
            .collect())
    }
}

/// Items of `/agents/compliance` joined into one string by D1: 100 are about 20 KB, far below
/// D1's 1,000,000-byte limit on a string, and a slice of 10,000 agents is 100 rows to take.
const COMPLIANCE_ITEMS_PER_GROUP: u64 = 100;

/// Consecutive items of `/agents/compliance`, rendered by D1.
pub(super) struct RenderedItems {
    /// The items' JSON, joined by [`COMPLIANCE_SEPARATOR`].
    pub(super) items: String,
    /// The last item's (`lastAttestation`, id): where the next read starts.
    pub(super) last: (i64, u64),
}

/// The ids of `ids` with no new row among `rows`: agents that leave the index.
fn removed(ids: &BTreeSet<u64>, rows: &[(&IndexedAgent, u64)]) -> Vec<u64> {
    let kept: BTreeSet<u64> = rows.iter().map(|(agent, _)| agent.record.agent_id).collect();
    ids.difference(&kept).copied().collect()
}

/// `value` as one JSON text parameter.
fn json_param<T: Serialize + ?Sized>(value: &T) -> Result<JsValue> {
    Ok(serde_json::to_string(value).map_err(|error| Error::Runtime(error.into()))?.into())
}

/// A whole number for D1 (a JavaScript number: exact up to 2^53, which ids, counts, blocks and
/// times stay far below).
fn number(value: u64) -> JsValue {
    JsValue::from_f64(value as f64)
}
