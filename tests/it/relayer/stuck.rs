//! Stuck transactions on a real anvil: mining paused, so the relay's transaction waits in the
//! pool past `STUCK_AFTER_SECS`. (A block whose base fee is above the transaction's max fee does
//! not do: anvil evicts such a transaction from its pool rather than keep it waiting.) The
//! relayer then sends it again at the same relayer nonce with higher fees (mined, reported with
//! every hash), or, past the request's deadline, cancels the nonce with a self-transfer (the
//! relay reads `expired`, and the next relay uses the next nonce). A relay still stuck when the
//! next rise would pass `MAX_FEE_PER_GAS_WEI` is cancelled alike.

use super::{Engine, TestStore};
use alloy::{
    consensus::Transaction,
    primitives::{Address, B256, U256, aliases::U48, hex, keccak256},
    providers::Provider,
};
use std::sync::{Arc, Mutex};

use kya_tests::{
    TestChain,
    relayer_fixture::{Client, body, forward, sign_with_core, wei},
    rpc_proxy::{self, RpcAction},
};
use serde_json::{Value, json};

use super::{
    agent_key, agent_of, anvil, balance, cost, forwarder_nonce, hash_of, pending, receipt, register_call,
    start, start_on,
};

/// Settings that call a transaction stuck after two seconds without it being mined, with a read
/// limit the status polling cannot reach.
/// A deadline needs only a second of room here: the tests make relays expire on purpose.
const QUICK_TO_REPLACE: [(&str, &str); 4] = [
    ("STUCK_AFTER_BLOCKS", "1000"),
    ("STUCK_AFTER_SECS", "2"),
    ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
    ("DEADLINE_MARGIN_SECS", "1"),
];

/// A relayer quick to replace: [`QUICK_TO_REPLACE`].
async fn relayer_quick_to_replace(
    engine: Engine,
) -> (TestChain, TestStore, kya_tests::relayer_fixture::InProcessRelayer) {
    start(engine, &QUICK_TO_REPLACE).await
}

/// Pauses mining and relays `signed`, whose transaction then waits in the pool. Returns the
/// relay's id and first hash.
async fn relay_held(t: &TestChain, client: &Client, signed: &Value) -> (String, B256) {
    anvil(t, "evm_setAutomine", json!([false])).await;
    let (status, answer) = client.relay(signed).await;
    assert_eq!(status, 200, "{answer}");
    (answer["relayId"].as_str().unwrap().to_owned(), hash_of(&answer["txHash"]))
}

/// Mines what waits in the pool in one block, then each transaction as it comes.
async fn resume_mining(t: &TestChain) {
    anvil(t, "evm_mine", json!([])).await;
    anvil(t, "evm_setAutomine", json!([true])).await;
}

/// Whether the relay's latest transaction is the cancellation.
/// The relay's last transaction is its cancellation, and its status says so (a relay is read in
/// two statements: the transaction may show a moment before the status).
fn is_cancelling(relay: &Value) -> bool {
    relay["transactions"].as_array().unwrap().last().unwrap()["kind"] == "cancel"
        && relay["status"] != "replaced"
}

/// `tx` is a cancellation: a zero-value self-transfer of the `relayer` with a transfer's gas.
fn assert_cancellation(tx: &alloy::rpc::types::Transaction, relayer: Address) {
    assert_eq!((tx.inner.signer(), tx.to()), (relayer, Some(relayer)), "a self-transfer");
    assert_eq!(tx.value(), U256::ZERO);
    assert!(tx.input().is_empty());
    assert_eq!(tx.gas_limit(), 21_000);
}

/// Relays `signed` (mining on submission) and checks it is mined at relayer nonce `nonce`.
async fn relay_mined_at(t: &TestChain, client: &Client, signed: &Value, nonce: u64) -> Value {
    let (status, answer) = client.relay(signed).await;
    assert_eq!(status, 200, "{answer}");
    let mined = receipt(t, &answer).await;
    assert!(mined.status());
    let tx = t.chain.provider().get_transaction_by_hash(mined.transaction_hash).await.unwrap().unwrap();
    assert_eq!(tx.nonce(), nonce);
    answer
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

async fn relay(client: &Client, id: &str) -> Value {
    let (status, relay) = client.get(&format!("/relay/{id}")).await;
    assert_eq!(status, 200, "{relay}");
    relay
}

async fn a_stuck_transaction_is_replaced_with_higher_fees_mined_and_reported_with_both_hashes(
    engine: Engine,
) {
    let (t, _db, relayer) = relayer_quick_to_replace(engine).await;
    let client = &relayer.client;
    let agent = agent_key(400);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    let (id, first) = relay_held(&t, client, &signed).await;
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
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_relays_waiting_too_long 1\n"), "{metrics}");
    // The replacement's worst case is reserved.
    let (_, status_report) = client.get("/status").await;
    let reserved: u128 = status_report["dailyGasBudget"]["pendingWei"].as_str().unwrap().parse().unwrap();
    assert!(reserved >= u128::from(new.gas_limit()) * new.max_fee_per_gas(), "{reserved}");

    resume_mining(&t).await;
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
    let (_, metrics) = client.metrics().await;
    let replacements = format!("relayer_replacements_total {}\n", hashes.len() - 1);
    assert!(metrics.contains(&replacements), "{metrics}");
    assert!(metrics.contains("relayer_relays_waiting_too_long 0\n"), "{metrics}");
    assert!(metrics.contains("relayer_accept_to_mined_seconds_count 1\n"), "{metrics}");
    relayer.stop().await;
}

async fn a_relay_stuck_past_its_deadline_is_cancelled_and_the_next_relay_takes_the_next_nonce(
    engine: Engine,
) {
    let (t, _db, relayer) = relayer_quick_to_replace(engine).await;
    let client = &relayer.client;
    let agent = agent_key(410);
    // A deadline a few seconds ahead, by the chain's clock and the wall clock.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let deadline = t.chain.latest_timestamp().await.unwrap().max(wall) + 3;
    let mut request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    request.deadline = U48::from(deadline);
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    let (id, _) = relay_held(&t, client, &signed).await;
    assert_eq!(relay(client, &id).await["deadline"], deadline);

    // Mining stays paused past the deadline: the relayer cancels the nonce.
    let cancelling = client.relay_until(&id, is_cancelling).await;
    assert_eq!(cancelling["status"], "expired");
    let cancel = hash_of(&cancelling["txHash"]);
    let cancel_tx = pending(&t, cancel).await;
    assert_cancellation(&cancel_tx, relayer.relayer.address());

    resume_mining(&t).await;
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
    // Its deadline is past: the same request is refused before any on-chain check (the agent
    // must sign anew).
    let (status, refused) = client.relay(&signed).await;
    let message = refused["error"].as_str().unwrap_or_default();
    assert_eq!(status, 400, "{refused}");
    assert!(message.starts_with(&format!("request.deadline {deadline} leaves 0 s after")), "{message}");

    // The cancelled nonce blocks nothing: the next relay takes the next nonce and is mined.
    let next_agent = agent_key(411);
    let next = forward(&t, next_agent.address(), 0, &register_call(next_agent.address(), 0));
    let next = body(&next, &sign_with_core(&t, &next_agent, &next).signature);
    relay_mined_at(&t, client, &next, cancel_tx.nonce() + 1).await;
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_cancellations_total 1\n"), "{metrics}");
    relayer.stop().await;
}

async fn a_relay_stuck_at_the_fee_cap_is_cancelled_and_its_signer_relays_again_at_the_next_nonce(
    engine: Engine,
) {
    let t = TestChain::start().await;
    // The cap a few 10% rises above today's fee: 1.1^4 ≈ 1.46 times it fits, 1.1^5 ≈ 1.61 does not.
    let today = t.chain.provider().estimate_eip1559_fees().await.unwrap().max_fee_per_gas;
    let cap = today * 3 / 2;
    let cap_setting = cap.to_string();
    let mut settings = QUICK_TO_REPLACE.to_vec();
    settings.extend([("FEE_BUMP_PERCENT", "10"), ("MAX_FEE_PER_GAS_WEI", cap_setting.as_str())]);
    let (_db, relayer) = start_on(&t, engine, &settings).await;
    let client = &relayer.client;
    let paying = relayer.relayer.address();
    let funds = balance(&t, paying).await;
    let agent = agent_key(430);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    let (id, first) = relay_held(&t, client, &signed).await;
    // Mining stays paused: sent again every two seconds or so with 10% more, until the next rise
    // would pass the cap; then the nonce is cancelled.
    let cancelling = client.relay_until(&id, is_cancelling).await;
    assert_eq!(cancelling["status"], "expired");
    let txs = cancelling["transactions"].as_array().unwrap();
    let kinds: Vec<&str> = txs.iter().map(|tx| tx["kind"].as_str().unwrap()).collect();
    let replacements = kinds.len() - 2;
    assert!(kinds[..=replacements].iter().all(|kind| *kind == "relay"), "{cancelling}");
    assert_eq!(txs[0]["txHash"], first.to_string());
    let fees = max_fees(&cancelling);
    let tips: Vec<u128> =
        txs.iter().map(|tx| tx["maxPriorityFeePerGas"].as_str().unwrap().parse().unwrap()).collect();
    println!("fee cap {cap} wei; max fees {fees:?}, tips {tips:?} (the last: the cancellation)");
    let (relay_fees, cancel_fee) = (&fees[..=replacements], fees[replacements + 1]);
    assert_eq!(relay_fees[0], today, "the first at the node's suggestion");
    assert_eq!(replacements, 4, "1.1^4 of the first fee fits under the cap: {fees:?}");
    for (pair, tip) in relay_fees.windows(2).zip(tips.windows(2)) {
        assert!(pair[1] * 10 >= pair[0] * 11 && pair[1] <= cap, "each 10% more, within the cap: {fees:?}");
        assert!(tip[1] * 10 >= tip[0] * 11, "the tip too: {tips:?}");
    }
    let last = relay_fees[replacements];
    assert!(last * 11 > cap * 10, "replaced as far as the cap allows: {fees:?}");
    // The cancellation has its own, higher cap (twice the relays' by default): it outbids the
    // replacement holding the nonce.
    assert!(cancel_fee * 10 >= last * 11 && cancel_fee > cap, "{fees:?}");
    assert!(tips[replacements + 1] * 10 >= tips[replacements] * 11, "{tips:?}");

    // What the node holds at the relayer nonce is the cancellation, not the relay.
    let cancel = hash_of(&cancelling["txHash"]);
    let cancel_tx = pending(&t, cancel).await;
    assert_cancellation(&cancel_tx, paying);
    assert_eq!(cancelling["relayerNonce"], cancel_tx.nonce());
    assert_eq!(cancel_tx.max_fee_per_gas(), cancel_fee);
    let last_relay = hash_of(&txs[replacements]["txHash"]);
    assert!(t.chain.provider().get_transaction_by_hash(last_relay).await.unwrap().is_none(), "replaced");

    resume_mining(&t).await;
    let expired = client.relay_until(&id, |relay| relay["settledAt"].is_string()).await;
    assert_eq!(expired["status"], "expired");
    // The cancellation mined is this one, or a dearer one sent just before the block.
    let mined_hash = hash_of(&expired["txHash"]);
    let mined = t.chain.receipt(mined_hash).await.unwrap();
    assert!(mined.status());
    assert_eq!((mined.from, mined.to, mined.gas_used), (paying, Some(paying), 21_000));
    let mined_tx = t.chain.provider().get_transaction_by_hash(mined_hash).await.unwrap().unwrap();
    assert_cancellation(&mined_tx, paying);
    assert_eq!(mined_tx.nonce(), cancel_tx.nonce());
    let recorded = expired["transactions"].as_array().unwrap();
    assert_eq!(recorded[..txs.len()], txs[..], "the history kept");
    let entry = recorded.iter().find(|tx| tx["txHash"] == expired["txHash"]).unwrap();
    assert_eq!(entry["kind"], "cancel");
    assert_eq!(entry["maxFeePerGas"], mined_tx.max_fee_per_gas().to_string());
    assert_eq!(entry["maxPriorityFeePerGas"], mined_tx.max_priority_fee_per_gas().unwrap().to_string());
    let previous: Vec<&Value> =
        recorded.iter().map(|tx| &tx["txHash"]).filter(|hash| **hash != expired["txHash"]).collect();
    assert_eq!(expired["previousTxHashes"], json!(previous));
    assert_eq!(expired["relayerNonce"], cancel_tx.nonce());
    assert_eq!(expired["blockNumber"], mined.block_number.unwrap());
    assert_eq!(expired["gasUsed"], "21000");
    assert_eq!(expired["costWei"], cost(&mined).to_string());
    println!(
        "cancellation mined: {} gas at {} wei = {} wei",
        mined.gas_used,
        mined.effective_gas_price,
        cost(&mined)
    );
    // The relayed call never happened; the books and the wallet paid the cancellation alone.
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 0, "the request never ran");
    assert_eq!(agent_of(&t, agent.address()).await, 0, "no agent registered");
    assert_eq!(client.used_wei_settled().await, cost(&mined), "the budget is charged the cancellation");
    assert_eq!(funds - balance(&t, paying).await, U256::from(cost(&mined)), "and the wallet paid it");
    for path in
        [format!("/relay/tx/{first}"), format!("/relay/tx/{last_relay}"), format!("/relay/tx/{mined_hash}")]
    {
        let (status, found) = client.get(&path).await;
        assert_eq!((status, &found["relayId"]), (200, &json!(id)), "{path}: {found}");
    }

    // The request never ran and its deadline is far: the signer's relay goes again as a new
    // relay, at the next relayer nonce, and is mined.
    let again = relay_mined_at(&t, client, &signed, cancel_tx.nonce() + 1).await;
    assert_ne!(again["relayId"], json!(id), "a new relay");
    assert_ne!(agent_of(&t, agent.address()).await, 0);
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 1);
    // Mined on chain already; the relayer records it once it has the receipt.
    let again_id = again["relayId"].as_str().unwrap();
    client.relay_until(again_id, |relay| relay["status"] == "mined").await;
    let signer_path = format!("/relay/signer/{}/0", agent.address());
    let (_, latest) = client.get(&signer_path).await;
    assert_eq!((&latest["relayId"], &latest["status"]), (&again["relayId"], &json!("mined")), "{latest}");
    assert_eq!(relay(client, &id).await["status"], "expired", "the cancelled relay stays expired");
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains(&format!("relayer_replacements_total {replacements}\n")), "{metrics}");
    let cancels = recorded.len() - replacements - 1;
    assert!(metrics.contains(&format!("relayer_cancellations_total {cancels}\n")), "{metrics}");
    relayer.stop().await;
}

/// A cancellation has a fee cap of its own (`MAX_CANCEL_FEE_PER_GAS_WEI`): here the same as the
/// relays', so once the relay is replaced up to the cap nothing within the caps outbids it. The
/// relay waits at its last replacement, nothing more is sent or reserved, and when mining
/// resumes that replacement is mined and booked at what it cost.
async fn a_relay_whose_cancellation_would_pass_its_cap_waits_and_costs_no_more(engine: Engine) {
    let t = TestChain::start().await;
    let today = t.chain.provider().estimate_eip1559_fees().await.unwrap().max_fee_per_gas;
    let cap = (today * 3 / 2).to_string();
    let mut settings = QUICK_TO_REPLACE.to_vec();
    settings.extend([
        ("FEE_BUMP_PERCENT", "10"),
        ("MAX_FEE_PER_GAS_WEI", cap.as_str()),
        ("MAX_CANCEL_FEE_PER_GAS_WEI", cap.as_str()),
    ]);
    let (_db, relayer) = start_on(&t, engine, &settings).await;
    let client = &relayer.client;
    let paying = relayer.relayer.address();
    let funds = balance(&t, paying).await;
    let agent = agent_key(440);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    let (id, _) = relay_held(&t, client, &signed).await;
    // Replaced four times (1.1^4 of today's fee fits under the cap), then it waits.
    let at_the_cap =
        client.relay_until(&id, |relay| relay["transactions"].as_array().unwrap().len() == 5).await;
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    let waiting = relay(client, &id).await;
    assert_eq!(waiting["status"], "replaced", "{waiting}");
    assert_eq!(waiting["transactions"], at_the_cap["transactions"], "nothing sent past the caps");
    let kinds: Vec<&str> =
        waiting["transactions"].as_array().unwrap().iter().map(|tx| tx["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["relay"; 5]);
    let reserved = waiting["reservedWei"].as_str().unwrap().to_owned();
    assert_eq!(reserved, at_the_cap["reservedWei"].as_str().unwrap(), "the reservation grew no further");
    let last_fee = *max_fees(&waiting).last().unwrap();
    assert!(last_fee * 11 > cap.parse::<u128>().unwrap() * 10, "replaced as far as the cap allows");

    resume_mining(&t).await;
    let mined = client.relay_until(&id, |relay| relay["settledAt"].is_string()).await;
    assert_eq!(mined["status"], "mined", "{mined}");
    let receipt = t.chain.receipt(hash_of(&mined["txHash"])).await.unwrap();
    assert_eq!(mined["costWei"], cost(&receipt).to_string());
    assert_eq!(client.used_wei_settled().await, cost(&receipt), "booked at what it cost");
    assert_eq!(funds - balance(&t, paying).await, U256::from(cost(&receipt)));
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_cancellations_total 0\n"), "{metrics}");
    relayer.stop().await;
}

/// Issue 28: a fee replacement is booked against the relay's client's share like a reservation.
/// A first relayer (never calling a relay stuck) sends a relay and stops; a second one on the
/// same store, whose client share (10% of a budget of 11 reservations: 1.1 of it) covers the
/// relay but not its 20% fee bump, finds it stuck: the bump is refused by the share, and the
/// relay is cancelled instead (the cancellation's worst case, 21,000 gas, is within what the relay
/// already reserved). The day's budget and the signer's share had room for the bump.
async fn a_replacement_refused_by_the_clients_share_becomes_a_cancellation(engine: Engine) {
    let t = TestChain::start().await;
    let (db, first) =
        start_on(&t, engine, &[("STUCK_AFTER_SECS", "3600"), ("STUCK_AFTER_BLOCKS", "1000")]).await;
    let agent = agent_key(460);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);
    let (id, first_hash) = relay_held(&t, &first.client, &signed).await;
    let reserved = wei(&relay(&first.client, &id).await["reservedWei"]);
    first.stop().await;

    let mut settings = kya_tests::relayer_fixture::settings(&t, &db);
    let budget = alloy::primitives::utils::format_ether(U256::from(reserved * 11));
    for (name, value) in QUICK_TO_REPLACE
        .iter()
        .copied()
        .chain([("DAILY_GAS_BUDGET", budget.as_str()), ("CLIENT_BUDGET_SHARE_PERCENT", "10")])
    {
        kya_tests::relayer_fixture::set(&mut settings, name, value);
    }
    let relayer = kya_tests::relayer_fixture::InProcessRelayer::start(&settings).await;
    let client = &relayer.client;
    let cancelling = client.relay_until(&id, is_cancelling).await;
    let kinds: Vec<&str> = cancelling["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tx| tx["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["relay", "cancel"], "no fee bump was sent: {cancelling}");
    assert_eq!(wei(&cancelling["reservedWei"]), reserved, "the reservation did not grow");
    assert_eq!(cancelling["transactions"][0]["txHash"], first_hash.to_string());
    assert_cancellation(&pending(&t, hash_of(&cancelling["txHash"])).await, relayer.relayer.address());
    let (_, status) = client.get("/status").await;
    assert_eq!(wei(&status["dailyGasBudget"]["usedWei"]), reserved, "nothing booked past the share");

    resume_mining(&t).await;
    let expired = client.relay_until(&id, |relay| relay["settledAt"].is_string()).await;
    assert_eq!(expired["status"], "expired", "{expired}");
    let mined = t.chain.receipt(hash_of(&expired["txHash"])).await.unwrap();
    assert_eq!(mined.gas_used, 21_000, "the cancellation was mined");
    assert_eq!(expired["costWei"], cost(&mined).to_string());
    assert_eq!(client.used_wei_settled().await, cost(&mined));
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 0, "the request never ran");
    relayer.stop().await;
}

/// A replacement the node refuses ("replacement transaction underpriced", as a node answers
/// when its pool holds a dearer transaction at that nonce) leaves no trace: the relay's current
/// transaction stays the one the node has, and the next replacement goes through.
async fn a_refused_replacement_leaves_the_relay_on_the_transaction_the_node_has(engine: Engine) {
    replacement_not_taken(engine, |call| {
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
async fn a_lost_replacement_the_node_never_got_is_taken_back_and_sent_again(engine: Engine) {
    replacement_not_taken(engine, |_| RpcAction::Close).await;
}

/// A relayer reaching the node through the proxy at `node`, quick to replace (stuck after a
/// second), holding the registration of `agent_key(n)` with mining paused.
struct Held {
    _db: TestStore,
    relayer: kya_tests::relayer_fixture::InProcessRelayer,
    agent: alloy::signers::local::PrivateKeySigner,
    /// The relay's id and its first transaction's hash.
    id: String,
    first: B256,
}

/// Starts a [`Held`]. Its store goes when the `Held`'s `_db` is dropped: bind it, not `..`.
async fn held_behind(t: &TestChain, engine: Engine, node: &str, n: u64) -> Held {
    let (db, relayer) = start_on(
        t,
        engine,
        &[
            ("RPC_URL", node),
            ("STUCK_AFTER_BLOCKS", "1000"),
            ("STUCK_AFTER_SECS", "1"),
            ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let agent = agent_key(n);
    let request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(t, &agent, &request).signature);
    let (id, first) = relay_held(t, &relayer.client, &signed).await;
    Held { _db: db, relayer, agent, id, first }
}

/// A relay whose first replacement (the second raw transaction) the node answers with `not_taken`
/// is mined all the same as a later replacement, and its history lists only hashes the node took.
async fn replacement_not_taken(engine: Engine, not_taken: fn(&Value) -> RpcAction) {
    let t = TestChain::start().await;
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
    let Held { _db, relayer, agent, id, first } = held_behind(&t, engine, &node, 420).await;
    let client = &relayer.client;
    let replaced = client.relay_until(&id, |relay| relay["status"] == "replaced").await;
    let current = hash_of(&replaced["txHash"]);
    pending(&t, current).await;
    resume_mining(&t).await;
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
    assert_eq!(recorded[0], first);
    assert_ne!(hash_of(&done["txHash"]), first, "{done}");
    assert!(
        recorded.iter().all(|hash| sent.contains(&(*hash, false))),
        "every recorded hash was taken: {done}"
    );
    relayer.stop().await;
}

/// A replacement the node took though its answer was lost, which the node then says once it
/// does not know (as a node behind a provider's load balancer says of a transaction another of
/// its nodes took): it stays in the relay's history, so that once mined the relay is settled with
/// its receipt and charged what it cost. Taken back on that one answer, it would be mined with
/// no receipt of the relay's to show, and the relay closed as `executed` at its worst case.
async fn a_replacement_a_node_does_not_know_yet_stays_in_the_relays_history(engine: Engine) {
    let t = TestChain::start().await;
    // The first replacement's hash, once submitted (the second raw transaction), and how many
    // times the node was made to say it does not know it.
    let replacement: Arc<Mutex<Option<B256>>> = Arc::default();
    let denied: Arc<Mutex<u32>> = Arc::default();
    let (seen, told) = (Arc::clone(&replacement), Arc::clone(&denied));
    let raw_sent = Arc::new(Mutex::new(0_u32));
    let node = rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(move |request: &str| {
            let call: Value = serde_json::from_str(request).expect("one JSON-RPC call");
            match call["method"].as_str() {
                Some("eth_sendRawTransaction") => {
                    let mut count = raw_sent.lock().unwrap();
                    *count += 1;
                    if *count == 2 {
                        let raw =
                            hex::decode(call["params"][0].as_str().expect("a raw transaction")).unwrap();
                        *seen.lock().unwrap() = Some(keccak256(&raw));
                        return RpcAction::ForwardAndLose;
                    }
                }
                Some("eth_getTransactionByHash") => {
                    let asked: Option<B256> = call["params"][0].as_str().and_then(|hash| hash.parse().ok());
                    let mut told = told.lock().unwrap();
                    if asked.is_some() && asked == *seen.lock().unwrap() && *told == 0 {
                        *told += 1;
                        return RpcAction::Answer("null".into());
                    }
                }
                _ => {}
            }
            RpcAction::Forward(request.to_owned())
        }),
    )
    .await;
    let Held { _db, relayer, agent, id, first } = held_behind(&t, engine, &node, 430).await;
    let client = &relayer.client;
    // The replacement reaches the node (its answer lost on the way back); a look later, the node
    // says it does not know it.
    for _ in 0..600 {
        if *denied.lock().unwrap() > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(*denied.lock().unwrap(), 1, "the node was asked for the replacement");
    let taken = replacement.lock().unwrap().expect("the replacement was submitted");
    pending(&t, taken).await;
    let (status, held) = client.get(&format!("/relay/{id}")).await;
    assert_eq!(status, 200, "{held}");
    assert!(
        held["transactions"].as_array().unwrap().iter().any(|tx| hash_of(&tx["txHash"]) == taken),
        "the replacement the node has is still the relay's: {held}"
    );

    resume_mining(&t).await;
    let done =
        client.relay_until(&id, |relay| relay["status"] != "sent" && relay["status"] != "replaced").await;
    assert_eq!(done["status"], "mined", "{done}");
    let mined = t.chain.receipt(hash_of(&done["txHash"])).await.unwrap();
    assert!(mined.status());
    assert_ne!(hash_of(&done["txHash"]), first, "a replacement was mined: {done}");
    assert_eq!(done["costWei"], cost(&mined).to_string());
    assert_eq!(client.used_wei_settled().await, cost(&mined), "the budget is charged what was mined");
    assert_ne!(agent_of(&t, agent.address()).await, 0);
    relayer.stop().await;
}

super::on_both_stores!(
    a_replacement_a_node_does_not_know_yet_stays_in_the_relays_history,
    a_stuck_transaction_is_replaced_with_higher_fees_mined_and_reported_with_both_hashes,
    a_relay_stuck_past_its_deadline_is_cancelled_and_the_next_relay_takes_the_next_nonce,
    a_relay_stuck_at_the_fee_cap_is_cancelled_and_its_signer_relays_again_at_the_next_nonce,
    a_relay_whose_cancellation_would_pass_its_cap_waits_and_costs_no_more,
    a_replacement_refused_by_the_clients_share_becomes_a_cancellation,
    a_refused_replacement_leaves_the_relay_on_the_transaction_the_node_has,
    a_lost_replacement_the_node_never_got_is_taken_back_and_sent_again,
);
