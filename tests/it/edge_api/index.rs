//! The registry index (D1 under `wrangler dev`, its tables from the project's migrations, the
//! scheduled handler run through `--test-scheduled`), on one Worker and one chain, in order:
//!
//! - the first fill reads every agent over several bounded runs; until it is complete the five
//!   endpoints read the chain and say so (`X-Index-Fallback`); a run that fails midway leaves
//!   the index as it was, and the next resumes from the stored cursor;
//! - then the five endpoints answer from the index (`X-Index-Lag-Blocks`), each equal to a
//!   direct read of the chain at the index's block, after each kind of write;
//! - a reorganisation that takes a write away is undone by the next run;
//! - logs withheld by the provider: the safety-net sweep alone brings the index right;
//! - a provider that caps `eth_getLogs` by range and by results: the ranges are split;
//! - and, on Workers of their own: through a load balancer whose backends lag and a provider
//!   that answers 429, and with events off (the sweep alone).
//!
//! "A direct read" is the registry read whole at the block (alloy, here in the test) and
//! rendered by `kya_core::SnapshotAnswers`, which is what the Worker's direct path renders.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use alloy::{
    eips::BlockId,
    primitives::{Address, Bytes, U256, keccak256},
    providers::Provider,
    rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use kya_core::{
    Agent, BlockRef, Revenue, Snapshot, SnapshotAnswers, api::query::AgentsQuery, chain::abi::AgentRegistry,
};
use kya_devchain::{
    dev_accounts::{self, Role},
    seed,
};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars},
    provider_shapes::{self, ProviderShape},
    rpc_proxy::{self, RpcAction},
};
use serde_json::{Value, json};

/// Agents a run reads: the demo's 66 take three runs.
const PER_RUN: u64 = 25;
/// Blocks re-scanned by each run.
const WINDOW: u64 = 8;
/// The provider's caps while they are on: blocks per `eth_getLogs`, and logs per answer.
const RANGE_CAP: u64 = 3;
const RESULT_CAP: usize = 2;

/// What the stand-in provider does, switched by the test as it goes.
#[derive(Default)]
struct Faults {
    /// Fail every `eth_call` but the first of a run (the head's `nextAgentId`): a run that
    /// dies after it began.
    fail_midway: AtomicBool,
    calls_while_failing: AtomicUsize,
    /// Answer every `eth_getLogs` with no logs.
    withhold_logs: AtomicBool,
    /// Refuse `eth_getLogs` over more than [`RANGE_CAP`] blocks or with more than [`RESULT_CAP`]
    /// logs, as hosted providers do.
    cap_logs: AtomicBool,
    /// `eth_getLogs` requests seen, and those refused.
    log_requests: AtomicUsize,
    log_refusals: AtomicUsize,
}

fn refusal(code: i64, message: &str) -> RpcAction {
    RpcAction::Raw(
        json!({"jsonrpc": "2.0", "id": 0, "error": {"code": code, "message": message}}).to_string(),
    )
}

/// A result cap as Infura words it, applied to the node's answer.
fn cap_results(answer: &str) -> String {
    let parsed: Value = serde_json::from_str(answer).expect("the node answers JSON");
    match parsed["result"].as_array() {
        Some(logs) if logs.len() > RESULT_CAP => json!({"jsonrpc": "2.0", "id": parsed["id"], "error": {
            "code": -32005, "message": format!("query returned more than {RESULT_CAP} results")}})
        .to_string(),
        _ => answer.to_owned(),
    }
}

fn policy(faults: Arc<Faults>) -> Arc<dyn Fn(&str) -> RpcAction + Send + Sync> {
    Arc::new(move |body: &str| {
        let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        // A batch is judged by its first request (the Worker batches one kind at a time).
        let request = if parsed.is_array() { parsed[0].clone() } else { parsed };
        match request["method"].as_str() {
            Some("eth_call") if faults.fail_midway.load(Ordering::SeqCst) => {
                if faults.calls_while_failing.fetch_add(1, Ordering::SeqCst) == 0 {
                    RpcAction::Forward(body.to_owned())
                } else {
                    RpcAction::Http { status: 400, headers: vec![], body: "refused".into() }
                }
            }
            Some("eth_getLogs") => {
                faults.log_requests.fetch_add(1, Ordering::SeqCst);
                if faults.withhold_logs.load(Ordering::SeqCst) {
                    return RpcAction::Answer("[]".into());
                }
                if !faults.cap_logs.load(Ordering::SeqCst) {
                    return RpcAction::Forward(body.to_owned());
                }
                let filter = &request["params"][0];
                let block = |name: &str| {
                    u64::from_str_radix(filter[name].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
                };
                if block("toBlock") - block("fromBlock") + 1 > RANGE_CAP {
                    faults.log_refusals.fetch_add(1, Ordering::SeqCst);
                    return refusal(-32614, &format!("eth_getLogs is limited to a {RANGE_CAP} range"));
                }
                RpcAction::Rewrite(body.to_owned(), cap_results)
            }
            _ => RpcAction::Forward(body.to_owned()),
        }
    })
}

/// The registry read whole at `block`, straight from the node.
async fn snapshot_at(chain: &TestChain, block: u64) -> Snapshot {
    snapshot_of(chain, chain.registry(), block).await
}

/// The registry at `registry` (ours, or one ABI-compatible with it) read whole at `block`.
pub(super) async fn snapshot_of(chain: &TestChain, registry: Address, block: u64) -> Snapshot {
    let provider = chain.chain.provider();
    let call = |data: Vec<u8>| {
        let request = TransactionRequest::default().to(registry).input(Bytes::from(data).into());
        async move { provider.call(request).block(BlockId::number(block)).await.expect("a read at the block") }
    };
    let next = AgentRegistry::nextAgentIdCall::abi_decode_returns(
        &call(AgentRegistry::nextAgentIdCall {}.abi_encode()).await,
    )
    .unwrap();
    let grace = AgentRegistry::attestationGracePeriodCall::abi_decode_returns(
        &call(AgentRegistry::attestationGracePeriodCall {}.abi_encode()).await,
    )
    .unwrap();
    let mut snapshot = Snapshot {
        block: BlockRef { number: block, timestamp: timestamp(chain, block).await },
        grace_period: u64::try_from(grace).unwrap_or(u64::MAX),
        agents: Vec::new(),
        revenue: Vec::new(),
        revenue_unreadable: Vec::new(),
    };
    for id in 1..next.to::<u64>() {
        let agent_id = U256::from(id);
        let record = AgentRegistry::getAgentCall::abi_decode_returns(
            &call(AgentRegistry::getAgentCall { agentId: agent_id }.abi_encode()).await,
        )
        .unwrap();
        snapshot.agents.push(Agent::try_from(record).unwrap());
        let history = AgentRegistry::getRevenueHistoryCall::abi_decode_returns(
            &call(AgentRegistry::getRevenueHistoryCall { agentId: agent_id }.abi_encode()).await,
        )
        .unwrap();
        snapshot.revenue.extend(history.into_iter().map(|report| Revenue::try_from(report).unwrap()));
    }
    snapshot
}

async fn timestamp(chain: &TestChain, block: u64) -> u64 {
    let header = chain.chain.provider().get_block_by_number(block.into()).await.unwrap().expect("the block");
    header.header.timestamp
}

/// `/agents` queries compared: pages of every status, past the end, and of one status.
fn agent_queries() -> Vec<String> {
    let mut queries = vec!["/api/v1/agents".to_owned(), "/api/v1/agents?page=2&limit=7".into()];
    queries.push("/api/v1/agents?page=40&limit=100".into());
    for status in ["Active", "Suspended", "Revoked", "Terminated"] {
        queries.push(format!("/api/v1/agents?status={status}&limit=5&page=2"));
        queries.push(format!("/api/v1/agents?status={status}"));
    }
    queries
}

fn query_of(path: &str) -> AgentsQuery {
    let query = path.split_once('?').map_or("", |(_, query)| query);
    AgentsQuery::parse(
        query.split('&').filter(|pair| !pair.is_empty()).map(|pair| pair.split_once('=').unwrap()),
    )
    .unwrap()
}

/// Every registry-wide endpoint answers from the index (no fallback), at the index's block, with
/// exactly the bodies of a direct read of the chain at that block. Returns that block.
async fn assert_index_answers_as_the_chain(
    api: &EdgeClient,
    chain: &TestChain,
    rpc: &str,
    step: &str,
) -> u64 {
    assert_index_answers_as(api, chain, chain.registry(), rpc, step).await
}

/// [`assert_index_answers_as_the_chain`] for the registry at `registry`.
pub(super) async fn assert_index_answers_as(
    api: &EdgeClient,
    chain: &TestChain,
    registry: Address,
    rpc: &str,
    step: &str,
) -> u64 {
    let stats = api.get("/api/v1/stats").await;
    assert_eq!(stats.status, 200, "{step}: {}", stats.text);
    assert_eq!(stats.header("x-index-fallback"), None, "{step}: answered from the index");
    assert!(stats.header("x-index-lag-blocks").is_some(), "{step}: names the index's lag");
    let block: u64 = stats.header("x-block-number").unwrap().parse().unwrap();
    let direct = SnapshotAnswers::render(&snapshot_of(chain, registry, block).await, &registry, rpc);
    assert_eq!(stats.text, direct.stats, "{step}: /stats");
    let mut expected: Vec<(String, String)> = vec![
        ("/api/v1/stats/detailed".into(), direct.detailed.clone()),
        ("/api/v1/revenue/aggregate".into(), direct.aggregate.clone()),
        ("/api/v1/agents/compliance".into(), direct.compliance.clone()),
    ];
    expected.extend(agent_queries().into_iter().map(|path| {
        let body = direct.agents_page(&query_of(&path));
        (path, body)
    }));
    for (path, body) in expected {
        let answer = api.get(&path).await;
        assert_eq!(answer.status, 200, "{step}: {path}: {}", answer.text);
        assert_eq!(answer.header("x-block-number"), Some(block.to_string().as_str()), "{step}: {path}");
        assert_eq!(answer.header("x-index-fallback"), None, "{step}: {path}");
        assert_eq!(answer.text, body, "{step}: {path}");
    }
    block
}

/// The index's rows that held at index block `block` (current rows written at or before it, and
/// superseded versions that held then) are the agents of the chain at `block`, each with its
/// status and last attestation.
async fn assert_rows_held_at(worker: &EdgeWorker, chain: &TestChain, block: u64) {
    let held = worker.query_index(&format!(
        "SELECT id, status, last_attestation FROM agents WHERE since <= {block} \
         UNION ALL SELECT id, status, last_attestation FROM agent_versions WHERE since <= {block} \
         AND until > {block} ORDER BY id"
    ));
    let held: Vec<(u64, u64, u64)> = held
        .iter()
        .map(|row| {
            (
                row["id"].as_u64().unwrap(),
                row["status"].as_u64().unwrap(),
                row["last_attestation"].as_u64().unwrap(),
            )
        })
        .collect();
    let chain_at: Vec<(u64, u64, u64)> = snapshot_at(chain, block)
        .await
        .agents
        .iter()
        .map(|agent| (agent.agent_id, agent.status as u64, agent.last_attestation))
        .collect();
    assert_eq!(held, chain_at, "the rows held at block {block}");
}

/// The rows D1 reported written by the index's last run ([`EdgeWorker::index_rows_written`]).
async fn rows_written(worker: &EdgeWorker, api: &EdgeClient) -> u64 {
    let block = health_index(api).await["block"].as_u64().expect("the index's block");
    worker.index_rows_written(block).await
}

pub(super) async fn health_index(api: &EdgeClient) -> Value {
    api.get("/health").await.body["index"].clone()
}

/// A registry write from `from`, mined in its own block.
async fn write<C: SolCall>(chain: &TestChain, from: Address, call: &C) {
    chain.chain.send(from, chain.registry(), call).await.expect("the write is mined");
}

/// A registry write of calldata `input` from `from`, mined in its own block (writes of several
/// kinds in one list).
async fn write_raw(chain: &TestChain, from: Address, input: Vec<u8>) {
    let request =
        TransactionRequest::default().from(from).to(chain.registry()).input(Bytes::from(input).into());
    chain.chain.send_request(request).await.expect("the write is mined");
}

/// `registration` by `creator` with the consent of its wallet, `wallet` (the creator is its
/// own Haftungsperson, or it is a child's).
async fn consented(
    chain: &TestChain,
    creator: Address,
    registration: AgentRegistry::registerAgentCall,
    wallet: &alloy::signers::local::PrivateKeySigner,
) -> AgentRegistry::registerAgentWithConsentCall {
    kya_devchain::consent::consented(
        &chain.chain,
        (chain.chain_id(), chain.registry()),
        registration,
        creator,
        &[wallet],
    )
    .await
    .expect("the consent nonces read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_fills_follows_every_write_undoes_reorganisations_and_survives_its_provider() {
    let chain = TestChain::start().await;
    let demo = seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let agents = demo.agents.len() as u64;
    let faults = Arc::new(Faults::default());
    let proxy = rpc_proxy::start(Some(chain.rpc_url()), policy(faults.clone())).await;
    let mut vars = chain_vars(&proxy, chain.registry());
    vars.extend([
        ("INDEX_AGENTS_PER_RUN", PER_RUN.to_string()),
        ("INDEX_REORG_WINDOW", WINDOW.to_string()),
        ("INDEX_SWEEP_PER_RUN", PER_RUN.to_string()),
        // Answers are not cached here: each check sees the index as the last run left it.
        ("INDEX_ANSWER_TTL_SECS", "0".into()),
        ("MEMORY_CACHE_BYTES", "0".into()),
    ]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    let rpc = kya_core::chain::redact::url(&proxy);
    let head = chain.chain.provider().get_block_number().await.unwrap();

    // Before any run: no index, and the endpoints read the chain, saying why (with
    // `INDEX_ANSWER_TTL_SECS=0` no registry-wide answer is cached, a fallback neither).
    assert_eq!(health_index(&api).await, Value::Null, "no run yet");
    let page = api.get("/api/v1/agents?limit=3").await;
    assert_eq!(page.header("x-index-fallback"), Some("the index is not filled yet"));
    assert_eq!(page.body["total"], agents);

    // The first fill, 25 agents a run; a run that dies after it began changes nothing.
    worker.run_index().await;
    let index = health_index(&api).await;
    assert_eq!((index["block"].as_u64(), index["complete"].as_bool()), (Some(head), Some(false)), "{index}");
    assert_eq!((index["agents"].as_u64(), index["fillNextId"].as_u64()), (Some(PER_RUN), Some(PER_RUN + 1)));
    assert_eq!(index["registryAgents"], agents);
    assert_eq!(
        index["lastRun"]["message"],
        format!(
            "block {head}: no logs followed; 25 agents read, 25 changed; first fill: 25 of {agents} agents"
        )
    );
    faults.fail_midway.store(true, Ordering::SeqCst);
    worker.run_index().await;
    faults.fail_midway.store(false, Ordering::SeqCst);
    let index = health_index(&api).await;
    assert_eq!(index["lastRun"]["ok"], false, "{index}");
    assert_eq!((index["agents"].as_u64(), index["fillNextId"].as_u64()), (Some(PER_RUN), Some(PER_RUN + 1)));
    assert_eq!(worker.query_index("SELECT count(*) AS n FROM agents")[0]["n"], PER_RUN, "nothing written");
    worker.run_index().await;
    worker.run_index().await;
    let index = health_index(&api).await;
    assert_eq!(
        (index["complete"].as_bool(), index["agents"].as_u64()),
        (Some(true), Some(agents)),
        "{index}"
    );
    assert_eq!(index["lagBlocks"], 0);
    let block = assert_index_answers_as_the_chain(&api, &chain, &rpc, "first fill").await;
    assert_eq!(block, head);

    // Each kind of write, followed by the next run.
    let creator_a = dev_accounts::address(Role::CreatorA);
    let regulator = chain.deployment.regulator;
    let root = demo.roles.lineage[0];
    let id = |agent_id: u64| U256::from(agent_id);
    let scope = "a child registered after the fill";
    let child_wallet = dev_accounts::agent_wallet(agents + 1);
    let register = AgentRegistry::registerAgentCall {
        haftungsperson: creator_a,
        agentWallet: child_wallet.address(),
        constitutionHash: keccak256(scope),
        capabilityHash: keccak256(scope),
        operationalScope: scope.into(),
        parentAgentId: id(root),
        selfModifying: false,
    };
    write(&chain, creator_a, &consented(&chain, creator_a, register.clone(), &child_wallet).await).await;
    let child = agents + 1;
    worker.run_index().await;
    // D1's own count of each run's writes (local D1 counts a row and each index entry a write
    // changes, as production bills them); every run also writes the state row (with the
    // window's touches and the stream's cursor: no rows of their own) and the change feed's
    // batch (its events, and the confirmations of earlier ones, in one row): 2.
    //
    // A child's registration: its row inserted with its five index entries (status,
    // `lastAttestation`, `registeredAt`, parent, wallet: the last two for the point answers),
    // its scope, its generation's tally and its bucket's status counts (one row of four): 9; its
    // parent's child count: the parent's version copied and its row (no index entry moves), 2
    // (its version's deletion 10 minutes later is the 3rd).
    let written = rows_written(&worker, &api).await;
    assert_eq!(written, 9 + 2 + 2, "a child's registration's run");
    assert_index_answers_as_the_chain(&api, &chain, &rpc, "register").await;
    // A run with nothing new on the chain, within the minute of the state row's write: it writes
    // nothing (the index stays at its block) and, `INDEX_LOG_QUIET_RUNS` off as deployed, says
    // nothing (a pacer's run every block would bury the log; edge_api::pace turns it on and
    // counts such lines). Read after a pause: wrangler's pipe may lag a run's answer.
    let indexed = health_index(&api).await["block"].clone();
    worker.run_index().await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(health_index(&api).await["block"], indexed, "a quiet run moves nothing");
    let log = worker.output();
    assert!(log.contains("index run: "), "the runs that wrote say so:\n{log}");
    assert!(!log.contains("nothing changed, nothing written"), "a quiet run logged:\n{log}");
    // A registration without a parent: the child's 9 alone.
    let scope = "an agent of its own registered after the fill";
    let own_wallet = dev_accounts::agent_wallet(agents + 3);
    let own = AgentRegistry::registerAgentCall {
        agentWallet: own_wallet.address(),
        constitutionHash: keccak256(scope),
        capabilityHash: keccak256(scope),
        operationalScope: scope.into(),
        parentAgentId: U256::ZERO,
        ..register.clone()
    };
    write(&chain, creator_a, &consented(&chain, creator_a, own, &own_wallet).await).await;
    worker.run_index().await;
    let written = rows_written(&worker, &api).await;
    assert_eq!(written, 9 + 2, "a registration's run");
    assert_index_answers_as_the_chain(&api, &chain, &rpc, "register without a parent").await;
    // anvil stamps the blocks it mines within one second with the same time, and the child's
    // registration attested it at its block's time: an attestation in that second would leave
    // its record as it was (a fresh clone on a fast machine failed here with 2 rows written).
    chain.chain.increase_time(1).await.expect("anvil moves its clock");
    write(&chain, creator_a, &AgentRegistry::attestComplianceCall { agentId: id(child) }).await;
    worker.run_index().await;
    // The attested agent's version copied, its row and its `lastAttestation` index entry (3;
    // the version's deletion 10 minutes later is the 4th).
    let written = rows_written(&worker, &api).await;
    assert_eq!(written, 3 + 2, "an attestation's run");
    assert_index_answers_as_the_chain(&api, &chain, &rpc, "attest").await;
    let report = AgentRegistry::reportRevenueCall {
        agentId: id(child),
        amount: U256::from(123_456u64),
        currency: "CHF".into(),
        category: "indexing".into(),
        periodStart: 1,
        periodEnd: 2,
    };
    write(&chain, creator_a, &report).await;
    worker.run_index().await;
    // The report: the version, the row (no index entry), its currency's and category's tallies
    // (4; the version's deletion later is the 5th).
    let written = rows_written(&worker, &api).await;
    assert_eq!(written, 4 + 2, "a revenue report's run");
    assert_index_answers_as_the_chain(&api, &chain, &rpc, "report revenue").await;
    // Each status change: the agent's version copied, its row and its status index entry, and
    // its bucket's row of status counts, whose two counts move in one row (4; the version's
    // deletion later is the 5th).
    let status_changes: [(&str, Address, Vec<u8>); 4] = [
        ("suspend", regulator, AgentRegistry::suspendAgentCall { agentId: id(child) }.abi_encode()),
        ("reactivate", regulator, AgentRegistry::reactivateAgentCall { agentId: id(child) }.abi_encode()),
        ("revoke", regulator, AgentRegistry::revokeAgentCall { agentId: id(demo.roles.hive) }.abi_encode()),
        ("terminate", creator_a, AgentRegistry::terminateSelfCall { agentId: id(child) }.abi_encode()),
    ];
    for (step, from, call) in status_changes {
        write_raw(&chain, from, call).await;
        worker.run_index().await;
        let written = rows_written(&worker, &api).await;
        assert_eq!(written, 4 + 2, "{step}'s run");
        assert_index_answers_as_the_chain(&api, &chain, &rpc, step).await;
    }
    // Every row as an answer still reading the first fill's block sees it (the current rows
    // from then, and the versions the runs since superseded): the chain at that block.
    assert_rows_held_at(&worker, &chain, block).await;
    let rows = worker.query_index(&format!("SELECT child_count FROM agents WHERE id = {root}"));
    assert_eq!(rows[0]["child_count"], 2, "the root's child count: its lineage child and the new one");

    // A reorganisation takes a registration and an attestation away: the next run undoes both.
    let snapshot: String = chain.chain.provider().raw_request("evm_snapshot".into(), ()).await.unwrap();
    let scope = "a registration a reorganisation takes away";
    let doomed_wallet = dev_accounts::agent_wallet(agents + 2);
    let doomed = AgentRegistry::registerAgentCall {
        agentWallet: doomed_wallet.address(),
        constitutionHash: keccak256(scope),
        capabilityHash: keccak256(scope),
        operationalScope: scope.into(),
        parentAgentId: id(root),
        ..register.clone()
    };
    write(&chain, creator_a, &consented(&chain, creator_a, doomed, &doomed_wallet).await).await;
    write(&chain, creator_a, &AgentRegistry::attestComplianceCall { agentId: id(demo.roles.lapsed) }).await;
    worker.run_index().await;
    let before =
        assert_index_answers_as_the_chain(&api, &chain, &rpc, "writes a reorganisation takes away").await;
    assert_eq!(health_index(&api).await["agents"], agents + 3);
    let reverted: bool = chain.chain.provider().raw_request("evm_revert".into(), (snapshot,)).await.unwrap();
    assert!(reverted);
    let _: Value = chain.chain.provider().raw_request("anvil_mine".into(), ("0x3",)).await.unwrap();
    assert!(chain.chain.provider().get_block_number().await.unwrap() > before);
    worker.run_index().await;
    assert_index_answers_as_the_chain(&api, &chain, &rpc, "after the reorganisation").await;
    assert_eq!(health_index(&api).await["agents"], agents + 2, "the registration is gone");

    // Logs withheld: the sweep alone brings every agent right, a run's room at a time.
    faults.withhold_logs.store(true, Ordering::SeqCst);
    write(&chain, creator_a, &AgentRegistry::attestComplianceCall { agentId: id(demo.roles.lapsed) }).await;
    write(&chain, regulator, &AgentRegistry::suspendAgentCall { agentId: id(root) }).await;
    for _ in 0..6 {
        worker.run_index().await;
    }
    faults.withhold_logs.store(false, Ordering::SeqCst);
    assert_index_answers_as_the_chain(&api, &chain, &rpc, "logs withheld").await;

    // A provider capping eth_getLogs at 3 blocks and 2 logs: ranges are split until they pass.
    faults.cap_logs.store(true, Ordering::SeqCst);
    let requests_before = faults.log_requests.load(Ordering::SeqCst);
    for agent_id in demo.roles.lineage.iter().skip(1).take(4) {
        write(&chain, creator_a, &AgentRegistry::attestComplianceCall { agentId: id(*agent_id) }).await;
    }
    worker.run_index().await;
    faults.cap_logs.store(false, Ordering::SeqCst);
    assert_eq!(health_index(&api).await["lastRun"]["ok"], true);
    assert!(faults.log_refusals.load(Ordering::SeqCst) >= 1, "the range cap refused a range");
    assert!(faults.log_requests.load(Ordering::SeqCst) - requests_before > 4, "split into several requests");
    assert_index_answers_as_the_chain(&api, &chain, &rpc, "capped logs").await;

    // Over all of it, the index kept no more than its current rows and those superseded lately.
    let current = worker.query_index("SELECT count(*) AS n FROM agents");
    assert_eq!(current[0]["n"], agents + 2);
    // The window's touches, kept in the state row (`{"blocks": {"<block>": {hash, agents}}, "anchor": …}`),
    // only the window's.
    let touches = worker.query_index("SELECT min(CAST(json_each.key AS INTEGER)) AS low FROM state, json_each(state.touches, '$.blocks') WHERE state.key = 'index'");
    let head = chain.chain.provider().get_block_number().await.unwrap();
    assert!(touches[0]["low"].as_u64().is_none_or(|low| low + WINDOW >= head), "old touches are forgotten");
}

/// Through a load balancer whose backends lag the head, and a provider that refuses every third
/// request with 429, the index fills and follows a write, and its answers equal the chain's;
/// with `INDEX_EVENTS = "off"` (a registry whose events are unknown) no log is asked for, and
/// the sweep alone brings the write in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_runs_through_lagging_and_rate_limiting_providers_and_on_the_sweep_alone() {
    let chain = TestChain::start().await;
    let demo = seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let creator_a = dev_accounts::address(Role::CreatorA);
    for (shape, events) in
        [(ProviderShape::LaggingBackend, true), (ProviderShape::RateLimitedEveryThird, false)]
    {
        // Behind the stand-in (which answers with its own HTTP statuses): counts the eth_getLogs
        // the runs send.
        let faults = Arc::new(Faults::default());
        let counter = rpc_proxy::start(Some(chain.rpc_url()), policy(faults.clone())).await;
        let (proxy, refused) = provider_shapes::start(&counter, shape).await;
        let started = std::time::Instant::now();
        let mut vars = chain_vars(&proxy, chain.registry());
        vars.extend([
            ("INDEX_EVENTS", if events { "on" } else { "off" }.to_owned()),
            ("INDEX_ANSWER_TTL_SECS", "0".into()),
            ("MEMORY_CACHE_BYTES", "0".into()),
        ]);
        let worker = EdgeWorker::start_indexed(&vars).await;
        let api = worker.client();
        let rpc = kya_core::chain::redact::url(&proxy);
        worker.run_index().await;
        let index = health_index(&api).await;
        assert_eq!(index["complete"], true, "{shape:?}: one run fills the demo: {index}");
        assert_index_answers_as_the_chain(&api, &chain, &rpc, &format!("{shape:?}: filled")).await;
        let agent_id = U256::from(demo.roles.lineage[1]);
        write(&chain, creator_a, &AgentRegistry::attestComplianceCall { agentId: agent_id }).await;
        worker.run_index().await;
        let index = health_index(&api).await;
        assert_eq!(index["lastRun"]["ok"], true, "{shape:?}: {index}");
        assert_index_answers_as_the_chain(&api, &chain, &rpc, &format!("{shape:?}: after a write")).await;
        assert!(refused.load(Ordering::SeqCst) > 0, "{shape:?}: the stand-in refused nothing");
        let logs = faults.log_requests.load(Ordering::SeqCst);
        if events {
            assert!(logs > 0, "{shape:?}: the run followed the logs");
        } else {
            assert_eq!(logs, 0, "{shape:?}: events off, no eth_getLogs");
        }
        eprintln!("{shape:?}: {:?}", started.elapsed());
    }

    // With answers cached (the default 30 s), the streamed compliance list is kept in the Cache
    // API as it streams: the next request is a hit with the same body, and the same block.
    let worker = EdgeWorker::start_indexed(&chain_vars(&chain.rpc_url(), chain.registry())).await;
    let api = worker.client();
    worker.run_index().await;
    let first = api.get("/api/v1/agents/compliance").await;
    let second = api.get("/api/v1/agents/compliance").await;
    assert_eq!((first.status, first.header("x-cache")), (200, Some("MISS")), "{}", first.text);
    assert_eq!((second.header("x-cache"), second.header("x-cache-tier")), (Some("HIT"), Some("cache-api")));
    assert_eq!(second.text, first.text);
    assert_eq!(second.header("x-block-number"), first.header("x-block-number"));
    assert!(second.header("x-index-lag-blocks").is_some(), "the index's headers are kept");
    let max_age: u64 =
        second.header("cache-control").unwrap().trim_start_matches("public, max-age=").parse().unwrap();
    assert!(max_age <= 30, "counts down from the index's TTL: {max_age}");
    let block: u64 = first.header("x-block-number").unwrap().parse().unwrap();
    let direct = SnapshotAnswers::render(
        &snapshot_at(&chain, block).await,
        &chain.registry(),
        &kya_core::chain::redact::url(&chain.rpc_url()),
    );
    assert_eq!(first.text, direct.compliance);
}

/// Agents of [`status_pages_at_every_depth_equal_the_chain_as_agents_change_status`]: four
/// buckets of 256 ids, every status in each.
const BULK_AGENTS: u64 = 1_000;
/// `INDEX_REORG_WINDOW`'s default.
const WINDOW_DEFAULT: u64 = 64;

/// The `?status=` pages compared at `block`: every page of 37 and of 100 (and one past the
/// end), and single agents on both sides of each bucket edge.
fn status_page_queries(snapshot: &Snapshot) -> Vec<String> {
    let mut queries = Vec::new();
    for status in kya_core::AgentStatus::ALL {
        let ids: Vec<u64> = snapshot
            .agents
            .iter()
            .filter(|agent| agent.status == status)
            .map(|agent| agent.agent_id)
            .collect();
        let total = ids.len() as u64;
        for limit in [37, 100] {
            for page in 1..=total.div_ceil(limit) + 1 {
                queries.push(format!("/api/v1/agents?status={status}&page={page}&limit={limit}"));
            }
        }
        for edge in (1..=BULK_AGENTS / kya_core::index::STATUS_BUCKET_IDS).map(|bucket| bucket * 256) {
            let before = ids.iter().filter(|&&id| id < edge).count() as u64;
            for page in [before, before + 1, before + 2].into_iter().filter(|page| (1..=total).contains(page))
            {
                queries.push(format!("/api/v1/agents?status={status}&page={page}&limit=1"));
            }
        }
    }
    queries
}

/// `?status=` pages are placed by counts of each status per bucket of 256 ids, not by skipping
/// every agent before the page: at every depth they equal the direct answer at the index's
/// block, after the fill and after status changes in every bucket (one pair of which cancels);
/// the counts the runs keep equal a recount of the rows, and a run writes one row of counts per
/// bucket whose counts moved. `/agents/compliance` (1,000 items) equals the direct list each
/// time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_pages_at_every_depth_equal_the_chain_as_agents_change_status() {
    let chain = TestChain::start().await;
    seed::seed_bulk(&chain.chain, &chain.deployment, BULK_AGENTS).await.expect("bulk seed");
    // Past the re-scanned window of the seed's few full blocks, whose thousands of logs would
    // make each run end blocks early (a live chain's window holds two minutes of writes).
    let _: Value = chain
        .chain
        .provider()
        .raw_request("anvil_mine".into(), (format!("{:#x}", WINDOW_DEFAULT + 1),))
        .await
        .unwrap();
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.extend([("INDEX_ANSWER_TTL_SECS", "0".into()), ("MEMORY_CACHE_BYTES", "0".into())]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    let rpc = kya_core::chain::redact::url(&chain.rpc_url());
    // 200 agents a run: the fill's runs end inside buckets.
    let mut runs = 0;
    while health_index(&api).await["complete"] != true {
        runs += 1;
        assert!(runs <= 50, "the fill never completed: {}", health_index(&api).await);
        worker.run_index().await;
    }

    let compare_pages = |step: &'static str| {
        let (api, chain, rpc) = (&api, &chain, &rpc);
        async move {
            let first = api.get("/api/v1/agents?status=Active").await;
            assert_eq!(first.header("x-index-fallback"), None, "{step}: from the index");
            let block: u64 = first.header("x-block-number").unwrap().parse().unwrap();
            let snapshot = snapshot_at(chain, block).await;
            let direct = SnapshotAnswers::render(&snapshot, &chain.registry(), rpc);
            let queries = status_page_queries(&snapshot);
            for path in &queries {
                let answer = api.get(path).await;
                assert_eq!(answer.status, 200, "{step}: {path}: {}", answer.text);
                assert_eq!(
                    answer.header("x-block-number"),
                    Some(block.to_string().as_str()),
                    "{step}: {path}"
                );
                assert_eq!(answer.text, direct.agents_page(&query_of(path)), "{step}: {path}");
            }
            // The whole list as D1 renders it, in groups of 100 items: byte for byte the direct one.
            let compliance = api.get("/api/v1/agents/compliance").await;
            assert_eq!(compliance.header("x-index-fallback"), None, "{step}: the list from the index");
            assert_eq!(compliance.header("x-block-number"), Some(block.to_string().as_str()), "{step}");
            assert_eq!(compliance.text, direct.compliance, "{step}: /agents/compliance");
            (block, queries.len())
        }
    };
    // The counts as kept (a row of four per bucket), a row per status and bucket holding any.
    let counts_kept = "SELECT status, bucket, agents FROM (\
                       SELECT 0 AS status, bucket, active AS agents FROM status_counts \
                       UNION ALL SELECT 1, bucket, suspended FROM status_counts \
                       UNION ALL SELECT 2, bucket, revoked FROM status_counts \
                       UNION ALL SELECT 3, bucket, terminated FROM status_counts) \
                       WHERE agents > 0 ORDER BY status, bucket";
    let counts_recounted = "SELECT status, id / 256 AS bucket, count(*) AS agents FROM agents \
                            GROUP BY status, id / 256 ORDER BY status, bucket";

    let (_, compared) = compare_pages("after the fill").await;
    assert!(compared > 60, "{compared} pages");
    let kept = worker.query_index(counts_kept);
    assert_eq!(kept, worker.query_index(counts_recounted), "the fill's counts");
    assert_eq!(kept.len(), 16, "four statuses in each of four buckets: {kept:?}");

    // Suspensions in all four buckets; in the second, a suspended agent reactivated (its counts
    // cancel the suspension's there) and an active one revoked.
    let regulator = chain.deployment.regulator;
    let id = |agent_id: u64| U256::from(agent_id);
    for agent_id in [100, 300, 600, 900] {
        write(&chain, regulator, &AgentRegistry::suspendAgentCall { agentId: id(agent_id) }).await;
    }
    write(&chain, regulator, &AgentRegistry::reactivateAgentCall { agentId: id(507) }).await;
    write(&chain, regulator, &AgentRegistry::revokeAgentCall { agentId: id(256) }).await;
    worker.run_index().await;
    let index = health_index(&api).await;
    assert_eq!(index["lagBlocks"], 0, "one run takes the six writes: {index}");
    compare_pages("after status changes").await;
    assert_eq!(worker.query_index(counts_kept), worker.query_index(counts_recounted), "the counts moved");
    // D1's count of the run's writes: per agent its version, its row and its status index entry
    // (6 × 3); one row of counts per bucket that moved, whatever number of its counts moved
    // (buckets 0 to 3: in bucket 1 three agents moved Active down and Revoked up, Suspended up
    // and down again); the state row and the feed's batch.
    assert_eq!(rows_written(&worker, &api).await, 6 * 3 + 4 + 2, "the run's rows written");
}
