//! Start-up while the node is briefly unreachable: the relayer retries with backoff instead of
//! exiting, and gives up once `STARTUP_RETRY_SECS` is over.

use super::{Engine, TestStore};
use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use kya_relayer::{Config, Relayer};
use kya_tests::{
    TestChain,
    relayer_fixture::{BinaryRelayer, set, settings},
    rpc_proxy::{self, RpcAction},
};

/// A node behind a proxy that closes the first `refusals` connections without a word.
async fn unreachable_at_first(t: &TestChain, refusals: usize) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let url = rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(move |request: &str| {
            if counter.fetch_add(1, Ordering::SeqCst) < refusals {
                RpcAction::Close
            } else {
                RpcAction::Forward(request.to_owned())
            }
        }),
    )
    .await;
    (url, calls)
}

/// The daemon's own `main.rs` (see tests/Cargo.toml).
const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

// Two workers: the loopback node stand-in keeps serving while this thread waits for the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_waits_for_a_node_that_is_briefly_unreachable_and_says_so() {
    let t = TestChain::start().await;
    let db = TestStore::new(Engine::Sqlite);
    let (url, calls) = unreachable_at_first(&t, 3).await;
    let mut env = settings(&t, &db);
    set(&mut env, "RPC_URL", url);
    let relayer = BinaryRelayer::start(BINARY, &env);
    assert!(calls.load(Ordering::SeqCst) >= 4, "three refused attempts, then the one that worked");
    let (status, report) = relayer.client.get("/status").await;
    assert_eq!((status, report["chainId"].as_u64()), (200, Some(t.chain_id())), "{report}");
    let (clean, log) = relayer.terminate();
    assert!(clean, "{log}");
    let retries = log.matches("the RPC endpoint is unreachable; retrying").count();
    assert_eq!(retries, 3, "each failed attempt is logged:\n{log}");
    assert!(log.contains("retry_in=250ms") && log.contains("retry_in=1s"), "with a growing pause:\n{log}");
}

#[tokio::test]
async fn the_relayer_gives_up_on_a_node_unreachable_past_its_patience() {
    let t = TestChain::start().await;
    let db = TestStore::new(Engine::Sqlite);
    let (url, calls) = unreachable_at_first(&t, usize::MAX).await;
    let mut env = settings(&t, &db);
    set(&mut env, "RPC_URL", url);
    set(&mut env, "STARTUP_RETRY_SECS", "1");
    let config =
        Config::from_lookup(|name| env.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone()))
            .unwrap();
    let error = Relayer::start(config).await.expect_err("no node, no relayer");
    assert!(error.detail().starts_with("RPC error"), "{}", error.detail());
    // 0.25 s, 0.5 s, then the next pause would pass the second: three attempts.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
