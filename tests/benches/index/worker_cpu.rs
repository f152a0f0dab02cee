//! The endpoints' Worker CPU per request, from V8's profiler (`kya_tests::worker_profile`), in
//! rounds: each round profiles [`REQUESTS_PER_ROUND`] requests of every path, one path after
//! the other in an order rotated each round, and of every Worker measured (a size, and the
//! 1,000-agent reference beside it: `reference.rs`) path by path, so neither the machine's load
//! nor what the request before left in the isolate's heap falls on one path or one size only.
//! A path's figure is the median of its rounds' means.
//!
//! Why rounds: one block of requests per path, in a fixed order, is what this benchmark did
//! until `d455603`, and its page 3 at 100,000 agents read 1.13 ms against 0.76 at 1,000,
//! measured an hour apart. Profiled again in rounds (8 of 20 requests), that page read 0.68
//! against 0.73, and one path's rounds spread by up to a factor of 3. Most of that spread was
//! the profile's reading, not the Worker: a sample counted up to the median spacing, which in
//! about one profile in four was a gap between requests, not the sampler's tick
//! (`kya_tests::worker_profile`, now capped at the tick). The rest is the machine's, so sizes
//! are compared only within one run, round by round.

use std::{collections::BTreeMap, time::Duration};

use kya_tests::{
    edge_fixture::{EdgeWorker, fresh_ip},
    worker_profile::Profiler,
};

use crate::{
    endpoints,
    reference::{self, Reference},
    timing,
};

/// Rounds, and requests of each path a round (`BENCH_INDEX_PROFILE_ROUNDS`,
/// `BENCH_INDEX_PROFILE_REQUESTS`). A round's requests come from one client, within the rate
/// limit of 60 a minute. V8 samples the isolate every 0.2 to 0.5 ms here, so a round of 40
/// requests under a millisecond each holds 100 samples or more.
const ROUNDS: usize = 10;
const REQUESTS_PER_ROUND: usize = 40;

/// A Worker to profile and the paths asked of it, in the same roles for every Worker (the same
/// endpoint, and `/agents`' near and last full pages at its size).
pub(crate) struct Target<'a> {
    /// Leads the names of the profiles kept (`KYA_PROFILE_DIR`): `<label><path>-<round>`.
    pub(crate) label: String,
    pub(crate) worker: &'a EdgeWorker,
    pub(crate) profiler: &'a mut Profiler,
    pub(crate) paths: Vec<String>,
}

/// What a sample landed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    /// The Worker's Rust, compiled to wasm.
    Wasm,
    /// JavaScript: wasm-bindgen's glue, the bindings' (D1's `toJson`), the runtime's.
    JavaScript,
    /// V8's garbage collector.
    GarbageCollection,
    /// Native code run while the isolate is entered that V8 cannot name (the runtime's C++
    /// behind a binding or a `Response`). Not local D1's SQLite: at 100,000 agents
    /// `/agents/compliance` cost the runtime's thread 288 ms a request, most of it SQLite's
    /// reads, and this part 1.67 ms (`index-100000.md` at `3a678b6`).
    Program,
}

impl Part {
    fn of(function: &str) -> Self {
        if function.starts_with("(program)") {
            Self::Program
        } else if function.starts_with("(garbage collector)") {
            Self::GarbageCollection
        } else if function.ends_with("(wasm)") {
            Self::Wasm
        } else {
            Self::JavaScript
        }
    }

    pub(crate) const ALL: [Self; 4] = [Self::Wasm, Self::JavaScript, Self::GarbageCollection, Self::Program];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Wasm => "wasm",
            Self::JavaScript => "JavaScript",
            Self::GarbageCollection => "GC",
            Self::Program => "(program)",
        }
    }
}

/// One path's Worker CPU over every round.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathCpu {
    pub(crate) path: String,
    /// Per round, in the order measured: the mean per request.
    pub(crate) rounds: Vec<Duration>,
    requests: u32,
    pub(crate) samples: usize,
    by_part: BTreeMap<Part, Duration>,
    by_function: BTreeMap<String, Duration>,
}

impl PathCpu {
    /// The median of the rounds' means: the path's figure.
    pub(crate) fn median(&self) -> Duration {
        timing::median(self.rounds.clone())
    }

    /// Requests profiled in each round.
    pub(crate) fn requests(&self) -> u32 {
        self.requests / (self.rounds.len() as u32).max(1)
    }

    /// The lowest and highest round mean.
    pub(crate) fn range(&self) -> (Duration, Duration) {
        let low = self.rounds.iter().min().copied().unwrap_or_default();
        (low, self.rounds.iter().max().copied().unwrap_or_default())
    }

    /// `part`'s mean per request over every round.
    pub(crate) fn part(&self, part: Part) -> Duration {
        self.by_part.get(&part).copied().unwrap_or_default() / self.requests.max(1)
    }

    /// The `count` costliest functions, each with its mean per request.
    pub(crate) fn top(&self, count: usize) -> Vec<(&str, Duration)> {
        let mut functions: Vec<(&str, Duration)> = self
            .by_function
            .iter()
            .map(|(function, time)| (function.as_str(), *time / self.requests.max(1)))
            .collect();
        functions.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        functions.truncate(count);
        functions
    }
}

/// One path at two sizes, round by round: `cpu`'s round means over `reference`'s (the two were
/// profiled one right after the other in each round).
pub(crate) struct Paired {
    /// The rounds' ratios, sorted.
    pub(crate) ratios: Vec<f64>,
}

impl Paired {
    pub(crate) fn new(cpu: &PathCpu, reference: &PathCpu) -> Self {
        let mut ratios: Vec<f64> = cpu
            .rounds
            .iter()
            .zip(&reference.rounds)
            .filter(|(_, reference)| !reference.is_zero())
            .map(|(time, reference)| time.as_secs_f64() / reference.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        Self { ratios }
    }

    /// The median ratio, and the lowest and highest (NaN without rounds).
    pub(crate) fn median_and_range(&self) -> (f64, f64, f64) {
        let or_nan = |ratio: Option<&f64>| ratio.copied().unwrap_or(f64::NAN);
        let median = or_nan(self.ratios.get(self.ratios.len() / 2));
        (median, or_nan(self.ratios.first()), or_nan(self.ratios.last()))
    }

    /// The rounds in which `cpu` cost more than `reference`.
    pub(crate) fn costlier(&self) -> usize {
        self.ratios.iter().filter(|ratio| **ratio > 1.0).count()
    }
}

/// Profiles every path of every target in rotated rounds; per target, per path, its figures.
pub(crate) async fn measure(targets: &mut [Target<'_>]) -> Vec<Vec<PathCpu>> {
    let number = |name: &str, default: usize| -> usize {
        std::env::var(name).ok().map_or(default, |value| value.trim().parse().expect(name))
    };
    let rounds = number("BENCH_INDEX_PROFILE_ROUNDS", ROUNDS);
    let requests = number("BENCH_INDEX_PROFILE_REQUESTS", REQUESTS_PER_ROUND);
    let http = kya_tests::http_client();
    let paths = targets.first().map_or(0, |target| target.paths.len());
    assert!(targets.iter().all(|target| target.paths.len() == paths), "the same roles for every Worker");
    let mut measured: Vec<Vec<PathCpu>> = targets
        .iter()
        .map(|target| {
            target.paths.iter().map(|path| PathCpu { path: path.clone(), ..PathCpu::default() }).collect()
        })
        .collect();
    for round in 0..rounds {
        for offset in 0..paths {
            let index = (round + offset) % paths;
            for (target, measured) in targets.iter_mut().zip(measured.iter_mut()) {
                let path = &target.paths[index];
                let base = &target.worker.base;
                let ip = fresh_ip();
                // Unprofiled: the isolate has answered this path before the profiled requests.
                let warm = timing::get(&http, base, path, &ip).await;
                assert_eq!(warm.status, 200, "{path}: {}", String::from_utf8_lossy(&warm.body));
                assert_eq!(warm.header("x-index-fallback"), None, "{path}: from the index");
                target.profiler.start().await;
                for _ in 0..requests {
                    timing::get(&http, base, path, &ip).await;
                }
                let profile = target.profiler.stop().await;
                let name: String =
                    path.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
                profile.keep(&format!("{}{name}-{round}", target.label));
                let cpu = &mut measured[index];
                cpu.requests += requests as u32;
                cpu.samples += profile.samples();
                cpu.rounds.push(profile.cpu() / requests as u32);
                for (function, time) in profile.by_function() {
                    *cpu.by_part.entry(Part::of(&function)).or_default() += time;
                    *cpu.by_function.entry(function).or_default() += time;
                }
            }
        }
    }
    measured
}

/// The endpoints' (`endpoints::paths`) Worker CPU on `worker`, of `agents`, and on the
/// 1,000-agent reference in the same rounds when there is one.
pub(crate) async fn endpoints(
    worker: &EdgeWorker,
    profiler: &mut Profiler,
    agents: u64,
    reference: Option<&mut Reference>,
) -> (Vec<PathCpu>, Option<Vec<PathCpu>>) {
    let mut targets = vec![Target {
        label: format!("endpoint-{agents}"),
        worker,
        profiler,
        paths: endpoints::paths(agents),
    }];
    if let Some(reference) = reference {
        targets.push(Target {
            label: format!("endpoint-{}", reference::AGENTS),
            worker: &reference.worker,
            profiler: &mut reference.profiler,
            paths: endpoints::paths(reference::AGENTS),
        });
    }
    let mut measured = measure(&mut targets).await.into_iter();
    (measured.next().expect("the size's figures"), measured.next())
}
