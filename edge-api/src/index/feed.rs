//! A run's part of the change feed (docs/change-feed.md): what it appends, in the same D1
//! commit as the index's rows and state, so a run killed midway leaves both as they were.
//!
//! - **Settlements.** The provisional entries after `settled_through` are read (none when
//!   nothing waits) and settled against the chain's hashes at their heights
//!   (`kya_core::feed::run::settle_entries`): `final` once `FEED_FINALITY_DEPTH` blocks follow
//!   theirs, `retracted` once another block stands at that height. The highest waiting entry's
//!   block tells whether anything was reorganised (its hash in the logs the run re-scanned, or
//!   else its header); only then are the others' headers asked. Under the pacer, confirmations
//!   ride in a batch the run writes anyway, or wait for the first run of the next minute.
//! - **Changes.** Each agent the run reads and writes (not those it puts off: the run that
//!   reads them walks them) is walked from the row the index held, through its logs of the new
//!   blocks, to the record read at the run's block (`changes_of_run`). After a reorganisation,
//!   the new blocks' logs from the fork on are walked too, and the agents whose changes were
//!   retracted are walked from their record at the block before the fork.
//! - **Lapses.** Agents the run does not read whose `lastAttestation` plus the registry's grace
//!   period passed by the run's block time (time passed, or the owner shortened the period), from
//!   where the last run's search stopped (`lapses_from`), are found by the `agents` table's
//!   `(last_attestation, id)` index, at most `FEED_LAPSES_PER_RUN`, and walked with no logs from
//!   the last second their attestation was current: their `agent.attestation_expired`.
//! - **Renewals.** When the owner lengthens the grace period, the agents shown lapsed whose
//!   attestation is current again are found the same way, newest first, and walked from lapsed:
//!   their `agent.compliance_changed` to compliant. Both share `FEED_LAPSES_PER_RUN`; a change
//!   that flips more agents is walked over as many runs (`renewing_below` holds where the
//!   renewals resume), and no lapse is searched for meanwhile.
//! - **Retention.** Batches older than `FEED_RETENTION_SECS` are deleted from the oldest, a
//!   bounded number at a time, never the newest.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::{Address, B256};
use kya_core::{
    Agent, BlockRef, StandingClock,
    feed::{
        Cursor, Event, EventBlock, Known, Standing, finality,
        reconcile::{Told, corrections},
        run::{Appending, RunChanges, Settling, append, changes_of_run, settle_entries},
    },
    index::{IndexedAgent, logs::AgentLogEntry},
};
use serde::Deserialize;
use worker::D1PreparedStatement;

use self::search::{Key, Searches};
use super::{
    State,
    headers::Headers,
    store::{Held, decode_indexed},
};
use crate::{
    Result,
    config::FeedConfig,
    d1::{CHUNK_BYTES, Param, Store},
    reads,
    rpc::Rpc,
};

mod search;

/// The most batches a run reads for the entries still waiting: the depth's worth of runs, and
/// then some (a batch holds a run's entries).
const UNSETTLED_BATCHES: u64 = 256;
/// The most old batches one retention step deletes: more than a minute of runs writes.
const RETENTION_BATCHES_PER_STEP: u64 = 64;
/// The most agents `State::walked_ahead` names (the nearest the searches' cursors kept): past
/// it, a read agent far ahead of a search slowed by its cap may have its lapse said twice.
const WALKED_AHEAD_KEPT: usize = 256;

/// A run as the feed sees it: where it reads and writes, and what the run knows. One context
/// for [`write()`] and [`walk`].
pub(super) struct RunFeed<'a> {
    pub(super) store: &'a Store,
    pub(super) rpc: &'a Rpc<'a>,
    pub(super) registry: Address,
    pub(super) config: &'a FeedConfig,
    /// Wall-clock time (Unix seconds): the batches' `created_at`, and the retention's clock.
    pub(super) now: u64,
    /// The index's block before the run (`None`: the first run, which the feed starts after).
    pub(super) indexed: Option<BlockRef>,
    /// The run's block, and its hash.
    pub(super) at: BlockRef,
    pub(super) at_hash: B256,
    /// The registry's `attestationGracePeriod()` at the run's block (the index's state still
    /// holds the one at its block before the run).
    pub(super) grace_period: u64,
    /// The registry's logs the run followed, up to its block.
    pub(super) logs: &'a [AgentLogEntry],
    /// The agents the run writes (read, not put off), as read at its block (`None`: gone).
    pub(super) read: BTreeMap<u64, Option<&'a Agent>>,
    /// The agents as the index held them before the run.
    pub(super) held: &'a BTreeMap<u64, Held>,
    /// Agents of `read` that earlier runs put off (`kya_core::feed::put_off`), each with the
    /// index's block it is walked from, and their logs from there up to the index's block.
    pub(super) put_off: &'a BTreeMap<u64, BlockRef>,
    pub(super) put_off_logs: &'a [AgentLogEntry],
}

/// What the feed adds to the run's commit.
#[derive(Default)]
pub(super) struct Written {
    pub(super) statements: Vec<D1PreparedStatement>,
    /// For the run's message (empty when the feed did not move).
    pub(super) summary: String,
}

/// The feed's statements for one run, and `state`'s feed fields moved past them. `minute_due`:
/// the run is the first of its minute (every run is, under the Cron Trigger), which does the
/// feed's once-a-minute steps: retention, and the confirmations no batch of a change carried.
/// `headers` holds those the run asked for already; the feed asks for more through it.
pub(super) async fn write(
    run: &RunFeed<'_>,
    headers: &mut Headers,
    state: &mut State,
    minute_due: bool,
) -> Result<Written> {
    let mut written = Written::default();
    // The first run fills the index; the feed starts after it.
    if let Some(indexed) = run.indexed {
        written = walk(run, headers, state, indexed, minute_due).await?;
    }
    // After the inserts: the newest batch, which it spares, is this run's if it wrote one.
    if minute_due {
        let before = run.now.saturating_sub(run.config.retention_secs);
        written.statements.push(run.store.feed_retention(before)?);
    }
    Ok(written)
}

/// [`write()`] after the first run: settlements, changes and lapses.
async fn walk(
    run: &RunFeed<'_>,
    headers: &mut Headers,
    state: &mut State,
    indexed: BlockRef,
    minute_due: bool,
) -> Result<Written> {
    let RunFeed { store, rpc, registry, config, now, at, at_hash, grace_period, .. } = *run;
    let mut written = Written::default();
    // What the feed showed standing at (the index's block before the run), and what the run's
    // block judges it by.
    let shown_clock = state.clock_at(indexed);
    let clock = StandingClock::new(at.timestamp, grace_period);

    let unsettled = if state.settled_through < state.feed_last {
        finality::unsettled(&store.feed_after(state.settled_through).await?)
    } else {
        Vec::new()
    };

    // Headers: the new blocks' logs whose node gave no time, and the highest waiting entry's
    // block (is it still the chain's?) unless the re-scanned logs name its hash.
    let hashes_in_logs: BTreeMap<u64, B256> =
        run.logs.iter().map(|log| (log.touch.block, log.block_hash)).collect();
    let untimed = |from: u64| -> BTreeSet<u64> {
        run.logs
            .iter()
            .filter(|log| log.block_time.is_none() && log.touch.block >= from && log.touch.block <= at.number)
            .map(|log| log.touch.block)
            .collect()
    };
    let highest =
        unsettled.iter().max_by_key(|entry| entry.change.block.number).map(|entry| entry.change.block);
    let mut asked = untimed(indexed.number + 1);
    asked.extend(run.put_off_logs.iter().filter(|log| log.block_time.is_none()).map(|log| log.touch.block));
    asked.extend(
        highest.filter(|block| !hashes_in_logs.contains_key(&block.number)).map(|block| block.number),
    );
    headers.ask(rpc, asked).await?;
    let reorganised = highest.is_some_and(|block| {
        hashes_in_logs.get(&block.number).copied().or_else(|| headers.hash(block.number)) != Some(block.hash)
    });
    if reorganised {
        let lowest = unsettled.iter().map(|entry| entry.change.block.number).min().unwrap_or(indexed.number);
        let mut asked: BTreeSet<u64> = unsettled.iter().map(|entry| entry.change.block.number).collect();
        asked.extend(untimed(lowest));
        headers.ask(rpc, asked).await?;
    }
    let seen: BTreeMap<u64, B256> =
        unsettled.iter().map(|entry| (entry.change.block.number, entry.change.block.hash)).collect();
    let canonical = |number: u64| if reorganised { headers.hash(number) } else { seen.get(&number).copied() };
    // Agents with entries waiting that the run neither reads nor loaded (an expiry time made,
    // of an agent no log touched): their rows, for their retractions' standing.
    let unloaded: BTreeSet<u64> = unsettled
        .iter()
        .map(|entry| entry.change.agent_id)
        .filter(|id| !run.read.contains_key(id) && !run.held.contains_key(id))
        .collect();
    let also_held =
        if reorganised && !unloaded.is_empty() { store.held(&unloaded).await? } else { BTreeMap::new() };
    // A wallet's standing once the reorganisation is applied: its agent's as read (or as held,
    // for one the run does not read), unless the id is now another wallet's.
    let standing = |agent_id: u64, wallet: Address| {
        let agent = match run.read.get(&agent_id) {
            Some(read) => *read,
            None => {
                run.held.get(&agent_id).or_else(|| also_held.get(&agent_id)).map(|held| &held.agent.record)
            }
        };
        agent
            .filter(|agent| agent.agent_wallet == wallet)
            .map_or(Standing::UNREGISTERED, |agent| Standing::of(agent, clock))
    };
    let mut settling =
        settle_entries(&unsettled, canonical, at.number.saturating_sub(config.finality_depth), standing);

    // The walk: from the rows held (or, for agents whose changes were retracted, from the block
    // before the fork), through the logs of the new blocks (and, after a reorganisation, of the
    // other chain's blocks from the fork on).
    let fork = settling.fork();
    let rewound = rewind(rpc, registry, &settling, run).await?;
    let mut logs: Vec<_> = run
        .logs
        .iter()
        .filter(|log| {
            let number = log.touch.block;
            number <= at.number && (number > indexed.number || fork.is_some_and(|fork| number >= fork))
        })
        // An agent put off by earlier runs is walked through its logs since then, up to the
        // index's block (those past it are above), unless the fork's walk has them already.
        .chain(run.put_off_logs.iter().filter(|log| {
            let number = log.touch.block;
            number <= indexed.number && fork.is_none_or(|fork| number < fork)
        }))
        .filter_map(|log| log.for_feed(log.block_time.or_else(|| headers.time(log.touch.block))?))
        .collect();
    logs.sort_by_key(|log| (log.block.number, log.log.log_index));
    // Renewals, then lapses, at most `FEED_LAPSES_PER_RUN` together: the rest are the next
    // runs' (the cursors' arithmetic is `search`'s).
    let edge = clock.current_from();
    let searches = Searches::start(
        edge,
        shown_clock.current_from(),
        (state.lapses_from, state.renewing_below),
        grace_period > state.grace_period,
    );
    let key = |agent: &IndexedAgent| (agent.record.last_attestation, agent.record.agent_id);
    let keys = |agents: &[IndexedAgent]| agents.iter().map(key).collect::<Vec<Key>>();
    let limit = config.lapses_per_run;
    let mut renewed = match searches.renewing {
        Some(below) => store.renewable(searches.from, below, limit).await?,
        None => Vec::new(),
    };
    let renewals_left = searches.renewals_left(&keys(&renewed), limit);
    let budget = searches.lapse_budget(renewals_left, renewed.len(), limit);
    let mut lapsed = if budget > 0 { store.lapsing(searches.from, edge, budget).await? } else { Vec::new() };
    let cursors = searches.after_lapses(&keys(&lapsed), budget, renewals_left);
    state.lapses_from = Some(cursors.lapses_from);
    state.renewing_below = cursors.renewing_below;
    // The agents the run reads are walked with their logs, from their held rows. One the searches
    // have not reached yet is shown as the searches' cursors say (lapsed in a renewal's backlog,
    // current in a lapse's), and its walk says what the searches would have: it is then named in
    // `walked_ahead`, which the searches skip once they reach it, so nothing is said twice.
    let walked_before: BTreeSet<Key> = state.walked_ahead.iter().copied().collect();
    lapsed.retain(|agent| !walked_before.contains(&key(agent)));
    renewed.retain(|agent| !walked_before.contains(&key(agent)));
    let read_keys = run.read.keys().filter_map(|id| run.held.get(id)).map(|held| key(&held.agent));
    let (shown_lapsed_now, walked_ahead) =
        searches.walked_ahead(&cursors, read_keys, &state.walked_ahead, WALKED_AHEAD_KEPT);
    state.walked_ahead = walked_ahead;
    let before: BTreeMap<u64, Option<Known>> =
        run.read.keys().map(|id| (*id, run.held.get(id).map(|held| Known::of(&held.agent.record)))).collect();
    let mut after = run.read.clone();
    let mut rewound = rewound;
    // Read agents waiting for a renewal were shown lapsed: walked from a second they were.
    for id in &shown_lapsed_now {
        if let Some(Some(known)) = before.get(id) {
            let shown_lapsed = StandingClock::new(known.last_attestation.saturating_add(1), 0);
            rewound.entry(*id).or_insert((Some(*known), shown_lapsed));
        }
    }
    // Agents put off: walked from where the index held them when they were put off.
    for (id, put_off_after) in run.put_off {
        let held = run.held.get(id).map(|held| Known::of(&held.agent.record));
        rewound.entry(*id).or_insert((held, shown_clock.at(put_off_after.timestamp)));
    }
    // Each walked from the last second its attestation was current: a run behind the moment
    // (the search was capped) still shows the expiry, at its own block.
    for agent in lapsed.iter().filter(|agent| !run.read.contains_key(&agent.record.agent_id)) {
        let record = &agent.record;
        let current_until = clock.at(clock.valid_until(record.last_attestation));
        rewound.insert(record.agent_id, (Some(Known::of(record)), current_until));
        after.insert(record.agent_id, Some(record));
    }
    // Each walked from a second its attestation was shown lapsed at (any grace period shorter
    // than its age: none at all, a second after it).
    for agent in renewed.iter().filter(|agent| !run.read.contains_key(&agent.record.agent_id)) {
        let record = &agent.record;
        let shown_lapsed = StandingClock::new(record.last_attestation.saturating_add(1), 0);
        rewound.insert(record.agent_id, (Some(Known::of(record)), shown_lapsed));
        after.insert(record.agent_id, Some(record));
    }
    let end = EventBlock { number: at.number, hash: at_hash, time: at.timestamp };
    let run_changes = RunChanges { logs: &logs, before, after, rewound, grace_period };
    let mut changes = changes_of_run(&run_changes, shown_clock, end);
    // The run's last word on each wallet it read is the chain's: whatever its walks could not
    // see (a reorganisation below the logs followed) is corrected at its block.
    let retractions = settling.settled.iter().filter_map(|entry| match entry {
        Appending::Retract(provisional, standing) => {
            Some((provisional.change.agent_id, provisional.change.wallet, *standing))
        }
        _ => None,
    });
    let said =
        retractions.chain(changes.iter().map(|change| (change.agent_id, change.wallet, change.standing)));
    let told = Told {
        said: said.collect(),
        before: &run_changes.before,
        after: &run_changes.after,
        from: shown_clock,
        grace_period,
    };
    changes.extend(corrections(&told, end));

    // Confirmations alone do not make a batch of their own in every run of the pacer: they ride
    // in the next batch a run writes anyway (its changes'), or else in the first run of the
    // next minute, which writes its state row anyway. So a change costs its provisional batch,
    // and its confirmation no row of its own while changes come more than once a minute, where
    // it cost a second batch (written, and deleted with the retention: 2 rows) and the stream
    // outlet's cursor moved once more. `final` comes up to a minute after the depth. A
    // retraction is never put off: the run walks its agents again now.
    if confirmations_wait(&settling, changes.len(), minute_due) {
        settling = Settling { settled: Vec::new(), waiting: unsettled.clone() };
    }
    let appended = append(&settling, &changes, state.feed_next_batch, state.settled_through, CHUNK_BYTES);
    for (batch, events) in &appended.batches {
        written.statements.push(store.feed_insert(*batch, now, events)?);
    }
    state.feed_last = appended.last.or(state.feed_last);
    state.feed_next_batch = appended.next_batch;
    state.settled_through = appended.settled_through;

    let (confirmed, retracted) = settling.counts();
    if !appended.batches.is_empty() {
        written.summary = format!(
            "feed: {} changes, {confirmed} final, {retracted} retracted in {} batches",
            changes.len(),
            appended.batches.len()
        );
    }
    if cursors.lapses_past_cap {
        written.summary.push_str(&format!(
            "{}{budget} lapsed attestations walked, the rest are the next runs'",
            if written.summary.is_empty() { "feed: " } else { "; " },
        ));
    }
    if state.renewing_below.is_some() {
        written.summary.push_str(&format!(
            "{}{} attestations a longer grace period renewed walked, the rest are the next runs'",
            if written.summary.is_empty() { "feed: " } else { "; " },
            renewed.len()
        ));
    }
    Ok(written)
}

/// Whether a run puts off what `settling` settles: it only confirms (a retraction is never put
/// off), the run has no change of its own (`changes`) whose batch the confirmations could ride
/// in, and it is not the first run of its minute (`minute_due`), which writes its state row
/// anyway and takes every confirmation waiting.
fn confirmations_wait(settling: &Settling, changes: usize, minute_due: bool) -> bool {
    !minute_due && changes == 0 && settling.fork().is_none() && !settling.settled.is_empty()
}

/// The agents whose changes `settling` retracts that the run writes, each as it was at the
/// block before the fork (`None`: not registered yet) with that block's time.
async fn rewind(
    rpc: &Rpc<'_>,
    registry: Address,
    settling: &Settling,
    run: &RunFeed<'_>,
) -> Result<BTreeMap<u64, (Option<Known>, StandingClock)>> {
    let ids: Vec<u64> =
        settling.retracted_agents().into_iter().filter(|id| run.read.contains_key(id)).collect();
    let Some(fork) = settling.fork().filter(|fork| *fork > 0 && !ids.is_empty()) else {
        return Ok(BTreeMap::new());
    };
    let (block, next, grace_period) =
        reads::next_agent_id(rpc, registry, Some(rpc.block(fork - 1).await?)).await?;
    let registered: Vec<u64> = ids.iter().copied().filter(|id| *id < next).collect();
    let agents = reads::indexed_agents(rpc, registry, &registered, block).await?;
    let known: BTreeMap<u64, Known> =
        agents.iter().map(|agent| (agent.record.agent_id, Known::of(&agent.record))).collect();
    let clock = StandingClock::new(block.timestamp, grace_period);
    Ok(ids.into_iter().map(|id| (id, (known.get(&id).copied(), clock))).collect())
}

impl Store {
    /// The feed's entries after `after` (all, for `None`), from at most [`UNSETTLED_BATCHES`]
    /// batches.
    async fn feed_after(&self, after: Option<Cursor>) -> Result<Vec<Event>> {
        #[derive(Deserialize)]
        struct Batch {
            batch: u64,
            events: String,
        }
        let from = after.map_or(1, |after| after.batch);
        let rows: Vec<Batch> = self
            .all(self.statement(
                "SELECT batch, events FROM feed_batches WHERE batch >= ?1 ORDER BY batch LIMIT ?2",
                vec![from.into(), UNSETTLED_BATCHES.into()],
            )?)
            .await?;
        let mut entries = Vec::new();
        for row in rows {
            let events = super::changes::decode_events(row.batch, &row.events)?;
            entries.extend(events.into_iter().filter(|event| after.is_none_or(|after| event.id > after)));
        }
        Ok(entries)
    }

    /// The agents the index holds from (`lastAttestation`, id) `from` on whose `lastAttestation`
    /// is before `edge`, in that order, at most `limit` (by the `agents_by_attestation` index:
    /// the rows read are those found).
    async fn lapsing(&self, from: (u64, u64), edge: u64, limit: u64) -> Result<Vec<IndexedAgent>> {
        self.indexed_agents(
            "SELECT indexed FROM agents WHERE (last_attestation, id) >= (?1, ?2) \
             AND last_attestation < ?3 ORDER BY last_attestation, id LIMIT ?4",
            vec![from.0.into(), from.1.into(), edge.into(), limit.into()],
        )
        .await
    }

    /// The agents the index holds below (`lastAttestation`, id) `below` and from `from` on,
    /// newest first, at most `limit` (by the `agents_by_attestation` index, read backwards): the
    /// renewals a lengthened grace period makes, the youngest attestations (the last to lapse
    /// again) first.
    async fn renewable(&self, from: (u64, u64), below: (u64, u64), limit: u64) -> Result<Vec<IndexedAgent>> {
        self.indexed_agents(
            "SELECT indexed FROM agents WHERE (last_attestation, id) >= (?1, ?2) \
             AND (last_attestation, id) < (?3, ?4) ORDER BY last_attestation DESC, id DESC LIMIT ?5",
            vec![from.0.into(), from.1.into(), below.0.into(), below.1.into(), limit.into()],
        )
        .await
    }

    /// The agents of `sql`'s rows, which select the `indexed` column.
    async fn indexed_agents(&self, sql: &str, params: Vec<Param>) -> Result<Vec<IndexedAgent>> {
        #[derive(Deserialize)]
        struct Row {
            indexed: String,
        }
        let rows: Vec<Row> = self.all(self.statement(sql, params)?).await?;
        rows.iter().map(|row| decode_indexed(&row.indexed)).collect()
    }

    /// The statement appending batch `batch` (a JSON array of events) at wall-clock `now`.
    fn feed_insert(&self, batch: u64, now: u64, events: &str) -> Result<D1PreparedStatement> {
        self.limits().check_row("feed_batches", batch, events.len() + 16)?;
        self.statement(
            "INSERT INTO feed_batches (batch, created_at, events) VALUES (?1, ?2, ?3)",
            vec![batch.into(), now.into(), Param::Text(events.to_owned())],
        )
    }

    /// The statement deleting batches written before `before`, from the oldest, at most
    /// [`RETENTION_BATCHES_PER_STEP`], never the newest: it reads those oldest rows by the key,
    /// whatever the feed's length.
    fn feed_retention(&self, before: u64) -> Result<D1PreparedStatement> {
        self.statement(
            "DELETE FROM feed_batches WHERE batch IN (SELECT batch FROM feed_batches ORDER BY batch LIMIT ?2) \
             AND created_at < ?1 AND batch < (SELECT max(batch) FROM feed_batches)",
            vec![before.into(), RETENTION_BATCHES_PER_STEP.into()],
        )
    }
}

#[cfg(test)]
mod tests {
    use kya_core::feed::{EventBlock, run::Appending, testing::attested};

    use super::*;

    #[test]
    fn confirmations_alone_wait_for_a_batch_or_the_minute_and_retractions_never_wait() {
        let entry =
            attested(Cursor { batch: 3, index: 0 }, 7, EventBlock { number: 10, hash: B256::ZERO, time: 10 });
        let confirming = Settling { settled: vec![Appending::Confirm(entry)], waiting: Vec::new() };
        assert!(confirmations_wait(&confirming, 0, false), "alone in a paced run: they wait");
        assert!(!confirmations_wait(&confirming, 1, false), "they ride in the run's batch of a change");
        assert!(!confirmations_wait(&confirming, 0, true), "the first run of a minute takes them");
        let retracting = Settling {
            settled: vec![Appending::Confirm(entry), Appending::Retract(entry, Standing::UNREGISTERED)],
            waiting: Vec::new(),
        };
        assert!(!confirmations_wait(&retracting, 0, false), "a reorganisation is never put off");
        assert!(!confirmations_wait(&Settling::default(), 0, false), "nothing to settle: nothing waits");
    }
}
