//! Signed webhooks end to end: the real relayer (in-process, or its real binary) against a real
//! anvil, delivering to a real HTTP receiver on loopback (`kya_tests::webhook_receiver`), every
//! delivery verified by Python's `standardwebhooks`, an implementation independent of ours.
//! Every change of several relays (mined; a call that failed; a stuck one replaced, then mined;
//! one cancelled past its deadline) arrives signed, in order per relay, as the relay view at that change; a receiver that is down,
//! then failing, then hanging, gets everything once it is back, one relay's events never overtaking each
//! other; a replayed or altered delivery fails verification; a relayer SIGKILLed with events in
//! its outbox delivers them after it restarts, and one stopped gracefully gives back the leases
//! of the attempts it cut short. A receiver answering a redirect (301, 302, 307, 308) is a
//! failed attempt, retried, naming where it pointed; the target of the redirect gets nothing.

use super::{Engine, TestStore};
use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use alloy::primitives::U256;
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain,
    relayer_fixture::{
        BinaryRelayer, Client, InProcessRelayer, body, forward, set, settings, sign_with_core,
    },
    webhook_receiver::{Delivery, Receiver, verify},
};
use serde_json::{Value, json};

use super::{agent_key, agent_of, anvil, hash_of, pending, receipt, register_call, start_on};

const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

/// A secret as Standard Webhooks writes one: `whsec_` and 32 bytes in base64.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY=";
/// A raw secret (its text's bytes), as an operator may also set it.
const RAW_SECRET: &str = "kya-webhook-test-secret-0123456789abcdef";

/// Relays `signed` and returns its answer (200 or 202).
async fn relayed(client: &Client, signed: &Value) -> Value {
    let (status, answer) = client.relay(signed).await;
    assert!(status == 200 || status == 202, "{status}: {answer}");
    answer
}

/// A signed registration of agent `n`'s fresh wallet.
fn registration(t: &TestChain, n: u64) -> Value {
    let agent = agent_key(n);
    let request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
    body(&request, &sign_with_core(t, &agent, &request).signature)
}

/// The deliveries answered 2xx, grouped by relay, each relay's in the order received.
fn by_relay(deliveries: &[Delivery]) -> BTreeMap<String, Vec<Value>> {
    let mut relays: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for delivery in deliveries.iter().filter(|delivery| delivery.answered == 200) {
        let event = delivery.json();
        relays.entry(event["data"]["relayId"].as_str().unwrap().to_owned()).or_default().push(event);
    }
    relays
}

/// The event types of one relay's deliveries.
fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

/// Whether every event of `relays` ended (its last delivered event is final).
fn ended(deliveries: &[Delivery], relays: &[&str], count: usize) -> bool {
    let grouped = by_relay(deliveries);
    grouped.len() == count
        && relays.iter().all(|id| {
            grouped.get(*id).and_then(|events| events.last()).is_some_and(|event| {
                matches!(event["type"].as_str(), Some("relay.mined" | "relay.call_failed"))
            })
        })
}

/// Every delivery carries what Standard Webhooks asks: the event's id, a timestamp, a `v1`
/// signature that Python's `standardwebhooks` accepts now, and a JSON body whose `id` is the
/// header's, as the relayer's OpenAPI document describes it (its `webhooks`).
fn assert_signed(secret: &str, deliveries: &[Delivery]) {
    let checks: Vec<_> = deliveries.iter().map(|delivery| (delivery.clone(), None)).collect();
    let contract = kya_tests::openapi::relayer();
    let schema = &contract.document()["webhooks"]["relayEvent"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    for (delivery, verdict) in deliveries.iter().zip(verify(secret, &checks)) {
        assert_eq!(verdict, Ok(()), "{delivery:#?}");
        contract
            .validate("RelayEvent", schema, &delivery.json())
            .unwrap_or_else(|error| panic!("{error}: {delivery:#?}"));
        assert_eq!(delivery.json()["id"], delivery.id);
        assert_eq!(delivery.content_type, "application/json");
        assert!(delivery.signature.starts_with("v1,"), "{}", delivery.signature);
    }
}

/// A relay's events: sequences 1, 2, … in the order delivered, each the relay at that status
/// (its type says the view's status; its timestamp is the view's `updatedAt`), the same bytes as
/// the outbox wrote.
fn assert_in_order(events: &[Value]) {
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event["sequence"], n as u64 + 1, "{events:#?}");
        assert_eq!(event["type"], format!("relay.{}", event["data"]["status"].as_str().unwrap()));
        assert_eq!(event["timestamp"], event["data"]["updatedAt"]);
        assert!(event["id"].as_str().unwrap().starts_with("evt_"));
    }
}

async fn every_status_change_is_delivered_signed_in_order_as_the_relay_view(engine: Engine) {
    let t = TestChain::start().await;
    let receiver = Receiver::start().await;
    let url = receiver.url();
    let (_db, relayer) = start_on(
        &t,
        engine,
        &[
            ("WEBHOOK_URL", url.as_str()),
            ("WEBHOOK_SECRET", SECRET),
            ("STUCK_AFTER_BLOCKS", "1000"),
            ("STUCK_AFTER_SECS", "3"),
            ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let client = &relayer.client;

    // Mined at once.
    let mined = relayed(client, &registration(&t, 600)).await;

    // A registry call that fails: sent while its agent is Active, mined in the block where the
    // regulator's suspension (a higher tip) runs first.
    let late = agent_key(601);
    let creator = dev_accounts::address(Role::CreatorA);
    let register = kya_tests::consented_register_call(&t, creator, &late, 0).await;
    t.chain.send(creator, t.registry(), &register).await.unwrap();
    let late_id = U256::from(agent_of(&t, late.address()).await);
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let attest = forward(&t, late.address(), 0, &AgentRegistry::attestComplianceCall { agentId: late_id });
    let failed = relayed(client, &body(&attest, &sign_with_core(&t, &late, &attest).signature)).await;
    super::suspend_ahead_of_the_pool(&t, late_id).await;

    // Stuck: mining stays paused until the relayer has sent it again with higher fees.
    let stuck = relayed(client, &registration(&t, 602)).await;
    let stuck_id = stuck["relayId"].as_str().unwrap();
    let replaced = client.relay_until(stuck_id, |relay| relay["status"] == "replaced").await;
    // The relayer records a replacement before it submits it: mine once the node has it, or the
    // block takes the first transaction and the replacement is taken back (a `relay.sent` again).
    pending(&t, hash_of(&replaced["txHash"])).await;
    anvil(&t, "evm_mine", json!([])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;

    let ids: Vec<&str> =
        [&mined, &failed, &stuck].iter().map(|answer| answer["relayId"].as_str().unwrap()).collect();
    let deliveries = receiver.until(Duration::from_secs(60), |seen| ended(seen, &ids, 3)).await;
    // Nothing more comes: every event was delivered once, the outbox is empty.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let deliveries_after = receiver.deliveries();
    assert_eq!(deliveries_after.len(), deliveries.len(), "no event twice, none left");
    assert!(deliveries.iter().all(|delivery| delivery.answered == 200));
    assert_signed(SECRET, &deliveries);

    let grouped = by_relay(&deliveries);
    assert_eq!(types(&grouped[ids[0]]), ["relay.accepted", "relay.sent", "relay.mined"]);
    assert_eq!(types(&grouped[ids[1]]), ["relay.accepted", "relay.sent", "relay.call_failed"]);
    let stuck_types = types(&grouped[ids[2]]);
    assert_eq!(stuck_types[..3], ["relay.accepted", "relay.sent", "relay.replaced"], "{stuck_types:?}");
    assert!(
        stuck_types[3..stuck_types.len() - 1].iter().all(|kind| *kind == "relay.replaced"),
        "{stuck_types:?}"
    );
    assert_eq!(stuck_types.last(), Some(&"relay.mined"));

    let outbox: BTreeMap<String, String> = relayer
        .relayer
        .store()
        .events()
        .unwrap()
        .into_iter()
        .map(|event| {
            assert!(event.delivered_at.is_some() && event.attempts == 1, "{event:?}");
            (event.event_id, event.body)
        })
        .collect();
    assert_eq!(outbox.len(), deliveries.len());
    for delivery in &deliveries {
        assert_eq!(outbox[&delivery.id], delivery.body, "delivered as written");
    }
    for (answer, id) in [&mined, &failed, &stuck].into_iter().zip(&ids) {
        let events = &grouped[*id];
        assert_in_order(events);
        // The last event is exactly what the lookup answers now.
        let (status, lookup) = client.get(&format!("/relay/{id}")).await;
        assert_eq!(status, 200);
        assert_eq!(events.last().unwrap()["data"], lookup, "{id}");
        // Accepted: reserved, nothing sent yet.
        let accepted = &events[0]["data"];
        assert_eq!(
            (&accepted["txHash"], &accepted["sentAt"], &accepted["transactions"]),
            (&json!(null), &json!(null), &json!([]))
        );
        assert_eq!((accepted["status"].as_str(), &accepted["settledAt"]), (Some("accepted"), &json!(null)));
        assert!(accepted["reservedWei"].is_string(), "{accepted}");
        // Sent: the first transaction, the one the POST answered with.
        let sent = &events[1]["data"];
        let first_hash = &lookup["transactions"][0]["txHash"];
        assert_eq!(&sent["txHash"], first_hash);
        assert_eq!((&sent["settledAt"], &sent["costWei"]), (&json!(null), &json!(null)));
        assert_eq!(sent["relayerNonce"], lookup["relayerNonce"]);
        assert_eq!(answer["relayId"], *id);
    }
    let failed_view = &grouped[ids[1]].last().unwrap()["data"];
    assert_eq!(failed_view["revertReason"], "Agent not active");
    let receipt_of_failed = receipt(&t, &failed).await;
    assert_eq!(
        failed_view["costWei"],
        (u128::from(receipt_of_failed.gas_used) * receipt_of_failed.effective_gas_price).to_string()
    );
    // Each replacement names the hashes before it.
    let stuck_events = &grouped[ids[2]];
    for (n, event) in stuck_events[2..stuck_events.len() - 1].iter().enumerate() {
        let previous = event["data"]["previousTxHashes"].as_array().unwrap();
        assert_eq!(previous.len(), n + 1, "{event}");
        assert_eq!(previous[0], stuck_events[1]["data"]["txHash"]);
        assert_ne!(event["data"]["txHash"], stuck_events[1]["data"]["txHash"]);
    }

    // A delivery replayed later, or altered, fails verification.
    let original =
        deliveries.iter().find(|delivery| delivery.json()["type"] == "relay.mined").unwrap().clone();
    let sent_at: u64 = original.timestamp.parse().unwrap();
    let altered_body =
        Delivery { body: original.body.replace("relay.mined", "relay.failed"), ..original.clone() };
    let altered_id = Delivery { id: format!("{}0", original.id), ..original.clone() };
    let retimed = Delivery { timestamp: (sent_at + 1).to_string(), ..original.clone() };
    let verdicts = verify(
        SECRET,
        &[
            (original.clone(), Some(sent_at + 60)),
            (original.clone(), Some(sent_at + 6 * 60)),
            (altered_body, None),
            (altered_id, None),
            (retimed, None),
        ],
    );
    assert_eq!(
        verdicts,
        [
            Ok(()),
            Err("Message timestamp too old".into()),
            Err("No matching signature found".into()),
            Err("No matching signature found".into()),
            Err("No matching signature found".into()),
        ]
    );
    let other_secret = verify("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", &[(original, None)]);
    assert_eq!(other_secret, [Err("No matching signature found".to_owned())]);

    let (_, metrics) = client.metrics().await;
    assert!(
        metrics.contains(&format!("relayer_webhooks_delivered_total {}\n", deliveries.len())),
        "{metrics}"
    );
    assert!(metrics.contains("relayer_webhook_attempts_failed_total 0\n"), "{metrics}");
    assert!(metrics.contains("relayer_webhooks_pending 0\n"), "{metrics}");
    eprintln!(
        "webhooks: {} events of 3 relays delivered once each, all verified by standardwebhooks",
        deliveries.len()
    );
    relayer.stop().await;
}

async fn a_receiver_down_failing_or_hanging_gets_every_event_in_order_once_it_is_back(engine: Engine) {
    let t = TestChain::start().await;
    let mut receiver = Receiver::down_from_start().await;
    let url = receiver.url();
    let (_db, relayer) = start_on(
        &t,
        engine,
        &[
            ("WEBHOOK_URL", url.as_str()),
            ("WEBHOOK_SECRET", RAW_SECRET),
            ("WEBHOOK_RETRY_FIRST_MS", "50"),
            ("WEBHOOK_RETRY_MAX_MS", "400"),
            ("WEBHOOK_CONCURRENCY", "2"),
            ("WEBHOOK_TIMEOUT_SECS", "1"),
            ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let client = &relayer.client;
    let mut ids = Vec::new();
    for n in 0..4 {
        let answer = relayed(client, &registration(&t, 610 + n)).await;
        ids.push(answer["relayId"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        client.relay_until(id, |relay| relay["status"] == "mined").await;
    }

    // Refusing connections: every attempt fails, nothing is lost.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_webhooks_pending 12\n"), "{metrics}");
    assert!(metrics.contains("relayer_webhooks_delivered_total 0\n"), "{metrics}");
    let refused = failed_attempts(&metrics);
    assert!(refused >= 4, "each relay's first event was tried again and again: {refused}");

    // Back, but answering 500 for a while.
    receiver.answer(500);
    receiver.up().await;
    let failing = receiver.until(Duration::from_secs(30), |seen| seen.len() >= 8).await;
    assert!(failing.iter().all(|delivery| delivery.answered == 500));
    assert!(
        failing.iter().all(|delivery| delivery.json()["sequence"] == 1),
        "while a relay's first event fails, its later ones wait"
    );
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_webhooks_pending 12\n"), "{metrics}");

    // Then hanging: each attempt ends at WEBHOOK_TIMEOUT_SECS, two at a time (the concurrency).
    receiver.answer(0);
    let hanging_from = Instant::now();
    let hung = receiver
        .until(Duration::from_secs(30), |seen| seen.iter().filter(|d| d.answered == 0).count() >= 4)
        .await;
    let hung_for = hanging_from.elapsed();
    assert!(hung.iter().all(|delivery| delivery.json()["sequence"] == 1));
    assert!(
        hung_for >= Duration::from_secs(1),
        "the second pair waited for the first to time out: {hung_for:?}"
    );
    let timed_out = relayer.relayer.store().events().unwrap();
    assert!(
        timed_out
            .iter()
            .any(|event| event.last_error.as_deref().is_some_and(|error| error.starts_with("timed out"))),
        "{timed_out:#?}"
    );

    // Healthy again: everything arrives, each relay's events in order.
    receiver.answer(200);
    let healed = Instant::now();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let deliveries = receiver.until(Duration::from_secs(30), |seen| ended(seen, &refs, 4)).await;
    let caught_up = healed.elapsed();
    assert_signed(RAW_SECRET, &deliveries);
    let grouped = by_relay(&deliveries);
    for id in &ids {
        assert_eq!(types(&grouped[id]), ["relay.accepted", "relay.sent", "relay.mined"]);
        assert_in_order(&grouped[id]);
        // Of every attempt at this relay's events, none came before the one before it was
        // delivered.
        let mut delivered_up_to = 0;
        for delivery in
            deliveries.iter().filter(|delivery| delivery.json()["data"]["relayId"] == *id.as_str())
        {
            let sequence = delivery.json()["sequence"].as_u64().unwrap();
            assert_eq!(
                sequence,
                delivered_up_to + 1,
                "relay {id}: attempt at {sequence} after {delivered_up_to}"
            );
            if delivery.answered == 200 {
                delivered_up_to = sequence;
            }
        }
        assert_eq!(delivered_up_to, 3);
    }
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_webhooks_pending 0\n"), "{metrics}");
    assert!(metrics.contains("relayer_webhooks_delivered_total 12\n"), "{metrics}");
    let failed = failed_attempts(&metrics);
    let answered_500 = deliveries.iter().filter(|delivery| delivery.answered == 500).count() as u64;
    let timeouts = deliveries.iter().filter(|delivery| delivery.answered == 0).count() as u64;
    // Every failed attempt was refused while the receiver was down, answered 500, or timed out.
    assert!(
        failed >= refused + answered_500 + timeouts,
        "{failed} < {refused} + {answered_500} + {timeouts}"
    );
    eprintln!(
        "webhooks: receiver down, failing, then hanging: {failed} failed attempts ({answered_500} answered 500, \
         {timeouts} timed out after 1 s, the rest refused), 12 events delivered {caught_up:?} after it healed"
    );
    relayer.stop().await;
}

/// Redirects are not followed: each of 301, 302, 307 and 308 is a failed attempt (retried as a
/// 5xx is) whose recorded error names the `Location` (without its token); nothing is marked
/// delivered, and the target of the redirect receives nothing.
async fn a_redirect_is_a_failed_attempt_and_is_never_followed(engine: Engine) {
    let t = TestChain::start().await;
    let receiver = Receiver::start().await;
    let target = Receiver::start().await;
    let url = receiver.url();
    let (_db, relayer) = start_on(
        &t,
        engine,
        &[
            ("WEBHOOK_URL", url.as_str()),
            ("WEBHOOK_SECRET", RAW_SECRET),
            ("WEBHOOK_RETRY_FIRST_MS", "50"),
            ("WEBHOOK_RETRY_MAX_MS", "200"),
            ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let target_url = target.url();
    let target_shown = target_url.split("/hooks").next().unwrap().to_owned() + "/…";
    receiver.redirect(301, &target_url);
    let client = &relayer.client;
    let answer = relayed(client, &registration(&t, 690)).await;
    let id = answer["relayId"].as_str().unwrap().to_owned();
    client.relay_until(&id, |relay| relay["status"] == "mined").await;
    for status in [301, 302, 307, 308] {
        receiver.redirect(status, &target_url);
        receiver
            .until(Duration::from_secs(30), |seen| {
                seen.iter().filter(|delivery| delivery.answered == status).count() >= 2
            })
            .await;
        let events = relayer.relayer.store().events().unwrap();
        assert!(events.iter().all(|event| event.delivered_at.is_none()), "{events:#?}");
        let expected = format!("HTTP {status} redirect to {target_shown}");
        assert!(
            events
                .iter()
                .any(|event| event.last_error.as_deref().is_some_and(|error| error.starts_with(&expected))),
            "{expected}: {events:#?}"
        );
        assert!(
            events.iter().all(|event| !event.last_error.as_deref().unwrap_or_default().contains("token")),
            "{events:#?}"
        );
    }
    let seen = receiver.deliveries();
    assert!(seen.iter().all(|delivery| delivery.json()["sequence"] == 1), "later events wait: {seen:#?}");
    assert!(target.deliveries().is_empty(), "the redirect was followed: {:#?}", target.deliveries());
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_webhooks_delivered_total 0\n"), "{metrics}");
    assert!(failed_attempts(&metrics) >= 8, "{metrics}");

    // Answering 200 again, the same receiver gets every event: a redirect was only a failure.
    receiver.answer(200);
    receiver.until(Duration::from_secs(30), |seen| ended(seen, &[id.as_str()], 1)).await;
    assert!(target.deliveries().is_empty());
    eprintln!("webhooks: {} redirects (301, 302, 307, 308) failed, none followed", seen.len());
    relayer.stop().await;
}

/// `relayer_webhook_attempts_failed_total`.
fn failed_attempts(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("relayer_webhook_attempts_failed_total "))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no failed-attempts counter: {metrics}"))
}

async fn a_relayer_killed_with_events_in_its_outbox_delivers_them_after_it_restarts(engine: Engine) {
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    let mut receiver = Receiver::down_from_start().await;
    let mut env = settings(&t, &db);
    set(&mut env, "WEBHOOK_URL", receiver.url());
    set(&mut env, "WEBHOOK_SECRET", SECRET);
    set(&mut env, "WEBHOOK_RETRY_FIRST_MS", "100");
    set(&mut env, "WEBHOOK_RETRY_MAX_MS", "500");
    // A lease the kill leaves behind (an attempt under way) runs out in 2 × 1 s + 5 s.
    set(&mut env, "WEBHOOK_TIMEOUT_SECS", "1");

    let first = BinaryRelayer::start(BINARY, &env);
    let mut ids = Vec::new();
    for n in 0..3 {
        let answer = relayed(&first.client, &registration(&t, 620 + n)).await;
        ids.push(answer["relayId"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        first.client.relay_until(id, |relay| relay["status"] == "mined").await;
    }
    // Killed once each relay's first event has been tried (and refused) at least once.
    for _ in 0..600 {
        let events = db.open().events().unwrap();
        if events.len() == 9
            && events.iter().filter(|event| event.sequence == 1).all(|event| event.attempts >= 1)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let log = first.kill();
    assert!(log.contains("webhook delivery failed"), "{log}");

    // What the outbox holds after the kill: every event, none delivered.
    let held = db.open().events().unwrap();
    assert_eq!(held.len(), 9, "{held:#?}");
    for event in &held {
        assert_eq!(event.delivered_at, None, "{event:?}");
        // Only each relay's first event was tried: the later ones wait for it.
        assert_eq!(event.attempts >= 1, event.sequence == 1, "{event:?}");
    }
    assert!(
        held.iter().all(|event| event.last_error.as_deref().is_none_or(|error| error.contains("connect"))),
        "{held:#?}"
    );

    receiver.up().await;
    let second = BinaryRelayer::start(BINARY, &env);
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let deliveries = receiver.until(Duration::from_secs(30), |seen| ended(seen, &refs, 3)).await;
    assert_signed(SECRET, &deliveries);
    let delivered: Vec<(String, String)> =
        deliveries.iter().map(|delivery| (delivery.id.clone(), delivery.body.clone())).collect();
    let mut expected: Vec<(String, String)> =
        held.iter().map(|event| (event.event_id.clone(), event.body.clone())).collect();
    let mut sorted = delivered.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "exactly the events the outbox held, as written");
    for events in by_relay(&deliveries).values() {
        assert_eq!(types(events), ["relay.accepted", "relay.sent", "relay.mined"]);
        assert_in_order(events);
    }
    let (_, metrics) = second.client.metrics().await;
    assert!(metrics.contains("relayer_webhooks_pending 0\n"), "{metrics}");
    let (clean, log) = second.terminate();
    assert!(clean, "{log}");
}

/// Shutdown lets webhook attempts under way finish within its grace, cuts the rest short and
/// gives back their leases: the next start delivers at once, not after the lease (here 65 s).
async fn shutdown_cuts_hanging_attempts_short_and_gives_back_their_leases(engine: Engine) {
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    let receiver = Receiver::start().await;
    receiver.answer(0);
    let mut env = settings(&t, &db);
    set(&mut env, "WEBHOOK_URL", receiver.url());
    set(&mut env, "WEBHOOK_SECRET", SECRET);
    set(&mut env, "WEBHOOK_TIMEOUT_SECS", "30");
    let first = InProcessRelayer::start(&env).await;
    let answer = relayed(&first.client, &registration(&t, 630)).await;
    let id = answer["relayId"].as_str().unwrap().to_owned();
    first.client.relay_until(&id, |relay| relay["status"] == "mined").await;
    let hung = receiver.until(Duration::from_secs(30), |seen| !seen.is_empty()).await;
    assert_eq!(hung[0].json()["type"], "relay.accepted");

    let stopping = Instant::now();
    first.stop().await;
    let stopped_in = stopping.elapsed();
    // Bounds well under the 30 s that each failure would take, with room for a loaded machine.
    assert!(stopped_in < Duration::from_secs(20), "the 3 s grace, not the 30 s timeout: {stopped_in:?}");

    receiver.answer(200);
    let second = InProcessRelayer::start(&env).await;
    let started = Instant::now();
    let deliveries = receiver.until(Duration::from_secs(30), |seen| ended(seen, &[id.as_str()], 1)).await;
    let delivered_in = started.elapsed();
    assert!(delivered_in < Duration::from_secs(20), "leases given back at shutdown: {delivered_in:?}");
    let events = &by_relay(&deliveries)[&id];
    assert_eq!(types(events), ["relay.accepted", "relay.sent", "relay.mined"]);
    assert_in_order(events);
    assert_eq!(events[0]["id"], hung[0].id, "the same event, tried again");
    assert_signed(SECRET, &deliveries);
    eprintln!(
        "webhooks: shutdown with an attempt hanging took {stopped_in:?}; the next start delivered in {delivered_in:?}"
    );
    second.stop().await;
}

/// A relay stuck past its deadline: its nonce is cancelled. Clients read `expired` from the
/// moment the cancellation is sent, so the receiver gets `relay.expired` while it is on its way
/// (not settled) and again once it is mined (settled, at the cancellation's cost).
async fn a_cancelled_relay_is_expired_once_cancelling_and_again_once_settled(engine: Engine) {
    let t = TestChain::start().await;
    let receiver = Receiver::start().await;
    let url = receiver.url();
    let (_db, relayer) = start_on(
        &t,
        engine,
        &[
            ("WEBHOOK_URL", url.as_str()),
            ("WEBHOOK_SECRET", SECRET),
            ("STUCK_AFTER_BLOCKS", "1000"),
            ("STUCK_AFTER_SECS", "2"),
            ("DEADLINE_MARGIN_SECS", "1"),
            ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let client = &relayer.client;
    let agent = agent_key(640);
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let deadline = t.chain.latest_timestamp().await.unwrap().max(wall) + 3;
    let mut request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    request.deadline = alloy::primitives::aliases::U48::from(deadline);
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    anvil(&t, "evm_setAutomine", json!([false])).await;
    let answer = relayed(client, &signed).await;
    let id = answer["relayId"].as_str().unwrap().to_owned();
    let cancelling = client
        .relay_until(&id, |relay| {
            relay["transactions"].as_array().unwrap().last().unwrap()["kind"] == "cancel"
        })
        .await;
    pending(&t, hash_of(&cancelling["txHash"])).await;
    anvil(&t, "evm_mine", json!([])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let settled = client.relay_until(&id, |relay| relay["settledAt"].is_string()).await;
    assert_eq!(settled["status"], "expired");

    let deliveries = receiver
        .until(Duration::from_secs(30), |seen| {
            by_relay(seen)
                .get(&id)
                .and_then(|events| events.last())
                .is_some_and(|event| event["data"] == settled)
        })
        .await;
    assert_signed(SECRET, &deliveries);
    let events = &by_relay(&deliveries)[&id];
    assert_in_order(events);
    let kinds = types(events);
    assert_eq!(kinds[..2], ["relay.accepted", "relay.sent"], "{kinds:?}");
    let first_expired = kinds.iter().position(|kind| *kind == "relay.expired").expect("expired");
    assert!(kinds[2..first_expired].iter().all(|kind| *kind == "relay.replaced"), "{kinds:?}");
    assert!(kinds[first_expired..].iter().all(|kind| *kind == "relay.expired"), "{kinds:?}");
    assert!(kinds.len() - first_expired >= 2, "expired while cancelling, and once settled: {kinds:?}");
    let on_its_way = &events[first_expired]["data"];
    assert_eq!((&on_its_way["settledAt"], &on_its_way["costWei"]), (&json!(null), &json!(null)));
    assert_eq!(on_its_way["transactions"].as_array().unwrap().last().unwrap()["kind"], "cancel");
    let last = &events.last().unwrap()["data"];
    assert_eq!(*last, settled, "the last event is the settled relay");
    let mined = t.chain.receipt(last["txHash"].as_str().unwrap().parse().unwrap()).await.unwrap();
    assert_eq!(last["costWei"], (u128::from(mined.gas_used) * mined.effective_gas_price).to_string());
    assert_eq!(mined.gas_used, 21_000, "the cancellation was mined");
    relayer.stop().await;
}

super::on_both_stores!(
    every_status_change_is_delivered_signed_in_order_as_the_relay_view,
    a_receiver_down_failing_or_hanging_gets_every_event_in_order_once_it_is_back,
    a_relayer_killed_with_events_in_its_outbox_delivers_them_after_it_restarts,
    shutdown_cuts_hanging_attempts_short_and_gives_back_their_leases,
    a_cancelled_relay_is_expired_once_cancelling_and_again_once_settled,
    a_redirect_is_a_failed_attempt_and_is_never_followed,
);
