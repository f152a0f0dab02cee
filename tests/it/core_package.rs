//! The browser package of `kya-core` (`core/pkg/`) in Node: its EIP-712 digests against viem,
//! and its compliance verdicts, KYA decisions and decoded records against the real Worker on a
//! seeded chain, for every seeded agent (`tests/js/core-package.test.mjs`).

use std::process::Command;

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    repo_root, run_script,
};

#[tokio::test]
async fn the_wasm_package_agrees_with_viem_and_with_the_api() {
    run_script("build-core-wasm.sh");

    let t = TestChain::start().await;
    let demo = seed::seed_demo(&t.chain, &t.deployment).await.expect("demo data seeds");
    let worker = EdgeWorker::start(&chain_vars(&t.rpc_url(), t.registry())).await;

    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "tests/js/core-package.test.mjs"])
        .current_dir(repo_root())
        .env("KYA_API_URL", &worker.base)
        .env("KYA_RPC_URL", t.rpc_url())
        .env("KYA_REGISTRY", t.registry().to_string())
        .env("KYA_AGENTS", demo.agents.len().to_string())
        .output()
        .expect("node runs the package test");
    let report =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{report}");
    assert!(output.status.success(), "the package test failed:\n{report}");
    // Every check ran: none was skipped for want of the API.
    assert!(report.contains("pass 5"), "expected five passing checks:\n{report}");
    assert!(report.contains("skipped 0"), "{report}");
}
