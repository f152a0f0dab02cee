//! On an OP Stack chain every transaction also pays an L1 data fee. Through a loopback stand-in
//! of an OP Stack node in front of anvil ([`kya_tests::op_stack`]: the `GasPriceOracle`'s quote,
//! the fee really taken from the sender, `l1Fee` in receipts), the relayer reserves the quote
//! with its headroom and books each receipt's `gasUsed × effectiveGasPrice + l1Fee`, so its
//! books equal what its balance lost, to the wei. Elsewhere nothing is reserved for L1.

use super::Engine;
use alloy::{
    consensus::{SignableTransaction, TxEip1559},
    primitives::{B256, TxKind, U256},
    providers::{Provider, ProviderBuilder},
    signers::local::PrivateKeySigner,
};
use kya_core::{chain::abi::AgentRegistry, registry::forward_request::ForwardRequest};
use kya_devchain::dev_accounts::{self, Role};
use kya_relayer::L1_FEE_HEADROOM;
use kya_tests::{
    TestChain,
    op_stack::{self, OpStackNode},
    relayer_fixture::{Client, body, forward, sign_with_core, wei},
};
use serde_json::{Value, json};

use super::{agent_key, agent_of, anvil, balance, cost, receipt, register_call, start, start_on};

/// Relays `request` signed by `agent`; the 200 answer.
async fn relayed(
    client: &Client,
    t: &TestChain,
    agent: &PrivateKeySigner,
    request: &ForwardRequest,
) -> Value {
    let (status, answer) = client.relay(&body(request, &sign_with_core(t, agent, request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// A receipt as the OP Stack node answers it, fields as JSON.
async fn node_receipt(node: &OpStackNode, hash: B256) -> Value {
    let provider = ProviderBuilder::new().connect_http(node.url.parse().expect("a URL"));
    let receipt: Value =
        provider.raw_request("eth_getTransactionReceipt".into(), (hash,)).await.expect("a receipt");
    assert!(receipt.is_object(), "{hash} is mined");
    receipt
}

/// A hex quantity of a receipt.
fn quantity(value: &Value) -> u128 {
    let text = value.as_str().unwrap_or_else(|| panic!("a quantity: {value}"));
    u128::from_str_radix(text.trim_start_matches("0x"), 16).expect("hex")
}

async fn on_an_op_stack_chain_the_l1_fee_is_reserved_and_booked_to_the_wei(engine: Engine) {
    let t = TestChain::start().await;
    let node = OpStackNode::start(&t.rpc_url()).await;
    let (_db, relayer) = start_on(&t, engine, &[("RPC_URL", &node.url)]).await;
    let client = &relayer.client;
    let payer = relayer.relayer.address();
    let before = balance(&t, payer).await;

    // Register, attest and report revenue: three calldata shapes, three L1 fees.
    let agent = agent_key(500);
    let mut answers = vec![
        relayed(client, &t, &agent, &forward(&t, agent.address(), 0, &register_call(agent.address(), 0)))
            .await,
    ];
    let id = U256::from(agent_of(&t, agent.address()).await);
    let attest = AgentRegistry::attestComplianceCall { agentId: id };
    answers.push(relayed(client, &t, &agent, &forward(&t, agent.address(), 1, &attest)).await);
    let report = AgentRegistry::reportRevenueCall {
        agentId: id,
        amount: U256::from(987_654),
        currency: "EUR".into(),
        category: "inference".into(),
        periodStart: 1_700_000_000,
        periodEnd: 1_702_592_000,
    };
    answers.push(relayed(client, &t, &agent, &forward(&t, agent.address(), 2, &report)).await);

    // A call that fails inside `execute`: sent while its agent is Active, mined in the block where
    // the regulator's suspension (a higher tip) runs first. Paid all the same, L1 fee included.
    let late = agent_key(501);
    let creator = dev_accounts::address(Role::CreatorA);
    let register = kya_tests::consented_register_call(&t, creator, &late, 0).await;
    t.chain.send(creator, t.registry(), &register).await.unwrap();
    let late_id = U256::from(agent_of(&t, late.address()).await);
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let late_attest = AgentRegistry::attestComplianceCall { agentId: late_id };
    answers.push(relayed(client, &t, &late, &forward(&t, late.address(), 0, &late_attest)).await);
    super::suspend_ahead_of_the_pool(&t, late_id).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;

    let outcomes = ["mined", "mined", "mined", "call_failed"];
    let status = client.settled().await;
    let records = relayer.relayer.store().records().unwrap();
    let quotes = node.quotes();
    assert_eq!((records.len(), quotes.len()), (4, 4), "one quote per relay, at its reservation");
    let mut booked = 0u128;
    for (n, answer) in answers.iter().enumerate() {
        let relay_id = answer["relayId"].as_str().expect("a relay id");
        let relay = client.relay_until(relay_id, |relay| relay["status"] == outcomes[n]).await;
        let hash: B256 = answer["txHash"].as_str().and_then(|hash| hash.parse().ok()).expect("a hash");
        let record = &records[n];
        assert_eq!(record.relay_id, relay_id);

        // The quote was of the very transaction sent, unsigned, at its largest nonce.
        let unsigned = TxEip1559 {
            chain_id: t.chain_id(),
            nonce: u64::MAX,
            gas_limit: record.gas_limit,
            max_fee_per_gas: record.max_fee_wei,
            max_priority_fee_per_gas: record.priority_fee_wei,
            to: TxKind::Call(t.forwarder()),
            value: U256::ZERO,
            access_list: Default::default(),
            input: record.input.clone().unwrap(),
        }
        .encoded_for_signing();
        assert_eq!(quotes[n], op_stack::quote(&unsigned), "relay {n}");

        // Reserved: the gas's worst case plus the quote's headroom.
        let gas_worst = u128::from(record.gas_limit) * record.max_fee_wei;
        assert_eq!(record.l1_fee_wei, L1_FEE_HEADROOM * quotes[n]);
        assert_eq!(wei(&relay["reservedWei"]), gas_worst + record.l1_fee_wei);
        assert!(wei(&relay["reservedWei"]) > gas_worst);

        // Booked: the receipt's gas and its L1 fee, which the sender really paid.
        let mined = node_receipt(&node, hash).await;
        let gas = quantity(&mined["gasUsed"]) * quantity(&mined["effectiveGasPrice"]);
        let l1_fee = quantity(&mined["l1Fee"]);
        assert_eq!(Some(l1_fee), node.charged(hash), "relay {n}");
        assert!(l1_fee > 0 && l1_fee <= record.l1_fee_wei, "the headroom covers the fee: relay {n}");
        assert_eq!(wei(&relay["costWei"]), gas + l1_fee, "relay {n}: {relay}");
        assert_eq!(record.cost_wei, Some(gas + l1_fee));
        eprintln!(
            "relay {n} ({}): gas {gas} wei + L1 fee {l1_fee} wei (quote {}, reserved {} for L1 of {} in all)",
            outcomes[n], quotes[n], record.l1_fee_wei, record.reserved_wei
        );
        booked += gas + l1_fee;
    }
    assert_eq!(
        relayer.relayer.store().records().unwrap()[3].revert_reason.as_deref(),
        Some("Agent not active")
    );

    // The books and the balance agree, to the wei.
    assert_eq!(wei(&status["dailyGasBudget"]["usedWei"]), booked);
    let lost = before - balance(&t, payer).await;
    eprintln!("booked {booked} wei; the relayer's balance lost {lost} wei");
    assert_eq!(lost, U256::from(booked));
    relayer.stop().await;
}

/// Without the `GasPriceOracle` predeploy (plain anvil) nothing is reserved for L1, and the cost
/// is the receipt's gas alone.
async fn elsewhere_nothing_is_reserved_for_l1(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let agent = agent_key(502);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let answer = relayed(&relayer.client, &t, &agent, &request).await;
    let mined = receipt(&t, &answer).await;
    let relay = relayer
        .client
        .relay_until(answer["relayId"].as_str().unwrap(), |relay| relay["status"] == "mined")
        .await;
    let record = relayer.relayer.store().records().unwrap().remove(0);
    assert_eq!(record.l1_fee_wei, 0);
    assert_eq!(wei(&relay["reservedWei"]), u128::from(record.gas_limit) * record.max_fee_wei);
    assert_eq!(wei(&relay["costWei"]), cost(&mined));
    relayer.stop().await;
}

super::on_both_stores!(
    on_an_op_stack_chain_the_l1_fee_is_reserved_and_booked_to_the_wei(
        flavor = "multi_thread",
        worker_threads = 2
    ),
    elsewhere_nothing_is_reserved_for_l1,
);
