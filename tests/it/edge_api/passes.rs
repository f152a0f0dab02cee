//! KYA passes (INTERFACE.md section 7) under `wrangler dev` against a real anvil: the Worker
//! signs with keys given as its secret, and every pass is checked here the way a provider checks
//! it, offline, with `kya_core::pass` and the JWKS the Worker serves: the claims against the
//! chain (the block's hash and time, the record's fields), the lifetime, refusals by reason, the
//! pass in a verified `POST /api/v1/kya/verify`, and `POST /api/v1/kya/batch` with its RPC cost
//! and its weight against the rate limit.

use std::{
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use alloy::{providers::Provider, signers::local::PrivateKeySigner};
use kya_core::{
    AgentStatus, DEFAULT_GRACE_PERIOD_SECS,
    chain::abi::AgentRegistry,
    pass::{
        Jwks, PassRefusal, PassTrust, SigningKey, SigningKeys,
        verify::{admit_pass, verify_pass},
    },
};
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeClient, EdgeWorker, chain_vars, fresh_ip},
    register_call,
    rpc_proxy::{self, RpcAction},
};
use serde_json::{Value, json};

use super::verify::{Verifier, signed};

/// The Worker's keys: a signing key and a rotation's previous one.
fn keys() -> SigningKeys {
    SigningKeys::new(SigningKey::from_seed(&[0x51; 32]), vec![SigningKey::from_seed(&[0x52; 32])])
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// `POST /api/v1/kya/batch` with `body` as `ip`: status, JSON body, headers; checked against the
/// OpenAPI document.
async fn batch(client: &EdgeClient, ip: &str, body: &Value) -> (u16, Value, reqwest::header::HeaderMap) {
    let answer = client.post_json("/api/v1/kya/batch", ip, body).await;
    (answer.status, answer.body, answer.headers)
}

fn remaining(headers: &reqwest::header::HeaderMap) -> u64 {
    headers["x-ratelimit-remaining"].to_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_state_the_chain_at_their_block_and_verify_offline() {
    let t = TestChain::start().await;
    let agent = PrivateKeySigner::random();
    t.chain.impersonate(agent.address()).await.expect("funds the agent");
    t.chain.send(agent.address(), t.registry(), &register_call(agent.address(), 0)).await.expect("registers");
    let proxy = CountingProxy::start(&t.rpc_url()).await;
    let keys = keys();
    let mut vars = chain_vars(&proxy.url, t.registry());
    vars.push(("PASS_SIGNING_KEYS", keys.private_json()));
    vars.push(("PASS_TTL_SECS", "120".to_owned()));
    let worker = EdgeWorker::start(&vars).await;
    let client = worker.client();
    let chain_id = t.chain_id();

    // The public keys: both, the signer first, nothing private.
    let answer = client.get("/.well-known/jwks.json").await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.header("cache-control"), Some("public, max-age=300"));
    let jwks = Jwks::from_json(&answer.text).expect("a JWKS");
    assert_eq!(jwks, keys.public());
    assert_eq!(answer.body["keys"][0]["kid"], keys.signer().kid());
    assert!(!answer.text.contains("\"d\""), "{}", answer.text);

    // The issuer is the origin the request reached (no PASS_ISSUER here).
    let trust = PassTrust { issuer: worker.base.clone(), chain_id, registry: t.registry() };

    // The agent's pass: its standing read now, at a block whose hash is the chain's.
    let before = proxy.requests();
    let path = format!("/api/v1/kya/{}/pass", agent.address());
    let answer = client.get(&path).await;
    let now = unix_now();
    assert_eq!(answer.status, 200, "{}", answer.text);
    // The standing and the latest header, side by side: one round trip, two requests.
    assert_eq!(proxy.requests() - before, 2, "RPC requests of a pass");
    assert_eq!(answer.header("content-type"), Some("application/jwt"));
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    let block: u64 = answer.header("x-block-number").expect("its block").parse().unwrap();
    let pass = admit_pass(&answer.text, &jwks, &trust, agent.address(), now).expect("admitted");
    assert_eq!(pass.kid, keys.signer().kid());
    let claims = &pass.claims;
    assert_eq!(claims.sub, format!("eip155:{chain_id}:{}", agent.address().to_checksum(None)));
    assert_eq!(
        (claims.chain_id, claims.registry, claims.iss.as_str()),
        (chain_id, t.registry(), worker.base.as_str())
    );
    let header = t.chain.provider().get_block_by_number(block.into()).await.unwrap().expect("the block");
    assert_eq!(claims.block.number, block);
    assert_eq!(claims.block.hash, header.header.hash, "the pass names the chain's block");
    assert_eq!(claims.block.time, header.header.timestamp);
    assert_eq!(answer.header("x-block-timestamp"), Some(header.header.timestamp.to_string().as_str()));
    let record = t
        .chain
        .view(t.registry(), &AgentRegistry::getAgentByWalletCall { wallet: agent.address() })
        .await
        .unwrap();
    let attested: u64 = record.lastAttestation;
    let kya = serde_json::to_value(&claims.kya).unwrap();
    assert_eq!(
        kya,
        json!({
            "isRegistered": true, "isCompliant": true, "agentId": 1, "status": "Active",
            "haftungsperson": record.haftungsperson.to_checksum(None),
            "lastAttestation": attested, "validUntil": attested + DEFAULT_GRACE_PERIOD_SECS,
        })
    );
    assert!(claims.iat.abs_diff(now) <= 5, "issued now: {} vs {now}", claims.iat);
    assert_eq!((claims.nbf, claims.exp), (claims.iat, claims.iat + 120), "PASS_TTL_SECS");

    // Each pass is its own: another `jti`.
    let again = client.get(&path).await;
    let second = verify_pass(&again.text, &jwks, &trust, now).expect("verifies");
    assert_ne!(second.claims.jti, claims.jti);

    // What a provider refuses: another chain, registry or issuer; another signer; an expired
    // pass; a pass signed by a key the JWKS does not hold.
    let refuse = |trust: PassTrust| verify_pass(&answer.text, &jwks, &trust, now).unwrap_err().reason();
    assert_eq!(refuse(PassTrust { chain_id: chain_id + 1, ..trust.clone() }), "wrong_chain");
    assert_eq!(refuse(PassTrust { registry: agent.address(), ..trust.clone() }), "wrong_registry");
    assert_eq!(refuse(PassTrust { issuer: "https://kya.example".into(), ..trust.clone() }), "wrong_issuer");
    let other = PrivateKeySigner::random().address();
    let refused = admit_pass(&answer.text, &jwks, &trust, other, now).unwrap_err();
    assert_eq!(refused, PassRefusal::NotTheSigner { pass: agent.address(), signer: other });
    let late = verify_pass(&answer.text, &jwks, &trust, claims.exp + 60).unwrap_err();
    assert_eq!(late.reason(), "expired");
    let strangers_keys = Jwks::from_json(
        &serde_json::to_string(&SigningKeys::new(SigningKey::from_seed(&[9; 32]), vec![]).public()).unwrap(),
    )
    .unwrap();
    assert_eq!(verify_pass(&answer.text, &strangers_keys, &trust, now).unwrap_err().reason(), "unknown_key");

    // A wallet without an agent gets a pass that says so, which no provider admits.
    let stranger = PrivateKeySigner::random().address();
    let answer = client.get(&format!("/api/v1/kya/{stranger}/pass")).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let stated = verify_pass(&answer.text, &jwks, &trust, now).expect("a true statement verifies");
    assert_eq!(
        (stated.claims.kya.is_registered, stated.claims.kya.agent_id, stated.claims.kya.valid_until),
        (false, None, None)
    );
    assert_eq!(
        admit_pass(&answer.text, &jwks, &trust, stranger, now).unwrap_err(),
        PassRefusal::NotCompliant(stranger)
    );

    // A malformed wallet: `/kya/:wallet`'s 400.
    let bad = client.get("/api/v1/kya/0x12/pass").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body, client.get("/api/v1/kya/0x12").await.body);

    // A verified signed request carries the signer's pass, at the block of its standing.
    let verifier = Verifier { base: worker.base.clone(), http: kya_tests::http_client() };
    let (status, body, headers) = verifier.post(&signed(&agent, chain_id, now, 60, "n-pass").json()).await;
    assert_eq!((status, &body["verified"]), (200, &json!(true)), "{body}");
    let carried = body["pass"].as_str().expect("a pass in the verified answer");
    let carried = admit_pass(carried, &jwks, &trust, agent.address(), now).expect("admitted");
    let verified_at: u64 = headers["x-block-number"].to_str().unwrap().parse().unwrap();
    assert_eq!(carried.claims.block.number, verified_at);
    assert_eq!(carried.claims.kya.status, Some(AgentStatus::Active));

    // A batch: each wallet's result at one block, in order, in one RPC request.
    let mut wallets =
        vec![agent.address().to_checksum(None), stranger.to_string(), format!("{:#x}", agent.address())];
    wallets.extend((0..97).map(|_| PrivateKeySigner::random().address().to_string()));
    let ip = fresh_ip();
    let before = proxy.requests();
    let (status, body, headers) = batch(&client, &ip, &json!({ "wallets": wallets })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(proxy.requests() - before, 1, "RPC requests of a batch of 100");
    assert_eq!(remaining(&headers), 60 - 10, "a batch of 100 counts as 10 requests");
    let results = body["results"].as_array().expect("results");
    assert_eq!(results.len(), 100);
    assert_eq!(body["block"]["number"].to_string(), headers["x-block-number"].to_str().unwrap());
    for (index, result) in results.iter().enumerate() {
        let asked: alloy::primitives::Address = wallets[index].parse().unwrap();
        assert_eq!(result["wallet"], asked.to_checksum(None), "result {index} is wallet {index}'s");
    }
    let single = client.get(&format!("/api/v1/kya/{}", agent.address())).await.body;
    for result in [&results[0], &results[2]] {
        assert_eq!((&result["isCompliant"], &result["agent"]), (&single["isCompliant"], &single["agent"]));
    }
    assert_eq!((&results[1]["isRegistered"], &results[1]["agent"]), (&json!(false), &Value::Null));

    // Its weight: 25 wallets count 3; four more of 100 leave 7; the next 100 is refused.
    let (_, _, headers) = batch(&client, &ip, &json!({ "wallets": &wallets[..25] })).await;
    assert_eq!(remaining(&headers), 47);
    for left in [37, 27, 17, 7] {
        let (status, _, headers) = batch(&client, &ip, &json!({ "wallets": wallets })).await;
        assert_eq!((status, remaining(&headers)), (200, left));
    }
    let (status, body, _) = batch(&client, &ip, &json!({ "wallets": wallets })).await;
    assert_eq!(status, 429, "{body}");

    // A client with nothing left is refused before its body is read: a body that is no batch,
    // and one longer than a batch may be, get the limit's 429, where a client with requests left
    // gets the 400 of reading them. (Under `wrangler dev` the runtime has the whole body before
    // the Worker runs, so the order of the two checks is what shows.)
    let spent = fresh_ip();
    for left in [50, 40, 30, 20, 10, 0] {
        let (status, _, headers) = batch(&client, &spent, &json!({ "wallets": wallets })).await;
        assert_eq!((status, remaining(&headers)), (200, left));
    }
    let garbage = "this is no batch".to_owned();
    let oversize = format!("{{\"wallets\": [\"{stranger}\"]{}}}", " ".repeat(20_000));
    for body in [&garbage, &oversize] {
        let refused = client.post_text("/api/v1/kya/batch", &spent, body.clone()).await;
        assert_eq!(refused.status, 429, "over the limit: {}", refused.text);
        assert!(refused.header("retry-after").is_some(), "{:?}", refused.headers);
        let read = client.post_text("/api/v1/kya/batch", &fresh_ip(), body.clone()).await;
        assert_eq!(read.status, 400, "with requests left, the body is read: {}", read.text);
    }

    // Bodies that are not a batch: 400s that name the fault.
    let mut too_many = wallets.clone();
    too_many.push(stranger.to_string());
    for (body, message) in [
        (json!({ "wallets": too_many }), "wallets holds 101 addresses; a batch holds 1 to 100".to_owned()),
        (json!({ "wallets": [] }), "wallets holds 0 addresses; a batch holds 1 to 100".to_owned()),
        (
            json!({ "wallets": [stranger.to_string(), "0x12"] }),
            "wallets[1]: invalid wallet '0x12': must be 0x followed by 40 hex digits".to_owned(),
        ),
    ] {
        let (status, answer, _) = batch(&client, &fresh_ip(), &body).await;
        assert_eq!((status, answer["error"].as_str()), (400, Some(message.as_str())));
    }
    // A body that does not say its length (chunked) is read as far as the limit, no further:
    // within it a batch like any other, past it refused while it is still arriving.
    let chunked = |text: String| {
        text.into_bytes().chunks(1_000).map(|chunk| String::from_utf8(chunk.to_vec()).unwrap()).collect()
    };
    let small = json!({ "wallets": [agent.address().to_checksum(None), stranger.to_string()] }).to_string();
    let (status, text) = client.post_chunked("/api/v1/kya/batch", chunked(small)).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["results"][0]["wallet"], agent.address().to_checksum(None));
    assert_eq!(answer["results"][1]["isRegistered"], json!(false));
    let padded = format!("{{\"wallets\": [\"{stranger}\"]{}}}", " ".repeat(20_000));
    // Declared, it is refused by its length before a byte is read.
    let length = padded.len();
    let answer = client.post_text("/api/v1/kya/batch", &fresh_ip(), padded.clone()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body["error"], format!("the body is {length} bytes; at most 16384 are accepted"));
    let (status, text) = client.post_chunked("/api/v1/kya/batch", chunked(padded.clone())).await;
    assert_eq!(status, 400, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["error"], "the body is more than 16384 bytes; at most 16384 are accepted");
    // Only POST.
    let answer = client.get("/api/v1/kya/batch").await;
    assert_eq!(answer.status, 405);
    assert_eq!(answer.header("allow"), Some("POST, OPTIONS"));
}

/// The hash a node answered for a header, replaced by one of another block at the same height:
/// what a backend on another fork (or the chain after a same-height reorganisation) answers.
fn header_of_another_fork(answer: &str) -> String {
    let mut answer: Value = serde_json::from_str(answer).expect("JSON");
    let mut replace = |item: &mut Value| {
        if let Some(hash) = item.pointer_mut("/result/hash") {
            *hash = json!(format!("0x{}", "f0".repeat(32)));
        }
    };
    match &mut answer {
        Value::Array(items) => items.iter_mut().for_each(&mut replace),
        item => replace(item),
    }
    answer.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_never_names_the_hash_of_a_block_it_did_not_read() {
    // The latest header comes from another fork than the node's state: same number and time,
    // another hash. A pass read beside that header and matched to it by number and time signed
    // the other fork's hash; read by the header's hash (EIP-1898), the node has no such block,
    // and no pass is signed.
    let t = TestChain::start().await;
    let forked = rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(|body: &str| match body.contains("eth_getBlockByNumber") && body.contains("\"latest\"") {
            true => RpcAction::Rewrite(body.to_owned(), header_of_another_fork),
            false => RpcAction::Forward(body.to_owned()),
        }),
    )
    .await;
    let mut vars = chain_vars(&forked, t.registry());
    vars.push(("PASS_SIGNING_KEYS", keys().private_json()));
    let worker = EdgeWorker::start(&vars).await;
    let wallet = PrivateKeySigner::random().address();
    let answer = worker.client().get(&format!("/api/v1/kya/{wallet}/pass")).await;
    assert!(answer.status >= 500, "a pass was signed: {} {}", answer.status, answer.text);
    assert!(!answer.text.contains("eyJ"), "no JWS in {}", answer.text);
    let error = answer.body["error"].as_str().expect("a JSON error");
    assert!(!error.is_empty(), "{}", answer.text);
}
