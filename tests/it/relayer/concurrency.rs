//! Thirty signers relaying at once: all mined with consecutive relayer nonces, and the budget
//! used is exactly the sum of the receipts' costs.

use super::Engine;
use std::collections::BTreeSet;

use futures::future::join_all;
use kya_tests::relayer_fixture::{signed_registrations, wei};

use super::{agent_key, agent_of, balance, cost, receipt, start};

const SIGNERS: u64 = 30;

async fn thirty_signers_at_once_are_all_mined_without_nonce_trouble_or_budget_drift(engine: Engine) {
    // All requests come from 127.0.0.1: lift the per-IP limit, keep everything else default.
    let (t, _db, relayer) = start(engine, &[("RATE_LIMIT_PER_IP", "1000")]).await;
    let agents: Vec<_> = (0..SIGNERS).map(|n| agent_key(100 + n)).collect();
    let bodies = signed_registrations(&t, &agents);
    let before = balance(&t, relayer.relayer.address()).await;

    let answers = join_all(bodies.iter().map(|body| relayer.client.relay(body))).await;

    let mut total = 0u128;
    let mut hashes = BTreeSet::new();
    for (status, answer) in &answers {
        assert_eq!(*status, 200, "{answer}");
        let mined = receipt(&t, answer).await;
        assert!(mined.status(), "{answer}");
        total += cost(&mined);
        hashes.insert(mined.transaction_hash);
    }
    assert_eq!(hashes.len(), SIGNERS as usize);
    let mut ids = BTreeSet::new();
    for agent in &agents {
        ids.insert(agent_of(&t, agent.address()).await);
    }
    assert_eq!(ids, (1..=SIGNERS).collect(), "every agent registered once");

    let status = relayer.client.settled().await;
    assert_eq!(wei(&status["dailyGasBudget"]["usedWei"]), total, "budget = sum of receipt costs");
    assert_eq!(before - balance(&t, relayer.relayer.address()).await, alloy::primitives::U256::from(total));
    let records = relayer.relayer.store().records().unwrap();
    let nonces: Vec<u64> = {
        let mut nonces: Vec<u64> = records.iter().map(|record| record.relayer_nonce.unwrap()).collect();
        nonces.sort_unstable();
        nonces
    };
    let first = nonces[0];
    assert_eq!(nonces, (first..first + SIGNERS).collect::<Vec<_>>(), "consecutive relayer nonces, no gap");
    assert!(records.iter().all(|record| record.status == kya_relayer::RelayStatus::Mined));
    relayer.stop().await;
}

super::on_both_stores!(thirty_signers_at_once_are_all_mined_without_nonce_trouble_or_budget_drift,);
