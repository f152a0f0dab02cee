//! The key pool on a real anvil: three relayer keys, one nonce lane each. New relays go to the
//! least busy lane; a transaction held stuck on one key delays only that key's lane while
//! relays from other signers are mined on the other two.
//!
//! The stuck transaction is held by a nonce gap: after the first key's first relay is mined,
//! `anvil_setNonce` puts the key's account nonce back to 0, so its next transaction (nonce 1)
//! waits in the pool for a nonce 0 that never comes, however many blocks are mined. (A fee below
//! the base fee does not hold one: anvil evicts such a transaction; pausing mining holds every
//! lane alike.) Setting the nonce back to 1 releases it.

use alloy::{
    consensus::Transaction,
    primitives::{Address, U256, hex},
    providers::Provider,
    signers::local::PrivateKeySigner,
};
use futures::future::join_all;
use kya_devchain::dev_accounts;
use kya_relayer::RelayRecord;
use kya_tests::{
    TestChain,
    relayer_fixture::{InProcessRelayer, TestStore, body, forward, settings, sign_with_core},
};
use serde_json::{Value, json};

use super::{Engine, agent_key, agent_of, anvil, balance, cost, hash_of, register_call};

/// The pool's keys: fresh wallets, funded by anvil.
fn lane_keys() -> Vec<PrivateKeySigner> {
    (0..3).map(|n| dev_accounts::agent_wallet(5_000_000 + n)).collect()
}

/// A relayer with `keys` (`RELAYER_KEYS`) on a store of `engine`, quick to call a transaction
/// stuck (two seconds).
async fn pool_relayer(
    t: &TestChain,
    engine: Engine,
    keys: &[PrivateKeySigner],
) -> (TestStore, InProcessRelayer) {
    pool_relayer_with(t, engine, keys, &[]).await
}

/// [`pool_relayer`] with `overrides` on top.
async fn pool_relayer_with(
    t: &TestChain,
    engine: Engine,
    keys: &[PrivateKeySigner],
    overrides: &[(&str, &str)],
) -> (TestStore, InProcessRelayer) {
    for key in keys {
        anvil(t, "anvil_setBalance", json!([key.address(), "0x8ac7230489e80000"])).await; // 10 ETH
    }
    let db = TestStore::new(engine);
    let mut settings = settings(t, &db);
    settings.retain(|(name, _)| name != "RELAYER_KEY");
    let keys = keys.iter().map(|key| hex::encode_prefixed(key.to_bytes())).collect::<Vec<_>>().join(",");
    for (name, value) in [
        ("RELAYER_KEYS", keys.as_str()),
        ("STUCK_AFTER_BLOCKS", "1000"),
        ("STUCK_AFTER_SECS", "2"),
        ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
    ] {
        kya_tests::relayer_fixture::set(&mut settings, name, value);
    }
    for (name, value) in overrides {
        kya_tests::relayer_fixture::set(&mut settings, name, *value);
    }
    (db, InProcessRelayer::start(&settings).await)
}

/// A registration of agent `n`, signed.
fn registration(t: &TestChain, n: u64) -> Value {
    let agent = agent_key(n);
    let request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
    body(&request, &sign_with_core(t, &agent, &request).signature)
}

/// Relays every body at once; each answer's relay id.
async fn relay_all(relayer: &InProcessRelayer, bodies: &[Value]) -> Vec<String> {
    let answers = join_all(bodies.iter().map(|signed| relayer.client.relay(signed))).await;
    answers
        .into_iter()
        .map(|(status, answer)| {
            assert_eq!(status, 200, "{answer}");
            answer["relayId"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn record(relayer: &InProcessRelayer, id: &str) -> RelayRecord {
    relayer.relayer.store().relay_by_id(id).unwrap().expect("recorded")
}

fn lane(relayer: &InProcessRelayer, id: &str) -> Address {
    record(relayer, id).lane.expect("a lane")
}

/// Mines what waits (automine off), then waits until every relay of `ids` is mined; their
/// answers.
async fn mine_all(t: &TestChain, relayer: &InProcessRelayer, ids: &[String]) -> Vec<Value> {
    anvil(t, "evm_mine", json!([])).await;
    let mut mined = Vec::new();
    for id in ids {
        mined.push(relayer.client.relay_until(id, |relay| relay["status"] == "mined").await);
    }
    mined
}

async fn a_stuck_transaction_delays_only_its_own_lane(engine: Engine) {
    let t = TestChain::start().await;
    let keys = lane_keys();
    let [a, b, c] = [keys[0].address(), keys[1].address(), keys[2].address()];
    let (_db, relayer) = pool_relayer(&t, engine, &keys).await;
    assert_eq!(relayer.relayer.addresses(), vec![a, b, c], "the lanes, in the configured order");
    let funds: Vec<U256> = join_all([a, b, c].map(|lane| balance(&t, lane))).await;

    // Three relays accepted while mining is paused: each reservation sees the lanes the ones
    // before it took, so they spread over all three keys, one each.
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let first = relay_all(&relayer, &(0..3).map(|n| registration(&t, 500 + n)).collect::<Vec<_>>()).await;
    let mut spread: Vec<Address> = first.iter().map(|id| lane(&relayer, id)).collect();
    spread.sort();
    let mut all = vec![a, b, c];
    all.sort();
    assert_eq!(spread, all, "one relay per lane");
    let mut done = mine_all(&t, &relayer, &first).await;

    // The first key's next transaction (nonce 1) now waits for a nonce 0 that never comes.
    anvil(&t, "anvil_setNonce", json!([a, "0x0"])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let (status, answer) = relayer.client.relay(&registration(&t, 510)).await;
    assert_eq!(status, 200, "{answer}");
    let stuck = answer["relayId"].as_str().unwrap().to_owned();
    assert_eq!(lane(&relayer, &stuck), a, "all lanes idle: the first");
    assert_eq!(record(&relayer, &stuck).relayer_nonce, Some(1));

    // Relays from other signers go to the other lanes and are mined while it waits: two at a
    // time, mining paused so both are reserved before either settles (the first to the second
    // key, the next to the third: the first key has the stuck one).
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let mut others = Vec::new();
    for round in 0..2 {
        let ids =
            relay_all(&relayer, &[registration(&t, 520 + 2 * round), registration(&t, 521 + 2 * round)])
                .await;
        let mut lanes: Vec<Address> = ids.iter().map(|id| lane(&relayer, id)).collect();
        lanes.sort();
        let mut expected = vec![b, c];
        expected.sort();
        assert_eq!(lanes, expected, "round {round}: the second and third keys");
        done.extend(mine_all(&t, &relayer, &ids).await);
        others.extend(ids);
    }
    let waiting = relayer.client.relay_until(&stuck, |relay| relay["status"] != "sent").await;
    assert_eq!(waiting["status"], "replaced", "replaced at its own nonce, still not mined: {waiting}");
    assert_eq!(waiting["relayerNonce"], 1);
    assert!(waiting["blockNumber"].is_null(), "{waiting}");
    for id in &others {
        assert_ne!(lane(&relayer, id), a, "nothing else waits behind the stuck transaction");
    }

    // Released: its latest replacement is mined at nonce 1 of the first key.
    anvil(&t, "anvil_setNonce", json!([a, "0x1"])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let released = loop {
        anvil(&t, "evm_mine", json!([])).await;
        let relay = relayer.client.get(&format!("/relay/{stuck}")).await.1;
        if relay["status"] == "mined" {
            break relay;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    done.push(released);

    // Every relay ran, on the key its record names, and each key's nonces have no gap.
    let mut books = 0u128;
    let mut by_lane: std::collections::HashMap<Address, (Vec<u64>, u128)> = Default::default();
    for relay in &done {
        let id = relay["relayId"].as_str().unwrap();
        let receipt = t.chain.receipt(hash_of(&relay["txHash"])).await.unwrap();
        assert!(receipt.status());
        let tx = t.chain.provider().get_transaction_by_hash(receipt.transaction_hash).await.unwrap().unwrap();
        let recorded = record(&relayer, id);
        assert_eq!(Some(receipt.from), recorded.lane, "{id} was sent by its lane");
        assert_eq!(Some(tx.nonce()), recorded.relayer_nonce);
        assert_eq!(relay["costWei"], cost(&receipt).to_string());
        assert_ne!(agent_of(&t, relay["from"].as_str().unwrap().parse().unwrap()).await, 0);
        let entry = by_lane.entry(receipt.from).or_default();
        entry.0.push(tx.nonce());
        entry.1 += cost(&receipt);
        books += cost(&receipt);
    }
    assert_eq!(done.len(), 8);
    for (lane, funded) in [a, b, c].into_iter().zip(funds) {
        let (mut nonces, paid) = by_lane.remove(&lane).unwrap_or_default();
        nonces.sort_unstable();
        let used = t.chain.provider().get_transaction_count(lane).await.unwrap();
        assert_eq!(nonces, (0..used).collect::<Vec<_>>(), "{lane}: every nonce used once, no gap");
        assert_eq!(funded - balance(&t, lane).await, U256::from(paid), "{lane} paid its own relays");
    }
    assert_eq!(t.chain.provider().get_transaction_count(a).await.unwrap(), 2);
    assert_eq!(
        relayer.client.used_wei_settled().await,
        books,
        "the budget's books equal the fees, to the wei"
    );
    relayer.stop().await;
}

/// Half of the default `MIN_BALANCE` (0.001 ETH), in wei (hex for `anvil_setBalance`).
const BELOW_MINIMUM: &str = "0x1c6bf52634000";

/// `/status`'s lanes: address, balance (`balanceWei` as a number), below the minimum, depth and
/// holder.
async fn lanes_of(relayer: &InProcessRelayer) -> (Value, Vec<(String, u128, bool, u64, String)>) {
    let (status, report) = relayer.client.get("/status").await;
    assert_eq!(status, 200, "{report}");
    let lanes = report["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lane| {
            (
                lane["address"].as_str().unwrap().to_owned(),
                lane["balanceWei"].as_str().unwrap().parse().unwrap(),
                lane["belowMinBalance"].as_bool().unwrap(),
                lane["depth"].as_u64().unwrap(),
                lane["holder"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (report, lanes)
}

async fn wei_of(t: &TestChain, account: Address) -> u128 {
    balance(t, account).await.to()
}

async fn the_status_shows_every_key_and_a_key_below_the_minimum_gets_no_relay(engine: Engine) {
    let t = TestChain::start().await;
    let keys = lane_keys();
    let [a, b, c] = [keys[0].address(), keys[1].address(), keys[2].address()];
    let (_db, relayer) = pool_relayer_with(&t, engine, &keys, &[("RELAYER_ID", "lanes-test-1")]).await;
    anvil(&t, "anvil_setBalance", json!([c, BELOW_MINIMUM])).await;
    let held = |lane: Address, balance: u128, below: bool, depth: u64| {
        (lane.to_checksum(None), balance, below, depth, "lanes-test-1".to_owned())
    };

    let (report, lanes) = lanes_of(&relayer).await;
    let ten_eth = 10_000_000_000_000_000_000u128;
    assert_eq!(
        lanes,
        [held(a, ten_eth, false, 0), held(b, ten_eth, false, 0), held(c, 500_000_000_000_000, true, 0)]
    );
    assert_eq!(report["lanes"][2]["balance"], "0.000500000000000000");
    // The fields of one key stay the first key's.
    assert_eq!(
        (&report["relayer"], &report["balanceWei"]),
        (&json!(a.to_checksum(None)), &json!(ten_eth.to_string()))
    );

    // Four relays while mining is paused: the key below the minimum gets none; the other two
    // take turns (the least busy, ties to the earlier key).
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let ids = relay_all(&relayer, &(0..4).map(|n| registration(&t, 600 + n)).collect::<Vec<_>>()).await;
    let mut taken: Vec<Address> = ids.iter().map(|id| lane(&relayer, id)).collect();
    taken.sort();
    let mut expected = vec![a, a, b, b];
    expected.sort();
    assert_eq!(taken, expected);
    let (_, lanes) = lanes_of(&relayer).await;
    assert_eq!(lanes.iter().map(|lane| lane.3).collect::<Vec<_>>(), [2, 2, 0], "depth: open relays per key");
    let mut done = mine_all(&t, &relayer, &ids).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let (_, lanes) = lanes_of(&relayer).await;
    assert_eq!(
        lanes,
        [
            held(a, wei_of(&t, a).await, false, 0),
            held(b, wei_of(&t, b).await, false, 0),
            held(c, 500_000_000_000_000, true, 0)
        ]
    );

    // Every key below the minimum: 503, nothing reserved or sent.
    anvil(&t, "anvil_setBalance", json!([a, BELOW_MINIMUM])).await;
    anvil(&t, "anvil_setBalance", json!([b, BELOW_MINIMUM])).await;
    let late = registration(&t, 610);
    let (status, refused) = relayer.client.relay(&late).await;
    assert_eq!(
        (status, &refused),
        (
            503,
            &json!({
                "error": "Relayer balance too low. Please try again later or use direct mode.",
                "code": "balance_too_low"
            })
        )
    );
    let (_, lanes) = lanes_of(&relayer).await;
    assert!(lanes.iter().all(|lane| lane.2), "{lanes:?}");

    // One key funded again: the same request goes to it.
    anvil(&t, "anvil_setBalance", json!([c, "0x8ac7230489e80000"])).await;
    let (status, answer) = relayer.client.relay(&late).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["relayId"].as_str().unwrap();
    assert_eq!(lane(&relayer, id), c);
    done.push(relayer.client.relay_until(id, |relay| relay["status"] == "mined").await);

    let mut books = 0;
    for relay in &done {
        let receipt = t.chain.receipt(hash_of(&relay["txHash"])).await.unwrap();
        assert_eq!(Some(receipt.from), record(&relayer, relay["relayId"].as_str().unwrap()).lane);
        books += cost(&receipt);
    }
    assert_eq!(
        relayer.client.used_wei_settled().await,
        books,
        "the budget's books equal the fees, to the wei"
    );
    relayer.stop().await;
}

super::on_both_stores!(
    a_stuck_transaction_delays_only_its_own_lane,
    the_status_shows_every_key_and_a_key_below_the_minimum_gets_no_relay,
);
