//! The explorer page (`edge-api/public/`) in headless Chromium: anvil with the demo seed, the real
//! Worker under `wrangler dev` serving page and API, and `tests/browser/explorer.test.mjs`
//! (playwright-core driving Debian's chromium) checking what the page shows against the seed's
//! model, that the page's own package verifies a KYA pass the Worker signs, and that the page
//! and `/docs` work under their security headers. Screenshots land in
//! `target/browser-screenshots/` (the report names the 390-px one).

use std::time::Duration;

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    node_test_count, repo_root,
};

/// The checks in `tests/browser/explorer.test.mjs`: all must have run and passed.
const BROWSER_CHECKS: usize = 17;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explorer_page_shows_the_seeded_registry() {
    let chain = TestChain::start().await;
    let demo = seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    // A pass key, so that the page's own package can verify a pass the Worker signs.
    let keys =
        kya_core::pass::SigningKeys::new(kya_core::pass::SigningKey::from_seed(&[0x51; 32]), Vec::new());
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.push(("PASS_SIGNING_KEYS", keys.private_json()));
    // Stream connections end past a dozen events or so (naming where to resume), so that the
    // page's recent-changes panel meets its stream's ends and reconnects.
    vars.push(("FEED_STREAM_CONNECTION_BYTES", "8192".to_owned()));
    let worker = EdgeWorker::start_indexed(&vars).await;
    // The index once, so that the page's recent-changes panel is seeded; the test runs it again.
    worker.run_index().await;

    let model = tempfile::tempdir().expect("a temporary directory");
    let demo_json = model.path().join("demo.json");
    std::fs::write(&demo_json, serde_json::to_string(&demo).expect("the model serialises"))
        .expect("the model is written");
    // Its report goes to files, so that a run that hangs still shows how far it got.
    let (stdout_path, stderr_path) = (model.path().join("stdout"), model.path().join("stderr"));
    let file = |path: &std::path::Path| std::fs::File::create(path).expect("a report file");
    let mut child = tokio::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "tests/browser/explorer.test.mjs"])
        .current_dir(repo_root())
        .env("EXPLORER_URL", &worker.base)
        .env("DEMO_JSON", &demo_json)
        .env("RPC_URL", chain.rpc_url())
        .env("CHAIN_ID", chain.chain_id().to_string())
        .env("REGISTRY", chain.registry().to_checksum(None))
        .env("SCREENSHOT_DIR", repo_root().join("target/browser-screenshots"))
        .stdin(std::process::Stdio::null())
        .stdout(file(&stdout_path))
        .stderr(file(&stderr_path))
        .kill_on_drop(true)
        .spawn()
        .expect("node runs the browser test");
    let read_report = || {
        let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default();
        format!("{}{}", read(&stdout_path), read(&stderr_path))
    };
    // Its checks take well under a minute; a browser that hangs fails the test, not the run.
    let status = match tokio::time::timeout(Duration::from_secs(300), child.wait()).await {
        Ok(status) => status.expect("node ran"),
        Err(_) => panic!(
            "the browser test took more than 300 s; its report so far:\n{}\nwrangler:\n{}",
            read_report(),
            worker.output()
        ),
    };
    let report = read_report();
    println!("{report}");
    assert!(
        status.success(),
        "the browser test failed ({status}, its report is above); wrangler:\n{}",
        worker.output()
    );
    assert_eq!(node_test_count(&report, "pass"), Some(BROWSER_CHECKS), "every browser check ran:\n{report}");
    assert_eq!(
        (node_test_count(&report, "fail"), node_test_count(&report, "skipped")),
        (Some(0), Some(0)),
        "{report}"
    );
}
