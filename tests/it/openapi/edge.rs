//! The edge API's document against the real Worker on the demo seed.

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    repo_root,
};

/// Examples per operation: GET, HEAD and OPTIONS of the 15 paths and their boundary cases in
/// under half a minute here.
const MAX_EXAMPLES: u32 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_serves_its_document_and_schemathesis_finds_nothing() {
    let chain = TestChain::start().await;
    seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    // With the index's tables, as deployed: the change feed answers from them (no run has
    // filled the index, so the registry-wide endpoints read the chain).
    // With pass keys, as a deployment that issues passes: their endpoints answer 200.
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    let keys =
        kya_core::pass::SigningKeys::new(kya_core::pass::SigningKey::from_seed(&[0x91; 32]), Vec::new());
    vars.push(("PASS_SIGNING_KEYS", keys.private_json()));
    let worker = EdgeWorker::start_indexed(&vars).await;

    let served = worker.client().get("/openapi.json").await;
    assert_eq!(served.status, 200);
    assert_eq!(served.header("content-type"), Some("application/json; charset=utf-8"));
    let kept = std::fs::read_to_string(repo_root().join("edge-api/openapi.json")).expect("the document");
    assert_eq!(served.text, kept, "the Worker serves edge-api/openapi.json as it is");

    let workdir = tempfile::tempdir().expect("a temporary directory");
    let report = super::schemathesis(&worker.base, MAX_EXAMPLES, "edge.toml", workdir.path()).await;
    // Every operation was tested, HEAD and OPTIONS of every path too. (Before the stream's path
    // and its `[[operations]]` settings in edge.toml, the seeded run left one operation with no
    // check applied, taken to be GET of the document itself; now it checks all.)
    assert_eq!(super::tested_operations(&report), Some(super::operations(&served.body)), "{report}");
}
