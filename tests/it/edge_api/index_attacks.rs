//! The registry index against what a stranger can write into a registry that limits neither its
//! strings nor its writes per block (the one deployed on Base Sepolia): a test-only registry with
//! our ABI and no limits (`contracts/test/HostileRegistry.sol`) on anvil, its block gas limit
//! raised, and the Worker under `wrangler dev` with the project's migrations and D1's production
//! limits checked on every statement (`edge-api/src/index/limits.rs`):
//!
//! - 200 KB strings in each string field (operational scope, currency, category), and 5,000
//!   distinct currencies;
//! - a block touching 2,000 agents, when a run reads 500;
//! - a block of 12,000 logs behind a provider that answers at most 10,000 (Infura's cap).
//!
//! In each, every run commits and `/health` shows it moving, and once the index is whole again
//! its answers equal a direct read of the chain at the block they name.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, B256, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    provider_shapes,
};
use serde_json::Value;

use super::index::{assert_index_answers_as, health_index};

alloy::sol!(
    /// The test-only registry with our ABI and no limits.
    #[derive(Debug)]
    HostileRegistry,
    "../contracts/artifacts/HostileRegistry.json"
);

/// Gas of each of the tests' transactions: under the 2^24 a transaction may use since Osaka.
const TX_GAS: u64 = 15_000_000;
/// The block gas limit the tests raise anvil's to, as a provider's chain may have it.
const BLOCK_GAS: u64 = 1_000_000_000;
/// A long string's length: 200 KB.
const LONG: usize = 200_000;
/// 32-byte words a transaction appends to a long string (11 M gas of storage).
const WORDS_PER_TX: usize = 500;

/// A chain with our registry (unused) and the hostile one, its block gas limit raised.
pub(super) async fn hostile_chain() -> (TestChain, Address) {
    let chain = TestChain::start().await;
    chain.chain.set_block_gas_limit(BLOCK_GAS).await.unwrap();
    let registry = chain
        .chain
        .deploy(sender(), HostileRegistry::BYTECODE.clone())
        .await
        .expect("the hostile registry deploys");
    (chain, registry)
}

fn sender() -> Address {
    dev_accounts::address(Role::Owner)
}

fn request<C: SolCall>(registry: Address, call: &C) -> TransactionRequest {
    TransactionRequest::default()
        .with_from(sender())
        .with_to(registry)
        .with_input(call.abi_encode())
        .with_gas_limit(TX_GAS)
}

/// `calls`, all mined in one block.
pub(super) async fn in_one_block<C: SolCall>(chain: &TestChain, registry: Address, calls: &[C]) -> u64 {
    mine_together(chain, calls.iter().map(|call| request(registry, call)).collect()).await
}

/// `requests`, all mined in one block; returns its number.
async fn mine_together(chain: &TestChain, requests: Vec<TransactionRequest>) -> u64 {
    let count = requests.len();
    let sent = chain.chain.send_in_blocks(requests, count).await.expect("the block is mined");
    assert_eq!(sent, count);
    chain.chain.provider().get_block_number().await.unwrap()
}

/// The appends writing `byte` repeated [`LONG`] times, each call made by `append(words, length)`.
fn long_string_appends<C>(byte: u8, append: impl Fn(Vec<B256>, U256) -> C) -> Vec<C> {
    let words = LONG / 32;
    (0..words)
        .step_by(WORDS_PER_TX)
        .map(|start| {
            let count = WORDS_PER_TX.min(words - start);
            append(vec![B256::repeat_byte(byte); count], U256::from((start + count) * 32))
        })
        .collect()
}

/// Runs the index once and returns its `/health` report, which must show a run that committed.
async fn run(worker: &EdgeWorker, step: &str) -> Value {
    worker.run_index().await;
    let index = health_index(&worker.client()).await;
    assert_eq!(index["lastRun"]["ok"], true, "{step}: {index}");
    index
}

fn vars(rpc: &str, registry: Address, per_run: u64) -> Vec<(&'static str, String)> {
    let mut vars = chain_vars(rpc, registry);
    vars.extend([
        ("INDEX_AGENTS_PER_RUN", per_run.to_string()),
        // Answers are not cached here: each check sees the index as the last run left it.
        ("INDEX_ANSWER_TTL_SECS", "0".into()),
        ("MEMORY_CACHE_BYTES", "0".into()),
    ]);
    vars
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strings_of_200_kb_and_5000_currencies_are_indexed_and_answered_exactly() {
    let started = std::time::Instant::now();
    let (chain, registry) = hostile_chain().await;
    // Four agents with short scopes, a fifth whose scope is 200 KB of control characters
    // (escaped six bytes a byte in JSON); a report of agent 2 whose currency and category are
    // 200 KB each, and an ordinary one of agent 1.
    mine_together(
        &chain,
        vec![
            request(
                registry,
                &HostileRegistry::registerManyCall { count: U256::from(4), operationalScope: "scope".into() },
            ),
            request(
                registry,
                &HostileRegistry::reportRevenueCall {
                    agentId: U256::from(1),
                    amount: U256::from(5),
                    currency: "EUR".into(),
                    category: "api".into(),
                },
            ),
            request(
                registry,
                &HostileRegistry::reportRevenueCall {
                    agentId: U256::from(2),
                    amount: U256::from(7),
                    currency: String::new(),
                    category: String::new(),
                },
            ),
        ],
    )
    .await;
    // Agent 5's scope is written from empty, in whole words.
    in_one_block(
        &chain,
        registry,
        &[HostileRegistry::registerManyCall { count: U256::from(1), operationalScope: String::new() }],
    )
    .await;
    let scope = long_string_appends(0x01, |words, length| HostileRegistry::appendScopeCall {
        agentId: U256::from(5),
        words,
        length,
    });
    in_one_block(&chain, registry, &scope).await;
    for (field, byte) in [(0u8, 0x02u8), (1, 0x03)] {
        let appends = long_string_appends(byte, |words, length| HostileRegistry::appendReportCall {
            agentId: U256::from(2),
            index: U256::ZERO,
            field: U256::from(field),
            words,
            length,
        });
        in_one_block(&chain, registry, &appends).await;
    }
    let seeded = started.elapsed();

    let worker = EdgeWorker::start_indexed(&vars(&chain.rpc_url(), registry, 200)).await;
    let api = worker.client();
    let rpc = kya_core::chain::redact::url(&chain.rpc_url());
    // A run writes at most about 2 MB: agent 2's names (1.2 MB each as JSON) take one run of
    // their own, the agents after it are put off to the next.
    let mut runs = 0;
    let mut filled = 1;
    while !run(&worker, "200 KB strings").await["complete"].as_bool().unwrap() {
        runs += 1;
        let index = health_index(&api).await;
        let moved = index["fillNextId"].as_u64().unwrap();
        assert!(moved > filled, "every run moves the fill on: {index}");
        filled = moved;
        assert!(runs < 4, "five agents, at least one a run");
    }
    assert_index_answers_as(&api, &chain, registry, &rpc, "200 KB strings").await;
    // Stored exactly, and once: the names in the tallies, nothing of the scope in the rows, and
    // the state row of fixed size.
    let longest = worker.query_index("SELECT max(length(CAST(name AS BLOB))) AS n FROM tallies");
    assert_eq!(longest[0]["n"], LONG, "the 200 KB names stored whole");
    let row = worker.query_index("SELECT max(length(indexed)) AS n FROM agents")[0]["n"].as_u64().unwrap();
    assert!(row < 2_000, "an agent's row holds no scope and no name: {row} bytes");
    let state = worker.query_index("SELECT length(value) AS n FROM state")[0]["n"].as_u64().unwrap();
    assert!(state < 2_000, "the state row is small: {state} bytes");

    // 5,000 distinct currencies, 1,000 for each of five agents, in one block.
    let reports: Vec<_> = (1..=5u64)
        .flat_map(|agent| {
            (0..10).map(move |_| HostileRegistry::reportManyCurrenciesCall {
                agentId: U256::from(agent),
                count: U256::from(100),
                prefix: format!("C{agent}-"),
            })
        })
        .collect();
    in_one_block(&chain, registry, &reports).await;
    let index = run(&worker, "5,000 currencies").await;
    assert_eq!(index["complete"], true, "{index}");
    assert_index_answers_as(&api, &chain, registry, &rpc, "5,000 currencies").await;
    let currencies = worker.query_index("SELECT count(*) AS n FROM tallies WHERE kind = 0")[0]["n"].clone();
    assert_eq!(currencies, 5_000 + 2, "EUR, the 200 KB one and 5,000 more");
    let state = worker.query_index("SELECT length(value) AS n FROM state")[0]["n"].as_u64().unwrap();
    assert!(state < 2_000, "the state row stays small with 5,002 currencies: {state} bytes");
    eprintln!(
        "long strings and 5,000 currencies: {:?} ({seeded:?} writing the chain); runs made at most {} D1 queries",
        started.elapsed(),
        most_queries(&worker)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_touching_2000_agents_and_one_of_12000_logs_behind_a_result_cap_do_not_hold_the_index() {
    const AGENTS: u64 = 2_000;
    const PER_RUN: u64 = 500;
    let started = std::time::Instant::now();
    let (chain, registry) = hostile_chain().await;
    let registrations: Vec<_> = (0..AGENTS / 100)
        .map(|_| HostileRegistry::registerManyCall { count: U256::from(100), operationalScope: "s".into() })
        .collect();
    in_one_block(&chain, registry, &registrations).await;
    let (proxy, log_requests) = provider_shapes::start_log_capped(&chain.rpc_url()).await;
    let worker = EdgeWorker::start_indexed(&vars(&proxy, registry, PER_RUN)).await;
    let api = worker.client();
    let rpc = kya_core::chain::redact::url(&proxy);

    // The fill: 500 agents a run, each run moving it on.
    for run_number in 1..=AGENTS / PER_RUN {
        let index = run(&worker, "the fill").await;
        assert_eq!(index["fillNextId"], run_number * PER_RUN + 1, "{index}");
    }
    assert_index_answers_as(&api, &chain, registry, &rpc, "filled").await;

    // One block attests every agent: a run reads the first 500, and the rest over the next
    // runs, the index not answering until they are read.
    let block = in_one_block(
        &chain,
        registry,
        &(0..4)
            .map(|part| HostileRegistry::attestManyCall {
                from: U256::from(part * PER_RUN + 1),
                to: U256::from((part + 1) * PER_RUN),
                times: U256::from(1),
            })
            .collect::<Vec<_>>(),
    )
    .await;
    chain.chain.mine().await.unwrap();
    for next in [PER_RUN + 1, 2 * PER_RUN + 1, 3 * PER_RUN + 1] {
        let index = run(&worker, "a block touching 2,000 agents").await;
        assert!(index["block"].as_u64().unwrap() >= block, "the index moved past the block: {index}");
        assert_eq!(index["complete"], false, "{index}");
        assert_eq!(
            (index["reread"]["nextId"].as_u64(), index["reread"]["endId"].as_u64()),
            (Some(next), Some(AGENTS + 1))
        );
        // (A query the checks do not make: a fallback answer is cached like a direct one.)
        let page = api.get("/api/v1/agents?limit=3").await;
        assert!(page.header("x-index-fallback").is_some(), "not answered from a partial index");
    }
    let index = run(&worker, "a block touching 2,000 agents").await;
    assert_eq!((index["complete"].as_bool(), index["reread"].clone()), (Some(true), Value::Null), "{index}");
    assert_index_answers_as(&api, &chain, registry, &rpc, "2,000 agents in one block").await;

    // A block of 12,000 logs of agent 7: the provider refuses them, even for that block alone.
    let logs_before = log_requests.load(std::sync::atomic::Ordering::SeqCst);
    let block = in_one_block(
        &chain,
        registry,
        &(0..4)
            .map(|_| HostileRegistry::attestManyCall {
                from: U256::from(7),
                to: U256::from(7),
                times: U256::from(3_000),
            })
            .collect::<Vec<_>>(),
    )
    .await;
    let index = run(&worker, "12,000 logs in a block").await;
    assert!(log_requests.load(std::sync::atomic::Ordering::SeqCst) > logs_before);
    assert_eq!(index["block"], block, "the run moved past the refused block: {index}");
    let message = index["lastRun"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "the provider refused the logs of block {block} alone: every agent is read again"
        )),
        "{message}"
    );
    assert_eq!(index["complete"], false, "{index}");
    let mut runs = 1;
    let mut next = index["reread"]["nextId"].as_u64().unwrap();
    while index_incomplete(&api).await {
        let index = run(&worker, "reading every agent again").await;
        runs += 1;
        if let Some(moved) = index["reread"]["nextId"].as_u64() {
            assert!(moved > next, "every run moves on: {index}");
            next = moved;
        }
        assert!(runs <= 6, "2,000 agents at 500 a run: {index}");
    }
    assert_index_answers_as(&api, &chain, registry, &rpc, "12,000 logs in a block").await;
    eprintln!(
        "2,000 agents in a block and 12,000 logs: {:?}; runs made at most {} D1 queries",
        started.elapsed(),
        most_queries(&worker)
    );
}

async fn index_incomplete(api: &kya_tests::edge_fixture::EdgeClient) -> bool {
    health_index(api).await["complete"] == false
}

/// The most D1 queries a committed run made, from the Worker's log (`index run: … (N D1
/// queries, M rows written …)`); D1's limits, checked on every statement, held them under
/// `INDEX_D1_QUERIES` (Workers Free's 50 here).
fn most_queries(worker: &EdgeWorker) -> u64 {
    let most = worker
        .output()
        .lines()
        .filter_map(|line| line.split_once("index run: ")?.1.rsplit_once(" (")?.1.split_once(" D1 queries"))
        .filter_map(|(count, _)| count.parse().ok())
        .max()
        .unwrap_or(0);
    assert!((1..=50).contains(&most), "the runs' logs name their D1 queries, at most 50: {most}");
    most
}
