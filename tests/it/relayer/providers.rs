//! The relayer's checks behind node software other than anvil (`../shared/PROVIDERS.md`): through
//! each loopback stand-in that words reverts differently or reads the call data from `data` only,
//! `verify`, the simulation and the estimate give exactly the answers they give against anvil.
//! Through a load balancer whose backends lag the head, and through a provider that refuses every
//! third request with 429, every answer is the one straight from anvil.

use alloy::primitives::U256;
use kya_core::chain::abi::AgentRegistry;
use kya_tests::{
    TestChain,
    provider_shapes::{self, ProviderShape},
    relayer_fixture::{InProcessRelayer, body, forward, set, settings, sign_with_core},
};
use serde_json::{Value, json};

use super::{Engine, TestStore, agent_key, agent_of, forwarder_nonce, receipt, register_call};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relayers_checks_answer_alike_through_every_provider_shape() {
    let t = TestChain::start().await;
    let shapes = [
        None,
        Some(ProviderShape::ReasonInMessageOnly),
        Some(ProviderShape::OlderNethermind),
        Some(ProviderShape::ReadsDataOnly),
    ];
    for (n, shape) in shapes.into_iter().enumerate() {
        let rpc_url = match shape {
            None => t.rpc_url(),
            Some(shape) => provider_shapes::start(&t.rpc_url(), shape).await.0,
        };
        let db = TestStore::new(Engine::Sqlite);
        let mut env = settings(&t, &db);
        set(&mut env, "RPC_URL", rpc_url);
        let relayer = InProcessRelayer::start(&env).await;
        let client = &relayer.client;
        let agent = agent_key(400 + n as u64);

        // Accepted: verify, simulation and estimate pass, and the registration is mined.
        let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
        let (status, answer) =
            client.relay(&body(&request, &sign_with_core(&t, &agent, &request).signature)).await;
        assert_eq!(status, 200, "{shape:?}: {answer}");
        assert!(receipt(&t, &answer).await.status(), "{shape:?}");
        assert_ne!(agent_of(&t, agent.address()).await, 0, "{shape:?}");
        client.settled().await;

        // The simulation's revert, with the registry's reason: the wallet is taken now.
        let other = agent_key(450 + n as u64);
        let taken = forward(&t, other.address(), 0, &register_call(agent.address(), 0));
        let answer = client.relay(&body(&taken, &sign_with_core(&t, &other, &taken).signature)).await;
        assert_eq!(
            answer,
            refusal(500, "reverted", "Wallet already registered to another agent"),
            "{shape:?}"
        );
        let not_theirs = forward(
            &t,
            other.address(),
            0,
            &AgentRegistry::attestComplianceCall { agentId: alloy::primitives::U256::from(1) },
        );
        let answer =
            client.relay(&body(&not_theirs, &sign_with_core(&t, &other, &not_theirs).signature)).await;
        assert_eq!(answer, refusal(500, "reverted", "Not authorized for this agent"), "{shape:?}");

        // `verify` on chain: a nonce ahead of the forwarder's is refused.
        let ahead = forward(&t, other.address(), 5, &register_call(other.address(), 0));
        let answer = client.relay(&body(&ahead, &sign_with_core(&t, &other, &ahead).signature)).await;
        assert_eq!(
            answer,
            refusal(401, "invalid_signature", "Invalid signature or nonce mismatch"),
            "{shape:?}"
        );
        relayer.stop().await;
    }
}

fn refusal(status: u16, code: &str, message: &str) -> (u16, Value) {
    (status, json!({ "error": message, "code": code }))
}

/// Through a load balancer whose backends lag the head (a read at a block they have not seen
/// answers `header not found`, and every relay's checks read the head block pinned just before)
/// and through a provider that refuses every third HTTP request with 429 and `Retry-After: 1`,
/// the relayer answers exactly as it does straight from anvil, each on a fresh chain given the
/// same requests: `/status`, a registration, a valid attestation, a valid revenue report, a
/// wrong nonce (401) and an already registered wallet (500 with the registry's reason), and the
/// chain holds the same writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relayer_answers_as_from_anvil_behind_lagging_backends_and_a_429_every_third_request() {
    let (direct, _) = session(None).await;
    assert_eq!(direct.len(), 9);
    assert_eq!(
        direct[5],
        (
            "wrong nonce",
            401,
            json!({ "error": "Invalid signature or nonce mismatch", "code": "invalid_signature" })
        )
    );
    assert_eq!(
        direct[6],
        (
            "wallet already registered",
            500,
            json!({ "error": "Wallet already registered to another agent", "code": "reverted" })
        )
    );
    for shape in [ProviderShape::LaggingBackend, ProviderShape::RateLimitedEveryThird] {
        let started = std::time::Instant::now();
        let (got, refused) = session(Some(shape)).await;
        for (expected, got) in direct.iter().zip(&got) {
            assert_eq!(got, expected, "{} through {shape:?}", expected.0);
        }
        assert_eq!(got.len(), direct.len(), "{shape:?}");
        assert!(refused > 0, "{shape:?} refused nothing: the stand-in was not exercised");
        eprintln!("{shape:?}: {refused} refusals, answers as from anvil, in {:?}", started.elapsed());
    }
}

/// Each step's name and answer (status and body) from a relayer on a fresh chain, through
/// `shape` (`None`: straight from anvil), and how many requests the stand-in refused. A relay's
/// id is random and its hash is the chain's: both blanked (checked to be there), and so is the
/// time the budget resets.
async fn session(shape: Option<ProviderShape>) -> (Vec<(&'static str, u16, Value)>, usize) {
    let t = TestChain::start().await;
    let (rpc_url, refused) = match shape {
        None => (t.rpc_url(), None),
        Some(shape) => {
            let (url, refused) = provider_shapes::start(&t.rpc_url(), shape).await;
            (url, Some(refused))
        }
    };
    let db = TestStore::new(Engine::Sqlite);
    let mut env = settings(&t, &db);
    set(&mut env, "RPC_URL", rpc_url);
    let relayer = InProcessRelayer::start(&env).await;
    let client = &relayer.client;
    let (agent, other) = (agent_key(600), agent_key(601));
    let mut answers = Vec::new();

    let (status, answer) = client.get("/status").await;
    answers.push(("status before", status, blank(answer)));
    let register = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let (status, answer) =
        client.relay(&body(&register, &sign_with_core(&t, &agent, &register).signature)).await;
    answers.push(("registration", status, blank(answer)));
    client.settled().await;
    let agent_id = U256::from(agent_of(&t, agent.address()).await);
    t.chain.increase_time(3_600).await.expect("anvil moves its clock");
    let attest = forward(&t, agent.address(), 1, &AgentRegistry::attestComplianceCall { agentId: agent_id });
    let (status, answer) = client.relay(&body(&attest, &sign_with_core(&t, &agent, &attest).signature)).await;
    answers.push(("attestation", status, blank(answer)));
    client.settled().await;
    let report = forward(
        &t,
        agent.address(),
        2,
        &AgentRegistry::reportRevenueCall {
            agentId: agent_id,
            amount: U256::from(4_200),
            currency: "EUR".into(),
            category: "compute".into(),
            periodStart: 1_700_000_000,
            periodEnd: 1_702_592_000,
        },
    );
    let (status, answer) = client.relay(&body(&report, &sign_with_core(&t, &agent, &report).signature)).await;
    answers.push(("revenue report", status, blank(answer)));
    client.settled().await;
    let (status, answer) = client.get(&format!("/nonce/{}", agent.address())).await;
    answers.push(("nonce", status, answer));
    // `verify` on chain: a nonce ahead of the forwarder's.
    let ahead = forward(&t, agent.address(), 7, &AgentRegistry::attestComplianceCall { agentId: agent_id });
    let (status, answer) = client.relay(&body(&ahead, &sign_with_core(&t, &agent, &ahead).signature)).await;
    answers.push(("wrong nonce", status, answer));
    // The simulation's revert: the agent's wallet is taken.
    let taken = forward(&t, other.address(), 0, &register_call(agent.address(), 0));
    let (status, answer) = client.relay(&body(&taken, &sign_with_core(&t, &other, &taken).signature)).await;
    answers.push(("wallet already registered", status, answer));
    let (status, answer) = client.get("/status").await;
    answers.push(("status after", status, blank(answer)));

    // What the relays wrote, read straight from the chain.
    let record = t.chain.view(t.registry(), &AgentRegistry::getAgentCall { agentId: agent_id }).await;
    let history =
        t.chain.view(t.registry(), &AgentRegistry::getRevenueHistoryCall { agentId: agent_id }).await;
    let written = json!({
        "agentId": agent_id.to::<u64>(),
        "attestedAnHourLater": record.is_ok_and(|record| record.lastAttestation >= record.registeredAt + 3_600),
        "reports": history.unwrap_or_default().iter()
            .map(|report| (report.amount.to::<u64>(), report.currency.clone())).collect::<Vec<_>>(),
        "forwarderNonce": forwarder_nonce(&t, agent.address()).await,
        "otherRegistered": agent_of(&t, other.address()).await,
    });
    answers.push(("on chain", 200, written));
    relayer.stop().await;
    (answers, refused.map_or(0, |refused| refused.load(std::sync::atomic::Ordering::SeqCst)))
}

/// `answer` with `relayId`, `txHash` and `dailyGasBudget.resetsAt` blanked where present (each
/// checked to have its form).
fn blank(mut answer: Value) -> Value {
    for (field, digits) in [("relayId", 32), ("txHash", 66)] {
        if let Some(value) = answer.get_mut(field) {
            let text = value.as_str().unwrap_or_default();
            assert_eq!(text.len(), digits, "{field}: {value}");
            *value = json!(format!("<{field}>"));
        }
    }
    if let Some(resets_at) = answer.pointer_mut("/dailyGasBudget/resetsAt")
        && resets_at.is_string()
    {
        *resets_at = json!("<resetsAt>");
    }
    answer
}
