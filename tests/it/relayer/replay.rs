//! A replayed request (the same signed request twice) is refused and costs nothing.

use alloy::primitives::U256;
use kya_core::abi::AgentRegistry;
use kya_tests::relayer_fixture::{body, forward, sign_with_eth_account};

use super::{agent_key, balance, forwarder_nonce, receipt, register_call, start};

#[tokio::test]
async fn a_replayed_request_is_refused_and_costs_nothing() {
    let (t, _db, relayer) = start(&[]).await;
    let client = &relayer.client;
    let agent = agent_key(60);
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signature = sign_with_eth_account(&t, &agent, &register).signature;
    let (status, answer) = client.relay(&body(&register, &signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert!(receipt(&t, &answer).await.status());
    let used = client.used_wei_settled().await;
    let paid = balance(&t, relayer.relayer.address()).await;

    for _ in 0..2 {
        let (status, again) = client.relay(&body(&register, &signature)).await;
        assert_eq!((status, again["error"].as_str()), (401, Some("Invalid signature or nonce mismatch")));
    }
    assert_eq!(client.used_wei_settled().await, used, "the budget is untouched");
    assert_eq!(balance(&t, relayer.relayer.address()).await, paid, "no gas was paid");
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 1);
    assert_eq!(relayer.relayer.store().records().unwrap().len(), 1);

    // The next nonce still works.
    let attest =
        forward(&t, agent.address(), 1, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let signature = sign_with_eth_account(&t, &agent, &attest).signature;
    assert_eq!(client.relay(&body(&attest, &signature)).await.0, 200);
    relayer.stop().await;
}

#[tokio::test]
async fn the_same_request_sent_twice_at_once_is_relayed_once() {
    let (t, _db, relayer) = start(&[]).await;
    let client = &relayer.client;
    let agent = agent_key(61);
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let signed = body(&register, &sign_with_eth_account(&t, &agent, &register).signature);
    let before = balance(&t, relayer.relayer.address()).await;

    let copies = futures::future::join_all((0..4).map(|_| client.relay(&signed))).await;
    let accepted: Vec<_> = copies.iter().filter(|(status, _)| *status == 200).collect();
    assert_eq!(accepted.len(), 1, "{copies:?}");
    for (status, answer) in copies.iter().filter(|(status, _)| *status != 200) {
        assert_eq!((*status, answer["error"].as_str()), (401, Some("Invalid signature or nonce mismatch")));
    }
    let paid = super::cost(&receipt(&t, &accepted[0].1).await);
    assert_eq!(client.used_wei_settled().await, paid);
    assert_eq!(before - balance(&t, relayer.relayer.address()).await, U256::from(paid), "paid once");
    assert_eq!(relayer.relayer.store().records().unwrap().len(), 1);
    relayer.stop().await;
}
