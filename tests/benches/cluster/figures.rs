//! The figures of one configuration from its outcomes: rates, request→mined percentiles, and the
//! requests that did not end `mined`, by what they got.

use std::{collections::BTreeMap, time::Duration};

use crate::load::Outcome;

#[derive(Debug, Clone)]
pub(crate) struct Figures {
    pub(crate) requests: usize,
    /// Accepted answers per second: accepted ÷ (last accepted answer − first send).
    pub(crate) accepted_per_sec: f64,
    /// Mined relays per second: mined ÷ (last seen mined − first send).
    pub(crate) mined_per_sec: f64,
    /// Request → seen mined, nearest rank; `None` when nothing was mined.
    pub(crate) p50: Option<Duration>,
    pub(crate) p99: Option<Duration>,
    /// Requests that did not end `mined`: `HTTP <status>` for a refusal (`no answer` for
    /// none), the relay's last status for an accepted one (`unfinished: sent` if still open),
    /// with their counts.
    pub(crate) errors: BTreeMap<String, usize>,
    /// One message per refused status, as the daemon wrote it.
    pub(crate) messages: BTreeMap<String, String>,
    /// Blocks that hold the mined relays, and the most relays one of them holds.
    pub(crate) blocks: usize,
    pub(crate) most_in_a_block: usize,
    /// The bench's `GET /relay/:id` requests, and their rate over the row (first send to last
    /// look).
    pub(crate) looks: usize,
    pub(crate) looks_per_sec: f64,
    /// 503s of daemons holding no key, each followed by the request going to the next daemon.
    pub(crate) passed_on: usize,
    /// From the first send to the first accepted answer: what every row pays once before its
    /// keys send at their pace (the checks' round trips, the first requests all checked at once).
    pub(crate) first_accepted: Option<Duration>,
    /// From the first send to each daemon's last accepted answer, the earliest and the latest:
    /// a row ends with its slowest daemon, so their spread is time the others stood idle.
    pub(crate) daemons_done: Option<(Duration, Duration)>,
}

pub(crate) fn of(outcomes: &[Outcome]) -> Figures {
    let first_send = outcomes.iter().map(|outcome| outcome.sent).min().unwrap_or_default();
    let accepted: Vec<&Outcome> = outcomes.iter().filter(|outcome| outcome.accepted()).collect();
    let mined: Vec<&Outcome> = accepted.iter().copied().filter(|outcome| outcome.mined()).collect();
    let rate = |count: usize, last: Option<Duration>| {
        last.map_or(0.0, |last| count as f64 / (last - first_send).as_secs_f64().max(1e-9))
    };
    let accepted_per_sec = rate(accepted.len(), accepted.iter().map(|outcome| outcome.answered).max());
    let mined_per_sec = rate(mined.len(), mined.iter().filter_map(|outcome| outcome.ended).max());
    let mut latencies: Vec<Duration> =
        mined.iter().filter_map(|outcome| Some(outcome.ended? - outcome.sent)).collect();
    latencies.sort_unstable();
    let (mut errors, mut messages) = (BTreeMap::new(), BTreeMap::new());
    for outcome in outcomes.iter().filter(|outcome| !outcome.mined()) {
        let kind = match (&outcome.relay_id, outcome.status, outcome.final_status.as_deref()) {
            (None, 0, _) => "no answer".to_owned(),
            (None, status, _) => format!("HTTP {status}"),
            (Some(_), _, Some(status)) if outcome.ended.is_none() => format!("unfinished: {status}"),
            (Some(_), _, status) => status.unwrap_or("unknown").to_owned(),
        };
        if let Some(message) = &outcome.error {
            messages.entry(kind.clone()).or_insert_with(|| message.clone());
        }
        *errors.entry(kind).or_default() += 1;
    }
    let mut per_block: BTreeMap<u64, usize> = BTreeMap::new();
    for outcome in &mined {
        if let Some(block) = outcome.view.as_ref().and_then(|view| view["blockNumber"].as_u64()) {
            *per_block.entry(block).or_default() += 1;
        }
    }
    let looks = outcomes.iter().map(|outcome| outcome.looks).sum();
    let last_look = outcomes.iter().filter_map(|outcome| outcome.last_look).max();
    Figures {
        requests: outcomes.len(),
        accepted_per_sec,
        mined_per_sec,
        p50: percentile(&latencies, 50),
        p99: percentile(&latencies, 99),
        errors,
        messages,
        blocks: per_block.len(),
        most_in_a_block: per_block.values().copied().max().unwrap_or(0),
        looks,
        looks_per_sec: rate(looks, last_look),
        passed_on: outcomes.iter().map(|outcome| outcome.passed_on).sum(),
        first_accepted: accepted.iter().map(|outcome| outcome.answered - first_send).min(),
        daemons_done: daemons_done(&accepted, first_send),
    }
}

/// The earliest and the latest of the daemons' last accepted answers, from `first_send`.
fn daemons_done(accepted: &[&Outcome], first_send: Duration) -> Option<(Duration, Duration)> {
    let mut last: BTreeMap<usize, Duration> = BTreeMap::new();
    for outcome in accepted {
        let done = last.entry(outcome.daemon).or_default();
        *done = (*done).max(outcome.answered - first_send);
    }
    Some((*last.values().min()?, *last.values().max()?))
}

/// The nearest-rank `p`th percentile of sorted `values`.
fn percentile(values: &[Duration], p: usize) -> Option<Duration> {
    let rank = (values.len() * p).div_ceil(100).max(1);
    values.get(rank - 1).copied()
}
