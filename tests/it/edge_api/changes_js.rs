//! The npm package's change-feed iterator (`core/npm/changes.js`, `kya-core/changes`) under node
//! against the real Worker under `wrangler dev`: `tests/js/changes-iterator.test.mjs` follows the
//! feed while this test writes its batches (as `edge_api::changes` does) and runs the index, which
//! hands each batch to the stream's shards. The node test cuts the stream once, and the Worker
//! ends its connections past a byte budget of two events (`FEED_STREAM_CONNECTION_BYTES`, naming
//! where to resume); the iterator must resume with `Last-Event-ID` each time and yield exactly the
//! feed's events, in order, none twice.

use std::{process::Stdio, time::Duration};

use kya_core::feed::Event;
use kya_tests::{ensure_built, node_test_count, repo_root};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};

use super::changes::{chainless_worker, feed, json_of, write_batches};

/// The checks in `tests/js/changes-iterator.test.mjs`: all must have run and passed.
const NODE_CHECKS: usize = 4;

/// Reads node's stdout until a line starts with `marker`; every line read is kept in `report`.
async fn wait_for(
    lines: &mut Lines<BufReader<tokio::process::ChildStdout>>,
    marker: &str,
    report: &mut String,
) {
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("node's stdout reads") {
            report.push_str(&line);
            report.push('\n');
            if line.starts_with(marker) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "node never said {marker:?}:\n{report}");
}

/// Waits until the Worker has logged `count` resumes of the stream done. A resume reads D1 after
/// its response's headers went out, and this test writes its batches into the local D1's SQLite
/// file from outside the runtime: a write landing amid a resume's read makes the local D1 answer
/// `SQLITE_BUSY`, which ends that stream as a failed read does (a harness race, not the Worker's).
async fn resumes_done(worker: &kya_tests::edge_fixture::EdgeWorker, count: usize) {
    let done = || worker.output().matches("feed stream: a resume from batch").count();
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while done() < count {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{} of {count} resumes done:\n{}", done(), worker.output());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_npm_iterator_yields_the_feed_once_in_order_across_a_reconnect() {
    ensure_built("build-core-wasm.sh");
    // No chain: the feed is read from D1 alone (the index's step fails and is logged). Each
    // connection is sent two of the feed's events at most.
    let batches = feed();
    let largest = batches.iter().flatten().map(|event| kya_core::feed::sse::message(event).len()).max();
    let budget = 2 * largest.expect("events");
    let worker = chainless_worker(&[
        ("FEED_STREAM_SHARDS", "2".to_owned()),
        ("FEED_STREAM_CONNECTION_BYTES", budget.to_string()),
    ])
    .await;
    let all: Vec<&Event> = batches.iter().flatten().collect();
    write_batches(&worker, 1, &batches[..1]);
    worker.run_index().await;

    let mut node = tokio::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "tests/js/changes-iterator.test.mjs"])
        .current_dir(repo_root())
        .env("KYA_API", &worker.base)
        .env("EXPECTED_EVENTS", serde_json::to_string(&json_of(&all)).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();
    let mut report = String::new();

    // Batch 2 while the iterator streams (it cuts that stream after the batch's first event),
    // batch 3 once it has reconnected.
    wait_for(&mut lines, "kya-feed: streaming", &mut report).await;
    // Both streams' resumes (the filtered iterator's and the watched one's) read before the write.
    resumes_done(&worker, 2).await;
    write_batches(&worker, 2, &batches[1..2]);
    worker.run_index().await;
    wait_for(&mut lines, "kya-feed: resumed", &mut report).await;
    resumes_done(&worker, 3).await;
    write_batches(&worker, 3, &batches[2..]);
    worker.run_index().await;

    let finished = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.expect("node's stdout reads") {
            report.push_str(&line);
            report.push('\n');
        }
        let mut stderr = String::new();
        node.stderr.take().unwrap().read_to_string(&mut stderr).await.expect("node's stderr reads");
        report.push_str(&stderr);
        node.wait().await.expect("node ends")
    })
    .await
    .unwrap_or_else(|_| panic!("node did not finish:\n{report}"));
    println!("{report}");
    assert!(
        finished.success(),
        "the iterator's test failed ({finished}):\n{report}\nwrangler:\n{}",
        worker.output()
    );
    assert_eq!(node_test_count(&report, "pass"), Some(NODE_CHECKS), "every check ran:\n{report}");
    assert_eq!(node_test_count(&report, "fail"), Some(0), "{report}");
}
