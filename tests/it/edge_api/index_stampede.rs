//! One refresh per data centre (issue 29, "No stampede"): requests arriving together for a
//! registry-wide answer that no cache holds fresh cause one read of the index's rows, counted by
//! the Worker where it reads them (`/health`'s `index.answerReads`), not one read each. The
//! others wait for the refreshed copy (none held yet) or are served the copy that just expired
//! (`X-Cache: STALE`), and every body equals the direct answer at the index's block.

use futures::future::join_all;
use kya_core::SnapshotAnswers;
use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars},
};

use super::index::{health_index, snapshot_of};

/// Requests sent together.
const TOGETHER: usize = 20;
/// `INDEX_ANSWER_TTL_SECS`: short, so the test waits for an expiry, yet longer than twenty
/// requests take on a loaded machine: requests still arriving after the refreshed copy expired
/// again would refresh it once more, rightly, and the test would count two reads (seen at 2 s
/// with the machine's two cores shared with builds).
const TTL: u64 = 8;

/// The answers the index has read so far (`/health` reads none).
async fn reads(api: &EdgeClient) -> u64 {
    health_index(api).await["answerReads"].as_u64().expect("answerReads in /health")
}

/// Sends [`TOGETHER`] requests for `path` at once; returns the index reads they caused, their
/// bodies, and their `X-Cache` values.
async fn together(api: &EdgeClient, path: &str) -> (u64, Vec<String>, Vec<String>) {
    // Connections opened first, so the requests reach the Worker together.
    join_all((0..TOGETHER).map(|_| api.get("/openapi.json"))).await;
    let before = reads(api).await;
    let answers = join_all((0..TOGETHER).map(|_| api.get(path))).await;
    let after = reads(api).await;
    for answer in &answers {
        assert_eq!(answer.status, 200, "{path}: {}", answer.text);
        assert_eq!(answer.header("x-index-fallback"), None, "{path}: from the index");
    }
    let caches = answers.iter().map(|answer| answer.header("x-cache").unwrap_or("").to_owned()).collect();
    (after - before, answers.into_iter().map(|answer| answer.text).collect(), caches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_requests_at_expiry_read_the_index_once() {
    let chain = TestChain::start().await;
    seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.push(("INDEX_ANSWER_TTL_SECS", TTL.to_string()));
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    worker.run_index().await;
    assert_eq!(health_index(&api).await["complete"], true, "one run fills the demo");
    let block = worker.query_index("SELECT json_extract(value, '$.block.number') AS n FROM state")[0]["n"]
        .as_u64()
        .expect("the index's block");
    let rpc = kya_core::chain::redact::url(&chain.rpc_url());
    let direct =
        SnapshotAnswers::render(&snapshot_of(&chain, chain.registry(), block).await, &chain.registry(), &rpc);

    for (path, expected) in
        [("/api/v1/agents/compliance", &direct.compliance), ("/api/v1/stats/detailed", &direct.detailed)]
    {
        // Nothing cached yet: one request reads, the others wait for its copy.
        let (read, bodies, caches) = together(&api, path).await;
        assert_eq!(read, 1, "{path}, cold: one read for {TOGETHER} requests ({caches:?})");
        assert!(bodies.iter().all(|body| body == expected), "{path}, cold: every body is the direct answer");
        assert_eq!(caches.iter().filter(|cache| *cache == "MISS").count(), 1, "{path}: {caches:?}");

        // Past the TTL: one request refreshes; the others are served the copy that expired, or
        // the refreshed one.
        tokio::time::sleep(std::time::Duration::from_secs(TTL + 1)).await;
        let (read, bodies, caches) = together(&api, path).await;
        assert_eq!(read, 1, "{path}, at expiry: one read for {TOGETHER} requests ({caches:?})");
        assert!(
            bodies.iter().all(|body| body == expected),
            "{path}, at expiry: every body is the direct answer"
        );
        assert_eq!(caches.iter().filter(|cache| *cache == "MISS").count(), 1, "{path}: {caches:?}");
        assert!(
            caches.iter().all(|cache| ["MISS", "HIT", "STALE"].contains(&cache.as_str())),
            "{path}: {caches:?}"
        );
    }
}
