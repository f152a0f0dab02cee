//! The [`crate::routes`] answers' reads of the index, at the state row's block
//! ([`at_state_block`]): the newest registrations, `/agents` pages by id or by status, and
//! `/agents/compliance`'s items rendered by D1. The run's writes and the state row are the
//! parent module's.

use std::ops::Range;

use kya_core::{
    AgentStatus, StandingClock,
    index::{COMPLIANCE_QUOTE_STAND_IN, COMPLIANCE_SEPARATOR, STATUS_BUCKET_IDS, compliance_item_sql},
};
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{
    D1PreparedStatement, D1Result,
    js_sys::{Array, Reflect},
};

use super::{CURRENT_AT, STATE_KEY, VERSION_AT};
use crate::{
    Error, Result,
    d1::{Param, Store},
};

impl Store {
    /// The statement of the newest registrations (by `registeredAt`, then id, descending),
    /// `limit` of them; [`recent_agents`] decodes its rows.
    pub(in crate::index) fn recent(&self, limit: u64) -> Result<D1PreparedStatement> {
        // Each side ordered and limited on its own: the newest of both are among them.
        let query = at_state_block(&format!(
            "SELECT indexed FROM (SELECT * FROM (SELECT registered_at, id, indexed FROM agents \
             WHERE {CURRENT_AT} ORDER BY registered_at DESC, id DESC LIMIT ?2) \
             UNION ALL SELECT registered_at, id, indexed FROM agent_versions WHERE {VERSION_AT}) \
             ORDER BY registered_at DESC, id DESC LIMIT ?2"
        ));
        self.statement(&query, vec![STATE_KEY.into(), limit.into()])
    }

    /// The `/agents` items of ids in `ids`, by id.
    pub(in crate::index) async fn items_by_id(&self, block: u64, ids: &Range<u64>) -> Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.items(
            format!(
                "SELECT id, item FROM agents WHERE {CURRENT_AT} AND id >= ?2 AND id < ?3 \
                 UNION ALL SELECT id, item FROM agent_versions WHERE {VERSION_AT} AND id >= ?2 AND id < ?3 \
                 ORDER BY id"
            ),
            vec![block.into(), ids.start.into(), ids.end.into()],
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
    pub(in crate::index) fn items_with_status(
        &self,
        status: AgentStatus,
        limit: u64,
        offset: u64,
    ) -> Result<D1PreparedStatement> {
        let query = at_state_block(&format!(
            "WITH of_status AS (SELECT bucket, CASE ?2 WHEN 0 THEN active WHEN 1 THEN suspended \
             WHEN 2 THEN revoked ELSE terminated END AS agents FROM status_counts), \
             counted AS (SELECT bucket, agents, sum(agents) OVER (ORDER BY bucket) AS through FROM of_status), \
             start AS (SELECT bucket * {STATUS_BUCKET_IDS} AS first_id, ?4 - (through - agents) AS skip \
             FROM counted WHERE through > ?4 ORDER BY bucket LIMIT 1) \
             SELECT id, item FROM agents WHERE status = ?2 AND {CURRENT_AT} \
             AND id >= (SELECT first_id FROM start) \
             UNION ALL SELECT id, item FROM agent_versions WHERE status = ?2 AND {VERSION_AT} \
             AND id >= (SELECT first_id FROM start) \
             ORDER BY id LIMIT ?3 OFFSET coalesce((SELECT skip FROM start), 0)"
        ));
        self.statement(&query, vec![STATE_KEY.into(), (status as u64).into(), limit.into(), offset.into()])
    }

    async fn items(&self, query: String, params: Vec<Param>) -> Result<Vec<String>> {
        let rows: Vec<ItemRow> = self.all(self.statement(&query, params)?).await?;
        Ok(rows.into_iter().map(|row| row.item).collect())
    }

    /// Up to `limit` items of `/agents/compliance` after `after` (`lastAttestation`, id), in that
    /// order, judged by `clock` (the index's block's time and grace period): rendered by D1 ([`compliance_item_sql`]) and joined by it in groups
    /// of [`COMPLIANCE_ITEMS_PER_GROUP`], each led by [`COMPLIANCE_SEPARATOR`] unless it opens
    /// the list (`first`: these are its first items), each `"` as [`COMPLIANCE_QUOTE_STAND_IN`].
    /// `None` past the last item.
    ///
    /// The groups stay JavaScript strings, as D1's binding parsed them: decoding them into Rust
    /// (serde-wasm-bindgen copies a string into the wasm memory a UTF-16 unit at a time) was
    /// about 40% of the endpoint's CPU, and the response needs them back in JavaScript.
    pub(in crate::index) async fn compliance_items(
        &self,
        block: u64,
        clock: StandingClock,
        after: (i64, u64),
        limit: u64,
        first: bool,
    ) -> Result<Option<RenderedItems>> {
        // `max(position)` makes the bare `last_attestation` and `id` the group's last row's
        // (SQLite's rule for a lone min() or max()); `ORDER BY` inside `group_concat` keeps the
        // items in the list's order whatever way the grouping runs; `grp`, grouped by, is the
        // same on each of a group's rows.
        let query = format!(
            "SELECT CASE WHEN grp = 0 AND ?6 THEN '' ELSE '{COMPLIANCE_SEPARATOR}' END \
             || replace(group_concat(item, '{COMPLIANCE_SEPARATOR}' ORDER BY position), '\"', '{stand_in}') \
             AS items, \
             max(position) AS last_position, last_attestation, id FROM ( \
               SELECT {item} AS item, position, (position - 1) / {COMPLIANCE_ITEMS_PER_GROUP} AS grp, \
                 last_attestation, id FROM ( \
               SELECT *, row_number() OVER (ORDER BY last_attestation, id) AS position \
               FROM (SELECT id, creator, status, last_attestation, child_count FROM agents \
                 WHERE {CURRENT_AT} AND (last_attestation, id) > (?2, ?3) \
                 UNION ALL SELECT id, creator, status, last_attestation, child_count FROM agent_versions \
                 WHERE {VERSION_AT} AND (last_attestation, id) > (?2, ?3) \
                 ORDER BY last_attestation, id LIMIT ?4))) \
             GROUP BY grp ORDER BY grp",
            item = compliance_item_sql("?5", "?7"),
            // As an SQL string's text: a `'` doubled.
            stand_in = COMPLIANCE_QUOTE_STAND_IN.to_string().replace('\'', "''"),
        );
        let statement = self.statement(
            &query,
            vec![
                block.into(),
                Param::Signed(after.0),
                after.1.into(),
                limit.into(),
                clock.time.into(),
                u64::from(first).into(),
                clock.grace_period.into(),
            ],
        )?;
        let groups = self.all_in_javascript(statement).await?;
        let field = |object: &JsValue, name: &str| Reflect::get(object, &JsValue::from_str(name));
        let last_group = groups.length().checked_sub(1).map(|last| groups.get(last));
        let Some(last_group) = last_group else { return Ok(None) };
        let number = |name: &str| field(&last_group, name).ok().and_then(|value| value.as_f64());
        let (Some(last_attestation), Some(id)) = (number("last_attestation"), number("id")) else {
            return Err(Error::BadConfig("the index's compliance rows do not decode".into()));
        };
        let items = groups.iter().map(|group| field(&group, "items").unwrap_or_default()).collect();
        Ok(Some(RenderedItems { items, last: (last_attestation as i64, id as u64) }))
    }
}

/// The block of the state row, as an expression of parameter `?1` (the row's key).
const STATE_BLOCK: &str = "(SELECT json_extract(value, '$.block.number') FROM state WHERE key = ?1)";

/// `query`, whose `?1` is an index block, reading the state row's block instead: read in the
/// same batch as the state ([`Store::state_with`]), so there is no round trip to learn it first.
/// Its other parameters keep their numbers (none reaches `?10`, which `?1` would prefix).
fn at_state_block(query: &str) -> String {
    query.replace("?1", STATE_BLOCK)
}

/// An `/agents` item's row.
#[derive(Deserialize)]
struct ItemRow {
    item: String,
}

/// The `/agents` items of [`Store::items_with_status`]'s rows.
pub(in crate::index) fn page_items(rows: &D1Result) -> Result<Vec<String>> {
    let rows: Vec<ItemRow> = rows.results()?;
    Ok(rows.into_iter().map(|row| row.item).collect())
}

/// The agents of [`Store::recent`]'s rows.
pub(in crate::index) fn recent_agents(rows: &D1Result) -> Result<Vec<kya_core::Agent>> {
    #[derive(Deserialize)]
    struct Row {
        indexed: String,
    }
    let rows: Vec<Row> = rows.results()?;
    rows.iter().map(|row| super::decode_indexed(&row.indexed).map(|agent| agent.record)).collect()
}

/// Items of `/agents/compliance` joined into one string by D1: 100 are about 20 KB, far below
/// D1's 1,000,000-byte limit on a string, and a slice of 10,000 agents is 100 rows to take.
const COMPLIANCE_ITEMS_PER_GROUP: u64 = 100;

/// Consecutive items of `/agents/compliance`, rendered by D1.
pub(in crate::index) struct RenderedItems {
    /// The items' JSON in groups (JavaScript strings), each but the list's first led by
    /// [`COMPLIANCE_SEPARATOR`], each `"` as [`COMPLIANCE_QUOTE_STAND_IN`].
    pub(in crate::index) items: Array,
    /// The last item's (`lastAttestation`, id): where the next read starts.
    pub(in crate::index) last: (i64, u64),
}
