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
    // Only requests already past the pre-filter while the 20th was being counted reach the store.
    assert!(
        prefiltered >= (POSTS - 20 - AT_ONCE) as u64 && prefiltered <= (POSTS - 20) as u64,
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

super::on_both_stores!(a_flood_from_one_client_reaches_the_store_at_most_the_limits_worth);
