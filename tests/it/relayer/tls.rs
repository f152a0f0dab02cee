//! The relayer binary behind an `https://` RPC endpoint, as every hosted provider's is (and its
//! default, `https://sepolia.base.org`): a TLS terminator on loopback in front of anvil, its
//! certificate issued by a CA made at test time and given to the binary as `SSL_CERT_FILE`.

use super::{Engine, TestStore};
use std::process::{Command, Stdio};

use kya_tests::{
    TestChain,
    relayer_fixture::{BinaryRelayer, body, forward, set, settings, sign_with_core},
    tls_proxy,
};

use super::{agent_key, agent_of, receipt, register_call};

const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

// Multi-threaded: the terminator must serve while the binary's start blocks this thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relayer_binary_relays_through_an_https_rpc_endpoint() {
    let t = TestChain::start().await;
    let tls = tls_proxy::start(&t.rpc_url()).await;
    let (plain_db, tls_db) = (TestStore::new(Engine::Sqlite), TestStore::new(Engine::Sqlite));
    // One name for both daemons: `/status` names its holder, and the bodies are compared.
    let mut plain_env = settings(&t, &plain_db);
    set(&mut plain_env, "RELAYER_ID", "tls-test");
    let plain = BinaryRelayer::start(BINARY, &plain_env);
    let mut env = settings(&t, &tls_db);
    set(&mut env, "RELAYER_ID", "tls-test");
    set(&mut env, "RPC_URL", tls.url.clone());
    set(&mut env, "SSL_CERT_FILE", tls.ca_file().display().to_string());
    let relayer = BinaryRelayer::start(BINARY, &env);

    // `/status` reads the chain (chain id, balance, contracts): the same body as over plain HTTP.
    let direct = plain.client.get_text("/status").await;
    assert_eq!(direct.0, 200, "{}", direct.1);
    assert_eq!(relayer.client.get_text("/status").await, direct);

    // A registration relayed through it is mined.
    let agent = agent_key(700);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let (status, answer) =
        relayer.client.relay(&body(&request, &sign_with_core(&t, &agent, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert!(receipt(&t, &answer).await.status());
    assert_ne!(agent_of(&t, agent.address()).await, 0);
    let settled = relayer
        .client
        .relay_until(answer["relayId"].as_str().unwrap(), |relay| relay["status"] != "sent")
        .await;
    assert_eq!(settled["status"], "mined", "{settled}");

    let (clean, log) = relayer.terminate();
    assert!(clean, "{log}");
    assert!(log.contains(&format!("https://localhost:{}", tls.port)), "{log}");
    assert!(plain.terminate().0);
}

/// A certificate the roots do not vouch for (another test CA's file as `SSL_CERT_FILE`): start-up
/// gives up with an error naming the cause, not a panic, and shows neither the URL's key (path,
/// query, user info) nor the relayer's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_certificate_is_a_clear_error_without_secrets() {
    let t = TestChain::start().await;
    let (tls, stranger) = (tls_proxy::start(&t.rpc_url()).await, tls_proxy::start(&t.rpc_url()).await);
    let db = TestStore::new(Engine::Sqlite);
    let mut env = settings(&t, &db);
    let rpc_url = format!("{}/v2/PathKeyS3cret?apikey=QueryKeyS3cret", tls.url)
        .replace("://", "://rpcuser:UserKeyS3cret@");
    set(&mut env, "RPC_URL", rpc_url);
    set(&mut env, "SSL_CERT_FILE", stranger.ca_file().display().to_string());
    set(&mut env, "STARTUP_RETRY_SECS", "1");
    let key = env.iter().find(|(name, _)| name == "RELAYER_KEY").map(|(_, key)| key.clone()).unwrap();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(BINARY)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RELAYER_PORT", "0")
            .env("METRICS_PORT", "0")
            .env("NO_COLOR", "1")
            .envs(env)
            .stdin(Stdio::null())
            .output()
            .expect("the relayer binary runs")
    })
    .await
    .unwrap();
    let log =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{log}");
    assert!(
        log.contains("Error: RPC error: ") && log.contains("invalid peer certificate: UnknownIssuer"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    eprintln!("an unverified certificate: {}", log.lines().last().unwrap_or_default());
    for secret in
        ["PathKeyS3cret", "QueryKeyS3cret", "UserKeyS3cret", "rpcuser", key.trim_start_matches("0x")]
    {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}
