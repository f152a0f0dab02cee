//! The relayer's document against the real daemon (in process, on a free port) on the demo seed.

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    relayer_fixture::{Engine, InProcessRelayer, TestStore, set, settings},
    repo_root,
};

/// Examples per operation: the relayer's operations and their boundary cases in well under a
/// minute here.
const MAX_EXAMPLES: u32 = 25;

/// Limits raised for this run only: Schemathesis sends every request from 127.0.0.1, far more
/// than the per-IP hourly and per-minute limits allow, and a 429 would end its checks early.
const RAISED_LIMITS: [(&str, &str); 3] = [
    ("RATE_LIMIT_PER_IP", "1000000"),
    ("RATE_LIMIT_PER_SIGNER", "1000000"),
    ("READ_RATE_LIMIT_PER_MINUTE", "1000000"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayer_serves_its_document_and_schemathesis_finds_nothing() {
    let chain = TestChain::start().await;
    seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let store = TestStore::new(Engine::Sqlite);
    let mut settings = settings(&chain, &store);
    for (name, value) in RAISED_LIMITS {
        set(&mut settings, name, value);
    }
    let relayer = InProcessRelayer::start(&settings).await;

    let (status, served) = relayer.client.get_text("/openapi.json").await;
    assert_eq!(status, 200);
    let kept =
        std::fs::read_to_string(repo_root().join("relayer-daemon/openapi.json")).expect("the document");
    assert_eq!(served, kept, "the relayer serves relayer-daemon/openapi.json as it is");
    let document: serde_json::Value = serde_json::from_str(&served).expect("JSON");

    let workdir = tempfile::tempdir().expect("a temporary directory");
    let report =
        super::schemathesis(&relayer.client.base, MAX_EXAMPLES, "relayer.toml", workdir.path()).await;
    // Every operation but GET of the document itself was tested (Schemathesis leaves that one
    // out): HEAD and OPTIONS of every path too.
    assert_eq!(super::tested_operations(&report), Some(super::operations(&document) - 1), "{report}");
    relayer.stop().await;
}
