//! The forwarder: EIP-712 requests signed off-chain act as their signer in the registry
//! (ERC-2771), and every way a request can be invalid is refused with SPEC.md's messages.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, Bytes, U256, aliases::U48},
    providers::Provider,
    rpc::types::TransactionRequest,
    signers::{SignerSync, local::PrivateKeySigner},
    sol_types::{Revert, SolCall, SolError},
};
use kya_core::{
    chain::abi::{AgentRegistry, Forwarder},
    registry::forward_request::{self, ForwardRequest},
};
use kya_devchain::{
    TxError,
    dev_accounts::{self, Role},
};
use kya_tests::TestChain;

use super::{agent, assert_revert, block_timestamp, id, register};

/// An agent wallet with a key and no ETH: it can only act through the forwarder.
fn agent_key(n: u64) -> PrivateKeySigner {
    dev_accounts::agent_wallet(2_000_000 + n)
}

fn request<C: SolCall>(t: &TestChain, signer: &PrivateKeySigner, nonce: u64, call: &C) -> ForwardRequest {
    ForwardRequest {
        from: signer.address(),
        to: t.registry(),
        value: U256::ZERO,
        gas: U256::from(500_000),
        nonce: U256::from(nonce),
        deadline: U48::ZERO,
        data: call.abi_encode().into(),
    }
}

fn sign(t: &TestChain, signer: &PrivateKeySigner, request: &ForwardRequest) -> Bytes {
    let digest =
        forward_request::signing_digest(request, &forward_request::domain(t.chain_id(), t.forwarder()));
    let signature = signer.sign_hash_sync(&digest).expect("signing a digest");
    Bytes::from(signature.as_bytes().to_vec())
}

/// Executes through the forwarder from the relayer account.
async fn execute(
    t: &TestChain,
    request: &ForwardRequest,
    signature: &Bytes,
) -> Result<alloy::rpc::types::TransactionReceipt, TxError> {
    let call = Forwarder::executeCall { req: request.clone(), signature: signature.clone() };
    t.chain.send(dev_accounts::address(Role::Relayer), t.forwarder(), &call).await
}

async fn verify(t: &TestChain, request: &ForwardRequest, signature: &Bytes) -> Result<bool, TxError> {
    t.chain
        .view(t.forwarder(), &Forwarder::verifyCall { req: request.clone(), signature: signature.clone() })
        .await
}

async fn nonce(t: &TestChain, account: Address) -> u64 {
    t.chain.view(t.forwarder(), &Forwarder::getNonceCall { from: account }).await.unwrap().to()
}

async fn balance(t: &TestChain, account: Address) -> U256 {
    t.chain.provider().get_balance(account).await.unwrap()
}

/// An agent registered by creator A whose wallet is `signer` (which consents by signing).
async fn registered(t: &TestChain, signer: &PrivateKeySigner) -> u64 {
    register(t, Role::CreatorA, signer, 0).await.unwrap()
}

#[tokio::test]
async fn the_forwarders_domain_is_the_one_core_signs_for() {
    let t = TestChain::start().await;
    let on_chain = t.chain.view(t.forwarder(), &Forwarder::eip712DomainCall {}).await.unwrap();
    let ours = forward_request::domain(t.chain_id(), t.forwarder());
    assert_eq!(on_chain.name, forward_request::DOMAIN_NAME);
    assert_eq!(on_chain.version, forward_request::DOMAIN_VERSION);
    assert_eq!(on_chain.chainId, U256::from(kya_core::registry::forward_request::BASE_SEPOLIA_CHAIN_ID));
    assert_eq!(on_chain.verifyingContract, t.forwarder());
    assert_eq!(Some(on_chain.chainId), ours.chain_id);
    assert!(
        t.chain
            .view(t.registry(), &AgentRegistry::isTrustedForwarderCall { forwarder: t.forwarder() })
            .await
            .unwrap(),
        "the registry trusts the forwarder"
    );
}

#[tokio::test]
async fn a_forwarded_request_acts_as_its_signer() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    let agent_id = registered(&t, &signer).await;
    assert_eq!(balance(&t, signer.address()).await, U256::ZERO, "the signer holds no gas");

    t.chain.increase_time(3600).await.unwrap();
    let attest = request(&t, &signer, 0, &AgentRegistry::attestComplianceCall { agentId: id(agent_id) });
    let signature = sign(&t, &signer, &attest);
    assert!(verify(&t, &attest, &signature).await.unwrap());
    let receipt = execute(&t, &attest, &signature).await.unwrap();

    assert_eq!(agent(&t, agent_id).await.lastAttestation, block_timestamp(&t).await);
    let attested = t.registry_events::<AgentRegistry::ComplianceAttested>(&receipt);
    let attested = attested.into_iter().next().expect("a ComplianceAttested event of the registry");
    assert_eq!(attested.attester, signer.address(), "_msgSender() is the signer, not the relayer");
    assert_eq!(attested.agentId, id(agent_id));
    assert_eq!(nonce(&t, signer.address()).await, 1);
    assert_eq!(balance(&t, signer.address()).await, U256::ZERO, "the relayer paid");

    // A registration through the forwarder makes the signer the creator; the child's wallet
    // consents to that creator.
    let child_key = agent_key(2);
    let consented = kya_tests::consented_register_call(&t, signer.address(), &child_key, agent_id).await;
    let register = request(&t, &signer, 1, &consented);
    let signature = sign(&t, &signer, &register);
    execute(&t, &register, &signature).await.unwrap();
    let child = agent(&t, agent_id + 1).await;
    assert_eq!(child.creator, signer.address());
    assert_eq!(child.parentAgentId, id(agent_id));
}

#[tokio::test]
async fn a_replayed_request_is_refused() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    let agent_id = registered(&t, &signer).await;
    let attest = request(&t, &signer, 0, &AgentRegistry::attestComplianceCall { agentId: id(agent_id) });
    let signature = sign(&t, &signer, &attest);
    execute(&t, &attest, &signature).await.unwrap();
    assert!(!verify(&t, &attest, &signature).await.unwrap());
    assert_revert(execute(&t, &attest, &signature).await, "Forwarder: invalid signature");
    assert_eq!(nonce(&t, signer.address()).await, 1);
}

#[tokio::test]
async fn an_expired_request_is_refused() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    let agent_id = registered(&t, &signer).await;
    let now = block_timestamp(&t).await;
    let call = AgentRegistry::attestComplianceCall { agentId: id(agent_id) };

    let mut expired = request(&t, &signer, 0, &call);
    expired.deadline = U48::from(now - 1);
    let signature = sign(&t, &signer, &expired);
    assert!(!verify(&t, &expired, &signature).await.unwrap());
    assert_revert(execute(&t, &expired, &signature).await, "Forwarder: invalid signature");

    let mut in_time = request(&t, &signer, 0, &call);
    in_time.deadline = U48::from(now + 3600);
    let signature = sign(&t, &signer, &in_time);
    execute(&t, &in_time, &signature).await.unwrap();
    assert_eq!(nonce(&t, signer.address()).await, 1);
}

#[tokio::test]
async fn a_wrong_nonce_signer_or_payload_is_refused() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    let agent_id = registered(&t, &signer).await;
    let call = AgentRegistry::attestComplianceCall { agentId: id(agent_id) };

    let ahead = request(&t, &signer, 1, &call);
    let signature = sign(&t, &signer, &ahead);
    assert_revert(execute(&t, &ahead, &signature).await, "Forwarder: invalid signature");

    let impostor = agent_key(99);
    let forged = request(&t, &signer, 0, &call);
    let signature = sign(&t, &impostor, &forged);
    assert_revert(execute(&t, &forged, &signature).await, "Forwarder: invalid signature");

    let signed = request(&t, &signer, 0, &call);
    let signature = sign(&t, &signer, &signed);
    let mut tampered = signed.clone();
    tampered.gas = U256::from(900_000);
    assert_revert(execute(&t, &tampered, &signature).await, "Forwarder: invalid signature");

    // A signature for another chain's domain does not verify here.
    let digest = forward_request::signing_digest(&signed, &forward_request::domain(1, t.forwarder()));
    let other_chain = Bytes::from(signer.sign_hash_sync(&digest).unwrap().as_bytes().to_vec());
    assert_revert(execute(&t, &signed, &other_chain).await, "Forwarder: invalid signature");

    assert_eq!(nonce(&t, signer.address()).await, 0, "nothing was consumed");
    execute(&t, &signed, &signature).await.unwrap();
}

#[tokio::test]
async fn a_signature_that_is_not_65_bytes_is_refused() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    let agent_id = registered(&t, &signer).await;
    let attest = request(&t, &signer, 0, &AgentRegistry::attestComplianceCall { agentId: id(agent_id) });
    let signature = sign(&t, &signer, &attest);
    for length in [64, 66, 0] {
        let mut wrong = signature.to_vec();
        wrong.resize(length, 0);
        let wrong = Bytes::from(wrong);
        assert_revert(execute(&t, &attest, &wrong).await, "Forwarder: invalid signature length");
        assert_revert(verify(&t, &attest, &wrong).await, "Forwarder: invalid signature length");
    }
}

#[tokio::test]
async fn a_failing_registry_call_returns_its_reason_and_consumes_the_nonce() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    registered(&t, &signer).await;
    let other = register(&t, Role::CreatorB, &agent_key(2), 0).await.unwrap();
    let attest_other = request(&t, &signer, 0, &AgentRegistry::attestComplianceCall { agentId: id(other) });
    let signature = sign(&t, &signer, &attest_other);
    let call = Forwarder::executeCall { req: attest_other.clone(), signature: signature.clone() };

    let simulated =
        t.chain.view_from(dev_accounts::address(Role::Relayer), t.forwarder(), &call).await.unwrap();
    assert!(!simulated._0, "the inner call fails");
    assert_eq!(Revert::abi_decode(&simulated._1).unwrap().reason, "Not authorized for this agent");

    execute(&t, &attest_other, &signature).await.unwrap();
    assert_eq!(nonce(&t, signer.address()).await, 1, "a failed inner call still uses the nonce");
}

#[tokio::test]
async fn too_little_gas_for_the_inner_call_fails_the_whole_transaction() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    let agent_id = registered(&t, &signer).await;
    let mut attest = request(&t, &signer, 0, &AgentRegistry::attestComplianceCall { agentId: id(agent_id) });
    attest.gas = U256::from(5_000_000);
    let signature = sign(&t, &signer, &attest);
    let call = Forwarder::executeCall { req: attest, signature };
    // Enough gas to run the forwarder and most of the attestation, far less than the 5 M asked.
    let starved = TransactionRequest::default()
        .with_from(dev_accounts::address(Role::Relayer))
        .with_to(t.forwarder())
        .with_input(call.abi_encode())
        .with_gas_limit(120_000);
    let result = t.chain.send_request(starved).await;
    // Anvil refuses the transaction outright when its execution hits the guard's INVALID opcode;
    // a node that mines it reports a failed receipt instead. Either way nothing succeeds.
    match result {
        Err(TxError::Failed(_)) => {}
        Err(TxError::Rpc(error)) => {
            assert!(error.to_string().contains("InvalidFEOpcode"), "got {error}")
        }
        other => panic!("expected the starved transaction to fail, got {other:?}"),
    }
    assert_eq!(nonce(&t, signer.address()).await, 0, "the nonce is not burnt");
}

#[tokio::test]
async fn a_value_that_differs_from_the_request_is_refused() {
    let t = TestChain::start().await;
    let signer = agent_key(1);
    let agent_id = registered(&t, &signer).await;
    let attest = request(&t, &signer, 0, &AgentRegistry::attestComplianceCall { agentId: id(agent_id) });
    let signature = sign(&t, &signer, &attest);
    let call = Forwarder::executeCall { req: attest, signature };
    let paying = TransactionRequest::default()
        .with_from(dev_accounts::address(Role::Relayer))
        .with_to(t.forwarder())
        .with_input(call.abi_encode())
        .with_value(U256::from(1));
    assert_revert(t.chain.send_request(paying).await, "Forwarder: value mismatch");
    assert_eq!(nonce(&t, signer.address()).await, 0);
}

/// The registry's rules judge the signer, not the account that sends the transaction: a
/// stranger's meta-transaction registering a child under someone else's agent, or registering a
/// revoked agent's wallet again, fails inside `execute` with the registry's reason and adds
/// nothing; the parent's own wallet, signing the same child, succeeds.
#[tokio::test]
async fn a_strangers_forwarded_registrations_are_refused_by_the_registry() {
    let t = TestChain::start().await;
    let parent_key = agent_key(1);
    let parent = registered(&t, &parent_key).await;
    let revoked_key = agent_key(2);
    let revoked = registered(&t, &revoked_key).await;
    let regulator = dev_accounts::address(Role::Regulator);
    t.chain
        .send(regulator, t.registry(), &AgentRegistry::revokeAgentCall { agentId: id(revoked) })
        .await
        .unwrap();
    let stranger = agent_key(3);
    let own = registered(&t, &stranger).await;
    let child_key = agent_key(4);
    let child_wallet = child_key.address();

    let attempts = [
        (super::register_call(child_wallet, parent), "Not authorized for this agent"),
        (super::register_call(revoked_key.address(), 0), "Wallet already registered to another agent"),
        // Under the stranger's own agent, so authorized: the revoked wallet is what fails.
        (super::register_call(revoked_key.address(), own), "Wallet already registered to another agent"),
    ];
    for (sent, (call, reason)) in (0..).zip(attempts) {
        let forwarded = request(&t, &stranger, sent, &call);
        let signature = sign(&t, &stranger, &forwarded);
        let execute_call = Forwarder::executeCall { req: forwarded.clone(), signature: signature.clone() };
        let simulated = t
            .chain
            .view_from(dev_accounts::address(Role::Relayer), t.forwarder(), &execute_call)
            .await
            .unwrap();
        assert!(!simulated._0, "{reason}: the inner call fails");
        assert_eq!(Revert::abi_decode(&simulated._1).unwrap().reason, reason);
        execute(&t, &forwarded, &signature).await.unwrap();
        assert_eq!(nonce(&t, stranger.address()).await, sent + 1, "{reason}: the nonce is used");
    }
    let next = t.chain.view(t.registry(), &AgentRegistry::nextAgentIdCall {}).await.unwrap();
    assert_eq!(next, id(own + 1), "no agent was added");
    for parent_id in [parent, own] {
        let children = t
            .chain
            .view(t.registry(), &AgentRegistry::getChildrenCall { agentId: id(parent_id) })
            .await
            .unwrap();
        assert!(children.is_empty(), "agent {parent_id} has no child: {children:?}");
    }
    let bound =
        t.chain.view(t.registry(), &AgentRegistry::walletToAgentCall(revoked_key.address())).await.unwrap();
    assert_eq!(bound, id(revoked), "the revoked wallet is still bound to its record");

    // The parent's wallet signs the same child, with the child wallet's consent: registered,
    // with the signer as its creator.
    let consented = kya_tests::consented_register_call(&t, parent_key.address(), &child_key, parent).await;
    let forwarded = request(&t, &parent_key, 0, &consented);
    let signature = sign(&t, &parent_key, &forwarded);
    execute(&t, &forwarded, &signature).await.unwrap();
    let child = agent(&t, own + 1).await;
    assert_eq!((child.agentWallet, child.creator), (child_wallet, parent_key.address()));
    assert_eq!(
        (child.parentAgentId, child.haftungsperson),
        (id(parent), agent(&t, parent).await.haftungsperson)
    );
}
