//! The state rules of SPEC.md section 3 and INTERFACE.md section 1: lineage, statuses and their
//! permanence, who may change them, and what attestations and revenue reports record.

use alloy::primitives::{U256, keccak256};
use kya_core::{AgentStatus, chain::abi::AgentRegistry};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::TestChain;

use super::{
    agent, assert_revert, block_timestamp, id, register, register_from, send_as, wallet, wallet_key,
};

const GRACE_PERIOD: u64 = 7 * 24 * 60 * 60;

fn status(record: &AgentRegistry::AgentRecord) -> AgentStatus {
    AgentStatus::try_from(record.status).expect("known status")
}

#[tokio::test]
async fn registration_records_every_field_and_the_lineage() {
    let t = TestChain::start().await;
    let root = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let registered_at = block_timestamp(&t).await;
    let record = agent(&t, root).await;
    assert_eq!(record.agentId, id(root));
    assert_eq!(record.creator, dev_accounts::address(Role::CreatorA));
    assert_eq!(record.haftungsperson, dev_accounts::address(Role::CreatorB));
    assert_eq!(record.agentWallet, wallet(1));
    assert_eq!(record.constitutionHash, keccak256(b"constitution"));
    assert_eq!(record.capabilityHash, keccak256(b"capabilities"));
    assert_eq!(record.operationalScope, format!("agent {}", wallet(1)));
    assert_eq!(record.parentAgentId, U256::ZERO);
    assert_eq!(record.generation, U256::ZERO);
    assert!(!record.selfModifying);
    assert_eq!(record.registeredAt, registered_at);
    assert_eq!(record.lastAttestation, registered_at, "registration counts as the first attestation");
    assert_eq!(record.lastRevenueReport, 0);
    assert_eq!(status(&record), AgentStatus::Active);

    // A child registered by the parent's Haftungsperson, naming another one, inherits the
    // parent's: the one named is not asked for consent (only the child's wallet is).
    let mut call =
        super::consented_call(&t, dev_accounts::address(Role::CreatorB), &wallet_key(2), root).await;
    call.haftungsperson = dev_accounts::address(Role::Outsider);
    assert!(call.liabilityConsent.is_empty() && !call.walletConsent.is_empty());
    t.chain.send(dev_accounts::address(Role::CreatorB), t.registry(), &call).await.unwrap();
    let child = agent(&t, 2).await;
    assert_eq!(child.parentAgentId, id(root));
    assert_eq!(child.generation, U256::from(1));
    assert_eq!(child.creator, dev_accounts::address(Role::CreatorB));
    assert_eq!(child.haftungsperson, record.haftungsperson);

    let children =
        t.chain.view(t.registry(), &AgentRegistry::getChildrenCall { agentId: id(root) }).await.unwrap();
    assert_eq!(children, vec![id(2)]);
    assert_eq!(t.chain.view(t.registry(), &AgentRegistry::nextAgentIdCall {}).await.unwrap(), U256::from(3));
    assert_eq!(
        t.chain.view(t.registry(), &AgentRegistry::walletToAgentCall(wallet(2))).await.unwrap(),
        id(2)
    );
    assert!(
        t.chain.view(t.registry(), &AgentRegistry::isRegisteredCall { wallet: wallet(2) }).await.unwrap()
    );
    assert!(
        !t.chain.view(t.registry(), &AgentRegistry::isRegisteredCall { wallet: wallet(3) }).await.unwrap()
    );
}

#[tokio::test]
async fn owner_can_change_the_generation_depth() {
    let t = TestChain::start().await;
    send_as(&t, Role::Owner, &AgentRegistry::setMaxGenerationDepthCall { depth: id(1) }).await.unwrap();
    assert_eq!(t.chain.view(t.registry(), &AgentRegistry::maxGenerationDepthCall {}).await.unwrap(), id(1));
    let root = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let child = register(&t, Role::CreatorA, &wallet_key(2), root).await.unwrap();
    assert_revert(register(&t, Role::CreatorA, &wallet_key(3), child).await, "Max generation depth exceeded");
}

#[tokio::test]
async fn attestation_updates_last_attestation_and_compliance() {
    let t = TestChain::start().await;
    let agent_id = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let registered_at = agent(&t, agent_id).await.registeredAt;

    // Exactly at the grace period the attestation is still current; one second later it lapses.
    t.chain.set_next_timestamp(registered_at + GRACE_PERIOD).await.unwrap();
    t.chain.mine().await.unwrap();
    let at_limit = t
        .chain
        .view(t.registry(), &AgentRegistry::complianceStatusCall { agentId: id(agent_id) })
        .await
        .unwrap();
    assert!(at_limit.isActive);
    assert!(at_limit.attestationCurrent);
    assert_eq!(at_limit.secondsSinceAttestation, GRACE_PERIOD);
    assert!(
        t.chain
            .view(t.registry(), &AgentRegistry::isRegisteredAndCompliantCall { wallet: wallet(1) })
            .await
            .unwrap()
    );

    t.chain.set_next_timestamp(registered_at + GRACE_PERIOD + 1).await.unwrap();
    t.chain.mine().await.unwrap();
    let past = t
        .chain
        .view(t.registry(), &AgentRegistry::complianceStatusCall { agentId: id(agent_id) })
        .await
        .unwrap();
    assert_eq!(past.secondsSinceAttestation, GRACE_PERIOD + 1);
    assert!(!past.attestationCurrent);
    assert!(
        !t.chain
            .view(t.registry(), &AgentRegistry::isRegisteredAndCompliantCall { wallet: wallet(1) })
            .await
            .unwrap()
    );

    // The agent's own wallet may attest (as may its creator and its Haftungsperson).
    t.chain.impersonate(wallet(1)).await.unwrap();
    t.chain
        .send(wallet(1), t.registry(), &AgentRegistry::attestComplianceCall { agentId: id(agent_id) })
        .await
        .unwrap();
    let attested_at = block_timestamp(&t).await;
    assert_eq!(agent(&t, agent_id).await.lastAttestation, attested_at);
    send_as(&t, Role::CreatorB, &AgentRegistry::attestComplianceCall { agentId: id(agent_id) })
        .await
        .unwrap();
    assert_eq!(agent(&t, agent_id).await.lastAttestation, block_timestamp(&t).await);
    let fresh = t
        .chain
        .view(t.registry(), &AgentRegistry::complianceStatusCall { agentId: id(agent_id) })
        .await
        .unwrap();
    assert!(fresh.attestationCurrent);
    assert_eq!(fresh.secondsSinceAttestation, 0);
    assert_eq!(fresh.childCount, U256::ZERO);
    assert_eq!(fresh.status, AgentStatus::Active as u8);
}

#[tokio::test]
async fn revenue_reports_are_recorded_in_order() {
    let t = TestChain::start().await;
    let agent_id = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let reports = [(12_345u64, "USD", "compute", 100u64, 200u64), (999, "EUR", "data", 200, 300)];
    let mut reported_at = Vec::new();
    for (amount, currency, category, start, end) in reports {
        let call = AgentRegistry::reportRevenueCall {
            agentId: id(agent_id),
            amount: U256::from(amount),
            currency: currency.into(),
            category: category.into(),
            periodStart: start,
            periodEnd: end,
        };
        send_as(&t, Role::CreatorA, &call).await.unwrap();
        reported_at.push(block_timestamp(&t).await);
    }
    assert_eq!(agent(&t, agent_id).await.lastRevenueReport, reported_at[1]);
    let history = t
        .chain
        .view(t.registry(), &AgentRegistry::getRevenueHistoryCall { agentId: id(agent_id) })
        .await
        .unwrap();
    assert_eq!(history.len(), 2);
    for (index, (amount, currency, category, start, end)) in reports.into_iter().enumerate() {
        let report = &history[index];
        assert_eq!(report.agentId, id(agent_id));
        assert_eq!(report.amount, U256::from(amount));
        assert_eq!(report.currency, currency);
        assert_eq!(report.category, category);
        assert_eq!((report.periodStart, report.periodEnd), (start, end));
        assert_eq!(report.reportedAt, reported_at[index]);
    }
}

#[tokio::test]
async fn suspension_and_reactivation_by_regulator_or_owner() {
    let t = TestChain::start().await;
    let agent_id = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(agent_id) }).await.unwrap();
    assert_eq!(status(&agent(&t, agent_id).await), AgentStatus::Suspended);
    assert!(
        !t.chain
            .view(t.registry(), &AgentRegistry::isRegisteredAndCompliantCall { wallet: wallet(1) })
            .await
            .unwrap()
    );
    assert!(
        t.chain.view(t.registry(), &AgentRegistry::isRegisteredCall { wallet: wallet(1) }).await.unwrap()
    );

    // The owner acts as a regulator too.
    send_as(&t, Role::Owner, &AgentRegistry::reactivateAgentCall { agentId: id(agent_id) }).await.unwrap();
    assert_eq!(status(&agent(&t, agent_id).await), AgentStatus::Active);
    send_as(&t, Role::Owner, &AgentRegistry::suspendAgentCall { agentId: id(agent_id) }).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::reactivateAgentCall { agentId: id(agent_id) })
        .await
        .unwrap();
    assert_eq!(status(&agent(&t, agent_id).await), AgentStatus::Active);

    // A removed regulator loses the right.
    send_as(&t, Role::Owner, &AgentRegistry::removeRegulatorCall { regulator: t.deployment.regulator })
        .await
        .unwrap();
    assert!(
        !t.chain.view(t.registry(), &AgentRegistry::isRegulatorCall(t.deployment.regulator)).await.unwrap()
    );
    assert_revert(
        send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(agent_id) }).await,
        "Only regulator",
    );
}

#[tokio::test]
async fn revoked_and_terminated_are_permanent() {
    let t = TestChain::start().await;
    let revoked = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let terminated = register(&t, Role::CreatorA, &wallet_key(2), 0).await.unwrap();
    let suspended_then_revoked = register(&t, Role::CreatorA, &wallet_key(3), 0).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: id(revoked) }).await.unwrap();
    send_as(&t, Role::CreatorA, &AgentRegistry::terminateSelfCall { agentId: id(terminated) }).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(suspended_then_revoked) })
        .await
        .unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: id(suspended_then_revoked) })
        .await
        .unwrap();

    for (agent_id, final_status) in [
        (revoked, AgentStatus::Revoked),
        (terminated, AgentStatus::Terminated),
        (suspended_then_revoked, AgentStatus::Revoked),
    ] {
        assert_eq!(status(&agent(&t, agent_id).await), final_status);
        let agent_id = id(agent_id);
        assert_revert(
            send_as(&t, Role::Regulator, &AgentRegistry::reactivateAgentCall { agentId: agent_id }).await,
            "Only suspended agents can be reactivated",
        );
        assert_revert(
            send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: agent_id }).await,
            "Agent not active",
        );
        assert_revert(
            send_as(&t, Role::CreatorA, &AgentRegistry::attestComplianceCall { agentId: agent_id }).await,
            "Agent not active",
        );
        assert_revert(
            send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: agent_id }).await,
            "Agent already revoked or terminated",
        );
        assert_eq!(status(&agent(&t, agent_id.to()).await), final_status, "still {final_status}");
    }
}

/// The wallet's binding as every view reports it: `walletToAgent`, `isRegistered`,
/// `isRegisteredAndCompliant`, and the id and status of `getAgentByWallet`'s record.
async fn binding(
    t: &TestChain,
    wallet: alloy::primitives::Address,
) -> (u64, bool, bool, Option<(u64, AgentStatus)>) {
    let registry = t.registry();
    let mapped = t.chain.view(registry, &AgentRegistry::walletToAgentCall(wallet)).await.unwrap().to();
    let registered = t.chain.view(registry, &AgentRegistry::isRegisteredCall { wallet }).await.unwrap();
    let compliant =
        t.chain.view(registry, &AgentRegistry::isRegisteredAndCompliantCall { wallet }).await.unwrap();
    let record = match t.chain.view(registry, &AgentRegistry::getAgentByWalletCall { wallet }).await {
        Ok(record) => Some((record.agentId.to(), status(&record))),
        Err(kya_devchain::TxError::Reverted(reason)) => {
            assert_eq!(reason, "No agent registered for this wallet");
            None
        }
        Err(error) => panic!("getAgentByWallet: {error:?}"),
    };
    (mapped, registered, compliant, record)
}

async fn next_id(t: &TestChain) -> u64 {
    t.chain.view(t.registry(), &AgentRegistry::nextAgentIdCall {}).await.unwrap().to()
}

/// INTERFACE.md section 1: a regulator's revocation sticks. The wallet stays bound to the
/// revoked record, so no one (its own creator, a stranger, a parent's creator registering a
/// child) can register it afresh, and ending the record is no way out either.
#[tokio::test]
async fn a_revoked_agent_keeps_its_wallet_and_it_cannot_be_registered_again() {
    let t = TestChain::start().await;
    let revoked = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let suspended_then_revoked = register(&t, Role::CreatorA, &wallet_key(2), 0).await.unwrap();
    let other_parent = register(&t, Role::CreatorC, &wallet_key(3), 0).await.unwrap();
    assert_eq!(binding(&t, wallet(1)).await, (revoked, true, true, Some((revoked, AgentStatus::Active))));
    send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: id(revoked) }).await.unwrap();
    send_as(&t, Role::Owner, &AgentRegistry::suspendAgentCall { agentId: id(suspended_then_revoked) })
        .await
        .unwrap();
    send_as(&t, Role::Owner, &AgentRegistry::revokeAgentCall { agentId: id(suspended_then_revoked) })
        .await
        .unwrap();

    for (agent_id, taken) in [(revoked, wallet_key(1)), (suspended_then_revoked, wallet_key(2))] {
        // Registered, not compliant, and the record read by wallet says why; its attestation is
        // still recent, so only the status makes it non-compliant.
        assert_eq!(
            binding(&t, taken.address()).await,
            (agent_id, true, false, Some((agent_id, AgentStatus::Revoked)))
        );
        let before = next_id(&t).await;
        for creator in [Role::CreatorA, Role::CreatorB, Role::Outsider] {
            assert_revert(
                register(&t, creator, &taken, 0).await,
                "Wallet already registered to another agent",
            );
        }
        // As a child, by the parent's own creator (so authorized, and the wallet is what fails).
        assert_revert(
            register(&t, Role::CreatorC, &taken, other_parent).await,
            "Wallet already registered to another agent",
        );
        // Terminating the revoked record, which would free the wallet, is refused.
        assert_revert(
            send_as(&t, Role::CreatorA, &AgentRegistry::terminateSelfCall { agentId: id(agent_id) }).await,
            "Agent not active",
        );
        assert_eq!(next_id(&t).await, before, "no agent was added");
        assert_eq!(
            binding(&t, taken.address()).await,
            (agent_id, true, false, Some((agent_id, AgentStatus::Revoked)))
        );
    }
    let children = t
        .chain
        .view(t.registry(), &AgentRegistry::getChildrenCall { agentId: id(other_parent) })
        .await
        .unwrap();
    assert!(children.is_empty(), "no child was added: {children:?}");
}

/// INTERFACE.md section 1: terminating oneself frees the wallet, so its owner may register
/// afresh, as a root or as a child; the old record keeps its status.
#[tokio::test]
async fn a_terminated_agent_frees_its_wallet_for_a_new_registration() {
    let t = TestChain::start().await;
    let terminated = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    send_as(&t, Role::CreatorA, &AgentRegistry::terminateSelfCall { agentId: id(terminated) }).await.unwrap();
    assert_eq!(binding(&t, wallet(1)).await, (0, false, false, None));

    let reborn = register(&t, Role::CreatorB, &wallet_key(1), 0).await.unwrap();
    assert_eq!(reborn, terminated + 1);
    assert_eq!(binding(&t, wallet(1)).await, (reborn, true, true, Some((reborn, AgentStatus::Active))));
    let record = agent(&t, reborn).await;
    assert_eq!((record.agentWallet, record.creator), (wallet(1), dev_accounts::address(Role::CreatorB)));
    assert_eq!(status(&agent(&t, terminated).await), AgentStatus::Terminated, "the old record stays ended");

    // Terminated again, the wallet comes back as a child (registered by its parent's creator).
    send_as(&t, Role::CreatorB, &AgentRegistry::terminateSelfCall { agentId: id(reborn) }).await.unwrap();
    assert_eq!(binding(&t, wallet(1)).await, (0, false, false, None));
    let parent = register(&t, Role::CreatorC, &wallet_key(2), 0).await.unwrap();
    let child = register(&t, Role::CreatorC, &wallet_key(1), parent).await.unwrap();
    assert_eq!(binding(&t, wallet(1)).await, (child, true, true, Some((child, AgentStatus::Active))));
    assert_eq!(agent(&t, child).await.parentAgentId, id(parent));
}

/// INTERFACE.md section 1: a child inherits its parent's Haftungsperson, so only the parent's
/// agent wallet, creator or Haftungsperson may register one. Authority does not pass down a
/// lineage: a grandparent's creator is a stranger to the grandchild's parent.
#[tokio::test]
async fn only_the_parents_wallet_creator_or_haftungsperson_registers_a_child() {
    let t = TestChain::start().await;
    // Wallet 1 is the parent's own wallet (impersonated to send: it holds no ETH); creator A
    // registered it and creator B is its Haftungsperson.
    let parent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let strangers = [Role::CreatorC, Role::Outsider, Role::Regulator, Role::Owner, Role::Relayer];
    for stranger in strangers {
        assert_revert(register(&t, stranger, &wallet_key(10), parent).await, "Not authorized for this agent");
    }
    assert_eq!(next_id(&t).await, parent + 1, "no stranger's child was added");

    t.chain.impersonate(wallet(1)).await.unwrap();
    let by_wallet = next_id(&t).await;
    register_from(&t, wallet(1), &wallet_key(11), parent).await.unwrap();
    let by_creator = register(&t, Role::CreatorA, &wallet_key(12), parent).await.unwrap();
    let by_haftungsperson = register(&t, Role::CreatorB, &wallet_key(13), parent).await.unwrap();
    for (child, creator) in [
        (by_wallet, wallet(1)),
        (by_creator, dev_accounts::address(Role::CreatorA)),
        (by_haftungsperson, dev_accounts::address(Role::CreatorB)),
    ] {
        let record = agent(&t, child).await;
        assert_eq!((record.parentAgentId, record.generation), (id(parent), U256::from(1)));
        assert_eq!(record.creator, creator);
        assert_eq!(record.haftungsperson, dev_accounts::address(Role::CreatorB), "inherited");
    }
    let children =
        t.chain.view(t.registry(), &AgentRegistry::getChildrenCall { agentId: id(parent) }).await.unwrap();
    assert_eq!(children, vec![id(by_wallet), id(by_creator), id(by_haftungsperson)]);

    // The grandchild level: the child registered by the parent's wallet has that wallet as its
    // creator and creator B as its Haftungsperson; creator A, the grandparent's creator, is
    // neither, while the inherited Haftungsperson is.
    assert_revert(
        register(&t, Role::CreatorA, &wallet_key(20), by_wallet).await,
        "Not authorized for this agent",
    );
    let grandchild = register(&t, Role::CreatorB, &wallet_key(20), by_wallet).await.unwrap();
    assert_eq!(agent(&t, grandchild).await.generation, U256::from(2));
    // A child's own wallet may register under it too (it is that agent's wallet).
    t.chain.impersonate(wallet(12)).await.unwrap();
    register_from(&t, wallet(12), &wallet_key(21), by_creator).await.unwrap();
    assert_eq!(agent(&t, grandchild + 1).await.creator, wallet(12));
}
