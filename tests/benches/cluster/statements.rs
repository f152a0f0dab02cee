//! The PostgreSQL statements a row ran, for a diagnosis of where the server's CPU goes
//! (`BENCH_CLUSTER_PG_STATEMENTS`: a folder; the server must load pg_stat_statements, which the
//! test server does when started with
//! `KYA_POSTGRES_OPTIONS='-c shared_preload_libraries=pg_stat_statements'`).
//!
//! Written per row to `<row>.tsv`: each statement's calls, total execution and planning time
//! (ms; planning is counted when the server runs with `-c pg_stat_statements.track_planning=on`)
//! and rows, most time first. Counted from the burst's start to the end of its checks, as the
//! CPU is.

use kya_tests::relayer_fixture::TestStore;

/// The folder to write to, when the diagnosis is asked for.
fn folder() -> Option<std::path::PathBuf> {
    std::env::var_os("BENCH_CLUSTER_PG_STATEMENTS").map(std::path::PathBuf::from)
}

/// Forgets the statements counted so far (the migrations, the leases' settling).
pub(crate) fn reset(store: &TestStore) {
    let (Some(_), Some(database)) = (folder(), store.database()) else { return };
    database.value("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    database.value("SELECT pg_stat_statements_reset()");
}

/// Writes the statements counted since [`reset`] on this row's database.
pub(crate) fn write(store: &TestStore, row: &str) {
    let (Some(folder), Some(database)) = (folder(), store.database()) else { return };
    let table = database.value(
        "SELECT string_agg(format('%s\t%s\t%s\t%s\t%s', calls, round(total_exec_time::numeric, 1),
                                  round(total_plan_time::numeric, 1), rows,
                                  regexp_replace(query, '\\s+', ' ', 'g')), E'\\n' ORDER BY total_exec_time DESC)
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
    );
    std::fs::create_dir_all(&folder).expect("BENCH_CLUSTER_PG_STATEMENTS: a folder");
    std::fs::write(
        folder.join(format!("{row}.tsv")),
        format!("calls\texecuting ms\tplanning ms\trows\tstatement\n{table}\n"),
    )
    .expect("writing the statements");
}
