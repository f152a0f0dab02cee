//! `POST /api/v1/kya/verify` under `wrangler dev` with its real Durable Object nonce store, against
//! a real anvil: requests signed by ERC-8128 (`kya_core::erc8128`, real secp256k1 signatures),
//! checked as a provider would forward them. Exact bodies for the accepted answer and for every
//! refusal the issue names: a tampered method, path, query and body, another authority, an
//! expired signature and one from beyond the skew, a replayed nonce (twice in sequence, and
//! twice at one moment from two connections: exactly one passes), and bodies of the wrong shape.
//! A contract account (ERC-1271) registered as an agent passes while its policy accepts its
//! owner's signatures, and is refused once the policy says no, at the block the answer names.

use alloy::{
    primitives::{Address, U256},
    signers::{SignerSync, local::PrivateKeySigner},
};
use base64::Engine;
use kya_core::{
    chain::abi::AgentRegistry,
    erc8128::{RequestToSign, SignParams, SignedHeaders, SigningKey, sign_request_for_account},
    registry::consent::{AgentWalletConsent, Consent, ConsentSignatures, register_with_consent_call},
};
use kya_devchain::{consent::consent_deadline, dev_accounts};
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars, fresh_ip},
    openapi, policy_wallet, register_call,
};
use serde_json::{Value, json};

const URL: &str = "https://api.provider.example/v1/infer?model=small&stream=0";
const BODY: &[u8] = br#"{"prompt":"hello"}"#;
/// The host the provider serves: `URL`'s.
const AUTHORITY: &str = "api.provider.example";

/// A provider's forwarding of one received request.
pub(super) struct Forwarded {
    method: &'static str,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    authority: Option<&'static str>,
}

impl Forwarded {
    pub(super) fn json(&self) -> Value {
        let headers: serde_json::Map<String, Value> =
            self.headers.iter().map(|(name, value)| (name.clone(), Value::from(value.clone()))).collect();
        let mut body = json!({ "method": self.method, "url": self.url, "headers": headers });
        if let Some(bytes) = &self.body {
            body["body"] = base64::engine::general_purpose::STANDARD.encode(bytes).into();
        }
        if let Some(authority) = self.authority {
            body["authority"] = authority.into();
        }
        body
    }
}

/// `POST <method> URL` with `BODY`, signed by `key` at `created` for `window` seconds with `nonce`.
pub(super) fn signed(
    key: &PrivateKeySigner,
    chain_id: u64,
    created: u64,
    window: u64,
    nonce: &str,
) -> Forwarded {
    signed_for(key.address(), key, chain_id, created, window, nonce)
}

/// [`signed`] under the keyid of `account`, which may be a contract account accepting `key`.
fn signed_for(
    account: Address,
    key: &PrivateKeySigner,
    chain_id: u64,
    created: u64,
    window: u64,
    nonce: &str,
) -> Forwarded {
    let request = RequestToSign {
        method: "POST",
        url: URL,
        headers: &[("content-type", "application/json")],
        body: Some(BODY),
    };
    let params = SignParams {
        chain_id,
        created,
        expires: created + window,
        nonce: Some(nonce),
        extra_components: &[],
    };
    let signing_key = SigningKey::from_bytes(&key.credential().to_bytes()).expect("a key");
    let SignedHeaders { signature_input, signature, content_digest } =
        sign_request_for_account(&request, &params, &signing_key, account).expect("signs");
    let mut headers = vec![
        ("Signature-Input".to_owned(), signature_input),
        ("Signature".to_owned(), signature),
        ("Content-Type".to_owned(), "application/json".to_owned()),
    ];
    headers.extend(content_digest.map(|digest| ("Content-Digest".to_owned(), digest)));
    Forwarded {
        method: "POST",
        url: URL.to_owned(),
        headers,
        body: Some(BODY.to_vec()),
        authority: Some(AUTHORITY),
    }
}

pub(super) struct Verifier {
    pub(super) base: String,
    pub(super) http: reqwest::Client,
}

impl Verifier {
    pub(super) async fn post(&self, body: &Value) -> (u16, Value, reqwest::header::HeaderMap) {
        self.post_text(&body.to_string()).await
    }

    async fn post_text(&self, text: &str) -> (u16, Value, reqwest::header::HeaderMap) {
        let response = self
            .http
            .post(format!("{}/api/v1/kya/verify", self.base))
            .header("cf-connecting-ip", fresh_ip())
            .header("content-type", "application/json")
            .body(text.to_owned())
            .send()
            .await
            .expect("the Worker answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        // Every answer is one the OpenAPI document describes.
        openapi::edge().assert_conforms(openapi::Received {
            method: "POST",
            path: "/api/v1/kya/verify",
            status,
            headers: &headers,
            body: &text,
        });
        let body = serde_json::from_str(&text).expect("a JSON body");
        (status, body, headers)
    }

    /// Asserts a `verified: false` answer with `reason`, and returns its message.
    async fn refused(&self, forwarded: &Forwarded, reason: &str) -> String {
        let (status, body, _) = self.post(&forwarded.json()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["verified"], false, "{reason}: {body}");
        assert_eq!(body["reason"], reason, "{body}");
        assert_eq!(body.as_object().unwrap().len(), 3, "verified, reason, message only: {body}");
        body["message"].as_str().expect("a message").to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_requests_are_verified_with_the_signers_standing_and_each_nonce_once() {
    let t = TestChain::start().await;
    let agent = PrivateKeySigner::random();
    t.chain.impersonate(agent.address()).await.expect("funds the agent");
    t.chain.send(agent.address(), t.registry(), &register_call(agent.address(), 0)).await.expect("registers");
    let proxy = CountingProxy::start(&t.rpc_url()).await;
    let worker = EdgeWorker::start(&chain_vars(&proxy.url, t.registry())).await;
    let verifier = Verifier { base: worker.base.clone(), http: kya_tests::http_client() };
    let chain_id = t.chain_id();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();

    // A valid request from a compliant agent: its signature, then its KYA standing at one block.
    let valid = signed(&agent, chain_id, now, 120, "n-valid");
    let before = proxy.requests();
    let (status, body, headers) = verifier.post(&valid.json()).await;
    // An EOA's verification costs the standing's one round trip, as `/kya/:wallet` does.
    assert_eq!(proxy.requests() - before, 1, "RPC round trips of an EOA's verification");
    assert_eq!(status, 200, "{body}");
    let keyid = format!("erc8128:{chain_id}:{:#x}", agent.address());
    assert_eq!(body["verified"], true, "{body}");
    assert_eq!(body["signer"], agent.address().to_checksum(None));
    assert_eq!(body["keyid"], keyid);
    assert_eq!(body["chainId"], chain_id);
    assert_eq!((body["created"].as_u64(), body["expires"].as_u64()), (Some(now), Some(now + 120)));
    assert_eq!(body["nonce"], "n-valid");
    assert_eq!(body["components"], json!(["@method", "@authority", "@path", "@query", "content-digest"]));
    assert_eq!(body["kya"]["wallet"], agent.address().to_checksum(None));
    assert_eq!(
        (body["kya"]["isRegistered"].as_bool(), body["kya"]["isCompliant"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(body["kya"]["agent"]["agentId"], 1);
    assert_eq!(body["kya"]["agent"]["status"], "Active");
    let block: u64 = headers["x-block-number"].to_str().unwrap().parse().unwrap();
    assert!(block >= 1, "names its block");
    assert_eq!(headers["cache-control"], "no-store");
    assert!(body.get("pass").is_none(), "a deployment without pass keys signs no pass: {body}");

    // The same request again: its nonce is used.
    let message = verifier.refused(&valid, "replayed").await;
    assert!(message.contains("n-valid"), "{message}");

    // Twice at one moment from two connections: exactly one passes.
    let racing = signed(&agent, chain_id, now, 120, "n-race").json();
    let other = Verifier { base: worker.base.clone(), http: kya_tests::http_client() };
    let (first, second) = tokio::join!(verifier.post(&racing), other.post(&racing));
    let outcomes = [first.1, second.1];
    let passed = outcomes.iter().filter(|body| body["verified"] == true).count();
    let replayed = outcomes.iter().filter(|body| body["reason"] == "replayed").count();
    assert_eq!((passed, replayed), (1, 1), "{outcomes:?}");

    // A wallet with no agent: a valid signature, and a standing that says so.
    let stranger = PrivateKeySigner::random();
    let (_, body, _) = verifier.post(&signed(&stranger, chain_id, now, 60, "n-stranger").json()).await;
    assert_eq!(body["verified"], true, "{body}");
    assert_eq!(body["kya"]["isRegistered"], false);
    assert_eq!(body["kya"]["isCompliant"], false);
    assert_eq!(body["kya"]["agent"], Value::Null);

    // Tampered parts: each one changes the signature base (or the body's digest).
    let mut method = signed(&agent, chain_id, now, 60, "n-method");
    method.method = "PUT";
    verifier.refused(&method, "bad_signature").await;
    let mut path = signed(&agent, chain_id, now, 60, "n-path");
    path.url = path.url.replace("/v1/infer", "/v1/admin");
    verifier.refused(&path, "bad_signature").await;
    let mut query = signed(&agent, chain_id, now, 60, "n-query");
    query.url = query.url.replace("model=small", "model=large");
    verifier.refused(&query, "bad_signature").await;
    let mut body_changed = signed(&agent, chain_id, now, 60, "n-body");
    body_changed.body = Some(br#"{"prompt":"rm -rf"}"#.to_vec());
    verifier.refused(&body_changed, "digest_mismatch").await;
    // A refused signature did not use up its nonce: the untampered request still passes.
    let (_, body, _) = verifier.post(&signed(&agent, chain_id, now, 60, "n-method").json()).await;
    assert_eq!(body["verified"], true, "a bad signature must not burn the nonce: {body}");

    // Signed for another host than the one the provider serves.
    let mut elsewhere = signed(&agent, chain_id, now, 60, "n-host");
    elsewhere.authority = Some("api.other.example");
    let message = verifier.refused(&elsewhere, "wrong_authority").await;
    assert!(message.contains("api.other.example"), "{message}");

    // Without the authority the provider serves, or with an empty one: a 400 naming the field
    // (a provider rebuilding the URL from the request's own Host would accept another host's).
    for authority in [None, Some(" ")] {
        let mut unnamed = signed(&agent, chain_id, now, 60, "n-no-authority");
        unnamed.authority = authority;
        let (status, body, _) = verifier.post(&unnamed.json()).await;
        assert_eq!(status, 400, "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.starts_with("authority is required: the host[:port] the provider serves"), "{error}");
    }
    // Nothing was claimed for them: the request with its authority passes.
    let (_, body, _) = verifier.post(&signed(&agent, chain_id, now, 60, "n-no-authority").json()).await;
    assert_eq!(body["verified"], true, "{body}");

    // The node fails while a newcomer's standing is read: a 5xx, and the nonce claimed beside
    // the read is given back, so the provider's retry passes, once.
    let newcomer = PrivateKeySigner::random();
    let retried = signed(&newcomer, chain_id, now, 60, "n-node-down");
    proxy.set_down(true);
    let (status, body, _) = verifier.post(&retried.json()).await;
    proxy.set_down(false);
    assert!((500..600).contains(&status), "{status}: {body}");
    let (status, body, _) = verifier.post(&retried.json()).await;
    assert_eq!((status, &body["verified"]), (200, &json!(true)), "the retry after a failed read: {body}");
    assert_eq!(body["signer"], newcomer.address().to_checksum(None));
    verifier.refused(&retried, "replayed").await;

    // Without PASS_SIGNING_KEYS the pass endpoints say so, and read nothing from the chain.
    let before = proxy.requests();
    let client = worker.client();
    for path in ["/.well-known/jwks.json".to_owned(), format!("/api/v1/kya/{}/pass", agent.address())] {
        let answer = client.get(&path).await;
        assert_eq!(answer.status, 503, "{path}: {}", answer.text);
        assert_eq!(answer.body["error"], "KYA passes are not configured on this deployment", "{path}");
    }
    assert_eq!(proxy.requests(), before, "RPC requests of the pass endpoints without keys");

    // Expired, and from the future beyond the 60 s skew.
    verifier.refused(&signed(&agent, chain_id, now - 400, 200, "n-old"), "expired").await;
    verifier.refused(&signed(&agent, chain_id, now + 600, 60, "n-future"), "not_yet_valid").await;
    verifier.refused(&signed(&agent, chain_id, now, 3_600, "n-long"), "window_too_long").await;
    verifier.refused(&signed(&agent, chain_id + 1, now, 60, "n-chain"), "wrong_chain").await;

    // Bodies that are not the endpoint's shape: 400 with a message, never a 500.
    for (text, expected) in [
        ("not json", "JSON object"),
        (r#"{"method":"GET","url":"https://a/","headers":{"signature":"x"}}"#, "signature-input"),
        (r#"{"method":"GET","headers":{}}"#, "url"),
    ] {
        let (status, body, _) = verifier.post_text(text).await;
        assert_eq!(status, 400, "{text}: {body}");
        assert!(body["error"].as_str().unwrap().contains(expected), "{text}: {body}");
    }
    // A body past 1 MiB that does not declare its length (chunked): refused once the bytes read
    // pass the limit, not after all of it is held.
    let chunks =
        (0..1_100).map(|index| if index == 0 { "{".to_owned() } else { " ".repeat(1_000) }).collect();
    let (status, text) = client.post_chunked("/api/v1/kya/verify", chunks).await;
    assert_eq!(status, 400, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["error"], "the body is more than 1048576 bytes; at most 1048576 are accepted");
    // A contract account: a PolicyWallet registered as an agent's wallet (its ERC-1271 consent
    // signed by its owner's key), whose requests its owner signs.
    let owner = PrivateKeySigner::random();
    let creator = dev_accounts::address(dev_accounts::Role::CreatorA);
    let account = policy_wallet::deploy(&t, owner.address()).await;
    let deadline = U256::from(consent_deadline(&t.chain).await.unwrap());
    let consent = Consent::AgentWallet(AgentWalletConsent {
        agentWallet: account,
        creator,
        parentAgentId: U256::ZERO,
        nonce: U256::ZERO,
        deadline,
    });
    let digest = consent.signing_digest(&kya_core::registry::consent::domain(chain_id, t.registry()));
    let mut registration = register_call(account, 0);
    registration.haftungsperson = creator;
    let signatures = ConsentSignatures {
        deadline,
        wallet_consent: owner.sign_hash_sync(&digest).unwrap().as_bytes().to_vec().into(),
        liability_consent: Default::default(),
    };
    let call = register_with_consent_call(registration, signatures);
    t.chain
        .send(creator, t.registry(), &call)
        .await
        .expect("the contract account registers with its consent");
    let agent_id: u64 =
        t.chain.view(t.registry(), &AgentRegistry::walletToAgentCall(account)).await.unwrap().to();

    let before = proxy.requests();
    let (_, body, headers) =
        verifier.post(&signed_for(account, &owner, chain_id, now, 60, "n-1271").json()).await;
    // The account's ERC-1271 answer comes in the same round trip as its standing.
    assert_eq!(proxy.requests() - before, 1, "RPC round trips of a contract account's verification");
    assert_eq!(body["verified"], true, "the policy accepts: {body}");
    assert_eq!(body["signer"], account.to_checksum(None));
    assert_eq!(body["keyid"], format!("erc8128:{chain_id}:{account:#x}"));
    assert_eq!(body["kya"]["agent"]["agentId"], agent_id);
    assert_eq!(body["kya"]["isCompliant"], true);
    assert!(headers.contains_key("x-block-number"));
    policy_wallet::set_accepting(&t, account, owner.address(), false).await;
    let message = verifier
        .refused(&signed_for(account, &owner, chain_id, now, 60, "n-1271-off"), "bad_signature")
        .await;
    assert!(message.contains("ERC-1271"), "{message}");
    // Refused by the account: its nonce was not used, so the same request passes once it accepts.
    policy_wallet::set_accepting(&t, account, owner.address(), true).await;
    let (_, body, _) =
        verifier.post(&signed_for(account, &owner, chain_id, now, 60, "n-1271-off").json()).await;
    assert_eq!(body["verified"], true, "{body}");

    // Only POST.
    let response = verifier
        .http
        .get(format!("{}/api/v1/kya/verify", worker.base))
        .header("cf-connecting-ip", fresh_ip())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "POST, OPTIONS");
}
