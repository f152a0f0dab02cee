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
    ensure_built, node_test_count, repo_root, run_script,
};

#[tokio::test]
async fn the_wasm_package_agrees_with_viem_and_with_the_api() {
    ensure_built("build-core-wasm.sh");

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
    assert_eq!(node_test_count(&report, "pass"), Some(11), "expected eleven passing checks:\n{report}");
    assert_eq!(node_test_count(&report, "skipped"), Some(0), "{report}");
}

/// The files the builds write that tests read while other tests run the same builds: the
/// package `npm pack` takes, the page's copy a running Worker serves, the Worker itself.
const BUILT_FILES: [&str; 14] = [
    "core/pkg/package.json",
    "core/pkg/node.js",
    "core/pkg/changes.js",
    "core/pkg/changes.d.ts",
    "core/pkg/README.md",
    "core/pkg/kya_core.js",
    "core/pkg/kya_core_bg.wasm",
    "edge-api/public/pkg/kya_core.js",
    "edge-api/public/pkg/kya_core_bg.wasm",
    "edge-api/public/vendor/swagger-ui/swagger-ui-bundle.js",
    "edge-api/public/vendor/swagger-ui/swagger-ui.css",
    "edge-api/public/vendor/swagger-ui/LICENSE",
    "edge-api/build/kya_edge_api.js",
    "edge-api/build/kya_edge_api_bg.wasm",
];

/// A build with nothing to do writes nothing (`scripts/lib/files.sh`): the tests run the build
/// scripts on several threads while others read what they wrote, and a rewrite in place let a
/// CI run's `npm pack` meet `core/pkg/package.json` empty. Each file keeps its inode and its
/// modification time through a second build.
#[test]
fn an_up_to_date_build_rewrites_none_of_its_files() {
    use std::os::unix::fs::MetadataExt;

    let stamps = || -> Vec<(&str, u64, i64, i64)> {
        BUILT_FILES
            .iter()
            .map(|file| {
                let meta = std::fs::metadata(repo_root().join(file))
                    .unwrap_or_else(|error| panic!("{file}: {error}"));
                (*file, meta.ino(), meta.mtime(), meta.mtime_nsec())
            })
            .collect()
    };
    run_script("build-worker.sh");
    let built = stamps();
    run_script("build-worker.sh");
    assert_eq!(stamps(), built, "an up-to-date build rewrote files others may be reading");
}

/// The checks of `tests/js/package-install.test.mjs`: type-check, Node import, bundled page.
const INSTALL_CHECKS: usize = 3;

#[test]
fn the_npm_package_installs_type_checks_and_bundles_for_a_new_user() {
    ensure_built("build-core-wasm.sh");
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

/// The checks of `tests/js/pass-interop.test.mjs`.
const PASS_INTEROP_CHECKS: usize = 8;

/// KYA passes signed here (`kya_core::pass`) against npm `jose` and the package's own
/// `verifyPass` and `verifyAgentRequest` (`tests/js/pass-interop.test.mjs`), both ways.
#[test]
fn passes_verify_with_jose_both_ways() {
    use alloy::signers::local::PrivateKeySigner;
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    use kya_core::pass::{PassBlock, PassClaims, SigningKey, SigningKeys, claims::Issue, jws};

    ensure_built("build-core-wasm.sh");
    let signer = SigningKey::from_seed(&[0x81; 32]);
    let previous = SigningKey::from_seed(&[0x82; 32]);
    let keys = SigningKeys::new(signer.clone(), vec![previous.clone()]);
    let agent = PrivateKeySigner::random();
    let stranger = PrivateKeySigner::random();
    let registry = alloy::primitives::address!("0x5fbdb2315678afecb367f032d93f642f64180aa3");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let issue = |at: u64, issuer: &'static str| Issue {
        issuer,
        chain_id: 84_532,
        registry,
        wallet: agent.address(),
        block: PassBlock { number: 42, hash: alloy::primitives::B256::repeat_byte(7), time: at },
        grace_period: kya_core::DEFAULT_GRACE_PERIOD_SECS,
        now: at,
        ttl_secs: 300,
        jti: format!("jti-{at}"),
    };
    let record = kya_core::Agent {
        agent_id: 3,
        creator: agent.address(),
        haftungsperson: stranger.address(),
        agent_wallet: agent.address(),
        constitution_hash: Default::default(),
        capability_hash: Default::default(),
        operational_scope: "scope".into(),
        parent_agent_id: 0,
        generation: 0,
        self_modifying: false,
        registered_at: now - 100,
        last_attestation: now - 100,
        last_revenue_report: 0,
        status: kya_core::AgentStatus::Active,
    };
    let issuer = "https://kya.example";
    let claims = PassClaims::new(issue(now, issuer), Some(&record));
    let valid = jws::sign(&claims, &signer);
    let parts: Vec<&str> = valid.split('.').collect();
    let payload = String::from_utf8(URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let edited = URL_SAFE_NO_PAD.encode(payload.replace("\"agentId\":3", "\"agentId\":4"));
    let mut signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    signature[0] ^= 0x80;
    let respelled = URL_SAFE_NO_PAD
        .encode(format!(r#"{{"kid":"{}","typ":"kya-pass+jwt","alg":"EdDSA"}}"#, signer.kid()).as_bytes());
    let fixture = serde_json::json!({
        "jwks": keys.public(),
        "privateJwk": signer.private_jwk(),
        "issuer": issuer,
        "chainId": 84_532,
        "registry": registry.to_checksum(None),
        "wallet": agent.address().to_checksum(None),
        "walletKey": alloy::primitives::hex::encode_prefixed(agent.credential().to_bytes()),
        "strangerKey": alloy::primitives::hex::encode_prefixed(stranger.credential().to_bytes()),
        "now": now,
        "passes": {
            "valid": valid,
            "previousKey": jws::sign(&claims, &previous),
            "expired": jws::sign(&PassClaims::new(issue(now - 1_000, issuer), Some(&record)), &signer),
            "tamperedClaims": format!("{}.{edited}.{}", parts[0], parts[2]),
            "tamperedSignature": format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(&signature)),
            "respelledHeader": format!("{respelled}.{}.{}", parts[1], parts[2]),
            "unknownKey": jws::sign(&claims, &SigningKey::from_seed(&[0x83; 32])),
            "otherIssuer": jws::sign(&PassClaims::new(issue(now, "https://other.example"), Some(&record)), &signer),
            "truncated": &valid[..valid.len() - 10],
        },
    });
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), fixture.to_string()).unwrap();
    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "tests/js/pass-interop.test.mjs"])
        .current_dir(repo_root())
        .env("KYA_PASSES", file.path())
        .output()
        .expect("node runs the pass interop test");
    let report =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{report}");
    assert!(output.status.success(), "the pass interop test failed:\n{report}");
    assert_eq!(node_test_count(&report, "pass"), Some(PASS_INTEROP_CHECKS), "every check ran:\n{report}");
}
