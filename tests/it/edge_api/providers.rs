//! The read API behind node software and providers other than anvil (`../shared/PROVIDERS.md`):
//! through each loopback stand-in ([`ProviderShape`]), with Multicall3 and without, every
//! endpoint answers exactly what it answers straight from anvil, 404s and unregistered wallets
//! included: a provider that refuses every third request with 429 and a load balancer whose
//! backends lag the head (`header not found` at a block they have not seen) among them. Also:
//! what a client sees when a provider keeps refusing, and that the block an answer names is the
//! block whose state it read, and that a call a busy node gives up on for time is asked once
//! more.

use std::sync::{Arc, atomic::Ordering};

use alloy::{
    primitives::{Address, U256, hex},
    providers::Provider,
    sol_types::SolCall,
};
use kya_core::chain::{abi::AgentRegistry, multicall::MULTICALL3_ADDRESS};
use kya_devchain::{
    dev_accounts::{self, Role},
    seed,
};
use kya_tests::{
    TestChain, consented_register_call,
    edge_fixture::{CountingProxy, EdgeClient, EdgeWorker, chain_vars},
    provider_shapes::{self, ProviderShape},
    rpc_proxy::{self, RpcAction},
};
use serde_json::{Value, json};

/// Every endpoint, with the answers a provider's wording could break: an unknown wallet (a
/// revert that is the answer), unknown ids (reverts that are 404s), and agent 6's lineage (55
/// children, 50 of them shown: a level of 100 calls).
fn paths(unregistered: &str, registered: &str) -> Vec<String> {
    let mut paths: Vec<String> = [
        "/api/v1/stats",
        "/api/v1/stats/detailed",
        "/api/v1/agents?page=2&limit=7",
        "/api/v1/agents/compliance",
        "/api/v1/revenue/aggregate",
        "/api/v1/agent/1",
        "/api/v1/agent/4/revenue",
        "/api/v1/agent/1/lineage",
        "/api/v1/agent/6/lineage",
        "/api/v1/agent/999999",
        "/api/v1/agent/999999/lineage",
        "/api/v1/agent/999999/revenue",
    ]
    .map(str::to_owned)
    .into();
    paths.push(format!("/api/v1/kya/{unregistered}"));
    paths.push(format!("/api/v1/kya/{registered}"));
    paths
}

/// Status and body of every path; `chain` (which names the RPC endpoint the Worker was given,
/// here each stand-in's own address) set to `"<rpc>"`.
async fn answers(api: &EdgeClient, paths: &[String]) -> Vec<(u16, Value)> {
    let mut answers = Vec::new();
    for path in paths {
        let mut answer = api.get(path).await;
        if let Some(chain) = answer.body.get_mut("chain") {
            *chain = json!("<rpc>");
        }
        answers.push((answer.status, answer.body));
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_alike_through_every_provider_shape() {
    let t = TestChain::start().await;
    let demo = seed::seed_demo(&t.chain, &t.deployment).await.expect("demo data seeds");
    // 40 more agents: 106 records, one batch past the 100-call cap of BatchCap100Http413 when
    // read without Multicall3.
    let creator = dev_accounts::address(Role::CreatorA);
    for n in 0..40 {
        let wallet = dev_accounts::agent_wallet(9_998_000 + n);
        let register = consented_register_call(&t, creator, &wallet, 0).await;
        t.chain.send(creator, t.registry(), &register).await.expect("registers");
    }
    let unregistered = dev_accounts::agent_wallet(9_999_001).address().to_checksum(None);
    let registered = demo.agent(demo.roles.compliant).record.agent_wallet.to_checksum(None);
    let paths = paths(&unregistered, &registered);

    let direct = EdgeWorker::start(&chain_vars(&t.rpc_url(), t.registry())).await;
    let expected = answers(&direct.client(), &paths).await;
    drop(direct);
    // The answers worth comparing: a 200 with `isRegistered: false`, the 404s.
    let kya_missing = &expected[paths.len() - 2];
    assert_eq!(kya_missing.0, 200);
    assert_eq!((&kya_missing.1["isRegistered"], &kya_missing.1["agent"]), (&json!(false), &Value::Null));
    for index in 9..12 {
        assert_eq!(expected[index].0, 404, "{}: {}", paths[index], expected[index].1);
        assert_eq!(expected[index].1["error"], "Agent not found: 999999");
    }

    for shape in ProviderShape::ALL {
        for multicall in [true, false] {
            let (node, refused) = provider_shapes::start(&t.rpc_url(), shape).await;
            let mut vars = chain_vars(&node, t.registry());
            if !multicall {
                vars.push(("MULTICALL_ADDRESS", String::new()));
            }
            let worker = EdgeWorker::start(&vars).await;
            let got = answers(&worker.client(), &paths).await;
            for ((path, expected), got) in paths.iter().zip(&expected).zip(&got) {
                assert_eq!(got, expected, "{path} through {shape:?}, Multicall3 {multicall}");
            }
            let refusals = refused.load(Ordering::SeqCst);
            match shape {
                // Without Multicall3 the snapshot's 106 records are one batch: over either cap,
                // so refused, split, and answered.
                ProviderShape::BatchCap20 | ProviderShape::BatchCap100Http413 if !multicall => {
                    assert!(refusals > 0, "{shape:?} refused nothing: the cap was not exercised")
                }
                ProviderShape::RateLimited | ProviderShape::RateLimitedEveryThird => {
                    assert!(refusals > 0, "{shape:?}: no 429 was sent")
                }
                // Lineage reads its later levels at the first level's block; without Multicall3
                // every read pins a block first.
                ProviderShape::LaggingBackend => {
                    assert!(refusals > 0, "{shape:?}: no read at a block the backend had not seen")
                }
                _ => {}
            }
            eprintln!("{shape:?}, Multicall3 {multicall}: {refusals} refusals, answers as direct");
        }
    }

    // A busy node that gives up on one agent's revenue history for time (geth's EVM timeout):
    // split off from its `aggregate3` and asked alone once more, it answers, so the totals are
    // whole; timing out twice alone, the history is left out and named.
    let reporter = demo.revenue.first().expect("the demo reports revenue").agent_id;
    let history = hex::encode_prefixed(
        AgentRegistry::getRevenueHistoryCall { agentId: U256::from(reporter) }.abi_encode(),
    );
    let whole = &expected[4].1;
    assert_eq!(paths[4], "/api/v1/revenue/aggregate");
    let reports = demo.revenue.iter().filter(|report| report.agent_id == reporter).count() as u64;
    for (multicall, alone) in [(true, 1), (false, 1), (true, 2)] {
        let (node, timeouts) = provider_shapes::start_timing_out(&t.rpc_url(), &history, alone).await;
        let mut vars = chain_vars(&node, t.registry());
        if !multicall {
            vars.push(("MULTICALL_ADDRESS", String::new()));
        }
        let worker = EdgeWorker::start(&vars).await;
        let got = worker.client().get("/api/v1/revenue/aggregate").await;
        let within = format!("Multicall3 {multicall}, {alone} timeout(s) alone");
        assert_eq!(got.status, 200, "{within}: {}", got.text);
        let (inside, asked_alone) =
            (timeouts.inside.load(Ordering::SeqCst), timeouts.alone.load(Ordering::SeqCst));
        assert_eq!(inside > 0, multicall, "{within}: {inside} timeouts inside aggregate3");
        if alone == 1 {
            assert_eq!(got.body, *whole, "{within}");
            assert_eq!(asked_alone, 2, "{within}: timed out alone, then asked once more");
        } else {
            assert_eq!(got.body["revenueUnreadable"], json!([reporter]), "{within}");
            let left = whole["totalReports"].as_u64().expect("a count") - reports;
            assert_eq!(got.body["totalReports"], left, "{within}");
            assert_eq!(asked_alone, 2, "{within}: asked alone twice, no more");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_refusals_are_clear_errors_and_reads_name_their_block() {
    let t = TestChain::start().await;
    let wallet_key = dev_accounts::agent_wallet(9_999_002);
    let wallet = wallet_key.address();
    let creator = dev_accounts::address(Role::CreatorA);
    let register = consented_register_call(&t, creator, &wallet_key, 0).await;
    t.chain.send(creator, t.registry(), &register).await.expect("registers");

    // A provider that answers 429 every time, and one that fails with 503 every time.
    let throttled = rpc_proxy::start(
        None,
        Arc::new(|_: &str| RpcAction::Http {
            status: 429,
            headers: vec![("retry-after".into(), "2".into())],
            body: "slow down".into(),
        }),
    )
    .await;
    let failing = rpc_proxy::start(
        None,
        Arc::new(|_: &str| RpcAction::Http { status: 503, headers: vec![], body: "upstream down".into() }),
    )
    .await;
    let one_call_too_many = rpc_proxy::start(
        None,
        Arc::new(|_: &str| {
            RpcAction::Raw(
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "batch too large"}})
                    .to_string(),
            )
        }),
    )
    .await;
    let kya = format!("/api/v1/kya/{wallet}");
    for (node, status, message, retry_after) in [
        (
            &throttled,
            503,
            format!("RPC provider unavailable: {throttled} is rate-limiting this API (HTTP 429): slow down"),
            Some("2"),
        ),
        (
            &failing,
            502,
            format!("RPC provider failing: {failing} answered HTTP 503 3 times: upstream down"),
            None,
        ),
        (&one_call_too_many, 502, "RPC batch refused: batch too large (code -32600)".to_owned(), None),
    ] {
        let worker = EdgeWorker::start(&chain_vars(node, t.registry())).await;
        let api = worker.client();
        for _ in 0..2 {
            let answer = api.get(&kya).await;
            assert_eq!((answer.status, &answer.body), (status, &json!({ "error": message })), "{node}");
            assert_eq!(answer.header("cache-control"), Some("no-store"), "never cached");
            assert_eq!(answer.header("retry-after"), retry_after);
        }
    }

    // Through Multicall3 the block comes from the same `eth_call` as the data: the reported
    // block's timestamp is that block's, and the state read is that block's state.
    let proxy = CountingProxy::start(&t.rpc_url()).await;
    let worker = EdgeWorker::start(&chain_vars(&proxy.url, t.registry())).await;
    let api = worker.client();
    let before = proxy.requests();
    let answer = api.get(&kya).await;
    assert_eq!(proxy.requests() - before, 1, "one round trip for a KYA check");
    let number: u64 = answer.header("x-block-number").expect("a block").parse().unwrap();
    let timestamp: u64 = answer.header("x-block-timestamp").expect("a timestamp").parse().unwrap();
    let block =
        t.chain.provider().get_block_by_number(number.into()).await.expect("the block").expect("it exists");
    assert_eq!(block.header.timestamp, timestamp, "X-Block-Timestamp is block {number}'s");
    assert_eq!(answer.body["checkedAt"], super::expect::time(timestamp));
    let next_at_block: alloy::primitives::U256 = t
        .chain
        .provider()
        .call(
            alloy::rpc::types::TransactionRequest::default()
                .to(t.registry())
                .input(alloy::sol_types::SolCall::abi_encode(&AgentRegistry::nextAgentIdCall {}).into()),
        )
        .block(number.into())
        .await
        .map(|data| alloy::primitives::U256::from_be_slice(&data))
        .expect("nextAgentId at that block");
    let stats = api.get("/api/v1/stats").await;
    assert_eq!(stats.header("x-block-number"), Some(number.to_string().as_str()));
    assert_eq!(stats.body["totalAgents"], json!(next_at_block.to::<u64>() - 1));

    // No code at MULTICALL_ADDRESS, or a contract that is not Multicall3 there: the Worker
    // notices and reads plainly (pinned block, then calls), with the same answer.
    for elsewhere in [Address::with_last_byte(0x42), t.forwarder()] {
        assert_ne!(elsewhere, MULTICALL3_ADDRESS);
        let mut vars = chain_vars(&proxy.url, t.registry());
        vars.push(("MULTICALL_ADDRESS", elsewhere.to_checksum(None)));
        let worker = EdgeWorker::start(&vars).await;
        let before = proxy.requests();
        let plain = worker.client().get(&kya).await;
        assert_eq!((plain.status, &plain.body["agent"]), (200, &answer.body["agent"]), "{elsewhere}");
        // The aggregate3 attempt, then the pinned block, then the call.
        assert_eq!(proxy.requests() - before, 3, "{elsewhere}");
        let before = proxy.requests();
        let again = worker.client().get(&format!("/api/v1/agent/{}", answer.body["agent"]["agentId"])).await;
        assert_eq!(again.status, 200);
        assert_eq!(proxy.requests() - before, 2, "{elsewhere}: the isolate remembers: no aggregate3 attempt");
    }
}
