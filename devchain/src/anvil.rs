//! A real anvil node as a child process, stopped (by its process id) when the handle drops.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use anyhow::{Context, bail};
use kya_core::registry::forward_request::BASE_SEPOLIA_CHAIN_ID;

/// How to start anvil.
#[derive(Debug, Clone)]
pub struct AnvilOptions {
    /// Port on 127.0.0.1; 0 picks a free one (what tests want).
    pub port: u16,
    /// Chain id; Base Sepolia's by default so signatures match the public network's domain.
    pub chain_id: u64,
    /// Path of the anvil binary; by default the one installed by npm in `node_modules`.
    pub binary: Option<PathBuf>,
    /// Keep the state of only this many recent blocks (`--prune-history`): reads at older
    /// blocks fail. By default anvil keeps a copy of the whole state for each of the last 500
    /// blocks in memory, and older ones on disk: over a registry of 100,000 agents (about
    /// 170 MB of state) that is more memory than the machine has.
    pub states_kept: Option<u32>,
}

impl Default for AnvilOptions {
    fn default() -> Self {
        Self { port: 0, chain_id: BASE_SEPOLIA_CHAIN_ID, binary: None, states_kept: None }
    }
}

/// A running anvil node.
#[derive(Debug)]
pub struct Anvil {
    child: Child,
    port: u16,
    chain_id: u64,
}

impl Anvil {
    /// Starts anvil and waits until it listens.
    pub fn start(options: &AnvilOptions) -> anyhow::Result<Self> {
        let binary = match &options.binary {
            Some(path) => path.clone(),
            None => default_binary()?,
        };
        let mut child = Command::new(&binary)
            .args(["--host", "127.0.0.1", "--port", &options.port.to_string()])
            .args(["--chain-id", &options.chain_id.to_string()])
            .args(options.states_kept.map(|states| format!("--prune-history={states}")))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;

        let stdout = child.stdout.take().context("anvil stdout")?;
        let (listening_tx, listening_rx) = mpsc::channel();
        // Keep draining anvil's output for its whole life so it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut listening_tx = Some(listening_tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = parse_listening_port(&line)
                    && let Some(tx) = listening_tx.take()
                {
                    let _ = tx.send(port);
                }
            }
        });

        match listening_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(port) => Ok(Self { child, port, chain_id: options.chain_id }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("anvil did not report a listening address within 30 s")
            }
        }
    }

    /// The JSON-RPC endpoint.
    pub fn rpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port anvil listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The chain id anvil reports.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The process id, for callers that must signal it themselves.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_listening_port(line: &str) -> Option<u16> {
    let address = line.trim().strip_prefix("Listening on ")?;
    address.rsplit(':').next()?.parse().ok()
}

/// `$ANVIL_BIN`, or the binary npm installed under the workspace's `node_modules`.
fn default_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("ANVIL_BIN") {
        return Ok(PathBuf::from(path));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?;
    let path = workspace.join("node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
    if !path.exists() {
        bail!("{} not found: run scripts/bootstrap.sh (or set ANVIL_BIN)", path.display());
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::parse_listening_port;

    #[test]
    fn reads_the_port_from_anvils_banner() {
        assert_eq!(parse_listening_port("Listening on 127.0.0.1:37821"), Some(37821));
        assert_eq!(parse_listening_port("Chain ID: 84532"), None);
    }
}
