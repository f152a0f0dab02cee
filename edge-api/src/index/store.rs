//! The index's D1 statements. An agent's current row is kept in place (`agents`, holding from
//! index block `since`); the run copies the version it supersedes to `agent_versions` (held
//! until `until`) and updates the row, naming an indexed column only where its value changed, so
//! a change writes few rows and index entries (D1 bills both). An answer reads the rows that held
//! at its state's block: the current ones from before it, and the versions it still needs.
//!
//! Lists of ids and rows go to D1 as JSON parameters (`json_each`), in chunks of at most
//! [`CHUNK_BYTES`], so D1's limit on bound parameters is never reached and no parameter nears
//! its limit on strings; a value too long to go inside a chunk's JSON (a currency name of
//! control characters, escaped six bytes a byte) is bound alone. Every statement passes
//! [`crate::d1::Limits`] before it reaches D1.
//!
//! The answers' reads are in [`answers`]. Over 500 lines with its tests: the code is 508 lines
//! (the state row, the totals, and the rows and versions a run writes), and its test follows it.

pub(super) mod answers;

use std::{
    collections::{BTreeMap, BTreeSet},
    ops::Range,
};

use alloy_primitives::U512;
use kya_core::{
    AgentStatus,
    index::{BucketMoves, IndexedAgent, list_item, window_touches::WindowTouches},
};
use serde::{Deserialize, Serialize};
use worker::{D1PreparedStatement, D1Result};

use super::{
    State,
    tally::{Tally, TallyKey},
};
use crate::{
    Error, Result,
    d1::{CHUNK_BYTES, Param, Store, json_chunks, json_param},
};

/// The `state` row holding [`State`].
pub(super) const STATE_KEY: &str = "index";

/// The longest operational scope the index keeps (bytes): the registry here refuses more than
/// 1,024, the one deployed has no limit; an agent with a longer one has its point answers read
/// from the chain.
pub(crate) const MAX_INDEXED_SCOPE_BYTES: usize = 8 * 1024;
/// The current rows that held at index block `?1` (a row updated after it holds its version
/// from a later block: the version before is in `agent_versions`).
const CURRENT_AT: &str = "since <= ?1";
/// The superseded versions that held at index block `?1`.
const VERSION_AT: &str = "since <= ?1 AND until > ?1";
/// Pairs of numbers from the JSON array of arrays in parameter `?1`, as a row-value list.
const PAIRS_OF_PARAM_1: &str =
    "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1)";

/// An agent as the index holds it now, with its child count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) agent: IndexedAgent,
    pub(crate) child_count: u64,
    /// Whether `agent_scopes` holds its operational scope (or that it is too long to keep).
    pub(crate) scoped: bool,
}

/// A row as the run writes it (the JSON `json_each` reads).
#[derive(Serialize)]
struct NewRow {
    id: u64,
    /// The agent's wallet, lowercase hex: `/kya/:wallet` from the index finds it by this.
    wallet: String,
    status: u8,
    parent: u64,
    registered_at: u64,
    last_attestation: u64,
    creator: String,
    child_count: u64,
    item: String,
    indexed: String,
}

impl NewRow {
    /// Its columns' bytes, as D1 counts a row's size.
    fn bytes(&self) -> usize {
        self.wallet.len() + self.creator.len() + self.item.len() + self.indexed.len() + 10 * 8
    }
}

/// The state row's statement.
const STATE_SELECT: &str = "SELECT value FROM state WHERE key = ?1";

#[derive(Deserialize)]
struct StateRow {
    value: String,
}

impl Store {
    /// The indexer's state (the default before the first run).
    pub(crate) async fn state(&self) -> Result<State> {
        let rows: Vec<StateRow> = self.all(self.statement(STATE_SELECT, vec![STATE_KEY.into()])?).await?;
        decode_state(rows)
    }

    /// The state, with every total kept by name if `tallies` (left out when the state says they
    /// are more than an answer renders, [`super::tally::Names::fits`]), and the rows `rows`
    /// selects at the state's own block ([`at_state_block`]): one D1 batch, so one round trip
    /// and one transaction, and the totals and rows are those of the block the state names.
    pub(super) async fn state_with(
        &self,
        tallies: bool,
        rows: Option<D1PreparedStatement>,
    ) -> Result<StateRead> {
        if !tallies && rows.is_none() {
            // The state alone (`/stats`): one statement needs no batch, which D1 runs as a
            // transaction with each statement's results wrapped apart.
            return Ok(StateRead { state: self.state().await?, tallies: None, rows: None });
        }
        let (most, bytes) = super::tally::ANSWER_NAMES;
        let mut statements = vec![self.statement(STATE_SELECT, vec![STATE_KEY.into()])?];
        if tallies {
            statements.push(self.statement(
                "SELECT kind, key, name, count, total FROM tallies WHERE kind IN (2, 3) OR (SELECT \
                 coalesce(json_extract(value, '$.names.count'), 0) <= ?2 \
                 AND coalesce(json_extract(value, '$.names.bytes'), 0) <= ?3 \
                 AND coalesce(json_extract(value, '$.names.unstored'), 0) = 0 FROM state WHERE key = ?1)",
                vec![STATE_KEY.into(), most.into(), bytes.into()],
            )?);
        }
        let with_rows = rows.is_some();
        statements.extend(rows);
        let mut results = self.batch(statements).await?.into_iter();
        let mut next =
            || results.next().ok_or_else(|| Error::BadConfig("D1's batch returned too few results".into()));
        let state = decode_state(next()?.results()?)?;
        let tallies = if tallies {
            let rows: Vec<TallyRow> = next()?.results()?;
            Some(rows.into_iter().map(TallyRow::into_tally).collect::<Result<_>>()?)
        } else {
            None
        };
        let rows = if with_rows { Some(next()?) } else { None };
        Ok(StateRead { state, tallies, rows })
    }

    /// The indexer's state, and the touches of the re-scanned window earlier runs recorded
    /// beside it (empty before the first): one row, one query.
    pub(super) async fn state_and_touches(&self) -> Result<(State, WindowTouches)> {
        #[derive(Deserialize)]
        struct Row {
            value: String,
            touches: Option<String>,
        }
        let mut rows: Vec<Row> = self
            .all(self.statement("SELECT value, touches FROM state WHERE key = ?1", vec![STATE_KEY.into()])?)
            .await?;
        let touches = match rows.first_mut().and_then(|row| row.touches.take()) {
            None => WindowTouches::default(),
            Some(text) => serde_json::from_str(&text).map_err(|error| {
                Error::BadConfig(format!("the index's touches of its window do not decode: {error}"))
            })?,
        };
        let state = decode_state(rows.into_iter().map(|row| StateRow { value: row.value }).collect())?;
        Ok((state, touches))
    }

    /// The statement storing `state`.
    pub(super) fn save_state(&self, state: &State) -> Result<D1PreparedStatement> {
        let text = serde_json::to_string(state).map_err(|error| Error::Runtime(error.into()))?;
        self.state_put(STATE_KEY, text)
    }

    /// The statement storing `state` with `touches`, the record of the re-scanned window, in the
    /// same row: a run that writes saves its state anyway, so the record costs no row written of
    /// its own (a table of touches cost two a change: each inserted, then deleted).
    pub(super) fn save_state_with_touches(
        &self,
        state: &State,
        touches: &WindowTouches,
    ) -> Result<D1PreparedStatement> {
        let value = serde_json::to_string(state).map_err(|error| Error::Runtime(error.into()))?;
        let touches = serde_json::to_string(touches).map_err(|error| Error::Runtime(error.into()))?;
        self.limits().check_row("state", 0, STATE_KEY.len() + value.len() + touches.len())?;
        self.statement(
            "INSERT INTO state (key, value, touches) VALUES (?1, ?2, ?3) \
             ON CONFLICT (key) DO UPDATE SET value = ?2, touches = ?3",
            vec![STATE_KEY.into(), value.into(), touches.into()],
        )
    }

    /// The value of `state`'s row `key` (the outlets' cursors and chains keep theirs beside the
    /// indexer's), `None` before one is stored.
    pub(super) async fn state_value(&self, key: &str) -> Result<Option<String>> {
        let rows: Vec<StateRow> = self.all(self.statement(STATE_SELECT, vec![key.into()])?).await?;
        Ok(rows.into_iter().next().map(|row| row.value))
    }

    /// The statement storing `value` as `state`'s row `key`.
    pub(super) fn state_put(&self, key: &str, value: String) -> Result<D1PreparedStatement> {
        self.statement(
            "INSERT INTO state (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
            vec![key.into(), value.into()],
        )
    }

    /// Records how a run that wrote no rows ended: `update` applied to the state as stored.
    pub(crate) async fn record_run(&self, update: impl FnOnce(&mut State)) -> Result<()> {
        let mut state = self.state().await?;
        update(&mut state);
        self.commit(vec![self.save_state(&state)?]).await
    }

    /// The tallies of `keys` the index holds (each with its name's length, not its name).
    pub(super) async fn tallies(&self, keys: &BTreeSet<TallyKey>) -> Result<Vec<Tally>> {
        let keys: Vec<(u8, &str)> = keys.iter().map(|key| (key.kind as u8, key.key.as_str())).collect();
        let mut tallies = Vec::new();
        for chunk in json_chunks(&keys, CHUNK_BYTES)? {
            let rows: Vec<TallyRow> = self
                .all(self.statement(
                    &format!(
                        "SELECT kind, key, NULL AS name, length(CAST(name AS BLOB)) AS name_bytes, count, total \
                         FROM tallies WHERE (kind, key) IN ({PAIRS_OF_PARAM_1})"
                    ),
                    vec![chunk.into()],
                )?)
                .await?;
            for row in rows {
                tallies.push(row.into_tally()?);
            }
        }
        Ok(tallies)
    }

    /// The statements storing `tallies` (a name given only for a key new to the index, and
    /// `None` for one too long to store) and deleting `gone`.
    pub(super) fn write_tallies(
        &self,
        tallies: &[(Tally, Option<&str>)],
        gone: &[TallyKey],
    ) -> Result<Vec<D1PreparedStatement>> {
        #[derive(Serialize)]
        struct Row<'a>(u8, &'a str, Option<&'a str>, u64, String);
        const UPSERT: &str =
            "ON CONFLICT (kind, key) DO UPDATE SET count = excluded.count, total = excluded.total";
        let mut statements = Vec::new();
        let mut small = Vec::new();
        for (tally, name) in tallies {
            let row =
                Row(tally.key.kind as u8, &tally.key.key, *name, tally.count, format!("{:#x}", tally.total));
            let text = serde_json::to_string(&row).map_err(|error| Error::Runtime(error.into()))?;
            if text.len() <= CHUNK_BYTES {
                small.push(row);
                continue;
            }
            // A name whose JSON is longer than a chunk: bound as itself, not escaped again.
            self.limits().check_row("tallies", 0, text.len().min(name.map_or(0, str::len) + 200))?;
            statements.push(self.statement(
                &format!(
                    "INSERT INTO tallies (kind, key, name, count, total) VALUES (?1, ?2, ?3, ?4, ?5) {UPSERT}"
                ),
                vec![
                    u64::from(row.0).into(),
                    row.1.into(),
                    row.2.map_or(Param::Null, Param::from),
                    row.3.into(),
                    row.4.into(),
                ],
            )?);
        }
        for chunk in json_chunks(&small, CHUNK_BYTES)? {
            statements.push(self.statement(
                &format!(
                    "INSERT INTO tallies (kind, key, name, count, total) SELECT json_extract(value, '$[0]'), \
                     json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'), \
                     json_extract(value, '$[4]') FROM json_each(?1) WHERE true {UPSERT}"
                ),
                vec![chunk.into()],
            )?);
        }
        let gone: Vec<(u8, &str)> = gone.iter().map(|key| (key.kind as u8, key.key.as_str())).collect();
        for chunk in json_chunks(&gone, CHUNK_BYTES)? {
            statements.push(self.statement(
                &format!("DELETE FROM tallies WHERE (kind, key) IN ({PAIRS_OF_PARAM_1})"),
                vec![chunk.into()],
            )?);
        }
        Ok(statements)
    }

    /// The current rows of `ids` (those the index holds).
    pub(super) async fn held(&self, ids: &BTreeSet<u64>) -> Result<BTreeMap<u64, Held>> {
        #[derive(Deserialize)]
        struct Row {
            child_count: u64,
            indexed: String,
            scoped: u8,
        }
        let rows: Vec<Row> = self
            .all(self.statement(
                "SELECT child_count, indexed, EXISTS (SELECT 1 FROM agent_scopes WHERE agent_scopes.id = agents.id) \
                 AS scoped FROM agents WHERE id IN (SELECT value FROM json_each(?1))",
                vec![json_param(ids)?],
            )?)
            .await?;
        rows.into_iter()
            .map(|row| {
                let held = Held {
                    agent: decode_indexed(&row.indexed)?,
                    child_count: row.child_count,
                    scoped: row.scoped != 0,
                };
                Ok((held.agent.record.agent_id, held))
            })
            .collect()
    }

    /// The agents the index holds with ids in `ids` and no row in `agent_scopes` (ascending): an
    /// index filled before it kept scopes (`index::run::scope_backfill`). Reads at most the range's
    /// rows, by the primary keys of both tables.
    pub(super) async fn unscoped_in(&self, ids: &Range<u64>) -> Result<Vec<u64>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        #[derive(Deserialize)]
        struct Row {
            id: u64,
        }
        let rows: Vec<Row> = self
            .all(self.statement(
                "SELECT id FROM agents WHERE id >= ?1 AND id < ?2 \
                 AND NOT EXISTS (SELECT 1 FROM agent_scopes WHERE agent_scopes.id = agents.id) ORDER BY id",
                vec![ids.start.into(), ids.end.into()],
            )?)
            .await?;
        Ok(rows.into_iter().map(|row| row.id).collect())
    }

    /// Active agents the index holds whose `lastAttestation` lies in `range`: those whose
    /// compliance changes as the index's time moves across the range's week-old edge.
    pub(super) async fn active_attested_in(&self, range: &Range<u64>) -> Result<u64> {
        if range.is_empty() {
            return Ok(0);
        }
        #[derive(Deserialize)]
        struct Row {
            n: u64,
        }
        let rows: Vec<Row> = self
            .all(self.statement(
                "SELECT count(*) AS n FROM agents WHERE status = ?1 \
                 AND last_attestation >= ?2 AND last_attestation < ?3",
                vec![(AgentStatus::Active as u64).into(), range.start.into(), range.end.into()],
            )?)
            .await?;
        Ok(rows.first().map_or(0, |row| row.n))
    }

    /// The statements that supersede the current rows of `ids` at index block `block`
    /// (wall-clock `now`) by `rows` (agents as [`kya_core::index::IndexedAgent::stored`] keeps
    /// them, with their child counts and the row they replace, if any), in chunks: each current
    /// row is copied to `agent_versions` first (unless it was written at `block` itself: a run at
    /// the same block as the last replaces it), then updated in place, or deleted for an agent
    /// that leaves the index. An update names an indexed column (status, `lastAttestation`,
    /// `registeredAt`) only for the rows whose value of it changed: D1 bills an index entry
    /// written for each row whose write includes the column.
    pub(super) fn write_versions(
        &self,
        ids: &BTreeSet<u64>,
        rows: &[(&IndexedAgent, u64, Option<&IndexedAgent>)],
        block: u64,
        now: u64,
    ) -> Result<Vec<D1PreparedStatement>> {
        // The rows grouped by the indexed columns their write must name.
        let mut groups: BTreeMap<[bool; 5], Vec<NewRow>> = BTreeMap::new();
        for (agent, child_count, old) in rows {
            let row = new_row(agent, *child_count)?;
            self.limits().check_row("agents", row.id, row.bytes())?;
            let (new, old) = (&agent.record, old.map(|old| &old.record));
            let moved = [
                old.is_none_or(|old| old.status != new.status),
                old.is_none_or(|old| old.last_attestation != new.last_attestation),
                old.is_none_or(|old| old.registered_at != new.registered_at),
                old.is_none_or(|old| old.parent_agent_id != new.parent_agent_id),
                old.is_none_or(|old| old.agent_wallet != new.agent_wallet),
            ];
            groups.entry(moved).or_default().push(row);
        }
        let mut statements = Vec::new();
        for chunk in json_chunks(&ids.iter().collect::<Vec<_>>(), CHUNK_BYTES)? {
            statements.push(self.statement(
                "INSERT OR REPLACE INTO agent_versions (id, since, until, superseded_at, status, parent, \
                 registered_at, last_attestation, creator, child_count, item, indexed) \
                 SELECT id, since, ?2, ?3, status, parent, registered_at, last_attestation, creator, child_count, \
                 item, indexed FROM agents WHERE since < ?2 AND id IN (SELECT value FROM json_each(?1))",
                vec![chunk.into(), block.into(), now.into()],
            )?);
        }
        // Agents that leave the index (a reorganisation took their registration away), with
        // their scopes.
        for chunk in json_chunks(&removed(ids, rows), CHUNK_BYTES)? {
            for table in ["agents", "agent_scopes"] {
                statements.push(self.statement(
                    &format!("DELETE FROM {table} WHERE id IN (SELECT value FROM json_each(?1))"),
                    vec![chunk.clone().into()],
                )?);
            }
        }
        for (moved, rows) in &groups {
            let set = upsert_set(*moved);
            for chunk in json_chunks(rows, CHUNK_BYTES)? {
                statements.push(self.statement(
                    &format!(
                        "INSERT INTO agents (id, since, status, parent, registered_at, last_attestation, creator, \
                         child_count, item, indexed, wallet) \
                         SELECT json_extract(value, '$.id'), ?2, json_extract(value, '$.status'), \
                         json_extract(value, '$.parent'), json_extract(value, '$.registered_at'), \
                         json_extract(value, '$.last_attestation'), json_extract(value, '$.creator'), \
                         json_extract(value, '$.child_count'), json_extract(value, '$.item'), \
                         json_extract(value, '$.indexed'), json_extract(value, '$.wallet') FROM json_each(?1) \
                         WHERE true \
                         ON CONFLICT (id) DO UPDATE SET {set}"
                    ),
                    vec![chunk.into(), block.into()],
                )?);
            }
        }
        Ok(statements)
    }

    /// The statements writing `scopes` (agent id, its operational scope; `None`: longer than
    /// [`MAX_INDEXED_SCOPE_BYTES`], kept as NULL), the scopes of agents whose registration the
    /// index holds for the first time (or held before it kept scopes).
    pub(super) fn write_scopes(&self, scopes: &[(u64, Option<&str>)]) -> Result<Vec<D1PreparedStatement>> {
        json_chunks(scopes, CHUNK_BYTES)?
            .into_iter()
            .map(|chunk| {
                self.statement(
                    "INSERT OR REPLACE INTO agent_scopes (id, scope) \
                     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1)",
                    vec![chunk.into()],
                )
            })
            .collect()
    }

    /// The statements moving the status counts per bucket of ids by `moves`: one row per bucket
    /// that moved, holding its four counts, inserted (a bucket's first agents) or updated in
    /// place. The counts are current only: they are read in the same D1 batch as the state row
    /// ([`Store::state_with`]), which sees them and the block they hold at together, so no
    /// answer needs an earlier version (versioned, a count moved cost 5 rows written; now a
    /// bucket's row costs 1, however many of its counts moved).
    pub(super) fn write_bucket_moves(&self, moves: &BucketMoves) -> Result<Vec<D1PreparedStatement>> {
        let rows: Vec<(u64, [i64; 4])> = moves.by_bucket().into_iter().collect();
        json_chunks(&rows, CHUNK_BYTES)?
            .into_iter()
            .map(|chunk| {
                self.statement(
                    "INSERT INTO status_counts (bucket, active, suspended, revoked, terminated) \
                     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1][0]'), \
                     json_extract(value, '$[1][1]'), json_extract(value, '$[1][2]'), \
                     json_extract(value, '$[1][3]') FROM json_each(?1) WHERE true \
                     ON CONFLICT (bucket) DO UPDATE SET active = active + excluded.active, \
                     suspended = suspended + excluded.suspended, revoked = revoked + excluded.revoked, \
                     terminated = terminated + excluded.terminated",
                    vec![chunk.into()],
                )
            })
            .collect()
    }

    /// The statements deleting rows superseded before `before` (wall clock): no answer still
    /// reads a block that old.
    pub(super) fn collect_garbage(&self, before: u64) -> Result<Vec<D1PreparedStatement>> {
        Ok(vec![self.statement("DELETE FROM agent_versions WHERE superseded_at < ?1", vec![before.into()])?])
    }
}

/// What [`Store::state_with`] read.
pub(super) struct StateRead {
    pub(super) state: State,
    /// The totals kept by name, when asked for.
    pub(super) tallies: Option<Vec<Tally>>,
    /// The rows of the statement given, undecoded.
    pub(super) rows: Option<D1Result>,
}

/// The ids of `ids` with no new row among `rows`: agents that leave the index.
fn removed(ids: &BTreeSet<u64>, rows: &[(&IndexedAgent, u64, Option<&IndexedAgent>)]) -> Vec<u64> {
    let kept: BTreeSet<u64> = rows.iter().map(|(agent, ..)| agent.record.agent_id).collect();
    ids.difference(&kept).copied().collect()
}

/// The `SET` of an agent row's update: every column that is in no index, and of the indexed
/// ones (status, `lastAttestation`, `registeredAt`, parent, wallet) those `moved` says changed.
fn upsert_set(moved: [bool; 5]) -> String {
    let mut set = String::from(
        "since = excluded.since, creator = excluded.creator, \
         child_count = excluded.child_count, item = excluded.item, indexed = excluded.indexed",
    );
    let indexed_columns = ["status", "last_attestation", "registered_at", "parent", "wallet"];
    for (column, moved) in indexed_columns.into_iter().zip(moved) {
        if moved {
            set.push_str(&format!(", {column} = excluded.{column}"));
        }
    }
    set
}

/// An agent's row as the run writes it.
fn new_row(agent: &IndexedAgent, child_count: u64) -> Result<NewRow> {
    let record = &agent.record;
    Ok(NewRow {
        id: record.agent_id,
        wallet: format!("{:#x}", record.agent_wallet),
        status: record.status as u8,
        parent: record.parent_agent_id,
        registered_at: record.registered_at,
        last_attestation: record.last_attestation,
        creator: record.creator.to_checksum(None),
        child_count,
        item: list_item(record),
        indexed: serde_json::to_string(agent).map_err(|error| Error::Runtime(error.into()))?,
    })
}

/// The bytes the run writes for `agent`'s row (its JSON in a chunk's parameter): what a run's
/// budget counts.
pub(super) fn row_bytes(agent: &IndexedAgent) -> Result<usize> {
    Ok(serde_json::to_string(&new_row(agent, 0)?).map_err(|error| Error::Runtime(error.into()))?.len())
}

/// An agent as a row's `indexed` column keeps it: every read of rows decodes them here.
pub(in crate::index) fn decode_indexed(indexed: &str) -> Result<IndexedAgent> {
    serde_json::from_str(indexed)
        .map_err(|error| Error::BadConfig(format!("an index row does not decode: {error}")))
}

fn decode_state(rows: Vec<StateRow>) -> Result<State> {
    state_of(rows.first().map(|row| row.value.as_str()))
}

/// The state stored as `value`; the default without a state row (before the first run).
fn state_of(value: Option<&str>) -> Result<State> {
    match value {
        None => Ok(State::default()),
        Some(value) => serde_json::from_str(value)
            .map_err(|error| Error::BadConfig(format!("the index's state does not decode: {error}"))),
    }
}

/// A row of `tallies`.
#[derive(Deserialize)]
struct TallyRow {
    kind: u8,
    key: String,
    name: Option<String>,
    #[serde(default)]
    name_bytes: Option<u64>,
    count: u64,
    total: String,
}

impl TallyRow {
    fn into_tally(self) -> Result<Tally> {
        let bad = || {
            Error::BadConfig(format!("the index's tally {} of kind {} does not decode", self.key, self.kind))
        };
        let kind = super::tally::TallyKind::try_from(self.kind).map_err(|()| bad())?;
        let total: U512 = self.total.parse().map_err(|_| bad())?;
        let name_bytes = self.name_bytes.or_else(|| self.name.as_ref().map(|name| name.len() as u64));
        Ok(Tally {
            key: TallyKey { kind, key: self.key },
            name: self.name,
            name_bytes,
            count: self.count,
            total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An update names an indexed column only when its value moved: D1 bills an index entry for
    /// each row whose write includes the column.
    #[test]
    fn updates_name_only_the_indexed_columns_that_moved() {
        let unindexed = "since = excluded.since, creator = excluded.creator, \
                         child_count = excluded.child_count, item = excluded.item, indexed = excluded.indexed";
        assert_eq!(upsert_set([false; 5]), unindexed);
        assert_eq!(
            upsert_set([false, true, false, false, false]),
            format!("{unindexed}, last_attestation = excluded.last_attestation")
        );
        assert_eq!(
            upsert_set([true; 5]),
            format!(
                "{unindexed}, status = excluded.status, last_attestation = excluded.last_attestation, \
                 registered_at = excluded.registered_at, parent = excluded.parent, wallet = excluded.wallet"
            )
        );
    }
}
