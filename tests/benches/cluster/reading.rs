//! The report's reading: sentences computed from the rows, so that a rerun's text says what its
//! own figures say.

use std::{fmt::Write as _, time::Duration};

use crate::{
    Measured,
    chain::BLOCK_TIME_SECS,
    report::{describe, ms},
};

/// The reading, one section per RPC delay (the rows of each compared among themselves).
pub(crate) fn write(out: &mut String, rows: &[Measured]) {
    out.push_str("\n## Reading\n");
    let mut delays: Vec<Duration> = Vec::new();
    for row in rows {
        if !delays.contains(&row.configuration.rpc_delay) {
            delays.push(row.configuration.rpc_delay);
        }
    }
    for delay in delays {
        let group: Vec<&Measured> = rows.iter().filter(|row| row.configuration.rpc_delay == delay).collect();
        let rows = &group[..];
        let lines: Vec<String> = [
            best(rows),
            targets(rows),
            lane(delay),
            stores(rows),
            keys(rows),
            chain(rows),
            daemons(rows),
            cpu(rows),
            bounds(rows),
        ]
        .into_iter()
        .flatten()
        .collect();
        if delay.is_zero() {
            out.push_str("\n### The node on loopback (no RPC delay)\n\n");
        } else {
            writeln!(out, "\n### The node {} ms away (each RPC call's round trip)\n", delay.as_millis())
                .expect("writing to a String");
        }
        out.push_str(&lines.join("\n\n"));
        out.push('\n');
    }
}

fn find<'a>(rows: &[&'a Measured], store: &str, daemons: usize, keys: usize) -> Option<&'a Measured> {
    rows.iter().copied().find(|row| {
        let c = &row.configuration;
        c.store() == store && c.daemons == daemons && c.keys == keys
    })
}

/// What one key's lane can send with the node `delay` away: its sends are serialised (pick the
/// nonce, sign, record, submit under the key's lock), so at most one submit's round trip each.
fn lane(delay: Duration) -> Option<String> {
    (!delay.is_zero()).then(|| {
        format!(
            "A key's sends are serialised (pick the nonce, sign, record, submit, under the key's \
             lock), so one key sends at most one relay per submit round trip: {:.0} a second with \
             the node {} ms away. That is the bound several keys and daemons lift.",
            1.0 / delay.as_secs_f64(),
            delay.as_millis()
        )
    })
}

/// Where the CPU went in the targets' rows, and how busy the cores were.
fn cpu(rows: &[&Measured]) -> Option<String> {
    let lines: Vec<String> = [(1, 1), (4, 4)]
        .into_iter()
        .filter_map(|(daemons, keys)| {
            let row = find(rows, "postgres", daemons, keys)?;
            let u = &row.cpu;
            let per_relay = |seconds: f64| 1e3 * seconds / row.checks.accepted.max(1) as f64;
            Some(format!(
                "{}: {:.0}% of the cores busy; per accepted relay {:.1} ms of CPU in the daemons, \
                 {:.1} in anvil, {:.1} in PostgreSQL, {:.1} in the bench",
                describe(&row.configuration),
                100.0 * u.of_cores(),
                per_relay(u.daemons),
                per_relay(u.anvil),
                per_relay(u.postgres),
                per_relay(u.bench),
            ))
        })
        .collect();
    (!lines.is_empty())
        .then(|| format!("CPU from the burst's start to the end of its checks: {}.", lines.join("; ")))
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b.max(1e-9)
}

/// The row that mined the most among those whose checks pass.
fn best(rows: &[&Measured]) -> Option<String> {
    let best = rows
        .iter()
        .filter(|row| row.checks.ok())
        .max_by(|a, b| a.figures.mined_per_sec.total_cmp(&b.figures.mined_per_sec))?;
    Some(format!(
        "Of the rows whose checks pass, {} mined the most: {:.1} relays/s ({:.1} accepted/s).",
        describe(&best.configuration),
        best.figures.mined_per_sec,
        best.figures.accepted_per_sec,
    ))
}

/// The throughput targets: one daemon on PostgreSQL at least 0.8× one on SQLite, and four
/// daemons with four keys at least 3.5× one daemon with one key (on PostgreSQL).
fn targets(rows: &[&Measured]) -> Option<String> {
    let verdict = |met: bool| if met { "met" } else { "**not met**" };
    let mut lines = Vec::new();
    if let (Some(sqlite), Some(postgres)) = (find(rows, "sqlite", 1, 1), find(rows, "postgres", 1, 1)) {
        let store = ratio(postgres.figures.accepted_per_sec, sqlite.figures.accepted_per_sec);
        lines.push(format!(
            "one daemon on PostgreSQL accepted {store:.2}× what one on SQLite did (target 0.8×: {})",
            verdict(store >= 0.8)
        ));
    }
    if let (Some(one), Some(four)) = (find(rows, "postgres", 1, 1), find(rows, "postgres", 4, 4)) {
        let cluster = ratio(four.figures.accepted_per_sec, one.figures.accepted_per_sec);
        let mut line = format!(
            "four daemons with four keys accepted {cluster:.2}× one daemon with one key (target 3.5×: {})",
            verdict(cluster >= 3.5)
        );
        if four.configuration.rpc_delay.is_zero() && cluster < 3.5 {
            // What more daemons lift is a key's lane, bound by the node's round trip; with none,
            // every row shares the machine's cores, which more daemons do not add.
            line.push_str(&format!(
                " — with the node on loopback no key waits on the network, so a lane is not the \
                 bound: the daemons, anvil, PostgreSQL and the bench share this machine's {} \
                 cores ({:.0}% busy with four daemons, {:.0}% with one), and four daemons there add \
                 work, not cores",
                std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
                100.0 * four.cpu.of_cores(),
                100.0 * one.cpu.of_cores(),
            ));
        }
        lines.push(line);
    }
    (!lines.is_empty()).then(|| format!("Targets: {}.", lines.join("; ")))
}

/// SQLite against PostgreSQL, one daemon and one key.
fn stores(rows: &[&Measured]) -> Option<String> {
    let (sqlite, postgres) = (find(rows, "sqlite", 1, 1)?, find(rows, "postgres", 1, 1)?);
    Some(format!(
        "One daemon with one key accepted {:.1} relays/s on SQLite and {:.1} on PostgreSQL ({:.2}×): \
         every accepted relay is a few store transactions (rate limits, the reservation under the \
         budget lock, the send's record), each a few round trips to the server on a pooled \
         connection, where SQLite writes a local file.",
        sqlite.figures.accepted_per_sec,
        postgres.figures.accepted_per_sec,
        ratio(postgres.figures.accepted_per_sec, sqlite.figures.accepted_per_sec),
    ))
}

/// One daemon, 4 keys against 1.
fn keys(rows: &[&Measured]) -> Option<String> {
    let lines: Vec<String> = ["sqlite", "postgres"]
        .into_iter()
        .filter_map(|store| {
            let (one, four) = (find(rows, store, 1, 1)?, find(rows, store, 1, 4)?);
            Some(format!(
                "on {store} accepted/s {:.2}×, mined/s {:.2}×, p50 {} → {}",
                ratio(four.figures.accepted_per_sec, one.figures.accepted_per_sec),
                ratio(four.figures.mined_per_sec, one.figures.mined_per_sec),
                ms(one.figures.p50),
                ms(four.figures.p50),
            ))
        })
        .collect();
    (!lines.is_empty()).then(|| format!("One daemon with 4 keys instead of 1: {}.", lines.join("; ")))
}

/// What the chain carries, and what a burst of this size can show.
fn chain(rows: &[&Measured]) -> Option<String> {
    let fullest = rows.iter().max_by_key(|row| row.figures.most_in_a_block)?;
    let (used, limit) = fullest.checks.fullest_block_gas?;
    let share = used as f64 / limit.max(1) as f64;
    let blocks = rows.iter().map(|row| row.figures.blocks);
    let (fewest, most) = (blocks.clone().min()?, blocks.max()?);
    let capacity = if share >= 0.95 {
        format!(
            "with a block every {BLOCK_TIME_SECS} s the chain carries at most about {} \
             registrations a second, whatever the daemons do",
            fullest.figures.most_in_a_block
        )
    } else {
        format!(
            "no block was full (one holds about {:.0} registrations), so the daemons, not the \
             chain, set the pace",
            fullest.figures.most_in_a_block as f64 / share.max(1e-9)
        )
    };
    Some(format!(
        "The fullest block held {} relays and used {:.0}% of its gas limit: {capacity}. A burst of \
         {} relays was mined in {fewest} to {most} blocks, so mined/s here is the burst's length \
         plus the wait for its last block, and accepted/s the daemons' pace over a second or two, \
         not steady rates; a larger `BENCH_CLUSTER_RELAYS` measures longer bursts.",
        fullest.figures.most_in_a_block,
        100.0 * share,
        fullest.figures.requests,
    ))
}

/// The rows with several daemons: leased keys, or what sharing keys without leases did.
fn daemons(rows: &[&Measured]) -> Option<String> {
    let multi: Vec<&Measured> = rows.iter().copied().filter(|row| row.configuration.daemons > 1).collect();
    if multi.is_empty() {
        return None;
    }
    let pace = |keys: usize| {
        let figures: Vec<String> = [1, 2, 4]
            .into_iter()
            .filter_map(|daemons| find(rows, "postgres", daemons, keys))
            .map(|row| format!("{:.1}", row.figures.accepted_per_sec))
            .collect();
        figures.join(" / ")
    };
    let scaling = format!(
        "On PostgreSQL, 1 / 2 / 4 daemons accepted {} relays/s with one key and {} with 4.",
        pace(1),
        pace(4)
    );
    if multi.iter().any(|row| row.leased) {
        let standby: usize = multi.iter().map(|row| row.figures.passed_on).sum();
        return Some(format!(
            "{scaling} With several daemons the keys were leased (`/status` named different \
             holders, an even share each): each key had one sender at a time, so more daemons \
             add acceptance (checks, store writes) but not sending, which stays one nonce lane \
             per key. With more daemons than keys the extra daemons hold none, and accept all \
             the same: they hand their relays to the keys' holders, which send them \
             ({standby} answers were 503 `No relayer key is free …` in this run, each sent on to \
             the next daemon as a load balancer's retry would)."
        ));
    }
    let failing = multi.iter().filter(|row| !row.checks.ok()).count();
    let unfinished =
        multi.iter().any(|row| row.figures.errors.keys().any(|kind| kind.starts_with("unfinished")));
    let mut text = format!(
        "{scaling}\n\n**The rows with 2 and 4 daemons predate lane leases**: the daemon has no \
         `RELAYER_LEASE_SECS` yet and every daemon's `/status` named itself the holder of every \
         key, so every daemon sends on every key with nonces of its own count. They collide: a \
         second transaction at a nonce already in the node's pool is refused (`replacement \
         transaction underpriced`, answered 500 `RPC request failed`) and the daemon re-reads \
         the nonce (`relayer nonce already used`). {failing} of those {} rows fail a check. \
         Their figures show what sharing keys without leases does, not what the cluster will do \
         with them.",
        multi.len(),
    );
    if unfinished {
        text.push_str(
            " The relays still `sent` at the end lost their transaction to another daemon's at \
             the same nonce and wait for the reconciler, which marks such a relay `dropped` (its \
             request may be relayed again) once it is `RECONCILE_GRACE_SECS` (120 s) old, after \
             this run's patience (`BENCH_CLUSTER_SETTLE_SECS=200` shows it).",
        );
    }
    Some(text)
}

/// What bounds request→mined, and what the bench itself costs.
fn bounds(rows: &[&Measured]) -> Option<String> {
    let reads = rows.iter().map(|row| row.figures.looks_per_sec).fold(0.0, f64::max);
    Some(format!(
        "A block every {BLOCK_TIME_SECS} s bounds request→mined from below: a relay waits for the \
         next block (half a block on average), then for the daemon's follower to see its receipt \
         (it asks at each new head, which the daemon reads every 250 ms), then for the bench's next look. Those \
         looks are load on the same cores (up to {reads:.0} reads/s in a row, each answered from \
         the store); `BENCH_CLUSTER_POLL_MS` spaces them."
    ))
}
