//! The seeded demo registry through the Worker: every field of every endpoint, errors, caching,
//! CORS, HEAD and OPTIONS, the rate limit, the 7-day boundary and the 15-level lineage bound.

use alloy::{
    primitives::{Address, U256, keccak256},
    providers::Provider,
};
use kya_core::{Compliance, ComplianceBadge, chain::abi::AgentRegistry};
use kya_devchain::{
    consent,
    dev_accounts::{self, Role},
    seed::{self, DemoData},
};
use kya_tests::{
    TestChain,
    edge_fixture::{Answer, CountingProxy, EdgeClient, EdgeWorker, chain_vars, fresh_ip},
};
use serde_json::{Value, json};

use super::{
    blocks,
    expect::{self, WEEK},
    methods,
};

/// Agents whose records are first read by the 7-day boundary checks (so no cached answer exists).
const AT_BOUNDARY: u64 = 2;
const PAST_BOUNDARY: u64 = 3;
const KYA_AT_BOUNDARY: u64 = 5;

struct Demo {
    chain: TestChain,
    demo: DemoData,
    /// Timestamp of the latest block: "now" for every compliance figure.
    now: u64,
    proxy: CountingProxy,
    api: EdgeClient,
    worker: EdgeWorker,
}

impl Demo {
    async fn get(&self, path: &str) -> Answer {
        self.api.get(path).await
    }

    /// GET `path` and the number of RPC round trips it caused.
    async fn get_counted(&self, path: &str) -> (Answer, usize) {
        let before = self.proxy.requests();
        let answer = self.get(path).await;
        (answer, self.proxy.requests() - before)
    }

    async fn get_ok(&self, path: &str) -> Value {
        let answer = self.get(path).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        answer.body
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_matches_the_seeded_registry() {
    let chain = TestChain::start().await;
    let demo = seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let now = chain.chain.latest_timestamp().await.expect("a latest block");
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    // Each rate-limit counter write logged: `rate_limit_under_concurrency` counts them.
    let mut vars = chain_vars(&proxy.url, chain.registry());
    vars.push(("RATE_LIMIT_LOG_WRITES", "on".to_owned()));
    let worker = EdgeWorker::start(&vars).await;
    let api = worker.client();
    let t = Demo { chain, demo, now, proxy, api, worker };

    caching(&t).await;
    blocks::every_answer_names_its_block(&t.api, &t.chain.chain, &t.demo).await;
    statistics(&t).await;
    agent_list(&t).await;
    agent_records(&t).await;
    lineage(&t).await;
    revenue(&t).await;
    kya(&t).await;
    bad_requests(&t).await;
    not_found(&t).await;
    cors(&t).await;
    methods::head_and_options(&t.api, &t.worker.base, &t.demo).await;
    rate_limit(&t).await;
    rate_limit_under_concurrency(&t).await;
    // Last: these move the chain's clock and add agents.
    attestation_boundary(&t).await;
    deep_lineage(&t).await;
    blocks::cached_answers_keep_their_block(&t.api, &t.chain.chain, &t.demo).await;
    cached_answers_expire(&t).await;
}

/// SPEC.md section 1: an entry is refreshed once its TTL has elapsed. The KYA answer cached at
/// the start (1 minute) is read from the chain again once its `X-Expires-At` has passed.
async fn cached_answers_expire(t: &Demo) {
    let wallet = t.demo.agent(t.demo.roles.lapsed).record.agent_wallet;
    let path = format!("/api/v1/kya/{wallet:#x}");
    let cached = t.get(&path).await;
    let expires_at: u64 = cached.header("x-expires-at").expect("X-Expires-At").parse().unwrap();
    // A wait, not a timed assertion: at most the minute of the KYA TTL.
    let wait = (expires_at + 1).saturating_sub(unix_seconds());
    tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    let (fresh, cost) = t.get_counted(&path).await;
    assert_eq!((fresh.status, fresh.header("x-cache"), cost), (200, Some("MISS"), 1), "read again");
    assert_eq!(fresh.header("cache-control"), Some("public, max-age=60"));
    let latest = t.chain.chain.provider().get_block_number().await.unwrap();
    assert_eq!(fresh.header("x-block-number"), Some(latest.to_string().as_str()), "at the latest block");
    assert!(fresh.header("x-expires-at").unwrap().parse::<u64>().unwrap() > expires_at);
}

/// The wall clock in Unix seconds: the Worker's rate-limit windows and TTLs run on it.
fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// Waits, if need be, until the current one-minute rate-limit window has 15 s or more left.
async fn early_in_a_window() {
    let second = unix_seconds() % 60;
    if second > 45 {
        tokio::time::sleep(std::time::Duration::from_secs(61 - second)).await;
    }
}

/// The `max-age` of an answer's `Cache-Control`.
fn max_age(answer: &Answer) -> u64 {
    let control = answer.header("cache-control").expect("Cache-Control");
    control.strip_prefix("public, max-age=").and_then(|age| age.parse().ok()).expect(control)
}

/// Runs first, on cold caches: a repeated request inside its TTL makes no RPC request, and the
/// snapshot of all agents serves every list endpoint.
async fn caching(t: &Demo) {
    let (first, cost) = t.get_counted("/api/v1/stats").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-cache"), Some("MISS"));
    // One aggregate3 through Multicall3: nextAgentId with the first 199 agents' records and
    // revenue histories, so all 66 at once.
    assert_eq!(cost, 1, "cold /stats round trips");
    assert_eq!(first.header("cache-control"), Some("public, max-age=300"));
    let etag = first.header("etag").expect("an ETag").to_owned();
    let expires_at = first.header("x-expires-at").expect("X-Expires-At").to_owned();

    // A hit counts down what is left of the TTL (the Worker's clock has whole seconds).
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let (again, cost) = t.get_counted("/api/v1/stats").await;
    assert_eq!((again.status, cost, again.header("x-cache")), (200, 0, Some("HIT")));
    assert_eq!(again.header("x-cache-tier"), Some("memory"), "a hot answer comes from the isolate's memory");
    assert_eq!(first.header("x-cache-tier"), None);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    let counting_down = max_age(&again);
    assert!((290..300).contains(&counting_down), "max-age {counting_down} on a hit a second later");

    // Answers computed from the cached snapshot expire with it, not a full TTL after it.
    for path in
        ["/api/v1/agents/compliance", "/api/v1/stats/detailed", "/api/v1/revenue/aggregate", "/api/v1/agents"]
    {
        let (answer, cost) = t.get_counted(path).await;
        assert_eq!((answer.status, answer.header("x-cache")), (200, Some("MISS")), "{path}");
        assert_eq!(cost, 0, "{path} is served from the cached snapshot");
        assert_eq!(answer.header("x-expires-at"), Some(expires_at.as_str()), "{path}");
        assert!(max_age(&answer) <= counting_down, "{path}: {:?}", answer.header("cache-control"));
    }

    let ip = fresh_ip();
    let (before, _) = (t.proxy.requests(), ());
    let not_modified = t.api.request("GET", "/api/v1/stats", &ip, &[("if-none-match", &etag)]).await;
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.body, Value::Null);
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));
    assert_eq!(not_modified.remaining(), 59);
    let changed = t.api.request("GET", "/api/v1/stats", &ip, &[("if-none-match", "\"other\"")]).await;
    assert_eq!((changed.status, changed.remaining()), (200, 58));
    assert_eq!(t.proxy.requests(), before, "conditional requests are answered from the cache");

    // Cache keys are normalised: parameter order and a clamped limit share one entry.
    let (first, cost) = t.get_counted("/api/v1/agents?page=2&limit=5&status=Active").await;
    assert_eq!((first.header("x-cache"), cost), (Some("MISS"), 0));
    let (same, _) = t.get_counted("/api/v1/agents?status=Active&limit=5&page=2").await;
    assert_eq!((same.header("x-cache"), same.body == first.body), (Some("HIT"), true));
    t.get_ok("/api/v1/agents?limit=500").await;
    let (clamped, _) = t.get_counted("/api/v1/agents?limit=100").await;
    assert_eq!(clamped.header("x-cache"), Some("HIT"), "limit=500 is cached as limit=100");

    // Revenue history is not cached: every request reads the chain (one aggregate3).
    for _ in 0..2 {
        let (answer, cost) = t.get_counted("/api/v1/agent/1/revenue").await;
        assert_eq!((answer.status, cost), (200, 1));
        assert_eq!(answer.header("cache-control"), Some("no-store"));
        assert_eq!(answer.header("etag"), None);
    }

    // KYA: checksummed and lowercase spellings share one entry.
    let wallet = t.demo.agent(t.demo.roles.lapsed).record.agent_wallet;
    let (checksummed, cost) = t.get_counted(&format!("/api/v1/kya/{}", wallet.to_checksum(None))).await;
    assert_eq!((checksummed.status, cost), (200, 1));
    assert_eq!(checksummed.header("cache-control"), Some("public, max-age=60"));
    let (lowercase, cost) = t.get_counted(&format!("/api/v1/kya/{wallet:#x}")).await;
    assert_eq!((lowercase.header("x-cache"), cost), (Some("HIT"), 0));
    assert_eq!(lowercase.body, checksummed.body);

    // Lineage: 10 minutes; one read per level (agent 6 and its 55 leaf children).
    let (lineage, cost) = t.get_counted("/api/v1/agent/6/lineage").await;
    assert_eq!(cost, 2, "lineage round trips: one per level");
    assert_eq!(lineage.header("cache-control"), Some("public, max-age=600"));
    let (again, cost) = t.get_counted("/api/v1/agent/6/lineage").await;
    assert_eq!((again.header("x-cache"), cost), (Some("HIT"), 0));
}

async fn statistics(t: &Demo) {
    let registry = t.chain.registry();
    let health = t.get_ok("/health").await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["registry"], expect::address(&registry));
    assert_eq!(health["rpc"], t.proxy.url);
    assert_eq!(t.get_ok("/api/v1/stats").await, expect::stats(&t.demo, &registry, &t.proxy.url));
    let detailed = t.get_ok("/api/v1/stats/detailed").await;
    assert_eq!(detailed, expect::detailed_stats(&t.demo, &registry, &t.proxy.url, t.now));
    // Figures of the demo as `docs/local-chain.md` describes it, so a drifting seed is noticed here too.
    assert_eq!(
        detailed["statusDistribution"],
        json!({"Active": 63, "Suspended": 1, "Revoked": 1, "Terminated": 1})
    );
    let recent: Vec<u64> = detailed["recentRegistrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["agentId"].as_u64().unwrap())
        .collect();
    assert_eq!(recent, (57..=66).rev().collect::<Vec<_>>());
    assert_eq!(t.get_ok("/api/v1/revenue/aggregate").await, expect::revenue_aggregate(&t.demo));
    assert_eq!(t.get_ok("/api/v1/agents/compliance").await, expect::compliance_list(&t.demo, t.now));
}

async fn agent_list(t: &Demo) {
    let cases: [(&str, Option<&str>, u64, u64); 8] = [
        ("", None, 1, 20),
        ("?page=2", None, 2, 20),
        ("?page=4", None, 4, 20),
        ("?page=5", None, 5, 20),
        ("?limit=1000", None, 1, 100),
        ("?status=Active&limit=7&page=3", Some("Active"), 3, 7),
        ("?status=Suspended", Some("Suspended"), 1, 20),
        ("?status=Terminated&page=2", Some("Terminated"), 2, 20),
    ];
    for (query, status, page, limit) in cases {
        let body = t.get_ok(&format!("/api/v1/agents{query}")).await;
        assert_eq!(body, expect::agents_page(&t.demo, status, page, limit), "/agents{query}");
    }
    let past_the_end = t.get_ok("/api/v1/agents?page=5").await;
    assert_eq!(
        (past_the_end["totalPages"].as_u64(), past_the_end["data"].as_array().map(Vec::len)),
        (Some(4), Some(0))
    );
    let clamped = t.get_ok("/api/v1/agents?limit=1000").await;
    assert_eq!((clamped["limit"].as_u64(), clamped["data"].as_array().map(Vec::len)), (Some(100), Some(66)));
}

async fn agent_records(t: &Demo) {
    for agent in &t.demo.agents {
        if [AT_BOUNDARY, PAST_BOUNDARY].contains(&agent.record.agent_id) {
            continue;
        }
        let path = format!("/api/v1/agent/{}", agent.record.agent_id);
        assert_eq!(t.get_ok(&path).await, expect::agent_detail(agent, t.now), "{path}");
    }
    // Spot checks of the roles, in plain words.
    let hive = t.get_ok("/api/v1/agent/6").await;
    assert_eq!(hive["children"].as_array().map(Vec::len), Some(55));
    assert_eq!(hive["compliance"]["childCount"], 55);
    let lapsed = t.get_ok(&format!("/api/v1/agent/{}", t.demo.roles.lapsed)).await;
    assert_eq!(lapsed["compliance"]["attestationCurrent"], false);
    assert_eq!(lapsed["agent"]["lastRevenueReport"], Value::Null);
    // The explorer's badge rule (kya-core's, the same in the browser package) on the API's
    // compliance objects gives each role its badge.
    let roles = &t.demo.roles;
    let badges = [
        (roles.compliant, ComplianceBadge::Compliant),
        (roles.lapsed, ComplianceBadge::Lapsed),
        (roles.suspended, ComplianceBadge::Suspended),
        (roles.revoked, ComplianceBadge::Revoked),
        (roles.terminated, ComplianceBadge::Terminated),
    ];
    for (agent_id, badge) in badges {
        let body = t.get_ok(&format!("/api/v1/agent/{agent_id}")).await;
        let compliance: Compliance =
            serde_json::from_value(body["compliance"].clone()).expect("the API's compliance object");
        assert_eq!(ComplianceBadge::of(&compliance), badge, "agent {agent_id}");
    }
}

async fn lineage(t: &Demo) {
    let roles = &t.demo.roles;
    for root in [roles.lineage[0], roles.lineage[2], roles.lineage[4], roles.hive, roles.suspended] {
        let path = format!("/api/v1/agent/{root}/lineage");
        assert_eq!(t.get_ok(&path).await, expect::lineage(&t.demo, root), "{path}");
    }
    let hive = t.get_ok(&format!("/api/v1/agent/{}/lineage", roles.hive)).await;
    assert_eq!(hive["children"].as_array().map(Vec::len), Some(50));
    assert_eq!((hive["truncated"].as_bool(), hive["totalChildren"].as_u64()), (Some(true), Some(55)));
    assert!(hive["children"][0].get("truncated").is_none());
}

async fn revenue(t: &Demo) {
    let cases = [
        (1, "", 0, 100),
        (1, "?limit=5", 0, 5),
        (1, "?limit=5&offset=10", 10, 5),
        (1, "?offset=12", 12, 100),
    ];
    for (agent_id, query, offset, limit) in cases {
        let path = format!("/api/v1/agent/{agent_id}/revenue{query}");
        assert_eq!(t.get_ok(&path).await, expect::revenue_page(&t.demo, agent_id, offset, limit), "{path}");
    }
    let clamped = t.get_ok("/api/v1/agent/6/revenue?limit=9999").await;
    assert_eq!(clamped, expect::revenue_page(&t.demo, 6, 0, 500));
    let none = t.get_ok(&format!("/api/v1/agent/{}/revenue", t.demo.roles.lapsed)).await;
    assert_eq!(none, json!({"total": 0, "offset": 0, "limit": 100, "data": []}));
}

async fn kya(t: &Demo) {
    let roles = &t.demo.roles;
    let unknown = dev_accounts::agent_wallet(9_999_999).address();
    let wallets: Vec<Address> =
        [roles.compliant, roles.lapsed, roles.suspended, roles.revoked, roles.terminated]
            .iter()
            .map(|&id| t.demo.agent(id).record.agent_wallet)
            .chain([unknown])
            .collect();
    for wallet in &wallets {
        let expected = expect::kya(&t.demo, wallet, t.now);
        for spelling in [wallet.to_checksum(None), format!("{wallet:#x}")] {
            assert_eq!(t.get_ok(&format!("/api/v1/kya/{spelling}")).await, expected, "{spelling}");
        }
    }
    // The consumer's three cases of SPEC.md section 4, in plain words.
    let flags = |body: &Value| (body["isRegistered"].as_bool(), body["isCompliant"].as_bool());
    let check = |id: u64| format!("/api/v1/kya/{}", t.demo.agent(id).record.agent_wallet);
    assert_eq!(flags(&t.get_ok(&check(roles.compliant)).await), (Some(true), Some(true)));
    assert_eq!(flags(&t.get_ok(&check(roles.lapsed)).await), (Some(true), Some(false)));
    assert_eq!(flags(&t.get_ok(&check(roles.suspended)).await), (Some(true), Some(false)));
    // A revoked agent keeps its wallet: still registered, never compliant, the record says why.
    let revoked = t.get_ok(&check(roles.revoked)).await;
    assert_eq!(flags(&revoked), (Some(true), Some(false)));
    assert_eq!(
        (revoked["agent"]["agentId"].as_u64(), &revoked["agent"]["status"]),
        (Some(roles.revoked), &json!("Revoked"))
    );
    // A terminated agent freed its wallet: nobody's.
    let terminated = t.get_ok(&check(roles.terminated)).await;
    assert_eq!((flags(&terminated), &terminated["agent"]), ((Some(false), Some(false)), &Value::Null));
    let nobody = t.get_ok(&format!("/api/v1/kya/{unknown}")).await;
    assert_eq!((flags(&nobody), &nobody["agent"]), ((Some(false), Some(false)), &Value::Null));
}

/// SPEC.md section 7, row 400: malformed ids, wallets and query values, each with its message.
async fn bad_requests(t: &Demo) {
    let wallet_format = "must be 0x followed by 40 hex digits";
    let bad_checksum = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    let cases: Vec<(String, String)> = vec![
        ("/api/v1/agent/0".into(), "invalid agent id '0': must be a positive integer".into()),
        ("/api/v1/agent/abc".into(), "invalid agent id 'abc': must be a positive integer".into()),
        ("/api/v1/agent/-1".into(), "invalid agent id '-1': must be a positive integer".into()),
        ("/api/v1/agent/1.5".into(), "invalid agent id '1.5': must be a positive integer".into()),
        ("/api/v1/agent/0x01/lineage".into(), "invalid agent id '0x01': must be a positive integer".into()),
        ("/api/v1/agent/one/revenue".into(), "invalid agent id 'one': must be a positive integer".into()),
        ("/api/v1/agents?page=0".into(), "invalid query parameter 'page': must be a positive integer".into()),
        (
            "/api/v1/agents?page=two".into(),
            "invalid query parameter 'page': must be a positive integer".into(),
        ),
        (
            "/api/v1/agents?limit=0".into(),
            "invalid query parameter 'limit': must be a positive integer".into(),
        ),
        (
            "/api/v1/agents?limit=-5".into(),
            "invalid query parameter 'limit': must be a positive integer".into(),
        ),
        (
            "/api/v1/agents?limit=".into(),
            "invalid query parameter 'limit': must be a positive integer".into(),
        ),
        (
            "/api/v1/agents?status=active".into(),
            "invalid status 'active': must be one of Active, Suspended, Revoked, Terminated".into(),
        ),
        (
            "/api/v1/agents?page=9007199254740992".into(),
            "invalid query parameter 'page': must be at most 9007199254740991".into(),
        ),
        (
            "/api/v1/agent/1/revenue?offset=18446744073709551616".into(),
            "invalid query parameter 'offset': must be at most 9007199254740991".into(),
        ),
        (
            "/api/v1/agent/1/revenue?offset=-1".into(),
            "invalid query parameter 'offset': must be a non-negative integer".into(),
        ),
        (
            "/api/v1/agent/1/revenue?limit=1e3".into(),
            "invalid query parameter 'limit': must be a positive integer".into(),
        ),
        ("/api/v1/kya/0x1234".into(), format!("invalid wallet '0x1234': {wallet_format}")),
        ("/api/v1/kya/alice".into(), "invalid wallet 'alice': must start with 0x".into()),
        (
            "/api/v1/kya/0xzz9fd6e51aad88f6f4ce6ab8827279cfffb92266".into(),
            format!("invalid wallet '0xzz9fd6e51aad88f6f4ce6ab8827279cfffb92266': {wallet_format}"),
        ),
        (
            format!("/api/v1/kya/{bad_checksum}"),
            format!("invalid wallet '{bad_checksum}': mixed-case address with an invalid EIP-55 checksum"),
        ),
    ];
    let before = t.proxy.requests();
    for (path, message) in cases {
        let answer = t.get(&path).await;
        assert_eq!((answer.status, &answer.body), (400, &json!({ "error": message })), "{path}");
        assert_eq!(answer.header("cache-control"), Some("no-store"), "{path}");
        assert_eq!(answer.remaining(), 59, "{path}");
    }
    assert_eq!(t.proxy.requests(), before, "bad requests never reach the chain");
}

/// SPEC.md section 7, row 404, and errors are never cached.
async fn not_found(t: &Demo) {
    for path in
        ["/api/v1/agent/999", "/api/v1/agent/999/lineage", "/api/v1/agent/999/revenue", "/api/v1/agent/67"]
    {
        for _ in 0..2 {
            let (answer, cost) = t.get_counted(path).await;
            let id = path.split('/').nth(4).unwrap();
            assert_eq!(
                (answer.status, &answer.body),
                (404, &json!({ "error": format!("Agent not found: {id}") })),
                "{path}"
            );
            assert!(cost > 0, "{path}: a 404 is not cached, so the chain is read again");
            assert_eq!(answer.header("cache-control"), Some("no-store"));
            assert_eq!(answer.remaining(), 59);
        }
    }
    // Well-formed ids past 64 bits name no agent: 404 without a chain read (the registry counts
    // agents one by one from 1).
    let beyond = "99999999999999999999999";
    for path in [format!("/api/v1/agent/{beyond}"), format!("/api/v1/agent/{beyond}/lineage")] {
        let (answer, cost) = t.get_counted(&path).await;
        assert_eq!(
            (answer.status, &answer.body),
            (404, &json!({ "error": format!("Agent not found: {beyond}") }))
        );
        assert_eq!((cost, answer.header("cache-control")), (0, Some("no-store")), "{path}");
    }
    let unknown = t.get("/api/v2/stats").await;
    assert_eq!(
        (unknown.status, &unknown.body),
        (404, &json!({"error": "Agent not found: no resource at /api/v2/stats"}))
    );
    assert_eq!(unknown.remaining(), 59);
    let write = t.api.request("POST", "/api/v1/stats", &fresh_ip(), &[]).await;
    assert_eq!((write.status, write.header("allow")), (405, Some("GET, HEAD, OPTIONS")));
    assert_eq!(write.body, json!({"error": "Method POST not allowed: the API is read-only (GET)"}));
}

async fn cors(t: &Demo) {
    let ip = fresh_ip();
    let preflight_headers = [("origin", "https://example.org"), ("access-control-request-method", "GET")];
    for _ in 0..3 {
        let preflight = t.api.request("OPTIONS", "/api/v1/stats", &ip, &preflight_headers).await;
        assert_eq!(preflight.status, 204);
        assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
        assert_eq!(preflight.header("access-control-allow-methods"), Some("GET, HEAD, OPTIONS"));
        assert_eq!(preflight.remaining(), 60, "preflights do not use up the quota");
    }
    let get = t.api.request("GET", "/api/v1/stats", &ip, &[("origin", "https://example.org")]).await;
    assert_eq!((get.status, get.remaining()), (200, 59));
    assert_eq!(get.header("access-control-allow-origin"), Some("*"));
    let exposed: std::collections::BTreeSet<String> = get
        .header("access-control-expose-headers")
        .unwrap()
        .split(',')
        .map(|header| header.trim().to_lowercase())
        .collect();
    let expected = [
        "x-ratelimit-remaining",
        "etag",
        "retry-after",
        "cache-control",
        "x-cache",
        "x-cache-tier",
        "x-expires-at",
        "x-block-number",
        "x-block-timestamp",
        "x-attestation-grace-period",
        "x-index-lag-blocks",
        "x-index-run-at",
        "x-index-fallback",
        "x-d1-bookmark",
    ];
    assert_eq!(exposed, expected.into_iter().map(str::to_owned).collect());
    // `/health` is rate-limited and CORS-enabled like every endpoint.
    let health = t.get("/health").await;
    assert_eq!((health.status, &health.body["status"], health.remaining()), (200, &json!("ok"), 59));
    assert_eq!(health.header("access-control-allow-origin"), Some("*"));
}

/// 60 requests per minute per IP; the 61st gets 429 with SPEC.md's message and `Retry-After`.
async fn rate_limit(t: &Demo) {
    // Fixed one-minute windows (wall clock, as the Worker sees it): all 61 requests must fall
    // into one window. Start early in a window, and start over with a fresh client should a slow
    // machine still cross into the next one.
    let (limited, left_in_window, head, preflight) = loop {
        early_in_a_window().await;
        let (ip, window) = (fresh_ip(), unix_seconds() / 60);
        let mut answers = Vec::with_capacity(61);
        for _ in 1..=61 {
            answers.push(t.api.request("GET", "/api/v1/stats", &ip, &[]).await);
        }
        let now = unix_seconds();
        // Over the limit, HEAD is refused like GET; the preflight is not limited.
        let head = t.api.request("HEAD", "/api/v1/stats", &ip, &[]).await;
        let preflight = t.api.request("OPTIONS", "/api/v1/stats", &ip, &[]).await;
        if unix_seconds() / 60 != window {
            continue;
        }
        let limited = answers.pop().expect("61 answers");
        for (answer, request) in answers.iter().zip(1..) {
            assert_eq!((answer.status, answer.remaining()), (200, 60 - request), "request {request}");
        }
        break (limited, 60 - now % 60, head, preflight);
    };
    assert_eq!((head.status, head.text.as_str(), head.remaining()), (429, "", 0));
    assert!(head.header("retry-after").is_some(), "{:?}", head.headers);
    assert_eq!((preflight.status, preflight.remaining()), (204, 0));
    assert_eq!(limited.status, 429);
    assert_eq!(limited.body, json!({"error": "Rate limit exceeded. Try again in 1 minute."}));
    assert_eq!(limited.remaining(), 0);
    let retry_after: u64 = limited.header("retry-after").expect("Retry-After").parse().unwrap();
    // The seconds left in the window when the 61st was answered (read a moment later, so at
    // most one more).
    assert!(
        (left_in_window..=left_in_window + 1).contains(&retry_after),
        "Retry-After {retry_after}, {left_in_window} s left in the window"
    );
    assert_eq!(limited.header("access-control-allow-origin"), Some("*"));
    let other = t.get("/api/v1/stats").await;
    assert_eq!((other.status, other.remaining()), (200, 59), "other clients keep their quota");

    // IPv6 clients count by /64: two addresses of one network share its quota, the next network
    // has its own. (Again with another network should the three cross a minute boundary.)
    for network in 1.. {
        let window = unix_seconds() / 60;
        let mut remaining = Vec::new();
        for ip in [
            format!("2001:db8:{network}:1::1"),
            format!("2001:db8:{network}:1:ffff::2"),
            format!("2001:db8:{network}:2::1"),
        ] {
            remaining.push(t.api.request("GET", "/api/v1/stats", &ip, &[]).await.remaining());
        }
        if unix_seconds() / 60 == window {
            assert_eq!(remaining, [59, 58, 59], "IPv6 quotas by /64");
            break;
        }
    }
}

/// 61 requests from one client at once: exactly 60 pass, each sees a different remaining count,
/// and one is refused (the Worker counts the requests it serves itself, not only through KV,
/// which a burst reads before any write lands). KV is written at most twice for the burst, a
/// second after its first request and once more should the burst last longer, the last with the
/// final count (KV takes one write per second per key).
async fn rate_limit_under_concurrency(t: &Demo) {
    loop {
        early_in_a_window().await;
        let (ip, window) = (fresh_ip(), unix_seconds() / 60);
        let burst = (0..61).map(|_| t.api.request("GET", "/api/v1/stats", &ip, &[]));
        let began = std::time::Instant::now();
        let answers = futures::future::join_all(burst).await;
        let lasted = began.elapsed();
        if unix_seconds() / 60 != window {
            continue;
        }
        let mut passed: Vec<u64> =
            answers.iter().filter(|answer| answer.status == 200).map(|answer| answer.remaining()).collect();
        passed.sort_unstable();
        assert_eq!(passed, (0..60).collect::<Vec<u64>>(), "each passing request has its own count");
        let refused: Vec<_> = answers.iter().filter(|answer| answer.status == 429).collect();
        assert_eq!(refused.len(), 1, "exactly one of 61 is refused");
        assert_eq!(refused[0].remaining(), 0);

        // The Worker logs each counter write (`rate limit counter written: <key> = <count>`):
        // waited for until one carries the final count, however slowly the log comes.
        let key = format!("rate limit counter written: rate:{ip}:{window} = ");
        let writes_logged = || -> Vec<u64> {
            t.worker
                .output()
                .lines()
                .filter_map(|line| line.split_once(&key))
                .map(|(_, count)| count.trim().parse().unwrap())
                .collect()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !writes_logged().contains(&61) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        // A second after the first request, then at most one a second while the burst lasts,
        // and the last once it ended: twice for a burst under a second.
        let writes = writes_logged();
        let most = 2 + lasted.as_secs() as usize;
        assert!((1..=most).contains(&writes.len()), "KV writes for a burst of 61 in {lasted:?}: {writes:?}");
        assert!(writes.windows(2).all(|pair| pair[0] <= pair[1]), "counts never fall: {writes:?}");
        assert_eq!(writes.last(), Some(&61), "the last write carries the final count: {writes:?}");
        break;
    }
}

/// An attestation exactly 7 days old is current; one second more is not. The pinned block is
/// mined at exactly the wanted time, and these agents were never read before (no cached answer).
async fn attestation_boundary(t: &Demo) {
    let chain = &t.chain.chain;
    let at = t.demo.agent(AT_BOUNDARY);
    chain.set_next_timestamp(at.record.last_attestation + WEEK).await.unwrap();
    chain.mine().await.unwrap();
    let body = t.get_ok(&format!("/api/v1/agent/{AT_BOUNDARY}")).await;
    assert_eq!(body, expect::agent_detail(at, at.record.last_attestation + WEEK));
    assert_eq!(body["compliance"]["secondsSinceAttestation"], WEEK);
    assert_eq!(body["compliance"]["attestationCurrent"], true);

    let past = t.demo.agent(PAST_BOUNDARY);
    chain.set_next_timestamp(past.record.last_attestation + WEEK + 1).await.unwrap();
    chain.mine().await.unwrap();
    let body = t.get_ok(&format!("/api/v1/agent/{PAST_BOUNDARY}")).await;
    assert_eq!(body, expect::agent_detail(past, past.record.last_attestation + WEEK + 1));
    assert_eq!(body["compliance"]["attestationCurrent"], false);

    let kya = t.demo.agent(KYA_AT_BOUNDARY);
    let now = kya.record.last_attestation + WEEK;
    chain.set_next_timestamp(now).await.unwrap();
    chain.mine().await.unwrap();
    let body = t.get_ok(&format!("/api/v1/kya/{}", kya.record.agent_wallet)).await;
    assert_eq!(body, expect::kya(&t.demo, &kya.record.agent_wallet, now));
    assert_eq!(body["isCompliant"], true);
}

/// A lineage 17 agents deep (the owner raises the generation limit): the tree stops at level 15,
/// whose node says that its child was cut.
async fn deep_lineage(t: &Demo) {
    let chain = &t.chain.chain;
    let registry = t.chain.registry();
    let owner = t.chain.deployment.owner;
    chain
        .send(owner, registry, &AgentRegistry::setMaxGenerationDepthCall { depth: U256::from(20) })
        .await
        .unwrap();
    let creator = dev_accounts::address(Role::CreatorA);
    let first = t.demo.agents.len() as u64 + 1;
    let ids: Vec<u64> = (first..first + 17).collect();
    for (index, &id) in ids.iter().enumerate() {
        let scope = format!("deep lineage agent {index}");
        let wallet = dev_accounts::agent_wallet(5_000 + id);
        let call = AgentRegistry::registerAgentCall {
            haftungsperson: creator,
            agentWallet: wallet.address(),
            constitutionHash: keccak256(&scope),
            capabilityHash: keccak256(&scope),
            operationalScope: scope,
            parentAgentId: U256::from(if index == 0 { 0 } else { id - 1 }),
            selfModifying: false,
        };
        // Creator A is the root's Haftungsperson: only the fresh wallet consents.
        let chain_id = t.chain.chain_id();
        let call = consent::consented(chain, (chain_id, registry), call, creator, &[&wallet]).await.unwrap();
        chain.send(creator, registry, &call).await.unwrap();
    }
    // Expected tree, built bottom-up from the ids: levels 1..=15 shown, level 15 cut.
    let node = |index: usize, children: Vec<Value>| {
        let id = ids[index];
        json!({
            "agentId": id,
            "wallet": dev_accounts::agent_wallet(5_000 + id).address().to_checksum(None),
            "generation": index,
            "status": "Active",
            "children": children,
        })
    };
    let mut expected = node(14, vec![]);
    expected["truncated"] = json!(true);
    expected["totalChildren"] = json!(1);
    for index in (0..14).rev() {
        expected = node(index, vec![expected]);
    }
    assert_eq!(t.get_ok(&format!("/api/v1/agent/{first}/lineage")).await, expected);
    // From one level further down, the tree reaches one level deeper.
    let from_second = t.get_ok(&format!("/api/v1/agent/{}/lineage", first + 1)).await;
    let mut deepest = &from_second;
    let mut levels = 1;
    while let Some(child) = deepest["children"].get(0) {
        deepest = child;
        levels += 1;
    }
    assert_eq!((levels, deepest["agentId"].as_u64()), (15, Some(ids[15])));
    assert_eq!((deepest["truncated"].as_bool(), deepest["totalChildren"].as_u64()), (Some(true), Some(1)));
}
