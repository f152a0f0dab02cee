//! RPC failures never show the RPC URL: hosted nodes carry their API key in its path or query,
//! and the HTTP client quotes the URL in its errors. Clients get a fixed message, the log gets
//! the detail with the URL redacted. The webhook secret, and a token in the receiver's URL, are
//! never logged either, nor any of several relayer keys.

use super::{Engine, TestStore};
use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use alloy::primitives::{Address, U256, aliases::U48};
use kya_core::registry::forward_request::{self, ForwardRequest};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    relayer_fixture::{BinaryRelayer, body, forward, set, settings, sign_with_core},
    rpc_proxy::{self, RpcAction},
    webhook_receiver::{Receiver, verify},
};
use serde_json::json;

use super::{agent_key, anvil, register_call};

const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

// Multi-threaded: the fake node must answer while the binary's start blocks this thread.
async fn rpc_failures_answer_a_fixed_message_and_the_url_key_reaches_neither_client_nor_log(engine: Engine) {
    // A node that knows its chain id, then closes connections or answers garbage, in turn.
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let node = rpc_proxy::start(
        None,
        Arc::new(move |request: &str| {
            if request.contains("eth_chainId") {
                return RpcAction::Answer("\"0x14a34\"".into());
            }
            if counter.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                RpcAction::Close
            } else {
                RpcAction::Garbage
            }
        }),
    )
    .await;
    let rpc_url = format!(
        "{}/v2/PathKeyS3cret?apikey=QueryKeyS3cret",
        node.replace("://", "://rpcuser:UserKeyS3cret@")
    );
    let (registry, forwarder) = (Address::repeat_byte(0x11), Address::repeat_byte(0x22));
    let db = TestStore::new(engine);
    let (store_name, store_value) = db.setting();
    let settings: Vec<(String, String)> = [
        ("RPC_URL", rpc_url),
        ("REGISTRY_ADDRESS", registry.to_string()),
        ("FORWARDER_ADDRESS", forwarder.to_string()),
        ("RELAYER_KEY", dev_accounts::key_hex(Role::Relayer).to_owned()),
        (store_name, store_value),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    let relayer = BinaryRelayer::start(BINARY, &settings);

    // A well-formed request, correctly signed: it gets as far as the chain.
    let agent = agent_key(400);
    let request = ForwardRequest {
        from: agent.address(),
        to: registry,
        value: U256::ZERO,
        gas: U256::from(500_000),
        nonce: U256::ZERO,
        deadline: U48::ZERO,
        data: alloy::sol_types::SolCall::abi_encode(&register_call(agent.address(), 0)).into(),
    };
    let digest = forward_request::signing_digest(&request, &forward_request::domain(84_532, forwarder));
    let signature = alloy::signers::SignerSync::sign_hash_sync(&agent, &digest).unwrap();
    let expected = json!({ "error": "RPC request failed; try again later", "code": "rpc_failed" });
    let mut answers = String::new();
    for _ in 0..2 {
        let (status, answer) = relayer.client.relay(&body(&request, &signature.as_bytes().into())).await;
        assert_eq!((status, &answer), (500, &expected));
        answers.push_str(&answer.to_string());
        for path in ["/status".to_owned(), format!("/nonce/{}", agent.address())] {
            let (status, text) = relayer.client.get_text(&path).await;
            assert_eq!(
                (status, serde_json::from_str::<serde_json::Value>(&text).unwrap()),
                (500, expected.clone())
            );
            answers.push_str(&text);
        }
    }
    assert!(calls.load(Ordering::SeqCst) >= 4, "both faults were served");
    let (clean, log) = relayer.terminate();
    assert!(clean, "{log}");

    for secret in ["PathKeyS3cret", "QueryKeyS3cret", "UserKeyS3cret", "rpcuser"] {
        assert!(!answers.contains(secret), "{secret} in an answer: {answers}");
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
    // The log still says what went wrong and where, without the secret parts.
    let host = node.trim_start_matches("http://");
    assert!(log.contains(&format!("http://{host}/…")), "{log}");
    assert!(log.contains("RPC error: "), "{log}");
}

/// The webhook secret (raw or `whsec_`) and the receiver URL's token reach neither the log nor
/// an answer of the real binary, while deliveries signed with it go out; the start-up line says
/// only that a secret of so many bytes is set.
async fn the_webhook_secret_and_the_receivers_token_never_reach_the_log_or_an_answer(engine: Engine) {
    let t = kya_tests::TestChain::start().await;
    let receiver = Receiver::start().await;
    for (secret, bytes, hidden) in [
        ("kya-webhook-test-secret-0123456789abcdef", 40, "kya-webhook-test-secret"),
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY=", 32, "MfKQ9r8GKYqrTwjUPD8I"),
    ] {
        let db = TestStore::new(engine);
        let mut env = settings(&t, &db);
        set(&mut env, "WEBHOOK_URL", receiver.url());
        set(&mut env, "WEBHOOK_SECRET", secret);
        let relayer = BinaryRelayer::start(BINARY, &env);
        let agent = agent_key(410 + bytes);
        let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
        let (status, answer) =
            relayer.client.relay(&body(&request, &sign_with_core(&t, &agent, &request).signature)).await;
        assert_eq!(status, 200, "{answer}");
        let id = answer["relayId"].as_str().unwrap().to_owned();
        let relay = relayer.client.relay_until(&id, |relay| relay["status"] == "mined").await;
        let seen = receiver
            .until(std::time::Duration::from_secs(30), |seen| {
                seen.iter()
                    .any(|delivery| delivery.body.contains(&id) && delivery.body.contains("relay.mined"))
            })
            .await;
        let ours: Vec<_> = seen.into_iter().filter(|delivery| delivery.body.contains(&id)).collect();
        assert_eq!(ours.len(), 3, "accepted, sent, mined");
        let checks: Vec<_> = ours.iter().map(|delivery| (delivery.clone(), None)).collect();
        assert!(verify(secret, &checks).iter().all(Result::is_ok), "signed with this secret");
        let (_, metrics) = relayer.client.metrics().await;
        let (clean, log) = relayer.terminate();
        assert!(clean, "{log}");

        assert!(log.contains(&format!("WebhookSecret({bytes} bytes, redacted)")), "{log}");
        let everything = format!("{log}\n{answer}\n{relay}\n{metrics}");
        for secret_part in [hidden, &secret[secret.len() - 12..], "receiver-url-token"] {
            assert!(!everything.contains(secret_part), "{secret_part} leaked:\n{everything}");
        }
        // On PostgreSQL the log names the database by host and port, never its password.
        if let Some(password) = db.password() {
            assert!(!everything.contains(password), "the database password leaked:\n{everything}");
            assert!(log.contains("store=PostgreSQL postgres://127.0.0.1:"), "{log}");
            assert!(log.contains("database_url: Some(DatabaseUrl(postgres://127.0.0.1:"), "{log}");
        }
    }
}

/// Three relayer keys (`RELAYER_KEYS`) in the real binary: relays go out on every one of them,
/// and no key (with or without `0x`, in either case) reaches the log, an answer, `/status` or
/// the metrics, while every key's address does reach the log.
async fn several_relayer_keys_never_reach_the_log_or_an_answer(engine: Engine) {
    let t = kya_tests::TestChain::start().await;
    let keys: Vec<_> = (0..3).map(|n| dev_accounts::agent_wallet(5_100_000 + n)).collect();
    for key in &keys {
        anvil(&t, "anvil_setBalance", json!([key.address(), "0x8ac7230489e80000"])).await;
    }
    let hex_keys: Vec<String> =
        keys.iter().map(|key| alloy::primitives::hex::encode(key.to_bytes())).collect();
    let db = TestStore::new(engine);
    let mut env = settings(&t, &db);
    env.retain(|(name, _)| name != "RELAYER_KEY");
    let listed = hex_keys.iter().map(|key| format!("0x{key}")).collect::<Vec<_>>().join(", ");
    set(&mut env, "RELAYER_KEYS", listed);
    let relayer = BinaryRelayer::start(BINARY, &env);

    // Accepted while mining is paused, the three spread over the three keys.
    anvil(&t, "evm_setAutomine", json!([false])).await;
    let bodies: Vec<_> = (0..3)
        .map(|n| {
            let agent = agent_key(450 + n);
            let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
            body(&request, &sign_with_core(&t, &agent, &request).signature)
        })
        .collect();
    let answers = futures::future::join_all(bodies.iter().map(|signed| relayer.client.relay(signed))).await;
    anvil(&t, "evm_mine", json!([])).await;
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let mut everything = String::new();
    let mut senders = Vec::new();
    for (status, answer) in &answers {
        assert_eq!(*status, 200, "{answer}");
        let id = answer["relayId"].as_str().unwrap();
        let relay = relayer.client.relay_until(id, |relay| relay["status"] == "mined").await;
        let hash = relay["txHash"].as_str().unwrap().parse().unwrap();
        senders.push(t.chain.receipt(hash).await.unwrap().from);
        everything.push_str(&format!("{answer}\n{relay}\n"));
    }
    senders.sort();
    let mut addresses: Vec<Address> = keys.iter().map(|key| key.address()).collect();
    addresses.sort();
    assert_eq!(senders, addresses, "one relay per key");
    let (_, status) = relayer.client.get_text("/status").await;
    let (_, metrics) = relayer.client.metrics().await;
    let (clean, log) = relayer.terminate();
    assert!(clean, "{log}");
    everything.push_str(&format!("{status}\n{metrics}\n{log}"));
    let everything = everything.to_lowercase();
    for (key, address) in hex_keys.iter().zip(&addresses) {
        assert!(!everything.contains(key.as_str()), "a relayer key leaked:\n{everything}");
        // Any 16 hex digits of it would do to narrow a search: none appear either.
        for start in (0..key.len() - 16).step_by(8) {
            assert!(!everything.contains(&key[start..start + 16]), "part of a relayer key leaked");
        }
        assert!(
            log.to_lowercase().contains(&address.to_string().to_lowercase()),
            "{address} named in the log"
        );
    }
}

super::on_both_stores!(
    rpc_failures_answer_a_fixed_message_and_the_url_key_reaches_neither_client_nor_log(
        flavor = "multi_thread",
        worker_threads = 2
    ),
    the_webhook_secret_and_the_receivers_token_never_reach_the_log_or_an_answer,
    several_relayer_keys_never_reach_the_log_or_an_answer,
);
