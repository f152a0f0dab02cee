//! Retention: call data, then records, dropped while open relays are spared.

use super::*;

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

on_both_engines!(retention_drops_call_data_then_records_and_spares_open_relays);
