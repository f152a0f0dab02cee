//! HEAD and OPTIONS on every row of the endpoint table: HEAD answers GET's status and headers
//! without the body, and uses the quota like GET; OPTIONS is the CORS preflight, exact headers,
//! no body, quota shown and not used. Every answer, error or not, carries
//! `X-Content-Type-Options: nosniff`. The client checks each answer against the `head` and
//! `options` operations of the OpenAPI document as well.

use std::collections::BTreeMap;

use kya_devchain::seed::DemoData;
use kya_tests::{
    edge_fixture::{Answer, EdgeClient, fresh_ip},
    raw_exchange,
};
use serde_json::json;

/// What a browser sends before a cross-origin GET with `If-None-Match`.
const PREFLIGHT_REQUEST: [(&str, &str); 3] = [
    ("origin", "https://example.org"),
    ("access-control-request-method", "GET"),
    ("access-control-request-headers", "if-none-match"),
];

/// The preflight's headers, exactly.
const PREFLIGHT_HEADERS: [(&str, &str); 5] = [
    ("access-control-allow-origin", "*"),
    ("access-control-allow-methods", "GET, HEAD, OPTIONS"),
    ("access-control-allow-headers", "Content-Type, If-None-Match, Last-Event-ID, X-D1-Bookmark"),
    ("access-control-max-age", "86400"),
    (
        "access-control-expose-headers",
        "X-RateLimit-Remaining, ETag, Retry-After, Cache-Control, X-Cache, X-Cache-Tier, X-Expires-At, \
         X-Block-Number, X-Block-Timestamp, X-Attestation-Grace-Period, X-Index-Lag-Blocks, X-Index-Run-At, \
         X-Index-Fallback, X-D1-Bookmark",
    ),
];

/// One path of each row of the table (agents and wallets whose answers earlier steps cached:
/// the 7-day boundary agents must stay unread), then a 304, a 400, a 404 and a path the API
/// does not serve. `base` is the Worker's address, for the raw HEAD.
pub(super) async fn head_and_options(api: &EdgeClient, base: &str, demo: &DemoData) {
    let wallet = demo.agent(demo.roles.compliant).record.agent_wallet;
    let paths = [
        "/health".to_owned(),
        "/openapi.json".into(),
        "/api/v1/stats".into(),
        "/api/v1/stats/detailed".into(),
        "/api/v1/agents?page=2&limit=5".into(),
        "/api/v1/agents/compliance".into(),
        "/api/v1/agent/1".into(),
        "/api/v1/agent/1/lineage".into(),
        "/api/v1/agent/1/revenue?limit=3".into(),
        "/api/v1/revenue/aggregate".into(),
        format!("/api/v1/kya/{wallet}"),
    ];
    for path in &paths {
        let methods = on_one_client(api, path, &[]).await;
        assert_eq!(methods.get.status, 200, "{path}: {}", methods.get.text);
        methods.assert_nosniff(path);
        methods.assert_head_is_get_without_the_body(path);
        methods.assert_preflight(path);
    }

    let etag = api.get("/api/v1/agent/1").await.header("etag").expect("an ETag").to_owned();
    let unchanged = on_one_client(api, "/api/v1/agent/1", &[("if-none-match", &etag)]).await;
    assert_eq!(unchanged.get.status, 304);
    unchanged.assert_nosniff("/api/v1/agent/1 (304)");
    unchanged.assert_head_is_get_without_the_body("/api/v1/agent/1 (304)");
    for (path, status) in [("/api/v1/agent/x", 400), ("/api/v1/kya/0xab", 400), ("/api/v1/agent/999", 404)] {
        let methods = on_one_client(api, path, &[]).await;
        assert_eq!(methods.get.status, status, "{path}");
        methods.assert_nosniff(path);
        methods.assert_head_is_get_without_the_body(path);
        // A malformed parameter is for the request to refuse: the preflight lets it through.
        methods.assert_preflight(path);
    }

    // A path the API does not serve has no CORS policy: OPTIONS is its 404, like GET's, and
    // HEAD's without the body; none uses the quota but GET and HEAD.
    let unknown = on_one_client(api, "/api/v2/stats", &[]).await;
    assert_eq!(unknown.get.status, 404);
    unknown.assert_nosniff("/api/v2/stats");
    unknown.assert_head_is_get_without_the_body("/api/v2/stats");
    let message = json!({"error": "Agent not found: no resource at /api/v2/stats"});
    assert_eq!((unknown.options.status, &unknown.options.body), (404, &message));
    assert_eq!(unknown.options.remaining(), unknown.again.remaining());
    assert_eq!(unknown.after.remaining(), unknown.again.remaining() - 1);

    // What reaches the socket after HEAD's headers: nothing, on a 200 and on an error.
    for (path, status) in [("/api/v1/agent/1", "200"), ("/api/v1/agent/999", "404")] {
        let (head, rest) = raw_exchange(base, "HEAD", path, &[("cf-connecting-ip", &fresh_ip())]).await;
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{path}: {head}");
        assert!(head.to_lowercase().contains("\r\ncontent-type: application/json"), "{path}: {head}");
        assert!(rest.is_empty(), "{path}: HEAD sent a body: {}", String::from_utf8_lossy(&rest));
    }
}

/// One client's answers to GET, HEAD, GET, OPTIONS and GET on a path, all in one rate-limit
/// window.
struct Methods {
    get: Answer,
    head: Answer,
    /// The GET after HEAD: from the same cache tier, so its headers are HEAD's.
    again: Answer,
    options: Answer,
    /// The GET after OPTIONS: whether the preflight used the quota.
    after: Answer,
}

async fn on_one_client(api: &EdgeClient, path: &str, headers: &[(&str, &str)]) -> Methods {
    // Fixed one-minute windows: should the five cross into the next, a new client starts over.
    loop {
        let (ip, window) = (fresh_ip(), minute());
        let get = api.request("GET", path, &ip, headers).await;
        let head = api.request("HEAD", path, &ip, headers).await;
        let again = api.request("GET", path, &ip, headers).await;
        let options = api.request("OPTIONS", path, &ip, &PREFLIGHT_REQUEST).await;
        let after = api.request("GET", path, &ip, headers).await;
        if minute() == window {
            return Methods { get, head, again, options, after };
        }
    }
}

fn minute() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 60
}

impl Methods {
    /// Every answer of the five says it is what its `Content-Type` says (a browser must not
    /// sniff a JSON answer into a script or a page).
    fn assert_nosniff(&self, path: &str) {
        for (method, answer) in [
            ("GET", &self.get),
            ("HEAD", &self.head),
            ("GET again", &self.again),
            ("OPTIONS", &self.options),
            ("GET after OPTIONS", &self.after),
        ] {
            assert_eq!(answer.header("x-content-type-options"), Some("nosniff"), "{path}: {method}");
        }
    }

    /// HEAD: GET's status and headers (but for the count it used and the body's length, which
    /// a HEAD answer may leave out), no body.
    fn assert_head_is_get_without_the_body(&self, path: &str) {
        let (head, get) = (&self.head, &self.again);
        assert_eq!(head.status, get.status, "{path}");
        assert_eq!(head.text, "", "{path}: HEAD has no body");
        assert_eq!((self.get.remaining(), head.remaining(), get.remaining()), (59, 58, 57), "{path}");
        if let Some(length) = head.header("content-length") {
            assert_eq!(length.parse::<usize>().ok(), Some(get.text.len()), "{path}: GET's length");
        }
        let (mut head_headers, mut get_headers) = (comparable(head), comparable(get));
        // `max-age` counts down: the two may be a second apart.
        let (head_age, get_age) =
            (max_age(head_headers.remove("cache-control")), max_age(get_headers.remove("cache-control")));
        assert!((get_age..=get_age + 1).contains(&head_age), "{path}: max-age {head_age}, then {get_age}");
        assert_eq!(head_headers, get_headers, "{path}: HEAD's headers are GET's");
    }

    /// OPTIONS: 204 with the exact preflight headers and no body; it shows the quota left and
    /// does not use it.
    fn assert_preflight(&self, path: &str) {
        let options = &self.options;
        assert_eq!((options.status, options.text.as_str()), (204, ""), "{path}");
        for (name, value) in PREFLIGHT_HEADERS {
            assert_eq!(options.header(name), Some(value), "{path}: {name}");
        }
        assert_eq!(options.header("content-type"), None, "{path}");
        assert_eq!(options.remaining(), self.again.remaining(), "{path}: the quota left");
        assert_eq!(self.after.remaining(), self.again.remaining() - 1, "{path}: the preflight used none");
    }
}

/// An answer's headers but those that differ between two answers to one client by design:
/// the count left, the body's length, the date.
fn comparable(answer: &Answer) -> BTreeMap<String, Vec<String>> {
    let mut headers = BTreeMap::new();
    for (name, value) in &answer.headers {
        if ["x-ratelimit-remaining", "content-length", "date"].contains(&name.as_str()) {
            continue;
        }
        let value = value.to_str().expect("a text header");
        headers.entry(name.as_str().to_owned()).or_insert_with(Vec::new).push(value.to_owned());
    }
    headers
}

/// `Cache-Control`'s `max-age`; 0 for `no-store`.
fn max_age(control: Option<Vec<String>>) -> u64 {
    let control = control.expect("Cache-Control").join(", ");
    match control.strip_prefix("public, max-age=") {
        Some(age) => age.parse().expect("seconds"),
        None => {
            assert_eq!(control, "no-store");
            0
        }
    }
}
