//! Retries: the same signed request again is answered with its relay (its id and status) and
//! costs nothing, before and after mining; a different request with a used nonce is refused.

use super::Engine;
use alloy::primitives::U256;
use kya_core::chain::abi::AgentRegistry;
use kya_tests::relayer_fixture::{body, forward, sign_with_eth_account};

use super::{agent_key, balance, forwarder_nonce, receipt, register_call, start};

async fn a_retry_after_mining_gets_its_relay_and_a_different_request_with_a_used_nonce_is_refused(
    engine: Engine,
) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    let agent = agent_key(60);
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signature = sign_with_eth_account(&t, &agent, &register).signature;
    let (status, answer) = client.relay(&body(&register, &signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "sent");
    let relay_id = answer["relayId"].as_str().expect("a relay id").to_owned();
    assert!(receipt(&t, &answer).await.status());
    let used = client.used_wei_settled().await;
    let paid = balance(&t, relayer.relayer.address()).await;

    for _ in 0..2 {
        let (status, again) = client.relay(&body(&register, &signature)).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["relayId"], relay_id);
        assert_eq!(again["status"], "mined");
        assert_eq!(again["txHash"], answer["txHash"]);
        assert_eq!((&again["from"], &again["nonce"]), (&answer["from"], &answer["nonce"]));
    }
    // Another request signed with the spent nonce is no retry: the forwarder refuses it.
    let other =
        forward(&t, agent.address(), 0, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let other_signature = sign_with_eth_account(&t, &agent, &other).signature;
    let (status, refused) = client.relay(&body(&other, &other_signature)).await;
    assert_eq!((status, refused["error"].as_str()), (401, Some("Invalid signature or nonce mismatch")));

    assert_eq!(client.used_wei_settled().await, used, "the budget is untouched");
    assert_eq!(balance(&t, relayer.relayer.address()).await, paid, "no gas was paid");
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 1);
    assert_eq!(relayer.relayer.store().records().unwrap().len(), 1);
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_relays_retried_total 2\n"), "{metrics}");
    assert!(metrics.contains("relayer_relays_accepted_total 1\n"), "{metrics}");

    // The next nonce still works.
    let attest =
        forward(&t, agent.address(), 1, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let signature = sign_with_eth_account(&t, &agent, &attest).signature;
    assert_eq!(client.relay(&body(&attest, &signature)).await.0, 200);
    relayer.stop().await;
}

async fn the_same_request_sent_four_times_at_once_is_relayed_once_and_each_copy_gets_the_relay(
    engine: Engine,
) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    let agent = agent_key(61);
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&register, &sign_with_eth_account(&t, &agent, &register).signature);
    let before = balance(&t, relayer.relayer.address()).await;

    let copies = futures::future::join_all((0..4).map(|_| client.relay(&signed))).await;
    let records = relayer.relayer.store().records().unwrap();
    assert_eq!(records.len(), 1, "one relay");
    for (status, answer) in &copies {
        // 202 for a copy that came while the first was between its reservation and its send.
        assert!(*status == 200 || *status == 202, "{status} {answer}");
        assert_eq!(answer["relayId"], records[0].relay_id);
        if *status == 200 {
            assert_eq!(answer["txHash"].as_str(), records[0].tx_hash.map(|hash| hash.to_string()).as_deref());
        } else {
            assert_eq!(
                (answer["status"].as_str(), &answer["txHash"]),
                (Some("accepted"), &serde_json::Value::Null)
            );
        }
    }
    let sent = copies.iter().find(|(_, answer)| answer["status"] == "sent").expect("the copy that sent it");
    let paid = super::cost(&receipt(&t, &sent.1).await);
    assert_eq!(client.used_wei_settled().await, paid);
    assert_eq!(before - balance(&t, relayer.relayer.address()).await, U256::from(paid), "paid once");
    relayer.stop().await;
}

super::on_both_stores!(
    a_retry_after_mining_gets_its_relay_and_a_different_request_with_a_used_nonce_is_refused,
    the_same_request_sent_four_times_at_once_is_relayed_once_and_each_copy_gets_the_relay,
);
