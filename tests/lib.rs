#![doc = include_str!("README.md")]

use std::path::{Path, PathBuf};

use alloy::{
    primitives::{Address, U256, keccak256},
    signers::local::PrivateKeySigner,
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::{Anvil, AnvilOptions, Chain, Deployment, consent, deploy};

pub mod delay_proxy;
pub mod edge_fixture;
pub mod http1;
pub mod local_d1;
pub mod op_stack;
pub mod openapi;
pub mod policy_wallet;
pub mod processes;
pub mod provider_shapes;
pub mod relayer_fixture;
pub mod rpc_proxy;
pub mod sse_listener;
pub mod tls_proxy;
pub mod webhook_receiver;
pub mod worker_profile;
pub mod wrangler_host;

/// A fresh anvil with the forwarder and the registry deployed; anvil stops when this drops.
#[derive(Debug)]
pub struct TestChain {
    /// Client for the chain.
    pub chain: Chain,
    /// Addresses of the deployed contracts and their administrators.
    pub deployment: Deployment,
    anvil: Anvil,
}

impl TestChain {
    /// Starts anvil on a free port and deploys the contracts.
    pub async fn start() -> Self {
        Self::start_with(&AnvilOptions::default()).await
    }

    /// [`TestChain::start`] with `options` (their port is best left 0: a free one).
    pub async fn start_with(options: &AnvilOptions) -> Self {
        let anvil = Anvil::start(options).expect("anvil starts");
        let chain = Chain::connect(&anvil.rpc_url()).expect("anvil's URL parses");
        let deployment = deploy::deploy(&chain).await.expect("contracts deploy");
        Self { chain, deployment, anvil }
    }

    /// The registry's address.
    pub fn registry(&self) -> Address {
        self.deployment.registry
    }

    /// The forwarder's address.
    pub fn forwarder(&self) -> Address {
        self.deployment.forwarder
    }

    /// The chain id anvil runs with.
    pub fn chain_id(&self) -> u64 {
        self.anvil.chain_id()
    }

    /// The JSON-RPC endpoint.
    pub fn rpc_url(&self) -> String {
        self.anvil.rpc_url()
    }

    /// The registry's `consentNonce` of `signer`: the nonce its next consent must name.
    pub async fn consent_nonce(&self, signer: Address) -> u64 {
        self.chain
            .view(self.registry(), &AgentRegistry::consentNonceCall(signer))
            .await
            .expect("consentNonce")
            .to()
    }

    /// The registry's events of type `E` in a receipt, in order (other contracts' logs and the
    /// registry's other events skipped).
    pub fn registry_events<E: alloy::sol_types::SolEvent>(
        &self,
        receipt: &alloy::rpc::types::TransactionReceipt,
    ) -> Vec<E> {
        receipt
            .inner
            .logs()
            .iter()
            .filter(|log| log.address() == self.registry())
            .filter_map(|log| E::decode_log_data(log.data()).ok())
            .collect()
    }

    /// The registry's `ConsentUsed` events of a receipt, as (signer, nonce), in order.
    pub fn consents_used(&self, receipt: &alloy::rpc::types::TransactionReceipt) -> Vec<(Address, u64)> {
        let used = self.registry_events::<AgentRegistry::ConsentUsed>(receipt);
        used.into_iter().map(|used| (used.signer, used.nonce.to())).collect()
    }
}

/// Stops `child` with SIGINT, so it can close what it holds (wrangler its runtime, Ponder its
/// database), then SIGKILL after `grace`, and reaps it. A child that already ended is left alone:
/// its pid may belong to another process by now.
pub fn interrupt_then_kill(child: &mut std::process::Child, grace: std::time::Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    if wait_within(child, grace).is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// `child`'s exit status once it ends, or `None` if it is still running after `limit` (left
/// running: the caller kills it or fails).
pub fn wait_within(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let started = std::time::Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if started.elapsed() > limit {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Everything `pipe` gives until its end, read on a thread of its own.
fn read_to_end_apart(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// `command`'s output, as [`std::process::Command::output`], but a command still running after
/// `limit` is killed and the test fails naming it: a tool that hangs (wrangler on a locked file,
/// say) must not hold the test run.
pub fn output_within(
    command: &mut std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{command:?} did not start: {error}"));
    // Both pipes read as they fill: a child blocked on a full pipe would never end.
    let stdout = read_to_end_apart(child.stdout.take());
    let stderr = read_to_end_apart(child.stderr.take());
    let Some(status) = wait_within(&mut child, limit) else {
        let _ = child.kill();
        let _ = child.wait();
        let printed = String::from_utf8_lossy(&stdout.join().unwrap_or_default()).into_owned();
        panic!("{command:?} was still running after {limit:?}:\n{printed}");
    };
    let stdout = stdout.join().expect("stdout's reader");
    let stderr = stderr.join().expect("stderr's reader");
    std::process::Output { status, stdout, stderr }
}

/// `line` without its terminal escapes (the colours wrangler and the daemons print), for a
/// test that reads a log or quotes it in a failure's message.
pub fn without_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence ends at its first letter ("\x1b[41;31m").
            for end in chars.by_ref() {
                if end.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// An HTTP client (HTTPS through rustls with ring, the process's provider installed first:
/// `kya_native_http::install_crypto_provider`).
pub fn http_client() -> reqwest::Client {
    kya_client::install_crypto_provider();
    // Servers under test (wrangler dev among them) close a connection idle for a few seconds; a
    // request sent on it just as it closes fails (`IncompleteMessage`). Pooled connections are
    // dropped before that. A server under test that stops answering fails the test within two
    // minutes, naming the request, instead of holding the test run (a read, not the whole
    // request, is bounded: event streams stay open as long as they deliver).
    reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(1))
        .connect_timeout(std::time::Duration::from_secs(30))
        .read_timeout(std::time::Duration::from_secs(120))
        .build()
        .expect("an HTTP client")
}

/// The Python package `kya` as a wheel lays it out, in `dir`: `kya/*.py`, the stubs, and the
/// extension module the workspace's build wrote beside the running test binary
/// (`target/debug/deps/lib_core.so`) as `kya/_core.abi3.so`. Put `dir` on `PYTHONPATH`.
pub fn lay_out_python_package(dir: &Path) {
    let package = dir.join("kya");
    std::fs::create_dir_all(&package).expect("the package's folder");
    for entry in std::fs::read_dir(repo_root().join("python/kya")).expect("python/kya") {
        let path = entry.expect("an entry").path();
        if path.is_file() {
            std::fs::copy(&path, package.join(path.file_name().expect("a name"))).expect("copied");
        }
    }
    let module = std::env::current_exe().expect("the test binary").with_file_name("lib_core.so");
    assert!(module.exists(), "{} is missing: the workspace's build makes it", module.display());
    std::fs::copy(module, package.join("_core.abi3.so")).expect("the module copied");
}

/// The package as its wheel installs it, in `dir` (`dir/kya`, and its `.dist-info`): the wheel
/// built by maturin from `python/` (the build backend `pip install ./python` uses, here in the
/// `dev` profile, on the workspace's target folder, so only the extension module is compiled),
/// then installed by pip into `dir` from that file alone. Returns the wheel's path.
///
/// maturin builds pyo3 with its own features and environment: the next plain cargo build of the
/// workspace compiles pyo3 again (seconds), so the test command runs this after its last build.
pub fn install_python_wheel(dir: &Path) -> PathBuf {
    let tools = tools_python();
    let maturin = tools.with_file_name("maturin");
    assert!(maturin.exists(), "{} is missing: run scripts/bootstrap.sh", maturin.display());
    let wheels = dir.join("wheel");
    let built = output_within(
        std::process::Command::new(&maturin)
            .args(["build", "--profile", "dev", "--locked", "--out"])
            .arg(&wheels)
            .arg("--interpreter")
            .arg(&tools)
            .current_dir(repo_root().join("python")),
        std::time::Duration::from_secs(600),
    );
    let said = |output: &std::process::Output| {
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    };
    assert!(built.status.success(), "maturin could not build the wheel:\n{}", said(&built));
    let wheel = std::fs::read_dir(&wheels)
        .expect("maturin's output folder")
        .map(|entry| entry.expect("an entry").path())
        .find(|path| path.extension().is_some_and(|extension| extension == "whl"))
        .unwrap_or_else(|| panic!("no wheel in {}:\n{}", wheels.display(), said(&built)));
    let installed = output_within(
        std::process::Command::new(&tools)
            .args(["-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "--quiet", "--target"])
            .arg(dir)
            .arg(&wheel),
        std::time::Duration::from_secs(120),
    );
    assert!(installed.status.success(), "pip could not install {}:\n{}", wheel.display(), said(&installed));
    wheel
}

/// The test tools' Python (`.tools/venv`, made by `scripts/bootstrap.sh`: pytest, httpx,
/// FastAPI, uvicorn, eth-account).
pub fn tools_python() -> PathBuf {
    let python = repo_root().join(".tools/venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/bootstrap.sh", python.display());
    python
}

/// The workspace root (the tests crate is one level below it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The commit a benchmark measured, and which files under `paths` differed from it (its report
/// names both).
pub fn commit_measured(paths: &[&str]) -> String {
    let git = |args: &[&str]| {
        let output =
            std::process::Command::new("git").args(args).current_dir(repo_root()).output().expect("git runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let head = git(&["rev-parse", "HEAD"]);
    let changed = git(&[&["status", "--porcelain", "--"], paths].concat());
    if changed.is_empty() {
        format!("commit `{head}`")
    } else {
        let files: Vec<&str> = changed.lines().filter_map(|line| line.split_whitespace().last()).collect();
        format!("commit `{head}` with uncommitted changes to {}", files.join(", "))
    }
}

/// `/proc/loadavg`'s three load averages (1, 5 and 15 minutes), as `0.52, 0.80, 1.10`: a
/// benchmark's report names them, since the machine's cores are shared.
pub fn load_averages() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(", ")
}

/// Has the Python script `tests/<script>`, run in `.tools/venv` (installed by
/// `scripts/bootstrap.sh`), answer `job`; `what` names it in a failure.
///
/// Each script runs as one process per test process, kept for the jobs that follow: a job is a
/// line of JSON on its standard input, answered by a line on its standard output
/// (`{"answer": …}`, or `{"failure": "<traceback>"}`). A process of its own for each job loaded
/// Python and eth-account again every time, about 0.75 s of CPU, 42 times in a run of the
/// relayer's tests. One job at a time, across the test threads.
pub fn run_python(script: &str, job: &serde_json::Value, what: &str) -> serde_json::Value {
    use std::{collections::BTreeMap, sync::Mutex};

    static SCRIPTS: Mutex<BTreeMap<String, python::Script>> = Mutex::new(BTreeMap::new());
    let mut scripts = SCRIPTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let running = scripts.entry(script.to_owned()).or_insert_with(|| python::Script::start(script));
    match running.ask(job) {
        Ok(answer) => answer,
        Err(failure) => {
            // Started again for the next job: this one's process may be gone.
            scripts.remove(script);
            panic!("{what} failed: {failure}")
        }
    }
}

mod python {
    use std::{
        io::{BufRead, BufReader, Write},
        process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    };

    use serde_json::Value;

    /// A running script of `tests/`, answering a job a line.
    pub(super) struct Script {
        child: Child,
        jobs: ChildStdin,
        answers: BufReader<ChildStdout>,
    }

    impl Script {
        pub(super) fn start(script: &str) -> Self {
            let root = crate::repo_root();
            let python = root.join(".tools/venv/bin/python");
            assert!(python.exists(), "{} is missing: run scripts/bootstrap.sh", python.display());
            let mut child = Command::new(python)
                .arg(root.join("tests").join(script))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("python starts");
            let jobs = child.stdin.take().expect("stdin");
            let answers = BufReader::new(child.stdout.take().expect("stdout"));
            Self { child, jobs, answers }
        }

        pub(super) fn ask(&mut self, job: &Value) -> Result<Value, String> {
            writeln!(self.jobs, "{job}").map_err(|error| format!("sending the job: {error}"))?;
            let mut line = String::new();
            self.answers.read_line(&mut line).map_err(|error| format!("reading its answer: {error}"))?;
            if line.is_empty() {
                return Err(format!("the script ended ({:?}); its errors are above", self.child.try_wait()));
            }
            let mut reply: Value = serde_json::from_str(&line)
                .map_err(|error| format!("JSON from the script: {error}: {line}"))?;
            match reply.get("failure").and_then(Value::as_str) {
                Some(failure) => Err(failure.to_owned()),
                None => Ok(reply["answer"].take()),
            }
        }
    }

    impl Drop for Script {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Set by `scripts/test.sh` while it builds the Worker and the browser package beside the tests
/// that need neither.
pub const WASM_BUILDING: &str = "KYA_WASM_BUILDING";

/// Set by `scripts/test.sh` for the tests of the Worker and the browser package, which it runs
/// once it has built both from this tree: [`ensure_built`] then runs no build script.
pub const WASM_BUILT: &str = "KYA_WASM_BUILT";

/// Makes sure what `scripts/<name>` builds is up to date: runs it ([`run_script`]) unless
/// `scripts/test.sh` has just built it ([`WASM_BUILT`]). A build script with nothing to do still
/// runs three cargo commands, about 0.6 s of CPU each and a wait on cargo's lock beside another
/// test's, and the Worker's tests asked about twenty times a run.
pub fn ensure_built(name: &str) {
    if std::env::var_os(WASM_BUILT).is_none() {
        run_script(name);
    }
}

/// Runs `scripts/<name>` from the workspace root (the build scripts are quick when nothing
/// changed), so `cargo test` alone never runs a stale or missing build.
pub fn run_script(name: &str) {
    // scripts/test.sh runs the tests that need no wasm while these scripts build it; a test that
    // builds it there would race that build, so it says where it belongs instead.
    assert!(
        std::env::var_os(WASM_BUILDING).is_none(),
        "this test runs scripts/{name} while scripts/test.sh builds the wasm beside it: add its name \
         to `needs_wasm` in scripts/test.sh"
    );
    let status = std::process::Command::new("bash")
        .arg(format!("scripts/{name}"))
        .current_dir(repo_root())
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|error| panic!("bash runs scripts/{name}: {error}"));
    assert!(status.success(), "scripts/{name} failed");
}

/// Sends `method path` to `base` (`http://host:port`) on a connection of its own, with
/// `headers` and `Connection: close`, and returns every byte the server sent until it closed:
/// its head and what followed it. An HTTP client would not read a body after an answer to HEAD
/// (it would take it for the next response); here it shows.
pub async fn raw_exchange(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let host = base.strip_prefix("http://").expect("an http:// base");
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("the server accepts");
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("the request is sent");
    let mut received = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(30), stream.read_to_end(&mut received))
        .await
        .expect("the server closes the connection")
        .expect("the answer is read");
    let end = received.windows(4).position(|window| window == b"\r\n\r\n").expect("a complete head") + 4;
    let rest = received.split_off(end);
    (String::from_utf8(received).expect("a text head"), rest)
}

/// A count from the summary of `node --test` (`ℹ pass 5`, `ℹ fail 0`, ...), read from its own
/// line: "pass 5" must not be satisfied by "pass 50".
pub fn node_test_count(report: &str, name: &str) -> Option<usize> {
    report.lines().find_map(|line| {
        let line = line.trim().trim_start_matches('ℹ').trim();
        line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()
    })
}

/// `registerAgent` making `wallet` an agent wallet under `parent` (0: a root) as a
/// self-registration: the caller must be `wallet`, which is also a root's Haftungsperson (a child
/// inherits its parent's). Fixed hashes and a scope that names the wallet.
pub fn register_call(wallet: Address, parent: u64) -> AgentRegistry::registerAgentCall {
    AgentRegistry::registerAgentCall {
        haftungsperson: wallet,
        agentWallet: wallet,
        constitutionHash: keccak256(b"constitution"),
        capabilityHash: keccak256(b"capabilities"),
        operationalScope: format!("agent {wallet}"),
        parentAgentId: U256::from(parent),
        selfModifying: false,
    }
}

/// [`register_call`] sent by `creator` instead of the wallet: `registerAgentWithConsent` with the
/// consents of `wallet` (as agent wallet and, for a root, as Haftungsperson) signed by its key at
/// its current consent nonce.
pub async fn consented_register_call(
    t: &TestChain,
    creator: Address,
    wallet: &PrivateKeySigner,
    parent: u64,
) -> AgentRegistry::registerAgentWithConsentCall {
    consent::consented(
        &t.chain,
        (t.chain_id(), t.registry()),
        register_call(wallet.address(), parent),
        creator,
        &[wallet],
    )
    .await
    .expect("the consent nonces read")
}

#[cfg(test)]
mod tests {
    #[test]
    fn colours_are_taken_out_and_the_text_kept() {
        let line = "\u{1b}[31m✘ \u{1b}[41;31m[\u{1b}[41;97mERROR\u{1b}[41;31m]\u{1b}[0m \u{1b}[1mindex run failed\u{1b}[0m";
        assert_eq!(super::without_colours(line), "✘ [ERROR] index run failed");
        assert_eq!(super::without_colours("plain, with [brackets]"), "plain, with [brackets]");
    }
}
