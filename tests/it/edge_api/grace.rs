//! Standing is the chain's, under every registry parameter (issue 63): the owner shortens the
//! attestation grace period to 120 s and the chain's clock moves 300 s past two agents'
//! attestations, then lengthens it to a week again. At each step every answer that states
//! compliance (`/kya`, `/kya/batch`, `/agent/:id`, the signed pass, the index's
//! `/agents/compliance` and `/stats/detailed`) is compared with the registry's own verdict at the
//! block the answer names (`complianceStatus`, `isRegisteredAndCompliant`), and the change feed
//! says each flip once: an expiry whose last current second is the new grace's, then a renewal,
//! both over several runs (`FEED_LAPSES_PER_RUN` of 1) without a duplicate.
//!
//! Under `wrangler dev` against anvil with the real registry; fails on code that judges
//! compliance by a fixed week.

use alloy::{
    primitives::{Address, Bytes, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use kya_core::{
    DEFAULT_GRACE_PERIOD_SECS,
    chain::abi::AgentRegistry,
    feed::{Detail, Event, EventType},
    pass::{Jwks, PassTrust, SigningKey, SigningKeys, verify::verify_pass},
};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain, consented_register_call,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars},
};
use serde_json::{Value, json};

use super::index::health_index;

/// The registry's `complianceStatus(id).attestationCurrent` and `isRegisteredAndCompliant` of
/// `wallet`, read at `block`.
async fn chain_says(chain: &TestChain, id: u64, wallet: Address, block: u64) -> (bool, bool) {
    let provider = chain.chain.provider();
    let call = |input: Vec<u8>| {
        let request = TransactionRequest::default().to(chain.registry()).input(Bytes::from(input).into());
        async move { provider.call(request).block(block.into()).await.expect("an eth_call at the block") }
    };
    let status = call(AgentRegistry::complianceStatusCall { agentId: U256::from(id) }.abi_encode()).await;
    let status = AgentRegistry::complianceStatusCall::abi_decode_returns(&status).unwrap();
    let compliant = call(AgentRegistry::isRegisteredAndCompliantCall { wallet }.abi_encode()).await;
    let compliant = AgentRegistry::isRegisteredAndCompliantCall::abi_decode_returns(&compliant).unwrap();
    (status.attestationCurrent, compliant)
}

fn block_of(headers: &reqwest::header::HeaderMap) -> u64 {
    headers["x-block-number"].to_str().unwrap().parse().unwrap()
}

fn grace_of(headers: &reqwest::header::HeaderMap) -> u64 {
    headers["x-attestation-grace-period"].to_str().unwrap().parse().unwrap()
}

/// What each answer states of agents `agents` (id, wallet, last attestation) is what the chain
/// says at the answer's block, and the registry's grace period there is `grace`. Returns the
/// compliance every agent has (they share it here).
async fn answers_agree_with_the_chain(
    chain: &TestChain,
    api: &EdgeClient,
    trust: &PassTrust,
    jwks: &Jwks,
    agents: &[(u64, Address, u64)],
    grace: u64,
) -> bool {
    let mut shared = None;
    for &(id, wallet, attested) in agents {
        let kya = api.get(&format!("/api/v1/kya/{wallet}")).await;
        assert_eq!(kya.status, 200, "{}", kya.text);
        assert_eq!(grace_of(&kya.headers), grace, "/kya names the grace it judged by");
        let (current, compliant) = chain_says(chain, id, wallet, block_of(&kya.headers)).await;
        assert_eq!(kya.body["isCompliant"], compliant, "/kya of agent {id} against the chain");
        assert_eq!(current, compliant, "the agents stay Active");
        assert_eq!(*shared.get_or_insert(compliant), compliant, "the agents share their standing");

        let agent = api.get(&format!("/api/v1/agent/{id}")).await;
        assert_eq!(agent.status, 200, "{}", agent.text);
        let (current, _) = chain_says(chain, id, wallet, block_of(&agent.headers)).await;
        assert_eq!(agent.body["compliance"]["attestationCurrent"], current, "/agent/{id} against the chain");
        assert_eq!(grace_of(&agent.headers), grace);

        let pass = api.get(&format!("/api/v1/kya/{wallet}/pass")).await;
        assert_eq!(pass.status, 200, "{}", pass.text);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        // The chain's clock ran ahead of the wall clock: the pass is checked at its own issue.
        let claims = verify_pass(&pass.text, jwks, trust, now).expect("a pass that verifies").claims;
        let (_, compliant) = chain_says(chain, id, wallet, claims.block.number).await;
        assert_eq!(claims.kya.is_compliant, compliant, "the signed pass of agent {id} against the chain");
        assert_eq!(claims.kya.valid_until, Some(attested + grace), "validUntil is the registry's grace's");
    }
    let wallets: Vec<String> = agents.iter().map(|(_, wallet, _)| wallet.to_string()).collect();
    let batch = api.post_json("/api/v1/kya/batch", "203.0.113.9", &json!({ "wallets": wallets })).await;
    assert_eq!(batch.status, 200, "{}", batch.text);
    let at = batch.body["block"]["number"].as_u64().unwrap();
    for (result, &(id, wallet, _)) in batch.body["results"].as_array().unwrap().iter().zip(agents) {
        assert_eq!(result["isCompliant"], chain_says(chain, id, wallet, at).await.1, "batch of agent {id}");
    }

    // The index's answers, at the index's block.
    let list = api.get("/api/v1/agents/compliance").await;
    assert_eq!(list.status, 200, "{}", list.text);
    assert!(list.headers.get("x-index-lag-blocks").is_some(), "from the index: {:?}", list.headers);
    assert_eq!(grace_of(&list.headers), grace);
    let at = block_of(&list.headers);
    for item in list.body["data"].as_array().unwrap() {
        let id = item["agentId"].as_u64().unwrap();
        let &(_, wallet, _) = agents.iter().find(|agent| agent.0 == id).unwrap();
        let (current, _) = chain_says(chain, id, wallet, at).await;
        assert_eq!(item["compliance"]["attestationCurrent"], current, "compliance list, agent {id}");
    }
    let detailed = api.get("/api/v1/stats/detailed").await;
    let at = block_of(&detailed.headers);
    let mut compliant = 0;
    for &(id, wallet, _) in agents {
        compliant += u64::from(chain_says(chain, id, wallet, at).await.1);
    }
    assert_eq!(detailed.body["compliantCount"], compliant, "the index's compliant count");
    shared.unwrap()
}

/// The provisional events of the feed after `after` (the changes), as (type, agent, compliant
/// after, detail).
async fn changes_after(api: &EdgeClient, after: &mut Option<String>) -> Vec<(EventType, u64, bool, Detail)> {
    let from = after.as_ref().map(|after| format!("&after={after}")).unwrap_or_default();
    let page = api.get(&format!("/api/v1/changes?limit=1000{from}")).await;
    assert_eq!(page.status, 200, "{}", page.text);
    if let Some(next) = page.body["next"].as_str() {
        *after = Some(next.to_owned());
    }
    let events: Vec<Event> = serde_json::from_value(page.body["events"].clone()).unwrap();
    events
        .into_iter()
        .filter(|event| event.confirms.is_none() && event.retracts.is_none())
        .map(|event| {
            let change = event.change;
            (change.kind, change.agent_id, change.standing.is_compliant, change.detail)
        })
        .collect()
}

/// Index runs until one adds no change to the feed (at most six): each run's changes.
async fn runs_until_quiet(
    worker: &EdgeWorker,
    api: &EdgeClient,
    after: &mut Option<String>,
) -> Vec<Vec<(EventType, u64, bool, Detail)>> {
    let mut runs = Vec::new();
    for _ in 0..6 {
        worker.run_index().await;
        let changes = changes_after(api, after).await;
        if changes.is_empty() {
            return runs;
        }
        runs.push(changes);
    }
    panic!("the feed still moves after six runs: {runs:?}");
}

async fn set_grace(chain: &TestChain, seconds: u64) {
    let call = AgentRegistry::setAttestationGracePeriodCall { seconds_: U256::from(seconds) };
    chain.chain.send(chain.deployment.owner, chain.registry(), &call).await.expect("the owner sets it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_the_pass_and_the_feed_follow_the_registrys_grace_period() {
    let chain = TestChain::start().await;
    let keys = SigningKeys::new(SigningKey::from_seed(&[0x63; 32]), vec![]);
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.extend([
        ("PASS_SIGNING_KEYS", keys.private_json()),
        ("INDEX_SWEEP_PER_RUN", "0".to_owned()),
        // One lapse or renewal a run: each flip of two agents takes two runs.
        ("FEED_LAPSES_PER_RUN", "1".to_owned()),
        ("INDEX_ANSWER_TTL_SECS", "0".to_owned()),
        ("MEMORY_CACHE_BYTES", "0".to_owned()),
    ]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    let trust =
        PassTrust { issuer: worker.base.clone(), chain_id: chain.chain_id(), registry: chain.registry() };
    let jwks = keys.public();
    let creator = dev_accounts::address(Role::CreatorA);

    // Two agents, registered (and so attested) in blocks of their own; the index filled.
    let mut agents = Vec::new();
    for (index, wallet) in [dev_accounts::agent_wallet(1), dev_accounts::agent_wallet(2)].iter().enumerate() {
        let call = consented_register_call(&chain, creator, wallet, 0).await;
        chain.chain.send(creator, chain.registry(), &call).await.expect("registers");
        let record = chain
            .chain
            .view(chain.registry(), &AgentRegistry::getAgentByWalletCall { wallet: wallet.address() })
            .await
            .unwrap();
        agents.push((index as u64 + 1, wallet.address(), record.lastAttestation));
    }
    // The fill, then a run past a new block, which follows the logs and records the re-scanned
    // window's registrations: later runs read no agent for them.
    worker.run_index().await;
    let _: Value = chain.chain.provider().raw_request("anvil_mine".into(), ("0x1",)).await.unwrap();
    worker.run_index().await;
    worker.run_index().await;
    assert!(
        health_index(&api).await["lastRun"]["message"].as_str().unwrap().contains("0 agents read"),
        "{}",
        health_index(&api).await
    );
    let mut after = None;
    let registered = changes_after(&api, &mut after).await;
    assert!(registered.iter().all(|change| change.0 != EventType::AttestationExpired), "{registered:?}");
    assert!(
        answers_agree_with_the_chain(&chain, &api, &trust, &jwks, &agents, DEFAULT_GRACE_PERIOD_SECS).await,
        "compliant under the initial week"
    );

    // The owner shortens the grace to 120 s; the chain's clock moves 300 s on.
    set_grace(&chain, 120).await;
    let provider = chain.chain.provider();
    let _: Value = provider.raw_request("evm_increaseTime".into(), (300,)).await.unwrap();
    let _: Value = provider.raw_request("anvil_mine".into(), ("0x1",)).await.unwrap();
    let lapses = runs_until_quiet(&worker, &api, &mut after).await;
    let expired = |(id, _, attested): (u64, Address, u64)| {
        vec![
            (
                EventType::AttestationExpired,
                id,
                false,
                Detail::Expired { last_attestation: attested, valid_until: attested + 120 },
            ),
            (EventType::ComplianceChanged, id, false, Detail::Compliance { from: true, to: false }),
        ]
    };
    // Oldest attestation first, one a run (an agent the run reads for its logs is walked with
    // them, in its run), each said once.
    assert_eq!(
        lapses.concat(),
        [expired(agents[0]), expired(agents[1])].concat(),
        "the lapses a shortened grace made"
    );
    assert_eq!(lapses.len(), 2, "one lapse a run: {lapses:?}");
    assert!(
        !answers_agree_with_the_chain(&chain, &api, &trust, &jwks, &agents, 120).await,
        "not compliant: the chain says so at 300 s past a 120 s grace"
    );

    // The owner lengthens it to a week again: current once more, newest attestation first.
    set_grace(&chain, DEFAULT_GRACE_PERIOD_SECS).await;
    let renewals = runs_until_quiet(&worker, &api, &mut after).await;
    let renewed = |id: u64| {
        vec![(EventType::ComplianceChanged, id, true, Detail::Compliance { from: false, to: true })]
    };
    // The youngest attestation first, one a run, each said once.
    assert_eq!(renewals, vec![renewed(agents[1].0), renewed(agents[0].0)], "the renewals, one a run");
    assert_eq!(health_index(&api).await["lastRun"]["ok"], true);
    assert!(
        answers_agree_with_the_chain(&chain, &api, &trust, &jwks, &agents, DEFAULT_GRACE_PERIOD_SECS).await,
        "compliant again under the week"
    );
}
