//! The relayer's own account and process: a transaction sent from its wallet behind its back
//! does not break its nonce, and shutdown finishes relays already in flight.

use super::{Engine, TestStore};
use futures::future::join_all;
use kya_devchain::dev_accounts::{self, Role};
use kya_relayer::RateKind;
use kya_tests::{
    relayer_fixture::{body, forward, sign_with_core, signed_registrations},
    rpc_proxy::{self, RpcAction},
};

use super::{agent_key, agent_of, receipt, register_call, start};

/// The account nonce a transaction used.
async fn nonce_of(t: &kya_tests::TestChain, hash: alloy::primitives::B256) -> u64 {
    use alloy::{consensus::Transaction, providers::Provider};
    t.chain.provider().get_transaction_by_hash(hash).await.unwrap().expect("a known transaction").nonce()
}

async fn a_transaction_sent_behind_the_relayers_back_is_recovered_from(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let first = agent_key(200);
    let request = forward(&t, first.address(), 0, &register_call(first.address(), 0));
    let (status, answer) =
        relayer.client.relay(&body(&request, &sign_with_core(&t, &first, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    let first_nonce = nonce_of(&t, receipt(&t, &answer).await.transaction_hash).await;

    // Someone else uses the relayer's wallet: the nonce the relayer holds is now taken.
    let relayer_wallet = dev_accounts::address(Role::Relayer);
    let outsider = kya_tests::consented_register_call(&t, relayer_wallet, &agent_key(201), 0).await;
    let direct = t
        .chain
        .send(relayer_wallet, t.registry(), &outsider)
        .await
        .expect("a direct transaction from the relayer's wallet");
    assert_eq!(nonce_of(&t, direct.transaction_hash).await, first_nonce + 1);

    // The next relay meets "nonce too low", re-reads the nonce and goes through.
    let second = agent_key(202);
    let request = forward(&t, second.address(), 0, &register_call(second.address(), 0));
    let (status, answer) =
        relayer.client.relay(&body(&request, &sign_with_core(&t, &second, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    let mined = receipt(&t, &answer).await;
    assert!(mined.status());
    assert_eq!(nonce_of(&t, mined.transaction_hash).await, first_nonce + 2);
    assert_eq!(agent_of(&t, second.address()).await, 3);
    relayer.stop().await;
}

async fn shutdown_finishes_relays_in_flight_and_settles_them(engine: Engine) {
    // A node slow to estimate gas: every relay is still being checked when the stop comes.
    let t = kya_tests::TestChain::start().await;
    let db = TestStore::new(engine);
    let slow = rpc_proxy::start(
        Some(t.rpc_url()),
        std::sync::Arc::new(|request: &str| {
            if request.contains("eth_estimateGas") {
                RpcAction::Delay(std::time::Duration::from_millis(1_500), request.to_owned())
            } else {
                RpcAction::Forward(request.to_owned())
            }
        }),
    )
    .await;
    let mut settings = kya_tests::relayer_fixture::settings(&t, &db);
    kya_tests::relayer_fixture::set(&mut settings, "RPC_URL", slow);
    let relayer = kya_tests::relayer_fixture::InProcessRelayer::start(&settings).await;
    let agents: Vec<_> = (0..6).map(|n| agent_key(210 + n)).collect();
    let bodies = signed_registrations(&t, &agents);
    let client = relayer.client.clone();
    let sent = tokio::spawn(async move { join_all(bodies.iter().map(|body| client.relay(body))).await });
    // Shut down as soon as every request has reached the relayer (counted by the IP limiter),
    // while they are still being checked against the chain.
    let store = relayer.relayer.clone();
    let all_arrived = async {
        loop {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
            if store.store().hits(RateKind::Ip, "127.0.0.1", now).unwrap() == agents.len() as u32 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), all_arrived)
        .await
        .expect("every request reaches the relayer before the stop");
    assert!(!sent.is_finished(), "the relays are in flight (their gas estimates take 1.5 s)");
    relayer.stop().await;

    let answers = sent.await.unwrap();
    assert!(answers.iter().all(|(status, _)| *status == 200), "{answers:?}");
    for agent in &agents {
        assert_ne!(agent_of(&t, agent.address()).await, 0, "every accepted relay was mined");
    }
    let records = store.store().records().unwrap();
    assert_eq!(records.len(), agents.len());
    assert!(
        records.iter().all(|record| record.status == kya_relayer::RelayStatus::Mined),
        "all settled before the stop returned"
    );
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(store.store().budget(now).unwrap().pending_wei, 0);
}

/// A JSON-RPC proxy in front of anvil that passes `eth_sendRawTransaction` on but answers the
/// relayer with 502, as a load balancer does when the node's answer is lost: the transaction is
/// in, and the relayer cannot know it.
async fn lossy_proxy(upstream: String) -> String {
    rpc_proxy::start(
        Some(upstream),
        std::sync::Arc::new(|request: &str| {
            if request.contains("eth_sendRawTransaction") {
                RpcAction::ForwardAndLose
            } else {
                RpcAction::Forward(request.to_owned())
            }
        }),
    )
    .await
}

async fn a_lost_answer_to_a_send_keeps_the_relay_recorded_and_paid_for(engine: Engine) {
    let t = kya_tests::TestChain::start().await;
    let db = TestStore::new(engine);
    let mut settings = kya_tests::relayer_fixture::settings(&t, &db);
    kya_tests::relayer_fixture::set(&mut settings, "RPC_URL", lossy_proxy(t.rpc_url()).await);
    let relayer = kya_tests::relayer_fixture::InProcessRelayer::start(&settings).await;
    let agent = agent_key(220);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&request, &sign_with_core(&t, &agent, &request).signature);

    let (status, answer) = relayer.client.relay(&signed).await;
    assert_eq!(status, 500, "{answer}");
    let message = answer["error"].as_str().unwrap();
    assert!(message.starts_with("Sending the transaction failed; it may still be mined as 0x"), "{message}");
    let hash = message.rsplit(' ').next().unwrap();

    // The node did take it: it is mined, settled into the budget, and recorded with its hash.
    // (Its receipt first: the answer came when the node took it, and anvil may still be mining.)
    let mined = t.chain.receipt(hash.parse().unwrap()).await.unwrap();
    assert_ne!(agent_of(&t, agent.address()).await, 0);
    assert_eq!(relayer.client.used_wei_settled().await, super::cost(&mined));
    let records = relayer.relayer.store().records().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].status.as_str(), records[0].tx_hash.map(|hash| hash.to_string())),
        ("mined", Some(hash.to_owned()))
    );
    // The client's retry of the request whose answer it lost gets the relay, mined: nothing
    // is sent again.
    let (status, again) = relayer.client.relay(&signed).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!((again["txHash"].as_str(), again["status"].as_str()), (Some(hash), Some("mined")));
    assert_eq!(again["relayId"], records[0].relay_id);
    assert_eq!(relayer.relayer.store().records().unwrap().len(), 1);
    relayer.stop().await;
}

super::on_both_stores!(
    a_transaction_sent_behind_the_relayers_back_is_recovered_from,
    shutdown_finishes_relays_in_flight_and_settles_them,
    a_lost_answer_to_a_send_keeps_the_relay_recorded_and_paid_for,
);
