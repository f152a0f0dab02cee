//! `docs/bench/relayer-cluster.md`: the method, the machine, the command, the table and the
//! details behind its checks and errors (the reading between them is `reading.rs`).

use std::{fmt::Write as _, time::Duration};

use crate::{
    Measured,
    chain::BLOCK_TIME_SECS,
    checks::Checks,
    plan::{Configuration, Plan},
};

/// The whole report.
pub(crate) fn render(
    plan: &Plan,
    machine: &str,
    command: &str,
    rows: &[Measured],
    every_round: Option<&str>,
) -> String {
    let mut out = format!(
        "# Relayer cluster: relays per second by daemons and keys\n\n\
         Measured by `cargo bench -p kya-tests --bench cluster` (tests/benches/cluster/) in one \
         run: one anvil mining a block every {BLOCK_TIME_SECS} s (interval mining, as \
         `--block-time {BLOCK_TIME_SECS}`) with the forwarder and the registry deployed, and per \
         row a fresh store (an SQLite file, or a new database on one PostgreSQL server for the \
         run) shared by every daemon of the row. The daemons are the release build of \
         `kya-relayer`, each with its own `RELAYER_ID` (`bench-1`, …) and the same \
         `RELAYER_KEYS` (keys of the row's own, funded; the signers hold no ETH), with the rate \
         limits, the day's budget and its shares raised so that none refuses the load, and \
         `RELAYER_LEASE_SECS=6`. The daemons reach anvil through a delay proxy on loopback \
         (`kya_tests::delay_proxy`) that delivers every byte half the row's RPC round trip late \
         each way, as a hosted provider some way off would answer (`BENCH_CLUSTER_RPC_DELAY_MS`; \
         0: anvil's own URL); the bench's reads and checks go to anvil directly.\n\n\
         Each row is a burst of {relays} `register` relays, each from a fresh signer (its own \
         agent wallet, EIP-712 signed by kya-core), at most {concurrency} in flight, request `n` \
         to daemon `n mod daemons`, from {clients} (named in `X-Forwarded-For` by the bench, \
         which the daemons trust as their load balancer: `TRUSTED_PROXIES=127.0.0.1/32`). Each accepted relay is then read with `GET /relay/:id` from \
         the daemon that took it every {poll} (at most {polls} reads in flight) until it ends \
         (or {settle} s after the last answer). **accepted/s** = accepted answers ÷ (last \
         accepted answer − first send); **mined/s** = mined relays ÷ (last seen mined − first \
         send); **p50/p99**: from sending the request to seeing it `mined`, over the mined \
         relays.\n\n\
         **Checks** (read from the chain after the row): *once*: the registry gained exactly one \
         agent per accepted relay, each accepted signer's wallet is registered, no refused one \
         is, and every accepted relay was seen `mined`; *nonces*: for every key, the nonces of \
         the mined relays' transactions are exactly 0 … its mined nonce − 1, and nothing waits \
         in the node's pool (pending nonce = mined nonce).\n\n{machine}\n\n\
         Rerun: `{command}`\n\n",
        relays = plan.relays,
        concurrency = plan.concurrency,
        clients = match plan.clients {
            None => "a client address of its own (`BENCH_CLUSTER_CLIENTS` unset: a crowd of agents, \
                     each counted and budgeted as its own client)"
                .to_owned(),
            Some(1) => "one client address for every request (`BENCH_CLUSTER_CLIENTS=1`: each \
                        check sums that client's whole window, every relay of the burst)"
                .to_owned(),
            Some(n) => format!("one of {n} client addresses, request `n` from client `n mod {n}`"),
        },
        poll = if plan.poll == kya_client::RELAY_POLL {
            format!("{} ms, as kya-client watches a relay (`RELAY_POLL`)", plan.poll.as_millis())
        } else {
            format!(
                "{} ms (`BENCH_CLUSTER_POLL_MS`; kya-client's `RELAY_POLL` is {} ms)",
                plan.poll.as_millis(),
                kya_client::RELAY_POLL.as_millis()
            )
        },
        polls = plan.polls_in_flight,
        settle = plan.settle.as_secs(),
    );
    table(&mut out, rows);
    if let Some(every_round) = every_round {
        out.push_str(every_round);
    }
    crate::reading::write(&mut out, rows);
    details(&mut out, rows);
    out
}

fn table(out: &mut String, rows: &[Measured]) {
    out.push_str(
        "| RPC round trip | store | daemons | keys | requests | accepted | mined | accepted/s | mined/s | p50 request→mined | p99 request→mined | cores busy | not mined, by status | checks |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    for row in rows {
        let f = &row.figures;
        let errors = if f.errors.is_empty() {
            "none".to_owned()
        } else {
            f.errors.iter().map(|(kind, count)| format!("{kind}: {count}")).collect::<Vec<_>>().join(", ")
        };
        writeln!(
            out,
            "| {} ms | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {:.0}% | {errors} | {} |",
            row.configuration.rpc_delay.as_millis(),
            row.configuration.store(),
            row.configuration.daemons,
            row.configuration.keys,
            f.requests,
            row.checks.accepted,
            row.checks.mined,
            f.accepted_per_sec,
            f.mined_per_sec,
            ms(f.p50),
            ms(f.p99),
            100.0 * row.cpu.of_cores(),
            verdict(&row.checks),
        )
        .expect("writing to a String");
    }
}

/// `once ✓, nonces ✓`, or what failed.
pub(crate) fn verdict(checks: &Checks) -> String {
    let once = if checks.exactly_once() { "once ✓".to_owned() } else { "once ✗".to_owned() };
    let bad = checks.keys.iter().filter(|key| !key.ok()).count();
    let nonces = if bad == 0 {
        "nonces ✓".to_owned()
    } else {
        format!("nonces ✗ ({bad} of {} keys)", checks.keys.len())
    };
    format!("{once}, {nonces}")
}

pub(crate) fn describe(configuration: &Configuration) -> String {
    let daemons = if configuration.daemons == 1 {
        "one daemon".to_owned()
    } else {
        format!("{} daemons", configuration.daemons)
    };
    let keys =
        if configuration.keys == 1 { "one key".to_owned() } else { format!("{} keys", configuration.keys) };
    format!("{} with {daemons} and {keys}", configuration.store())
}

/// Per row: the keys' nonces, the lanes' holders, the daemons' logs, the refusals' messages.
fn details(out: &mut String, rows: &[Measured]) {
    out.push_str("\n## Details\n");
    for row in rows {
        let c = &row.checks;
        writeln!(
            out,
            "\n### {}, the node {} ms away ({:.0} s)\n\n\
             - registry: {} agents gained, {} accepted, {} of them registered, {} refused but \
             registered, {} seen mined",
            describe(&row.configuration),
            row.configuration.rpc_delay.as_millis(),
            row.took.as_secs_f64(),
            c.registrations,
            c.accepted,
            c.accepted_registered,
            c.refused_registered,
            c.mined,
        )
        .expect("writing to a String");
        for (n, key) in c.keys.iter().enumerate() {
            writeln!(
                out,
                "- key {}: mined nonce {}, pending nonce {}, {} mined relays sent by it{}",
                n + 1,
                key.mined_nonce,
                key.pending_nonce,
                key.nonces.len(),
                if key.ok() { "" } else { " ✗" },
            )
            .expect("writing to a String");
        }
        let f = &row.figures;
        writeln!(
            out,
            "- chain: the mined relays are in {} blocks, at most {} in one{}; the bench read \
             the relays {} times ({:.0} reads/s); load average (1 min) at the row's end: {}",
            f.blocks,
            f.most_in_a_block,
            c.fullest_block_gas.map_or_else(String::new, |(used, limit)| format!(
                " (that block used {:.0}% of its gas limit)",
                100.0 * used as f64 / limit.max(1) as f64
            )),
            f.looks,
            f.looks_per_sec,
            row.load,
        )
        .expect("writing to a String");
        writeln!(out, "- lane holders before the burst (`/status`): {}", row.holders)
            .expect("writing to a String");
        if let (Some(first), Some((earliest, latest))) = (f.first_accepted, f.daemons_done) {
            writeln!(
                out,
                "- answers: the first accepted {} after the first send; the daemons' last accepted \
                 {} to {} after it",
                ms(Some(first)),
                ms(Some(earliest)),
                ms(Some(latest)),
            )
            .expect("writing to a String");
        }
        writeln!(
            out,
            "- the keys' sends (`relayer_send_seconds_total`, summed over the daemons): {}",
            row.sends.words()
        )
        .expect("writing to a String");
        let u = &row.cpu;
        writeln!(
            out,
            "- CPU from the burst's start to the end of its checks ({:.1} s): daemons {:.1} s, anvil \
             {:.1} s, PostgreSQL {:.1} s, the bench {:.1} s; {:.0}% of the cores",
            u.wall.as_secs_f64(),
            u.daemons,
            u.anvil,
            u.postgres,
            u.bench,
            100.0 * u.of_cores(),
        )
        .expect("writing to a String");
        if f.passed_on > 0 {
            writeln!(
                out,
                "- {} answers were 503 from a daemon holding no key; each such request went on to the next daemon",
                f.passed_on
            )
            .expect("writing to a String");
        }
        let logs = &row.logs;
        writeln!(
            out,
            "- daemons' logs: {} warnings, {} errors{}",
            logs.warnings,
            logs.errors,
            if logs.unclean_exits == 0 {
                "; every daemon exited cleanly on SIGTERM".to_owned()
            } else {
                format!("; {} daemons did not exit cleanly on SIGTERM", logs.unclean_exits)
            },
        )
        .expect("writing to a String");
        for (message, count) in &logs.top {
            writeln!(out, "  - {count}× `{message}`").expect("writing to a String");
        }
        for (kind, message) in &row.figures.messages {
            writeln!(out, "- {kind}, for example: `{}`", shorten(message)).expect("writing to a String");
        }
    }
}

fn shorten(text: &str) -> String {
    let text = text.replace('`', "'").replace('\n', " ");
    if text.chars().count() > 160 {
        format!("{}…", text.chars().take(160).collect::<String>())
    } else {
        text
    }
}

pub(crate) fn ms(time: Option<Duration>) -> String {
    time.map_or_else(|| "n/a".to_owned(), |time| format!("{:.0} ms", time.as_secs_f64() * 1e3))
}
