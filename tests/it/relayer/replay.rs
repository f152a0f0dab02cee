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
