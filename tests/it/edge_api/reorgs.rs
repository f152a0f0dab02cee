//! The index and its change feed through reorganisations of every shape, under `wrangler dev`
//! against anvil with the real registry (`evm_snapshot` / `evm_revert` make the other chain):
//!
//! - the tip replaced at the index's own height by a block holding another registration at the
//!   same id, with no block after it: one run retracts A's entries, emits B's, and every
//!   registry-wide answer names B;
//! - the chain reorganised while a run reads it: the run writes nothing, the next is exact;
//! - a model-based run ([`model`]): random writes (registrations, children, attestations,
//!   revenue, suspensions, reactivations, revocations, terminations, time passing) and
//!   reorganisations from depth 0 (the tip replaced at its height) to past the re-scanned window,
//!   with fewer, as many or more blocks than the chain they replace; after each run every
//!   registry-wide answer equals the chain at the block it names, and the feed, replayed in order,
//!   gives every wallet it names the standing `/kya` gives at that block.
//!
//! The feed is replayed as docs/change-feed.md says a client replays it: a `provisional` or
//! `retracted` entry sets its wallet's standing; a `final` one changes nothing.

use std::collections::BTreeMap;

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    sol_types::SolCall,
};
use kya_core::{
    Agent, AgentStatus, KyaResult,
    chain::abi::AgentRegistry,
    feed::{Event, EventType, Finality, Standing},
};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain, consented_register_call,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars},
    rpc_proxy::{self, Later, RpcAction},
};
use serde_json::Value;

use super::{
    feed::index_block,
    index::{assert_index_answers_as, health_index},
};

/// Blocks each run re-scans: small, so that a reorganisation past it takes a few blocks.
const WINDOW: u64 = 4;
/// Blocks after a change's block before it is final.
const DEPTH: u64 = 2;

fn vars(rpc: &str, registry: Address) -> Vec<(&'static str, String)> {
    let mut vars = chain_vars(rpc, registry);
    vars.extend([
        ("INDEX_REORG_WINDOW", WINDOW.to_string()),
        ("FEED_FINALITY_DEPTH", DEPTH.to_string()),
        // Every agent in one run: a reorganisation past the window re-reads the registry whole,
        // and the checks below expect the index to answer after every run.
        ("INDEX_AGENTS_PER_RUN", "500".into()),
        ("INDEX_SWEEP_PER_RUN", "3".into()),
        ("INDEX_ANSWER_TTL_SECS", "0".into()),
        ("MEMORY_CACHE_BYTES", "0".into()),
    ]);
    vars
}

/// The feed read page after page, and replayed: each wallet's standing as its entries give it.
struct Replay {
    api: EdgeClient,
    after: Option<String>,
    standings: BTreeMap<Address, Standing>,
    /// Every entry read, for a failure's story of a wallet.
    read: Vec<Event>,
}

impl Replay {
    fn new(api: EdgeClient) -> Self {
        Self { api, after: None, standings: BTreeMap::new(), read: Vec::new() }
    }

    /// The entries naming `wallet`, one a line: what a failure shows.
    fn story_of(&self, wallet: Address) -> String {
        self.read
            .iter()
            .filter(|event| event.change.wallet == wallet)
            .map(|event| {
                let change = &event.change;
                format!(
                    "{} {} {:?} agent {} block {} ({}) -> {:?}",
                    event.id,
                    change.kind.as_str(),
                    event.finality,
                    change.agent_id,
                    change.block.number,
                    change.block.hash,
                    change.standing
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The entries appended since the last call, applied to the standings.
    async fn catch_up(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            let after = self.after.as_ref().map(|after| format!("&after={after}")).unwrap_or_default();
            let page = self.api.get(&format!("/api/v1/changes?limit=1000{after}")).await;
            assert_eq!(page.status, 200, "{}", page.text);
            for event in page.body["events"].as_array().unwrap() {
                events.push(serde_json::from_value::<Event>(event.clone()).expect("an event decodes"));
            }
            if let Some(next) = page.body["next"].as_str() {
                self.after = Some(next.to_owned());
            }
            if page.body["more"] != true {
                break;
            }
        }
        for event in events.iter().filter(|event| event.finality != Finality::Final) {
            self.standings.insert(event.change.wallet, event.change.standing);
        }
        self.read.extend_from_slice(&events);
        events
    }
}

/// `wallet`'s standing at block `block` as `/kya` gives it: the agent the registry's
/// `walletToAgent` names there (what `getAgentByWallet`, behind `/kya`, returns: none for a wallet
/// never registered, or freed by a termination), through `KyaResult::of`, the endpoint's function.
async fn standing_at(chain: &TestChain, wallet: Address, block: u64) -> Standing {
    let provider = chain.chain.provider();
    let call = |input: Vec<u8>| {
        let request = alloy::rpc::types::TransactionRequest::default()
            .to(chain.registry())
            .input(alloy::primitives::Bytes::from(input).into());
        async move { provider.call(request).block(block.into()).await.expect("an eth_call at the block") }
    };
    let id = call(AgentRegistry::walletToAgentCall(wallet).abi_encode()).await;
    let id = AgentRegistry::walletToAgentCall::abi_decode_returns(&id).unwrap();
    if id.is_zero() {
        return Standing::UNREGISTERED;
    }
    let record = call(AgentRegistry::getAgentCall { agentId: id }.abi_encode()).await;
    let agent = Agent::try_from(AgentRegistry::getAgentCall::abi_decode_returns(&record).unwrap()).unwrap();
    let time = provider.get_block_by_number(block.into()).await.unwrap().expect("the block").header.timestamp;
    let grace = call(AgentRegistry::attestationGracePeriodCall {}.abi_encode()).await;
    let grace = AgentRegistry::attestationGracePeriodCall::abi_decode_returns(&grace).unwrap();
    let clock = kya_core::StandingClock::new(time, u64::try_from(grace).unwrap_or(u64::MAX));
    let kya = KyaResult::of(wallet, Some(&agent), clock);
    Standing { is_registered: kya.is_registered, is_compliant: kya.is_compliant, status: Some(agent.status) }
}

/// Every wallet the feed named stands in the replay as `/kya` has it at the index's block; and
/// every registry-wide answer is the chain's at the block it names. `step` says where, for the
/// failure message.
async fn assert_exact(chain: &TestChain, api: &EdgeClient, rpc: &str, replay: &Replay, step: &str) -> u64 {
    let block = assert_index_answers_as(api, chain, chain.registry(), rpc, step).await;
    for (wallet, standing) in &replay.standings {
        let expected = standing_at(chain, *wallet, block).await;
        assert_eq!(
            *standing,
            expected,
            "{step}: the feed's standing of {wallet} at block {block}; its entries:\n{}",
            replay.story_of(*wallet)
        );
    }
    block
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tip_replaced_at_the_index_height_by_another_registration_is_retracted_and_replaced_in_one_run() {
    let chain = TestChain::start().await;
    let worker = EdgeWorker::start_indexed(&vars(&chain.rpc_url(), chain.registry())).await;
    let api = worker.client();
    let rpc = kya_core::chain::redact::url(&chain.rpc_url());
    let provider = chain.chain.provider();
    let mut replay = Replay::new(worker.client());
    let creator_a = dev_accounts::address(Role::CreatorA);
    let creator_b = dev_accounts::address(Role::CreatorB);
    let (wallet_a, wallet_b) = (dev_accounts::agent_wallet(1), dev_accounts::agent_wallet(2));

    // A registered, and the index shows it (agent 1, block h).
    worker.run_index().await;
    let snapshot: Value = provider.raw_request("evm_snapshot".into(), ()).await.unwrap();
    let a = chain
        .chain
        .send(creator_a, chain.registry(), &consented_register_call(&chain, creator_a, &wallet_a, 0).await)
        .await
        .expect("A is registered");
    let height = a.block_number.unwrap();
    worker.run_index().await;
    assert_eq!(index_block(&api).await, height);
    let told = replay.catch_up().await;
    assert_eq!(
        told.iter().map(|event| (event.change.kind, event.change.wallet)).collect::<Vec<_>>(),
        vec![(EventType::Registered, wallet_a.address()), (EventType::ComplianceChanged, wallet_a.address())]
    );
    assert_exact(&chain, &api, &rpc, &replay, "A registered").await;

    // The chain without A: B registered by another creator at the same height, the same id, and
    // no block after it.
    let reverted: bool = provider.raw_request("evm_revert".into(), (snapshot,)).await.unwrap();
    assert!(reverted);
    let b = chain
        .chain
        .send(creator_b, chain.registry(), &consented_register_call(&chain, creator_b, &wallet_b, 0).await)
        .await
        .expect("B is registered");
    assert_eq!(b.block_number, Some(height), "the same height");
    assert_ne!(b.block_hash, a.block_hash);
    assert_eq!(provider.get_block_number().await.unwrap(), height, "no block after it");

    // One run: A's two entries retracted, A unregistered; then B's registration and compliance.
    worker.run_index().await;
    let index = health_index(&api).await;
    assert_eq!(index["lastRun"]["ok"], true, "{index}");
    assert_eq!(index["blockHash"], format!("{:#x}", b.block_hash.unwrap()), "{index}");
    let message = index["lastRun"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("reorganised: the chain no longer holds the index's block {height}")),
        "{message}"
    );
    let told = replay.catch_up().await;
    let seen: Vec<(Finality, EventType, Address, Standing)> = told
        .iter()
        .map(|event| (event.finality, event.change.kind, event.change.wallet, event.change.standing))
        .collect();
    let b_compliant = Standing { is_registered: true, is_compliant: true, status: Some(AgentStatus::Active) };
    assert_eq!(
        seen,
        vec![
            (Finality::Retracted, EventType::Registered, wallet_a.address(), Standing::UNREGISTERED),
            (Finality::Retracted, EventType::ComplianceChanged, wallet_a.address(), Standing::UNREGISTERED),
            (Finality::Provisional, EventType::Registered, wallet_b.address(), b_compliant),
            (Finality::Provisional, EventType::ComplianceChanged, wallet_b.address(), b_compliant),
        ]
    );
    assert!(
        told[2..]
            .iter()
            .all(|event| event.change.agent_id == 1 && event.change.block.hash == b.block_hash.unwrap())
    );
    assert!(told[2].change.log.is_some(), "B's registration is read from its log");
    assert_exact(&chain, &api, &rpc, &replay, "B in A's place").await;
    let detailed = api.get("/api/v1/stats/detailed").await;
    assert_eq!(
        detailed.body["recentRegistrations"][0]["creator"].as_str().map(str::to_lowercase),
        Some(format!("{creator_b:#x}")),
        "{}",
        detailed.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorganisation_during_a_run_writes_nothing_and_the_next_run_is_exact() {
    let chain = TestChain::start().await;
    let upstream = chain.rpc_url();
    let regulator = chain.deployment.regulator;
    let registry = chain.registry();
    // Armed with a snapshot id: the next eth_getLogs first makes the other chain (reverted to
    // the snapshot, agent 1 suspended there, one block more), then is answered by it.
    let armed: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let policy = {
        let armed = armed.clone();
        let upstream = upstream.clone();
        std::sync::Arc::new(move |body: &str| {
            let is_logs = body.contains("\"eth_getLogs\"");
            match is_logs.then(|| armed.lock().unwrap().take()).flatten() {
                None => RpcAction::Forward(body.to_owned()),
                Some(snapshot) => {
                    let (upstream, body) = (upstream.clone(), body.to_owned());
                    RpcAction::Later(Later(Box::pin(async move {
                        let http = kya_tests::http_client();
                        let call = |method: &str, params: Value| {
                            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                                .to_string()
                        };
                        rpc_proxy::post(&http, &upstream, call("evm_revert", serde_json::json!([snapshot])))
                            .await;
                        let suspend = AgentRegistry::suspendAgentCall { agentId: U256::from(1) }.abi_encode();
                        let tx = serde_json::json!([{"from": regulator, "to": registry, "data": format!("0x{}", alloy::hex::encode(suspend))}]);
                        rpc_proxy::post(&http, &upstream, call("eth_sendTransaction", tx)).await;
                        rpc_proxy::post(&http, &upstream, call("anvil_mine", serde_json::json!(["0x2"])))
                            .await;
                        rpc_proxy::post(&http, &upstream, body).await
                    })))
                }
            }
        })
    };
    let proxy = rpc_proxy::start(Some(upstream.clone()), policy).await;
    let worker = EdgeWorker::start_indexed(&vars(&proxy, registry)).await;
    let api = worker.client();
    let rpc = kya_core::chain::redact::url(&proxy);
    let provider = chain.chain.provider();
    let mut replay = Replay::new(worker.client());
    let creator = dev_accounts::address(Role::CreatorA);
    let wallet = dev_accounts::agent_wallet(1);

    worker.run_index().await;
    chain
        .chain
        .send(creator, registry, &consented_register_call(&chain, creator, &wallet, 0).await)
        .await
        .expect("registered");
    worker.run_index().await;
    replay.catch_up().await;
    let before = assert_exact(&chain, &api, &rpc, &replay, "registered").await;

    // An attestation in a new block; the run pins it, and while it reads the logs the chain
    // drops it for a suspension and two blocks more.
    let snapshot: String = provider.raw_request("evm_snapshot".into(), ()).await.unwrap();
    chain
        .chain
        .send(creator, registry, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) })
        .await
        .expect("attested");
    *armed.lock().unwrap() = Some(snapshot);
    worker.run_index().await;
    let index = health_index(&api).await;
    assert_eq!(index["lastRun"]["ok"], false, "{index}");
    let message = index["lastRun"]["message"].as_str().unwrap();
    assert!(message.contains("the chain reorganised during the run"), "{message}");
    assert_eq!(index["block"].as_u64(), Some(before), "nothing written");
    assert!(armed.lock().unwrap().is_none(), "the other chain was made");
    assert_eq!(replay.catch_up().await, Vec::<Event>::new(), "nothing appended");

    // The next run: exact, agent 1 suspended, never attested in the feed.
    worker.run_index().await;
    let told = replay.catch_up().await;
    let changes: Vec<EventType> = told
        .iter()
        .filter(|event| event.finality == Finality::Provisional)
        .map(|event| event.change.kind)
        .collect();
    assert_eq!(changes, vec![EventType::StatusChanged, EventType::ComplianceChanged], "{told:?}");
    assert!(told.iter().all(|event| event.finality != Finality::Retracted), "nothing to retract: {told:?}");
    let after = assert_exact(&chain, &api, &rpc, &replay, "after the reorganisation").await;
    assert_eq!(after, provider.get_block_number().await.unwrap());
}

pub(super) mod model {
    //! The model-based run: see the module's head. Its size and seed come from the environment:
    //! `KYA_REORG_STEPS` (default 14 in the test command; a bench-sized run sets hundreds) and
    //! `KYA_REORG_SEED` (default: a fixed seed; `random` takes one from the clock; printed first so
    //! a failure can be replayed).

    use super::*;

    /// A small deterministic generator (SplitMix64): the run is replayable from its seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound.max(1)
        }
    }

    /// A write the model may send (the registry refuses some: that is part of it).
    #[derive(Debug, Clone, Copy)]
    enum Write {
        Register {
            wallet: u64,
            parent: u64,
        },
        Attest(u64),
        Report(u64),
        Suspend(u64),
        Reactivate(u64),
        Revoke(u64),
        Terminate(u64),
        /// More than an attestation's validity passes (a block mined after it).
        Lapse,
    }

    struct Model<'a> {
        chain: &'a TestChain,
        rng: Rng,
        wallets: u64,
        /// `evm_snapshot` ids with the head they were taken at, oldest first.
        snapshots: Vec<(String, u64)>,
    }

    impl Model<'_> {
        async fn head(&self) -> u64 {
            self.chain.chain.provider().get_block_number().await.unwrap()
        }

        async fn agents(&self) -> u64 {
            let next: U256 = self
                .chain
                .chain
                .provider()
                .call(alloy::rpc::types::TransactionRequest::default().to(self.chain.registry()).input(
                    alloy::primitives::Bytes::from(AgentRegistry::nextAgentIdCall {}.abi_encode()).into(),
                ))
                .await
                .map(|bytes| U256::from_be_slice(&bytes))
                .unwrap();
            next.to::<u64>().saturating_sub(1)
        }

        fn pick(&mut self, agents: u64) -> Write {
            let id = 1 + self.rng.below(agents.max(1));
            match self.rng.below(if agents == 0 { 1 } else { 16 }) {
                0..=3 => {
                    // A new wallet, or now and then one an abandoned chain registered.
                    let wallet = if self.wallets > 0 && self.rng.below(4) == 0 {
                        1 + self.rng.below(self.wallets)
                    } else {
                        self.wallets += 1;
                        self.wallets
                    };
                    let parent = if agents > 0 && self.rng.below(3) == 0 { id } else { 0 };
                    Write::Register { wallet, parent }
                }
                4..=6 => Write::Attest(id),
                7 => Write::Report(id),
                8..=10 => Write::Suspend(id),
                11 => Write::Reactivate(id),
                12 => Write::Revoke(id),
                13 => Write::Terminate(id),
                _ => Write::Lapse,
            }
        }

        /// Sends `write`, snapshotting the chain before it; whether a block was mined.
        async fn send(&mut self, write: Write) -> bool {
            let provider = self.chain.chain.provider();
            let snapshot: String = provider.raw_request("evm_snapshot".into(), ()).await.unwrap();
            self.snapshots.push((snapshot, self.head().await));
            let (creator, regulator) =
                (dev_accounts::address(Role::CreatorA), self.chain.deployment.regulator);
            let registry = self.chain.registry();
            let id = |id: u64| U256::from(id);
            // Each write as its sender and calldata, sent alike below.
            let (from, input) = match write {
                Write::Register { wallet, parent } => {
                    let wallet = dev_accounts::agent_wallet(wallet);
                    (
                        creator,
                        consented_register_call(self.chain, creator, &wallet, parent).await.abi_encode(),
                    )
                }
                Write::Attest(agent) => {
                    (creator, AgentRegistry::attestComplianceCall { agentId: id(agent) }.abi_encode())
                }
                Write::Report(agent) => {
                    let call = AgentRegistry::reportRevenueCall {
                        agentId: id(agent),
                        amount: U256::from(1_000 + agent),
                        currency: "USD".into(),
                        category: "model".into(),
                        periodStart: 1,
                        periodEnd: 2,
                    };
                    (creator, call.abi_encode())
                }
                Write::Suspend(agent) => {
                    (regulator, AgentRegistry::suspendAgentCall { agentId: id(agent) }.abi_encode())
                }
                Write::Reactivate(agent) => {
                    (regulator, AgentRegistry::reactivateAgentCall { agentId: id(agent) }.abi_encode())
                }
                Write::Revoke(agent) => {
                    (regulator, AgentRegistry::revokeAgentCall { agentId: id(agent) }.abi_encode())
                }
                Write::Terminate(agent) => {
                    (creator, AgentRegistry::terminateSelfCall { agentId: id(agent) }.abi_encode())
                }
                Write::Lapse => {
                    let week = kya_core::DEFAULT_GRACE_PERIOD_SECS + 60;
                    let _: Value = provider.raw_request("evm_increaseTime".into(), (week,)).await.unwrap();
                    let _: Value = provider.raw_request("anvil_mine".into(), ("0x1",)).await.unwrap();
                    return true;
                }
            };
            let request = alloy::rpc::types::TransactionRequest::default()
                .from(from)
                .to(registry)
                .input(alloy::primitives::Bytes::from(input).into());
            let sent = self.chain.chain.send_request(request).await;
            if sent.is_err() {
                // Refused: nothing mined, the snapshot names the same head.
                self.snapshots.pop();
            }
            sent.is_ok()
        }

        /// Reverts the chain to its state `depth` blocks below the head (0: the tip's parent,
        /// so that the tip is replaced at its own height); returns the head reverted to.
        async fn revert(&mut self, depth: u64) -> Option<u64> {
            let head = self.head().await;
            let target = head.checked_sub(depth + 1)?;
            let at = self.snapshots.iter().rposition(|(_, block)| *block <= target)?;
            let (snapshot, block) = self.snapshots[at].clone();
            self.snapshots.truncate(at);
            let reverted: bool =
                self.chain.chain.provider().raw_request("evm_revert".into(), (snapshot,)).await.unwrap();
            assert!(reverted);
            Some(block)
        }
    }

    /// The seed of the test command's run.
    const DEFAULT_SEED: u64 = 20_261_126;

    /// Steps of the model in this run.
    fn steps() -> u64 {
        std::env::var("KYA_REORG_STEPS").ok().and_then(|steps| steps.parse().ok()).unwrap_or(14)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_writes_and_reorganisations_leave_the_index_and_the_feed_equal_to_the_chain() {
        // A fixed seed by default, so the test command is repeatable; `KYA_REORG_SEED=random` (or
        // a number) explores others.
        let seed = match std::env::var("KYA_REORG_SEED").ok().as_deref() {
            Some("random") => {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
            }
            Some(seed) => seed.parse().expect("KYA_REORG_SEED is a number or 'random'"),
            None => DEFAULT_SEED,
        };
        eprintln!("reorganisation model: seed {seed} (replay with KYA_REORG_SEED={seed}), {} steps", steps());
        let chain = TestChain::start().await;
        let worker = EdgeWorker::start_indexed(&vars(&chain.rpc_url(), chain.registry())).await;
        let api = worker.client();
        let rpc = kya_core::chain::redact::url(&chain.rpc_url());
        let mut replay = Replay::new(worker.client());
        let mut model = Model { chain: &chain, rng: Rng(seed), wallets: 0, snapshots: Vec::new() };
        let mut log = Vec::new();

        worker.run_index().await;
        for step in 0..steps() {
            // A reorganisation now and then: from the tip replaced at its height to past the
            // window, the other chain shorter, as long, or longer.
            let mut what = String::new();
            if step > 0 && model.rng.below(3) == 0 {
                let depth = model.rng.below(WINDOW + 3);
                if let Some(to) = model.revert(depth).await {
                    what.push_str(&format!("reverted {depth} deep to block {to}; "));
                }
            }
            let agents = model.agents().await;
            for _ in 0..1 + model.rng.below(3) {
                let write = model.pick(agents);
                let mined = model.send(write).await;
                what.push_str(&format!("{write:?}{} ", if mined { "" } else { " (refused)" }));
            }
            let head = model.head().await;
            log.push(format!("step {step}: {what}-> head {head}"));
            let context = || format!("seed {seed}, {}", log.join("\n"));

            worker.run_index().await;
            let index = health_index(&api).await;
            assert_eq!(index["lastRun"]["ok"], true, "{}\n{index}", context());
            let orphaned_at = index["block"].as_u64().unwrap_or(0);
            while health_index(&api).await["orphaned"] == true {
                // The other chain is shorter than the index: the index waits for it, and says so,
                // until the chain passes the index's block (a revert goes back to the snapshot
                // before its depth, which may be deeper still).
                let head = model.head().await;
                assert!(head <= orphaned_at + 2, "{}: still orphaned at head {head}", context());
                let stats = api.get("/api/v1/stats").await;
                assert!(
                    stats.header("x-index-fallback").is_some_and(|reason| reason.contains("no longer holds")),
                    "{}: {:?}",
                    context(),
                    stats.header("x-index-fallback")
                );
                let _: Value =
                    chain.chain.provider().raw_request("anvil_mine".into(), ("0x2",)).await.unwrap();
                worker.run_index().await;
            }
            replay.catch_up().await;
            assert_exact(&chain, &api, &rpc, &replay, &context()).await;
        }
        eprintln!("{}", log.join("\n"));
    }
}
