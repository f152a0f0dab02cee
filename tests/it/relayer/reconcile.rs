//! Relays left unfinished end on their own: a reservation whose process died before sending, a
//! transaction the node dropped, and a send whose answer was lost on a node whose pending count
//! lags. Shutdown does not wait for receipts that are not coming. A relay whose registry call
//! fails after its simulation is recorded as such.

use super::{Engine, TestStore, relayer_address};
use std::{sync::Arc, time::Duration};

use alloy::{
    consensus::Transaction,
    primitives::{B256, U256, hex, keccak256},
    providers::Provider,
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::dev_accounts::{self, Role};
use kya_relayer::{NewRelay, RelayRecord};
use kya_tests::{
    TestChain,
    provider_shapes::{self, ProviderShape},
    relayer_fixture::{InProcessRelayer, body, forward, set, settings, sign_with_core},
    rpc_proxy::{self, RpcAction},
};
use serde_json::Value;

use super::{agent_key, agent_of, anvil, cost, receipt, register_call};

/// Settings with a reconciler that looks at every relay at once, every second.
fn eager(t: &TestChain, db: &TestStore) -> Vec<(String, String)> {
    let mut env = settings(t, db);
    set(&mut env, "RECONCILE_GRACE_SECS", "0");
    set(&mut env, "RECONCILE_INTERVAL_SECS", "1");
    env
}

/// Waits until the record `index` has `status`.
async fn record_becomes(relayer: &InProcessRelayer, index: usize, status: &str) -> RelayRecord {
    for _ in 0..1_200 {
        let records = relayer.relayer.store().records().unwrap();
        if let Some(record) = records.get(index).filter(|record| record.status.as_str() == status) {
            return record.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("record {index} never became {status}: {:?}", relayer.relayer.store().records().unwrap());
}

fn records_count(relayer: &InProcessRelayer) -> usize {
    relayer.relayer.store().records().unwrap().len()
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

async fn a_reservation_left_by_a_killed_relayer_is_freed_at_the_next_start(engine: Engine) {
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    let agent = agent_key(300);
    // What a relayer killed between reserving and sending leaves behind.
    let store = db.open();
    let reserved = NewRelay {
        signer: agent.address(),
        forwarder_nonce: alloy::primitives::U256::ZERO,
        digest: alloy::primitives::B256::ZERO,
        signature: vec![0].into(),
        deadline: 0,
        input: Default::default(),
        client_ip: "127.0.0.1".into(),
        gas_limit: 400_000,
        max_fee_wei: 2_000_000_000,
        priority_fee_wei: 1_000_000_000,
        l1_fee_wei: 0,
        lanes: vec![relayer_address()],
    };
    store.reserve(&reserved, &kya_relayer::BudgetLimits::total(u128::MAX), now()).unwrap().unwrap();
    assert_eq!(store.budget(now()).unwrap().pending_wei, 800_000_000_000_000);
    drop(store);

    let relayer = InProcessRelayer::start(&eager(&t, &db)).await;
    let dropped = record_becomes(&relayer, 0, "dropped").await;
    assert_eq!(dropped.cost_wei, Some(0));
    // The signer can relay with that nonce, and only the real transaction is paid for.
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let (status, answer) =
        relayer.client.relay(&body(&request, &sign_with_core(&t, &agent, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    // The registration is read once its receipt is in: an accepted relay may still be on its
    // way to the node (a check before it failed once in CI under load).
    let paid = cost(&receipt(&t, &answer).await);
    assert_ne!(agent_of(&t, agent.address()).await, 0);
    assert_eq!(relayer.client.used_wei_settled().await, paid);
    relayer.stop().await;
}

async fn a_transaction_the_node_forgets_does_not_hold_shutdown_and_is_sent_again_at_its_nonce(
    engine: Engine,
) {
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    let agent = agent_key(310);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    // Mining stops: the relay is sent and waits in the pool.
    let relayer = InProcessRelayer::start(&eager(&t, &db)).await;
    anvil(&t, "evm_setAutomine", serde_json::json!([false])).await;
    let (status, answer) = relayer.client.relay(&signed).await;
    assert_eq!(status, 200, "{answer}");
    let hash: B256 = answer["txHash"].as_str().unwrap().parse().unwrap();
    // Shutdown does not wait for its receipt (the timeout only keeps a hang from stalling the
    // suite): the relay is left sent and unsettled for the next start.
    tokio::time::timeout(Duration::from_secs(120), relayer.stop()).await.expect("shutdown returns");
    let left = db.open().records().unwrap();
    assert_eq!((left[0].status.as_str(), left[0].cost_wei), ("sent", None), "{left:?}");

    // The node forgets the transaction; the next run sends the relay again at its relayer nonce
    // (the nonce is still open, and whoever recorded the transaction could still submit it, so
    // it is not dropped): one relay, mined as its replacement, paid once.
    anvil(&t, "anvil_dropTransaction", serde_json::json!([hash])).await;
    anvil(&t, "evm_setAutomine", serde_json::json!([true])).await;
    let relayer = InProcessRelayer::start(&eager(&t, &db)).await;
    let mined = record_becomes(&relayer, 0, "mined").await;
    assert_eq!(mined.txs.len(), 2, "the forgotten transaction and the one sent again: {mined:?}");
    assert_eq!(mined.txs[0].hash, hash);
    assert_eq!(mined.tx_hash, Some(mined.txs[1].hash));
    let tx = t.chain.provider().get_transaction_by_hash(mined.txs[1].hash).await.unwrap().unwrap();
    assert_eq!(Some(tx.nonce()), mined.relayer_nonce, "at the forgotten transaction's nonce");
    let (_, relay) = relayer.client.get(&format!("/relay/tx/{hash}")).await;
    assert_eq!(
        (relay["status"].as_str(), relay["relayId"].as_str()),
        (Some("mined"), Some(&*mined.relay_id))
    );
    assert_ne!(agent_of(&t, agent.address()).await, 0);
    let (status, answer) = relayer.client.relay(&signed).await;
    assert_eq!((status, answer["relayId"].as_str()), (200, Some(&*mined.relay_id)), "a retry: {answer}");
    let paid = cost(&t.chain.provider().get_transaction_receipt(mined.txs[1].hash).await.unwrap().unwrap());
    assert_eq!(relayer.client.used_wei_settled().await, paid);
    assert_eq!(records_count(&relayer), 1);
    relayer.stop().await;
}

async fn after_a_lost_send_answer_the_next_relay_continues_after_the_transaction_the_node_has(
    engine: Engine,
) {
    // A node behind a proxy that loses the answer to the first send and whose pending count
    // lags (it reports the mined count), as load-balanced endpoints do.
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    let sends = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&sends);
    let node = rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(move |request: &str| {
            if request.contains("eth_sendRawTransaction")
                && counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0
            {
                return RpcAction::ForwardAndLose;
            }
            if request.contains("eth_getTransactionCount") {
                return RpcAction::Forward(request.replace("\"pending\"", "\"latest\""));
            }
            RpcAction::Forward(request.to_owned())
        }),
    )
    .await;
    let mut env = settings(&t, &db);
    set(&mut env, "RPC_URL", node);
    let relayer = InProcessRelayer::start(&env).await;
    anvil(&t, "evm_setAutomine", serde_json::json!([false])).await;

    let (first, second) = (agent_key(320), agent_key(321));
    let relay = |agent: &alloy::signers::local::PrivateKeySigner| {
        let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
        body(&request, &sign_with_core(&t, agent, &request).signature)
    };
    let (status, answer) = relayer.client.relay(&relay(&first)).await;
    assert_eq!(status, 500, "{answer}");
    let message = answer["error"].as_str().unwrap();
    assert!(message.starts_with("Sending the transaction failed; it may still be mined as 0x"), "{message}");
    let lost: B256 = message.rsplit(' ').next().unwrap().parse().unwrap();
    let (status, answer) = relayer.client.relay(&relay(&second)).await;
    assert_eq!(status, 200, "{answer}");
    let next: B256 = answer["txHash"].as_str().unwrap().parse().unwrap();

    anvil(&t, "evm_mine", serde_json::json!([])).await;
    anvil(&t, "evm_setAutomine", serde_json::json!([true])).await;
    let (lost, next) = (t.chain.receipt(lost).await.unwrap(), t.chain.receipt(next).await.unwrap());
    assert!(lost.status() && next.status());
    let provider = t.chain.provider();
    let next_tx = provider.get_transaction_by_hash(next.transaction_hash).await.unwrap().unwrap();
    let lost_tx = provider.get_transaction_by_hash(lost.transaction_hash).await.unwrap().unwrap();
    assert_eq!(next_tx.nonce(), lost_tx.nonce() + 1);
    assert_ne!(agent_of(&t, first.address()).await, 0);
    assert_ne!(agent_of(&t, second.address()).await, 0);
    assert_eq!(relayer.client.used_wei_settled().await, cost(&lost) + cost(&next));
    relayer.stop().await;
}

/// `execute` does not revert when the registry call fails. A request whose simulation passed but
/// whose agent is suspended before it is mined still costs its gas and uses up its nonce: the
/// record says `call_failed` (from the forwarder's `Executed` event), not `mined`.
async fn a_registry_call_that_fails_after_its_simulation_is_recorded_as_call_failed(engine: Engine) {
    let t = TestChain::start().await;
    call_failed_through(&t, engine, t.rpc_url(), 330).await;
}

/// The failed call's reason reads the same whichever way the node words its reverts
/// (`kya_core::chain::revert`, PROVIDERS.md): hosted providers' reason-only messages, older Nethermind.
async fn a_failed_calls_reason_reads_the_same_in_every_providers_revert_shape(engine: Engine) {
    let t = TestChain::start().await;
    for (n, shape) in ProviderShape::ERROR_SHAPES.into_iter().enumerate() {
        let (node, _) = provider_shapes::start(&t.rpc_url(), shape).await;
        call_failed_through(&t, engine, node, 332 + n as u64).await;
    }
}

/// A relay sent while its agent is Active and mined after the agent's suspension, by a relayer
/// reading the chain at `rpc_url`: `call_failed`, with the registry's reason.
async fn call_failed_through(t: &TestChain, engine: Engine, rpc_url: String, agent_number: u64) {
    let db = TestStore::new(engine);
    let agent = agent_key(agent_number);
    let creator = dev_accounts::address(Role::CreatorA);
    let register = kya_tests::consented_register_call(t, creator, &agent, 0).await;
    t.chain.send(creator, t.registry(), &register).await.unwrap();
    let id = agent_of(t, agent.address()).await;
    let attest = AgentRegistry::attestComplianceCall { agentId: U256::from(id) };
    let request = forward(t, agent.address(), 0, &attest);
    let signed = body(&request, &sign_with_core(t, &agent, &request).signature);
    let mut env = settings(t, &db);
    set(&mut env, "RPC_URL", rpc_url);
    let relayer = InProcessRelayer::start(&env).await;

    // The relay is checked and sent while the agent is Active, then waits in the pool.
    anvil(t, "evm_setAutomine", serde_json::json!([false])).await;
    let (status, answer) = relayer.client.relay(&signed).await;
    assert_eq!(status, 200, "{answer}");
    // The regulator's suspension pays a higher tip, so the block runs it first.
    super::suspend_ahead_of_the_pool(t, attest.agentId).await;
    anvil(t, "evm_setAutomine", serde_json::json!([true])).await;

    let mined = receipt(t, &answer).await;
    assert!(mined.status(), "the transaction itself succeeds");
    let record = record_becomes(&relayer, 0, "call_failed").await;
    assert_eq!(record.cost_wei, Some(cost(&mined)));
    // The relay's status says so too, with the registry's reason, block, gas and cost.
    let (status, relay) =
        relayer.client.get(&format!("/relay/{}", answer["relayId"].as_str().unwrap())).await;
    assert_eq!(status, 200, "{relay}");
    assert_eq!(relay["status"], "call_failed");
    assert_eq!(relay["revertReason"], "Agent not active");
    assert_eq!(relay["txHash"], answer["txHash"]);
    assert_eq!(relay["blockNumber"], mined.block_number.unwrap());
    assert_eq!(relay["gasUsed"], mined.gas_used.to_string());
    assert_eq!(relay["costWei"], cost(&mined).to_string());
    assert_eq!(relayer.client.used_wei_settled().await, cost(&mined), "the gas is paid all the same");
    let agent_record =
        t.chain.view(t.registry(), &AgentRegistry::getAgentCall { agentId: attest.agentId }).await;
    assert_eq!(agent_record.unwrap().status, 1, "suspended, and the attestation never happened");
    relayer.stop().await;
}

/// Each transaction is on disk, by its hash, before the node can see it: a crash at any point
/// after signing leaves a record the reconciler can settle or drop by that hash.
async fn a_transaction_is_recorded_before_the_node_sees_it(engine: Engine) {
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    // A store of the test's own on the relayer's database, as a second daemon would read it.
    let store = Arc::new(db.open());
    /// Each hash the node is sent, with the store's status for that hash at that moment.
    type Seen = Vec<(String, Option<String>)>;
    let seen: Arc<std::sync::Mutex<Seen>> = Arc::default();
    let witness = Arc::clone(&seen);
    let node = rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(move |request: &str| {
            if request.contains("eth_sendRawTransaction") {
                let call: Value = serde_json::from_str(request).expect("one JSON-RPC call");
                let raw = hex::decode(call["params"][0].as_str().expect("raw transaction")).unwrap();
                let hash = keccak256(&raw);
                let records = store.records().unwrap();
                let status = records.into_iter().find(|record| record.tx_hash == Some(hash));
                witness
                    .lock()
                    .unwrap()
                    .push((hash.to_string(), status.map(|record| record.status.as_str().to_owned())));
            }
            RpcAction::Forward(request.to_owned())
        }),
    )
    .await;
    let mut env = settings(&t, &db);
    set(&mut env, "RPC_URL", node);
    let relayer = InProcessRelayer::start(&env).await;

    let mut hashes = Vec::new();
    for n in [340, 341] {
        let agent = agent_key(n);
        let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
        let (status, answer) =
            relayer.client.relay(&body(&request, &sign_with_core(&t, &agent, &request).signature)).await;
        assert_eq!(status, 200, "{answer}");
        hashes.push(answer["txHash"].as_str().unwrap().to_owned());
    }
    let seen = seen.lock().unwrap().clone();
    let expected: Vec<_> = hashes.into_iter().map(|hash| (hash, Some("sent".to_owned()))).collect();
    assert_eq!(seen, expected, "each hash was recorded as sent before its submission");
    relayer.stop().await;
}

super::on_both_stores!(
    a_reservation_left_by_a_killed_relayer_is_freed_at_the_next_start,
    a_transaction_the_node_forgets_does_not_hold_shutdown_and_is_sent_again_at_its_nonce,
    after_a_lost_send_answer_the_next_relay_continues_after_the_transaction_the_node_has,
    a_registry_call_that_fails_after_its_simulation_is_recorded_as_call_failed,
    a_failed_calls_reason_reads_the_same_in_every_providers_revert_shape,
    a_transaction_is_recorded_before_the_node_sees_it,
);
