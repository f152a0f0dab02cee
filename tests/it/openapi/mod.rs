//! The services' OpenAPI 3.1 documents: valid by a standard validator (openapi-spec-validator),
//! served at `/openapi.json` exactly as kept in the repository (and in `docs/openapi/`), and
//! enforced by Schemathesis against the running service on the seeded chain: no server errors,
//! no response the document does not describe. Every other end-to-end test checks what it
//! receives against the same documents (`kya_tests::openapi`).

mod edge;
mod relayer;

use std::{path::Path, process::Output, time::Duration};

use kya_tests::{openapi, repo_root};

/// Both documents, as kept beside their services' code, and their copies for tools.
const DOCUMENTS: [(&str, &str); 2] = [
    ("edge-api/openapi.json", "docs/openapi/edge-api.json"),
    ("relayer-daemon/openapi.json", "docs/openapi/relayer.json"),
];

/// Python tools installed by scripts/bootstrap.d/50-openapi-tools.sh.
fn tool(name: &str) -> std::path::PathBuf {
    repo_root().join(".tools/venv/bin").join(name)
}

#[test]
fn documents_are_valid_openapi_3_1_and_copied_to_docs() {
    for (source, copy) in DOCUMENTS {
        let output = std::process::Command::new(tool("openapi-spec-validator"))
            .arg(repo_root().join(source))
            .output()
            .expect("openapi-spec-validator runs (run scripts/bootstrap.sh)");
        let report = report(&output);
        assert!(output.status.success(), "{source} is not a valid OpenAPI document:\n{report}");
        assert!(report.contains(": OK"), "{report}");
        let document: serde_json::Value = read_json(source);
        assert_eq!(document["openapi"], "3.1.0", "{source}");
        assert_eq!(document, read_json(copy), "{copy} differs from {source}: cp {source} {copy}");
    }
}

/// The examples the documents show (response bodies, schemas, parameters) fit their schemas.
#[test]
fn examples_fit_their_schemas() {
    for (contract, source) in [(openapi::edge(), DOCUMENTS[0].0), (openapi::relayer(), DOCUMENTS[1].0)] {
        let document = contract.document();
        let mut checked = 0;
        for (name, schema) in document["components"]["schemas"].as_object().expect("schemas") {
            for example in schema["examples"].as_array().into_iter().flatten() {
                contract
                    .validate(name, schema, example)
                    .unwrap_or_else(|why| panic!("{source} {name}: {why}"));
                checked += 1;
            }
        }
        for (path, item) in document["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("a path item") {
                for (status, response) in operation["responses"].as_object().expect("responses") {
                    let response = contract.resolve(response);
                    let Some(described) = response["content"].get("application/json") else { continue };
                    let Some(example) = described.get("example") else { continue };
                    let key = format!("{method} {path} {status}");
                    contract
                        .validate(&key, &described["schema"], example)
                        .unwrap_or_else(|why| panic!("{source} {key}: {why}"));
                    checked += 1;
                }
            }
        }
        assert!(checked >= 10, "{source}: only {checked} examples");
    }
}

/// The refusals SPEC.md words exactly are held to those words: a body with any other text does
/// not conform, so every such answer the end-to-end tests receive is checked word for word.
#[test]
fn refusals_are_held_to_their_exact_words() {
    let (edge, relayer) = (openapi::edge(), openapi::relayer());
    let cases = [
        (edge, "/api/v1/stats", "Rate limit exceeded. Try again in 1 minute.", 429, None),
        (relayer, "/relay", "Invalid signature or nonce mismatch", 401, Some("invalid_signature")),
        (relayer, "/relay", "Value transfers not supported", 403, Some("value_transfer")),
        (
            relayer,
            "/relay",
            "Gas limit 5000000 above the relayer's cap of 1000000",
            403,
            Some("gas_above_cap"),
        ),
        (relayer, "/relay", "IP rate limit exceeded (20/hour)", 429, Some("ip_rate_limited")),
        (relayer, "/relay", "Signer rate limit exceeded (10/hour)", 429, Some("signer_rate_limited")),
        (relayer, "/relay", "Daily gas budget exhausted. Try again tomorrow.", 429, Some("budget_exhausted")),
        (
            relayer,
            "/relay",
            "Relayer balance too low. Please try again later or use direct mode.",
            503,
            Some("balance_too_low"),
        ),
        (
            relayer,
            "/status",
            "Rate limit exceeded (120/minute). Try again in 1 minute.",
            429,
            Some("read_rate_limited"),
        ),
    ];
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert("access-control-allow-origin", "*".parse().unwrap());
    headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
    headers.insert("cache-control", "no-store".parse().unwrap());
    headers.insert("retry-after", "30".parse().unwrap());
    for (contract, path, words, status, code) in cases {
        let method = if path == "/relay" { "POST" } else { "GET" };
        let received = |body: &str| {
            contract
                .check(openapi::Received { method, path, status, headers: &headers, body })
                .map(|()| body.len())
        };
        // The relayer's refusals carry their code beside the words (the edge API's do not).
        let body = |words: String| {
            let mut body = serde_json::json!({ "error": words });
            if let Some(code) = code {
                body["code"] = code.into();
            }
            body.to_string()
        };
        let exact = body(words.to_owned());
        assert!(received(&exact).is_ok(), "{path} {status} {words}: {:?}", received(&exact));
        if code.is_some() {
            let bare = serde_json::json!({ "error": words }).to_string();
            assert!(received(&bare).is_err(), "{path} {status}: a refusal without its code passes");
        }
        let other = body(format!("{words} "));
        assert!(received(&other).is_err(), "{path} {status}: other words pass: {other}");
    }
}

/// Each document's operation ids are used once, and its HEAD operations are GET without the
/// body: the same parameters, statuses and headers, no content. (Which methods each path has,
/// and the preflight's headers, are held to each service's code by its own unit tests.)
#[test]
fn operation_ids_are_unique_and_head_is_get_without_the_body() {
    for (contract, source) in [(openapi::edge(), DOCUMENTS[0].0), (openapi::relayer(), DOCUMENTS[1].0)] {
        let mut ids = std::collections::BTreeSet::new();
        for (path, item) in contract.document()["paths"].as_object().expect("paths") {
            for operation in item.as_object().expect("a path item").values() {
                let id = operation["operationId"].as_str().expect("an operationId");
                assert!(ids.insert(id.to_owned()), "{source} {path}: operationId {id} is used twice");
            }
            let Some(head) = item.get("head") else { continue };
            let get = &item["get"];
            assert_eq!(get["parameters"], head["parameters"], "{source} {path}");
            let statuses = |operation: &serde_json::Value| -> Vec<String> {
                operation["responses"].as_object().expect("responses").keys().cloned().collect()
            };
            assert_eq!(statuses(get), statuses(head), "{source} {path}");
            for (status, response) in head["responses"].as_object().expect("responses") {
                let head_response = contract.resolve(response);
                let get_response = contract.resolve(&get["responses"][status]);
                assert_eq!(
                    head_response["headers"], get_response["headers"],
                    "{source} HEAD {path} {status}"
                );
                assert!(head_response.get("content").is_none(), "{source} HEAD {path} {status} has a body");
            }
        }
    }
}

fn read_json(relative: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(repo_root().join(relative))
        .unwrap_or_else(|error| panic!("{relative}: {error}"));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{relative}: {error}"))
}

fn report(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Most a Schemathesis run may take before the test gives up on it.
const SCHEMATHESIS_TIME_LIMIT: Duration = Duration::from_secs(150);

/// Runs Schemathesis on the document served at `base`/openapi.json against `base`, with its
/// settings in `tests/openapi-tools/<config>`, from a fixed seed and with a bounded number of
/// examples, and returns its report after asserting it found nothing.
async fn schemathesis(base: &str, max_examples: u32, config: &str, workdir: &Path) -> String {
    let run = tokio::process::Command::new(tool("schemathesis"))
        .arg("--config-file")
        .arg(repo_root().join("tests/openapi-tools").join(config))
        .arg("run")
        .arg(format!("{base}/openapi.json"))
        .args(["--url", base])
        .args(["--max-examples", &max_examples.to_string()])
        .args(["--seed", "20260101"])
        .args(["--request-timeout", "20"])
        .args(["--no-color"])
        .current_dir(workdir)
        .env("PYTHONPATH", repo_root().join("tests/openapi-tools"))
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(SCHEMATHESIS_TIME_LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("Schemathesis took more than {SCHEMATHESIS_TIME_LIMIT:?}"))
        .expect("schemathesis runs (run scripts/bootstrap.sh)");
    let report = report(&output);
    println!("{report}");
    assert!(output.status.success(), "Schemathesis found failures (its report is above)");
    report
}

/// The operations (a method of a path) `document` describes.
fn operations(document: &serde_json::Value) -> usize {
    document["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|item| item.as_object().expect("a path item").len())
        .sum()
}

/// The `Tested: N` count of API operations in a Schemathesis summary.
fn tested_operations(report: &str) -> Option<usize> {
    report.lines().find_map(|line| line.trim().strip_prefix("Tested:")?.trim().parse().ok())
}
