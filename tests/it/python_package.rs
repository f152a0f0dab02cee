//! The Python package `kya` (`python/`): its wheel built by maturin from this tree and installed
//! by pip (as `pip install ./python` does, in the `dev` profile on the workspace's target
//! folder); its pytest suite (`python/tests/`) against that installation, with passes minted here
//! by kya-core and a request signed by the Rust command line (`kya sign`); and its types, `mypy
//! --strict` on the package as installed (its modules and stubs) and on the examples
//! (`python/examples/*.py`). No wasm and no chain, but it runs in the test command's second part,
//! after the run's last cargo build (`kya_tests::install_python_wheel` says why).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use alloy::{primitives::B256, signers::local::PrivateKeySigner};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use kya_core::pass::{PassBlock, PassClaims, SigningKey, SigningKeys, claims::Issue, jws};
use kya_tests::{install_python_wheel, repo_root, tools_python};
use serde_json::{Value, json};

/// The test functions of `python/tests/test_*.py` (one pytest test each: the suite uses no
/// parametrisation), each of which must run and pass: a file pytest did not collect, or a test
/// it skipped, fails the count.
fn test_functions() -> usize {
    let dir = repo_root().join("python/tests");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("test_") && name.ends_with(".py")
        })
        .map(|path| {
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|line| line.starts_with("def test_") || line.starts_with("async def test_"))
                .count()
        })
        .sum()
}

/// The examples, each checked by `mypy --strict` (the stubs with them).
fn examples() -> Vec<PathBuf> {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(repo_root().join("python/examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "py"))
        .collect();
    examples.sort();
    examples
}

/// The modules of the package laid out in `dir` (`kya/*.py`, and `_core.pyi` for the extension
/// module beside it), each a source file of mypy's check of the package.
fn package_modules(dir: &Path) -> usize {
    let mut modules: Vec<String> = std::fs::read_dir(dir.join("kya"))
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let module = name.strip_suffix(".py").or_else(|| name.strip_suffix(".pyi"))?;
            Some(module.to_owned())
        })
        .collect();
    modules.sort();
    modules.dedup();
    modules.len()
}

/// Passes as in core_package.rs's `passes_verify_with_jose_both_ways`, and one for each other
/// refusal of a pass: not compliant, not yet valid, a subject that is no account, another type.
fn fixture() -> Value {
    let signer = SigningKey::from_seed(&[0x81; 32]);
    let previous = SigningKey::from_seed(&[0x82; 32]);
    let keys = SigningKeys::new(signer.clone(), vec![previous.clone()]);
    let agent = PrivateKeySigner::random();
    let stranger = PrivateKeySigner::random();
    let registry = alloy::primitives::address!("0x5fbdb2315678afecb367f032d93f642f64180aa3");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let issue = |at: u64, issuer: &'static str| Issue {
        issuer,
        chain_id: 84_532,
        registry,
        wallet: agent.address(),
        block: PassBlock { number: 42, hash: B256::repeat_byte(7), time: at },
        grace_period: kya_core::DEFAULT_GRACE_PERIOD_SECS,
        now: at,
        ttl_secs: 300,
        jti: format!("jti-{at}"),
    };
    let record = |status| kya_core::Agent {
        agent_id: 3,
        creator: agent.address(),
        haftungsperson: stranger.address(),
        agent_wallet: agent.address(),
        constitution_hash: Default::default(),
        capability_hash: Default::default(),
        operational_scope: "scope".into(),
        parent_agent_id: 0,
        generation: 0,
        self_modifying: false,
        registered_at: now - 100,
        last_attestation: now - 100,
        last_revenue_report: 0,
        status,
    };
    let active = record(kya_core::AgentStatus::Active);
    let issuer = "https://kya.example";
    let claims = PassClaims::new(issue(now, issuer), Some(&active));
    let valid = jws::sign(&claims, &signer);
    let parts: Vec<&str> = valid.split('.').collect();
    let payload = String::from_utf8(URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let edited = URL_SAFE_NO_PAD.encode(payload.replace("\"agentId\":3", "\"agentId\":4"));
    let mut signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    signature[0] ^= 0x80;
    let header = |text: String| URL_SAFE_NO_PAD.encode(text.as_bytes());
    let respelled = header(format!(r#"{{"kid":"{}","typ":"kya-pass+jwt","alg":"EdDSA"}}"#, signer.kid()));
    let as_jwt = header(format!(r#"{{"alg":"EdDSA","typ":"JWT","kid":"{}"}}"#, signer.kid()));
    let suspended = record(kya_core::AgentStatus::Suspended);
    let no_account = PassClaims { sub: "eip155:84532:nobody".into(), ..claims.clone() };
    json!({
        "jwks": keys.public(),
        "issuer": issuer,
        "chainId": 84_532,
        "registry": registry.to_checksum(None),
        "wallet": agent.address().to_checksum(None),
        "walletKey": alloy::primitives::hex::encode_prefixed(agent.credential().to_bytes()),
        "strangerKey": alloy::primitives::hex::encode_prefixed(stranger.credential().to_bytes()),
        "now": now,
        "passes": {
            "valid": valid,
            "previousKey": jws::sign(&claims, &previous),
            "expired": jws::sign(&PassClaims::new(issue(now - 1_000, issuer), Some(&active)), &signer),
            "notYetValid": jws::sign(&PassClaims::new(issue(now + 1_000, issuer), Some(&active)), &signer),
            "notCompliant": jws::sign(&PassClaims::new(issue(now, issuer), Some(&suspended)), &signer),
            "badSubject": jws::sign(&no_account, &signer),
            "tamperedClaims": format!("{}.{edited}.{}", parts[0], parts[2]),
            "tamperedSignature": format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(&signature)),
            "respelledHeader": format!("{respelled}.{}.{}", parts[1], parts[2]),
            "wrongType": format!("{as_jwt}.{}.{}", parts[1], parts[2]),
            "unknownKey": jws::sign(&claims, &SigningKey::from_seed(&[0x83; 32])),
            "otherIssuer": jws::sign(&PassClaims::new(issue(now, "https://other.example"), Some(&active)), &signer),
            "truncated": &valid[..valid.len() - 10],
        },
    })
}

/// The relayer flows' values as `kya` (kya-client) and the relayer make them, for
/// `python/tests/test_relayer.py`: a forward request with its typed data, digest and signature;
/// a registration's consents planned at given nonces and signed; the call data and gas of each
/// write; a registry event's log; and the relayer's refusals in its own words.
fn relayer_fixture(wallet: &PrivateKeySigner, haftungsperson: &PrivateKeySigner) -> Value {
    use alloy::{
        primitives::{Address, U256, address, aliases::U48, hex},
        signers::SignerSync,
        sol_types::SolEvent,
    };
    use kya_client::{ConsentNonces, ConsentPlan, Registration, RevenueReport, Write};
    use kya_core::{chain::abi::AgentRegistry, registry::forward_request};
    use kya_relayer::Error;

    let chain_id = 84_532;
    let registry = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");
    let forwarder = address!("0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512");
    // Anvil's first development key, public test material: the registering sender.
    let creator: PrivateKeySigner =
        "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80".parse().unwrap();
    let signature = |key: &PrivateKeySigner, digest: &B256| {
        hex::encode_prefixed(key.sign_hash_sync(digest).unwrap().as_bytes())
    };

    let attest = Write::Attest { agent_id: 7 };
    let request = forward_request::ForwardRequest {
        from: wallet.address(),
        to: registry,
        value: U256::ZERO,
        gas: U256::from(attest.gas()),
        nonce: U256::from(4),
        deadline: U48::from(1_900_000_000u64),
        data: attest.calldata(),
    };
    let request_digest =
        forward_request::signing_digest(&request, &forward_request::domain(chain_id, forwarder));

    let fields = Registration {
        haftungsperson: haftungsperson.address(),
        agent_wallet: wallet.address(),
        constitution_hash: kya_client::constitution_hash("Be honest."),
        capability_hash: kya_client::capability_hash(&[" summarise", "search", "search"]).unwrap(),
        operational_scope: "summarises papers".into(),
        parent_agent_id: 0,
        self_modifying: false,
        consents: None,
    };
    let nonces = ConsentNonces { wallet: U256::from(3), haftungsperson: U256::from(5) };
    let deadline = U256::from(1_900_000_000u64);
    let mut plan = ConsentPlan::new(&fields, creator.address(), (chain_id, registry), nonces, deadline);
    plan.sign_with(wallet).unwrap();
    plan.sign_with(haftungsperson).unwrap();
    let consent = |planned: &kya_client::PlannedConsent| {
        json!({
            "digest": planned.digest,
            "typedData": planned.typed_data,
            "signature": planned.signature,
        })
    };
    let consented = Write::Register(plan.apply(fields.clone()).unwrap());
    let own = Write::Register(Registration {
        haftungsperson: creator.address(),
        agent_wallet: creator.address(),
        ..fields.clone()
    });
    let report = Write::ReportRevenue(RevenueReport {
        agent_id: 7,
        amount_cents: U256::from(123_456),
        currency: "EUR".into(),
        category: "compute".into(),
        period_start: 1_700_000_000,
        period_end: 1_702_592_000,
    });
    let write = |write: &Write| json!({ "calldata": write.calldata(), "gas": write.gas() });

    let registered = AgentRegistry::AgentRegistered {
        agentId: U256::from(7),
        creator: creator.address(),
        agentWallet: wallet.address(),
        haftungsperson: haftungsperson.address(),
        parentAgentId: U256::ZERO,
        generation: U256::ZERO,
    }
    .encode_log_data();

    let refusals = [
        (400, Error::MissingRequestOrSignature),
        (400, Error::BadRequest("request.from must be a 20-byte hex address".into())),
        (
            400,
            Error::DeadlineTooNear { deadline: 1_000, head: 990, left: 10, margin: 120 }),
        (
            400,
            Error::NotExactCall(kya_core::registry::call::CallDataError::View("getAgent"))),
        (
            400,
            Error::ConsentDeadlineTooNear { deadline: 1_000, head: 990, left: 10, margin: 120 }),
        (
            400,
            Error::ConsentDeadlineTooFar { deadline: 2_000_000, head: 1_000, latest: 605_800 }),
        (401, Error::InvalidSignature),
        (403, Error::WrongTarget),
        (403, Error::ValueTransfer),
        (403, Error::GasAboveCap { requested: "2000000".into(), cap: 1_000_000 }),
        (404, Error::RelayNotFound),
        (429, Error::IpRateLimited(20)),
        (429, Error::SignerRateLimited(10)),
        (429, Error::ReadRateLimited(120)),
        (429, Error::BudgetExhausted),
        (429, Error::BudgetSliceSpent { opens_at: 1_900_000_000, wait_secs: 60 }),
        (429, Error::SignerShareExhausted(5)),
        (429, Error::ClientShareExhausted(10)),
        (500, Error::Reverted("Agent not active".into())),
        (500, Error::Rpc("connection refused".into())),
        (
            500,
            Error::Unconfirmed {
                tx_hash: format!("{:#x}", B256::repeat_byte(1)),
                nonce: 3,
                message: "lost".into(),
            }),
        (500, Error::Store("23505: duplicate key".into())),
        (503, Error::BalanceTooLow),
        (503, Error::NoFreeLane),
        (503, Error::StoreUnavailable("lock timeout".into())),
    ]
    .map(|(status, error)| {
        json!({ "status": status, "message": error.to_string(), "code": error.code(), "body": error.body().to_string() })
    });

    // Addresses as the package writes them (EIP-55); alloy's serde writes lowercase.
    json!({
        "chainId": chain_id,
        "registry": registry.to_checksum(None),
        "forwarder": forwarder.to_checksum(None),
        "creator": creator.address().to_checksum(None),
        "request": {
            "fields": {
                "from": request.from.to_checksum(None),
                "to": request.to.to_checksum(None),
                "value": 0,
                "gas": attest.gas(),
                "nonce": 4,
                "deadline": 1_900_000_000u64,
                "data": request.data,
            },
            "typedData": forward_request::typed_data(&request, chain_id, forwarder),
            "digest": request_digest,
            "signature": signature(wallet, &request_digest),
        },
        "consents": {
            "walletNonce": 3,
            "haftungspersonNonce": 5,
            "deadline": 1_900_000_000u64,
            "constitutionHash": fields.constitution_hash,
            "capabilityHash": fields.capability_hash,
            "agentWallet": consent(plan.agent_wallet.as_ref().unwrap()),
            "liability": consent(plan.liability.as_ref().unwrap()),
        },
        "writes": {
            "registerWithConsent": write(&consented),
            "register": write(&own),
            "attest": write(&attest),
            "reportRevenue": write(&report),
            "terminate": write(&Write::Terminate { agent_id: 7 }),
            "invalidateConsents": write(&Write::InvalidateConsents),
            "invalidateConsentsThrough": write(&Write::InvalidateConsentsThrough { nonce: U256::from(9) }),
        },
        "consentNonceCall": hex::encode_prefixed(
            alloy::sol_types::SolCall::abi_encode(&AgentRegistry::consentNonceCall(Address::repeat_byte(0x11)))
        ),
        "registeredLog": { "topics": registered.topics(), "data": registered.data },
        "refusals": refusals,
    })
}

/// `kya sign --json` of a POST with a JSON body, by `key`: the Rust command line's headers.
fn kya_sign(key: &str, dir: &Path) -> Value {
    let url = "https://api.provider.example/v1/infer?model=small";
    let body = r#"{"prompt":"hi"}"#;
    let output = Command::new(env!("CARGO_BIN_EXE_kya-under-test"))
        .args(["sign", "-X", "POST", "-d", body, "-H", "Content-Type: application/json"])
        .args(["--cover", "content-type", "--chain-id", "84532", "--json", url])
        .current_dir(dir)
        .env("AGENT_PRIVATE_KEY", key)
        .output()
        .expect("kya sign runs");
    assert!(output.status.success(), "kya sign failed: {}", String::from_utf8_lossy(&output.stderr));
    let mut signed: Value = serde_json::from_slice(&output.stdout).expect("kya sign --json prints JSON");
    signed["body"] = json!(body);
    signed
}

fn report(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// pytest's count of `name` (`passed`, `failed`, `skipped`) on its closing line.
fn pytest_count(report: &str, name: &str) -> usize {
    let closing =
        report.lines().rev().find(|line| line.contains(" in ") && line.contains("passed")).unwrap_or("");
    closing
        .split([',', '='])
        .filter_map(|part| part.split(" in ").next()?.trim().strip_suffix(name)?.trim().parse().ok())
        .next()
        .unwrap_or(0)
}

#[test]
fn the_python_package_passes_its_tests_and_type_checks() {
    let python = tools_python();
    let dir = tempfile::tempdir().unwrap();
    let wheel = install_python_wheel(dir.path());
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("kya-0.1.0-cp39-abi3-") && name.ends_with(".whl"),
        "one abi3 wheel for 3.9 on: {name}"
    );
    let installed = dir.path().join("kya");
    for file in ["_core.pyi", "py.typed", "__init__.py"] {
        assert!(installed.join(file).exists(), "the wheel installs kya/{file}");
    }
    let module = std::fs::read_dir(&installed)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned());
    assert!(
        module.into_iter().any(|file| file.starts_with("_core.") && file.ends_with(".so")),
        "the extension module"
    );
    let mut fixture = fixture();
    let wallet_key = fixture["walletKey"].as_str().unwrap().to_owned();
    fixture["cliSigned"] = kya_sign(&wallet_key, dir.path());
    let key = |name: &str| fixture[name].as_str().unwrap().parse::<PrivateKeySigner>().unwrap();
    fixture["relayer"] = relayer_fixture(&key("walletKey"), &key("strangerKey"));
    let fixture_file = dir.path().join("fixture.json");
    std::fs::write(&fixture_file, fixture.to_string()).unwrap();

    // Both at once: mypy (cold, about as long as the tests) and pytest. mypy checks the package
    // as installed (its folder: mypy takes files or `-p kya`, not both), in `dir`, so that the
    // `kya` the examples import is that installation too: stubs beside the module.
    let mypy = Command::new(&python)
        .args(["-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null"])
        .args(examples())
        .arg("kya")
        .current_dir(dir.path())
        .env("MYPYPATH", dir.path())
        .spawn_output();
    let pytest = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=5", "python/tests"])
        .current_dir(repo_root())
        .env("PYTHONPATH", dir.path())
        .env("KYA_PASSES", &fixture_file)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("pytest runs");
    let tests = report(&pytest);
    println!("{tests}");
    assert!(pytest.status.success(), "the Python package's tests failed:\n{tests}");
    assert_eq!(pytest_count(&tests, "passed"), test_functions(), "every test ran:\n{tests}");
    assert_eq!(pytest_count(&tests, "skipped"), 0, "{tests}");

    let mypy = mypy.wait_with_output().expect("mypy runs");
    let types = report(&mypy);
    println!("{types}");
    assert!(mypy.status.success(), "mypy --strict refused the package or the examples:\n{types}");
    let sources = examples().len() + package_modules(dir.path());
    let checked = format!("Success: no issues found in {sources} source files");
    assert!(types.contains(&checked), "{types}");
}

/// Starts a command with its output captured, to be collected with `wait_with_output`.
trait SpawnOutput {
    fn spawn_output(&mut self) -> std::process::Child;
}

impl SpawnOutput for Command {
    fn spawn_output(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("it starts")
    }
}
