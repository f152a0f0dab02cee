//! The change feed as the index's runs write it (docs/change-feed.md), under `wrangler dev`
//! against anvil with the real registry, each run started by the test (`run_index`), each event
//! compared whole (type, agent, wallet, block number, hash and time from the chain, log,
//! standing, details, finality and id, in order) with what the feed's rules say:
//!
//! - each kind of write makes its events, two writes to one agent in one run two events;
//! - an attestation lapses by time alone (anvil's clock moved): `agent.attestation_expired`, and
//!   `agent.compliance_changed` only for an agent that was compliant;
//! - a reorganisation retracts exactly what it removed, and the other chain's changes follow as
//!   new provisional events;
//! - every change is confirmed `final` once `FEED_FINALITY_DEPTH` blocks follow its block;
//! - retention deletes old batches but never the newest.
//!
//! The expected entries come from [`Model`], the feed's settlement rules written out plainly
//! (confirmed once deep enough, retracted once gone, in the order they wait), numbered as the
//! runs number them: a batch per run that appends anything.

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    rpc::types::TransactionReceipt,
    sol_types::SolCall,
};
use kya_core::{
    AgentStatus, DEFAULT_GRACE_PERIOD_SECS,
    chain::abi::AgentRegistry,
    feed::{Change, Cursor, Detail, Event, EventBlock, EventLog, EventType, Finality, Standing},
    index::logs::AGENT_EVENTS,
};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain, consented_register_call,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars},
};
use serde_json::Value;

use super::index::health_index;

/// Blocks after a change's block before it is final, in this test's Worker.
const DEPTH: u64 = 2;

const fn standing(status: AgentStatus, is_compliant: bool) -> Standing {
    Standing { is_registered: true, is_compliant, status: Some(status) }
}

/// The feed's entries as its rules make them, numbered as the runs write them.
struct Model {
    next_batch: u64,
    /// Provisional entries not yet settled, in feed order.
    waiting: Vec<Event>,
}

impl Model {
    /// A run at index block `at`: the waiting entries settled (retracted when `gone` gives the
    /// agent's standing now, final when deep enough), then `changes`, as one batch.
    fn run(&mut self, at: u64, changes: &[Change], gone: impl Fn(&Event) -> Option<Standing>) -> Vec<Event> {
        let mut entries = Vec::new();
        let id = |index: usize| Cursor { batch: self.next_batch, index: index as u32 };
        let mut still = Vec::new();
        for entry in &self.waiting {
            if let Some(now) = gone(entry) {
                entries.push(Event::retraction(id(entries.len()), entry, now));
            } else if entry.change.block.number + DEPTH <= at {
                entries.push(Event::confirmation(id(entries.len()), entry));
            } else {
                still.push(*entry);
            }
        }
        for change in changes {
            let entry = Event::provisional(id(entries.len()), *change);
            still.push(entry);
            entries.push(entry);
        }
        self.waiting = still;
        if !entries.is_empty() {
            self.next_batch += 1;
        }
        entries
    }
}

/// The feed read from the Worker, page after page, after what the test already read.
struct Reader {
    api: EdgeClient,
    after: Option<String>,
}

impl Reader {
    /// Every event after the last one read.
    async fn new_events(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let after = self.after.as_ref().map(|after| format!("&after={after}")).unwrap_or_default();
            let page = self.api.get(&format!("/api/v1/changes?limit=1000{after}")).await;
            assert_eq!(page.status, 200, "{}", page.text);
            events.extend(page.body["events"].as_array().unwrap().iter().cloned());
            if let Some(next) = page.body["next"].as_str() {
                self.after = Some(next.to_owned());
            }
            if page.body["more"] != true {
                return events;
            }
        }
    }
}

fn json_of(events: &[Event]) -> Vec<Value> {
    events.iter().map(|event| serde_json::from_str(&event.to_json()).unwrap()).collect()
}

/// Block `number` as the chain has it.
async fn block(chain: &TestChain, number: u64) -> EventBlock {
    let header =
        chain.chain.provider().get_block_by_number(number.into()).await.unwrap().expect("the block").header;
    EventBlock { number, hash: header.hash, time: header.timestamp }
}

/// A registry write from `from`, mined in its own block: its block, and its agent log.
async fn write<C: SolCall>(chain: &TestChain, from: Address, call: &C) -> (EventBlock, EventLog) {
    let receipt: TransactionReceipt = chain.chain.send(from, chain.registry(), call).await.expect("mined");
    let log = receipt
        .inner
        .logs()
        .iter()
        .find(|log| log.address() == chain.registry() && AGENT_EVENTS.contains(&log.topics()[0]))
        .expect("an agent log");
    let mined = block(chain, receipt.block_number.unwrap()).await;
    assert_eq!(log.block_hash, Some(mined.hash));
    (mined, EventLog { transaction_hash: receipt.transaction_hash, log_index: log.log_index.unwrap() })
}

/// A change of `agent` (id, wallet) made by the log `at`, with `standing` after it.
fn change(
    kind: EventType,
    agent: (u64, Address),
    (block, log): (EventBlock, Option<EventLog>),
    standing: Standing,
    detail: Detail,
) -> Change {
    Change { kind, agent_id: agent.0, wallet: agent.1, block, log, standing, detail }
}

fn flip(agent: (u64, Address), at: (EventBlock, Option<EventLog>), standing: Standing) -> Change {
    let detail = Detail::Compliance { from: !standing.is_compliant, to: standing.is_compliant };
    change(EventType::ComplianceChanged, agent, at, standing, detail)
}

fn status(
    agent: (u64, Address),
    at: (EventBlock, Option<EventLog>),
    from: AgentStatus,
    to: AgentStatus,
    is_compliant: bool,
) -> Change {
    change(EventType::StatusChanged, agent, at, standing(to, is_compliant), Detail::Status { from, to })
}

/// The index's block after a run that went well.
pub(super) async fn index_block(api: &EdgeClient) -> u64 {
    let index = health_index(api).await;
    assert_eq!(index["lastRun"]["ok"], true, "{index}");
    index["block"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_write_every_change_lapse_retraction_and_confirmation_and_keep_the_newest_batch() {
    let chain = TestChain::start().await;
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.extend([
        ("FEED_FINALITY_DEPTH", DEPTH.to_string()),
        ("INDEX_REORG_WINDOW", "8".to_owned()),
        // No sweep: agents no log touched are found for their lapses by the D1 query alone.
        ("INDEX_SWEEP_PER_RUN", "0".to_owned()),
        // Two lapses a run: the third agent's is the next run's.
        ("FEED_LAPSES_PER_RUN", "2".to_owned()),
        ("INDEX_ANSWER_TTL_SECS", "0".to_owned()),
        ("MEMORY_CACHE_BYTES", "0".to_owned()),
    ]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    let mut feed = Reader { api: worker.client(), after: None };
    let mut model = Model { next_batch: 1, waiting: Vec::new() };
    let none = |_: &Event| None;
    let creator = dev_accounts::address(Role::CreatorA);
    let regulator = chain.deployment.regulator;

    // The first run fills the index: the feed starts after it.
    worker.run_index().await;
    assert_eq!(feed.new_events().await, Vec::<Value>::new());

    // A registration: registered, then compliant.
    let wallet_a = dev_accounts::agent_wallet(1);
    let a = (1, wallet_a.address());
    let mined = write(&chain, creator, &consented_register_call(&chain, creator, &wallet_a, 0).await).await;
    let at = (mined.0, Some(mined.1));
    worker.run_index().await;
    let compliant = standing(AgentStatus::Active, true);
    let expected = model.run(
        index_block(&api).await,
        &[change(EventType::Registered, a, at, compliant, Detail::None {}), flip(a, at, compliant)],
        none,
    );
    assert_eq!(feed.new_events().await, json_of(&expected), "a registration");

    // An attestation, then a revenue report.
    let id = |agent: (u64, Address)| U256::from(agent.0);
    let mined = write(&chain, creator, &AgentRegistry::attestComplianceCall { agentId: id(a) }).await;
    let attested_a = mined.0.time;
    worker.run_index().await;
    let expected = model.run(
        index_block(&api).await,
        &[change(
            EventType::Attested,
            a,
            (mined.0, Some(mined.1)),
            compliant,
            Detail::Attested { attested_at: attested_a },
        )],
        none,
    );
    assert_eq!(feed.new_events().await, json_of(&expected), "an attestation");
    let report = AgentRegistry::reportRevenueCall {
        agentId: id(a),
        amount: U256::from(4_200u64),
        currency: "CHF".into(),
        category: "feed".into(),
        periodStart: 1,
        periodEnd: 2,
    };
    let mined = write(&chain, creator, &report).await;
    worker.run_index().await;
    let expected = model.run(
        index_block(&api).await,
        &[change(EventType::RevenueReported, a, (mined.0, Some(mined.1)), compliant, Detail::None {})],
        none,
    );
    assert!(expected.iter().any(|event| event.confirms.is_some()), "the registration is final by now");
    assert_eq!(feed.new_events().await, json_of(&expected), "a revenue report, and the first finals");

    // A suspension and a reactivation within one run: two changes, each with its standing.
    let suspended = write(&chain, regulator, &AgentRegistry::suspendAgentCall { agentId: id(a) }).await;
    let reactivated = write(&chain, regulator, &AgentRegistry::reactivateAgentCall { agentId: id(a) }).await;
    worker.run_index().await;
    let (suspended, reactivated) = ((suspended.0, Some(suspended.1)), (reactivated.0, Some(reactivated.1)));
    let expected = model.run(
        index_block(&api).await,
        &[
            status(a, suspended, AgentStatus::Active, AgentStatus::Suspended, false),
            flip(a, suspended, standing(AgentStatus::Suspended, false)),
            status(a, reactivated, AgentStatus::Suspended, AgentStatus::Active, true),
            flip(a, reactivated, compliant),
        ],
        none,
    );
    assert_eq!(feed.new_events().await, json_of(&expected), "suspended and reactivated in one run");

    // A revocation; and two more agents, the second suspended.
    let revoked = write(&chain, regulator, &AgentRegistry::revokeAgentCall { agentId: id(a) }).await;
    let revoked = (revoked.0, Some(revoked.1));
    let wallet_b = dev_accounts::agent_wallet(2);
    let wallet_c = dev_accounts::agent_wallet(3);
    let (b, c) = ((2, wallet_b.address()), (3, wallet_c.address()));
    let registered_b =
        write(&chain, creator, &consented_register_call(&chain, creator, &wallet_b, 0).await).await;
    let registered_c =
        write(&chain, creator, &consented_register_call(&chain, creator, &wallet_c, 0).await).await;
    let suspended_c = write(&chain, regulator, &AgentRegistry::suspendAgentCall { agentId: id(c) }).await;
    worker.run_index().await;
    let (registered_b, registered_c, suspended_c) = (
        (registered_b.0, Some(registered_b.1)),
        (registered_c.0, Some(registered_c.1)),
        (suspended_c.0, Some(suspended_c.1)),
    );
    let expected = model.run(
        index_block(&api).await,
        &[
            status(a, revoked, AgentStatus::Active, AgentStatus::Revoked, false),
            flip(a, revoked, standing(AgentStatus::Revoked, false)),
            change(EventType::Registered, b, registered_b, compliant, Detail::None {}),
            flip(b, registered_b, compliant),
            change(EventType::Registered, c, registered_c, compliant, Detail::None {}),
            flip(c, registered_c, compliant),
            status(c, suspended_c, AgentStatus::Active, AgentStatus::Suspended, false),
            flip(c, suspended_c, standing(AgentStatus::Suspended, false)),
        ],
        none,
    );
    assert_eq!(feed.new_events().await, json_of(&expected), "a revocation, two registrations, a suspension");

    // Time alone: past every attestation's validity, one empty block. Each agent's attestation
    // expires at that block; only B, compliant until then, also stops being compliant. A run
    // walks two lapses: C's is the next run's, still at the first block a run saw past it.
    let provider = chain.chain.provider();
    let _: Value =
        provider.raw_request("evm_increaseTime".into(), (DEFAULT_GRACE_PERIOD_SECS + 60,)).await.unwrap();
    let _: Value = provider.raw_request("anvil_mine".into(), ("0x1",)).await.unwrap();
    worker.run_index().await;
    let lapse_block = index_block(&api).await;
    let lapsed_at = (block(&chain, lapse_block).await, None);
    let expired = |agent, last_attestation: u64, status: AgentStatus| {
        change(
            EventType::AttestationExpired,
            agent,
            lapsed_at,
            standing(status, false),
            Detail::Expired { last_attestation, valid_until: last_attestation + DEFAULT_GRACE_PERIOD_SECS },
        )
    };
    let expected = model.run(
        lapse_block,
        &[
            expired(a, attested_a, AgentStatus::Revoked),
            expired(b, registered_b.0.time, AgentStatus::Active),
            flip(b, lapsed_at, standing(AgentStatus::Active, false)),
        ],
        none,
    );
    assert_eq!(feed.new_events().await, json_of(&expected), "lapses by time alone");
    let message = health_index(&api).await["lastRun"]["message"].as_str().unwrap().to_owned();
    assert!(message.ends_with("; 2 lapsed attestations walked, the rest are the next runs'"), "{message}");
    worker.run_index().await;
    assert_eq!(index_block(&api).await, lapse_block, "no new block");
    let expected = model.run(lapse_block, &[expired(c, registered_c.0.time, AgentStatus::Suspended)], none);
    assert_eq!(feed.new_events().await, json_of(&expected), "the third lapse, in the next run");

    // A reorganisation: B's attestation (block r) is taken away, and the other chain has C's
    // reactivation at the same height instead. The attestation's two entries are retracted,
    // with B's standing once the reorganisation is applied; C's reactivation follows, provisional.
    let snapshot: Value = provider.raw_request("evm_snapshot".into(), ()).await.unwrap();
    let attested_b = write(&chain, creator, &AgentRegistry::attestComplianceCall { agentId: id(b) }).await;
    let attested_b = (attested_b.0, Some(attested_b.1));
    worker.run_index().await;
    let doomed = model.run(
        index_block(&api).await,
        &[
            change(
                EventType::Attested,
                b,
                attested_b,
                compliant,
                Detail::Attested { attested_at: attested_b.0.time },
            ),
            flip(b, attested_b, compliant),
        ],
        none,
    );
    assert_eq!(feed.new_events().await, json_of(&doomed), "writes a reorganisation will take away");
    let reverted: bool = provider.raw_request("evm_revert".into(), (snapshot,)).await.unwrap();
    assert!(reverted);
    let reactivated_c =
        write(&chain, regulator, &AgentRegistry::reactivateAgentCall { agentId: id(c) }).await;
    assert_eq!(reactivated_c.0.number, attested_b.0.number, "the other chain's block at the same height");
    assert_ne!(reactivated_c.0.hash, attested_b.0.hash);
    let _: Value = provider.raw_request("anvil_mine".into(), ("0x1",)).await.unwrap();
    worker.run_index().await;
    let b_now = standing(AgentStatus::Active, false);
    let removed: Vec<Cursor> =
        doomed.iter().filter(|event| event.finality == Finality::Provisional).map(|event| event.id).collect();
    assert_eq!(removed.len(), 2);
    let expected = model.run(
        index_block(&api).await,
        &[status(
            c,
            (reactivated_c.0, Some(reactivated_c.1)),
            AgentStatus::Suspended,
            AgentStatus::Active,
            false,
        )],
        |entry| removed.contains(&entry.id).then_some(b_now),
    );
    let retracted: Vec<Cursor> = expected.iter().filter_map(|event| event.retracts).collect();
    assert_eq!(retracted, removed, "exactly what the reorganisation removed");
    assert_eq!(feed.new_events().await, json_of(&expected), "retractions, then the other chain's change");

    // Later blocks confirm the rest: every change ends final or retracted, once.
    let _: Value = provider.raw_request("anvil_mine".into(), (format!("{:#x}", DEPTH + 1),)).await.unwrap();
    worker.run_index().await;
    let expected = model.run(index_block(&api).await, &[], none);
    assert_eq!(feed.new_events().await, json_of(&expected), "the last confirmations");
    assert!(model.waiting.is_empty(), "nothing waits any more");

    // Retention: batches older than FEED_RETENTION_SECS (at least 7 days) are deleted by the next
    // run, the newest kept however old, and a cursor in a deleted batch is 410.
    let batches = || -> Vec<u64> {
        worker
            .query_index("SELECT batch FROM feed_batches ORDER BY batch")
            .iter()
            .map(|row| row["batch"].as_u64().unwrap())
            .collect()
    };
    let newest = model.next_batch - 1;
    assert_eq!(batches(), (1..=newest).collect::<Vec<_>>(), "a batch per run that appended");
    worker.execute_index("UPDATE feed_batches SET created_at = created_at - 8 * 86400");
    worker.run_index().await;
    assert_eq!(batches(), vec![newest], "old batches deleted, the newest kept");
    let gone = api.get("/api/v1/changes?after=1-0").await;
    assert_eq!(gone.status, 410, "{}", gone.text);

    // Each run's own counts (its D1 queries, and the rows D1 says it wrote), as
    // docs/index-cost.md reports them.
    for line in worker.output().lines().filter(|line| line.contains("index run: block")) {
        eprintln!("{}", line.trim());
    }
}
