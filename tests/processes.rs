//! The processes of a Worker under `wrangler dev`, read from `/proc`: the workerd that runs the
//! Worker (its Durable Objects included), for the benchmarks' CPU figures and the tests' memory
//! figures.
//!
//! `wrangler dev` runs two workerd processes: its own proxy, which owns the public port, and the
//! runtime of the Worker, whose entry socket is on a port the system chose
//! ([`crate::edge_fixture::EdgeWorker::runtimes`] gives both).

use std::{collections::HashMap, process::Command, time::Duration};

/// Every process descended from `pid` (`/proc/*/stat`'s parent ids).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // The command name may hold spaces and parentheses: the parent id is the second field
        // after its last ')'.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if let Some(parent) = parent.and_then(|parent| parent.parse::<u32>().ok()) {
            children.entry(parent).or_default().push(child);
        }
    }
    let (mut found, mut queue) = (Vec::new(), vec![pid]);
    while let Some(next) = queue.pop() {
        for &child in children.get(&next).map_or(&[][..], Vec::as_slice) {
            found.push(child);
            queue.push(child);
        }
    }
    found
}

/// Which of a Worker's `runtimes` runs the Worker itself (not wrangler's proxy).
///
/// Both are `workerd serve` with an entry socket: wrangler's proxy binds the public port
/// (`--socket-addr=entry=127.0.0.1:<port>`), the Worker's runtime asks for port 0, a port the
/// system chooses. (Only the Worker's has `--inspector-addr`, but only when wrangler opens an
/// inspector, which the tests' Workers do not: `crate::edge_fixture::open_inspectors`.)
pub fn worker_runtime(runtimes: &[u32]) -> Option<u32> {
    runtimes.iter().copied().find(|&runtime| {
        let cmdline = std::fs::read(format!("/proc/{runtime}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        cmdline.contains("workerd")
            && cmdline.split('\0').any(|argument| argument.ends_with("=entry=127.0.0.1:0"))
    })
}

/// A process's memory, in bytes, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Resident now (`VmRSS`).
    pub resident: u64,
    /// The most it was resident since it started (`VmHWM`).
    pub peak: u64,
}

impl Memory {
    /// `pid`'s memory now.
    pub fn of(pid: u32) -> Option<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kib| kib * 1024)
        };
        Some(Self { resident: kib("VmRSS:")?, peak: kib("VmHWM:")? })
    }
}

/// `bytes` in MiB, one decimal, for reports.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

// The runtime's own entry of a `wrangler dev` Worker, behind wrangler's proxy.
//
// A request to `wrangler dev`'s port passes wrangler's proxy Worker (a `workerd` process of its
// own), then the runtime's entry Worker, then ours: 5 to 20 ms cold here (`docs/bench/index-cold.md`)
// that no deployed Worker pays, as Cloudflare's edge calls the Worker itself. The runtime that
// runs our Worker ([`worker_runtime`]) listens on its own loopback port,
// which wrangler prints nowhere: it is found among that process's listening sockets as the one
// answering our `/health` (which the restart has asked already: the probe warms nothing the
// measured request would not find warm). Asked there, a cold answer still passes the runtime's entry
// Worker, but not wrangler's proxy.

/// The base URL of the runtime's entry serving the Worker whose runtimes are `runtimes`, if the
/// Worker's own answers there.
pub async fn runtime_entry(runtimes: &[u32]) -> Option<String> {
    let runtime = worker_runtime(runtimes)?;
    let http = crate::http_client();
    for port in listening_ports(runtime) {
        let base = format!("http://127.0.0.1:{port}");
        let answer = http.get(format!("{base}/health")).timeout(Duration::from_secs(10)).send().await;
        let Ok(answer) = answer else { continue };
        let json = answer
            .headers()
            .get("content-type")
            .is_some_and(|value| value.to_str().is_ok_and(|value| value.starts_with("application/json")));
        if answer.status().as_u16() == 200 && json {
            return Some(base);
        }
    }
    None
}

/// The loopback TCP ports `pid` listens on (`ss -ltnp`).
fn listening_ports(pid: u32) -> Vec<u16> {
    let Ok(output) = Command::new("ss").args(["-ltnpH"]).output() else { return Vec::new() };
    let marker = format!("pid={pid},");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains(&marker))
        .filter_map(|line| line.split_whitespace().nth(3))
        .filter_map(|address| address.rsplit_once(':').and_then(|(_, port)| port.parse().ok()))
        .collect()
}

/// Bytes `pid`'s established TCP sockets have sent but their peers have not read yet, summed:
/// what the kernel holds for them (`ss`'s `Send-Q`), outside the process's resident memory.
pub fn unsent_bytes(pid: u32) -> u64 {
    let Ok(output) = Command::new("ss").args(["-tnpH", "state", "established"]).output() else { return 0 };
    let marker = format!("pid={pid},");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains(&marker))
        .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}
