//! The lanes: the candidate lane, handoffs, key leases and the daemons alive.

use super::*;

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

on_both_engines!(
    a_relay_goes_to_the_candidate_lane_with_the_fewest_open_relays,
    a_relay_handed_off_is_sent_once_and_only_on_its_own_lane,
    a_key_is_leased_to_one_daemon_at_a_time_and_a_lost_lease_records_nothing,
    the_daemons_alive_are_those_heard_from_within_a_lease,
);
