//! What one run measures: the configurations (store, daemons, keys) and the load's settings, from
//! the environment.

use std::time::Duration;

use kya_tests::relayer_fixture::Engine;

/// One row of the report: `daemons` relayer daemons on one store, all with the same `keys`,
/// reaching the node `rpc_delay` away (a round trip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Configuration {
    pub(crate) engine: Engine,
    pub(crate) daemons: usize,
    pub(crate) keys: usize,
    pub(crate) rpc_delay: Duration,
}

impl Configuration {
    /// `sqlite` or `postgres`, as the table and `BENCH_CLUSTER_CONFIGS` name the store.
    pub(crate) fn store(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }

    /// `sqlite 1×4, RPC 50 ms`: how the logs name it.
    pub(crate) fn label(&self) -> String {
        format!("{} {}×{}, RPC {} ms", self.store(), self.daemons, self.keys, self.rpc_delay.as_millis())
    }

    /// Parses `store:daemons:keys` (`postgres:2:4`), for a node `rpc_delay` away.
    fn parse(text: &str, rpc_delay: Duration) -> Self {
        let fields: Vec<&str> = text.trim().split(':').collect();
        let [store, daemons, keys] = fields[..] else {
            panic!("BENCH_CLUSTER_CONFIGS: `store:daemons:keys`, not {text:?}");
        };
        let engine = match store {
            "sqlite" => Engine::Sqlite,
            "postgres" => Engine::Postgres,
            _ => panic!("BENCH_CLUSTER_CONFIGS: the store is sqlite or postgres, not {store:?}"),
        };
        let number = |value: &str| -> usize {
            value.parse().ok().filter(|n| *n > 0).unwrap_or_else(|| panic!("BENCH_CLUSTER_CONFIGS: {text:?}"))
        };
        let configuration = Self { engine, daemons: number(daemons), keys: number(keys), rpc_delay };
        assert!(
            engine == Engine::Postgres || configuration.daemons == 1,
            "BENCH_CLUSTER_CONFIGS: an SQLite file serves one daemon ({text:?})"
        );
        configuration
    }
}

/// Issue 18's grid: SQLite with one daemon, PostgreSQL with 1, 2 and 4; 1 and 4 keys each.
const DEFAULT_CONFIGS: &str =
    "sqlite:1:1,sqlite:1:4,postgres:1:1,postgres:1:4,postgres:2:1,postgres:2:4,postgres:4:1,postgres:4:4";

/// The round trips added to every RPC call of the daemons (`BENCH_CLUSTER_RPC_DELAY_MS`), in
/// milliseconds: 50, a hosted provider in the daemons' region (the report says why), then 0, the
/// node on loopback.
const DEFAULT_RPC_DELAYS_MS: &str = "50,0";

/// The run's settings.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) configurations: Vec<Configuration>,
    /// Relays in each configuration's burst, each from a signer of its own.
    pub(crate) relays: usize,
    /// `POST /relay` requests in flight at once.
    pub(crate) concurrency: usize,
    /// Distinct client addresses the requests come from, through the load balancer the
    /// daemons trust (`X-Forwarded-For`): request `n` from client `n mod clients`. `None`: one
    /// per relay, a crowd of agents each on its own address.
    pub(crate) clients: Option<usize>,
    /// Pause between two looks at one relay: by default kya-client's own
    /// ([`kya_client::RELAY_POLL`]), so the daemons serve the reads a crowd of agents using it
    /// would send.
    pub(crate) poll: Duration,
    /// `GET /relay/:id` requests in flight at once, over every relay being watched.
    pub(crate) polls_in_flight: usize,
    /// How long after the last answer the relays may take to end before the rest count as
    /// unfinished.
    pub(crate) settle: Duration,
    /// How many times each configuration is measured (rounds.rs).
    pub(crate) rounds: usize,
}

impl Plan {
    /// Reads `BENCH_CLUSTER_*` (see main.rs), with the defaults of the committed report.
    pub(crate) fn from_env() -> Self {
        let number = |name: &str, default: u64| -> u64 {
            std::env::var(name).ok().map_or(default, |value| {
                value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .unwrap_or_else(|| panic!("{name}: a positive number"))
            })
        };
        let configs = std::env::var("BENCH_CLUSTER_CONFIGS").unwrap_or_else(|_| DEFAULT_CONFIGS.to_owned());
        let delays =
            std::env::var("BENCH_CLUSTER_RPC_DELAY_MS").unwrap_or_else(|_| DEFAULT_RPC_DELAYS_MS.to_owned());
        let configurations = delays
            .split(',')
            .map(|delay| {
                let delay = delay.trim().parse().unwrap_or_else(|_| {
                    panic!("BENCH_CLUSTER_RPC_DELAY_MS: milliseconds, comma-separated, not {delays:?}")
                });
                Duration::from_millis(delay)
            })
            .flat_map(|delay| configs.split(',').map(move |config| Configuration::parse(config, delay)))
            .collect();
        Self {
            configurations,
            relays: number("BENCH_CLUSTER_RELAYS", 200) as usize,
            concurrency: number("BENCH_CLUSTER_CONCURRENCY", 128) as usize,
            clients: std::env::var("BENCH_CLUSTER_CLIENTS")
                .is_ok()
                .then(|| number("BENCH_CLUSTER_CLIENTS", 1) as usize),
            poll: Duration::from_millis(number(
                "BENCH_CLUSTER_POLL_MS",
                kya_client::RELAY_POLL.as_millis() as u64,
            )),
            polls_in_flight: number("BENCH_CLUSTER_POLLS_IN_FLIGHT", 16) as usize,
            settle: Duration::from_secs(number("BENCH_CLUSTER_SETTLE_SECS", 90)),
            rounds: number("BENCH_CLUSTER_ROUNDS", 1) as usize,
        }
    }
}
