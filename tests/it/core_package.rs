//! The browser package of `kya-core` (`core/pkg/`) in Node: its EIP-712 digests against viem, its
//! ERC-8128 signatures recovered by viem and verified (or refused) by its own `verifyRequest`,
//! and its compliance verdicts, KYA decisions and decoded records against the real Worker on a
//! seeded chain, for every seeded agent (`tests/js/core-package.test.mjs`); and the npm package as
//! a user installs it from its tarball: type-checked, imported by Node, bundled into a page in
//! headless Chromium (`tests/js/package-install.test.mjs`).

use std::process::Command;

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    node_test_count, repo_root, run_script,
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
    assert_eq!(node_test_count(&report, "pass"), Some(10), "expected ten passing checks:\n{report}");
    assert_eq!(node_test_count(&report, "skipped"), Some(0), "{report}");
}

/// The checks of `tests/js/package-install.test.mjs`: type-check, Node import, bundled page.
const INSTALL_CHECKS: usize = 3;

#[test]
fn the_npm_package_installs_type_checks_and_bundles_for_a_new_user() {
    run_script("build-core-wasm.sh");
    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "tests/js/package-install.test.mjs"])
        .current_dir(repo_root())
        .output()
        .expect("node runs the package install test");
    let report =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{report}");
    assert!(output.status.success(), "the package install test failed:\n{report}");
    assert_eq!(node_test_count(&report, "pass"), Some(INSTALL_CHECKS), "every check ran:\n{report}");
    assert_eq!(node_test_count(&report, "fail"), Some(0), "{report}");
}
