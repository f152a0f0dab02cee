//! The real binary: budget use and a signer's limit survive a restart (SIGTERM, start again on
//! the same store, this time with the key from an encrypted keystore), and the key never appears
//! in a log line or a response.

use alloy::primitives::U256;
use kya_core::abi::AgentRegistry;
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain,
    relayer_fixture::{BinaryRelayer, body, forward, set, settings, sign_with_core, wei},
    repo_root,
};

use super::{agent_key, cost, receipt, register_call};

/// The daemon's own `main.rs`, built as a binary of the tests package (see tests/Cargo.toml).
const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

#[tokio::test]
async fn budget_use_and_signer_limits_survive_a_restart_and_the_key_never_leaks() {
    let t = TestChain::start().await;
    let db = tempfile::tempdir().unwrap();
    let mut env = settings(&t, db.path());
    set(&mut env, "RATE_LIMIT_PER_SIGNER", "3");
    let agent = agent_key(70);
    let mut answers = String::new();

    let first = BinaryRelayer::start(BINARY, &env);
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let (status, answer) =
        first.client.relay(&body(&register, &sign_with_core(&t, &agent, &register).signature)).await;
    assert_eq!(status, 200, "{answer}");
    let mut paid = cost(&receipt(&t, &answer).await);
    answers.push_str(&answer.to_string());
    let attest =
        forward(&t, agent.address(), 1, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let (status, answer) =
        first.client.relay(&body(&attest, &sign_with_core(&t, &agent, &attest).signature)).await;
    assert_eq!(status, 200, "{answer}");
    paid += cost(&receipt(&t, &answer).await);
    answers.push_str(&answer.to_string());
    let before = first.client.settled().await;
    assert_eq!(wei(&before["dailyGasBudget"]["usedWei"]), paid);
    answers.push_str(&before.to_string());
    let (clean, first_log) = first.terminate();
    assert!(clean, "SIGTERM ends the relayer cleanly:\n{first_log}");
    assert!(first_log.contains("SIGTERM: shutting down"), "{first_log}");
    assert!(first_log.contains("relayer stopped"), "{first_log}");

    // Second life: the key now comes from a keystore file and its password.
    env.retain(|(name, _)| name != "RELAYER_KEY");
    let keystore = repo_root().join("relayer-daemon/testdata/relayer-keystore.json");
    set(&mut env, "RELAYER_KEYSTORE", keystore.display().to_string());
    set(&mut env, "RELAYER_KEYSTORE_PASSWORD", "relayer-test-password");
    let second = BinaryRelayer::start(BINARY, &env);
    let (_, after) = second.client.get("/status").await;
    answers.push_str(&after.to_string());
    assert_eq!(after["relayer"], dev_accounts::address(Role::Relayer).to_string());
    assert_eq!(after["dailyGasBudget"]["usedWei"], before["dailyGasBudget"]["usedWei"], "budget remembered");
    assert_eq!(
        after["dailyGasBudget"]["resetsAt"], before["dailyGasBudget"]["resetsAt"],
        "reset time remembered"
    );
    assert!(after["dailyGasBudget"]["resetsAt"].is_string());

    // Two of the signer's three requests were used before the restart: one more is allowed.
    let report = forward(
        &t,
        agent.address(),
        2,
        &AgentRegistry::reportRevenueCall {
            agentId: U256::from(1),
            amount: U256::from(500),
            currency: "USD".into(),
            category: "api".into(),
            periodStart: 1,
            periodEnd: 2,
        },
    );
    let (status, answer) =
        second.client.relay(&body(&report, &sign_with_core(&t, &agent, &report).signature)).await;
    assert_eq!(status, 200, "{answer}");
    answers.push_str(&answer.to_string());
    let attest =
        forward(&t, agent.address(), 3, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let (status, answer) =
        second.client.relay(&body(&attest, &sign_with_core(&t, &agent, &attest).signature)).await;
    assert_eq!((status, answer["error"].as_str()), (429, Some("Signer rate limit exceeded (3/hour)")));
    answers.push_str(&answer.to_string());
    let (_, metrics) = second.client.get_text("/metrics").await;
    answers.push_str(&metrics);
    let (clean, second_log) = second.terminate();
    assert!(clean, "{second_log}");

    // The key, in any spelling, is nowhere; the address is (so the grep is not vacuous).
    let key = dev_accounts::key_hex(Role::Relayer).trim_start_matches("0x").to_lowercase();
    let everything = format!("{first_log}\n{second_log}\n{answers}").to_lowercase();
    assert!(!everything.contains(&key), "the relayer key leaked");
    assert!(!everything.contains(&key[..16]), "part of the relayer key leaked");
    assert!(!everything.contains("relayer-test-password"), "the keystore password leaked");
    let address = dev_accounts::address(Role::Relayer).to_string().to_lowercase();
    assert!(everything.contains(&address), "the logs and answers do name the relayer's address");
}
