//! A relay whose transaction the node drops from its pool (as nodes evict under load): anvil's
//! own `anvil_dropTransaction` evicts it for real. At the stuck policy's time the relayer sends
//! it again at its relayer nonce, which is still free (before, it waited for the reconciler's
//! grace, about 150 s with the defaults), and the relay after it, queued behind the gap, is
//! mined with it untouched. A dropped transaction whose nonce another transaction holds in the
//! node is not sent over it, by the follower or by the reconciler.

use super::{Engine, TestStore};
use std::time::{Duration, Instant};

use alloy::{
    consensus::Transaction,
    network::TransactionBuilder,
    primitives::{Address, B256, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
};
use kya_tests::{
    TestChain,
    relayer_fixture::{Client, InProcessRelayer, body, forward, sign_with_core, wei},
};
use serde_json::{Value, json};

use super::{agent_key, agent_of, anvil, balance, cost, forwarder_nonce, hash_of, register_call, start};

/// A transaction is stuck two blocks after it was sent; the clock alone never calls it stuck
/// (the tests mine each block themselves). The reconciler keeps its default grace (120 s), so
/// whatever is sent again within a test is the follower's doing.
const STUCK_AFTER_BLOCKS: u64 = 2;
const BY_BLOCKS: [(&str, &str); 3] =
    [("STUCK_AFTER_BLOCKS", "2"), ("STUCK_AFTER_SECS", "3600"), ("READ_RATE_LIMIT_PER_MINUTE", "100000")];

/// Relays the registration of `agent_key(n)`, mining paused; returns the relay's id and hash.
async fn relay_registration(t: &TestChain, client: &Client, n: u64) -> (String, B256) {
    let agent = agent_key(n);
    let request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
    let (status, answer) =
        client.relay(&body(&request, &sign_with_core(t, &agent, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    (answer["relayId"].as_str().unwrap().to_owned(), hash_of(&answer["txHash"]))
}

async fn relay(client: &Client, id: &str) -> Value {
    let (status, relay) = client.get(&format!("/relay/{id}")).await;
    assert_eq!(status, 200, "{relay}");
    relay
}

/// The node evicts `hash` from its pool, and says so.
async fn evict(t: &TestChain, hash: B256) {
    anvil(t, "anvil_dropTransaction", json!([hash])).await;
    assert!(t.chain.provider().get_transaction_by_hash(hash).await.unwrap().is_none(), "evicted");
}

async fn nonces(t: &TestChain, key: Address) -> (u64, u64) {
    let provider = t.chain.provider();
    let mined = provider.get_transaction_count(key).latest().await.unwrap();
    let pending = provider.get_transaction_count(key).pending().await.unwrap();
    (mined, pending)
}

/// The relay key's own self-transfer at nonce 0 with the fees `(max, priority)`, sent by the
/// node's unlocked dev account: a transaction at the relay's nonce that is no relay's. The node
/// holds it, pending, beside nothing else of the key's.
async fn outside_transaction_at_nonce_0(t: &TestChain, key: Address, (max, priority): (u128, u128)) -> B256 {
    let other = TransactionRequest::default()
        .with_from(key)
        .with_to(key)
        .with_nonce(0)
        .with_gas_limit(21_000)
        .with_max_fee_per_gas(max)
        .with_max_priority_fee_per_gas(priority);
    let other = t.chain.submit(other).await.expect("the node takes it");
    assert_eq!(nonces(t, key).await, (0, 1));
    other
}

async fn head(t: &TestChain) -> u64 {
    t.chain.provider().get_block_number().await.unwrap()
}

async fn a_transaction_the_node_evicts_is_sent_again_at_the_stuck_policys_time_and_mined_once(
    engine: Engine,
) {
    let (t, _db, relayer): (TestChain, TestStore, InProcessRelayer) = start(engine, &BY_BLOCKS).await;
    let client = &relayer.client;
    let key = relayer.relayer.address();
    let funds = balance(&t, key).await;
    anvil(&t, "evm_setAutomine", json!([false])).await;

    // The relay is sent at the head `sent`, and the node evicts its transaction.
    let sent = head(&t).await;
    let (dropped_id, first) = relay_registration(&t, client, 500).await;
    assert_eq!(relay(client, &dropped_id).await["relayerNonce"], 0);
    evict(&t, first).await;
    // A block on, the next relay takes the next nonce and waits in the node behind the gap.
    anvil(&t, "evm_mine", json!([])).await;
    let (next_id, next_hash) = relay_registration(&t, client, 501).await;
    assert_eq!(relay(client, &next_id).await["relayerNonce"], 1);
    let queued = t.chain.provider().get_transaction_by_hash(next_hash).await.unwrap().expect("queued");
    assert_eq!((queued.nonce(), nonces(&t, key).await), (1, (0, 0)), "nonce 0 free, 1 queued behind it");

    // The stuck policy's time: the evicted relay is sent again at its nonce, once the follower
    // sees this head (the next relay, a block younger, is not stuck yet).
    anvil(&t, "evm_mine", json!([])).await;
    assert_eq!(head(&t).await, sent + STUCK_AFTER_BLOCKS);
    let stuck_at = Instant::now();
    let mut resent = None;
    while stuck_at.elapsed() < Duration::from_secs(10) {
        let (_, pending) = nonces(&t, key).await;
        let current = hash_of(&relay(client, &dropped_id).await["txHash"]);
        if pending == 2 && current != first {
            resent = Some((current, stuck_at.elapsed()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (second, after) =
        resent.expect("the evicted relay is sent again within 10 s of the stuck policy's time");
    println!("the evicted relay was sent again {} ms after its stuck policy's time", after.as_millis());
    let again = t.chain.provider().get_transaction_by_hash(second).await.unwrap().expect("with the node");
    assert_eq!((again.nonce(), again.to()), (0, Some(t.forwarder())), "its own nonce, to the forwarder");

    // The next block mines both, the evicted relay first: within the stuck policy's time plus
    // a block.
    anvil(&t, "evm_mine", json!([])).await;
    let block = sent + STUCK_AFTER_BLOCKS + 1;
    let dropped = client.relay_until(&dropped_id, |relay| relay["settledAt"].is_string()).await;
    let next = client.relay_until(&next_id, |relay| relay["settledAt"].is_string()).await;
    let mined = t.chain.receipt(second).await.unwrap();
    let next_mined = t.chain.receipt(next_hash).await.unwrap();
    assert!(mined.status() && next_mined.status());
    assert_eq!((mined.block_number, next_mined.block_number), (Some(block), Some(block)));

    // The evicted relay: one relay, its two transactions at one nonce, the second mined and
    // booked at what it cost; the first can never be mined now.
    assert_eq!(dropped["status"], "mined", "{dropped}");
    assert_eq!(dropped["txHash"], second.to_string());
    assert_eq!(dropped["previousTxHashes"], json!([first.to_string()]));
    let kinds: Vec<&str> =
        dropped["transactions"].as_array().unwrap().iter().map(|tx| tx["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["relay", "relay"]);
    assert_eq!((&dropped["relayerNonce"], &dropped["blockNumber"]), (&json!(0), &json!(block)));
    assert_eq!(dropped["costWei"], cost(&mined).to_string());
    assert!(t.chain.provider().get_transaction_by_hash(first).await.unwrap().is_none());
    // The relay after it: its one transaction, at its nonce, not sent again.
    assert_eq!(next["status"], "mined", "{next}");
    assert_eq!((&next["txHash"], &next["previousTxHashes"]), (&json!(next_hash.to_string()), &json!([])));
    assert_eq!((&next["relayerNonce"], &next["blockNumber"]), (&json!(1), &json!(block)));
    assert_eq!(next["costWei"], cost(&next_mined).to_string());

    // The books: each request ran once, two transactions left the key, and the budget and the
    // wallet paid exactly those two.
    for n in [500, 501] {
        let agent = agent_key(n).address();
        assert_eq!(forwarder_nonce(&t, agent).await, 1, "agent {n}'s request ran once");
        assert_ne!(agent_of(&t, agent).await, 0);
    }
    assert_eq!(nonces(&t, key).await, (2, 2), "one transaction mined per relay");
    let paid = cost(&mined) + cost(&next_mined);
    assert_eq!(client.used_wei_settled().await, paid, "each relay charged once, what it cost");
    assert_eq!(funds - balance(&t, key).await, U256::from(paid));
    let (_, status) = client.get("/status").await;
    assert_eq!(wei(&status["dailyGasBudget"]["pendingWei"]), 0, "nothing left reserved");
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_replacements_total 1\n"), "{metrics}");
    assert!(metrics.contains("relayer_cancellations_total 0\n"), "{metrics}");
    relayer.stop().await;
}

/// The evicted relay's nonce is taken by another transaction of the key the node holds (here the
/// key's own self-transfer, sent by the node's unlocked dev account): past the stuck policy's
/// time the relay is not sent over it, and that transaction is mined at the nonce.
async fn an_evicted_transaction_is_not_sent_over_another_at_its_nonce(engine: Engine) {
    let quick = [("STUCK_AFTER_BLOCKS", "1000"), ("STUCK_AFTER_SECS", "1")];
    let (t, _db, relayer): (TestChain, TestStore, InProcessRelayer) = start(engine, &quick).await;
    let client = &relayer.client;
    let key = relayer.relayer.address();
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let (id, first) = relay_registration(&t, client, 510).await;
    evict(&t, first).await;
    let other = outside_transaction_at_nonce_0(&t, key, (10_000_000_000, 1_000_000_000)).await;

    // Past the stuck policy's time and a few of the follower's looks.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let waiting = relay(client, &id).await;
    assert_eq!(
        (&waiting["status"], &waiting["txHash"]),
        (&json!("sent"), &json!(first.to_string())),
        "{waiting}"
    );
    assert_eq!(waiting["transactions"].as_array().unwrap().len(), 1, "nothing sent again: {waiting}");
    let held = t.chain.provider().get_transaction_by_hash(other).await.unwrap().expect("still with the node");
    assert_eq!(held.nonce(), 0);

    anvil(&t, "evm_mine", json!([])).await;
    assert!(t.chain.receipt(other).await.unwrap().status(), "the other transaction is mined at the nonce");
    assert_eq!(nonces(&t, key).await, (1, 1));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = relay(client, &id).await;
    assert_eq!(after["transactions"].as_array().unwrap().len(), 1, "{after}");
    assert_eq!(forwarder_nonce(&t, agent_key(510).address()).await, 0, "the request never ran");
    relayer.stop().await;
}

/// The reconciler, too, leaves a transaction at the relay's nonce that is no relay's: the relay's
/// only transaction evicted, the key's own self-transfer at its nonce with the relay's very fees
/// (which a fee replacement outbids), the stuck policy far off, so the reconciler (grace 0, a
/// pass a second) is the one to decide. Before, it sent the relay again whatever the node held
/// there, knocking the other out; now only while the nonce is free. Once the other is mined, the
/// relay is dropped and nothing is charged for it.
async fn the_reconciler_does_not_send_a_relay_over_a_transaction_that_is_no_relays(engine: Engine) {
    let reconciler_only = [
        ("STUCK_AFTER_BLOCKS", "1000"),
        ("STUCK_AFTER_SECS", "3600"),
        ("RECONCILE_GRACE_SECS", "0"),
        ("RECONCILE_INTERVAL_SECS", "1"),
    ];
    let (t, _db, relayer): (TestChain, TestStore, InProcessRelayer) = start(engine, &reconciler_only).await;
    let client = &relayer.client;
    let key = relayer.relayer.address();
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let (id, first) = relay_registration(&t, client, 520).await;
    let sent = t.chain.provider().get_transaction_by_hash(first).await.unwrap().expect("with the node");
    evict(&t, first).await;
    let fees = (sent.max_fee_per_gas(), sent.max_priority_fee_per_gas().expect("an EIP-1559 relay"));
    let other = outside_transaction_at_nonce_0(&t, key, fees).await;

    // A few reconciler passes: the relay stays on its one transaction, the other in the node.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let waiting = relay(client, &id).await;
    assert_eq!(waiting["transactions"].as_array().unwrap().len(), 1, "nothing sent over it: {waiting}");
    let held = t.chain.provider().get_transaction_by_hash(other).await.unwrap().expect("still with the node");
    assert_eq!((held.nonce(), held.to()), (0, Some(key)));

    // The other is mined at the nonce: the relay can never be, and is dropped, charged nothing.
    anvil(&t, "evm_mine", json!([])).await;
    assert!(t.chain.receipt(other).await.unwrap().status());
    let dropped = client.relay_until(&id, |relay| relay["status"] == "dropped").await;
    assert_eq!(dropped["transactions"].as_array().unwrap().len(), 1, "{dropped}");
    assert_eq!(forwarder_nonce(&t, agent_key(520).address()).await, 0, "the request never ran");
    assert_eq!(client.used_wei_settled().await, 0, "nothing charged for it");
    let (_, status) = client.get("/status").await;
    assert_eq!(wei(&status["dailyGasBudget"]["pendingWei"]), 0, "its reservation released");
    relayer.stop().await;
}

super::on_both_stores!(
    a_transaction_the_node_evicts_is_sent_again_at_the_stuck_policys_time_and_mined_once,
    an_evicted_transaction_is_not_sent_over_another_at_its_nonce,
    the_reconciler_does_not_send_a_relay_over_a_transaction_that_is_no_relays,
);
