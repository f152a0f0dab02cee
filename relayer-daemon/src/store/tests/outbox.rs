//! The outbox: an event for every change clients see, claimed one at a time in order.

use super::*;

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

on_both_engines!(every_change_clients_see_is_an_event_and_a_relays_events_go_one_at_a_time_in_order);
