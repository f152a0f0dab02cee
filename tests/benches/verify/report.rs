//! The verify benchmark's report, `docs/bench/verify.md`: the target's verdicts first, then the
//! warm and the cold tables.

use std::{fmt::Write as _, time::Duration};

use kya_tests::worker_profile::Profile;

use crate::{
    BLOCKS, COLD_PROFILED, COLD_TIMED, Cold, Kind, PER_BLOCK, REPEATS, Rpc, WARM_UP, Warm,
    split::Attribution, unix_now,
};

/// One kind's Worker CPU per request, one figure per profile: the isolate's whole, and the part
/// of it that was the nonce store's Durable Object (when the profiles name the wasm's functions).
struct Cpu {
    whole: Vec<Duration>,
    object: Option<Vec<Duration>>,
    /// The part of the Worker's own spent in its calls of the object's stub.
    stub: Option<Vec<Duration>>,
}

impl Cpu {
    fn of(profiles: &[Profile], requests: usize, attribution: &Attribution) -> Self {
        let whole = profiles.iter().map(|profile| profile.cpu() / requests as u32).collect();
        let per_request = |micros: u64| Duration::from_micros(micros) / requests as u32;
        let (object, stub) = if attribution.named() {
            let split: Vec<(u64, u64)> =
                profiles.iter().map(|profile| attribution.object_and_stub_micros(profile)).collect();
            (
                Some(split.iter().map(|(object, _)| per_request(*object)).collect()),
                Some(split.iter().map(|(_, stub)| per_request(*stub)).collect()),
            )
        } else {
            (None, None)
        };
        Self { whole, object, stub }
    }

    fn whole(&self) -> Duration {
        median(&self.whole)
    }

    /// The nonce store's part (median of the profiles).
    fn object(&self) -> Option<Duration> {
        self.object.as_deref().map(median)
    }

    /// The Worker's own: the whole less the nonce store's, profile by profile, then the median.
    fn own(&self) -> Duration {
        match &self.object {
            Some(object) => {
                let own: Vec<Duration> = self
                    .whole
                    .iter()
                    .zip(object)
                    .map(|(whole, object)| whole.saturating_sub(*object))
                    .collect();
                median(&own)
            }
            None => self.whole(),
        }
    }

    fn object_cell(&self) -> String {
        self.object().map_or_else(|| "n/a".into(), ms)
    }

    fn stub_cell(&self) -> String {
        self.stub.as_deref().map(median).map_or_else(|| "n/a".into(), ms)
    }
}

pub(crate) fn render(cold: &[Cold], warm: &[Warm], load: &str, took: Duration, registered: usize) -> String {
    let attribution = Attribution::learn(
        warm.iter()
            .flat_map(|figures| &figures.profiles)
            .chain(cold.iter().flat_map(|figures| &figures.profiles)),
    );
    let warm_cpu: Vec<(Kind, Cpu)> = warm
        .iter()
        .map(|figures| (figures.kind, Cpu::of(&figures.profiles, PER_BLOCK, &attribution)))
        .collect();
    let cpu = |kind: Kind| &warm_cpu.iter().find(|(measured, _)| *measured == kind).expect("measured").1;
    let warm_of = |kind: Kind| warm.iter().find(|figures| figures.kind == kind).expect("measured");
    let requests = |kind: Kind| mean_requests(&warm_of(kind).rpc);

    let mut out = format!(
        "# ERC-8128 verification against a KYA read\n\n\
         Measured by `cargo bench -p kya-tests --bench verify` (tests/benches/verify/) on {}, \
         {} (UTC); load averages at the start {load} (2 shared cores); the run took {:.0} s. \
         Every part is real on loopback: anvil with the registry and {registered} EOA agents that \
         registered themselves (compliant roots), the Worker under `wrangler dev` with its nonces \
         in the real Durable Object, behind a JSON-RPC proxy that counts round trips, and \
         requests signed by `kya_core::erc8128` (a POST with a JSON body and a query, a 60 s \
         window, a fresh nonce each), forwarded as a provider would. Requests sent again because \
         their connection closed before an answer (each as a new request of its kind): {}.\n\n\
         **Worker CPU** is the isolate's, from V8's sampling profiler through wrangler's DevTools \
         inspector (`tests/worker_profile.rs`; a sample every 100 µs while the isolate runs, each \
         counted until the next, at most the sampler's tick): JavaScript, wasm, the bindings' \
         glue, garbage collection and what runs synchronously inside them (the Durable Object's \
         SQLite storage is synchronous), not the runtime's own I/O; each profiled figure includes \
         the request's `wait_until` work. Under `wrangler dev` the nonce store's Durable Object \
         runs in the Worker's isolate, so its work is in the same profiles; on Cloudflare it is \
         the object's CPU, not under the Worker's limit. **Nonce store** is that part, found by \
         the wasm's function names (`tests/benches/verify/split.rs`; {}); **the Worker's own** is \
         the rest, and **the stub's call** the part of it in the Worker's call of the object's \
         stub: under `wrangler dev` the object lives in the same process, and the call that first \
         reaches an object creates it (its storage opened) in the Worker's samples, where on \
         Cloudflare the call is a subrequest to the object's own isolate. A loaded machine inflates every CPU figure (a sample taken while the thread \
         waits for a core still counts): compare the rows, not the absolute figures.\n\n",
        commit(),
        chrono::DateTime::from_timestamp(unix_now() as i64, 0).expect("a date").format("%Y-%m-%d %H:%M"),
        took.as_secs_f64(),
        crate::RESENT.load(std::sync::atomic::Ordering::SeqCst),
        if attribution.named() {
            "the Worker was built with `WASM_KEEP_NAMES=1`, as `scripts/bench.sh` builds it"
        } else {
            "n/a in this run: the Worker was built without `WASM_KEEP_NAMES=1`, which \
             `scripts/bench.sh` sets"
        },
    );

    let kya = cpu(Kind::KyaUncached);
    writeln!(
        out,
        "## Against the target\n\n\
         Target: a verification adds under 1 ms of Worker CPU and no RPC round trip for an EOA \
         over `/kya/:wallet` alone. Warm medians (the tables below); the CPU verdict is on the \
         Worker's own.\n\n\
         | Verification (warm) | Worker's own CPU added over uncached `/kya` | with the nonce store's | RPC round trips added over uncached `/kya` | over cached `/kya`: own CPU, RPC |\n\
         |---|---:|---:|---:|---:|"
    )
    .expect("writing to a String");
    for kind in [Kind::VerifySameSigner, Kind::VerifyNewSigner] {
        let own_added = difference(cpu(kind).own(), kya.own());
        let rpc_added = requests(kind) - requests(Kind::KyaUncached);
        writeln!(
            out,
            "| {} | {} ({}) | {} | {rpc_added:+.1} ({}) | {}, {:+.1} |",
            kind.name(),
            signed_ms(own_added),
            if own_added < 1e-3 { "met" } else { "not met" },
            signed_ms(difference(cpu(kind).whole(), kya.whole())),
            if rpc_added <= 0.0 { "met" } else { "not met" },
            signed_ms(difference(cpu(kind).own(), cpu(Kind::KyaCached).own())),
            requests(kind) - requests(Kind::KyaCached),
        )
        .expect("writing to a String");
    }
    writeln!(
        out,
        "\nAn uncached `/kya/:wallet` and a verification read the same record the same way (one \
         `getAgentByWallet` at the latest block, {} round trip(s) (calls) each); a verification \
         adds the body's parsing, the signature's checks and the nonce's claim, and skips the \
         cache's lookup and store. A cached `/kya` answer reads nothing ({}), so against it a \
         verification adds that one read: verifications are never cached (each nonce is new).\n\n\
         The nonce store's part of an accepted verification: {} for a signer whose object exists, \
         {} for a new signer (its table made), whose stub's call also took {} (its object created \
         in that call, {} for a signer whose object exists); were that call as cheap as for an existing \
         object, as a subrequest is on Cloudflare, a new signer's own CPU would add {} over the \
         uncached read. A request refused \
         `bad_signature` parses the body, checks the digest, recovers the signature and makes one \
         read (the keyid then asked as an ERC-1271 account), and claims no nonce: {} of the \
         Worker's own CPU. A `digest_mismatch`, refused before recovery with nothing read, {}; the \
         404 floor, {}.\n",
        round_trips(&warm_of(Kind::KyaUncached).rpc),
        round_trips(&warm_of(Kind::KyaCached).rpc),
        cpu(Kind::VerifySameSigner).object_cell(),
        cpu(Kind::VerifyNewSigner).object_cell(),
        cpu(Kind::VerifyNewSigner).stub_cell(),
        cpu(Kind::VerifySameSigner).stub_cell(),
        new_signer_without_creation(cpu(Kind::VerifyNewSigner), cpu(Kind::VerifySameSigner), kya),
        ms(cpu(Kind::VerifyBadSignature).own()),
        ms(cpu(Kind::VerifyDigestMismatch).own()),
        ms(cpu(Kind::NotFound).own()),
    )
    .expect("writing to a String");

    writeln!(
        out,
        "## Warm\n\n\
         One Worker, after {WARM_UP} requests of each kind. Time: median of {REPEATS} requests per \
         kind, interleaved round by round, to the answer's last byte. RPC: round trips (JSON-RPC \
         calls) of each request. CPU per request: the median of {BLOCKS} profiled blocks of \
         {PER_BLOCK} requests each, the kinds interleaved block by block (the whole's least and most \
         block in brackets).\n\n\
         | Request | Median time | RPC round trips (calls) | Worker CPU, whole | nonce store | the Worker's own | of which the stub's call |\n\
         |---|---:|---:|---:|---:|---:|---:|"
    )
    .expect("writing to a String");
    for figures in warm {
        let cpu = cpu(figures.kind);
        let (least, most) = (
            cpu.whole.iter().min().copied().unwrap_or_default(),
            cpu.whole.iter().max().copied().unwrap_or_default(),
        );
        writeln!(
            out,
            "| {} | {} | {} | {} ({} to {}) | {} | {} | {} |",
            figures.kind.name(),
            ms(median(&figures.times)),
            round_trips(&figures.rpc),
            ms(cpu.whole()),
            ms(least),
            ms(most),
            cpu.object_cell(),
            ms(cpu.own()),
            cpu.stub_cell(),
        )
        .expect("writing to a String");
    }

    writeln!(
        out,
        "\n## Cold\n\n\
         The first request of a Worker just started (its state folder new: the Cache API, KV and \
         the Durable Objects empty), after the fixture's start-up probe of `/health` (which reads \
         the latest block, so the isolate exists and has made one RPC request). Time and RPC: \
         {COLD_TIMED} Workers per kind, median time; CPU: {COLD_PROFILED} more Workers per kind \
         with the profiler running, median; it includes compiling the code each request runs \
         first.\n\n\
         | First request | Median time | RPC round trips (calls) | Worker CPU, whole | nonce store | the Worker's own | of which the stub's call |\n\
         |---|---:|---:|---:|---:|---:|---:|"
    )
    .expect("writing to a String");
    for figures in cold {
        let cpu = Cpu::of(&figures.profiles, 1, &attribution);
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            figures.kind.cold_name(),
            ms(median(&figures.times)),
            round_trips(&figures.rpc),
            ms(cpu.whole()),
            cpu.object_cell(),
            ms(cpu.own()),
            cpu.stub_cell(),
        )
        .expect("writing to a String");
    }
    out
}

/// A new signer's own CPU over the uncached read's, its stub's call counted as an existing
/// object's: what a verification would add without the local creation of the object.
fn new_signer_without_creation(new: &Cpu, same: &Cpu, kya: &Cpu) -> String {
    match (&new.stub, &same.stub) {
        (Some(new_stub), Some(same_stub)) => {
            let own = new.own().saturating_sub(median(new_stub)) + median(same_stub);
            signed_ms(difference(own, kya.own()))
        }
        _ => "n/a".into(),
    }
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// `a - b` in seconds.
fn difference(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() - b.as_secs_f64()
}

/// A difference of seconds as `+1.23 ms`.
fn signed_ms(seconds: f64) -> String {
    format!("{:+.2} ms", seconds * 1e3)
}

fn ms(time: Duration) -> String {
    format!("{:.2} ms", time.as_secs_f64() * 1e3)
}

/// `n (calls)` when every request made the same round trips, else the range.
fn round_trips(rpc: &[Rpc]) -> String {
    let (least, most) = (rpc.iter().min().expect("requests"), rpc.iter().max().expect("requests"));
    if least == most {
        format!("{} ({})", least.requests, least.calls)
    } else {
        format!("{} to {} ({} to {})", least.requests, most.requests, least.calls, most.calls)
    }
}

/// Mean RPC requests per request.
fn mean_requests(rpc: &[Rpc]) -> f64 {
    rpc.iter().map(|rpc| rpc.requests as f64).sum::<f64>() / rpc.len() as f64
}

/// The commit measured, and the files of the Worker's sources that differed from it.
fn commit() -> String {
    kya_tests::commit_measured(&["core", "edge-api", "wrangler.toml", "Cargo.lock"])
}
