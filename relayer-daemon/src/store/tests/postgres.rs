//! PostgreSQL's own behaviour: a frozen holder, an abandoned call, a late commit, a lost
//! prepared statement and `sslmode`.

use super::*;

/// A daemon frozen inside a transaction that holds the budget row (here: a connection opened as
/// the daemon opens them, `BEGIN` and the row locked, then left alone) keeps the others waiting
/// the lock timeout, not forever: their reservation fails as [`Error::StoreUnavailable`] (503,
/// the SQLSTATE only in the log), the lease keeper's own connection goes on meanwhile, and once
/// the idle-in-transaction timeout ends the frozen session, reservations pass again.
#[test]
fn postgres_a_frozen_holder_of_the_budget_costs_the_lock_timeout_not_a_hang() {
    use std::time::{Duration, Instant};
    let database = TestDatabase::create();
    let timeouts = DatabaseTimeouts {
        statement: Duration::from_secs(5),
        lock: Duration::from_millis(1_500),
        idle_in_transaction: Duration::from_secs(3),
        keepalive: Duration::from_secs(15),
        call: Duration::from_secs(15),
    };
    let url = DatabaseUrl::parse(database.url()).unwrap().with_timeouts(timeouts);
    let store = Store::connect(&url).unwrap();
    let keeper = store.second_connection().unwrap().expect("a connection of its own on PostgreSQL");
    let mut frozen = url.connect().unwrap();
    let frozen_at = Instant::now();
    frozen.client().batch_execute("BEGIN; SELECT id FROM budget WHERE id = 1 FOR UPDATE").unwrap();

    let started = Instant::now();
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| store.reserve(&relay("s1", 0, 50), &BudgetLimits::total(1_000), 100));
        std::thread::sleep(Duration::from_millis(300));
        let beat = Instant::now();
        keeper.heartbeat("daemon-a", 100, 0).unwrap();
        assert!(beat.elapsed() < Duration::from_millis(500), "the keeper waited: {:?}", beat.elapsed());
        let error = waiting.join().unwrap().unwrap_err();
        assert!(matches!(error, Error::StoreUnavailable(_)), "{error:?}");
        assert_eq!(crate::http::status::status_of(&error), warp::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(error.detail().contains("55P03"), "{}", error.detail());
        assert!(!error.to_string().contains("55P03"), "the client's words are fixed: {error}");
    });
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(1_400)..Duration::from_secs(4)).contains(&waited),
        "waited {waited:?}, not the lock timeout"
    );

    // The server ends the frozen session: its lock is gone without it ever waking.
    std::thread::sleep(
        (timeouts.idle_in_transaction + Duration::from_millis(700)).saturating_sub(frozen_at.elapsed()),
    );
    store.reserve(&relay("s1", 0, 50), &BudgetLimits::total(1_000), 100).unwrap().unwrap();
    let after = frozen.client().batch_execute("SELECT 1").unwrap_err();
    assert!(super::engine_errors::is_unavailable(&after), "{after}");
}

/// A reservation waiting on the budget row (a session holds it) is abandoned, as the daemon
/// abandons a call past `DATABASE_CALL_TIMEOUT_MS`. When the row is free again the thread carries
/// on, but sends nothing more: its batch with the `COMMIT` is refused, so nothing is written, and
/// its connection (that backend) leaves the pool instead of serving the next call, which a new
/// connection serves.
#[test]
fn postgres_a_call_abandoned_past_its_deadline_commits_nothing_and_its_connection_leaves_the_pool() {
    let database = TestDatabase::create();
    let store = Store::connect(&DatabaseUrl::parse(database.url()).unwrap()).unwrap();
    let holder = database.hold("BEGIN; SELECT id FROM budget WHERE id = 1 FOR UPDATE;");
    let call = Call::default();
    let waiting_backend = "SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'kya-relayer' AND wait_event_type = 'Lock'";
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            deadline::serving(Some(call.clone()), || {
                store.reserve(&relay("s1", 0, 50), &BudgetLimits::total(1_000), 100)
            })
        });
        let patience = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let pid = loop {
            let pid = database.value(waiting_backend);
            if !pid.is_empty() {
                break pid;
            }
            assert!(std::time::Instant::now() < patience, "the reservation never waited on the row");
        };
        call.abandon();
        drop(holder);
        let error = waiting.join().unwrap().unwrap_err();
        assert!(matches!(error, Error::StoreTimedOut(_)), "{error:?}");
        assert_eq!(database.value("SELECT count(*) FROM relays"), "0", "nothing committed");
        until_value(&database, &format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}"), "0");
        let next = store.reserve(&relay("s1", 0, 50), &BudgetLimits::total(1_000), 100).unwrap().unwrap();
        assert_eq!(database.value("SELECT count(*) FROM relays"), "1");
        assert_eq!(database.value("SELECT used_wei FROM budget"), next.reserved_wei.to_string());
    });
}

/// A reservation that committed after its call was abandoned (its client answered 503: the
/// `COMMIT` was on its way when the server hung) is handed to its key's holder, even though the
/// call is abandoned; one that committed in time is not.
#[test]
fn postgres_a_reservation_committed_after_its_deadline_is_handed_to_its_keys_holder() {
    let database = TestDatabase::create();
    let store = Store::connect(&DatabaseUrl::parse(database.url()).unwrap()).unwrap();
    let call = Call::default();
    let (in_time, late) = deadline::serving(Some(call.clone()), || {
        let limits = BudgetLimits::total(1_000);
        let in_time = store.reserve(&relay("s1", 0, 50), &limits, 100).unwrap().unwrap();
        assert!(!store.hand_off_late_reservation(in_time.id, in_time.lane, 100).unwrap());
        let late = store.reserve(&relay("s2", 0, 50), &limits, 100).unwrap().unwrap();
        call.abandon();
        assert!(store.hand_off_late_reservation(late.id, late.lane, 100).unwrap());
        (in_time, late)
    });
    let handed: Vec<i64> = store.handed_off(&[LANE]).unwrap().iter().map(|record| record.id).collect();
    assert_eq!(handed, [late.id]);
    assert_ne!(in_time.id, late.id);
}

/// A batch's statements are prepared once per connection (`store/prepared.rs`): a session whose
/// prepared statements went behind the daemon's back (here `DEALLOCATE ALL` on the store's one
/// connection, as a `DISCARD ALL` or a pooler in transaction mode would, the driver's own
/// prepared statements with them) costs one refused call, a 503 with nothing written, and the
/// connection prepares every statement again: the next calls count.
#[test]
fn postgres_a_batch_statement_gone_from_the_session_is_prepared_again() {
    let database = TestDatabase::create();
    let url = DatabaseUrl::parse(database.url()).unwrap().with_pool_size(1);
    let store = Store::open_at(&Location::Postgres(url)).unwrap();
    assert!(store.hit(RateKind::Ip, "a", 3, 1_000).unwrap());
    assert_eq!(store.hits(RateKind::Ip, "a", 1_000).unwrap(), 1, "the driver's statement prepared too");
    store
        .with(|connection| match connection {
            Connection::Postgres(connection) => Ok(connection.client().batch_execute("DEALLOCATE ALL")?),
            Connection::Sqlite(_) => unreachable!("a PostgreSQL store"),
        })
        .unwrap();
    let refused = store.hit(RateKind::Ip, "a", 3, 1_001);
    assert!(matches!(refused, Err(Error::StoreUnavailable(_))), "{refused:?}");
    // The driver's own statement, deallocated too, is prepared again as well.
    assert_eq!(store.hits(RateKind::Ip, "a", 1_002).unwrap(), 1, "the refused call wrote nothing");
    assert!(store.hit(RateKind::Ip, "a", 3, 1_002).unwrap());
    assert_eq!(store.hits(RateKind::Ip, "a", 1_003).unwrap(), 2);
}

/// No `sslmode`: a server that is not on loopback must take TLS, loopback being read from the
/// address the connection goes to: its `hostaddr` when given, whatever the host's name says. The
/// shared test server speaks none and listens on 127.0.0.1; reached at `::ffff:127.0.0.1` (an
/// IPv4-mapped address, which the standard library, and so the daemon, does not count as
/// loopback: the stand-in for a server elsewhere), it is refused at connection with how to allow
/// plain text, and without the password, whether named `db.internal` or `localhost` (a
/// `localhost` with a remote `hostaddr` was read as loopback, and spoke plain text to it).
/// `sslmode=disable` written out connects; so does the server reached at `hostaddr=127.0.0.1`
/// under another name, and by its loopback address (`prefer`: TLS tried first, refused by the
/// server, then plain text).
#[test]
fn without_sslmode_a_server_off_loopback_in_plain_text_is_refused() {
    let database = TestDatabase::create();
    assert!(database.url().contains("@127.0.0.1:"), "{}", database.url());
    let named = |host: &str, hostaddr: &str| {
        format!("{}?hostaddr={hostaddr}", database.url().replacen("@127.0.0.1:", &format!("@{host}:"), 1))
    };
    for host in ["db.internal", "localhost"] {
        let off_loopback = named(host, "::ffff:127.0.0.1");
        let Err(error) = Store::connect(&DatabaseUrl::parse(&off_loopback).unwrap()) else {
            panic!("{host}: a server off loopback without TLS was taken in plain text");
        };
        let error = error.detail();
        assert!(error.contains("write sslmode=disable to connect in plain text"), "{error}");
        assert!(error.contains(&format!("connecting to postgres://{host}:")), "{error}");
        assert!(!error.contains(database.password()), "{error}");
        let plain = DatabaseUrl::parse(&format!("{off_loopback}&sslmode=disable")).unwrap();
        Store::connect(&plain).expect("sslmode=disable written out: plain text");
    }
    let at_loopback = DatabaseUrl::parse(&named("db.internal", "127.0.0.1")).unwrap();
    Store::connect(&at_loopback).expect("a loopback hostaddr: prefer, whatever the name");
    Store::connect(&DatabaseUrl::parse(database.url()).unwrap()).expect("loopback: prefer");
}

/// A pool of one slot keeps one connection however many calls queue for it: a call's
/// connection is back in the pool before its slot is free, so the next call in the slot finds
/// it. (Freed the other way round, the next call could find the slot free and the connection
/// still out, and open a second one beside it, kept for good: seen under load in the relayer's
/// hung-backends test, three connections where the pool and the lease keeper hold two.)
#[test]
fn postgres_a_pool_of_one_slot_keeps_one_connection_under_contention() {
    let database = TestDatabase::create();
    let url = DatabaseUrl::parse(database.url()).unwrap().with_pool_size(1);
    let store = Store::open_at(&Location::Postgres(url)).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let store = &store;
            scope.spawn(move || {
                for call in 0..200 {
                    store.hits(RateKind::Ip, &format!("{thread}-{call}"), 1_000).unwrap();
                }
            });
        }
    });
    let connections = "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'kya-relayer'";
    assert_eq!(database.value(connections), "1", "the pool opened connections beside its one");
}

/// A pool of eight slots under 32 threads: opened as the calls needed them, its connections
/// were 16 (r2d2 opened one for every call that found none idle, and kept those that arrived
/// late); with every slot's connection opened first (`Store::open_connections`, the daemon's
/// start-up), eight, and the calls open none beside them.
#[test]
fn postgres_a_pool_opened_at_once_keeps_its_size_under_a_burst() {
    let database = TestDatabase::create();
    let url = DatabaseUrl::parse(database.url()).unwrap().with_pool_size(8);
    let store = Store::open_at(&Location::Postgres(url)).unwrap();
    let connections = "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'kya-relayer'";
    assert_eq!(database.value(connections), "1", "before: the migrations' connection alone");
    store.open_connections();
    assert_eq!(database.value(connections), "8", "every slot's connection open");
    std::thread::scope(|scope| {
        for thread in 0..32 {
            let store = &store;
            scope.spawn(move || {
                for call in 0..100 {
                    store.hit(RateKind::Ip, &format!("{thread}-{call}"), 1_000, 10).unwrap();
                }
            });
        }
    });
    assert_eq!(database.value(connections), "8", "the calls opened none beside them");
}
