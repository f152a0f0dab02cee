//! One run of the registry index, on a Cron Trigger: a bounded step that leaves the index whole
//! at one block, committed in one D1 batch with its state (a run killed midway leaves the index
//! as the last one left it; the next starts from there).
//!
//! A run pins the chain's head and, with events on, follows the registry's logs from a window
//! of blocks before the index's block (re-scanned: a reorganisation there shows as logs that
//! are gone or new) up to a block whose touched agents fit the run. At that block it reads, in
//! one Multicall3 round trip, the agents the new blocks' logs touched, the agents whose logs in
//! the window differ from what earlier runs recorded (a write a reorganisation took away left
//! no log; a lagging backend's missed one shows now), the next ids of the fill, and a slice of
//! the sweep (`kya_core::index::plan`). The totals move to the block's time (attestations that
//! lapsed meanwhile, counted in D1), then take each changed agent out as it was and in as it is.
//!
//! Over 500 lines: [`step`] is one run's phases in the order they happen (pin the head, follow
//! the logs, read the agents, move the totals, write one batch), each reading what the one
//! before it left, so that a run reads from top to bottom in one place. What stands on its own
//! is apart: the totals' moves ([`apply`]) and the walks of agents put off ([`put_off`]).

mod apply;
mod put_off;
mod scope_backfill;

use std::{
    cell::Cell,
    collections::{BTreeMap, BTreeSet},
};

use alloy_primitives::B256;
use kya_core::{
    StandingClock,
    index::{
        IndexedAgent, Lapse, Totals, lapsing,
        logs::{AgentLogEntry, Touch, follow_range, rescan_from},
        plan::{Cursor, bounded_end, plan},
        window_touches::{Anchor, WindowTouches, changed_in_window},
    },
};
use worker::{Date, Env};

use super::{
    RunOutcome, State, feed, follow,
    headers::Headers,
    store::{Held, MAX_INDEXED_SCOPE_BYTES, row_bytes},
    tally,
};
use crate::{
    Result,
    config::Config,
    d1::{CHUNK_BYTES, Store},
    reads,
    rpc::{Rpc, SUBREQUEST_BUDGET},
};

/// Seconds a superseded row is kept for answers that still read its block.
const SUPERSEDED_KEEP_SECS: u64 = 600;

/// The most bytes of rows and names a run writes: eight chunks of [`CHUNK_BYTES`], so that with
/// the rest of its statements a run stays within Workers Free's 50 D1 queries. The agents read
/// past it are put off (the fill resumes at them, or they are read again), so whatever the
/// registrants wrote, every run commits and the next goes on.
const RUN_WRITE_BYTES: usize = 8 * CHUNK_BYTES;

/// The most bytes the record of the re-scanned window's touches takes in the state row
/// (`kya_core::index::window_touches`): a quarter of D1's limit on a row, beside a state of fixed size.
const WINDOW_TOUCHES_BYTES: usize = CHUNK_BYTES;

/// One run: a step of the index, and its outcome recorded for `/health`.
pub(crate) async fn run(env: &Env) {
    let Some(store) = Store::open(env) else {
        worker::console_warn!("no INDEX binding: the registry index is off");
        return;
    };
    run_once(&store, &Config::from_env(env)).await;
    // On the run's own store, so its D1 queries count against the same invocation's limit.
    super::outlets::after_run(env, &store).await;
}

/// One run on `store`: its step, then how it ended.
async fn run_once(store: &Store, config: &Config) {
    let (ok, message, orphaned) = match step(store, config).await {
        // Committed with the rows: nothing more to write.
        Ok(Step::Committed(message)) => {
            worker::console_log!(
                "index run: {message} ({} D1 queries, {} rows written as D1 reports them)",
                store.queries(),
                store.rows_written()
            );
            return;
        }
        // Nothing to write, and the state row was written this minute: left as it is, and
        // unsaid unless asked (a pacer's run every block would otherwise log a line every 2 s,
        // burying what matters; the run that writes the state row, once a minute, says where the
        // index is, and `/health` shows it any time).
        Ok(Step::Quiet(message)) => {
            if config.index.log_quiet_runs {
                worker::console_log!("index run: {message}; nothing changed, nothing written");
            }
            return;
        }
        Ok(Step::Idle { message, orphaned }) => (true, message, Some(orphaned)),
        Err(error) => (false, error.to_string(), None),
    };
    if ok {
        worker::console_log!("index run: {message}");
    } else {
        worker::console_error!("index run failed: {message}");
    }
    let recorded = store
        .record_run(|state| {
            state.last_run = Some(RunOutcome::new(now(), ok, message));
            // `None`: the run could not tell; the state says what the last one found.
            state.block_orphaned = orphaned.unwrap_or(state.block_orphaned);
            state.stream_through = state.stream_through.max(super::stream::outlet::handed_through());
        })
        .await;
    if let Err(error) = recorded {
        worker::console_error!("recording the index run failed: {error}");
    }
}

/// How a run that did not fail ended.
enum Step {
    /// It moved the index; its outcome went into the same commit.
    Committed(String),
    /// It had nothing to do; its outcome is still to record, and whether the chain no longer
    /// holds the index's block (`State::block_orphaned`).
    Idle { message: String, orphaned: bool },
    /// A paced run that found nothing new in a minute whose state row is already written: it
    /// writes nothing at all, so that a quiet registry costs D1 one row a minute, not one a run
    /// (43,200 a day at 2 s, most of Workers Free's 100,000). The answers go on naming the block
    /// of the last write, which is exact at that block; the next change, or the first run of the
    /// next minute, moves it.
    Quiet(String),
}

/// The sweep's agents for this run: its whole quota with the Cron Trigger's runs, once a minute;
/// with the pacer's (many a minute), only in the first run of each minute, so the sweep reads
/// what it read under the Cron Trigger, however often the pacer runs.
fn sweep_now(settings: &crate::config::IndexConfig, state: &State, now: u64) -> u64 {
    if first_of_minute(settings, state, now) { settings.sweep_quota() } else { 0 }
}

/// Whether this run is the first of its minute (every run is, under the Cron Trigger): what
/// is done once a minute whatever the pace (the sweep, the feed's retention) is done in it.
fn first_of_minute(settings: &crate::config::IndexConfig, state: &State, now: u64) -> bool {
    let paced = settings.interval_secs > 0 && settings.interval_secs < 60;
    !paced || state.updated_at / 60 != now / 60
}

fn now() -> u64 {
    Date::now().as_millis() / 1000
}

/// The logs a run followed: the blocks, and the agents they touched.
struct Followed {
    /// The first block re-scanned.
    from: u64,
    /// Where the record of the window for the next run starts.
    keep_from: u64,
    /// Whether the logs differ from the record: touches gone or new in the re-scanned blocks,
    /// or any in the new ones.
    moved: bool,
    /// Blocks recorded as a digest whose logs changed: every agent is read again.
    unknown: BTreeSet<u64>,
    /// Blocks of the window a reorganisation replaced.
    replaced: BTreeSet<u64>,
    /// Logs of the blocks followed (up to the run's block), for the change feed and, with their
    /// blocks' hashes, the record of the window.
    logs: Vec<AgentLogEntry>,
    /// `eth_getLogs` requests it took (more than one: a provider refused a range).
    requests: u32,
    /// Blocks past the index's whose logs the provider refused even alone.
    refused: Vec<u64>,
}

async fn step(store: &Store, config: &Config) -> Result<Step> {
    let registry = config.registry()?;
    let settings = config.index;
    let budget = Cell::new(SUBREQUEST_BUDGET);
    let rpc = Rpc {
        url: &config.rpc_url,
        batch_size: config.batch_size,
        multicall: config.multicall()?,
        budget: &budget,
        pinned: None,
    };
    let (mut state, recorded) = store.state_and_touches().await?;
    let before = state.clone();
    let (head, head_next, head_grace) = reads::next_agent_id(&rpc, registry, None).await?;

    // Is the index's block still the chain's? Blocks name their parents, so if it is, no block
    // at or below it changed: a reorganisation at any depth shows here, as another hash (or
    // none) at the index's height. Asked with the head's header, in one batch.
    let mut headers = Headers::default();
    let numbers = [Some(head.number), state.block.map(|indexed| indexed.number)];
    headers.ask(&rpc, numbers.into_iter().flatten().collect()).await?;
    let replaced = state
        .block
        .zip(state.block_hash)
        .is_some_and(|(indexed, hash)| headers.hash(indexed.number) != Some(hash));
    if let Some(indexed) = state.block.filter(|indexed| head.number < indexed.number) {
        return Ok(Step::Idle {
            message: format!(
                "the chain's head {} is behind the index's block {}{}: waiting for the chain to pass it",
                head.number,
                indexed.number,
                if replaced {
                    ", which it no longer holds (the index does not answer meanwhile)"
                } else {
                    ""
                }
            ),
            orphaned: replaced,
        });
    }
    // Replaced below the re-scanned window (or past the anchor the last record kept): no re-scan
    // names what changed, so every agent is read again. The anchor's header is asked only then.
    let mut deep = false;
    if let (true, Some(indexed)) = (replaced, state.block) {
        let rescan_from = rescan_from(indexed.number, settings.reorg_window);
        let anchor = recorded.anchor().filter(|anchor| anchor.number + 1 >= rescan_from);
        if let Some(anchor) = anchor {
            headers.ask(&rpc, BTreeSet::from([anchor.number])).await?;
        }
        deep =
            rescan_from > 1 && anchor.is_none_or(|anchor| headers.hash(anchor.number) != Some(anchor.hash));
    }

    // The logs since the index's block (and the window before it), up to a block whose changes
    // fit the run; agents whose logs in the window changed since earlier runs saw them are read
    // again too.
    let mut carried = BTreeSet::new();
    let mut fresh_touches = BTreeSet::new();
    let mut followed = None;
    let mut end = head.number;
    if let (true, Some(indexed)) = (settings.events, state.block)
        && let Some(range) = follow_range(
            indexed.number,
            head.number,
            settings.reorg_window,
            settings.blocks_per_run,
            replaced,
        )
    {
        let follow::Followed { logs, refused, requests } =
            follow::logs(&rpc, registry, range.clone()).await?;
        let touches: Vec<(Touch, B256)> = logs.iter().map(|log| (log.touch, log.block_hash)).collect();
        let window = changed_in_window(&recorded.since(*range.start()), &touches, indexed.number);
        carried = window.agents.clone();
        let new: Vec<Touch> =
            touches.iter().map(|(touch, _)| *touch).filter(|touch| touch.block > indexed.number).collect();
        end = bounded_end(&new, &carried, indexed.number + 1, *range.end(), settings.agents_per_run);
        fresh_touches = new.iter().filter(|touch| touch.block <= end).map(|touch| touch.agent_id).collect();
        followed = Some(Followed {
            from: *range.start(),
            keep_from: end.saturating_sub(settings.reorg_window),
            moved: !window.is_empty() || !fresh_touches.is_empty(),
            unknown: window.unknown,
            replaced: window.replaced,
            logs: logs.into_iter().filter(|log| log.touch.block <= end).collect(),
            requests,
            refused: refused.into_iter().filter(|block| (indexed.number + 1..=end).contains(block)).collect(),
        });
    }
    // A block whose logs the provider refuses whole does not hold the index: any agent may
    // have changed in it, so every agent held is read again, in order, over as many runs as
    // that takes; the index does not answer until they are. So does a block of the window whose
    // touches were recorded as a digest and changed (the agents it lost are not known), and a
    // reorganisation deeper than the window.
    if deep
        || followed
            .as_ref()
            .is_some_and(|followed| !followed.refused.is_empty() || !followed.unknown.is_empty())
    {
        let filled = state.cursor.filled;
        state.cursor.reread_also(1..filled);
    }
    // The registry's grace period is read with `nextAgentId`, at the run's block: a change the
    // owner made (or a reorganisation took away) moves every agent's standing from here.
    let (at, chain_next, grace_period) = if end == head.number {
        (head, head_next, head_grace)
    } else {
        headers.ask(&rpc, BTreeSet::from([end])).await?;
        let block = headers.block(end).ok_or_else(|| reorganised_during(end))?;
        reads::next_agent_id(&rpc, registry, Some(block)).await?
    };
    let at_hash = headers.hash(at.number).ok_or_else(|| reorganised_during(at.number))?;

    let mut touched = carried;
    touched.extend(fresh_touches);
    let mut planned = plan(
        &touched,
        state.cursor,
        chain_next,
        settings.agents_per_run,
        sweep_now(&settings, &state, now()),
    );
    // An index filled before it kept scopes reads them in the room the plan leaves.
    let held_end = state.cursor.filled.min(chain_next);
    let mut backfill = scope_backfill::Backfill::add_to(
        &mut planned,
        store,
        state.scopes_from,
        settings.agents_per_run,
        held_end,
    )
    .await?;
    let fresh = reads::indexed_agents(&rpc, registry, &planned.read, at).await?;
    let mut held = store.held(&planned.read.iter().copied().chain(planned.gone.clone()).collect()).await?;
    // As stored, within the run's bytes (a row, and the names it does not already count under,
    // which go to the tallies).
    let mut names = BTreeMap::new();
    let mut budget = RUN_WRITE_BYTES;
    let mut deferred = 0;
    let mut kept = Vec::with_capacity(fresh.len());
    let mut scopes = Vec::new();
    let mut written = 0;
    for agent in &fresh {
        let id = agent.record.agent_id;
        let stored = agent.stored(&mut names);
        // An agent as the index holds it is not written again: it costs nothing. Its scope is
        // written with the registration the index first holds (the registry never changes it).
        let changed = held.get(&id).map(|held| &held.agent) != Some(&stored);
        let scope = needs_scope(held.get(&id), &agent.record).then(|| indexed_scope(&agent.record));
        let bytes = if changed { row_bytes(&stored)? + new_names_bytes(agent, held.get(&id)) } else { 0 }
            + scope.map_or(0, |scope| scope.map_or(0, str::len) + 32);
        // The first agent written is written whatever its size, so every run moves on.
        if (!changed && scope.is_none()) || written == 0 || (deferred == 0 && bytes <= budget) {
            budget = budget.saturating_sub(bytes);
            written += usize::from(changed || scope.is_some());
            if let Some(scope) = scope {
                scopes.push((id, scope));
            }
            kept.push(stored);
        } else if backfill.only(id) {
            backfill.put_back(id);
        } else {
            planned.next.defer(id, state.cursor.filled);
            deferred += 1;
        }
    }
    state.scopes_from = backfill.next;

    // Agents whose logs this run followed but does not write wait for the run that reads them,
    // which walks them for the feed from where the index held them, through those logs.
    let kept_ids: Vec<u64> = kept.iter().map(|agent| agent.record.agent_id).collect();
    let put_off =
        put_off::walk_put_off(&rpc, registry, &mut state, &kept_ids, chain_next, followed.as_ref()).await?;
    let put_off_now: Vec<u64> = touched
        .iter()
        .copied()
        .filter(|id| *id < chain_next && kept_ids.binary_search(id).is_err())
        .collect();
    let mut put_off_dropped = 0;
    if let (true, Some(indexed)) = (settings.events, state.block) {
        put_off_dropped = state.put_off.add(indexed, put_off_now.iter().copied());
    }

    // The clock first: attestations that lapsed between the index's block and this one (time
    // passed, or the owner shortened the grace period), or that a lengthened grace period
    // renewed, counted on the agents as the index holds them.
    let clock = StandingClock::new(at.timestamp, grace_period);
    if let Some(indexed) = state.block {
        let lapse = lapsing(state.clock_at(indexed), clock);
        let (Lapse::Lapsed(range) | Lapse::Renewed(range)) = &lapse;
        let changed = store.active_attested_in(range).await?;
        state.totals.shift_time(&lapse, changed);
    }
    let mut new: BTreeMap<u64, Option<IndexedAgent>> =
        kept.into_iter().map(|agent| (agent.record.agent_id, Some(agent))).collect();
    new.extend(planned.gone.clone().map(|id| (id, None)));

    // The change feed's part, from the agents as held and as read, before the rows move.
    let now = now();
    let run_feed = feed::RunFeed {
        store,
        rpc: &rpc,
        registry,
        config: &config.feed,
        now,
        indexed: state.block,
        at,
        at_hash,
        grace_period,
        logs: followed.as_ref().map_or(&[], |followed| followed.logs.as_slice()),
        read: new.iter().map(|(id, agent)| (*id, agent.as_ref().map(|agent| &agent.record))).collect(),
        held: &held,
        put_off: &put_off.agents,
        put_off_logs: &put_off.logs,
    };
    let retention_due = first_of_minute(&settings, &state, now);
    let fed = feed::write(&run_feed, &mut headers, &mut state, retention_due).await?;
    let (changes, bucket_moves, loaded) = apply::apply(store, &mut state, &new, &mut held, clock).await?;
    state.grace_period = grace_period;
    let mut names_count = state.names;
    let (tallies, tallies_gone) = tally::moved(&state.totals, &loaded, &names, &mut names_count)?;
    state.names = names_count;

    let ids: BTreeSet<u64> = changes.keys().copied().collect();
    let rows: Vec<(&IndexedAgent, u64, Option<&IndexedAgent>)> = changes
        .iter()
        .filter_map(|(id, new)| {
            new.as_ref().map(|new| (&new.agent, new.child_count, held.get(id).map(|old| &old.agent)))
        })
        .collect();
    let mut statements = store.write_versions(&ids, &rows, at.number, now)?;
    statements.extend(store.write_bucket_moves(&bucket_moves)?);
    statements.extend(store.write_scopes(&scopes)?);
    statements.extend(store.write_tallies(&tallies, &tallies_gone)?);
    let read = planned.read.len();
    // The answers take an index older than `INDEX_MAX_AGE_SECS` for stalled: a quiet run leaves
    // the row alone only while it is well within that age.
    let nothing_moved = !retention_due
        && now.saturating_sub(before.updated_at) < settings.max_age_secs / 2
        && changes.is_empty()
        && bucket_moves.is_empty()
        && tallies.is_empty()
        && tallies_gone.is_empty()
        && scopes.is_empty()
        && fed.statements.is_empty()
        && deferred == 0
        && !replaced
        && followed.as_ref().is_none_or(|followed| !followed.moved && followed.refused.is_empty())
        && unchanged(&before, &state, planned.next, chain_next);
    if nothing_moved {
        let logs = logs_summary(followed.as_ref(), at.number);
        let kept = before.block.map_or(0, |block| block.number);
        return Ok(Step::Quiet(format!(
            "block {}: {logs}; {read} agents read, 0 changed; the index stays at block {kept}",
            at.number
        )));
    }
    statements.extend(store.collect_garbage(now.saturating_sub(SUPERSEDED_KEEP_SECS))?);
    statements.extend(fed.statements);
    state.block = Some(at);
    state.head = head.number;
    state.updated_at = now;
    state.chain_next = chain_next;
    state.cursor = planned.next;
    let logs = logs_summary(followed.as_ref(), at.number);
    let fill = if state.complete_at().is_some() || planned.next.filled >= chain_next {
        format!("{} agents", state.totals.agents)
    } else {
        format!(
            "first fill: {} of {} agents",
            planned.next.filled.saturating_sub(1),
            chain_next.saturating_sub(1)
        )
    };
    let mut message =
        format!("block {}: {logs}; {read} agents read, {} changed; {fill}", at.number, changes.len());
    if let Some(followed) = followed.as_ref().filter(|followed| !followed.refused.is_empty()) {
        message.push_str(&format!(
            "; the provider refused the logs of block {} alone: every agent is read again",
            followed.refused.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(followed) = followed.as_ref().filter(|followed| !followed.unknown.is_empty()) {
        message.push_str(&format!(
            "; the logs of block {} differ from its digest: every agent is read again",
            followed.unknown.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(indexed) = before.block.filter(|_| replaced) {
        let blocks = followed.as_ref().map(|followed| &followed.replaced).filter(|blocks| !blocks.is_empty());
        message.push_str(&format!(
            "; reorganised: the chain no longer holds the index's block {}{}{}",
            indexed.number,
            blocks.map_or(String::new(), |blocks| format!(
                " (blocks whose logs changed hash: {})",
                blocks.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )),
            if deep {
                ", and the fork is below the re-scanned window: every agent is read again"
            } else {
                ""
            }
        ));
    }
    if !fed.summary.is_empty() {
        message.push_str(&format!("; {}", fed.summary));
    }
    if before.scopes_from.is_some() {
        message.push_str(&match state.scopes_from {
            Some(next) => format!("; operational scopes backfilled below agent {next}"),
            None => "; operational scopes backfilled: every agent's is kept".to_owned(),
        });
    }
    if deferred > 0 {
        message.push_str(&format!(
            "; {deferred} agents put off to later runs (a run writes {RUN_WRITE_BYTES} bytes)"
        ));
    }
    if !put_off.agents.is_empty() {
        message.push_str(&format!(
            "; {} agents put off by earlier runs walked through {} of their logs{}",
            put_off.agents.len(),
            put_off.logs.len(),
            if put_off.refused.is_empty() { "" } else { " (the provider refused some: corrected instead)" }
        ));
    }
    if !put_off_now.is_empty() {
        message.push_str(&format!(
            "; {} agents touched and put off to later runs, which walk their logs{}",
            put_off_now.len(),
            if put_off_dropped > 0 {
                format!(" ({put_off_dropped} past the record's room: corrected instead)")
            } else {
                String::new()
            }
        ));
    }
    let reread = state.cursor.reread();
    if !reread.is_empty() {
        message.push_str(&format!("; agents {} to {} to read again", reread.start, reread.end - 1));
    }
    state.last_run = Some(RunOutcome::new(now, true, message.clone()));
    // The totals kept by name, and the agents whose revenue is unreadable, are in their table,
    // not the state row.
    state.totals.revenue.by_currency.clear();
    state.totals.revenue.by_category.clear();
    state.totals.generations.clear();
    state.totals.unreadable.clear();
    // The stream's cursor, as far as this isolate handed the feed out since the row was written:
    // it rides in this row rather than costing one of its own.
    state.stream_through = state.stream_through.max(super::stream::outlet::handed_through());
    // The run's block once more, with the next window's anchor: the run read logs and agents by
    // block number, so a reorganisation during the run would have mixed two chains. If the
    // block is still the one the run began with, every block up to it is too, and so is what
    // it read; otherwise nothing is written and the next run starts again. The anchor, when the
    // run records the window: the block just before the next run's re-scan (none while that
    // starts at block 1).
    let anchor_number = followed
        .as_ref()
        .map(|_| rescan_from(at.number, settings.reorg_window) - 1)
        .filter(|number| *number > 0);
    let confirmed =
        rpc.headers(&[Some(at.number), anchor_number].into_iter().flatten().collect::<Vec<_>>()).await?;
    if confirmed.first().copied().flatten().map(|(_, hash)| hash) != Some(at_hash) {
        return Err(reorganised_during(at.number));
    }
    let anchor = anchor_number
        .zip(confirmed.get(1).copied().flatten())
        .map(|(number, (_, hash))| Anchor { number, hash });
    state.block_hash = Some(at_hash);
    state.block_orphaned = false;
    // With the window's touches when the run followed logs (else they stay as recorded).
    statements.push(match &followed {
        Some(followed) => {
            let touches = followed.logs.iter().map(|log| (log.touch, log.block_hash));
            let record = WindowTouches::record(touches, followed.keep_from, WINDOW_TOUCHES_BYTES, anchor);
            store.save_state_with_touches(&state, &record)?
        }
        None => store.save_state(&state)?,
    });
    store.commit(statements).await?;
    Ok(Step::Committed(message))
}

/// The error of a run that found the chain reorganised after it began (its block `number` gone or
/// another): nothing is written, and the next run starts from the index as it was.
fn reorganised_during(number: u64) -> crate::Error {
    kya_core::Error::Rpc(format!(
        "the chain reorganised during the run (block {number} is not the one it began with): nothing written, \
         the next run starts again"
    ))
    .into()
}

/// The logs a run followed up to block `at`, as its message gives them.
fn logs_summary(followed: Option<&Followed>, at: u64) -> String {
    followed.map_or(String::from("no logs followed"), |followed| {
        let (logs, requests) = (followed.logs.len(), followed.requests);
        format!("{logs} logs of blocks {} to {at} in {requests} eth_getLogs", followed.from)
    })
}

/// Whether a run left everything its state row records as `before` had it, but the block it
/// reached: the cursors, the registry's size, the totals (time alone can move them: lapsing
/// attestations), the names' count and the change feed's place. The totals' by-name maps are
/// not in the row (they were filled from the tallies during the run), so they are not compared.
fn unchanged(before: &State, after: &State, next: Cursor, chain_next: u64) -> bool {
    let fixed = |totals: &Totals| {
        let mut totals = totals.clone();
        totals.revenue.by_currency.clear();
        totals.revenue.by_category.clear();
        totals.generations.clear();
        totals.unreadable.clear();
        totals
    };
    next == before.cursor
        && chain_next == before.chain_next
        && after.names == before.names
        && after.feed_next_batch == before.feed_next_batch
        && after.settled_through == before.settled_through
        && after.feed_last == before.feed_last
        && after.lapses_from == before.lapses_from
        && after.renewing_below == before.renewing_below
        && after.walked_ahead == before.walked_ahead
        && after.grace_period == before.grace_period
        && after.put_off == before.put_off
        && after.scopes_from == before.scopes_from
        && fixed(&after.totals) == fixed(&before.totals)
}

/// Whether the run writes `read`'s operational scope: the index holds no scope for its id, or
/// holds another registration there (a reorganisation gave the id to another wallet).
fn needs_scope(held: Option<&Held>, read: &kya_core::Agent) -> bool {
    held.is_none_or(|held| {
        let record = &held.agent.record;
        !held.scoped || record.agent_wallet != read.agent_wallet || record.registered_at != read.registered_at
    })
}

/// `agent`'s scope as the index keeps it: `None` past [`MAX_INDEXED_SCOPE_BYTES`].
fn indexed_scope(agent: &kya_core::Agent) -> Option<&str> {
    Some(agent.operational_scope.as_str()).filter(|scope| scope.len() <= MAX_INDEXED_SCOPE_BYTES)
}

/// The bytes the names of `agent` (as read) may take in the tallies' statements, each escaped
/// as JSON: those it did not already count under as `held` (a name it counted under is in the
/// tallies, where only its sums are written again).
fn new_names_bytes(agent: &IndexedAgent, held: Option<&Held>) -> usize {
    use kya_core::index::{AgentRevenue::Read, name_key};
    let Read(read) = &agent.revenue else {
        return 0;
    };
    let held = match held.map(|held| &held.agent.revenue) {
        Some(Read(sums)) => Some(sums),
        _ => None,
    };
    let new = |names: &BTreeMap<String, _>, held: Option<&BTreeMap<String, _>>| -> usize {
        names
            .keys()
            .filter(|name| held.is_none_or(|held| !held.contains_key(&name_key(name))))
            .map(|name| serde_json::to_string(name).map_or(name.len() * 6, |text| text.len()) + 160)
            .sum()
    };
    new(&read.by_currency, held.map(|sums| &sums.by_currency))
        + new(&read.by_category, held.map(|sums| &sums.by_category))
}
