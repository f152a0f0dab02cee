//! `GET /api/v1/changes` (docs/change-feed.md) under `wrangler dev`, serving what the index's
//! `feed_batches` table holds: pages in feed order, each filter, `next` and `more`, the 400s of
//! malformed or unknown cursors, and the 410 of a cursor past the retention. The batches are
//! written here to the index's SQLite file (`EdgeWorker::execute_index`) from `kya_core::feed`'s
//! own types, as the index's runs will write them; the events the runs derive from a chain are
//! issue 26's next step.

use alloy::primitives::{Address, B256, address};
use kya_core::{
    AgentStatus,
    feed::{Change, Cursor, Detail, Event, EventBlock, EventLog, EventType, Standing},
};
use kya_tests::edge_fixture::{EdgeClient, EdgeWorker};
use serde_json::{Value, json};

pub(super) const A: Address = address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8");
pub(super) const B: Address = address!("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc");

pub(super) fn change(
    kind: EventType,
    agent_id: u64,
    wallet: Address,
    number: u64,
    detail: Detail,
    standing: Standing,
) -> Change {
    Change {
        kind,
        agent_id,
        wallet,
        block: EventBlock { number, hash: B256::repeat_byte(number as u8), time: 1_780_000_000 + number * 2 },
        log: Some(EventLog { transaction_hash: B256::repeat_byte(0x40 + number as u8), log_index: 0 }),
        standing,
        detail,
    }
}

pub(super) const COMPLIANT: Standing =
    Standing { is_registered: true, is_compliant: true, status: Some(AgentStatus::Active) };
pub(super) const SUSPENDED: Standing =
    Standing { is_registered: true, is_compliant: false, status: Some(AgentStatus::Suspended) };

/// Three batches: two registrations (one compliant from the start), a suspension of the first,
/// then the registrations confirmed and the suspension retracted by a reorganisation.
pub(super) fn feed() -> Vec<Vec<Event>> {
    let id = |batch, index| Cursor { batch, index };
    let registered_a =
        Event::provisional(id(1, 0), change(EventType::Registered, 1, A, 10, Detail::None {}, COMPLIANT));
    let compliant_a = Event::provisional(
        id(1, 1),
        change(
            EventType::ComplianceChanged,
            1,
            A,
            10,
            Detail::Compliance { from: false, to: true },
            COMPLIANT,
        ),
    );
    let registered_b =
        Event::provisional(id(1, 2), change(EventType::Registered, 2, B, 11, Detail::None {}, COMPLIANT));
    let suspended_a = Event::provisional(
        id(2, 0),
        change(
            EventType::StatusChanged,
            1,
            A,
            12,
            Detail::Status { from: AgentStatus::Active, to: AgentStatus::Suspended },
            SUSPENDED,
        ),
    );
    let lapsed_a = Event::provisional(
        id(2, 1),
        change(
            EventType::ComplianceChanged,
            1,
            A,
            12,
            Detail::Compliance { from: true, to: false },
            SUSPENDED,
        ),
    );
    vec![
        vec![registered_a, compliant_a, registered_b],
        vec![suspended_a, lapsed_a],
        vec![
            Event::confirmation(id(3, 0), &registered_a),
            Event::confirmation(id(3, 1), &compliant_a),
            Event::confirmation(id(3, 2), &registered_b),
            Event::retraction(id(3, 3), &suspended_a, COMPLIANT),
            Event::retraction(id(3, 4), &lapsed_a, COMPLIANT),
        ],
    ]
}

/// A Worker whose index reads the feed from D1 alone: no chain behind it (the index's step
/// fails and is logged), `vars` added to the settings.
pub(super) async fn chainless_worker(vars: &[(&'static str, String)]) -> EdgeWorker {
    let mut all = vec![
        ("RPC_URL", "http://127.0.0.1:9".to_owned()),
        ("REGISTRY_ADDRESS", Address::repeat_byte(0x11).to_checksum(None)),
    ];
    all.extend_from_slice(vars);
    EdgeWorker::start_indexed(&all).await
}

/// Writes `batches` as the feed's batches `first`, `first + 1`, … (as the index's runs write
/// them: one row each, its events a JSON array of `kya_core::feed::Event`).
pub(super) fn write_batches(worker: &EdgeWorker, first: u64, batches: &[Vec<Event>]) {
    let inserts: Vec<String> = (first..)
        .zip(batches)
        .map(|(number, events)| {
            let json = serde_json::to_string(events).unwrap();
            format!(
                "INSERT INTO feed_batches (batch, created_at, events) VALUES ({number}, {}, '{json}')",
                1_780_000_000 + number
            )
        })
        .collect();
    worker.execute_index(&inserts.join("; "));
}

pub(super) fn json_of(events: &[&Event]) -> Vec<Value> {
    events.iter().map(|event| serde_json::from_str(&event.to_json()).unwrap()).collect()
}

async fn page(api: &EdgeClient, query: &str) -> Value {
    let answer = api.get(&format!("/api/v1/changes{query}")).await;
    assert_eq!(answer.status, 200, "{query}: {}", answer.text);
    assert_eq!(answer.header("cache-control"), Some("no-store"), "{query}");
    answer.body
}

#[tokio::test]
async fn the_feed_is_served_in_order_with_its_filters_cursors_and_retention() {
    // No chain: the feed is read from D1 alone.
    let worker = chainless_worker(&[]).await;
    let api = worker.client();
    assert_eq!(page(&api, "").await, json!({"events": [], "next": null, "more": false}), "an empty feed");
    let empty_after = api.get("/api/v1/changes?after=1-0").await;
    assert_eq!(
        (empty_after.status, empty_after.body["error"].as_str()),
        (404, Some("Agent not found: no event 1-0 in this change feed (its newest batch is 0)"))
    );

    let batches = feed();
    write_batches(&worker, 1, &batches);
    let all: Vec<&Event> = batches.iter().flatten().collect();

    // Everything, in feed order.
    assert_eq!(page(&api, "").await, json!({"events": json_of(&all), "next": "3-4", "more": false}));

    // Pages of two, resumed with `next`, see each event once.
    let mut seen = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let body = page(&api, &query).await;
        seen.extend(body["events"].as_array().unwrap().clone());
        if body["more"] == false {
            break;
        }
        query = format!("?limit=2&after={}", body["next"].as_str().unwrap());
    }
    assert_eq!(seen, json_of(&all));

    // Filters: values of one name match any, names must all match; `next` moves past the rest.
    let of_b = page(&api, &format!("?wallet={}", B.to_string().to_lowercase())).await;
    assert_eq!(of_b, json!({"events": json_of(&[all[2], all[7]]), "next": "3-4", "more": false}));
    let flips = page(&api, "?agentId=1&type=agent.compliance_changed").await;
    assert_eq!(flips["events"], json!(json_of(&[all[1], all[4], all[6], all[9]])));
    let finals = page(&api, "?final=true").await;
    assert_eq!(finals["events"], json!(json_of(&[all[5], all[6], all[7]])));
    let either =
        page(&api, &format!("?wallet={A},{B}&type=agent.registered&type=agent.status_changed&after=1-0"))
            .await;
    assert_eq!(either["events"], json!(json_of(&[all[2], all[3], all[5], all[7], all[8]])));
    let retracted = &page(&api, "?after=3-2&limit=1").await["events"][0];
    assert_eq!(
        (
            retracted["finality"].as_str(),
            retracted["retracts"].as_str(),
            retracted["standing"]["isCompliant"].as_bool()
        ),
        (Some("retracted"), Some("2-0"), Some(true)),
        "the standing once the reorganisation was applied"
    );

    // A cursor past the newest batch names no event (404); malformed ones and filters are 400s
    // that name the parameter.
    let unknown = api.get("/api/v1/changes?after=4-0").await;
    assert_eq!(
        (unknown.status, unknown.body["error"].as_str()),
        (404, Some("Agent not found: no event 4-0 in this change feed (its newest batch is 3)"))
    );
    for (query, message) in [
        (
            "?after=abc",
            "invalid query parameter 'after': must be an event id such as 12-0, as the feed gave it",
        ),
        ("?final=yes", "invalid query parameter 'final': must be true or false"),
        (
            "?type=agent.deleted",
            "invalid query parameter 'type': must be one of agent.registered, agent.status_changed, agent.attested, agent.attestation_expired, agent.revenue_reported, agent.compliance_changed, agent.unregistered",
        ),
        ("?limit=0", "invalid query parameter 'limit': must be a positive integer"),
    ] {
        let answer = api.get(&format!("/api/v1/changes{query}")).await;
        assert_eq!((answer.status, answer.body["error"].as_str()), (400, Some(message)), "{query}");
    }

    // The client's follower and `kya watch`: every event once, in order, resumed where it stopped.
    let mut follower = kya_client::ChangeFollower::new(
        kya_client::ApiClient::new(&worker.base).unwrap(),
        kya_core::feed::ChangesQuery { limit: 3, ..Default::default() },
        std::time::Duration::from_millis(100),
    );
    let mut followed = Vec::new();
    while let Some(event) = follower.try_next().await.expect("the feed reads") {
        followed.push(event);
    }
    assert_eq!(followed.iter().collect::<Vec<_>>(), all, "pages of three, followed to the end");
    assert_eq!(follower.position(), Some(Cursor { batch: 3, index: 4 }));

    let state = tempfile::tempdir().unwrap();
    let cursor_file = state.path().join("cursor");
    let watch = |extra: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_kya-under-test"));
        command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).current_dir(state.path());
        command
            .args(["--api", &worker.base, "--json", "watch", "--once", "--state"])
            .arg(&cursor_file)
            .args(extra);
        let output = command.output().expect("kya runs");
        assert!(output.status.success(), "kya watch: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect::<Vec<Value>>()
    };
    assert_eq!(watch(&["--agent", "1", "--type", "agent.registered"]), json_of(&[all[0], all[5]]));
    assert_eq!(std::fs::read_to_string(&cursor_file).unwrap(), "3-4\n", "where it stopped");
    assert_eq!(watch(&["--agent", "1"]), Vec::<Value>::new(), "resumed: nothing new");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_kya-under-test"))
        .args(["--api", &worker.base, "watch", "--once", "--type", "agent.x"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("invalid query parameter 'type'"));

    // Past the retention: the oldest batch dropped, a cursor in it is gone; without a cursor the
    // page starts at the oldest batch kept.
    worker.execute_index("DELETE FROM feed_batches WHERE batch = 1");
    let gone = api.get("/api/v1/changes?after=1-2").await;
    assert_eq!(gone.status, 410, "{}", gone.text);
    assert_eq!(
        gone.body["error"],
        "Gone: the cursor is older than the change feed keeps (its oldest batch is 2); start again without after"
    );
    assert_eq!(page(&api, "").await["events"], json!(json_of(&all[3..])));
    assert_eq!(page(&api, "?after=2-1").await["events"], json!(json_of(&all[5..])));
    let mut gone = kya_client::ChangeFollower::new(
        kya_client::ApiClient::new(&worker.base).unwrap(),
        kya_core::feed::ChangesQuery {
            after: Some(Cursor { batch: 1, index: 0 }),
            limit: 10,
            ..Default::default()
        },
        std::time::Duration::ZERO,
    );
    let error = gone.try_next().await.expect_err("gone").to_string();
    assert!(error.contains("410") && error.contains("start again without after"), "{error}");
}
