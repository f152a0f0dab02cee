//! The relayer's checks behind node software other than anvil (`../shared/PROVIDERS.md`): through
//! each loopback stand-in that words reverts differently or reads the call data from `data` only,
//! `verify`, the simulation and the estimate give exactly the answers they give against anvil.

use kya_core::abi::AgentRegistry;
use kya_tests::{
    TestChain,
    provider_shapes::{self, ProviderShape},
    relayer_fixture::{InProcessRelayer, body, forward, set, settings, sign_with_core},
};
use serde_json::{Value, json};

use super::{agent_key, agent_of, receipt, register_call};

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
        let db = tempfile::tempdir().expect("a temporary directory");
        let mut env = settings(&t, db.path());
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
        assert_eq!(answer, refusal(500, "Wallet already registered to another agent"), "{shape:?}");
        let not_theirs = forward(
            &t,
            other.address(),
            0,
            &AgentRegistry::attestComplianceCall { agentId: alloy::primitives::U256::from(1) },
        );
        let answer =
            client.relay(&body(&not_theirs, &sign_with_core(&t, &other, &not_theirs).signature)).await;
        assert_eq!(answer, refusal(500, "Not authorized for this agent"), "{shape:?}");

        // `verify` on chain: a nonce ahead of the forwarder's is refused.
        let ahead = forward(&t, other.address(), 5, &register_call(other.address(), 0));
        let answer = client.relay(&body(&ahead, &sign_with_core(&t, &other, &ahead).signature)).await;
        assert_eq!(answer, refusal(401, "Invalid signature or nonce mismatch"), "{shape:?}");
        relayer.stop().await;
    }
}

fn refusal(status: u16, message: &str) -> (u16, Value) {
    (status, json!({ "error": message }))
}
