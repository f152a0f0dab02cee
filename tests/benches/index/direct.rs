//! Our Worker on a socket of its own (`direct_worker.mjs`): the same runtime `wrangler dev` runs,
//! the same bindings and state directory, but reached as Cloudflare's edge reaches a deployed
//! Worker, with neither wrangler's proxy Worker nor the runtime's entry Worker in front.
//!
//! Each of those two hops is a Worker of its own, in JavaScript, that a cold request also runs
//! for the first time (what they cost a restarted Worker: `docs/bench/index-cold.md`, "Direct to
//! the Worker"). A start here is a fresh runtime, as a restart of `wrangler dev` is; the
//! `wrangler dev` whose state directory it reads may stay up, idle (its index runs only when
//! asked).

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use kya_tests::edge_fixture::{EdgeWorker, answered_by_worker};

/// How long a start may take until the Worker answers `/health` there.
const START_LIMIT: Duration = Duration::from_secs(60);

/// Our Worker on its own socket; stopped (SIGINT, then SIGKILL) when dropped.
pub(crate) struct DirectWorker {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub(crate) base: String,
}

impl DirectWorker {
    /// Starts the Worker `worker` runs, on its state directory and settings, on a socket of its
    /// own; returns once the Worker has answered `/health` there, as a restarted `wrangler dev`
    /// has ([`EdgeWorker::restart`]).
    pub(crate) async fn start(worker: &EdgeWorker) -> Self {
        // Later settings win, as `--var` does.
        let vars: serde_json::Map<String, serde_json::Value> =
            worker.vars().map(|(name, value)| (name.to_owned(), value.to_owned().into())).collect();
        let mut child = Command::new("node")
            .arg("tests/benches/index/direct_worker.mjs")
            .arg(worker.state_dir())
            .arg(serde_json::Value::Object(vars).to_string())
            .current_dir(kya_tests::repo_root())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node starts direct_worker.mjs");
        let stdout = child.stdout.take().expect("its stdout");
        let (sender, receiver) = tokio::sync::oneshot::channel();
        // Read to its end: what the Worker logs comes after the URL, and a pipe closed early
        // would fail those writes.
        std::thread::spawn(move || {
            let mut sender = Some(sender);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("direct ")
                    && let Some(sender) = sender.take()
                {
                    let _ = sender.send(url.to_owned());
                }
            }
        });
        let base =
            tokio::time::timeout(START_LIMIT, receiver).await.ok().and_then(Result::ok).unwrap_or_else(
                || panic!("direct_worker.mjs printed no `direct <url>` (its errors are above)"),
            );
        let direct = Self { child, base };
        direct.answers().await;
        direct
    }

    /// Waits until the Worker answers `/health` ([`answered_by_worker`]).
    async fn answers(&self) {
        let http = kya_tests::http_client();
        let started = Instant::now();
        loop {
            if answered_by_worker(&http, &self.base).await {
                return;
            }
            assert!(
                started.elapsed() < START_LIMIT,
                "the direct Worker did not answer /health at {}",
                self.base
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for DirectWorker {
    fn drop(&mut self) {
        kya_tests::interrupt_then_kill(&mut self.child, Duration::from_secs(10));
    }
}
