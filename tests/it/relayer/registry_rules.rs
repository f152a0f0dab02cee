//! The registry's rules of INTERFACE.md section 1 through the real relayer: a stranger's child
//! registration and a re-registration of a revoked agent's wallet are simulated, refused with
//! the registry's reason (500, docs/relayer.md), and never sent nor paid for.

use super::Engine;
use alloy::{primitives::U256, providers::Provider};
use kya_core::abi::AgentRegistry;
use kya_tests::relayer_fixture::{body, forward, sign_with_core, sign_with_eth_account};
use serde_json::json;

use super::{agent_key, agent_of, balance, forwarder_nonce, receipt, register_call, start};

#[tokio::test]
async fn a_strangers_child_and_a_revoked_wallet_are_refused_and_nothing_is_paid() {
    let (t, _db, relayer) = start(Engine::Sqlite, &[]).await;
    let client = &relayer.client;
    let relayer_address = relayer.relayer.address();
    let (parent, stranger, revoked) = (agent_key(80), agent_key(81), agent_key(82));
    let child = agent_key(83).address();

    // Three root agents register themselves through the relayer; the regulator revokes the third.
    for (expected_id, agent) in (1..).zip([&parent, &stranger, &revoked]) {
        let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
        let (status, answer) =
            client.relay(&body(&request, &sign_with_core(&t, agent, &request).signature)).await;
        assert_eq!(status, 200, "{answer}");
        assert!(receipt(&t, &answer).await.status());
        assert_eq!(agent_of(&t, agent.address()).await, expected_id);
    }
    t.chain
        .send(
            t.deployment.regulator,
            t.registry(),
            &AgentRegistry::revokeAgentCall { agentId: U256::from(3) },
        )
        .await
        .unwrap();
    let used = client.used_wei_settled().await;
    let paid = balance(&t, relayer_address).await;
    let sent = t.chain.provider().get_transaction_count(relayer_address).await.unwrap();

    let refusals = [
        // A child under the parent, which the stranger neither is, created nor is liable for.
        (&stranger, register_call(child, 1), "Not authorized for this agent"),
        // The revoked wallet again: as a root, and as a child of the stranger's own agent.
        (&stranger, register_call(revoked.address(), 0), "Wallet already registered to another agent"),
        (&stranger, register_call(revoked.address(), 2), "Wallet already registered to another agent"),
        // And by the revoked agent's own wallet.
        (&revoked, register_call(revoked.address(), 0), "Wallet already registered to another agent"),
    ];
    for (signer, call, reason) in refusals {
        let nonce = forwarder_nonce(&t, signer.address()).await;
        let request = forward(&t, signer.address(), nonce, &call);
        let signature = sign_with_eth_account(&t, signer, &request).signature;
        let (status, answer) = client.relay(&body(&request, &signature)).await;
        assert_eq!((status, &answer), (500, &json!({ "error": reason })), "{reason}");
        assert_eq!(forwarder_nonce(&t, signer.address()).await, nonce, "{reason}: the nonce is unspent");
    }
    assert_eq!(client.used_wei_settled().await, used, "nothing was booked");
    assert_eq!(balance(&t, relayer_address).await, paid, "nothing was paid");
    let sent_after = t.chain.provider().get_transaction_count(relayer_address).await.unwrap();
    assert_eq!(sent_after, sent, "no transaction was sent");
    let registry = t.registry();
    assert_eq!(t.chain.view(registry, &AgentRegistry::nextAgentIdCall {}).await.unwrap(), U256::from(4));
    assert_eq!(agent_of(&t, child).await, 0);
    assert_eq!(agent_of(&t, revoked.address()).await, 3, "the revoked wallet stays bound to its record");
    let record =
        t.chain.view(registry, &AgentRegistry::getAgentCall { agentId: U256::from(3) }).await.unwrap();
    assert_eq!(record.status, kya_core::AgentStatus::Revoked as u8);

    // The parent's own wallet relays the same child: registered, with the parent's wallet as its
    // creator, and paid for like any relay.
    let request = forward(&t, parent.address(), 1, &register_call(child, 1));
    let (status, answer) =
        client.relay(&body(&request, &sign_with_core(&t, &parent, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert!(receipt(&t, &answer).await.status());
    assert_eq!(agent_of(&t, child).await, 4);
    let record =
        t.chain.view(registry, &AgentRegistry::getAgentCall { agentId: U256::from(4) }).await.unwrap();
    assert_eq!((record.creator, record.parentAgentId), (parent.address(), U256::from(1)));
    let children =
        t.chain.view(registry, &AgentRegistry::getChildrenCall { agentId: U256::from(1) }).await.unwrap();
    assert_eq!(children, vec![U256::from(4)]);
    assert!(client.used_wei_settled().await > used, "the accepted relay is booked");
    assert!(balance(&t, relayer_address).await < paid, "and paid");
    relayer.stop().await;
}
