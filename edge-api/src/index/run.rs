//! The scheduled run of the registry index: one bounded step per Cron Trigger. The first fill
//! is a sweep of every agent by id at one pinned block, `INDEX_AGENTS_PER_RUN` agents a run,
//! resumed from the cursor stored with the rows after a run that was killed or failed.

use std::cell::Cell;

use kya_core::index::child_change;
use worker::{Date, Env};

use super::{RunOutcome, State, Store, Sweep};
use crate::{
    Result,
    config::Config,
    reads,
    rpc::{Rpc, SUBREQUEST_BUDGET},
};

/// One run: a step of the index, and its outcome recorded for `/health`.
pub(crate) async fn run(env: &Env) {
    let Some(store) = Store::open(env) else {
        worker::console_warn!("no INDEX binding: the registry index is off");
        return;
    };
    let config = Config::from_env(env);
    let (ok, message) = match step(&store, &config).await {
        Ok(message) => (true, message),
        Err(error) => (false, error.to_string()),
    };
    if ok {
        worker::console_log!("index run: {message}");
    } else {
        worker::console_error!("index run failed: {message}");
    }
    let at = Date::now().as_millis() / 1000;
    if let Err(error) = store.record_run(RunOutcome { at, ok, message }).await {
        worker::console_error!("recording the index run failed: {error}");
    }
}

async fn step(store: &Store, config: &Config) -> Result<String> {
    let registry = config.registry()?;
    let budget = Cell::new(SUBREQUEST_BUDGET);
    let rpc = Rpc {
        url: &config.rpc_url,
        batch_size: config.batch_size,
        multicall: config.multicall()?,
        budget: &budget,
    };
    let mut state: State = store.state().await?;
    let sweep = match state.sweep {
        Some(sweep) => sweep,
        None if state.block.is_none() => {
            let (block, next) = reads::next_agent_id(&rpc, registry).await?;
            Sweep { block, agents: next.saturating_sub(1), next_id: 1 }
        }
        None => return Ok("the index is complete; following the registry's events is not built yet".into()),
    };
    let last = sweep.next_id.saturating_add(config.index_agents_per_run - 1).min(sweep.agents);
    let fresh = if sweep.next_id <= last {
        reads::indexed_agents(&rpc, registry, sweep.next_id..=last, sweep.block).await?
    } else {
        Vec::new()
    };
    let mut statements = Vec::with_capacity(fresh.len() + 2);
    for agent in &fresh {
        // A first fill: no agent is in the index yet.
        state.totals.apply(None, Some(agent), sweep.block.timestamp);
        statements.push(store.upsert(agent)?);
        if let Some((parent, change)) = child_change(None, Some(&agent.record)) {
            statements.push(store.add_children(parent, change)?);
        }
    }
    let message = if last >= sweep.agents {
        state.block = Some(sweep.block);
        state.sweep = None;
        format!("sweep complete: {} agents at block {}", sweep.agents, sweep.block.number)
    } else {
        state.sweep = Some(Sweep { next_id: last + 1, ..sweep });
        format!(
            "sweep at block {}: agents {} to {last} of {}",
            sweep.block.number, sweep.next_id, sweep.agents
        )
    };
    statements.push(store.save_state(&state)?);
    store.commit(statements).await?;
    Ok(message)
}
