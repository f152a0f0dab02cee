//! Several rounds of the same rows (`BENCH_CLUSTER_ROUNDS`). One burst's accepted/s is the
//! daemons' pace over a second or two, and on these shared two-core machines the same
//! configuration measured in one run has differed by a quarter (the SQLite row on loopback:
//! 298 to 376 relays/s over three rounds), more than the distance between some targets and
//! their figures. So the configurations are measured one after another, round after round (a slower
//! minute of the machine falls on each alike), and each row of the report is the configuration's
//! median round by accepted/s; every round is listed with its own checks, so a median never
//! hides a round whose books were wrong.

use std::fmt::Write as _;

use crate::{Measured, report::verdict};

/// `rounds[r][c]`: round `r` of configuration `c`. The median round of each configuration
/// (the upper one of an even count), in the configurations' order.
pub(crate) fn medians(rounds: Vec<Vec<Measured>>) -> Vec<Measured> {
    let configurations = rounds.first().map_or(0, Vec::len);
    let mut by_configuration: Vec<Vec<Measured>> = (0..configurations).map(|_| Vec::new()).collect();
    for round in rounds {
        for (configuration, row) in round.into_iter().enumerate() {
            by_configuration[configuration].push(row);
        }
    }
    by_configuration
        .into_iter()
        .map(|mut measured| {
            measured.sort_by(|a, b| a.figures.accepted_per_sec.total_cmp(&b.figures.accepted_per_sec));
            let middle = measured.len() / 2;
            measured.swap_remove(middle)
        })
        .collect()
}

/// The table of every round: per configuration, each round's accepted/s, mined/s and checks.
pub(crate) fn table(rounds: &[Vec<Measured>]) -> String {
    let mut out = format!(
        "\n### Every round\n\n\
         The rows above are each configuration's median of {} rounds by accepted/s; the rounds ran \
         one configuration after another, round after round.\n\n\
         | RPC round trip | store | daemons | keys | round | accepted/s | mined/s | checks |\n\
         |---:|---|---:|---:|---:|---:|---:|---|\n",
        rounds.len()
    );
    let configurations = rounds.first().map_or(0, Vec::len);
    for configuration in 0..configurations {
        for (round, rows) in rounds.iter().enumerate() {
            let row = &rows[configuration];
            let c = &row.configuration;
            writeln!(
                out,
                "| {} ms | {} | {} | {} | {} | {:.1} | {:.1} | {} |",
                c.rpc_delay.as_millis(),
                c.store(),
                c.daemons,
                c.keys,
                round + 1,
                row.figures.accepted_per_sec,
                row.figures.mined_per_sec,
                verdict(&row.checks)
            )
            .expect("writing to a String");
        }
    }
    out
}
