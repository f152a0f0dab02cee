//! HEAD and OPTIONS on every kind of path: HEAD answers GET's status and headers without the
//! body; OPTIONS is the CORS preflight a browser sends before `POST /relay` with its JSON body
//! (or any request that is not simple), exact headers, no body. Every answer lets any origin
//! read it. The client checks each answer against the OpenAPI document's `head` and `options`
//! operations as well; that preflights use none of the read limit is in `errors.rs`.

use std::collections::BTreeMap;

use kya_tests::{
    raw_exchange,
    relayer_fixture::{Client, Reply},
};
use serde_json::{Value, json};

/// What a browser sends before `POST /relay` with a JSON body.
const RELAY_PREFLIGHT: [(&str, &str); 3] = [
    ("origin", "https://agent.example"),
    ("access-control-request-method", "POST"),
    ("access-control-request-headers", "content-type"),
];

/// What a browser sends before a read with a header that is not simple.
const READ_PREFLIGHT: [(&str, &str); 3] = [
    ("origin", "https://agent.example"),
    ("access-control-request-method", "GET"),
    ("access-control-request-headers", "content-type"),
];

/// Every kind of path, on a relayer that has relayed `relayed` (its `POST /relay` answer) and
/// settled it.
pub(super) async fn head_and_options(client: &Client, relayed: &Value) {
    let relay_id = relayed["relayId"].as_str().expect("a relayId");
    let hash = relayed["txHash"].as_str().expect("a txHash");
    let (from, nonce) = (relayed["from"].as_str().expect("from"), relayed["nonce"].as_str().expect("nonce"));
    let reads = [
        (format!("/relay/{relay_id}"), 200),
        (format!("/relay/tx/{hash}"), 200),
        (format!("/relay/signer/{from}/{nonce}"), 200),
        ("/status".to_owned(), 200),
        (format!("/nonce/{from}"), 200),
        ("/domain".to_owned(), 200),
        ("/health".to_owned(), 200),
        ("/openapi.json".to_owned(), 200),
        ("/nonce/0x1234".to_owned(), 400),
        (format!("/relay/{}", "0".repeat(32)), 404),
    ];
    for (path, status) in &reads {
        let head = client.request("HEAD", path, &[]).await;
        let get = client.request("GET", path, &[]).await;
        assert_eq!(get.status, *status, "{path}: {}", get.text);
        assert_eq!(get.header("x-content-type-options"), Some("nosniff"), "{path}");
        assert_head_is_get_without_the_body(path, &head, &get);
        let preflight = client.request("OPTIONS", path, &READ_PREFLIGHT).await;
        assert_preflight(path, &preflight, "GET, HEAD, OPTIONS");
    }

    // Metrics are the operator's, on their own listener (loopback by default): the public one
    // does not serve them, and the metrics listener serves nothing else.
    let public = client.request("GET", "/metrics", &[]).await;
    let body: serde_json::Value = serde_json::from_str(&public.text).expect("a JSON body");
    assert_eq!(
        (public.status, body),
        (404, serde_json::json!({ "error": "Not found", "code": "not_found" }))
    );
    let (status, metrics) = client.metrics().await;
    assert!(status == 200 && metrics.contains("relayer_relays_accepted_total "), "{status} {metrics}");
    let elsewhere = kya_tests::http_client()
        .get(format!("{}/status", client.metrics_base))
        .send()
        .await
        .expect("an answer");
    assert_eq!(elsewhere.status(), 404);

    // `/relay` takes POST, and its preflight says so; HEAD and GET are refused, naming them.
    assert_preflight("/relay", &client.request("OPTIONS", "/relay", &RELAY_PREFLIGHT).await, "POST, OPTIONS");
    // Warp's routes take `/relay/` as `/relay`, so its preflight must allow the POST too.
    assert_preflight(
        "/relay/",
        &client.request("OPTIONS", "/relay/", &RELAY_PREFLIGHT).await,
        "POST, OPTIONS",
    );
    for method in ["HEAD", "GET", "PUT"] {
        let refused = client.request(method, "/relay", &[]).await;
        assert_eq!((refused.status, refused.header("allow")), (405, Some("POST, OPTIONS")), "{method}");
        assert_eq!(refused.header("access-control-allow-origin"), Some("*"), "{method}");
        let body = if method == "HEAD" {
            Value::Null
        } else {
            json!({"error": "Method not allowed", "code": "method_not_allowed"})
        };
        assert_eq!(refused.text.parse::<Value>().unwrap_or(Value::Null), body, "{method}");
    }
    let refused = client.request("DELETE", "/status", &[]).await;
    assert_eq!((refused.status, refused.header("allow")), (405, Some("GET, HEAD, OPTIONS")));

    // A path the relayer does not serve: a 404 for every method, OPTIONS too.
    for method in ["OPTIONS", "GET", "HEAD"] {
        let missing = client.request(method, "/nope", &READ_PREFLIGHT).await;
        assert_eq!((missing.status, missing.header("access-control-allow-origin")), (404, Some("*")));
        let body =
            if method == "HEAD" { Value::Null } else { json!({"error": "Not found", "code": "not_found"}) };
        assert_eq!(missing.text.parse::<Value>().unwrap_or(Value::Null), body, "{method}");
    }

    // What reaches the socket after HEAD's headers: nothing, on a 200 and on an error.
    for (path, status) in [("/status", "200"), ("/nonce/0x1234", "400")] {
        let (head, rest) = raw_exchange(&client.base, "HEAD", path, &[]).await;
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{path}: {head}");
        assert!(head.to_lowercase().contains("\r\ncontent-type: application/json"), "{path}: {head}");
        assert!(rest.is_empty(), "{path}: HEAD sent a body: {}", String::from_utf8_lossy(&rest));
    }
}

/// HEAD: GET's status and headers (but for the date and the body's length, which a HEAD
/// answer may leave out), no body.
fn assert_head_is_get_without_the_body(path: &str, head: &Reply, get: &Reply) {
    assert_eq!(head.status, get.status, "{path}");
    assert_eq!(head.text, "", "{path}: HEAD has no body");
    // `/metrics` changes between two requests; the others' length is GET's.
    if let (Some(length), false) = (head.header("content-length"), path == "/metrics") {
        assert_eq!(length.parse::<usize>().ok(), Some(get.text.len()), "{path}: GET's length");
    }
    assert_eq!(comparable(head), comparable(get), "{path}: HEAD's headers are GET's");
    assert_eq!(get.header("access-control-allow-origin"), Some("*"), "{path}");
}

/// OPTIONS: 204, the exact preflight headers for a path serving `methods`, no body.
fn assert_preflight(path: &str, preflight: &Reply, methods: &str) {
    assert_eq!((preflight.status, preflight.text.as_str()), (204, ""), "{path}");
    let headers = [
        ("access-control-allow-origin", Some("*")),
        ("access-control-allow-methods", Some(methods)),
        ("access-control-allow-headers", Some("Content-Type")),
        ("access-control-max-age", Some("86400")),
        ("x-content-type-options", Some("nosniff")),
        ("content-type", None),
        ("allow", None),
    ];
    for (name, value) in headers {
        assert_eq!(preflight.header(name), value, "{path}: {name}");
    }
}

/// An answer's headers but those that differ between two answers by design: the date and the
/// body's length.
fn comparable(reply: &Reply) -> BTreeMap<String, Vec<String>> {
    let mut headers = BTreeMap::new();
    for (name, value) in &reply.headers {
        if ["content-length", "date"].contains(&name.as_str()) {
            continue;
        }
        let value = value.to_str().expect("a text header").to_owned();
        headers.entry(name.as_str().to_owned()).or_insert_with(Vec::new).push(value);
    }
    headers
}
