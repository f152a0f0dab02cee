//! CPU cost of the edge API's read path in `kya-core`, per request, for registries of 1,000 and
//! 10,000 agents: decoding the JSON-RPC answers into a snapshot, the snapshot's cache round trip,
//! and building each list and statistics body from it; plus the EIP-712 digest the relayer and the
//! browser package compute per request.
//!
//! `cargo bench -p kya-core` (or `bash scripts/bench.sh`) prints a table and writes it to
//! `docs/bench/core.md`. A Worker on the free plan gets 10 ms of CPU per request; wasm runs these
//! loops roughly 1.5–2× slower than native, so read the figures with that factor in mind.

use std::{
    fmt::Write as _,
    hint::black_box,
    time::{Duration, Instant},
};

use alloy_primitives::{Address, B256, U256, aliases::U48};
use alloy_sol_types::SolCall;
use kya_core::{
    Agent, BlockRef, Revenue, Snapshot, SnapshotAnswers,
    abi::AgentRegistry,
    forward_request::{self, ForwardRequest},
    query::AgentsQuery,
    rpc::{BlockTag, CallPlan, batches},
    stats,
};

/// Samples per case; the table shows their median.
const SAMPLES: usize = 15;
/// Each sample repeats the case until it has run at least this long.
const SAMPLE_TIME: Duration = Duration::from_millis(40);
/// `RPC_BATCH_SIZE`'s default.
const BATCH_SIZE: usize = 500;
/// The snapshot's "now": a week and a bit after the first registration.
const NOW: u64 = 1_700_000_000 + 8 * 86_400;

fn main() {
    let mut table = String::from("| Case | 1,000 agents | 10,000 agents |\n|---|---:|---:|\n");
    let sizes = [1_000u64, 10_000];
    let fixtures: Vec<Fixture> = sizes.iter().map(|&agents| Fixture::new(agents)).collect();
    let cases: [Case; 12] = [
        ("plan the `getAgent` batch bodies", |f| {
            black_box(batches(f.plan.requests(BlockTag::Number(1_234)), BATCH_SIZE));
        }),
        ("decode the batch answers into agents (cache miss)", |f| {
            black_box(f.decode_agents());
        }),
        ("snapshot to JSON (cache write, once per miss)", |f| {
            black_box(serde_json::to_string(&f.snapshot).expect("serialises"));
        }),
        ("snapshot from JSON (cache hit on the snapshot)", |f| {
            black_box(serde_json::from_str::<Snapshot>(&f.snapshot_json).expect("parses"));
        }),
        ("`/agents/compliance` body", |f| {
            black_box(serde_json::to_vec(&stats::compliance_list(&f.snapshot)).expect("serialises"));
        }),
        ("`/stats/detailed` body", |f| {
            let basic = stats::stats(&f.snapshot, &Address::ZERO, "http://127.0.0.1:8545");
            black_box(serde_json::to_vec(&stats::detailed(&f.snapshot, basic)).expect("serialises"));
        }),
        ("`/agents?status=Active&limit=100` body", |f| {
            let query = AgentsQuery::parse([("status", "Active"), ("limit", "100")]).expect("a valid query");
            black_box(serde_json::to_vec(&stats::agents_page(&f.snapshot, &query)).expect("serialises"));
        }),
        ("`/revenue/aggregate` body", |f| {
            black_box(
                serde_json::to_vec(&stats::revenue_aggregate(&f.snapshot.revenue)).expect("serialises"),
            );
        }),
        ("render the snapshot's five answers and encode them (cache miss, once per snapshot)", |f| {
            black_box(SnapshotAnswers::render(&f.snapshot, &Address::ZERO, "http://127.0.0.1:8545").encode());
        }),
        ("load the compact snapshot answers (Cache API hit on the snapshot)", |f| {
            black_box(SnapshotAnswers::decode(&f.snapshot_answers_text).expect("decodes"));
        }),
        ("`/agents?status=Active&page=50&limit=100` from the loaded answers", |f| {
            let query =
                AgentsQuery::parse([("status", "Active"), ("page", "50"), ("limit", "100")]).expect("valid");
            black_box(f.snapshot_answers.agents_page(&query));
        }),
        ("slowest snapshot endpoint from the Cache API: load, then that `/agents` page", |f| {
            let answers = SnapshotAnswers::decode(&f.snapshot_answers_text).expect("decodes");
            let query =
                AgentsQuery::parse([("status", "Active"), ("page", "50"), ("limit", "100")]).expect("valid");
            black_box(answers.agents_page(&query));
        }),
    ];
    for (name, case) in cases {
        let cells: Vec<String> =
            fixtures.iter().map(|fixture| format_time(median(|| case(fixture)))).collect();
        writeln!(table, "| {name} | {} | {} |", cells[0], cells[1]).expect("writing to a String");
    }

    let request = sample_request();
    let domain = forward_request::domain(forward_request::BASE_SEPOLIA_CHAIN_ID, Address::repeat_byte(0x70));
    let digest = median(|| {
        black_box(forward_request::signing_digest(black_box(&request), &domain));
    });
    let snapshot_json = fixtures[1].snapshot_json.len();
    let answers_text = fixtures[1].snapshot_answers_text.len();
    let report = format!(
        "# kya-core read path: CPU per request (native, release)\n\n\
         Measured by `cargo bench -p kya-core` (core/benches/read_path.rs): the median of {SAMPLES} \
         samples, each a loop of at least {} ms. Agents as `seed_bulk` makes them: every third \
         reports revenue, one in fifty is not Active.\n\n{table}\n\
         EIP-712 digest of one `ForwardRequest` (relayer and browser package): {}.\n\n\
         The snapshot of 10,000 agents is {} KiB as JSON; its five answers in the compact form \
         the Worker caches (`SnapshotAnswers`: the bodies, and every `/agents` item rendered once, \
         loaded by slicing) are {} KiB. The other snapshot endpoints (`/stats`, `/stats/detailed`, \
         `/agents/compliance`, `/revenue/aggregate`) are a copy of a loaded body.\n",
        SAMPLE_TIME.as_millis(),
        format_time(digest),
        snapshot_json / 1024,
        answers_text / 1024,
    );
    print!("{report}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/bench/core.md");
    std::fs::create_dir_all(std::path::Path::new(path).parent().expect("a folder")).expect("docs/bench");
    std::fs::write(path, report).expect("writing docs/bench/core.md");
}

/// A named case, run once per registry size.
type Case = (&'static str, fn(&Fixture));

/// A registry of `agents` agents as the chain would answer for it.
struct Fixture {
    plan: CallPlan,
    /// The JSON-RPC batch answers to `plan`'s bodies.
    answers: Vec<String>,
    snapshot: Snapshot,
    /// The snapshot as JSON (how the Cache API held it before `SnapshotAnswers`).
    snapshot_json: String,
    /// The snapshot's answers, and their compact form as the Cache API holds it.
    snapshot_answers: SnapshotAnswers,
    snapshot_answers_text: String,
}

impl Fixture {
    fn new(agents: u64) -> Self {
        let mut plan = CallPlan::new(Address::repeat_byte(0x2e));
        let records: Vec<AgentRegistry::AgentRecord> = (1..=agents).map(record).collect();
        for record in &records {
            plan.push(&AgentRegistry::getAgentCall { agentId: record.agentId });
        }
        let answers = records
            .chunks(BATCH_SIZE)
            .enumerate()
            .map(|(batch, chunk)| {
                let responses: Vec<String> = chunk
                    .iter()
                    .enumerate()
                    .map(|(offset, record)| {
                        let data = AgentRegistry::getAgentCall::abi_encode_returns(record);
                        format!(
                            r#"{{"jsonrpc":"2.0","id":{},"result":"{}"}}"#,
                            batch * BATCH_SIZE + offset,
                            alloy_primitives::hex::encode_prefixed(data)
                        )
                    })
                    .collect();
                format!("[{}]", responses.join(","))
            })
            .collect();
        let mut fixture = Self {
            plan,
            answers,
            snapshot: Snapshot {
                block: BlockRef { number: 1_234, timestamp: NOW },
                agents: vec![],
                revenue: vec![],
                revenue_unreadable: vec![],
            },
            snapshot_json: String::new(),
            snapshot_answers: SnapshotAnswers::render(
                &Snapshot {
                    block: BlockRef { number: 0, timestamp: 0 },
                    agents: vec![],
                    revenue: vec![],
                    revenue_unreadable: vec![],
                },
                &Address::ZERO,
                "",
            ),
            snapshot_answers_text: String::new(),
        };
        fixture.snapshot.agents = fixture.decode_agents();
        fixture.snapshot.revenue = (1..=agents).filter(|id| id.is_multiple_of(3)).map(revenue).collect();
        fixture.snapshot_json = serde_json::to_string(&fixture.snapshot).expect("serialises");
        fixture.snapshot_answers =
            SnapshotAnswers::render(&fixture.snapshot, &Address::ZERO, "http://127.0.0.1:8545");
        fixture.snapshot_answers_text = fixture.snapshot_answers.encode();
        fixture
    }

    /// What the Worker does with the answers on a cache miss.
    fn decode_agents(&self) -> Vec<Agent> {
        self.plan
            .decode(&self.answers)
            .expect("well-formed answers")
            .iter()
            .map(|outcome| {
                Agent::try_from(outcome.decode::<AgentRegistry::getAgentCall>().expect("a record"))
                    .expect("a valid record")
            })
            .collect()
    }
}

fn record(id: u64) -> AgentRegistry::AgentRecord {
    let byte = |salt: u64| Address::from_word(B256::from(U256::from(id * 7 + salt)));
    let parent = if id <= 10 { 0 } else { id / 10 };
    AgentRegistry::AgentRecord {
        agentId: U256::from(id),
        creator: byte(1),
        haftungsperson: byte(2),
        agentWallet: byte(3),
        constitutionHash: B256::from(U256::from(id)),
        capabilityHash: B256::from(U256::from(id + 1)),
        operationalScope: format!("Automated market making on venue {}", id % 17),
        parentAgentId: U256::from(parent),
        generation: U256::from(if parent == 0 { 0 } else { id.ilog10() }),
        selfModifying: id.is_multiple_of(5),
        registeredAt: 1_700_000_000 + id,
        lastAttestation: 1_700_000_000 + id + if id.is_multiple_of(4) { 0 } else { 7 * 86_400 },
        lastRevenueReport: if id.is_multiple_of(3) { 1_700_000_500 + id } else { 0 },
        status: match id % 50 {
            7 => 1,
            13 => 2,
            29 => 3,
            _ => 0,
        },
    }
}

fn revenue(id: u64) -> Revenue {
    Revenue {
        agent_id: id,
        amount: U256::from(id) * U256::from(1_250),
        currency: ["USD", "EUR", "USDC"][(id % 3) as usize].to_owned(),
        category: ["compute", "trading", "services", "licensing"][(id % 4) as usize].to_owned(),
        period_start: 1_700_000_000,
        period_end: 1_700_086_400,
        reported_at: 1_700_000_500 + id,
    }
}

fn sample_request() -> ForwardRequest {
    ForwardRequest {
        from: Address::repeat_byte(0x11),
        to: Address::repeat_byte(0x2e),
        value: U256::ZERO,
        gas: U256::from(300_000),
        nonce: U256::from(7),
        deadline: U48::from(1_900_000_000u64),
        data: AgentRegistry::attestComplianceCall { agentId: U256::from(42) }.abi_encode().into(),
    }
}

/// Median time of one run of `case` over [`SAMPLES`] samples.
fn median(mut case: impl FnMut()) -> Duration {
    case(); // warm-up: allocator, caches
    let mut samples: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let (started, mut runs) = (Instant::now(), 0u32);
            while started.elapsed() < SAMPLE_TIME || runs == 0 {
                case();
                runs += 1;
            }
            started.elapsed() / runs
        })
        .collect();
    samples.sort();
    samples[SAMPLES / 2]
}

fn format_time(time: Duration) -> String {
    let nanos = time.as_nanos();
    if nanos < 10_000 {
        format!("{nanos} ns")
    } else if nanos < 1_000_000 {
        format!("{:.1} µs", nanos as f64 / 1e3)
    } else {
        format!("{:.2} ms", nanos as f64 / 1e6)
    }
}
