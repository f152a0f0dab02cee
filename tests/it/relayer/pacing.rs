//! Budget pacing end to end (issue 28): the day's budget opens in slices, so a crowd of clients
//! spending at once closes the relayer for the rest of a slice, not the day. A budget window of
//! 120 s in 4 slices (`BUDGET_WINDOW_SECS`, `BUDGET_SLICES`) stands for the day's 24 hours: the
//! daemon's window runs on the wall clock (anvil's clock only stamps blocks), so the test waits
//! out the rest of a 30 s slice rather than moving any clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kya_core::api::time::iso8601;
use kya_tests::relayer_fixture::{Client, signed_registrations, wei};
use serde_json::Value;

use super::{Engine, agent_key, start};

const WINDOW_SECS: u64 = 120;
const SLICES: u64 = 4;
const SLICE_SECS: u64 = WINDOW_SECS / SLICES;

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Seconds since the epoch of an ISO 8601 time in an answer.
fn unix_of(value: &Value) -> u64 {
    let text = value.as_str().unwrap_or_else(|| panic!("a time: {value}"));
    chrono::DateTime::parse_from_rfc3339(text).expect("RFC 3339").timestamp() as u64
}

/// One refusal by pacing, with when it came.
struct SliceRefusal {
    error: String,
    retry_after: u64,
    sent: u64,
    answered: u64,
}

/// The crowd: `clients` addresses behind the trusted proxy, each relaying fresh registrations
/// (agents from `first_agent` on) at once, until one is refused with a 429. Returns the reserved
/// wei of each relay accepted and the first refusal.
async fn crowd_until_refused(
    t: &kya_tests::TestChain,
    client: &Client,
    first_agent: u64,
    clients: u64,
) -> (Vec<u128>, SliceRefusal) {
    let mut reserved = Vec::new();
    for round in 0..10 {
        let agents: Vec<_> = (0..clients).map(|n| agent_key(first_agent + round * clients + n)).collect();
        let bodies = signed_registrations(t, &agents);
        let answers = futures::future::join_all(bodies.iter().enumerate().map(|(n, body)| async move {
            let sent = unix_now();
            let reply = client.relay_reply(body, &format!("198.51.100.{}", n + 1)).await;
            (sent, reply, unix_now())
        }))
        .await;
        let mut refusal = None;
        for (sent, reply, answered) in answers {
            let answer: Value = serde_json::from_str(&reply.text).unwrap();
            match reply.status {
                200 => {
                    let id = answer["relayId"].as_str().unwrap();
                    let (_, relay) = client.get(&format!("/relay/{id}")).await;
                    reserved.push(wei(&relay["reservedWei"]));
                }
                429 => {
                    let retry_after = reply.header("retry-after").expect("Retry-After").parse().unwrap();
                    let error = answer["error"].as_str().unwrap().to_owned();
                    refusal.get_or_insert(SliceRefusal { error, retry_after, sent, answered });
                }
                status => panic!("{status} {answer}"),
            }
        }
        if let Some(refusal) = refusal {
            return (reserved, refusal);
        }
    }
    panic!("the crowd never spent the slice: {reserved:?}");
}

async fn a_crowd_spends_the_open_slice_and_the_next_one_opens_on_time(engine: Engine) {
    // 0.02 ETH in 4 slices: 0.005 ETH a slice, a few registrations at anvil's fees (each
    // reserves about 0.001 ETH). Shares whole: the crowd is what closes the slice here.
    let (t, _db, relayer) = start(
        engine,
        &[
            ("DAILY_GAS_BUDGET", "0.02"),
            ("BUDGET_SLICES", "4"),
            ("BUDGET_WINDOW_SECS", "120"),
            ("TRUSTED_PROXIES", "127.0.0.1/32"),
            ("RATE_LIMIT_PER_IP", "1000"),
            ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let client = &relayer.client;
    let limit = 20_000_000_000_000_000u128;
    let slice = limit / u128::from(SLICES);
    let (_, before) = client.get("/status").await;
    assert_eq!(before["dailyGasBudget"]["openWei"], slice.to_string(), "the first slice, before any use");
    assert!(before["dailyGasBudget"]["nextSliceAt"].is_null(), "no window runs yet");

    // Six clients at once, until the slice is spent; then, once the relays settled to their real
    // cost (below the worst case reserved), on again, until a round gets nothing through: the
    // slice is spent at what the relays cost, and nothing is pending.
    let mut reserved = Vec::new();
    let mut refusal = None;
    for crowd in 0..6 {
        let (accepted, refused) = crowd_until_refused(&t, client, 5_000 + crowd * 100, 6).await;
        client.settled().await;
        let done = accepted.is_empty();
        reserved.extend(accepted);
        refusal = Some(refused);
        if done {
            break;
        }
    }
    let refusal = refusal.unwrap();
    let (_, status) = client.get("/status").await;
    let budget = &status["dailyGasBudget"];
    let window_start = unix_of(&budget["resetsAt"]) - WINDOW_SECS;
    // The slices open when the refusal came (the first, unless the machine is slow enough for
    // the crowd to run into the next: then that one's rest is spent too, carried over).
    let opened = (refusal.sent - window_start) / SLICE_SECS + 1;
    let opens_at = window_start + opened * SLICE_SECS;
    assert!(refusal.answered < opens_at, "refused within one slice");
    assert_eq!(refusal.error, format!("Gas budget for this hour spent. Try again at {}.", iso8601(opens_at)));
    assert!(
        (opens_at.saturating_sub(refusal.answered).max(1)..=opens_at - refusal.sent)
            .contains(&refusal.retry_after),
        "Retry-After {} between {} and {}",
        refusal.retry_after,
        refusal.sent,
        refusal.answered
    );
    assert_eq!(unix_of(&budget["nextSliceAt"]), opens_at);
    // What is open is the slices opened less what was used.
    let used = wei(&budget["usedWei"]);
    let open = u128::from(opened) * slice - used;
    assert_eq!(wei(&budget["openWei"]), open);
    assert_eq!(wei(&budget["remainingWei"]), limit - used, "the day's budget is not spent");
    // The operator sees the same: what is open, and the refusals by their reason.
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains(&format!("relayer_budget_open_wei {open}\n")), "{metrics}");
    assert!(metrics.contains("relayer_relays_rejected_total{reason=\"budget_slice_spent\"}"), "{metrics}");
    assert!(!reserved.is_empty(), "the crowd relayed before the slice closed");
    eprintln!(
        "relays in {opened} slice(s) of {slice} wei: {} (reserved {reserved:?}), used {used}",
        reserved.len()
    );

    // Closed to everyone until then: a client that spent nothing today is refused alike.
    let newcomer = signed_registrations(&t, &[agent_key(5_900)]);
    if unix_now() + 1 < opens_at {
        let reply = client.relay_reply(&newcomer[0], "203.0.113.9").await;
        assert_eq!(reply.status, 429, "{}", reply.text);
        assert!(reply.text.contains(&iso8601(opens_at)), "{}", reply.text);
    }

    // The next slice opens on time: the newcomer is relayed once it has.
    let wait = opens_at.saturating_sub(unix_now());
    tokio::time::sleep(Duration::from_secs(wait) + Duration::from_millis(300)).await;
    let reply = client.relay_reply(&newcomer[0], "203.0.113.9").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let (_, status) = client.get("/status").await;
    let budget = &status["dailyGasBudget"];
    let next = (opened + 1 < SLICES).then_some(opens_at + SLICE_SECS);
    assert_eq!(budget["nextSliceAt"].as_str().map(|_| unix_of(&budget["nextSliceAt"])), next);
    let open = u128::from(opened + 1) * slice - wei(&budget["usedWei"]);
    assert_eq!(wei(&budget["openWei"]), open, "the earlier slices' rest carried over");
    relayer.stop().await;
}

super::on_both_stores!(a_crowd_spends_the_open_slice_and_the_next_one_opens_on_time);
