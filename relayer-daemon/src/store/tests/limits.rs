//! The limits: rate windows, the budget (its reset and its paced slices), the signer's and the
//! client's shares, and two stores keeping one budget and one count.

use super::*;

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

on_both_engines!(
    rate_windows_slide_and_refusals_do_not_count,
    signer_counts_recheck_the_limit_and_skip_requests_already_accepted,
    the_budget_resets_a_day_after_first_use_and_persists,
    a_signer_and_a_client_spend_at_most_their_share,
    reservations_open_at_a_reset_and_their_later_costs_are_booked_in_the_next_window,
    replacements_and_cancellations_count_against_both_shares,
    a_reservation_past_the_open_slices_waits_for_the_next_one,
    two_stores_on_one_database_keep_one_budget_one_count_and_one_book,
);
