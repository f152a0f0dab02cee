//! ERC-8128 both ways with `@slicekit/erc8128`, the ERC authors' TypeScript implementation, on a
//! real anvil and the real Worker (`tests/js/erc8128-interop.mjs` under `node --test`): requests
//! it signs with a viem account are verified by `POST /api/v1/kya/verify` with the right signer
//! and its KYA standing, and requests `kya_core::erc8128` signs pass its own `verifyRequest`.

use std::process::Command;

use alloy::signers::local::PrivateKeySigner;
use kya_core::erc8128::{RequestToSign, SignParams, sign_request_with_secret};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    node_test_count, register_call, repo_root,
};
use serde_json::{Value, json};

/// The checks of `tests/js/erc8128-interop.mjs`: five of requests it signs, one per request of
/// [`our_cases`] and one of ours tampered.
const NODE_CHECKS: usize = 5 + OUR_CASES + 1;
const OUR_CASES: usize = 4;

/// One request kya-core signs for the TypeScript verifier, and the components it must cover.
struct OurCase {
    name: &'static str,
    method: &'static str,
    url: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: Option<&'static str>,
    extra: &'static [&'static str],
    components: &'static [&'static str],
}

fn our_cases() -> [OurCase; OUR_CASES] {
    const JSON_TYPE: &[(&str, &str)] = &[("content-type", "application/json")];
    [
        OurCase {
            name: "POST with a JSON body and a query",
            method: "POST",
            url: "https://api.provider.example/v1/infer?model=small&stream=0",
            headers: JSON_TYPE,
            body: Some(r#"{"prompt":"hello","max_tokens":32}"#),
            extra: &[],
            components: &["@method", "@authority", "@path", "@query", "content-digest"],
        },
        OurCase {
            name: "GET with a query",
            method: "GET",
            url: "https://api.provider.example/v1/agents?status=Active&page=2",
            headers: &[],
            body: None,
            extra: &[],
            components: &["@method", "@authority", "@path", "@query"],
        },
        OurCase {
            name: "POST covering content-type",
            method: "POST",
            url: "https://api.provider.example/v1/jobs",
            headers: JSON_TYPE,
            body: Some(r#"{"job":"summarise"}"#),
            extra: &["content-type"],
            components: &["@method", "@authority", "@path", "content-digest", "content-type"],
        },
        OurCase {
            name: "GET of a percent-encoded path",
            method: "GET",
            url: "https://api.provider.example/a%20b/c",
            headers: &[],
            body: None,
            extra: &[],
            components: &["@method", "@authority", "@path"],
        },
    ]
}

/// The file `tests/js/erc8128-interop.mjs` reads as `KYA_INTEROP_OURS`: each case signed by
/// `key` for `chain_id`, valid from `created` for two minutes, with a nonce of its own.
fn our_signatures(key: &PrivateKeySigner, chain_id: u64, created: u64) -> Value {
    let secret: [u8; 32] = key.credential().to_bytes().into();
    let expires = created + 120;
    let cases: Vec<Value> = our_cases()
        .iter()
        .enumerate()
        .map(|(n, case)| {
            let nonce = format!("kya-core-{n}");
            let request = RequestToSign {
                method: case.method,
                url: case.url,
                headers: case.headers,
                body: case.body.map(str::as_bytes),
            };
            let params =
                SignParams { chain_id, created, expires, nonce: Some(&nonce), extra_components: case.extra };
            let signed = sign_request_with_secret(&request, &params, &secret).expect("signs");
            let mut headers: serde_json::Map<String, Value> =
                case.headers.iter().map(|(name, value)| ((*name).to_owned(), Value::from(*value))).collect();
            for (name, value) in signed.pairs() {
                headers.insert(name.to_owned(), value.into());
            }
            json!({
                "name": case.name,
                "method": case.method,
                "url": case.url,
                "headers": headers,
                "body": case.body,
                "nonce": nonce,
                "components": case.components,
            })
        })
        .collect();
    json!({
        "signer": key.address().to_checksum(None),
        "chainId": chain_id,
        "created": created,
        "expires": expires,
        "cases": cases,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_pass_both_ways_with_the_erc_authors_typescript_implementation() {
    let t = TestChain::start().await;
    // The TypeScript signer's key: an agent that registered itself, so compliant.
    let theirs = PrivateKeySigner::random();
    t.chain.impersonate(theirs.address()).await.expect("funds the agent");
    t.chain
        .send(theirs.address(), t.registry(), &register_call(theirs.address(), 0))
        .await
        .expect("registers");
    let worker = EdgeWorker::start(&chain_vars(&t.rpc_url(), t.registry())).await;
    let standing = worker.client().get(&format!("/api/v1/kya/{}", theirs.address())).await;
    assert_eq!(standing.status, 200, "{}", standing.body);
    assert_eq!(
        (standing.body["isRegistered"].as_bool(), standing.body["isCompliant"].as_bool()),
        (Some(true), Some(true)),
        "{}",
        standing.body
    );

    let ours = PrivateKeySigner::random();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let folder = tempfile::tempdir().expect("a temporary directory");
    let ours_file = folder.path().join("ours.json");
    std::fs::write(&ours_file, our_signatures(&ours, t.chain_id(), now).to_string()).expect("writes");

    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "tests/js/erc8128-interop.mjs"])
        .current_dir(repo_root())
        .env("KYA_API_URL", &worker.base)
        .env("KYA_CHAIN_ID", t.chain_id().to_string())
        .env("KYA_INTEROP_KEY", alloy::hex::encode_prefixed(theirs.to_bytes()))
        .env("KYA_INTEROP_OURS", &ours_file)
        .output()
        .expect("node runs the interop test");
    let report =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{report}");
    assert!(output.status.success(), "the interop test failed:\n{report}");
    assert_eq!(node_test_count(&report, "pass"), Some(NODE_CHECKS), "every check ran:\n{report}");
    assert_eq!(node_test_count(&report, "fail"), Some(0), "{report}");
}
