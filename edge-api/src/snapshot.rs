//! The registry snapshot's answers ([`SnapshotAnswers`]): from the isolate's memory, else from
//! the Cache API in their compact form (sliced, not parsed), else read from the chain, rendered
//! once, and stored in both. Five minutes from when the chain was read.

use std::rc::Rc;

use kya_core::{SnapshotAnswers, chain::redact};

use crate::{
    Result,
    cache::{self, memory},
    deps::Deps,
    reads,
    routes::AGENT_DATA_TTL,
};

/// When (Unix seconds) a cached snapshot was read from the chain.
const READ_AT: &str = "x-read-at";

/// The snapshot's answers and when (Unix seconds) the chain was read for them.
#[derive(Debug)]
pub(crate) struct LoadedSnapshot {
    pub(crate) answers: SnapshotAnswers,
    pub(crate) read_at: u64,
}

/// The snapshot's answers, younger than five minutes at `deps.now`.
pub(crate) async fn load(deps: &Deps<'_>) -> Result<Rc<LoadedSnapshot>> {
    let key = deps.cache_key("/snapshot");
    if let Some(loaded) = memory::get::<LoadedSnapshot>(&key, deps.now) {
        return Ok(loaded);
    }
    if let Some(loaded) = from_cache_api(&key, deps.now).await {
        let loaded = Rc::new(loaded);
        remember(&key, &loaded, deps.memory_budget);
        return Ok(loaded);
    }
    let snapshot = reads::snapshot(&deps.rpc, deps.registry).await?;
    // `chain` names the endpoint without the API key a hosted node's URL may carry.
    let answers = SnapshotAnswers::render(&snapshot, &deps.registry, &redact::url(deps.rpc.url));
    let loaded = Rc::new(LoadedSnapshot { answers, read_at: deps.now });
    cache::put_text(&key, loaded.answers.encode(), AGENT_DATA_TTL, (READ_AT, &deps.now.to_string())).await;
    remember(&key, &loaded, deps.memory_budget);
    Ok(loaded)
}

/// The Cache API's entry, if there is one younger than the TTL that decodes (an entry of
/// another layout is a miss, and is overwritten). An entry passed over says why in the log: the
/// chain is read instead, and the log is where an operator (or a test counting RPC requests)
/// tells a Cache API that lost or cut the copy from one that never had it.
async fn from_cache_api(key: &str, now: u64) -> Option<LoadedSnapshot> {
    let (text, read_at) = cache::get_text(key, READ_AT).await?;
    let passed_over =
        |why: &str| worker::console_warn!("the Cache API's snapshot under {key} {why}: reading the chain");
    let Ok(read_at) = read_at.parse::<u64>() else {
        passed_over(&format!("has no read time ({READ_AT}: {read_at:?})"));
        return None;
    };
    if read_at.saturating_add(AGENT_DATA_TTL) <= now {
        passed_over(&format!("was read at {read_at}, past its {AGENT_DATA_TTL} s at {now}"));
        return None;
    }
    match SnapshotAnswers::decode(&text) {
        Ok(answers) => Some(LoadedSnapshot { answers, read_at }),
        Err(error) => {
            passed_over(&format!("does not decode ({} bytes: {error})", text.len()));
            None
        }
    }
}

fn remember(key: &str, loaded: &Rc<LoadedSnapshot>, budget: usize) {
    let expires_at = loaded.read_at.saturating_add(AGENT_DATA_TTL);
    memory::keep(key, Rc::clone(loaded), loaded.answers.size(), expires_at, budget);
}
