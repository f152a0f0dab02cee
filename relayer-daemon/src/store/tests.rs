//! The store's tests, each run on both engines (SQLite in a temporary folder, and a database of
//! its own on the PostgreSQL test server) except where one engine's own behaviour is tested.

use alloy::primitives::{B256, Bytes, keccak256};
use kya_test_postgres::TestDatabase;
use rusqlite::Connection as SqliteConnection;

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

fn rate_windows_slide_and_refusals_do_not_count(engine: Engine) {
    let (_place, store) = store(engine);
    for second in 0..3 {
        assert!(store.hit(RateKind::Ip, "a", 3, 1_000 + second).unwrap());
    }
    assert!(!store.hit(RateKind::Ip, "a", 3, 1_100).unwrap());
    assert!(store.hit(RateKind::Ip, "b", 3, 1_100).unwrap(), "keys are separate");
    assert!(store.hit(RateKind::Signer, "a", 3, 1_100).unwrap(), "kinds are separate");
    assert_eq!(store.hits(RateKind::Ip, "a", 1_100).unwrap(), 3);
    // The first event leaves the window exactly one hour later.
    assert!(!store.hit(RateKind::Ip, "a", 3, 1_000 + RATE_WINDOW_SECS - 1).unwrap());
    assert!(store.hit(RateKind::Ip, "a", 3, 1_000 + RATE_WINDOW_SECS).unwrap());
    assert!(!store.hit(RateKind::Ip, "a", 3, 1_000 + RATE_WINDOW_SECS).unwrap());
}

fn reservations_cannot_overdraw_and_settle_to_the_real_cost(engine: Engine) {
    let (_place, store) = store(engine);
    let first = store.reserve(&relay("s1", 0, 50), &BudgetLimits::total(1_000), 100).unwrap().unwrap();
    assert_eq!(first.reserved_wei, 500);
    assert_eq!(
        store.reserve(&relay("s2", 0, 51), &BudgetLimits::total(1_000), 101).unwrap(),
        Err(Refusal::Budget),
        "500 + 510 > 1000"
    );
    let second = store.reserve(&relay("s2", 0, 50), &BudgetLimits::total(1_000), 101).unwrap().unwrap();
    let state = store.budget(102).unwrap();
    assert_eq!((state.used_wei, state.pending_wei), (1_000, 1_000));
    assert_eq!(state.resets_at(BUDGET_WINDOW_SECS), Some(100 + BUDGET_WINDOW_SECS));

    store.mark_sent(&sending(first.id, 7, h(0xabc), 1, 102), &leased(&store)).unwrap();
    store.settle(first.id, &Settlement::of(h(0xabc), 123, Outcome::Mined), 103).unwrap();
    store.settle(first.id, &Settlement::of(h(0xabc), 999, Outcome::Mined), 104).unwrap();
    store.release(second.id, "node refused", 104).unwrap();
    let state = store.budget(105).unwrap();
    assert_eq!((state.used_wei, state.pending_wei), (123, 0));

    let records = store.records().unwrap();
    assert_eq!(records[0].status, RelayStatus::Mined);
    assert_eq!(records[0].cost_wei, Some(123));
    assert_eq!(records[0].tx_hash, Some(h(0xabc)));
    assert_eq!(records[1].status, RelayStatus::Failed);
}

fn the_same_request_is_reserved_once_unless_it_failed(engine: Engine) {
    let (_place, store) = store(engine);
    let first = store.reserve(&relay("s", 3, 1), &BudgetLimits::total(1_000), 0).unwrap().unwrap();
    assert_eq!(
        store.reserve(&relay("s", 3, 1), &BudgetLimits::total(1_000), 0).unwrap(),
        Err(Refusal::Duplicate)
    );
    store.release(first.id, "node refused", 0).unwrap();
    assert!(store.reserve(&relay("s", 3, 1), &BudgetLimits::total(1_000), 0).unwrap().is_ok());

    // A relay whose registry call failed ran: it keeps its request, as a mined one does, in the
    // store's checks and in its unique index alike; a reverted one never ran and does not.
    let lease = leased(&store);
    for (n, outcome, kept) in
        [(4, Outcome::CallFailed, true), (5, Outcome::Mined, true), (6, Outcome::Reverted, false)]
    {
        let ran = store.reserve(&relay("s", n, 1), &BudgetLimits::total(1_000), 1).unwrap().unwrap();
        store.mark_sent(&sending(ran.id, n, h(n as u16), 1, 1), &lease).unwrap();
        store.settle(ran.id, &Settlement::of(h(n as u16), 1, outcome), 2).unwrap();
        let again = store.reserve(&relay("s", n, 1), &BudgetLimits::total(1_000), 3).unwrap();
        assert_eq!(again == Err(Refusal::Duplicate), kept, "{outcome:?}: {again:?}");
        let retry = relay("s", n, 1);
        let held = store.held(retry.signer, retry.forwarder_nonce, retry.digest, &retry.signature).unwrap();
        assert_eq!(held.map(|record| record.id), kept.then_some(ran.id).or(again.ok().map(|r| r.id)));
    }
    // The index itself, beneath the checks: a second live row of a request whose call failed
    // is refused by the database.
    let second_row = store.with(|connection| {
        connection.execute(
            "INSERT INTO relays (relay_id, signer, forwarder_nonce, client_ip, gas_limit, max_fee_wei,
                 reserved_wei, window_start, status, created_at)
             SELECT 'copy', signer, forwarder_nonce, client_ip, gas_limit, max_fee_wei, '0', window_start,
                 'mined', created_at
             FROM relays WHERE status = 'call_failed'",
            &[],
        )
    });
    let refused = second_row.unwrap_err().to_string();
    assert!(
        refused.contains("relays_live_request_v4") || refused.contains("UNIQUE constraint failed"),
        "{refused}"
    );
}

fn signer_counts_recheck_the_limit_and_skip_requests_already_accepted(engine: Engine) {
    let (_place, store) = store(engine);
    // Two requests passed the read-only check at 1 of 2; only one more may be counted.
    assert_eq!(store.count_signer(who("s"), U256::from(0), 2, 10).unwrap(), SignerCount::Counted);
    assert_eq!(store.hits(RateKind::Signer, &who("s").to_checksum(None), 10).unwrap(), 1);
    assert_eq!(store.count_signer(who("s"), U256::from(1), 2, 10).unwrap(), SignerCount::Counted);
    assert_eq!(store.count_signer(who("s"), U256::from(2), 2, 10).unwrap(), SignerCount::Limited);
    assert_eq!(store.hits(RateKind::Signer, &who("s").to_checksum(None), 10).unwrap(), 2);
    // A copy of a request already accepted is not counted, even with quota left.
    store.reserve(&relay("t", 4, 1), &BudgetLimits::total(1_000), 10).unwrap().unwrap();
    assert_eq!(store.count_signer(who("t"), U256::from(4), 2, 10).unwrap(), SignerCount::Duplicate);
    assert_eq!(store.hits(RateKind::Signer, &who("t").to_checksum(None), 10).unwrap(), 0);
    assert_eq!(
        store.count_signer(who("s"), U256::from(0), 2, 10 + RATE_WINDOW_SECS).unwrap(),
        SignerCount::Counted
    );
}

fn dropped_relays_free_their_request_and_executed_ones_keep_the_worst_case(engine: Engine) {
    let (_place, store) = store(engine);
    let dropped = store.reserve(&relay("s", 0, 10), &BudgetLimits::total(1_000), 5).unwrap().unwrap();
    let executed = store.reserve(&relay("t", 0, 20), &BudgetLimits::total(1_000), 5).unwrap().unwrap();
    assert_eq!(store.open_since(4).unwrap().len(), 0, "newer than the horizon");
    assert_eq!(store.open_since(5).unwrap().len(), 2);
    store.drop_relay(dropped.id, "never sent", 6).unwrap();
    store.mark_executed(executed.id, 6).unwrap();
    // A late mark_sent does not reopen a closed relay, and records nothing (nothing may be
    // submitted for it).
    let late = store.mark_sent(&sending(dropped.id, 3, h(0x1), 1, 6), &leased(&store));
    assert!(matches!(late, Err(Error::LaneLost(_))), "{late:?}");
    let state = store.budget(7).unwrap();
    assert_eq!((state.used_wei, state.pending_wei), (200, 0));
    let statuses: Vec<_> = store.records().unwrap().into_iter().map(|r| (r.status, r.cost_wei)).collect();
    assert_eq!(statuses, [(RelayStatus::Dropped, Some(0)), (RelayStatus::Executed, Some(200))]);
    assert!(store.open_since(10).unwrap().is_empty());
    assert!(
        store.reserve(&relay("s", 0, 10), &BudgetLimits::total(1_000), 8).unwrap().is_ok(),
        "the slot is free again"
    );
    assert_eq!(
        store.reserve(&relay("t", 0, 10), &BudgetLimits::total(1_000), 8).unwrap(),
        Err(Refusal::Duplicate)
    );
}

fn the_budget_resets_a_day_after_first_use_and_persists(engine: Engine) {
    let place = Place::new(engine);
    {
        let store = place.open();
        let reservation =
            store.reserve(&relay("s", 0, 10), &BudgetLimits::total(1_000), 50).unwrap().unwrap();
        store.mark_sent(&sending(reservation.id, 0, h(0x1), 1, 50), &leased(&store)).unwrap();
        assert!(store.hit(RateKind::Signer, "s", 1, 50).unwrap());
    }
    let store = place.open();
    assert_eq!(store.budget(60).unwrap().used_wei, 100, "survives reopening");
    assert!(!store.hit(RateKind::Signer, "s", 1, 60).unwrap());
    assert_eq!(store.open_since(60).unwrap().len(), 1, "the sent relay is still open");

    let later = 50 + BUDGET_WINDOW_SECS;
    assert_eq!(store.budget(later - 1).unwrap().used_wei, 100);
    // The sent relay is still open at the reset: it is paid in the next window, which starts at
    // the reset with its reservation as its use.
    let carried = BudgetState { used_wei: 100, pending_wei: 100, window_start: Some(later) };
    assert_eq!(store.budget(later).unwrap(), carried);
    let fresh = store.reserve(&relay("t", 0, 1), &BudgetLimits::total(1_000), later + 1).unwrap().unwrap();
    // Its receipt's cost replaces its reservation in the window where it is paid.
    store.settle(1, &Settlement::of(h(0x1), 40, Outcome::Mined), later + 2).unwrap();
    assert_eq!(
        store.budget(later + 2).unwrap(),
        BudgetState {
            used_wei: 40 + fresh.reserved_wei,
            pending_wei: fresh.reserved_wei,
            window_start: Some(later)
        }
    );
    // Once nothing is open at a reset, the next window waits for its first use.
    store.release(fresh.id, "node refused", later + 3).unwrap();
    let idle = BudgetState { used_wei: 0, pending_wei: 0, window_start: None };
    assert_eq!(store.budget(later + BUDGET_WINDOW_SECS).unwrap(), idle);
}

/// Issue 28: at a reset, the reservations still open are booked in the next window, with their
/// later costs (a fee bump, the receipt's cost) and against their signer's and client's shares
/// there, so no more than the budget goes out around a reset.
fn reservations_open_at_a_reset_and_their_later_costs_are_booked_in_the_next_window(engine: Engine) {
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let limits = BudgetLimits {
        total_wei: 1_000,
        signer_wei: 1_000,
        client_wei: 700,
        slices: std::num::NonZeroU64::MIN,
    };
    // 600 reserved at 10 and sent; 100 reserved and settled at 30 in the same window.
    let open = store.reserve(&from("s", "a", 0, 60), &limits, 10).unwrap().unwrap();
    store.mark_sent(&sending(open.id, 0, h(0xa), 1, 11), &lease).unwrap();
    let settled = store.reserve(&from("t", "b", 0, 10), &limits, 12).unwrap().unwrap();
    store.mark_sent(&sending(settled.id, 1, h(0xb), 1, 12), &lease).unwrap();
    store.settle(settled.id, &Settlement::of(h(0xb), 30, Outcome::Mined), 13).unwrap();
    // Three windows later (no use between): the window running then holds the open reservation.
    let reset = 10 + 3 * BUDGET_WINDOW_SECS;
    let carried = BudgetState { used_wei: 600, pending_wei: 600, window_start: Some(reset) };
    assert_eq!(store.budget(reset + 5).unwrap(), carried, "read before any write rolls it");
    assert_eq!(store.spent_by_signer(who("s"), reset + 5).unwrap(), 600);
    assert_eq!(store.spent_by_client("a", reset + 5).unwrap(), 600);
    assert_eq!(store.spent_by_signer(who("t"), reset + 5).unwrap(), 0, "settled: the old window's");
    // Not twice the budget around the reset: 600 carried + 500 > 1,000.
    assert_eq!(store.reserve(&from("u", "c", 0, 50), &limits, reset + 5).unwrap(), Err(Refusal::Budget));
    // A fee bump of the carried relay (600 → 720) is booked in this window, against client a's
    // 700 share: refused; 660 fits.
    let dear = Replacement { max_fee_wei: 12, ..fee_bump(h(0xc), 2) };
    assert_eq!(
        store.replace(open.id, &dear, &limits, reset + 6, &lease).unwrap(),
        Err(ReplaceRefusal::ClientShare)
    );
    let bump = Replacement { max_fee_wei: 11, ..fee_bump(h(0xd), 2) };
    assert_eq!(store.replace(open.id, &bump, &limits, reset + 6, &lease).unwrap(), Ok(660));
    assert_eq!(store.budget(reset + 6).unwrap(), BudgetState { used_wei: 660, pending_wei: 660, ..carried });
    // Its receipt's cost replaces its reservation here.
    store.settle(open.id, &Settlement::of(h(0xd), 444, Outcome::Mined), reset + 7).unwrap();
    assert_eq!(store.budget(reset + 7).unwrap(), BudgetState { used_wei: 444, pending_wei: 0, ..carried });
    assert_eq!(store.spent_by_client("a", reset + 7).unwrap(), 444);
    assert!(store.reserve(&from("u", "c", 0, 50), &limits, reset + 8).unwrap().is_ok(), "444 + 500");
}

/// Issue 28: a fee replacement or a cancellation is booked against its signer's and its client's
/// shares, as a reservation is, and refused with the share that cannot cover it.
fn replacements_and_cancellations_count_against_both_shares(engine: Engine) {
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let limits = BudgetLimits {
        total_wei: 1_000_000,
        signer_wei: 250,
        client_wei: 400,
        slices: std::num::NonZeroU64::MIN,
    };
    // 100 each (10 gas at 10 wei): signer s from client a, twice; signer t from client a.
    let first = store.reserve(&from("s", "a", 0, 10), &limits, 5).unwrap().unwrap();
    store.reserve(&from("s", "a", 1, 10), &limits, 5).unwrap().unwrap();
    let other = store.reserve(&from("t", "a", 0, 10), &limits, 5).unwrap().unwrap();
    store.mark_sent(&sending(first.id, 0, h(1), 1, 6), &lease).unwrap();
    store.mark_sent(&sending(other.id, 1, h(2), 1, 6), &lease).unwrap();
    // s's first at 16 wei a gas: 160 + 100 > 250.
    let to = |hash: u16, max_fee_wei: u128| Replacement { max_fee_wei, ..fee_bump(h(hash), 2) };
    assert_eq!(
        store.replace(first.id, &to(3, 16), &limits, 7, &lease).unwrap(),
        Err(ReplaceRefusal::SignerShare)
    );
    assert_eq!(store.replace(first.id, &to(4, 15), &limits, 7, &lease).unwrap(), Ok(150));
    assert_eq!(store.spent_by_signer(who("s"), 7).unwrap(), 250);
    assert_eq!(store.spent_by_client("a", 7).unwrap(), 350);
    // t's at 16: its signer has room (160), client a has 50 left: refused by the client's share.
    assert_eq!(
        store.replace(other.id, &to(5, 16), &limits, 7, &lease).unwrap(),
        Err(ReplaceRefusal::ClientShare)
    );
    assert_eq!(store.replace(other.id, &to(6, 15), &limits, 7, &lease).unwrap(), Ok(150));
    // A cancellation (21,000 gas) far beyond either share: refused, nothing recorded.
    let cancel = Replacement { kind: TxKind::Cancel, ..to(7, 1) };
    assert_eq!(
        store.replace(first.id, &cancel, &limits, 8, &lease).unwrap(),
        Err(ReplaceRefusal::SignerShare)
    );
    let record = store.relay(first.id).unwrap().unwrap();
    assert_eq!((record.status, record.reserved_wei, record.txs.len()), (RelayStatus::Replaced, 150, 2));
    // Whole shares: the same cancellation fits.
    let whole = BudgetLimits::total(1_000_000);
    assert_eq!(store.replace(first.id, &cancel, &whole, 8, &lease).unwrap(), Ok(21_000));
    let state = store.budget(8).unwrap();
    assert_eq!((state.used_wei, state.pending_wei), (21_000 + 100 + 150, 21_000 + 100 + 150));
}

/// Issue 28, item 4: a reservation passes only what pacing has opened so far; a refusal names
/// when the next slice opens, and starts the window when none runs so that the time holds.
fn a_reservation_past_the_open_slices_waits_for_the_next_one(engine: Engine) {
    let (_place, store) = store(engine);
    const HOUR: u64 = 3_600;
    // 2,400 wei over 24 slices: 100 an hour.
    let limits = BudgetLimits {
        total_wei: 2_400,
        signer_wei: 2_400,
        client_wei: 2_400,
        slices: std::num::NonZeroU64::new(24).unwrap(),
    };
    // More than a slice at once, with no window running: refused, and the window starts.
    assert_eq!(
        store.reserve(&relay("s", 0, 15), &limits, 50).unwrap(),
        Err(Refusal::Slice { opens_at: 50 + HOUR })
    );
    assert_eq!(
        store.budget(51).unwrap(),
        BudgetState { used_wei: 0, pending_wei: 0, window_start: Some(50) }
    );
    let first = store.reserve(&relay("s", 0, 6), &limits, 60).unwrap().unwrap();
    assert_eq!(first.reserved_wei, 60);
    assert_eq!(
        store.reserve(&relay("t", 0, 5), &limits, 50 + HOUR - 1).unwrap(),
        Err(Refusal::Slice { opens_at: 50 + HOUR })
    );
    // The next slice opens on time, with what the first left carried over: 200 − 60.
    assert!(store.reserve(&relay("t", 0, 14), &limits, 50 + HOUR).unwrap().is_ok());
    assert_eq!(
        store.reserve(&relay("u", 0, 1), &limits, 50 + HOUR).unwrap(),
        Err(Refusal::Slice { opens_at: 50 + 2 * HOUR })
    );
    // A quiet afternoon: at the last slice the whole budget is open, and the day's total holds.
    assert!(store.reserve(&relay("u", 0, 200), &limits, 50 + 23 * HOUR).unwrap().is_ok());
    assert_eq!(store.reserve(&relay("v", 0, 21), &limits, 50 + 23 * HOUR).unwrap(), Err(Refusal::Budget));
    // The day's total refuses first, and the shares before pacing: their refusals say "tomorrow".
    let (_place, store) = self::store(engine);
    let shares = BudgetLimits { signer_wei: 50, ..limits };
    assert_eq!(store.reserve(&relay("s", 0, 6), &shares, 0).unwrap(), Err(Refusal::SignerShare));
    assert_eq!(store.reserve(&relay("s", 0, 241), &limits, 0).unwrap(), Err(Refusal::Budget));
}

/// The relay's transaction sent again as `tx_hash` at `sent_block`, paying 12 wei a gas (2 of
/// them to the block's producer).
fn fee_bump(tx_hash: B256, sent_block: u64) -> Replacement {
    Replacement { tx_hash, kind: TxKind::Relay, max_fee_wei: 12, priority_fee_wei: 2, sent_block }
}

fn a_replacement_grows_the_reservation_and_keeps_every_hash(engine: Engine) {
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let first = store.reserve(&relay("s", 0, 100), &BudgetLimits::total(10_000), 5).unwrap().unwrap();
    assert_eq!(first.reserved_wei, 1_000);
    assert_eq!(first.relay_id.len(), 32);
    store.mark_sent(&sending(first.id, 4, h(0xaa), 7, 6), &lease).unwrap();
    let bumped = fee_bump(h(0xbb), 9);
    assert_eq!(store.replace(first.id, &bumped, &BudgetLimits::total(10_000), 8, &lease).unwrap(), Ok(1_200));
    assert_eq!(store.budget(8).unwrap().pending_wei, 1_200);
    let too_dear = Replacement { tx_hash: h(0xcc), max_fee_wei: 1_000, ..bumped.clone() };
    assert_eq!(
        store.replace(first.id, &too_dear, &BudgetLimits::total(10_000), 8, &lease).unwrap(),
        Err(ReplaceRefusal::Budget)
    );
    // A replacement the node did not take leaves no trace but the grown reservation.
    let refused = Replacement { tx_hash: h(0xee), max_fee_wei: 13, ..bumped.clone() };
    assert_eq!(
        store.replace(first.id, &refused, &BudgetLimits::total(10_000), 8, &lease).unwrap(),
        Ok(1_300)
    );
    store.unreplace(first.id, h(0xee), 8).unwrap();
    let record = store.relay(first.id).unwrap().unwrap();
    assert_eq!(
        (record.status, record.tx_hash, record.max_fee_wei),
        (RelayStatus::Replaced, Some(h(0xbb)), 12)
    );
    assert_eq!((record.txs.len(), record.reserved_wei), (2, 1_300));
    assert!(store.relay_by_hash(h(0xee)).unwrap().is_none());
    // A cancellation is booked like any transaction: it reserves its own worst case when that
    // is the larger, and is refused when the budget cannot cover the growth.
    let cancel = Replacement { tx_hash: h(0xdd), kind: TxKind::Cancel, max_fee_wei: 14, ..bumped };
    assert_eq!(
        store.replace(first.id, &cancel, &BudgetLimits::total(21_000 * 14 - 1), 9, &lease).unwrap(),
        Err(ReplaceRefusal::Budget)
    );
    assert_eq!(
        store.replace(first.id, &cancel, &BudgetLimits::total(21_000 * 14), 9, &lease).unwrap(),
        Ok(21_000 * 14)
    );
    let record = store.relay_by_hash(h(0xaa)).unwrap().unwrap();
    assert_eq!(record.relay_id, first.relay_id);
    assert_eq!(record.status, RelayStatus::Cancelling);
    assert_eq!(record.status.public().as_str(), "expired");
    let hashes: Vec<_> = record.txs.iter().map(|tx| (tx.hash, tx.kind)).collect();
    assert_eq!(hashes, [(h(0xaa), TxKind::Relay), (h(0xbb), TxKind::Relay), (h(0xdd), TxKind::Cancel)]);
    assert_eq!(record.txs[1].sent_block, Some(9));
    // The original transaction wins the race after all: the relay is mined, at its cost.
    store.settle(first.id, &Settlement::of(h(0xaa), 300, Outcome::Mined), 10).unwrap();
    let record = store.relay_by_id(&first.relay_id).unwrap().unwrap();
    assert_eq!(
        (record.status, record.tx_hash, record.cost_wei),
        (RelayStatus::Mined, Some(h(0xaa)), Some(300))
    );
    assert_eq!(
        store.budget(10).unwrap(),
        BudgetState { used_wei: 300, pending_wei: 0, window_start: Some(5) }
    );
    assert_eq!(
        store.replace(first.id, &cancel, &BudgetLimits::total(u128::MAX), 11, &lease).unwrap(),
        Err(ReplaceRefusal::Closed),
        "closed"
    );
}

/// A relay read while another daemon replaces it again and again is always as one commit left
/// it: its current hash and fee are its last transaction's, and its status says how many it
/// has. Read in two statements (the relay's row, then its transactions), a replacement
/// committed between them showed its transaction beside the status and hash before it, on both
/// engines (SQLite's two stores are two connections to one file), within the first replacements.
fn a_relay_read_while_it_is_replaced_is_one_commits_state(engine: Engine) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const REPLACEMENTS: u128 = 300;
    let place = Place::new(engine);
    let (writer, reader) = (place.open(), place.open());
    let lease = leased(&writer);
    let first = writer.reserve(&relay("s", 0, 100), &BudgetLimits::total(u128::MAX), 5).unwrap().unwrap();
    writer.mark_sent(&sending(first.id, 4, h(0), 7, 6), &lease).unwrap();
    let (done, reads) = (AtomicBool::new(false), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    while !done.load(Ordering::Relaxed) {
                        let record = reader.relay_by_id(&first.relay_id).unwrap().unwrap();
                        let last = record.txs.last().expect("sent");
                        let shown = (record.tx_hash, record.max_fee_wei, record.status);
                        let status =
                            if record.txs.len() == 1 { RelayStatus::Sent } else { RelayStatus::Replaced };
                        assert_eq!(shown, (Some(last.hash), last.max_fee_wei, status), "{record:?}");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for n in 1..=REPLACEMENTS {
            let bump = Replacement { max_fee_wei: 10 + n, ..fee_bump(h(n as u16), 8) };
            writer.replace(first.id, &bump, &BudgetLimits::total(u128::MAX), 8, &lease).unwrap().unwrap();
            // Each replacement meets reads under way, however slow the machine.
            let seen = reads.load(Ordering::Relaxed);
            while reads.load(Ordering::Relaxed) == seen && !readers.iter().any(|reader| reader.is_finished())
            {
                std::thread::yield_now();
            }
        }
        done.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().unwrap();
        }
    });
    assert!(reads.into_inner() >= REPLACEMENTS as usize);
    assert_eq!(reader.relay(first.id).unwrap().unwrap().txs.len(), REPLACEMENTS as usize + 1);
}

/// A first transaction recorded but withheld (its daemon stalled past the lease's margin while
/// recording it) is taken back: the relay is accepted again, on its reservation, and handed to
/// its key's holder, who sends it once. A relay the key's next holder closed meanwhile, or one
/// on another transaction since, is left as it is.
fn a_withheld_transaction_is_taken_back_and_the_relay_handed_to_its_keys_holder(engine: Engine) {
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let limits = BudgetLimits::total(u128::MAX);
    let first = store.reserve(&relay("s", 0, 100), &limits, 5).unwrap().unwrap();
    store.mark_sent(&sending(first.id, 4, h(1), 7, 6), &lease).unwrap();
    assert!(!store.withdraw(first.id, h(2), 7).unwrap(), "not the relay's transaction");
    assert_eq!(store.relay(first.id).unwrap().unwrap().tx_hash, Some(h(1)));

    assert!(store.withdraw(first.id, h(1), 7).unwrap());
    let record = store.relay(first.id).unwrap().unwrap();
    assert_eq!(
        (record.status, record.tx_hash, record.relayer_nonce, record.txs.len(), record.sent_at),
        (RelayStatus::Accepted, None, None, 0, None)
    );
    assert_eq!(record.reserved_wei, 1_000, "the reservation stays");
    assert_eq!(store.budget(7).unwrap().pending_wei, 1_000);
    assert!(store.relay_by_hash(h(1)).unwrap().is_none(), "the withheld hash is forgotten");
    let handed: Vec<i64> = store.handed_off(&[LANE]).unwrap().iter().map(|record| record.id).collect();
    assert_eq!(handed, [first.id]);
    // The key's holder sends it, once.
    let again = Sending { handed_off_first: true, ..sending(first.id, 4, h(3), 8, 8) };
    store.mark_sent(&again, &lease).unwrap();
    assert!(store.mark_sent(&Sending { tx_hash: h(4), ..again }, &lease).is_err(), "sent already");
    assert_eq!(store.relay(first.id).unwrap().unwrap().tx_hash, Some(h(3)));
    assert!(!store.withdraw(first.id, h(1), 9).unwrap());

    // Dropped by the key's next holder before the stalled daemon woke: left dropped.
    let second = store.reserve(&relay("t", 0, 100), &limits, 10).unwrap().unwrap();
    store.mark_sent(&sending(second.id, 5, h(5), 7, 10), &lease).unwrap();
    store.drop_relay(second.id, "the node does not have the transaction", 11).unwrap();
    assert!(!store.withdraw(second.id, h(5), 12).unwrap());
    assert_eq!(store.relay(second.id).unwrap().unwrap().status, RelayStatus::Dropped);
    // Replaced meanwhile: on the replacement, left so.
    let third = store.reserve(&relay("u", 0, 100), &limits, 12).unwrap().unwrap();
    store.mark_sent(&sending(third.id, 6, h(6), 7, 12), &lease).unwrap();
    store.replace(third.id, &fee_bump(h(7), 8), &limits, 13, &lease).unwrap().unwrap();
    assert!(!store.withdraw(third.id, h(6), 14).unwrap());
    assert_eq!(store.relay(third.id).unwrap().unwrap().txs.len(), 2);
}

/// The reconciler closes a relay only as it read it: one moved to another key and sent there
/// since (by a daemon thawed with that key), or sent again, is left open for the next pass,
/// so its transaction's cost is booked when it is mined. One unchanged is closed.
fn the_reconciler_closes_a_relay_only_as_it_read_it(engine: Engine) {
    const OTHER: Address = Address::repeat_byte(0x1b);
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let other = store.take_lanes("daemon", &[OTHER], 1, Taking::AtStart, 0, 1 << 40).unwrap()[0];
    let limits = BudgetLimits::total(u128::MAX);
    let moved = store.reserve(&relay("s", 0, 100), &limits, 5).unwrap().unwrap();
    let seen = store.relay(moved.id).unwrap().unwrap();
    assert!(store.move_to_lane(moved.id, OTHER, 6).unwrap());
    store.mark_sent(&sending(moved.id, 0, h(1), 7, 6), &other).unwrap();
    store.close_as_seen(&seen, false, "never sent", 7).unwrap();
    store.close_as_seen(&seen, true, "", 7).unwrap();
    let record = store.relay(moved.id).unwrap().unwrap();
    assert_eq!((record.status, record.tx_hash), (RelayStatus::Sent, Some(h(1))), "left as sent");

    let resent = store.reserve(&relay("t", 0, 100), &limits, 5).unwrap().unwrap();
    store.mark_sent(&sending(resent.id, 1, h(2), 7, 6), &lease).unwrap();
    let seen = store.relay(resent.id).unwrap().unwrap();
    store.replace(resent.id, &fee_bump(h(3), 8), &limits, 8, &lease).unwrap().unwrap();
    store.close_as_seen(&seen, false, "the node lost it", 9).unwrap();
    assert_eq!(store.relay(resent.id).unwrap().unwrap().status, RelayStatus::Replaced);
    let seen = store.relay(resent.id).unwrap().unwrap();
    store.close_as_seen(&seen, true, "", 9).unwrap();
    let record = store.relay(resent.id).unwrap().unwrap();
    assert_eq!((record.status, record.cost_wei), (RelayStatus::Executed, Some(1_200)), "the worst case");

    let unchanged = store.reserve(&relay("u", 0, 100), &limits, 5).unwrap().unwrap();
    let seen = store.relay(unchanged.id).unwrap().unwrap();
    store.close_as_seen(&seen, false, "never sent", 9).unwrap();
    let record = store.relay(unchanged.id).unwrap().unwrap();
    assert_eq!((record.status, record.error.as_deref()), (RelayStatus::Dropped, Some("never sent")));
    let state = store.budget(10).unwrap();
    assert_eq!(
        (state.used_wei, state.pending_wei),
        (1_000 + 1_200, 1_000),
        "the moved relay's reservation stays"
    );
}

/// On an OP Stack chain a relay reserves its L1 data fee beside the gas; every later worst
/// case (a fee replacement, the cancellation) keeps it, and the receipt's cost replaces it all.
fn the_l1_fee_reservation_stays_in_every_worst_case(engine: Engine) {
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let first = store
        .reserve(&NewRelay { l1_fee_wei: 77, ..relay("s", 0, 100) }, &BudgetLimits::total(10_000), 5)
        .unwrap()
        .unwrap();
    assert_eq!(first.reserved_wei, 100 * 10 + 77);
    let record = store.relay(first.id).unwrap().unwrap();
    assert_eq!((record.l1_fee_wei, record.reserved_wei), (77, 1_077));
    store.mark_sent(&sending(first.id, 0, h(0xaa), 7, 6), &lease).unwrap();
    let bumped = fee_bump(h(0xbb), 9);
    assert_eq!(
        store.replace(first.id, &bumped, &BudgetLimits::total(10_000), 8, &lease).unwrap(),
        Ok(100 * 12 + 77)
    );
    // Over the limit only because of the L1 part: refused like any replacement too dear.
    let tight = Replacement { tx_hash: h(0xcc), max_fee_wei: 13, ..bumped.clone() };
    assert_eq!(
        store.replace(first.id, &tight, &BudgetLimits::total(1_300), 8, &lease).unwrap(),
        Err(ReplaceRefusal::Budget)
    );
    let cancel = Replacement { tx_hash: h(0xdd), kind: TxKind::Cancel, max_fee_wei: 14, ..bumped };
    assert_eq!(
        store.replace(first.id, &cancel, &BudgetLimits::total(21_000 * 14 + 77), 9, &lease).unwrap(),
        Ok(21_000 * 14 + 77)
    );
    assert_eq!(store.budget(9).unwrap().pending_wei, 21_000 * 14 + 77);
    store.settle(first.id, &Settlement::of(h(0xaa), 1_111, Outcome::Mined), 10).unwrap();
    assert_eq!(
        store.budget(10).unwrap(),
        BudgetState { used_wei: 1_111, pending_wei: 0, window_start: Some(5) }
    );
    let record = store.relay(first.id).unwrap().unwrap();
    assert_eq!((record.cost_wei, record.l1_fee_wei), (Some(1_111), 77));
}

fn a_retry_finds_the_held_relay_by_its_exact_signed_request(engine: Engine) {
    let (_place, store) = store(engine);
    let new = relay("s", 2, 10);
    let reservation = store.reserve(&new, &BudgetLimits::total(1_000), 5).unwrap().unwrap();
    let held = store.held(who("s"), U256::from(2), new.digest, &Bytes::from(vec![1])).unwrap().unwrap();
    assert_eq!((held.relay_id.as_str(), held.status), (reservation.relay_id.as_str(), RelayStatus::Accepted));
    assert!(
        store.held(who("s"), U256::from(2), new.digest, &Bytes::from(vec![2])).unwrap().is_none(),
        "another signature"
    );
    assert!(
        store.held(who("s"), U256::from(2), B256::ZERO, &Bytes::from(vec![1])).unwrap().is_none(),
        "another request"
    );
    assert_eq!(store.relay_by_request(who("s"), U256::from(2)).unwrap().unwrap().id, reservation.id);
    store.drop_relay(reservation.id, "the node lost it", 6).unwrap();
    assert!(
        store.held(who("s"), U256::from(2), new.digest, &Bytes::from(vec![1])).unwrap().is_none(),
        "dropped: relay it again"
    );
    let again = store.reserve(&new, &BudgetLimits::total(1_000), 7).unwrap().unwrap();
    assert_ne!(again.relay_id, reservation.relay_id);
    assert_eq!(
        store.relay_by_request(who("s"), U256::from(2)).unwrap().unwrap().relay_id,
        again.relay_id,
        "the latest"
    );
}

fn a_damaged_store_is_its_own_error(engine: Engine) {
    let (_place, store) = store(engine);
    store.reserve(&relay("s", 0, 10), &BudgetLimits::total(1_000), 5).unwrap().unwrap();
    store.with(|connection| connection.execute("UPDATE relays SET reserved_wei = 'lots'", &[])).unwrap();
    let error = store.records().unwrap_err();
    assert!(matches!(&error, Error::StoreCorrupt(detail) if detail.contains("lots")), "{error:?}");
    store
        .with(|connection| connection.execute("UPDATE relays SET reserved_wei = '1', status = 'lost'", &[]))
        .unwrap();
    assert!(matches!(store.records(), Err(Error::StoreCorrupt(detail)) if detail.contains("lost")));
}

#[test]
fn a_store_of_the_earlier_version_is_brought_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relayer.db");
    {
        let connection = SqliteConnection::open(&path).unwrap();
        // The earlier version's text: checksummed signers, decimal nonces, 0x hashes.
        let (s, t, hash) = (who("s").to_checksum(None), who("t").to_checksum(None), h(0xaa));
        connection
            .execute_batch(&format!(
                "CREATE TABLE relays (id INTEGER PRIMARY KEY, signer TEXT NOT NULL,
                     forwarder_nonce TEXT NOT NULL, client_ip TEXT NOT NULL, gas_limit INTEGER NOT NULL,
                     max_fee_wei TEXT NOT NULL, reserved_wei TEXT NOT NULL, window_start INTEGER NOT NULL,
                     status TEXT NOT NULL, relayer_nonce INTEGER, tx_hash TEXT, cost_wei TEXT, error TEXT,
                     created_at INTEGER NOT NULL, settled_at INTEGER);
                 CREATE UNIQUE INDEX relays_live_request_v2 ON relays (signer, forwarder_nonce)
                     WHERE status IN ('reserved', 'sent', 'mined', 'executed');
                 INSERT INTO relays VALUES (1, '{s}', '0', 'ip', 10, '5', '50', 1, 'sent', 3, '{hash}', NULL, NULL, 1, NULL);
                 INSERT INTO relays VALUES (2, '{t}', '0', 'ip', 10, '5', '50', 1, 'reserved', NULL, NULL, NULL, NULL, 1, NULL);",
            ))
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let records = store.records().unwrap();
    assert_eq!(records[0].status, RelayStatus::Sent);
    assert_eq!(records[0].txs.len(), 1);
    assert_eq!(store.relay_by_hash(h(0xaa)).unwrap().unwrap().id, 1);
    assert_eq!(records[1].status, RelayStatus::Accepted);
    assert_ne!(records[0].relay_id, records[1].relay_id);
    assert_eq!(
        store.reserve(&relay("t", 0, 1), &BudgetLimits::total(1_000), 2).unwrap(),
        Err(Refusal::Duplicate)
    );
    // The one key of that version takes its relays: both still open, so its lane is two deep.
    assert_eq!(records.iter().map(|record| record.lane).collect::<Vec<_>>(), [None, None]);
    assert_eq!(store.adopt_unlaned(LANE).unwrap(), 2);
    assert_eq!(store.adopt_unlaned(who("other key")).unwrap(), 0, "once");
    assert_eq!(store.lane_depths().unwrap(), [(LANE, 2)]);
    let records: Vec<RelayRecord> = store.records().unwrap();
    assert!(records.iter().all(|record| record.lane == Some(LANE)));
    drop(store);
    assert_eq!(Store::open(&path).unwrap().records().unwrap(), records, "opening again changes nothing");
}

fn a_relay_goes_to_the_candidate_lane_with_the_fewest_open_relays(engine: Engine) {
    let (_place, store) = store(engine);
    let (a, b, c) = (who("lane a"), who("lane b"), who("lane c"));
    let limits = BudgetLimits::total(1_000_000);
    let on = |signer: &str, lanes: &[Address]| {
        let new = NewRelay { lanes: lanes.to_vec(), ..relay(signer, 0, 10) };
        store.reserve(&new, &limits, 5).unwrap().unwrap()
    };
    // Each reservation sees the ones before it: one per lane, ties to the earlier candidate.
    let first: Vec<Reservation> = ["s1", "s2", "s3"].iter().map(|signer| on(signer, &[a, b, c])).collect();
    assert_eq!(first.iter().map(|r| r.lane).collect::<Vec<_>>(), [a, b, c]);
    let fourth = on("s4", &[a, b, c]);
    assert_eq!(fourth.lane, a);
    let mut depths = store.lane_depths().unwrap();
    depths.sort();
    let mut expected = vec![(a, 2), (b, 1), (c, 1)];
    expected.sort();
    assert_eq!(depths, expected);
    // An ended relay no longer counts: b's settles, its released one is gone, so b is the idlest.
    let on_b = store.take_lanes("daemon", &[b], 1, Taking::AtStart, 0, 1 << 40).unwrap()[0];
    store.mark_sent(&sending(first[1].id, 0, h(0xb0), 1, 6), &on_b).unwrap();
    store.settle(first[1].id, &Settlement::of(h(0xb0), 10, Outcome::Mined), 7).unwrap();
    store.release(first[2].id, "node refused", 7).unwrap();
    assert_eq!(on("s5", &[a, b, c]).lane, b);
    // c is idle but not a candidate (below the minimum balance): the least busy of the others.
    assert_eq!(on("s6", &[a, b]).lane, b);
    assert_eq!(on("s7", &[a, b]).lane, a);
    assert_eq!(store.relay(first[0].id).unwrap().unwrap().lane, Some(a), "recorded with the relay");
    let no_lane = NewRelay { lanes: Vec::new(), ..relay("s8", 0, 10) };
    assert!(matches!(store.reserve(&no_lane, &limits, 5), Err(Error::Internal(_))));
}

/// A relay handed off by a standby is listed for its lane's holder until handed over; the
/// first record of a transaction for it finds it only while unsent and on the lease's lane, so
/// two daemons that both read it unsent never both send it; a relay is recorded on its own lane
/// only; and a daemon that lost the lane gives up only a relay nobody sent.
fn a_relay_handed_off_is_sent_once_and_only_on_its_own_lane(engine: Engine) {
    let (_place, store) = store(engine);
    let limits = BudgetLimits::total(1_000_000);
    let other = who("another lane");
    let reserve = |signer: &str| {
        let new = NewRelay { lanes: vec![LANE], ..relay(signer, 0, 10) };
        store.reserve(&new, &limits, 5).unwrap().unwrap()
    };
    let (handed, own) = (reserve("standby's"), reserve("holder's own"));
    store.hand_off(handed.id, LANE, 6).unwrap();
    let listed = |lanes: &[Address]| -> Vec<i64> {
        store.handed_off(lanes).unwrap().iter().map(|record| record.id).collect()
    };
    assert_eq!(listed(&[LANE]), [handed.id], "the holder's own relay is not handed off");
    assert_eq!(listed(&[other]), Vec::<i64>::new(), "only the lane's holder sends it");

    let lease = leased(&store);
    let elsewhere = store.take_lanes("daemon", &[other], 1, Taking::AtStart, 0, 1 << 40).unwrap()[0];
    let refused = store
        .mark_sent(&Sending { handed_off_first: true, ..sending(handed.id, 0, h(0xe1), 1, 7) }, &elsewhere)
        .unwrap_err();
    assert!(matches!(refused, Error::LaneLost(lane) if lane == other), "{refused:?}");
    let refused = store.mark_sent(&sending(handed.id, 0, h(0xe1), 1, 7), &elsewhere).unwrap_err();
    assert!(matches!(refused, Error::LaneLost(_)), "not on its lane: {refused:?}");
    assert_eq!(store.relay(handed.id).unwrap().unwrap().status, RelayStatus::Accepted, "nothing recorded");

    store
        .mark_sent(&Sending { handed_off_first: true, ..sending(handed.id, 0, h(0xe2), 1, 7) }, &lease)
        .unwrap();
    assert_eq!(listed(&[LANE]), Vec::<i64>::new(), "sent: no longer waiting");
    // A second daemon that read it unsent records nothing, so submits nothing.
    let late = store
        .mark_sent(&Sending { handed_off_first: true, ..sending(handed.id, 1, h(0xe3), 1, 8) }, &lease)
        .unwrap_err();
    assert!(matches!(late, Error::LaneLost(_)), "{late:?}");
    let record = store.relay(handed.id).unwrap().unwrap();
    assert_eq!((record.tx_hash, record.relayer_nonce, record.txs.len()), (Some(h(0xe2)), Some(0), 1));
    // Its sender's own re-sign still records (the relay is sent, on its lane).
    store.mark_sent(&sending(handed.id, 1, h(0xe4), 1, 8), &lease).unwrap();
    assert_eq!(store.relay(handed.id).unwrap().unwrap().tx_hash, Some(h(0xe4)));
    // A daemon that lost the lane gives up only a relay nobody sent.
    store.release_unsent(handed.id, "lost the lane", 9).unwrap();
    assert_eq!(store.relay(handed.id).unwrap().unwrap().status, RelayStatus::Sent);
    store.release_unsent(own.id, "lost the lane", 9).unwrap();
    assert_eq!(store.relay(own.id).unwrap().unwrap().status, RelayStatus::Failed);

    // Retention keeps the hand-off of a relay recorded as sent (the node may not have it yet:
    // its standby must not answer it as sent) and forgets those of closed relays.
    store.hand_off(own.id, LANE, 10).unwrap();
    assert_eq!(listed(&[LANE]), Vec::<i64>::new(), "a closed relay is not listed");
    store.prune(0, 0, 11).unwrap();
    assert!(store.is_handed_off(handed.id).unwrap(), "recorded as sent, still open: kept");
    assert!(!store.is_handed_off(own.id).unwrap(), "closed: forgotten");
    store.handed_over(handed.id).unwrap();
    assert!(!store.is_handed_off(handed.id).unwrap(), "the node took it: handed over");
}

fn from(signer: &str, client: &str, nonce: u64, gas_limit: u64) -> NewRelay {
    NewRelay { client_ip: client.into(), ..relay(signer, nonce, gas_limit) }
}

fn a_signer_and_a_client_spend_at_most_their_share(engine: Engine) {
    let (_place, store) = store(engine);
    let limits = BudgetLimits {
        total_wei: 10_000,
        signer_wei: 250,
        client_wei: 400,
        slices: std::num::NonZeroU64::MIN,
    };
    // 100 wei each (10 gas × 10 wei): a signer's third relay would pass 250.
    let first = store.reserve(&from("s", "a", 0, 10), &limits, 5).unwrap().unwrap();
    let second = store.reserve(&from("s", "a", 1, 10), &limits, 5).unwrap().unwrap();
    assert_eq!(store.reserve(&from("s", "b", 2, 10), &limits, 5).unwrap(), Err(Refusal::SignerShare));
    // A relay that cost less than its reservation leaves room for more.
    store.settle(second.id, &Settlement::of(h(0x2), 40, Outcome::Mined), 6).unwrap();
    assert!(store.reserve(&from("s", "b", 2, 10), &limits, 6).unwrap().is_ok());
    // Client "a" has spent 100 + 40; other signers from it get 400 − 140 in all.
    assert!(store.reserve(&from("t", "a", 0, 10), &limits, 6).unwrap().is_ok());
    assert!(store.reserve(&from("u", "a", 0, 10), &limits, 6).unwrap().is_ok());
    assert_eq!(store.reserve(&from("v", "a", 0, 10), &limits, 6).unwrap(), Err(Refusal::ClientShare));
    // A dropped relay costs nothing; reverted ones cost what the chain charged.
    assert!(store.reserve(&from("v", "c", 0, 10), &limits, 6).unwrap().is_ok());
    // The next window carries over the relays still open: signer s's 100 + 100 of its 250.
    let next = 5 + BUDGET_WINDOW_SECS;
    assert_eq!(store.reserve(&from("s", "d", 3, 10), &limits, next).unwrap(), Err(Refusal::SignerShare));
    // Settled there at 30, one leaves room for one more; the one settled before the reset is
    // the old window's.
    store.settle(first.id, &Settlement::of(h(0x1), 30, Outcome::Mined), next).unwrap();
    assert!(store.reserve(&from("s", "d", 3, 10), &limits, next).unwrap().is_ok());
    assert_eq!(store.reserve(&from("s", "d", 4, 10), &limits, next).unwrap(), Err(Refusal::SignerShare));
    assert_eq!(store.spent_by_signer(who("s"), next).unwrap(), 230);
}

/// Every change clients see (status or current hash) is one event, written with the change;
/// a relay's events are claimed one at a time, in order, under a lease fenced by its owner.
fn every_change_clients_see_is_an_event_and_a_relays_events_go_one_at_a_time_in_order(engine: Engine) {
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let store = store.with_webhook_events();
    let limits = BudgetLimits::total(u128::MAX);
    let a = store.reserve(&relay("a", 0, 100), &limits, 10).unwrap().unwrap();
    let b = store.reserve(&relay("b", 0, 100), &limits, 10).unwrap().unwrap();
    store.mark_sent(&sending(a.id, 0, h(1), 1, 11), &lease).unwrap();
    store.mark_sent(&sending(a.id, 0, h(1), 1, 11), &lease).unwrap();
    store.mark_sent(&sending(a.id, 1, h(2), 1, 12), &lease).unwrap();
    let bump = fee_bump(h(3), 2);
    store.replace(a.id, &bump, &BudgetLimits::total(u128::MAX), 13, &lease).unwrap().unwrap();
    store.settle(a.id, &Settlement::of(h(3), 5, Outcome::Mined), 14).unwrap();
    store.settle(a.id, &Settlement::of(h(3), 6, Outcome::Mined), 15).unwrap();
    store.release(b.id, "node refused", 16).unwrap();
    let events = store.events().unwrap();
    let listed: Vec<_> = events
        .iter()
        .map(|event| (event.relay_id.as_str(), event.sequence, event.event_type.as_str()))
        .collect();
    let (ra, rb) = (a.relay_id.as_str(), b.relay_id.as_str());
    assert_eq!(
        listed,
        [
            (ra, 1, "relay.accepted"),
            (rb, 1, "relay.accepted"),
            (ra, 2, "relay.sent"),
            (ra, 3, "relay.sent"),
            (ra, 4, "relay.replaced"),
            (ra, 5, "relay.mined"),
            (rb, 2, "relay.failed"),
        ],
        "the same hash twice is no change; a settled relay settles once"
    );
    let bodies: Vec<kya_core::api::relayer_view::RelayEvent> =
        events.iter().map(|event| serde_json::from_str(&event.body).unwrap()).collect();
    assert_eq!(bodies[2].data.tx_hash, Some(h(1)));
    assert_eq!(bodies[3].data.tx_hash, Some(h(2)), "re-signed: the new hash");
    assert_eq!(bodies[4].data.previous_tx_hashes, [h(2)]);
    assert_eq!(
        bodies[5].data,
        store.relay(a.id).unwrap().unwrap().view(),
        "the relay as the lookups show it"
    );
    assert_eq!((bodies[5].timestamp.as_str(), bodies[5].sequence), ("1970-01-01T00:00:14.000Z", 5));
    assert_eq!(bodies[5].id, events[5].event_id);
    assert!(bodies[5].id.starts_with("evt_") && bodies[5].id.len() == 36, "{}", bodies[5].id);
    assert_eq!(store.events_pending().unwrap(), 7);

    // Only each relay's oldest undelivered event can be claimed, and only by one claimer.
    let first = store.claim_events("d1", 10, 1_000, 30_000).unwrap();
    assert_eq!(
        first.iter().map(|e| (e.relay_id.as_str(), e.attempts)).collect::<Vec<_>>(),
        [(ra, 1), (rb, 1)]
    );
    assert!(store.claim_events("d2", 10, 1_000, 30_000).unwrap().is_empty(), "leased, and the rest wait");
    store.event_failed(first[0].seq, "d2", 2_000, "not mine").unwrap();
    store.event_failed(first[0].seq, "d1", 5_000, "HTTP 500").unwrap();
    store.event_delivered(first[1].seq, 1_001).unwrap();
    let next = store.claim_events("d2", 10, 1_002, 30_000).unwrap();
    assert_eq!(next.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>(), ["relay.failed"], "a waits");
    let again = store.claim_events("d2", 10, 5_000, 30_000).unwrap();
    assert_eq!((again[0].event_id.as_str(), again[0].attempts), (events[0].event_id.as_str(), 2));
    assert_eq!(store.events().unwrap()[0].last_error.as_deref(), Some("HTTP 500"));
    // A claimer that died: its lease runs out and another claims the event.
    let taken = store.claim_events("d3", 10, 31_002, 30_000).unwrap();
    assert_eq!(taken.iter().map(|e| (e.seq, e.attempts)).collect::<Vec<_>>(), [(next[0].seq, 2)]);
    assert_eq!(store.release_events("d3").unwrap(), 1);
    assert_eq!(store.claim_events("d4", 1, 31_003, 30_000).unwrap().len(), 1, "released: due at once");
    assert_eq!(store.events_pending().unwrap(), 6);

    // The events go with their relay, at the relay retention.
    assert_eq!(store.prune(u64::MAX, 15, 1_000).unwrap(), Pruned { calldata: 2, relays: 1, events: 5 });
    assert_eq!(store.events().unwrap().len(), 2);
    let (_other, plain) = self::store(engine);
    plain.reserve(&relay("a", 0, 100), &limits, 10).unwrap().unwrap();
    assert!(plain.events().unwrap().is_empty(), "no webhooks, no events");
}

fn retention_drops_call_data_then_records_and_spares_open_relays(engine: Engine) {
    let (_place, store) = store(engine);
    let limits = BudgetLimits::total(u128::MAX);
    let mut ids = Vec::new();
    for nonce in 0..4 {
        let new = NewRelay { input: Bytes::from(vec![0xab; 30_000]), ..relay("s", nonce, 10) };
        ids.push(store.reserve(&new, &limits, 10).unwrap().unwrap().id);
    }
    store.settle(ids[0], &Settlement::of(h(0x1), 1, Outcome::Mined), 100).unwrap();
    store.drop_relay(ids[1], "lost", 200).unwrap();
    store.settle(ids[2], &Settlement::of(h(0x3), 1, Outcome::Reverted), 300).unwrap();
    // ids[3] stays open however old it is.
    assert_eq!(store.prune(200, 100, 1_000).unwrap(), Pruned { calldata: 2, relays: 1, events: 0 });
    let records = store.records().unwrap();
    assert_eq!(records.iter().map(|r| r.id).collect::<Vec<_>>(), ids[1..]);
    assert_eq!(records[0].input, None, "dropped at 200: call data gone");
    assert_eq!(records[1].input.as_ref().map(|input| input.len()), Some(30_000), "settled at 300: kept");
    assert!(records[2].input.is_some(), "open: kept");
    assert_eq!(store.prune(200, 100, 1_000).unwrap(), Pruned::default(), "nothing twice");
    assert_eq!(store.prune(u64::MAX, u64::MAX, 1_000).unwrap(), Pruned { calldata: 1, relays: 2, events: 0 });
    assert_eq!(store.records().unwrap().len(), 1);
    assert!(store.relay_by_hash(h(0x1)).unwrap().is_none(), "its transactions went with it");
}

/// Two stores on one database, as two daemons would open it, each written from several threads
/// at once: the reservations of both never pass what pacing has opened of the one budget (its
/// first slice), a rate window counts exactly
/// across them, a signed request is accepted once and found through either, and an outbox event
/// is leased to one claimer only.
fn two_stores_on_one_database_keep_one_budget_one_count_and_one_book(engine: Engine) {
    const THREADS: usize = 3;
    const ATTEMPTS: u64 = 8;
    let place = Place::new(engine);
    let daemons = [place.open().with_webhook_events(), place.open().with_webhook_events()];
    // 100 wei per relay (10 gas at 10 wei): a first slice of 48,000 ÷ 24 has room for 20 of the
    // 48 attempts.
    let limits =
        BudgetLimits { slices: std::num::NonZeroU64::new(24).unwrap(), ..BudgetLimits::total(48_000) };
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..daemons.len() * THREADS)
            .map(|worker| {
                let store = &daemons[worker % daemons.len()];
                scope.spawn(move || {
                    (0..ATTEMPTS)
                        .map(|nonce| {
                            let counted = store.hit(RateKind::Ip, "one client", 7, 5).unwrap();
                            let reserved =
                                store.reserve(&relay(&format!("w{worker}"), nonce, 10), &limits, 5);
                            (counted, reserved.unwrap())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().unwrap()).collect()
    });
    let accepted: Vec<&Reservation> =
        outcomes.iter().filter_map(|(_, reserved)| reserved.as_ref().ok()).collect();
    assert_eq!(accepted.len(), 20, "exactly what the slice covers");
    let next_slice = Err(Refusal::Slice { opens_at: 5 + BUDGET_WINDOW_SECS / 24 });
    assert!(outcomes.iter().all(|(_, reserved)| reserved.is_ok() || *reserved == next_slice), "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|(counted, _)| *counted).count(), 7, "the limit across both");
    for store in &daemons {
        let state = store.budget(6).unwrap();
        assert_eq!((state.used_wei, state.pending_wei), (2_000, 2_000));
        assert_eq!(store.records().unwrap().len(), 20);
        assert_eq!(store.hits(RateKind::Ip, "one client", 6).unwrap(), 7);
    }

    // The same signed request from both at once: one relay, a duplicate for the other.
    let same = relay("same", 0, 1);
    let both = std::thread::scope(|scope| {
        let racing: Vec<_> = daemons
            .iter()
            .map(|store| scope.spawn(|| store.reserve(&same, &BudgetLimits::total(u128::MAX), 7).unwrap()))
            .collect();
        racing.into_iter().map(|racer| racer.join().unwrap()).collect::<Vec<_>>()
    });
    let won: Vec<_> = both.iter().filter_map(|outcome| outcome.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{both:?}");
    assert!(both.contains(&Err(Refusal::Duplicate)), "{both:?}");
    for store in &daemons {
        let held =
            store.held(same.signer, same.forwarder_nonce, same.digest, &same.signature).unwrap().unwrap();
        assert_eq!(held.relay_id, won[0].relay_id, "one book");
        assert_eq!(store.relay_by_id(&won[0].relay_id).unwrap().unwrap().id, won[0].id);
    }

    // Every relay's first event, claimed from both at once: each leased once.
    let claimed = std::thread::scope(|scope| {
        let claimers: Vec<_> = daemons
            .iter()
            .enumerate()
            .map(|(n, store)| {
                scope.spawn(move || {
                    let owner = format!("daemon {n}");
                    (0..4)
                        .flat_map(|_| store.claim_events(&owner, 3, 1_000, 30_000).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        claimers.into_iter().flat_map(|claimer| claimer.join().unwrap()).collect::<Vec<_>>()
    });
    // A claim that lost its race takes nothing (the other holds the lease); what the racing
    // claims left is still there for the next.
    let rest = daemons[0].claim_events("later", 100, 1_000, 30_000).unwrap();
    let mut seqs: Vec<i64> = claimed.iter().chain(&rest).map(|event| event.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), claimed.len() + rest.len(), "no event leased twice");
    assert_eq!(seqs.len(), 21, "every relay's head, once");
}

/// Two daemons on one store share the keys by leases: a held key cannot be taken until its
/// lease runs out; the taker's fence is higher; the loser learns it at its next renewal, and
/// nothing it records under its old lease is accepted (so nothing is sent). A key given back
/// is free at once; a daemon's own id takes its keys back at start.
fn a_key_is_leased_to_one_daemon_at_a_time_and_a_lost_lease_records_nothing(engine: Engine) {
    let place = Place::new(engine);
    let (one, two) = (place.open(), place.open());
    const B: Address = Address::repeat_byte(0x1b);
    let lanes = [LANE, B];
    // 10 s leases from t = 100: the margin is 3 s.
    let held = one.take_lanes("one", &lanes, 1, Taking::Free, 100, 10).unwrap();
    assert_eq!(held.iter().map(|lease| lease.lane).collect::<Vec<_>>(), [LANE], "one key wanted");
    assert_eq!(held[0].margin_secs, 3);
    let other = two.take_lanes("two", &lanes, 2, Taking::Free, 101, 10).unwrap();
    assert_eq!(other.iter().map(|lease| lease.lane).collect::<Vec<_>>(), [B], "LANE is one's");
    assert_eq!(
        two.lane_holders(&lanes, 101).unwrap(),
        [
            LaneHolder { lane: LANE, holder: Some("one".into()) },
            LaneHolder { lane: B, holder: Some("two".into()) }
        ]
    );

    // One records under its lease while the lease has its margin left, not after.
    let first = one.reserve(&relay("s1", 0, 10), &BudgetLimits::total(u128::MAX), 102).unwrap().unwrap();
    one.mark_sent(&sending(first.id, 0, h(1), 1, 107), &held[0]).unwrap();
    let late = one.mark_sent(&sending(first.id, 0, h(2), 1, 108), &held[0]).unwrap_err();
    assert!(matches!(late, Error::LaneLost(lane) if lane == LANE), "{late:?}");
    assert_eq!(one.relay(first.id).unwrap().unwrap().tx_hash, Some(h(1)), "nothing recorded");

    // One renews in time and keeps it; once it stops renewing, two takes it after it runs out.
    assert!(one.renew_lanes(&held, 108, 10).unwrap().is_empty());
    assert!(two.take_lanes("two", &[LANE], 1, Taking::Free, 117, 10).unwrap().is_empty(), "until 118");
    let taken = two.take_lanes("two", &[LANE], 1, Taking::Free, 118, 10).unwrap();
    assert_eq!(taken.len(), 1);
    assert!(taken[0].fence > held[0].fence, "{taken:?} after {held:?}");
    assert_eq!(two.lane_holders(&[LANE], 118).unwrap()[0].holder.as_deref(), Some("two"));

    // One, back after a stall: its record is refused whatever the time, its renewal says lost.
    let bump = fee_bump(h(3), 2);
    let refused = one.replace(first.id, &bump, &BudgetLimits::total(u128::MAX), 118, &held[0]).unwrap_err();
    assert!(matches!(refused, Error::LaneLost(_)), "{refused:?}");
    assert_eq!(one.relay(first.id).unwrap().unwrap().txs.len(), 1, "the replacement was not recorded");
    assert_eq!(one.renew_lanes(&held, 119, 10).unwrap(), held, "lost");
    // Two sends the relay again under its own lease.
    assert_eq!(
        two.replace(first.id, &bump, &BudgetLimits::total(u128::MAX), 119, &taken[0]).unwrap().map(|_| ()),
        Ok(())
    );

    // Given back, a key is free at once; a lost lease gives back nothing.
    one.release_lanes(&held).unwrap();
    assert_eq!(two.lane_holders(&[LANE], 119).unwrap()[0].holder.as_deref(), Some("two"));
    two.release_lanes(&taken).unwrap();
    assert_eq!(two.lane_holders(&[LANE], 119).unwrap()[0].holder, None);
    let again = one.take_lanes("one", &[LANE], 1, Taking::Free, 120, 10).unwrap();
    assert!(again[0].fence > taken[0].fence);

    // A daemon restarted under its id takes its own keys back at start, not someone else's.
    let restarted = place.open();
    assert!(two.renew_lanes(&other, 119, 10).unwrap().is_empty(), "B stays two's until 129");
    assert!(restarted.take_lanes("one", &[B], 1, Taking::AtStart, 121, 10).unwrap().is_empty(), "two's");
    let back = restarted.take_lanes("one", &[LANE], 1, Taking::AtStart, 121, 10).unwrap();
    assert!(back[0].fence > again[0].fence);
    assert_eq!(one.renew_lanes(&again, 122, 10).unwrap(), again, "the killed run's lease is gone");
}

/// Daemons are counted alive from their heartbeats within a lease; one gone quiet, or gone with
/// a farewell, is counted out.
fn the_daemons_alive_are_those_heard_from_within_a_lease(engine: Engine) {
    let place = Place::new(engine);
    let (one, two) = (place.open(), place.open());
    assert_eq!(one.heartbeat("one", 100, 90).unwrap(), 1);
    assert_eq!(two.heartbeat("two", 101, 91).unwrap(), 2);
    assert_eq!(one.heartbeat("one", 105, 95).unwrap(), 2, "a heartbeat again is the same daemon");
    assert_eq!(one.heartbeat("one", 112, 102).unwrap(), 1, "two went quiet at 101");
    assert_eq!(two.heartbeat("two", 113, 103).unwrap(), 2, "and came back");
    two.farewell("two").unwrap();
    assert_eq!(one.heartbeat("one", 114, 104).unwrap(), 1);
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

/// Polls `sql` on `database` (a psql session of its own) until it returns `want`: the event the
/// test waits for (say, a backend waiting on a lock), within 20 s.
fn until_value(database: &TestDatabase, sql: &str, want: &str) {
    let patience = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while database.value(sql) != want {
        assert!(std::time::Instant::now() < patience, "{sql} never returned {want}");
        std::thread::yield_now();
    }
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

on_both_engines!(
    rate_windows_slide_and_refusals_do_not_count,
    reservations_cannot_overdraw_and_settle_to_the_real_cost,
    the_same_request_is_reserved_once_unless_it_failed,
    signer_counts_recheck_the_limit_and_skip_requests_already_accepted,
    dropped_relays_free_their_request_and_executed_ones_keep_the_worst_case,
    the_budget_resets_a_day_after_first_use_and_persists,
    a_replacement_grows_the_reservation_and_keeps_every_hash,
    a_relay_read_while_it_is_replaced_is_one_commits_state,
    a_withheld_transaction_is_taken_back_and_the_relay_handed_to_its_keys_holder,
    the_reconciler_closes_a_relay_only_as_it_read_it,
    the_l1_fee_reservation_stays_in_every_worst_case,
    a_retry_finds_the_held_relay_by_its_exact_signed_request,
    a_damaged_store_is_its_own_error,
    a_signer_and_a_client_spend_at_most_their_share,
    reservations_open_at_a_reset_and_their_later_costs_are_booked_in_the_next_window,
    replacements_and_cancellations_count_against_both_shares,
    a_reservation_past_the_open_slices_waits_for_the_next_one,
    every_change_clients_see_is_an_event_and_a_relays_events_go_one_at_a_time_in_order,
    retention_drops_call_data_then_records_and_spares_open_relays,
    two_stores_on_one_database_keep_one_budget_one_count_and_one_book,
    a_relay_goes_to_the_candidate_lane_with_the_fewest_open_relays,
    a_relay_handed_off_is_sent_once_and_only_on_its_own_lane,
    a_key_is_leased_to_one_daemon_at_a_time_and_a_lost_lease_records_nothing,
    the_daemons_alive_are_those_heard_from_within_a_lease,
);

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

/// No `sslmode`: a server that is not on loopback must take TLS. The shared test server speaks
/// none; named `db.internal` (reached at `hostaddr=127.0.0.1`), it is refused at connection with
/// how to allow plain text, and without the password. `sslmode=disable` written out connects, and
/// so does the same server named by its loopback address (`prefer`: TLS tried first, refused by
/// the server, then plain text).
#[test]
fn without_sslmode_a_server_off_loopback_in_plain_text_is_refused() {
    let database = TestDatabase::create();
    assert!(database.url().contains("@127.0.0.1:"), "{}", database.url());
    let off_loopback =
        format!("{}?hostaddr=127.0.0.1", database.url().replacen("@127.0.0.1:", "@db.internal:", 1));
    let Err(error) = Store::connect(&DatabaseUrl::parse(&off_loopback).unwrap()) else {
        panic!("a server off loopback without TLS was taken in plain text");
    };
    let error = error.detail();
    assert!(error.contains("write sslmode=disable to connect in plain text"), "{error}");
    assert!(error.contains("connecting to postgres://db.internal:"), "{error}");
    assert!(!error.contains(database.password()), "{error}");
    let plain = DatabaseUrl::parse(&format!("{off_loopback}&sslmode=disable")).unwrap();
    Store::connect(&plain).expect("sslmode=disable written out: plain text");
    Store::connect(&DatabaseUrl::parse(database.url()).unwrap()).expect("loopback: prefer");
}
