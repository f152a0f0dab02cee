//! Every connection of the change feed's stream is bounded (docs/change-feed.md, "Bounded
//! connections"), under `wrangler dev` with the stream's Durable Object shards as deployed: past
//! its byte budget (`FEED_STREAM_CONNECTION_BYTES`) or its lifetime (`FEED_STREAM_CONNECTION_SECS`)
//! the shard ends it with a last frame naming the reason and the id to resume after, a resume's
//! opening included (paged, never built whole); each client here (raw SSE, the Rust client's
//! follower, `kya watch`) resumes there with no event missed and none twice. And which clients
//! share a shard depends on the deployment's key (`FEED_STREAM_SHARD_KEY`).

use std::time::Duration;

use alloy::primitives::keccak256;
use kya_core::feed::{CHANGES_MAX_LIMIT, ChangesQuery, Cursor, Detail, Event, EventType, sse};
use kya_tests::{
    edge_fixture::EdgeWorker,
    sse_listener::{Message, SseListener},
};

use super::changes::{A, B, COMPLIANT, chainless_worker, change, feed, write_batches};

const PATH: &str = "/api/v1/changes/stream";
/// How long a test waits for an event it expects.
const PATIENCE: Duration = Duration::from_secs(15);
/// How long a connection that ended takes to say so, at most, once its last event came.
const ENDING: Duration = Duration::from_secs(3);

/// An attestation of agent 1 (A) or 2 (B) as event `batch-index`.
fn attested(batch: u64, index: u32, agent: u64) -> Event {
    let wallet = if agent == 1 { A } else { B };
    let number = batch * 2 + u64::from(index);
    Event::provisional(
        Cursor { batch, index },
        change(
            EventType::Attested,
            agent,
            wallet,
            number,
            Detail::Attested { attested_at: 1_780_000_000 + number },
            COMPLIANT,
        ),
    )
}

/// Batches `first..=last`, each an attestation of agent 1 then one of agent 2.
fn attestations(first: u64, last: u64) -> Vec<Vec<Event>> {
    (first..=last).map(|batch| vec![attested(batch, 0, 1), attested(batch, 1, 2)]).collect()
}

fn message(event: &Event) -> Message {
    Message { id: event.id.to_string(), event: event.change.kind.as_str().to_owned(), data: event.to_json() }
}

/// The bytes of `event`'s message on the stream.
fn size(event: &Event) -> usize {
    sse::message(event).len()
}

/// The frame a connection ends with, naming `last`.
fn end_frame(reason: &str, last: &str) -> String {
    format!(": end {reason} last-event-id={last}\nid: {last}\n\n")
}

/// Reads `listener` until it ends or stays quiet for `within`: its messages.
async fn drain(listener: &mut SseListener, within: Duration) -> Vec<Message> {
    let mut messages = Vec::new();
    while let Some(message) = listener.next(within).await {
        messages.push(message);
    }
    messages
}

/// The follower's next event. A connection opened while the test writes the Worker's D1 file from
/// another process can meet that write's lock inside the local D1 (500, "D1_ERROR"; a deployed
/// D1 has no such writer: docs/testing.md): the follower keeps its place and connects again.
async fn next_event(follower: &mut kya_client::ChangeFollower) -> Event {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let next = tokio::time::timeout_at(deadline, follower.next()).await.expect("an event in time");
        match next {
            Ok(event) => return event,
            Err(error) if error.to_string().contains("D1_ERROR") => continue,
            Err(error) => panic!("the follower: {error}"),
        }
    }
}

/// Asserts that one connection's `got` (events `expected` from the first) kept to `budget`: every
/// event it was sent fits, with the ones before it, and the next one would not have.
fn within_budget(got: &[Message], events: &[Event], budget: usize, what: &str) {
    let sent: usize = events[..got.len()].iter().map(size).sum();
    assert!(got.len() == 1 || sent <= budget, "{what}: {sent} bytes sent of a {budget}-byte budget");
    if let Some(next) = events.get(got.len()) {
        assert!(sent + size(next) > budget, "{what}: {} more bytes would have fit", size(next));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_its_budget_ends_where_every_client_resumes_without_a_gap_or_a_duplicate() {
    // Three attestations' messages and a little: most connections are sent three events.
    let budget = 3 * size(&attested(10, 0, 1)) + 40;
    let worker = chainless_worker(&[
        ("FEED_STREAM_SHARDS", "1".to_owned()),
        ("FEED_STREAM_CONNECTION_BYTES", budget.to_string()),
    ])
    .await;
    let early = attestations(1, 24);
    write_batches(&worker, 1, &early);
    worker.run_index().await;
    let early: Vec<Event> = early.into_iter().flatten().collect();

    // A resume from the oldest event: its opening is sent a budget at a time, each connection
    // ending with the id of its last event; reconnecting there gives every event once, in order.
    let (mut after, mut got, mut connections) = (early[0].id.to_string(), Vec::new(), 0);
    loop {
        let mut listener = SseListener::open(&worker.base, PATH, Some(&after)).await.expect("a stream");
        let taken = drain(&mut listener, ENDING).await;
        connections += 1;
        let what = format!("connection {connections} after {after}");
        within_budget(&taken, &early[1 + got.len()..], budget, &what);
        if !listener.ended() {
            assert_eq!(got.len() + taken.len(), early.len() - 1, "{what}: caught up, it stays open");
            got.extend(taken);
            break;
        }
        let last = &taken.last().unwrap_or_else(|| panic!("{what}: ended with no event")).id;
        assert!(listener.received().ends_with(&end_frame("budget", last)), "{what}: {}", listener.received());
        after.clone_from(last);
        got.extend(taken);
    }
    assert_eq!(got, early[1..].iter().map(message).collect::<Vec<_>>(), "the whole resume, once each");
    assert!(connections >= 15, "47 events a budget of three at a time: {connections} connections");

    // The clients, caught up and streaming: the Rust client's follower (agent 2 only, so its
    // position moves past agent 1's events), and `kya watch` (everything, from 24-1).
    let mut follower = kya_client::ChangeFollower::streaming(
        kya_client::ApiClient::new(&worker.base).unwrap(),
        ChangesQuery {
            after: Some(early[0].id),
            limit: CHANGES_MAX_LIMIT,
            agent_ids: [2].into(),
            ..Default::default()
        },
    );
    for expected in early.iter().filter(|event| event.change.agent_id == 2) {
        let event = tokio::time::timeout(PATIENCE, follower.next()).await.expect("in time").unwrap();
        assert_eq!(&event, expected, "paged");
    }
    let following = tokio::spawn(async move {
        let mut events = Vec::new();
        while events.len() < 12 {
            events.push(tokio::time::timeout(PATIENCE, follower.next()).await.expect("in time").unwrap());
        }
        (events, follower)
    });
    let state = tempfile::tempdir().unwrap();
    let cursor_file = state.path().join("cursor");
    std::fs::write(&cursor_file, format!("{}\n", early.last().unwrap().id)).unwrap();
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_kya-under-test"))
        .args(["--api", &worker.base, "--json", "watch", "--state"])
        .arg(&cursor_file)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kya runs");
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(watch.stdout.take().unwrap()));
    // A live listener beside them, with no cursor, read raw.
    let mut raw = SseListener::open(&worker.base, PATH, None).await.expect("a stream");
    // Both have paged to the end (nothing to page) and opened their streams.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let late = attestations(25, 36);
    write_batches(&worker, 25, &late);
    worker.run_index().await;
    let late: Vec<Event> = late.into_iter().flatten().collect();

    // The raw listener: one hand-over of 24 events, sent within its budget, then its end.
    let taken = drain(&mut raw, ENDING).await;
    within_budget(&taken, &late, budget, "the live connection");
    assert_eq!(taken, late[..taken.len()].iter().map(message).collect::<Vec<_>>());
    let last = &taken.last().expect("events").id;
    assert!(raw.ended() && raw.received().ends_with(&end_frame("budget", last)), "{}", raw.received());

    // `kya watch`: every event once, in order, over a connection per budget.
    let mut watched = Vec::new();
    while watched.len() < late.len() {
        let line = tokio::time::timeout(PATIENCE, lines.next_line()).await;
        let line = line.unwrap_or_else(|_| panic!("kya watch printed {} of {}", watched.len(), late.len()));
        watched.push(line.unwrap().expect("a line"));
    }
    assert_eq!(watched, late.iter().map(Event::to_json).collect::<Vec<_>>(), "kya watch");
    let (followed, follower) = tokio::time::timeout(PATIENCE, following).await.expect("in time").unwrap();
    let of_agent_2: Vec<Event> = late.iter().filter(|event| event.change.agent_id == 2).copied().collect();
    assert_eq!(followed, of_agent_2, "the follower");
    assert_eq!(follower.position(), of_agent_2.last().map(|event| event.id));
    // No connection carries more than three of these events (the raw listener's above): the
    // clients had them over several, or paged past a connection's end.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), lines.next_line()).await.is_err(),
        "nothing twice"
    );
    watch.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_ends_at_its_lifetime_naming_where_to_resume_but_not_before_it_has_a_place() {
    let worker = chainless_worker(&[
        ("FEED_STREAM_SHARDS", "1".to_owned()),
        ("FEED_STREAM_HEARTBEAT_SECS", "1".to_owned()),
        ("FEED_STREAM_CONNECTION_SECS", "2".to_owned()),
    ])
    .await;
    let batches = feed();

    // On an empty feed a listener without a cursor has no position an id can name (it would
    // reconnect without one, and miss what comes meanwhile): it outlives its lifetime...
    let mut early = SseListener::open(&worker.base, PATH, None).await.expect("a stream");
    assert!(early.wait_for(": keep-alive\n\n", 4, Duration::from_secs(10)).await, "{}", early.received());
    assert!(!early.ended() && !early.received().contains(": end"), "{}", early.received());
    // ... until its first events: then it ends, naming the last.
    write_batches(&worker, 1, &batches[..1]);
    worker.run_index().await;
    let got = drain(&mut early, ENDING).await;
    assert_eq!(got, batches[0].iter().map(message).collect::<Vec<_>>());
    assert!(
        early.ended() && early.received().ends_with(&end_frame("lifetime", "1-2")),
        "{}",
        early.received()
    );

    // A listener with a cursor and nothing new: heartbeats, then its end at its lifetime (give
    // or take a heartbeat).
    let opened = tokio::time::Instant::now();
    let mut quiet = SseListener::open(&worker.base, PATH, Some("1-2")).await.expect("a stream");
    assert_eq!(drain(&mut quiet, Duration::from_secs(6)).await, []);
    let lasted = opened.elapsed();
    assert!(quiet.ended(), "{}", quiet.received());
    assert!(quiet.received().ends_with(&end_frame("lifetime", "1-2")), "{}", quiet.received());
    assert!(lasted >= Duration::from_secs(2) && lasted < Duration::from_secs(5), "it lasted {lasted:?}");

    // A filtered listener's end names the last event it was offered, past the ones its filter
    // passed over: batch 2 is agent 1's alone, so agent 2's listener resumes after 2-1.
    write_batches(&worker, 2, &batches[1..2]);
    worker.run_index().await;
    let mut of_agent_2 =
        SseListener::open(&worker.base, &format!("{PATH}?agentId=2"), Some("1-2")).await.expect("a stream");
    assert_eq!(drain(&mut of_agent_2, Duration::from_secs(6)).await, []);
    assert!(of_agent_2.received().ends_with(&end_frame("lifetime", "2-1")), "{}", of_agent_2.received());

    // The Rust client's follower across lifetime ends: nothing missed, nothing twice.
    let mut follower = kya_client::ChangeFollower::streaming(
        kya_client::ApiClient::new(&worker.base).unwrap(),
        ChangesQuery {
            after: Some(Cursor { batch: 2, index: 1 }),
            limit: CHANGES_MAX_LIMIT,
            agent_ids: [2].into(),
            ..Default::default()
        },
    );
    let next = tokio::spawn(async move { (follower.next().await, follower) });
    // Past a connection's longest life (`quiet` above: under 5 s), the event below can only come
    // on a later connection than the first: the follower resumed where the end said.
    tokio::time::sleep(Duration::from_secs(6)).await;
    write_batches(&worker, 3, &batches[2..]);
    worker.run_index().await;
    let (first, mut follower) = tokio::time::timeout(PATIENCE, next).await.expect("in time").unwrap();
    let mut got = vec![match first {
        Ok(event) => event,
        Err(error) if error.to_string().contains("D1_ERROR") => next_event(&mut follower).await,
        Err(error) => panic!("the follower: {error}"),
    }];
    let of_agent_2: Vec<Event> =
        batches[2].iter().filter(|event| event.change.agent_id == 2).copied().collect();
    while got.len() < of_agent_2.len() {
        got.push(next_event(&mut follower).await);
    }
    assert_eq!(got, of_agent_2, "batch 3's events of agent 2, once each");
}

/// The shard `client` lands on among `shards` under the secret `key`, as `docs/change-feed.md`
/// defines it: the first 8 bytes, big-endian, of keccak256(key ‖ client), where the key is
/// keccak256("kya feed stream shard key\0" ‖ secret).
fn shard_of(secret: &str, client: &str, shards: u64) -> u64 {
    let key = keccak256([b"kya feed stream shard key\0".as_slice(), secret.as_bytes()].concat());
    let hash = keccak256([key.as_slice(), client.as_bytes()].concat());
    u64::from_be_bytes(hash[..8].try_into().unwrap()) % shards
}

/// Each shard's listeners once `clients` opened a stream each (kept in `streams`), as the
/// stream's outlet logs them on handing out batch `batch`.
async fn listeners_by_shard(
    worker: &EdgeWorker,
    clients: &[String],
    streams: &mut Vec<SseListener>,
    batch: u64,
) -> Vec<u64> {
    for client in clients {
        streams.push(SseListener::open_as(client, &worker.base, PATH, None).await.expect("a stream"));
    }
    write_batches(worker, batch, &attestations(batch, batch));
    worker.run_index().await;
    // The run's log reaches the test through wrangler's output pipe, which may lag its answer.
    let handed = format!("feed stream: handed batches up to {batch} ");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let line = loop {
        let output = worker.output();
        if let Some(line) = output.lines().rfind(|line| line.contains(&handed)) {
            break line.to_owned();
        }
        assert!(tokio::time::Instant::now() < deadline, "no hand-over of batch {batch} logged:\n{output}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let counts = line.split("(by shard: ").nth(1).and_then(|rest| rest.split(')').next()).expect(&line);
    counts.split(", ").map(|count| count.parse().expect(&line)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn which_clients_share_a_stream_shard_depends_on_the_deployments_key() {
    const SHARDS: u64 = 4;
    let clients: Vec<String> = (1..=16).map(|host| format!("198.51.100.{host}")).collect();
    let expected = |secret: &str| {
        let mut counts = vec![0; SHARDS as usize];
        for client in &clients {
            counts[shard_of(secret, client, SHARDS) as usize] += 1;
        }
        counts
    };
    let (one, other) = ("one deployment's shard key", "another deployment's shard key");
    // The two keys place these clients differently: the same clients, a different crowd on each
    // shard. (The unkeyed hash of before placed them alike under any key.)
    assert_ne!(expected(one), expected(other));
    for secret in [one, other] {
        let worker = chainless_worker(&[
            ("FEED_STREAM_SHARDS", SHARDS.to_string()),
            ("FEED_STREAM_SHARD_KEY", secret.to_owned()),
        ])
        .await;
        let mut streams = Vec::new();
        let placed = listeners_by_shard(&worker, &clients, &mut streams, 1).await;
        assert_eq!(placed, expected(secret), "under {secret:?}");
        // The same key, the same clients again: the same shards (each now holds them twice).
        let twice: Vec<u64> = expected(secret).iter().map(|count| count * 2).collect();
        let placed = listeners_by_shard(&worker, &clients, &mut streams, 2).await;
        assert_eq!(placed, twice, "stable under {secret:?}");
    }
}
