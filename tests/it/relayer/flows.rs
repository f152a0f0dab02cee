//! Register, attest and report revenue through `POST /relay` with eth-account signatures, the
//! same requests signed by kya-core, and the read endpoints (with HEAD and OPTIONS).

use super::Engine;
use alloy::{primitives::U256, providers::Provider};
use kya_core::chain::abi::{AgentRegistry, Forwarder};
use kya_tests::relayer_fixture::{body, forward, sign_with_core, sign_with_eth_account, wei};

use super::{agent_key, agent_of, balance, cost, forwarder_nonce, receipt, register_call, start};

async fn an_agent_registers_attests_and_reports_through_the_relay(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    let agent = agent_key(1);
    let relayer_before = balance(&t, relayer.relayer.address()).await;
    let mut total_cost = 0u128;

    // Register: the agent learns its nonce from the relayer, signs with eth-account.
    let (status, nonce) = client.get(&format!("/nonce/{}", agent.address())).await;
    assert_eq!((status, nonce["nonce"].as_str()), (200, Some("0")));
    assert_eq!(nonce["address"], agent.address().to_string());
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let python = sign_with_eth_account(&t, &agent, &register);
    let core = sign_with_core(&t, &agent, &register);
    assert_eq!(python.digest, core.digest, "eth-account and kya-core hash the same EIP-712 digest");
    assert_eq!(python.signature, core.signature, "and produce byte-identical (RFC 6979) signatures");
    let (status, answer) = client.relay(&body(&register, &python.signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["from"], agent.address().to_checksum(None));
    assert_eq!(answer["nonce"], "0");
    let mined = receipt(&t, &answer).await;
    assert!(mined.status());
    assert_eq!(mined.to, Some(t.forwarder()));
    assert_eq!(mined.from, relayer.relayer.address());
    total_cost += cost(&mined);
    let agent_id = agent_of(&t, agent.address()).await;
    assert_eq!(agent_id, 1);
    let record = t
        .chain
        .view(t.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(agent_id) })
        .await
        .unwrap();
    assert_eq!(record.creator, agent.address(), "the signer, not the relayer, is the creator");
    assert_eq!(record.agentWallet, agent.address());
    assert_eq!(client.get(&format!("/nonce/{}", agent.address())).await.1["nonce"], "1");

    // Attest an hour later.
    t.chain.increase_time(3600).await.unwrap();
    let attest =
        forward(&t, agent.address(), 1, &AgentRegistry::attestComplianceCall { agentId: U256::from(1) });
    let signed = sign_with_eth_account(&t, &agent, &attest);
    assert_eq!(signed, sign_with_core(&t, &agent, &attest));
    let (status, answer) = client.relay(&body(&attest, &signed.signature)).await;
    assert_eq!(status, 200, "{answer}");
    let mined = receipt(&t, &answer).await;
    total_cost += cost(&mined);
    let block =
        t.chain.provider().get_block_by_number(mined.block_number.unwrap().into()).await.unwrap().unwrap();
    let record =
        t.chain.view(t.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(1) }).await.unwrap();
    assert_eq!(record.lastAttestation, block.header.timestamp);
    assert!(record.lastAttestation > record.registeredAt);

    // Report revenue, with numbers given as JSON numbers this time.
    let report = forward(
        &t,
        agent.address(),
        2,
        &AgentRegistry::reportRevenueCall {
            agentId: U256::from(1),
            amount: U256::from(123_456),
            currency: "EUR".into(),
            category: "compute".into(),
            periodStart: 1_700_000_000,
            periodEnd: 1_702_592_000,
        },
    );
    let signed = sign_with_eth_account(&t, &agent, &report);
    assert_eq!(signed, sign_with_core(&t, &agent, &report));
    let mut relay_body = body(&report, &signed.signature);
    relay_body["request"]["nonce"] = 2.into();
    relay_body["request"]["gas"] = 500_000.into();
    relay_body["request"]["value"] = 0.into();
    let (status, answer) = client.relay(&relay_body).await;
    assert_eq!(status, 200, "{answer}");
    total_cost += cost(&receipt(&t, &answer).await);
    let history = t
        .chain
        .view(t.registry(), &AgentRegistry::getRevenueHistoryCall { agentId: U256::from(1) })
        .await
        .unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].amount, U256::from(123_456));
    assert_eq!(history[0].currency, "EUR");
    assert_eq!(history[0].category, "compute");
    assert_eq!((history[0].periodStart, history[0].periodEnd), (1_700_000_000, 1_702_592_000));

    // The agent paid nothing; the relayer paid exactly what its budget says.
    assert_eq!(balance(&t, agent.address()).await, U256::ZERO);
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 3);
    let status = client.settled().await;
    assert_eq!(wei(&status["dailyGasBudget"]["usedWei"]), total_cost);
    assert_eq!(relayer_before - balance(&t, relayer.relayer.address()).await, U256::from(total_cost));
    let records = relayer.relayer.store().records().unwrap();
    assert_eq!(records.len(), 3);
    assert!(
        records
            .iter()
            .all(|record| record.status == kya_relayer::RelayStatus::Mined && record.tx_hash.is_some())
    );
    assert_eq!(records.iter().map(|record| record.cost_wei.unwrap()).sum::<u128>(), total_cost);
    relayer.stop().await;
}

async fn status_domain_nonce_and_metrics_describe_the_relayer(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;

    let (status, domain) = client.get("/domain").await;
    assert_eq!(status, 200);
    let on_chain = t.chain.view(t.forwarder(), &Forwarder::eip712DomainCall {}).await.unwrap();
    assert_eq!(domain["name"], on_chain.name);
    assert_eq!(domain["name"], "MinimalForwarder");
    assert_eq!(domain["version"], "1");
    assert_eq!(domain["chainId"], 84532);
    assert_eq!(domain["verifyingContract"], t.forwarder().to_string());

    let (status, report) = client.get("/status").await;
    assert_eq!(status, 200);
    let address = relayer.relayer.address();
    assert_eq!(report["relayer"], address.to_string());
    let balance_wei = balance(&t, address).await;
    assert_eq!(report["balanceWei"], balance_wei.to_string());
    assert_eq!(report["balance"], "10000.000000000000000000");
    assert_eq!(report["chainId"], 84532);
    assert_eq!(report["dailyGasBudget"]["limitWei"], "50000000000000000");
    assert_eq!(report["dailyGasBudget"]["usedWei"], "0");
    assert_eq!(report["dailyGasBudget"]["remainingWei"], "50000000000000000");
    assert_eq!(report["dailyGasBudget"]["resetsAt"], serde_json::Value::Null);
    assert_eq!(report["contracts"]["registry"], t.registry().to_string());
    assert_eq!(report["contracts"]["forwarder"], t.forwarder().to_string());
    // One key: a pool of one, leased to this daemon (no RELAYER_ID: the host's name).
    let holder = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned();
    let lane = serde_json::json!({"address": address.to_string(), "balance": "10000.000000000000000000",
        "balanceWei": balance_wei.to_string(), "belowMinBalance": false, "depth": 0, "holder": holder});
    assert_eq!(report["lanes"], serde_json::json!([lane]));

    let lowercase = agent_key(5).address().to_string().to_lowercase();
    let (status, nonce) = client.get(&format!("/nonce/{lowercase}")).await;
    assert_eq!(status, 200);
    assert_eq!(nonce["address"], agent_key(5).address().to_string(), "echoed checksummed");
    for bad in ["0x1234", "not-an-address", "0xa0Ee7A142d267C1f36714E4a8F75612F20a7972g"] {
        let (status, error) = client.get(&format!("/nonce/{bad}")).await;
        assert_eq!(status, 400, "{bad}");
        assert!(error["error"].as_str().unwrap().starts_with("Invalid address"), "{error}");
    }
    // Relay lookups: a malformed key is a 400 naming it, an unknown relay a 404.
    for (path, message) in [
        ("/relay/not-an-id", "Invalid relay id: \"not-an-id\" (32 hex digits)"),
        ("/relay/tx/0x1234", "Invalid transaction hash: \"0x1234\""),
        ("/relay/signer/0x1234/0", "Invalid address: \"0x1234\""),
        (
            "/relay/signer/0xa0Ee7A142d267C1f36714E4a8F75612F20a79720/x1",
            "Invalid nonce: \"x1\" (a decimal number)",
        ),
    ] {
        let (status, error) = client.get(path).await;
        assert_eq!(
            (status, error),
            (400, serde_json::json!({ "error": message, "code": "bad_request" })),
            "{path}"
        );
    }
    let unknown_hash = format!("/relay/tx/0x{}", "ab".repeat(32));
    let unknown_request = format!("/relay/signer/{}/0", agent_key(5).address());
    for path in [format!("/relay/{}", "0".repeat(32)), unknown_hash, unknown_request] {
        let (status, error) = client.get(&path).await;
        assert_eq!(
            (status, error),
            (404, serde_json::json!({ "error": "Relay not found", "code": "relay_not_found" })),
            "{path}"
        );
    }
    let (status, error) = client.get("/nope").await;
    assert_eq!((status, error["error"].as_str()), (404, Some("Not found")));
    let (status, error) = client.get("/relay").await;
    assert_eq!(
        (status, error),
        (405, serde_json::json!({"error": "Method not allowed", "code": "method_not_allowed"}))
    );

    // A refusal and an acceptance show up in the metrics, with the budget and the balance.
    let agent = agent_key(6);
    let request = forward(&t, agent.address(), 0, &super::register_call(agent.address(), 0));
    let signed = sign_with_core(&t, &agent, &request);
    let mut wrong = body(&request, &signed.signature);
    wrong["request"]["to"] = t.forwarder().to_string().into();
    assert_eq!(client.relay(&wrong).await.0, 403);
    let (status, relayed) = client.relay(&body(&request, &signed.signature)).await;
    assert_eq!(status, 200, "{relayed}");
    let used = client.settled().await["dailyGasBudget"]["usedWei"].as_str().unwrap().to_owned();
    let (status, metrics) = client.metrics().await;
    assert_eq!(status, 200);
    assert!(metrics.contains("relayer_relays_accepted_total 1\n"), "{metrics}");
    assert!(metrics.contains("relayer_relays_rejected_total{reason=\"wrong_target\"} 1\n"), "{metrics}");
    assert!(metrics.contains(&format!("relayer_budget_used_wei {used}\n")), "{metrics}");
    let balance_now = balance(&t, address).await;
    assert!(metrics.contains(&format!("relayer_balance_wei {balance_now}\n")), "{metrics}");

    super::methods::head_and_options(client, &relayed).await;
    relayer.stop().await;
}

super::on_both_stores!(
    an_agent_registers_attests_and_reports_through_the_relay,
    status_domain_nonce_and_metrics_describe_the_relayer,
);
