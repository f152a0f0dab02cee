//! The processes below a `wrangler dev`, read from `/proc`: the workerd that runs the Worker (its
//! Durable Objects included), for the benchmarks' CPU figures and the tests' memory figures.
//!
//! `wrangler dev` runs two workerd processes: its own proxy, which owns the public port, and the
//! runtime of the Worker, the one started with `--inspector-addr`.

use std::collections::HashMap;

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

/// The workerd running the Worker of the `wrangler dev` whose process is `wrangler_pid`.
pub fn worker_runtime(wrangler_pid: u32) -> Option<u32> {
    descendants(wrangler_pid).into_iter().find(|&child| {
        let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        cmdline.contains("workerd") && cmdline.contains("--inspector-addr")
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
