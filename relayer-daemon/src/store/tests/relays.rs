//! The relays: reservations, replacements, withheld transactions, the reconciler, the L1 fee,
//! retries and a damaged store.

use super::*;

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

/// What may hold a relayer nonce in the node: the relays with a transaction there, not those
/// at other nonces, settled, or never sent.
fn the_relays_in_the_pool_at_a_nonce_are_those_sent_there_and_open(engine: Engine) {
    let (_place, store) = store(engine);
    let lease = leased(&store);
    let limits = BudgetLimits::total(1_000_000);
    let ids: Vec<i64> =
        (0..4).map(|n| store.reserve(&relay("s", n, 10), &limits, 5).unwrap().unwrap().id).collect();
    store.mark_sent(&sending(ids[0], 3, h(1), 1, 6), &lease).unwrap();
    store.mark_sent(&sending(ids[1], 3, h(2), 1, 6), &lease).unwrap();
    store.mark_sent(&sending(ids[2], 4, h(3), 1, 6), &lease).unwrap();
    let at =
        |nonce| -> Vec<i64> { store.in_the_pool_at(nonce).unwrap().iter().map(|record| record.id).collect() };
    assert_eq!(at(3), [ids[0], ids[1]]);
    assert_eq!(at(4), [ids[2]]);
    assert_eq!(at(5), Vec::<i64>::new(), "the one never sent holds no nonce");
    store.replace(ids[1], &fee_bump(h(4), 2), &limits, 7, &lease).unwrap().unwrap();
    store.settle(ids[0], &Settlement::of(h(1), 50, Outcome::Mined), 8).unwrap();
    assert_eq!(at(3), [ids[1]], "replaced still holds it; settled no longer");
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

on_both_engines!(
    reservations_cannot_overdraw_and_settle_to_the_real_cost,
    the_same_request_is_reserved_once_unless_it_failed,
    dropped_relays_free_their_request_and_executed_ones_keep_the_worst_case,
    a_replacement_grows_the_reservation_and_keeps_every_hash,
    a_relay_read_while_it_is_replaced_is_one_commits_state,
    a_withheld_transaction_is_taken_back_and_the_relay_handed_to_its_keys_holder,
    the_reconciler_closes_a_relay_only_as_it_read_it,
    the_l1_fee_reservation_stays_in_every_worst_case,
    a_retry_finds_the_held_relay_by_its_exact_signed_request,
    the_relays_in_the_pool_at_a_nonce_are_those_sent_there_and_open,
    a_damaged_store_is_its_own_error,
);
