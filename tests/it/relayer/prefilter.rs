//! The per-IP limit's pre-filter: a flood of well-formed relays from one client is refused from
//! memory once the store has counted the client's hourly limit, so the store sees at most the
//! limit's worth (docs/abuse.md).

use alloy::signers::local::PrivateKeySigner;
use futures::{StreamExt, stream};
use kya_tests::relayer_fixture::{body, forward, sign_with_core};

use super::{Engine, agent_key, register_call, start};

/// `relayer_<name> <value>`'s value in a metrics text (0 when absent).
fn counter(metrics: &str, name: &str) -> u64 {
    metrics.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0)
}

async fn a_flood_from_one_client_reaches_the_store_at_most_the_limits_worth(engine: Engine) {
    let (t, _db, relayer) =
        start(engine, &[("RATE_LIMIT_PER_IP", "20"), ("TRUSTED_PROXIES", "127.0.0.1")]).await;
    let client = &relayer.client;
    // Well-formed, but signed by another key: each that reaches the store counts, then fails.
    let agent = agent_key(950);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let forged = body(&request, &sign_with_core(&t, &PrivateKeySigner::random(), &request).signature);
    const POSTS: usize = 2_000;
    const AT_ONCE: usize = 16;
    let answers: Vec<(u16, serde_json::Value)> = stream::iter(0..POSTS)
        .map(|_| client.relay_forwarded(&forged, "203.0.113.8"))
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let count = |status: u16| answers.iter().filter(|(s, _)| *s == status).count();
    assert_eq!((count(401), count(429)), (20, POSTS - 20), "the store counted exactly the limit");
    for (status, answer) in &answers {
        if *status == 429 {
            assert_eq!(answer["error"], "IP rate limit exceeded (20/hour)");
        }
    }
    let (_, metrics) = client.metrics().await;
    let prefiltered = counter(&metrics, "relayer_prefiltered_total");
    // Only requests already past the pre-filter while the 20th was being counted reach the store,
    // and the few sent in the slots freed meanwhile: a request the store refused (its window
    // full) may be answered before the 20th's count reaches the filter, and the flood sends
    // the next in its place. A pre-filter that did nothing would leave 1,980 to the store.
    assert!(
        prefiltered >= (POSTS - 20 - 2 * AT_ONCE) as u64 && prefiltered <= (POSTS - 20) as u64,
        "{prefiltered} refused from memory\n{metrics}"
    );
    assert!(
        metrics
            .contains(&format!("relayer_relays_rejected_total{{reason=\"ip_rate_limit\"}} {}\n", POSTS - 20))
    );
    // Another client is not affected.
    let answer = client.relay_forwarded(&forged, "203.0.113.9").await;
    assert_eq!(answer.0, 401, "{}", answer.1);
    relayer.stop().await;
}

/// A client past its limit is refused a new relay from memory, but a retry of a relay it was
/// accepted for still answers with that relay (INTERFACE.md section 3), never a refusal.
async fn a_retry_past_the_limit_answers_with_its_relay(engine: Engine) {
    let (t, _db, relayer) =
        start(engine, &[("RATE_LIMIT_PER_IP", "2"), ("TRUSTED_PROXIES", "127.0.0.1")]).await;
    let client = &relayer.client;
    let signed = |index: u64| {
        let agent = agent_key(960 + index);
        let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
        body(&request, &sign_with_core(&t, &agent, &request).signature)
    };
    let (first, second, third) = (signed(0), signed(1), signed(2));
    let accepted = client.relay_forwarded(&first, "203.0.113.20").await;
    assert_eq!(accepted.0, 200, "{}", accepted.1);
    let accepted = client.relay_forwarded(&second, "203.0.113.20").await;
    assert_eq!(accepted.0, 200, "{}", accepted.1);
    let refused = client.relay_forwarded(&third, "203.0.113.20").await;
    assert_eq!(
        (refused.0, &refused.1["error"]),
        (429, &serde_json::json!("IP rate limit exceeded (2/hour)"))
    );
    let retry = client.relay_forwarded(&second, "203.0.113.20").await;
    assert!(matches!(retry.0, 200 | 202), "{}", retry.1);
    assert_eq!(retry.1["relayId"], accepted.1["relayId"], "the same relay");
    assert_eq!(retry.1["txHash"], accepted.1["txHash"]);
    relayer.stop().await;
}

super::on_both_stores!(
    a_flood_from_one_client_reaches_the_store_at_most_the_limits_worth,
    a_retry_past_the_limit_answers_with_its_relay,
);
