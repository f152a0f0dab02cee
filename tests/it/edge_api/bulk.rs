//! 1,000 agents: `/agents/compliance` costs a small constant number of RPC round trips (batches),
//! not one per agent, and a repeated request inside its TTL costs none. Prints the figures.

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

    // seed_bulk gives every third agent a revenue report; only those histories are read.
    let reporting = (1..=AGENTS).filter(|id| id % 3 == 0).count();
    // Pinned block, nextAgentId, the records in batches of 500 (RPC_BATCH_SIZE), the histories.
    let expected_round_trips = 2 + AGENTS.div_ceil(500) as usize + reporting.div_ceil(500);
    assert_eq!(round_trips, expected_round_trips, "round trips for {AGENTS} agents");
    assert_eq!(rpc_calls, 2 + AGENTS as usize + reporting, "JSON-RPC calls inside those round trips");

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

    // RPC_BATCH_SIZE bounds every batch: at 100 calls per batch, the same read takes 2 + 10 + 4.
    let mut vars = chain_vars(&proxy.url, chain.registry());
    vars.push(("RPC_BATCH_SIZE", "100".to_owned()));
    let worker = EdgeWorker::start(&vars).await;
    let (requests, started) = (proxy.requests(), Instant::now());
    let small_batches = worker.client().get("/api/v1/agents/compliance").await;
    let small_time = started.elapsed();
    assert_eq!(small_batches.body, cold.body, "batch size changes the cost, not the answer");
    let round_trips = proxy.requests() - requests;
    assert_eq!(round_trips, 2 + AGENTS.div_ceil(100) as usize + reporting.div_ceil(100));
    eprintln!("edge API, same with RPC_BATCH_SIZE=100: {round_trips} RPC round trips, cold {small_time:?}");
}
