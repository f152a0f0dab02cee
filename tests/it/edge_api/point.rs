//! The point answers from the index (issue 63): `/kya/:wallet`, `/kya/batch` of 100,
//! `/kya/:wallet/pass`, `/agent/:id`, its lineage and a verified `POST /kya/verify` answered from D1 with no RPC request at all (counted by
//! the test's RPC proxy) while the index is fresh, each body exactly the one `kya_core` renders
//! from the chain's record at the index's block; the chain read, saying why
//! (`X-Index-Fallback`), when the index is held back; and a suspension a polled `/kya` and pass
//! show within 2 blocks, with the pacer as deployed (2 s) on a chain of 2 s blocks.

use std::time::{Duration, Instant};

use base64::Engine as _;

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    signers::local::PrivateKeySigner,
};
use kya_core::{
    Agent, AgentStatus, KyaResult, StandingClock,
    api::view::AgentDetails,
    chain::abi::AgentRegistry,
    pass::{PassTrust, SigningKey, SigningKeys, verify::verify_pass},
    registry::lineage::{self, NodeData},
};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain, consented_register_call,
    edge_fixture::{CountingProxy, EdgeClient, EdgeWorker, chain_vars, fresh_ip},
};
use serde_json::{Value, json};

use super::{
    index::health_index,
    verify::{Verifier, signed},
};

fn header(answer: &kya_tests::edge_fixture::Answer, name: &str) -> Option<String> {
    answer.headers.get(name).map(|value| value.to_str().unwrap().to_owned())
}

fn number(answer: &kya_tests::edge_fixture::Answer, name: &str) -> u64 {
    header(answer, name).unwrap_or_else(|| panic!("{name} in {:?}", answer.headers)).parse().unwrap()
}

/// The registry's record of agent `id` and its grace period, read at `block`.
async fn chain_record(chain: &TestChain, id: u64, block: u64) -> (Agent, StandingClock) {
    let provider = chain.chain.provider();
    let header = provider.get_block_by_number(block.into()).await.unwrap().expect("the block").header;
    let at = |call: Vec<u8>| {
        let request = alloy::rpc::types::TransactionRequest::default()
            .to(chain.registry())
            .input(alloy::primitives::Bytes::from(call).into());
        async move { provider.call(request).block(block.into()).await.expect("a read at the block") }
    };
    use alloy::sol_types::SolCall;
    let record = at(AgentRegistry::getAgentCall { agentId: U256::from(id) }.abi_encode()).await;
    let record = AgentRegistry::getAgentCall::abi_decode_returns(&record).unwrap();
    let grace = at(AgentRegistry::attestationGracePeriodCall {}.abi_encode()).await;
    let grace = AgentRegistry::attestationGracePeriodCall::abi_decode_returns(&grace).unwrap();
    (Agent::try_from(record).unwrap(), StandingClock::new(header.timestamp, grace.to()))
}

/// `/kya` at `path`, polled every 100 ms until the index answers `isCompliant: compliant`.
async fn until(api: &EdgeClient, path: &str, compliant: bool) -> kya_tests::edge_fixture::Answer {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = api.get(path).await;
        let from_index = header(&answer, "x-index-fallback").is_none();
        if answer.status == 200 && answer.body["isCompliant"] == compliant && from_index {
            return answer;
        }
        assert!(Instant::now() < deadline, "never showed isCompliant {compliant}: {}", answer.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn register(chain: &TestChain, wallet: &PrivateKeySigner, parent: u64) {
    let creator = dev_accounts::address(Role::CreatorA);
    let call = consented_register_call(chain, creator, wallet, parent).await;
    chain.chain.send(creator, chain.registry(), &call).await.expect("registers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_answers_come_from_the_index_with_no_rpc_and_from_the_chain_when_it_is_behind() {
    let chain = TestChain::start().await;
    let (root, child) = (dev_accounts::agent_wallet(1), dev_accounts::agent_wallet(2));
    register(&chain, &root, 0).await;
    register(&chain, &child, 1).await;
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    let keys = SigningKeys::new(SigningKey::from_seed(&[0x64; 32]), vec![]);
    let mut vars = chain_vars(&proxy.url, chain.registry());
    vars.extend([
        ("PASS_SIGNING_KEYS", keys.private_json()),
        // One block of logs a run: the index can be held behind the head.
        ("INDEX_BLOCKS_PER_RUN", "1".to_owned()),
        // No sweep: the scopes' backfill alone reads an old index's scopes again.
        ("INDEX_SWEEP_PER_RUN", "0".to_owned()),
        ("MEMORY_CACHE_BYTES", "0".to_owned()),
    ]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    worker.run_index().await;
    let index = health_index(&api).await;
    assert_eq!(index["complete"], true, "{index}");
    let block = index["block"].as_u64().unwrap();

    // Fresh: every point answer from D1, none from the RPC endpoint.
    let rpc_before = proxy.requests();
    let kya = api.get(&format!("/api/v1/kya/{}", root.address())).await;
    assert_eq!(kya.status, 200, "{}", kya.text);
    assert_eq!(number(&kya, "x-block-number"), block, "the index's block");
    assert_eq!(header(&kya, "x-index-lag-blocks").as_deref(), Some("0"));
    assert_eq!(header(&kya, "x-index-fallback"), None);
    let (record, clock) = chain_record(&chain, 1, block).await;
    let expected = serde_json::to_value(KyaResult::of(root.address(), Some(&record), clock)).unwrap();
    assert_eq!(kya.body, expected, "the chain's record at the index's block, scope and all");
    assert_eq!(kya.body["agent"]["operationalScope"], format!("agent {}", root.address()));
    // Read in a D1 session: the answer carries its bookmark, and an answer asked with it (read
    // from a replica at least as new, where D1 replicates) is the same, still from the index.
    let bookmark = header(&kya, "x-d1-bookmark").expect("a D1 session's bookmark");
    let path = format!("/api/v1/kya/{}", root.address());
    let again = api.request("GET", &path, &fresh_ip(), &[("x-d1-bookmark", &bookmark)]).await;
    assert_eq!((again.status, &again.body), (200, &kya.body));
    assert!(header(&again, "x-index-fallback").is_none() && header(&again, "x-d1-bookmark").is_some());
    // Text that is no bookmark is the client's error, said before D1 is asked (which would fail
    // the read, or under `wrangler dev` hand the text back as the answer's bookmark).
    let pass_path = format!("{path}/pass");
    for (path, not_a_bookmark) in [(&path, "a\"b".to_owned()), (&pass_path, "0".repeat(257))] {
        let refused = api.request("GET", path, &fresh_ip(), &[("x-d1-bookmark", &not_a_bookmark)]).await;
        assert_eq!(refused.status, 400, "{path}: {}", refused.text);
        assert_eq!(
            refused.body["error"],
            format!(
                "invalid X-D1-Bookmark header: must be the X-D1-Bookmark of an answer, letters, digits and '-' \
                 up to 256 bytes (got {} bytes)",
                not_a_bookmark.len()
            )
        );
        assert_eq!(header(&refused, "x-d1-bookmark"), None);
    }
    // Revalidated, not cached: the same answer is a 304 for its ETag.
    let etag = header(&kya, "etag").expect("an ETag");
    let again = api
        .request("GET", &format!("/api/v1/kya/{}", root.address()), &fresh_ip(), &[("if-none-match", &etag)])
        .await;
    assert_eq!(again.status, 304);

    let agent = api.get("/api/v1/agent/1").await;
    assert_eq!(agent.status, 200, "{}", agent.text);
    let expected = serde_json::to_value(AgentDetails::of(&record, vec![2], clock)).unwrap();
    assert_eq!(agent.body, expected, "/agent/1 with its child");
    let missing = api.get("/api/v1/agent/3").await;
    assert_eq!((missing.status, missing.body["error"].as_str()), (404, Some("Agent not found: 3")));
    // The lineage: the root and its child as the chain holds them at the index's block.
    let (child_record, _) = chain_record(&chain, 2, block).await;
    let lineage = api.get("/api/v1/agent/1/lineage").await;
    assert_eq!(lineage.status, 200, "{}", lineage.text);
    assert_eq!(
        lineage.body,
        expected_lineage(&record, &child_record),
        "the chain's tree at the index's block"
    );
    assert_eq!(number(&lineage, "x-block-number"), block);
    assert_eq!(header(&lineage, "x-index-lag-blocks").as_deref(), Some("0"));
    assert_eq!(header(&lineage, "x-attestation-grace-period"), None, "a tree states no compliance");
    let missing = api.get("/api/v1/agent/3/lineage").await;
    assert_eq!((missing.status, missing.body["error"].as_str()), (404, Some("Agent not found: 3")));

    let strangers: Vec<Address> = (0..98).map(|_| PrivateKeySigner::random().address()).collect();
    let wallets: Vec<String> =
        [root.address(), child.address()].iter().chain(&strangers).map(|wallet| wallet.to_string()).collect();
    let batch = api.post_json("/api/v1/kya/batch", &fresh_ip(), &json!({ "wallets": wallets })).await;
    assert_eq!(batch.status, 200, "{}", batch.text);
    let results = batch.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 100);
    assert_eq!(batch.body["block"]["number"], block);
    assert_eq!(
        (results[0]["agent"]["agentId"].as_u64(), results[1]["agent"]["agentId"].as_u64()),
        (Some(1), Some(2))
    );
    assert!(results[2..].iter().all(|result| result["isRegistered"] == false && result["agent"].is_null()));

    let pass = api.get(&format!("/api/v1/kya/{}/pass", root.address())).await;
    assert_eq!(pass.status, 200, "{}", pass.text);
    let trust =
        PassTrust { issuer: worker.base.clone(), chain_id: chain.chain_id(), registry: chain.registry() };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = verify_pass(&pass.text, &keys.public(), &trust, now).expect("verifies").claims;
    let header_of_block =
        chain.chain.provider().get_block_by_number(block.into()).await.unwrap().unwrap().header;
    assert_eq!(
        (claims.block.number, claims.block.hash),
        (block, header_of_block.hash),
        "the index's block, as it recorded it"
    );
    assert!(claims.kya.is_compliant);
    // Signed by the runtime's Web Crypto (no warning that it fell back to wasm), with the very
    // signature `kya_core` makes: Ed25519's is deterministic.
    let (signing_input, signature) = pass.text.rsplit_once('.').unwrap();
    assert_eq!(
        signature,
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(keys.signer().sign(signing_input.as_bytes())),
        "the runtime's signature is kya_core's"
    );
    assert!(!worker.output().contains("signed in wasm"), "{}", worker.output());

    // A request the root agent signed, verified: its standing and pass from the index too.
    let verifier = Verifier { base: worker.base.clone(), http: kya_tests::http_client() };
    let (status, verified, headers) =
        verifier.post(&signed(&root, chain.chain_id(), now, 60, "n-1").json()).await;
    assert_eq!((status, &verified["verified"]), (200, &json!(true)), "{verified}");
    assert_eq!(headers["x-block-number"].to_str().unwrap(), block.to_string(), "the index's block");
    assert_eq!(headers["x-index-lag-blocks"].to_str().unwrap(), "0");
    assert!(headers.get("x-index-fallback").is_none() && headers.get("x-d1-bookmark").is_some());
    assert_eq!(verified["kya"], kya.body, "the very /kya answer, at the index's block");
    let carried =
        verify_pass(verified["pass"].as_str().unwrap(), &keys.public(), &trust, now).unwrap().claims;
    assert_eq!((carried.block.number, carried.block.hash), (block, header_of_block.hash));
    assert_eq!(
        proxy.requests(),
        rpc_before,
        "no RPC request for /kya, /agent, a lineage, a batch of 100, a pass and a verified request"
    );

    // An index filled before it kept operational scopes (migration 0012 added them; its state
    // row has no backfill cursor): its point answers read the chain, saying why, until a run
    // reads the scopes again in the room its plan leaves (the sweep is off here).
    worker.execute_index(
        "DELETE FROM agent_scopes; \
         UPDATE state SET value = json_remove(value, '$.scopesFrom') WHERE key = 'index'",
    );
    let old = api.get(&format!("/api/v1/kya/{}", root.address())).await;
    assert_eq!((old.status, &old.body), (200, &kya.body), "the same answer, from the chain");
    let reason = header(&old, "x-index-fallback").expect("says why it read the chain");
    assert_eq!(reason, "an agent's operational scope is not indexed");
    worker.run_index().await;
    let scopes = worker.query_index("SELECT id, scope FROM agent_scopes ORDER BY id");
    assert_eq!(
        scopes,
        vec![
            json!({ "id": 1, "scope": format!("agent {}", root.address()) }),
            json!({ "id": 2, "scope": format!("agent {}", child.address()) }),
        ],
        "both scopes read again"
    );
    let state = worker.query_index("SELECT value FROM state WHERE key = 'index'");
    let state: Value = serde_json::from_str(state[0]["value"].as_str().unwrap()).unwrap();
    assert_eq!(state["scopesFrom"], Value::Null, "done, and said so: {state}");
    let index = health_index(&api).await;
    let message = index["lastRun"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("operational scopes backfilled: every agent's is kept"), "{index}");
    let rpc_before = proxy.requests();
    let back = api.get(&format!("/api/v1/kya/{}", root.address())).await;
    assert_eq!(header(&back, "x-index-fallback"), None, "from the index again");
    assert_eq!(back.body, kya.body);
    assert_eq!(proxy.requests(), rpc_before, "with no RPC");

    // Held back: three blocks mined, one followed a run: the index is 2 blocks behind, within
    // the default; a fourth puts it past. The answers then read the chain and say why.
    for _ in 0..4 {
        let _: Value = chain.chain.provider().raw_request("anvil_mine".into(), ("0x1",)).await.unwrap();
    }
    worker.run_index().await;
    let behind = health_index(&api).await;
    assert_eq!(behind["lagBlocks"], 3, "{behind}");
    let rpc_before = proxy.requests();
    let kya = api.get(&format!("/api/v1/kya/{}", child.address())).await;
    assert_eq!(kya.status, 200, "{}", kya.text);
    let reason = header(&kya, "x-index-fallback").expect("says why it read the chain");
    assert!(
        reason.contains("3 blocks behind") && reason.contains("INDEX_POINT_MAX_LAG_BLOCKS is 2"),
        "{reason}"
    );
    assert!(proxy.requests() > rpc_before, "read from the chain");
    let head = number(&kya, "x-block-number");
    let (record, clock) = chain_record(&chain, 2, head).await;
    assert_eq!(kya.body, serde_json::to_value(KyaResult::of(child.address(), Some(&record), clock)).unwrap());
    let pass = api.get(&format!("/api/v1/kya/{}/pass", child.address())).await;
    assert!(header(&pass, "x-index-fallback").is_some(), "{:?}", pass.headers);
    let batch =
        api.post_json("/api/v1/kya/batch", &fresh_ip(), &json!({ "wallets": [child.address()] })).await;
    assert!(header(&batch, "x-index-fallback").is_some(), "{:?}", batch.headers);
    assert_eq!(batch.body["block"]["number"], head);
    let rpc_before = proxy.requests();
    let (status, verified, headers) =
        verifier.post(&signed(&child, chain.chain_id(), now, 60, "n-2").json()).await;
    assert_eq!((status, &verified["verified"]), (200, &json!(true)), "{verified}");
    let reason = headers["x-index-fallback"].to_str().unwrap();
    assert!(reason.contains("INDEX_POINT_MAX_LAG_BLOCKS is 2"), "{reason}");
    assert!(proxy.requests() > rpc_before, "read from the chain");
    let at: u64 = headers["x-block-number"].to_str().unwrap().parse().unwrap();
    let (record, clock) = chain_record(&chain, 2, at).await;
    let expected = serde_json::to_value(KyaResult::of(child.address(), Some(&record), clock)).unwrap();
    assert_eq!(verified["kya"], expected, "the chain's record at the block it read");
    let carried =
        verify_pass(verified["pass"].as_str().unwrap(), &keys.public(), &trust, now).unwrap().claims;
    assert_eq!(carried.block.number, at);
    let lineage = api.get("/api/v1/agent/1/lineage").await;
    assert!(header(&lineage, "x-index-fallback").is_some(), "{:?}", lineage.headers);
    let at = number(&lineage, "x-block-number");
    let (root_record, _) = chain_record(&chain, 1, at).await;
    let (child_record, _) = chain_record(&chain, 2, at).await;
    assert_eq!(lineage.body, expected_lineage(&root_record, &child_record), "the chain's tree");
}

/// The lineage of a root agent with one child, as `kya_core` builds it from their records.
fn expected_lineage(root: &Agent, child: &Agent) -> Value {
    let node = |agent: &Agent, children: Vec<u64>| NodeData {
        wallet: agent.agent_wallet,
        generation: agent.generation,
        status: agent.status,
        children,
    };
    let nodes = [(root.agent_id, node(root, vec![child.agent_id])), (child.agent_id, node(child, vec![]))];
    serde_json::to_value(lineage::build(root.agent_id, &nodes.into_iter().collect()).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_kya_and_pass_show_a_suspension_within_two_blocks_under_the_pacer() {
    let chain = TestChain::start().await;
    let agent = dev_accounts::agent_wallet(1);
    register(&chain, &agent, 0).await;
    let keys = SigningKeys::new(SigningKey::from_seed(&[0x65; 32]), vec![]);
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.extend([
        ("PASS_SIGNING_KEYS", keys.private_json()),
        // The pacer as deployed.
        ("INDEX_INTERVAL_SECS", "2".to_owned()),
    ]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    worker.run_index().await; // the watchdog sets the pacer's alarm
    let provider = chain.chain.provider();
    // A chain of 2 s blocks, as Base's.
    let miner = {
        let provider = provider.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let _: Result<Value, _> = provider.raw_request("anvil_mine".into(), ("0x1",)).await;
            }
        })
    };
    let path = format!("/api/v1/kya/{}", agent.address());
    until(&api, &path, true).await;

    let receipt = chain
        .chain
        .send(
            chain.deployment.regulator,
            chain.registry(),
            &AgentRegistry::suspendAgentCall { agentId: U256::from(1) },
        )
        .await
        .expect("suspended");
    let suspended_at = receipt.block_number.unwrap();
    let shown = until(&api, &path, false).await;
    let head = provider.get_block_number().await.unwrap();
    miner.abort();
    assert_eq!(shown.body["agent"]["status"], AgentStatus::Suspended.as_str());
    assert!(number(&shown, "x-block-number") >= suspended_at);
    assert!(
        head <= suspended_at + 2,
        "shown when the head was {head}, {} blocks after the suspension's",
        head - suspended_at
    );
    let pass = api.get(&format!("{path}/pass")).await;
    let trust =
        PassTrust { issuer: worker.base.clone(), chain_id: chain.chain_id(), registry: chain.registry() };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = verify_pass(&pass.text, &keys.public(), &trust, now).expect("verifies").claims;
    assert!(!claims.kya.is_compliant, "the pass says so too");
    assert_eq!(claims.kya.status, Some(AgentStatus::Suspended));
}
