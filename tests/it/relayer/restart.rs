//! The real binary: budget use and a signer's limit survive a restart (SIGTERM, start again on
//! the same store, this time with the key from an encrypted keystore), and the key never appears
//! in a log line or a response. After a kill with relays in flight, every client's retry gets
//! its relay.

use super::{Engine, TestStore, relayer_address};
use alloy::primitives::U256;
use futures::future::join_all;
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::dev_accounts::{self, Role};
use kya_relayer::NewRelay;
use kya_tests::{
    TestChain,
    relayer_fixture::{
        BinaryRelayer, body, forward, set, settings, sign_with_core, signed_registrations, wei,
    },
    repo_root,
};
use serde_json::json;

use super::{agent_key, anvil, cost, forwarder_nonce, receipt, register_call};

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The daemon's own `main.rs`, built as a binary of the tests package (see tests/Cargo.toml).
const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

async fn budget_use_and_signer_limits_survive_a_restart_and_the_key_never_leaks(engine: Engine) {
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    let mut env = settings(&t, &db);
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
    let (_, metrics) = second.client.metrics().await;
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

/// The measured failure of issue 10: the daemon killed (SIGKILL) with relays in flight and
/// restarted on its store; every client retries its same signed request. Each retry gets its
/// relay's id and status (202 for one reserved but never sent, 200 for the others, before and
/// after mining), never the 401 that tells an agent to re-sign.
async fn after_a_kill_with_relays_in_flight_every_retry_gets_its_relay_and_never_401(engine: Engine) {
    let t = TestChain::start().await;
    let db = TestStore::new(engine);
    let mut env = settings(&t, &db);
    set(&mut env, "RATE_LIMIT_PER_IP", "1000");
    set(&mut env, "READ_RATE_LIMIT_PER_MINUTE", "100000");
    let agents: Vec<_> = (0..8).map(|n| agent_key(80 + n)).collect();
    let bodies = signed_registrations(&t, &agents);

    // Mining paused: every relay is sent and waits in the pool when the daemon dies.
    let first = BinaryRelayer::start(BINARY, &env);
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let answers = join_all(bodies.iter().map(|body| first.client.relay(body))).await;
    for (status, answer) in &answers {
        assert_eq!((*status, answer["status"].as_str()), (200, Some("sent")), "{answer}");
    }
    first.kill();

    // What a kill between reserving and sending leaves: a ninth request reserved, never sent.
    let late = agent_key(88);
    let request = forward(&t, late.address(), 0, &register_call(late.address(), 0));
    let signed = sign_with_core(&t, &late, &request);
    let store = db.open();
    let unsent = store
        .reserve(
            &NewRelay {
                signer: late.address(),
                forwarder_nonce: alloy::primitives::U256::ZERO,
                digest: signed.digest,
                signature: signed.signature.clone(),
                deadline: 0,
                input: Default::default(),
                client_ip: "127.0.0.1".into(),
                gas_limit: 400_000,
                max_fee_wei: 2_000_000_000,
                priority_fee_wei: 1_000_000_000,
                l1_fee_wei: 0,
                lanes: vec![relayer_address()],
            },
            &kya_relayer::BudgetLimits::total(u128::MAX),
            now(),
        )
        .unwrap()
        .unwrap();
    drop(store);

    let second = BinaryRelayer::start(BINARY, &env);
    let retries = join_all(bodies.iter().map(|body| second.client.relay(body))).await;
    for ((status, retry), (_, answer)) in retries.iter().zip(&answers) {
        assert_eq!(*status, 200, "{retry}");
        assert_eq!((&retry["relayId"], &retry["txHash"]), (&answer["relayId"], &answer["txHash"]));
        assert!(retry["status"] == "sent" || retry["status"] == "mined", "{retry}");
    }
    let (status, retry) = second.client.relay(&body(&request, &signed.signature)).await;
    assert_eq!(status, 202, "{retry}");
    assert_eq!(retry["relayId"], unsent.relay_id);
    assert_eq!((retry["status"].as_str(), &retry["txHash"]), (Some("accepted"), &json!(null)));

    // Mined now; the restarted daemon follows the relays of its previous life and settles them.
    anvil(&t, "evm_mine", json!([])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let mut paid = 0;
    for (_, answer) in &answers {
        paid += cost(&receipt(&t, answer).await);
        let id = answer["relayId"].as_str().unwrap();
        let relay = second.client.relay_until(id, |relay| relay["status"] == "mined").await;
        assert_eq!(relay["txHash"], answer["txHash"]);
    }
    let retries = join_all(bodies.iter().map(|body| second.client.relay(body))).await;
    for ((status, retry), (_, answer)) in retries.iter().zip(&answers) {
        assert_eq!((*status, retry["status"].as_str()), (200, Some("mined")), "{retry}");
        assert_eq!(retry["relayId"], answer["relayId"]);
    }
    for agent in &agents {
        assert_eq!(forwarder_nonce(&t, agent.address()).await, 1, "each request ran exactly once");
    }
    let status = second.client.get("/status").await.1;
    let pending: u128 = status["dailyGasBudget"]["pendingWei"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        pending, unsent.reserved_wei,
        "only the unsent reservation is left (until the reconciler frees it)"
    );
    assert_eq!(wei(&status["dailyGasBudget"]["usedWei"]), paid + unsent.reserved_wei);
    let (clean, log) = second.terminate();
    assert!(clean, "{log}");
}

super::on_both_stores!(
    budget_use_and_signer_limits_survive_a_restart_and_the_key_never_leaks,
    after_a_kill_with_relays_in_flight_every_retry_gets_its_relay_and_never_401,
);
