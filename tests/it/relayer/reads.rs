//! What the read endpoints cost the node and how they are limited: `/status` reads the keys'
//! balances at most once per the metrics' cache time, `/domain` asks the chain once, and the
//! /64s of one IPv6 /48 share the /48's read quota.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use kya_tests::{
    TestChain,
    relayer_fixture::{self, InProcessRelayer, TestStore},
    rpc_proxy::{self, RpcAction},
};

use super::{Engine, start};

/// `eip712Domain()`'s selector.
const EIP712_DOMAIN: &str = "84b0196e";

async fn status_reads_balances_once_per_cache_time_and_domain_asks_the_chain_once(engine: Engine) {
    let t = TestChain::start().await;
    let (balances, domains) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (seen_balances, seen_domains) = (Arc::clone(&balances), Arc::clone(&domains));
    let node = rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(move |request: &str| {
            seen_balances.fetch_add(request.matches("eth_getBalance").count(), Ordering::SeqCst);
            seen_domains.fetch_add(request.matches(EIP712_DOMAIN).count(), Ordering::SeqCst);
            RpcAction::Forward(request.to_owned())
        }),
    )
    .await;
    let db = TestStore::new(engine);
    let mut settings = relayer_fixture::settings(&t, &db);
    relayer_fixture::set(&mut settings, "RPC_URL", node);
    let relayer = InProcessRelayer::start(&settings).await;
    let client = &relayer.client;

    let before = balances.load(Ordering::SeqCst);
    for _ in 0..2 {
        assert_eq!(client.get("/status").await.0, 200);
    }
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_key_balance_wei"), "{metrics}");
    assert!(balances.load(Ordering::SeqCst) >= 1, "the proxy sees the balance reads");
    // One key: one read for both statuses and the scrape, within the 15 s cache.
    assert!(
        balances.load(Ordering::SeqCst) - before <= 1,
        "{} balance reads",
        balances.load(Ordering::SeqCst) - before
    );

    let (status, first) = client.get("/domain").await;
    assert_eq!(status, 200, "{first}");
    let after_first = domains.load(Ordering::SeqCst);
    assert!(after_first >= 1, "the proxy sees the domain's call");
    for _ in 0..3 {
        assert_eq!(client.get("/domain").await, (200, first.clone()));
    }
    assert_eq!(domains.load(Ordering::SeqCst), after_first, "no chain call after the first /domain");
    relayer.stop().await;
}

async fn reads_from_many_64s_of_one_48_are_limited_by_the_48(engine: Engine) {
    let settings = [("READ_RATE_LIMIT_PER_MINUTE", "2"), ("TRUSTED_PROXIES", "127.0.0.1")];
    let (_t, _db, relayer) = start(engine, &settings).await;
    let client = &relayer.client;
    let path = "/relay/0123456789abcdef0123456789abcdef";
    let from = |n: u16| format!("2001:db8:1:{n:x}::1");
    // Four /64s, two reads each: the /48's 8.
    for n in 0..4 {
        for _ in 0..2 {
            let reply = client.request("GET", path, &[("x-forwarded-for", &from(n))]).await;
            assert_eq!(reply.status, 404, "{}", reply.text);
        }
    }
    // A fifth /64 of the same /48 has its own quota left, but not the /48's.
    let reply = client.request("GET", path, &[("x-forwarded-for", &from(4))]).await;
    assert_eq!(reply.status, 429, "{}", reply.text);
    assert!(reply.text.contains("Rate limit exceeded (8/minute)"), "{}", reply.text);
    // Another /48 is another client.
    let reply = client.request("GET", path, &[("x-forwarded-for", "2001:db8:2::1")]).await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    relayer.stop().await;
}

super::on_both_stores!(
    status_reads_balances_once_per_cache_time_and_domain_asks_the_chain_once,
    reads_from_many_64s_of_one_48_are_limited_by_the_48,
);
