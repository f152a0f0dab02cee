//! A relay's first call (`Store::admit`): the held request, the client's count and the
//! signer's, as the three calls it replaced gave them.

use super::*;

/// The signed request `relay` was reserved for.
fn signed(relay: &NewRelay) -> SignedRequest {
    SignedRequest {
        signer: relay.signer,
        nonce: relay.forwarder_nonce,
        digest: relay.digest,
        signature: relay.signature.clone(),
    }
}

fn the_client_is_counted_up_to_its_limit_and_the_signer_read(engine: Engine) {
    let (_place, store) = store(engine);
    let signer = who("s").to_checksum(None);
    let first = store.admit(&signed(&relay("s", 0, 1)), "c", 2, 1_000).unwrap();
    assert_eq!(first, Admission { held: false, client_counted: true, signer_hits: 0 });
    assert_eq!(store.count_signer(who("s"), U256::from(0), 5, 1_000).unwrap(), SignerCount::Counted);
    let second = store.admit(&signed(&relay("s", 1, 1)), "c", 2, 1_001).unwrap();
    assert_eq!(second, Admission { held: false, client_counted: true, signer_hits: 1 });
    // The client's limit reached: refused, and the refusal not counted; the signer still read.
    let third = store.admit(&signed(&relay("s", 2, 1)), "c", 2, 1_002).unwrap();
    assert_eq!(third, Admission { held: false, client_counted: false, signer_hits: 1 });
    assert_eq!(store.hits(RateKind::Ip, "c", 1_002).unwrap(), 2);
    assert_eq!(store.hits(RateKind::Signer, &signer, 1_002).unwrap(), 1, "the signer's count only read");
    assert!(store.admit(&signed(&relay("s", 2, 1)), "d", 2, 1_002).unwrap().client_counted, "clients apart");
    // The first count leaves the window exactly an hour later.
    assert!(
        !store
            .admit(&signed(&relay("s", 2, 1)), "c", 2, 1_000 + RATE_WINDOW_SECS - 1)
            .unwrap()
            .client_counted
    );
    let later = store.admit(&signed(&relay("s", 2, 1)), "c", 2, 1_000 + RATE_WINDOW_SECS).unwrap();
    assert_eq!(later, Admission { held: false, client_counted: true, signer_hits: 0 });
    assert_eq!(store.hits(RateKind::Ip, "c", 1_000 + RATE_WINDOW_SECS).unwrap(), 2);
}

/// Held exactly when `Store::held` finds the request's relay: this very signed request (not
/// another signature of its nonce) with a live relay. A held request counts nothing; once its
/// relay closed without running, the same request counts as a new one.
fn a_held_request_counts_nothing_and_a_closed_one_counts_again(engine: Engine) {
    let (_place, store) = store(engine);
    let accepted = relay("s", 4, 1);
    let reservation = store.reserve(&accepted, &BudgetLimits::total(1_000), 10).unwrap().unwrap();
    let request = signed(&accepted);
    let held_by_store = |store: &Store, request: &SignedRequest| {
        store.held(request.signer, request.nonce, request.digest, &request.signature).unwrap().is_some()
    };

    let held = store.admit(&request, "c", 5, 20).unwrap();
    assert_eq!(held, Admission { held: true, client_counted: false, signer_hits: 0 });
    assert!(held_by_store(&store, &request));
    assert_eq!(store.hits(RateKind::Ip, "c", 20).unwrap(), 0, "a held request is not counted");

    let resigned =
        SignedRequest { digest: keccak256("another"), signature: Bytes::from(vec![2]), ..request.clone() };
    assert!(!held_by_store(&store, &resigned));
    let other = store.admit(&resigned, "c", 5, 20).unwrap();
    assert_eq!(other, Admission { held: false, client_counted: true, signer_hits: 0 }, "another signature");

    store.release(reservation.id, "node refused", 30).unwrap();
    assert!(!held_by_store(&store, &request));
    let closed = store.admit(&request, "c", 5, 40).unwrap();
    assert_eq!(closed, Admission { held: false, client_counted: true, signer_hits: 0 });
    assert_eq!(store.hits(RateKind::Ip, "c", 40).unwrap(), 2);

    // Relayed again and mined: held once more, whatever the client's count.
    let again = store.reserve(&accepted, &BudgetLimits::total(1_000), 50).unwrap().unwrap();
    store.mark_sent(&sending(again.id, 0, h(0x9), 1, 50), &leased(&store)).unwrap();
    store.settle(again.id, &Settlement::of(h(0x9), 1, Outcome::Mined), 60).unwrap();
    let mined = store.admit(&request, "c", 2, 70).unwrap();
    assert_eq!(mined, Admission { held: true, client_counted: false, signer_hits: 0 });
    assert!(held_by_store(&store, &request));
}

on_both_engines!(
    the_client_is_counted_up_to_its_limit_and_the_signer_read,
    a_held_request_counts_nothing_and_a_closed_one_counts_again,
);
