//! The five registry-wide answers from the index: the totals in its state, and its rows as they
//! held at the state's block, so every answer names one block and equals the direct answer at
//! it. Their reads are one state row plus what the answer shows (a page, ten registrations), so
//! they cost the same at any registry size; `/agents/compliance` shows every agent and is
//! streamed from D1 in slices, never held whole.
//!
//! The index does not answer ([`Served::Fallback`], read from the chain instead) without its
//! binding, before its first fill is complete, or when its last run is older than
//! `INDEX_MAX_AGE_SECS`.

use futures::{StreamExt, stream};
use kya_core::{
    BlockRef,
    index::{COMPLIANCE_SEPARATOR, COMPLIANCE_TAIL, agents_page_body, compliance_head, unfiltered_page_ids},
    redact,
    stats::RECENT_REGISTRATIONS,
};
use worker::{Headers, Response};

use super::{State, Store};
use crate::{
    Result,
    deps::Deps,
    http::{self, Answer, Source},
    routes::Endpoint,
};

/// Rows of `/agents/compliance` read from D1 at a time: about 1.5 MB of rows, and a D1 query per
/// 10,000 agents, so Free's 50 queries an invocation serve up to about 480,000 agents.
const COMPLIANCE_SLICE: u64 = 10_000;

thread_local! {
    /// Answers this isolate read from the index (the rows each shows; not its fallbacks):
    /// reported in `/health`, so that a test counts the reads behind its requests.
    static ANSWER_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Answers this isolate has read from the index since it started.
pub(crate) fn answer_reads() -> u64 {
    ANSWER_READS.with(std::cell::Cell::get)
}

/// What the index made of a registry-wide request.
pub(crate) enum Served {
    Answer(Answer),
    /// `/agents/compliance`, streamed.
    Stream(Response),
    /// The index cannot answer, for this reason: read the chain.
    Fallback(String),
}

/// `endpoint`'s answer from the index, if it can give one.
pub(crate) async fn answer(endpoint: &Endpoint, deps: &Deps<'_>) -> Result<Served> {
    let max_age_secs = deps.index_max_age_secs;
    let Some(store) = Store::open(deps.env) else {
        return Ok(Served::Fallback("no index: the Worker has no INDEX binding".into()));
    };
    // The answers that show totals by name read them with the state, in one batch.
    let by_name = matches!(endpoint, Endpoint::StatsDetailed | Endpoint::RevenueAggregate);
    let read = if by_name {
        store.state_with_tallies().await.map(|(state, tallies)| (state, Some(tallies)))
    } else {
        store.state().await.map(|state| (state, None))
    };
    let (mut state, tallies) = match read {
        Ok(read) => read,
        Err(error) => {
            // The error itself goes to the log only: a header carries one short line, and D1's
            // messages are neither.
            worker::console_warn!("reading the index's state failed: {error}");
            return Ok(Served::Fallback("the index could not be read (its tables missing?)".into()));
        }
    };
    let Some(block) = state.complete_at() else {
        return Ok(Served::Fallback("the index is not filled yet".into()));
    };
    let age = deps.now.saturating_sub(state.updated_at);
    if age > max_age_secs {
        return Ok(Served::Fallback(format!(
            "the index's last run was {age} s ago (INDEX_MAX_AGE_SECS is {max_age_secs})"
        )));
    }
    // The index answers: its rows are read for this answer.
    ANSWER_READS.with(|reads| reads.set(reads.get() + 1));
    let source =
        Source::Index { lag_blocks: state.head.saturating_sub(block.number), run_at: state.updated_at };
    let chain = redact::url(deps.rpc.url);
    if let Some(tallies) = tallies {
        // Past what one answer renders: a clear error naming why, not a body of a million rows.
        state.names.fits()?;
        super::tally::fill(&mut state.totals, tallies)?;
    }
    let totals = &state.totals;
    let body = match endpoint {
        Endpoint::Stats => totals.stats_body(&deps.registry, &chain),
        Endpoint::StatsDetailed => {
            let recent = store.recent(block.number, RECENT_REGISTRATIONS as u64).await?;
            totals.detailed_body(&deps.registry, &chain, &recent)
        }
        Endpoint::Agents(query) => {
            let (total, items) = match query.status {
                None => {
                    let total = totals.agents;
                    (total, store.items_by_id(block.number, &unfiltered_page_ids(total, query)).await?)
                }
                Some(status) => {
                    let total = totals.status.get(status);
                    let limit = query.limit.max(1);
                    let offset = query.page.max(1).saturating_sub(1).saturating_mul(limit);
                    let items = if offset >= total {
                        Vec::new()
                    } else {
                        store.items_with_status(block.number, status, limit, offset).await?
                    };
                    (total, items)
                }
            };
            agents_page_body(total, query, &items.iter().map(String::as_str).collect::<Vec<_>>())
        }
        Endpoint::RevenueAggregate => totals.aggregate_body(),
        Endpoint::AgentsCompliance => {
            let expires_at = deps.now.saturating_add(deps.index_answer_ttl_secs);
            return Ok(Served::Stream(compliance(
                store,
                &state,
                block,
                &source,
                (deps.index_answer_ttl_secs, expires_at),
            )?));
        }
        _ => unreachable!("only the registry-wide endpoints are answered from the index"),
    };
    Ok(Served::Answer(Answer { body, block, read_at: deps.now, source }))
}

/// `/agents/compliance` streamed: the head, then each slice of rows rendered as it arrives.
/// `ttl` is its freshness in seconds, until `expires_at`.
fn compliance(
    store: Store,
    state: &State,
    block: BlockRef,
    source: &Source,
    (ttl, expires_at): (u64, u64),
) -> Result<Response> {
    struct Cursor {
        store: Store,
        /// The last (`lastAttestation`, id) sent; `None` once the tail is sent.
        after: Option<(i64, u64)>,
        first: bool,
    }
    let head = stream::once(std::future::ready(Ok::<Vec<u8>, worker::Error>(
        compliance_head(state.totals.agents).into_bytes(),
    )));
    let start = Cursor { store, after: Some((-1, 0)), first: true };
    let items = stream::unfold(start, move |mut cursor| async move {
        let after = cursor.after?;
        let groups =
            match cursor.store.compliance_items(block.number, block.timestamp, after, COMPLIANCE_SLICE).await
            {
                Ok(groups) => groups,
                Err(error) => {
                    // The body is cut short: a client sees JSON that does not parse, never a
                    // shorter list that does.
                    worker::console_error!("streaming /agents/compliance failed: {error}");
                    cursor.after = None;
                    return Some((Err(worker::Error::RustError(error.to_string())), cursor));
                }
            };
        let Some(last) = groups.last() else {
            cursor.after = None;
            return Some((Ok(COMPLIANCE_TAIL.as_bytes().to_vec()), cursor));
        };
        cursor.after = Some(last.last);
        let mut chunk = String::with_capacity(groups.iter().map(|group| group.items.len() + 1).sum());
        for group in &groups {
            if !cursor.first {
                chunk.push_str(COMPLIANCE_SEPARATOR);
            }
            cursor.first = false;
            chunk.push_str(&group.items);
        }
        Some((Ok(chunk.into_bytes()), cursor))
    });
    let response = Response::from_stream(head.chain(items))?;
    let headers = Headers::new();
    headers.set("content-type", "application/json; charset=utf-8")?;
    headers.set("cache-control", &crate::cache::cache_control(ttl))?;
    headers.set(crate::cache::EXPIRES_AT, &expires_at.to_string())?;
    http::set_block(&headers, block)?;
    source.set_headers(&headers)?;
    Ok(response.with_headers(headers))
}
