//! Where a row's CPU went: user and system time of the row's processes, read from `/proc` when
//! the burst starts and again after its checks (before the daemons stop): the daemons, anvil
//! (this bench's child), the PostgreSQL server the row's store is on (its postmaster and its
//! backends; a backend that exited meanwhile takes its time with it, but the daemons' pooled
//! connections live through the row), and this bench process itself (the load: signing, HTTP,
//! JSON, and the delay proxy's thread). Beside the wall time and the cores, it shows whether a row
//! was bound by the CPU or by waiting.

use std::time::{Duration, Instant};

/// Linux's `USER_HZ`: `/proc/<pid>/stat` counts CPU time in hundredths of a second on every
/// architecture Rust targets here.
const TICKS_PER_SEC: f64 = 100.0;

/// CPU seconds used so far, by part.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    daemons: f64,
    anvil: f64,
    postgres: f64,
    bench: f64,
    at: Instant,
}

/// CPU seconds used during a row, by part, over its wall time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    pub(crate) daemons: f64,
    pub(crate) anvil: f64,
    pub(crate) postgres: f64,
    pub(crate) bench: f64,
    pub(crate) wall: Duration,
}

impl Usage {
    pub(crate) fn total(&self) -> f64 {
        self.daemons + self.anvil + self.postgres + self.bench
    }

    /// The share of the machine's cores these processes kept busy.
    pub(crate) fn of_cores(&self) -> f64 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        self.total() / (self.wall.as_secs_f64().max(1e-9) * cores)
    }
}

/// Reads the parts' CPU time now: the daemons by pid, and the PostgreSQL server on `pg_port`
/// (none on SQLite).
pub(crate) fn sample(daemons: &[u32], pg_port: Option<u16>) -> Sample {
    let processes = processes();
    let me = std::process::id();
    let of = |pid: u32| processes.iter().find(|p| p.pid == pid).map_or(0.0, |p| p.seconds);
    let postmaster = pg_port.and_then(|port| {
        let setting = format!("port={port}");
        processes.iter().find(|p| p.name == "postgres" && p.command.contains(&setting)).map(|p| p.pid)
    });
    let postgres = postmaster.map_or(0.0, |postmaster| {
        processes.iter().filter(|p| p.pid == postmaster || p.parent == postmaster).map(|p| p.seconds).sum()
    });
    Sample {
        daemons: daemons.iter().map(|pid| of(*pid)).sum(),
        anvil: processes.iter().filter(|p| p.name == "anvil" && p.parent == me).map(|p| p.seconds).sum(),
        postgres,
        bench: of(me),
        at: Instant::now(),
    }
}

/// What was used between two samples.
pub(crate) fn between(start: &Sample, end: &Sample) -> Usage {
    Usage {
        daemons: end.daemons - start.daemons,
        anvil: end.anvil - start.anvil,
        postgres: end.postgres - start.postgres,
        bench: end.bench - start.bench,
        wall: end.at - start.at,
    }
}

struct Process {
    pid: u32,
    parent: u32,
    name: String,
    command: String,
    seconds: f64,
}

/// Every process `/proc` shows with its parent, name, command line and CPU seconds (user +
/// system, its own threads included).
fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (name) state ppid …`: the name may hold spaces and parentheses.
            let (head, rest) = stat.rsplit_once(") ")?;
            let name = head.split_once(" (")?.1.to_owned();
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // After the name: state is field 3, ppid 4, utime 14, stime 15 (1-based, `man proc`).
            let parent = fields.get(1)?.parse().ok()?;
            let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            let command = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ");
            Some(Process { pid, parent, name, command, seconds: ticks / TICKS_PER_SEC })
        })
        .collect()
}
