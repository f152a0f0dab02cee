//! The registry index (D1 under `wrangler dev`, its tables from the project's migrations, the
//! scheduled handler run through `--test-scheduled`): the first fill sweeps every agent at one
//! pinned block over several bounded runs, a failed run leaves the index as it was and the next
//! one resumes from the stored cursor, `/health` reports it, and what it stores renders, with
//! `kya_core`'s answer code, exactly the Worker's direct answers at the index's block.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use alloy::providers::Provider;
use kya_core::index::{ComplianceRow, IndexedAgent, Totals, compliance_head, compliance_item};
use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    rpc_proxy::{self, RpcAction},
};
use serde_json::Value;

/// Agents a run reads: the demo's 66 take three runs.
const PER_RUN: u64 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_fill_sweeps_in_bounded_resumable_runs_and_matches_the_direct_answers() {
    let chain = TestChain::start().await;
    let demo = seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let agents = demo.agents.len() as u64;
    // A provider that fails every request while `failing` is set: a run that fails midway.
    let failing = Arc::new(AtomicBool::new(false));
    let fail = failing.clone();
    let proxy = rpc_proxy::start(
        Some(chain.rpc_url()),
        Arc::new(move |body: &str| {
            if fail.load(Ordering::SeqCst) {
                RpcAction::Http { status: 400, headers: vec![], body: "refused".into() }
            } else {
                RpcAction::Forward(body.to_owned())
            }
        }),
    )
    .await;
    let mut vars = chain_vars(&proxy, chain.registry());
    vars.push(("INDEX_AGENTS_PER_RUN", PER_RUN.to_string()));
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    let head = chain.chain.provider().get_block_number().await.unwrap();

    let health = api.get("/health").await;
    assert_eq!((health.status, &health.body["index"]), (200, &Value::Null), "no run yet");

    worker.run_index().await;
    let index = api.get("/health").await.body["index"].clone();
    assert_eq!(index["block"], Value::Null, "not complete: {index}");
    assert_eq!(index["agents"], PER_RUN);
    assert_eq!(index["sweep"], serde_json::json!({"block": head, "nextId": PER_RUN + 1, "agents": agents}));
    assert_eq!(index["lastRun"]["ok"], true);
    assert_eq!(
        index["lastRun"]["message"],
        format!("sweep at block {head}: agents 1 to {PER_RUN} of {agents}")
    );

    // A run whose reads fail stores nothing but its outcome; the next resumes where the
    // cursor stands.
    failing.store(true, Ordering::SeqCst);
    worker.run_index().await;
    failing.store(false, Ordering::SeqCst);
    let index = api.get("/health").await.body["index"].clone();
    assert_eq!((index["agents"].as_u64(), index["lastRun"]["ok"].as_bool()), (Some(PER_RUN), Some(false)));
    assert_eq!(index["sweep"]["nextId"], PER_RUN + 1, "the cursor did not move");
    let rows = worker.query_index("SELECT count(*) AS n FROM agents");
    assert_eq!(rows[0]["n"], PER_RUN);

    worker.run_index().await;
    worker.run_index().await;
    let index = api.get("/health").await.body["index"].clone();
    assert_eq!(index["block"], head, "complete at the sweep's pinned block: {index}");
    assert_eq!((index["agents"].as_u64(), index["lagBlocks"].as_u64()), (Some(agents), Some(0)));
    assert_eq!(index["sweep"], Value::Null);
    assert_eq!(index["lastRun"]["message"], format!("sweep complete: {agents} agents at block {head}"));

    // What the index holds renders the Worker's direct answers at the same block (the chain has
    // not moved since the sweep pinned it).
    let state: Value =
        serde_json::from_str(worker.query_index("SELECT value FROM state")[0]["value"].as_str().unwrap())
            .unwrap();
    let totals: Totals = serde_json::from_value(state["totals"].clone()).unwrap();
    let timestamp = state["block"]["timestamp"].as_u64().unwrap();
    let registry = chain.registry();
    // `/stats` names the endpoint as `kya_core::redact` shows it.
    let rpc = kya_core::redact::url(&proxy);
    let direct = |path: &'static str| {
        let api = api.clone();
        async move {
            let answer = api.get(path).await;
            assert_eq!(answer.status, 200, "{path}: {}", answer.text);
            assert_eq!(answer.header("x-block-number"), Some(head.to_string().as_str()), "{path}");
            answer.text
        }
    };
    assert_eq!(totals.stats_body(&registry, &rpc), direct("/api/v1/stats").await);
    let recent: Vec<kya_core::Agent> = worker
        .query_index("SELECT indexed FROM agents ORDER BY registered_at DESC, id DESC LIMIT 10")
        .iter()
        .map(|row| serde_json::from_str::<IndexedAgent>(row["indexed"].as_str().unwrap()).unwrap().record)
        .collect();
    assert_eq!(totals.detailed_body(&registry, &rpc, &recent), direct("/api/v1/stats/detailed").await);
    assert_eq!(totals.aggregate_body(), direct("/api/v1/revenue/aggregate").await);
    let rows = worker.query_index(
        "SELECT id, creator, status, last_attestation, child_count FROM agents ORDER BY last_attestation, id",
    );
    let items: Vec<String> = rows
        .iter()
        .map(|row| {
            let row = ComplianceRow {
                agent_id: row["id"].as_u64().unwrap(),
                creator: row["creator"].as_str().unwrap().parse().unwrap(),
                status: kya_core::AgentStatus::try_from(row["status"].as_u64().unwrap() as u8).unwrap(),
                last_attestation: row["last_attestation"].as_u64().unwrap(),
                child_count: row["child_count"].as_u64().unwrap(),
            };
            compliance_item(&row, timestamp)
        })
        .collect();
    let compliance = compliance_head(totals.agents) + &items.join(",") + "]}";
    assert_eq!(compliance, direct("/api/v1/agents/compliance").await);
}
