//! The Worker's CPU time under `wrangler dev`: the on-CPU time the kernel accounts to the main
//! thread of the workerd process that runs the Worker (its `schedstat`, nanoseconds), read
//! before and after a batch of requests and divided by their number.
//!
//! `wrangler dev` runs two workerd processes: its own proxy, which owns the public port, and the
//! runtime of the Worker, the one started with `--inspector-addr`; only the second is counted,
//! and of it the main thread, where the isolate runs JavaScript and wasm (V8's background
//! threads, which compile and collect garbage off the request, are left out). That thread also
//! runs local D1 (SQLite), KV and the Cache API, which on Cloudflare are other machines' work and
//! not the Worker's CPU: so these figures are an upper bound of the Worker's own CPU, and count
//! the rows D1 reads with it. The Worker's own CPU comes from V8's profiler beside it
//! (`kya_tests::worker_profile`). A first try with the profiler counted each sample as the
//! whole gap to the next one, which took the time the isolate waited (a 404 of about 3 ms showed
//! 27 ms) for work; capped at the sampler's tick, it does not. `perf stat` has no instruction
//! counter on these machines.

use std::time::Duration;

/// The workerd process running the Worker.
pub(crate) struct Meter {
    pid: u32,
}

impl Meter {
    /// Finds the Worker's own among its `runtimes` ([`kya_tests::edge_fixture::EdgeWorker::runtimes`]).
    pub(crate) fn attach(runtimes: &[u32]) -> Self {
        let pid = kya_tests::processes::worker_runtime(runtimes)
            .unwrap_or_else(|| panic!("no workerd runtime with an inspector among {runtimes:?}"));
        Self { pid }
    }

    /// On-CPU time of the runtime's main thread so far.
    pub(crate) fn now(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{0}/task/{0}/schedstat", self.pid))
            .expect("the runtime runs");
        let nanos = stat.split_whitespace().next().and_then(|ns| ns.parse().ok()).expect("schedstat");
        Duration::from_nanos(nanos)
    }

    /// [`Meter::now`] once the work a response leaves behind (`wait_until`: a rate-limit write
    /// to KV) has had time to run.
    pub(crate) async fn settled(&self) -> Duration {
        tokio::time::sleep(SETTLE).await;
        self.now()
    }
}

/// How long work after a response is waited for.
const SETTLE: Duration = Duration::from_millis(150);

/// CPU time (user and system) of `root` and every process below it so far, from `/proc`: each
/// one's `utime` + `stime`, plus `cutime` + `cstime`, the time of its children that ended and
/// were reaped (no longer in the tree, so counted once). Every thread of every process counts,
/// V8's background threads and SQLite's or PGlite's work included: a whole server's cost, for
/// comparing two servers, where [`Meter`] is the Worker's main thread alone.
pub(crate) fn process_tree(root: u32) -> Duration {
    let tree = std::iter::once(root).chain(kya_tests::processes::descendants(root));
    let ticks: u64 = tree.map(own_and_reaped_ticks).sum();
    Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second() as f64)
}

/// [`process_tree`] of each of a Worker's `runtimes` (wrangler's proxy and the Worker's own,
/// [`kya_tests::edge_fixture::EdgeWorker::runtimes`]), summed: the Worker's whole cost under
/// `wrangler dev` but for wrangler's Node, which the tests' wrangler host shares among its
/// Workers (and which a deployed Worker does not have).
pub(crate) fn runtimes(runtimes: &[u32]) -> Duration {
    runtimes.iter().map(|&runtime| process_tree(runtime)).sum()
}

/// `utime + stime + cutime + cstime` of `pid` (fields 14 to 17 of its `stat`), in clock ticks.
fn own_and_reaped_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    let Some((_, fields)) = stat.rsplit_once(')') else { return 0 };
    // After the name come the fields from the 3rd (state): utime is the 14th.
    fields.split_whitespace().skip(11).take(4).filter_map(|field| field.parse::<u64>().ok()).sum()
}

/// `getconf CLK_TCK`: the unit of `/proc`'s CPU times (100 on Linux in practice).
fn clock_ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|output| String::from_utf8_lossy(&output.stdout).trim().parse().ok())
            .unwrap_or(100)
    })
}
