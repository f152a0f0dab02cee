//! Latency of the whole system on loopback, with every part real: anvil with the registry seeded
//! by `seed_bulk`, the Worker under `wrangler dev` behind a counting JSON-RPC proxy, and the relayer
//! daemon (release build) sending real EIP-712-signed requests.
//!
//! `cargo bench -p kya-tests --bench system` (or `bash scripts/bench.sh`) prints the tables and
//! writes them to `docs/bench/system-<agents>.md`. `BENCH_AGENTS` sets the registry size (default
//! 1,000).
//! Absolute times depend on the machine; the ratios within one run (cold vs cached, off-chain vs
//! on-chain refusal) are what to compare between runs.

use std::{
    fmt::Write as _,
    time::{Duration, Instant},
};

use alloy::signers::local::PrivateKeySigner;
use futures::future::join_all;
use kya_devchain::{dev_accounts, seed};
use kya_tests::{
    TestChain,
    edge_fixture::{Answer, CountingProxy, EdgeClient, EdgeWorker, chain_vars, fresh_ip},
    relayer_fixture::{self, InProcessRelayer, signed_registrations},
};
use serde_json::Value;

/// Cached requests per endpoint; the table shows their median.
const REPEATS: usize = 25;
/// Relays sent one after another, and the signers sending at once.
const SEQUENTIAL_RELAYS: u64 = 20;
const CONCURRENT_RELAYS: u64 = 30;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let agents: u64 = std::env::var("BENCH_AGENTS").ok().and_then(|n| n.parse().ok()).unwrap_or(1_000);
    let chain = TestChain::start().await;
    let started = Instant::now();
    seed::seed_bulk(&chain.chain, &chain.deployment, agents).await.expect("bulk seed");
    let seeding = started.elapsed();

    let hot = hot_path(&chain).await;
    let edge = edge_api(&chain, agents).await;
    let relayer = relayer(&chain).await;
    let report = format!(
        "# System latency on loopback\n\n\
         Measured by `cargo bench -p kya-tests --bench system` (tests/benches/system.rs) on a \
         registry of {agents} agents seeded by `seed_bulk` in {seeding:.1?}. Every part is real: \
         anvil, the Worker under `wrangler dev` (behind a JSON-RPC proxy that counts round trips), \
         the relayer daemon in a release build. Times are medians of {REPEATS} requests unless a \
         cell says otherwise.\n\n{hot}\n{edge}\n{relayer}"
    );
    print!("{report}");
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench");
    std::fs::create_dir_all(&folder).expect("docs/bench");
    std::fs::write(folder.join(format!("system-{agents}.md")), report).expect("writing the report");
}

/// Requests each hot-path row times, interleaved round by round so drift hits all alike. Fewer
/// than the rate limit's 60 a minute, so one client can send them all.
const HOT_REPEATS: usize = 40;

/// Who sends a hot-path row's requests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Client {
    /// One client all along, as a client calling again: its rate-limit counter exists, and KV is
    /// written at most once a second.
    Returning,
    /// A new client every request: each is its client's first, so its counter is new and a KV
    /// write follows it (`wait_until`).
    New,
}

/// One row: a request and the answer it must get (status, and the `X-Cache-Tier` of a hit).
#[derive(Clone, Copy)]
struct HotCase<'a> {
    name: &'a str,
    worker: &'a EdgeWorker,
    path: &'a str,
    status: u16,
    tier: Option<&'a str>,
}

/// The platform's floor (a static asset, a 404 from the Worker) beside cached answers from each
/// tier: the isolate's memory, and the Cache API (a Worker with `MEMORY_CACHE_BYTES=0`). Then the
/// same from new clients, whose first request schedules a rate-limit KV write.
async fn hot_path(chain: &TestChain) -> String {
    let memory = EdgeWorker::start(&chain_vars(&chain.rpc_url(), chain.registry())).await;
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.push(("MEMORY_CACHE_BYTES", "0".to_owned()));
    let cache_api = EdgeWorker::start(&vars).await;
    for worker in [&memory, &cache_api] {
        worker.client().get("/api/v1/stats").await; // the miss that fills the cache
    }
    let static_asset = HotCase {
        name: "static asset (`/style.css`)",
        worker: &memory,
        path: "/style.css",
        status: 200,
        tier: None,
    };
    let not_found = HotCase {
        name: "unknown path (404 from the Worker)",
        worker: &memory,
        path: "/api/v1/nothing",
        status: 404,
        tier: None,
    };
    let memory_hit = HotCase {
        name: "cached `/api/v1/stats`, from the isolate's memory",
        worker: &memory,
        path: "/api/v1/stats",
        status: 200,
        tier: Some("memory"),
    };
    let cache_api_hit = HotCase {
        name: "cached `/api/v1/stats`, from the Cache API (`MEMORY_CACHE_BYTES=0`)",
        worker: &cache_api,
        path: "/api/v1/stats",
        status: 200,
        tier: Some("cache-api"),
    };
    let returning = [static_asset, not_found, memory_hit, cache_api_hit];
    let returning_medians = interleaved(&returning, Client::Returning).await;
    let new = [returning[0], returning[1], returning[2]];
    let new_medians = interleaved(&new, Client::New).await;

    let mut table = format!(
        "## Edge hot path (`wrangler dev`, medians of {HOT_REPEATS} requests, interleaved)\n\n\
         ### A returning client\n\n\
         Each row's requests come from one client, as from a client calling again.\n\n\
         | Request | Median | ÷ static asset |\n|---|---:|---:|\n"
    );
    rows(&mut table, &returning, &returning_medians);
    table.push_str(
        "\n### A new client every request\n\n\
         Each request is its client's first, so the Worker creates the client's rate-limit counter \
         and writes it to KV after the response (`wait_until`). Under `wrangler dev` that KV is a \
         local store in the same runtime on the same cores, and its writes slow the requests \
         around them, the static asset's included; on Cloudflare KV is a remote service.\n\n\
         | Request | Median | ÷ static asset |\n|---|---:|---:|\n",
    );
    rows(&mut table, &new, &new_medians);
    table
}

/// Median time of each case, sent round by round ([`HOT_REPEATS`] rounds) from `client`s.
async fn interleaved(cases: &[HotCase<'_>], client: Client) -> Vec<Duration> {
    let http = kya_tests::http_client();
    let returning_ips: Vec<String> = cases.iter().map(|_| fresh_ip()).collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(HOT_REPEATS); cases.len()];
    for _ in 0..HOT_REPEATS {
        for ((case, times), returning_ip) in cases.iter().zip(&mut times).zip(&returning_ips) {
            let ip = match client {
                Client::Returning => returning_ip.clone(),
                Client::New => fresh_ip(),
            };
            let started = Instant::now();
            let response = http
                .get(format!("{}{}", case.worker.base, case.path))
                .header("cf-connecting-ip", ip)
                .send()
                .await
                .expect("the Worker answers");
            let tier_seen = response
                .headers()
                .get("x-cache-tier")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let answered = response.status().as_u16();
            response.bytes().await.expect("a body");
            times.push(started.elapsed());
            assert_eq!((answered, tier_seen.as_deref()), (case.status, case.tier), "{}", case.name);
        }
    }
    times.into_iter().map(median).collect()
}

/// Table rows of `cases` with their medians, as ratios to the first (the static asset).
fn rows(table: &mut String, cases: &[HotCase<'_>], medians: &[Duration]) {
    for (case, time) in cases.iter().zip(medians) {
        let ratio = time.as_secs_f64() / medians[0].as_secs_f64();
        writeln!(table, "| {} | {} | {ratio:.2}× |", case.name, ms(*time)).expect("writing to a String");
    }
}

/// Each endpoint cold (what its first request costs, in time and RPC round trips), cached, and
/// revalidated with `If-None-Match`.
async fn edge_api(chain: &TestChain, agents: u64) -> String {
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    let worker = EdgeWorker::start(&chain_vars(&proxy.url, chain.registry())).await;
    let api = worker.client();
    let wallet = api.get(&format!("/api/v1/agent/{}", agents / 2 + 1)).await.body["agent"]["agentWallet"]
        .as_str()
        .expect("an agent wallet")
        .to_owned();
    // In this order: the first read of the snapshot, then endpoints the cached snapshot serves.
    let endpoints = [
        ("/api/v1/stats/detailed", "the whole registry (the snapshot)"),
        ("/api/v1/agents/compliance", "nothing: the cached snapshot"),
        ("/api/v1/agents?status=Active&page=3&limit=100", "nothing: the cached snapshot"),
        ("/api/v1/revenue/aggregate", "nothing: the cached snapshot"),
        (&format!("/api/v1/agent/{}", agents / 3 + 2), "one agent and its children"),
        ("/api/v1/agent/1/lineage", "the tree, level by level"),
        (&format!("/api/v1/kya/{wallet}"), "one wallet"),
    ];
    let mut table = String::from(
        "## Edge API (`wrangler dev`)\n\n\
         | Request | What a cold request reads | Cold | RPC round trips (calls) | Cached | 304 | Cold ÷ cached |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for (path, what) in endpoints {
        let (requests, calls) = (proxy.requests(), proxy.calls());
        let (cold, cold_time) = timed(&api, path, &[]).await;
        assert_eq!(cold.status, 200, "{path}: {}", cold.body);
        let round_trips = (proxy.requests() - requests, proxy.calls() - calls);
        let cached = median_get(&api, path, &[], 200).await;
        let etag = cold.header("etag").expect("an ETag").to_owned();
        let revalidated = median_get(&api, path, &[("if-none-match", etag.as_str())], 304).await;
        assert_eq!(proxy.requests() - requests, round_trips.0, "{path}: cached answers read no RPC");
        writeln!(
            table,
            "| `{path}` | {what} | {} | {} ({}) | {} | {} | {:.0}× |",
            ms(cold_time),
            round_trips.0,
            round_trips.1,
            ms(cached),
            ms(revalidated),
            cold_time.as_secs_f64() / cached.as_secs_f64(),
        )
        .expect("writing to a String");
    }
    // Revenue history is never cached: every request reads the chain.
    let path = "/api/v1/agent/3/revenue";
    let requests = proxy.requests();
    let uncached = median_get(&api, path, &[], 200).await;
    writeln!(
        table,
        "| `{path}` | never cached: every request | {} | {} per request | n/a | n/a | n/a |",
        ms(uncached),
        (proxy.requests() - requests) / REPEATS,
    )
    .expect("writing to a String");
    table
}

/// `POST /relay`: refusals off chain and on chain, sequential relays, and a burst from many
/// signers at once.
async fn relayer(chain: &TestChain) -> String {
    let db = relayer_fixture::TestStore::new(relayer_fixture::Engine::Sqlite);
    let mut settings = relayer_fixture::settings(chain, &db);
    // The benchmark sends everything from one IP, and the point is speed, not the limits.
    relayer_fixture::set(&mut settings, "RATE_LIMIT_PER_IP", "100000");
    relayer_fixture::set(&mut settings, "RATE_LIMIT_PER_SIGNER", "100000");
    let relayer = InProcessRelayer::start(&settings).await;
    let client = &relayer.client;
    let signers: Vec<PrivateKeySigner> = (0..SEQUENTIAL_RELAYS + CONCURRENT_RELAYS)
        .map(|n| dev_accounts::agent_wallet(9_000_000 + n))
        .collect();
    let bodies = signed_registrations(chain, &signers);
    let (sequential, concurrent) = bodies.split_at(SEQUENTIAL_RELAYS as usize);

    // Each relay starts with the chain idle: the previous relay's receipt is in. Otherwise the
    // first read waits for anvil to finish mining the previous block, which takes longer the
    // larger the state (it dominated the timings at 10,000 agents).
    let mut times = Vec::new();
    for body in sequential {
        client.settled().await;
        let started = Instant::now();
        let (status, answer) = client.relay(body).await;
        times.push(started.elapsed());
        assert_eq!(status, 200, "{answer}");
    }
    let relay = median(times);

    client.settled().await;
    // A signature by someone else: refused by the off-chain check, before any RPC call.
    let mut forged = sequential[0].clone();
    forged["request"]["from"] = Value::String(signers[1].address().to_string());
    let off_chain = median_time("forged signature", 401, || client.relay(&forged)).await;
    // Another request with a spent nonce: its signature checks out, so the forwarder's `verify`
    // on chain refuses it. (The same signed request again is a retry: answered with its relay.)
    let mut stale = sequential[0].clone();
    stale["request"]["gas"] = Value::String("400000".into());
    let digest = kya_core::registry::forward_request::signing_digest(
        &kya_core::registry::forward_request::from_json(
            stale["request"].as_object().expect("a request"),
            "request",
        )
        .expect("a valid request"),
        &kya_core::registry::forward_request::domain(chain.chain_id(), chain.forwarder()),
    );
    let resigned = alloy::signers::SignerSync::sign_hash_sync(&signers[0], &digest).expect("signing");
    stale["signature"] =
        Value::String(alloy::primitives::Bytes::from(resigned.as_bytes().to_vec()).to_string());
    let on_chain = median_time("spent nonce", 401, || client.relay(&stale)).await;

    let started = Instant::now();
    let answers = join_all(concurrent.iter().map(|body| client.relay(body))).await;
    let burst = started.elapsed();
    assert!(answers.iter().all(|(status, _)| *status == 200), "{answers:?}");
    client.settled().await;
    relayer.stop().await;

    format!(
        "## Relayer (`POST /relay`, release build)\n\n\
         | Case | Time |\n|---|---:|\n\
         | accepted relay, chain idle (all checks, simulation, estimate, send) | {} |\n\
         | refused off chain (signature by another key: 401) | {} |\n\
         | refused on chain (spent nonce, forwarder `verify`: 401) | {} |\n\
         | {CONCURRENT_RELAYS} signers at once, until the last answer | {} ({:.0} relays/s) |\n\n\
         An off-chain refusal costs {:.1}× less than an on-chain one: the cheap checks run first. \
         The burst includes anvil mining 30 blocks (automine), which takes longer the larger the \
         chain's state.\n",
        ms(relay),
        ms(off_chain),
        ms(on_chain),
        ms(burst),
        CONCURRENT_RELAYS as f64 / burst.as_secs_f64(),
        on_chain.as_secs_f64() / off_chain.as_secs_f64(),
    )
}

async fn timed(api: &EdgeClient, path: &str, headers: &[(&str, &str)]) -> (Answer, Duration) {
    let started = Instant::now();
    let answer = api.request("GET", path, &fresh_ip(), headers).await;
    (answer, started.elapsed())
}

/// Median time of [`REPEATS`] runs of `request`, each of which must answer `status`.
async fn median_time<F>(what: &str, status: u16, mut request: impl FnMut() -> F) -> Duration
where
    F: Future<Output = (u16, Value)>,
{
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let started = Instant::now();
        let (answered, body) = request().await;
        times.push(started.elapsed());
        assert_eq!(answered, status, "{what}: {body}");
    }
    median(times)
}

/// Median time of a GET of `path` from fresh client IPs, each answering `status`.
async fn median_get(api: &EdgeClient, path: &str, headers: &[(&str, &str)], status: u16) -> Duration {
    median_time(path, status, || async {
        let answer = api.request("GET", path, &fresh_ip(), headers).await;
        (answer.status, answer.body)
    })
    .await
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(time: Duration) -> String {
    format!("{:.1} ms", time.as_secs_f64() * 1e3)
}
