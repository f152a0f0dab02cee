//! `GET /api/v1/changes/stream` (docs/change-feed.md, "Stream") under `wrangler dev`, with its
//! Durable Object shards as deployed: real listeners read each event's exact message after the
//! index's run that hands it out, with `/changes`' filters; a listener that reconnects with
//! `Last-Event-ID` across a run gets what it missed once; the heartbeat comes at its setting;
//! bad cursors get `/changes`' 400, 404 and 410. The batches are written as in
//! `edge_api::changes`; the run is the Cron Trigger's (`INDEX_INTERVAL_SECS = 0`), which hands
//! them to the shards after its step (with no chain here, the step itself fails and is logged).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use kya_core::{
    AgentStatus,
    feed::{Cursor, Detail, Event, EventType},
};
use kya_tests::{
    edge_fixture::{EdgeWorker, fresh_ip},
    sse_listener::{Message, Refused, SseListener},
};
use serde_json::Value;

use super::changes::{A, B, COMPLIANT, SUSPENDED, chainless_worker, change, feed, write_batches};

const PATH: &str = "/api/v1/changes/stream";

/// How long a test waits for an event it expects.
const PATIENCE: Duration = Duration::from_secs(15);
/// How long it watches for an event it does not expect (a few heartbeats).
const QUIET: Duration = Duration::from_secs(3);

/// The messages `events` are as the stream frames them.
fn messages(events: &[&Event]) -> Vec<Message> {
    events
        .iter()
        .map(|event| Message {
            id: event.id.to_string(),
            event: event.change.kind.as_str().to_owned(),
            data: event.to_json(),
        })
        .collect()
}

async fn open(worker: &EdgeWorker, query: &str) -> SseListener {
    open_from(worker, query, None).await
}

async fn open_from(worker: &EdgeWorker, query: &str, last: Option<&str>) -> SseListener {
    let listener = SseListener::open(&worker.base, &format!("{PATH}{query}"), last)
        .await
        .unwrap_or_else(|refused| panic!("{query}: {refused:?}"));
    assert_eq!(
        listener.headers.get("content-type").and_then(|value| value.to_str().ok()),
        Some("text/event-stream; charset=utf-8")
    );
    for (name, value) in [("cache-control", "no-store"), ("access-control-allow-origin", "*")] {
        assert_eq!(listener.headers.get(name).and_then(|value| value.to_str().ok()), Some(value), "{name}");
    }
    assert!(listener.headers.contains_key("x-ratelimit-remaining"), "one request against the quota");
    listener
}

async fn refused(worker: &EdgeWorker, query: &str, last: Option<&str>) -> (u16, Value) {
    match SseListener::open(&worker.base, &format!("{PATH}{query}"), last).await {
        Ok(_) => panic!("{query} {last:?}: a stream opened"),
        Err(Refused { status, body, headers }) => {
            assert_eq!(headers.get("access-control-allow-origin").and_then(|v| v.to_str().ok()), Some("*"));
            (status, serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}")))
        }
    }
}

/// Asserts `listener` receives exactly `expected`, then nothing more for a while.
async fn receives(listener: &mut SseListener, expected: &[Message], what: &str) {
    let got = listener.take(expected.len(), PATIENCE).await;
    assert_eq!(got, expected, "{what}");
    assert_eq!(listener.next(QUIET).await, None, "{what}: nothing more");
}

#[tokio::test]
async fn listeners_get_each_event_once_in_order_with_filters_resumes_and_heartbeats() {
    // No chain: the feed is read from D1 alone; two shards, so listeners land on both.
    let worker = chainless_worker(&[
        ("FEED_STREAM_SHARDS", "2".to_owned()),
        ("FEED_STREAM_HEARTBEAT_SECS", "1".to_owned()),
    ])
    .await;

    // An empty feed: a cursor names no event (404); malformed cursors are 400s, in the query or
    // in the header.
    assert_eq!(
        refused(&worker, "?after=1-0", None).await,
        (
            404,
            serde_json::json!({"error": "Agent not found: no event 1-0 in this change feed (its newest batch is 0)"})
        )
    );
    assert_eq!(refused(&worker, "", Some("1-0")).await.0, 404, "Last-Event-ID is checked as after is");
    assert_eq!(
        refused(&worker, "?after=abc", None).await,
        (
            400,
            serde_json::json!({"error": "invalid query parameter 'after': must be an event id such as 12-0, as the feed gave it"})
        )
    );
    assert_eq!(
        refused(&worker, "", Some("abc")).await,
        (
            400,
            serde_json::json!({"error": "invalid Last-Event-ID header: must be an event id such as 12-0, as the feed gave it (got \"abc\")"})
        )
    );
    assert_eq!(refused(&worker, "?type=agent.x", None).await.0, 400);

    // Listeners before any event: everything, and three filters.
    let mut everything = open(&worker, "").await;
    let mut of_b = open(&worker, &format!("?wallet={}", B.to_string().to_lowercase())).await;
    let mut flips = open(&worker, "?agentId=1&type=agent.compliance_changed").await;
    let mut finals = open(&worker, "?final=true").await;
    let mut leaving = open(&worker, "").await;

    // The heartbeat, at its setting of 1 s, while nothing happens, after the opening frame.
    assert!(
        everything.wait_for(": keep-alive\n\n", 2, Duration::from_secs(10)).await,
        "{}",
        everything.received()
    );
    assert!(
        everything.received().starts_with("retry: 3000\n: from batch 1\n\n: keep-alive\n\n"),
        "{}",
        everything.received()
    );

    let batches = feed();
    let all: Vec<&Event> = batches.iter().flatten().collect();
    write_batches(&worker, 1, &batches[..2]);
    worker.run_index().await;
    receives(&mut everything, &messages(&all[..5]), "batches 1 and 2, in order").await;
    // The leaving listener reads the first two events and goes away.
    assert_eq!(leaving.take(2, PATIENCE).await, messages(&all[..2]));
    drop(leaving);

    write_batches(&worker, 3, &batches[2..]);
    worker.run_index().await;
    receives(&mut everything, &messages(&all[5..]), "batch 3").await;
    receives(&mut of_b, &messages(&[all[2], all[7]]), "wallet B").await;
    receives(&mut flips, &messages(&[all[1], all[4], all[6], all[9]]), "agent 1's compliance").await;
    receives(&mut finals, &messages(&[all[5], all[6], all[7]]), "final only").await;

    // A run that adds nothing sends nothing, and the outlet does not hand batch 3 again.
    worker.run_index().await;
    assert_eq!(everything.next(QUIET).await, None);
    // The outlet's cursor rides in the index's state row, which that run wrote (here its
    // outcome: there is no chain), not in a row of its own.
    let cursor_rows = worker.query_index(
        "SELECT key, json_extract(value, '$.streamThrough') AS through FROM state \
         WHERE key = 'index' OR key LIKE 'outlet:%'",
    );
    assert_eq!(cursor_rows, [serde_json::json!({"key": "index", "through": 3})], "the stream's cursor");

    // The leaving listener comes back after 1-1 with a batch it missed (3) and a new one (4),
    // written while it was away: it gets 1-2 on, once each, then the live ones.
    let expiry = Event::provisional(
        Cursor { batch: 4, index: 0 },
        change(
            EventType::StatusChanged,
            2,
            B,
            14,
            Detail::Status { from: AgentStatus::Active, to: AgentStatus::Suspended },
            SUSPENDED,
        ),
    );
    write_batches(&worker, 4, &[vec![expiry]]);
    worker.run_index().await;
    let mut back = open_from(&worker, "?after=3-0", Some("1-1")).await;
    let missed: Vec<&Event> = all[2..].iter().copied().chain([&expiry]).collect();
    receives(&mut back, &messages(&missed), "the resume: from D1, past 1-1, nothing twice").await;
    assert!(back.received().starts_with("retry: 3000\n: after 1-1\n\n"), "{}", back.received());
    receives(&mut everything, &messages(&[&expiry]), "batch 4 live").await;

    // Then a live batch reaches the resumed listener once.
    let reactivated = Event::provisional(
        Cursor { batch: 5, index: 0 },
        change(
            EventType::StatusChanged,
            2,
            B,
            15,
            Detail::Status { from: AgentStatus::Suspended, to: AgentStatus::Active },
            COMPLIANT,
        ),
    );
    write_batches(&worker, 5, &[vec![reactivated]]);
    worker.run_index().await;
    receives(&mut back, &messages(&[&reactivated]), "live after the resume").await;
    receives(&mut of_b, &messages(&[&expiry, &reactivated]), "wallet B, live").await;

    // A listener that has read everything resumes to nothing new; `after=` alone resumes too.
    let mut current = open(&worker, "?after=5-0").await;
    assert_eq!(current.next(QUIET).await, None);
    let mut from_query = open(&worker, "?after=3-3&agentId=1").await;
    receives(&mut from_query, &messages(&[all[9]]), "after= with a filter").await;

    // The client's follower pages to the end, then follows the stream; so does `kya watch`.
    let of_agent_2 = |after: Option<Cursor>| kya_core::feed::ChangesQuery {
        after,
        limit: 2,
        agent_ids: [2].into(),
        ..Default::default()
    };
    let mut follower = kya_client::ChangeFollower::streaming(
        kya_client::ApiClient::new(&worker.base).unwrap(),
        of_agent_2(None),
    );
    let mut followed = Vec::new();
    for _ in 0..4 {
        followed.push(tokio::time::timeout(PATIENCE, follower.next()).await.expect("in time").unwrap());
    }
    assert_eq!(followed.iter().collect::<Vec<_>>(), [all[2], all[7], &expiry, &reactivated], "paged");
    let next = tokio::spawn(async move { (follower.next().await, follower) });
    let attested = |batch: u64, number: u64| {
        Event::provisional(
            Cursor { batch, index: 0 },
            change(
                EventType::Attested,
                2,
                B,
                number,
                Detail::Attested { attested_at: 1_780_000_000 + number },
                COMPLIANT,
            ),
        )
    };
    write_batches(&worker, 6, &[vec![attested(6, 16)]]);
    worker.run_index().await;
    let (streamed, mut follower) = tokio::time::timeout(PATIENCE, next).await.expect("in time").unwrap();
    assert_eq!(streamed.unwrap(), attested(6, 16), "streamed");
    assert_eq!(follower.position(), Some(Cursor { batch: 6, index: 0 }));
    // Caught up, the follower waits on the stream: batch 7 comes through it, with agent 1's
    // attestation, which its filter drops there.
    let next = tokio::spawn(async move { (follower.next().await, follower) });
    let of_agent_1 = Event::provisional(
        Cursor { batch: 7, index: 1 },
        change(EventType::Attested, 1, A, 16, Detail::Attested { attested_at: 1_780_000_016 }, COMPLIANT),
    );

    let state = tempfile::tempdir().unwrap();
    let cursor_file = state.path().join("cursor");
    std::fs::write(&cursor_file, "4-0\n").unwrap();
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_kya-under-test"))
        .args(["--api", &worker.base, "--json", "watch", "--agent", "2", "--state"])
        .arg(&cursor_file)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kya runs");
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(watch.stdout.take().unwrap()));
    let mut watched = Vec::new();
    for _ in 0..2 {
        watched.push(
            tokio::time::timeout(PATIENCE, lines.next_line()).await.expect("in time").unwrap().unwrap(),
        );
    }
    assert_eq!(watched, [reactivated.to_json(), attested(6, 16).to_json()], "paged from the state file");
    // Caught up: the next event comes through the stream.
    tokio::time::sleep(Duration::from_secs(1)).await;
    write_batches(&worker, 7, &[vec![attested(7, 17), of_agent_1]]);
    worker.run_index().await;
    let line = tokio::time::timeout(PATIENCE, lines.next_line()).await.expect("in time").unwrap().unwrap();
    assert_eq!(line, attested(7, 17).to_json(), "streamed");
    // `kya watch` saves its position after printing the event (a crash between the two shows
    // the event again on resume, never loses it), so the file is read until it moves.
    assert_eq!(saved_position(&cursor_file, "7-0\n").await, "7-0\n");
    watch.kill().await.unwrap();
    let (streamed, mut follower) = tokio::time::timeout(PATIENCE, next).await.expect("in time").unwrap();
    assert_eq!(streamed.unwrap(), attested(7, 17), "streamed");
    let next = tokio::spawn(async move { (follower.next().await, follower) });

    // A listener further behind than one resume reads (8 pages of 16 batches) gets those, its
    // stream ends, and it reconnects from there: every event once, in order, over two streams.
    let many: Vec<Vec<Event>> = (8..=140).map(|batch| vec![attested(batch, batch + 10)]).collect();
    write_batches(&worker, 8, &many);
    worker.run_index().await;
    // The follower's stream dropped agent 1's 7-1: its next event is agent 2's at 8-0.
    let (streamed, _) = tokio::time::timeout(PATIENCE, next).await.expect("in time").unwrap();
    assert_eq!(streamed.unwrap(), many[0][0], "the filter applies on the stream");
    let mut far_behind = open_from(&worker, "", Some("7-1")).await;
    let first: Vec<Message> = far_behind.take(200, Duration::from_secs(5)).await;
    assert_eq!(first, messages(&many[..127].iter().flatten().collect::<Vec<_>>()), "batches 8 to 134");
    let named = ": end resume-pages last-event-id=134-0\nid: 134-0\n\n";
    assert!(far_behind.received().ends_with(named), "{}", far_behind.received());
    let mut rest = open_from(&worker, "", Some(&first.last().unwrap().id)).await;
    receives(&mut rest, &messages(&many[127..].iter().flatten().collect::<Vec<_>>()), "135 to 140").await;

    // Past the retention: 410, whether the cursor comes as after= or as Last-Event-ID.
    worker.execute_index("DELETE FROM feed_batches WHERE batch = 1");
    let gone = serde_json::json!({"error": "Gone: the cursor is older than the change feed keeps (its oldest batch is 2); start again without after"});
    assert_eq!(refused(&worker, "?after=1-2", None).await, (410, gone.clone()));
    assert_eq!(refused(&worker, "", Some("1-2")).await, (410, gone));
    assert_eq!(refused(&worker, "", Some("141-0")).await.0, 404);

    // HEAD: the stream's status and headers, the cursor checked, no stream; OPTIONS: the
    // preflight, which lets a browser send Last-Event-ID.
    let api = worker.client();
    let head = api.request("HEAD", &format!("{PATH}?after=2-0"), &fresh_ip(), &[]).await;
    assert_eq!(
        (head.status, head.header("content-type"), head.text.as_str()),
        (200, Some("text/event-stream; charset=utf-8"), "")
    );
    assert_eq!(api.request("HEAD", &format!("{PATH}?after=1-0"), &fresh_ip(), &[]).await.status, 410);
    let preflight = [
        ("origin", "https://example.org"),
        ("access-control-request-method", "GET"),
        ("access-control-request-headers", "last-event-id"),
    ];
    let options = api.request("OPTIONS", PATH, &fresh_ip(), &preflight).await;
    assert_eq!(
        (options.status, options.header("access-control-allow-headers")),
        (204, Some("Content-Type, If-None-Match, Last-Event-ID, X-D1-Bookmark"))
    );
}

/// The batch a stream opened without a cursor starts at, from its opening comment (in what it
/// received so far).
/// What `kya watch`'s state file holds once it reads `expected`, or after [`PATIENCE`].
async fn saved_position(file: &std::path::Path, expected: &str) -> String {
    let waited_until = tokio::time::Instant::now() + PATIENCE;
    loop {
        let held = std::fs::read_to_string(file).unwrap_or_default();
        if held == expected || tokio::time::Instant::now() >= waited_until {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn start_of(listener: &SseListener) -> u64 {
    let received = listener.received();
    let line = received.lines().find_map(|line| line.strip_prefix(": from batch "));
    line.and_then(|start| start.parse().ok()).unwrap_or_else(|| panic!("no start in {received:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_without_a_cursor_get_every_event_appended_after_they_connected_while_runs_append() {
    let worker = chainless_worker(&[("FEED_STREAM_SHARDS", "2".to_owned())]).await;
    let batches = feed();
    write_batches(&worker, 1, &batches[..1]);
    worker.run_index().await;

    // Listeners connect one after another before, while and after batches 2 and 3 are appended
    // and handed out, each run right as some of them connect.
    let opened = Arc::new(AtomicUsize::new(0));
    let appended = Arc::new(AtomicBool::new(false));
    let connecting = tokio::spawn({
        let (base, opened, appended) = (worker.base.clone(), Arc::clone(&opened), Arc::clone(&appended));
        async move {
            let mut listeners = Vec::new();
            let mut after_appends = 0;
            while after_appends < 2 {
                let appends_done = appended.load(Ordering::SeqCst);
                // However slow the appends (two wrangler commands on a busy machine can take
                // longer than 40 connections), two listeners still connect after them.
                if !appends_done && listeners.len() >= 40 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                after_appends += usize::from(appends_done);
                let listener = match SseListener::open(&base, PATH, None).await {
                    Ok(listener) => listener,
                    // The appends write the Worker's D1 file from another process (wrangler's
                    // `d1 execute`), which a deployed D1 never has: a read meeting that write's
                    // lock fails inside the local D1 as "internal error". Not a stream's fault:
                    // the listener connects again, while the appends run and only then.
                    Err(refused) if !appends_done && refused.body.contains("D1_ERROR") => continue,
                    Err(refused) => panic!("a stream: {refused:?}"),
                };
                listeners.push(listener);
                opened.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            listeners
        }
    });
    // (A connecting task that failed ends the test: it must not wait for ever.)
    while opened.load(Ordering::SeqCst) < 2 {
        assert!(!connecting.is_finished(), "the listeners' task ended before two connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (number, batch) in [(2, &batches[1..2]), (3, &batches[2..3])] {
        tokio::task::block_in_place(|| write_batches(&worker, number, batch));
        worker.run_index().await;
    }
    appended.store(true, Ordering::SeqCst);
    let mut listeners = connecting.await.unwrap();

    // Each gets exactly the events of the batches from its start on (the first batch the feed
    // did not hold when it was accepted), once each, in order: none it connected before is lost,
    // none appended before it connected is sent.
    // Every hand-over has reached the shards by now.
    tokio::time::sleep(QUIET).await;
    let all = batches.iter().flatten().count();
    let mut starts = Vec::new();
    for listener in &mut listeners {
        // Everything it was sent (it can be no more than the whole feed), then its start.
        let got = listener.take(all + 1, Duration::from_millis(300)).await;
        let start = start_of(listener);
        let expected: Vec<&Event> =
            (start..=3).filter_map(|batch| batches.get(batch as usize - 1)).flatten().collect();
        assert_eq!(got, messages(&expected), "a listener from batch {start}");
        starts.push(start);
    }
    let resumed_from_start = worker.output().matches("feed stream: a resume from batch").count();
    eprintln!("the listeners' starts: {starts:?}; {resumed_from_start} read their start from D1");
    assert!(starts.windows(2).all(|pair| pair[0] <= pair[1]), "{starts:?}");
    assert_eq!(starts.first(), Some(&2), "some connected before the appends: {starts:?}");
    assert_eq!(starts.last(), Some(&4), "some after: {starts:?}");
}

/// A client's streams, then the shard's listeners, are capped before a stream opens (429, the
/// API's message, `Retry-After`), and a stream that ends frees its place. A shard handed batches
/// past a gap (a hand-over it missed: the outlet gave up on it, docs/change-feed.md "Stream")
/// tells its live listeners why and ends their streams, naming where to resume; they resume from
/// D1 with `Last-Event-ID`. The gap is made here by leaving batch 2 out of the feed's table, so that
/// the run hands the shard batch 3 after batch 1.
#[tokio::test]
async fn streams_are_capped_per_client_and_per_shard_and_a_shard_that_missed_batches_drops_its_listeners() {
    let worker = chainless_worker(&[
        ("FEED_STREAM_SHARDS", "1".to_owned()),
        ("FEED_STREAM_MAX_LISTENERS", "3".to_owned()),
        ("FEED_STREAM_MAX_PER_CLIENT", "2".to_owned()),
        // A shard learns a stream ended when it fails to write to it: by the next heartbeat.
        ("FEED_STREAM_HEARTBEAT_SECS", "1".to_owned()),
    ])
    .await;
    let batches = feed();
    write_batches(&worker, 1, &batches[..1]);
    worker.run_index().await;
    let open_as = |ip: &'static str| SseListener::open_as(ip, &worker.base, PATH, None);
    let capped = |refused: Result<SseListener, Refused>, what: &str| {
        let Err(Refused { status, body, headers }) = refused else { panic!("{what}: a stream opened") };
        assert_eq!(status, 429, "{what}: {body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            serde_json::json!({"error": "Rate limit exceeded. Try again in 1 minute."}),
            "{what}"
        );
        assert_eq!(headers.get("retry-after").and_then(|value| value.to_str().ok()), Some("60"), "{what}");
    };

    let (x, y, z) = ("203.0.113.1", "203.0.113.2", "2001:db8:1:2::7");
    let mut x1 = open_as(x).await.expect("x's first stream");
    let x2 = open_as(x).await.expect("x's second stream");
    capped(open_as(x).await, "x's third stream (FEED_STREAM_MAX_PER_CLIENT = 2)");
    let y1 = open_as(y).await.expect("y's first stream");
    capped(open_as(z).await, "z's first stream on a full shard (FEED_STREAM_MAX_LISTENERS = 3)");
    // Another address of z's /64 is the same client; the shard is full for it all the same.
    capped(open_as("2001:db8:1:2::8").await, "z's /64");

    // x's first stream ends: its place is free once the shard sees it gone (its next write, at
    // the latest the next heartbeat, fails).
    drop(x1);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    x1 = loop {
        match open_as(z).await {
            Ok(listener) => break listener,
            Err(refused) => {
                assert_eq!(refused.status, 429, "{}", refused.body);
                assert!(tokio::time::Instant::now() < deadline, "the ended stream's place was never freed");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };

    // Batch 3 after batch 1: the shard missed batch 2. Its three live listeners are told so and
    // their streams end, each naming where to resume: after batch 1 (they connected after it,
    // and were offered nothing since), which an id names as `1-4294967295`.
    write_batches(&worker, 3, &batches[2..]);
    worker.run_index().await;
    let after_batch_1 = format!("{}", Cursor { batch: 1, index: u32::MAX });
    let dropped = format!(": end missed-batches last-event-id={after_batch_1}\nid: {after_batch_1}\n\n");
    let mut listeners = vec![x1, x2, y1];
    for listener in &mut listeners {
        assert!(listener.wait_for(&dropped, 1, PATIENCE).await, "{}", listener.received());
        assert_eq!(listener.next(QUIET).await, None, "the stream ended: {}", listener.received());
    }
    let mut resumed = open_from(&worker, "", Some(&after_batch_1)).await;
    let batch_3: Vec<&Event> = batches[2].iter().collect();
    receives(&mut resumed, &messages(&batch_3), "from D1 after the gap").await;
    let warned = "feed stream: this shard missed batches 2 to 2: its listeners resume from D1";
    assert!(worker.output().contains(warned), "the shard's log says why");
}
