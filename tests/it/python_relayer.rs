//! A Python agent's relayer flows end to end (issue 64): the real relayer daemon (its binary)
//! against anvil with the real contracts, and the package `kya` driven by
//! `python/e2e/test_relayer_e2e.py` (pytest, kept outside the unit suite in `python/tests`): a
//! fresh operator registers a fresh agent through the relayer with the agent wallet's and a
//! fresh Haftungsperson's consents, the agent attests, reports revenue and takes its consents
//! back; then the chain is read here and must hold what the agent says it did, and no key may
//! show in the daemon's log or in Python's output. No wasm: it runs in the test command's first
//! part.

use std::time::Duration;

use alloy::{
    primitives::{Address, U256, keccak256},
    providers::Provider,
    signers::local::PrivateKeySigner,
};
use kya_core::chain::abi::{AgentRegistry, Forwarder};
use kya_tests::{
    TestChain, lay_out_python_package, output_within,
    relayer_fixture::{BinaryRelayer, Engine, TestStore, settings},
    repo_root, tools_python,
};
use serde_json::Value;

/// The daemon's own `main.rs`, built as a binary of the tests package (see tests/Cargo.toml).
const RELAYER: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

fn key_hex(key: &PrivateKeySigner) -> String {
    alloy::primitives::hex::encode_prefixed(key.credential().to_bytes())
}

fn address(value: &Value) -> Address {
    value.as_str().and_then(|text| text.parse().ok()).unwrap_or_else(|| panic!("an address: {value}"))
}

#[tokio::test]
async fn a_python_agent_registers_with_its_consents_attests_reports_and_takes_them_back() {
    let t = TestChain::start().await;
    let store = TestStore::new(Engine::Sqlite);
    let relayer = BinaryRelayer::start(RELAYER, &settings(&t, &store));
    let [operator, agent, person] = [(); 3].map(|()| PrivateKeySigner::random());

    let dir = tempfile::tempdir().unwrap();
    lay_out_python_package(dir.path());
    let out = dir.path().join("outcome.json");
    let python = tools_python();
    let mut pytest = std::process::Command::new(python);
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "python/e2e/test_relayer_e2e.py"])
        .current_dir(repo_root())
        .env("PYTHONPATH", dir.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("KYA_RELAYER_URL", &relayer.client.base)
        .env("KYA_RPC_URL", t.rpc_url())
        .env("KYA_OPERATOR_KEY", key_hex(&operator))
        .env("KYA_AGENT_KEY", key_hex(&agent))
        .env("KYA_HAFTUNGSPERSON_KEY", key_hex(&person))
        .env("KYA_E2E_OUT", &out);
    let ran = tokio::task::spawn_blocking(move || output_within(&mut pytest, Duration::from_secs(300)))
        .await
        .unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    println!("{report}");
    assert!(ran.status.success(), "the Python agent's end-to-end tests failed:\n{report}");
    let closing = report.lines().rev().find(|line| line.contains(" in ")).unwrap_or_default();
    assert!(closing.starts_with("2 passed"), "both tests ran and passed: {closing}");

    let said: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        [&said["operator"], &said["agent"], &said["haftungsperson"]].map(address),
        [operator.address(), agent.address(), person.address()]
    );
    let agent_id = U256::from(said["agentId"].as_u64().expect("an agent id"));
    let registry = t.registry();

    // Registered: the operator is its creator, the wallet and the Haftungsperson consented.
    assert_eq!(
        t.chain.view(registry, &AgentRegistry::walletToAgentCall(agent.address())).await.unwrap(),
        agent_id
    );
    assert!(
        t.chain.view(registry, &AgentRegistry::isRegisteredCall { wallet: agent.address() }).await.unwrap()
    );
    let record = t.chain.view(registry, &AgentRegistry::getAgentCall { agentId: agent_id }).await.unwrap();
    assert_eq!(
        (record.creator, record.agentWallet, record.haftungsperson),
        (operator.address(), agent.address(), person.address())
    );
    assert_eq!(record.constitutionHash, keccak256(said["constitution"].as_str().unwrap()));
    assert_eq!(record.capabilityHash, keccak256("search,summarise"), "the set, sorted");
    assert_eq!(record.operationalScope, said["scope"].as_str().unwrap());
    assert_eq!((record.parentAgentId, record.status), (U256::ZERO, 0));

    // Attested in the block it says, at that block's time.
    let block = |number: &Value| {
        let provider = t.chain.provider();
        let number = number.as_u64().expect("a block number");
        async move {
            provider.get_block_by_number(number.into()).await.unwrap().expect("the block").header.timestamp
        }
    };
    let attested_at = block(&said["attestedIn"]).await;
    assert_eq!(record.lastAttestation, attested_at);
    assert_eq!(said["attestedAt"], attested_at);
    assert!(record.lastAttestation >= record.registeredAt);

    // The revenue it reported, once, with its values.
    let history =
        t.chain.view(registry, &AgentRegistry::getRevenueHistoryCall { agentId: agent_id }).await.unwrap();
    let revenue = &said["revenue"];
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].amount, U256::from(revenue["amount_cents"].as_u64().unwrap()));
    assert_eq!((history[0].currency.as_str(), history[0].category.as_str()), ("EUR", "compute"));
    assert_eq!((history[0].periodStart, history[0].periodEnd), (1_700_000_000, 1_702_592_000));
    assert_eq!(record.lastRevenueReport, block(&said["reportedIn"]).await);

    // Consents: each party's used once at registration; the agent then took back its own
    // through nonce 9, so its next consent is signed at 10.
    assert_eq!(said["nextConsentNonce"], 10);
    assert_eq!(t.consent_nonce(agent.address()).await, 10);
    assert_eq!(t.consent_nonce(person.address()).await, 1);
    assert_eq!(t.consent_nonce(operator.address()).await, 0);

    // Every write went through the relayer and cost its senders nothing: one forward request by
    // the operator, four by the agent (attest, report, two take-backs), and none refused spent one.
    let forwarder_nonce = |account: Address| {
        let chain = &t.chain;
        let forwarder = t.forwarder();
        async move { chain.view(forwarder, &Forwarder::getNonceCall { from: account }).await.unwrap() }
    };
    assert_eq!(forwarder_nonce(operator.address()).await, U256::from(1));
    assert_eq!(forwarder_nonce(agent.address()).await, U256::from(4));
    for account in [operator.address(), agent.address(), person.address()] {
        assert_eq!(t.chain.provider().get_balance(account).await.unwrap(), U256::ZERO);
    }
    let relays = said["relays"].as_array().unwrap();
    assert_eq!(relays.len(), 5);
    for relay in relays {
        let (status, view) = relayer.client.get(&format!("/relay/{}", relay.as_str().unwrap())).await;
        assert_eq!((status, view["status"].as_str()), (200, Some("mined")), "{view}");
    }

    // No key in the daemon's log or in anything Python printed.
    let (stopped, log) = relayer.terminate();
    assert!(stopped, "the relayer stops cleanly:\n{log}");
    for key in [&operator, &agent, &person] {
        let hex = key_hex(key);
        for shown in [&log, &report] {
            assert!(!shown.contains(&hex[2..]), "a private key was shown");
        }
    }
}
