//! Several daemons on one PostgreSQL database, sharing three keys by leases: the real binary,
//! twice, against a real anvil. Each key is leased to one daemon at a time (an even share
//! each); a daemon killed mid-burst loses nothing (its keys are taken over once their leases
//! run out, its sent relays followed to the end, its unsent ones freed for the retry); the IP
//! limit is exact across daemons; SIGTERM hands the keys over at once, and a rolling restart
//! loses nothing; a daemon holding no key accepts and hands its relays to the keys' holders;
//! while no daemon holds a key, or by a daemon whose key's lease was taken before it sent, a
//! relay is answered 503 "no key is free".

use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Address, U256, hex},
    providers::Provider,
    signers::local::PrivateKeySigner,
};
use futures::future::join_all;
use kya_devchain::dev_accounts;
use kya_relayer::{RateKind, RelayStatus};
use kya_tests::{
    TestChain,
    relayer_fixture::{
        BinaryRelayer, Client, Engine, TestStore, body, forward, set, settings, sign_with_core,
    },
};
use serde_json::{Value, json};

use super::{agent_key, agent_of, anvil, balance, cost, forwarder_nonce, hash_of, pending, register_call};

pub(super) const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

/// The 503 of a daemon holding no key.
pub(super) const NO_FREE_KEY: &str =
    "No relayer key is free on this relayer right now. Please try again later or use direct mode.";

/// The 503 of a daemon whose database did not answer in time (a lock held past the lock timeout).
pub(super) const STORE_UNAVAILABLE: &str = "The relayer's database is busy or unreachable; try again shortly";

/// The cluster's keys: fresh wallets, 10 ETH each.
pub(super) async fn cluster_keys(t: &TestChain) -> Vec<PrivateKeySigner> {
    let keys: Vec<PrivateKeySigner> = (0..3).map(|n| dev_accounts::agent_wallet(7_000_000 + n)).collect();
    for key in &keys {
        anvil(t, "anvil_setBalance", json!([key.address(), "0x8ac7230489e80000"])).await;
    }
    keys
}

/// A daemon's settings: every key, its own `RELAYER_ID`, leases of `lease_secs`, a reconciler
/// that looks every second at relays older than 3 s, and limits no test here reaches unless
/// it sets them.
pub(super) fn daemon_env(
    t: &TestChain,
    db: &TestStore,
    keys: &[PrivateKeySigner],
    id: &str,
    lease_secs: u64,
) -> Vec<(String, String)> {
    let mut env = settings(t, db);
    env.retain(|(name, _)| name != "RELAYER_KEY");
    let keys = keys.iter().map(|key| hex::encode_prefixed(key.to_bytes())).collect::<Vec<_>>().join(",");
    for (name, value) in [
        ("RELAYER_KEYS", keys),
        ("RELAYER_ID", id.to_owned()),
        ("RELAYER_LEASE_SECS", lease_secs.to_string()),
        ("RECONCILE_INTERVAL_SECS", "1".to_owned()),
        ("RECONCILE_GRACE_SECS", "3".to_owned()),
        ("RATE_LIMIT_PER_IP", "1000".to_owned()),
        ("READ_RATE_LIMIT_PER_MINUTE", "100000".to_owned()),
    ] {
        set(&mut env, name, value);
    }
    env
}

/// Each key's holder as `/status` shows it, in key order.
pub(super) async fn holders(client: &Client) -> Vec<Option<String>> {
    let (status, report) = client.get("/status").await;
    assert_eq!(status, 200, "{report}");
    report["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lane| lane["holder"].as_str().map(str::to_owned))
        .collect()
}

/// Waits (up to `patience`) until the holders satisfy `done`; them, and how long it took.
pub(super) async fn holders_until(
    client: &Client,
    patience: Duration,
    done: impl Fn(&[Option<String>]) -> bool,
) -> (Vec<Option<String>>, Duration) {
    let started = Instant::now();
    loop {
        let seen = holders(client).await;
        if done(&seen) {
            return (seen, started.elapsed());
        }
        assert!(started.elapsed() < patience, "the keys' holders stayed {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many keys `id` holds.
pub(super) fn count(holders: &[Option<String>], id: &str) -> usize {
    holders.iter().filter(|holder| holder.as_deref() == Some(id)).count()
}

/// A registration of agent `n`, signed.
pub(super) fn registration(t: &TestChain, n: u64) -> Value {
    let agent = agent_key(n);
    let request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
    body(&request, &sign_with_core(t, &agent, &request).signature)
}

/// `POST /relay` to the daemon at `base`, as a client would: `None` when the daemon is gone
/// (connection refused or cut).
pub(super) async fn try_relay(http: &reqwest::Client, base: &str, body: &Value) -> Option<(u16, Value)> {
    let response = http.post(format!("{base}/relay")).json(body).send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.ok()?))
}

/// Relays `body` through `client` until it is mined, as a client retries: a request whose
/// relay ended without running (never sent by a daemon that died) is sent again, and so is one
/// refused with 503 by a daemon that holds no key yet (just started: its share comes within
/// seconds) or whose database was busy (a lock held by a frozen daemon). Returns the mined relay.
pub(super) async fn relay_until_mined(client: &Client, body: &Value) -> Value {
    for _ in 0..100 {
        let (status, answer) = client.relay(body).await;
        if status == 503 {
            assert!(
                answer == json!({"error": NO_FREE_KEY, "code": "no_free_key"})
                    || answer == json!({"error": STORE_UNAVAILABLE, "code": "store_unavailable"}),
                "{answer}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        // 202: a relay of this request accepted but not yet sent (by a daemon that died before
        // sending it): it ends dropped once the key's new holder reconciles it.
        assert!(status == 200 || (status == 202 && answer["status"] == "accepted"), "{status} {answer}");
        let id = answer["relayId"].as_str().unwrap().to_owned();
        let ended = client
            .relay_until(&id, |relay| {
                !["accepted", "sent", "replaced"].contains(&relay["status"].as_str().unwrap())
            })
            .await;
        // `executed`: the request ran, through another relay of it (a daemon that lost its key
        // while sending one): it ran once all the same, which the books' checks hold to.
        if ended["status"] == "mined" || ended["status"] == "executed" {
            return ended;
        }
        assert!(["dropped", "failed"].contains(&ended["status"].as_str().unwrap()), "{ended}");
    }
    panic!("{body} was never mined");
}

/// The books of the cluster, checked against the chain: every request of `signers` ran exactly
/// once; on each key every nonce went to exactly one mined relay (no gap, nothing twice), each
/// sent by the key its record names; the budget used equals the fees paid, to the wei, and each
/// key's balance fell by its own relays' fees.
pub(super) async fn assert_books_exact(
    t: &TestChain,
    db: &TestStore,
    client: &Client,
    keys: &[PrivateKeySigner],
    funded: &[U256],
    signers: &[Address],
) {
    let settled = client.settled().await;
    let store = db.open();
    let records = store.records().unwrap();
    let mut by_key: HashMap<Address, (Vec<u64>, u128)> = HashMap::new();
    let mut mined_per_signer: BTreeMap<Address, usize> = BTreeMap::new();
    let mut fees = 0u128;
    for record in records.iter().filter(|record| record.status == RelayStatus::Mined) {
        let receipt = t.chain.receipt(record.tx_hash.unwrap()).await.unwrap();
        assert!(receipt.status());
        assert_eq!(Some(receipt.from), record.lane, "{} sent by the key it names", record.relay_id);
        let entry = by_key.entry(receipt.from).or_default();
        entry.0.push(record.relayer_nonce.unwrap());
        entry.1 += cost(&receipt);
        fees += cost(&receipt);
        *mined_per_signer.entry(record.signer).or_default() += 1;
    }
    for signer in signers {
        assert_eq!(mined_per_signer.get(signer), Some(&1), "{signer}: one mined relay");
        assert_eq!(forwarder_nonce(t, *signer).await, 1, "{signer}: its request ran once");
        assert_ne!(agent_of(t, *signer).await, 0, "{signer} is registered");
    }
    assert_eq!(mined_per_signer.len(), signers.len(), "no other request ran");
    for (key, funds) in keys.iter().zip(funded) {
        let (mut nonces, paid) = by_key.remove(&key.address()).unwrap_or_default();
        nonces.sort_unstable();
        let used = t.chain.provider().get_transaction_count(key.address()).await.unwrap();
        assert_eq!(nonces, (0..used).collect::<Vec<_>>(), "{}: every nonce to one relay", key.address());
        assert_eq!(*funds - balance(t, key.address()).await, U256::from(paid), "{}", key.address());
    }
    assert!(
        records.iter().all(|record| !record.status.is_open()),
        "every relay ended: {:?}",
        records
            .iter()
            .filter(|record| record.status.is_open())
            .map(|record| &record.relay_id)
            .collect::<Vec<_>>()
    );
    assert_eq!(kya_tests::relayer_fixture::wei(&settled["dailyGasBudget"]["usedWei"]), fees, "books = fees");
}

/// Two daemons and three keys: two keys for the first, one for the second. A burst of 30
/// registrations from 30 signers goes to both; the first daemon is SIGKILLed while it has
/// relays in hand. Clients retry on the second: every retry of a request the first answered
/// is answered with its relay; the second takes the first's keys once their leases run out,
/// follows what it sent, frees what it never sent; every request runs exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_share_three_keys_and_one_killed_mid_burst_loses_nothing() {
    let t = TestChain::start().await;
    let keys = cluster_keys(&t).await;
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let first = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "daemon-a", 3));
    holders_until(&first.client, Duration::from_secs(10), |seen| count(seen, "daemon-a") == 3).await;
    let second = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "daemon-b", 3));
    let (shared, _) = holders_until(&second.client, Duration::from_secs(15), |seen| {
        count(seen, "daemon-a") == 2 && count(seen, "daemon-b") == 1
    })
    .await;
    eprintln!("cluster: keys held {shared:?}");

    let bodies: Vec<Value> = (0..30).map(|n| registration(&t, 900 + n)).collect();
    let signers: Vec<Address> = (0..30).map(|n| agent_key(900 + n).address()).collect();
    let http = kya_tests::http_client();
    let (base_a, base_b) = (first.client.base.clone(), second.client.base.clone());
    let answered_by_a = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let burst = tokio::spawn({
        let (bodies, answered_by_a) = (bodies.clone(), std::sync::Arc::clone(&answered_by_a));
        async move {
            join_all(bodies.iter().enumerate().map(|(n, body)| {
                let (http, base) = (&http, if n % 2 == 0 { &base_a } else { &base_b });
                let answered_by_a = &answered_by_a;
                async move {
                    let answer = try_relay(http, base, body).await;
                    if n % 2 == 0 && answer.as_ref().is_some_and(|(status, _)| *status == 200) {
                        answered_by_a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    answer
                }
            }))
            .await
        }
    });
    // Killed once it answered a few, with the rest of its share in hand. Should the burst end
    // first (the first daemon answering fewer than three with 200), the check below fails with
    // its answers: the test must not wait for ever.
    let waiting = Instant::now();
    while answered_by_a.load(std::sync::atomic::Ordering::SeqCst) < 3 && !burst.is_finished() {
        assert!(waiting.elapsed() < Duration::from_secs(120), "the burst went on for 120 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let log_a = first.kill();
    let answers = burst.await.unwrap();
    let before_kill: Vec<(usize, String)> = answers
        .iter()
        .enumerate()
        .filter(|(n, answer)| n % 2 == 0 && answer.as_ref().is_some_and(|(status, _)| *status == 200))
        .map(|(n, answer)| (n, answer.as_ref().unwrap().1["relayId"].as_str().unwrap().to_owned()))
        .collect();
    let cut_off = answers.iter().enumerate().filter(|(n, answer)| n % 2 == 0 && answer.is_none()).count();
    eprintln!(
        "cluster: the killed daemon answered {} relays and was cut off from {cut_off}",
        before_kill.len()
    );
    assert!(before_kill.len() >= 3, "the first daemon's answers: {answers:?}\n{log_a}");
    for (n, answer) in answers.iter().enumerate().filter(|(n, _)| n % 2 == 1) {
        assert_eq!(answer.as_ref().map(|(status, _)| *status), Some(200), "to the second, {n}: {answer:?}");
    }

    // Every retry of a request the first daemon answered is answered with that relay.
    for (n, id) in &before_kill {
        let (status, again) = second.client.relay(&bodies[*n]).await;
        assert_eq!((status, again["relayId"].as_str()), (200, Some(id.as_str())), "{again}");
    }
    // The second takes the first's keys once their leases run out (3 s).
    let (_, took) =
        holders_until(&second.client, Duration::from_secs(20), |seen| count(seen, "daemon-b") == 3).await;
    eprintln!("cluster: the survivor held every key {took:?} after the kill");
    let (_, metrics) = second.client.metrics().await;
    for key in &keys {
        assert!(metrics.contains(&format!("relayer_key_held{{key=\"{}\"}} 1\n", key.address())), "{metrics}");
    }
    // Clients retry until their request is mined.
    let mined = join_all(bodies.iter().map(|body| relay_until_mined(&second.client, body))).await;
    assert_eq!(mined.len(), 30);
    assert_books_exact(&t, &db, &second.client, &keys, &funded, &signers).await;
    // What the kill left in hand: relays the first daemon recorded beyond those it answered
    // (accepted or sent when it died), ended by the second.
    let mut ended: BTreeMap<String, usize> = BTreeMap::new();
    for record in db.open().records().unwrap() {
        *ended.entry(record.status.as_str().to_owned()).or_default() += 1;
    }
    eprintln!("cluster: the relays ended {ended:?}");
    let (clean, log) = second.terminate();
    assert!(clean, "{log}");
}

/// A relay waiting in the pool when its daemon is SIGKILLed (mining paused) is the key's next
/// holder's to finish: it takes the key once the lease runs out, finds the relay stuck and sends
/// it again with higher fees at the same nonce; the replacement is what is mined, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_daemons_stuck_relay_is_replaced_by_its_keys_next_holder() {
    let t = TestChain::start().await;
    let keys = cluster_keys(&t).await;
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let stuck_soon = |id: &str| {
        let mut env = daemon_env(&t, &db, &keys, id, 3);
        set(&mut env, "STUCK_AFTER_BLOCKS", "1000");
        set(&mut env, "STUCK_AFTER_SECS", "2");
        env
    };
    let first = BinaryRelayer::start(BINARY, &stuck_soon("stuck-a"));
    holders_until(&first.client, Duration::from_secs(10), |seen| count(seen, "stuck-a") == 3).await;
    let second = BinaryRelayer::start(BINARY, &stuck_soon("stuck-b"));
    holders_until(&second.client, Duration::from_secs(15), |seen| count(seen, "stuck-b") == 1).await;

    anvil(&t, "evm_setAutomine", json!([false])).await;
    let registration = registration(&t, 1_200);
    let (status, sent) = first.client.relay(&registration).await;
    assert_eq!(status, 200, "{sent}");
    let id = sent["relayId"].as_str().unwrap().to_owned();
    let log = first.kill();

    let replaced = second.client.relay_until(&id, |relay| relay["status"] == "replaced").await;
    // The store shows a replacement before the node has it (it is recorded first): mining
    // before then would mine the dead daemon's own transaction.
    pending(&t, hash_of(&replaced["txHash"])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    anvil(&t, "evm_mine", json!([])).await;
    let lane = db.open().relay_by_id(&id).unwrap().unwrap().lane.unwrap();
    assert!(
        holders(&second.client).await[keys.iter().position(|key| key.address() == lane).unwrap()].as_deref()
            == Some("stuck-b"),
        "the key's next holder sent it again\n{log}"
    );
    assert_eq!(replaced["relayerNonce"], sent_nonce(&db, &id), "at the relay's own nonce");
    assert_eq!(replaced["transactions"].as_array().unwrap().len(), 2, "{replaced}");
    let mined = second.client.relay_until(&id, |relay| relay["status"] == "mined").await;
    // The replacement is what is mined, or (the key's holder replaces a stuck relay again every
    // 2 s: a loaded machine can take that long to mine) a later one, never the dead daemon's.
    let sent_hashes: Vec<&Value> =
        mined["transactions"].as_array().unwrap().iter().map(|tx| &tx["txHash"]).collect();
    assert_eq!(sent_hashes[..2], [&sent["txHash"], &replaced["txHash"]], "{mined}");
    assert!(sent_hashes[1..].contains(&&mined["txHash"]), "a replacement is the one mined: {mined}");
    assert_books_exact(&t, &db, &second.client, &keys, &funded, &[agent_key(1_200).address()]).await;
    let (clean, log) = second.terminate();
    assert!(clean, "{log}");
}

/// The relayer nonce the store gave relay `id`.
fn sent_nonce(db: &TestStore, id: &str) -> Value {
    json!(db.open().relay_by_id(id).unwrap().unwrap().relayer_nonce.unwrap())
}

/// 61 requests from one IP address at once, spread over two daemons with a limit of 60 an
/// hour: exactly 60 are let through (here to the signature check, which refuses them), one is
/// refused by the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ip_limit_is_exact_across_two_daemons() {
    let t = TestChain::start().await;
    let keys = cluster_keys(&t).await;
    let db = TestStore::new(Engine::Postgres);
    let mut env = daemon_env(&t, &db, &keys, "limit-a", 3);
    set(&mut env, "RATE_LIMIT_PER_IP", "60");
    let first = BinaryRelayer::start(BINARY, &env);
    set(&mut env, "RELAYER_ID", "limit-b");
    let second = BinaryRelayer::start(BINARY, &env);
    // Signed by another key than `from`: counted against the IP, then refused as unsigned.
    let forged: Vec<Value> = (0..61)
        .map(|n| {
            let agent = agent_key(1_000 + n);
            let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
            body(&request, &sign_with_core(&t, &agent_key(2_000 + n), &request).signature)
        })
        .collect();
    let answers = join_all(forged.iter().enumerate().map(|(n, body)| {
        let client = if n % 2 == 0 { &first.client } else { &second.client };
        client.relay(body)
    }))
    .await;
    let mut by_status: BTreeMap<u16, Vec<Value>> = BTreeMap::new();
    for (status, answer) in answers {
        by_status.entry(status).or_default().push(answer);
    }
    assert_eq!(by_status.get(&401).map(Vec::len), Some(60), "{by_status:?}");
    assert_eq!(
        by_status.get(&429),
        Some(&vec![json!({"error": "IP rate limit exceeded (60/hour)", "code": "ip_rate_limited"})])
    );
    assert_eq!(by_status.len(), 2, "{by_status:?}");
    for daemon in [first, second] {
        let (clean, log) = daemon.terminate();
        assert!(clean, "{log}");
    }
}

/// With 30 s leases: SIGTERM lets the relay in hand finish and gives the keys back, so the
/// other daemon holds them within seconds, not after the lease; the daemon restarted under the
/// same id gets its share back; relays sent to whichever daemon is up through the rolling
/// restart all run, with the books exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_the_keys_over_at_once_and_a_rolling_restart_loses_nothing() {
    let t = TestChain::start().await;
    let keys = cluster_keys(&t).await;
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let (env_a, env_b) = (daemon_env(&t, &db, &keys, "roll-a", 30), daemon_env(&t, &db, &keys, "roll-b", 30));
    let first = BinaryRelayer::start(BINARY, &env_a);
    holders_until(&first.client, Duration::from_secs(10), |seen| count(seen, "roll-a") == 3).await;
    let second = BinaryRelayer::start(BINARY, &env_b);
    holders_until(&second.client, Duration::from_secs(20), |seen| count(seen, "roll-b") == 1).await;

    let bodies: Vec<Value> = (0..12).map(|n| registration(&t, 1_100 + n)).collect();
    let signers: Vec<Address> = (0..12).map(|n| agent_key(1_100 + n).address()).collect();
    let mut mined = Vec::new();
    mined.push(relay_until_mined(&first.client, &bodies[0]).await);
    mined.push(relay_until_mined(&second.client, &bodies[1]).await);

    // A relay in hand when SIGTERM comes is answered; then the keys go to the other at once.
    // In hand: counted by the per-IP limit (in the shared store), so past where a stopping
    // daemon still takes a request, however slowly it got there.
    let store = db.open();
    let ip_hits = || {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        store.hits(RateKind::Ip, "127.0.0.1", now).unwrap()
    };
    let before = ip_hits();
    let in_hand = tokio::spawn({
        let (client, body) = (first.client.clone(), bodies[2].clone());
        async move { client.relay(&body).await }
    });
    let arrived = async {
        while ip_hits() == before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), arrived).await.expect("the relay reaches the first daemon");
    let (clean, log) = first.terminate();
    assert!(clean, "{log}");
    let (status, answer) = in_hand.await.unwrap();
    assert_eq!(status, 200, "the relay in hand was finished: {answer}\n{log}");
    let (_, handed_over_in) =
        holders_until(&second.client, Duration::from_secs(25), |seen| count(seen, "roll-b") == 3).await;
    assert!(handed_over_in < Duration::from_secs(15), "given back, not run out: {handed_over_in:?}");
    eprintln!("cluster: after SIGTERM the other daemon held every key in {handed_over_in:?}");
    for body in &bodies[2..6] {
        mined.push(relay_until_mined(&second.client, body).await);
    }

    // Back under the same id: its share again (the other gives one key back).
    let first = BinaryRelayer::start(BINARY, &env_a);
    holders_until(&first.client, Duration::from_secs(20), |seen| {
        count(seen, "roll-a") == 1 && count(seen, "roll-b") == 2
    })
    .await;
    // Then the other rolls: its keys come over, and relays go on through whichever is up.
    let (clean, log) = second.terminate();
    assert!(clean, "{log}");
    for body in &bodies[6..9] {
        mined.push(relay_until_mined(&first.client, body).await);
    }
    let second = BinaryRelayer::start(BINARY, &env_b);
    for (n, body) in bodies[9..].iter().enumerate() {
        let client = if n % 2 == 0 { &first.client } else { &second.client };
        mined.push(relay_until_mined(client, body).await);
    }
    assert_eq!(mined.len(), 12);
    assert_books_exact(&t, &db, &first.client, &keys, &funded, &signers).await;
    for daemon in [first, second] {
        let (clean, log) = daemon.terminate();
        assert!(clean, "{log}");
    }
}

/// Three daemons and two keys: the third holds none (a standby) and still accepts. Its relays
/// are handed off to the keys' holders, which send them; it answers 200 with their
/// transactions (`sent`, or already `mined`), as if it had sent them. Every request runs once and the books are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_accepts_and_the_keys_holders_send_its_relays() {
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = cluster_keys(&t).await.into_iter().take(2).collect();
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let first = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "holder-a", 3));
    holders_until(&first.client, Duration::from_secs(10), |seen| count(seen, "holder-a") == 2).await;
    let second = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "holder-b", 3));
    let one_each = |seen: &[Option<String>]| count(seen, "holder-a") == 1 && count(seen, "holder-b") == 1;
    holders_until(&second.client, Duration::from_secs(15), one_each).await;
    let standby = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "standby-c", 3));
    let (held, _) = holders_until(&standby.client, Duration::from_secs(5), one_each).await;
    assert_eq!(count(&held, "standby-c"), 0, "{held:?}");

    let bodies: Vec<Value> = (0..12).map(|n| registration(&t, 1_500 + n)).collect();
    let signers: Vec<Address> = (0..12).map(|n| agent_key(1_500 + n).address()).collect();
    let answers = join_all(bodies.iter().map(|body| standby.client.relay(body))).await;
    let mut lanes: BTreeMap<Address, usize> = BTreeMap::new();
    for (status, answer) in &answers {
        // Sent by a holder (and, with anvil mining at once, perhaps mined before the standby looks).
        assert_eq!(*status, 200, "{answer}");
        assert!(answer["status"] == "sent" || answer["status"] == "mined", "{answer}");
        let id = answer["relayId"].as_str().unwrap();
        let record = db.open().relay_by_id(id).unwrap().unwrap();
        assert_eq!(answer["txHash"], json!(record.tx_hash.unwrap().to_string()), "{answer}");
        *lanes.entry(record.lane.unwrap()).or_default() += 1;
    }
    // Both holders sent: the standby spread its relays over their keys.
    assert_eq!(lanes.keys().copied().collect::<Vec<_>>().len(), 2, "{lanes:?}");
    assert_eq!(lanes.values().sum::<usize>(), 12);
    let mined = join_all(bodies.iter().map(|body| relay_until_mined(&standby.client, body))).await;
    assert_eq!(mined.len(), 12);
    assert_books_exact(&t, &db, &standby.client, &keys, &funded, &signers).await;

    let (clean, standby_log) = standby.terminate();
    assert!(clean, "{standby_log}");
    assert_eq!(standby_log.matches("relay handed off to the key's holder").count(), 12, "{standby_log}");
    let mut sent_by_holders = 0;
    for holder in [first, second] {
        let (clean, log) = holder.terminate();
        assert!(clean, "{log}");
        sent_by_holders += log.matches("relay sent (handed off by another daemon)").count();
    }
    assert_eq!(sent_by_holders, 12, "each relay sent once, by a holder");
}

/// One key, no daemon holding it: its holder A is SIGKILLed while another session holds the
/// key's row in `lanes` (`SELECT … FOR UPDATE` in a transaction it leaves open), so the standby
/// S cannot take the key once A's lease (3 s) runs out (its keeper meets the lock timeout, 1 s,
/// and retries). Meanwhile S answers a relay 503 with the exact "no key is free" words and no
/// `Retry-After`, and writes no relay. The session ended, S takes the key within seconds and
/// the same request is relayed and mined; the books equal the fee to the wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_no_daemon_holds_a_key_a_relay_answers_503_no_key_is_free() {
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = cluster_keys(&t).await.into_iter().take(1).collect();
    let funded = vec![balance(&t, keys[0].address()).await];
    let db = TestStore::new(Engine::Postgres);
    let database = db.database().expect("on PostgreSQL");
    let env = |id: &str| {
        let mut env = daemon_env(&t, &db, &keys, id, 3);
        set(&mut env, "DATABASE_LOCK_TIMEOUT_MS", "1000".to_owned());
        env
    };
    let holder = BinaryRelayer::start(BINARY, &env("holder-a"));
    holders_until(&holder.client, Duration::from_secs(10), |seen| count(seen, "holder-a") == 1).await;
    let standby = BinaryRelayer::start(BINARY, &env("standby-s"));
    let (seen, _) =
        holders_until(&standby.client, Duration::from_secs(10), |seen| count(seen, "holder-a") == 1).await;
    assert_eq!(count(&seen, "standby-s"), 0, "{seen:?}");

    let lanes = database.hold("BEGIN; SELECT address FROM lanes FOR UPDATE;");
    let holder_log = holder.kill();
    holders_until(&standby.client, Duration::from_secs(15), |seen| seen.iter().all(Option::is_none)).await;
    let answer = kya_tests::http_client()
        .post(format!("{}/relay", standby.client.base))
        .json(&registration(&t, 1_900))
        .send()
        .await
        .expect("the standby answers");
    assert_eq!(answer.status().as_u16(), 503);
    assert_eq!(answer.headers().get("retry-after"), None, "{:?}", answer.headers());
    assert_eq!(answer.json::<Value>().await.unwrap(), json!({ "error": NO_FREE_KEY, "code": "no_free_key" }));
    let written = tokio::task::block_in_place(|| database.value("SELECT count(*) FROM relays"));
    assert_eq!(written, "0", "the refused relay wrote nothing");
    let (seen, _) = holders_until(&standby.client, Duration::from_secs(1), |_| true).await;
    assert!(seen.iter().all(Option::is_none), "still no holder: {seen:?}");

    drop(lanes);
    holders_until(&standby.client, Duration::from_secs(10), |seen| count(seen, "standby-s") == 1).await;
    let (status, relayed) = standby.client.relay(&registration(&t, 1_900)).await;
    assert_eq!(status, 200, "{relayed}");
    standby
        .client
        .relay_until(relayed["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined")
        .await;
    assert_books_exact(&t, &db, &standby.client, &keys, &funded, &[agent_key(1_900).address()]).await;
    let (clean, log) = standby.terminate();
    assert!(clean, "{log}");
    for log in [log, holder_log] {
        assert!(!log.contains(database.password()), "the password never shows");
    }
}

/// One key, held by A (30-s leases, so its keeper looks every 5 s). The key's lease is taken
/// from A in the store as another daemon's takeover takes it (holder, fence and expiry written
/// by the test: a stand-in for a takeover landing between A's choice of the key and its record,
/// which no timing makes certain). A relay sent to A at once is reserved on the key A still
/// thinks it holds, refused at its record (the lease is not A's), and, A holding no other key,
/// released unsent: 503 with the exact "no key is free" words and no `Retry-After`; its record
/// `failed` with those words at cost 0 with no transaction; nothing reserved, the key's nonce
/// untouched. The lease given back, A takes the key again and the same request is relayed and
/// mined; the books equal the fee to the wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_lost_its_keys_lease_before_sending_releases_the_relay_and_answers_503() {
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = cluster_keys(&t).await.into_iter().take(1).collect();
    let key = keys[0].address();
    let funded = vec![balance(&t, key).await];
    let db = TestStore::new(Engine::Postgres);
    let database = db.database().expect("on PostgreSQL");
    let daemon = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "holder-a", 30));
    holders_until(&daemon.client, Duration::from_secs(10), |seen| count(seen, "holder-a") == 1).await;

    tokio::task::block_in_place(|| {
        database.value(
            "UPDATE lanes SET holder = 'daemon-b', fence = fence + 1, \
             lease_until = extract(epoch FROM now())::bigint + 60 RETURNING holder",
        )
    });
    let answer = kya_tests::http_client()
        .post(format!("{}/relay", daemon.client.base))
        .json(&registration(&t, 1_950))
        .send()
        .await
        .expect("the daemon answers");
    assert_eq!(answer.status().as_u16(), 503);
    assert_eq!(answer.headers().get("retry-after"), None, "{:?}", answer.headers());
    assert_eq!(answer.json::<Value>().await.unwrap(), json!({ "error": NO_FREE_KEY, "code": "no_free_key" }));
    let records = db.open().records().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record.status, RelayStatus::Failed, "{record:?}");
    assert_eq!(record.error.as_deref(), Some(NO_FREE_KEY), "{record:?}");
    assert_eq!(
        (record.lane, record.relayer_nonce, record.tx_hash, record.cost_wei),
        (Some(key), None, None, Some(0))
    );
    let (_, status) = daemon.client.get("/status").await;
    assert_eq!(status["dailyGasBudget"]["usedWei"], "0", "nothing reserved: {status}");
    assert_eq!(t.chain.provider().get_transaction_count(key).await.unwrap(), 0, "nothing sent");

    tokio::task::block_in_place(|| {
        database.value("UPDATE lanes SET holder = NULL, lease_until = 0 RETURNING address")
    });
    holders_until(&daemon.client, Duration::from_secs(10), |seen| count(seen, "holder-a") == 1).await;
    let (status, relayed) = daemon.client.relay(&registration(&t, 1_950)).await;
    assert_eq!(status, 200, "{relayed}");
    daemon.client.relay_until(relayed["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined").await;
    assert_books_exact(&t, &db, &daemon.client, &keys, &funded, &[agent_key(1_950).address()]).await;
    let (clean, log) = daemon.terminate();
    assert!(clean, "{log}");
    assert!(!log.contains(database.password()), "the password never shows");
}
