//! The daemons of one configuration: the real `kya-relayer` binary (this bench's release build),
//! started with the fixture's [`BinaryRelayer`], all on one store and the same keys, each with a
//! `RELAYER_ID` of its own; stopped with SIGTERM.

use std::collections::BTreeMap;

use alloy::signers::local::PrivateKeySigner;
use kya_tests::{
    TestChain,
    relayer_fixture::{BinaryRelayer, TestStore, set, settings},
};

use crate::chain;

/// The relayer binary Cargo built beside this bench.
const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

/// Limits far above the burst, so the relayer's abuse limits never refuse it: the bench may send
/// every relay from one client (`BENCH_CLUSTER_CLIENTS=1`), polls every relay four times a second,
/// and spends more than the default day's budget. The bench is the load balancer in front of the
/// daemons (127.0.0.1, trusted): its `X-Forwarded-For` names each request's client.
const UNLIMITED: [(&str, &str); 7] = [
    ("TRUSTED_PROXIES", "127.0.0.1/32"),
    ("RATE_LIMIT_PER_IP", "1000000000"),
    ("RATE_LIMIT_PER_SIGNER", "1000000000"),
    ("READ_RATE_LIMIT_PER_MINUTE", "1000000000"),
    ("DAILY_GAS_BUDGET", "5000"),
    ("SIGNER_BUDGET_SHARE_PERCENT", "100"),
    ("CLIENT_BUDGET_SHARE_PERCENT", "100"),
];

/// The fixture's `info`, without warp's two lines per request: the bench reads every relay ten
/// times a second, and logging those reads would be most of the daemons' output and work.
const LOG_FILTER: &str = "info,warp::filters::trace=warn";

/// Seconds a daemon's lease on a key lasts, once daemons lease keys (issue 18's lane leases):
/// a setting the daemon ignores until then.
const LEASE_SECS: &str = "6";

/// The running daemons of one configuration.
pub(crate) struct Cluster {
    pub(crate) daemons: Vec<BinaryRelayer>,
    /// Their `RELAYER_ID`s, in the same order.
    pub(crate) ids: Vec<String>,
}

/// What the daemons logged, counted when they stopped.
#[derive(Debug, Default, Clone)]
pub(crate) struct Logs {
    pub(crate) warnings: usize,
    pub(crate) errors: usize,
    /// The most frequent warning and error messages (fields after the message left out), with
    /// their counts.
    pub(crate) top: Vec<(String, usize)>,
    /// Daemons whose SIGTERM ended in a failed exit.
    pub(crate) unclean_exits: usize,
    /// Each daemon's id and whole log.
    pub(crate) outputs: Vec<(String, String)>,
}

impl Cluster {
    /// Starts `count` daemons on `store` with `keys` and the node at `rpc_url`, one after another
    /// (each waits for its "listening" line).
    pub(crate) fn start(
        chain: &TestChain,
        rpc_url: &str,
        store: &TestStore,
        keys: &[PrivateKeySigner],
        count: usize,
    ) -> Self {
        let mut env = settings(chain, store);
        env.retain(|(name, _)| name != "RELAYER_KEY");
        set(&mut env, "RELAYER_KEYS", chain::keys_setting(keys));
        set(&mut env, "RPC_URL", rpc_url);
        set(&mut env, "RELAYER_LEASE_SECS", LEASE_SECS);
        set(&mut env, "RUST_LOG", LOG_FILTER);
        for (name, value) in UNLIMITED {
            set(&mut env, name, value);
        }
        let ids: Vec<String> = (1..=count).map(|n| format!("bench-{n}")).collect();
        let daemons = ids
            .iter()
            .map(|id| {
                let mut env = env.clone();
                set(&mut env, "RELAYER_ID", id.as_str());
                BinaryRelayer::start(BINARY, &env)
            })
            .collect();
        Self { daemons, ids }
    }

    /// Who holds which key, as each daemon's `/status` says (`lanes[].holder`): `daemon id →
    /// holders of the keys in order`. Without leases every daemon names itself for every key.
    pub(crate) async fn holders(&self) -> BTreeMap<String, Vec<String>> {
        let mut holders = BTreeMap::new();
        for (id, daemon) in self.ids.iter().zip(&self.daemons) {
            let (status, body) = daemon.client.get("/status").await;
            assert_eq!(status, 200, "{id}: /status: {body}");
            let lanes = body["lanes"].as_array().cloned().unwrap_or_default();
            let named =
                lanes.iter().map(|lane| lane["holder"].as_str().unwrap_or("none").to_owned()).collect();
            holders.insert(id.clone(), named);
        }
        holders
    }

    /// Waits (up to 60 s) until the keys' leases settle: every key held, by as many different
    /// daemons as there can be (one key per daemon at least, while keys last). A row's burst
    /// begins from that steady state, not from the first daemon holding every key.
    pub(crate) async fn until_leases_settle(&self, keys: usize) {
        let holders_wanted = keys.min(self.ids.len());
        let started = std::time::Instant::now();
        loop {
            let holders = self.holders().await;
            let seen = holders.values().next().cloned().unwrap_or_default();
            let distinct: std::collections::BTreeSet<&String> =
                seen.iter().filter(|holder| *holder != "none").collect();
            if seen.iter().all(|holder| holder != "none") && distinct.len() == holders_wanted {
                return;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "leases never settled: {holders:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM to every daemon at once; waits for them all to exit and counts what they logged.
    pub(crate) fn stop(self) -> Logs {
        let ended: Vec<(bool, String)> = std::thread::scope(|scope| {
            let waits: Vec<_> =
                self.daemons.into_iter().map(|daemon| scope.spawn(move || daemon.terminate())).collect();
            waits.into_iter().map(|wait| wait.join().expect("a daemon's stop")).collect()
        });
        let mut logs = Logs {
            outputs: self.ids.into_iter().zip(ended.iter().map(|(_, output)| output.clone())).collect(),
            ..Logs::default()
        };
        let mut messages: BTreeMap<String, usize> = BTreeMap::new();
        for (clean, output) in &ended {
            logs.unclean_exits += usize::from(!clean);
            for line in output.lines() {
                let level = if line.contains(" WARN ") {
                    &mut logs.warnings
                } else if line.contains(" ERROR ") {
                    &mut logs.errors
                } else {
                    continue;
                };
                *level += 1;
                *messages.entry(message(line)).or_default() += 1;
            }
        }
        let mut top: Vec<(String, usize)> = messages.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(3);
        logs.top = top;
        logs
    }
}

/// A log line's level, target and message, and its `error=` field if it has one, without its
/// time stamp, its spans and its other fields (relay ids, hashes and nonces differ on every
/// line).
fn message(line: &str) -> String {
    let start = line.find(" WARN ").or_else(|| line.find(" ERROR ")).map_or(0, |at| at + 1);
    let (level, mut rest) = line[start..].split_once(' ').unwrap_or((line, ""));
    // Spans come first: `request{method=POST path=/relay …}: target: message`.
    while let Some(end) = rest.find("}: ").filter(|end| rest[..*end].contains('{')) {
        rest = &rest[end + 3..];
    }
    let words: Vec<&str> = rest.split_whitespace().take_while(|word| !word.contains('=')).collect();
    let mut text = format!("{level} {}", words.join(" "));
    if let Some((_, error)) = rest.split_once(" error=").filter(|(_, error)| *error != "None") {
        text.push_str(": ");
        text.push_str(error);
    }
    if text.chars().count() > 160 {
        format!("{}…", text.chars().take(160).collect::<String>())
    } else {
        text
    }
}
