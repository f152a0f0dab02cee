//! The relayer's PostgreSQL connections under trouble, with the real binary: a daemon frozen
//! (SIGSTOP) while a transaction holds the budget row costs another daemon the lock timeout,
//! answered 503 with `Retry-After`, never a hang; its lease keeper, on a connection of its own,
//! goes on renewing meanwhile and takes the frozen daemon's key once its lease runs out. Over
//! TLS (`sslmode=verify-full` against a CA made at test time), a relay goes through end to end,
//! and a certificate from another CA stops the daemon at start with a clear message and no
//! password. The database down (every connection cut) and back: 503 meanwhile, relays after.
//! A statement held past the statement timeout (a row lock, under a longer lock timeout): the
//! same 503, nothing written. A server whose processes hang with their connections open (its
//! backends SIGSTOPped): 503 at the daemon's own deadline on store calls, relays once resumed; and
//! a reservation whose commit lands after its 503 is sent once, found by the retry; a renewal
//! landing late lets go of the key until it is taken again under a new fence.

use std::{
    net::SocketAddr,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use alloy::{primitives::hex, signers::local::PrivateKeySigner};
use kya_devchain::dev_accounts;
use kya_test_postgres::TestDatabase;
use kya_tests::{
    TestChain,
    delay_proxy::DelayProxy,
    relayer_fixture::{BinaryRelayer, Engine, TestStore, set, settings},
};
use serde_json::{Value, json};

use super::{
    agent_key, anvil, balance,
    cluster::{
        self, STORE_UNAVAILABLE, assert_books_exact, cluster_keys, count, holders_until, registration,
    },
};

const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

/// Two keys, fresh wallets with 10 ETH each: one for each daemon.
async fn two_keys(t: &TestChain) -> Vec<PrivateKeySigner> {
    let keys: Vec<PrivateKeySigner> = (0..2).map(|n| dev_accounts::agent_wallet(7_100_000 + n)).collect();
    for key in &keys {
        anvil(t, "anvil_setBalance", json!([key.address(), "0x8ac7230489e80000"])).await;
    }
    keys
}

/// A daemon's settings on `database`: both keys, its own id, 6 s leases, a lock timeout of 1 s.
fn daemon_env(
    t: &TestChain,
    database: &TestDatabase,
    keys: &[PrivateKeySigner],
    id: &str,
) -> Vec<(String, String)> {
    // The chain's and the contracts' settings; the store is the database, not the SQLite file.
    let mut env = settings(t, &TestStore::new(Engine::Sqlite));
    env.retain(|(name, _)| name != "RELAYER_KEY" && name != "RELAYER_DB");
    let keys = keys.iter().map(|key| hex::encode_prefixed(key.to_bytes())).collect::<Vec<_>>().join(",");
    for (name, value) in [
        ("DATABASE_URL", database.url().to_owned()),
        ("RELAYER_KEYS", keys),
        ("RELAYER_ID", id.to_owned()),
        ("RELAYER_LEASE_SECS", "6".to_owned()),
        ("DATABASE_LOCK_TIMEOUT_MS", "1000".to_owned()),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "5000".to_owned()),
        ("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", "3000".to_owned()),
        ("RATE_LIMIT_PER_IP", "1000".to_owned()),
        ("READ_RATE_LIMIT_PER_MINUTE", "100000".to_owned()),
    ] {
        set(&mut env, name, value);
    }
    env
}

/// The database server's address in `url` (`postgres://user:password@host:port/database`).
pub(super) fn server_of(url: &str) -> SocketAddr {
    let (_, rest) = url.rsplit_once('@').expect("a URL with credentials");
    rest.split('/').next().expect("host:port").parse().expect("an IP address and port")
}

/// `url` with its server replaced by `address` (a proxy in front of it).
pub(super) fn through(url: &str, address: SocketAddr) -> String {
    url.replace(&server_of(url).to_string(), &address.to_string())
}

/// The 503 of a store call past the daemon's own deadline (`DATABASE_CALL_TIMEOUT_MS`).
const STORE_TIMED_OUT: &str = "The relayer's database did not answer in time; try again shortly (retrying the same signed request is safe: it is never relayed twice)";

/// Posts `body` to the daemon at `base` and checks, within `patience` (never a hang), the 503 of a
/// database that did not answer in time: `Retry-After: 1` and the fixed message.
async fn refused_as_busy(base: &str, body: &Value, patience: Duration) {
    refused_with(base, body, patience, STORE_UNAVAILABLE).await;
}

/// Posts `body` to the daemon at `base` and checks, within `patience` (never a hang), a 503 with
/// `Retry-After: 1` and `message`.
async fn refused_with(base: &str, body: &Value, patience: Duration, message: &str) {
    let sent = kya_tests::http_client().post(format!("{base}/relay")).json(body).send();
    let answer = tokio::time::timeout(patience, sent)
        .await
        .expect("answered within the timeouts, not never")
        .expect("the daemon answers");
    assert_eq!(answer.status().as_u16(), 503);
    assert_eq!(answer.headers().get("retry-after").and_then(|value| value.to_str().ok()), Some("1"));
    assert_eq!(
        answer.json::<Value>().await.unwrap(),
        json!({ "error": message, "code": "store_unavailable" })
    );
}

/// The real binary as a bare child (no log reader), so that the test can freeze it: the process
/// this test started, stopped and continued by its own id.
fn spawn_daemon(env: &[(String, String)]) -> Child {
    let port =
        |_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    Command::new(BINARY)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RELAYER_PORT", port(()))
        .env("METRICS_PORT", port(()))
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the relayer binary starts")
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap();
    assert!(status.success(), "kill -{name}");
}

/// Daemon A is frozen (SIGSTOP) while the budget row is held by a transaction that nobody ends (a
/// plain session standing in for A's own, so no timing game is needed to catch A inside one).
/// Daemon B answers a relay 503 with `Retry-After` after the lock timeout (1 s), not never;
/// its log names the lock timeout without the database password; its leases are renewed
/// meanwhile, and A's key is B's once A's lease runs out. Once the holder is gone, B relays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_daemon_holding_the_budget_costs_the_others_the_lock_timeout_not_a_hang() {
    let t = TestChain::start().await;
    let database = TestDatabase::create();
    let keys = two_keys(&t).await;
    let mut a = spawn_daemon(&daemon_env(&t, &database, &keys, "daemon-a"));
    let b = BinaryRelayer::start(BINARY, &daemon_env(&t, &database, &keys, "daemon-b"));
    holders_until(&b.client, Duration::from_secs(30), |seen| {
        count(seen, "daemon-a") == 1 && count(seen, "daemon-b") == 1
    })
    .await;

    signal(&a, "STOP");
    let holder = database.hold("BEGIN; SELECT id FROM budget WHERE id = 1 FOR UPDATE;");
    let asked_at = Instant::now();
    refused_as_busy(&b.client.base, &registration(&t, 910), Duration::from_secs(10)).await;
    let waited = asked_at.elapsed();
    // The lock timeout (1 s) and the rest of a relay's path, on however loaded a machine.
    assert!((Duration::from_millis(900)..Duration::from_secs(9)).contains(&waited), "{waited:?}");
    let reply = b.client.request("GET", "/status", &[]).await;
    assert_eq!(reply.status, 200, "reads that take no lock go on: {}", reply.text);

    // B's keeper takes A's key once A's lease (6 s) runs out, while the budget is still held.
    let (_, took) =
        holders_until(&b.client, Duration::from_secs(20), |seen| count(seen, "daemon-b") == 2).await;
    let log = b.output();
    assert!(log.contains("store unavailable: 55P03"), "{log}");
    assert!(!log.contains("keeping the key leases failed"), "{log}");
    assert!(!log.contains(database.password()), "the password never shows");

    // The holder gone (as the server ends a frozen session after the idle-in-transaction
    // timeout), B relays again.
    drop(holder);
    let (status, relayed) = b.client.relay(&registration(&t, 911)).await;
    assert_eq!(status, 200, "{relayed}");
    b.client.relay_until(relayed["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined").await;
    eprintln!(
        "database: a relay behind a frozen holder of the budget answered 503 after {waited:?} (lock timeout 1 s); \
         the other daemon's key taken {:?} later; {:?} in all",
        took,
        asked_at.elapsed()
    );
    signal(&a, "CONT");
    let _ = a.kill();
    let _ = a.wait();
    let (clean, _) = b.terminate();
    assert!(clean);
}

/// The statement timeout alone (`DATABASE_STATEMENT_TIMEOUT_MS`, 1 s here, under a lock timeout
/// of 30 s): another session holds the budget row (`SELECT … FOR UPDATE` in a transaction it
/// leaves open), so the daemon's reservation waits on it until the server cancels the statement.
/// The relay is answered 503 `busy or unreachable` with `Retry-After: 1` after about a second,
/// long before the lock timeout; the log names the SQLSTATE `57014` and the statement timeout,
/// not the lock timeout (`55P03`), and never the password; nothing was written. Once the session
/// ends, the same request is relayed and mined, and the books equal the fee to the wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_past_the_statement_timeout_answers_503_and_writes_nothing() {
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = cluster_keys(&t).await.into_iter().take(1).collect();
    let funded = vec![balance(&t, keys[0].address()).await];
    let db = TestStore::new(Engine::Postgres);
    let database = db.database().expect("on PostgreSQL");
    let mut env = cluster::daemon_env(&t, &db, &keys, "statement-a", 6);
    set(&mut env, "DATABASE_STATEMENT_TIMEOUT_MS", "1000".to_owned());
    set(&mut env, "DATABASE_LOCK_TIMEOUT_MS", "30000".to_owned());
    let daemon = BinaryRelayer::start(BINARY, &env);
    holders_until(&daemon.client, Duration::from_secs(10), |seen| count(seen, "statement-a") == 1).await;

    let holder = database.hold("BEGIN; SELECT id FROM budget WHERE id = 1 FOR UPDATE;");
    let asked_at = Instant::now();
    refused_as_busy(&daemon.client.base, &registration(&t, 940), Duration::from_secs(20)).await;
    let waited = asked_at.elapsed();
    // The statement timeout (1 s) and the rest of a relay's path: well under the 30-s lock timeout.
    assert!((Duration::from_millis(900)..Duration::from_secs(15)).contains(&waited), "{waited:?}");
    let written = tokio::task::block_in_place(|| database.value("SELECT count(*) FROM relays"));
    assert_eq!(written, "0", "the refused relay wrote nothing");
    let log = daemon.output();
    assert!(log.contains("store unavailable: 57014: canceling statement due to statement timeout"), "{log}");
    assert!(!log.contains("55P03"), "not the lock timeout: {log}");

    drop(holder);
    let (status, relayed) = daemon.client.relay(&registration(&t, 940)).await;
    assert_eq!(status, 200, "{relayed}");
    daemon.client.relay_until(relayed["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined").await;
    assert_books_exact(&t, &db, &daemon.client, &keys, &funded, &[agent_key(940).address()]).await;
    let (clean, log) = daemon.terminate();
    assert!(clean, "{log}");
    assert!(!log.contains(database.password()), "the password never shows");
    eprintln!(
        "database: a relay behind a held budget row answered 503 after {waited:?} (statement timeout 1 s)"
    );
}

/// The daemon's database taken down (a proxy in front of it cuts every connection and closes
/// new ones at once, as a server that went away) and brought back. Meanwhile a relay is answered
/// 503 "busy or unreachable" with `Retry-After: 1` (at once, or after the connect timeout, 2 s
/// here), never a hang and nothing written, and so is a read of the store (`GET /relay/:id`); a read of
/// the chain (`GET /nonce/:address`) still answers. Back up, the pool drops its cut connections
/// (each met by an operation that then fails, 503) and opens new ones, and the same request,
/// retried, is relayed and mined; the password never reaches the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_down_answers_503_not_a_hang_and_back_up_relays_again() {
    let t = TestChain::start().await;
    let database = TestDatabase::create();
    let keys: Vec<PrivateKeySigner> = two_keys(&t).await.into_iter().take(1).collect();
    let proxy = DelayProxy::start(server_of(database.url()), Duration::ZERO);
    let mut env = daemon_env(&t, &database, &keys, "down-a");
    let url = format!("{}?connect_timeout=2", through(database.url(), proxy.address()));
    set(&mut env, "DATABASE_URL", url);
    let daemon = BinaryRelayer::start(BINARY, &env);
    let (status, first) = daemon.client.relay(&registration(&t, 930)).await;
    assert_eq!(status, 200, "{first}");
    let id = first["relayId"].as_str().unwrap().to_owned();
    daemon.client.relay_until(&id, |relay| relay["status"] == "mined").await;

    proxy.set_down(true);
    let asked_at = Instant::now();
    refused_as_busy(&daemon.client.base, &registration(&t, 931), Duration::from_secs(30)).await;
    let waited = asked_at.elapsed();
    let (status, read) = daemon.client.get(&format!("/relay/{id}")).await;
    assert_eq!(
        (status, read),
        (503, json!({ "error": STORE_UNAVAILABLE, "code": "store_unavailable" })),
        "a read of the store"
    );
    let (status, nonce) = daemon.client.get(&format!("/nonce/{}", keys[0].address())).await;
    assert_eq!(status, 200, "a read of the chain still answers: {nonce}");

    // Back up: a client retrying after `Retry-After` is relayed once the pool has let go of its
    // cut connections (an operation that meets one fails, 503, and it leaves the pool).
    proxy.set_down(false);
    let mut refused = 0;
    let again = loop {
        let (status, again) = daemon.client.relay(&registration(&t, 931)).await;
        if status == 200 {
            break again;
        }
        assert_eq!(
            (status, &again),
            (503, &json!({ "error": STORE_UNAVAILABLE, "code": "store_unavailable" }))
        );
        refused += 1;
        assert!(refused <= 10, "still refused after {refused} tries");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    daemon.client.relay_until(again["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined").await;
    let (clean, log) = daemon.terminate();
    assert!(clean, "{log}");
    assert!(log.contains("store unavailable"), "{log}");
    assert!(!log.contains(database.password()), "the password never shows");
    eprintln!(
        "database: down, a relay was answered 503 after {waited:?} (connect timeout 2 s); back up, \
         relayed after {refused} more refusals"
    );
}

/// A CA named `name` (PEM), and a server certificate it issued for `localhost` and `127.0.0.1`
/// with its key (PEM).
fn certificates(name: &str) -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let certificate = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), certificate.pem(), key.serialize_pem())
}

/// `sslmode=verify-full` with `sslrootcert` the test CA: the daemon's connections (its store's
/// pool and its lease keeper's) are TLS, as `pg_stat_ssl` shows, and a relay is accepted, sent and
/// mined. With another CA's certificate as `sslrootcert`, the binary stops at start, saying that
/// the certificate was refused, without the database password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_verify_full_relays_and_a_wrong_ca_is_refused_at_start() {
    let (ca, certificate, key) = certificates("kya-tests PostgreSQL CA");
    let (other_ca, _, _) = certificates("kya-tests another CA");
    let database = TestDatabase::create_with_tls(&certificate, &key);
    let dir = tempfile::tempdir().unwrap();
    let (ca_file, other_ca_file) = (dir.path().join("ca.pem"), dir.path().join("other-ca.pem"));
    std::fs::write(&ca_file, ca).unwrap();
    std::fs::write(&other_ca_file, other_ca).unwrap();
    let t = TestChain::start().await;
    let env_with = |root: &std::path::Path| {
        let mut env = settings(&t, &TestStore::new(Engine::Sqlite));
        env.retain(|(name, _)| name != "RELAYER_DB");
        let url = format!("{}?sslmode=verify-full&sslrootcert={}", database.url(), root.display());
        set(&mut env, "DATABASE_URL", url);
        env
    };

    let wrong = env_with(&other_ca_file);
    let refused = tokio::task::spawn_blocking(move || {
        Command::new(BINARY)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RELAYER_PORT", "0")
            .env("METRICS_PORT", "0")
            .env("NO_COLOR", "1")
            .envs(wrong.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .output()
            .expect("the relayer binary runs")
    });
    let refused =
        tokio::time::timeout(Duration::from_secs(60), refused).await.expect("it stops at once").unwrap();
    let log =
        format!("{}{}", String::from_utf8_lossy(&refused.stdout), String::from_utf8_lossy(&refused.stderr));
    assert!(!refused.status.success(), "{log}");
    assert!(log.contains("UnknownIssuer"), "{log}");
    assert!(log.contains("must chain to sslrootcert's CA"), "{log}");
    assert!(log.contains("connecting to postgres://127.0.0.1:"), "{log}");
    assert!(!log.contains(database.password()), "the password never shows: {log}");

    let relayer = kya_tests::relayer_fixture::InProcessRelayer::start(&env_with(&ca_file)).await;
    // Counted once the hand-off listener listens: between its connection and its `LISTEN` the
    // listener's backend would read as one of the store's.
    until_the_handoff_listener_listens(&database).await;
    let over_tls = database.value(
        "SELECT count(*) FILTER (WHERE s.ssl) || '/' || count(*) \
         || '/' || count(*) FILTER (WHERE a.query NOT LIKE 'LISTEN%') FROM pg_stat_ssl s \
         JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'kya-relayer'",
    );
    // Every one TLS: the store's pool (DATABASE_POOL_SIZE, 8, each opened at start-up), the lease
    // keeper's connection, and the hand-off listener's once it listens.
    let [tls, all, store]: [&str; 3] = over_tls.split('/').collect::<Vec<_>>().try_into().unwrap();
    assert_eq!(tls, all, "every connection TLS: {over_tls}");
    assert_eq!(store, "9", "the pool's eight and the keeper's: {over_tls}");
    let (status, answer) = relayer.client.relay(&registration(&t, 920)).await;
    assert_eq!(status, 200, "{answer}");
    relayer.client.relay_until(answer["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined").await;
    relayer.stop().await;
}

/// The processes behind the daemon's connections, stopped (SIGSTOP) by their ids as PostgreSQL
/// names them, and continued (SIGCONT) when this drops, so a failing test leaves nothing stopped.
struct Stopped(Vec<String>);

impl Stopped {
    /// Stops every backend of the daemon's connections (`application_name` kya-relayer) on
    /// `database`: a server whose processes hang with their connections open, which the kernel
    /// still acknowledges (so no keepalive fails) and whose own timeouts no longer run.
    fn the_daemons_backends(database: &TestDatabase) -> Self {
        let pids = database.value(
            "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'kya-relayer'",
        );
        let pids: Vec<String> = pids.split_whitespace().map(str::to_owned).collect();
        assert!(!pids.is_empty(), "the daemon has connections");
        let stopped = Self(pids);
        stopped.send("STOP");
        stopped
    }

    fn send(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).args(&self.0).status().unwrap();
        assert!(status.success(), "kill -{signal} {:?}", self.0);
    }

    /// Continues them now.
    fn resume(mut self) {
        self.send("CONT");
        self.0.clear();
    }
}

/// Waits (up to 30 s) until the daemon's hand-off listener, on a connection of its own that
/// its thread opens after start-up, has sent its `LISTEN` on `database`.
async fn until_the_handoff_listener_listens(database: &TestDatabase) {
    let listening = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
         AND application_name = 'kya-relayer' AND query LIKE 'LISTEN%'";
    let started = Instant::now();
    while tokio::task::block_in_place(|| database.value(listening)) != "1" {
        assert!(started.elapsed() < Duration::from_secs(30), "the hand-off listener never listened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many of the backends `pids` are still connected to `database`.
fn still_connected(database: &TestDatabase, pids: &[String]) -> String {
    database.value(&format!("SELECT count(*) FROM pg_stat_activity WHERE pid IN ({})", pids.join(",")))
}

/// Waits (up to `patience`) until the daemon's log holds `line`; the log.
async fn log_until(daemon: &BinaryRelayer, line: &str, patience: Duration) -> String {
    let started = Instant::now();
    loop {
        let log = daemon.output();
        if log.contains(line) {
            return log;
        }
        assert!(started.elapsed() < patience, "never logged {line:?}: {log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let _ = Command::new("kill").arg("-CONT").args(&self.0).status();
        }
    }
}

/// Backends that hang for good with their connections open: every backend of the daemon's
/// connections SIGSTOPped (the kernel still acknowledges, so no keepalive fails, and the
/// statement timeout is kept by the stopped backend itself), while the server accepts new ones.
/// Before the deadline on store calls, `POST /relay` had no answer in 40 s; before slots, every
/// call answered 503 until the backends continued. Now, with `DATABASE_CALL_TIMEOUT_MS` 2 s and
/// a pool of one: the relay is answered 503 with the deadline's message and `Retry-After: 1`;
/// the lease keeper's renewal passes its deadline too, and the daemon lets go of its key (the
/// log says so). Each hung call cost its slot one deadline: with the backends still stopped,
/// `/status` answers on a new connection, the keeper takes the key back under a new fence, and
/// the same signed request is relayed and mined once. The backends continued, the connections
/// that hung send nothing more and are dropped, never handed out again; the key's nonces
/// contiguous and the books exact; the password is never logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_hung_for_good_cost_their_slots_one_deadline_and_the_daemon_relays_on_new_connections() {
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = cluster_keys(&t).await.into_iter().take(1).collect();
    let funded = vec![balance(&t, keys[0].address()).await];
    let db = TestStore::new(Engine::Postgres);
    let database = db.database().expect("on PostgreSQL");
    let mut env = cluster::daemon_env(&t, &db, &keys, "hung-a", 6);
    let deadline = Duration::from_secs(2);
    set(&mut env, "DATABASE_CALL_TIMEOUT_MS", deadline.as_millis().to_string());
    set(&mut env, "DATABASE_POOL_SIZE", "1".to_owned());
    let daemon = BinaryRelayer::start(BINARY, &env);
    holders_until(&daemon.client, Duration::from_secs(10), |seen| count(seen, "hung-a") == 1).await;

    // Its store's connections (the pool's one and the lease keeper's); the hand-off listener's
    // (its own thread connects after start), stopped too, is no store call's and stays.
    until_the_handoff_listener_listens(database).await;
    // Two: the pool's one and the lease keeper's. (Three were seen once under load: the pool
    // freed a call's slot before its connection was back, and the next call opened a second
    // one, kept for good; `store::pool::Checkout` now gives the connection back first.) Waited
    // for, not read once: a start-up call past its deadline on a loaded machine holds its old
    // connection beside its slot's new one until it ends. A connection kept for good still
    // fails here, naming every connection.
    let started = Instant::now();
    let store_connections = loop {
        let pids = tokio::task::block_in_place(|| {
            database.value(
                "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE datname = current_database()
                 AND application_name = 'kya-relayer' AND query NOT LIKE 'LISTEN%'",
            )
        });
        let pids: Vec<String> = pids.split_whitespace().map(str::to_owned).collect();
        if pids.len() == 2 {
            break pids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the store's connections are not the pool's one and the lease keeper's: {pids:?}\n{}\n{}",
            tokio::task::block_in_place(|| {
                database.value(
                "SELECT string_agg(concat_ws(' | ', pid, state, backend_start, query), E'\\n')
                 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'kya-relayer'"
            )
            }),
            daemon.output()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let fence = tokio::task::block_in_place(|| database.value("SELECT fence FROM lanes"));
    let stopped = tokio::task::block_in_place(|| Stopped::the_daemons_backends(database));
    let body = registration(&t, 950);
    refused_with(&daemon.client.base, &body, Duration::from_secs(30), STORE_TIMED_OUT).await;
    let log =
        log_until(&daemon, "keeping the key leases passed the store's deadline", Duration::from_secs(30))
            .await;
    assert!(log.contains("a store call passed its deadline"), "{log}");
    assert!(!log.contains(database.password()), "the password never shows");

    // The backends still stopped: the hung calls gave their slots back at their deadline, and
    // new connections serve. The status answers within two deadlines: the background calls
    // that waited for the one slot while it hung (the hand-off sender's, the reconciler's)
    // passed theirs too, and one of them still waiting for a new connection under load may
    // hold it for one more.
    let within = Instant::now() + 2 * deadline;
    let reply = loop {
        let reply = daemon.client.request("GET", "/status", &[]).await;
        if reply.status == 200 || Instant::now() >= within {
            break reply;
        }
    };
    assert_eq!(reply.status, 200, "a new connection in the hung call's slot: {}", reply.text);
    // The key taken back under a new fence (the daemon had let go of it: it could not tell
    // whether its renewal landed). The daemon logs a take once it sends under it (its first at
    // start).
    let started = Instant::now();
    while daemon.output().matches("took the lease on a key").count() < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "the key was never taken back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let taken_again = tokio::task::block_in_place(|| database.value("SELECT fence FROM lanes"));
    assert_eq!(taken_again.parse::<i64>().unwrap(), fence.parse::<i64>().unwrap() + 1, "a new fence");
    let (status, relayed) = daemon.client.relay(&body).await;
    assert_eq!(status, 200, "{relayed}");
    daemon.client.relay_until(relayed["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined").await;

    // Resumed: the calls that hung finish and send nothing more, their connections leave the
    // pool (those backends end).
    stopped.resume();
    let started = Instant::now();
    while tokio::task::block_in_place(|| still_connected(database, &store_connections)) != "0" {
        assert!(started.elapsed() < Duration::from_secs(30), "a connection that hung was kept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_books_exact(&t, &db, &daemon.client, &keys, &funded, &[agent_key(950).address()]).await;
    let (clean, log) = daemon.terminate();
    assert!(clean, "{log}");
    assert!(!log.contains(database.password()), "the password never shows");
}

/// SQL making the `COMMIT` of the next transaction that fires `event` (a trigger's event, as
/// `AFTER INSERT ON relays`, on a row that meets `when`: a `WHEN (…)` clause, or none) wait, once, on the advisory lock `lock`, which a session
/// of the test holds: a commit sent to a server that hung before answering it (a deferred
/// trigger). `name` tells its table, function and trigger apart; `name`'s `done` says whether the
/// stalled commit landed.
fn stall_the_next_commit(name: &str, event: &str, when: &str, lock: i64) -> String {
    format!(
        r"
CREATE TABLE {name} (done boolean NOT NULL);
INSERT INTO {name} VALUES (false);
CREATE FUNCTION {name}_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE {name} SET done = true WHERE NOT done;
  IF FOUND THEN PERFORM pg_advisory_xact_lock({lock}); END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER {name}_at_commit {event}
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW {when} EXECUTE FUNCTION {name}_once();
"
    )
}

/// A late commit: the reservation's `COMMIT` is on its way when the server stops answering (here
/// it waits on a lock the test holds, under statement and lock timeouts of 30 s), so the call
/// passes its deadline (2 s) and the client is answered 503 with the deadline's message, telling
/// it a retry is safe. The server resumes (the lock let go) and the reservation commits after its
/// client was answered: the daemon hands it to its key's holder (itself), which sends it, so it
/// is neither lost nor left waiting for the reconciler. The client's retry of the same signed
/// request is answered with that very relay (its id), which is mined once; one record, the
/// key's nonces contiguous, the books exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_committed_after_its_503_is_sent_once_and_its_retry_finds_it() {
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = cluster_keys(&t).await.into_iter().take(1).collect();
    let funded = vec![balance(&t, keys[0].address()).await];
    let db = TestStore::new(Engine::Postgres);
    let database = db.database().expect("on PostgreSQL");
    let mut env = cluster::daemon_env(&t, &db, &keys, "late-a", 6);
    set(&mut env, "DATABASE_CALL_TIMEOUT_MS", "2000".to_owned());
    set(&mut env, "DATABASE_STATEMENT_TIMEOUT_MS", "30000".to_owned());
    set(&mut env, "DATABASE_LOCK_TIMEOUT_MS", "30000".to_owned());
    // The reconciler would drop a relay left accepted this long: not before the hand-off sends it.
    set(&mut env, "RECONCILE_GRACE_SECS", "120".to_owned());
    let daemon = BinaryRelayer::start(BINARY, &env);
    holders_until(&daemon.client, Duration::from_secs(10), |seen| count(seen, "late-a") == 1).await;

    tokio::task::block_in_place(|| {
        database.value(&stall_the_next_commit(
            "kya_test_stall_reservation",
            "AFTER INSERT ON relays",
            "",
            2828,
        ))
    });
    let lock = database.hold("SELECT pg_advisory_lock(2828);");
    let body = registration(&t, 960);
    refused_with(&daemon.client.base, &body, Duration::from_secs(30), STORE_TIMED_OUT).await;
    let uncommitted = tokio::task::block_in_place(|| database.value("SELECT count(*) FROM relays"));
    assert_eq!(uncommitted, "0", "the reservation waits in its commit");

    drop(lock);
    let log =
        log_until(&daemon, "a reservation committed after its call's deadline", Duration::from_secs(30))
            .await;
    assert!(log.contains("handed to its key's holder"), "{log}");
    let (status, retried) = daemon.client.relay(&body).await;
    assert!(status == 200 || (status == 202 && retried["status"] == "accepted"), "{status} {retried}");
    let id = retried["relayId"].as_str().unwrap().to_owned();
    let stored =
        tokio::task::block_in_place(|| database.value("SELECT string_agg(relay_id, ',') FROM relays"));
    assert_eq!(stored, id, "the retry is answered with the relay that committed late");
    daemon.client.relay_until(&id, |relay| relay["status"] == "mined").await;
    assert_books_exact(&t, &db, &daemon.client, &keys, &funded, &[agent_key(960).address()]).await;
    let (clean, log) = daemon.terminate();
    assert!(clean, "{log}");
    assert!(!log.contains(database.password()), "the password never shows");
}

/// A lease renewal that lands late: its `COMMIT` waits past the deadline (2 s; statement and lock
/// timeouts of 30 s), so the keeper cannot tell whether it still holds its key and lets go of it
/// at once: a relay sent meanwhile is answered 503 `No relayer key is free …` (the key is still
/// leased to this daemon in the table, so nobody else sends on it either), never sent on a lease
/// the daemon is unsure of. The renewal then lands (the lock let go), and the daemon takes its
/// key back under the next fence, not under the renewed one; the same request is mined once,
/// books exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_past_its_deadline_lets_go_of_the_key_until_it_is_taken_again_under_a_new_fence() {
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = cluster_keys(&t).await.into_iter().take(1).collect();
    let funded = vec![balance(&t, keys[0].address()).await];
    let db = TestStore::new(Engine::Postgres);
    let database = db.database().expect("on PostgreSQL");
    let mut env = cluster::daemon_env(&t, &db, &keys, "renew-a", 6);
    set(&mut env, "DATABASE_CALL_TIMEOUT_MS", "2000".to_owned());
    set(&mut env, "DATABASE_STATEMENT_TIMEOUT_MS", "30000".to_owned());
    set(&mut env, "DATABASE_LOCK_TIMEOUT_MS", "30000".to_owned());
    let daemon = BinaryRelayer::start(BINARY, &env);
    holders_until(&daemon.client, Duration::from_secs(10), |seen| count(seen, "renew-a") == 1).await;
    let fence: i64 =
        tokio::task::block_in_place(|| database.value("SELECT fence FROM lanes")).parse().unwrap();

    let lock = database.hold("SELECT pg_advisory_lock(2929);");
    tokio::task::block_in_place(|| {
        database.value(&stall_the_next_commit(
            "kya_test_stall_renewal",
            "AFTER UPDATE OF lease_until ON lanes",
            // A renewal: the lease's time moves, its fence does not (a take raises it).
            "WHEN (NEW.fence = OLD.fence)",
            2929,
        ))
    });
    log_until(&daemon, "keeping the key leases passed the store's deadline", Duration::from_secs(30)).await;
    let body = registration(&t, 970);
    let (status, refused) = daemon.client.relay(&body).await;
    assert_eq!((status, refused), (503, json!({ "error": cluster::NO_FREE_KEY, "code": "no_free_key" })));
    let (holder, lease_fence) = tokio::task::block_in_place(|| {
        (database.value("SELECT holder FROM lanes"), database.value("SELECT fence FROM lanes"))
    });
    assert_eq!((holder.as_str(), lease_fence.parse::<i64>().unwrap()), ("renew-a", fence), "nobody took it");

    drop(lock);
    let started = Instant::now();
    while daemon.output().matches("took the lease on a key").count() < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "the key was never taken back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = tokio::task::block_in_place(|| database.value("SELECT done FROM kya_test_stall_renewal"));
    assert_eq!(done, "t", "the stalled renewal landed");
    let taken_again: i64 =
        tokio::task::block_in_place(|| database.value("SELECT fence FROM lanes")).parse().unwrap();
    assert_eq!(taken_again, fence + 1, "taken again under the next fence");
    let (status, relayed) = daemon.client.relay(&body).await;
    assert_eq!(status, 200, "{relayed}");
    daemon.client.relay_until(relayed["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined").await;
    assert_books_exact(&t, &db, &daemon.client, &keys, &funded, &[agent_key(970).address()]).await;
    let (clean, log) = daemon.terminate();
    assert!(clean, "{log}");
    assert!(!log.contains(database.password()), "the password never shows");
}
