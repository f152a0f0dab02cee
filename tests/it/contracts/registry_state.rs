//! The state rules of SPEC.md section 3 and INTERFACE.md section 1: lineage, statuses and their
//! permanence, who may change them, and what attestations and revenue reports record.

use alloy::primitives::{U256, keccak256};
use kya_core::{AgentStatus, abi::AgentRegistry};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::TestChain;

use super::{agent, assert_revert, block_timestamp, id, register, send_as, wallet};

const GRACE_PERIOD: u64 = 7 * 24 * 60 * 60;

fn status(record: &AgentRegistry::AgentRecord) -> AgentStatus {
    AgentStatus::try_from(record.status).expect("known status")
}

#[tokio::test]
async fn registration_records_every_field_and_the_lineage() {
    let t = TestChain::start().await;
    let root = register(&t, Role::CreatorA, wallet(1), 0).await.unwrap();
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

    // A child registered by someone else, naming another Haftungsperson, inherits the parent's.
    let mut call = super::register_call(wallet(2), root);
    call.haftungsperson = dev_accounts::address(Role::Outsider);
    t.chain.send(dev_accounts::address(Role::CreatorC), t.registry(), &call).await.unwrap();
    let child = agent(&t, 2).await;
    assert_eq!(child.parentAgentId, id(root));
    assert_eq!(child.generation, U256::from(1));
    assert_eq!(child.creator, dev_accounts::address(Role::CreatorC));
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
    let root = register(&t, Role::CreatorA, wallet(1), 0).await.unwrap();
    let child = register(&t, Role::CreatorA, wallet(2), root).await.unwrap();
    assert_revert(register(&t, Role::CreatorA, wallet(3), child).await, "Max generation depth exceeded");
}

#[tokio::test]
async fn attestation_updates_last_attestation_and_compliance() {
    let t = TestChain::start().await;
    let agent_id = register(&t, Role::CreatorA, wallet(1), 0).await.unwrap();
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
    let agent_id = register(&t, Role::CreatorA, wallet(1), 0).await.unwrap();
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
    let agent_id = register(&t, Role::CreatorA, wallet(1), 0).await.unwrap();
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
async fn revoked_and_terminated_are_permanent_and_free_the_wallet() {
    let t = TestChain::start().await;
    let revoked = register(&t, Role::CreatorA, wallet(1), 0).await.unwrap();
    let terminated = register(&t, Role::CreatorA, wallet(2), 0).await.unwrap();
    let suspended_then_revoked = register(&t, Role::CreatorA, wallet(3), 0).await.unwrap();
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

    // The wallets are free again: no longer registered, and a new agent may take one.
    assert!(
        !t.chain.view(t.registry(), &AgentRegistry::isRegisteredCall { wallet: wallet(1) }).await.unwrap()
    );
    assert_revert(
        t.chain.view(t.registry(), &AgentRegistry::getAgentByWalletCall { wallet: wallet(2) }).await,
        "No agent registered for this wallet",
    );
    let reborn = register(&t, Role::CreatorB, wallet(1), 0).await.unwrap();
    assert_eq!(agent(&t, reborn).await.agentWallet, wallet(1));
    assert_eq!(status(&agent(&t, revoked).await), AgentStatus::Revoked, "the old record keeps its status");
}
