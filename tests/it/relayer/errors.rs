//! Every relayer error row of SPEC.md section 7, provoked against the real daemon: exact status
//! and message, and nothing sent or paid for a refused request.

use super::Engine;
use alloy::{
    primitives::{Bytes, U256},
    providers::Provider,
    signers::local::PrivateKeySigner,
};
use kya_core::chain::abi::AgentRegistry;
use kya_relayer::RateKind;
use kya_tests::relayer_fixture::{Client, body, forward, sign_with_core, sign_with_eth_account};
use serde_json::{Value, json};

use super::{agent_key, agent_of, balance, forwarder_nonce, receipt, register_call, start};

#[track_caller]
fn assert_error(answer: (u16, Value), status: u16, code: &str, message: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1, json!({ "error": message, "code": code }));
}

async fn malformed_bodies_policy_breaches_bad_signatures_and_reverts_are_refused(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    let agent = agent_key(10);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = sign_with_eth_account(&t, &agent, &request);
    let good = body(&request, &signed.signature);
    let relayer_balance = balance(&t, relayer.relayer.address()).await;

    // 400: missing parts, then malformed ones with a clear message.
    assert_error(
        client.relay(&json!({ "request": good["request"] })).await,
        400,
        "missing_request_or_signature",
        "Missing request or signature",
    );
    assert_error(
        client.relay(&json!({ "signature": good["signature"] })).await,
        400,
        "missing_request_or_signature",
        "Missing request or signature",
    );
    assert_error(
        client.relay(&json!({})).await,
        400,
        "missing_request_or_signature",
        "Missing request or signature",
    );
    let (status, answer) = client.post_raw("/relay", "{\"request\":".into()).await;
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().starts_with("Body is not valid JSON"), "{answer}");
    let mut short = good.clone();
    short["signature"] = Bytes::from(signed.signature[..64].to_vec()).to_string().into();
    assert_error(
        client.relay(&short).await,
        400,
        "bad_request",
        "signature must be 65 bytes of hex (r, s, v), got 64 bytes",
    );
    let mut bad_from = good.clone();
    bad_from["request"]["from"] = "0x12".into();
    assert_error(
        client.relay(&bad_from).await,
        400,
        "bad_request",
        "request.from must be a 20-byte hex address",
    );
    // Valid JSON, so only the size limit can refuse it.
    let mut oversized = good.clone();
    oversized["padding"] = "x".repeat(70_000).into();
    assert_error(
        client.post_raw("/relay", oversized.to_string()).await,
        400,
        "bad_request",
        "Body too large (at most 65536 bytes)",
    );

    // 403: only the registry, no value, capped gas.
    let mut elsewhere = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    elsewhere.to = t.forwarder();
    let signature = sign_with_eth_account(&t, &agent, &elsewhere).signature;
    assert_error(
        client.relay(&body(&elsewhere, &signature)).await,
        403,
        "wrong_target",
        "Relayer only forwards to the the service contract",
    );
    let mut paying = request.clone();
    paying.value = U256::from(1);
    let signature = sign_with_eth_account(&t, &agent, &paying).signature;
    assert_error(
        client.relay(&body(&paying, &signature)).await,
        403,
        "value_transfer",
        "Value transfers not supported",
    );
    let mut greedy = request.clone();
    greedy.gas = U256::from(1_000_001);
    let signature = sign_with_core(&t, &agent, &greedy).signature;
    assert_error(
        client.relay(&body(&greedy, &signature)).await,
        403,
        "gas_above_cap",
        "Gas limit 1000001 above the relayer's cap of 1000000",
    );

    // 401: signed by someone else; a nonce ahead of the chain (recovers fine off-chain, the
    // forwarder refuses). An expired deadline is a 400 before the forwarder is asked.
    let impostor = PrivateKeySigner::random();
    let forged = sign_with_core(&t, &impostor, &request).signature;
    assert_error(
        client.relay(&body(&request, &forged)).await,
        401,
        "invalid_signature",
        "Invalid signature or nonce mismatch",
    );
    let ahead = forward(&t, agent.address(), 5, &register_call(agent.address(), 0));
    let signature = sign_with_eth_account(&t, &agent, &ahead).signature;
    assert_error(
        client.relay(&body(&ahead, &signature)).await,
        401,
        "invalid_signature",
        "Invalid signature or nonce mismatch",
    );
    let mut expired = request.clone();
    expired.deadline = alloy::primitives::aliases::U48::from(1_000u64);
    let signature = sign_with_core(&t, &agent, &expired).signature;
    let head = t.chain.latest_timestamp().await.unwrap();
    let (status, refused) = client.relay(&body(&expired, &signature)).await;
    assert_eq!(status, 400, "{refused}");
    let message = refused["error"].as_str().unwrap_or_default();
    let expected = "request.deadline 1000 leaves 0 s after the chain's head time ";
    assert!(
        message.starts_with(expected)
            && message.ends_with("; the relayer needs at least 120 s (or deadline 0: no expiry)"),
        "{message}"
    );
    let said_head: u64 = message[expected.len()..].split(';').next().unwrap().parse().unwrap();
    assert!(
        (head..head + 5).contains(&said_head),
        "the head block's time {head}, not the wall clock: {message}"
    );

    // 500 with the registry's reason: the wallet already belongs to an agent. Nothing is sent.
    let (status, answer) = client.relay(&good).await;
    assert_eq!(status, 200, "{answer}");
    // Answered once the node has it; anvil's automine may still be mining it.
    receipt(&t, &answer).await;
    client.settled().await;
    assert_eq!(agent_of(&t, agent.address()).await, 1);
    let paid_so_far = balance(&t, relayer.relayer.address()).await;
    let other = agent_key(11);
    let taken = forward(&t, other.address(), 0, &register_call(agent.address(), 0));
    let signature = sign_with_eth_account(&t, &other, &taken).signature;
    assert_error(
        client.relay(&body(&taken, &signature)).await,
        500,
        "reverted",
        "Wallet already registered to another agent",
    );
    let not_theirs =
        forward(&t, other.address(), 0, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let signature = sign_with_core(&t, &other, &not_theirs).signature;
    assert_error(
        client.relay(&body(&not_theirs, &signature)).await,
        500,
        "reverted",
        "Not authorized for this agent",
    );
    assert_eq!(forwarder_nonce(&t, other.address()).await, 0, "nothing was sent for the reverts");
    assert_eq!(balance(&t, relayer.relayer.address()).await, paid_so_far, "and nothing paid");
    assert!(paid_so_far < relayer_balance);
    assert_eq!(relayer.relayer.store().records().unwrap().len(), 1, "only the accepted relay is recorded");
    relayer.stop().await;
}

/// Cheap requests that pass the policy checks but carry a signature of someone else.
fn forged_body(t: &kya_tests::TestChain, victim: &PrivateKeySigner, nonce: u64) -> Value {
    let request = forward(t, victim.address(), nonce, &register_call(victim.address(), 0));
    body(&request, &sign_with_core(t, &PrivateKeySigner::random(), &request).signature)
}

async fn valid_body(t: &kya_tests::TestChain, client: &Client, agent: &PrivateKeySigner) -> Value {
    let nonce: u64 = client.get(&format!("/nonce/{}", agent.address())).await.1["nonce"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let request = forward(t, agent.address(), nonce, &register_call(agent.address(), 0));
    body(&request, &sign_with_core(t, agent, &request).signature)
}

async fn more_than_20_requests_per_ip_per_hour_are_refused(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    let victim = agent_key(20);
    for _ in 0..20 {
        assert_error(
            client.relay(&forged_body(&t, &victim, 0)).await,
            401,
            "invalid_signature",
            "Invalid signature or nonce mismatch",
        );
    }
    // Even a valid request is refused now, before anything else is looked at.
    let valid = valid_body(&t, client, &victim).await;
    assert_error(client.relay(&valid).await, 429, "ip_rate_limited", "IP rate limit exceeded (20/hour)");
    // Requests refused by the policy never reach the limiter.
    let mut elsewhere = valid.clone();
    elsewhere["request"]["to"] = t.forwarder().to_string().into();
    assert_error(
        client.relay(&elsewhere).await,
        403,
        "wrong_target",
        "Relayer only forwards to the the service contract",
    );
    assert_eq!(forwarder_nonce(&t, victim.address()).await, 0);
    relayer.stop().await;
}

async fn more_than_10_requests_per_signer_per_hour_are_refused_and_nobody_else_can_spend_the_quota(
    engine: Engine,
) {
    // The IP limit is raised: every request here comes from 127.0.0.1.
    let (t, _db, relayer) = start(engine, &[("RATE_LIMIT_PER_IP", "100")]).await;
    let client = &relayer.client;
    let agent = agent_key(30);
    // Forged requests in the agent's name do not count against the agent.
    for _ in 0..5 {
        assert_error(
            client.relay(&forged_body(&t, &agent, 0)).await,
            401,
            "invalid_signature",
            "Invalid signature or nonce mismatch",
        );
    }
    // Nor do retries of the agent's own mined request (answered with that relay), nor other
    // requests signed with its spent nonce: their signatures recover to the agent, but the
    // forwarder's `verify` refuses them before they are counted.
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let registered = body(&register, &sign_with_core(&t, &agent, &register).signature);
    assert_eq!(client.relay(&registered).await.0, 200);
    let stale =
        forward(&t, agent.address(), 0, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let stale = body(&stale, &sign_with_core(&t, &agent, &stale).signature);
    for _ in 0..6 {
        let (status, again) = client.relay(&registered).await;
        assert_eq!((status, again["nonce"].as_str()), (200, Some("0")), "{again}");
        assert_error(
            client.relay(&stale).await,
            401,
            "invalid_signature",
            "Invalid signature or nonce mismatch",
        );
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let signer = agent.address().to_checksum(None);
    assert_eq!(relayer.relayer.store().hits(RateKind::Signer, &signer, now).unwrap(), 1);
    // So the agent still has its nine other relays of the hour, and the eleventh is refused.
    let attest = |nonce: u64| {
        let request = forward(
            &t,
            agent.address(),
            nonce,
            &AgentRegistry::attestComplianceCall { agentId: U256::from(1) },
        );
        body(&request, &sign_with_core(&t, &agent, &request).signature)
    };
    for nonce in 1..10 {
        // Each after the previous one is mined: the forwarder's `verify` reads the latest block,
        // and anvil mines a moment after it takes a transaction (a busy machine saw a 401 here).
        client.settled().await;
        let (status, answer) = client.relay(&attest(nonce)).await;
        assert_eq!(status, 200, "relay {nonce}: {answer}");
    }
    assert_error(
        client.relay(&attest(10)).await,
        429,
        "signer_rate_limited",
        "Signer rate limit exceeded (10/hour)",
    );
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 10, "the eleventh was not sent");
    // At the limit, a retry of a held request still gets its relay (nothing is sent for it),
    // and another request with a spent nonce is refused by the read-only check, before the
    // chain is asked.
    let (status, again) = client.relay(&registered).await;
    assert_eq!((status, again["status"].as_str()), (200, Some("mined")), "{again}");
    assert_error(
        client.relay(&stale).await,
        429,
        "signer_rate_limited",
        "Signer rate limit exceeded (10/hour)",
    );
    assert_eq!(relayer.relayer.store().hits(RateKind::Signer, &signer, now).unwrap(), 10);
    // Another signer is unaffected.
    let other = agent_key(31);
    assert_eq!(client.relay(&valid_body(&t, client, &other).await).await.0, 200);
    relayer.stop().await;
}

async fn a_body_without_content_length_gets_a_clear_411(engine: Engine) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_t, _db, relayer) = start(engine, &[]).await;
    let address = relayer.client.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    socket
        .write_all(
            b"POST /relay HTTP/1.1\r\nhost: relayer\r\ncontent-type: application/json\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        )
        .await
        .unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 411"), "{answer}");
    let body = answer.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
    let body: Value = serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {answer}"));
    assert_eq!(body, json!({ "error": "Content-Length header required", "code": "length_required" }));
    relayer.stop().await;
}

async fn an_exhausted_daily_budget_refuses_relays(engine: Engine) {
    // A budget that one registration fits in but not two: measured from a first relay, then a
    // relayer restarted on the same store with the budget set just above what was used.
    let (t, db, relayer) = start(engine, &[]).await;
    let first = agent_key(40);
    let first_body = valid_body(&t, &relayer.client, &first).await;
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let before_first_use = unix_now();
    assert_eq!(relayer.client.relay(&first_body).await.0, 200);
    let after_first_use = unix_now();
    let used = relayer.client.used_wei_settled().await;
    relayer.stop().await;

    let mut settings = kya_tests::relayer_fixture::settings(&t, &db);
    let budget = alloy::primitives::utils::format_ether(U256::from(used + 1));
    kya_tests::relayer_fixture::set(&mut settings, "DAILY_GAS_BUDGET", budget);
    let relayer = kya_tests::relayer_fixture::InProcessRelayer::start(&settings).await;
    let second = agent_key(41);
    let before = balance(&t, relayer.relayer.address()).await;
    assert_error(
        relayer.client.relay(&valid_body(&t, &relayer.client, &second).await).await,
        429,
        "budget_exhausted",
        "Daily gas budget exhausted. Try again tomorrow.",
    );
    let (_, status) = relayer.client.get("/status").await;
    assert_eq!(status["dailyGasBudget"]["remainingWei"], "1");
    // SPEC.md: the budget resets 24 hours after its first use.
    let resets_at = status["dailyGasBudget"]["resetsAt"].as_str().expect("a reset time");
    let resets_at = chrono::DateTime::parse_from_rfc3339(resets_at).expect("RFC 3339").timestamp() as u64;
    assert!(
        (before_first_use + 86_400..=after_first_use + 86_400).contains(&resets_at),
        "resets at {resets_at}, first used between {before_first_use} and {after_first_use}"
    );
    assert_eq!(forwarder_nonce(&t, second.address()).await, 0);
    assert_eq!(balance(&t, relayer.relayer.address()).await, before, "nothing paid");
    relayer.stop().await;
}

async fn a_relayer_below_0_001_eth_answers_503(engine: Engine) {
    // A budget of 1 wei: a request that gets past the balance check is refused by the next one
    // (429), which shows where the balance boundary lies without sending anything.
    let unfunded = PrivateKeySigner::random();
    let key = format!("0x{}", alloy::primitives::hex::encode(unfunded.to_bytes()));
    let (t, _db, relayer) =
        start(engine, &[("RELAYER_KEY", &key), ("DAILY_GAS_BUDGET", "0.000000000000000001")]).await;
    let agent = agent_key(50);
    let signed = valid_body(&t, &relayer.client, &agent).await;
    let too_low = "Relayer balance too low. Please try again later or use direct mode.";
    assert_error(relayer.client.relay(&signed).await, 503, "balance_too_low", too_low);
    assert_eq!(relayer.client.get("/status").await.1["balanceWei"], "0");
    let set_balance = async |wei: u128| {
        let params = json!([unfunded.address(), format!("{:#x}", U256::from(wei))]);
        let _: Value = t.chain.provider().raw_request("anvil_setBalance".into(), params).await.unwrap();
    };
    set_balance(999_999_999_999_999).await;
    assert_error(relayer.client.relay(&signed).await, 503, "balance_too_low", too_low);
    set_balance(1_000_000_000_000_000).await;
    assert_error(
        relayer.client.relay(&signed).await,
        429,
        "budget_exhausted",
        "Daily gas budget exhausted. Try again tomorrow.",
    );
    assert_eq!(relayer.client.get("/status").await.1["balanceWei"], "1000000000000000");
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 0);
    relayer.stop().await;
}

async fn read_endpoints_are_rate_limited_per_ip_without_touching_relays(engine: Engine) {
    let (_t, _db, relayer) = start(engine, &[("READ_RATE_LIMIT_PER_MINUTE", "3")]).await;
    let client = &relayer.client;
    let address = relayer.relayer.address().to_string();
    // Preflights, which a browser sends on its own, use none of the limit.
    let preflight = [("origin", "https://agent.example"), ("access-control-request-method", "GET")];
    for path in ["/domain", "/status", "/relay/tx/0x1234", "/domain", "/status"] {
        assert_eq!(client.request("OPTIONS", path, &preflight).await.status, 204, "{path}");
    }
    let (status, domain) = client.get("/domain").await;
    assert_eq!(status, 200, "{domain}");
    // HEAD is a read like GET.
    assert_eq!(client.request("HEAD", "/status", &[]).await.status, 200);
    assert_eq!(client.get(&format!("/nonce/{address}")).await.0, 200);
    // The fourth read in the minute is refused, whichever read endpoint it is.
    assert_error(
        client.get("/domain").await,
        429,
        "read_rate_limited",
        "Rate limit exceeded (3/minute). Try again in 1 minute.",
    );
    assert_error(
        client.get(&format!("/nonce/{address}")).await,
        429,
        "read_rate_limited",
        "Rate limit exceeded (3/minute). Try again in 1 minute.",
    );
    let head = client.request("HEAD", "/status", &[]).await;
    assert_eq!((head.status, head.text.as_str()), (429, ""));
    // Preflights are answered still.
    let answered = client.request("OPTIONS", "/status", &preflight).await;
    assert_eq!(
        (answered.status, answered.header("access-control-allow-methods")),
        (204, Some("GET, HEAD, OPTIONS"))
    );
    // Health and metrics are not limited, and relays keep their own (persisted) limits.
    assert_eq!(client.get("/health").await, (200, json!({"status": "ok"})));
    assert_eq!(client.metrics().await.0, 200);
    assert_error(
        client.relay(&json!({})).await,
        400,
        "missing_request_or_signature",
        "Missing request or signature",
    );
}

super::on_both_stores!(
    malformed_bodies_policy_breaches_bad_signatures_and_reverts_are_refused,
    more_than_20_requests_per_ip_per_hour_are_refused,
    more_than_10_requests_per_signer_per_hour_are_refused_and_nobody_else_can_spend_the_quota,
    a_body_without_content_length_gets_a_clear_411,
    an_exhausted_daily_budget_refuses_relays,
    a_relayer_below_0_001_eth_answers_503,
    read_endpoints_are_rate_limited_per_ip_without_touching_relays,
);
