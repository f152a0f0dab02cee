//! The point answers from the index: `/kya/:wallet`, `/kya/batch`, `/kya/:wallet/pass`,
//! `/agent/:id` and `/agent/:id/lineage` read D1 beside the Worker instead of the chain's RPC endpoint, with no RPC at
//! all, while the index is fresh: filled, its block still the chain's, its last run at most
//! `INDEX_POINT_MAX_LAG_BLOCKS` behind the head it saw, and its state written within
//! `INDEX_POINT_MAX_AGE_SECS`. Each is one D1 statement (one `SELECT`, one snapshot): the state
//! row and the rows the answer shows, so the rows are those of the state's block, and the answer names that block
//! and judges standing by its time and the registry's grace period there.
//!
//! Otherwise ([`Point::Fallback`]) the answer reads the chain as before, and says why
//! (`X-Index-Fallback`).

use std::collections::BTreeMap;

use alloy_primitives::{Address, B256};
use kya_core::{
    Agent, BlockRef, StandingClock,
    registry::lineage::{self, LineageNode, NodeData},
};
use serde::Deserialize;

use super::{
    PointState, State,
    store::{STATE_KEY, decode_indexed},
};
use crate::{Error, Result, config::IndexConfig, d1::ReadSession, http::Source};

/// The index's block for a point answer: its number and time, its hash as the index recorded
/// it, and what standing there is judged by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexBlock {
    pub(crate) block: BlockRef,
    pub(crate) hash: B256,
    pub(crate) clock: StandingClock,
}

/// What the index made of a point request.
pub(crate) enum Point<T> {
    /// The answer's data at the index's block, and the source its headers name.
    Answer(IndexBlock, Source, T),
    /// The index cannot answer, for this reason: read the chain.
    Fallback(String),
}

/// A row of a point read: the agent as indexed, and its scope (`None`: not kept, or too long).
/// The read's one statement gives the state's row too: `part` 0, its JSON in `indexed`
/// ([`read`]); an agent's is `part` 1. Decoded from the array of its columns, in this order.
#[derive(Deserialize)]
struct AgentRow {
    part: u8,
    indexed: String,
    scope: Option<String>,
    #[serde(default)]
    children: Option<String>,
}

impl AgentRow {
    /// The agent whole: its record with its scope put back; `None` when the index keeps no scope
    /// for it.
    fn agent(self) -> Result<Option<(Agent, Option<String>)>> {
        let indexed = decode_indexed(&self.indexed)?;
        let Some(scope) = self.scope else { return Ok(None) };
        Ok(Some((Agent { operational_scope: scope, ..indexed.record }, self.children)))
    }
}

/// Columns of a point read: the row and its scope (and `children`, each query its own).
const AGENT_COLUMNS: &str = "agents.indexed AS indexed, agent_scopes.scope AS scope";
/// Where an agent's scope is found; a row without one has `scope` NULL.
const SCOPE_JOIN: &str = "LEFT JOIN agent_scopes ON agent_scopes.id = agents.id";

/// [`agents_of_wallets`] from the Worker's index, if it has one, read in a D1 session from
/// `bookmark` (the client's `X-D1-Bookmark`): with the session's bookmark after the read.
pub(crate) async fn wallets_from_index(
    env: &worker::Env,
    settings: &IndexConfig,
    wallets: &[Address],
    now: u64,
    bookmark: Option<&str>,
) -> Result<(Point<Vec<Option<Agent>>>, Option<String>)> {
    match ReadSession::open(env, bookmark) {
        Some(session) => {
            let point = agents_of_wallets(&session, settings, wallets, now).await?;
            Ok((point, session.bookmark()))
        }
        None => Ok((Point::Fallback("no index: the Worker has no INDEX binding".into()), None)),
    }
}

/// The headers of an answer read through [`wallets_from_index`]: the D1 session's `bookmark`
/// (for the client to send back), and where the answer came from (the index's lag and last run,
/// or why it read the chain: `X-Index-Fallback`).
pub(crate) fn answer_headers<T>(bookmark: Option<String>, point: &Point<T>) -> Vec<(&'static str, String)> {
    let mut pairs: Vec<(&'static str, String)> =
        bookmark.map(|bookmark| (BOOKMARK, bookmark)).into_iter().collect();
    match point {
        Point::Answer(_, source, _) => source.push_headers(&mut pairs),
        Point::Fallback(reason) => pairs.push((crate::http::INDEX_FALLBACK, reason.clone())),
    }
    pairs
}

/// The response header carrying a D1 session's bookmark, and the request header a client sends
/// it back in: its next answer is read from a replica at least as new.
pub(crate) const BOOKMARK: &str = "x-d1-bookmark";

/// The agents of `wallets` (each `None` without one), in order, at the index's block: the agent
/// whose record names the wallet and is not terminated (terminating frees the wallet on chain;
/// a revoked agent keeps it), as `getAgentByWallet` gives it.
pub(crate) async fn agents_of_wallets(
    session: &ReadSession,
    settings: &IndexConfig,
    wallets: &[Address],
    now: u64,
) -> Result<Point<Vec<Option<Agent>>>> {
    let lowercase: Vec<String> = wallets.iter().map(|wallet| format!("{wallet:#x}")).collect();
    let query = format!(
        "SELECT {AGENT_COLUMNS}, NULL AS children FROM agents {SCOPE_JOIN} \
         WHERE agents.wallet IN (SELECT value FROM json_each(?1)) AND agents.status != 3"
    );
    let json = serde_json::to_string(&lowercase).map_err(|error| Error::Runtime(error.into()))?;
    let FreshRead { at, source, rows, .. } =
        match read_fresh(session, settings, query, vec![json.into()], now).await? {
            Ok(read) => read,
            Err(reason) => return Ok(Point::Fallback(reason)),
        };
    let mut found: Vec<Agent> = Vec::with_capacity(rows.len());
    for row in rows {
        match row.agent()? {
            Some((agent, _)) => found.push(agent),
            None => return Ok(Point::Fallback("an agent's operational scope is not indexed".into())),
        }
    }
    // Two live agents can never share a wallet on chain; were the index given one, the later
    // registration is the one the registry maps.
    found.sort_by_key(|agent| agent.agent_id);
    let agents = wallets
        .iter()
        .map(|wallet| found.iter().rev().find(|agent| agent.agent_wallet == *wallet).cloned())
        .collect();
    Ok(Point::Answer(at, source, agents))
}

/// Agent `id` and its children's ids (ascending, the registry's order), at the index's block;
/// `None` for an id the registry has not given (a 404).
pub(crate) async fn agent(
    session: &ReadSession,
    settings: &IndexConfig,
    id: u64,
    now: u64,
) -> Result<Point<Option<(Agent, Vec<u64>)>>> {
    let query = format!(
        "SELECT {AGENT_COLUMNS}, (SELECT json_group_array(child.id) FROM \
         (SELECT id FROM agents WHERE parent = ?1 ORDER BY id) AS child) AS children \
         FROM agents {SCOPE_JOIN} WHERE agents.id = ?1"
    );
    let FreshRead { at, source, state, rows } =
        match read_fresh(session, settings, query, vec![id.into()], now).await? {
            Ok(read) => read,
            Err(reason) => return Ok(Point::Fallback(reason)),
        };
    let Some(row) = rows.into_iter().next() else {
        // Filled, the index holds every id the registry gave below `nextAgentId`.
        if id >= state.chain_next {
            return Ok(Point::Answer(at, source, None));
        }
        return Ok(Point::Fallback(format!("agent {id} is not in the index")));
    };
    let Some((agent, children)) = row.agent()? else {
        return Ok(Point::Fallback(format!("agent {id}'s operational scope is not indexed")));
    };
    let children: Vec<u64> = serde_json::from_str(children.as_deref().unwrap_or("[]"))
        .map_err(|error| Error::BadConfig(format!("an agent's children do not decode: {error}")))?;
    Ok(Point::Answer(at, source, Some((agent, children))))
}

/// The most nodes a lineage from the index reads: past it (a tree of thousands, all of whose
/// descendants the one query would read to the depth limit, shown or not) the chain's
/// level-by-level read, which fetches only the shown nodes, answers.
const LINEAGE_MAX_ROWS: usize = 2_000;

/// Agent `root`'s lineage tree (SPEC.md's bounds: [`lineage::MAX_LINEAGE_DEPTH`] levels,
/// [`lineage::MAX_LINEAGE_CHILDREN`] children shown per node) at the index's block; `None` for an
/// id the registry has not given (a 404). One query walks the parent column down to the depth
/// limit, each node with all its children's ids (the registry's order) for the truncation fields.
pub(crate) async fn lineage(
    session: &ReadSession,
    settings: &IndexConfig,
    root: u64,
    now: u64,
) -> Result<Point<Option<LineageNode>>> {
    let query = format!(
        "WITH RECURSIVE tree(id, depth) AS (SELECT ?1, 1 UNION ALL \
         SELECT child.id, tree.depth + 1 FROM tree JOIN agents AS child ON child.parent = tree.id \
         WHERE tree.depth < {depth}) \
         SELECT agents.indexed AS indexed, NULL AS scope, (SELECT json_group_array(child.id) FROM \
         (SELECT id FROM agents WHERE parent = tree.id ORDER BY id) AS child) AS children \
         FROM tree JOIN agents ON agents.id = tree.id LIMIT {limit}",
        depth = lineage::MAX_LINEAGE_DEPTH,
        limit = LINEAGE_MAX_ROWS + 1,
    );
    let FreshRead { at, source, state, rows } =
        match read_fresh(session, settings, query, vec![root.into()], now).await? {
            Ok(read) => read,
            Err(reason) => return Ok(Point::Fallback(reason)),
        };
    if rows.is_empty() {
        if root >= state.chain_next {
            return Ok(Point::Answer(at, source, None));
        }
        return Ok(Point::Fallback(format!("agent {root} is not in the index")));
    }
    if rows.len() > LINEAGE_MAX_ROWS {
        return Ok(Point::Fallback(format!(
            "agent {root}'s lineage holds more than {LINEAGE_MAX_ROWS} agents to the depth limit"
        )));
    }
    let mut nodes = BTreeMap::new();
    for row in rows {
        let agent = decode_indexed(&row.indexed)?.record;
        let children: Vec<u64> = serde_json::from_str(row.children.as_deref().unwrap_or("[]"))
            .map_err(|error| Error::BadConfig(format!("an agent's children do not decode: {error}")))?;
        let node = NodeData {
            wallet: agent.agent_wallet,
            generation: agent.generation,
            status: agent.status,
            children,
        };
        nodes.insert(agent.agent_id, node);
    }
    // Every shown node is below the root in the index, which holds every id the registry gave:
    // one missing means the index is not whole there.
    match lineage::build(root, &nodes) {
        Ok(tree) => Ok(Point::Answer(at, source, Some(tree))),
        Err(error) => {
            Ok(Point::Fallback(format!("agent {root}'s lineage is not whole in the index: {error}")))
        }
    }
}

/// What a point read found in an index fresh enough to answer: its block and the source an
/// answer names, its state, and the rows the query selected.
struct FreshRead {
    at: IndexBlock,
    source: Source,
    state: PointState,
    rows: Vec<AgentRow>,
}

/// [`read`], then [`fresh`]: `Err` with the fallback's reason when the index cannot be read or
/// is not fresh enough.
async fn read_fresh(
    session: &ReadSession,
    settings: &IndexConfig,
    query: String,
    params: Vec<crate::d1::Param>,
    now: u64,
) -> Result<std::result::Result<FreshRead, String>> {
    let (state, rows) = match read(session, query, params).await? {
        Ok(read) => read,
        Err(fallback) => return Ok(Err(fallback)),
    };
    Ok(fresh(&state, settings, now).map(|(at, source)| FreshRead { at, source, state, rows }))
}

/// The state row and the rows `query` selects (its columns `indexed`, `scope` and `children`),
/// in one statement: one `SELECT` reads one snapshot, so the rows are those of the state's
/// block, as a batch of the two (a transaction) gave them, for one statement's work in D1's
/// binding and the glue instead of two and a batch's. `Err` with the fallback's reason when the
/// index cannot be read.
async fn read(
    session: &ReadSession,
    query: String,
    mut params: Vec<crate::d1::Param>,
) -> Result<std::result::Result<(PointState, Vec<AgentRow>), String>> {
    let key = params.len() + 1;
    params.push(STATE_KEY.into());
    let sql = format!(
        "SELECT 0 AS part, json_remove(value, {unread}) AS indexed, NULL AS scope, NULL AS children \
         FROM state WHERE key = ?{key} UNION ALL SELECT 1, indexed, scope, children FROM ({query})",
        unread = UNREAD_STATE_PATHS.join(", ")
    );
    match session.rows::<AgentRow>(&sql, params).await {
        Ok(rows) => {
            let (state, rows): (Vec<AgentRow>, Vec<AgentRow>) =
                rows.into_iter().partition(|row| row.part == 0);
            let state = match state.first() {
                Some(row) => serde_json::from_str(&row.indexed).map_err(|error| {
                    Error::BadConfig(format!("the index's state does not decode: {error}"))
                })?,
                // Before the first run: not filled.
                None => PointState::from(&State::default()),
            };
            Ok(Ok((state, rows)))
        }
        Err(error) => {
            // The error goes to the log only: a header carries one short line.
            worker::console_warn!("reading the index for a point answer failed: {error}");
            Ok(Err("the index could not be read (its tables missing?)".into()))
        }
    }
}

/// The fields of the state row a point answer has no use for ([`PointState`] reads the rest),
/// left in D1 (`json_remove`): the row crosses into the Worker and is decoded without them.
const UNREAD_STATE_PATHS: [&str; 12] = [
    "'$.totals'",
    "'$.names'",
    "'$.lastRun'",
    "'$.feedNextBatch'",
    "'$.settledThrough'",
    "'$.feedLast'",
    "'$.lapsesFrom'",
    "'$.renewingBelow'",
    "'$.walkedAhead'",
    "'$.streamThrough'",
    "'$.putOff'",
    "'$.scopesFrom'",
];

/// The index's block, and the source an answer from it names, when the index is fresh enough
/// to answer for the chain at `now` (wall clock, Unix seconds); else why it is not.
fn fresh(
    state: &PointState,
    settings: &IndexConfig,
    now: u64,
) -> std::result::Result<(IndexBlock, Source), String> {
    let Some(max_lag) = settings.point_max_lag_blocks else {
        return Err("point answers from the index are off (INDEX_POINT_MAX_LAG_BLOCKS)".into());
    };
    if let Some(block) = state.block.filter(|_| state.block_orphaned) {
        return Err(format!(
            "the chain no longer holds the index's block {} (a reorganisation shortened it)",
            block.number
        ));
    }
    let Some(block) = state.complete_at() else { return Err("the index is not filled yet".into()) };
    let Some(hash) = state.block_hash else {
        return Err("the index has not recorded its block's hash".into());
    };
    let lag = state.head.saturating_sub(block.number);
    if lag > max_lag {
        return Err(format!(
            "the index was {lag} blocks behind the head at its last run (INDEX_POINT_MAX_LAG_BLOCKS is {max_lag})"
        ));
    }
    let age = now.saturating_sub(state.updated_at);
    if age > settings.point_max_age_secs {
        return Err(format!(
            "the index's last run was {age} s ago (INDEX_POINT_MAX_AGE_SECS is {})",
            settings.point_max_age_secs
        ));
    }
    let at = IndexBlock { block, hash, clock: state.clock_at(block) };
    Ok((at, Source::Index { lag_blocks: lag, run_at: state.updated_at }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths left in D1 are fields of the state, and none is one a point answer reads: a
    /// state row without them decodes as the whole row does.
    #[test]
    fn the_state_paths_left_unread_are_none_a_point_answer_reads() {
        let mut state = State {
            block: Some(BlockRef { number: 5, timestamp: 1_000 }),
            walked_ahead: vec![(1, 2)],
            renewing_below: Some((3, 4)),
            ..State::default()
        };
        state.totals.agents = 4;
        state.put_off.add(BlockRef { number: 4, timestamp: 990 }, [3]);
        let mut row = serde_json::to_value(&state).unwrap();
        let fields = row.as_object_mut().unwrap();
        for path in UNREAD_STATE_PATHS {
            let name = path.trim_matches('\'').trim_start_matches("$.");
            assert!(fields.remove(name).is_some(), "{name} is no field of the state");
        }
        let whole: PointState =
            serde_json::to_string(&state).and_then(|row| serde_json::from_str(&row)).unwrap();
        let without: PointState = serde_json::from_value(row).unwrap();
        assert_eq!(format!("{without:?}"), format!("{whole:?}"));
    }
}
