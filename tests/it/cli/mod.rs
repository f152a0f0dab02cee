//! The `kya` command line end to end: the real binary against a seeded anvil with the real
//! contracts, the real Worker under `wrangler dev` and the real relayer (in-process). One chain,
//! Worker and relayer serve every check, in an order where none disturbs another (the Worker
//! caches KYA answers for a minute, so each wallet is checked only once its state is final).

mod signed;

use std::process::Output;

use alloy::{
    primitives::{Address, U256, keccak256},
    signers::{SignerSync, local::PrivateKeySigner},
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::{
    dev_accounts::{self, Role},
    seed::{self, DemoData},
};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    relayer_fixture::{self, InProcessRelayer},
    tls_proxy,
};
use serde_json::Value;

/// What one run of `kya` gave.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|error| {
            panic!("--json output is JSON ({error}):\n{}\n{}", self.stdout, self.stderr)
        })
    }
}

struct Setup {
    chain: TestChain,
    demo: DemoData,
    /// Environment of every run: the services, no key.
    env: Vec<(String, String)>,
    /// An empty folder to run in (no `.devchain/env` above it).
    cwd: tempfile::TempDir,
}

impl Setup {
    async fn kya(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Run {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kya-under-test"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .current_dir(self.cwd.path())
            .stdin(std::process::Stdio::null());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        for (name, value) in extra_env {
            command.env(name, value);
        }
        let Output { status, stdout, stderr } = command.output().await.expect("kya runs");
        let run = Run {
            code: status.code().expect("kya exits with a code"),
            stdout: String::from_utf8(stdout).expect("UTF-8 stdout"),
            stderr: String::from_utf8(stderr).expect("UTF-8 stderr"),
        };
        // A run's output is on stdout; stderr carries only errors (the spinner needs a terminal).
        assert!(!run.stdout.contains('\x1b'), "no colour without a terminal: {}", run.stdout);
        run
    }

    async fn ok_json(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Value {
        let run = self.kya(args, extra_env).await;
        assert_eq!(run.code, 0, "kya {args:?}:\n{}\n{}", run.stdout, run.stderr);
        run.json()
    }

    fn wallet(&self, agent_id: u64) -> String {
        self.demo.agent(agent_id).record.agent_wallet.to_checksum(None)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kya_command_line_end_to_end() {
    let chain = TestChain::start().await;
    let demo = seed::seed_demo(&chain.chain, &chain.deployment).await.expect("demo seeds");
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    let pass_keys =
        kya_core::pass::SigningKeys::new(kya_core::pass::SigningKey::from_seed(&[0x71; 32]), Vec::new());
    vars.push(("PASS_SIGNING_KEYS", pass_keys.private_json()));
    let worker = EdgeWorker::start(&vars).await;
    let db = relayer_fixture::TestStore::new(relayer_fixture::Engine::Sqlite);
    let relayer = InProcessRelayer::start(&relayer_fixture::settings(&chain, &db)).await;
    let env = vec![
        ("REGISTRY_CHAIN".to_owned(), "localhost".to_owned()),
        ("KYA_API_URL".to_owned(), worker.base.clone()),
        ("RELAYER_URL".to_owned(), relayer.client.base.clone()),
        ("RPC_URL".to_owned(), chain.rpc_url()),
    ];
    let t = Setup { chain, demo, env, cwd: tempfile::tempdir().expect("a temp dir") };

    provider_checks(&t).await;
    signed::signed_requests(&t).await;
    reads(&t).await;
    bad_input(&t).await;
    agent_cycle(&t).await;
    consented_registrations(&t).await;
    direct_writes(&t).await;
    relayer.stop().await;
}

/// `kya check`: the decision in text and JSON, and the exit codes scripts branch on.
async fn provider_checks(t: &Setup) {
    let compliant = t.demo.roles.compliant;
    let run = t.kya(&["check", &t.wallet(compliant)], &[]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.lines().next(), Some("provision"));
    assert!(run.stdout.contains(&format!("agent        {compliant} (Active)")), "{}", run.stdout);

    let lapsed = t.demo.roles.lapsed;
    let run = t.kya(&["check", &t.wallet(lapsed).to_lowercase(), "--json"], &[]).await;
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["decision"], "renew attestation");
    assert_eq!((json["isRegistered"].as_bool(), json["isCompliant"].as_bool()), (Some(true), Some(false)));
    assert_eq!(json["agent"]["agentId"], lapsed);
    assert_eq!(json["wallet"], t.wallet(lapsed));

    let stranger = dev_accounts::agent_wallet(9_000_001).address().to_checksum(None);
    let run = t.kya(&["check", &stranger], &[]).await;
    assert_eq!(run.code, 4, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.lines().next(), Some("deny or register"));
    assert!(run.stdout.contains("is not registered"));

    // A revoked agent keeps its wallet: registered but not compliant (the spec's exit 3), and
    // the record says Revoked. A terminated agent freed its wallet: not registered (exit 4).
    let revoked = t.demo.roles.revoked;
    let run = t.kya(&["check", &t.wallet(revoked), "--json"], &[]).await;
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!((json["isRegistered"].as_bool(), json["isCompliant"].as_bool()), (Some(true), Some(false)));
    assert_eq!((&json["agent"]["agentId"], &json["agent"]["status"]), (&revoked.into(), &"Revoked".into()));
    let run = t.kya(&["check", &t.wallet(revoked)], &[]).await;
    assert!(run.stdout.contains(&format!("agent        {revoked} (Revoked)")), "{}", run.stdout);
    let terminated = t.demo.roles.terminated;
    let run = t.kya(&["check", &t.wallet(terminated), "--json"], &[]).await;
    assert_eq!(run.code, 4, "{}{}", run.stdout, run.stderr);
    assert_eq!((run.json()["isRegistered"].as_bool(), &run.json()["agent"]), (Some(false), &Value::Null));
}

/// Agent, lineage tree, agent pages, statistics, relayer status.
async fn reads(t: &Setup) {
    let root = t.demo.roles.lineage[0];
    let agent = t.ok_json(&["agent", &root.to_string(), "--json"], &[]).await;
    let seeded = t.demo.agent(root);
    assert_eq!(agent["agent"]["agentId"], root);
    assert_eq!(agent["agent"]["agentWallet"], seeded.record.agent_wallet.to_checksum(None));
    assert_eq!(agent["agent"]["operationalScope"], seeded.record.operational_scope);
    assert_eq!(agent["children"], serde_json::json!(seeded.children));
    assert_eq!(agent["compliance"]["isActive"], true);
    let text = t.kya(&["agent", &root.to_string()], &[]).await;
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.starts_with(&format!("agent {root}\n  status          Active (compliant)")),
        "{}",
        text.stdout
    );

    // Five generations, one child each: a chain of `└── ` four levels deep.
    let tree = t.kya(&["lineage", &root.to_string()], &[]).await;
    assert_eq!(tree.code, 0, "{}", tree.stderr);
    let lines: Vec<&str> = tree.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", tree.stdout);
    for (depth, (line, id)) in lines.iter().zip(&t.demo.roles.lineage).enumerate() {
        let prefix =
            if depth == 0 { String::new() } else { format!("{}└── ", "    ".repeat(depth - 1)) };
        let wallet = t.wallet(*id);
        assert_eq!(*line, format!("{prefix}{id} Active {wallet} gen {depth}"));
    }
    // The hive's 55 children: 50 shown, the cut named.
    let hive = t.kya(&["lineage", &t.demo.roles.hive.to_string()], &[]).await;
    let lines: Vec<&str> = hive.stdout.lines().collect();
    assert_eq!(lines.len(), 1 + 50 + 1, "{}", hive.stdout);
    assert_eq!(lines[51], "└── … 5 more not shown (the API cut this family)");
    let hive_json = t.ok_json(&["lineage", &t.demo.roles.hive.to_string(), "--json"], &[]).await;
    assert_eq!(hive_json["totalChildren"], 55);
    assert_eq!(hive_json["children"].as_array().unwrap().len(), 50);

    // Every agent, through the pages.
    let all = t.ok_json(&["agents", "--all", "--json"], &[]).await;
    let ids: Vec<u64> =
        all["data"].as_array().unwrap().iter().map(|item| item["agentId"].as_u64().unwrap()).collect();
    assert_eq!(ids, (1..=t.demo.agents.len() as u64).collect::<Vec<_>>());
    let suspended = t.ok_json(&["agents", "--all", "--status", "Suspended", "--json"], &[]).await;
    let expected: Vec<u64> = t
        .demo
        .agents
        .iter()
        .filter(|agent| agent.record.status == kya_core::AgentStatus::Suspended)
        .map(|agent| agent.record.agent_id)
        .collect();
    let got: Vec<u64> =
        suspended["data"].as_array().unwrap().iter().map(|item| item["agentId"].as_u64().unwrap()).collect();
    assert_eq!(got, expected);
    let page = t.ok_json(&["agents", "--page", "2", "--limit", "10", "--json"], &[]).await;
    assert_eq!((page["page"].as_u64(), page["total"].as_u64()), (Some(2), Some(t.demo.agents.len() as u64)));
    assert_eq!(page["data"][0]["agentId"], 11);
    let text = t.kya(&["agents", "--limit", "3"], &[]).await;
    assert_eq!(text.stdout.lines().count(), 1 + 3 + 1, "{}", text.stdout);
    assert!(text.stdout.contains("page 1 of 22 (66 agents"), "{}", text.stdout);

    let stats = t.ok_json(&["stats", "--json"], &[]).await;
    assert_eq!(stats["totalAgents"], t.demo.agents.len());
    assert_eq!(stats["registryAddress"], t.chain.registry().to_checksum(None));
    let text = t.kya(&["stats"], &[]).await;
    assert!(text.stdout.starts_with(&format!("{} agents, ", t.demo.agents.len())), "{}", text.stdout);

    let status = t.ok_json(&["relayer", "status", "--json"], &[]).await;
    assert_eq!(status["contracts"]["registry"], t.chain.registry().to_checksum(None));
    assert_eq!(status["contracts"]["forwarder"], t.chain.forwarder().to_checksum(None));
    assert_eq!(status["relayer"], dev_accounts::address(Role::Relayer).to_checksum(None));

    // The same reads through `https://` URLs (a TLS terminator on loopback in front of the Worker
    // and the relayer, its CA given as SSL_CERT_FILE) answer the same.
    let (api, relayer) = (env_of(t, "KYA_API_URL"), env_of(t, "RELAYER_URL"));
    let (api_tls, relayer_tls) = (tls_proxy::start(&api).await, tls_proxy::start(&relayer).await);
    let ca = api_tls.ca_file().display().to_string();
    let https = [("KYA_API_URL", api_tls.url.as_str()), ("SSL_CERT_FILE", ca.as_str())];
    assert_eq!(t.ok_json(&["agent", &root.to_string(), "--json"], &https).await, agent);
    let ca = relayer_tls.ca_file().display().to_string();
    let https = [("RELAYER_URL", relayer_tls.url.as_str()), ("SSL_CERT_FILE", ca.as_str())];
    assert_eq!(t.ok_json(&["relayer", "status", "--json"], &https).await, status);
    // A certificate the roots do not vouch for (the other terminator's CA) is an error that says
    // so, exit 1, no panic, and the URL's path and query (where a key would be) are not shown.
    let secret_url = format!("{}/v1/PathKeyS3cret?key=QueryKeyS3cret", api_tls.url);
    let run =
        t.kya(&["agent", &root.to_string()], &[("KYA_API_URL", &secret_url), ("SSL_CERT_FILE", &ca)]).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("invalid peer certificate: UnknownIssuer"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    for secret in ["PathKeyS3cret", "QueryKeyS3cret"] {
        assert!(!run.stderr.contains(secret) && !run.stdout.contains(secret), "{secret}: {}", run.stderr);
    }
}

/// A setting of every run.
fn env_of(t: &Setup, name: &str) -> String {
    t.env.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone()).expect("a setting")
}

/// Bad input is refused before anything is sent, with a message; exit code 1.
async fn bad_input(t: &Setup) {
    let wallet = t.wallet(t.demo.roles.compliant);
    let mangled = format!(
        "0x{}",
        wallet[2..]
            .chars()
            .map(|c| if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
            .collect::<String>()
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["check".into(), mangled], "EIP-55 checksum is wrong"),
        (vec!["check".into(), "0x1234".into()], "expected 0x and 40 hex digits"),
        (vec!["agent".into(), "0".into()], "must be a positive integer"),
        (vec!["agent".into(), "999".into()], "API answered HTTP 404: Agent not found"),
        (
            vec!["attest".into(), "1".into()],
            "no signing key: set AGENT_PRIVATE_KEY, or pass --key or --keystore",
        ),
        (vec!["agents".into(), "--status".into(), "active".into()], "active"),
        (
            vec!["--chain".into(), "mars".into(), "stats".into()],
            "unknown chain \"mars\": one of base_sepolia, base, localhost",
        ),
    ];
    for (args, message) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = t.kya(&args, &[]).await;
        assert_eq!(run.code, 1, "kya {args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(message), "kya {args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "kya {args:?} printed {}", run.stdout);
    }
    // A key that is no key: refused without being quoted.
    let secret = "0xnot-really-a-key-but-it-must-never-show-0123456789";
    let run = t.kya(&["attest", "1"], &[("AGENT_PRIVATE_KEY", secret)]).await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("is not a valid secp256k1 key"), "{}", run.stderr);
    assert!(!run.stderr.contains("must-never-show"), "{}", run.stderr);
    let key = dev_accounts::key_hex(Role::Outsider);
    let run = t
        .kya(
            &["report-revenue", "1", "--amount", "-5", "--currency", "USD", "--category", "x"],
            &[("AGENT_PRIVATE_KEY", key)],
        )
        .await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("invalid amount \"-5\": must not be negative"), "{}", run.stderr);

    // Strings the registry would refuse as too long (INTERFACE.md section 5), refused here first.
    let long_scope = "s".repeat(1025);
    let long_currency = "C".repeat(17);
    let long_category = "c".repeat(65);
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["register", "--scope", &long_scope, "--constitution-text", "x", "--capabilities", "x"],
            "operational scope is 1025 bytes; the registry stores at most 1024",
        ),
        (
            vec!["report-revenue", "1", "--amount", "1", "--currency", &long_currency, "--category", "x"],
            "currency is 17 bytes; the registry stores at most 16",
        ),
        (
            vec!["report-revenue", "1", "--amount", "1", "--currency", "USD", "--category", &long_category],
            "category is 65 bytes; the registry stores at most 64",
        ),
    ];
    for (args, message) in cases {
        let run = t.kya(&args, &[("AGENT_PRIVATE_KEY", key)]).await;
        assert_eq!(run.code, 1, "kya {}: {}{}", args[0], run.stdout, run.stderr);
        assert!(run.stderr.contains(message), "{}", run.stderr);
    }
}

/// An agent with no ETH: register → attest → report revenue → check → terminate, every write
/// through the relayer.
async fn agent_cycle(t: &Setup) {
    let signer = dev_accounts::agent_wallet(9_000_002);
    let key = format!("0x{}", alloy::hex::encode(signer.to_bytes()));
    let wallet = signer.address();
    let with_key = [("AGENT_PRIVATE_KEY", key.as_str())];
    let new_id = t.demo.agents.len() as u64 + 1;

    let registered = t
        .ok_json(
            &[
                "register",
                "--scope",
                "summarises papers",
                "--constitution-text",
                "Be honest.",
                "--capabilities",
                "summarise, search",
                "--json",
            ],
            &with_key,
        )
        .await;
    assert_eq!(registered["status"], "mined", "{registered}");
    assert_eq!(registered["succeeded"], true);
    assert_eq!(registered["via"], "relayer");
    assert_eq!(registered["result"]["event"], "registered");
    assert_eq!(registered["result"]["agentId"], new_id);
    assert_eq!(registered["result"]["agentWallet"], wallet.to_checksum(None));
    let hash = registered["txHash"].as_str().expect("a txHash").parse().unwrap();
    let receipt = t.chain.chain.receipt(hash).await.expect("mined");
    assert_eq!(registered["blockNumber"], receipt.block_number.unwrap());
    assert_eq!(registered["gasUsed"], receipt.gas_used);
    let record = t
        .chain
        .chain
        .view(t.chain.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(new_id) })
        .await
        .unwrap();
    assert_eq!(record.agentWallet, wallet);
    assert_eq!((record.creator, record.haftungsperson), (wallet, wallet));
    assert_eq!(record.constitutionHash, keccak256("Be honest."));
    assert_eq!(record.capabilityHash, keccak256("search,summarise"));
    assert_eq!(record.operationalScope, "summarises papers");
    assert_eq!(relayer_balance_of(t, wallet).await, U256::ZERO, "the agent paid nothing");
    let relay_id = registered["relayId"].as_str().expect("the relayer names the relay");
    let relay = t.ok_json(&["relay", relay_id, "--json"], &[]).await;
    assert_eq!(
        (relay["status"].as_str(), relay["txHash"].as_str()),
        (Some("mined"), registered["txHash"].as_str())
    );

    let attested = t.kya(&["attest", &new_id.to_string()], &with_key).await;
    assert_eq!(attested.code, 0, "{}{}", attested.stdout, attested.stderr);
    assert!(
        attested.stdout.starts_with(&format!("attested agent {new_id}\n  via        relayer")),
        "{}",
        attested.stdout
    );
    assert!(attested.stdout.contains("  status     mined"), "{}", attested.stdout);
    assert!(
        !attested.stdout.contains(&key[2..]) && !attested.stderr.contains(&key[2..]),
        "the key never shows"
    );

    let reported = t
        .ok_json(
            &[
                "report-revenue",
                &new_id.to_string(),
                "--amount",
                "12.50",
                "--currency",
                "USD",
                "--category",
                "compute",
                "--period-start",
                "2025-01-01T00:00:00Z",
                "--period-end",
                "1738368000",
                "--json",
            ],
            &with_key,
        )
        .await;
    assert_eq!(reported["result"]["event"], "revenueReported", "{reported}");
    assert_eq!(reported["result"]["amount"], "1250");
    let history = t
        .chain
        .chain
        .view(t.chain.registry(), &AgentRegistry::getRevenueHistoryCall { agentId: U256::from(new_id) })
        .await
        .unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].amount, history[0].currency.as_str(), history[0].category.as_str()),
        (U256::from(1250), "USD", "compute")
    );
    assert_eq!((history[0].periodStart, history[0].periodEnd), (1_735_689_600, 1_738_368_000));

    // The provider's view: registered and compliant.
    let check = t.kya(&["check", &wallet.to_checksum(None), "--json"], &[]).await;
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    assert_eq!(check.json()["decision"], "provision");
    assert_eq!(check.json()["agent"]["agentId"], new_id);
    // Without a wallet: the signer's own (the example in `docs/command-line.md`).
    let own = t.kya(&["check"], &with_key).await;
    assert_eq!(own.code, 0, "{}{}", own.stdout, own.stderr);
    assert_eq!(own.stdout.lines().next(), Some("provision"));
    assert!(own.stdout.contains(&format!("agent        {new_id} (Active)")), "{}", own.stdout);

    // A write the registry refuses: the relayer's message, exit code 1, nothing sent.
    let refused = t.kya(&["attest", &t.demo.roles.compliant.to_string()], &with_key).await;
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stderr.contains("Not authorized for this agent"), "{}", refused.stderr);

    // A child: its wallet consents (its key signs here); under someone else's agent refused,
    // under the signer's own registered.
    let child_key = dev_accounts::agent_wallet(9_000_003);
    let child = child_key.address().to_checksum(None);
    let child_key = format!("0x{}", alloy::hex::encode(child_key.to_bytes()));
    let with_keys = [("AGENT_PRIVATE_KEY", key.as_str()), ("AGENT_WALLET_KEY", child_key.as_str())];
    let refused = t.kya(&child_of(&t.demo.roles.compliant.to_string(), &child), &with_keys).await;
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stderr.contains("Not authorized for this agent"), "{}", refused.stderr);
    let registered = t.kya(&child_of(&new_id.to_string(), &child), &with_keys).await;
    assert_eq!(registered.code, 0, "{}{}", registered.stdout, registered.stderr);
    let registered = registered.json();
    assert_eq!(registered["result"]["agentId"], new_id + 1, "{registered}");
    assert_eq!(registered["result"]["agentWallet"], child);
    let record = t
        .chain
        .chain
        .view(t.chain.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(new_id + 1) })
        .await
        .unwrap();
    assert_eq!((record.creator, record.parentAgentId), (wallet, U256::from(new_id)));

    let terminated = t.ok_json(&["terminate", &new_id.to_string(), "--json"], &with_key).await;
    assert_eq!(terminated["result"], serde_json::json!({ "event": "terminated", "agentId": new_id }));
    let record = t
        .chain
        .chain
        .view(t.chain.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(new_id) })
        .await
        .unwrap();
    assert_eq!(record.status, kya_core::AgentStatus::Terminated as u8);
}

/// A test key as `kya` takes it: 0x and 64 hex digits.
fn key_of(signer: &PrivateKeySigner) -> String {
    format!("0x{}", alloy::hex::encode(signer.to_bytes()))
}

/// The registry's agent id of `wallet` (0: none).
async fn agent_of(t: &Setup, wallet: Address) -> u64 {
    let id = t.chain.chain.view(t.chain.registry(), &AgentRegistry::walletToAgentCall(wallet)).await.unwrap();
    id.to()
}

/// `kya register` for a root agent, with `extra` arguments.
fn register_args<'a>(scope: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "register",
        "--scope",
        scope,
        "--constitution-text",
        "Be fair.",
        "--capabilities",
        "search",
        "--json",
    ];
    args.extend_from_slice(extra);
    args
}

/// One key registers an agent for another wallet and names a third person Haftungsperson: without
/// their keys it prints the typed data to sign and sends nothing; with their keys it registers
/// through the relayer; with signatures made elsewhere (here: by alloy, over the printed typed
/// data's digest) it registers as well.
async fn consented_registrations(t: &Setup) {
    let creator = dev_accounts::agent_wallet(9_000_010);
    let wallet = dev_accounts::agent_wallet(9_000_011);
    let person = dev_accounts::agent_wallet(9_000_012);
    let creator_key = key_of(&creator);
    let as_creator = [("AGENT_PRIVATE_KEY", creator_key.as_str())];
    let (wallet_text, person_text) = (wallet.address().to_checksum(None), person.address().to_checksum(None));
    let parties = ["--wallet", wallet_text.as_str(), "--haftungsperson", person_text.as_str()];
    let next_id = || async {
        t.chain.chain.view(t.chain.registry(), &AgentRegistry::nextAgentIdCall {}).await.unwrap()
    };
    let first_free = next_id().await;

    // (a) No keys: the typed data of both consents, exit 5, nothing sent.
    let run = t.kya(&register_args("works for others", &parties), &as_creator).await;
    assert_eq!(run.code, 5, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.is_empty(), "--json: one document on stdout, nothing on stderr: {}", run.stderr);
    let needed = run.json();
    let chain_now = t.chain.chain.latest_timestamp().await.unwrap();
    let deadline = needed["deadline"].as_u64().expect("a deadline");
    assert!((chain_now + 3590..=chain_now + 3600).contains(&deadline), "an hour of chain time: {needed}");
    assert_eq!(needed["sent"], false);
    assert_eq!(needed["creator"], creator.address().to_checksum(None));
    assert_eq!(needed["registry"], t.chain.registry().to_checksum(None));
    let consents = needed["consents"].as_array().expect("the consents");
    assert_eq!(consents.len(), 2, "{needed}");
    let domain = serde_json::json!({
        "name": "AgentRegistry",
        "version": "1",
        "chainId": t.chain.chain_id(),
        "verifyingContract": t.chain.registry().to_checksum(None),
    });
    let wallet_consent = &consents[0];
    assert_eq!(
        (&wallet_consent["consent"], &wallet_consent["signer"], &wallet_consent["flag"]),
        (&"AgentWalletConsent".into(), &wallet_text.clone().into(), &"--wallet-consent".into())
    );
    assert_eq!(wallet_consent["typedData"]["primaryType"], "AgentWalletConsent");
    assert_eq!(wallet_consent["typedData"]["domain"], domain);
    assert_eq!(
        wallet_consent["typedData"]["message"],
        serde_json::json!({
            "agentWallet": wallet_text,
            "creator": creator.address().to_checksum(None),
            "parentAgentId": "0",
            "nonce": "0",
            "deadline": deadline.to_string(),
        })
    );
    let liability = &consents[1];
    assert_eq!(
        (&liability["consent"], &liability["flag"]),
        (&"LiabilityConsent".into(), &"--liability-consent".into())
    );
    assert_eq!(liability["typedData"]["primaryType"], "LiabilityConsent");
    assert_eq!(
        liability["typedData"]["message"],
        serde_json::json!({
            "haftungsperson": person_text,
            "creator": creator.address().to_checksum(None),
            "agentWallet": wallet_text,
            "nonce": "0",
            "deadline": deadline.to_string(),
        })
    );
    // The same as text: what to sign and how to pass it back.
    let text_args: Vec<&str> =
        register_args("works for others", &parties).into_iter().filter(|arg| *arg != "--json").collect();
    let text = t.kya(&text_args, &as_creator).await;
    assert_eq!(text.code, 5, "{}{}", text.stdout, text.stderr);
    assert!(text.stdout.starts_with("register: nothing sent; two consents are missing"), "{}", text.stdout);
    for needle in
        ["--wallet-consent 0x…", "--liability-consent 0x…", "AGENT_WALLET_KEY", "--consent-deadline"]
    {
        assert!(text.stdout.contains(needle), "{needle}: {}", text.stdout);
    }
    assert!(text.stderr.contains("nothing was sent"), "{}", text.stderr);
    assert_eq!(next_id().await, first_free, "no agent was registered");
    assert_eq!(agent_of(t, wallet.address()).await, 0);

    // (b) Both keys given: signed here, relayed; the wallet and Haftungsperson default to the
    // keys' addresses.
    let (wallet_key, person_key) = (key_of(&wallet), key_of(&person));
    let registered = t
        .ok_json(
            &register_args(
                "works for others",
                &["--wallet-key", &wallet_key, "--haftungsperson-key", &person_key],
            ),
            &as_creator,
        )
        .await;
    assert_eq!((registered["via"].as_str(), registered["status"].as_str()), (Some("relayer"), Some("mined")));
    let id = registered["result"]["agentId"].as_u64().expect("an agent id");
    assert_eq!(U256::from(id), first_free);
    // The whole transaction (343k on anvil) stays well inside the registry call's bound alone.
    let bound = 450_000 + 20_000 + 2 * kya_client::GAS_PER_CONSENT;
    assert!(registered["gasUsed"].as_u64().unwrap() < bound * 3 / 5, "{registered}");
    let agent = t.ok_json(&["agent", &id.to_string(), "--json"], &[]).await;
    assert_eq!(agent["agent"]["agentWallet"], wallet_text);
    assert_eq!(agent["agent"]["creator"], creator.address().to_checksum(None));
    assert_eq!(agent["agent"]["haftungsperson"], person_text);
    let check = t.kya(&["check", &wallet_text, "--json"], &[]).await;
    assert_eq!((check.code, &check.json()["agent"]["agentId"]), (0, &id.into()), "{}", check.stdout);
    assert_eq!(relayer_balance_of(t, creator.address()).await, U256::ZERO, "the creator paid nothing");
    for secret in [&wallet_key[2..], &person_key[2..], &creator_key[2..]] {
        assert!(!registered.to_string().contains(secret), "a key never shows");
    }

    // (c) Signatures made elsewhere: the printed typed data's digest signed with alloy. The
    // Haftungsperson's consent nonce moved on with (b).
    let second = dev_accounts::agent_wallet(9_000_013);
    let second_text = second.address().to_checksum(None);
    let parties = ["--wallet", second_text.as_str(), "--haftungsperson", person_text.as_str()];
    let (deadline, consents) = printed_consents(t, "works for others too", &parties, &as_creator).await;
    assert_eq!(consents[1]["typedData"]["message"]["nonce"], "1", "the Haftungsperson consented once");
    let signatures = sign_printed(&consents, [&second, &person]);
    // Swapped, they are not the parties' signatures: refused before sending, with the reason.
    let swapped = with_signatures(&parties, [&signatures[1], &signatures[0]], &deadline);
    let run = t.kya(&register_args("works for others too", &swapped), &as_creator).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!("--wallet-consent is not {second_text}'s signature of this consent")),
        "{}",
        run.stderr
    );
    let given = with_signatures(&parties, [&signatures[0], &signatures[1]], &deadline);
    let registered = t.ok_json(&register_args("works for others too", &given), &as_creator).await;
    assert_eq!(registered["status"], "mined", "{registered}");
    let id = registered["result"]["agentId"].as_u64().expect("an agent id");
    let record = t
        .chain
        .chain
        .view(t.chain.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(id) })
        .await
        .unwrap();
    assert_eq!(
        (record.agentWallet, record.creator, record.haftungsperson),
        (second.address(), creator.address(), person.address())
    );

    // (d) Taking consents back: the Haftungsperson signs a third registration's consent, then
    // thinks better of it. `kya invalidate-consents`, relayed (the key holds no ETH), moves its
    // nonce; the signature is then no consent of anything the registry would accept.
    let third = dev_accounts::agent_wallet(9_000_014);
    let third_text = third.address().to_checksum(None);
    let parties = ["--wallet", third_text.as_str(), "--haftungsperson", person_text.as_str()];
    let (deadline, consents) = printed_consents(t, "works for a third", &parties, &as_creator).await;
    assert_eq!(consents[1]["typedData"]["message"]["nonce"], "2");
    let signatures = sign_printed(&consents, [&third, &person]);
    let as_person = [("AGENT_PRIVATE_KEY", person_key.as_str())];
    let taken_back = t.ok_json(&["invalidate-consents", "--json"], &as_person).await;
    assert_eq!(taken_back["via"], "relayer", "{taken_back}");
    assert_eq!(
        taken_back["result"],
        serde_json::json!({ "event": "consentsInvalidated", "signer": person_text, "nextNonce": 3 })
    );
    let nonce =
        t.chain.chain.view(t.chain.registry(), &AgentRegistry::consentNonceCall(person.address())).await;
    assert_eq!(nonce.unwrap(), U256::from(3));
    assert_eq!(relayer_balance_of(t, person.address()).await, U256::ZERO, "the Haftungsperson paid nothing");
    let text = t.kya(&["invalidate-consents"], &as_person).await;
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    assert!(
        text.stdout.starts_with(&format!(
            "took back every unused consent of {person_text} for a nonce below 4: its consent nonce is now 4"
        )),
        "{}",
        text.stdout
    );
    let given = with_signatures(&parties, [&signatures[0], &signatures[1]], &deadline);
    let run = t.kya(&register_args("works for a third", &given), &as_creator).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!("--liability-consent is not {person_text}'s signature of this consent")),
        "{}",
        run.stderr
    );
    assert_eq!(agent_of(t, third.address()).await, 0, "nothing registered");
    // `--through N` voids every nonce up to N at once, consents signed ahead with them (the
    // nonce becomes N + 1); an N already past is the registry's refusal, and nothing moves.
    let through = t.ok_json(&["invalidate-consents", "--through", "6", "--json"], &as_person).await;
    assert_eq!(
        (&through["via"], &through["result"]),
        (
            &"relayer".into(),
            &serde_json::json!({ "event": "consentsInvalidated", "signer": person_text, "nextNonce": 7 })
        ),
        "{through}"
    );
    let past = t.kya(&["invalidate-consents", "--through", "6"], &as_person).await;
    assert_eq!(past.code, 1, "{}{}", past.stdout, past.stderr);
    assert!(
        format!("{}{}", past.stdout, past.stderr).contains("Consent nonce already past"),
        "{}{}",
        past.stdout,
        past.stderr
    );
    let nonce =
        t.chain.chain.view(t.chain.registry(), &AgentRegistry::consentNonceCall(person.address())).await;
    assert_eq!(nonce.unwrap(), U256::from(7));

    // (e) A deadline past the registry's 7 days: refused before anything is signed or sent.
    let chain_now = t.chain.chain.latest_timestamp().await.unwrap();
    let too_far = (chain_now + 8 * 86_400).to_string();
    let run = t
        .kya(
            &register_args("works for a third", &[&parties[..], &["--consent-deadline", &too_far]].concat()),
            &as_creator,
        )
        .await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("is more than 7 days after the chain's latest block")
            && run.stderr.contains("(Consent deadline too far)"),
        "{}",
        run.stderr
    );
}

/// `kya register` of a root named `scope` for `parties` without their keys: exit 5, nothing sent;
/// the deadline and the consents it printed to be signed.
async fn printed_consents(
    t: &Setup,
    scope: &str,
    parties: &[&str],
    env: &[(&str, &str)],
) -> (String, Vec<Value>) {
    let run = t.kya(&register_args(scope, parties), env).await;
    assert_eq!(run.code, 5, "{}{}", run.stdout, run.stderr);
    let needed = run.json();
    let deadline = needed["deadline"].as_u64().expect("a deadline").to_string();
    (deadline, needed["consents"].as_array().expect("the consents").clone())
}

/// Each consent `kya register` printed, signed by its party's key (`keys`, in the consents'
/// order) over the digest of its typed data, which must be the digest printed beside it.
fn sign_printed(consents: &[Value], keys: [&PrivateKeySigner; 2]) -> Vec<String> {
    consents
        .iter()
        .zip(keys)
        .map(|(consent, key)| {
            let digest = digest_of(&consent["typedData"]);
            assert_eq!(consent["digest"], digest.to_string(), "the printed digest is the typed data's");
            format!("0x{}", alloy::hex::encode(key.sign_hash_sync(&digest).unwrap().as_bytes()))
        })
        .collect()
}

/// `parties` with the wallet's and the liability consent's signatures and the deadline they
/// were made for.
fn with_signatures<'a>(
    parties: &[&'a str],
    [wallet, liability]: [&'a str; 2],
    deadline: &'a str,
) -> Vec<&'a str> {
    let consents =
        ["--wallet-consent", wallet, "--liability-consent", liability, "--consent-deadline", deadline];
    [parties, &consents[..]].concat()
}

/// The EIP-712 digest of a consent's typed data as `kya` prints it, recomputed from its domain
/// and message (the signer's side of `eth_signTypedData_v4`).
fn digest_of(typed: &Value) -> alloy::primitives::B256 {
    use kya_core::registry::consent::{self, AgentWalletConsent, Consent, LiabilityConsent};
    let (domain, message) = (&typed["domain"], &typed["message"]);
    let field = |name: &str| message[name].as_str().unwrap_or_else(|| panic!("message.{name}")).to_owned();
    let address = |name: &str| field(name).parse::<Address>().unwrap();
    let number = |name: &str| field(name).parse::<U256>().unwrap();
    let consent = match typed["primaryType"].as_str() {
        Some("AgentWalletConsent") => Consent::AgentWallet(AgentWalletConsent {
            agentWallet: address("agentWallet"),
            creator: address("creator"),
            parentAgentId: number("parentAgentId"),
            nonce: number("nonce"),
            deadline: number("deadline"),
        }),
        Some("LiabilityConsent") => Consent::Liability(LiabilityConsent {
            haftungsperson: address("haftungsperson"),
            creator: address("creator"),
            agentWallet: address("agentWallet"),
            nonce: number("nonce"),
            deadline: number("deadline"),
        }),
        other => panic!("a consent's primaryType, not {other:?}"),
    };
    assert_eq!((domain["name"].as_str(), domain["version"].as_str()), (Some("AgentRegistry"), Some("1")));
    let chain_id = domain["chainId"].as_u64().expect("domain.chainId");
    let registry = domain["verifyingContract"].as_str().unwrap().parse().unwrap();
    consent.signing_digest(&consent::domain(chain_id, registry))
}

/// `kya register` arguments for a child of `parent` with `wallet`.
fn child_of<'a>(parent: &'a str, wallet: &'a str) -> [&'a str; 12] {
    [
        "register",
        "--parent",
        parent,
        "--wallet",
        wallet,
        "--scope",
        "a helper",
        "--constitution-text",
        "Be kind.",
        "--capabilities",
        "search",
        "--json",
    ]
}

/// `--direct`: the signer pays its own gas; the registry's address from the environment.
async fn direct_writes(t: &Setup) {
    let key = dev_accounts::key_hex(Role::Outsider);
    let payer = dev_accounts::address(Role::Outsider);
    let registry = t.chain.registry().to_checksum(None);
    let env = [("AGENT_PRIVATE_KEY", key), ("REGISTRY_ADDRESS", registry.as_str())];
    let before = relayer_balance_of(t, payer).await;
    let hash = format!("{:#x}", keccak256("constitution v1"));
    let registered = t
        .ok_json(
            &[
                "register",
                "--direct",
                "--scope",
                "pays its own way",
                "--constitution-hash",
                &hash,
                "--capabilities",
                "trade",
                "--json",
            ],
            &env,
        )
        .await;
    assert_eq!((registered["via"].as_str(), registered["status"].as_str()), (Some("direct"), Some("mined")));
    let new_id = registered["result"]["agentId"].as_u64().expect("an agent id");
    let record = t
        .chain
        .chain
        .view(t.chain.registry(), &AgentRegistry::getAgentCall { agentId: U256::from(new_id) })
        .await
        .unwrap();
    assert_eq!((record.agentWallet, record.constitutionHash), (payer, keccak256("constitution v1")));
    let spent = before - relayer_balance_of(t, payer).await;
    assert_eq!(
        spent.to_string(),
        registered["costWei"].as_str().unwrap(),
        "the signer paid the receipt's cost"
    );

    // A direct write the registry would refuse is simulated first: its reason, nothing sent.
    let refused = t.kya(&["attest", "--direct", &t.demo.roles.compliant.to_string()], &env).await;
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("the registry refused the call: Not authorized for this agent"),
        "{}",
        refused.stderr
    );
    assert_eq!(relayer_balance_of(t, payer).await, before - spent, "a refused call costs nothing");
}

async fn relayer_balance_of(t: &Setup, account: Address) -> U256 {
    use alloy::providers::Provider;
    t.chain.chain.provider().get_balance(account).await.expect("a balance")
}
