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
    chain::redact,
    index::{
        COMPLIANCE_TAIL, agents_page_body, compliance_head, restore_compliance_quotes, unfiltered_page_ids,
    },
    snapshot::stats::RECENT_REGISTRATIONS,
};
use wasm_bindgen::{JsCast, JsValue, prelude::wasm_bindgen};
use worker::{
    D1PreparedStatement, Response, ResponseBody,
    js_sys::{Array, JsString, Uint8Array, WebAssembly},
};

use super::{
    State,
    store::{
        StateRead,
        answers::{page_items, recent_agents},
    },
    tally::Tally,
};
use crate::{
    Error, Result, apart,
    d1::Store,
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
///
/// Each answer is a future of its own behind a pointer (`apart`), as is the read they share: a
/// restarted Worker compiles each function of the wasm when it first runs it, so a request
/// compiles the answer it gives, not all five (`docs/bench/index-cold.md`).
pub(crate) async fn answer(endpoint: &Endpoint, deps: &Deps<'_>) -> Result<Served> {
    let Some(store) = Store::open(deps.env) else {
        return Ok(Served::Fallback("no index: the Worker has no INDEX binding".into()));
    };
    match endpoint {
        Endpoint::Stats => apart(stats(store, deps)).await,
        Endpoint::StatsDetailed => apart(detailed(store, deps)).await,
        Endpoint::Agents(query) => apart(agents(store, query, deps)).await,
        Endpoint::RevenueAggregate => apart(aggregate(store, deps)).await,
        Endpoint::AgentsCompliance => apart(compliance_answer(store, deps)).await,
        _ => Err(Error::BadConfig("only the registry-wide endpoints are answered from the index".into())),
    }
}

/// What an answer from the index has read: the state, with the totals by name and the rows it
/// asked for, at the block it names.
struct Reading {
    state: State,
    tallies: Option<Vec<Tally>>,
    rows: Option<worker::D1Result>,
    block: BlockRef,
    source: Source,
}

impl Reading {
    /// The rows read; asked for by every answer that reads them.
    fn rows(&self) -> Result<&worker::D1Result> {
        self.rows.as_ref().ok_or_else(|| Error::BadConfig("the index's rows were not read".into()))
    }

    /// The answer showing `body`, read now at the block the reading names.
    fn answer(&self, body: String, deps: &Deps<'_>) -> Served {
        Served::Answer(Answer {
            body,
            block: self.block,
            grace_period: Some(self.state.grace_period),
            read_at: deps.now,
            source: self.source.clone(),
        })
    }
}

/// The state (with the totals by name if `tallies`, and the rows `rows` selects at its block),
/// once the index can answer: else the reason it cannot, as the fallback. Every answer calls it
/// through [`apart()`], so it is compiled once, not into each answer.
async fn read(
    store: &Store,
    tallies: bool,
    rows: Option<D1PreparedStatement>,
    deps: &Deps<'_>,
) -> Result<std::result::Result<Reading, Served>> {
    let read = match store.state_with(tallies, rows).await {
        Ok(read) => read,
        Err(error) => {
            // The error itself goes to the log only: a header carries one short line, and D1's
            // messages are neither.
            worker::console_warn!("reading the index's state failed: {error}");
            return Ok(Err(Served::Fallback("the index could not be read (its tables missing?)".into())));
        }
    };
    let StateRead { state, tallies, rows } = read;
    if let Some(block) = state.block.filter(|_| state.block_orphaned) {
        return Ok(Err(Served::Fallback(format!(
            "the chain no longer holds the index's block {} (a reorganisation shortened it)",
            block.number
        ))));
    }
    let Some(block) = state.complete_at() else {
        return Ok(Err(Served::Fallback("the index is not filled yet".into())));
    };
    let max_age_secs = deps.index_max_age_secs;
    let age = deps.now.saturating_sub(state.updated_at);
    if age > max_age_secs {
        return Ok(Err(Served::Fallback(format!(
            "the index's last run was {age} s ago (INDEX_MAX_AGE_SECS is {max_age_secs})"
        ))));
    }
    // The index answers: its rows are read for this answer.
    ANSWER_READS.with(|reads| reads.set(reads.get() + 1));
    let source =
        Source::Index { lag_blocks: state.head.saturating_sub(block.number), run_at: state.updated_at };
    Ok(Ok(Reading { state, tallies, rows, block, source }))
}

/// `/stats`: the totals of the state.
async fn stats(store: Store, deps: &Deps<'_>) -> Result<Served> {
    let reading = match apart(read(&store, false, None, deps)).await? {
        Ok(reading) => reading,
        Err(fallback) => return Ok(fallback),
    };
    let body = reading.state.totals.stats_body(&deps.registry, &redact::url(deps.rpc.url));
    Ok(reading.answer(body, deps))
}

/// `/stats/detailed`: the totals by name, and the newest registrations.
async fn detailed(store: Store, deps: &Deps<'_>) -> Result<Served> {
    let recent = store.recent(RECENT_REGISTRATIONS as u64)?;
    let mut reading = match apart(read(&store, true, Some(recent), deps)).await? {
        Ok(reading) => reading,
        Err(fallback) => return Ok(fallback),
    };
    fill_names(&mut reading)?;
    let recent = recent_agents(reading.rows()?)?;
    let body = reading.state.totals.detailed_body(&deps.registry, &redact::url(deps.rpc.url), &recent);
    Ok(reading.answer(body, deps))
}

/// `/revenue/aggregate`: the revenue totals by currency and category.
async fn aggregate(store: Store, deps: &Deps<'_>) -> Result<Served> {
    let mut reading = match apart(read(&store, true, None, deps)).await? {
        Ok(reading) => reading,
        Err(fallback) => return Ok(fallback),
    };
    fill_names(&mut reading)?;
    let body = reading.state.totals.aggregate_body();
    Ok(reading.answer(body, deps))
}

/// The totals kept by name put into the state's totals; past what one answer renders, a clear
/// error naming why, not a body of a million rows.
fn fill_names(reading: &mut Reading) -> Result<()> {
    if let Some(tallies) = reading.tallies.take() {
        reading.state.names.fits()?;
        super::tally::fill(&mut reading.state.totals, tallies)?;
    }
    Ok(())
}

/// `/agents`: a page of every agent by id, or of the agents with one status.
async fn agents(store: Store, query: &kya_core::api::query::AgentsQuery, deps: &Deps<'_>) -> Result<Served> {
    let rows = match query.status {
        Some(status) => {
            let (limit, offset) = status_page(query);
            Some(store.items_with_status(status, limit, offset)?)
        }
        None => None,
    };
    let reading = match apart(read(&store, false, rows, deps)).await? {
        Ok(reading) => reading,
        Err(fallback) => return Ok(fallback),
    };
    let totals = &reading.state.totals;
    let (total, items) = match query.status {
        None => {
            let total = totals.agents;
            let ids = unfiltered_page_ids(total, query);
            (total, store.items_by_id(reading.block.number, &ids).await?)
        }
        Some(status) => {
            let total = totals.status.get(status);
            let (_, offset) = status_page(query);
            (total, if offset >= total { Vec::new() } else { page_items(reading.rows()?)? })
        }
    };
    let body = agents_page_body(total, query, &items.iter().map(String::as_str).collect::<Vec<_>>());
    Ok(reading.answer(body, deps))
}

/// `/agents/compliance`, streamed.
async fn compliance_answer(store: Store, deps: &Deps<'_>) -> Result<Served> {
    let reading = match apart(read(&store, false, None, deps)).await? {
        Ok(reading) => reading,
        Err(fallback) => return Ok(fallback),
    };
    let expires_at = deps.now.saturating_add(deps.index_answer_ttl_secs);
    Ok(Served::Stream(compliance(
        store,
        &reading.state,
        reading.block,
        &reading.source,
        (deps.index_answer_ttl_secs, expires_at),
    )?))
}

/// The (limit, offset) of a status-filtered `/agents` page.
fn status_page(query: &kya_core::api::query::AgentsQuery) -> (u64, u64) {
    let limit = query.limit.max(1);
    (limit, query.page.max(1).saturating_sub(1).saturating_mul(limit))
}

/// `/agents/compliance` streamed: the head, then each slice of rows as it arrives.
/// `ttl` is its freshness in seconds, until `expires_at`.
///
/// D1 renders the items, each `"` as a stand-in JSON does not escape (parsing D1's results is the
/// binding's JSON.parse); its binding hands them over as JavaScript strings, which the runtime's
/// own `Array.join` and `TextEncoder` join and encode to UTF-8. The Worker only puts the quotes
/// back, in one pass over the bytes. Copying the strings into wasm through wasm-bindgen (a
/// UTF-16 unit at a time) and escaping every quote had been most of the endpoint's CPU
/// (`docs/index-cost.md`).
fn compliance(
    store: Store,
    state: &State,
    block: BlockRef,
    source: &Source,
    (ttl, expires_at): (u64, u64),
) -> Result<Response> {
    struct Cursor {
        store: Store,
        encoder: TextEncoder,
        /// A slice's bytes while their quotes are restored, kept for the next slice.
        buffer: Vec<u8>,
        /// The last (`lastAttestation`, id) sent; `None` once the tail is sent.
        after: Option<(i64, u64)>,
        first: bool,
    }
    let clock = state.clock_at(block);
    let bytes = |text: &str| -> JsValue { Uint8Array::from(text.as_bytes()).into() };
    let head = stream::once(std::future::ready(Ok::<JsValue, JsValue>(bytes(&compliance_head(
        state.totals.agents,
    )))));
    let start =
        Cursor { store, encoder: TextEncoder::new(), buffer: Vec::new(), after: Some((-1, 0)), first: true };
    let items = stream::unfold(start, move |mut cursor| async move {
        let after = cursor.after?;
        let read =
            cursor.store.compliance_items(block.number, clock, after, COMPLIANCE_SLICE, cursor.first).await;
        let slice = match read {
            Ok(Some(slice)) => slice,
            Ok(None) => {
                cursor.after = None;
                return Some((Ok(bytes(COMPLIANCE_TAIL)), cursor));
            }
            Err(error) => {
                // The body is cut short: a client sees JSON that does not parse, never a
                // shorter list that does.
                worker::console_error!("streaming /agents/compliance failed: {error}");
                cursor.after = None;
                return Some((Err(JsValue::from_str(&error.to_string())), cursor));
            }
        };
        cursor.after = Some(slice.last);
        cursor.first = false;
        if let Err(error) = encode(&cursor.encoder, &slice.items, &mut cursor.buffer) {
            worker::console_error!("streaming /agents/compliance failed: {error:?}");
            cursor.after = None;
            return Some((Err(error), cursor));
        }
        restore_compliance_quotes(&mut cursor.buffer);
        Some((Ok(Uint8Array::from(cursor.buffer.as_slice()).into()), cursor))
    });
    let body = wasm_streams::ReadableStream::from_stream(head.chain(items)).into_raw();
    let response = Response::from_body(ResponseBody::Stream(body))?;
    let mut pairs = vec![
        ("content-type", http::JSON.to_owned()),
        ("cache-control", crate::cache::cache_control(ttl)),
        (crate::cache::EXPIRES_AT, expires_at.to_string()),
    ];
    http::push_block(&mut pairs, block, Some(clock.grace_period));
    source.push_headers(&mut pairs);
    http::with_pairs(response, &pairs)
}

/// `texts` (JavaScript strings of ASCII) encoded into `buffer`, replacing what it held, by the
/// runtime's `TextEncoder` writing straight into the wasm memory: no joined string, no
/// intermediate array, and the strings not copied a UTF-16 unit at a time by wasm-bindgen.
fn encode(encoder: &TextEncoder, texts: &Array, buffer: &mut Vec<u8>) -> std::result::Result<(), JsValue> {
    let texts: Vec<JsString> = texts.iter().map(JsCast::unchecked_into).collect();
    // ASCII: a byte per UTF-16 unit. A text that is not would stop short, and fail below.
    let total: usize = texts.iter().map(|text| text.length() as usize).sum();
    buffer.clear();
    buffer.resize(total, 0);
    let offset = u32::try_from(buffer.as_ptr() as usize).map_err(|_| JsValue::from_str("not wasm32"))?;
    // A view of `buffer` in the wasm memory. Nothing allocates until the view's last use, so the
    // memory cannot grow under it (which would detach it: then nothing is written, and the
    // check below fails).
    let memory: WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    let view = Uint8Array::new_with_byte_offset_and_length(&memory.buffer(), offset, total as u32);
    let mut written = 0;
    for text in &texts {
        let result = encoder.encode_into(text, &view.subarray(written, total as u32));
        if result.read() != text.length() {
            return Err(JsValue::from_str("an item of /agents/compliance is not ASCII"));
        }
        written += result.written();
    }
    if written as usize != total {
        return Err(JsValue::from_str("an item of /agents/compliance is not ASCII"));
    }
    Ok(())
}

#[wasm_bindgen]
extern "C" {
    /// The runtime's `TextEncoder`, bound to take a JavaScript string as it is (web-sys's
    /// methods take a Rust `&str`, which would copy the text through wasm).
    type TextEncoder;

    #[wasm_bindgen(constructor)]
    fn new() -> TextEncoder;

    #[wasm_bindgen(method, js_name = encodeInto)]
    fn encode_into(this: &TextEncoder, text: &JsString, into: &Uint8Array) -> EncodeIntoResult;

    /// What `encodeInto` did: UTF-16 units read, bytes written.
    type EncodeIntoResult;

    #[wasm_bindgen(method, getter)]
    fn read(this: &EncodeIntoResult) -> u32;

    #[wasm_bindgen(method, getter)]
    fn written(this: &EncodeIntoResult) -> u32;
}
