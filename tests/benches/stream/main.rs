//! What `GET /api/v1/changes/stream` costs as its listeners grow: 1, 100 and 1,000 listeners
//! against the Worker under `wrangler dev` (its `StreamShard` Durable Objects as deployed, the
//! default 4 shards), each a real HTTP client reading the stream (`kya_tests::sse_listener`).
//!
//! For each count, [`RUNS`] times: a batch of [`EVENTS_PER_BATCH`] events is written to the
//! feed's table (`EdgeWorker::execute_index`, as `edge_api::stream` writes them), then the
//! index's run is triggered (`/__scheduled`, the Cron Trigger's run with
//! `INDEX_INTERVAL_SECS = 0`), which hands the batch to the shards. Measured:
//!
//! - **D1 rows read** by the stream: the outlet's query each run and any resume's reads, as D1's
//!   `meta.rows_read` reports them, from the Worker's own log lines ("feed outlets: N D1 rows
//!   read", "feed stream: a resume … read N D1 rows"); per run, and per hour at the pacer's
//!   1,800 runs (2 s).
//! - **Latency** from the batch written and its run started to each listener's receipt of each
//!   event (under the pacer a write waits up to `INDEX_INTERVAL_SECS` more for the next run);
//!   every listener must receive every event once, in order, or the bench fails.
//! - **One resume**: a listener reconnecting with `Last-Event-ID` at the first event of the phase,
//!   its D1 rows read.
//!
//! `cargo bench -p kya-tests --bench stream` prints the report and writes it to
//! `docs/bench/change-stream.md`, in a few minutes. Absolute times depend on the machine (two
//! cores shared here, the listeners' clients on the same machine as `wrangler dev`).

use std::{
    fmt::Write as _,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use alloy::primitives::{Address, B256};
use futures::future::join_all;
use kya_core::{
    AgentStatus,
    feed::{Change, Cursor, Detail, Event, EventBlock, EventType, Standing},
};
use kya_tests::{edge_fixture::EdgeWorker, repo_root, sse_listener::SseListener, worker_profile::Profiler};

/// Listener counts measured.
const LISTENERS: [usize; 3] = [1, 100, 1_000];
/// Runs (each adding one batch) per listener count.
const RUNS: u64 = 10;
/// Runs more per listener count, under the profiler.
const PROFILED_RUNS: u64 = 5;
/// Events in each batch.
const EVENTS_PER_BATCH: u32 = 3;
/// The pacer's runs an hour at its default `INDEX_INTERVAL_SECS` of 2.
const RUNS_PER_HOUR: u64 = 1_800;
/// Most a listener waits for an event before the bench calls it lost.
const PATIENCE: Duration = Duration::from_secs(60);

/// What one listener count measured.
struct Phase {
    listeners: usize,
    /// D1 rows the outlet read over the phase's runs, the profiled ones included.
    outlet_rows: u64,
    /// Listeners the shards reported holding at the phase's last run.
    held: u64,
    /// Milliseconds from each run's start (its batch just written) to each event's receipt, every
    /// listener.
    from_run: Vec<f64>,
    /// The Worker's CPU (V8's profiler) over [`PROFILED_RUNS`] runs that handed out a batch.
    cpu: Duration,
    /// The resume's D1 rows read, and how many events it sent.
    resume_rows: u64,
    resumed_events: usize,
}

fn event(batch: u64, index: u32) -> Event {
    let number = batch * 10 + u64::from(index);
    Event::provisional(
        Cursor { batch, index },
        Change {
            kind: EventType::StatusChanged,
            agent_id: number,
            wallet: Address::repeat_byte(0x42),
            block: EventBlock { number, hash: B256::repeat_byte(7), time: 1_780_000_000 + number },
            log: None,
            standing: Standing {
                is_registered: true,
                is_compliant: false,
                status: Some(AgentStatus::Suspended),
            },
            detail: Detail::Status { from: AgentStatus::Active, to: AgentStatus::Suspended },
        },
    )
}

fn write_batch(worker: &EdgeWorker, batch: u64) {
    let events: Vec<Event> = (0..EVENTS_PER_BATCH).map(|index| event(batch, index)).collect();
    let json = serde_json::to_string(&events).unwrap();
    worker.execute_index(&format!(
        "INSERT INTO feed_batches (batch, created_at, events) VALUES ({batch}, {}, '{json}')",
        1_780_000_000 + batch
    ));
}

/// Sums the numbers that follow `prefix` and precede `suffix` in the log lines of `log`.
fn sum_logged(log: &str, prefix: &str, suffix: &str) -> u64 {
    log.lines()
        .filter_map(|line| {
            let rest = &line[line.find(prefix)? + prefix.len()..];
            rest[..rest.find(suffix)?].trim().parse::<u64>().ok()
        })
        .sum()
}

/// The last number logged between `prefix` and `suffix`.
fn last_logged(log: &str, prefix: &str, suffix: &str) -> u64 {
    log.lines()
        .rev()
        .find_map(|line| {
            let rest = &line[line.find(prefix)? + prefix.len()..];
            rest[..rest.find(suffix)?].trim().parse::<u64>().ok()
        })
        .unwrap_or(0)
}

/// Received messages: (listener, event id, when).
type Receipts = Arc<Mutex<Vec<(usize, String, Instant)>>>;

/// Writes the next batch, triggers the run that hands it out and waits until every listener has
/// it: the milliseconds from the run's start to each receipt.
async fn hand_out(worker: &EdgeWorker, receipts: &Receipts, count: usize, next_batch: &mut u64) -> Vec<f64> {
    let batch = *next_batch;
    *next_batch += 1;
    write_batch(worker, batch);
    // The batch is written: the run that hands it out starts now (under the pacer, the next
    // run starts within INDEX_INTERVAL_SECS).
    let run_started = Instant::now();
    worker.run_index().await;
    // `run_index` returns once the run (and its hand-over) ended; the receipts may still be on
    // their way.
    let expected = count * EVENTS_PER_BATCH as usize;
    let deadline = Instant::now() + PATIENCE;
    let prefix = format!("{batch}-");
    loop {
        let arrived = receipts.lock().unwrap().iter().filter(|(_, id, _)| id.starts_with(&prefix)).count();
        if arrived >= expected {
            break;
        }
        assert!(Instant::now() < deadline, "batch {batch}: {arrived} of {expected} events arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    receipts
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, id, _)| id.starts_with(&prefix))
        .map(|(_, _, at)| at.duration_since(run_started).as_secs_f64() * 1_000.0)
        .collect()
}

async fn phase(worker: &EdgeWorker, profiler: &mut Profiler, count: usize, next_batch: &mut u64) -> Phase {
    let receipts: Receipts = Arc::default();
    let mut tasks = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(100) {
        let opened =
            join_all(chunk.iter().map(|_| SseListener::open(&worker.base, "/api/v1/changes/stream", None)))
                .await;
        for (listener, opened) in chunk.iter().zip(opened) {
            let mut stream = opened.unwrap_or_else(|refused| panic!("a listener was refused: {refused:?}"));
            let receipts = Arc::clone(&receipts);
            let listener = *listener;
            tasks.push(tokio::spawn(async move {
                while let Some(message) = stream.next(Duration::from_secs(3_600)).await {
                    receipts.lock().unwrap().push((listener, message.id, Instant::now()));
                }
            }));
        }
    }
    let log_start = worker.output().len();
    let first_batch = *next_batch;
    let mut from_run = Vec::new();
    for _ in 0..RUNS {
        from_run.extend(hand_out(worker, &receipts, count, next_batch).await);
    }
    // The Worker's CPU over more runs, apart: the profiler slows what it samples.
    profiler.start().await;
    for _ in 0..PROFILED_RUNS {
        hand_out(worker, &receipts, count, next_batch).await;
    }
    let cpu = profiler.stop().await.cpu();
    // Every listener got every event once, in order.
    let receipts = receipts.lock().unwrap().clone();
    let wanted: Vec<String> = (first_batch..*next_batch)
        .flat_map(|batch| (0..EVENTS_PER_BATCH).map(move |index| format!("{batch}-{index}")))
        .collect();
    for listener in 0..count {
        let got: Vec<&String> =
            receipts.iter().filter(|(who, _, _)| *who == listener).map(|(_, id, _)| id).collect();
        assert_eq!(got, wanted.iter().collect::<Vec<_>>(), "listener {listener}");
    }
    // One resume from the phase's first event: what it reads from D1.
    let before = worker.output().len();
    let mut resumed =
        SseListener::open(&worker.base, "/api/v1/changes/stream", Some(&format!("{first_batch}-0")))
            .await
            .unwrap_or_else(|refused| panic!("the resume was refused: {refused:?}"));
    let resumed_events = resumed.take(wanted.len() - 1, Duration::from_secs(10)).await.len();
    assert_eq!(resumed_events, wanted.len() - 1, "the resume sends what followed its cursor");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = worker.output();
    let resume_rows = sum_logged(&log[before..], "read ", " D1 rows in");
    let phase_log = &log[log_start..before];
    for task in tasks {
        task.abort();
    }
    Phase {
        listeners: count,
        outlet_rows: sum_logged(phase_log, "feed outlets: ", " D1 rows read"),
        held: last_logged(phase_log, "shards holding ", " listeners"),
        from_run,
        cpu,
        resume_rows,
        resumed_events,
    }
}

fn percentile(values: &[f64], fraction: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * fraction).round() as usize]
}

fn report(phases: &[Phase], commit: &str, load: (&str, &str)) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "# The change feed's stream: cost and latency by listener count\n");
    let _ = writeln!(
        text,
        "Measured by `cargo bench -p kya-tests --bench stream` (`tests/benches/stream/main.rs`) at {commit}, \
         under `wrangler dev` on this machine (two cores shared with other work; the listeners' clients \
         on the same machine), with the default 4 shards. Each listener count: {RUNS} runs, each adding \
         a batch of {EVENTS_PER_BATCH} events, then {PROFILED_RUNS} more under V8's profiler, every event \
         checked received once and in order by every listener. Load averages (1, 5, 15 min): {} at the \
         start, {} at the end.\n",
        load.0, load.1
    );
    let _ = writeln!(
        text,
        "| listeners | shards' listeners at the last run | D1 rows read by the stream, {} runs | per run | per hour (1,800 runs) | one resume's D1 rows (events sent) |",
        RUNS + PROFILED_RUNS
    );
    let _ = writeln!(text, "|---|---|---|---|---|---|");
    for phase in phases {
        // The outlet's log lines cover the profiled runs too.
        let per_run = phase.outlet_rows as f64 / (RUNS + PROFILED_RUNS) as f64;
        let _ = writeln!(
            text,
            "| {} | {} | {} | {per_run:.1} | {:.0} | {} ({}) |",
            phase.listeners,
            phase.held,
            phase.outlet_rows,
            per_run * RUNS_PER_HOUR as f64,
            phase.resume_rows,
            phase.resumed_events
        );
    }
    let _ = writeln!(
        text,
        "\n| listeners | events received | from the batch written and its run started: median | p95 | max |"
    );
    let _ = writeln!(text, "|---|---|---|---|---|");
    for phase in phases {
        let run = &phase.from_run;
        let _ = writeln!(
            text,
            "| {} | {} | {:.0} ms | {:.0} ms | {:.0} ms |",
            phase.listeners,
            run.len(),
            percentile(run, 0.5),
            percentile(run, 0.95),
            percentile(run, 1.0),
        );
    }
    let _ = writeln!(
        text,
        "\n| listeners | Worker CPU, {PROFILED_RUNS} runs | events delivered | CPU per event delivered | per delivery added, over the row above |"
    );
    let _ = writeln!(text, "|---|---|---|---|---|");
    let mut above: Option<(Duration, u64)> = None;
    for phase in phases {
        let delivered = phase.listeners as u64 * PROFILED_RUNS * u64::from(EVENTS_PER_BATCH);
        let micros = phase.cpu.as_secs_f64() * 1e6;
        let marginal = above.map_or_else(
            || "".to_owned(),
            |(cpu, then)| {
                let more = micros - cpu.as_secs_f64() * 1e6;
                format!("{:.1} µs", more / (delivered - then) as f64)
            },
        );
        let _ = writeln!(
            text,
            "| {} | {:.1} ms | {delivered} | {:.1} µs | {marginal} |",
            phase.listeners,
            micros / 1_000.0,
            micros / delivered as f64,
        );
        above = Some((phase.cpu, delivered));
    }
    text
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The profiles of the Worker's CPU attach to wrangler's DevTools inspector.
    kya_tests::edge_fixture::open_inspectors();
    let worker = EdgeWorker::start_indexed(&[
        ("RPC_URL", "http://127.0.0.1:9".to_owned()),
        ("REGISTRY_ADDRESS", Address::repeat_byte(0x11).to_checksum(None)),
    ])
    .await;
    let commit = kya_tests::commit_measured(&["core", "edge-api", "wrangler.toml", "Cargo.lock"]);
    let mut profiler = Profiler::attach(worker.inspector_port()).await;
    let load_start = kya_tests::load_averages();
    let mut next_batch = 1;
    let mut phases = Vec::new();
    for count in LISTENERS {
        let started = Instant::now();
        phases.push(phase(&worker, &mut profiler, count, &mut next_batch).await);
        eprintln!("{count} listeners: {:.0} s", started.elapsed().as_secs_f64());
    }
    let text = report(&phases, &commit, (&load_start, &kya_tests::load_averages()));
    println!("{text}");
    let path = repo_root().join("docs/bench/change-stream.md");
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    // The reading below the measured tables is written by hand and kept.
    let reading = kept.find("\n## Reading").map(|at| &kept[at..]).unwrap_or("");
    std::fs::write(&path, format!("{text}{reading}")).expect("the report is written");
}
