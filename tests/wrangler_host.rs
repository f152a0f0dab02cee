//! The test process's Workers, run by one Node process with wrangler loaded once
//! (`tests/js/wrangler-host.mjs`): each Worker a dev server as `wrangler dev` makes it, with its
//! own ports, state folder and log, for a fraction of the CPU a `wrangler dev` of its own takes.
//!
//! The host starts with the first Worker a test process asks for and lives as long as that
//! process: when it ends, the host's stdin closes, and the host stops every Worker left and
//! exits. Its own words (a line no Worker logged) go to the test process's stderr.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    path::PathBuf,
    process::{Child, ChildStdin, Stdio},
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::Duration,
};

use serde_json::{Value, json};

/// How the host marks the lines of stdout that answer a command (any other line is not one).
const ANSWER: &str = "\u{1}wrangler-host ";

/// What a Worker needs from the host to start.
#[derive(Debug, Clone)]
pub struct StartRequest<'a> {
    pub port: u16,
    /// Wrangler's DevTools inspector, for a profiler; `None` starts the Worker without one.
    pub inspector_port: Option<u16>,
    /// Wrangler's `--persist-to`.
    pub persist: PathBuf,
    /// The file every line wrangler logs for this Worker goes to (rewritten).
    pub log: PathBuf,
    /// `--var`s, in order (a later one wins).
    pub vars: &'a [(&'a str, &'a str)],
    /// `--test-scheduled`: `/__scheduled` runs the scheduled handler.
    pub test_scheduled: bool,
}

/// A start the host is working on: [`Pending::outcome`] says how it ended, once it has.
#[derive(Debug)]
pub struct Pending(mpsc::Receiver<Value>);

impl Pending {
    /// `None` while the start runs; then `Ok(())`, or the host's words on why it failed (the
    /// host gone counts as a failure).
    pub fn outcome(&self) -> Option<Result<(), String>> {
        match self.0.try_recv() {
            Ok(answer) if answer["ok"] == true => Some(Ok(())),
            Ok(answer) => Some(Err(answer["error"].as_str().unwrap_or("no reason given").to_owned())),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => Some(Err(HOST_GONE.to_owned())),
        }
    }
}

/// The commands sent and not answered yet, by id.
type Waiting = Arc<Mutex<HashMap<u64, mpsc::Sender<Value>>>>;

const HOST_GONE: &str = "the wrangler host exited (its words are in the test's stderr)";

/// The one Node process of this test process that runs its Workers.
pub struct WranglerHost {
    stdin: Mutex<ChildStdin>,
    waiting: Waiting,
    next_id: AtomicU64,
    next_worker: AtomicU64,
    _child: Child,
}

impl WranglerHost {
    /// This process's host, started on first use.
    pub fn get() -> &'static Self {
        static HOST: OnceLock<WranglerHost> = OnceLock::new();
        HOST.get_or_init(Self::spawn)
    }

    fn spawn() -> Self {
        let root = crate::repo_root();
        let mut command = crate::edge_fixture::node_for_wrangler(&root);
        command
            .arg(root.join("tests/js/wrangler-host.mjs"))
            // One debug log for all the Workers, removed by the host when it ends.
            .env(
                "WRANGLER_LOG_PATH",
                std::env::temp_dir().join(format!("kya-wrangler-host-{}.log", std::process::id())),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().expect("node starts the wrangler host (run scripts/bootstrap.sh)");
        let stdin = child.stdin.take().expect("the host's stdin");
        let stdout = child.stdout.take().expect("the host's stdout");
        let waiting = Waiting::default();
        let answered = waiting.clone();
        std::thread::Builder::new()
            .name("wrangler-host".into())
            .spawn(move || read_answers(BufReader::new(stdout), &answered))
            .expect("a thread reading the wrangler host");
        Self {
            stdin: Mutex::new(stdin),
            waiting,
            next_id: AtomicU64::new(1),
            next_worker: AtomicU64::new(1),
            _child: child,
        }
    }

    /// Sends `command` with a new id; the answer comes on the receiver.
    fn send(&self, mut command: Value) -> mpsc::Receiver<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        command["id"] = id.into();
        let (sender, receiver) = mpsc::channel();
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(id, sender);
        let mut stdin = self.stdin.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // A host gone shows as a disconnected receiver (the reader clears the waiting list).
        let _ = writeln!(stdin, "{command}").and_then(|()| stdin.flush());
        receiver
    }

    /// A name no other Worker of this process has.
    pub fn new_worker_name(&self) -> String {
        format!("worker-{}", self.next_worker.fetch_add(1, Ordering::Relaxed))
    }

    /// Starts `worker` (a name from [`WranglerHost::new_worker_name`]).
    pub fn start(&self, worker: &str, request: &StartRequest<'_>) -> Pending {
        let vars: serde_json::Map<String, Value> =
            request.vars.iter().map(|(name, value)| ((*name).to_owned(), (*value).into())).collect();
        Pending(self.send(json!({
            "op": "start",
            "worker": worker,
            "port": request.port,
            "inspectorPort": request.inspector_port,
            "persist": request.persist,
            "log": request.log,
            "vars": vars,
            "testScheduled": request.test_scheduled,
        })))
    }

    /// The pids of `worker`'s runtimes (`workerd`: wrangler's proxy Worker's and its own).
    pub fn runtimes(&self, worker: &str) -> Vec<u32> {
        let answer = self
            .send(json!({ "op": "runtimes", "worker": worker }))
            .recv_timeout(COMMAND_LIMIT)
            .unwrap_or_else(|error| panic!("the wrangler host's runtimes of {worker}: {error}"));
        answer["runtimes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .map(|pid| pid as u32)
            .collect()
    }

    /// Stops `worker` and waits until its runtimes have exited (its state folder is then free
    /// to read and write). A host gone has stopped it already.
    pub fn stop(&self, worker: &str) {
        match self.send(json!({ "op": "stop", "worker": worker })).recv_timeout(COMMAND_LIMIT) {
            Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                eprintln!("the wrangler host did not stop {worker} within {COMMAND_LIMIT:?}");
            }
        }
    }
}

/// Hands each answer to the command that waits for it; when the host's stdout ends, every
/// command still waiting learns the host is gone (its sender dropped).
fn read_answers(stdout: impl BufRead, waiting: &Waiting) {
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let Some(answer) = line.strip_prefix(ANSWER) else {
            eprintln!("wrangler host: {line}");
            continue;
        };
        let answer: Value = serde_json::from_str(answer).expect("the host answers in JSON");
        let id = answer["id"].as_u64().expect("an answer's id");
        let sender = waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&id);
        if let Some(sender) = sender {
            let _ = sender.send(answer);
        }
    }
    waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
}

impl std::fmt::Debug for WranglerHost {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("WranglerHost").finish_non_exhaustive()
    }
}

/// How long a `runtimes` or `stop` command may take: a stop is a second or two.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
