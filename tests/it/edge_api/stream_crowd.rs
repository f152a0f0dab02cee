//! A crowd cannot stop the change feed's stream (docs/change-feed.md, "Stream"): one shard holds
//! 300 listeners that never read, then a block of 2,000 registrations (the hostile test
//! registry, `index_attacks`) reaches it. A listener that reads gets every event in order, in as
//! many runs as the same block took with no crowd, and the crowd's unread bytes are bounded:
//! each of its listeners is either up to date or dropped with the last comment saying why.
//! The Worker's runtime's memory (workerd, its shards included) is printed for the note.
//!
//! The listeners connect to the runtime's own entry, past wrangler's proxy (as Cloudflare's edge
//! reaches a deployed Worker): that proxy, a `workerd` of wrangler's, keeps a socket to wrangler's
//! process open for every request it passed, and 300 streams through it took it past its 20,000
//! open files. Their sockets are shaped as internet clients' (`SseListener::open_as_internet_client`:
//! a receive buffer of [`CROWD_RECEIVE_BUFFER`], a 1,460-byte segment size): loopback's own shape
//! let the kernel hold megabytes for each (545 MiB in workerd's send queues alone), which took the
//! machine towards TCP memory pressure beside the other tests (a CI run failed with a crowd listener
//! quiet for 20 s, most likely so). Shaped so, what waits for them waits on the server's side:
//! in the shard's queue and in the runtime's buffers (docs/change-feed.md, "A crowd that never
//! reads", says which bounds which).

use std::time::Duration;

use alloy::primitives::U256;
use futures::future::join_all;
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    processes::{Memory, mib, runtime_entry, unsent_bytes, worker_runtime},
    sse_listener::{Message, SseListener},
};
use serde_json::Value;

use super::index_attacks::{HostileRegistry, hostile_chain, in_one_block};

const PATH: &str = "/api/v1/changes/stream";
/// Listeners that never read (`KYA_STREAM_CROWD` sets another number, for comparing figures).
fn crowd_size() -> usize {
    std::env::var("KYA_STREAM_CROWD").ok().and_then(|count| count.parse().ok()).unwrap_or(300)
}
/// The receive buffer of each of the crowd's sockets (the kernel doubles it for its bookkeeping).
const CROWD_RECEIVE_BUFFER: usize = 64 * 1024;
/// Registrations in the block.
const AGENTS: u64 = 2_000;
/// Events a registration gives: `agent.registered`, then `agent.compliance_changed` (the
/// hostile registry attests each agent as it registers it).
const EVENTS_PER_AGENT: usize = 2;
/// Most runs the block may take to reach a listener, crowd or not.
const MOST_RUNS: usize = 12;
/// How long a listener's next message may take while a run hands events out.
const PATIENCE: Duration = Duration::from_secs(20);

/// Registers [`AGENTS`] agents in one block.
async fn register_block(chain: &TestChain, registry: alloy::primitives::Address) -> u64 {
    let calls: Vec<_> = (0..AGENTS / 100)
        .map(|_| HostileRegistry::registerManyCall { count: U256::from(100), operationalScope: "s".into() })
        .collect();
    in_one_block(chain, registry, &calls).await
}

/// Runs the index until `reader` has the `expected` events of the block (the Worker's run after
/// each batch it takes); the number of runs it took.
async fn runs_until_read(worker: &EdgeWorker, reader: &mut SseListener, read: &mut Vec<Message>) -> usize {
    let expected = AGENTS as usize * EVENTS_PER_AGENT;
    for runs in 1..=MOST_RUNS {
        worker.run_index().await;
        // What this run handed out, read to its end (the next message within a moment).
        while let Some(message) = reader.next(Duration::from_millis(1_500)).await {
            read.push(message);
        }
        let registrations = read.iter().filter(|message| message.event == "agent.registered").count();
        if registrations >= AGENTS as usize && read.len() >= expected {
            return runs;
        }
    }
    let output = worker.output();
    let log: Vec<&str> = output
        .lines()
        .filter(|line| line.contains("index run") || line.contains("feed"))
        .map(str::trim)
        .collect();
    panic!(
        "after {MOST_RUNS} runs the reader has {} of {expected} events; the runs:\n{}",
        read.len(),
        log.join("\n")
    );
}

/// The whole feed as `/changes` serves it, framed as the stream frames it.
async fn whole_feed(worker: &EdgeWorker) -> Vec<Message> {
    let api = worker.client();
    let (mut messages, mut after) = (Vec::new(), String::new());
    loop {
        let page = api.get(&format!("/api/v1/changes?limit=1000{after}")).await;
        assert_eq!(page.status, 200, "{}", page.text);
        for event in page.body["events"].as_array().unwrap() {
            messages.push(Message {
                id: event["id"].as_str().unwrap().to_owned(),
                event: event["type"].as_str().unwrap().to_owned(),
                data: serde_json::to_string(event).unwrap(),
            });
        }
        if page.body["more"] != true {
            return messages;
        }
        after = format!("&after={}", page.body["next"].as_str().unwrap());
    }
}

/// Asserts `read` is the feed from its first message to its end: a listener's exact messages,
/// in order, none missing, once the runs have stopped.
async fn assert_whole(worker: &EdgeWorker, reader: &mut SseListener, read: &mut Vec<Message>, what: &str) {
    while let Some(message) = reader.next(Duration::from_secs(3)).await {
        read.push(message);
    }
    let feed = whole_feed(worker).await;
    let first = feed.iter().position(|message| message.id == read[0].id).expect("the reader's first event");
    let expected = &feed[first..];
    assert_eq!(read.len(), expected.len(), "{what}: the feed from the reader's first event");
    for (got, expected) in read.iter().zip(expected) {
        assert_eq!((&got.id, &got.event), (&expected.id, &expected.event), "{what}");
        let (got_json, expected_json): (Value, Value) =
            (serde_json::from_str(&got.data).unwrap(), serde_json::from_str(&expected.data).unwrap());
        assert_eq!(got_json, expected_json, "{what}: message {}", got.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_listeners_that_never_read_hold_back_neither_a_reader_nor_the_shards_memory() {
    let (chain, registry) = hostile_chain().await;
    let mut vars = chain_vars(&chain.rpc_url(), registry);
    // One shard holds every listener; its caps are the defaults.
    vars.push(("FEED_STREAM_SHARDS", "1".to_owned()));
    let worker = EdgeWorker::start_indexed(&vars).await;
    let runtimes = worker.runtimes();
    let runtime = worker_runtime(&runtimes).expect("the Worker's workerd");
    let entry = runtime_entry(&runtimes).await.expect("the runtime's entry");
    worker.run_index().await;

    // With no crowd: the runs a block of 2,000 registrations takes to reach a reader.
    let mut alone = SseListener::open(&entry, PATH, None).await.expect("a stream");
    register_block(&chain, registry).await;
    let mut read_alone = Vec::new();
    let runs_alone = runs_until_read(&worker, &mut alone, &mut read_alone).await;
    assert_whole(&worker, &mut alone, &mut read_alone, "the reader with no crowd").await;
    drop(alone);

    // The crowd: 300 listeners that read their response's headers and nothing more.
    let idle = Memory::of(runtime).expect("workerd's memory");
    let crowd_size = crowd_size();
    let mut crowd = join_all(
        (0..crowd_size).map(|_| SseListener::open_as_internet_client(&entry, PATH, CROWD_RECEIVE_BUFFER)),
    )
    .await;
    let crowd: Vec<SseListener> = crowd.drain(..).map(|opened| opened.expect("a crowd's stream")).collect();
    let with_crowd = Memory::of(runtime).unwrap();
    let mut reader = SseListener::open(&entry, PATH, None).await.expect("the reader's stream");
    register_block(&chain, registry).await;
    let mut read = Vec::new();
    let runs = runs_until_read(&worker, &mut reader, &mut read).await;
    let after = Memory::of(runtime).unwrap();
    let unsent = unsent_bytes(runtime);
    assert_whole(&worker, &mut reader, &mut read, "the reader in the crowd").await;
    assert_eq!(runs, runs_alone, "the crowd costs the reader no run");

    // Each of the crowd, read now, holds the reader's messages up to where it was dropped, with
    // the last comment saying why, or all of them.
    let behind = ": dropped: more than FEED_STREAM_BACKLOG_BYTES of events unread";
    let most = read.len() + 1;
    let outcomes = join_all(crowd.into_iter().map(|mut listener| async move {
        let got = listener.take(most, PATIENCE).await;
        (got, listener.received().contains(behind), listener.ended())
    }))
    .await;
    let mut dropped = 0;
    for (got, was_dropped, ended) in &outcomes {
        assert!(got.len() <= read.len(), "a crowd's listener got more than the reader");
        assert_eq!(got[..], read[..got.len()], "a crowd's listener gets the feed's order");
        if *was_dropped {
            dropped += 1;
        } else {
            assert_eq!(
                got.len(),
                read.len(),
                "one not dropped got everything (its stream {})",
                if *ended { "ended without a word" } else { "went quiet" }
            );
        }
    }
    eprintln!(
        "crowd of {crowd_size} on one shard, {AGENTS} registrations: {runs} runs (alone {runs_alone}); \
         {dropped} of the crowd dropped for unread bytes; workerd resident {} idle (peak so far {}), \
         {} with the crowd, {} after the block, peak {}; {} sent to the crowd sits unread in the \
         kernel's socket buffers",
        mib(idle.resident),
        mib(idle.peak),
        mib(with_crowd.resident),
        mib(after.resident),
        mib(after.peak),
        mib(unsent)
    );
}
