//! The registry's rules of INTERFACE.md sections 1 and 5 through the real relayer: a stranger's
//! child registration, a re-registration of a revoked agent's wallet and a squat without its
//! holder's consent are simulated, refused with the registry's reason (500, docs/relayer.md), and
//! never sent nor paid for; an agent with no ETH registers another key's wallet, a third key
//! liable, with both consents, and the edge API shows it; a party with no ETH voids the consents
//! it signed ahead (`invalidateConsentsThrough`).

use super::Engine;
use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    signers::{SignerSync, local::PrivateKeySigner},
};
use kya_core::{
    chain::abi::AgentRegistry,
    registry::consent::{self, Consent, LiabilityConsent},
};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    relayer_fixture::{body, forward, sign_with_core, sign_with_eth_account},
};
use serde_json::json;

use super::{agent_key, agent_of, balance, forwarder_nonce, receipt, register_call, start};

#[tokio::test]
async fn a_strangers_child_and_a_revoked_wallet_are_refused_and_nothing_is_paid() {
    let (t, _db, relayer) = start(Engine::Sqlite, &[]).await;
    let client = &relayer.client;
    let relayer_address = relayer.relayer.address();
    let (parent, stranger, revoked) = (agent_key(80), agent_key(81), agent_key(82));
    let child_key = agent_key(83);
    let child = child_key.address();

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
        assert_eq!((status, &answer), (500, &json!({ "error": reason, "code": "reverted" })), "{reason}");
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

    // The parent's own wallet relays the same child, with the child wallet's consent:
    // registered, with the parent's wallet as its creator, and paid for like any relay.
    let consented = kya_tests::consented_register_call(&t, parent.address(), &child_key, 1).await;
    let request = forward(&t, parent.address(), 1, &consented);
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

/// `wallet` registered by `creator` as a root naming `haftungsperson`, with the consents of those
/// of `signers` who are its parties, at their current nonces.
async fn consented(
    t: &TestChain,
    creator: Address,
    wallet: Address,
    haftungsperson: Address,
    signers: &[&PrivateKeySigner],
) -> AgentRegistry::registerAgentWithConsentCall {
    let registration = AgentRegistry::registerAgentCall { haftungsperson, ..register_call(wallet, 0) };
    kya_devchain::consent::consented(&t.chain, (t.chain_id(), t.registry()), registration, creator, signers)
        .await
        .expect("the consent nonces read")
}

/// Three keys and no ETH among them: the creator relays `registerAgentWithConsent` of the
/// wallet's key, naming the third key liable, both consents signed. Mined, with the creator as
/// `_msgSender()`, both nonces used once, the record's parties each in place, and the edge API's
/// KYA answer for the wallet shows the agent.
#[tokio::test]
async fn an_agent_without_eth_registers_a_third_partys_wallet_with_consents_through_the_relay() {
    let (t, _db, relayer) = start(Engine::Sqlite, &[]).await;
    let client = &relayer.client;
    let (creator, wallet, liable) = (agent_key(85), agent_key(86), agent_key(87));
    let call =
        consented(&t, creator.address(), wallet.address(), liable.address(), &[&wallet, &liable]).await;
    assert!(!call.walletConsent.is_empty() && !call.liabilityConsent.is_empty());

    let request = forward(&t, creator.address(), 0, &call);
    let python = sign_with_eth_account(&t, &creator, &request);
    assert_eq!(python, sign_with_core(&t, &creator, &request), "eth-account and kya-core sign alike");
    let (status, answer) = client.relay(&body(&request, &python.signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["from"], creator.address().to_checksum(None));
    let mined = receipt(&t, &answer).await;
    assert!(mined.status());
    assert_eq!((mined.from, mined.to), (relayer.relayer.address(), Some(t.forwarder())));
    let settled =
        client.relay_until(answer["relayId"].as_str().unwrap(), |relay| relay["settledAt"].is_string()).await;
    assert_eq!(settled["status"], "mined", "{settled}");
    assert_eq!(t.consents_used(&mined), [(wallet.address(), 0), (liable.address(), 0)]);
    assert_eq!((t.consent_nonce(wallet.address()).await, t.consent_nonce(liable.address()).await), (1, 1));

    let agent_id = agent_of(&t, wallet.address()).await;
    assert_eq!(agent_id, 1);
    let record =
        t.chain.view(t.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(1) }).await.unwrap();
    assert_eq!(
        (record.creator, record.agentWallet, record.haftungsperson),
        (creator.address(), wallet.address(), liable.address())
    );
    assert_eq!(record.operationalScope, format!("agent {}", wallet.address()));
    assert_eq!((record.parentAgentId, record.status), (U256::ZERO, kya_core::AgentStatus::Active as u8));
    let block =
        t.chain.provider().get_block_by_number(mined.block_number.unwrap().into()).await.unwrap().unwrap();
    assert_eq!(record.registeredAt, block.header.timestamp);
    for party in [&creator, &wallet, &liable] {
        assert_eq!(balance(&t, party.address()).await, U256::ZERO, "the relayer paid");
    }

    // The edge API reads it from the chain.
    let worker = EdgeWorker::start(&chain_vars(&t.rpc_url(), t.registry())).await;
    let kya = worker.client().get(&format!("/api/v1/kya/{}", wallet.address())).await;
    assert_eq!(kya.status, 200, "{}", kya.text);
    let at = |seconds: u64| {
        let instant = chrono::DateTime::from_timestamp(i64::try_from(seconds).unwrap(), 0).unwrap();
        instant.format("%Y-%m-%dT%H:%M:%S.000Z").to_string()
    };
    let mut body = kya.body.clone();
    body.as_object_mut().unwrap().remove("checkedAt");
    assert_eq!(
        body,
        json!({
            "wallet": wallet.address().to_checksum(None),
            "isRegistered": true,
            "isCompliant": true,
            "agent": {
                "agentId": 1,
                "creator": creator.address().to_checksum(None),
                "haftungsperson": liable.address().to_checksum(None),
                "agentWallet": wallet.address().to_checksum(None),
                "operationalScope": record.operationalScope,
                "status": "Active",
                "registeredAt": at(record.registeredAt),
                "lastAttestation": at(record.registeredAt),
            },
        })
    );
    relayer.stop().await;
}

/// A squat through the relayer: another key's wallet without its consent (by either function),
/// a Haftungsperson named without theirs, and a consent given to another creator are each
/// simulated and refused with the registry's reason; nothing is sent, booked or paid, no nonce
/// is used, and the wallet's holder then registers it through the relayer.
#[tokio::test]
async fn a_relayed_squat_without_consent_is_refused_and_costs_nothing() {
    let (t, _db, relayer) = start(Engine::Sqlite, &[]).await;
    let client = &relayer.client;
    let relayer_address = relayer.relayer.address();
    let (squatter, holder, other) = (agent_key(88), agent_key(89), agent_key(90));
    let used = client.used_wei_settled().await;
    let paid = balance(&t, relayer_address).await;
    let sent = t.chain.provider().get_transaction_count(relayer_address).await.unwrap();

    let unsigned = consented(&t, squatter.address(), holder.address(), squatter.address(), &[]).await;
    assert!(unsigned.walletConsent.is_empty());
    let names_the_holder_liable = AgentRegistry::registerAgentCall {
        haftungsperson: holder.address(),
        ..register_call(squatter.address(), 0)
    };
    let for_another_creator =
        consented(&t, other.address(), holder.address(), squatter.address(), &[&holder]).await;
    let from = squatter.address();
    let refusals = [
        (forward(&t, from, 0, &unsigned), "Agent wallet consent required"),
        (forward(&t, from, 0, &register_call(holder.address(), 0)), "Agent wallet consent required"),
        (forward(&t, from, 0, &names_the_holder_liable), "Haftungsperson consent required"),
        (forward(&t, from, 0, &for_another_creator), "Invalid consent signature"),
    ];
    for (request, reason) in refusals {
        let signature = sign_with_core(&t, &squatter, &request).signature;
        let (status, answer) = client.relay(&body(&request, &signature)).await;
        assert_eq!((status, &answer), (500, &json!({ "error": reason, "code": "reverted" })), "{reason}");
    }
    assert_eq!(forwarder_nonce(&t, squatter.address()).await, 0, "no request ran");
    assert_eq!(client.used_wei_settled().await, used, "nothing was booked");
    assert_eq!(balance(&t, relayer_address).await, paid, "nothing was paid");
    assert_eq!(
        t.chain.provider().get_transaction_count(relayer_address).await.unwrap(),
        sent,
        "nothing sent"
    );
    assert_eq!(relayer.relayer.store().records().unwrap().len(), 0, "no relay recorded");
    assert_eq!((agent_of(&t, holder.address()).await, t.consent_nonce(holder.address()).await), (0, 0));

    // The holder registers its own wallet through the relayer.
    let request = forward(&t, holder.address(), 0, &register_call(holder.address(), 0));
    let (status, answer) =
        client.relay(&body(&request, &sign_with_core(&t, &holder, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert!(receipt(&t, &answer).await.status());
    assert_eq!(agent_of(&t, holder.address()).await, 1);
    let record =
        t.chain.view(t.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(1) }).await.unwrap();
    assert_eq!((record.creator, record.haftungsperson), (holder.address(), holder.address()));
    relayer.stop().await;
}

/// A party with no ETH takes back, through the relayer, the consents it signed ahead:
/// `invalidateConsentsThrough` is a write the relayer forwards, the registry reads the request's
/// signer (`_msgSender()`), and a registration carrying a consent so voided is refused. A nonce
/// already past is simulated and refused with the registry's reason, nothing sent or paid.
#[tokio::test]
async fn a_party_without_eth_voids_its_consents_signed_ahead_through_the_relayer() {
    let (t, _db, relayer) = start(Engine::Sqlite, &[]).await;
    let client = &relayer.client;
    let relayer_address = relayer.relayer.address();
    let (liable, wallet) = (agent_key(91), agent_key(92));
    // The wallet registering itself, naming the party liable with a consent signed ahead: for
    // the nonce after the current one.
    let mut ahead = consented(&t, wallet.address(), wallet.address(), liable.address(), &[]).await;
    let signed_ahead = Consent::Liability(LiabilityConsent {
        haftungsperson: liable.address(),
        creator: wallet.address(),
        agentWallet: wallet.address(),
        nonce: U256::from(1),
        deadline: ahead.deadline,
    });
    let digest = signed_ahead.signing_digest(&consent::domain(t.chain_id(), t.registry()));
    ahead.liabilityConsent = liable.sign_hash_sync(&digest).unwrap().as_bytes().to_vec().into();

    let through = AgentRegistry::invalidateConsentsThroughCall { nonce: U256::from(1) };
    let request = forward(&t, liable.address(), 0, &through);
    let (status, answer) =
        client.relay(&body(&request, &sign_with_core(&t, &liable, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    let mined = receipt(&t, &answer).await;
    assert!(mined.status());
    let events = t.registry_events::<AgentRegistry::ConsentsInvalidated>(&mined);
    let invalidated: Vec<_> = events.iter().map(|event| (event.signer, event.nextNonce)).collect();
    assert_eq!(invalidated, [(liable.address(), U256::from(2))]);
    assert_eq!((t.consent_nonce(liable.address()).await, t.consent_nonce(relayer_address).await), (2, 0));
    assert_eq!(balance(&t, liable.address()).await, U256::ZERO, "the relayer paid");

    let sent = t.chain.provider().get_transaction_count(relayer_address).await.unwrap();
    let voided = forward(&t, wallet.address(), 0, &ahead);
    let (status, answer) =
        client.relay(&body(&voided, &sign_with_core(&t, &wallet, &voided).signature)).await;
    assert_eq!((status, answer), (500, json!({ "error": "Invalid consent signature", "code": "reverted" })));
    let back = AgentRegistry::invalidateConsentsThroughCall { nonce: U256::ZERO };
    let back = forward(&t, liable.address(), 1, &back);
    let (status, answer) = client.relay(&body(&back, &sign_with_core(&t, &liable, &back).signature)).await;
    assert_eq!((status, answer), (500, json!({ "error": "Consent nonce already past", "code": "reverted" })));
    let sent_after = t.chain.provider().get_transaction_count(relayer_address).await.unwrap();
    assert_eq!(sent_after, sent, "no transaction was sent for a refusal");
    assert_eq!(
        (forwarder_nonce(&t, wallet.address()).await, forwarder_nonce(&t, liable.address()).await),
        (0, 1)
    );
    assert_eq!((agent_of(&t, wallet.address()).await, t.consent_nonce(liable.address()).await), (0, 2));
    relayer.stop().await;
}
