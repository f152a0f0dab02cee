//! Stuck transactions on a real anvil: mining paused, so the relay's transaction waits in the
//! pool past `STUCK_AFTER_SECS`. (A block whose base fee is above the transaction's max fee does
//! not do: anvil evicts such a transaction from its pool rather than keep it waiting.) The
//! relayer then sends it again at the same relayer nonce with higher fees (mined, reported with
//! every hash), or, past the request's deadline, cancels the nonce with a self-transfer (the
//! relay reads `expired`, and the next relay uses the next nonce).

use alloy::{
    consensus::Transaction,
    primitives::{B256, U256, aliases::U48, hex, keccak256},
    providers::Provider,
};
use std::sync::{Arc, Mutex};

use kya_tests::{
    TestChain,
    relayer_fixture::{Client, InProcessRelayer, body, forward, sign_with_core},
    rpc_proxy::{self, RpcAction},
};
use serde_json::{Value, json};

use super::{agent_key, agent_of, anvil, cost, forwarder_nonce, receipt, register_call, start};

/// A relayer that calls a transaction stuck after two seconds without it being mined, and a
/// read limit the status polling cannot reach.
async fn relayer_quick_to_replace()
-> (TestChain, tempfile::TempDir, kya_tests::relayer_fixture::InProcessRelayer) {
    start(&[
        ("STUCK_AFTER_BLOCKS", "1000"),
        ("STUCK_AFTER_SECS", "2"),
        ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
    ])
    .await
}

/// Max fees of the relay's transactions, oldest first.
fn max_fees(relay: &Value) -> Vec<u128> {
    relay["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tx| tx["maxFeePerGas"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// The transaction `hash` once the node has it (the relayer records a hash before it submits).
async fn pending(t: &TestChain, hash: B256) -> alloy::rpc::types::Transaction {
    for _ in 0..600 {
        if let Some(tx) = t.chain.provider().get_transaction_by_hash(hash).await.unwrap() {
            return tx;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the node never got {hash}");
}

fn hash_of(value: &Value) -> B256 {
    value.as_str().and_then(|hash| hash.parse().ok()).unwrap_or_else(|| panic!("a hash: {value}"))
}

async fn relay(client: &Client, id: &str) -> Value {
    let (status, relay) = client.get(&format!("/relay/{id}")).await;
    assert_eq!(status, 200, "{relay}");
    relay
}

#[tokio::test]
async fn a_stuck_transaction_is_replaced_with_higher_fees_mined_and_reported_with_both_hashes() {
    let (t, _db, relayer) = relayer_quick_to_replace().await;
    let client = &relayer.client;
    let agent = agent_key(400);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    anvil(&t, "evm_setAutomine", json!([false])).await;
    let (status, answer) = client.relay(&signed).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["relayId"].as_str().unwrap().to_owned();
    let first = hash_of(&answer["txHash"]);
    let sent = relay(client, &id).await;
    assert_eq!(sent["status"], "sent");
    assert_eq!(sent["txHash"], first.to_string());
    assert_eq!(sent["previousTxHashes"], json!([]));
    assert_eq!(sent["from"], agent.address().to_checksum(None));
    assert!(sent["sentAt"].is_string() && sent["settledAt"].is_null(), "{sent}");

    // Mining stays paused: two seconds on, the relayer sends it again with higher fees.
    let replaced = client.relay_until(&id, |relay| relay["status"] == "replaced").await;
    let second = hash_of(&replaced["txHash"]);
    assert_ne!(second, first);
    assert_eq!(replaced["previousTxHashes"][0], first.to_string());
    let fees = max_fees(&replaced);
    assert!(fees.windows(2).all(|pair| pair[1] * 10 >= pair[0] * 11), "each at least 10% more: {fees:?}");
    let new = pending(&t, second).await;
    assert_eq!(new.nonce(), 0, "the same relayer nonce");
    let (_, metrics) = client.get_text("/metrics").await;
    assert!(metrics.contains("relayer_relays_waiting_too_long 1\n"), "{metrics}");
    // The replacement's worst case is reserved.
    let (_, status_report) = client.get("/status").await;
    let reserved: u128 = status_report["dailyGasBudget"]["pendingWei"].as_str().unwrap().parse().unwrap();
    assert!(reserved >= u128::from(new.gas_limit()) * new.max_fee_per_gas(), "{reserved}");

    anvil(&t, "evm_mine", json!([])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let done = client.relay_until(&id, |relay| relay["status"] == "mined").await;
    // The block holds one of its transactions: the latest, unless a further replacement was on
    // its way to the node when the block was mined.
    let mined = t.chain.receipt(hash_of(&done["txHash"])).await.unwrap();
    assert!(mined.status());
    let hashes: Vec<Value> =
        done["transactions"].as_array().unwrap().iter().map(|tx| tx["txHash"].clone()).collect();
    assert!(hashes.len() >= 2 && hashes[0] == json!(first.to_string()), "{done}");
    let mut previous = hashes.clone();
    previous.retain(|hash| *hash != done["txHash"]);
    assert_eq!(done["previousTxHashes"], json!(previous));
    assert_ne!(done["txHash"], first.to_string(), "a replacement was mined");
    assert_eq!(done["blockNumber"], mined.block_number.unwrap());
    assert_eq!(done["gasUsed"], mined.gas_used.to_string());
    assert_eq!(done["costWei"], cost(&mined).to_string());
    assert!(done["settledAt"].is_string(), "{done}");
    assert_ne!(agent_of(&t, agent.address()).await, 0);
    assert_eq!(client.used_wei_settled().await, cost(&mined), "the budget is charged what was mined");
    assert_eq!(
        t.chain.provider().get_transaction_count(relayer.relayer.address()).await.unwrap(),
        1,
        "one nonce used for all of them"
    );

    // Every lookup finds the same relay: by the first hash, the second, and the request.
    for path in [
        format!("/relay/tx/{first}"),
        format!("/relay/tx/{second}"),
        format!("/relay/tx/{}", done["txHash"].as_str().unwrap()),
        format!("/relay/signer/{}/0", agent.address().to_string().to_lowercase()),
    ] {
        let (status, found) = client.get(&path).await;
        assert_eq!((status, &found["relayId"]), (200, &json!(id)), "{path}: {found}");
    }
    // A retry after mining: the relay, mined, with its current hash.
    let (status, again) = client.relay(&signed).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!((again["relayId"].as_str(), again["status"].as_str()), (Some(&*id), Some("mined")));
    assert_eq!(again["txHash"], done["txHash"]);
    let (_, metrics) = client.get_text("/metrics").await;
    let replacements = format!("relayer_replacements_total {}\n", hashes.len() - 1);
    assert!(metrics.contains(&replacements), "{metrics}");
    assert!(metrics.contains("relayer_relays_waiting_too_long 0\n"), "{metrics}");
    assert!(metrics.contains("relayer_accept_to_mined_seconds_count 1\n"), "{metrics}");
    relayer.stop().await;
}

#[tokio::test]
async fn a_relay_stuck_past_its_deadline_is_cancelled_and_the_next_relay_takes_the_next_nonce() {
    let (t, _db, relayer) = relayer_quick_to_replace().await;
    let client = &relayer.client;
    let agent = agent_key(410);
    // A deadline a few seconds ahead, by the chain's clock and the wall clock.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let deadline = t.chain.latest_timestamp().await.unwrap().max(wall) + 3;
    let mut request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    request.deadline = U48::from(deadline);
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    anvil(&t, "evm_setAutomine", json!([false])).await;
    let (status, answer) = client.relay(&signed).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["relayId"].as_str().unwrap().to_owned();
    assert_eq!(relay(client, &id).await["deadline"], deadline);

    // Mining stays paused past the deadline: the relayer cancels the nonce.
    let cancelling = client
        .relay_until(&id, |relay| {
            relay["transactions"].as_array().unwrap().last().unwrap()["kind"] == "cancel"
        })
        .await;
    assert_eq!(cancelling["status"], "expired");
    let cancel = hash_of(&cancelling["txHash"]);
    let cancel_tx = pending(&t, cancel).await;
    assert_eq!(cancel_tx.to(), Some(relayer.relayer.address()), "a self-transfer");
    assert_eq!(cancel_tx.value(), U256::ZERO);
    assert!(cancel_tx.input().is_empty());

    anvil(&t, "evm_mine", json!([])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let expired = client.relay_until(&id, |relay| relay["settledAt"].is_string()).await;
    assert_eq!(expired["status"], "expired");
    // The cancellation mined is this one, or a dearer one sent just before the block.
    let mined = t.chain.receipt(hash_of(&expired["txHash"])).await.unwrap();
    assert!(mined.status());
    assert_eq!((mined.gas_used, mined.to, mined.from), (21_000, Some(mined.from), relayer.relayer.address()));
    assert_eq!(expired["costWei"], cost(&mined).to_string());
    assert_eq!(client.used_wei_settled().await, cost(&mined), "only the cancellation is paid for");
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 0, "the request never ran");
    assert_eq!(agent_of(&t, agent.address()).await, 0);
    // Its deadline is past: the same request is no longer valid (the agent must sign anew).
    let (status, refused) = client.relay(&signed).await;
    assert_eq!((status, refused["error"].as_str()), (401, Some("Invalid signature or nonce mismatch")));

    // The cancelled nonce blocks nothing: the next relay takes the next nonce and is mined.
    let next_agent = agent_key(411);
    let next = forward(&t, next_agent.address(), 0, &register_call(next_agent.address(), 0));
    let (status, answer) =
        client.relay(&body(&next, &sign_with_core(&t, &next_agent, &next).signature)).await;
    assert_eq!(status, 200, "{answer}");
    let next_mined = receipt(&t, &answer).await;
    let next_tx =
        t.chain.provider().get_transaction_by_hash(next_mined.transaction_hash).await.unwrap().unwrap();
    assert_eq!(next_tx.nonce(), cancel_tx.nonce() + 1);
    let (_, metrics) = client.get_text("/metrics").await;
    assert!(metrics.contains("relayer_cancellations_total 1\n"), "{metrics}");
    relayer.stop().await;
}

/// A replacement the node refuses ("replacement transaction underpriced", as a node answers
/// when its pool holds a dearer transaction at that nonce) leaves no trace: the relay's current
/// transaction stays the one the node has, and the next replacement goes through.
#[tokio::test]
async fn a_refused_replacement_leaves_the_relay_on_the_transaction_the_node_has() {
    replacement_not_taken(|call| {
        RpcAction::Raw(
            json!({"jsonrpc": "2.0", "id": call["id"],
                   "error": {"code": -32000, "message": "replacement transaction underpriced"}})
            .to_string(),
        )
    })
    .await;
}

/// A replacement whose answer is lost and that never reaches the node (the connection closes
/// first) is taken back once it is overdue: the relay is sent again from the transaction the
/// node has.
#[tokio::test]
async fn a_lost_replacement_the_node_never_got_is_taken_back_and_sent_again() {
    replacement_not_taken(|_| RpcAction::Close).await;
}

/// A relay whose first replacement (the second raw transaction) the node answers with `not_taken`
/// is mined all the same as a later replacement, and its history lists only hashes the node took.
async fn replacement_not_taken(not_taken: fn(&Value) -> RpcAction) {
    let t = TestChain::start().await;
    let db = tempfile::tempdir().unwrap();
    // Every raw transaction the relayer submits, by hash, and whether the node did not take it
    // (the second: the first replacement).
    let sent: Arc<Mutex<Vec<(B256, bool)>>> = Arc::default();
    let witness = Arc::clone(&sent);
    let node = rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(move |request: &str| {
            if !request.contains("eth_sendRawTransaction") {
                return RpcAction::Forward(request.to_owned());
            }
            let call: Value = serde_json::from_str(request).expect("one JSON-RPC call");
            let raw = hex::decode(call["params"][0].as_str().expect("a raw transaction")).unwrap();
            let mut sent = witness.lock().unwrap();
            let refuse = sent.len() == 1;
            sent.push((keccak256(&raw), refuse));
            if refuse {
                return not_taken(&call);
            }
            RpcAction::Forward(request.to_owned())
        }),
    )
    .await;
    let mut env = kya_tests::relayer_fixture::settings(&t, db.path());
    for (name, value) in [
        ("RPC_URL", node.as_str()),
        ("STUCK_AFTER_BLOCKS", "1000"),
        ("STUCK_AFTER_SECS", "1"),
        ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
    ] {
        kya_tests::relayer_fixture::set(&mut env, name, value);
    }
    let relayer = InProcessRelayer::start(&env).await;
    let client = &relayer.client;
    let agent = agent_key(420);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));

    anvil(&t, "evm_setAutomine", json!([false])).await;
    let (status, answer) =
        client.relay(&body(&request, &sign_with_core(&t, &agent, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["relayId"].as_str().unwrap().to_owned();
    let replaced = client.relay_until(&id, |relay| relay["status"] == "replaced").await;
    let current = hash_of(&replaced["txHash"]);
    pending(&t, current).await;
    anvil(&t, "evm_mine", json!([])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let done = client.relay_until(&id, |relay| relay["status"] == "mined").await;
    assert!(t.chain.receipt(hash_of(&done["txHash"])).await.unwrap().status());
    assert_ne!(agent_of(&t, agent.address()).await, 0);

    let sent = sent.lock().unwrap().clone();
    assert!(sent[1].1 && sent.len() >= 3, "the first replacement was not taken, a later one was: {sent:?}");
    // Without taking that replacement back, the relay would wait on a transaction the node never
    // had and be mined as its first one; it was mined as a replacement sent afterwards (signed
    // alike, it may carry the same hash).
    let recorded: Vec<B256> =
        done["transactions"].as_array().unwrap().iter().map(|tx| hash_of(&tx["txHash"])).collect();
    assert_eq!(recorded[0], hash_of(&answer["txHash"]));
    assert_ne!(done["txHash"], answer["txHash"], "{done}");
    assert!(
        recorded.iter().all(|hash| sent.contains(&(*hash, false))),
        "every recorded hash was taken: {done}"
    );
    relayer.stop().await;
}
