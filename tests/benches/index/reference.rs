//! The 1,000-agent reference a larger size's endpoints are profiled beside (`worker_cpu.rs`):
//! a chain of its own seeded by `seed_bulk`, a Worker filled from it, answering as the measured
//! one does. Issue 29 asks that no endpoint but the list of every agent costs more Worker CPU
//! at 100,000 agents than at 1,000; measured an hour apart, the two sizes' figures differ by
//! the machine's drift as much as by the code, so the comparison is made within one run.

use kya_tests::{edge_fixture::EdgeWorker, worker_profile::Profiler};

use crate::{Setup, indexer};

/// The reference's size.
pub(crate) const AGENTS: u64 = 1000;

pub(crate) struct Reference {
    /// Its chain and proxy, kept for as long as its Worker reads them.
    _setup: Setup,
    pub(crate) worker: EdgeWorker,
    pub(crate) profiler: Profiler,
}

impl Reference {
    /// Seeds, starts and fills the reference (about half a minute).
    pub(crate) async fn start() -> Self {
        let setup = crate::seeded_setup(AGENTS).await;
        let worker = crate::uncached_worker(&setup).await;
        let mut profiler = Profiler::attach(worker.inspector_port()).await;
        indexer::fill(&setup, &worker, &mut profiler, AGENTS, crate::kya_edge_defaults::AGENTS_PER_RUN).await;
        Self { _setup: setup, worker, profiler }
    }
}
