//! Every registry revert string of SPEC.md section 7 and INTERFACE.md section 5, provoked and
//! matched exactly (the consents' strings by both paths and in every variant in `consent.rs`).

use std::collections::BTreeSet;

use alloy::primitives::{Address, U256};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::TestChain;

use super::{assert_revert, consented_call, id, register, register_call, send_as, wallet, wallet_key};

/// Every revert string in the registry's source (named once, in core), each provoked by a test
/// below.
const REASONS: [&str; 22] = kya_core::registry::reverts::ALL;

/// A string added to the contract fails here until it is listed above (and given a test).
#[test]
fn every_revert_string_of_the_registry_is_listed() {
    let source = include_str!("../../../contracts/src/AgentRegistry.sol");
    let code: String =
        source.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    let literals: BTreeSet<&str> = code
        .split('"')
        .skip(1)
        .step_by(2)
        // Not reasons: imports, the EIP-712 type strings, the domain's name and version, and
        // the empty signatures `registerAgent` passes on.
        .filter(|literal| {
            !literal.is_empty()
                && !literal.starts_with('@')
                && !literal.contains('(')
                && !["AgentRegistry", "1"].contains(literal)
        })
        .collect();
    assert_eq!(literals, REASONS.into_iter().collect::<BTreeSet<_>>());
}

#[tokio::test]
async fn only_owner() {
    let t = TestChain::start().await;
    let outsider_call = AgentRegistry::addRegulatorCall { regulator: Address::repeat_byte(7) };
    assert_revert(send_as(&t, Role::Outsider, &outsider_call).await, "Only owner");
    // A regulator is not the owner either.
    assert_revert(send_as(&t, Role::Regulator, &outsider_call).await, "Only owner");
    let depth = AgentRegistry::setMaxGenerationDepthCall { depth: id(3) };
    assert_revert(send_as(&t, Role::Outsider, &depth).await, "Only owner");
    let grace = AgentRegistry::setAttestationGracePeriodCall { seconds_: id(60) };
    assert_revert(send_as(&t, Role::Outsider, &grace).await, "Only owner");
    let remove = AgentRegistry::removeRegulatorCall { regulator: t.deployment.regulator };
    assert_revert(send_as(&t, Role::Regulator, &remove).await, "Only owner");
}

#[tokio::test]
async fn only_regulator() {
    let t = TestChain::start().await;
    let agent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    assert_revert(
        send_as(&t, Role::Outsider, &AgentRegistry::suspendAgentCall { agentId: id(agent) }).await,
        "Only regulator",
    );
    assert_revert(
        send_as(&t, Role::CreatorA, &AgentRegistry::revokeAgentCall { agentId: id(agent) }).await,
        "Only regulator",
    );
    assert_revert(
        send_as(&t, Role::Outsider, &AgentRegistry::reactivateAgentCall { agentId: id(agent) }).await,
        "Only regulator",
    );
}

#[tokio::test]
async fn not_authorized_for_this_agent() {
    let t = TestChain::start().await;
    let agent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    assert_revert(
        send_as(&t, Role::Outsider, &AgentRegistry::attestComplianceCall { agentId: id(agent) }).await,
        "Not authorized for this agent",
    );
    let report = AgentRegistry::reportRevenueCall {
        agentId: id(agent),
        amount: id(100),
        currency: "USD".into(),
        category: "compute".into(),
        periodStart: 0,
        periodEnd: 0,
    };
    assert_revert(send_as(&t, Role::Outsider, &report).await, "Not authorized for this agent");
    assert_revert(
        send_as(&t, Role::Regulator, &AgentRegistry::terminateSelfCall { agentId: id(agent) }).await,
        "Not authorized for this agent",
    );
    // Registering a child under someone else's agent.
    assert_revert(register(&t, Role::Outsider, &wallet_key(2), agent).await, "Not authorized for this agent");
}

/// registerAgent's checks run in the order its NatSpec gives: wallet not zero, then for a child
/// the parent exists, the caller may act for it, it is Active, the depth; the wallet's binding
/// last. So a stranger learns only that the parent exists, never its status or depth.
#[tokio::test]
async fn a_child_registration_checks_in_order() {
    let t = TestChain::start().await;
    send_as(&t, Role::Owner, &AgentRegistry::setMaxGenerationDepthCall { depth: id(1) }).await.unwrap();
    let root = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let at_depth = register(&t, Role::CreatorA, &wallet_key(2), root).await.unwrap();
    let suspended = register(&t, Role::CreatorA, &wallet_key(3), 0).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(suspended) }).await.unwrap();
    let revoked = register(&t, Role::CreatorA, &wallet_key(4), 0).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: id(revoked) }).await.unwrap();

    // The zero wallet, which no key holds, under a parent that does not exist.
    assert_revert(
        send_as(&t, Role::Outsider, &register_call(Address::ZERO, 999)).await,
        "Agent wallet must not be zero",
    );
    let cases = [
        // (caller, wallet, parent, reason), each with the wallet's consent signed.
        (Role::Outsider, 9, 999, "Parent agent not found"),
        (Role::Outsider, 9, suspended, "Not authorized for this agent"),
        (Role::CreatorA, 9, suspended, "Parent agent not active"),
        (Role::Outsider, 9, revoked, "Not authorized for this agent"),
        (Role::CreatorA, 9, revoked, "Parent agent not active"),
        (Role::Outsider, 9, at_depth, "Not authorized for this agent"),
        (Role::CreatorA, 9, at_depth, "Max generation depth exceeded"),
        // A taken wallet (here the revoked agent's) under a parent the caller may not use.
        (Role::Outsider, 4, root, "Not authorized for this agent"),
        (Role::CreatorB, 4, root, "Wallet already registered to another agent"),
    ];
    for (caller, agent_wallet, parent, reason) in cases {
        assert_revert(register(&t, caller, &wallet_key(agent_wallet), parent).await, reason);
    }
    assert_eq!(
        t.chain.view(t.registry(), &AgentRegistry::nextAgentIdCall {}).await.unwrap(),
        id(revoked + 1),
        "nothing was registered"
    );
}

#[tokio::test]
async fn agent_not_found() {
    let t = TestChain::start().await;
    register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    for missing in [0, 2, 999] {
        assert_revert(
            send_as(&t, Role::CreatorA, &AgentRegistry::attestComplianceCall { agentId: id(missing) }).await,
            "Agent not found",
        );
        assert_revert(
            t.chain.view(t.registry(), &AgentRegistry::getAgentCall { agentId: id(missing) }).await,
            "Agent not found",
        );
        assert_revert(
            t.chain.view(t.registry(), &AgentRegistry::complianceStatusCall { agentId: id(missing) }).await,
            "Agent not found",
        );
    }
    assert_revert(
        send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(2) }).await,
        "Agent not found",
    );
}

#[tokio::test]
async fn agent_not_active() {
    let t = TestChain::start().await;
    let agent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(agent) }).await.unwrap();
    assert_revert(
        send_as(&t, Role::CreatorA, &AgentRegistry::attestComplianceCall { agentId: id(agent) }).await,
        "Agent not active",
    );
    assert_revert(
        send_as(&t, Role::CreatorA, &AgentRegistry::terminateSelfCall { agentId: id(agent) }).await,
        "Agent not active",
    );
    // Suspending twice: the agent-active check of suspendAgent.
    assert_revert(
        send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(agent) }).await,
        "Agent not active",
    );
}

#[tokio::test]
async fn parent_agent_not_found() {
    let t = TestChain::start().await;
    assert_revert(register(&t, Role::CreatorA, &wallet_key(1), 1).await, "Parent agent not found");
    register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    assert_revert(register(&t, Role::CreatorA, &wallet_key(2), 2).await, "Parent agent not found");
}

#[tokio::test]
async fn parent_agent_not_active() {
    let t = TestChain::start().await;
    let parent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::suspendAgentCall { agentId: id(parent) }).await.unwrap();
    assert_revert(register(&t, Role::CreatorA, &wallet_key(2), parent).await, "Parent agent not active");
}

#[tokio::test]
async fn max_generation_depth_exceeded() {
    let t = TestChain::start().await;
    // Generations 0 to 10 are allowed by the default depth of 10.
    let mut parent = 0;
    for generation in 0..=10u64 {
        parent = register(&t, Role::CreatorA, &wallet_key(generation), parent).await.unwrap();
        assert_eq!(super::agent(&t, parent).await.generation.to::<u64>(), generation);
    }
    assert_revert(
        register(&t, Role::CreatorA, &wallet_key(11), parent).await,
        "Max generation depth exceeded",
    );
}

#[tokio::test]
async fn wallet_already_registered_to_another_agent() {
    let t = TestChain::start().await;
    register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    assert_revert(
        register(&t, Role::CreatorB, &wallet_key(1), 0).await,
        "Wallet already registered to another agent",
    );
    // Also as a child of another agent.
    let other = register(&t, Role::CreatorB, &wallet_key(2), 0).await.unwrap();
    assert_revert(
        register(&t, Role::CreatorB, &wallet_key(1), other).await,
        "Wallet already registered to another agent",
    );
    // And after its agent was revoked: the wallet stays bound to the revoked record.
    send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: id(1) }).await.unwrap();
    assert_revert(
        register(&t, Role::CreatorA, &wallet_key(1), 0).await,
        "Wallet already registered to another agent",
    );
    assert_revert(
        register(&t, Role::CreatorB, &wallet_key(1), other).await,
        "Wallet already registered to another agent",
    );
}

#[tokio::test]
async fn only_suspended_agents_can_be_reactivated() {
    let t = TestChain::start().await;
    let agent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    assert_revert(
        send_as(&t, Role::Regulator, &AgentRegistry::reactivateAgentCall { agentId: id(agent) }).await,
        "Only suspended agents can be reactivated",
    );
}

#[tokio::test]
async fn no_agent_registered_for_this_wallet() {
    let t = TestChain::start().await;
    assert_revert(
        t.chain.view(t.registry(), &AgentRegistry::getAgentByWalletCall { wallet: wallet(1) }).await,
        "No agent registered for this wallet",
    );
    let agent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let record =
        t.chain.view(t.registry(), &AgentRegistry::getAgentByWalletCall { wallet: wallet(1) }).await.unwrap();
    assert_eq!(record.agentId.to::<u64>(), agent);
    // Terminating the agent frees the wallet, so it names no agent again.
    send_as(&t, Role::CreatorA, &AgentRegistry::terminateSelfCall { agentId: id(agent) }).await.unwrap();
    assert_revert(
        t.chain.view(t.registry(), &AgentRegistry::getAgentByWalletCall { wallet: wallet(1) }).await,
        "No agent registered for this wallet",
    );
}

#[tokio::test]
async fn agent_wallet_must_not_be_zero() {
    let t = TestChain::start().await;
    // Checked before anything else, so before the consents, which no key could give for it.
    assert_revert(
        send_as(&t, Role::CreatorA, &register_call(Address::ZERO, 0)).await,
        "Agent wallet must not be zero",
    );
    let zero = AgentRegistry::registerAgentWithConsentCall {
        deadline: U256::from(kya_devchain::consent::consent_deadline(&t.chain).await.unwrap()),
        walletConsent: vec![1; 65].into(),
        ..kya_core::registry::consent::register_with_consent_call(
            register_call(Address::ZERO, 0),
            Default::default(),
        )
    };
    assert_revert(send_as(&t, Role::CreatorA, &zero).await, "Agent wallet must not be zero");
}

#[tokio::test]
async fn operational_scope_too_long() {
    let t = TestChain::start().await;
    // Creator A registers its own account as a root's wallet and Haftungsperson: no consent
    // needed, only the length is wrong.
    let creator = dev_accounts::address(Role::CreatorA);
    let mut call = register_call(creator, 0);
    call.operationalScope = "s".repeat(1_025);
    assert_revert(send_as(&t, Role::CreatorA, &call).await, "Operational scope too long");
    call.operationalScope = "s".repeat(1_024);
    send_as(&t, Role::CreatorA, &call).await.unwrap();
}

#[tokio::test]
async fn agent_wallet_consent_required() {
    let t = TestChain::start().await;
    let mut call = register_call(wallet(1), 0);
    call.haftungsperson = dev_accounts::address(Role::Outsider);
    assert_revert(send_as(&t, Role::Outsider, &call).await, "Agent wallet consent required");
}

#[tokio::test]
async fn haftungsperson_consent_required() {
    let t = TestChain::start().await;
    let mut call = register_call(dev_accounts::address(Role::CreatorA), 0);
    call.haftungsperson = dev_accounts::address(Role::CreatorB);
    assert_revert(send_as(&t, Role::CreatorA, &call).await, "Haftungsperson consent required");
}

#[tokio::test]
async fn consent_expired() {
    let t = TestChain::start().await;
    let mut call = consented_call(&t, dev_accounts::address(Role::CreatorA), &wallet_key(1), 0).await;
    call.deadline = U256::from(super::block_timestamp(&t).await - 1);
    assert_revert(send_as(&t, Role::CreatorA, &call).await, "Consent expired");
}

#[tokio::test]
async fn consent_deadline_too_far() {
    let t = TestChain::start().await;
    let mut call = consented_call(&t, dev_accounts::address(Role::CreatorA), &wallet_key(1), 0).await;
    // An hour past the 7 days the registry allows from the block it is mined in: refused before
    // the signature (made for another deadline) is looked at.
    let lifetime = kya_core::registry::consent::MAX_CONSENT_LIFETIME_SECS;
    call.deadline = U256::from(super::block_timestamp(&t).await + lifetime + 3_600);
    assert_revert(send_as(&t, Role::CreatorA, &call).await, "Consent deadline too far");
}

#[tokio::test]
async fn invalid_consent_signature() {
    let t = TestChain::start().await;
    let signed = consented_call(&t, dev_accounts::address(Role::CreatorA), &wallet_key(1), 0).await;
    // Signed for creator A, sent by creator C.
    assert_revert(send_as(&t, Role::CreatorC, &signed).await, "Invalid consent signature");
    let mut garbled = signed.clone();
    garbled.walletConsent = vec![7; 65].into();
    assert_revert(send_as(&t, Role::CreatorA, &garbled).await, "Invalid consent signature");
    send_as(&t, Role::CreatorA, &signed).await.unwrap();
}

#[tokio::test]
async fn currency_and_category_too_long() {
    let t = TestChain::start().await;
    let agent = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let report = |currency: &str, category: &str| AgentRegistry::reportRevenueCall {
        agentId: id(agent),
        amount: id(100),
        currency: currency.into(),
        category: category.into(),
        periodStart: 0,
        periodEnd: 0,
    };
    let (currency, category) = ("C".repeat(17), "c".repeat(65));
    assert_revert(send_as(&t, Role::CreatorA, &report(&currency, "compute")).await, "Currency too long");
    assert_revert(send_as(&t, Role::CreatorA, &report("USD", &category)).await, "Category too long");
    // Who may report is checked first.
    assert_revert(
        send_as(&t, Role::Outsider, &report(&currency, &category)).await,
        "Not authorized for this agent",
    );
    send_as(&t, Role::CreatorA, &report(&currency[1..], &category[1..])).await.unwrap();
}

#[tokio::test]
async fn agent_already_revoked_or_terminated() {
    let t = TestChain::start().await;
    let revoked = register(&t, Role::CreatorA, &wallet_key(1), 0).await.unwrap();
    let terminated = register(&t, Role::CreatorA, &wallet_key(2), 0).await.unwrap();
    send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: id(revoked) }).await.unwrap();
    send_as(&t, Role::CreatorA, &AgentRegistry::terminateSelfCall { agentId: id(terminated) }).await.unwrap();
    for agent in [revoked, terminated] {
        assert_revert(
            send_as(&t, Role::Regulator, &AgentRegistry::revokeAgentCall { agentId: id(agent) }).await,
            "Agent already revoked or terminated",
        );
    }
}
