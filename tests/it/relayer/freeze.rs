//! A daemon frozen (SIGSTOP, as a paused VM or cgroup is) while it is inside a reservation,
//! holding the budget row: the real binary twice on one PostgreSQL database, three keys, anvil.
//! The other daemon goes on relaying (after the lock timeout, the server ends the frozen
//! session; after the lease, it holds every key); thawed, the frozen daemon finds its keys gone,
//! records and sends nothing on them, and takes its share again. Every request runs once and
//! the books are exact.

use std::time::{Duration, Instant};

use alloy::{
    consensus::{SignableTransaction, Transaction as _, TxEip1559, TxEnvelope},
    eips::Encodable2718,
    network::TxSignerSync,
    primitives::{Address, B256, Bytes, TxKind, U256},
    providers::Provider as _,
    sol_types::SolCall,
};
use futures::future::join_all;
use kya_core::chain::abi::Forwarder;
use kya_relayer::{BudgetLimits, NewRelay, Sending, Taking};
use kya_test_postgres::TestDatabase;
use kya_tests::{
    TestChain,
    delay_proxy::DelayProxy,
    relayer_fixture::{BinaryRelayer, Engine, TestStore, forward, set, sign_with_core},
};
use serde_json::{Value, json};

use super::{
    agent_key, balance,
    cluster::{
        NO_FREE_KEY, STORE_UNAVAILABLE, assert_books_exact, cluster_keys, count, daemon_env, holders_until,
        registration, relay_until_mined, try_relay,
    },
    database::{server_of, through},
    register_call,
};

const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

/// The frozen daemon's distance from the database, each way: a reservation's dozen round trips
/// then take tens of milliseconds, long enough to see it under way and stop the daemon inside
/// it (without it, a reservation lasts about as long as it takes to notice it).
const DATABASE_ONE_WAY: Duration = Duration::from_millis(2);

/// Seconds a lease lasts: the other daemon holds every key this long after the freeze at most.
const LEASE_SECS: u64 = 4;

/// Server-side functions of the test (in its own database): `kya_test_reserving(ports)`, a
/// session of a client on one of `ports` that is inside a reservation (its last statement one of
/// `Store::reserve`'s), holds the budget row (`FOR UPDATE`: `RowShareLock` on `budget`, waiting
/// for no lock) and waits for its client (`idle in transaction`); and
/// `kya_test_wait_for_reserving(ports, seconds)`, polling for one every millisecond.
///
/// A reservation's statements reach the server as a batch of `EXECUTE`s of statements the
/// connection prepared (`store/prepared.rs`), whose names differ from one connection to the
/// next: the batch that read what the checks need is known by its one statement of three
/// values, the signer's checksummed address, its forwarder nonce and the client's address
/// (`Store::reservation_read`). The statements' own text, which `pg_stat_activity` showed
/// before they were prepared, is still matched for a window's roll-over (plain statements).
const WATCH: &str = r"
CREATE FUNCTION kya_test_reserving(ports int[]) RETURNS int LANGUAGE sql AS $$
  SELECT a.pid FROM pg_stat_activity a
   WHERE a.client_port = ANY (ports) AND a.state = 'idle in transaction'
     AND a.query ~ '(EXECUTE kya_batch_[0-9]+\(''0x[0-9a-fA-F]{40}'', ''[0-9]+'', ''[^'']+''\)|forwarder_nonce = |COALESCE\(cost_wei, reserved_wei\)|SELECT lane, COUNT|INSERT INTO relays)'
     AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted
                  AND l.mode = 'RowShareLock' AND l.relation = 'budget'::regclass)
     AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted)
   LIMIT 1
$$;
CREATE FUNCTION kya_test_wait_for_reserving(ports int[], seconds float8) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  found int;
  give_up timestamptz := clock_timestamp() + make_interval(secs => seconds);
BEGIN
  LOOP
    PERFORM pg_stat_clear_snapshot();
    found := kya_test_reserving(ports);
    IF found IS NOT NULL OR clock_timestamp() > give_up THEN RETURN found; END IF;
    PERFORM pg_sleep(0.001);
  END LOOP;
END
$$;
";

/// A daemon's settings: the cluster's, with a lock timeout of 1 s, an idle-in-transaction
/// timeout of 3 s (the server ends a frozen session then) and `LEASE_SECS` leases.
fn frozen_env(
    t: &TestChain,
    db: &TestStore,
    keys: &[alloy::signers::local::PrivateKeySigner],
    id: &str,
) -> Vec<(String, String)> {
    let mut env = daemon_env(t, db, keys, id, LEASE_SECS);
    set(&mut env, "DATABASE_LOCK_TIMEOUT_MS", "1000");
    set(&mut env, "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", "3000");
    set(&mut env, "DATABASE_STATEMENT_TIMEOUT_MS", "5000");
    env
}

/// Polls until one of `daemon`'s sessions (its connections through `proxy`) is inside a
/// reservation holding the budget row, then freezes `daemon`; once what it had sent has reached
/// the server, checks that the session is still in there (else thaws it and tries again).
/// Returns the frozen session's server pid.
async fn freeze_inside_a_reservation(
    daemon: &BinaryRelayer,
    proxy: &DelayProxy,
    database: &TestDatabase,
) -> String {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        // Read again each time: the daemon's pool opens connections as the burst needs them.
        let ports = proxy.upstream_ports().iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        let watch = format!("SELECT kya_test_wait_for_reserving(ARRAY[{ports}]::int[], 0.5)");
        let found = tokio::task::block_in_place(|| database.value(&watch));
        if found.is_empty() {
            continue;
        }
        daemon.signal("STOP");
        tokio::time::sleep(DATABASE_ONE_WAY * 2 + Duration::from_millis(50)).await;
        let still = tokio::task::block_in_place(|| {
            database.value(&format!("SELECT kya_test_reserving(ARRAY[{ports}]::int[])"))
        });
        if !still.is_empty() {
            return still;
        }
        daemon.signal("CONT");
    }
    panic!("the daemon was never caught inside a reservation");
}

/// Two daemons, three keys (two for A, one for B); A reaches the database 2 ms away. A burst
/// of 40 registrations goes to A, and A is frozen while one of its sessions is inside a
/// reservation holding the budget row. Five new registrations to B are each answered within
/// the lock timeout (200, or 503 "busy" with nothing written), and all five are mined while A
/// is still frozen (the server ended A's session after the idle-in-transaction timeout); B
/// holds every key once A's lease runs out. Thawed, A finds both its leases taken (it logs so,
/// and records and sends nothing on them: each key's nonces go one each to mined relays, no gap),
/// takes its share again, and every request of the burst, retried through A, runs exactly once;
/// the books equal the fees to the wei. A transaction A recorded before the freeze and submits
/// after it (frozen between its lease check and its submit) lands on a nonce B never dropped:
/// B sends such a relay again at its nonce instead, so whichever is mined is the relay's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_frozen_inside_a_reservation_stalls_no_one_and_sends_nothing_on_its_lost_keys() {
    let t = TestChain::start().await;
    let keys = cluster_keys(&t).await;
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let database = db.database().expect("on PostgreSQL");
    let proxy = DelayProxy::start(server_of(database.url()), DATABASE_ONE_WAY);
    let mut env_a = frozen_env(&t, &db, &keys, "frozen-a");
    set(&mut env_a, "DATABASE_URL", through(database.url(), proxy.address()));
    let a = BinaryRelayer::start(BINARY, &env_a);
    holders_until(&a.client, Duration::from_secs(10), |seen| count(seen, "frozen-a") == 3).await;
    let b = BinaryRelayer::start(BINARY, &frozen_env(&t, &db, &keys, "frozen-b"));
    holders_until(&b.client, Duration::from_secs(15), |seen| {
        count(seen, "frozen-a") == 2 && count(seen, "frozen-b") == 1
    })
    .await;
    tokio::task::block_in_place(|| database.value(WATCH));

    let burst: Vec<Value> = (0..40).map(|n| registration(&t, 1_600 + n)).collect();
    let fresh: Vec<Value> = (0..5).map(|n| registration(&t, 1_700 + n)).collect();
    let signers: Vec<Address> = (0..40)
        .map(|n| agent_key(1_600 + n).address())
        .chain((0..5).map(|n| agent_key(1_700 + n).address()))
        .collect();
    let to_a = tokio::spawn({
        let (base, burst) = (a.client.base.clone(), burst.clone());
        async move {
            let http = kya_tests::http_client();
            join_all(burst.iter().map(|body| try_relay(&http, &base, body))).await
        }
    });
    let frozen_session = freeze_inside_a_reservation(&a, &proxy, database).await;
    let frozen_at = Instant::now();

    // B answers within the lock timeout (1 s) while the row is held: 200 once the server ended
    // the frozen session (3 s), else 503 "busy", nothing written.
    let http = kya_tests::http_client();
    let answers =
        join_all(fresh.iter().map(|body| {
            tokio::time::timeout(Duration::from_secs(20), try_relay(&http, &b.client.base, body))
        }))
        .await;
    for answer in &answers {
        let (status, body) =
            answer.as_ref().expect("answered within the lock timeout, not never").clone().expect("B answers");
        assert!(
            status == 200
                || (status == 503
                    && body == json!({"error": STORE_UNAVAILABLE, "code": "store_unavailable"})),
            "{status} {body}"
        );
    }
    // A client's retries: all five mined through B while A is still frozen.
    join_all(fresh.iter().map(|body| relay_until_mined(&b.client, body))).await;
    let relayed_in = frozen_at.elapsed();
    holders_until(&b.client, Duration::from_secs(20), |seen| count(seen, "frozen-b") == 3).await;
    let every_key_in = frozen_at.elapsed();
    let ended = tokio::task::block_in_place(|| {
        database.value(&format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {frozen_session}"))
    });
    assert_eq!(ended, "0", "the server ended the frozen session (idle in transaction for 3 s)");

    a.signal("CONT");
    let burst_answers = to_a.await.unwrap();
    // Answered as sent (200), refused when its store or its key went (503, words a client
    // retries on), or, recorded past the lease's margin and withheld, handed to the key's
    // holder (200 once sent, 202 with the relay's id): never a 500.
    for (status, answer) in burst_answers.iter().flatten() {
        let retry = answer == &json!({"error": STORE_UNAVAILABLE, "code": "store_unavailable"})
            || answer == &json!({"error": NO_FREE_KEY, "code": "no_free_key"});
        let accepted = *status == 202 && answer["status"] == "accepted" && answer["relayId"].is_string();
        assert!(*status == 200 || accepted || (*status == 503 && retry), "{status} {answer}");
    }
    let (shares, _) =
        holders_until(&a.client, Duration::from_secs(20), |seen| count(seen, "frozen-a") >= 1).await;
    join_all(burst.iter().map(|body| relay_until_mined(&a.client, body))).await;
    assert_books_exact(&t, &db, &b.client, &keys, &funded, &signers).await;

    let (clean, log_a) = a.terminate();
    assert!(clean, "{log_a}");
    let lost = log_a.matches("the lease on this key was taken by another daemon").count();
    assert!((1..=2).contains(&lost), "A found the keys it held gone:\n{log_a}");
    let (clean, log_b) = b.terminate();
    assert!(clean, "{log_b}");
    // How often the freeze met the two rare paths, for whoever reads the run: a transaction
    // withheld past the lease's margin (its relay handed to the key's holder), and a recorded
    // relay the key's next holder sent again at its nonce.
    let withheld = log_a.matches("not submitted past the lease's margin").count();
    let resent = log_b.matches("decision=Resend").count();
    eprintln!(
        "freeze: the other daemon relayed five new requests {relayed_in:?} after the freeze and \
         held every key after {every_key_in:?}; thawed, the frozen one holds again {shares:?}; \
         withheld {withheld}, sent again at its nonce {resent}"
    );
}

/// Server-side stand-in for a daemon stalled between recording a transaction and submitting it:
/// the commit of the first record of a sent transaction takes `seconds` (a deferred trigger,
/// once), so the record outlasts the lease's margin, as after a freeze.
fn stall_the_first_record(seconds: f64) -> String {
    format!(
        r"
CREATE TABLE kya_test_stall (done boolean NOT NULL);
INSERT INTO kya_test_stall VALUES (false);
CREATE FUNCTION kya_test_stall_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE kya_test_stall SET done = true WHERE NOT done;
  IF FOUND THEN PERFORM pg_sleep({seconds}); END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER kya_test_stall_at_commit AFTER UPDATE OF status ON relays
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.status = 'sent')
  EXECUTE FUNCTION kya_test_stall_once();
"
    )
}

/// A daemon whose record of a relay's first transaction outlasts the lease's margin (3-s
/// leases: a 1-s margin; the record's commit stalls 1.5 s, as a daemon frozen there would)
/// withholds it: the transaction is not submitted, its record is taken back, and the relay
/// goes to its key's holder (here the same daemon), which signs it again (the same bytes: same
/// nonce, same fees) and sends it. The client is
/// answered 200 with the hash that was sent (before the fix: 500 "may still be mined"); the
/// relay has that one transaction, at the withheld one's nonce; the request runs once and the books are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_recorded_past_the_leases_margin_is_withheld_and_its_relay_sent_by_the_keys_holder() {
    let t = TestChain::start().await;
    let keys = cluster_keys(&t).await[..1].to_vec();
    let funded = vec![balance(&t, keys[0].address()).await];
    let db = TestStore::new(Engine::Postgres);
    let daemon = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "stalled", 3));
    holders_until(&daemon.client, Duration::from_secs(10), |seen| count(seen, "stalled") == 1).await;
    let database = db.database().expect("on PostgreSQL");
    tokio::task::block_in_place(|| database.value(&stall_the_first_record(1.5)));

    let body = registration(&t, 1_800);
    let (status, answer) = daemon.client.relay(&body).await;
    // Sent by the key's holder while the handler waited for it (and on anvil perhaps mined).
    assert!(status == 200 && ["sent", "mined"].contains(&answer["status"].as_str().unwrap()), "{answer}");
    let sent: B256 = answer["txHash"].as_str().unwrap().parse().unwrap();
    let relay = daemon
        .client
        .relay_until(answer["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined")
        .await;
    assert_eq!(relay["txHash"], answer["txHash"]);
    assert_eq!(
        relay["transactions"].as_array().map(Vec::len),
        Some(1),
        "the withheld one is forgotten: {relay}"
    );
    let stalled = tokio::task::block_in_place(|| database.value("SELECT done FROM kya_test_stall"));
    assert_eq!(stalled, "t", "the record stalled once");
    assert_books_exact(&t, &db, &daemon.client, &keys, &funded, &[agent_key(1_800).address()]).await;

    let (clean, log) = daemon.terminate();
    assert!(clean, "{log}");
    let line = log
        .lines()
        .find(|line| line.contains("not submitted past the lease's margin"))
        .unwrap_or_else(|| panic!("withheld:\n{log}"));
    let withheld: B256 = line.split("tx=").nth(1).unwrap()[..66].parse().unwrap();
    // Signed again by the key's holder at the same nonce with the same fees: the same bytes,
    // the same hash, submitted once (the withheld copy never was).
    assert_eq!(withheld, sent);
    let mined = t.chain.provider().get_transaction_by_hash(sent).await.unwrap().unwrap();
    assert_eq!(mined.nonce(), 0, "at the withheld one's nonce, the key's first");
}

/// The race of a daemon frozen between its lease check and its submit, without the timing: what
/// such a daemon leaves is set up through the store (a relay reserved and its first transaction
/// signed at the key's first nonce and recorded under its lease, not submitted), its lease runs
/// out, and another daemon takes the key. It does not drop the relay (the node never had the
/// transaction, but its nonce is open): it sends it again at that nonce, with higher fees, and
/// that is mined. The frozen daemon, thawed, submits its recorded transaction: refused, the
/// nonce is used. The request ran once, through its own relay; the books are exact. (Dropped,
/// as before, the late transaction would have run the request with nothing booked.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_a_daemon_that_lost_its_key_submits_late_finds_its_nonce_fenced() {
    let t = TestChain::start().await;
    let keys = cluster_keys(&t).await[..1].to_vec();
    let key = keys[0].clone();
    let funded = vec![balance(&t, key.address()).await];
    let db = TestStore::new(Engine::Postgres);
    let agent = agent_key(1_810);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = sign_with_core(&t, &agent, &request);
    let input: Bytes = Forwarder::executeCall { req: request.clone(), signature: signed.signature.clone() }
        .abi_encode()
        .into();
    let (gas_limit, max_fee, priority_fee) = (900_000u64, 10_000_000_000u128, 1_000_000_000u128);

    // What the frozen daemon left: its record, under its lease, of a transaction it never sent.
    let store = db.open();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let lease = store.take_lanes("frozen", &[key.address()], 1, Taking::Free, now, 3).unwrap()[0];
    let new_relay = NewRelay {
        signer: agent.address(),
        forwarder_nonce: U256::ZERO,
        digest: signed.digest,
        signature: signed.signature.clone(),
        deadline: 0,
        input: input.clone(),
        client_ip: "127.0.0.1".into(),
        gas_limit,
        max_fee_wei: max_fee,
        priority_fee_wei: priority_fee,
        l1_fee_wei: 0,
        lanes: vec![key.address()],
    };
    let reservation = store.reserve(&new_relay, &BudgetLimits::total(u128::MAX), now).unwrap().unwrap();
    let mut tx = TxEip1559 {
        chain_id: t.chain_id(),
        nonce: 0,
        gas_limit,
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: priority_fee,
        to: TxKind::Call(t.forwarder()),
        value: U256::ZERO,
        access_list: Default::default(),
        input,
    };
    let signature = key.sign_transaction_sync(&mut tx).unwrap();
    let envelope: TxEnvelope = tx.into_signed(signature).into();
    let late = *envelope.tx_hash();
    let block = t.chain.provider().get_block_number().await.unwrap();
    let sending =
        Sending { id: reservation.id, relayer_nonce: 0, tx_hash: late, block, now, handed_off_first: false };
    store.mark_sent(&sending, &lease).unwrap();
    drop(store);

    // Its lease runs out; the key's next holder takes it and fences the nonce.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let next = BinaryRelayer::start(BINARY, &daemon_env(&t, &db, &keys, "next", 3));
    let relay = next.client.relay_until(&reservation.relay_id, |relay| relay["status"] == "mined").await;
    let hashes: Vec<&str> =
        relay["transactions"].as_array().unwrap().iter().map(|tx| tx["txHash"].as_str().unwrap()).collect();
    assert_eq!(hashes.len(), 2, "{relay}");
    assert_eq!(hashes[0], late.to_string(), "{relay}");
    assert_eq!(relay["txHash"].as_str(), Some(hashes[1]), "mined as the one sent again");
    assert_eq!(relay["relayerNonce"], 0);

    // Thawed, the frozen daemon submits what it recorded: the nonce is taken.
    let refused = t.chain.provider().send_raw_transaction(&envelope.encoded_2718()).await.unwrap_err();
    assert!(refused.to_string().to_lowercase().contains("nonce too low"), "{refused}");
    assert_books_exact(&t, &db, &next.client, &keys, &funded, &[agent.address()]).await;
    let (clean, log) = next.terminate();
    assert!(clean, "{log}");
    assert!(log.contains("decision=Resend"), "{log}");
}
