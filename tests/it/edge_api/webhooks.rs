//! Webhooks for operators (docs/change-feed.md, "Webhooks") under `wrangler dev`, with its local
//! Queues, Durable Objects and D1: the feed's batches written as `edge_api::changes` writes them,
//! index runs through `/__scheduled` (their outlet enqueues), and receivers on loopback
//! (`webhook_receiver`) whose every attempt is verified by Python's `standardwebhooks`.

use std::time::{Duration, Instant};

use kya_core::feed::Event;
use kya_tests::{
    edge_fixture::EdgeWorker,
    webhook_receiver::{Delivery, Receiver, verify},
};
use serde_json::{Value, json};

use super::changes::{feed, write_batches};

const FLAKY_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY=";
const COMPLIANCE_SECRET: &str = "a raw secret of at least thirty-two bytes, for the filter";
const MOVED_SECRET: &str = "whsec_c2VjcmV0IG9mIHRoZSByZWNlaXZlciB0aGF0IG1vdmVkIGF3YXk=";

/// The ids of `deliveries`, in the order received.
fn ids(deliveries: &[Delivery]) -> Vec<String> {
    deliveries.iter().map(|delivery| delivery.id.clone()).collect()
}

/// The ids of `events` of `agent` (all agents: `None`), in feed order.
fn ids_of(events: &[&Event], agent: Option<u64>) -> Vec<String> {
    events
        .iter()
        .filter(|event| agent.is_none_or(|agent| event.change.agent_id == agent))
        .map(|event| event.id.to_string())
        .collect()
}

/// Every attempt of `deliveries` verified by `standardwebhooks` under `secret`, its body as the
/// edge API's OpenAPI document describes it (its `webhooks`), its `id` the header's.
fn assert_signed(secret: &str, deliveries: &[Delivery]) {
    let checked: Vec<(Delivery, Option<u64>)> =
        deliveries.iter().map(|delivery| (delivery.clone(), None)).collect();
    let verdicts = verify(secret, &checked);
    assert_eq!(verdicts.len(), deliveries.len());
    let contract = kya_tests::openapi::edge();
    let schema = &contract.document()["webhooks"]["changeEvent"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    for (delivery, verdict) in deliveries.iter().zip(verdicts) {
        assert_eq!(verdict, Ok(()), "attempt of {} not verified", delivery.id);
        contract
            .validate("ChangeEvent", schema, &delivery.json())
            .unwrap_or_else(|error| panic!("{error}: {delivery:#?}"));
        assert_eq!(delivery.json()["id"], delivery.id.as_str());
    }
}

/// `/health`'s `deadLetters`: per receiver, its dead letters kept and the newest one's time.
async fn dead_letters_in_health(worker: &EdgeWorker) -> Value {
    worker.client().get("/health").await.body["deadLetters"].clone()
}

/// The dead letters `/health` counts (its `deadLetters`), over every receiver.
fn dead_letter_total(counted: &Value) -> u64 {
    counted.as_array().into_iter().flatten().filter_map(|receiver| receiver["events"].as_u64()).sum()
}

/// The lines of the Worker's log that tell of its queues and webhooks (and any error), for a
/// failure's message: without wrangler's banner (its table of bindings) and colours.
fn webhook_lines(log: &str) -> String {
    log.lines()
        .filter(|line| !line.starts_with("env."))
        .filter(|line| {
            let line = line.to_lowercase();
            ["queue", "webhook", "error"].iter().any(|word| line.contains(word))
        })
        .map(kya_tests::without_colours)
        .collect::<Vec<_>>()
        .join("\n")
}

// On more than one thread: the receivers are tasks of this runtime, and the test's own D1 writes
// (`execute_index`, blocking, and waiting out the runtime's lock on the file) would stop a
// single thread from answering the Worker's deliveries: past `WEBHOOK_TIMEOUT_SECS` the Worker
// rightly counts an attempt failed and delivers the event again (seen: one event three times).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receivers_get_their_events_once_in_order_signed_with_retries_redirects_refused_and_dead_letters() {
    let mut flaky = Receiver::start().await;
    let compliance = Receiver::start().await;
    let moved = Receiver::start().await;
    let target = Receiver::start().await;
    let hung = Receiver::start().await;
    flaky.answer(500);
    hung.answer(0);
    moved.redirect(302, &target.url());
    let receivers = json!([
        { "name": "flaky", "url": flaky.url(), "secret": "WEBHOOK_SECRET_FLAKY" },
        {
            "name": "compliance",
            "url": compliance.url(),
            "secret": "WEBHOOK_SECRET_COMPLIANCE",
            "filter": "agentId=1&type=agent.compliance_changed",
        },
        { "name": "moved", "url": moved.url(), "secret": "WEBHOOK_SECRET_MOVED", "filter": "agentId=2" },
        {
            "name": "hung",
            "url": hung.url(),
            "secret": "WEBHOOK_SECRET_MOVED",
            "filter": "agentId=2&type=agent.registered&final=true",
        },
    ]);
    // No chain: the runs fail at once, and their outlets still hand the feed on.
    let mut worker = EdgeWorker::start_indexed(&[
        ("RPC_URL", "http://127.0.0.1:9".to_owned()),
        ("REGISTRY_ADDRESS", "0x1111111111111111111111111111111111111111".to_owned()),
        ("WEBHOOKS", receivers.to_string()),
        ("WEBHOOK_SECRET_FLAKY", FLAKY_SECRET.to_owned()),
        ("WEBHOOK_SECRET_COMPLIANCE", COMPLIANCE_SECRET.to_owned()),
        ("WEBHOOK_SECRET_MOVED", MOVED_SECRET.to_owned()),
        // Four attempts, two seconds apart: a receiver that stays down is dead-lettered in
        // seconds, but not before the test's second write of the feed has ended (a dead letter
        // is a D1 write, and a second process writing the same local database at that moment
        // was seen to hang the next run on a loaded machine).
        ("WEBHOOK_MAX_ATTEMPTS", "4".to_owned()),
        ("WEBHOOK_RETRY_SECS", "2".to_owned()),
        ("WEBHOOK_RETRY_MAX_SECS", "2".to_owned()),
        // Short for the receiver that hangs, long enough for the others on a loaded machine.
        ("WEBHOOK_TIMEOUT_SECS", "3".to_owned()),
    ])
    .await;

    let clock = Instant::now();
    // Two runs, two handoffs per receiver: batches 1 and 2, then batch 3.
    let batches = feed();
    let all: Vec<&Event> = batches.iter().flatten().collect();
    write_batches(&worker, 1, &batches[..2]);
    worker.run_index().await;
    write_batches(&worker, 3, &batches[2..]);
    worker.run_index().await;

    // The flaky receiver answers 500 to the first attempt of each agent's oldest event, then
    // recovers: every event arrives once, in order per agent, and no agent's event is tried
    // before the one before it was delivered.
    flaky.until(Duration::from_secs(30), |seen| seen.len() >= 2).await;
    flaky.answer(200);
    let failing_since = clock.elapsed();
    let patience = Duration::from_secs(60);
    flaky
        .until(patience, |seen| seen.iter().filter(|delivery| delivery.answered == 200).count() >= all.len())
        .await;
    compliance.until(patience, |seen| seen.len() >= 4).await;
    // Watched through the Worker's `/health`, not by reading D1: a second process on
    // the local database while the dead-letter queue's consumer writes it can make that write
    // meet SQLITE_BUSY, and the consumer's retry comes 60 s later (the queue's `retry_delay`).
    let started = Instant::now();
    loop {
        let counted = dead_letters_in_health(&worker).await;
        if dead_letter_total(&counted) >= 3 {
            break;
        }
        assert!(
            started.elapsed() < patience,
            "{} of 3 dead letters in /health after {patience:?} ({counted}); attempts: moved {}, hung {}; \
             the Worker's queue and webhook lines, last ones last:\n{}",
            dead_letter_total(&counted),
            moved.deliveries().len(),
            hung.deliveries().len(),
            webhook_lines(&worker.output()),
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "webhooks: first failed attempts {failing_since:.1?} after the batches were written (two wrangler d1 \
         execute and two runs), every event delivered and the three dead letters recorded {:.1?} after",
        clock.elapsed()
    );
    // Whatever else was coming has come by now.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let attempts = flaky.deliveries();
    let delivered = flaky.delivered();
    assert!(attempts.iter().any(|attempt| attempt.answered == 500), "it failed first");
    for agent in [1, 2] {
        let of_agent = |deliveries: &[Delivery]| -> Vec<String> {
            ids(deliveries)
                .into_iter()
                .filter(|id| {
                    all.iter().any(|event| event.id.to_string() == *id && event.change.agent_id == agent)
                })
                .collect()
        };
        assert_eq!(of_agent(&delivered), ids_of(&all, Some(agent)), "agent {agent}: each once, in order");
        let tried = of_agent(&attempts);
        let mut sorted = tried.clone();
        sorted.sort_by_key(|id| kya_core::feed::Cursor::parse(id, "id").unwrap());
        assert_eq!(tried, sorted, "agent {agent}: no event tried before the one before it");
    }
    assert_eq!(delivered.len(), all.len(), "every event once: {:?}", ids(&delivered));
    for delivery in &delivered {
        let expected = all.iter().find(|event| event.id.to_string() == delivery.id).unwrap();
        assert_eq!(delivery.body, expected.to_json(), "the event's JSON, as /changes serves it");
        assert_eq!(delivery.content_type, "application/json");
    }
    assert_signed(FLAKY_SECRET, &attempts);

    // A filter selects exactly its events: agent 1's compliance flips, each once, in order.
    let flips = compliance.deliveries();
    assert_eq!(ids(&flips), ["1-1", "2-1", "3-1", "3-4"], "{flips:#?}");
    assert_eq!(
        flips.iter().map(Delivery::json).collect::<Vec<Value>>(),
        [all[1], all[4], all[6], all[9]]
            .iter()
            .map(|event| serde_json::from_str::<Value>(&event.to_json()).unwrap())
            .collect::<Vec<_>>()
    );
    assert_signed(COMPLIANCE_SECRET, &flips);

    // A redirect is never followed: four attempts of each of agent 2's events, all answered
    // 302, nothing at the target; then each is dead-lettered and recorded in D1.
    assert_eq!(ids(&moved.deliveries()), ["1-2", "1-2", "1-2", "1-2", "3-2", "3-2", "3-2", "3-2"]);
    assert!(moved.deliveries().iter().all(|attempt| attempt.answered == 302));
    assert_signed(MOVED_SECRET, &moved.deliveries());
    assert!(target.deliveries().is_empty(), "the redirect's target was reached: {:#?}", target.deliveries());
    let redirected = "HTTP 302 redirect (redirects are not followed: set the receiver's url to the target)";
    let dead = |receiver: &str, event: &Event, error: &str| {
        json!({
            "receiver": receiver,
            "event_id": event.id.to_string(),
            "agent_id": 2,
            "attempts": 4,
            "last_error": error,
            "event": event.to_json(),
        })
    };
    // A receiver that never answers: each attempt given up after WEBHOOK_TIMEOUT_SECS, its one
    // event (agent 2's final registration) dead-lettered after 4; the others never waited on it.
    assert_eq!(ids(&hung.deliveries()), ["3-2", "3-2", "3-2", "3-2"]);
    assert_signed(MOVED_SECRET, &hung.deliveries());

    // No secret and no receiver URL's token in anything the Worker logged (read before the
    // restart below starts its log anew).
    let log = worker.output();
    assert!(log.contains("dead-lettered after 4 attempts"), "the log names the dead letters:\n{log}");
    for secret in [
        FLAKY_SECRET,
        COMPLIANCE_SECRET,
        MOVED_SECRET,
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY",
        "receiver-url-token",
    ] {
        assert!(!log.contains(secret), "{secret} in the Worker's log:\n{log}");
    }

    // `/health` counts them per receiver, with the newest one's time (from the counts the
    // triggers of migration 0009 keep, not from the dead letters); an operator deleting replayed
    // ones takes them off, and a receiver left with none is no longer listed.
    let counted = dead_letters_in_health(&worker).await;
    // The operator reads and deletes with the Worker stopped: locally, a second process on the
    // index under the running Worker can leave its next D1 query unanswered for minutes (seen
    // once in nine runs three at once, right after this deletion).
    let (recorded, newest) = worker
        .restart_after(|stopped| {
            let recorded = stopped.query_index(
                "SELECT receiver, event_id, agent_id, attempts, last_error, event FROM webhook_dead_letters ORDER BY event_id, receiver",
            );
            let newest: Vec<Value> = stopped.query_index(
                "SELECT MAX(dead_at) AS at FROM webhook_dead_letters GROUP BY receiver ORDER BY receiver",
            );
            stopped.execute_index(&format!(
                "DELETE FROM webhook_dead_letters WHERE receiver = 'hung' OR (receiver = 'moved' AND event_id = '{}')",
                all[2].id
            ));
            (recorded, newest.into_iter().map(|row| row["at"].clone()).collect::<Vec<Value>>())
        })
        .await;
    assert_eq!(
        recorded,
        [
            dead("moved", all[2], redirected),
            dead("hung", all[7], "no answer within 3 s"),
            dead("moved", all[7], redirected),
        ]
    );
    let [hung_newest, moved_newest] = &newest[..] else { panic!("the newest of two receivers: {newest:?}") };
    assert!(moved_newest.as_u64().is_some(), "{moved_newest}");
    assert_eq!(
        counted,
        json!([
            {"receiver": "hung", "events": 1, "newestAt": hung_newest},
            {"receiver": "moved", "events": 2, "newestAt": moved_newest},
        ])
    );
    assert_eq!(
        dead_letters_in_health(&worker).await,
        json!([{"receiver": "moved", "events": 1, "newestAt": moved_newest}])
    );
    flaky.down().await;
}
