//! The report of one size, in Markdown, and the figures it needs beside the measurements: the
//! machine's load, and the index's size on disk.

use std::fmt::Write as _;

use crate::{Measured, timing::ms};

/// The machine's load averages when a size started (`/proc/loadavg`): the cores are shared.
pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The commit measured (`git rev-parse --short HEAD`), marked when the work tree differs from it.
pub(crate) fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(kya_tests::repo_root())
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let head = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{head} with uncommitted changes"),
        _ => head,
    }
}

pub(crate) fn render(m: &Measured) -> String {
    let agents = m.agents;
    let mut out = format!(
        "# Registry index at {agents} agents\n\n\
         Measured at commit `{}` by `cargo bench -p kya-tests --bench index` (tests/benches/index/) with \
         `BENCH_INDEX_AGENTS={agents}`: anvil with the registry seeded by `seed_bulk` ({:.0?}), \
         then 65 empty blocks (the first fill's re-scanned window holds no seeding logs), the \
         Worker under `wrangler dev` with local D1, behind a JSON-RPC proxy that counts its \
         requests. Load averages at the start: {} (2 shared cores); the whole size took {:.0} \
         minutes. The cost model built on these figures is \
         [docs/index-cost.md](../index-cost.md).\n\n\
         **CPU** is the on-CPU time the kernel accounts to the main thread of the workerd process \
         that runs the Worker (its `schedstat`), before and after the requests, after their \
         `wait_until` work: see `tests/benches/index/cpu.rs`. That thread also runs local D1's \
         SQLite, KV and the Cache API, which on Cloudflare run elsewhere and are not the Worker's \
         CPU, so it is an upper bound of the Worker's own, and it grows with the rows D1 reads. \
         **Worker CPU** is the Worker's own: V8's sampling profiler through wrangler's DevTools \
         inspector, which samples the isolate only while it runs (JavaScript, wasm, the \
         bindings' glue, garbage collection; not SQLite), each sample counted until the next, at \
         most the sampler's tick (read from the profile's spacings): see `tests/worker_profile.rs`. Cloudflare's CPU limits \
         (10 ms on Free) apply to this one. Warm code: the isolate had answered the same request before (index), or read one agent \
         through the same RPC and decoding code (direct).\n",
        m.commit,
        m.seeding,
        m.load,
        m.took.as_secs_f64() / 60.0,
    );
    endpoints(&mut out, m);
    worker_cpu(&mut out, m);
    side_by_side(&mut out, m);
    indexer(&mut out, m);
    out
}

fn side_by_side(out: &mut String, m: &Measured) {
    out.push_str("\n## Side by side with Ponder\n\n");
    let Some(p) = &m.ponder else {
        out.push_str("Not run at this size (`BENCH_INDEX_PONDER=0`).\n");
        return;
    };
    write!(
        out,
        "Ponder 0.16 with embedded PGlite (`../shared/peer-ponder/`, installed by `npm ci` into \
         `target/peer-ponder/`) on the same chain, after the steady-state minutes above, through \
         a counting proxy of its own, which asks Ponder's `eth_call`s at the head: the peer \
         reads `getAgent` at each registration's block for fields set once at registration and \
         shown in none of the five answers, and anvil here keeps only its last 32 blocks' \
         states (`tests/benches/index/ponder.rs`, `side_by_side.rs`). Load averages when it \
         started: {} (2 shared cores).\n\n\
         ### The endpoints cold, each server restarted before each sample\n\n\
         Ours: the filled index's Worker (every answer reads D1), stopped and started again on \
         its own state directory, `/health` answered, then one request. Ponder: stopped and \
         started again on its PGlite directory, then one request once it has indexed the chain's \
         head again (its log's \"Indexed block\" for the head, and `/status` at it: on a restart \
         Ponder reverts its last 30 blocks and re-indexes them, while `/status` already names \
         the head). \
         Medians of {} per server and path; the other server stopped meanwhile. The ratio is ours \
         ÷ Ponder's (below 1: ours is faster), on the last byte. Ours is asked three times, after \
         restarts of their own: through `wrangler dev`'s port, whose proxy Worker (a `workerd` \
         process of its own) no deployed Worker has in front of it; at the runtime's own \
         entry behind that proxy (`tests/benches/index/entry.rs`), which still passes the \
         runtime's entry Worker, in a runtime wrangler starts with a DevTools inspector; and \
         direct: the same runtime, bindings and state directory started on a socket of the Worker's own \
         (Miniflare's direct sockets, `tests/benches/index/direct.rs`), as Cloudflare's edge \
         calls a deployed Worker, with no Worker of the tooling in front and no inspector.\n\n\
         | endpoint | ours cold, through wrangler's proxy | ours cold, at the runtime's entry | ours cold, direct | Ponder cold (restarted) | ratio through the proxy | ratio at the entry | ratio direct |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        p.load,
        crate::side_by_side::cold_samples(),
    )
    .expect("writing to a String");
    for row in &p.paths {
        let time = |cold: &crate::side_by_side::Cold| {
            if cold.status != 200 {
                format!("fails: {} after {}", cold.status, ms(cold.last_byte))
            } else if row.path.ends_with("/compliance") {
                format!("{} first byte, {} last", ms(cold.first_byte), ms(cold.last_byte))
            } else {
                ms(cold.last_byte)
            }
        };
        let ratio = |ours: &crate::side_by_side::Cold| {
            ours.last_byte.as_secs_f64() / row.ponder.last_byte.as_secs_f64()
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
            if row.path.starts_with('/') { format!("`{}`", row.path) } else { row.path.clone() },
            time(&row.ours),
            time(&row.ours_entry),
            time(&row.ours_direct),
            time(&row.ponder),
            ratio(&row.ours),
            ratio(&row.ours_entry),
            ratio(&row.ours_direct),
        )
        .expect("writing to a String");
    }
    let census = &p.census;
    writeln!(
        out,
        "\nA direct read of the chain at its head, block {}, counts {} agents (`nextAgentId() - 1`); \
         ours counted {} at block {}, Ponder {} at block {} (each one's first cold `/stats`).",
        census.head, census.chain, census.ours.0, census.ours.1, census.ponder.0, census.ponder.1,
    )
    .expect("writing to a String");
    if p.mismatches.is_empty() {
        out.push_str(
            "\nBoth answered 200 every time, and their answers agree: the block each names, the \
             totals of `/stats`, `/stats/detailed` and `/revenue/aggregate`, and each list's \
             length and first ids.\n",
        );
    } else {
        out.push_str("\nThe answers differ (first samples; ours names its block in `X-Block-Number`, Ponder in `X-Indexed-Block`):\n\n");
        for mismatch in &p.mismatches {
            writeln!(out, "- {mismatch}").expect("writing to a String");
        }
    }
    out.push_str(
        "\n### First fill\n\n\
         Wall time from the start (Ponder's: its build and start-up included, until `/status` \
         has indexed the chain's head, as after a restart; ours: the first run until `/health` says complete, runs back to \
         back) and CPU seconds of the whole process tree (`/proc`: user and system time of every \
         process and thread, children included: wrangler's proxy and the Worker's runtime, with \
         local D1's SQLite, but not wrangler's Node, which the benches' wrangler host shares among \
         its Workers; Ponder's node with PGlite), RPC requests through the counting proxy.\n\n\
         | indexer | wall time | CPU seconds | RPC requests (calls) |\n\
         |---|---:|---:|---:|\n",
    );
    for fill in &m.fills {
        writeln!(
            out,
            "| ours, runs of {} | {:.1} s | {:.1} s | {} ({}) |",
            fill.per_run,
            fill.wall.as_secs_f64(),
            fill.tree_cpu.as_secs_f64(),
            fill.rpc.0,
            fill.rpc.1,
        )
        .expect("writing to a String");
    }
    let fill = &p.ponder_fill;
    writeln!(
        out,
        "| Ponder | {:.1} s | {:.1} s | {} ({}) |",
        fill.wall.as_secs_f64(),
        fill.cpu.as_secs_f64(),
        fill.rpc.0,
        fill.rpc.1,
    )
    .expect("writing to a String");
}

fn endpoints(out: &mut String, m: &Measured) {
    out.push_str(
        "\n## The endpoints cold: index against direct\n\n\
         Index: every request reads D1 (`INDEX_ANSWER_TTL_SECS=0`, `MEMORY_CACHE_BYTES=0`), median \
         of 9, CPU the mean of the same 9, Worker CPU from the profiler in rounds (below). Direct: a Worker whose index never ran, so \
         it answers as today's direct path (`X-Index-Fallback`, after reading the index's state \
         row): its cold request reads the registry from the chain (the snapshot; the other \
         endpoints would then answer from it), each on a fresh Worker, median of 3 (1 past 10,000 \
         agents). `/agents/compliance` is \
         streamed from the index: first byte, then last.\n\n\
         | Endpoint | index: time | index: Worker CPU | index: CPU | direct: time | direct: CPU | direct: RPC requests (calls) | bytes |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for e in &m.endpoints {
        let time = |side: &crate::endpoints::Side| {
            if side.status != 200 {
                let why = side.error.as_deref().unwrap_or_default().replace('|', "\\|");
                return format!("fails: {} after {} ({why})", side.status, ms(side.last_byte));
            }
            if e.path.ends_with("/compliance") {
                format!("{} first byte, {} last", ms(side.first_byte), ms(side.last_byte))
            } else {
                ms(side.last_byte)
            }
        };
        let fallback = e.index.fallback.as_ref().map_or(String::new(), |why| format!(" (fallback: {why})"));
        writeln!(
            out,
            "| `{}` | {}{fallback} | {} | {} | {} | {} | {} ({}) | {} |",
            e.path,
            time(&e.index),
            ms(e.worker_cpu.median()),
            ms(e.index.cpu),
            time(&e.direct),
            ms(e.direct.cpu),
            e.direct.rpc.0,
            e.direct.rpc.1,
            e.index.bytes,
        )
        .expect("writing to a String");
    }
    let storage = &m.storage;
    writeln!(
        out,
        "\nThe index on disk after the first fill: {:.1} MB for {} rows ({:.0} bytes an agent; \
         the rows' text columns {:.0} bytes an agent).",
        storage.file_bytes as f64 / 1e6,
        storage.rows,
        storage.file_bytes as f64 / m.agents as f64,
        storage.text_bytes as f64 / m.agents as f64,
    )
    .expect("writing to a String");
}

fn worker_cpu(out: &mut String, m: &Measured) {
    let Some(first) = m.endpoints.first() else { return };
    let beside = first.reference_cpu.is_some();
    let reference = crate::reference::AGENTS;
    out.push_str(&format!(
        "\n### The endpoints' Worker CPU, in rounds\n\n\
         V8's profiler in {rounds} rounds of {requests} requests of each endpoint, one endpoint \
         after the other, the order rotated each round{beside_text} \
         (`tests/benches/index/worker_cpu.rs`): the median of the rounds' means per request, the \
         lowest and highest round, and, as means over every round, what the samples landed in: \
         the Worker's wasm, JavaScript (wasm-bindgen's glue, D1's binding), the garbage \
         collector, and `(program)`, the runtime's native work while the isolate is entered.{paired_text}\n\n\
         | Endpoint | Worker CPU | rounds | wasm | JavaScript | GC | (program) |{reference_head}\n\
         |---|---:|---:|---:|---:|---:|---:|{reference_rule}\n",
        rounds = first.worker_cpu.rounds.len(),
        requests = first.worker_cpu.requests(),
        beside_text = if beside {
            format!(
                ", and the same endpoint of a {reference}-agent registry (its own chain, seeded \
                 and filled alike: `reference.rs`) right after each, so that both sizes share \
                 the machine's moments"
            )
        } else {
            String::new()
        },
        paired_text = if beside {
            let rounds = first.worker_cpu.rounds.len();
            let (rare, chance) = kya_tests::worker_profile::costlier_by_chance_rarely(rounds);
            let rarity = if rare <= rounds {
                format!("of {rounds} rounds, {rare} or more by chance {:.1}% of the time", chance * 100.0)
            } else {
                format!("{rounds} rounds are too few for any count to be rare by chance")
            };
            format!(
                " Against {reference} agents: each round's mean at this size over the same round's \
                 at {reference}, their median and range, and the rounds in which this size cost \
                 more. With no difference between the sizes, about half the rounds cost more \
                 ({rarity})."
            )
        } else {
            String::new()
        },
        reference_head = if beside {
            format!(" at {reference} agents | ratio, round by round: median (range) | rounds costlier |")
        } else {
            String::new()
        },
        reference_rule = if beside { "---:|---:|---:|" } else { "" },
    ));
    for e in &m.endpoints {
        let cpu = &e.worker_cpu;
        let (low, high) = cpu.range();
        let parts: Vec<String> =
            crate::worker_cpu::Part::ALL.iter().map(|part| ms(cpu.part(*part))).collect();
        let compared = e.reference_cpu.as_ref().map_or(String::new(), |reference| {
            let paired = crate::worker_cpu::Paired::new(cpu, reference);
            let (median, low, high) = paired.median_and_range();
            format!(
                " {} (`{}`) | {median:.2} ({low:.2} to {high:.2}) | {} of {} |",
                ms(reference.median()),
                reference.path,
                paired.costlier(),
                paired.ratios.len()
            )
        });
        writeln!(
            out,
            "| `{}` | {} | {} to {} | {} |{compared}",
            e.path,
            ms(cpu.median()),
            ms(low),
            ms(high),
            parts.join(" | "),
        )
        .expect("writing to a String");
    }
}

fn indexer(out: &mut String, m: &Measured) {
    out.push_str(
        "\n## The indexer\n\n\
         ### First fill\n\n\
         Runs driven back to back through `/__scheduled` (a Cron Trigger runs one a minute: the \
         minutes column is what the fill takes in production). Per run: median wall time, median \
         and most CPU, and the median and most Worker CPU of one run in ten (profiled; a fill of one run: that run, which also compiles the code in a fresh isolate).\n\n\
         | `INDEX_AGENTS_PER_RUN` | runs | wall time here | minutes in production | per run: wall | per run: Worker CPU (most) | per run: CPU (most) | RPC requests (calls) in all |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for fill in &m.fills {
        writeln!(
            out,
            "| {} | {} | {:.1} s | {} | {} | {} ({}) | {} ({}) | {} ({}) |",
            fill.per_run,
            fill.runs,
            fill.wall.as_secs_f64(),
            fill.runs,
            ms(fill.run_wall),
            ms(fill.run_worker_cpu),
            ms(fill.run_worker_cpu_max),
            ms(fill.run_cpu),
            ms(fill.run_cpu_max),
            fill.rpc.0,
            fill.rpc.1,
        )
        .expect("writing to a String");
    }
    out.push_str(
        "\n### Steady state\n\n\
         Each run follows a simulated minute of Base: the writes (attestations, every tenth a \
         revenue report, to distinct agents), then 30 empty blocks 2 s apart. Medians of 5 runs. \
         Every run profiled (the CPU column includes the profiler's own work). RPC requests are \
         the run's subrequests to the provider; D1 is reached by 4 more (the state with the touches \
         of the window, lapsing attestations, the changed agents' rows, and one batch with the run's \
         outcome), by the code of `edge-api/src/index/run.rs`. Rows written: table rows counted \
         in the tables after the run, and D1's own count from the run's log line (`meta.rows_written`: \
         also the index entries the writes changed, the tallies and the change feed's batches, as \
         D1 bills them); per change, D1's count less the state row and the feed's batch, over \
         the changes.\n\n\
         | agents changed a minute | wall | Worker CPU (most) | CPU (most) | RPC requests (calls) | lag after the run (blocks) | table rows written: superseded + inserted + collected + state = total | D1 rows written (per change) | the last run's message |\n\
         |---:|---:|---:|---:|---:|---:|---|---:|---|\n",
    );
    for s in &m.steady {
        let r = &s.rows;
        writeln!(
            out,
            "| {} | {} | {} ({}) | {} ({}) | {} ({}) | {} | {} + {} + {} + {} = {} | {} ({:.1}) | {} |",
            s.changes,
            ms(s.wall),
            ms(s.worker_cpu),
            ms(s.worker_cpu_max),
            ms(s.cpu),
            ms(s.cpu_max),
            s.rpc.0,
            s.rpc.1,
            s.lag,
            r.superseded,
            r.inserted,
            r.collected,
            r.state,
            r.total(),
            r.d1,
            r.d1.saturating_sub(2) as f64 / s.changes.max(1) as f64,
            s.message,
        )
        .expect("writing to a String");
    }
    out.push_str(
        "\n### From a write to the answers\n\n\
         A registration, then a run at once (a Cron Trigger firing just after its block), then \
         `/api/v1/stats` until it counts the new agent from the index; while it does not, the \
         minutes go on (the same rate of other writes, a run after each). Median of 3 \
         registrations. In production the first run waits for the next Cron Trigger (up to 60 s), \
         each further run is a minute, and a cached answer may be `INDEX_ANSWER_TTL_SECS` (30 s) \
         old: at most 60 s × runs + the last run's wall time + 30 s.\n\n\
         | agents changed a minute | runs until shown | wall time here | at most in production | fallback seen meanwhile |\n\
         |---:|---:|---:|---:|---|\n",
    );
    for f in &m.freshness {
        let (runs, bound) = match f.runs {
            Some(runs) => (
                runs.to_string(),
                format!("{:.0} s", 60.0 * runs as f64 + 30.0 + f.wall.as_secs_f64() / runs as f64),
            ),
            None => ("not within 5".into(), "more than 5 minutes".into()),
        };
        writeln!(
            out,
            "| {} | {runs} | {} | {bound} | {} |",
            f.changes,
            ms(f.wall),
            f.fallback.as_deref().unwrap_or("none"),
        )
        .expect("writing to a String");
    }
}
