//! Data a registrant chooses can be absurd: anyone may register an agent and report any `uint256`
//! amount over any `uint64` period. Such data must neither break the registry-wide endpoints
//! (one snapshot serves five of them) nor wrap a total: amounts stay exact JSON integers up to
//! `u128::MAX`, larger ones and their sums are the nearest double, and sums saturate at
//! `uint256` max. Expected figures are computed here from what the test reported.

use alloy::{primitives::U256, providers::Provider};
use kya_core::abi::AgentRegistry;
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    register_call,
};
use serde_json::{Value, json};

struct Report {
    amount: U256,
    currency: &'static str,
    category: &'static str,
    period: (u64, u64),
}

/// The text serde_json gives `amount` in the API: exact digits up to `u128`, else a double.
fn json_number(amount: U256) -> Value {
    match u128::try_from(amount) {
        Ok(exact) => serde_json::from_str(&exact.to_string()).unwrap(),
        Err(_) => json!(f64::from(amount)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_amounts_and_periods_are_shown_not_fatal() {
    let chain = TestChain::start().await;
    let (registry, creator) = (chain.registry(), dev_accounts::address(Role::CreatorA));
    let wallet = dev_accounts::agent_wallet(1).address();
    chain.chain.send(creator, registry, &register_call(wallet, 0)).await.expect("registers");
    let half = U256::from(1) << 127;
    let reports = [
        Report { amount: half, currency: "USD", category: "compute", period: (1_700_000_000, u64::MAX) },
        Report { amount: half, currency: "USD", category: "data", period: (1_700_000_000, 1_700_086_400) },
        Report {
            amount: U256::from(10).pow(U256::from(30)),
            currency: "EUR",
            category: "data",
            period: (253_402_300_800, 253_402_300_800),
        },
        Report { amount: U256::MAX, currency: "XXX", category: "data", period: (1, 2) },
    ];
    let mut last_report_block = 0;
    for report in &reports {
        let call = AgentRegistry::reportRevenueCall {
            agentId: U256::from(1),
            amount: report.amount,
            currency: report.currency.into(),
            category: report.category.into(),
            periodStart: report.period.0,
            periodEnd: report.period.1,
        };
        let receipt = chain.chain.send(creator, registry, &call).await.expect("reports");
        last_report_block = receipt.block_number.expect("mined");
    }
    let last_reported_at = chain
        .chain
        .provider()
        .get_block_by_number(last_report_block.into())
        .await
        .expect("the block")
        .expect("it exists")
        .header
        .timestamp;
    let last_reported_at = chrono::DateTime::from_timestamp(i64::try_from(last_reported_at).unwrap(), 0)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let worker = EdgeWorker::start(&chain_vars(&chain.rpc_url(), registry)).await;
    let api = worker.client();

    let history = api.get("/api/v1/agent/1/revenue").await;
    assert_eq!(history.status, 200, "{}", history.body);
    let data = history.body["data"].as_array().expect("records");
    assert_eq!(data.len(), reports.len());
    for (shown, report) in data.iter().zip(&reports) {
        assert_eq!(shown["amount"], json_number(report.amount), "{shown}");
        assert_eq!(
            (&shown["currency"], &shown["category"]),
            (&json!(report.currency), &json!(report.category))
        );
    }
    // Exact digits, not a rounded double, for an amount past 64 bits (2^127).
    assert!(
        history.text.contains(r#""amount":170141183460469231731687303715884105728,"#),
        "{}",
        history.text
    );
    // Periods past the year 9999 in ISO 8601's expanded form, as JavaScript writes them.
    assert_eq!(data[0]["periodEnd"], "+584554051223-11-09T07:00:15.000Z");
    assert_eq!(data[2]["periodStart"], "+010000-01-01T00:00:00.000Z");
    assert_eq!(data[0]["periodStart"], "2023-11-14T22:13:20.000Z");

    // Sums: 2^127 + 2^127 = 2^128 is one past u128, so a double; uint256 max saturates.
    let usd = half + half;
    let aggregate = api.get("/api/v1/revenue/aggregate").await;
    assert_eq!(aggregate.status, 200, "{}", aggregate.body);
    let by_currency = json!({"EUR": json_number(reports[2].amount), "USD": json_number(usd), "XXX": json_number(U256::MAX)});
    assert_eq!(
        aggregate.body,
        json!({
            "totalReports": 4,
            "totalAmount": json_number(U256::MAX),
            "byCurrency": by_currency,
            "byCategory": {"compute": json_number(half), "data": json_number(U256::MAX)},
        })
    );
    assert!(aggregate.text.contains(r#""EUR":1000000000000000000000000000000,"#), "{}", aggregate.text);

    let detailed = api.get("/api/v1/stats/detailed").await;
    assert_eq!(detailed.status, 200, "{}", detailed.body);
    assert_eq!(detailed.body["totalRevenue"], by_currency);
    // The other endpoints the snapshot serves, and the record, are unharmed.
    assert_eq!(api.get("/api/v1/stats").await.body["totalAgents"], 1);
    let agents = api.get("/api/v1/agents").await.body;
    assert_eq!((&agents["total"], &agents["data"][0]["agentId"]), (&json!(1), &json!(1)));
    let compliance = api.get("/api/v1/agents/compliance").await.body;
    assert_eq!((&compliance["total"], &compliance["data"][0]["status"]), (&json!(1), &json!("Active")));
    let record = api.get("/api/v1/agent/1").await.body;
    assert_eq!(record["agent"]["lastRevenueReport"], last_reported_at);
    assert_eq!(data[3]["reportedAt"], last_reported_at);
}
