//! The index at the chain's pace (`edge-api/src/index/pace.rs`): once the Cron Trigger's
//! watchdog has set the pacer's alarm, the pacer (a Durable Object, run by `wrangler dev` as
//! deployed) runs the index by itself, and every later watchdog call finds the alarm set.

use std::time::{Duration, Instant};

use alloy::providers::Provider;
use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars},
};
use serde_json::Value;

use super::index::health_index;

/// The watchdog's log line when it found no alarm (edge-api/src/index/pace.rs).
const ARMED: &str = "index pacer: the alarm was not set; set it";

/// Waits until the index stands at `block` or later, with no call to the scheduled handler.
async fn until_indexed(api: &EdgeClient, block: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let index = health_index(api).await;
        if index["block"].as_u64().is_some_and(|indexed| indexed >= block) {
            return index;
        }
        assert!(Instant::now() < deadline, "the pacer did not bring the index to block {block}: {index}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pacer_runs_the_index_by_itself_once_the_watchdog_has_set_its_alarm() {
    let chain = TestChain::start().await;
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.extend([
        ("INDEX_INTERVAL_SECS", "1".to_owned()),
        // Every run says so, the quiet ones too: they are counted below.
        ("INDEX_LOG_QUIET_RUNS", "on".to_owned()),
        ("INDEX_ANSWER_TTL_SECS", "0".to_owned()),
        ("MEMORY_CACHE_BYTES", "0".to_owned()),
    ]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    assert_eq!(health_index(&api).await, Value::Null, "no run before the watchdog");

    // One watchdog call: from then on the pacer runs the index.
    worker.run_index().await;
    let head = chain.chain.provider().get_block_number().await.unwrap();
    until_indexed(&api, head).await;

    // Writes mined later show without another call.
    let agents = seed::seed_bulk(&chain.chain, &chain.deployment, 10).await.expect("agents register");
    let head = chain.chain.provider().get_block_number().await.unwrap();
    let index = until_indexed(&api, head).await;
    assert_eq!(
        (index["agents"].as_u64(), index["complete"].as_bool()),
        (Some(agents), Some(true)),
        "{index}"
    );
    let stats = api.get("/api/v1/stats").await;
    assert_eq!(stats.status, 200, "{}", stats.text);
    assert_eq!(stats.header("x-index-fallback"), None, "answered from the index");
    assert_eq!(stats.body["totalAgents"], agents);

    // A later watchdog call finds the alarm set; the pacer goes on running by itself, a run a
    // second, with nothing new on the chain.
    worker.run_index().await;
    let runs_then = worker.output().matches("index run: ").count();
    let deadline = Instant::now() + Duration::from_secs(30);
    while worker.output().matches("index run: ").count() < runs_then + 3 {
        assert!(Instant::now() < deadline, "the pacer stopped:\n{}", worker.output());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = worker.output();
    assert_eq!(log.matches(ARMED).count(), 1, "armed once, by the first watchdog call:\n{log}");
    assert!(!log.contains("index run failed"), "{log}");
    // The safety-net sweep reads its agents once a minute, not in every run of the pacer.
    assert!(log.contains("no logs followed; 0 agents read, 0 changed"), "idle runs read nothing:\n{log}");

    // Empty blocks, as Base mines one every 2 s: a run that finds nothing new writes nothing
    // (the state row is written by the first run of each minute), so the index stays at the
    // block of its last write, exact there.
    // Counted first: a write between the two shows among the later runs.
    let runs_then = worker.output().matches("index run: ").count();
    let written_then = health_index(&api).await;
    for _ in 0..3 {
        chain.chain.mine().await.expect("an empty block");
    }
    while worker.output().matches("index run: ").count() < runs_then + 4 {
        assert!(
            Instant::now() < deadline + Duration::from_secs(30),
            "the pacer stopped:\n{}",
            worker.output()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = worker.output();
    let later: Vec<&str> = log.lines().filter(|line| line.contains("index run: ")).skip(runs_then).collect();
    let quiet: Vec<&&str> =
        later.iter().filter(|line| line.contains("nothing changed, nothing written")).collect();
    let committed = later.iter().filter(|line| line.contains("rows written as D1 reports them")).count();
    // Runs a second apart: at most two of four meet a new minute (and its write).
    assert!(quiet.len() >= 2 && quiet.len() + committed == later.len(), "{later:#?}");
    let kept = written_then["block"].as_u64().unwrap();
    // Until a new minute's run writes, each quiet run leaves the index at its last write's block.
    for line in later.iter().take_while(|line| !line.contains("rows written as D1 reports them")) {
        assert!(line.contains(&format!("0 changed; the index stays at block {kept}")), "{later:#?}");
    }

    // A write after quiet runs shows as before: the run follows the logs since the index's block.
    let agents_now = seed::seed_bulk(&chain.chain, &chain.deployment, 1).await.expect("an agent registers");
    assert_eq!(agents_now, agents + 1, "seed_bulk gives the registry's count");
    let agents = agents_now;
    let head = chain.chain.provider().get_block_number().await.unwrap();
    let index = until_indexed(&api, head).await;
    assert_eq!(index["agents"].as_u64(), Some(agents), "{index}");
    let stats = api.get("/api/v1/stats").await;
    assert_eq!(stats.body["totalAgents"], agents, "{}", stats.text);
}
