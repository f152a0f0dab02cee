//! 1,000 agents: `/agents/compliance` costs two RPC round trips and six billed calls through
//! Multicall3 (the plain pinned batches, with Multicall3 off, a constant few round trips), and a
//! repeated request inside its TTL costs none. Prints the figures.

use std::time::Instant;

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars},
};

const AGENTS: u64 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compliance_of_1000_agents_costs_a_constant_number_of_round_trips() {
    let chain = TestChain::start().await;
    seed::seed_bulk(&chain.chain, &chain.deployment, AGENTS).await.expect("bulk seed");
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    let worker = EdgeWorker::start(&chain_vars(&proxy.url, chain.registry())).await;
    let api = worker.client();
    let now = chain.chain.latest_timestamp().await.unwrap();

    let (requests, calls, started) = (proxy.requests(), proxy.calls(), Instant::now());
    let cold = api.get("/api/v1/agents/compliance").await;
    let cold_time = started.elapsed();
    let round_trips = proxy.requests() - requests;
    let rpc_calls = proxy.calls() - calls;
    assert_eq!(cold.status, 200, "{}", cold.body);

    // Through Multicall3: nextAgentId with the first 199 agents' records and histories (one
    // aggregate3 of 399 calls), then the other 801 agents' 1,602 calls in aggregate3s of 400.
    // Two rounds, one HTTP request each: the second's five aggregate3 calls fit one body of at
    // most 1.5 MiB (at 10,000 agents they take 13 bodies side by side: docs/bench/rpc-cost.md).
    assert_eq!(round_trips, 2, "HTTP requests for {AGENTS} agents");
    assert_eq!(rpc_calls, 1 + (2 * (AGENTS as usize - 199)).div_ceil(400), "billed eth_calls");
    assert!(rpc_calls * 100 <= AGENTS as usize, "billed calls at most 1% of the agents");

    let data = cold.body["data"].as_array().expect("a list");
    assert_eq!((cold.body["total"].as_u64(), data.len()), (Some(AGENTS), AGENTS as usize));
    let ages: Vec<u64> =
        data.iter().map(|item| item["compliance"]["secondsSinceAttestation"].as_u64().unwrap()).collect();
    assert!(ages.windows(2).all(|pair| pair[0] >= pair[1]), "stalest attestation first");
    // seed_bulk: every fiftieth agent (id % 50 == 7, 13, 29) leaves Active; id % 4 == 0 never re-attests.
    let status_of = |id: u64| match id % 50 {
        7 => "Suspended",
        13 => "Revoked",
        29 => "Terminated",
        _ => "Active",
    };
    for item in data {
        let id = item["agentId"].as_u64().unwrap();
        assert_eq!(item["status"], status_of(id), "agent {id}");
        let age = item["compliance"]["secondsSinceAttestation"].as_u64().unwrap();
        assert_eq!(age > 7 * 86_400, id % 4 == 0, "agent {id}: attestation age {age} at {now}");
    }

    let (requests, started) = (proxy.requests(), Instant::now());
    let warm = api.get("/api/v1/agents/compliance").await;
    let warm_time = started.elapsed();
    assert_eq!((warm.status, warm.header("x-cache")), (200, Some("HIT")));
    assert_eq!(proxy.requests(), requests, "a repeated request inside its TTL makes no RPC request");
    let stats = api.get("/api/v1/stats/detailed").await;
    assert_eq!(stats.body["totalAgents"].as_u64(), Some(AGENTS));
    assert_eq!(proxy.requests(), requests, "the cached snapshot serves /stats/detailed too");

    eprintln!(
        "edge API, /agents/compliance on {AGENTS} agents: {round_trips} RPC round trips ({rpc_calls} calls), \
         cold {cold_time:?}, warm (cached) {warm_time:?}"
    );
    drop(worker);

    // Without the memory tier (MEMORY_CACHE_BYTES=0) a repeated request is a Cache API hit, and
    // the snapshot's other answers load from the Cache API's compact copy: still no RPC request.
    let mut vars = chain_vars(&proxy.url, chain.registry());
    vars.push(("MEMORY_CACHE_BYTES", "0".to_owned()));
    let worker = EdgeWorker::start(&vars).await;
    let api = worker.client();
    let first = api.get("/api/v1/agents/compliance").await;
    let requests = proxy.requests();
    let again = api.get("/api/v1/agents/compliance").await;
    assert_eq!((again.header("x-cache"), again.header("x-cache-tier")), (Some("HIT"), Some("cache-api")));
    assert_eq!((&again.body, &first.body), (&cold.body, &cold.body));
    let page = api.get("/api/v1/agents?status=Suspended&page=2&limit=7").await;
    assert_eq!((page.header("x-cache"), page.header("x-cache-tier")), (Some("MISS"), None));
    assert_eq!(
        proxy.requests(),
        requests,
        "the snapshot came from the Cache API, not the chain; the Worker's log:\n{}",
        worker.output()
    );
    let suspended: Vec<u64> = (1..=AGENTS).filter(|id| id % 50 == 7).collect();
    let shown: Vec<u64> =
        page.body["data"].as_array().unwrap().iter().map(|item| item["agentId"].as_u64().unwrap()).collect();
    assert_eq!(shown, suspended[7..14], "page 2 of 7 suspended agents");
    assert_eq!(page.body["total"].as_u64(), Some(suspended.len() as u64));
    drop(worker);

    // Without Multicall3 (MULTICALL_ADDRESS empty): the pinned block, nextAgentId and the
    // registry's grace period, the records in batches of RPC_BATCH_SIZE, then the histories of
    // the agents that reported revenue (seed_bulk gives every third agent a report).
    let reporting = (1..=AGENTS).filter(|id| id % 3 == 0).count();
    for batch in [500, 100] {
        let mut vars = chain_vars(&proxy.url, chain.registry());
        vars.push(("MULTICALL_ADDRESS", String::new()));
        vars.push(("RPC_BATCH_SIZE", batch.to_string()));
        let worker = EdgeWorker::start(&vars).await;
        let (requests, calls, started) = (proxy.requests(), proxy.calls(), Instant::now());
        let plain = worker.client().get("/api/v1/agents/compliance").await;
        let plain_time = started.elapsed();
        assert_eq!(plain.body, cold.body, "the way of reading changes the cost, not the answer");
        let round_trips = proxy.requests() - requests;
        let rpc_calls = proxy.calls() - calls;
        assert_eq!(round_trips, 2 + AGENTS.div_ceil(batch) as usize + reporting.div_ceil(batch as usize));
        assert_eq!(rpc_calls, 3 + AGENTS as usize + reporting);
        eprintln!(
            "edge API, without Multicall3, RPC_BATCH_SIZE={batch}: {round_trips} round trips \
             ({rpc_calls} calls), cold {plain_time:?}"
        );
    }
}
