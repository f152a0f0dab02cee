//! Prometheus metrics: relays accepted, retried and rejected by reason, stuck transactions
//! replaced and cancelled, webhook events delivered, failed and pending, the time from acceptance to mining (a histogram), budget, balance and
//! waiting gauges, rendered as the text exposition format (no registry crate needed for a
//! handful of series).

use crate::keys::timings::Phase;
use std::{
    collections::BTreeMap,
    fmt::Write,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

/// Upper bounds (seconds) of the accept-to-mined histogram's buckets.
const MINED_AFTER_BUCKETS: [u64; 9] = [1, 2, 5, 10, 30, 60, 120, 300, 600];

/// Counters kept since the process started.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    accepted: AtomicU64,
    prefiltered: AtomicU64,
    retried: AtomicU64,
    replaced: AtomicU64,
    cancelled: AtomicU64,
    webhooks_delivered: AtomicU64,
    webhook_attempts_failed: AtomicU64,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// Count per bucket of [`MINED_AFTER_BUCKETS`] (not cumulative), then the sum and count.
    mined_after: Mutex<([u64; MINED_AFTER_BUCKETS.len()], u64, u64)>,
}

/// How a per-key gauge reads its value off a [`KeyGauge`] (none: not shown for that key).
type KeyValue = fn(&KeyGauge) -> Option<u128>;

/// One key of the pool as the metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyGauge {
    /// The key's account.
    pub(crate) address: alloy::primitives::Address,
    /// Its balance in wei, if the node answered.
    pub(crate) balance_wei: Option<u128>,
    /// Whether this daemon holds the key's lease (sends on it).
    pub(crate) held: bool,
}

/// Point-in-time values read when the metrics are scraped.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gauges {
    /// Budget limit in wei.
    pub(crate) budget_limit_wei: u128,
    /// Budget used in wei (reservations at their worst case).
    pub(crate) budget_used_wei: u128,
    /// Outstanding reservations in wei.
    pub(crate) budget_pending_wei: u128,
    /// What may be spent before the next slice of the budget opens, in wei.
    pub(crate) budget_open_wei: u128,
    /// Every key, in pool order (`relayer_balance_wei` is the first's balance, what a relayer
    /// of one key showed).
    pub(crate) keys: Vec<KeyGauge>,
    /// Relays with the node for longer than the stuck threshold.
    pub(crate) waiting_too_long: usize,
    /// Webhook events not yet delivered (`None`: webhooks are off).
    pub(crate) webhooks_pending: Option<u64>,
    /// First sends timed on every key, and the seconds they spent in each phase (in
    /// [`Phase::ALL`]'s order), summed over the keys.
    pub(crate) sends: (u64, [f64; 4]),
}

impl Metrics {
    /// Counts an accepted relay.
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a relay refused by the per-IP pre-filter, in memory, without a store access.
    pub(crate) fn prefiltered(&self) {
        self.prefiltered.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a retry answered with the relay it repeats.
    pub(crate) fn retried(&self) {
        self.retried.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a stuck transaction sent again with higher fees.
    pub(crate) fn replaced(&self) {
        self.replaced.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a cancellation sent.
    pub(crate) fn cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a webhook event delivered (a 2xx).
    pub(crate) fn webhook_delivered(&self) {
        self.webhooks_delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failed webhook attempt (it is tried again).
    pub(crate) fn webhook_failed(&self) {
        self.webhook_attempts_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the seconds from a relay's acceptance to its mining.
    pub(crate) fn mined_after(&self, seconds: u64) {
        let mut histogram = self.mined_after.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bucket) = MINED_AFTER_BUCKETS.iter().position(|bound| seconds <= *bound) {
            histogram.0[bucket] += 1;
        }
        histogram.1 += seconds;
        histogram.2 += 1;
    }

    /// Counts a rejected relay under `reason`.
    pub(crate) fn rejected(&self, reason: &'static str) {
        let mut rejected = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
        *rejected.entry(reason).or_default() += 1;
    }

    /// The Prometheus text exposition.
    pub(crate) fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP relayer_relays_accepted_total Relays sent to the chain.");
        let _ = writeln!(out, "# TYPE relayer_relays_accepted_total counter");
        let _ = writeln!(out, "relayer_relays_accepted_total {}", self.accepted.load(Ordering::Relaxed));
        let counters = [
            ("relayer_relays_retried_total", "Retries answered with the relay they repeat.", &self.retried),
            (
                "relayer_prefiltered_total",
                "Relays refused by the per-IP limit from memory, before any store access.",
                &self.prefiltered,
            ),
            ("relayer_replacements_total", "Stuck transactions sent again with higher fees.", &self.replaced),
            ("relayer_cancellations_total", "Stuck relays whose nonce was cancelled.", &self.cancelled),
            (
                "relayer_webhooks_delivered_total",
                "Webhook events delivered (a 2xx answer).",
                &self.webhooks_delivered,
            ),
            (
                "relayer_webhook_attempts_failed_total",
                "Webhook delivery attempts that failed (tried again later).",
                &self.webhook_attempts_failed,
            ),
        ];
        for (name, help, counter) in counters {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", counter.load(Ordering::Relaxed));
        }
        let (buckets, sum, count) = *self.mined_after.lock().unwrap_or_else(|p| p.into_inner());
        let name = "relayer_accept_to_mined_seconds";
        let _ = writeln!(out, "# HELP {name} Seconds from a relay's acceptance to its mining.");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, in_bucket) in MINED_AFTER_BUCKETS.iter().zip(buckets) {
            cumulative += in_bucket;
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {count}");
        let _ = writeln!(out, "# HELP relayer_relays_rejected_total Relays refused, by reason.");
        let _ = writeln!(out, "# TYPE relayer_relays_rejected_total counter");
        let rejected = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
        for (reason, count) in rejected.iter() {
            let _ = writeln!(out, "relayer_relays_rejected_total{{reason=\"{reason}\"}} {count}");
        }
        let gauges_list = [
            ("relayer_budget_limit_wei", "Daily gas budget in wei.", Some(gauges.budget_limit_wei)),
            (
                "relayer_budget_used_wei",
                "Budget used in the current window, in wei (reservations at worst case).",
                Some(gauges.budget_used_wei),
            ),
            (
                "relayer_budget_pending_wei",
                "Reservations awaiting their receipt, in wei.",
                Some(gauges.budget_pending_wei),
            ),
            (
                "relayer_budget_open_wei",
                "What may be spent before the next slice of the budget opens, in wei (BUDGET_SLICES).",
                Some(gauges.budget_open_wei),
            ),
            (
                "relayer_balance_wei",
                "Relayer wallet balance in wei.",
                gauges.keys.first().and_then(|key| key.balance_wei),
            ),
            (
                "relayer_relays_waiting_too_long",
                "Relays with the node for longer than STUCK_AFTER_SECS.",
                u128::try_from(gauges.waiting_too_long).ok(),
            ),
            (
                "relayer_webhooks_pending",
                "Webhook events not yet delivered (in the outbox).",
                gauges.webhooks_pending.map(u128::from),
            ),
        ];
        for (name, help, value) in gauges_list {
            let Some(value) = value else { continue };
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {value}");
        }
        let (sends, seconds) = gauges.sends;
        let name = "relayer_send_seconds_total";
        let _ = writeln!(
            out,
            "# HELP {name} Seconds the keys' sends spent waiting for the key's lock, asking the nonce, recording and submitting."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (phase, spent) in Phase::ALL.iter().zip(seconds) {
            let _ = writeln!(out, "{name}{{phase=\"{}\"}} {spent}", phase.label());
        }
        let _ = writeln!(
            out,
            "# HELP relayer_sends_timed_total First sends timed by relayer_send_seconds_total."
        );
        let _ = writeln!(out, "# TYPE relayer_sends_timed_total counter");
        let _ = writeln!(out, "relayer_sends_timed_total {sends}");
        let keyed: [(&str, &str, KeyValue); 2] = [
            ("relayer_key_balance_wei", "Each relayer key's balance in wei.", |key| key.balance_wei),
            (
                "relayer_key_held",
                "1 for each key this daemon holds the lease of (sends on), else 0.",
                |key| Some(u128::from(key.held)),
            ),
        ];
        for (name, help, value) in keyed {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for key in &gauges.keys {
                if let Some(value) = value(key) {
                    let _ = writeln!(out, "{name}{{key=\"{}\"}} {value}", key.address.to_checksum(None));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_by_reason_and_gauges() {
        let metrics = Metrics::default();
        metrics.accepted();
        metrics.rejected("invalid_signature");
        metrics.rejected("invalid_signature");
        metrics.replaced();
        metrics.mined_after(1);
        metrics.mined_after(7);
        metrics.mined_after(5_000);
        let text = metrics.render(&Gauges {
            budget_limit_wei: 5,
            budget_used_wei: 3,
            budget_pending_wei: 1,
            budget_open_wei: 2,
            keys: vec![
                KeyGauge {
                    address: alloy::primitives::Address::repeat_byte(0xbb),
                    balance_wei: None,
                    held: false,
                },
                KeyGauge {
                    address: alloy::primitives::Address::repeat_byte(0xaa),
                    balance_wei: Some(9),
                    held: true,
                },
            ],
            waiting_too_long: 2,
            webhooks_pending: Some(4),
            sends: (3, [0.5, 0.0, 0.25, 1.5]),
        });
        let (a, b) =
            ("0xaAaAaAaaAaAaAaaAaAAAAAAAAaaaAaAaAaaAaaAa", "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB");
        assert!(text.contains(&format!("relayer_key_balance_wei{{key=\"{a}\"}} 9\n")), "{text}");
        assert!(!text.contains(&format!("relayer_key_balance_wei{{key=\"{b}\"}}")), "unread: not shown");
        assert!(text.contains(&format!("relayer_key_held{{key=\"{a}\"}} 1\n")), "{text}");
        assert!(text.contains(&format!("relayer_key_held{{key=\"{b}\"}} 0\n")), "{text}");
        assert!(text.contains("relayer_relays_accepted_total 1\n"));
        assert!(text.contains("relayer_relays_rejected_total{reason=\"invalid_signature\"} 2\n"));
        assert!(text.contains("relayer_budget_used_wei 3\n"));
        assert!(text.contains("relayer_budget_open_wei 2\n"));
        assert!(!text.contains("relayer_balance_wei"));
        assert!(text.contains("relayer_replacements_total 1\n"));
        assert!(text.contains("relayer_cancellations_total 0\n"));
        assert!(text.contains("relayer_relays_waiting_too_long 2\n"));
        assert!(text.contains("relayer_send_seconds_total{phase=\"recording\"} 0.25\n"), "{text}");
        assert!(text.contains("relayer_sends_timed_total 3\n"), "{text}");
        assert!(text.contains("relayer_webhooks_pending 4\n"), "{text}");
        assert!(text.contains("relayer_webhooks_delivered_total 0\n"), "{text}");
        assert!(text.contains("relayer_accept_to_mined_seconds_bucket{le=\"1\"} 1\n"), "{text}");
        assert!(text.contains("relayer_accept_to_mined_seconds_bucket{le=\"5\"} 1\n"), "{text}");
        assert!(text.contains("relayer_accept_to_mined_seconds_bucket{le=\"10\"} 2\n"), "{text}");
        assert!(text.contains("relayer_accept_to_mined_seconds_bucket{le=\"600\"} 2\n"), "{text}");
        assert!(text.contains("relayer_accept_to_mined_seconds_bucket{le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains("relayer_accept_to_mined_seconds_sum 5008\n"), "{text}");
    }
}
