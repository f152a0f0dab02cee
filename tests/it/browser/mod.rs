//! The explorer page (`edge-api/public/`) in headless Chromium: anvil with the demo seed, the real
//! Worker under `wrangler dev` serving page and API, and `tests/browser/explorer.test.mjs`
//! (playwright-core driving Debian's chromium) checking what the page shows against the seed's
//! model, and that the page and `/docs` work under their security headers. Screenshots land in
//! `target/browser-screenshots/` (the report names the 390-px one).

use std::time::Duration;

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    node_test_count, repo_root,
};

/// The checks in `tests/browser/explorer.test.mjs`: all must have run and passed.
const BROWSER_CHECKS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explorer_page_shows_the_seeded_registry() {
    let chain = TestChain::start().await;
    let demo = seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let worker = EdgeWorker::start_indexed(&chain_vars(&chain.rpc_url(), chain.registry())).await;
    // The index once, so that the page's recent-changes panel is seeded; the test runs it again.
    worker.run_index().await;

    let model = tempfile::tempdir().expect("a temporary directory");
    let demo_json = model.path().join("demo.json");
    std::fs::write(&demo_json, serde_json::to_string(&demo).expect("the model serialises"))
        .expect("the model is written");
    let run = tokio::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "tests/browser/explorer.test.mjs"])
        .current_dir(repo_root())
        .env("EXPLORER_URL", &worker.base)
        .env("DEMO_JSON", &demo_json)
        .env("RPC_URL", chain.rpc_url())
        .env("SCREENSHOT_DIR", repo_root().join("target/browser-screenshots"))
        .kill_on_drop(true)
        .output();
    // Its checks take well under a minute; a browser that hangs fails the test, not the run.
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .unwrap_or_else(|_| panic!("the browser test took more than 300 s; wrangler:\n{}", worker.output()))
        .expect("node runs the browser test");
    let report =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{report}");
    assert!(
        output.status.success(),
        "the browser test failed ({}, its report is above); wrangler:\n{}",
        output.status,
        worker.output()
    );
    assert_eq!(node_test_count(&report, "pass"), Some(BROWSER_CHECKS), "every browser check ran:\n{report}");
    assert_eq!(
        (node_test_count(&report, "fail"), node_test_count(&report, "skipped")),
        (Some(0), Some(0)),
        "{report}"
    );
}
