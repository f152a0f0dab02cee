//! JSON-RPC over `fetch`: reads of a [`CallPlan`] through Multicall3 (one `eth_call` per few
//! hundred calls, the block read with the data) or, without it, at a pinned block in batches;
//! and the transport under both, which copes with what hosted providers refuse: a batch too
//! large is split (and the isolate remembers the smaller size), HTTP 429 and 5xx are retried
//! with backoff within the request's subrequest budget, then answered as a clear 503 or 502; a
//! read at a block a load balancer's backend has not seen yet (`header not found`) is made again
//! after a short wait. The waits and bounds are `kya_core::chain::retry`'s, the relayer's too.
//! Calls that run out of gas inside an `aggregate3` (one call past the provider's `eth_call` gas
//! cap starves the calls after it) are read again in smaller pieces at the same block, down to
//! single calls, in the same way.

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeSet, HashMap, HashSet},
    time::Duration,
};

use alloy_primitives::{Address, B256};
use futures::future::{LocalBoxFuture, try_join_all};
use kya_core::{
    BlockRef, Error as CoreError,
    chain::{
        multicall::{Aggregated, CALLS_PER_AGGREGATE, read_again, starved_pieces},
        redact,
        retry::{self, Effect, Failure},
        rpc::{
            BlockTag, CallPlan, Outcome, batch_body, batches, block_request, decode_headers,
            decode_pinned_block, header_requests, pin_block_request, whole_batch_error,
        },
    },
};
use wasm_bindgen::JsValue;
use worker::{Delay, Fetch, Headers, Method, Request, RequestInit};

use crate::{Error, Result};

/// RPC requests one API request may make: Workers Free allows 50 subrequests per request, and
/// the Cache API takes a few of them.
pub(crate) const SUBREQUEST_BUDGET: u32 = 40;
/// Requests a second read of a call the node gave up on for time must leave in the budget (the
/// rest of the read, and a provider's 429 on the way): a retry that could turn an answer naming
/// an unreadable history into a 503 is not made.
const TIMEOUT_RETRY_RESERVE: u32 = 4;

thread_local! {
    /// Batch sizes providers refused, by RPC URL: later requests of this isolate start below.
    static LEARNED_BATCH_SIZE: RefCell<HashMap<String, usize>> = RefCell::new(HashMap::new());
    /// (RPC URL, address) pairs where Multicall3 has no code: read without it there.
    static NO_MULTICALL: RefCell<HashSet<(String, Address)>> = RefCell::new(HashSet::new());
}

/// A JSON-RPC endpoint, how it is read, and what one API request may still spend on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rpc<'a> {
    pub(crate) url: &'a str,
    /// Largest number of calls in one JSON-RPC batch (`RPC_BATCH_SIZE`).
    pub(crate) batch_size: usize,
    /// Multicall3's address, `None` when `MULTICALL_ADDRESS` is empty.
    pub(crate) multicall: Option<Address>,
    /// HTTP requests this API request may still make.
    pub(crate) budget: &'a Cell<u32>,
    /// The block a read at `latest` reads instead, by its hash ([`Rpc::pinned_to`]).
    pub(crate) pinned: Option<(BlockRef, B256)>,
}

impl<'a> Rpc<'a> {
    /// This endpoint, with every read that would be at `latest` made at `block` by its `hash`
    /// (EIP-1898, canonical required): what is read is that block's state, whichever backend
    /// answers, or the read fails. For answers that state a block's hash (a pass).
    pub(crate) fn pinned_to(self, block: BlockRef, hash: B256) -> Rpc<'a> {
        Rpc { pinned: Some((block, hash)), ..self }
    }

    /// Where a read asked for at `at` (else the latest block) goes: the block, when known
    /// before the read, and the tag to read it by.
    fn target(&self, at: Option<BlockRef>) -> (Option<BlockRef>, BlockTag) {
        match (at, self.pinned) {
            (Some(block), _) => (Some(block), BlockTag::Number(block.number)),
            (None, Some((block, hash))) => (Some(block), BlockTag::Hash(hash)),
            (None, None) => (None, BlockTag::Latest),
        }
    }

    /// Number and timestamp of the latest block.
    pub(crate) async fn pin(&self) -> Result<BlockRef> {
        let answer = self.post(pin_block_request()).await?;
        Ok(decode_pinned_block(&answer)?)
    }

    /// Number and timestamp of block `number`.
    pub(crate) async fn block(&self, number: u64) -> Result<BlockRef> {
        let answer = self.post(block_request(BlockTag::Number(number))).await?;
        Ok(decode_pinned_block(&answer)?)
    }

    /// The headers of blocks `numbers`, asked in one batch: each block with its hash, `None`
    /// where the node has no such block.
    pub(crate) async fn headers(&self, numbers: &[u64]) -> Result<Vec<Option<(BlockRef, B256)>>> {
        if numbers.is_empty() {
            return Ok(Vec::new());
        }
        self.exchange(&header_requests(numbers), |answers| decode_headers(answers, numbers.len())).await
    }

    /// The latest block's header with its hash (the `latest` a read beside it may or may not
    /// have seen: [`crate::reads::hashed`] compares numbers).
    pub(crate) async fn latest_header(&self) -> Result<Option<(BlockRef, B256)>> {
        let requests = [pin_block_request()];
        let mut headers = self.exchange(&requests, |answers| decode_headers(answers, 1)).await?;
        Ok(headers.pop().flatten())
    }

    /// One JSON-RPC request's answer, through the same transport as every read (retries,
    /// budget); the caller decodes it.
    pub(crate) async fn request(&self, body: String) -> Result<String> {
        self.post(body).await
    }

    /// Runs every call of `plan` at one block: `at`, or the latest one. Returns that block and
    /// the outcomes in plan order.
    pub(crate) async fn read(
        &self,
        plan: &CallPlan,
        at: Option<BlockRef>,
    ) -> Result<(BlockRef, Vec<Outcome>)> {
        let (at, tag) = self.target(at);
        if plan.is_empty() {
            let block = match at {
                Some(block) => block,
                None => self.pin().await?,
            };
            return Ok((block, Vec::new()));
        }
        if let Some(multicall) = self.multicall.filter(|address| self.multicall_may_exist(*address)) {
            let mut aggregated = self.aggregate(plan, multicall, tag).await?;
            let mut moved = None;
            // A block was mined between two chunks read at `latest`: all again at the first's.
            if let Aggregated::BlockMoved(first) = aggregated {
                moved = Some(first);
                aggregated = self.aggregate(plan, multicall, BlockTag::Number(first.number)).await?;
            }
            let (block, outcomes) = match aggregated {
                // Read by hash: Multicall3's number and time must be the header's. (A read by
                // number answers for whatever block now has it: its caller compares.)
                Aggregated::Read(block, _)
                    if matches!(tag, BlockTag::Hash(_)) && at.is_some_and(|expected| expected != block) =>
                {
                    return Err(CoreError::Rpc(format!(
                        "the read at block {} found block {} ({})",
                        at.map_or(0, |expected| expected.number),
                        block.number,
                        block.timestamp
                    ))
                    .into());
                }
                Aggregated::Read(block, outcomes) => (block, outcomes),
                // Every chunk ran out of gas: nothing said which block it read.
                Aggregated::Starved => {
                    let block = match at.or(moved) {
                        Some(block) => block,
                        None => self.pin().await?,
                    };
                    (block, vec![Outcome::OutOfGas("aggregate3 ran out of gas".into()); plan.len()])
                }
                Aggregated::BlockMoved(_) => {
                    return Err(CoreError::Rpc("Multicall3 reads at one block disagree".into()).into());
                }
                Aggregated::NoMulticall => {
                    worker::console_warn!("no Multicall3 code at {multicall}: reading without it");
                    NO_MULTICALL
                        .with(|missing| missing.borrow_mut().insert((self.url.to_owned(), multicall)));
                    return self.read_pinned(plan, at, tag).await;
                }
            };
            return Ok((block, self.isolate_starved(plan, multicall, block, outcomes).await?));
        }
        self.read_pinned(plan, at, tag).await
    }

    /// Every call of `plan` as its own `eth_call` at `at` (or the latest block, pinned first),
    /// in batches. A call that runs out of gas here is out of gas alone; one the node gave up on
    /// for time is read once more, as in [`Rpc::isolate_starved`].
    async fn read_pinned(
        &self,
        plan: &CallPlan,
        at: Option<BlockRef>,
        tag: BlockTag,
    ) -> Result<(BlockRef, Vec<Outcome>)> {
        let (block, tag) = match at {
            Some(block) => (block, tag),
            None => {
                let block = self.pin().await?;
                (block, BlockTag::Number(block.number))
            }
        };
        let requests = plan.requests(tag);
        let mut outcomes = self.exchange(&requests, |answers| plan.decode(answers)).await?;
        let timed_out: Vec<usize> =
            (0..outcomes.len()).filter(|&index| outcomes[index].timed_out()).collect();
        if !timed_out.is_empty() && self.may_retry_timeouts(timed_out.len().div_ceil(self.batch_limit())) {
            // Pieces of one call are plain `eth_call`s: no Multicall3 address is used. Each is
            // already read once, so this second read is its last.
            let pieces = timed_out.iter().map(|&index| vec![index]).collect();
            let retried = timed_out.into_iter().collect();
            self.read_again_at(plan, Address::ZERO, block, pieces, retried, &mut outcomes).await?;
        }
        Ok((block, outcomes))
    }

    /// Reads the calls that ran out of gas in an `aggregate3` (starved by a call that needs more
    /// than the provider's gas cap, or a whole `eth_call` out of gas) again at `block`, in the
    /// smaller pieces of `kya_core::chain::multicall::split_starved` (a lone call as a plain
    /// `eth_call`), round after round, within the request's subrequest budget, as refused
    /// batches are split. Only a call out of gas alone keeps [`Outcome::OutOfGas`].
    async fn isolate_starved(
        &self,
        plan: &CallPlan,
        multicall: Address,
        block: BlockRef,
        mut outcomes: Vec<Outcome>,
    ) -> Result<Vec<Outcome>> {
        let pieces = starved_pieces(&outcomes, CALLS_PER_AGGREGATE);
        if !pieces.is_empty() {
            worker::console_warn!("calls ran out of gas in aggregate3: reading them again in smaller pieces");
        }
        self.read_again_at(plan, multicall, block, pieces, BTreeSet::new(), &mut outcomes).await?;
        Ok(outcomes)
    }

    /// Reads `pieces` of `plan` at `block` (a piece of several calls through `multicall`'s
    /// `aggregate3`, a lone call as a plain `eth_call`) into `outcomes`, round after round, as
    /// `kya_core::chain::multicall::read_again` says: starved pieces split, a lone call that timed out
    /// read once more unless it is in `retried` or the budget cannot spare it.
    async fn read_again_at(
        &self,
        plan: &CallPlan,
        multicall: Address,
        block: BlockRef,
        mut pieces: Vec<Vec<usize>>,
        mut retried: BTreeSet<usize>,
        outcomes: &mut [Outcome],
    ) -> Result<()> {
        while !pieces.is_empty() {
            let requests = plan.piece_requests(multicall, block.number, &pieces);
            let reads = self
                .exchange(&requests, |answers| plan.decode_pieces(&pieces, block.number, answers))
                .await?;
            let mut next = Vec::new();
            for (piece, read) in pieces.iter().zip(reads) {
                next.extend(read_again(piece, &read, &mut retried, self.may_retry_timeouts(1)));
                for (&index, outcome) in piece.iter().zip(read) {
                    outcomes[index] = outcome;
                }
            }
            pieces = next;
        }
        Ok(())
    }

    /// True while the budget can spare `requests` for a second read of calls the node gave up on
    /// for time, and still keep [`TIMEOUT_RETRY_RESERVE`].
    fn may_retry_timeouts(&self, requests: usize) -> bool {
        usize::try_from(self.budget.get()).unwrap_or(usize::MAX) > requests + TIMEOUT_RETRY_RESERVE as usize
    }

    /// True when reads go through Multicall3 (configured, and not found missing here).
    pub(crate) fn uses_multicall(&self) -> bool {
        self.multicall.is_some_and(|address| self.multicall_may_exist(address))
    }

    fn multicall_may_exist(&self, address: Address) -> bool {
        NO_MULTICALL.with(|missing| !missing.borrow().contains(&(self.url.to_owned(), address)))
    }

    async fn aggregate(&self, plan: &CallPlan, multicall: Address, tag: BlockTag) -> Result<Aggregated> {
        let requests = plan.aggregate_requests(multicall, tag, CALLS_PER_AGGREGATE);
        self.exchange(&requests, |answers| plan.decode_aggregates(CALLS_PER_AGGREGATE, answers)).await
    }

    /// Sends `requests` and decodes their answers with `decode`. A read at a block the node has
    /// not seen yet (a load balancer's backend behind the one that named the block: `header not
    /// found` and the like, [`CoreError::UnseenBlock`]) is sent again after `kya_core::chain::retry`'s
    /// wait, while its attempts last and this request's subrequest budget can pay for it.
    async fn exchange<T>(
        &self,
        requests: &[String],
        decode: impl Fn(&[String]) -> kya_core::Result<T>,
    ) -> Result<T> {
        let mut attempt = 1;
        loop {
            let read = match self.send(requests).await {
                Ok(answers) => decode(&answers).map_err(Error::from),
                Err(error) => Err(error),
            };
            let Err(Error::Core(CoreError::UnseenBlock(message))) = &read else { return read };
            let wait = retry::wait_before_retry(Effect::Read, attempt, Failure::UnseenBlock);
            let affordable = self.budget.get() as usize >= requests.len().div_ceil(self.batch_limit());
            let Some(wait) = wait.filter(|_| affordable) else { return read };
            worker::console_warn!(
                "the RPC provider has not seen the block read ({message}): reading again in {wait:?}"
            );
            Delay::from(wait).await;
            attempt += 1;
        }
    }

    /// Sends `requests` in batches (concurrently) and returns the answer bodies.
    async fn send(&self, requests: &[String]) -> Result<Vec<String>> {
        let size = self.batch_limit();
        let requests = requests.iter().map(String::as_str).collect();
        let answers =
            try_join_all(batches(requests, size).into_iter().map(|batch| self.send_batch(batch))).await?;
        Ok(answers.into_iter().flatten().collect())
    }

    /// Most requests in one batch: the configured size, or less once a provider refused it.
    fn batch_limit(&self) -> usize {
        self.batch_size.min(self.learned_batch_size().unwrap_or(usize::MAX)).max(1)
    }

    /// One batch; a batch refused for its size is split in halves, each sent on its own.
    fn send_batch<'s>(&'s self, batch: Vec<&'s str>) -> LocalBoxFuture<'s, Result<Vec<String>>> {
        Box::pin(async move {
            let answer = match self.post(batch_body(&batch)).await {
                Err(Error::Core(CoreError::BatchRefused(_))) if batch.len() > 1 => None,
                Err(error) => return Err(error),
                Ok(answer) => match whole_batch_error(&answer) {
                    Some(CoreError::BatchRefused(_)) if batch.len() > 1 => None,
                    Some(error) => return Err(error.into()),
                    None => Some(answer),
                },
            };
            if let Some(answer) = answer {
                return Ok(vec![answer]);
            }
            let half = batch.len().div_ceil(2);
            self.learn_batch_size(half);
            let mut second = batch;
            let first: Vec<&str> = second.drain(..half).collect();
            let (first, second) =
                futures::future::try_join(self.send_batch(first), self.send_batch(second)).await?;
            Ok(first.into_iter().chain(second).collect())
        })
    }

    fn learned_batch_size(&self) -> Option<usize> {
        LEARNED_BATCH_SIZE.with(|learned| learned.borrow().get(self.url).copied())
    }

    fn learn_batch_size(&self, size: usize) {
        worker::console_warn!("the RPC provider refused a batch: batches of at most {size} from now on");
        LEARNED_BATCH_SIZE.with(|learned| {
            let mut learned = learned.borrow_mut();
            let entry = learned.entry(self.url.to_owned()).or_insert(size);
            *entry = (*entry).min(size);
        });
    }

    /// One JSON-RPC POST, retried on HTTP 429 and 5xx as `kya_core::chain::retry` says (backoff,
    /// honouring `Retry-After`) while its attempts and the request's subrequest budget last.
    async fn post(&self, body: String) -> Result<String> {
        let shown = redact::url(self.url);
        let mut attempt = 1;
        loop {
            let remaining = self.budget.get();
            if remaining == 0 {
                return Err(Error::ProviderUnavailable {
                    message: format!("{shown}: this request used up its {SUBREQUEST_BUDGET} RPC requests"),
                    retry_after: None,
                });
            }
            self.budget.set(remaining - 1);
            let (status, retry_after, text) = self.post_once(&body, &shown).await?;
            match status {
                200..=299 => return Ok(text),
                413 => return Err(CoreError::BatchRefused(format!("{shown} answered HTTP 413")).into()),
                429 | 500..=599 => {
                    let failure = Failure::Http { status, retry_after };
                    let Some(wait) = retry::wait_before_retry(Effect::Read, attempt, failure) else {
                        return Err(refusal(&shown, status, attempt, retry_after, &text));
                    };
                    Delay::from(wait).await;
                    attempt += 1;
                }
                _ => {
                    let excerpt: String = text.chars().take(120).collect();
                    return Err(Error::RpcUnreachable(format!("{shown} answered HTTP {status}: {excerpt}")));
                }
            }
        }
    }

    /// One HTTP POST: status, `Retry-After` and body.
    async fn post_once(&self, body: &str, shown: &str) -> Result<(u16, Option<Duration>, String)> {
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_headers(headers).with_body(Some(JsValue::from_str(body)));
        // Messages name the endpoint without the API key a hosted node's URL may carry.
        let redact = |error: worker::Error| redact::urls_in(&error.to_string());
        let request = Request::new_with_init(self.url, &init).map_err(|error| {
            Error::BadConfig(format!("RPC_URL is not usable ({shown}): {}", redact(error)))
        })?;
        let response = Fetch::Request(request)
            .send()
            .await
            .map_err(|error| Error::RpcUnreachable(format!("{shown}: {}", redact(error))))?;
        let retry_after = response
            .headers()
            .get("retry-after")
            .ok()
            .flatten()
            .and_then(|header| retry::retry_after(&header));
        let status = response.status_code();
        let text = body_text(response).await.map_err(|error| Error::RpcUnreachable(redact(error)))?;
        Ok((status, retry_after, text))
    }
}

/// A response's body as text, read by the runtime and handed to wasm as one string.
/// workers-rs' `Response::text` gathers the body's stream chunk by chunk into wasm instead: 0.9 ms
/// of the Worker's CPU for the `aggregate3` answer of an index run of 100 changed agents.
/// Bytes that are not UTF-8 become U+FFFD, and the JSON-RPC decoding then says what it got.
async fn body_text(response: worker::Response) -> worker::Result<String> {
    let response: worker::web_sys::Response = response.into();
    let text = worker::wasm_bindgen_futures::JsFuture::from(response.text()?).await?;
    Ok(text.as_string().unwrap_or_default())
}

/// The error for a provider that kept refusing (`attempts` times): 503 for a rate limit (with
/// its `Retry-After`), 502 for a failing upstream.
fn refusal(shown: &str, status: u16, attempts: u32, retry_after: Option<Duration>, text: &str) -> Error {
    let excerpt: String = text.chars().take(120).collect();
    if status == 429 {
        Error::ProviderUnavailable {
            message: format!("{shown} is rate-limiting this API (HTTP 429): {excerpt}"),
            retry_after: Some(retry_after.map_or(1, |wait| wait.as_secs().max(1))),
        }
    } else {
        let times = if attempts == 1 { "once".to_owned() } else { format!("{attempts} times") };
        Error::ProviderFailed(format!("{shown} answered HTTP {status} {times}: {excerpt}"))
    }
}
