//! The store's tests, each run on both engines (SQLite in a temporary folder, and a database of
//! its own on the PostgreSQL test server) except where one engine's own behaviour is tested.
//! The shared fixtures and `on_both_engines!` are here; the tests are in a file per table or job,
//! each run on both engines through its own `on_both_engines!` list.

use alloy::primitives::{B256, Bytes, keccak256};
use kya_test_postgres::TestDatabase;

use super::*;

/// The address standing for a signer named `name`.
fn who(name: &str) -> Address {
    Address::from_word(keccak256(name))
}

/// A transaction hash, told apart by `n`.
fn h(n: u16) -> B256 {
    B256::left_padding_from(&n.to_be_bytes())
}

#[derive(Debug, Clone, Copy)]
enum Engine {
    Sqlite,
    Postgres,
}

/// A place for a store, gone when this drops: an SQLite file in a folder of its own, or a
/// PostgreSQL database of its own.
struct Place {
    location: Location,
    _dir: Option<tempfile::TempDir>,
    _database: Option<TestDatabase>,
}

impl Place {
    fn new(engine: Engine) -> Self {
        match engine {
            Engine::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("nested/relayer.db");
                Self { location: Location::Sqlite(path), _dir: Some(dir), _database: None }
            }
            Engine::Postgres => {
                let database = TestDatabase::create();
                let url = DatabaseUrl::parse(database.url()).unwrap();
                Self { location: Location::Postgres(url), _dir: None, _database: Some(database) }
            }
        }
    }

    /// A store on it (another, for each call: as another daemon, or the same one restarted).
    fn open(&self) -> Store {
        Store::open_at(&self.location).unwrap()
    }
}

fn store(engine: Engine) -> (Place, Store) {
    let place = Place::new(engine);
    let store = place.open();
    (place, store)
}

/// The one lane of most tests: a relayer with one key.
const LANE: Address = Address::repeat_byte(0x1a);

/// A lease on [`LANE`] that lasts for every time the tests use: the one daemon of most tests.
fn leased(store: &Store) -> Lease {
    let taken = store.take_lanes("daemon", &[LANE], 1, Taking::AtStart, 0, 1 << 40).unwrap();
    assert_eq!(taken.len(), 1, "the lane is free or this daemon's");
    taken[0]
}

/// The record of relay `id`'s transaction at `relayer_nonce`, sent by this daemon's own handler.
fn sending(id: i64, relayer_nonce: u64, tx_hash: B256, block: u64, now: u64) -> Sending {
    Sending { id, relayer_nonce, tx_hash, block, now, handed_off_first: false }
}

fn relay(signer: &str, nonce: u64, gas_limit: u64) -> NewRelay {
    NewRelay {
        signer: who(signer),
        forwarder_nonce: U256::from(nonce),
        digest: keccak256(format!("digest-{signer}-{nonce}")),
        signature: Bytes::from(vec![1]),
        deadline: 0,
        input: Bytes::new(),
        client_ip: "127.0.0.1".into(),
        gas_limit,
        max_fee_wei: 10,
        priority_fee_wei: 1,
        l1_fee_wei: 0,
        lanes: vec![LANE],
    }
}

/// The relay's transaction sent again as `tx_hash` at `sent_block`, paying 12 wei a gas (2 of
/// them to the block's producer).
fn fee_bump(tx_hash: B256, sent_block: u64) -> Replacement {
    Replacement { tx_hash, kind: TxKind::Relay, max_fee_wei: 12, priority_fee_wei: 2, sent_block }
}

fn from(signer: &str, client: &str, nonce: u64, gas_limit: u64) -> NewRelay {
    NewRelay { client_ip: client.into(), ..relay(signer, nonce, gas_limit) }
}

/// Polls `sql` on `database` (a psql session of its own) until it returns `want`: the event the
/// test waits for (say, a backend waiting on a lock), within 20 s.
fn until_value(database: &TestDatabase, sql: &str, want: &str) {
    let patience = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while database.value(sql) != want {
        assert!(std::time::Instant::now() < patience, "{sql} never returned {want}");
        std::thread::yield_now();
    }
}

/// Each test above as `sqlite::<name>` and `postgres::<name>`.
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(super::Engine::Sqlite);
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                super::$name(super::Engine::Postgres);
            })*
        }
    };
}

mod admission;
mod leases;
mod limits;
mod outbox;
mod postgres;
mod relays;
mod retention;
mod schema;
